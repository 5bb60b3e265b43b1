//! The knowledge base: sled as the source of truth plus the in-memory indexes derived from
//! it (graph, HNSW vectors, BM25). All writes go through [`Kb::commit_document`],
//! [`Kb::delete_document`] and [`Kb::add_curated_triple`], which stage every change, commit it
//! to the store in one atomic batch (new edges' fact vectors may commit ahead of it), and only
//! then update memory, so memory never runs ahead of disk.

pub mod align;
pub mod audit;
pub mod bm25;
pub mod catalog;
mod chunk_nodes;
mod exact;
pub mod explore;
mod fact_edges;
pub mod follow;
mod grades;
pub mod graph;
mod homes;
mod id_table;
mod mapped;
pub mod model;
pub mod name;
pub mod packed;
pub mod pages;
pub mod passage_graph;
mod postings;
mod records;
pub mod reindex;
pub mod relations;
mod saved;
mod segment;
pub mod snapshot;
mod staged_names;
pub mod store;
mod tables;
pub mod vector;
mod write;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::config::{IndexSettings, RetrieveSettings, Settings};
use crate::embed::{EmbeddedQuery, Embedder};
use crate::error::{Error, Result};
use crate::rank::reciprocal_rank_fusion;
use align::{AliasBlocks, NameSketch};
use bm25::Bm25;
use chunk_nodes::ChunkNodes;
use fact_edges::{FactEdges, FactKey, FactTable, LazyFacts, add_fact};
use graph::KnowledgeGraph;
use id_table::{IdTable, Keyed};
use model::{
    Chunk, ChunkId, DocKey, Document, Edge, EdgeId, Link, Node, NodeId, RawTriple, fact_text, summary_embedded_apart,
};
use name::KbName;
use pages::Pages;
use passage_graph::PassageGraph;
use records::Records;
use relations::RelationLabels;
use saved::SavedSnapshot;
use snapshot::Lazy;
use store::{Changed, Family, Location, Store};
use tables::{Tables, TablesToWrite, index_names};
use vector::VectorIndex;

pub use write::{IngestOutcome, PreparedChunk, PreparedDoc, PreparedTriple};

/// An open KB: queries share the read lock, writes take it exclusively.
pub type SharedKb = Arc<tokio::sync::RwLock<Kb>>;

/// A table of the KB's in-memory indexes. An open inserts every id and name of the KB, tens
/// of millions at a million passages, and a query looks up thousands: foldhash (hashbrown's
/// own default, seeded per process) hashes them several times faster than std's SipHash.
pub type Table<K, V> = foldhash::HashMap<K, V>;

/// The saved HNSW graphs' directory inside a sled KB's directory (see [`saved`]).
const SAVED_INDEX_DIR: &str = "index";
/// Vectors an index may have linked or unlinked since the last save before the end of an
/// ingest batch saves again (see [`Kb::save_indexes_if_worth_it`]): linking them at an open
/// costs about half a second.
const SAVE_AFTER: usize = 256;
/// Unsaved vectors of one index past which an ingest saves before its batch ends (about
/// 200 MB of 512-float vectors on the heap).
const SAVE_DURING_INGEST: usize = 100_000;

pub struct Kb {
    settings: Arc<Settings>,
    store: Store,
    embedder: Arc<dyn Embedder>,
    /// The decoded lists themselves, not tables of them (see `id_table`).
    docs: IdTable<Document>,
    doc_ids: Table<String, DocKey>,
    chunks: IdTable<Chunk>,
    /// Reverse provenance: which nodes mention a chunk.
    chunk_nodes: ChunkNodes,
    nodes: IdTable<Node>,
    /// Normalised alias -> node, for every alias of every node.
    node_keys: Table<String, NodeId>,
    /// Blocking key -> nodes with an alias carrying it (alias candidate generation).
    alias_blocks: AliasBlocks,
    edges: IdTable<Edge>,
    /// Which edges the rule extractor made (the rest are imported, LLM-made or curated), in
    /// all and per chunk.
    grades: grades::EdgeGrades,
    /// Distinct relation labels with their use count, searchable by embedding.
    relations: RelationLabels,
    graph: KnowledgeGraph,
    chunk_index: VectorIndex,
    summary_index: VectorIndex,
    node_index: VectorIndex,
    /// Edge facts ("subject relation object") for query-to-fact linking: one vector per
    /// distinct fact, keyed by its representative edge (see `fact_edges`).
    fact_index: VectorIndex,
    /// The edges stating each distinct fact (same subject, relation label and object; one
    /// per chunk it was read from). Only the first (lowest id) has a vector, in `fact_index`
    /// and in the store: a fact repeated across a large document is embedded, stored and
    /// indexed once, so memory and index cost follow distinct facts, and linking's top facts
    /// are not copies of one another. When the first edge goes, the next one inherits its
    /// vector (the write that deletes it stores the vector under the successor); a new edge
    /// with a lower id (another daemon's block of ids, on PostgreSQL) takes it over. Built
    /// when first read, which an open from a save and serving do not (see [`LazyFacts`]).
    fact_edges: LazyFacts,
    bm25: Bm25,
    /// PPR snapshot (entities, passages, synonym edges), rebuilt lazily after a write.
    passages: Lazy<PassageGraph>,
    /// Pages by their topic's name (the targets of a text's links), rebuilt lazily after a write.
    pages: Lazy<Pages>,
    /// The store's change log is applied up to this change (see [`follow`]).
    applied_change: u64,
    /// The generation of the last save of the HNSW graphs (see [`saved`]).
    saved_generation: u64,
    /// The store's [`Store::instance`], which a save records.
    instance: u64,
    /// The relation labels' vectors as the last save wrote them (see [`saved::write_labels`]).
    labels_saved: Option<saved::SavedLabels>,
    vectors_at_open: VectorsAtOpen,
    /// The records file of the last save (see [`records`]), while the change log still
    /// reaches back to it.
    records_saved: Option<SavedSnapshot>,
    /// Whether `records_saved` also holds the tables built of its records (see `tables`): a
    /// file of an earlier build does not, and the open that read it saves a complete one.
    records_hold_tables: bool,
    records_at_open: RecordsAtOpen,
    /// Vectors that opening had to link because no saved graph held them.
    linked_at_open: usize,
}

/// Where an open found the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum VectorsAtOpen {
    /// Mapped from the last save, with the store's changes since it replayed.
    Mapped { changes_replayed: u64 },
    /// Read from the store: no usable save.
    ReadFromStore,
}

/// Where an open found the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum RecordsAtOpen {
    /// Read from the last save's records file, with the records written since taken from the
    /// store; the tables built of the records read from the file too (see `tables`) where
    /// nothing was written since and the file holds them.
    Saved { changes_replayed: u64, tables_read: bool },
    /// Read from the store: no usable records file.
    ReadFromStore,
}

/// How much a save brings up to date. Every save writes the vectors and graphs that changed;
/// the files an open reads besides them (the records, see [`records`], and BM25's postings)
/// are large and rewritten whole, so they are rewritten in the middle of an ingest only when
/// they fall far behind, and made current where the next open is near: at the end of an
/// ingest run and after an open that had to read every record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveScope {
    /// Keep the last records file and postings while the change log reaches them.
    Incremental,
    /// Make every file an open reads current with the store.
    Complete,
}

/// The relation labels of some edges with how many of them use each, in the order the
/// edges first use them. Edges read from one file share each label's text, so a label is
/// found by the text's address: an open counts three million edges' labels without hashing
/// their text.
struct LabelUses<'a>(Vec<(&'a Arc<str>, usize)>);

impl<'a> LabelUses<'a> {
    fn of(edges: &'a [Edge]) -> LabelUses<'a> {
        let mut at: Table<*const u8, usize> = Table::default();
        let mut uses: Vec<(&Arc<str>, usize)> = Vec::new();
        for edge in edges {
            let next = uses.len();
            match at.entry(edge.relation.as_ptr()) {
                std::collections::hash_map::Entry::Occupied(slot) => uses[*slot.get()].1 += 1,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(next);
                    uses.push((&edge.relation, 1));
                }
            }
        }
        LabelUses(uses)
    }

    /// The labels' texts, a text once for each copy of it the edges hold.
    fn texts(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.0.iter().map(|(label, _)| &***label)
    }
}

/// Whether a structure kept as a base and the changes since (`graph`, `chunk_nodes`,
/// `id_table`, `align::BlockMembers`) should fold them into a new base: once they reach a quarter of it, or 1,024
/// while it is small. Each fold costs the base's size, so a write costs amortised constant
/// work, and reads stay mostly in the base.
fn fold_due(changes: usize, base: usize) -> bool {
    changes >= (base / 4).max(1_024)
}

/// A small deterministic generator for the tests that drive a structure through random
/// changes: `next(bound)` is below `bound`, and the same `seed` gives the same sequence.
#[cfg(test)]
fn test_sequence(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |bound| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    }
}

/// Each touched fact with the edge it was indexed under before a change (`None`: new fact).
struct FactRepresentatives(HashMap<FactKey, Option<EdgeId>>);

impl Keyed for Edge {
    type Id = EdgeId;
    fn id(&self) -> EdgeId {
        self.id
    }
}

impl Keyed for Node {
    type Id = NodeId;
    fn id(&self) -> NodeId {
        self.id
    }
}

impl Keyed for Chunk {
    type Id = ChunkId;
    fn id(&self) -> ChunkId {
        self.id
    }
}

impl Keyed for Document {
    type Id = DocKey;
    fn id(&self) -> DocKey {
        self.key
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    Bm25,
    Vector,
    Hybrid,
}

impl SearchMode {
    /// The mode's wire name (as it serialises).
    pub fn name(self) -> &'static str {
        match self {
            SearchMode::Bm25 => "bm25",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

/// How [`Kb::search`] fuses its two text retrievers: candidates taken from each, and the
/// reciprocal-rank-fusion constant (`retrieve.text_candidates`, `retrieve.rrf_k`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextFusion {
    pub candidates: usize,
    pub rrf_k: f32,
}

impl From<&RetrieveSettings> for TextFusion {
    fn from(settings: &RetrieveSettings) -> Self {
        TextFusion { candidates: settings.text_candidates, rrf_k: settings.rrf_k }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub documents: usize,
    pub chunks: usize,
    pub nodes: usize,
    pub edges: usize,
    pub aliases_merged: usize,
    pub relation_labels: usize,
    pub chunk_vectors: usize,
    pub summary_vectors: usize,
    pub entity_vectors: usize,
    pub fact_vectors: usize,
    pub bm25_terms: usize,
    pub vector_index_bytes: usize,
    pub embedder: String,
}

impl Kb {
    /// Opens the default knowledge base of the configured store (`settings.data_dir` for
    /// sled) and rebuilds the in-memory indexes.
    pub fn open(settings: Arc<Settings>, embedder: Arc<dyn Embedder>) -> Result<Kb> {
        let location = Location::of(&settings, &KbName::default());
        Kb::open_at(settings, embedder, &location)
    }

    /// Opens the knowledge base at `location` and rebuilds the in-memory indexes. Refuses a
    /// KB embedded by a different embedder (vectors would not be comparable).
    pub fn open_at(settings: Arc<Settings>, embedder: Arc<dyn Embedder>, location: &Location) -> Result<Kb> {
        // The save's manifest, records file and vector indexes need nothing of the store: a
        // second core reads, decodes and maps them while the store opens (at a million
        // passages the store's start is about a second and a half of one core, the save's
        // reading as much). Whether the save is current is decided once the store is open.
        let save_dir = index_dir_at(&settings, location);
        let built_for = graph_fingerprint(&settings.index, embedder.as_ref());
        let (store, save) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| SaveAtOpen::read(&save_dir, &built_for, embedder.dim(), &settings.index));
            (Store::open(location), reading.join())
        });
        let store = store?;
        let save = save.map_err(|_| Error::Internal("reading the saved indexes panicked".into()))?;
        match store.embedder_id()? {
            Some(stored) if stored != embedder.id() => {
                return Err(Error::EmbedderMismatch { stored, configured: embedder.id() });
            }
            Some(_) => {}
            None => store.set_embedder_id(&embedder.id())?,
        }
        // Made here rather than in `load`, whose reads run in a read-only snapshot.
        let instance = store.instance()?;
        let dim = embedder.dim();
        let mut kb = Kb {
            chunk_index: VectorIndex::new(dim, &settings.index)?,
            summary_index: VectorIndex::new(dim, &settings.index)?,
            node_index: VectorIndex::new(dim, &settings.index.for_entities())?,
            fact_index: VectorIndex::new(dim, &settings.index.for_facts())?,
            fact_edges: LazyFacts::default(),
            relations: RelationLabels::new(dim, &settings.index)?,
            bm25: Bm25::new(&settings.bm25),
            settings,
            store,
            embedder,
            docs: IdTable::default(),
            doc_ids: Table::default(),
            chunks: IdTable::default(),
            chunk_nodes: ChunkNodes::default(),
            nodes: IdTable::default(),
            node_keys: Table::default(),
            alias_blocks: AliasBlocks::default(),
            edges: IdTable::default(),
            grades: grades::EdgeGrades::default(),
            graph: KnowledgeGraph::default(),
            passages: Lazy::default(),
            pages: Lazy::default(),
            applied_change: 0,
            saved_generation: 0,
            instance,
            labels_saved: None,
            vectors_at_open: VectorsAtOpen::ReadFromStore,
            records_saved: None,
            records_hold_tables: false,
            records_at_open: RecordsAtOpen::ReadFromStore,
            linked_at_open: 0,
        };
        kb.load(save)?;
        Ok(kb)
    }

    /// Reads everything from one consistent state of the store, and the parts of `save` still
    /// current with it, and notes the change it follows from.
    fn load(&mut self, save: SaveAtOpen) -> Result<()> {
        let started = std::time::Instant::now();
        let _snapshot = self.store.snapshot_session()?;
        self.applied_change = self.store.latest_change()?;
        // A save of another store of the same name replays nothing of this one's log: at most
        // its graphs are adopted, member by member, as a full read checks them.
        let SaveAtOpen { manifest, records: decoded, indexes: mapped } = save;
        let manifest = manifest.map(|mut m| {
            if m.store != Some(self.instance) {
                (m.change, m.bm25, m.passages, m.pages, m.records) = (None, None, None, None, None);
            }
            m
        });
        let log = self.log_since_save(manifest.as_ref())?;
        let saved_change = manifest.as_ref().and_then(|m| m.change).filter(|change| log.contains_key(change));
        let since_save = saved_change.and_then(|change| log.get(&change));
        let bm25_mapped = self.load_records(manifest.as_ref(), &log, decoded, started)?;
        let adopted = match (saved_change, since_save, mapped) {
            (Some(change), Some(changed), Some(mapped)) => self.adopt_save(mapped, change, changed)?,
            _ => None,
        };
        if let Some(manifest) = &manifest {
            self.saved_generation = manifest.generation;
        }
        self.vectors_at_open = match adopted {
            Some(changes_replayed) => VectorsAtOpen::Mapped { changes_replayed },
            _ => {
                self.read_vectors(manifest.as_ref())?;
                VectorsAtOpen::ReadFromStore
            }
        };
        tracing::debug!(ms = started.elapsed().as_millis() as u64, vectors = ?self.vectors_at_open, "loaded vectors");
        // A snapshot is a function of the KB's contents: it holds while the store has not
        // changed since it was built.
        let (passages, pages) = manifest.as_ref().map_or((None, None), |m| (m.passages.as_ref(), m.pages.as_ref()));
        self.passages.adopt(passages, self.applied_change);
        self.pages.adopt(pages, self.applied_change);
        self.linked_at_open = self.vector_indexes().iter().map(|i| i.staged_for_linking()).sum::<usize>()
            + self.relations.staged_for_linking();
        if self.linked_at_open > 0 {
            // Minutes on a large KB: say why this open is slow.
            tracing::info!(vectors = self.linked_at_open, "linking the vectors no saved graph holds");
        }
        self.link_staged_vectors()?;
        let all_mapped = matches!(self.vectors_at_open, VectorsAtOpen::Mapped { .. }) && bm25_mapped;
        let labels_unsaved = self.labels_saved.is_none() && !self.relations.is_empty();
        // Records read from the store, or from a file without the tables built of them, are
        // written as the next open reads them fastest.
        let records_read =
            (self.records_at_open == RecordsAtOpen::ReadFromStore || !self.records_hold_tables) && !self.is_empty();
        if (!all_mapped && !self.is_empty()) || self.linked_at_open > 0 || labels_unsaved || records_read {
            // Save what was just read or linked, or the next open does it again.
            self.save_indexes_or_warn(if records_read { SaveScope::Complete } else { SaveScope::Incremental });
        } else {
            self.save_indexes_if_worth_it();
        }
        Ok(())
    }

    /// Reads the records, the tables and graph built of them, the relation labels and BM25;
    /// whether BM25 serves its saved postings.
    fn load_records(
        &mut self,
        manifest: Option<&saved::Manifest>,
        log: &HashMap<u64, Changed>,
        decoded: Option<Result<(Records, Option<Tables>)>>,
        started: std::time::Instant,
    ) -> Result<bool> {
        let (Records { docs, chunks, nodes, edges }, tables) = self.read_records(manifest, log, decoded)?;
        tracing::debug!(ms = started.elapsed().as_millis() as u64, records = ?self.records_at_open, "loaded the records");
        // The document-id table is about half of what follows at a million passages (a
        // million ids copied and hashed): another core builds it.
        let (doc_ids, labels_embedded, tables) = std::thread::scope(|scope| -> Result<_> {
            let doc_ids = scope.spawn(|| docs.iter().map(|doc| (doc.id.clone(), doc.key)).collect::<Table<_, _>>());
            self.chunks = IdTable::of(chunks);
            let labels_embedded = self.take_in_relations(manifest, &edges)?;
            let tables = match tables {
                Some(tables) => tables,
                None => Tables::of(&nodes, &edges)?,
            };
            let doc_ids = doc_ids.join().map_err(|_| Error::Internal("building the document ids panicked".into()))?;
            Ok((doc_ids, labels_embedded, tables))
        })?;
        (self.doc_ids, self.docs) = (doc_ids, IdTable::of(docs));
        let Tables { names, chunk_nodes, graph } = tables;
        (self.node_keys, self.alias_blocks, self.chunk_nodes, self.graph) =
            (names.keys, names.blocks, chunk_nodes, graph);
        self.nodes = IdTable::of(nodes);
        self.edges = IdTable::of(edges);
        // Labels embedded here are saved, or the next open embeds them again. The labels just
        // indexed are the file's when none was embedded: the next save need not write it again.
        self.labels_saved = manifest.and_then(|m| m.relation_labels.clone()).filter(|_| labels_embedded == 0);
        self.relations.take_changed();
        if let Some(files) = manifest.and_then(|m| m.indexes.get(relations::GRAPHS)) {
            match self.relations.restore(&self.index_dir(), files) {
                Ok(adopted) => tracing::debug!(adopted, "restored the relation labels' saved graphs"),
                Err(e) => {
                    tracing::warn!(error = %e, "the relation labels' saved graph is unusable; linking them again")
                }
            }
        }
        tracing::debug!(ms = started.elapsed().as_millis() as u64, "loaded nodes and edges");
        let bm25_mapped = match manifest.and_then(|m| m.bm25.as_ref()) {
            Some(saved) => match log.get(&saved.change) {
                Some(changed) => self.adopt_bm25(saved, changed)?,
                None => false,
            },
            None => false,
        };
        if !bm25_mapped {
            self.bm25 = Bm25::new(&self.settings.bm25);
            for chunk in self.chunks.values() {
                self.bm25.insert(chunk.id as u64, &self.bm25_text(chunk));
            }
        }
        tracing::debug!(ms = started.elapsed().as_millis() as u64, mapped = bm25_mapped, "loaded BM25");
        Ok(bm25_mapped)
    }

    /// Takes in the relation labels of `edges` (embedding those the save lacks) and their
    /// uses; returns how many labels were embedded.
    fn take_in_relations(&mut self, manifest: Option<&saved::Manifest>, edges: &[Edge]) -> Result<usize> {
        // A label's vector depends on its text and the embedder alone: saved ones stay right
        // whatever the store did since, and only labels the save lacks are embedded.
        let saved_labels = match manifest.and_then(|m| m.relation_labels.as_ref()) {
            Some(file) => saved::read_labels(&self.index_dir(), file, self.embedder.dim()).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the saved relation labels are unusable; embedding them again");
                HashMap::new()
            }),
            None => HashMap::new(),
        };
        let known = saved_labels.len();
        let labels = LabelUses::of(edges);
        let vectors = self.embed_new_relations(labels.texts(), saved_labels)?;
        for (label, uses) in labels.0 {
            self.add_label_uses(label, uses, &vectors)?;
        }
        edges.iter().for_each(|edge| self.grades.add(edge));
        Ok(vectors.len() - known)
    }

    /// The store's changes since each change a file of the save is current with (the
    /// vectors', the postings', the records'), read once per distinct change: usually they
    /// are one, and after a crash the changes are every record written since. A change the
    /// store has not reached (a save ahead of it) has none: its file is not used.
    fn log_since_save(&self, manifest: Option<&saved::Manifest>) -> Result<HashMap<u64, Changed>> {
        let mut log = HashMap::new();
        let Some(m) = manifest else { return Ok(log) };
        for change in [m.change, m.bm25.as_ref().map(|b| b.change), m.records.as_ref().map(|r| r.change)] {
            if let Some(change) = change.filter(|c| *c <= self.applied_change && !log.contains_key(c)) {
                log.insert(change, self.store.changes_since(change)?);
            }
        }
        Ok(log)
    }

    /// Every record as of the store's current change: the save's records file (`decoded` by
    /// the open beside the store's; see [`SaveAtOpen`]) with what was written since (`log`,
    /// see [`Kb::log_since_save`]) taken from the store, or, where there is no usable file,
    /// every record read from the store.
    fn read_records(
        &mut self,
        manifest: Option<&saved::Manifest>,
        log: &HashMap<u64, Changed>,
        decoded: Option<Result<(Records, Option<Tables>)>>,
    ) -> Result<(Records, Option<Tables>)> {
        // `decoded` is the file `manifest` names, read before the store was open: present
        // whenever the manifest still names one.
        let Some((saved, changed, decoded)) =
            manifest.and_then(|m| m.records.as_ref()).and_then(|s| Some((s, log.get(&s.change)?, decoded?)))
        else {
            return Ok((Records::read(&self.store)?, None));
        };
        // The tables are the records' as the file holds them: any record written since may
        // change them, so they are built again.
        let from_save = || -> Result<Option<(Records, Option<Tables>, bool)>> {
            let (mut records, tables) = decoded?;
            let held = tables.is_some();
            match changed {
                Changed::Nothing => return Ok(Some((records, tables, held))),
                Changed::Everything { .. } => return Ok(None),
                Changed::Records { records: changed, .. } => records.overlay(changed)?,
            }
            Ok(Some((records, None, held)))
        };
        match from_save() {
            Ok(Some((records, tables, held))) => {
                self.records_saved = Some(saved.clone());
                self.records_hold_tables = held;
                self.records_at_open = RecordsAtOpen::Saved {
                    changes_replayed: self.applied_change - saved.change,
                    tables_read: tables.is_some(),
                };
                Ok((records, tables))
            }
            Ok(None) => Ok((Records::read(&self.store)?, None)),
            Err(e) => {
                tracing::warn!(error = %e, "the saved records are unusable; reading every record from the store");
                Ok((Records::read(&self.store)?, None))
            }
        }
    }

    /// Where this open found the records.
    pub fn records_at_open(&self) -> RecordsAtOpen {
        self.records_at_open
    }

    /// Whether the KB holds nothing yet.
    fn is_empty(&self) -> bool {
        self.docs.is_empty() && self.chunks.is_empty() && self.nodes.is_empty()
    }

    /// Adopts the indexes [`map_saved_indexes`] mapped from a save current with store change
    /// `change`, then replays what `changed` since. `None`, with every index left empty,
    /// where the save cannot be used: damaged, or older than the change log reaches (those
    /// opens read every vector from the store instead).
    fn adopt_save(&mut self, mapped: Result<SavedIndexes>, change: u64, changed: &Changed) -> Result<Option<u64>> {
        let changed = match changed {
            Changed::Everything { .. } => return Ok(None),
            Changed::Nothing => None,
            Changed::Records { records, .. } => Some(records),
        };
        match mapped {
            Ok(indexes) => {
                for ((_, index), mapped) in self.saved_indexes().into_iter().zip(indexes) {
                    *index = mapped;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the saved indexes are unusable; reading every vector from the store");
                return Ok(None);
            }
        }
        let Some(records) = changed else { return Ok(Some(0)) };
        for (family, index) in [
            (Family::ChunkVec, &mut self.chunk_index),
            (Family::SummaryVec, &mut self.summary_index),
            (Family::NodeVec, &mut self.node_index),
        ] {
            for entry in records.vectors(family) {
                let (id, vector) = entry?;
                match vector {
                    Some(v) => index.upsert(id, v)?,
                    None => index.remove(id)?,
                }
            }
        }
        // A fact is indexed under the edge that represents it now, as a full read indexes it.
        let touched: BTreeSet<u64> = records.ids(Family::FactVec).chain(records.ids(Family::Edge)).collect();
        for id in touched {
            // Through the graph: the fact table is not built for the few edges written since.
            let first_of_its_fact = self.edges.get(id).is_some_and(|edge| self.first_edge_stating(edge) == id);
            match records.vector(Family::FactVec, id)? {
                Some(v) if first_of_its_fact => self.fact_index.upsert(id, v)?,
                _ => self.fact_index.remove(id)?,
            }
        }
        Ok(Some(self.applied_change - change))
    }

    /// Serves BM25 from its saved postings and indexes again the chunks `changed` since
    /// them; `false` where they cannot be used (damaged, older than the log).
    fn adopt_bm25(&mut self, saved: &postings::SavedPostings, changed: &Changed) -> Result<bool> {
        let touched: Vec<u64> = match changed {
            Changed::Everything { .. } => return Ok(false),
            Changed::Nothing => Vec::new(),
            Changed::Records { records, .. } => records.ids(Family::Chunk).collect(),
        };
        self.bm25 = match Bm25::open(&self.settings.bm25, &self.index_dir(), saved) {
            Ok(bm25) => bm25,
            Err(e) => {
                tracing::warn!(error = %e, "the saved BM25 postings are unusable; indexing every chunk again");
                return Ok(false);
            }
        };
        for id in touched {
            self.bm25.remove(id);
            if let Some(chunk) = self.chunks.get(id as ChunkId) {
                self.bm25.insert(id, &self.bm25_text(chunk));
            }
        }
        Ok(true)
    }

    /// The text BM25 indexes for `chunk`: the passage under its document's title.
    fn bm25_text(&self, chunk: &Chunk) -> String {
        let title = self.docs.get(chunk.doc).map_or("", |d| d.title.as_str());
        model::passage_text(title, &chunk.section, &chunk.text)
    }

    /// Reads every vector from the store, then adopts what it can of the saved graphs in
    /// `manifest` (each member checked against its stored vector).
    fn read_vectors(&mut self, manifest: Option<&saved::Manifest>) -> Result<()> {
        let families = [
            (Family::ChunkVec, &mut self.chunk_index),
            (Family::SummaryVec, &mut self.summary_index),
            (Family::NodeVec, &mut self.node_index),
        ];
        for (family, index) in families {
            for item in self.store.scan_vectors(family) {
                let (id, v) = item?;
                index.upsert(id, v)?;
            }
        }
        for item in self.store.scan_vectors(Family::FactVec) {
            let (id, v) = item?;
            if self.represents_fact(id) {
                self.fact_index.upsert(id, v)?;
            }
        }
        self.restore_saved_graphs(manifest);
        Ok(())
    }

    /// The directory of the saved HNSW graphs: beside a sled store, or under the data
    /// directory for a PostgreSQL KB (each machine keeps its own).
    pub fn index_dir(&self) -> std::path::PathBuf {
        index_dir_at(&self.settings, self.store.location())
    }

    /// Where this KB's vectors came from when it opened.
    pub fn vectors_at_open(&self) -> VectorsAtOpen {
        self.vectors_at_open
    }

    /// How many vectors opening this KB linked because no saved graph held them: 0 when the
    /// save was current.
    pub fn linked_at_open(&self) -> usize {
        self.linked_at_open
    }

    fn graph_fingerprint(&self) -> saved::GraphFingerprint {
        graph_fingerprint(&self.settings.index, self.embedder.as_ref())
    }

    /// The four vector indexes, in the saved-graph manifest's order.
    fn vector_indexes(&self) -> [&VectorIndex; 4] {
        [&self.chunk_index, &self.summary_index, &self.node_index, &self.fact_index]
    }

    /// The vector indexes with their names in the saved-graph manifest.
    fn saved_indexes(&mut self) -> [(&'static str, &mut VectorIndex); 4] {
        let [chunks, summaries, nodes, facts] = SAVED_INDEXES;
        [
            (chunks, &mut self.chunk_index),
            (summaries, &mut self.summary_index),
            (nodes, &mut self.node_index),
            (facts, &mut self.fact_index),
        ]
    }

    /// Adopts the saved graphs of each index (see [`saved`]); an index whose files are
    /// missing or damaged is linked from its vectors instead.
    fn restore_saved_graphs(&mut self, manifest: Option<&saved::Manifest>) {
        let dir = self.index_dir();
        for (name, index) in self.saved_indexes() {
            if let Some(files) = manifest.and_then(|m| m.indexes.get(name)) {
                match index.restore(&dir, files) {
                    Ok(adopted) => tracing::debug!(index = name, adopted, "restored saved graphs"),
                    Err(e) => {
                        tracing::warn!(index = name, error = %e, "a saved graph is unusable; linking this index again")
                    }
                }
            }
        }
    }

    /// Saves the HNSW graphs that changed since the last save (see [`saved`]), so that the
    /// next open reads them instead of linking. Links staged vectors first. Skipped while
    /// another process saves into the same directory.
    pub fn save_indexes(&mut self, scope: SaveScope) -> Result<()> {
        self.link_staged_vectors()?;
        // The change this save is current with must be durable before the save is: a kill
        // between the two would leave a save ahead of its store, which the next open cannot
        // use (it reads every vector instead), and the store's last writes lost.
        self.store.flush()?;
        let dir = self.index_dir();
        let Some(_lock) = saved::SaveLock::try_take(&dir)? else {
            tracing::debug!(dir = %dir.display(), "another process is saving the indexes; skipped");
            return Ok(());
        };
        // Above any generation on disk too: another daemon sharing this directory (PostgreSQL)
        // may have saved since, and its files must keep their names. Taken before writing, so
        // a save that fails never hands its names to the next one.
        let on_disk = saved::Manifest::read(&dir, &self.graph_fingerprint()).map_or(0, |m| m.generation);
        let generation = self.saved_generation.max(on_disk) + 1;
        self.saved_generation = generation;
        let mut manifest =
            saved::Manifest::new(self.graph_fingerprint(), generation, self.instance, self.applied_change);
        for (name, index) in self.saved_indexes() {
            let files = index.save(&dir, name, generation)?;
            manifest.vectors.insert(name.to_string(), index.save_vectors(&dir, &format!("{name}-{generation}"))?);
            if !files.is_empty() {
                manifest.indexes.insert(name.to_string(), files);
            }
        }
        let label_graphs = self.relations.save_graphs(&dir, generation)?;
        if !label_graphs.is_empty() {
            manifest.indexes.insert(relations::GRAPHS.to_string(), label_graphs);
        }
        // Rewritten before an open could no longer replay its changes from the log.
        let stale_after = match scope {
            SaveScope::Incremental => store::CHANGES_KEPT / 2,
            SaveScope::Complete => 0,
        };
        if self.bm25.worth_rewriting(self.applied_change, stale_after) {
            self.bm25.rewrite(&dir, &format!("bm25-{generation}"), self.applied_change)?;
        }
        manifest.bm25 = self.bm25.saved().cloned();
        if self.relations.take_changed() || self.labels_saved.is_none() {
            self.labels_saved =
                Some(saved::write_labels(&dir, &format!("relations-{generation}"), self.relations.vectors())?);
        }
        manifest.relation_labels = self.labels_saved.clone();
        manifest.passages = self.passages.to_save(self, &dir, generation, self.applied_change)?;
        manifest.pages = self.pages.to_save(self, &dir, generation, self.applied_change)?;
        manifest.records = self.records_to_save(&dir, generation, scope)?;
        manifest.commit(&dir)
    }

    /// The records file the save of `generation` names: written anew in a complete save;
    /// otherwise the last one is kept, until it falls so far behind the store that the change
    /// log would soon stop reaching it, and is then dropped rather than rewritten in the
    /// middle of an ingest (a large KB's records are hundreds of MB).
    fn records_to_save(
        &mut self,
        dir: &std::path::Path,
        generation: u64,
        scope: SaveScope,
    ) -> Result<Option<SavedSnapshot>> {
        let behind = |saved: &SavedSnapshot| self.applied_change.saturating_sub(saved.change) > store::CHANGES_KEPT / 2;
        if self.records_saved.as_ref().is_some_and(behind) {
            self.records_saved = None;
        }
        if scope == SaveScope::Complete && !self.records_current() {
            let mut nodes: Vec<&Node> = self.nodes().collect();
            nodes.sort_unstable_by_key(|node| node.id);
            let encoded =
                Records::encode(self.docs(), self.chunks.values(), nodes.iter().copied(), self.edges.values(), |out| {
                    let tables = TablesToWrite {
                        nodes: &nodes,
                        blocks: &self.alias_blocks,
                        chunk_nodes: &self.chunk_nodes,
                        graph: &self.graph,
                    };
                    Tables::encode(tables, out)
                });
            self.records_saved =
                Some(saved::write_snapshot(dir, &format!("records-{generation}"), &encoded, self.applied_change)?);
            self.records_hold_tables = true;
        }
        Ok(self.records_saved.clone())
    }

    /// Whether the last save's records file holds the records as they are now.
    fn records_current(&self) -> bool {
        self.records_hold_tables && self.records_saved.as_ref().is_some_and(|saved| saved.change == self.applied_change)
    }

    /// [`Kb::save_indexes`] once enough has changed since the last save to be worth
    /// rewriting the changed graphs (tens of MB each on a large KB), at the end of an ingest
    /// batch: a daemon taking one document per request saves every few dozen documents, and
    /// an open links at most [`SAVE_AFTER`] vectors per index that no save holds.
    pub fn save_indexes_if_worth_it(&mut self) {
        if self.most_unsaved() >= SAVE_AFTER {
            self.save_indexes_or_warn(SaveScope::Incremental);
        }
    }

    /// The most changes any one index holds that the last save does not: keys linked or
    /// unlinked, vectors to link, vectors written or removed. 0 when the save is current.
    fn most_unsaved(&self) -> usize {
        self.vector_indexes()
            .iter()
            .map(|index| (index.unsaved() + index.staged_for_linking()).max(index.unsaved_vectors()))
            .max()
            .unwrap_or(0)
    }

    /// [`Kb::save_indexes`] in the middle of a long ingest, once an index holds
    /// [`SAVE_DURING_INGEST`] vectors that no save maps: they sit on the heap until one does,
    /// and a kill would leave the next open all of them to replay.
    pub fn save_indexes_if_heavy(&mut self) {
        let heaviest = self.vector_indexes().iter().map(|index| index.unsaved_vectors()).max().unwrap_or(0);
        if heaviest >= SAVE_DURING_INGEST {
            self.save_indexes_or_warn(SaveScope::Incremental);
        }
    }

    /// [`Kb::save_indexes`] where failing to save must not fail the caller: the store is the
    /// truth, and a missing save costs the next open a link pass.
    pub fn save_indexes_or_warn(&mut self, scope: SaveScope) {
        if let Err(e) = self.save_indexes(scope) {
            tracing::warn!(error = %e, "could not save the vector indexes; the next open links them again");
        }
    }

    /// Starts linking the vectors written since the last pass into the HNSW graphs, beside
    /// the writer (see [`VectorIndex::start_linking`]): a long ingest batch calls it as
    /// vectors pile up, and goes on committing meanwhile.
    fn start_linking_staged_vectors(&mut self) -> Result<()> {
        self.chunk_index.start_linking()?;
        self.summary_index.start_linking()?;
        self.node_index.start_linking()?;
        self.fact_index.start_linking()?;
        self.relations.start_linking()
    }

    /// Links the vectors written since the last pass into the HNSW graphs (see
    /// [`vector`]): the end of an ingest batch calls it; searches are exact before it too.
    /// The indexes link at the same time, one thread each: they share nothing, and each
    /// builds the graph it would build alone, so retrieval stays reproducible.
    pub fn link_staged_vectors(&mut self) -> Result<()> {
        let Kb { chunk_index, summary_index, node_index, fact_index, relations, .. } = self;
        std::thread::scope(|scope| {
            let linking = [
                scope.spawn(|| chunk_index.link_staged()),
                scope.spawn(|| summary_index.link_staged()),
                scope.spawn(|| node_index.link_staged()),
                scope.spawn(|| fact_index.link_staged()),
                scope.spawn(|| relations.link_staged()),
            ];
            linking
                .into_iter()
                .try_for_each(|job| job.join().map_err(|_| Error::Index("linking a vector index panicked".into()))?)
        })
    }

    /// Indexes `node`, whose names are indexed already (see [`Kb::index_node_names`]) and
    /// whose provenance was `indexed_chunks` (sorted) before this write: the reverse
    /// provenance only gains the chunks that are new.
    fn index_node_in_memory(&mut self, node: Node, indexed_chunks: &[ChunkId]) {
        self.index_node_links(&node, indexed_chunks);
        self.nodes.insert(node);
    }

    /// The provenance of `node`, its chunks in `indexed_chunks` indexed already.
    fn index_node_links(&mut self, node: &Node, indexed_chunks: &[ChunkId]) {
        for c in sorted_difference(&node.chunks, indexed_chunks) {
            self.chunk_nodes.add(c, node.id);
        }
    }

    /// Embeddings of the relation labels of `edges` that the KB does not know yet: taken from
    /// `known` where it has them, the rest embedded in batches (one call per label would
    /// dominate loading with a neural embedder).
    fn embed_new_relations<'a>(
        &self,
        labels: impl Iterator<Item = &'a str>,
        known: HashMap<String, crate::embed::Embedding>,
    ) -> Result<HashMap<String, crate::embed::Embedding>> {
        let mut fresh: Vec<&str> = Vec::new();
        let mut seen = foldhash::HashSet::default();
        for label in labels {
            if !self.relations.contains(label) && !known.contains_key(label) && seen.insert(label) {
                fresh.push(label);
            }
        }
        let mut vectors = known;
        for batch in fresh.chunks(self.settings.embed.batch_size.max(1)) {
            for (label, vector) in batch.iter().zip(self.embedder.embed(batch)?) {
                vectors.insert(label.to_string(), vector);
            }
        }
        Ok(vectors)
    }

    /// `vectors` holds the embeddings of labels new to the KB (see `embed_new_relations`).
    fn index_edge_in_memory(&mut self, edge: Edge, vectors: &HashMap<String, crate::embed::Embedding>) -> Result<()> {
        self.index_edge_links(&edge, vectors)?;
        self.graph.add_edge(edge.id, edge.subject, edge.object);
        if let Some(facts) = self.fact_edges.built_mut() {
            add_fact(facts, &edge);
        }
        self.edges.insert(edge);
        Ok(())
    }

    /// The relation label's use of `edge`.
    fn index_edge_links(&mut self, edge: &Edge, vectors: &HashMap<String, crate::embed::Embedding>) -> Result<()> {
        self.add_label_uses(&edge.relation, 1, vectors)?;
        self.grades.add(edge);
        Ok(())
    }

    /// `uses` more edges use `label`, whose vector is in `vectors` where it is new to the KB
    /// (see `embed_new_relations`).
    fn add_label_uses(
        &mut self,
        label: &str,
        uses: usize,
        vectors: &HashMap<String, crate::embed::Embedding>,
    ) -> Result<()> {
        let embedder = &self.embedder;
        self.relations.add_uses(label, uses, || match vectors.get(label) {
            Some(v) => Ok(v.clone()),
            None => embedder.embed_one(label),
        })
    }

    /// Whether edge `id` is the one its fact is indexed under (the first edge stating it).
    fn represents_fact(&self, id: EdgeId) -> bool {
        self.edges
            .get(id)
            .and_then(|edge| self.fact_representative(&FactKey::of(edge)))
            .is_some_and(|first| first == id)
    }

    /// The fact `edge` states, in its nodes' names (a triple's own surface forms are not
    /// stored).
    fn fact_text_of(&self, edge: &Edge) -> String {
        let name = |id: NodeId| self.nodes.get(id).map_or_else(String::new, |n| n.name.clone());
        fact_text(&RawTriple {
            subject: name(edge.subject),
            relation: edge.relation.to_string(),
            object: name(edge.object),
        })
    }

    /// The edges stating each distinct fact (see `Kb::fact_edges`).
    fn facts(&self) -> &FactTable {
        self.fact_edges.get(&self.edges)
    }

    fn fact_representative(&self, key: &FactKey) -> Option<EdgeId> {
        self.facts().get(key).map(FactEdges::first)
    }

    /// The representative edge of each fact in `facts` before a change, to hand to
    /// [`Kb::move_fact_vectors`] once the change is in `fact_edges`.
    fn fact_representatives(&self, facts: Vec<FactKey>) -> FactRepresentatives {
        let mut before = HashMap::new();
        for key in facts {
            let first = self.fact_representative(&key);
            before.entry(key).or_insert(first);
        }
        FactRepresentatives(before)
    }

    /// The facts of the edges among `ids` that are in memory.
    fn facts_of(&self, ids: &[EdgeId]) -> Vec<FactKey> {
        ids.iter().filter_map(|id| self.edges.get(*id)).map(FactKey::of).collect()
    }

    /// Brings `fact_index` in line with `fact_edges` for the facts in `before`: each fact's
    /// vector moves to its representative now, taken from `written` (vectors the change
    /// stored) or inherited from the previous representative.
    fn move_fact_vectors(
        &mut self,
        before: FactRepresentatives,
        mut written: Table<EdgeId, packed::Row>,
    ) -> Result<()> {
        for (key, previous) in before.0 {
            let now = self.fact_representative(&key);
            let stored = now.and_then(|id| written.remove(&id));
            if previous == now {
                // Another daemon's write may have stored the vector again; same fact, same
                // representative, so this only refreshes it.
                match (now, stored) {
                    (Some(id), Some(row)) => self.fact_index.upsert_row(id, row)?,
                    (Some(id), None) if self.fact_index.get(id).is_none() => {
                        tracing::warn!(edge = id, "a fact has no vector; `a2rag reindex` rebuilds it")
                    }
                    _ => {}
                }
                continue;
            }
            let inherited = previous.and_then(|id| self.fact_index.get(id)).map(|v| packed::Row::of(&v));
            if let Some(id) = previous {
                self.fact_index.remove(id)?;
            }
            match (now, stored.or(inherited)) {
                (Some(id), Some(row)) => self.fact_index.upsert_row(id, row)?,
                (Some(id), None) => tracing::warn!(edge = id, "a fact has no vector; `a2rag reindex` rebuilds it"),
                (None, _) => {}
            }
        }
        Ok(())
    }

    fn forget_edge_in_memory(&mut self, id: EdgeId) {
        if let Some(edge) = self.edges.remove(id) {
            self.graph.remove_edge(id);
            let key = FactKey::of(&edge);
            if let Some(facts) = self.fact_edges.built_mut()
                && let Some(rest) = facts.remove(&key).and_then(|ids| ids.without(id))
            {
                facts.insert(key, rest);
            }
            self.grades.remove(&edge);
            // Only fails on an index error for a label it knows; the label's vector then
            // lingers in the index, which costs memory, not correctness.
            if let Err(e) = self.relations.remove_use(&edge.relation) {
                tracing::warn!(relation = %edge.relation, error = %e, "could not drop a relation label's vector");
            }
        }
    }

    fn invalidate_snapshot(&self) {
        self.passages.forget();
        self.pages.forget();
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }
    pub fn store(&self) -> &Store {
        &self.store
    }
    pub fn graph(&self) -> &KnowledgeGraph {
        &self.graph
    }
    pub fn doc(&self, key: DocKey) -> Option<&Document> {
        self.docs.get(key)
    }
    pub fn doc_by_id(&self, id: &str) -> Option<&Document> {
        self.doc_ids.get(id).and_then(|k| self.doc(*k))
    }
    /// The links of `chunk` that point to another document of the KB, each with that
    /// document (a link to the chunk's own document, or to none here, is left out).
    pub fn linked_docs<'a>(&'a self, chunk: &'a Chunk) -> impl Iterator<Item = (&'a Link, &'a Document)> + 'a {
        chunk
            .links
            .iter()
            .filter_map(move |link| self.doc_by_id(&link.target).filter(|d| d.key != chunk.doc).map(|d| (link, d)))
    }
    pub fn docs(&self) -> impl Iterator<Item = &Document> {
        self.docs.values()
    }
    pub fn chunk(&self, id: ChunkId) -> Option<&Chunk> {
        self.chunks.get(id)
    }
    pub fn chunk_ids(&self) -> impl Iterator<Item = ChunkId> + '_ {
        self.chunks.ids()
    }
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id)
    }
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }
    /// Committed nodes with an alias carrying one of `blocks` (see [`align::blocking_keys`]):
    /// the only possible alias matches.
    pub fn alias_candidates(&self, blocks: &[String]) -> Vec<NodeId> {
        self.alias_blocks.candidates(blocks, |_| true)
    }

    /// [`Kb::alias_candidates`] whose names could be the same entity as one sketched as
    /// `name` (see [`NameSketch::may_be_same`]): the nodes an alias match must read.
    pub fn alias_candidates_like(&self, blocks: &[String], name: &NameSketch) -> Vec<NodeId> {
        self.alias_blocks.candidates(blocks, |other| name.may_be_same(other, &self.settings.alias))
    }

    /// Committed nodes with a blocking key that starts with one of `prefixes`: candidates
    /// for a name still being typed, shorter than a blocking key.
    pub fn alias_candidates_by_prefix(&self, prefixes: &[String]) -> Vec<NodeId> {
        self.alias_blocks.candidates_by_prefix(prefixes)
    }

    /// Committed nodes with a name or alias holding a word that begins as the lower-case
    /// `word` does (their blocking key, [`align::word_block`]): a superset of the nodes whose
    /// name holds `word` itself, unless the name has it only in brackets. `None` where more
    /// than `limit` nodes share the key.
    pub fn nodes_by_word(&self, word: &str, limit: usize) -> Option<Vec<NodeId>> {
        match self.alias_blocks.block(&align::word_block(word)) {
            None => Some(Vec::new()),
            Some(members) if members.len() <= limit => Some(members.keys().collect()),
            Some(_) => None,
        }
    }

    /// The edges whose vectors stand for the facts the edges of `node` state: for each
    /// distinct fact, the first edge stating it (see `fact_edges`).
    pub fn fact_vector_edges_at(&self, node: NodeId) -> impl Iterator<Item = EdgeId> {
        self.first_edges_at(node).into_values()
    }

    /// The first edge stating the fact `edge` states, found among its subject's steps as
    /// [`Kb::fact_vector_edges_at`] finds it.
    fn first_edge_stating(&self, edge: &Edge) -> EdgeId {
        self.first_edges_at(edge.subject).get(&FactKey::of(edge)).map_or(edge.id, |first| (*first).min(edge.id))
    }

    /// The first edge stating each fact an edge of `node` states. Every edge stating a fact
    /// joins the fact's subject and object, so `node`'s steps hold them all: serving needs no
    /// fact table.
    fn first_edges_at(&self, node: NodeId) -> Table<FactKey, EdgeId> {
        let mut first: Table<FactKey, EdgeId> = Table::default();
        for edge in self.graph.steps(node).iter().filter_map(|step| self.edges.get(step.edge)) {
            first.entry(FactKey::of(edge)).and_modify(|id| *id = (*id).min(edge.id)).or_insert(edge.id);
        }
        first
    }

    /// Keys each alias of `node` to it and puts it in its aliases' blocks.
    fn index_node_names(&mut self, node: &Node) {
        index_names(&mut self.node_keys, &mut self.alias_blocks, node);
    }

    /// Undoes [`Kb::index_node_names`] for `node` as it was indexed.
    fn unindex_node_names(&mut self, node: &Node) {
        for alias in &node.aliases {
            let key = crate::text::normalize_entity(alias);
            if self.node_keys.get(&key) == Some(&node.id) {
                self.node_keys.remove(&key);
            }
            self.alias_blocks.remove(alias, node.id);
        }
    }

    pub fn node_by_alias(&self, mention: &str) -> Option<NodeId> {
        self.node_keys.get(&crate::text::normalize_entity(mention)).copied()
    }
    pub fn edge(&self, id: EdgeId) -> Option<&Edge> {
        self.edges.get(id)
    }
    pub fn edges(&self) -> impl Iterator<Item = &Edge> {
        self.edges.values()
    }
    /// Share of edges that came from the rule extractor (0 for an empty graph).
    pub fn rule_edge_share(&self) -> f32 {
        self.grades.rule_share()
    }
    /// Share of the edges read from `chunks` that came from the rule extractor; `None` when
    /// they hold no edge.
    pub fn rule_edge_share_of(&self, chunks: impl IntoIterator<Item = ChunkId>) -> Option<f32> {
        self.grades.rule_share_of(chunks)
    }

    pub fn relations(&self) -> &RelationLabels {
        &self.relations
    }
    pub fn nodes_in_chunk(&self, chunk: ChunkId) -> &[NodeId] {
        self.chunk_nodes.get(chunk)
    }
    pub fn chunk_index(&self) -> &VectorIndex {
        &self.chunk_index
    }
    pub fn summary_index(&self) -> &VectorIndex {
        &self.summary_index
    }
    pub fn node_index(&self) -> &VectorIndex {
        &self.node_index
    }
    pub fn fact_index(&self) -> &VectorIndex {
        &self.fact_index
    }
    pub fn bm25(&self) -> &Bm25 {
        &self.bm25
    }

    /// The current PPR snapshot (read from the save where it is current, else built, on
    /// first use after an open or a write).
    pub fn passage_graph(&self) -> Arc<PassageGraph> {
        self.passages.get(self, &self.index_dir())
    }

    /// The current pages snapshot (read or built like [`Kb::passage_graph`]).
    pub fn pages(&self) -> Arc<Pages> {
        self.pages.get(self, &self.index_dir())
    }

    /// Builds the snapshots and adds them and the records (see [`records`]) to the save, so
    /// that the next open reads its records from one file and serves its first query without
    /// building the snapshots (seconds on a large KB): for the end of an ingest run. Only
    /// where the save holds everything else as it is now: a run too small to be worth a save
    /// (see [`Kb::save_indexes_if_worth_it`]) is not worth one for this, and its next open
    /// builds them as before.
    pub fn save_with_snapshot(&mut self) {
        let complete = self.passages.is_saved()
            && self.pages.is_saved()
            && self.records_current()
            && !self.bm25.worth_rewriting(self.applied_change, 0);
        if self.is_empty() || self.most_unsaved() > 0 || complete {
            return;
        }
        self.passage_graph();
        self.pages();
        self.save_indexes_or_warn(SaveScope::Complete);
    }

    /// How many chunks mention `node` (0 for an unknown node): the inverse of a node's
    /// specificity.
    pub fn node_chunk_count(&self, node: NodeId) -> usize {
        self.nodes.get(node).map_or(0, |n| n.chunks.len())
    }

    /// Title of a chunk's document, for display and for indexing ("title\ntext").
    pub fn chunk_title(&self, chunk: &Chunk) -> &str {
        self.docs.get(chunk.doc).map_or("", |d| d.title.as_str())
    }

    pub fn stats(&self) -> Stats {
        Stats {
            documents: self.docs.len(),
            chunks: self.chunks.len(),
            nodes: self.nodes.len(),
            edges: self.edges.len(),
            aliases_merged: self.nodes.values().map(|n| n.aliases.len().saturating_sub(1)).sum(),
            relation_labels: self.relations.len(),
            chunk_vectors: self.chunk_index.len(),
            summary_vectors: self.summary_index.len(),
            entity_vectors: self.node_index.len(),
            fact_vectors: self.fact_index.len(),
            bm25_terms: self.bm25.vocabulary(),
            vector_index_bytes: self.chunk_index.memory_bytes()
                + self.summary_index.memory_bytes()
                + self.node_index.memory_bytes()
                + self.fact_index.memory_bytes(),
            embedder: self.embedder.id(),
        }
    }

    /// Text retrieval over chunks: the quick sanity tool and the baselines' engine. `fusion`
    /// comes from the caller's retrieval settings (a policy's, say), not the KB's.
    pub fn search(
        &self,
        query: &EmbeddedQuery,
        mode: SearchMode,
        k: usize,
        fusion: TextFusion,
    ) -> Result<Vec<(ChunkId, f32)>> {
        self.search_reusing(query, mode, k, fusion, &[])
    }

    /// [`Kb::search`] with the query's dense ranking at hand already (`dense`, best first,
    /// from a search of the chunk index for at least as many as it needs; the retriever
    /// makes a wide one for its global stage): it is reused rather than searched again.
    pub fn search_reusing(
        &self,
        query: &EmbeddedQuery,
        mode: SearchMode,
        k: usize,
        fusion: TextFusion,
        dense: &[(ChunkId, f32)],
    ) -> Result<Vec<(ChunkId, f32)>> {
        let candidates = k.max(fusion.candidates);
        let lexical = || self.bm25.search(&query.text, candidates);
        let covers = dense.len() >= candidates.min(self.chunk_index.len());
        let dense = || match covers {
            true => Ok(dense.iter().take(candidates).map(|(c, s)| (u64::from(*c), *s)).collect()),
            false => self.chunk_index.search(&query.vector, candidates),
        };
        let mut ranked: Vec<(u64, f32)> = match mode {
            SearchMode::Bm25 => lexical(),
            SearchMode::Vector => dense()?,
            SearchMode::Hybrid => {
                let lists = [keys(&lexical()), keys(&dense()?)];
                reciprocal_rank_fusion(&lists, fusion.rrf_k)
            }
        };
        ranked.truncate(k);
        Ok(ranked.into_iter().map(|(id, s)| (id as ChunkId, s)).collect())
    }

    pub fn flush(&self) -> Result<()> {
        self.store.flush()
    }
}

/// The saved vector indexes, in [`Kb::saved_indexes`]' order, under their names in a save.
const SAVED_INDEXES: [&str; 4] = ["chunks", "summaries", "nodes", "facts"];

/// The saved vector indexes, mapped apart from a KB (see [`Kb::adopt_save`]).
type SavedIndexes = [VectorIndex; 4];

/// Where the saved indexes of the KB at `location` lie.
fn index_dir_at(settings: &Settings, location: &Location) -> std::path::PathBuf {
    match location {
        Location::Sled(dir) => dir.join(SAVED_INDEX_DIR),
        Location::Postgres { kb, .. } => settings.data_dir.join("postgres").join(kb.as_str()).join(SAVED_INDEX_DIR),
    }
}

/// What saved graphs must have been built for to be adopted.
fn graph_fingerprint(index: &IndexSettings, embedder: &dyn Embedder) -> saved::GraphFingerprint {
    saved::GraphFingerprint {
        embedder: embedder.id(),
        dim: embedder.dim(),
        options: format!("{:?}/{}", index.quantization, index.connectivity),
    }
}

/// The save as an open first reads it, before knowing whether the store has moved on: its
/// manifest, its records file decoded, and its vector indexes mapped (or why they could not
/// be). Whether the records and indexes are current is decided once the store is open; they
/// are dropped where they are not.
struct SaveAtOpen {
    manifest: Option<saved::Manifest>,
    records: Option<Result<(Records, Option<Tables>)>>,
    indexes: Option<Result<SavedIndexes>>,
}

impl SaveAtOpen {
    fn read(dir: &Path, built_for: &saved::GraphFingerprint, dim: usize, settings: &IndexSettings) -> SaveAtOpen {
        let manifest = saved::Manifest::read(dir, built_for);
        // Each a thread of its own: the records' decoding waits on reading the file in, and
        // the mapping on reading in the graphs' links, so neither keeps a core busy alone.
        let (records, indexes) = std::thread::scope(|scope| {
            let manifest = manifest.as_ref();
            let mapping = scope.spawn(move || {
                manifest.filter(|m| m.change.is_some()).map(|m| map_saved_indexes(dir, m, dim, settings))
            });
            let records = manifest.and_then(|m| m.records.as_ref()).map(|saved| Records::from_save(dir, saved));
            let panicked = || Some(Err(Error::Internal("mapping the saved indexes panicked".into())));
            (records, mapping.join().unwrap_or_else(|_| panicked()))
        });
        SaveAtOpen { manifest, records, indexes }
    }
}

/// Maps each vector index of the save `manifest` names, in [`SAVED_INDEXES`]' order: its
/// vectors, and its graphs as they were. An error if any of them is unusable.
fn map_saved_indexes(
    dir: &Path,
    manifest: &saved::Manifest,
    dim: usize,
    settings: &IndexSettings,
) -> Result<SavedIndexes> {
    let map = |name: &str, settings: &IndexSettings| -> Result<VectorIndex> {
        let mut index = VectorIndex::new(dim, settings)?;
        let graphs = manifest.indexes.get(name).map_or(&[][..], Vec::as_slice);
        let vectors = manifest.vectors.get(name).ok_or_else(|| Error::Index(format!("no vectors saved for {name}")))?;
        index.adopt_save(dir, graphs, vectors)?;
        Ok(index)
    };
    let [chunks, summaries, nodes, facts] = SAVED_INDEXES;
    Ok([
        map(chunks, settings)?,
        map(summaries, settings)?,
        map(nodes, &settings.for_entities())?,
        map(facts, &settings.for_facts())?,
    ])
}

/// The elements of `a` missing from `b`, both sorted ascending (node provenance lists), in
/// one merge pass after their common beginning. Chunk ids only grow, so a node that gains a
/// mention gains it at the end: a hub named by a third of a million pages compares its
/// hundreds of thousands of chunks as memory, not one by one, on every commit naming it.
fn sorted_difference<'a>(a: &'a [ChunkId], b: &'a [ChunkId]) -> impl Iterator<Item = ChunkId> + 'a {
    const BLOCK: usize = 256;
    let mut same = 0;
    while same + BLOCK <= a.len().min(b.len()) && a[same..same + BLOCK] == b[same..same + BLOCK] {
        same += BLOCK;
    }
    let (a, b) = (&a[same..], &b[same..]);
    let mut rest = b.iter().peekable();
    a.iter().copied().filter(move |x| {
        while rest.next_if(|y| **y < *x).is_some() {}
        rest.peek().is_none_or(|y| **y != *x)
    })
}

fn keys(list: &[(u64, f32)]) -> Vec<u64> {
    list.iter().map(|(k, _)| *k).collect()
}

impl Kb {
    /// Extraction-loss stress test: forgets nodes (and their edges) in memory only, text and
    /// sled untouched, as if the extractor had missed those entities.
    pub fn forget_nodes_in_memory(&mut self, ids: &[NodeId]) -> Result<()> {
        for id in ids {
            let Some(node) = self.nodes.remove(*id) else {
                continue;
            };
            self.unindex_node_names(&node);
            let edges: Vec<EdgeId> = self.graph.steps(*id).into_iter().map(|step| step.edge).collect();
            let facts = self.fact_representatives(self.facts_of(&edges));
            for edge in edges {
                self.forget_edge_in_memory(edge);
            }
            self.move_fact_vectors(facts, Table::default())?;
            self.graph.remove_node(*id);
            self.node_index.remove(*id as u64)?;
            for c in &node.chunks {
                self.chunk_nodes.remove(*c, *id);
            }
        }
        self.invalidate_snapshot();
        Ok(())
    }
}

impl Kb {
    /// Checks the cross-record invariants (provenance, edge endpoints, manifest); returns
    /// every violation found. Empty means consistent.
    pub fn integrity_violations(&self) -> Vec<String> {
        let mut problems = Vec::new();
        // One fact vector per distinct fact, under its first edge.
        for ids in self.facts().values() {
            let first = ids.first();
            if self.fact_index.get(first).is_none() {
                problems.push(format!("fact of edge {first} is not indexed"));
            }
        }
        // Retrieval finds facts through the graph rather than the table: both must agree.
        let firsts: HashSet<EdgeId> = self.facts().values().map(FactEdges::first).collect();
        let found: HashSet<EdgeId> = self.nodes.ids().flat_map(|node| self.fact_vector_edges_at(node)).collect();
        if found != firsts {
            problems.push(format!(
                "the graph finds {} facts' first edges, the fact table {} ({} differ)",
                found.len(),
                firsts.len(),
                found.symmetric_difference(&firsts).count()
            ));
        }
        if self.fact_index.len() != self.facts().len() {
            problems.push(format!(
                "{} fact vectors indexed for {} distinct facts",
                self.fact_index.len(),
                self.facts().len()
            ));
        }
        for doc in self.docs.values() {
            for c in &doc.chunks {
                if !self.chunks.contains(*c) {
                    problems.push(format!("document {} lists missing chunk {c}", doc.id));
                }
            }
            for e in &doc.edges {
                if !self.edges.contains(*e) {
                    problems.push(format!("document {} lists missing edge {e}", doc.id));
                }
            }
            if summary_embedded_apart(doc.chunks.len()) && !self.summary_index.contains(doc.key as u64) {
                problems.push(format!("document {} has no summary vector", doc.id));
            }
        }
        for chunk in self.chunks.values() {
            if !self.docs.contains(chunk.doc) {
                problems.push(format!("chunk {} belongs to missing document {}", chunk.id, chunk.doc));
            }
            if !self.chunk_index.contains(chunk.id as u64) {
                problems.push(format!("chunk {} has no vector", chunk.id));
            }
        }
        // Vectors nothing owns: what a replay that kept a removed vector would leave.
        for (index, vectors, records) in [
            ("chunk", self.chunk_index.len(), self.chunks.len()),
            // A one-chunk document has none, or one an older build stored (its chunk's).
            (
                "summary",
                self.summary_index.len(),
                self.docs.ids().filter(|k| self.summary_index.contains(*k as u64)).count(),
            ),
            ("entity", self.node_index.len(), self.nodes.len()),
        ] {
            if vectors != records {
                problems.push(format!("{vectors} {index} vectors indexed for {records} records"));
            }
        }
        for edge in self.edges.values() {
            for end in [edge.subject, edge.object] {
                match self.nodes.get(end) {
                    None => problems.push(format!("edge {} points at missing node {end}", edge.id)),
                    Some(n) if n.chunks.binary_search(&edge.chunk).is_err() => {
                        problems.push(format!("node {end} lacks provenance chunk {} of edge {}", edge.chunk, edge.id))
                    }
                    Some(_) => {}
                }
            }
        }
        for node in self.nodes.values() {
            if node.chunks.is_empty() {
                problems.push(format!("node {} has no provenance", node.id));
            }
            if !self.node_index.contains(node.id as u64) {
                problems.push(format!("node {} has no vector", node.id));
            }
            for c in &node.chunks {
                if !self.chunks.contains(*c) {
                    problems.push(format!("node {} cites missing chunk {c}", node.id));
                }
                if self.nodes_in_chunk(*c).iter().filter(|n| **n == node.id).count() != 1 {
                    problems.push(format!("reverse provenance of chunk {c} does not list node {} once", node.id));
                }
            }
        }
        for (c, ids) in self.chunk_nodes.iter() {
            for id in ids {
                if self.nodes.get(*id).is_none_or(|n| n.chunks.binary_search(&c).is_err()) {
                    problems.push(format!("reverse provenance of chunk {c} lists node {id}, which does not cite it"));
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::{Edge, LabelUses, sorted_difference};
    use crate::kb::model::EdgeOrigin;
    use std::sync::Arc;

    #[test]
    fn label_uses_count_each_shared_text_and_each_copy_apart() {
        let (shared, copy): (Arc<str>, Arc<str>) = ("founded".into(), "founded".into());
        let edge = |id, relation: &Arc<str>| Edge {
            id,
            subject: 1,
            relation: Arc::clone(relation),
            object: 2,
            chunk: 3,
            origin: EdgeOrigin::Extracted,
        };
        let other: Arc<str> = "joined".into();
        let edges = [edge(1, &shared), edge(2, &other), edge(3, &shared), edge(4, &copy), edge(5, &shared)];
        let uses = LabelUses::of(&edges);
        let counted: Vec<(&str, usize)> = uses.0.iter().map(|(label, n)| (&***label, *n)).collect();
        assert_eq!(counted, [("founded", 3), ("joined", 1), ("founded", 1)], "in the order first used");
        assert_eq!(uses.texts().collect::<Vec<_>>(), ["founded", "joined", "founded"]);
    }

    #[test]
    fn sorted_difference_keeps_what_only_the_first_list_has() {
        let cases: [(&[u32], &[u32], &[u32]); 6] = [
            (&[1, 3, 5, 7], &[3, 4, 7], &[1, 5]),
            (&[1, 2, 3], &[], &[1, 2, 3]),
            (&[], &[1, 2], &[]),
            (&[2, 4], &[1, 2, 3, 4, 5], &[]),
            (&[5, 6, 9], &[1, 2], &[5, 6, 9]),
            (&[1, 9], &[5], &[1, 9]),
        ];
        for (a, b, expected) in cases {
            assert_eq!(sorted_difference(a, b).collect::<Vec<_>>(), expected, "{a:?} - {b:?}");
        }
        // Long lists that share a beginning, then part.
        let before: Vec<u32> = (0..2_000).map(|i| i * 2).collect();
        let mut after = before.clone();
        after.retain(|c| *c != 1_000);
        after.extend([5_000, 5_001]);
        assert_eq!(sorted_difference(&before, &after).collect::<Vec<_>>(), [1_000]);
        assert_eq!(sorted_difference(&after, &before).collect::<Vec<_>>(), [5_000, 5_001]);
        assert_eq!(sorted_difference(&after, &after).count(), 0);
    }
}
