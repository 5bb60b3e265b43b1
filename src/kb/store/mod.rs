//! Persistence: the typed layer every KB write and read goes through, over a [`Backend`]
//! that stores ordered key-value entries in keyspaces and commits a batch atomically.
//!
//! Two back ends: sled (the embedded default, one process on one disk) and PostgreSQL
//! (several daemons on one database). Records live in the KB keyspace under typed key
//! prefixes ([`Family`]) so that a whole document (chunks, nodes touched, edges, embeddings,
//! manifest entry) commits in one atomic batch: a crash or a bad file never leaves half a
//! document. Curation's records live in keyspaces of their own ([`Keyspace`]), and a
//! [`KbBatch`] can write them in the same transaction.
//!
//! With PostgreSQL, every committed batch also appends the keys it touched to a change log
//! under a per-KB sequence number, and writers serialise per KB on a database lock (see
//! [`Store::write_session`]), so each daemon can bring its in-memory indexes up to date
//! ([`Store::changes_since`]) and a write is staged against everything committed before it.

pub mod credentials;
mod postgres;
mod sled_backend;
mod sled_parts;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::model::{Chunk, ChunkId, DocKey, Document, Edge, EdgeId, Node, NodeId};
use super::name::KbName;
use super::packed;
use crate::config::{Settings, StoreBackend, StoreSettings};
use crate::error::{Error, Result};

pub use postgres::kb_names as postgres_kb_names;

/// The token name of writes made by whoever owns the data directory, without a token: the
/// author of a change-log entry whose batch named none.
pub const OWNER: &str = "owner";

/// Bump when the on-disk layout changes so that an older build would misread it (a newer
/// build reads every older layout). 2: one fact vector per distinct fact, not per edge. 3: a
/// sled store logs its changes, and saved vectors replay that log: an older build would write
/// without logging, and the next open would trust vectors that no longer match the store. 4:
/// mostly-zero vectors are stored sparse (`kb::packed`), which an older build would misread. 5:
/// a node's chunks are stored one key per mention ([`MENTION_PREFIX`]), not in its record.
pub const SCHEMA_VERSION: u32 = 5;

/// Changes a back end keeps in its log (each entry a few hundred bytes): a daemon further
/// behind loads the KB again, and an open whose save is older reads the whole store.
pub const CHANGES_KEPT: u64 = 50_000;

/// The author `a2rag migrate` records its copies under in a change log.
const MIGRATE_AUTHOR: &str = "migrate";

const META_EMBEDDER: &[u8] = b"meta/embedder";
const META_INSTANCE: &[u8] = b"meta/instance";
/// Set once the chunk lists that records of schema 4 and older keep inside each node have
/// moved to mention keys (see [`Store::split_node_mentions`]).
const META_MENTIONS: &[u8] = b"meta/mentions";
/// Keys under this prefix describe the store itself (schema, id offset, embedder); they are
/// not KB records and are not copied as such by [`copy_kb`].
const META_PREFIX: &[u8] = b"meta/";

/// Key prefixes. Numeric ids are big-endian so that prefix scans return them in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Doc,
    DocId,
    Chunk,
    Node,
    Edge,
    ChunkVec,
    SummaryVec,
    NodeVec,
    /// Fact vectors ("subject relation object") of edges, keyed by edge id.
    FactVec,
}

impl Family {
    /// The families keyed by a numeric id (all but [`Family::DocId`]).
    const NUMERIC: [Family; 8] = [
        Family::Doc,
        Family::Chunk,
        Family::Node,
        Family::Edge,
        Family::ChunkVec,
        Family::SummaryVec,
        Family::NodeVec,
        Family::FactVec,
    ];

    fn prefix(self) -> &'static [u8] {
        match self {
            Family::Doc => b"doc/",
            Family::DocId => b"docid/",
            Family::Chunk => b"chunk/",
            Family::Node => b"node/",
            Family::Edge => b"edge/",
            Family::ChunkVec => b"vec/c/",
            Family::SummaryVec => b"vec/s/",
            Family::NodeVec => b"vec/n/",
            Family::FactVec => b"vec/f/",
        }
    }

    pub fn key(self, id: u64) -> Vec<u8> {
        let mut k = self.prefix().to_vec();
        k.extend_from_slice(&id.to_be_bytes());
        k
    }

    fn str_key(self, s: &str) -> Vec<u8> {
        let mut k = self.prefix().to_vec();
        k.extend_from_slice(s.as_bytes());
        k
    }

    /// The family and id of a numeric key; `None` for any other key.
    fn parse(key: &[u8]) -> Option<(Family, u64)> {
        Family::NUMERIC.into_iter().find_map(|family| {
            let id: [u8; 8] = key.strip_prefix(family.prefix())?.try_into().ok()?;
            Some((family, u64::from_be_bytes(id)))
        })
    }

    /// The family written together with this one for the same id: a record and its vector.
    fn companion(self) -> Option<Family> {
        match self {
            Family::Doc => Some(Family::SummaryVec),
            Family::SummaryVec => Some(Family::Doc),
            Family::Chunk => Some(Family::ChunkVec),
            Family::ChunkVec => Some(Family::Chunk),
            Family::Node => Some(Family::NodeVec),
            Family::NodeVec => Some(Family::Node),
            Family::Edge => Some(Family::FactVec),
            Family::FactVec => Some(Family::Edge),
            Family::DocId => None,
        }
    }
}

/// A node's provenance, one key with an empty value per chunk that mentions it: the node's
/// id then the chunk's, big-endian, so a prefix scan lists one node's chunks in order. A
/// chunk naming a node writes one small key, and the node's record keeps only its names: a
/// record holding the list was rewritten whole by every document naming the node, so a hub's
/// record grew with the corpus and ingest wrote quadratically many bytes (a node named by a
/// third of 50,000 pages wrote a gigabyte of versions of itself).
const MENTION_PREFIX: &[u8] = b"mention/";

fn mention_key(node: NodeId, chunk: ChunkId) -> Vec<u8> {
    [MENTION_PREFIX, &node.to_be_bytes()[..], &chunk.to_be_bytes()[..]].concat()
}

/// The node and chunk of a mention key; `None` for any other key.
fn parse_mention(key: &[u8]) -> Option<(NodeId, ChunkId)> {
    let ids: [u8; 8] = key.strip_prefix(MENTION_PREFIX)?.try_into().ok()?;
    let (node, chunk) = ids.split_at(4);
    Some((NodeId::from_be_bytes(node.try_into().ok()?), ChunkId::from_be_bytes(chunk.try_into().ok()?)))
}

/// What a node's record stores: its names. Its chunks are mention keys.
#[derive(Serialize)]
struct NodeRecord<'a> {
    id: NodeId,
    name: &'a str,
    aliases: &'a [String],
}

/// Keyspaces beside the knowledge base proper: curation's records (see `curate`). A
/// [`KbBatch`] can write them together with KB records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Keyspace {
    /// Proposal id -> proposal.
    Proposals,
    /// Normalised triple -> decision (the dedupe key).
    Decisions,
    /// Monotonic id -> audit entry.
    Audit,
}

impl Keyspace {
    const ALL: [Keyspace; 3] = [Keyspace::Proposals, Keyspace::Decisions, Keyspace::Audit];
}

/// Every keyspace a back end stores: the KB records and curation's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Space {
    Kb,
    Curation(Keyspace),
}

impl Space {
    const ALL: [Space; 4] = [
        Space::Kb,
        Space::Curation(Keyspace::Proposals),
        Space::Curation(Keyspace::Decisions),
        Space::Curation(Keyspace::Audit),
    ];

    /// The stable number a back end files the keyspace under.
    fn code(self) -> i16 {
        match self {
            Space::Kb => 0,
            Space::Curation(Keyspace::Proposals) => 1,
            Space::Curation(Keyspace::Decisions) => 2,
            Space::Curation(Keyspace::Audit) => 3,
        }
    }
}

/// One write of a batch: `value` `None` removes the key.
#[derive(Debug, Clone)]
struct Write {
    space: Space,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

type Entry = (Vec<u8>, Vec<u8>);
/// One key to set: (keyspace, key, value).
type Put<'a> = (Space, &'a [u8], &'a [u8]);
type Entries<'a> = Box<dyn Iterator<Item = Result<Entry>> + 'a>;

/// What a storage back end provides: ordered keyspaces of byte keys and values, atomic
/// batches, and ids unique for the life of the store. The typed layer ([`Store`]) owns every
/// key layout; a back end knows none of them.
trait Backend: Send + Sync {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// The values of `keys` (absent ones left out), in one round trip where that matters.
    fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<HashMap<Vec<u8>, Vec<u8>>>;
    /// Every entry of `space` whose key starts with `prefix`, in key order.
    fn scan<'a>(&'a self, space: Space, prefix: &[u8]) -> Entries<'a>;
    fn insert(&self, space: Space, key: &[u8], value: &[u8]) -> Result<()>;
    /// Inserts `claim` only if its key is absent, and `along` in the same atomic write;
    /// `false`, with nothing written, when the key was there.
    fn insert_new_with(&self, claim: Put<'_>, along: Put<'_>) -> Result<bool>;
    fn next_id(&self) -> Result<u64>;
    /// Makes every id handed out from now on greater than `floor` (a copied KB's ids).
    fn reserve_ids_through(&self, floor: u64) -> Result<()>;
    /// Applies the commit's `writes` (one per key) atomically, after its `ahead` writes. A
    /// back end with a change log records the KB keys written under the next sequence number
    /// and returns it.
    fn commit(&self, commit: Commit) -> Result<Option<u64>>;
    fn flush(&self) -> Result<()>;
    /// Serialises writers of this KB across processes until the session ends or commits.
    fn begin_write(&self) -> Result<Session>;
    /// A consistent read of everything committed so far, until the session ends.
    fn begin_snapshot(&self) -> Result<Session>;
    /// The KB keys written after change `seq`, with the newest sequence number.
    fn changes_since(&self, seq: u64) -> Result<ChangeLog>;
    /// The newest change's sequence number (0: none, or no change log).
    fn latest_change(&self) -> Result<u64>;
    /// How long ago the change after `seq` was committed (zero if there is none).
    fn waiting_since(&self, seq: u64) -> Result<std::time::Duration>;
    /// Wakes the receiver when another process may have committed to this KB; `None` for a
    /// back end only this process writes.
    fn watch(&self) -> Option<Receiver<()>>;
    fn kind(&self) -> StoreBackend;
}

/// A write or snapshot session of a back end, ended when dropped (a write session that did
/// not commit is rolled back).
pub struct Session(Option<Box<dyn FnOnce() + Send>>);

impl Session {
    fn none() -> Session {
        Session(None)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

/// The change log since a sequence number.
#[derive(Debug)]
pub enum ChangeLog {
    /// Nothing newer (always so for a back end only this process writes).
    Current,
    /// The KB keys written by the changes after the one asked about, up to `latest`.
    Since { latest: u64, keys: Vec<Vec<u8>> },
    /// Changes after the one asked about were pruned from the log: reload everything.
    Pruned { latest: u64 },
}

/// Where a knowledge base is stored.
#[derive(Debug, Clone)]
pub enum Location {
    /// A sled database in this directory.
    Sled(PathBuf),
    /// A knowledge base in a PostgreSQL database.
    Postgres { store: StoreSettings, kb: KbName },
}

impl Location {
    /// Where the configured store keeps the KB called `kb`.
    pub fn of(settings: &Settings, kb: &KbName) -> Location {
        match settings.store.backend {
            StoreBackend::Sled => Location::Sled(kb.dir(&settings.data_dir)),
            StoreBackend::Postgres => Location::Postgres { store: settings.store.clone(), kb: kb.clone() },
        }
    }

    /// Whether a KB is stored there (commands that only read refuse to create one).
    pub fn exists(&self) -> Result<bool> {
        match self {
            Location::Sled(dir) => Ok(dir.join("db").is_dir()),
            Location::Postgres { store, kb } => Ok(postgres::kb_names(store)?.contains(kb)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sled(dir) => write!(f, "{}", dir.display()),
            // The URL may carry a password: name the KB only.
            Location::Postgres { kb, .. } => write!(f, "PostgreSQL under the name `{kb}`"),
        }
    }
}

pub struct Store {
    backend: Arc<dyn Backend>,
    location: Location,
}

impl Store {
    /// Opens (creating if needed) the store at `location`, refusing a newer schema.
    pub fn open(location: &Location) -> Result<Store> {
        let backend: Arc<dyn Backend> = match location {
            Location::Sled(dir) => Arc::new(sled_backend::SledBackend::open(dir)?),
            Location::Postgres { store, kb } => Arc::new(postgres::PgBackend::open(store, kb)?),
        };
        let store = Store { backend, location: location.clone() };
        store.split_node_mentions()?;
        Ok(store)
    }

    /// Moves the chunk lists that node records of schema 4 and older hold into mention keys,
    /// in one atomic batch with the mark that says it is done, under the write lock: an open
    /// that crashes half-way leaves the old layout whole, and no write of this build meets a
    /// record whose list it would not keep up to date.
    fn split_node_mentions(&self) -> Result<()> {
        if self.backend.get(Space::Kb, META_MENTIONS)?.is_some() {
            return Ok(());
        }
        {
            let _session = self.backend.begin_write()?;
            let mut batch = KbBatch::default();
            for node in self.scan::<Node>(Family::Node) {
                let node = node?;
                if node.chunks.is_empty() {
                    continue;
                }
                batch.put_node(&node);
                for chunk in &node.chunks {
                    batch.put_mention(node.id, *chunk);
                }
            }
            if !batch.is_empty() {
                tracing::info!(store = %self.location, "moving node provenance to one key per mention (once)");
                batch.insert(META_MENTIONS.to_vec(), vec![1]);
                return self.commit(batch).map(drop);
            }
        }
        // Nothing to move (a new store): marked outside the session, which a back end with
        // transactions rolls back when it ends without a commit.
        self.backend.insert(Space::Kb, META_MENTIONS, &[1])
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    pub fn backend(&self) -> StoreBackend {
        self.backend.kind()
    }

    pub fn get_raw(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.backend.get(Space::Curation(keyspace), key)
    }

    /// Every (key, value) of a keyspace in key order.
    pub fn scan_raw(&self, keyspace: Keyspace) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_ {
        self.backend.scan(Space::Curation(keyspace), b"")
    }

    /// Inserts `claim` only if its key is absent, together with `along` in one atomic write;
    /// `false`, with nothing written, when the key was already there. A record and the key
    /// that stands for it (a proposal and its triple's decision key) go in together, so a
    /// crash never leaves the key without its record.
    pub fn insert_new_raw_with(
        &self,
        claim: (Keyspace, &[u8], &[u8]),
        along: (Keyspace, &[u8], &[u8]),
    ) -> Result<bool> {
        fn curation<'a>((keyspace, key, value): (Keyspace, &'a [u8], &'a [u8])) -> Put<'a> {
            (Space::Curation(keyspace), key, value)
        }
        self.backend.insert_new_with(curation(claim), curation(along))
    }

    /// A fresh id, unique for the life of the store (gaps after a crash are harmless).
    pub fn next_id(&self) -> Result<u64> {
        self.backend.next_id()
    }

    /// [`Store::next_id`] for a record whose ids are 32 bits (a document's key, a chunk, a
    /// node): an error, not a wrapped id that would name an existing record, once the store
    /// has handed out 2^32 ids.
    pub fn next_narrow_id(&self) -> Result<u32> {
        let id = self.next_id()?;
        u32::try_from(id).map_err(|_| {
            Error::Invalid(format!(
                "this KB has handed out every 32-bit id (next: {id}); ingest its documents into a new KB"
            ))
        })
    }

    /// A random number naming this store, made by its first open: a save beside it
    /// (`kb::saved`) records it, and one made for another store of the same name (a
    /// PostgreSQL database dropped and made again, with the same data directory) is not used.
    pub fn instance(&self) -> Result<u64> {
        if let Some(raw) = self.backend.get(Space::Kb, META_INSTANCE)?
            && let Ok(bytes) = <[u8; 8]>::try_from(raw.as_slice())
        {
            return Ok(u64::from_be_bytes(bytes));
        }
        let instance = rand::random::<u64>();
        self.backend.insert(Space::Kb, META_INSTANCE, &instance.to_be_bytes())?;
        Ok(instance)
    }

    pub fn embedder_id(&self) -> Result<Option<String>> {
        Ok(self.backend.get(Space::Kb, META_EMBEDDER)?.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    pub fn set_embedder_id(&self, id: &str) -> Result<()> {
        self.backend.insert(Space::Kb, META_EMBEDDER, id.as_bytes())
    }

    pub fn doc_key_for(&self, id: &str) -> Result<Option<DocKey>> {
        Ok(self
            .backend
            .get(Space::Kb, &Family::DocId.str_key(id))?
            .and_then(|v| v.as_slice().try_into().ok().map(u32::from_be_bytes)))
    }

    pub fn get<T: DeserializeOwned>(&self, family: Family, id: u64) -> Result<Option<T>> {
        let key = family.key(id);
        self.backend.get(Space::Kb, &key)?.map(|raw| decode(&key, &raw)).transpose()
    }

    pub fn scan<T: DeserializeOwned>(&self, family: Family) -> impl Iterator<Item = Result<T>> + '_ {
        self.backend.scan(Space::Kb, family.prefix()).map(|item| {
            let (k, v) = item?;
            decode(&k, &v)
        })
    }

    /// The vector stored for `id` in `family`, if any.
    pub fn get_vector(&self, family: Family, id: u64) -> Result<Option<Vec<f32>>> {
        let key = family.key(id);
        self.backend.get(Space::Kb, &key)?.map(|raw| bytes_to_vec(&key, &raw)).transpose()
    }

    /// All vectors of one family as (id, vector).
    pub fn scan_vectors(&self, family: Family) -> impl Iterator<Item = Result<(u64, Vec<f32>)>> + '_ {
        let plen = family.prefix().len();
        self.backend.scan(Space::Kb, family.prefix()).map(move |item| {
            let (k, v) = item?;
            let id_bytes: [u8; 8] = k[plen..].try_into().map_err(|_| Error::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                message: "bad vector key".into(),
            })?;
            Ok((u64::from_be_bytes(id_bytes), bytes_to_vec(&k, &v)?))
        })
    }

    /// Applies the batch atomically, with whatever curation records it carries. Returns the
    /// change's sequence number where the back end keeps a change log.
    pub fn commit(&self, batch: KbBatch) -> Result<Option<u64>> {
        self.backend.commit(batch.into_commit())
    }

    /// Holds the KB's write lock (across processes, for PostgreSQL) until the next commit or
    /// until the session is dropped, which rolls back what did not commit. Staging a write
    /// inside one, after catching up with [`Store::changes_since`], makes every write see all
    /// the writes committed before it, whichever daemon made them.
    pub fn write_session(&self) -> Result<Session> {
        self.backend.begin_write()
    }

    /// Reads from now until the session drops see one consistent state of the store.
    pub fn snapshot_session(&self) -> Result<Session> {
        self.backend.begin_snapshot()
    }

    /// What changed after change `seq`: the records and vectors written since, each with its
    /// companion (a chunk with its vector, and so on), as they are now.
    pub fn changes_since(&self, seq: u64) -> Result<Changed> {
        let _snapshot = self.snapshot_session()?;
        let (latest, touched) = match self.backend.changes_since(seq)? {
            ChangeLog::Current => return Ok(Changed::Nothing),
            ChangeLog::Pruned { latest } => return Ok(Changed::Everything { latest }),
            ChangeLog::Since { latest, keys } => (latest, keys),
        };
        let mut ids: Vec<(Family, u64)> = Vec::new();
        let mut mentions: Vec<(NodeId, ChunkId)> = Vec::new();
        for key in &touched {
            if let Some((family, id)) = Family::parse(key) {
                ids.push((family, id));
                ids.extend(family.companion().map(|c| (c, id)));
            } else if let Some((node, chunk)) = parse_mention(key) {
                // The node comes back whole: its record, its vector and its chunks then.
                ids.extend([(Family::Node, node as u64), (Family::NodeVec, node as u64)]);
                mentions.push((node, chunk));
            }
        }
        ids.sort_unstable_by_key(|(f, id)| (f.prefix(), *id));
        ids.dedup();
        mentions.sort_unstable();
        mentions.dedup();
        let mut keys: Vec<Vec<u8>> = ids.iter().map(|(f, id)| f.key(*id)).collect();
        keys.extend(mentions.iter().map(|(node, chunk)| mention_key(*node, *chunk)));
        let mut values = self.backend.get_many(Space::Kb, &keys)?;
        let mut records = ChangedRecords::default();
        for ((family, id), key) in ids.into_iter().zip(&keys) {
            records.by_family.entry(family).or_default().insert(id, values.remove(key));
        }
        let mention_keys = &keys[keys.len() - mentions.len()..];
        for (mention, key) in mentions.into_iter().zip(mention_keys) {
            records.mentions.insert(mention, values.contains_key(key));
        }
        Ok(Changed::Records { latest, records })
    }

    /// The newest change's sequence number (0 for a store only this process writes).
    pub fn latest_change(&self) -> Result<u64> {
        self.backend.latest_change()
    }

    /// How long the first change after `seq` has been committed: the lag of a reader that has
    /// applied up to `seq`.
    pub fn waiting_since(&self, seq: u64) -> Result<std::time::Duration> {
        self.backend.waiting_since(seq)
    }

    /// Wakes the receiver when another process may have written this KB (PostgreSQL only).
    pub fn watch(&self) -> Option<Receiver<()>> {
        self.backend.watch()
    }

    pub fn flush(&self) -> Result<()> {
        self.backend.flush()
    }

    pub fn docs(&self) -> impl Iterator<Item = Result<Document>> + '_ {
        self.scan(Family::Doc)
    }
    pub fn chunks(&self) -> impl Iterator<Item = Result<Chunk>> + '_ {
        self.scan(Family::Chunk)
    }
    /// Every node with its chunks: the records and the mention keys, both in node order, read
    /// side by side.
    pub fn nodes(&self) -> impl Iterator<Item = Result<Node>> + '_ {
        let mut mentions = self
            .backend
            .scan(Space::Kb, MENTION_PREFIX)
            .map(|item| {
                let (key, _) = item?;
                parse_mention(&key).ok_or_else(|| Error::Corrupt {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    message: "a mention key that names no node and chunk".into(),
                })
            })
            .peekable();
        self.scan::<Node>(Family::Node).map(move |node| {
            let mut node = node?;
            // A record of the old layout may still list chunks (see `split_node_mentions`).
            loop {
                if let Some(Err(e)) = mentions.next_if(Result::is_err) {
                    return Err(e);
                }
                // Mentions of a node with no record (none are written) are passed over.
                let Some(Ok((owner, chunk))) = mentions.next_if(|m| matches!(m, Ok((n, _)) if *n <= node.id)) else {
                    break;
                };
                if owner == node.id {
                    node.chunks.push(chunk);
                }
            }
            node.chunks.sort_unstable();
            node.chunks.dedup();
            Ok(node)
        })
    }
    pub fn edges(&self) -> impl Iterator<Item = Result<Edge>> + '_ {
        self.scan(Family::Edge)
    }
}

/// What [`Store::changes_since`] found.
#[derive(Debug)]
pub enum Changed {
    Nothing,
    /// The current state of every record and vector written since, up to change `latest`.
    Records {
        latest: u64,
        records: ChangedRecords,
    },
    /// The log no longer reaches back far enough: the KB must be loaded again.
    Everything {
        latest: u64,
    },
}

/// A stored value, `None` where the key is absent.
type StoredValue = Option<Vec<u8>>;

/// Changed records by family: each id with its stored value now (`None`: removed).
#[derive(Debug, Default)]
pub struct ChangedRecords {
    /// By id, so a large change (a big document's thousands of edges) looks each vector up
    /// without a scan.
    by_family: HashMap<Family, std::collections::BTreeMap<u64, StoredValue>>,
    /// Each mention written or removed since, with whether it is stored now.
    mentions: std::collections::BTreeMap<(NodeId, ChunkId), bool>,
}

impl ChangedRecords {
    /// The records of `family` (not a vector family): each id with its record, if it exists.
    pub fn records<T: DeserializeOwned>(&self, family: Family) -> Result<Vec<(u64, Option<T>)>> {
        self.raw(family)
            .map(|(id, value)| Ok((*id, value.as_deref().map(|raw| decode(&family.key(*id), raw)).transpose()?)))
            .collect()
    }

    /// The nodes touched since, each as it is now (`None`: removed): its stored names, and
    /// its chunks as `before` gives them (the node's chunks when the changes began; `None` for
    /// a node that did not exist) with the mentions written since added and those removed
    /// taken away.
    pub fn nodes<'b>(&self, before: impl Fn(NodeId) -> Option<&'b [ChunkId]>) -> Result<Vec<(u64, Option<Node>)>> {
        let mut nodes = self.records::<Node>(Family::Node)?;
        for (id, node) in &mut nodes {
            let Some(node) = node else {
                continue;
            };
            let id = *id as NodeId;
            // Joining what a record of the old layout lists itself.
            node.chunks.extend_from_slice(before(id).unwrap_or_default());
            let changed = self.mentions.range((id, ChunkId::MIN)..=(id, ChunkId::MAX));
            node.chunks.extend(changed.clone().filter(|(_, stored)| **stored).map(|((_, chunk), _)| *chunk));
            node.chunks.sort_unstable();
            node.chunks.dedup();
            let removed: Vec<ChunkId> = changed.filter(|(_, stored)| !**stored).map(|((_, chunk), _)| *chunk).collect();
            if !removed.is_empty() {
                node.chunks.retain(|chunk| removed.binary_search(chunk).is_err());
            }
        }
        Ok(nodes)
    }

    /// The vector of `family` stored for `id` now, if any.
    pub fn vector(&self, family: Family, id: u64) -> Result<Option<Vec<f32>>> {
        let Some(Some(raw)) = self.by_family.get(&family).and_then(|ids| ids.get(&id)) else {
            return Ok(None);
        };
        bytes_to_vec(&family.key(id), raw).map(Some)
    }

    /// The vectors of `family` written since: each id with its vector now (`None`: removed).
    pub fn vectors(&self, family: Family) -> impl Iterator<Item = Result<(u64, Option<Vec<f32>>)>> + '_ {
        self.raw(family).map(move |(id, value)| {
            Ok((*id, value.as_deref().map(|raw| bytes_to_vec(&family.key(*id), raw)).transpose()?))
        })
    }

    /// The ids of `family` touched since, written or removed.
    pub fn ids(&self, family: Family) -> impl Iterator<Item = u64> + '_ {
        self.raw(family).map(|(id, _)| *id)
    }

    fn raw(&self, family: Family) -> impl Iterator<Item = (&u64, &StoredValue)> {
        self.by_family.get(&family).into_iter().flatten()
    }
}

/// Copies every record and curation entry of the KB at `from` into the empty KB at `to`, with
/// the embedder id, and makes `to` hand out ids above all of `from`'s. Returns the entries
/// copied. Refuses a destination that already holds documents.
pub fn copy_kb(from: &Location, to: &Location, mut progress: impl FnMut(usize)) -> Result<usize> {
    ensure_empty(to)?;
    let source = Store::open(from)?;
    let target = Store::open(to)?;
    // Above every id the source has handed out; taken outside the read-only snapshot.
    let id_floor = source.next_id()?;
    let consistent = source.snapshot_session()?;
    let mut copied = 0;
    for space in Space::ALL {
        let mut writes = Vec::with_capacity(COPY_BATCH);
        for entry in source.backend.scan(space, b"") {
            let (key, value) = entry?;
            if space == Space::Kb && key.starts_with(META_PREFIX) {
                continue;
            }
            writes.push(Write { space, key, value: Some(value) });
            if writes.len() == COPY_BATCH {
                copied += writes.len();
                target.backend.commit(Commit {
                    ahead: Vec::new(),
                    writes: std::mem::take(&mut writes),
                    author: MIGRATE_AUTHOR.into(),
                })?;
                progress(copied);
            }
        }
        copied += writes.len();
        target.backend.commit(Commit { ahead: Vec::new(), writes, author: MIGRATE_AUTHOR.into() })?;
        progress(copied);
    }
    if let Some(embedder) = source.embedder_id()? {
        target.set_embedder_id(&embedder)?;
    }
    drop(consistent);
    target.backend.reserve_ids_through(id_floor)?;
    target.flush()?;
    Ok(copied)
}

/// Refuses a destination that holds documents already (one that does not exist yet is
/// empty, and is not created here).
pub fn ensure_empty(to: &Location) -> Result<()> {
    if to.exists()? && Store::open(to)?.docs().next().is_some() {
        return Err(Error::Invalid(format!(
            "{to} already holds documents: migrate into an empty store, or delete that knowledge base first"
        )));
    }
    Ok(())
}

/// Entries per transaction when copying a KB.
const COPY_BATCH: usize = 4096;

fn decode<T: DeserializeOwned>(key: &[u8], raw: &[u8]) -> Result<T> {
    serde_json::from_slice(raw)
        .map_err(|e| Error::Corrupt { key: String::from_utf8_lossy(key).into_owned(), message: e.to_string() })
}

fn bytes_to_vec(key: &[u8], raw: &[u8]) -> Result<Vec<f32>> {
    packed::decode(raw).ok_or_else(|| Error::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        message: format!("{} bytes that encode no vector", raw.len()),
    })
}

/// Typed writes that land together or not at all.
#[derive(Default)]
pub struct KbBatch {
    writes: Vec<Write>,
    /// Writes nothing reads until `writes` commit (see [`KbBatch::put_fact_vector_ahead`]).
    ahead: Vec<Write>,
    /// The token the write came through, for the change log.
    author: String,
}

/// A batch as a back end commits it: `ahead` (KB writes only) may commit first, in parts,
/// then `writes` atomically.
struct Commit {
    ahead: Vec<Write>,
    writes: Vec<Write>,
    /// Recorded with the change where the back end keeps a change log.
    author: String,
}

impl KbBatch {
    /// Names the token this batch's write came through.
    pub fn set_author(&mut self, token: &str) {
        token.clone_into(&mut self.author);
    }
    pub fn put_raw(&mut self, keyspace: Keyspace, key: &[u8], value: Vec<u8>) {
        self.writes.push(Write { space: Space::Curation(keyspace), key: key.to_vec(), value: Some(value) });
    }
    pub fn remove_raw(&mut self, keyspace: Keyspace, key: &[u8]) {
        self.writes.push(Write { space: Space::Curation(keyspace), key: key.to_vec(), value: None });
    }
    fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.push(Write { space: Space::Kb, key, value: Some(value) });
    }
    fn remove(&mut self, key: Vec<u8>) {
        self.writes.push(Write { space: Space::Kb, key, value: None });
    }
    fn put<T: Serialize>(&mut self, key: Vec<u8>, value: &T) {
        let bytes = serde_json::to_vec(value).expect("records serialise");
        self.insert(key, bytes);
    }

    pub fn put_doc(&mut self, doc: &Document) {
        self.put(Family::Doc.key(doc.key as u64), doc);
        self.insert(Family::DocId.str_key(&doc.id), doc.key.to_be_bytes().to_vec());
    }
    pub fn remove_doc(&mut self, doc: &Document) {
        self.remove(Family::Doc.key(doc.key as u64));
        self.remove(Family::DocId.str_key(&doc.id));
        self.remove(Family::SummaryVec.key(doc.key as u64));
    }
    /// Forgets the id `id` went by (the document record itself stays).
    pub fn remove_doc_id(&mut self, id: &str) {
        self.remove(Family::DocId.str_key(id));
    }
    pub fn put_chunk(&mut self, chunk: &Chunk) {
        self.put(Family::Chunk.key(chunk.id as u64), chunk);
    }
    pub fn remove_chunk(&mut self, id: ChunkId) {
        self.remove(Family::Chunk.key(id as u64));
        self.remove(Family::ChunkVec.key(id as u64));
    }
    /// Writes the node's names; its chunks are written as mentions ([`KbBatch::put_mention`]).
    pub fn put_node(&mut self, node: &Node) {
        let record = NodeRecord { id: node.id, name: &node.name, aliases: &node.aliases };
        self.put(Family::Node.key(node.id as u64), &record);
    }
    /// Records that `chunk` mentions `node`.
    pub fn put_mention(&mut self, node: NodeId, chunk: ChunkId) {
        self.insert(mention_key(node, chunk), Vec::new());
    }
    pub fn remove_mention(&mut self, node: NodeId, chunk: ChunkId) {
        self.remove(mention_key(node, chunk));
    }
    /// Removes the node's record and vector; its mentions go with its chunks
    /// ([`KbBatch::remove_mention`]).
    pub fn remove_node(&mut self, id: NodeId) {
        self.remove(Family::Node.key(id as u64));
        self.remove(Family::NodeVec.key(id as u64));
    }
    pub fn put_edge(&mut self, edge: &Edge) {
        self.put(Family::Edge.key(edge.id), edge);
    }
    pub fn remove_edge(&mut self, id: EdgeId) {
        self.remove(Family::Edge.key(id));
        self.remove(Family::FactVec.key(id));
    }
    /// Drops the vector stored for `id` in `family`, whose record stays (a fact's vector
    /// moved to an edge that now comes first (see `Kb::fact_edges`), an orphan, a copy).
    pub fn remove_vector(&mut self, family: Family, id: u64) {
        self.remove(family.key(id));
    }
    /// The fact vector of an edge this batch creates. Nothing reads it before the edge
    /// exists, so a back end may commit it ahead of the batch, in parts: a large document's
    /// fact vectors are most of its bytes, and one atomic batch holds every byte in memory
    /// several times over. A crash in between leaves vectors that no edge owns, which
    /// loading skips and `reindex` removes.
    pub fn put_fact_vector_ahead(&mut self, id: EdgeId, row: &packed::Row) {
        self.ahead.push(Write { space: Space::Kb, key: Family::FactVec.key(id), value: Some(row.encoding().to_vec()) });
    }
    pub fn put_vector(&mut self, family: Family, id: u64, v: &[f32]) {
        self.insert(family.key(id), packed::encode(v));
    }
    /// [`KbBatch::put_vector`] of a vector held packed.
    pub fn put_row(&mut self, family: Family, id: u64, row: &packed::Row) {
        self.insert(family.key(id), row.encoding().to_vec());
    }
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.ahead.is_empty()
    }

    /// One write per key, the last one made: a batch that removes a key and writes it again
    /// (a replaced document keeps its id mapping) leaves it written.
    fn into_commit(self) -> Commit {
        let mut last: HashMap<(Space, &[u8]), usize> = HashMap::with_capacity(self.writes.len());
        for (i, w) in self.writes.iter().enumerate() {
            last.insert((w.space, w.key.as_slice()), i);
        }
        // The main writes win over an ahead write of the same key, which commits before them.
        let mut ahead = self.ahead;
        ahead.retain(|w| !last.contains_key(&(w.space, w.key.as_slice())));
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        let mut writes: Vec<Option<Write>> = self.writes.into_iter().map(Some).collect();
        // A batch nobody named was written by the data directory's owner (a reindex, a repair).
        let author = if self.author.is_empty() { OWNER.to_string() } else { self.author };
        Commit { ahead, writes: keep.into_iter().filter_map(|i| writes[i].take()).collect(), author }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn sled_store(dir: &Path) -> Store {
        Store::open(&Location::Sled(dir.to_path_buf())).unwrap()
    }

    /// A document record with no content.
    fn document(key: DocKey, id: &str) -> Document {
        Document { key, id: id.into(), ..Document::default() }
    }

    #[test]
    fn a_batch_with_side_writes_lands_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = sled_store(dir.path());
        let mut b = KbBatch::default();
        b.put_vector(Family::ChunkVec, 7, &[1.0]);
        b.put_raw(Keyspace::Audit, b"k", b"v".to_vec());
        store.commit(b).unwrap();
        assert_eq!(store.scan_vectors(Family::ChunkVec).count(), 1);
        assert_eq!(store.get_raw(Keyspace::Audit, b"k").unwrap().unwrap(), b"v");
    }

    #[test]
    fn vectors_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = sled_store(dir.path());
        let mut b = KbBatch::default();
        b.put_vector(Family::ChunkVec, 7, &[0.5, -1.25, 3.0]);
        let mut mostly_zero = vec![0.0; 512];
        mostly_zero[17] = 0.75;
        mostly_zero[400] = -0.5;
        b.put_vector(Family::ChunkVec, 8, &mostly_zero);
        store.commit(b).unwrap();
        let all: Vec<_> = store.scan_vectors(Family::ChunkVec).collect::<Result<_>>().unwrap();
        assert_eq!(all, vec![(7, vec![0.5, -1.25, 3.0]), (8, mostly_zero.clone())]);
        assert_eq!(store.get_vector(Family::ChunkVec, 8).unwrap(), Some(mostly_zero));
        let stored = store.backend.get(Space::Kb, &Family::ChunkVec.key(8)).unwrap().unwrap();
        assert!(stored.len() < 100, "stored sparse: {} bytes", stored.len());
        // A value that encodes no vector is reported, not read as one.
        store.backend.insert(Space::Kb, &Family::ChunkVec.key(9), &[1, 2, 3]).unwrap();
        let err = store.get_vector(Family::ChunkVec, 9).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }

    #[test]
    fn the_last_write_of_a_key_in_a_batch_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = sled_store(dir.path());
        let doc = |key| document(key, "d");
        let mut b = KbBatch::default();
        b.put_doc(&doc(1));
        store.commit(b).unwrap();
        let mut b = KbBatch::default();
        b.remove_doc(&doc(1));
        b.put_doc(&doc(2));
        store.commit(b).unwrap();
        assert_eq!(store.doc_key_for("d").unwrap(), Some(2));
        assert_eq!(store.docs().count(), 1);
    }

    #[test]
    fn a_sled_store_logs_the_keys_each_change_wrote_and_keeps_the_log_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = sled_store(dir.path());
            assert_eq!(store.latest_change().unwrap(), 0);
            let mut b = KbBatch::default();
            b.put_doc(&document(1, "one"));
            b.put_vector(Family::SummaryVec, 1, &[1.0]);
            assert_eq!(store.commit(b).unwrap(), Some(1));
            let mut b = KbBatch::default();
            b.put_raw(Keyspace::Audit, b"only-curation", b"v".to_vec());
            assert_eq!(store.commit(b).unwrap(), None, "a curation-only write is no KB change");
            let mut b = KbBatch::default();
            b.put_fact_vector_ahead(9, &packed::Row::of(&[0.5]));
            b.put_vector(Family::NodeVec, 4, &[2.0]);
            b.put_raw(Keyspace::Audit, b"with-kb", b"v".to_vec());
            assert_eq!(store.commit(b).unwrap(), Some(2));
            store.flush().unwrap();
        }
        let store = sled_store(dir.path());
        assert_eq!(store.latest_change().unwrap(), 2, "the number survives a reopen");
        let Changed::Records { latest, records } = store.changes_since(1).unwrap() else {
            panic!("one change since 1")
        };
        assert_eq!(latest, 2);
        assert_eq!(records.vectors(Family::NodeVec).collect::<Result<Vec<_>>>().unwrap(), vec![(4, Some(vec![2.0]))]);
        assert_eq!(records.vector(Family::FactVec, 9).unwrap(), Some(vec![0.5]), "ahead writes are logged too");
        assert!(records.ids(Family::Doc).next().is_none(), "the first change is not repeated");
        let Changed::Records { records, .. } = store.changes_since(0).unwrap() else { panic!("two changes") };
        assert_eq!(records.ids(Family::Doc).collect::<Vec<_>>(), vec![1]);
        assert!(matches!(store.changes_since(2).unwrap(), Changed::Nothing));
        assert!(store.waiting_since(1).unwrap() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn a_sled_log_pruned_past_a_change_says_so_and_a_damaged_entry_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = sled_store(dir.path());
        for key in 1..=3 {
            let mut b = KbBatch::default();
            b.put_doc(&document(key, &format!("d{key}")));
            store.commit(b).unwrap();
        }
        let entry = |seq: u64| [META_PREFIX, b"log/", &seq.to_be_bytes()[..]].concat();
        // As the log's window leaves it once it has moved past change 1.
        let mut b = KbBatch::default();
        b.remove(entry(1));
        assert_eq!(store.commit(b).unwrap(), Some(4));
        assert!(matches!(store.changes_since(0).unwrap(), Changed::Everything { latest: 4 }));
        let Changed::Records { records, .. } = store.changes_since(1).unwrap() else { panic!("changes 2 to 4") };
        assert_eq!(records.ids(Family::Doc).collect::<Vec<_>>(), vec![2, 3]);
        store.backend.insert(Space::Kb, &entry(3), b"\x00\x01").unwrap();
        let err = store.changes_since(1).unwrap_err().to_string();
        assert!(err.contains("meta/log/3"), "{err}");
    }

    fn node(id: NodeId, name: &str, chunks: Vec<ChunkId>) -> Node {
        Node { id, name: name.into(), aliases: vec![name.into()], chunks }
    }

    fn stored_node(store: &Store, id: NodeId) -> Vec<u8> {
        store.backend.get(Space::Kb, &Family::Node.key(id as u64)).unwrap().unwrap()
    }

    #[test]
    fn a_node_record_keeps_its_names_and_each_mention_is_a_key_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = sled_store(dir.path());
        let mut b = KbBatch::default();
        b.put_node(&node(5, "Harbour Board", vec![]));
        b.put_node(&node(6, "Quiet Bay", vec![]));
        for (n, c) in [(5, 10), (5, 11), (6, 11)] {
            b.put_mention(n, c);
        }
        let first = store.commit(b).unwrap().unwrap();
        let record = stored_node(&store, 5);
        // Hundreds of chunks naming the node write a key each and leave its record alone.
        for chunk in 12..300 {
            let mut b = KbBatch::default();
            b.put_mention(5, chunk);
            store.commit(b).unwrap();
        }
        let mut b = KbBatch::default();
        b.remove_mention(5, 10);
        b.remove_mention(6, 11);
        b.remove_node(6);
        store.commit(b).unwrap();
        assert_eq!(stored_node(&store, 5), record);
        let nodes: Vec<Node> = store.nodes().collect::<Result<_>>().unwrap();
        assert_eq!(nodes, vec![node(5, "Harbour Board", (11..300).collect())]);
        // Following the log from the first change: the chunks then, with what changed since.
        let Changed::Records { records, .. } = store.changes_since(first).unwrap() else { panic!("changes") };
        let then = [10, 11];
        let now = records.nodes(|id| (id == 5).then_some(&then[..])).unwrap();
        assert_eq!(now, vec![(5, Some(node(5, "Harbour Board", (11..300).collect()))), (6, None)]);
    }

    #[test]
    fn an_old_layout_node_moves_its_chunks_to_mention_keys_once_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let old = node(3, "Lantern Street", vec![4, 9, 20]);
        {
            let store = sled_store(dir.path());
            store.backend.insert(Space::Kb, &Family::Node.key(3), &serde_json::to_vec(&old).unwrap()).unwrap();
            // As a store an older build wrote: no mark.
            let mut b = KbBatch::default();
            b.remove(META_MENTIONS.to_vec());
            store.commit(b).unwrap();
            assert_eq!(store.nodes().collect::<Result<Vec<_>>>().unwrap(), vec![old.clone()], "read as it is");
            store.flush().unwrap();
        }
        let store = sled_store(dir.path());
        assert!(!String::from_utf8_lossy(&stored_node(&store, 3)).contains("chunks"));
        assert_eq!(store.backend.scan(Space::Kb, MENTION_PREFIX).count(), 3);
        assert_eq!(store.nodes().collect::<Result<Vec<_>>>().unwrap(), vec![old]);
        let latest = store.latest_change().unwrap();
        drop(store);
        assert_eq!(sled_store(dir.path()).latest_change().unwrap(), latest, "moved once");
    }

    #[test]
    fn numeric_keys_parse_back_and_name_their_companions() {
        for family in Family::NUMERIC {
            assert_eq!(Family::parse(&family.key(42)), Some((family, 42)));
            let companion = family.companion().unwrap();
            assert_eq!(companion.companion(), Some(family));
        }
        assert_eq!(Family::parse(&Family::DocId.str_key("doc")), None);
        assert_eq!(Family::parse(META_EMBEDDER), None);
        assert_eq!(parse_mention(&mention_key(7, u32::MAX)), Some((7, u32::MAX)));
        assert_eq!(Family::parse(&mention_key(7, 8)), None);
    }

    #[test]
    fn a_copied_kb_has_every_entry_and_hands_out_fresh_ids() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (Location::Sled(dir.path().join("a")), Location::Sled(dir.path().join("b")));
        let used = {
            let source = Store::open(&from).unwrap();
            source.set_embedder_id("hash-64").unwrap();
            let mut b = KbBatch::default();
            b.put_doc(&document(9, "d"));
            b.put_vector(Family::NodeVec, 3, &[1.0, 2.0]);
            b.put_raw(Keyspace::Proposals, b"p", b"proposal".to_vec());
            source.commit(b).unwrap();
            (0..100).map(|_| source.next_id().unwrap()).max().unwrap()
        };
        assert_eq!(copy_kb(&from, &to, |_| {}).unwrap(), 4);
        let target = Store::open(&to).unwrap();
        assert_eq!(target.embedder_id().unwrap().as_deref(), Some("hash-64"));
        assert_eq!(target.get_vector(Family::NodeVec, 3).unwrap(), Some(vec![1.0, 2.0]));
        assert_eq!(target.get_raw(Keyspace::Proposals, b"p").unwrap().unwrap(), b"proposal");
        assert!(target.next_id().unwrap() > used);
        assert_eq!(target.doc_key_for("d").unwrap(), Some(9));
        drop(target);
        let err = copy_kb(&from, &to, |_| {}).unwrap_err().to_string();
        assert!(err.contains("already holds documents"), "{err}");
    }
}
