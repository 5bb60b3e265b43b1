//! Re-embedding a knowledge base with another embedder (`a2rag reindex`).
//!
//! [`Kb::open`](super::Kb::open) refuses a KB whose recorded embedder differs from the
//! configured one, because vectors from two embedding spaces are not comparable. Reindexing
//! rewrites every stored vector from the stored text, exactly as ingest computed it:
//! chunks as "title\ntext", document summaries (a one-chunk document's is its chunk's text),
//! node names (a node's vector is its first mention, which is its name), and one vector per
//! distinct edge fact ("subject relation object", under the fact's first edge).
//!
//! Crash safety: vectors are written in batches and the new embedder id only after all of
//! them are on disk. An interrupted reindex therefore still carries the old id, so opening
//! with the new embedder keeps failing with the "run `a2rag reindex`" message, and running
//! reindex again simply redoes the whole rewrite (it is idempotent).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::FactKey;
use super::model::{
    Chunk, DocKey, Document, Edge, Node, NodeId, RawTriple, fact_text, passage_text, summary_embedded_apart,
};
use super::name::KbName;
use super::store::{Family, KbBatch, Location, Store};
use crate::config::Settings;
use crate::embed::Embedder;
use crate::error::{Error, Result};

/// Records embedded and committed per sled batch: bounds memory and the work an interruption
/// loses, while keeping the embedder's own batches full.
const RECORDS_PER_COMMIT: usize = 256;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReindexReport {
    /// The embedder the KB was recorded with before (None for a KB that had none yet).
    pub previous_embedder: Option<String>,
    pub embedder: String,
    pub chunks: usize,
    pub summaries: usize,
    pub nodes: usize,
    pub facts: usize,
    /// Vectors whose owning record no longer exists; dropped so that a stale vector in the
    /// old dimension cannot break the next open.
    pub orphans_removed: usize,
    pub seconds: f64,
}

/// Re-embeds every chunk, document summary and node of the configured store's default KB with
/// `embedder` and records its id. Needs exclusive access (sled locks the directory, so a
/// running server or a concurrent ingest makes this fail rather than interleave).
pub fn reindex(settings: &Settings, embedder: Arc<dyn Embedder>) -> Result<ReindexReport> {
    reindex_at(&Location::of(settings, &KbName::default()), embedder)
}

/// [`reindex`] for the KB at `location`.
pub fn reindex_at(location: &Location, embedder: Arc<dyn Embedder>) -> Result<ReindexReport> {
    let started = Instant::now();
    let store = Store::open(location)?;
    let previous_embedder = store.embedder_id()?;
    let dim = embedder.dim();

    let docs: HashMap<DocKey, Document> = store.docs().map(|d| d.map(|d| (d.key, d))).collect::<Result<_>>()?;

    let mut chunks = 0;
    let mut pending: Vec<(u64, String)> = Vec::with_capacity(RECORDS_PER_COMMIT);
    for chunk in store.chunks() {
        let chunk: Chunk = chunk?;
        let doc = docs.get(&chunk.doc);
        let text = passage_text(doc.map_or("", |d| d.title.as_str()), &chunk.section, &chunk.text);
        pending.push((chunk.id as u64, text));
        if pending.len() == RECORDS_PER_COMMIT {
            chunks += write_vectors(&store, embedder.as_ref(), Family::ChunkVec, &mut pending, dim)?;
        }
    }
    chunks += write_vectors(&store, embedder.as_ref(), Family::ChunkVec, &mut pending, dim)?;

    let mut summaries = 0;
    let mut keys: Vec<&DocKey> = docs.keys().collect();
    keys.sort_unstable();
    // A one-chunk document's chunk vector stands for its summary (as ingest stores it); the
    // copy an older build stored goes.
    let mut copies = KbBatch::default();
    for key in keys {
        let doc = &docs[key];
        if !summary_embedded_apart(doc.chunks.len()) {
            copies.remove_vector(Family::SummaryVec, doc.key as u64);
            continue;
        }
        pending.push((doc.key as u64, doc.summary.to_string()));
        if pending.len() == RECORDS_PER_COMMIT {
            summaries += write_vectors(&store, embedder.as_ref(), Family::SummaryVec, &mut pending, dim)?;
        }
    }
    summaries += write_vectors(&store, embedder.as_ref(), Family::SummaryVec, &mut pending, dim)?;
    store.commit(copies)?;

    let mut nodes = 0;
    for node in store.nodes() {
        let node: Node = node?;
        pending.push((node.id as u64, node.name));
        if pending.len() == RECORDS_PER_COMMIT {
            nodes += write_vectors(&store, embedder.as_ref(), Family::NodeVec, &mut pending, dim)?;
        }
    }
    nodes += write_vectors(&store, embedder.as_ref(), Family::NodeVec, &mut pending, dim)?;

    // Facts are re-embedded from the node names (the triple's own surface forms are not
    // stored); the names are the first surface form of each entity, so the text barely moves.
    let names: HashMap<u64, String> = store.nodes().map(|n| n.map(|n| (n.id as u64, n.name))).collect::<Result<_>>()?;
    let mut facts = 0;
    // One vector per distinct fact, under its first edge (see `Kb::fact_edges`).
    let mut seen = HashSet::new();
    let (mut edge_ids, mut representatives) = (HashSet::new(), HashSet::new());
    for edge in store.edges() {
        let edge: Edge = edge?;
        edge_ids.insert(edge.id);
        if !seen.insert(FactKey::of(&edge)) {
            continue;
        }
        representatives.insert(edge.id);
        let name = |id: NodeId| names.get(&(id as u64)).cloned().unwrap_or_default();
        let triple =
            RawTriple { subject: name(edge.subject), relation: edge.relation.to_string(), object: name(edge.object) };
        pending.push((edge.id, fact_text(&triple)));
        if pending.len() == RECORDS_PER_COMMIT {
            facts += write_vectors(&store, embedder.as_ref(), Family::FactVec, &mut pending, dim)?;
        }
    }
    facts += write_vectors(&store, embedder.as_ref(), Family::FactVec, &mut pending, dim)?;
    // Any other fact vector would keep the previous embedder's numbers: one an older build
    // stored under a later edge of its fact, or one committed ahead of edges a crash lost
    // (see `KbBatch::put_fact_vector_ahead`), which no edge owns.
    let mut stale = KbBatch::default();
    let mut fact_orphans = 0;
    for item in store.scan_vectors(Family::FactVec) {
        let (id, _) = item?;
        if !representatives.contains(&id) {
            stale.remove_vector(Family::FactVec, id);
            fact_orphans += usize::from(!edge_ids.contains(&id));
        }
    }
    store.commit(stale)?;

    let orphans_removed = remove_orphans(&store, &docs)? + fact_orphans;

    // Vectors must be durable before the id that vouches for them.
    store.flush()?;
    store.set_embedder_id(&embedder.id())?;
    store.flush()?;

    Ok(ReindexReport {
        previous_embedder,
        embedder: embedder.id(),
        chunks,
        summaries,
        nodes,
        facts,
        orphans_removed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Embeds and commits `pending` (drained), returning how many vectors were written.
fn write_vectors(
    store: &Store,
    embedder: &dyn Embedder,
    family: Family,
    pending: &mut Vec<(u64, String)>,
    dim: usize,
) -> Result<usize> {
    if pending.is_empty() {
        return Ok(0);
    }
    let texts: Vec<&str> = pending.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = embedder.embed(&texts)?;
    if vectors.len() != pending.len() {
        return Err(Error::Embed(format!("embedder returned {} vectors for {} texts", vectors.len(), pending.len())));
    }
    let mut batch = KbBatch::default();
    for ((id, _), v) in pending.iter().zip(&vectors) {
        if v.len() != dim {
            return Err(Error::Embed(format!(
                "embedder `{}` declared dim {dim} but returned a vector of {}",
                embedder.id(),
                v.len()
            )));
        }
        batch.put_vector(family, *id, v);
    }
    store.commit(batch)?;
    let n = pending.len();
    pending.clear();
    Ok(n)
}

/// Drops vectors without an owning chunk, document or node (fact vectors are settled while
/// they are rewritten). The KB's writers remove vectors together with their records, so this
/// only finds leftovers of older builds or manual edits.
fn remove_orphans(store: &Store, docs: &HashMap<DocKey, Document>) -> Result<usize> {
    let mut batch = KbBatch::default();
    let mut removed = 0;
    for item in store.scan_vectors(Family::ChunkVec) {
        let (id, _) = item?;
        // Ids beyond u32 cannot be addressed through the record-removal API; none are ever
        // written (chunk, node and doc ids are u32), so skipping them loses nothing real.
        let Ok(chunk_id) = u32::try_from(id) else {
            continue;
        };
        if store.get::<Chunk>(Family::Chunk, id)?.is_none() {
            // Removing a chunk that does not exist only deletes its vector key.
            batch.remove_chunk(chunk_id);
            removed += 1;
        }
    }
    for item in store.scan_vectors(Family::NodeVec) {
        let (id, _) = item?;
        let Ok(node_id) = u32::try_from(id) else {
            continue;
        };
        if store.get::<Node>(Family::Node, id)?.is_none() {
            batch.remove_node(node_id);
            removed += 1;
        }
    }
    for item in store.scan_vectors(Family::SummaryVec) {
        let (id, _) = item?;
        let Ok(key) = DocKey::try_from(id) else {
            continue;
        };
        if !docs.contains_key(&key) {
            // `remove_doc` also deletes the doc-id mapping of the record it is given; a
            // placeholder id that maps to no document makes that a no-op.
            let placeholder = format!("\u{0}orphan-summary-{id}");
            if store.doc_key_for(&placeholder)?.is_some() {
                continue;
            }
            batch.remove_doc(&Document { key, id: placeholder, ..Document::default() });
            removed += 1;
        }
    }
    if removed > 0 {
        store.commit(batch)?;
    }
    Ok(removed)
}
