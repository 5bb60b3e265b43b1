//! Derived views of the KB's contents that queries read and any write makes stale: the PPR
//! graph ([`super::passage_graph`]) and the pages by topic ([`super::pages`]). Each is built
//! on first use after a write, saved with the indexes at the end of an ingest run, and read
//! back by the next open's first use while the store has not changed since it was built: a
//! restarted daemon's first query reads two files instead of walking every record.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::Kb;
use super::model::SharedBytes;
use super::saved::{self, SavedSnapshot};
use crate::error::Result;

/// A view of the KB that can be built from it and saved as bytes.
pub trait Snapshot: Sized {
    /// Its name in logs and the stem of its file.
    const NAME: &'static str;
    fn build_from(kb: &Kb) -> Self;
    /// Its bytes, with whatever of `kb`'s settings it was built under.
    fn encode(&self, kb: &Kb) -> Vec<u8>;
    /// The snapshot `encode` wrote, for `kb`'s settings; an error for bytes of another
    /// version or settings, or damaged ones.
    fn decode(bytes: SharedBytes, kb: &Kb) -> Result<Self>;
}

/// One snapshot of a KB: the current one, once used, and the saved file that holds it while
/// the store has not changed since.
pub struct Lazy<T> {
    current: Mutex<Option<Arc<T>>>,
    saved: Mutex<Option<SavedSnapshot>>,
}

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy { current: Mutex::new(None), saved: Mutex::new(None) }
    }
}

impl<T: Snapshot> Lazy<T> {
    /// The current snapshot: read from the save where it holds it, else built.
    pub fn get(&self, kb: &Kb, dir: &Path) -> Arc<T> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .get_or_insert_with(|| {
                let started = std::time::Instant::now();
                if let Some(read) = self.read(kb, dir) {
                    tracing::debug!(
                        ms = started.elapsed().as_millis() as u64,
                        snapshot = T::NAME,
                        "read the saved snapshot"
                    );
                    return Arc::new(read);
                }
                let built = T::build_from(kb);
                tracing::debug!(ms = started.elapsed().as_millis() as u64, snapshot = T::NAME, "built the snapshot");
                Arc::new(built)
            })
            .clone()
    }

    /// The saved snapshot, where one is current; `None` (with a warning, and forgotten)
    /// where its file is unusable.
    fn read(&self, kb: &Kb, dir: &Path) -> Option<T> {
        let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        match saved::read_snapshot(dir, saved.as_ref()?).and_then(|bytes| T::decode(Arc::new(bytes), kb)) {
            Ok(read) => Some(read),
            Err(e) => {
                tracing::warn!(snapshot = T::NAME, error = %e, "the saved snapshot is unusable; building it");
                *saved = None;
                None
            }
        }
    }

    /// Makes the snapshot stale: a write changed what it was built from.
    pub fn forget(&self) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// At open: the save's file, where it was built from the store's current change.
    pub fn adopt(&mut self, saved: Option<&SavedSnapshot>, change: u64) {
        *self.saved.get_mut().unwrap_or_else(|e| e.into_inner()) = saved.filter(|s| s.change == change).cloned();
    }

    /// Whether a save holds the current snapshot.
    pub fn is_saved(&self) -> bool {
        self.saved.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// The file the save of `generation`, current with store change `change`, names: the
    /// saved one as it is, or the snapshot used since written anew; `None` where there is
    /// no current snapshot.
    pub fn to_save(&self, kb: &Kb, dir: &Path, generation: u64, change: u64) -> Result<Option<SavedSnapshot>> {
        // Locked in `get`'s order.
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut saved = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        if saved.is_none()
            && let Some(current) = current
        {
            let name = format!("{}-{generation}", T::NAME);
            *saved = Some(saved::write_snapshot(dir, &name, &current.encode(kb), change)?);
        }
        Ok(saved.clone())
    }
}
