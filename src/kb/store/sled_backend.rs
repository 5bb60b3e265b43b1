//! The embedded back end: one sled database per KB directory, one tree per keyspace. Only
//! this process writes it (sled locks the directory); it keeps a change log all the same, in
//! the same layout of meaning as PostgreSQL's, so that an open can take the saved indexes of
//! an earlier change and replay only what was written after it (`kb::segment`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::Receiver;

use super::sled_parts;
use super::{Backend, CHANGES_KEPT, ChangeLog, Commit, Entries, Keyspace, Put, SCHEMA_VERSION, Session, Space};
use crate::config::StoreBackend;
use crate::error::{Error, Result};

const META_SCHEMA: &[u8] = b"meta/schema";
/// The first id no session has reserved: ids are handed out from blocks of [`ID_BLOCK`],
/// each recorded here before any of it is used.
const META_NEXT_ID: &[u8] = b"meta/next-id";
/// Ids a session reserves at a time: a block costs one small write, and a session ends
/// having skipped at most one. sled's own generator skipped two million ids at every open,
/// and chunk and node ids are 32 bits, indexing tables as long as the highest one.
const ID_BLOCK: u64 = 1024;
/// What earlier builds added to sled's id generator where a KB was copied in; read only by
/// the first open of such a KB, which has no [`META_NEXT_ID`] yet.
const META_ID_OFFSET: &[u8] = b"meta/id-offset";
/// Writes per sled batch of a commit's ahead part: a few MB of vectors.
const AHEAD_PART: usize = 2048;
/// The newest change's sequence number (absent: none yet).
const META_CHANGE: &[u8] = b"meta/change";
/// `meta/log/SEQ` (SEQ big-endian): one change's commit time and the KB keys it wrote.
const META_LOG: &[u8] = b"meta/log/";
/// `meta/audit-intent/KEY`: an audit entry committed with the KB's writes, on its way to the
/// audit tree under KEY (see [`SledBackend::commit`]).
const META_AUDIT_INTENT: &[u8] = b"meta/audit-intent/";

pub(super) struct SledBackend {
    db: sled::Db,
    kb: sled::Tree,
    /// One tree per [`Keyspace`], in `Keyspace::ALL` order.
    keyspaces: [sled::Tree; 3],
    /// The ids reserved and not handed out yet.
    ids: std::sync::Mutex<std::ops::Range<u64>>,
    /// The newest change's sequence number; a commit takes the next one under this lock, so
    /// log entries are numbered in commit order.
    change: std::sync::Mutex<u64>,
    /// Set when a write in parts failed between its batches (see [`SledBackend::failed_halfway`]).
    refusing_writes: std::sync::atomic::AtomicBool,
}

/// Why a write is refused after a write in parts failed between its batches.
const RESTART_AFTER_HALF_A_WRITE: &str = "an earlier large write failed halfway: restart a2rag, \
     which undoes what that write stored as it opens the knowledge base, before writing again";

impl SledBackend {
    pub(super) fn open(dir: &Path) -> Result<SledBackend> {
        if dir.exists() && !dir.is_dir() {
            return Err(Error::Invalid(format!(
                "{} is a file: the data directory (--data-dir, data_dir) must be a directory, created if missing",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let db = open_when_free(&dir.join("db")).map_err(|e| match e {
            sled::Error::Io(io) if held_by_another_process(&io) => Error::InUse(dir.to_path_buf()),
            e => Error::Store(e),
        })?;
        // The KB holds the users' documents: owner-only, whatever the umask. Only sled's own
        // files are touched below `dir`.
        set_mode(dir, 0o700)?;
        restrict_to_owner(&dir.join("db"))?;
        let kb = db.open_tree("kb")?;
        let keyspaces = [
            db.open_tree(tree_name(Keyspace::ALL[0]))?,
            db.open_tree(tree_name(Keyspace::ALL[1]))?,
            db.open_tree(tree_name(Keyspace::ALL[2]))?,
        ];
        match kb.get(META_SCHEMA)? {
            Some(raw) => {
                let found = read_u64_or_u32(&raw, "meta/schema")? as u32;
                if found > SCHEMA_VERSION {
                    return Err(Error::SchemaTooNew {
                        place: format!("data directory {}", dir.display()),
                        found,
                        supported: SCHEMA_VERSION,
                    });
                }
                // This build reads the older layout as it is and writes its own from now on,
                // which an older build would misread: it must refuse the directory.
                if found < SCHEMA_VERSION {
                    kb.insert(META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())?;
                }
            }
            None => {
                kb.insert(META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())?;
            }
        }
        let next_id = match kb.get(META_NEXT_ID)? {
            Some(raw) => read_u64_or_u32(&raw, "meta/next-id")?,
            None => {
                // Earlier builds took ids from sled's generator (plus an offset where the KB was
                // copied in): one more call gives an id above every one it gave.
                let offset = kb.get(META_ID_OFFSET)?.map(|raw| read_u64_or_u32(&raw, "meta/id-offset")).transpose()?;
                let next = db.generate_id()? + offset.unwrap_or(0);
                kb.insert(META_NEXT_ID, &next.to_be_bytes())?;
                next
            }
        };
        let undone = sled_parts::roll_back(&kb)?;
        if undone > 0 {
            tracing::warn!(parts = undone, "undid the first parts of a large write a crash interrupted");
        }
        let change = kb.get(META_CHANGE)?.map(|raw| read_u64_or_u32(&raw, "meta/change")).transpose()?;
        let backend = SledBackend {
            db,
            kb,
            keyspaces,
            ids: std::sync::Mutex::new(next_id..next_id),
            change: std::sync::Mutex::new(change.unwrap_or(0)),
            refusing_writes: std::sync::atomic::AtomicBool::new(false),
        };
        let left: Vec<(sled::IVec, sled::IVec)> =
            backend.kb.scan_prefix(META_AUDIT_INTENT).collect::<sled::Result<_>>()?;
        backend.settle_audit_intents(left.iter().map(|(intent, entry)| (intent.as_ref(), entry.as_ref())))?;
        Ok(backend)
    }

    /// Moves audit entries, each given with its intent (its key under [`META_AUDIT_INTENT`]
    /// in the KB's tree), into the audit tree: each is written there before its intent goes,
    /// so a crash in between leaves an intent whose move is repeated, never a lost entry.
    fn settle_audit_intents<'a>(&self, intents: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Result<()> {
        let audit = self.tree(Space::Curation(Keyspace::Audit));
        for (intent, entry) in intents {
            audit.insert(&intent[META_AUDIT_INTENT.len()..], entry)?;
            self.kb.remove(intent)?;
        }
        Ok(())
    }

    /// A write in parts that failed between its batches: its parts are undone now where that
    /// works. sled applies a batch to memory one write at a time, so the failed batch may have
    /// left some of its writes in memory without their undo record; only a restart, whose
    /// recovery drops a batch that never sealed, is sure to clear them. Until then no write is
    /// taken (`RESTART_AFTER_HALF_A_WRITE`), so nothing is stored on top of them.
    fn failed_halfway(&self, error: Error) -> Error {
        self.refusing_writes.store(true, std::sync::atomic::Ordering::Release);
        if let Err(again) = sled_parts::roll_back(&self.kb) {
            tracing::warn!(error = %again, "could not undo the parts of a failed write: the next open will");
        }
        Error::Invalid(format!("{error}; {RESTART_AFTER_HALF_A_WRITE}"))
    }

    fn latest(&self) -> std::sync::MutexGuard<'_, u64> {
        // A panic while holding it cannot leave the number half-written: it is a plain u64.
        self.change.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The log entry of change `seq`, if the log still holds it.
    fn log_entry(&self, seq: u64) -> Result<Option<LogEntry>> {
        self.kb.get(log_key(seq))?.map(|raw| LogEntry::decode(seq, &raw)).transpose()
    }

    fn tree(&self, space: Space) -> &sled::Tree {
        match space {
            Space::Kb => &self.kb,
            Space::Curation(keyspace) => &self.keyspaces[keyspace as usize],
        }
    }
}

/// The error of a transaction of ours: they never abort themselves, so storage failed it.
fn transaction_error(e: sled::transaction::TransactionError<()>) -> Error {
    match e {
        sled::transaction::TransactionError::Storage(e) => Error::Store(e),
        sled::transaction::TransactionError::Abort(()) => Error::Invalid("transaction aborted".into()),
    }
}

fn tree_name(keyspace: Keyspace) -> &'static str {
    match keyspace {
        Keyspace::Proposals => "proposals",
        Keyspace::Decisions => "decisions",
        Keyspace::Audit => "audit",
    }
}

fn read_u64_or_u32(raw: &[u8], key: &str) -> Result<u64> {
    let corrupt = || Error::Corrupt { key: key.into(), message: "not a big-endian integer".into() };
    match raw.len() {
        4 => Ok(u32::from_be_bytes(raw.try_into().map_err(|_| corrupt())?).into()),
        8 => Ok(u64::from_be_bytes(raw.try_into().map_err(|_| corrupt())?)),
        _ => Err(corrupt()),
    }
}

impl Backend for SledBackend {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(space).get(key)?.map(|v| v.to_vec()))
    }

    fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<HashMap<Vec<u8>, Vec<u8>>> {
        let mut found = HashMap::with_capacity(keys.len());
        for key in keys {
            if let Some(value) = self.get(space, key)? {
                found.insert(key.clone(), value);
            }
        }
        Ok(found)
    }

    fn scan<'a>(&'a self, space: Space, prefix: &[u8]) -> Entries<'a> {
        Box::new(self.tree(space).scan_prefix(prefix).map(|item| {
            let (k, v) = item?;
            Ok((k.to_vec(), v.to_vec()))
        }))
    }

    fn insert(&self, space: Space, key: &[u8], value: &[u8]) -> Result<()> {
        self.tree(space).insert(key, value)?;
        Ok(())
    }

    fn insert_new_with(
        &self,
        (space, key, value): Put<'_>,
        (along_space, along_key, along_value): Put<'_>,
    ) -> Result<bool> {
        use sled::Transactional;
        use sled::transaction::ConflictableTransactionError;
        (self.tree(space), self.tree(along_space))
            .transaction(|(claimed, along)| {
                if claimed.get(key)?.is_some() {
                    return Ok(false);
                }
                claimed.insert(key, value)?;
                along.insert(along_key, along_value)?;
                Ok::<_, ConflictableTransactionError<()>>(true)
            })
            .map_err(transaction_error)
    }

    fn next_id(&self) -> Result<u64> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.is_empty() {
            // Recorded before any id of the block is used: sled recovers a prefix of its
            // writes, so a record that survives a crash survives with its id's reservation.
            let end = ids.end + ID_BLOCK;
            self.kb.insert(META_NEXT_ID, &end.to_be_bytes())?;
            *ids = ids.end..end;
        }
        let id = ids.start;
        ids.start += 1;
        Ok(id)
    }

    fn reserve_ids_through(&self, floor: u64) -> Result<()> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let next = floor.saturating_add(1);
        if next > ids.end {
            self.kb.insert(META_NEXT_ID, &next.to_be_bytes())?;
            *ids = next..next;
        } else if next > ids.start {
            ids.start = next;
        }
        Ok(())
    }

    /// KB writes alone are one `apply_batch` (a large write several, undone by an open after
    /// a crash: see `sled_parts`); with curation writes, one sled transaction over every
    /// tree, so a crash keeps all or none of it.
    fn commit(&self, Commit { ahead, writes, author }: Commit) -> Result<Option<u64>> {
        use sled::Transactional;
        use sled::transaction::ConflictableTransactionError;
        if self.refusing_writes.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Invalid(RESTART_AFTER_HALF_A_WRITE.into()));
        }
        // Every KB key the commit writes, ahead ones included, as PostgreSQL logs them.
        let touched: Vec<Vec<u8>> =
            ahead.iter().chain(&writes).filter(|w| w.space == Space::Kb).map(|w| w.key.clone()).collect();
        // sled keeps a batch's whole log in memory until the batch ends; in parts, a large
        // document's vectors cost one part's memory at a time.
        for part in ahead.chunks(AHEAD_PART) {
            let mut batch = sled::Batch::default();
            for w in part {
                sled_parts::stage(&mut batch, w.key.as_slice(), w.value.as_deref());
            }
            self.kb.apply_batch(batch)?;
            if ahead.len() > AHEAD_PART {
                sled_parts::release_leaf_copies();
            }
        }
        drop(ahead);
        let mut kb_writes = Vec::with_capacity(writes.len());
        let mut side = Vec::new();
        for w in writes {
            match w.space {
                Space::Kb => kb_writes.push((w.key, w.value)),
                Space::Curation(keyspace) => side.push((keyspace, w.key, w.value)),
            }
        }
        // An ingest's or a delete's only curation write is its audit entry. It goes into the
        // KB's own batch as an intent, moved to the audit tree right after: as atomic as a
        // sled transaction over both trees, which reads every key it writes first (a third
        // of sled's commit in an ingest of 300,000 passages). An open moves what a crash left.
        let audit_only = side.iter().all(|(keyspace, _, value)| *keyspace == Keyspace::Audit && value.is_some());
        // Such a commit can be large (a document's records, a reindex's or a copy's vectors);
        // a large one goes in parts.
        let (kb_writes, undo_keys) = if audit_only && kb_writes.len() > sled_parts::PART {
            sled_parts::apply_leading_parts(&self.kb, kb_writes).map_err(|e| self.failed_halfway(e))?
        } else {
            (kb_writes, Vec::new())
        };
        let mut kb_batch = sled::Batch::default();
        for (key, value) in kb_writes {
            sled_parts::stage(&mut kb_batch, key, value);
        }
        for undo_key in &undo_keys {
            kb_batch.remove(undo_key.as_slice());
        }
        // The number is taken and the entry written in the commit's own batch, under the
        // lock, so the log lists exactly the committed changes, in order.
        let mut latest = self.latest();
        let seq = (!touched.is_empty()).then(|| *latest + 1);
        if let Some(seq) = seq {
            kb_batch.insert(META_CHANGE, &seq.to_be_bytes());
            kb_batch.insert(log_key(seq), LogEntry::encode(now_ms(), &author, &touched));
            if seq > CHANGES_KEPT {
                kb_batch.remove(log_key(seq - CHANGES_KEPT));
            }
        }
        if audit_only {
            let intents: Vec<(Vec<u8>, Vec<u8>)> = side
                .into_iter()
                .filter_map(|(_, key, value)| Some(([META_AUDIT_INTENT, key.as_slice()].concat(), value?)))
                .collect();
            for (intent, value) in &intents {
                kb_batch.insert(intent.as_slice(), value.as_slice());
            }
            if let Err(e) = self.kb.apply_batch(kb_batch) {
                return Err(if undo_keys.is_empty() { e.into() } else { self.failed_halfway(e.into()) });
            }
            if let Some(seq) = seq {
                *latest = seq;
            }
            drop(latest);
            // Committed whatever follows: an intent left by a failure here is moved by the
            // next open.
            let moves = intents.iter().map(|(intent, entry)| (intent.as_slice(), entry.as_slice()));
            if let Err(e) = self.settle_audit_intents(moves) {
                tracing::warn!(error = %e, "an audit entry stays in the KB's tree until the next open moves it");
            }
            return Ok(seq);
        }
        let [proposals, decisions, audit] = &self.keyspaces;
        (&self.kb, proposals, decisions, audit)
            .transaction(|(kb, proposals, decisions, audit)| {
                kb.apply_batch(&kb_batch)?;
                for (keyspace, key, value) in &side {
                    let tree = match keyspace {
                        Keyspace::Proposals => proposals,
                        Keyspace::Decisions => decisions,
                        Keyspace::Audit => audit,
                    };
                    match value {
                        Some(value) => tree.insert(key.as_slice(), value.as_slice())?,
                        None => tree.remove(key.as_slice())?,
                    };
                }
                Ok::<_, ConflictableTransactionError<()>>(())
            })
            .map_err(transaction_error)?;
        if let Some(seq) = seq {
            *latest = seq;
        }
        Ok(seq)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    /// sled locks its directory: this process is the only writer already.
    fn begin_write(&self) -> Result<Session> {
        Ok(Session::none())
    }

    /// Reads run while no write can interleave (writes take the KB's lock in this process).
    fn begin_snapshot(&self) -> Result<Session> {
        Ok(Session::none())
    }

    fn changes_since(&self, seq: u64) -> Result<ChangeLog> {
        let latest = *self.latest();
        if latest <= seq {
            return Ok(ChangeLog::Current);
        }
        // One pass over the log's range; a gap (or an entry pruned from its start) means the
        // log no longer holds every change since `seq`.
        let mut keys = Vec::new();
        let mut expected = seq + 1;
        for item in self.kb.range(log_key(seq + 1)..=log_key(latest)) {
            let (key, raw) = item?;
            let found = key.get(META_LOG.len()..).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
            if found != Some(expected) {
                return Ok(ChangeLog::Pruned { latest });
            }
            keys.extend(LogEntry::decode(expected, &raw)?.keys);
            expected += 1;
        }
        if expected != latest + 1 {
            return Ok(ChangeLog::Pruned { latest });
        }
        keys.sort_unstable();
        keys.dedup();
        Ok(ChangeLog::Since { latest, keys })
    }

    fn latest_change(&self) -> Result<u64> {
        Ok(*self.latest())
    }

    fn waiting_since(&self, seq: u64) -> Result<std::time::Duration> {
        if *self.latest() <= seq {
            return Ok(std::time::Duration::ZERO);
        }
        let committed = self.log_entry(seq + 1)?.map_or(now_ms(), |entry| entry.committed_ms);
        Ok(std::time::Duration::from_millis(now_ms().saturating_sub(committed)))
    }

    fn watch(&self) -> Option<Receiver<()>> {
        None
    }

    fn kind(&self) -> StoreBackend {
        StoreBackend::Sled
    }
}

fn log_key(seq: u64) -> Vec<u8> {
    [META_LOG, &seq.to_be_bytes()[..]].concat()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One change of the log: when it committed, who wrote it, the KB keys it wrote. Stored as
/// the commit time (u64), the author (u16 length, bytes), then each key (u16 length, bytes),
/// big-endian: KB keys are short family prefixes with ids or document ids.
struct LogEntry {
    committed_ms: u64,
    keys: Vec<Vec<u8>>,
}

impl LogEntry {
    fn encode(committed_ms: u64, author: &str, keys: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + author.len() + keys.iter().map(|k| 2 + k.len()).sum::<usize>());
        out.extend_from_slice(&committed_ms.to_be_bytes());
        for field in std::iter::once(author.as_bytes()).chain(keys.iter().map(Vec::as_slice)) {
            // Longer fields cannot occur (a document id is a path); cut rather than misframe.
            let field = &field[..field.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(field.len() as u16).to_be_bytes());
            out.extend_from_slice(field);
        }
        out
    }

    fn decode(seq: u64, raw: &[u8]) -> Result<LogEntry> {
        let corrupt =
            || Error::Corrupt { key: format!("meta/log/{seq}"), message: "a damaged change-log entry".into() };
        let (time, mut rest) = raw.split_first_chunk::<8>().ok_or_else(corrupt)?;
        let mut fields = Vec::new();
        while let Some((len, after)) = rest.split_first_chunk::<2>() {
            let len = u16::from_be_bytes(*len) as usize;
            let field = after.get(..len).ok_or_else(corrupt)?;
            fields.push(field.to_vec());
            rest = &after[len..];
        }
        if !rest.is_empty() || fields.is_empty() {
            return Err(corrupt());
        }
        fields.remove(0);
        Ok(LogEntry { committed_ms: u64::from_be_bytes(*time), keys: fields })
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))
}

/// Mode 0700 on `dir` and its subdirectories, 0600 on its files.
fn restrict_to_owner(dir: &Path) -> Result<()> {
    set_mode(dir, 0o700)?;
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            restrict_to_owner(&path)?;
        } else if meta.is_file() {
            set_mode(&path, 0o600)?;
        }
    }
    Ok(())
}

/// How long an open waits for another holder of the database's lock to let go.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// Opens sled's database at `path`, waiting up to [`LOCK_WAIT`] while its lock is held. The
/// lock outlives its holder briefly: sled's background log writes keep the file open for a
/// moment after the last handle drops, and a child process forked meanwhile holds a copy of
/// it until it execs. A daemon restarted at once, or a KB reopened by the same process,
/// would otherwise be told another process holds it.
fn open_when_free(path: &Path) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match sled::Config::new().path(path).open() {
            Err(sled::Error::Io(io)) if held_by_another_process(&io) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            opened => return opened,
        }
    }
}

/// Is this sled's failure to lock its directory because another process holds it? sled says
/// so only in words: an `Other` error whose message names the lock and the cause (another
/// holder, not a file system without locks).
fn held_by_another_process(io: &std::io::Error) -> bool {
    let message = io.to_string();
    message.starts_with("could not acquire lock") && message.contains("WouldBlock")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::store::Write;

    /// An ingest's audit entry commits with its KB writes and reaches the audit tree; one a
    /// crash left on its way there is moved by the next open, and neither is a KB change.
    #[test]
    fn an_audit_entry_reaches_its_tree_even_after_a_crash_on_its_way() {
        let dir = tempfile::tempdir().unwrap();
        let audit = Space::Curation(Keyspace::Audit);
        let write = |space, key: &[u8], value: &[u8]| Write { space, key: key.to_vec(), value: Some(value.to_vec()) };
        {
            let store = SledBackend::open(dir.path()).unwrap();
            let writes = vec![write(Space::Kb, b"doc/1", b"d"), write(audit, b"entry-1", b"v")];
            assert_eq!(store.commit(Commit { ahead: vec![], writes, author: "tester".into() }).unwrap(), Some(1));
            assert_eq!(store.get(audit, b"entry-1").unwrap(), Some(b"v".to_vec()));
            assert_eq!(store.kb.scan_prefix(META_AUDIT_INTENT).count(), 0, "the intent is gone once moved");
            // A crash between the KB's batch and the move leaves the intent behind.
            store.kb.insert([META_AUDIT_INTENT, b"entry-2"].concat(), b"w".as_slice()).unwrap();
            store.flush().unwrap();
        }
        let store = SledBackend::open(dir.path()).unwrap();
        assert_eq!(store.get(audit, b"entry-2").unwrap(), Some(b"w".to_vec()));
        assert_eq!(store.get(audit, b"entry-1").unwrap(), Some(b"v".to_vec()));
        assert_eq!(store.kb.scan_prefix(META_AUDIT_INTENT).count(), 0);
        assert!(
            matches!(store.changes_since(0).unwrap(), ChangeLog::Since { latest: 1, keys } if keys == [b"doc/1".to_vec()])
        );
    }

    /// Keys a large write replaces, removes and leaves alone, then the write: `PART * 2 + 7`
    /// new keys after the replaced and removed ones, and its audit entry.
    fn before_a_large_write(store: &SledBackend) -> Vec<Write> {
        let put = |key: &[u8], value: &[u8]| Write { space: Space::Kb, key: key.to_vec(), value: Some(value.to_vec()) };
        let before = vec![put(b"before/kept", b"k"), put(b"before/replaced", b"r"), put(b"before/removed", b"x")];
        store.commit(Commit { ahead: vec![], writes: before, author: "tester".into() }).unwrap();
        let mut writes = vec![
            put(b"before/replaced", b"R"),
            Write { space: Space::Kb, key: b"before/removed".to_vec(), value: None },
        ];
        writes.extend((0..sled_parts::PART * 2 + 7).map(|i| put(format!("new/{i:06}").as_bytes(), b"n")));
        writes.push(Write {
            space: Space::Curation(Keyspace::Audit),
            key: b"entry".to_vec(),
            value: Some(b"e".to_vec()),
        });
        writes
    }

    fn undo_records(store: &SledBackend) -> usize {
        store.kb.scan_prefix(sled_parts::META_UNDO).count()
    }

    /// A write of more keys than one part commits in several sled batches and lands whole:
    /// one change naming every key, and no undo record left.
    #[test]
    fn a_large_write_lands_whole_in_parts() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledBackend::open(dir.path()).unwrap();
        let writes = before_a_large_write(&store);
        let keys = writes.len() - 1;
        assert_eq!(store.commit(Commit { ahead: vec![], writes, author: "tester".into() }).unwrap(), Some(2));
        assert_eq!(store.kb.scan_prefix(b"new/").count(), sled_parts::PART * 2 + 7);
        assert_eq!(store.get(Space::Kb, b"before/replaced").unwrap(), Some(b"R".to_vec()));
        assert_eq!(store.get(Space::Kb, b"before/removed").unwrap(), None);
        assert_eq!(store.get(Space::Kb, b"before/kept").unwrap(), Some(b"k".to_vec()));
        assert_eq!(store.get(Space::Curation(Keyspace::Audit), b"entry").unwrap(), Some(b"e".to_vec()));
        assert_eq!(undo_records(&store), 0);
        assert!(
            matches!(store.changes_since(1).unwrap(), ChangeLog::Since { latest: 2, keys: logged } if logged.len() == keys)
        );
    }

    /// A crash after a large write's first parts and before its last batch: the next open
    /// puts back what they overwrote and removes what they added, as if it never began.
    #[test]
    fn an_open_undoes_a_large_write_a_crash_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledBackend::open(dir.path()).unwrap();
            let writes = before_a_large_write(&store);
            let kb_writes: Vec<_> =
                writes.into_iter().filter(|w| w.space == Space::Kb).map(|w| (w.key, w.value)).collect();
            let (last, undo_keys) = sled_parts::apply_leading_parts(&store.kb, kb_writes).unwrap();
            assert_eq!((last.len(), undo_keys.len()), (sled_parts::PART, 2));
            // The parts are in the tree, as a crash would leave them.
            assert_eq!(store.get(Space::Kb, b"before/replaced").unwrap(), Some(b"R".to_vec()));
            assert_eq!(store.get(Space::Kb, b"before/removed").unwrap(), None);
            assert_eq!(store.kb.scan_prefix(b"new/").count(), sled_parts::PART + 7);
            assert_eq!(undo_records(&store), 2);
            store.flush().unwrap();
        }
        let store = SledBackend::open(dir.path()).unwrap();
        assert_eq!(store.kb.scan_prefix(b"new/").count(), 0);
        assert_eq!(store.get(Space::Kb, b"before/replaced").unwrap(), Some(b"r".to_vec()));
        assert_eq!(store.get(Space::Kb, b"before/removed").unwrap(), Some(b"x".to_vec()));
        assert_eq!(store.get(Space::Kb, b"before/kept").unwrap(), Some(b"k".to_vec()));
        assert_eq!(undo_records(&store), 0);
        assert_eq!(store.latest_change().unwrap(), 1, "the cut write is no change");
        // The next write commits as usual.
        let writes = before_a_large_write(&store);
        assert_eq!(store.commit(Commit { ahead: vec![], writes, author: "tester".into() }).unwrap(), Some(3));
        assert_eq!(store.kb.scan_prefix(b"new/").count(), sled_parts::PART * 2 + 7);
    }

    #[test]
    fn a_directory_another_process_holds_is_named_as_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let _held = SledBackend::open(dir.path()).unwrap();
        let err = SledBackend::open(dir.path()).err().unwrap();
        assert!(matches!(&err, Error::InUse(path) if path == dir.path()), "{err:?}");
        assert!(err.to_string().contains("stop it first, or send"), "{err}");
    }

    #[test]
    fn an_open_waits_for_a_lock_let_go_in_a_moment() {
        let dir = tempfile::tempdir().unwrap();
        let held = SledBackend::open(dir.path()).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(LOCK_WAIT / 5);
            drop(held);
        });
        let reopened = SledBackend::open(dir.path());
        release.join().unwrap();
        assert!(reopened.is_ok(), "{:?}", reopened.err());
    }

    #[test]
    fn newer_schema_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledBackend::open(dir.path()).unwrap();
            store.kb.insert(META_SCHEMA, &(SCHEMA_VERSION + 1).to_be_bytes()).unwrap();
            store.flush().unwrap();
        }
        let err = SledBackend::open(dir.path()).err().unwrap();
        assert!(matches!(err, Error::SchemaTooNew { .. }));
        assert!(err.to_string().contains("upgrade a2rag"));
    }

    #[test]
    fn the_data_directory_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        drop(SledBackend::open(&data).unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700);
        let mut files = 0;
        for entry in std::fs::read_dir(data.join("db")).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                assert_eq!(mode(&path), 0o600, "{}", path.display());
                files += 1;
            }
        }
        assert!(files > 0);
    }

    #[test]
    fn ids_stay_dense_across_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let mut last: Option<u64> = None;
        for session in 0..4 {
            let store = SledBackend::open(dir.path()).unwrap();
            let first = store.next_id().unwrap();
            if let Some(last) = last {
                assert!(first > last, "session {session} reused an id: {first} after {last}");
                assert!(first - last <= ID_BLOCK, "session {session} skipped ids: {first} after {last}");
            }
            last = Some((0..10).map(|_| store.next_id().unwrap()).max().unwrap());
        }
    }

    #[test]
    fn a_kb_of_an_earlier_build_takes_ids_above_the_ones_it_gave_and_stops_skipping() {
        let dir = tempfile::tempdir().unwrap();
        let given = {
            // As earlier builds numbered records: sled's generator plus a copied KB's offset.
            let db = sled::Config::new().path(dir.path().join("db")).open().unwrap();
            db.open_tree("kb").unwrap().insert(META_ID_OFFSET, &7u64.to_be_bytes()).unwrap();
            let given = (0..5_000).map(|_| db.generate_id().unwrap() + 7).max().unwrap();
            db.flush().unwrap();
            given
        };
        let first = SledBackend::open(dir.path()).unwrap().next_id().unwrap();
        assert!(first > given, "{first} is not above {given}");
        let again = SledBackend::open(dir.path()).unwrap().next_id().unwrap();
        assert!(again > first && again - first <= ID_BLOCK, "{again} after {first}");
    }

    #[test]
    fn reserved_ids_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledBackend::open(dir.path()).unwrap();
            store.reserve_ids_through(1_000_000).unwrap();
            assert!(store.next_id().unwrap() > 1_000_000);
            store.flush().unwrap();
        }
        assert!(SledBackend::open(dir.path()).unwrap().next_id().unwrap() > 1_000_000);
    }
}
