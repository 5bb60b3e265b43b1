//! Nearest-neighbour search over L2-normalised vectors: a usearch HNSW graph finds
//! candidates, exact f32 vectors score them.
//!
//! Two decisions keep ingest fast without making answers approximate where it matters:
//! - The graph stores quantised codes (`index.quantization`, default i8): one HNSW insertion
//!   costs thousands of distance computations, and i8 codes make each several times cheaper.
//!   Every returned score is then recomputed from the exact vector, over an oversampled
//!   candidate list, so thresholds downstream (seed and alias cosines) see exact cosines.
//! - Writes are staged: [`VectorIndex::upsert`] records the vector, and
//!   [`VectorIndex::link_staged`] links everything staged into the graph in one pass, on
//!   every core, at the end of an ingest batch; within a long batch,
//!   [`VectorIndex::start_linking`] links what piled up on a thread of its own while the
//!   writer goes on. Searches scan staged vectors (and those being linked) exactly and merge
//!   them with the graph's candidates, so no vector is missed while it waits for a graph.
//! - Small indexes are searched exactly and never linked: below `index.exact_search_max`
//!   vectors a scan of every exact vector costs about as much as an HNSW search (a few
//!   thousand vectors of a few hundred floats are well under a millisecond), and it makes
//!   results independent of how a graph happened to be built. Above it, the graph is linked
//!   on `index.build_threads` threads; one thread (the default) builds the same graph from
//!   the same inserts, so retrieval stays reproducible at any size.
//! - Graphs are bounded: once one holds `index.graph_max` vectors, linking starts the next,
//!   and a search asks every graph. One HNSW insertion searches the graph it joins, and on
//!   near-orthogonal vectors (hashed embeddings of unrelated facts) that search visits more
//!   nodes the larger the graph (linking cost per vector tripled from 16k to 200k vectors, and
//!   rises about 2.5-fold from an 8k graph's last quarter to a 32k one's), so one unbounded
//!   graph made a large document's ingest super-linear. Bounded graphs keep the cost per
//!   linked vector flat; a search costs one small-graph search per graph, and on such
//!   vectors a search's cost grows about in proportion to the graph, so the entity index's
//!   graphs are half the size (`index.entity_graph_max`) and the fact index's, searched only
//!   for rare questions, a quarter (`index.fact_graph_max`).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::exact::ExactCodes;
use super::homes::Homes;
use super::saved::{self, SavedGraph, SavedVectors};
use super::segment::{SharedRow, VectorStore};
use super::{mapped, packed};
use crate::config::{IndexSettings, Quantization};
use crate::error::{Error, Result};
use crate::rank::top_k;

/// Graph candidates fetched per requested hit before exact rescoring.
const OVERSAMPLE: usize = 2;
/// Extra candidates on top, so that small `k` still gets a margin.
const OVERSAMPLE_MIN_EXTRA: usize = 8;
/// Searches of several graphs split the candidate budget among them, but never ask one
/// graph for fewer candidates than a search of this many hits would (see
/// [`VectorIndex::search`]). Each graph of several is also searched only as wide as that
/// ([`VectorIndex::fit_expansion`]).
const SPLIT_FLOOR: usize = 8;
/// From this many graphs on, a search asks them on every core: a million passages make 31
/// chunk graphs and hundreds of fact graphs, asked one after another in most of a query's time.
const PARALLEL_GRAPHS: usize = 4;

/// One HNSW graph of an index, with where it lives on disk.
struct Graph {
    /// A candidate generator over quantised codes of at most `index.graph_max` linked vectors.
    /// Declared before `view`, so that a viewed graph is dropped before the mapping it reads.
    /// Shared with a background link pass ([`Linking`]), which only ever links into a graph
    /// that is not viewed, and with a search's helper threads ([`Search`]), which end with
    /// the search.
    index: Arc<Index>,
    /// The mapped file a sealed graph (any but the last) reads in place when it came from a
    /// save: nothing is linked into it again, so it need not be resident. A key unlinked from
    /// a viewed graph stays in it and is filtered out by `VectorIndex::home`.
    view: Option<memmap2::Mmap>,
    /// Its files on disk while they still match it (see [`saved`]); a graph that changed
    /// since is saved again.
    saved: Option<SavedGraph>,
}

impl Graph {
    fn new(index: Index) -> Self {
        Graph { index: Arc::new(index), view: None, saved: None }
    }
}

/// Proposals of graph searches: the graph each came from, its key, its quantised distance.
type Proposals = Vec<(usize, u64, f32)>;

/// A link pass's keys: each graph it links into, with its keys in linking order.
type LinkPlan = Vec<(usize, Vec<u64>)>;

/// A link pass running beside the writer ([`VectorIndex::start_linking`]): the graphs it
/// links into, each with its keys in linking order.
struct Linking {
    parts: LinkPlan,
    /// Every key of `parts`. Until the pass is over a search scores them exactly, as it does
    /// staged keys, and a write to one of them waits for the pass.
    keys: foldhash::HashSet<u64>,
    worker: std::thread::JoinHandle<Vec<Result<()>>>,
}

impl Linking {
    /// Whether a write to `key`, homed in graph `home` if linked, must wait for the pass:
    /// the key is being linked, or would be unlinked from a graph the pass adds to.
    fn touches(&self, key: u64, home: Option<usize>) -> bool {
        self.keys.contains(&key) || home.is_some_and(|at| self.parts.iter().any(|(graph, _)| *graph == at))
    }
}

/// A search of an index's graphs under way ([`VectorIndex::start_search`]).
pub struct Search<'a> {
    index: &'a VectorIndex,
    k: usize,
    shared: Arc<GraphSearches>,
    helpers: Vec<std::thread::JoinHandle<Result<Proposals>>>,
}

impl Search<'_> {
    /// Searches the graphs no helper has taken, waits for the helpers, and returns the `k`
    /// best keys by exact cosine, best first.
    pub fn finish(mut self) -> Result<Vec<(u64, f32)>> {
        let index = self.index;
        if index.is_empty() || self.k == 0 {
            return Ok(Vec::new());
        }
        if index.is_exact() {
            return Ok(index.search_exactly(&self.shared.query, self.k));
        }
        let mut proposed = self.shared.search_until_done()?;
        for helper in std::mem::take(&mut self.helpers) {
            proposed.extend(helper.join().map_err(|_| Error::Index("an HNSW search thread panicked".into()))??);
        }
        Ok(index.rescore(&self.shared.query, self.k, proposed))
    }
}

impl Drop for Search<'_> {
    /// A search dropped unfinished (its stage never ran) stops its helpers after the graph
    /// each is on: they share the index's graphs, which must not change under them once
    /// the borrow ends.
    fn drop(&mut self) {
        self.shared.abandoned.store(true, Ordering::Relaxed);
        for helper in self.helpers.drain(..) {
            let _ = helper.join();
        }
    }
}

/// What the threads of one [`Search`] share: the graphs to ask, each taken by whichever
/// thread comes first, so a caller that joins late finds less left to do.
struct GraphSearches {
    graphs: Vec<(usize, Arc<Index>)>,
    query: Vec<f32>,
    per_graph: usize,
    next: AtomicUsize,
    abandoned: AtomicBool,
}

impl GraphSearches {
    /// Takes graphs one by one until none is left (or the search is abandoned), returning
    /// each proposal with the graph it came from and its quantised distance, which every
    /// graph measures alike.
    fn search_until_done(&self) -> Result<Proposals> {
        let mut found = Vec::new();
        while !self.abandoned.load(Ordering::Relaxed) {
            let Some((at, graph)) = self.graphs.get(self.next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            let matches = graph.search(&self.query, self.per_graph.min(graph.size())).map_err(index_error)?;
            found.extend(matches.keys.into_iter().zip(matches.distances).map(|(key, distance)| (*at, key, distance)));
        }
        Ok(found)
    }
}

/// Where a link pass reads the vectors it links: the index's store, while the pass holds the
/// index (a blocking pass), or a copy in linking order (a pass beside the writer, which
/// goes on writing to the store).
#[derive(Clone, Copy)]
enum Source<'a> {
    Store(&'a VectorStore),
    /// One row per key of the part, shared with the store ([`VectorStore::shared`]).
    Shared {
        rows: &'a [SharedRow],
        dim: usize,
    },
}

/// The vectors of one graph's share of a link pass.
struct Part<'a> {
    graph: &'a Index,
    keys: &'a [u64],
    vectors: Source<'a>,
}

impl Part<'_> {
    fn vector(&self, position: usize) -> Result<Cow<'_, [f32]>> {
        let key = self.keys[position];
        match self.vectors {
            Source::Store(store) => store.get(key),
            Source::Shared { rows, dim } => rows.get(position).and_then(|row| row.vector(dim)),
        }
        .ok_or_else(|| Error::Internal(format!("vector {key} staged but not stored")))
    }
}

pub struct VectorIndex {
    /// The graphs; only the last is linked into. Never empty.
    graphs: Vec<Graph>,
    options: IndexOptions,
    dim: usize,
    /// Every stored vector, exact; the source of all scores. Mapped from the saved segments
    /// where an open found them, on the heap for what was written since (see [`super::segment`]).
    vectors: VectorStore,
    /// Stored but not yet linked into a graph. A key is never both here and in a graph.
    staged: BTreeSet<u64>,
    /// The graph each linked key is in.
    home: Homes,
    /// Keys linked into or removed from a graph since the last save.
    unsaved: usize,
    build_threads: usize,
    /// Up to this many vectors, searches scan every vector and nothing is linked.
    exact_max: usize,
    /// Vectors per graph: `index.graph_max`, or the entity or fact index's own bound.
    graph_max: usize,
    /// i8 codes of every vector for the exact scan, made by the first exact search and kept
    /// up to date while the index is searched exactly; a linked index has none.
    codes: std::sync::OnceLock<ExactCodes>,
    /// The link pass running beside the writer, if any; its keys are neither staged nor homed.
    linking: Option<Linking>,
}

impl VectorIndex {
    pub fn new(dim: usize, settings: &IndexSettings) -> Result<Self> {
        let options = IndexOptions {
            dimensions: dim,
            // Inputs are unit vectors, so cosine ranks like inner product; usearch's
            // quantised kernels are defined for cosine.
            metric: MetricKind::Cos,
            quantization: match settings.quantization {
                Quantization::F32 => ScalarKind::F32,
                Quantization::F16 => ScalarKind::F16,
                Quantization::I8 => ScalarKind::I8,
            },
            connectivity: settings.connectivity,
            expansion_add: settings.expansion_add,
            expansion_search: settings.expansion_search,
            multi: false,
        };
        let graph = Index::new(&options).map_err(index_error)?;
        let build_threads = match settings.build_threads {
            0 => cores(),
            n => n,
        };
        let index = VectorIndex {
            graphs: vec![Graph::new(graph)],
            unsaved: 0,
            home: Homes::default(),
            options,
            dim,
            vectors: VectorStore::new(dim),
            staged: BTreeSet::new(),
            build_threads,
            exact_max: settings.exact_search_max,
            graph_max: settings.graph_max,
            codes: std::sync::OnceLock::new(),
            linking: None,
        };
        index.reserve(&index.graphs[0].index, 1024)?;
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Vectors waiting for [`VectorIndex::link_staged`].
    pub fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Vectors the next [`VectorIndex::link_staged`] will link (none while the index is
    /// small enough to be searched exactly).
    pub fn staged_for_linking(&self) -> usize {
        if self.vectors.len() <= self.exact_max { 0 } else { self.staged.len() }
    }

    pub fn memory_bytes(&self) -> usize {
        self.graphs.iter().map(|g| g.index.memory_usage()).sum::<usize>()
            + self.vectors.heap_bytes()
            + self.codes.get().map_or(0, ExactCodes::memory_bytes)
    }

    /// Inserts or replaces the vector stored under `key` (staged until the next link pass).
    pub fn upsert(&mut self, key: u64, v: Vec<f32>) -> Result<()> {
        if v.len() != self.dim {
            return Err(Error::Index(format!(
                "vector of dimension {} for an index of dimension {}",
                v.len(),
                self.dim
            )));
        }
        self.upsert_row(key, packed::Row::of(&v))
    }

    /// [`VectorIndex::upsert`] of a vector already packed.
    pub fn upsert_row(&mut self, key: u64, row: packed::Row) -> Result<()> {
        if !row.has_dim(self.dim) {
            return Err(Error::Index(format!("a packed vector not of the index's dimension {}", self.dim)));
        }
        self.finish_linking_before_writing(key)?;
        self.unlink(key)?;
        if let Some(codes) = self.codes.get_mut()
            && let Some(v) = row.vector(self.dim)
        {
            codes.upsert(key, &v);
        }
        self.vectors.insert(key, row);
        self.staged.insert(key);
        Ok(())
    }

    pub fn remove(&mut self, key: u64) -> Result<()> {
        self.finish_linking_before_writing(key)?;
        if let Some(codes) = self.codes.get_mut() {
            codes.remove(key);
        }
        self.vectors.remove(key);
        self.staged.remove(&key);
        self.unlink(key)
    }

    fn unlink(&mut self, key: u64) -> Result<()> {
        if let Some(at) = self.home.remove(key) {
            let graph = &mut self.graphs[at];
            if graph.view.is_none() {
                graph.index.remove(key).map_err(index_error)?;
            }
            graph.saved = None;
            self.unsaved += 1;
        }
        Ok(())
    }

    /// Vectors linked into the graphs.
    fn linked(&self) -> usize {
        self.graphs.iter().map(|g| g.index.size()).sum()
    }

    /// Links every staged vector into the HNSW graphs, in key order, filling the last graph
    /// up to `graph_max` and then starting others, and returns when they are linked (after
    /// any pass running beside the writer). Each graph is linked on `index.build_threads`
    /// threads, and the graphs one pass fills are linked side by side, on every core: a pass
    /// at the end of a long ingest, or at an open that found no usable save, fills several
    /// of one index, and linking them one after another kept one core busy while the others
    /// waited. Which keys go into which graph, and in which order, depends only on the keys
    /// and on when passes start, so one build thread still gives the same graphs on every
    /// run; with more, a graph's shape depends on scheduling, and candidate lists may differ
    /// between two builds in rare near-ties.
    /// Does nothing while the index is small enough to be searched exactly.
    pub fn link_staged(&mut self) -> Result<()> {
        self.finish_linking()?;
        let Some(parts) = self.plan_link()? else {
            return Ok(());
        };
        let outcomes = {
            let source = Source::Store(&self.vectors);
            let work: Vec<Part> =
                parts.iter().map(|(at, keys)| Part { graph: &self.graphs[*at].index, keys, vectors: source }).collect();
            link_parts(&work, self.build_threads)
        };
        self.settle(parts, outcomes)
    }

    /// Starts linking every staged vector, as [`VectorIndex::link_staged`] would, on a thread
    /// of its own, and returns at once: the writer goes on committing while the graphs grow
    /// (a writer that waited for each pass left one core idle meanwhile: a 1,000,000-passage
    /// ingest took 2,021 s that way and 1,688 s with passes beside it). The pass shares the
    /// store's rows instead of copying them (one 16 MB document's copy was 0.8 GB of fresh
    /// pages). Until it is over, searches score its keys exactly, and a write to one of
    /// them, or an unlink from a graph it adds to, first waits for it; the next pass starts
    /// after it, so the graphs are those the blocking passes would build. Waits for the
    /// previous pass first.
    pub fn start_linking(&mut self) -> Result<()> {
        self.finish_linking()?;
        let Some(parts) = self.plan_link()? else {
            return Ok(());
        };
        let mut work = Vec::with_capacity(parts.len());
        for (at, keys) in &parts {
            let mut shared = Vec::with_capacity(keys.len());
            for key in keys {
                match self.vectors.shared(*key) {
                    Some(vector) => shared.push(vector),
                    None => {
                        self.restage(&parts);
                        return Err(Error::Internal(format!("vector {key} staged but not stored")));
                    }
                }
            }
            work.push((Arc::clone(&self.graphs[*at].index), keys.clone(), shared));
        }
        let (build_threads, dim) = (self.build_threads, self.dim);
        let spawned = std::thread::Builder::new().name("hnsw-link".into()).spawn(move || {
            let parts: Vec<Part> = work
                .iter()
                .map(|(graph, keys, rows)| Part { graph, keys, vectors: Source::Shared { rows, dim } })
                .collect();
            link_parts(&parts, build_threads)
        });
        match spawned {
            Ok(worker) => {
                let keys = parts.iter().flat_map(|(_, keys)| keys.iter().copied()).collect();
                self.linking = Some(Linking { parts, keys, worker });
                Ok(())
            }
            Err(e) => {
                self.restage(&parts);
                Err(Error::Index(format!("could not start an HNSW link thread: {e}")))
            }
        }
    }

    /// Stages again the keys of a pass that could not start.
    fn restage(&mut self, parts: &LinkPlan) {
        self.staged.extend(parts.iter().flat_map(|(_, keys)| keys));
    }

    /// Waits for the pass [`VectorIndex::start_linking`] started, if any, and homes its keys.
    pub fn finish_linking(&mut self) -> Result<()> {
        let Some(Linking { parts, worker, .. }) = self.linking.take() else {
            return Ok(());
        };
        let outcomes = worker.join().unwrap_or_else(|_| {
            parts.iter().map(|_| Err(Error::Index("an HNSW build thread panicked".into()))).collect()
        });
        self.settle(parts, outcomes)
    }

    /// Waits for the running pass if a write to `key` would race it (see [`Linking::touches`]).
    fn finish_linking_before_writing(&mut self, key: u64) -> Result<()> {
        match &self.linking {
            Some(linking) if linking.touches(key, self.home.get(key)) => self.finish_linking(),
            _ => Ok(()),
        }
    }

    /// Takes the staged keys for a link pass and shares them among graphs: the last graph's
    /// room first, then new graphs of `graph_max` each, each with room reserved for its
    /// share. `None` when there is nothing to link; on an error the keys stay staged.
    fn plan_link(&mut self) -> Result<Option<LinkPlan>> {
        if self.staged_for_linking() == 0 {
            return Ok(None);
        }
        // Searched through the graphs from now on.
        self.codes = std::sync::OnceLock::new();
        let staged: Vec<u64> = std::mem::take(&mut self.staged).into_iter().collect();
        let mut at = self.graphs.len() - 1;
        let mut room = self.graph_max.saturating_sub(self.graphs[at].index.size());
        let mut parts: LinkPlan = Vec::new();
        let mut rest = staged.as_slice();
        while !rest.is_empty() {
            if room == 0 {
                match Index::new(&self.options) {
                    Ok(index) => self.graphs.push(Graph::new(index)),
                    Err(e) => {
                        self.staged.extend(&staged);
                        return Err(index_error(e));
                    }
                }
                (at, room) = (self.graphs.len() - 1, self.graph_max);
            }
            let (part, later) = rest.split_at(room.min(rest.len()));
            let graph = &self.graphs[at].index;
            let needed = graph.size() + part.len();
            if needed >= graph.capacity()
                && let Err(e) = self.reserve(graph, needed.next_power_of_two().min(self.graph_max))
            {
                self.staged.extend(&staged);
                return Err(e);
            }
            parts.push((at, part.to_vec()));
            room -= part.len();
            rest = later;
        }
        Ok(Some(parts))
    }

    /// Homes the keys of each part that linked; a part that failed is staged again, so a key
    /// is always homed in a graph, staged or being linked, never lost.
    fn settle(&mut self, parts: LinkPlan, outcomes: Vec<Result<()>>) -> Result<()> {
        let mut failed = None;
        for ((at, part), outcome) in parts.into_iter().zip(outcomes) {
            match outcome {
                Ok(()) => {
                    self.graphs[at].saved = None;
                    self.unsaved += part.len();
                    self.home.extend(part.iter().map(|key| (*key, at)));
                }
                Err(e) => {
                    self.staged.extend(part);
                    failed.get_or_insert(e);
                }
            }
        }
        self.fit_expansion();
        failed.map_or(Ok(()), Err)
    }

    /// Sets how widely each graph is searched: `index.expansion_search` while there is one;
    /// with several, just as widely as the fewest candidates a search asks of each graph
    /// ([`candidates_per_graph`]), so a wider search's share widens it and nothing narrows it
    /// further. A search of several graphs explores each of them, so searching each as
    /// widely as one graph holding every vector would multiply its work by their number: at
    /// a million passages the 31 chunk graphs' searches at width 64 took 17.7 ms of a
    /// query and 8.4 ms at 40, with the same recall (`a2rag bench scale`); at 24, a2rag's
    /// p50 fell by a further 2-3 ms and its R@5 by 0.0025 (one gold passage of 400), the
    /// dev questions over 109,001 passages unchanged. Graphs are only
    /// added or replaced through `&mut self`, so no search reads a width while it changes.
    fn fit_expansion(&mut self) {
        let width = match self.graphs.len() {
            0 | 1 => self.options.expansion_search,
            _ => self.options.expansion_search.min(budget(SPLIT_FLOOR)),
        };
        for graph in &self.graphs {
            graph.index.change_expansion_search(width);
        }
    }

    /// Up to `k` nearest keys with their exact cosine similarity, best first.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        self.start_search(query, k).finish()
    }

    /// Starts [`VectorIndex::search`] and returns at once: with [`PARALLEL_GRAPHS`] graphs
    /// or more, helper threads (one per other core) start searching them now, and
    /// [`Search::finish`] searches those no helper took yet beside them, then rescores. A
    /// caller with other work to do first (the retriever's earlier stages, before the global
    /// stage needs its dense seeds) overlaps the two; one that does not loses nothing.
    pub fn start_search(&self, query: &[f32], k: usize) -> Search<'_> {
        let graphs: Vec<(usize, Arc<Index>)> = match self.is_empty() || k == 0 || self.is_exact() {
            true => Vec::new(),
            false => {
                self.graphs.iter().map(|g| Arc::clone(&g.index)).enumerate().filter(|(_, g)| g.size() > 0).collect()
            }
        };
        let helpers = match graphs.len() >= PARALLEL_GRAPHS {
            true => cores().min(graphs.len()) - 1,
            false => 0,
        };
        let shared = Arc::new(GraphSearches {
            per_graph: candidates_per_graph(k, graphs.len()),
            graphs,
            query: query.to_vec(),
            next: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
        });
        // A helper that cannot start leaves its graphs to the caller.
        let helpers = (0..helpers)
            .filter_map(|_| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new().name("hnsw-search".into()).spawn(move || shared.search_until_done()).ok()
            })
            .collect();
        Search { index: self, k, shared, helpers }
    }

    /// The exact search of an index that links nothing: every vector is staged. The codes
    /// pick the candidates (see [`ExactCodes`]); the exact vectors score them.
    fn search_exactly(&self, query: &[f32], k: usize) -> Vec<(u64, f32)> {
        let codes = self.codes.get_or_init(|| ExactCodes::new(self.dim, self.vectors.iter()));
        let hits = codes
            .candidates(query, k)
            .into_iter()
            .filter_map(|key| self.vectors.cosine(key, query).map(|score| (key, score)))
            .collect();
        top_k(hits, k)
    }

    /// The `k` best of the graphs' proposals (graph, key, quantised distance) and the keys
    /// no graph holds yet, by exact score.
    fn rescore(&self, query: &[f32], k: usize, proposed: Proposals) -> Vec<(u64, f32)> {
        // A viewed graph still holds the keys unlinked from it since it was saved.
        let homed = proposed.into_iter().filter(|(at, key, _)| self.home.get(*key) == Some(*at));
        // Only the best of all the graphs' proposals are read and rescored, as many as one
        // graph holding every vector would propose: a narrow search asks each of a hundred
        // graphs for its whole budget, and reading every proposal's exact vector cost more
        // than the searches and faulted in most of the mapped vectors within a few hundred
        // queries. Each key lives in one graph and the hits are ordered by score then key,
        // so the order the graphs answered in changes nothing.
        let closest = top_k(homed.map(|(_, key, distance)| (key, -distance)).collect(), budget(k));
        let linking = self.linking.iter().flat_map(|linking| linking.parts.iter().flat_map(|(_, keys)| keys));
        let candidates = self.staged.iter().chain(linking).copied().chain(closest.into_iter().map(|(key, _)| key));
        let hits: Vec<(u64, f32)> =
            candidates.filter_map(|key| self.vectors.cosine(key, query).map(|score| (key, score))).collect();
        top_k(hits, k)
    }

    /// Whether searches are exact scans (the graphs hold nothing yet).
    pub fn is_exact(&self) -> bool {
        self.linked() == 0 && self.linking.is_none()
    }

    /// The stored vector of `key`, if any.
    pub fn get(&self, key: u64) -> Option<Vec<f32>> {
        self.vectors.get(key).map(Cow::into_owned)
    }

    /// Whether a vector is stored under `key`.
    pub fn contains(&self, key: u64) -> bool {
        self.vectors.contains(key)
    }

    /// Cosine between `query` and the vector of `key`, without copying it.
    pub fn similarity(&self, key: u64, query: &[f32]) -> Option<f32> {
        self.vectors.cosine(key, query)
    }

    /// Keys linked into or removed from the graphs since the last save: what an open would
    /// have to link again (or drop) if the KB were opened now.
    pub fn unsaved(&self) -> usize {
        self.unsaved
    }

    /// Writes the graphs changed since the last save into `dir` as `NAME-GENERATION-I` files
    /// and returns the files of every non-empty graph, for the manifest (see [`saved`]). An
    /// index searched exactly has no graph and saves nothing.
    pub fn save(&mut self, dir: &Path, name: &str, generation: u64) -> Result<Vec<SavedGraph>> {
        self.finish_linking()?;
        let mut members: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.graphs.len()];
        // Only the members of a graph written anew are fingerprinted: reading every vector
        // of the index (millions, decoded from the mapped segments) made each save cost
        // seconds at a million passages.
        let unsaved: Vec<bool> = self.graphs.iter().map(|graph| graph.saved.is_none()).collect();
        if unsaved.contains(&true) {
            for (key, at) in self.home.iter().filter(|(_, at)| unsaved[*at]) {
                if let Some(vector) = self.vectors.get(key) {
                    members[at].push((key, saved::fingerprint(&vector)));
                }
            }
        }
        let mut files = Vec::new();
        for (at, graph) in self.graphs.iter_mut().enumerate().filter(|(_, g)| g.index.size() > 0) {
            if let Some(file) = &graph.saved {
                files.push(file.clone());
                continue;
            }
            let serialised;
            let bytes: &[u8] = match &graph.view {
                // Its members changed, its file did not: the same bytes under a new member list.
                Some(view) => view,
                None => {
                    let mut buffer = vec![0u8; graph.index.serialized_length()];
                    graph.index.save_to_buffer(&mut buffer).map_err(index_error)?;
                    serialised = buffer;
                    &serialised
                }
            };
            members[at].sort_unstable();
            let file = saved::write_graph(dir, &format!("{name}-{generation}-{at}"), bytes, &members[at])?;
            graph.saved = Some(file.clone());
            files.push(file);
        }
        self.unsaved = 0;
        Ok(files)
    }

    /// Saves the exact vectors written or removed since the last save as a segment (see
    /// [`super::segment`]) named after `stem`, and says what the manifest records of them.
    /// Call after [`VectorIndex::save`], whose graphs must hold what the record says they do.
    pub fn save_vectors(&mut self, dir: &Path, stem: &str) -> Result<SavedVectors> {
        self.finish_linking()?;
        let segments = self.vectors.save(dir, stem)?;
        Ok(SavedVectors { segments, len: self.vectors.len(), staged: self.staged.len() })
    }

    /// Vectors written or removed since the last [`VectorIndex::save_vectors`].
    pub fn unsaved_vectors(&self) -> usize {
        self.vectors.unsaved()
    }

    /// Adopts a save whole: its vectors mapped and its graphs as they were, with no member
    /// checked against a vector, since both were written by one save. Called once, on an
    /// empty index; on an error nothing is adopted. The caller replays what the store changed
    /// after the save through [`VectorIndex::upsert`] and [`VectorIndex::remove`].
    pub fn adopt_save(&mut self, dir: &Path, graphs: &[SavedGraph], vectors: &SavedVectors) -> Result<()> {
        self.finish_linking()?;
        if !self.vectors.is_empty() || !self.home.is_empty() {
            return Err(Error::Internal("a save adopted by an index that holds vectors already".into()));
        }
        let store = VectorStore::open(dir, &vectors.segments, self.dim, vectors.len)?;
        let mut loaded = Vec::new();
        let mut home = Homes::default();
        for (at, file) in graphs.iter().enumerate() {
            let (mut graph, members, file) = self.load_graph(dir, file, at + 1 < graphs.len())?;
            home.extend(members.into_iter().map(|(key, _)| (key, at)));
            graph.saved = Some(file);
            loaded.push(graph);
        }
        if home.len() + vectors.staged != vectors.len {
            return Err(Error::Index(format!(
                "the saved graphs hold {} vectors and {} were unlinked, but {} are saved",
                home.len(),
                vectors.staged,
                vectors.len
            )));
        }
        let staged: BTreeSet<u64> = match vectors.staged {
            0 => BTreeSet::new(),
            _ => store.keys().filter(|key| !home.contains(*key)).collect(),
        };
        if !loaded.is_empty() {
            self.graphs = loaded;
        }
        (self.vectors, self.home, self.staged) = (store, home, staged);
        self.codes = std::sync::OnceLock::new();
        self.fit_expansion();
        Ok(())
    }

    /// One saved graph with its members and its files as the manifest should name them now
    /// ([`saved::FoundGraph`]): viewed in place from its mapped file when `sealed` (nothing
    /// will be linked into it), else read into memory. Not yet marked saved: the caller knows
    /// whether it still matches its file.
    fn load_graph(&self, dir: &Path, file: &SavedGraph, sealed: bool) -> Result<(Graph, saved::Members, SavedGraph)> {
        let graph = Index::new(&self.options).map_err(index_error)?;
        let (view, members, file) = if sealed {
            let saved::FoundGraph { bytes: view, members, file } = saved::map_graph(dir, file)?;
            // SAFETY: `view` is kept beside the index, which is dropped before it (see
            // `Graph::index`), and the file is never modified (see `saved`).
            unsafe { graph.view_from_buffer(&view) }.map_err(index_error)?;
            mapped::release(&view);
            mapped::scatter(&view);
            (Some(view), members, file)
        } else {
            let saved::FoundGraph { bytes, members, file } = saved::read_graph(dir, file)?;
            graph.load_from_buffer(&bytes).map_err(index_error)?;
            (None, members, file)
        };
        // A viewed graph may hold keys unlinked from it before its last save; the last graph
        // removes them for real.
        let holds_members = if sealed { graph.size() >= members.len() } else { graph.size() == members.len() };
        if !holds_members || graph.dimensions() != self.dim {
            return Err(Error::Index(format!("{} does not hold the members its list names", file.file)));
        }
        // The file keeps the expansion it was built with; the settings say what to use now.
        graph.change_expansion_add(self.options.expansion_add);
        graph.change_expansion_search(self.options.expansion_search);
        if view.is_none() {
            self.reserve(&graph, graph.size().max(1024))?;
        }
        Ok((Graph { index: Arc::new(graph), view, saved: None }, members, file))
    }

    /// Adopts saved graphs instead of linking: called once, when every stored vector has
    /// been upserted and nothing is linked yet. A member whose vector is no longer stored, or
    /// differs from the one it was linked with, is removed from its graph; vectors no graph
    /// holds stay staged for the next link pass. On an error nothing is adopted. Returns how
    /// many vectors the graphs brought.
    pub fn restore(&mut self, dir: &Path, files: &[SavedGraph]) -> Result<usize> {
        self.finish_linking()?;
        self.codes = std::sync::OnceLock::new();
        if !self.home.is_empty() {
            return Err(Error::Internal("saved graphs restored into an index that links already".into()));
        }
        let mut graphs = Vec::new();
        let mut home = Homes::default();
        for file in files {
            let at = graphs.len();
            let (mut graph, members, file) = self.load_graph(dir, file, at + 1 < files.len())?;
            let mut intact = true;
            for (key, print) in members {
                let current = self.staged.contains(&key)
                    && !home.contains(key)
                    && self.vectors.get(key).is_some_and(|v| saved::fingerprint(&v) == print);
                if current {
                    home.insert(key, at);
                } else {
                    if graph.view.is_none() {
                        graph.index.remove(key).map_err(index_error)?;
                    }
                    intact = false;
                }
            }
            graph.saved = intact.then_some(file);
            graphs.push(graph);
        }
        if graphs.is_empty() {
            return Ok(0);
        }
        for (key, _) in home.iter() {
            self.staged.remove(&key);
        }
        let adopted = home.len();
        (self.graphs, self.home) = (graphs, home);
        self.fit_expansion();
        Ok(adopted)
    }

    /// Room for `capacity` vectors in `graph`, with one add/search context per build thread
    /// or core.
    fn reserve(&self, graph: &Index, capacity: usize) -> Result<()> {
        // Each context draws its vectors' HNSW levels from its own seeded sequence, so the
        // number of contexts is part of what makes a graph: a pass beside the writer keeps it,
        // and a search that finds every context taken waits for one.
        graph.reserve_capacity_and_threads(capacity, self.build_threads.max(cores())).map_err(index_error)
    }
}

impl Drop for VectorIndex {
    /// A pass beside the writer shares its graphs, not the index: no linking thread outlives
    /// the index it links for.
    fn drop(&mut self) {
        if let Some(linking) = self.linking.take() {
            let _ = linking.worker.join();
        }
    }
}

/// Links each part into its graph, the parts side by side on up to one thread per core
/// (per `build_threads` threads, which each part's graph is linked on), the cores shared
/// with every other index's pass ([`LINK_SLOTS`]).
fn link_parts(parts: &[Part], build_threads: usize) -> Vec<Result<()>> {
    let slots = side_by_side_at_most(build_threads);
    let side_by_side = slots.min(parts.len().max(1));
    // Thread t links parts t, t + side_by_side, ...
    let share = |t: usize| (t..parts.len()).step_by(side_by_side);
    let mut outcomes: Vec<Result<()>> = parts.iter().map(|_| Ok(())).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..side_by_side)
            .map(|t| {
                scope.spawn(move || {
                    share(t)
                        .map(|i| {
                            let _linking = LINK_SLOTS.take(slots);
                            link_into(&parts[i], build_threads)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (t, worker) in workers.into_iter().enumerate() {
            let results = worker.join().unwrap_or_else(|_| {
                share(t).map(|_| Err(Error::Index("an HNSW build thread panicked".into()))).collect()
            });
            for (i, result) in share(t).zip(results) {
                outcomes[i] = result;
            }
        }
    });
    outcomes
}

/// Graphs linked at once, in all indexes of the process together, on `build_threads` each.
fn side_by_side_at_most(build_threads: usize) -> usize {
    (cores() / build_threads.max(1)).max(1)
}

/// Graphs being linked in this process. The indexes of a KB link side by side (the five
/// of one write's pass start together), each its graphs side by side; without a common
/// bound, one large document's pass ran ten linking threads on two cores, and graphs that
/// each fit the cache alone evicted each other at every switch.
static LINK_SLOTS: LinkSlots = LinkSlots::new();

struct LinkSlots {
    taken: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl LinkSlots {
    const fn new() -> Self {
        LinkSlots { taken: std::sync::Mutex::new(0), freed: std::sync::Condvar::new() }
    }

    /// Waits until fewer than `limit` graphs are being linked, and counts one more until the
    /// slot is dropped.
    fn take(&self, limit: usize) -> LinkSlot<'_> {
        // A thread that panicked while holding the lock left the count right (it only ever
        // changes by one under it), so a poisoned lock is still good.
        let mut taken = self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *taken >= limit {
            taken = self.freed.wait(taken).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *taken += 1;
        LinkSlot(self)
    }
}

struct LinkSlot<'a>(&'a LinkSlots);

impl Drop for LinkSlot<'_> {
    fn drop(&mut self) {
        let mut taken = self.0.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *taken -= 1;
        self.0.freed.notify_one();
    }
}

/// Links one part's keys into its graph, which has room for them, on `build_threads` threads.
fn link_into(part: &Part, build_threads: usize) -> Result<()> {
    let threads = build_threads.clamp(1, part.keys.len().max(1));
    let share = part.keys.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..part.keys.len())
            .step_by(share)
            .map(|start| {
                scope.spawn(move || {
                    (start..(start + share).min(part.keys.len())).try_for_each(|position| {
                        part.graph.add(part.keys[position], &part.vector(position)?).map_err(index_error)
                    })
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| Error::Index("an HNSW build thread panicked".into()))?)
    })
}

/// Candidates to ask each of `graphs` graphs for, for `k` hits. One graph gets the whole
/// oversampled budget. Several split it: a wide search (the global stage's 256 dense seeds)
/// would otherwise ask every graph for 520 candidates, which made its cost grow with the
/// number of graphs; but no graph is asked for less than the full budget of a search of
/// [`SPLIT_FLOOR`] hits, so a search of up to that many hits is as exact as with one graph,
/// and a wide one keeps every graph's best candidates.
fn candidates_per_graph(k: usize, graphs: usize) -> usize {
    budget(k).div_ceil(graphs.max(1)).max(budget(k.min(SPLIT_FLOOR)))
}

/// Graph candidates rescored exactly for `k` hits.
fn budget(k: usize) -> usize {
    k * OVERSAMPLE + OVERSAMPLE_MIN_EXTRA
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn index_error(e: impl std::fmt::Display) -> Error {
    Error::Index(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::embed::cosine;

    /// Threads that all want a slot at once never hold more than the limit together, and
    /// every one of them gets one in the end.
    #[test]
    fn link_slots_bound_the_graphs_linked_at_once() {
        let slots = LinkSlots::new();
        let (holding, most, served) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..20 {
                        let _slot = slots.take(3);
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        holding.fetch_sub(1, Ordering::SeqCst);
                        served.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(served.load(Ordering::SeqCst), 160);
        assert_eq!(most.load(Ordering::SeqCst), 3, "three slots, eight threads wanting them");
        assert_eq!(*slots.taken.lock().expect("not poisoned"), 0, "every slot given back");
    }

    /// An index that links every vector into its graph (no exact-search range).
    fn index(dim: usize) -> VectorIndex {
        let settings = crate::config::IndexSettings { exact_search_max: 0, ..Settings::defaults().index };
        VectorIndex::new(dim, &settings).unwrap()
    }

    #[test]
    fn small_indexes_are_searched_exactly_and_never_linked() {
        let data = vectors(300, 16);
        let settings = crate::config::IndexSettings { exact_search_max: 300, ..Settings::defaults().index };
        let mut small = VectorIndex::new(16, &settings).unwrap();
        for (key, v) in data.iter().enumerate() {
            small.upsert(key as u64, v.to_vec()).unwrap();
        }
        small.link_staged().unwrap();
        assert!(small.is_exact() && small.staged() == 300, "at the threshold nothing is linked");
        let query = &data[7];
        let mut reference: Vec<(u64, f32)> =
            data.iter().enumerate().map(|(k, v)| (k as u64, cosine(query, v))).collect();
        reference.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        reference.truncate(10);
        assert_eq!(small.search(query, 10).unwrap(), reference);
        small.upsert(300, data[0].to_vec()).unwrap();
        small.link_staged().unwrap();
        assert!(!small.is_exact() && small.staged() == 0, "one vector over the threshold links them all");
    }

    #[test]
    fn one_build_thread_links_the_same_graphs_twice() {
        let data = vectors(2000, 16);
        let settings =
            crate::config::IndexSettings { exact_search_max: 0, build_threads: 1, ..Settings::defaults().index };
        // One graph, then graphs of 300 that one pass fills side by side.
        for graph_max in [settings.graph_max, 300] {
            let build = || {
                let mut idx = VectorIndex::new(16, &IndexSettings { graph_max, ..settings.clone() }).unwrap();
                for (key, v) in data.iter().enumerate() {
                    idx.upsert(key as u64, v.to_vec()).unwrap();
                }
                idx.link_staged().unwrap();
                idx
            };
            let (a, b) = (build(), build());
            assert_eq!(a.graphs.len(), 2000usize.div_ceil(graph_max));
            for v in data.iter().step_by(13) {
                assert_eq!(a.search(v, 10).unwrap(), b.search(v, 10).unwrap());
                assert_eq!(a.search(v, 200).unwrap(), b.search(v, 200).unwrap(), "{graph_max} per graph");
            }
        }
    }

    #[test]
    fn a_pass_beside_the_writer_hides_nothing_and_builds_the_blocking_graphs() {
        let data = vectors(3000, 16);
        let settings =
            crate::config::IndexSettings { exact_search_max: 0, build_threads: 1, ..Settings::defaults().index };
        let new = || {
            let mut idx = VectorIndex::new(16, &settings).unwrap();
            idx.graph_max = 700;
            idx
        };
        let (mut blocking, mut beside) = (new(), new());
        for batch in data.chunks(1000).enumerate().map(|(b, chunk)| (b * 1000, chunk)) {
            let (first, chunk) = batch;
            for (i, v) in chunk.iter().enumerate() {
                blocking.upsert((first + i) as u64, v.to_vec()).unwrap();
                beside.upsert((first + i) as u64, v.to_vec()).unwrap();
            }
            blocking.link_staged().unwrap();
            beside.start_linking().unwrap();
            // Whatever the pass has linked so far, every key written is found.
            for (i, v) in chunk.iter().enumerate().step_by(37) {
                assert_eq!(beside.search(v, 1).unwrap()[0].0, (first + i) as u64, "key {} while linking", first + i);
            }
        }
        assert!(beside.linking.is_some() && beside.staged() == 0, "the last pass is still running or unsettled");
        // A key being linked is written again only after the pass.
        let moved = vec![0.25; 16];
        beside.upsert(2_999, moved.to_vec()).unwrap();
        blocking.upsert(2_999, moved.to_vec()).unwrap();
        assert!(beside.linking.is_none(), "rewriting a key of the pass waited for it");
        assert_eq!(beside.search(&moved, 1).unwrap()[0].0, 2_999);
        beside.link_staged().unwrap();
        blocking.link_staged().unwrap();
        assert_eq!(beside.graphs.len(), blocking.graphs.len());
        for (a, b) in beside.graphs.iter().zip(&blocking.graphs) {
            assert_eq!(a.index.size(), b.index.size());
        }
        // The same keys in the same graphs. Their links need not be the same: each graph of
        // several is searched only as widely as a narrow search, whose hits below the best
        // can differ between two graphs of the same members.
        let homes = |idx: &VectorIndex| {
            let mut homes: Vec<(u64, usize)> = idx.home.iter().collect();
            homes.sort_unstable();
            homes
        };
        assert_eq!(homes(&beside), homes(&blocking), "each key is linked into the same graph");
        for (key, v) in data.iter().enumerate().step_by(11).filter(|(key, _)| *key != 2_999) {
            assert_eq!(beside.search(v, 1).unwrap()[0].0, key as u64, "key {key} after the passes");
        }
    }

    #[test]
    fn upsert_search_remove() {
        let mut idx = index(3);
        idx.upsert(1, [1.0, 0.0, 0.0].to_vec()).unwrap();
        idx.upsert(2, [0.0, 1.0, 0.0].to_vec()).unwrap();
        idx.link_staged().unwrap();
        idx.upsert(2, [0.0, 0.0, 1.0].to_vec()).unwrap();
        assert_eq!(idx.len(), 2);
        let hits = idx.search(&[0.1, 0.0, 0.99], 2).unwrap();
        assert_eq!(hits[0].0, 2);
        assert!(hits[0].1 > 0.9);
        idx.remove(2).unwrap();
        assert_eq!(idx.search(&[0.0, 0.0, 1.0], 5).unwrap().len(), 1);
        assert!(idx.upsert(3, [1.0].to_vec()).is_err());
    }

    /// Deterministic pseudo-random unit vectors.
    fn vectors(n: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|_| {
                let mut v: Vec<f32> = (0..dim)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect();
                crate::embed::l2_normalize(&mut v);
                v
            })
            .collect()
    }

    #[test]
    fn staged_and_linked_vectors_answer_alike() {
        let data = vectors(600, 16);
        let mut staged = index(16);
        let mut linked = index(16);
        for (key, v) in data.iter().enumerate() {
            staged.upsert(key as u64, v.to_vec()).unwrap();
            linked.upsert(key as u64, v.to_vec()).unwrap();
        }
        linked.link_staged().unwrap();
        assert_eq!((staged.staged(), linked.staged()), (600, 0));
        assert_eq!((staged.len(), linked.len()), (600, 600));
        for (key, v) in data.iter().enumerate().step_by(37) {
            let exact = staged.search(v, 5).unwrap();
            let approx = linked.search(v, 5).unwrap();
            assert_eq!(exact[0].0, key as u64, "a vector is its own nearest neighbour");
            assert_eq!(approx[0].0, key as u64);
            let overlap = approx.iter().filter(|(k, _)| exact.iter().any(|(e, _)| e == k)).count();
            assert!(overlap >= 4, "HNSW top-5 should nearly match the exact top-5: {approx:?} vs {exact:?}");
            assert_eq!(linked.get(key as u64).as_deref(), Some(v.as_slice()));
        }
    }

    #[test]
    fn full_graphs_start_new_ones_and_searches_ask_them_all() {
        let data = vectors(500, 16);
        let mut idx = index(16);
        idx.graph_max = 120;
        for (key, v) in data.iter().enumerate().take(100) {
            idx.upsert(key as u64, v.to_vec()).unwrap();
        }
        idx.link_staged().unwrap();
        for (key, v) in data.iter().enumerate().skip(100) {
            idx.upsert(key as u64, v.to_vec()).unwrap();
        }
        idx.link_staged().unwrap();
        let sizes: Vec<usize> = idx.graphs.iter().map(|g| g.index.size()).collect();
        assert_eq!(sizes, vec![120, 120, 120, 120, 20], "the first graph is topped up, then new ones are filled");
        for (key, v) in data.iter().enumerate().step_by(7) {
            assert_eq!(idx.search(v, 3).unwrap()[0].0, key as u64, "vector {key} is found in whichever graph holds it");
        }
        // Replacing a vector of a full graph unlinks it there and links it into the last one.
        idx.upsert(3, data[400].to_vec()).unwrap();
        idx.link_staged().unwrap();
        let sizes: Vec<usize> = idx.graphs.iter().map(|g| g.index.size()).collect();
        assert_eq!(sizes, vec![119, 120, 120, 120, 21]);
        let hits = idx.search(&data[400], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<BTreeSet<_>>(), BTreeSet::from([3, 400]));
        idx.remove(3).unwrap();
        assert_eq!(idx.len(), 499);
        assert!(idx.search(&data[400], 5).unwrap().iter().all(|h| h.0 != 3));
    }

    /// An index holding `data` under keys 0.., all staged.
    fn staged_index(data: &[Vec<f32>], graph_max: usize) -> VectorIndex {
        let mut idx = index(16);
        idx.graph_max = graph_max;
        for (key, v) in data.iter().enumerate() {
            idx.upsert(key as u64, v.to_vec()).unwrap();
        }
        idx
    }

    /// `data` linked into graphs of 300 vectors and saved in `dir` as generation 1 of `name`.
    fn saved_in(dir: &Path, name: &str, data: &[Vec<f32>]) -> Vec<SavedGraph> {
        let mut built = staged_index(data, 300);
        built.link_staged().unwrap();
        built.save(dir, name, 1).unwrap()
    }

    #[test]
    fn restored_graphs_answer_as_the_saved_ones_without_linking() {
        let data = vectors(700, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut built = staged_index(&data, 300);
        built.link_staged().unwrap();
        let files = built.save(dir.path(), "chunks", 1).unwrap();
        assert_eq!(files.iter().map(|f| f.count).collect::<Vec<_>>(), vec![300, 300, 100]);
        let mut opened = staged_index(&data, 300);
        assert_eq!(opened.restore(dir.path(), &files).unwrap(), 700);
        assert_eq!(opened.staged(), 0, "nothing is left to link");
        for v in data.iter().step_by(29) {
            assert_eq!(opened.search(v, 5).unwrap(), built.search(v, 5).unwrap());
        }
        // Unchanged graphs are not written again; the one linked into is.
        opened.upsert(700, data[3].to_vec()).unwrap();
        opened.link_staged().unwrap();
        let again = opened.save(dir.path(), "chunks", 2).unwrap();
        assert_eq!(again[..2], files[..2]);
        assert!(again[2].file.starts_with("chunks-2-") && again[2].count == 101);
    }

    #[test]
    fn a_sealed_graph_is_viewed_and_what_leaves_it_is_never_a_candidate_again() {
        let data = vectors(700, 16);
        let dir = tempfile::tempdir().unwrap();
        let files = saved_in(dir.path(), "nodes", &data);
        let mut opened = staged_index(&data, 300);
        opened.restore(dir.path(), &files).unwrap();
        assert_eq!(opened.graphs.iter().map(|g| g.view.is_some()).collect::<Vec<_>>(), vec![true, true, false]);
        // Key 3 of the first, viewed graph gets another vector; key 5 goes.
        opened.upsert(3, data[650].to_vec()).unwrap();
        opened.remove(5).unwrap();
        opened.link_staged().unwrap();
        let hits = opened.search(&data[3], 10).unwrap();
        assert!(hits.iter().all(|(key, _)| *key != 3) && hits[0].0 != 5, "the old vector of 3 finds nothing of 3");
        assert!(opened.search(&data[5], 10).unwrap().iter().all(|(key, _)| *key != 5), "5 is gone");
        let near_650 = opened.search(&data[650], 3).unwrap();
        assert_eq!(near_650.iter().filter(|(key, _)| *key == 3).count(), 1, "3 is found once, by its new vector");
        let again = opened.save(dir.path(), "nodes", 2).unwrap();
        assert_eq!(again[1], files[1], "an untouched viewed graph is not written again");
        assert_eq!(again[0].crc, files[0].crc, "a viewed graph keeps its bytes");
        assert_eq!(again[0].count, 298, "and loses the members that left it");
        let mut reopened = staged_index(&data, 300);
        reopened.upsert(3, data[650].to_vec()).unwrap();
        reopened.remove(5).unwrap();
        assert_eq!(reopened.restore(dir.path(), &again).unwrap(), 699);
        assert_eq!(reopened.search(&data[650], 3).unwrap(), near_650);
        assert!(reopened.search(&data[5], 10).unwrap().iter().all(|(key, _)| *key != 5));
    }

    #[test]
    fn restoring_drops_members_whose_vector_changed_or_went_and_stages_the_rest() {
        let data = vectors(400, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut built = staged_index(&data[..300], 1000);
        built.link_staged().unwrap();
        let files = built.save(dir.path(), "nodes", 1).unwrap();
        // The store moved on after the save: key 5 got another vector, key 9 went, and
        // keys 300.. were written.
        let mut opened = staged_index(&data, 1000);
        opened.upsert(5, data[350].to_vec()).unwrap();
        opened.remove(9).unwrap();
        assert_eq!(opened.restore(dir.path(), &files).unwrap(), 298);
        assert_eq!(opened.staged(), 101, "the changed vector and the new ones wait for linking");
        opened.link_staged().unwrap();
        let hits = opened.search(&data[350], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<BTreeSet<_>>(), BTreeSet::from([5, 350]));
        assert!(opened.search(&data[9], 3).unwrap().iter().all(|h| h.0 != 9));
        assert_eq!(opened.graphs[0].index.size(), 399);
    }

    #[test]
    fn a_damaged_graph_file_is_refused_and_nothing_adopted() {
        let data = vectors(200, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut built = staged_index(&data, 1000);
        built.link_staged().unwrap();
        let files = built.save(dir.path(), "facts", 1).unwrap();
        let path = dir.path().join(&files[0].file);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
        let mut opened = staged_index(&data, 1000);
        assert!(opened.restore(dir.path(), &files).is_err());
        assert_eq!((opened.staged(), opened.is_exact()), (200, true), "every vector still waits for linking");
        opened.link_staged().unwrap();
        assert_eq!(opened.search(&data[17], 1).unwrap()[0].0, 17);
    }

    #[test]
    fn a_viewed_graph_is_checked_by_its_links_and_a_damaged_code_only_reorders_candidates() {
        let data = vectors(700, 16);
        let dir = tempfile::tempdir().unwrap();
        let files = saved_in(dir.path(), "nodes", &data);
        let links = files[0].links.clone().expect("this build names a graph's codes");
        assert_eq!((links.codes_at, links.codes_len), (8, 300 * 16), "an i8 code of 16 bytes per member");
        let path = dir.path().join(&files[0].file);
        let pristine = std::fs::read(&path).unwrap();
        let damaged_at = |at: usize| {
            let mut bytes = pristine.clone();
            bytes[at] ^= 0x40;
            std::fs::write(&path, bytes).unwrap();
        };
        damaged_at(links.codes_at + 17 * 16 + 3);
        let mut opened = staged_index(&data, 300);
        assert_eq!(opened.restore(dir.path(), &files).unwrap(), 700, "the first graph is viewed despite its code");
        for (key, score) in opened.search(&data[17], 5).unwrap() {
            assert!((score - cosine(&data[17], &data[key as usize])).abs() < 1e-5, "scores are exact");
        }
        damaged_at(pristine.len() - 64);
        let mut refused = staged_index(&data, 300);
        assert!(refused.restore(dir.path(), &files).is_err(), "a damaged link is refused");
        // An earlier build's save names no links: its graphs are checked whole, and named
        // with their links from the next save on.
        let earlier_build: Vec<SavedGraph> = files.iter().map(|f| SavedGraph { links: None, ..f.clone() }).collect();
        std::fs::write(&path, &pristine).unwrap();
        let mut upgraded = staged_index(&data, 300);
        assert_eq!(upgraded.restore(dir.path(), &earlier_build).unwrap(), 700);
        assert_eq!(upgraded.save(dir.path(), "nodes", 2).unwrap(), files, "the same files, now with their links");
        damaged_at(links.codes_at + 17 * 16 + 3);
        let mut whole = staged_index(&data, 300);
        assert!(whole.restore(dir.path(), &earlier_build).is_err(), "an earlier build's save is checked whole");
    }

    #[test]
    fn several_graphs_share_a_wide_search_and_keep_its_best_hits() {
        assert_eq!(candidates_per_graph(8, 1), 24);
        assert_eq!(candidates_per_graph(8, 30), 24, "a narrow search asks every graph for its whole budget");
        assert_eq!(candidates_per_graph(1024, 1), 2056);
        assert_eq!(candidates_per_graph(1024, 30), 69, "a wide one splits it");
        assert_eq!(candidates_per_graph(256, 30), 24, "but asks each graph for a narrow search's budget");
        let data = vectors(3000, 16);
        let mut idx = staged_index(&data, 200);
        idx.link_staged().unwrap();
        assert_eq!(idx.graphs.len(), 15);
        let widths: BTreeSet<usize> = idx.graphs.iter().map(|g| g.index.expansion_search()).collect();
        assert_eq!(
            widths,
            BTreeSet::from([budget(SPLIT_FLOOR)]),
            "each graph of several is searched as widely as asked"
        );
        let exact = staged_index(&data, 200);
        for v in data.iter().step_by(101) {
            let (wide, reference) = (idx.search(v, 600).unwrap(), exact.search(v, 600).unwrap());
            assert_eq!(wide[..20], reference[..20], "the best hits of a wide search are exact");
            let found: BTreeSet<u64> = wide.iter().map(|h| h.0).collect();
            let overlap = reference.iter().filter(|h| found.contains(&h.0)).count();
            assert!(overlap >= 540, "a wide search finds most of the exact top 600 ({overlap})");
            // A narrow one rescores only the best proposals of all fifteen graphs together.
            assert_eq!(idx.search(v, 10).unwrap(), exact.search(v, 10).unwrap());
        }
    }

    #[test]
    fn a_search_started_early_answers_as_one_finished_at_once_or_stops_when_dropped() {
        let data = vectors(3000, 16);
        let mut idx = staged_index(&data, 200);
        idx.link_staged().unwrap();
        assert!(idx.graphs.len() >= PARALLEL_GRAPHS);
        for v in data.iter().step_by(101) {
            let early = idx.start_search(v, 256);
            // Whichever graphs the helpers took by now, the caller takes the rest.
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert_eq!(early.finish().unwrap(), idx.start_search(v, 256).finish().unwrap());
        }
        let abandoned = idx.start_search(&data[0], 256);
        assert!(!abandoned.helpers.is_empty(), "helpers started at once");
        let shared = Arc::clone(&abandoned.shared);
        drop(abandoned);
        assert!(shared.abandoned.load(Ordering::Relaxed) && Arc::strong_count(&shared) == 1, "the helpers ended");
        idx.upsert(9_000, data[0].to_vec()).unwrap();
        idx.link_staged().unwrap();
        let hits = idx.search(&data[0], 2).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<BTreeSet<_>>(), BTreeSet::from([0, 9_000]));
    }

    #[test]
    fn a_key_lives_in_one_place_across_link_passes() {
        let data = vectors(3, 8);
        let mut idx = index(8);
        idx.upsert(5, data[0].to_vec()).unwrap();
        idx.link_staged().unwrap();
        idx.upsert(5, data[1].to_vec()).unwrap();
        assert_eq!(idx.len(), 1, "replacing a linked vector stages the new one only");
        let hits = idx.search(&data[1], 3).unwrap();
        assert_eq!(hits.len(), 1);
        assert!((hits[0].1 - 1.0).abs() < 1e-5, "the replacement is what is found");
        idx.link_staged().unwrap();
        idx.remove(5).unwrap();
        assert!(idx.is_empty());
        assert!(idx.get(5).is_none());
    }
}
