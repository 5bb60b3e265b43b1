//! Staged writes. A [`Staging`] reads the committed KB, records every change in an overlay
//! and a [`KbBatch`]; the batch commits atomically (new edges' fact vectors may go ahead of
//! it, see [`KbBatch::put_fact_vector_ahead`]), then [`Changes`] are applied to memory.

use std::borrow::Cow;
use std::collections::HashMap;

use super::align::{Mention, NameSketch, same_entity};
use super::audit::{Action, AuditEntry, Author};
use super::model::{
    Chunk, ChunkId, Document, Edge, EdgeId, EdgeOrigin, Link, Node, NodeId, RawTriple, fact_text, relation_label,
};
use super::staged_names::StagedNames;
use super::store::{self, Family, KbBatch};
use super::{FactKey, Kb, Table, packed};
use crate::error::{Error, Result};
use crate::text::normalize_entity;

/// Staged vectors in one index beyond which a write links them at once (see `kb::vector`).
const STAGED_LINK_THRESHOLD: usize = 8192;

/// A document ready to commit: chunked, extracted, summarised and embedded.
#[derive(Debug, Clone)]
pub struct PreparedDoc {
    pub id: String,
    pub title: String,
    pub source: String,
    pub content_hash: String,
    pub summary: String,
    /// The summary's vector where it is embedded apart (`model::summary_embedded_apart`);
    /// `None` for a one-chunk document, whose chunk's vector stands for it and is stored and
    /// indexed once, as the chunk's.
    pub summary_vector: Option<Vec<f32>>,
    pub chunks: Vec<PreparedChunk>,
    pub triples: Vec<PreparedTriple>,
    /// Embeddings of the short texts the commit may need (entity mentions, triple ends,
    /// normalised relation labels, facts as [`fact_text`]), computed with the rest of the document's vectors so that
    /// the committing thread embeds nothing; a text missing here is embedded when needed.
    /// Held as the rows the store keeps (a tenth of the f32 for the hash embedder's names
    /// and facts): a large document's short texts are hundreds of thousands.
    pub text_vectors: HashMap<String, packed::Row>,
}

#[derive(Debug, Clone)]
pub struct PreparedChunk {
    pub span: (usize, usize),
    pub text: String,
    /// The headings it sits under (see [`Chunk::section`]).
    pub section: String,
    /// Its hyperlinks (see [`Chunk::links`]).
    pub links: Vec<Link>,
    pub vector: Vec<f32>,
    pub entities: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct PreparedTriple {
    pub triple: RawTriple,
    /// Index into `PreparedDoc::chunks`.
    pub chunk: usize,
    pub origin: EdgeOrigin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IngestOutcome {
    Added,
    Replaced,
    Unchanged,
}

/// What a write changed, applied to memory once it is on disk: by this process's writes, or
/// by [`super::follow`] for other daemons' writes.
#[derive(Default)]
pub(super) struct Changes {
    pub(super) docs_removed: Vec<Document>,
    pub(super) docs_added: Vec<(Document, Option<Vec<f32>>)>,
    /// Documents whose record changed but whose chunks and summary did not.
    pub(super) docs_updated: Vec<Document>,
    pub(super) chunks_removed: Vec<ChunkId>,
    pub(super) chunks_added: Vec<(Chunk, Vec<f32>)>,
    /// Final state of every touched node; `None` = deleted.
    pub(super) nodes: Table<NodeId, Option<Node>>,
    pub(super) node_vectors: Table<NodeId, packed::Row>,
    pub(super) edges_removed: Vec<EdgeId>,
    pub(super) edges_added: Vec<Edge>,
    /// Fact vectors this write stored, by edge (see `Kb::fact_edges`; applying reads only
    /// the entries of edges that come first for their fact).
    pub(super) fact_vectors: Table<EdgeId, packed::Row>,
    /// Embeddings prepared with the document (see `PreparedDoc::text_vectors`): read for new
    /// nodes while staging, for relation labels new to the KB when applying.
    pub(super) text_vectors: HashMap<String, packed::Row>,
    /// The store's number for this change, where it keeps a change log.
    pub(super) change: Option<u64>,
}

struct Staging<'kb> {
    kb: &'kb Kb,
    batch: KbBatch,
    changes: Changes,
    /// Alias keys created in this staging (new nodes and new aliases).
    keys: Table<String, NodeId>,
    /// The blocks of the names and aliases of the nodes this staging created, so that
    /// finding a merge target costs the size of one block, not of everything staged (a large
    /// document creates tens of thousands of nodes), and a few instructions per member.
    names: StagedNames,
    /// Edges this write deletes.
    removed_edges: foldhash::HashSet<EdgeId>,
    /// The first edge this write adds for each fact it states.
    new_facts: Table<FactKey, EdgeId>,
}

impl<'kb> Staging<'kb> {
    fn new(kb: &'kb Kb) -> Self {
        Staging {
            kb,
            batch: KbBatch::default(),
            changes: Changes::default(),
            keys: Table::default(),
            names: StagedNames::new(),
            removed_edges: foldhash::HashSet::default(),
            new_facts: Table::default(),
        }
    }

    fn node_ref(&self, id: NodeId) -> Option<&Node> {
        match self.changes.nodes.get(&id) {
            Some(staged) => staged.as_ref(),
            None => self.kb.node(id),
        }
    }

    /// The staged copy of a node, copied from the committed KB on first touch only: a node
    /// mentioned in every chunk of a large document is not cloned once per mention.
    fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        if !self.changes.nodes.contains_key(&id) {
            let committed = self.kb.node(id)?.clone();
            self.changes.nodes.insert(id, Some(committed));
        }
        self.changes.nodes.get_mut(&id)?.as_mut()
    }

    fn live(&self, id: NodeId) -> bool {
        self.node_ref(id).is_some()
    }

    fn put_node(&mut self, node: Node) {
        self.changes.nodes.insert(node.id, Some(node));
    }

    fn stage_delete_doc(&mut self, doc: &Document) {
        for edge in &doc.edges {
            self.batch.remove_edge(*edge);
            self.changes.edges_removed.push(*edge);
            self.removed_edges.insert(*edge);
        }
        // Each node loses all of the document's chunks in one pass: a node mentioned in
        // thousands of the chunks of a large document is copied and filtered once, not once
        // per chunk.
        let removed: foldhash::HashSet<ChunkId> = doc.chunks.iter().copied().collect();
        let mut touched: Vec<NodeId> = Vec::new();
        for chunk in &doc.chunks {
            self.batch.remove_chunk(*chunk);
            self.changes.chunks_removed.push(*chunk);
            touched.extend_from_slice(self.kb.nodes_in_chunk(*chunk));
        }
        touched.sort_unstable();
        touched.dedup();
        for node_id in touched {
            let Some(node) = self.node_mut(node_id) else {
                continue;
            };
            let (lost, kept): (Vec<ChunkId>, Vec<ChunkId>) = node.chunks.iter().partition(|c| removed.contains(c));
            node.chunks = kept;
            if node.chunks.is_empty() {
                self.changes.nodes.insert(node_id, None);
            }
            for chunk in lost {
                self.batch.remove_mention(node_id, chunk);
            }
        }
        self.batch.remove_doc(doc);
        self.changes.docs_removed.push(doc.clone());
    }

    /// Resolves a mention to a node (exact alias, confident hybrid match, or a new node) and
    /// records `chunk` as its provenance. `None` for mentions with no content.
    fn resolve(&mut self, mention: &str, chunk: ChunkId) -> Result<Option<NodeId>> {
        let key = normalize_entity(mention);
        if key.is_empty() {
            return Ok(None);
        }
        let exact =
            self.keys.get(&key).copied().or_else(|| self.kb.node_keys.get(&key).copied()).filter(|id| self.live(*id));
        let id = match exact {
            Some(id) => id,
            None => self.match_or_create(mention, &key)?,
        };
        let node = self.node_mut(id).ok_or_else(|| Error::Corrupt {
            key: format!("node/{id}"),
            message: "resolved to a missing node".into(),
        })?;
        let new_alias = !node.aliases.iter().any(|a| a == mention);
        if new_alias {
            node.aliases.push(mention.to_string());
        }
        let new_mention = match node.chunks.binary_search(&chunk) {
            Ok(_) => false,
            Err(pos) => {
                node.chunks.insert(pos, chunk);
                true
            }
        };
        if new_mention {
            self.batch.put_mention(id, chunk);
        }
        if new_alias {
            self.names.index_alias(id, mention);
        }
        self.keys.insert(key, id);
        Ok(Some(id))
    }

    /// The vector prepared for `text` with the document, taken out of `text_vectors`, or,
    /// where the document did not prepare it, embedded now.
    fn take_prepared_row(&mut self, text: &str) -> Result<packed::Row> {
        match self.changes.text_vectors.remove(text) {
            Some(row) => Ok(row),
            None => Ok(packed::Row::of(&self.kb.embedder.embed_one(text)?)),
        }
    }

    fn match_or_create(&mut self, mention: &str, key: &str) -> Result<NodeId> {
        // Taken, not copied: `resolve` keys the mention to its node, so it never asks again,
        // and a relation label that happens to be the same text is embedded again when applied.
        let row = self.take_prepared_row(mention)?;
        let sketch = NameSketch::of(mention, key);
        if self.kb.settings.alias.enabled
            && let Some(id) = self.merge_target(mention, key, &sketch, &row)
        {
            return Ok(id);
        }
        let id = self.kb.store.next_narrow_id()?;
        self.put_node(Node { id, name: mention.to_string(), aliases: Vec::new(), chunks: Vec::new() });
        self.changes.node_vectors.insert(id, row);
        // `resolve` indexes the name under its blocks as the node's first alias.
        self.names.create(id, key, sketch);
        Ok(id)
    }

    /// The first node, committed ones by id then the ones this staging created, that shares
    /// a blocking key with the mention (its name sketched as `sketch`) and that the hybrid
    /// matcher says is the same entity.
    /// Only the nodes whose name sketches leave a match possible are read, and candidate
    /// vectors (and the mention's own, `row`, decoded) only for the few pairs whose names are
    /// close enough.
    fn merge_target(&self, mention: &str, key: &str, sketch: &NameSketch, row: &packed::Row) -> Option<NodeId> {
        let blocks = super::align::blocking_keys(mention);
        let alias = &self.kb.settings.alias;
        let staged = self.names.candidates(&blocks, sketch, key, alias);
        let me = Mention { surface: mention, key };
        // Decoded at the dimension of the KB's embedder, which made the row (the pipeline's
        // embedders check their output's dimension): a row of another is no vector here.
        let vector = std::cell::OnceCell::new();
        self.kb.alias_candidates_like(&blocks, sketch).into_iter().chain(staged).find(|&id| {
            let Some(node) = self.node_ref(id) else {
                return false;
            };
            let node_key = match self.names.key(id) {
                Some(key) => Cow::Borrowed(key),
                None => Cow::Owned(normalize_entity(&node.name)),
            };
            let cosine = || {
                let vector =
                    vector.get_or_init(|| row.vector(self.kb.embedder.dim()).map(Cow::into_owned)).as_deref()?;
                match self.changes.node_vectors.get(&id) {
                    Some(row) => row.cosine(vector),
                    None => self.kb.node_index.similarity(id as u64, vector),
                }
            };
            same_entity(&me, &Mention { surface: &node.name, key: &node_key }, cosine, alias)
        })
    }

    fn add_edge(&mut self, triple: &RawTriple, chunk: ChunkId, origin: EdgeOrigin) -> Result<Option<Edge>> {
        let (Some(subject), Some(object)) =
            (self.resolve(&triple.subject, chunk)?, self.resolve(&triple.object, chunk)?)
        else {
            return Ok(None);
        };
        let relation = relation_label(&triple.relation);
        if relation.is_empty() {
            return Ok(None);
        }
        let relation = self.kb.relations.shared(&relation).unwrap_or_else(|| relation.into());
        let edge = Edge { id: self.kb.store.next_id()?, subject, relation, object, chunk, origin };
        self.batch.put_edge(&edge);
        let fact = FactKey::of(&edge);
        if !self.new_facts.contains_key(&fact) {
            self.new_facts.insert(fact.clone(), edge.id);
            // The fact's vector is stored once, under its first edge (see `Kb::fact_edges`):
            // here only when no edge that stays comes before this one.
            let first_kept = self.first_kept_edge(&fact);
            if first_kept.is_none_or(|first| edge.id < first) {
                let text = fact_text(triple);
                // Taken, not copied: a large document's fact vectors are most of its memory.
                let row = self.take_prepared_row(&text)?;
                self.batch.put_fact_vector_ahead(edge.id, &row);
                if let Some(first) = first_kept {
                    self.batch.remove_vector(Family::FactVec, first);
                }
                self.changes.fact_vectors.insert(edge.id, row);
            }
        }
        self.changes.edges_added.push(edge.clone());
        Ok(Some(edge))
    }

    /// The first committed edge stating `fact` that this write keeps.
    fn first_kept_edge(&self, fact: &FactKey) -> Option<EdgeId> {
        let ids = self.kb.facts().get(fact)?;
        ids.iter().find(|id| !self.removed_edges.contains(id))
    }

    /// Where this write deletes the edge a fact's vector is stored under and a committed edge
    /// of the fact stays first, stores the vector under that edge.
    fn hand_fact_vectors_on(&mut self) -> Result<()> {
        let mut inherited = Vec::new();
        for id in &self.removed_edges {
            let Some(edge) = self.kb.edges.get(*id) else {
                continue;
            };
            let fact = FactKey::of(edge);
            if self.kb.fact_representative(&fact) != Some(*id) {
                continue;
            }
            let Some(next) = self.first_kept_edge(&fact) else {
                continue;
            };
            if self.new_facts.get(&fact).is_some_and(|new| *new < next) {
                continue;
            }
            // Re-embedding repairs a fact whose vector memory lost (an index error); it only
            // runs in that case.
            let vector = match self.kb.fact_index.get(*id) {
                Some(v) => v,
                None => self.kb.embedder.embed_one(&self.kb.fact_text_of(edge))?,
            };
            inherited.push((next, vector));
        }
        for (next, vector) in inherited {
            let row = packed::Row::of(&vector);
            self.batch.put_row(Family::FactVec, next, &row);
            self.changes.fact_vectors.insert(next, row);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Changes> {
        self.hand_fact_vectors_on()?;
        // Applying needs only the vectors of relation labels; the rest would be held through
        // the commit, which for a large document is its peak of memory.
        let Changes { edges_added, text_vectors, .. } = &mut self.changes;
        let labels: foldhash::HashSet<&str> = edges_added.iter().map(|e| &*e.relation).collect();
        text_vectors.retain(|text, _| labels.contains(text.as_str()));
        for (id, node) in &self.changes.nodes {
            match node {
                // Most touched nodes only gained a mention, written as it was staged.
                Some(node) => {
                    if self.kb.nodes.get(*id).is_none_or(|committed| !committed.same_names(node)) {
                        self.batch.put_node(node);
                    }
                }
                None => self.batch.remove_node(*id),
            }
        }
        for (id, row) in &self.changes.node_vectors {
            if self.changes.nodes.get(id).is_some_and(Option::is_some) {
                self.batch.put_row(Family::NodeVec, *id as u64, row);
            }
        }
        self.changes.change = self.kb.store.commit(self.batch)?;
        Ok(self.changes)
    }
}

impl Kb {
    /// Adds or replaces one document atomically, with its audit entry naming `author`.
    /// Unchanged content is a no-op and not audited.
    pub fn commit_document(&mut self, doc: PreparedDoc, author: &Author) -> Result<IngestOutcome> {
        let _session = self.begin_write()?;
        let previous = self.doc_by_id(&doc.id).cloned();
        if previous.as_ref().is_some_and(|p| p.content_hash == doc.content_hash) {
            return Ok(IngestOutcome::Unchanged);
        }
        let mut staging = Staging::new(self);
        staging.changes.text_vectors = doc.text_vectors;
        if let Some(prev) = &previous {
            staging.stage_delete_doc(prev);
        }
        let key = self.store.next_narrow_id()?;
        let mut chunk_ids = Vec::with_capacity(doc.chunks.len());
        for (ordinal, prepared) in doc.chunks.iter().enumerate() {
            let chunk = Chunk {
                id: self.store.next_narrow_id()?,
                doc: key,
                ordinal: ordinal as u32,
                span: prepared.span,
                text: prepared.text.as_str().into(),
                section: prepared.section.clone(),
                links: prepared.links.clone(),
            };
            staging.batch.put_chunk(&chunk);
            staging.batch.put_vector(Family::ChunkVec, chunk.id as u64, &prepared.vector);
            for entity in &prepared.entities {
                staging.resolve(entity, chunk.id)?;
            }
            chunk_ids.push(chunk.id);
            staging.changes.chunks_added.push((chunk, prepared.vector.clone()));
        }
        let mut edge_ids = Vec::new();
        for t in &doc.triples {
            let Some(&chunk) = chunk_ids.get(t.chunk) else {
                continue;
            };
            if let Some(edge) = staging.add_edge(&t.triple, chunk, t.origin)? {
                edge_ids.push(edge.id);
            }
        }
        let document = Document {
            key,
            id: doc.id,
            title: doc.title,
            source: doc.source,
            content_hash: doc.content_hash.into(),
            summary: doc.summary.into(),
            chunks: chunk_ids,
            edges: edge_ids,
        };
        let action = if previous.is_some() { Action::Replace } else { Action::Ingest };
        staging.batch.put_audit(&AuditEntry::document(self.store.next_id()?, author, action, &document.id))?;
        staging.batch.put_doc(&document);
        if let Some(summary) = &doc.summary_vector {
            staging.batch.put_vector(Family::SummaryVec, key as u64, summary);
        }
        staging.changes.docs_added.push((document, doc.summary_vector));
        let changes = staging.finish()?;
        self.apply(changes)?;
        Ok(if previous.is_some() { IngestOutcome::Replaced } else { IngestOutcome::Added })
    }

    /// Gives the document `old` the id `new` and the source `source`, keeping everything
    /// else (chunks, edges, curated ones too). `false`, with nothing written, when there is no
    /// `old` or `new` is taken.
    pub fn rename_document(&mut self, old: &str, new: &str, source: &str, author: &Author) -> Result<bool> {
        // Ingest asks for every file named by a relative path, and there is seldom an `old`:
        // no write lock for nothing (taken below, where the store is read again).
        if self.doc_by_id(old).is_none() {
            return Ok(false);
        }
        let _session = self.begin_write()?;
        let Some(mut doc) = self.doc_by_id(old).cloned() else {
            return Ok(false);
        };
        if self.doc_by_id(new).is_some() {
            return Ok(false);
        }
        let mut staging = Staging::new(self);
        staging.batch.set_author(&author.token);
        staging.batch.remove_doc_id(old);
        new.clone_into(&mut doc.id);
        source.clone_into(&mut doc.source);
        staging.batch.put_doc(&doc);
        let mut changes = staging.finish()?;
        changes.docs_updated.push(doc);
        self.apply(changes)?;
        Ok(true)
    }

    /// Commits the batch `stage` fills, under this KB's write lock from before `stage` reads
    /// until the commit: what it decides from the store cannot change meanwhile, whichever
    /// process writes (for curation's own keyspaces; KB records go through [`Staging`]).
    pub fn commit_under_lock(&mut self, stage: impl FnOnce(&Kb, &mut KbBatch) -> Result<()>) -> Result<()> {
        let _session = self.begin_write()?;
        let mut batch = KbBatch::default();
        stage(self, &mut batch)?;
        self.store.commit(batch)?;
        Ok(())
    }

    /// Removes a document with its chunks, edges, vectors and the nodes only it mentioned,
    /// with its audit entry naming `author`.
    pub fn delete_document(&mut self, id: &str, author: &Author) -> Result<bool> {
        let _session = self.begin_write()?;
        let Some(doc) = self.doc_by_id(id).cloned() else {
            return Ok(false);
        };
        let mut staging = Staging::new(self);
        staging.batch.put_audit(&AuditEntry::document(self.store.next_id()?, author, Action::Delete, id))?;
        staging.stage_delete_doc(&doc);
        let changes = staging.finish()?;
        self.apply(changes)?;
        Ok(true)
    }

    /// Inserts an approved triple whose provenance is `chunk`, live and on disk. `record`
    /// adds the caller's records of the decision (given the new edge's id) to the same
    /// atomic batch.
    pub fn add_curated_triple(
        &mut self,
        triple: &RawTriple,
        chunk: ChunkId,
        record: impl FnOnce(EdgeId, &mut KbBatch) -> Result<()>,
    ) -> Result<EdgeId> {
        let _session = self.begin_write()?;
        let chunk_rec = self.chunk(chunk).ok_or_else(|| Error::NotFound(format!("chunk {chunk}")))?;
        let mut doc =
            self.doc(chunk_rec.doc).cloned().ok_or_else(|| Error::NotFound(format!("document of chunk {chunk}")))?;
        let mut staging = Staging::new(self);
        let edge = staging
            .add_edge(triple, chunk, EdgeOrigin::Curated)?
            .ok_or_else(|| Error::Invalid("triple has an empty subject, relation or object".into()))?;
        doc.edges.push(edge.id);
        staging.batch.put_doc(&doc);
        record(edge.id, &mut staging.batch)?;
        let mut changes = staging.finish()?;
        changes.docs_updated.push(doc);
        self.apply(changes)?;
        Ok(edge.id)
    }

    /// Takes the store's write lock for this KB and brings memory up to date with every
    /// change committed before it, so that staging sees all of them (the alias merges and
    /// node reuse of a sequential run, whichever daemon writes).
    pub(crate) fn begin_write(&mut self) -> Result<store::Session> {
        let session = self.store.write_session()?;
        self.catch_up()?;
        Ok(session)
    }

    pub(super) fn apply(&mut self, mut changes: Changes) -> Result<()> {
        // First: a change that fails half-way must not leave snapshots of the old contents.
        self.invalidate_snapshot();
        if let Some(change) = changes.change {
            self.applied_change = change;
        }
        let mut touched_facts = self.facts_of(&changes.edges_removed);
        touched_facts.extend(changes.edges_added.iter().map(FactKey::of));
        let facts = self.fact_representatives(touched_facts);
        for id in &changes.edges_removed {
            self.forget_edge_in_memory(*id);
        }
        for id in &changes.chunks_removed {
            self.chunks.remove(*id);
            self.chunk_nodes.remove_chunk(*id);
            self.bm25.remove(*id as u64);
            self.chunk_index.remove(*id as u64)?;
        }
        for doc in &changes.docs_removed {
            self.docs.remove(doc.key);
            if self.doc_ids.get(&doc.id) == Some(&doc.key) {
                self.doc_ids.remove(&doc.id);
            }
            self.summary_index.remove(doc.key as u64)?;
        }
        for (doc, summary) in changes.docs_added {
            if let Some(summary) = summary {
                self.summary_index.upsert(doc.key as u64, summary)?;
            }
            self.doc_ids.insert(doc.id.clone(), doc.key);
            self.docs.insert(doc);
        }
        for doc in changes.docs_updated {
            if let Some(old) = self.docs.get(doc.key)
                && old.id != doc.id
                && self.doc_ids.get(&old.id) == Some(&doc.key)
            {
                self.doc_ids.remove(&old.id);
            }
            self.doc_ids.insert(doc.id.clone(), doc.key);
            self.docs.insert(doc);
        }
        for (chunk, vector) in changes.chunks_added {
            self.bm25.insert(chunk.id as u64, &self.bm25_text(&chunk));
            self.chunk_index.upsert(chunk.id as u64, vector)?;
            self.chunks.insert(chunk);
        }
        for (id, node) in changes.nodes {
            let old = self.nodes.remove(id);
            // Most touched nodes only gain a chunk: their names stay keyed and blocked.
            let renamed = old.as_ref().is_none_or(|o| node.as_ref().is_none_or(|n| !n.same_names(o)));
            if let Some(old) = &old {
                if renamed {
                    self.unindex_node_names(old);
                }
                // Only the chunks the node lost: a node that every document mentions has
                // provenance in most chunks, and a commit must not cost all of them.
                let kept = node.as_ref().map_or(&[][..], |n| n.chunks.as_slice());
                for c in super::sorted_difference(&old.chunks, kept) {
                    self.chunk_nodes.remove(c, id);
                }
            }
            match node {
                Some(node) => {
                    if let Some(row) = changes.node_vectors.remove(&id) {
                        self.node_index.upsert_row(id as u64, row)?;
                    }
                    if renamed {
                        self.index_node_names(&node);
                    }
                    self.index_node_in_memory(node, old.as_ref().map_or(&[][..], |o| o.chunks.as_slice()));
                }
                None => {
                    self.graph.remove_node(id);
                    self.node_index.remove(id as u64)?;
                }
            }
        }
        // What staging left of the prepared texts is the vectors of relation labels.
        let dim = self.embedder.dim();
        let labels =
            changes.text_vectors.into_iter().filter_map(|(label, row)| Some((label, row.vector(dim)?.into_owned())));
        let vectors = self.embed_new_relations(changes.edges_added.iter().map(|e| &*e.relation), labels.collect())?;
        for edge in changes.edges_added {
            self.index_edge_in_memory(edge, &vectors)?;
        }
        self.move_fact_vectors(facts, changes.fact_vectors)?;
        // Writes outside a batch (curation, the daemon's single documents) never call the
        // link pass; bound the exact scan over what they leave staged. The pass runs beside
        // the writer, so a long batch goes on committing while it links.
        let staged = [
            self.chunk_index.staged(),
            self.summary_index.staged(),
            self.node_index.staged(),
            self.fact_index.staged(),
            self.relations.staged(),
        ];
        if staged.iter().any(|n| *n >= STAGED_LINK_THRESHOLD) {
            self.start_linking_staged_vectors()?;
        }
        Ok(())
    }
}
