//! Several knowledge bases side by side in one store. With sled, the default KB is the data
//! directory itself (the layout of a single-KB install, so its data stays readable) and a KB
//! named `NAME` is its own sled database in `DATA_DIR/kbs/NAME`; with PostgreSQL every KB is
//! keyed by its name in the same tables. Either way no request for one KB ever touches
//! another's documents, proposals or audit log.
//!
//! A KB is opened on the first request that names it (the default one at once, unless the
//! catalog is opened for work on the store itself) and stays open (followed, when other
//! daemons share its store: see [`super::follow`]). Reads of a name that does not exist are
//! refused; writes create it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::RwLock;

use super::Kb;
use super::follow::{SyncReport, SyncState, follow};
pub use super::name::KbName;
use super::name::NAMED_DIR;
use super::reindex::{ReindexReport, reindex_at};
use super::store::Location;
use crate::config::{Settings, StoreBackend};
use crate::embed::Embedder;
use crate::error::{Error, Result};

pub use super::SharedKb;

/// Whether a request may create the KB it names: only ingest does, so a mistyped name in a
/// read or a decision is an error instead of a new empty KB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    Existing,
    OrCreate,
}

/// One slot per name. Opening rebuilds the in-memory indexes (slow on a big KB), so it holds
/// only its own slot's lock: requests for KBs already open never wait behind it.
type Slot = Arc<tokio::sync::Mutex<Option<SharedKb>>>;

pub struct Catalog {
    settings: Arc<Settings>,
    embedder: Arc<dyn Embedder>,
    slots: Mutex<HashMap<KbName, Slot>>,
    /// The followed KBs' sync state, by name.
    syncs: Mutex<Vec<(KbName, Arc<SyncState>)>>,
}

impl Catalog {
    /// Opens (creating if needed) the default KB of the configured store, so that a daemon
    /// refuses at its start a KB it could not serve; named KBs open on first use.
    pub fn open(settings: Arc<Settings>, embedder: Arc<dyn Embedder>) -> Result<Catalog> {
        let catalog = Catalog::unopened(settings, embedder);
        let name = KbName::default();
        let location = Location::of(&catalog.settings, &name);
        let kb = Arc::new(RwLock::new(Kb::open_at(catalog.settings.clone(), catalog.embedder.clone(), &location)?));
        catalog.follow(&name, &kb);
        catalog
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, Arc::new(tokio::sync::Mutex::new(Some(kb))));
        Ok(catalog)
    }

    /// Opens no KB until a request names one: for the work on the store itself
    /// ([`Catalog::reindex`], [`Catalog::migrate`]), which needs its KBs closed in this
    /// process, and which a KB embedded by another embedder needs before it can open.
    pub fn unopened(settings: Arc<Settings>, embedder: Arc<dyn Embedder>) -> Catalog {
        Catalog { settings, embedder, slots: Mutex::new(HashMap::new()), syncs: Mutex::new(Vec::new()) }
    }

    fn follow(&self, name: &KbName, kb: &SharedKb) {
        if let Some(state) = follow(kb, Duration::from_millis(self.settings.store.poll_ms)) {
            self.syncs.lock().unwrap_or_else(|e| e.into_inner()).push((name.clone(), state));
        }
    }

    /// How up to date each followed KB is with the shared store (empty for sled).
    pub fn sync_reports(&self) -> Vec<(KbName, SyncReport)> {
        self.syncs.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(n, s)| (n.clone(), s.report())).collect()
    }

    fn slot(&self, name: &KbName) -> Slot {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).entry(name.clone()).or_default().clone()
    }

    /// The KB called `name`, opened on first use. With [`Open::Existing`] a KB that does not
    /// exist is an error that lists the known names; with [`Open::OrCreate`] it is created.
    pub async fn get(&self, name: &KbName, open_as: Open) -> Result<SharedKb> {
        let slot = self.slot(name);
        let mut open = slot.lock().await;
        if let Some(kb) = open.as_ref() {
            return Ok(kb.clone());
        }
        let location = Location::of(&self.settings, name);
        if open_as == Open::Existing && !self.exists(name, &location).await? {
            return Err(self.unknown(name)?);
        }
        let (settings, embedder) = (self.settings.clone(), self.embedder.clone());
        let kb = blocking(name, move || Kb::open_at(settings, embedder, &location)).await?;
        let kb = Arc::new(RwLock::new(kb));
        self.follow(name, &kb);
        *open = Some(kb.clone());
        Ok(kb)
    }

    /// Re-embeds the existing KB `name` with this catalog's embedder (see
    /// [`super::reindex`]), which it keeps closed in this process meanwhile.
    pub async fn reindex(&self, name: &KbName) -> Result<ReindexReport> {
        let _closed = self.closed(name).await?;
        let location = Location::of(&self.settings, name);
        if !self.exists(name, &location).await? {
            return Err(self.unknown(name)?);
        }
        let embedder = self.embedder.clone();
        blocking(name, move || reindex_at(&location, embedder)).await
    }

    /// Copies every KB of this catalog's store into the store `to` configures (see
    /// [`migrate`]), keeping them all closed in this process meanwhile.
    pub async fn migrate(
        &self,
        to: Settings,
        progress: impl FnMut(&KbName, usize) + Send + 'static,
    ) -> Result<Vec<(KbName, usize)>> {
        let mut closed = Vec::new();
        for name in self.names()? {
            closed.push(self.closed(&name).await?);
        }
        let from = self.settings.clone();
        tokio::task::spawn_blocking(move || migrate(&from, &to, progress))
            .await
            .map_err(|e| Error::Internal(format!("migrating the store failed: {e}")))?
    }

    /// Holds KB `name` closed in this process while its store is worked on directly: sled
    /// lets one handle at a time open a store, and an open KB's indexes would not see the
    /// work.
    async fn closed(&self, name: &KbName) -> Result<tokio::sync::OwnedMutexGuard<Option<SharedKb>>> {
        let closed = self.slot(name).lock_owned().await;
        if closed.is_some() {
            return Err(Error::Conflict(format!(
                "knowledge base `{name}` is open in this process: stop the daemon serving it, then run this again"
            )));
        }
        Ok(closed)
    }

    async fn exists(&self, name: &KbName, location: &Location) -> Result<bool> {
        let probe = location.clone();
        blocking(name, move || probe.exists()).await
    }

    /// The error for a request naming a KB that does not exist.
    fn unknown(&self, name: &KbName) -> Result<Error> {
        let known = self.names()?.iter().map(KbName::to_string).collect();
        Ok(Error::UnknownKb { name: name.to_string(), known })
    }

    /// Every KB in the store, the default first, then by name.
    pub fn names(&self) -> Result<Vec<KbName>> {
        names(&self.settings)
    }

    /// Every KB open in this process, for flushing at shutdown.
    pub fn open_kbs(&self) -> Vec<SharedKb> {
        let slots: Vec<Slot> = self.slots.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        slots.iter().filter_map(|s| s.try_lock().ok().and_then(|kb| kb.as_ref().cloned())).collect()
    }
}

/// Runs the store work on KB `name` on a blocking thread.
async fn blocking<T: Send + 'static>(name: &KbName, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("work on knowledge base `{name}` failed: {e}")))?
}

/// Every KB of the configured store, the default first, then by name. Opens none of them.
pub fn names(settings: &Settings) -> Result<Vec<KbName>> {
    match settings.store.backend {
        StoreBackend::Sled => sled_names(&settings.data_dir),
        StoreBackend::Postgres => {
            let mut names = super::store::postgres_kb_names(&settings.store)?;
            names.retain(|n| !n.is_default());
            names.insert(0, KbName::default());
            Ok(names)
        }
    }
}

/// The settings of the store `to` names: a PostgreSQL connection string (a `postgres://` or
/// `postgresql://` URL, or libpq `key=value` pairs), else a sled data directory.
pub fn destination(settings: &Settings, to: &str) -> Settings {
    let mut destination = settings.clone();
    let postgres = to.starts_with("postgres://") || to.starts_with("postgresql://") || to.contains('=');
    if postgres {
        destination.store.backend = StoreBackend::Postgres;
        destination.store.url = to.to_string();
    } else {
        destination.store.backend = StoreBackend::Sled;
        destination.data_dir = PathBuf::from(to);
    }
    destination
}

/// Copies every KB of the store `from` configures into the one `to` configures (see
/// [`super::store::copy_kb`]), reporting entries copied per KB as it goes.
pub fn migrate(
    from: &Settings,
    to: &Settings,
    mut progress: impl FnMut(&KbName, usize),
) -> Result<Vec<(KbName, usize)>> {
    // However the directory is spelled ("./d/", an absolute path, a link to it).
    let place = |dir: &Path| std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir)).ok();
    let same = match (from.store.backend, to.store.backend) {
        (StoreBackend::Sled, StoreBackend::Sled) => place(&from.data_dir) == place(&to.data_dir),
        (StoreBackend::Postgres, StoreBackend::Postgres) => from.store.url == to.store.url,
        _ => false,
    };
    if same {
        return Err(Error::Invalid(
            "the destination is the configured store itself; name another one with --to".into(),
        ));
    }
    if !Location::of(from, &KbName::default()).exists()? {
        return Err(Error::Invalid(format!(
            "no knowledge base in {}: nothing to migrate",
            Location::of(from, &KbName::default())
        )));
    }
    // Every destination is checked before anything is copied: a refusal half-way would
    // leave a partial copy that the next attempt refuses in turn.
    let names = names(from)?;
    for name in &names {
        super::store::ensure_empty(&Location::of(to, name))?;
    }
    let mut copied = Vec::new();
    for name in names {
        let entries =
            super::store::copy_kb(&Location::of(from, &name), &Location::of(to, &name), |n| progress(&name, n))?;
        copied.push((name, entries));
    }
    Ok(copied)
}

/// The KBs in `data_dir`: reads the directory only.
fn sled_names(data_dir: &Path) -> Result<Vec<KbName>> {
    let root = data_dir.join(NAMED_DIR);
    let mut names = Vec::new();
    match std::fs::read_dir(&root) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(&root, e))?;
                let name = entry.file_name().to_str().and_then(|n| KbName::new(n).ok());
                if let Some(name) = name.filter(|n| !n.is_default() && entry.path().join("db").is_dir()) {
                    names.push(name);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&root, e)),
    }
    names.sort();
    names.insert(0, KbName::default());
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_directory_names() {
        assert!(KbName::new("papers_2024-v2").is_ok());
        for bad in ["", "../x", "a/b", "a b", ".", "é", &"x".repeat(65)] {
            assert!(KbName::new(bad).is_err(), "{bad:?}");
        }
        assert!(KbName::or_default(None).unwrap().is_default());
        assert!(serde_json::from_str::<KbName>("\"../etc\"").is_err());
    }

    #[tokio::test]
    async fn reads_never_create_and_writes_do() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::defaults();
        settings.data_dir = dir.path().to_path_buf();
        let settings = Arc::new(settings);
        let embedder = crate::embed::from_settings(&settings.embed, &crate::net::Remote::new()).unwrap();
        let catalog = Catalog::open(settings, embedder).unwrap();
        let papers = KbName::new("papers").unwrap();
        let err = catalog.get(&papers, Open::Existing).await.err().unwrap().to_string();
        assert!(err.contains("unknown knowledge base `papers`") && err.contains("known: default"), "{err}");
        assert!(!dir.path().join("kbs/papers").exists());
        let created = catalog.get(&papers, Open::OrCreate).await.unwrap();
        assert!(Arc::ptr_eq(&created, &catalog.get(&papers, Open::Existing).await.unwrap()));
        assert!(dir.path().join("kbs/papers/db").is_dir());
        assert_eq!(catalog.names().unwrap(), vec![KbName::default(), papers]);
        let default = catalog.get(&KbName::default(), Open::Existing).await.unwrap();
        assert!(!Arc::ptr_eq(&created, &default));
    }
}
