//! sled persistence. One tree holds the knowledge base under typed key prefixes so that a
//! whole document (chunks, nodes touched, edges, embeddings, manifest entry) commits in one
//! atomic `apply_batch`: a crash or a bad file never leaves half a document.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::model::{Chunk, ChunkId, DocKey, Document, Edge, EdgeId, Node, NodeId};
use crate::error::{Error, Result};

/// Bump when the on-disk layout changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

const META_SCHEMA: &[u8] = b"meta/schema";
const META_EMBEDDER: &[u8] = b"meta/embedder";

/// Key prefixes. Numeric ids are big-endian so that prefix scans return them in order.
#[derive(Debug, Clone, Copy)]
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
}

/// Keyspaces beside the knowledge base proper: curation's records (see `curate`). They live
/// in their own sled trees, and a [`KbBatch`] can write them together with KB records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    fn tree_name(self) -> &'static str {
        match self {
            Keyspace::Proposals => "proposals",
            Keyspace::Decisions => "decisions",
            Keyspace::Audit => "audit",
        }
    }
}

pub struct Store {
    db: sled::Db,
    kb: sled::Tree,
    /// One tree per [`Keyspace`], in `Keyspace::ALL` order.
    keyspaces: [sled::Tree; 3],
    dir: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the database in `dir`, refusing a newer schema.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let db = sled::Config::new().path(dir.join("db")).open()?;
        // The KB holds the users' documents: owner-only, whatever the umask. Only sled's own
        // files are touched below `dir`.
        set_mode(dir, 0o700)?;
        restrict_to_owner(&dir.join("db"))?;
        let kb = db.open_tree("kb")?;
        let keyspaces = [
            db.open_tree(Keyspace::ALL[0].tree_name())?,
            db.open_tree(Keyspace::ALL[1].tree_name())?,
            db.open_tree(Keyspace::ALL[2].tree_name())?,
        ];
        match kb.get(META_SCHEMA)? {
            Some(raw) => {
                let found = u32::from_be_bytes(
                    raw.as_ref()
                        .try_into()
                        .map_err(|_| Error::Corrupt { key: "meta/schema".into(), message: "not a u32".into() })?,
                );
                if found > SCHEMA_VERSION {
                    return Err(Error::SchemaTooNew { dir: dir.to_path_buf(), found, supported: SCHEMA_VERSION });
                }
            }
            None => {
                kb.insert(META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())?;
            }
        }
        Ok(Store { db, kb, keyspaces, dir: dir.to_path_buf() })
    }

    fn tree(&self, keyspace: Keyspace) -> &sled::Tree {
        &self.keyspaces[keyspace as usize]
    }

    pub fn get_raw(&self, keyspace: Keyspace, key: &[u8]) -> Result<Option<sled::IVec>> {
        Ok(self.tree(keyspace).get(key)?)
    }

    /// Every (key, value) of a keyspace in key order.
    pub fn scan_raw(&self, keyspace: Keyspace) -> impl Iterator<Item = Result<(sled::IVec, sled::IVec)>> + '_ {
        self.tree(keyspace).iter().map(|item| Ok(item?))
    }

    pub fn insert_raw(&self, keyspace: Keyspace, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.tree(keyspace).insert(key, value)?;
        Ok(())
    }

    /// Inserts `value` only if `key` is absent; `false` when it was already there.
    pub fn insert_new_raw(&self, keyspace: Keyspace, key: &[u8], value: Vec<u8>) -> Result<bool> {
        Ok(self.tree(keyspace).compare_and_swap(key, None as Option<&[u8]>, Some(value))?.is_ok())
    }

    /// Whether `dir` holds a knowledge base (commands that only read refuse to create one).
    pub fn exists(dir: &Path) -> bool {
        dir.join("db").is_dir()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh id, unique for the life of the database (gaps after a crash are harmless).
    pub fn next_id(&self) -> Result<u64> {
        Ok(self.db.generate_id()?)
    }

    pub fn embedder_id(&self) -> Result<Option<String>> {
        Ok(self.kb.get(META_EMBEDDER)?.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    pub fn set_embedder_id(&self, id: &str) -> Result<()> {
        self.kb.insert(META_EMBEDDER, id.as_bytes())?;
        Ok(())
    }

    pub fn doc_key_for(&self, id: &str) -> Result<Option<DocKey>> {
        Ok(self.kb.get(Family::DocId.str_key(id))?.and_then(|v| v.as_ref().try_into().ok().map(u32::from_be_bytes)))
    }

    pub fn get<T: DeserializeOwned>(&self, family: Family, id: u64) -> Result<Option<T>> {
        let key = family.key(id);
        self.kb.get(&key)?.map(|raw| decode(&key, &raw)).transpose()
    }

    pub fn scan<T: DeserializeOwned>(&self, family: Family) -> impl Iterator<Item = Result<T>> + '_ {
        self.kb.scan_prefix(family.prefix()).map(|item| {
            let (k, v) = item?;
            decode(&k, &v)
        })
    }

    /// The vector stored for `id` in `family`, if any.
    pub fn get_vector(&self, family: Family, id: u64) -> Result<Option<Vec<f32>>> {
        Ok(self.kb.get(family.key(id))?.map(|raw| bytes_to_vec(&raw)))
    }

    /// All vectors of one family as (id, vector).
    pub fn scan_vectors(&self, family: Family) -> impl Iterator<Item = Result<(u64, Vec<f32>)>> + '_ {
        let plen = family.prefix().len();
        self.kb.scan_prefix(family.prefix()).map(move |item| {
            let (k, v) = item?;
            let id_bytes: [u8; 8] = k[plen..].try_into().map_err(|_| Error::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                message: "bad vector key".into(),
            })?;
            Ok((u64::from_be_bytes(id_bytes), bytes_to_vec(&v)))
        })
    }

    /// Applies the batch atomically. A batch that also writes other keyspaces commits as one
    /// sled transaction over all the trees it touches, so a crash keeps all or none of it.
    pub fn commit(&self, batch: KbBatch) -> Result<()> {
        use sled::Transactional;
        use sled::transaction::{ConflictableTransactionError, TransactionError};
        if batch.side.is_empty() {
            self.kb.apply_batch(batch.inner)?;
            return Ok(());
        }
        let [proposals, decisions, audit] = &self.keyspaces;
        (&self.kb, proposals, decisions, audit)
            .transaction(|(kb, proposals, decisions, audit)| {
                kb.apply_batch(&batch.inner)?;
                for (keyspace, key, value) in &batch.side {
                    let tree = match keyspace {
                        Keyspace::Proposals => proposals,
                        Keyspace::Decisions => decisions,
                        Keyspace::Audit => audit,
                    };
                    tree.insert(key.as_slice(), value.as_slice())?;
                }
                Ok::<_, ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                TransactionError::Storage(e) => Error::Store(e),
                TransactionError::Abort(()) => Error::Invalid("transaction aborted".into()),
            })
    }

    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    pub fn docs(&self) -> impl Iterator<Item = Result<Document>> + '_ {
        self.scan(Family::Doc)
    }
    pub fn chunks(&self) -> impl Iterator<Item = Result<Chunk>> + '_ {
        self.scan(Family::Chunk)
    }
    pub fn nodes(&self) -> impl Iterator<Item = Result<Node>> + '_ {
        self.scan(Family::Node)
    }
    pub fn edges(&self) -> impl Iterator<Item = Result<Edge>> + '_ {
        self.scan(Family::Edge)
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

fn decode<T: DeserializeOwned>(key: &[u8], raw: &[u8]) -> Result<T> {
    serde_json::from_slice(raw)
        .map_err(|e| Error::Corrupt { key: String::from_utf8_lossy(key).into_owned(), message: e.to_string() })
}

fn vec_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Typed writes that land together or not at all.
#[derive(Default)]
pub struct KbBatch {
    inner: sled::Batch,
    len: usize,
    /// Writes to the other keyspaces, committed in the same transaction.
    side: Vec<(Keyspace, Vec<u8>, Vec<u8>)>,
}

impl KbBatch {
    pub fn put_raw(&mut self, keyspace: Keyspace, key: &[u8], value: Vec<u8>) {
        self.side.push((keyspace, key.to_vec(), value));
        self.len += 1;
    }
    fn put<T: Serialize>(&mut self, key: Vec<u8>, value: &T) {
        let bytes = serde_json::to_vec(value).expect("records serialise");
        self.inner.insert(key, bytes);
        self.len += 1;
    }

    pub fn put_doc(&mut self, doc: &Document) {
        self.put(Family::Doc.key(doc.key as u64), doc);
        self.inner.insert(Family::DocId.str_key(&doc.id), doc.key.to_be_bytes().to_vec());
    }
    pub fn remove_doc(&mut self, doc: &Document) {
        self.inner.remove(Family::Doc.key(doc.key as u64));
        self.inner.remove(Family::DocId.str_key(&doc.id));
        self.inner.remove(Family::SummaryVec.key(doc.key as u64));
        self.len += 1;
    }
    pub fn put_chunk(&mut self, chunk: &Chunk) {
        self.put(Family::Chunk.key(chunk.id as u64), chunk);
    }
    pub fn remove_chunk(&mut self, id: ChunkId) {
        self.inner.remove(Family::Chunk.key(id as u64));
        self.inner.remove(Family::ChunkVec.key(id as u64));
        self.len += 1;
    }
    pub fn put_node(&mut self, node: &Node) {
        self.put(Family::Node.key(node.id as u64), node);
    }
    pub fn remove_node(&mut self, id: NodeId) {
        self.inner.remove(Family::Node.key(id as u64));
        self.inner.remove(Family::NodeVec.key(id as u64));
        self.len += 1;
    }
    pub fn put_edge(&mut self, edge: &Edge) {
        self.put(Family::Edge.key(edge.id), edge);
    }
    pub fn remove_edge(&mut self, id: EdgeId) {
        self.inner.remove(Family::Edge.key(id));
        self.inner.remove(Family::FactVec.key(id));
        self.len += 1;
    }
    pub fn put_vector(&mut self, family: Family, id: u64, v: &[f32]) {
        self.inner.insert(family.key(id), vec_to_bytes(v));
        self.len += 1;
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_schema_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.kb.insert(META_SCHEMA, &(SCHEMA_VERSION + 1).to_be_bytes()).unwrap();
            store.flush().unwrap();
        }
        let err = Store::open(dir.path()).err().unwrap();
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
        drop(Store::open(&data).unwrap());
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
    fn a_batch_with_side_writes_lands_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = KbBatch::default();
        b.put_vector(Family::ChunkVec, 7, &[1.0]);
        b.put_raw(Keyspace::Audit, b"k", b"v".to_vec());
        store.commit(b).unwrap();
        assert_eq!(store.scan_vectors(Family::ChunkVec).count(), 1);
        assert_eq!(store.get_raw(Keyspace::Audit, b"k").unwrap().unwrap().as_ref(), b"v");
    }

    #[test]
    fn vectors_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut b = KbBatch::default();
        b.put_vector(Family::ChunkVec, 7, &[0.5, -1.25, 3.0]);
        store.commit(b).unwrap();
        let all: Vec<_> = store.scan_vectors(Family::ChunkVec).collect::<Result<_>>().unwrap();
        assert_eq!(all, vec![(7, vec![0.5, -1.25, 3.0])]);
    }
}
