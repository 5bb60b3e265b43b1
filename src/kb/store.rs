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

pub struct Store {
    db: sled::Db,
    kb: sled::Tree,
    dir: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the database in `dir`, refusing a newer schema.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let db = sled::Config::new().path(dir.join("db")).open()?;
        let kb = db.open_tree("kb")?;
        match kb.get(META_SCHEMA)? {
            Some(raw) => {
                let found = u32::from_be_bytes(raw.as_ref().try_into().map_err(|_| Error::Corrupt {
                    key: "meta/schema".into(),
                    message: "not a u32".into(),
                })?);
                if found > SCHEMA_VERSION {
                    return Err(Error::SchemaTooNew {
                        dir: dir.to_path_buf(),
                        found,
                        supported: SCHEMA_VERSION,
                    });
                }
            }
            None => {
                kb.insert(META_SCHEMA, &SCHEMA_VERSION.to_be_bytes())?;
            }
        }
        Ok(Store {
            db,
            kb,
            dir: dir.to_path_buf(),
        })
    }

    /// Whether `dir` holds a knowledge base (commands that only read refuse to create one).
    pub fn exists(dir: &Path) -> bool {
        dir.join("db").is_dir()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn db(&self) -> &sled::Db {
        &self.db
    }

    /// A fresh id, unique for the life of the database (gaps after a crash are harmless).
    pub fn next_id(&self) -> Result<u64> {
        Ok(self.db.generate_id()?)
    }

    pub fn embedder_id(&self) -> Result<Option<String>> {
        Ok(self
            .kb
            .get(META_EMBEDDER)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    pub fn set_embedder_id(&self, id: &str) -> Result<()> {
        self.kb.insert(META_EMBEDDER, id.as_bytes())?;
        Ok(())
    }

    pub fn doc_key_for(&self, id: &str) -> Result<Option<DocKey>> {
        Ok(self
            .kb
            .get(Family::DocId.str_key(id))?
            .and_then(|v| v.as_ref().try_into().ok().map(u32::from_be_bytes)))
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

    pub fn commit(&self, batch: KbBatch) -> Result<()> {
        self.kb.apply_batch(batch.inner)?;
        Ok(())
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

fn decode<T: DeserializeOwned>(key: &[u8], raw: &[u8]) -> Result<T> {
    serde_json::from_slice(raw).map_err(|e| Error::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        message: e.to_string(),
    })
}

fn vec_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Typed writes that land together or not at all.
#[derive(Default)]
pub struct KbBatch {
    inner: sled::Batch,
    len: usize,
}

impl KbBatch {
    fn put<T: Serialize>(&mut self, key: Vec<u8>, value: &T) {
        let bytes = serde_json::to_vec(value).expect("records serialise");
        self.inner.insert(key, bytes);
        self.len += 1;
    }

    pub fn put_doc(&mut self, doc: &Document) {
        self.put(Family::Doc.key(doc.key as u64), doc);
        self.inner
            .insert(Family::DocId.str_key(&doc.id), doc.key.to_be_bytes().to_vec());
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
