//! Following the writes of other daemons that share the store (PostgreSQL). Each commit there
//! records the KB keys it touched under a sequence number; a daemon applies the records those
//! keys hold now to its in-memory indexes, in one consistent read, through the same
//! [`Changes`] its own writes apply. Applying is idempotent (every touched record is set to
//! its stored state), so a change seen twice does no harm.
//!
//! A follower thread per open KB waits for the store's notifications (or `store.poll_ms`,
//! whichever comes first), checks the change log under the KB's read lock, and takes the write
//! lock only when there is something to apply. Writers catch up under the store's write lock
//! before staging (see `Kb::begin_write`), so a daemon always sees its own writes at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::model::{Chunk, ChunkId, DocKey, Document, Edge, NodeId};
use super::store::{Changed, ChangedRecords, Family};
use super::write::Changes;
use super::{Kb, SharedKb, packed};
use crate::error::{Error, Result};

/// How up to date a KB's memory is with its store, as the follower last saw it; read
/// without locks (the daemon's `health`).
#[derive(Debug, Default)]
pub struct SyncState {
    applied: AtomicU64,
    latest: AtomicU64,
    lag_ms: AtomicU64,
    checked_at_ms: AtomicU64,
}

/// A snapshot of [`SyncState`].
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SyncReport {
    /// The last change of the store's log this daemon applied.
    pub applied_change: u64,
    /// The newest change in the log at the last check.
    pub latest_change: u64,
    /// At the last check, how long the oldest change not yet applied had been committed
    /// (0: none was waiting).
    pub lag_ms: u64,
    /// Milliseconds since the last check.
    pub checked_ms_ago: u64,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl SyncState {
    pub fn report(&self) -> SyncReport {
        SyncReport {
            applied_change: self.applied.load(Ordering::Relaxed),
            latest_change: self.latest.load(Ordering::Relaxed),
            lag_ms: self.lag_ms.load(Ordering::Relaxed),
            checked_ms_ago: now_ms().saturating_sub(self.checked_at_ms.load(Ordering::Relaxed)),
        }
    }

    fn record(&self, applied: u64, latest: u64, lag: Duration) {
        self.applied.store(applied, Ordering::Relaxed);
        self.latest.store(latest, Ordering::Relaxed);
        self.lag_ms.store(lag.as_millis() as u64, Ordering::Relaxed);
        self.checked_at_ms.store(now_ms(), Ordering::Relaxed);
    }
}

impl Kb {
    /// Applies every change other processes committed since this KB last looked; `true` when
    /// there was one.
    pub fn catch_up(&mut self) -> Result<bool> {
        match self.store.changes_since(self.applied_change)? {
            Changed::Nothing => Ok(false),
            Changed::Everything { latest } => {
                tracing::warn!(
                    latest,
                    applied = self.applied_change,
                    "the change log was pruned past this daemon; reloading the KB"
                );
                let location = self.store.location().clone();
                *self = Kb::open_at(self.settings.clone(), self.embedder.clone(), &location)?;
                Ok(true)
            }
            Changed::Records { latest, records } => {
                let mut changes = self.changes_from(&records)?;
                changes.change = Some(latest);
                self.apply(changes)?;
                Ok(true)
            }
        }
    }

    /// The change this KB's memory is up to date with.
    pub fn applied_change(&self) -> u64 {
        self.applied_change
    }

    /// Every touched record leaves memory and, where it still exists, comes back as stored.
    fn changes_from(&self, records: &ChangedRecords) -> Result<Changes> {
        let vector = |family: Family, id: u64| {
            records.vector(family, id)?.ok_or_else(|| Error::Corrupt {
                key: format!("{family:?}/{id}"),
                message: "a record was written without its vector".into(),
            })
        };
        let mut changes = Changes::default();
        for (key, doc) in records.records::<Document>(Family::Doc)? {
            if let Some(old) = self.docs.get(key as DocKey) {
                changes.docs_removed.push(old.clone());
            }
            if let Some(doc) = doc {
                changes.docs_added.push((doc, records.vector(Family::SummaryVec, key)?));
            }
        }
        for (id, chunk) in records.records::<Chunk>(Family::Chunk)? {
            if self.chunks.contains(id as ChunkId) {
                changes.chunks_removed.push(id as ChunkId);
            }
            if let Some(chunk) = chunk {
                changes.chunks_added.push((chunk, vector(Family::ChunkVec, id)?));
            }
        }
        for (id, node) in records.nodes(|id| self.nodes.get(id).map(|n| n.chunks.as_slice()))? {
            if node.is_some() {
                changes.node_vectors.insert(id as NodeId, packed::Row::of(&vector(Family::NodeVec, id)?));
            }
            changes.nodes.insert(id as NodeId, node);
        }
        for (id, edge) in records.records::<Edge>(Family::Edge)? {
            if self.edges.contains(id) {
                changes.edges_removed.push(id);
            }
            if let Some(edge) = edge {
                if let Some(vector) = records.vector(Family::FactVec, id)? {
                    changes.fact_vectors.insert(id, packed::Row::of(&vector));
                }
                changes.edges_added.push(edge);
            }
        }
        Ok(changes)
    }
}

/// Starts the follower of `shared` when its store has other writers; it ends soon after the
/// KB is dropped. Returns the state `health` reports, `None` for a store only this process
/// writes.
pub fn follow(shared: &SharedKb, poll: Duration) -> Option<Arc<SyncState>> {
    let kb = shared.try_read().ok()?;
    let wake = kb.store().watch()?;
    let state = Arc::new(SyncState::default());
    state.record(kb.applied_change, kb.applied_change, Duration::ZERO);
    drop(kb);
    let (weak, followed) = (Arc::downgrade(shared), state.clone());
    let spawned =
        std::thread::Builder::new().name("a2rag-follow".into()).spawn(move || follow_loop(weak, wake, poll, &followed));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the change-log follower; other daemons' writes will not be seen");
        return None;
    }
    Some(state)
}

fn follow_loop(kb: Weak<tokio::sync::RwLock<Kb>>, wake: Receiver<()>, poll: Duration, state: &SyncState) {
    let mut listening = true;
    loop {
        if listening {
            match wake.recv_timeout(poll) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => listening = false,
            }
        } else {
            std::thread::sleep(poll);
        }
        let Some(shared) = kb.upgrade() else {
            return;
        };
        if let Err(e) = check(&shared, state) {
            tracing::warn!(error = %e, "could not follow the store's change log; retrying");
        }
    }
}

/// One look at the log: under the read lock, whether anything is waiting and since when;
/// under the write lock only if so.
fn check(shared: &SharedKb, state: &SyncState) -> Result<()> {
    let (applied, latest, lag) = {
        let kb = shared.blocking_read();
        let applied = kb.applied_change;
        let latest = kb.store().latest_change()?;
        let lag = if latest > applied { kb.store().waiting_since(applied)? } else { Duration::ZERO };
        (applied, latest, lag)
    };
    state.record(applied, latest, lag);
    if latest > applied {
        let mut kb = shared.blocking_write();
        kb.catch_up()?;
        // A follower writes nothing itself, so without this its saved indexes would fall
        // ever further behind, and its restart would replay (or, past the log, read) more.
        kb.save_indexes_if_worth_it();
        // Recorded before the lock is released, so `health` never reports a change older
        // than one a query has already been served from.
        state.record(kb.applied_change, latest.max(kb.applied_change), lag);
    }
    Ok(())
}
