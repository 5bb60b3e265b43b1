//! The agentic retriever. Escalation is monotonic, Local -> Bridge -> Global, each stage at
//! most once per call; a sufficiency check after each stage decides whether to stop. Local
//! and bridge evidence is mapped back to source chunks; the global stage ranks passages by
//! PPR mass over the graph of entities and passages ([`global`]). The graph's ranking is
//! fused with text retrieval ([`fusion`]: dense + BM25, or BM25 alone with a lexical
//! embedder), which also carries queries where no seed aligns and no fact links; the text
//! list's best passage leads the final ranking and the page of an entity it names follows
//! it ([`lead`]).
//!
//! [`Retriever::retrieve`] judges with a synchronous [`SufficiencyCheck`]; a caller with an
//! async judge (the controller's LLM judge) drives a [`RetrievalRun`] stage by stage.

pub mod bridge;
pub mod facts;
pub mod fusion;
pub mod global;
pub mod lead;
pub mod local;
pub mod mapback;
pub mod ppr;
pub mod seeds;
pub mod sufficiency;

pub use seeds::embed_query;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::RetrieveSettings;
use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::kb::{Kb, SearchMode};
use seeds::{EntitySeed, Seeds};
use sufficiency::{CoverageCheck, Judgement, StageEvidence, SufficiencyCheck};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Local,
    Bridge,
    Global,
    /// No seed aligned and no fact linked (or none of them is in the graph): dense + BM25
    /// text retrieval only.
    Fallback,
}

impl Stage {
    /// The stage's wire name (as it serialises).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Local => "local",
            Stage::Bridge => "bridge",
            Stage::Global => "global",
            Stage::Fallback => "fallback",
        }
    }
}

/// How to retrieve. `Adaptive` is a2rag; the others are the baselines of `a2rag eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    Adaptive,
    /// LightRAG-style: 1-hop neighbourhood only, no escalation, no text fusion.
    LocalOnly,
    /// HippoRAG 2 recipe: the global stage every time (fact-linked, dense-seeded PPR over
    /// entities and passages), no escalation, no text fusion; dense retrieval when no fact
    /// or seed is in the graph.
    PprAlways,
    Text(SearchMode),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RetrieveOptions {
    pub strategy: Strategy,
    /// Start escalation no lower than this stage (a rewrite may force the global stage).
    pub min_stage: Stage,
    pub top_k: usize,
}

/// A retrieved chunk with its provenance: what the retriever ranks, the reader reads and a
/// query response shows as evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedChunk {
    pub chunk: ChunkId,
    pub doc_id: String,
    pub title: String,
    pub span: (usize, usize),
    pub score: f32,
    pub text: String,
}

/// One hop of a graph path, by name, for the trace and the reader.
#[derive(Debug, Clone, Serialize)]
pub struct PathHop {
    pub subject: String,
    pub relation: String,
    pub object: String,
    pub chunk: ChunkId,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    pub stage: Stage,
    pub micros: u64,
    pub edges: usize,
    pub nodes: usize,
    pub chunks: usize,
    pub judgement: Judgement,
}

#[derive(Debug, Clone, Serialize)]
pub struct Retrieval {
    /// A query response moves these out into its `evidence` and `paths`, so that no chunk
    /// text is sent twice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<RankedChunk>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<Vec<PathHop>>,
    /// The last stage run (`Fallback` when the graph contributed nothing).
    pub stage: Stage,
    pub sufficient: bool,
    pub seeds: Seeds,
    /// Share of the graph's ranking in the final fusion (see [`fusion`]); 0 without one.
    pub graph_share: f32,
    pub stages: Vec<StageReport>,
    pub micros: u64,
}

impl Retrieval {
    /// This retrieval with a later attempt's evidence (a rewritten query's) added after it:
    /// the chunks this attempt found keep their order, the later attempt's new chunks follow
    /// (at most `top_k` of them). A rewrite then adds evidence for the reader without
    /// pushing down what the user's own question found: a rewrite is a guess at what is
    /// missing, the question is what was asked. The seeds stay the question's: they are what
    /// the reader and the checks read the question's names from, and a rewrite that adds the
    /// candidate answer's name to its query must not make the question name it (or stop
    /// naming "Malmö plant" because the rewrite's seeds only have "Malmö"). Stage and
    /// sufficiency are the later attempt's; paths and stage reports are kept from both.
    pub fn absorb(mut self, later: Retrieval, top_k: usize) -> Retrieval {
        let known: HashSet<ChunkId> = self.chunks.iter().map(|c| c.chunk).collect();
        self.chunks.extend(later.chunks.into_iter().filter(|c| !known.contains(&c.chunk)).take(top_k));
        self.paths.extend(later.paths);
        self.stages.extend(later.stages);
        Retrieval {
            chunks: self.chunks,
            paths: self.paths,
            stage: later.stage,
            sufficient: later.sufficient,
            seeds: self.seeds,
            graph_share: later.graph_share,
            stages: self.stages,
            micros: self.micros + later.micros,
        }
    }
}

pub struct Retriever<'kb> {
    kb: &'kb Kb,
    settings: &'kb RetrieveSettings,
    check: Box<dyn SufficiencyCheck>,
}

/// Evidence accumulated across stages.
#[derive(Default)]
struct Evidence {
    edges: Vec<(EdgeId, f32)>,
    chunk_scores: HashMap<ChunkId, f32>,
    paths: Vec<Vec<PathHop>>,
    /// The global stage's passage ranking, once it has run; it supersedes `chunk_scores`.
    global: Option<Vec<(ChunkId, f32)>>,
}

impl Evidence {
    /// The graph's ranking of passages so far, best first.
    fn ranked(&self) -> Vec<(ChunkId, f32)> {
        match &self.global {
            Some(ranking) => ranking.clone(),
            None => mapback::ranked(&self.chunk_scores),
        }
    }
}

impl<'kb> Retriever<'kb> {
    /// A retriever with the KB's own settings and the embedded sufficiency check.
    pub fn new(kb: &'kb Kb) -> Self {
        Retriever::with_settings(kb, &kb.settings().retrieve)
    }

    /// A retriever with other settings (a named policy), embedded sufficiency check.
    pub fn with_settings(kb: &'kb Kb, settings: &'kb RetrieveSettings) -> Self {
        let check = Box::new(CoverageCheck { min_coverage: settings.sufficiency_coverage });
        Retriever { kb, settings, check }
    }

    pub fn with_check(mut self, check: Box<dyn SufficiencyCheck>) -> Self {
        self.check = check;
        self
    }

    pub fn kb(&self) -> &'kb Kb {
        self.kb
    }

    /// The synchronous check [`Retriever::retrieve`] judges stages with.
    pub fn check(&self) -> &dyn SufficiencyCheck {
        self.check.as_ref()
    }

    /// Embeds `query` once and retrieves for it (see [`Retriever::retrieve_embedded`]).
    pub fn retrieve(&self, query: &str, options: RetrieveOptions) -> Result<Retrieval> {
        let query = embed_query(self.kb, query)?;
        self.retrieve_embedded(&query, options)
    }

    /// Retrieves with the synchronous check judging after each stage.
    pub fn retrieve_embedded(&self, query: &EmbeddedQuery, options: RetrieveOptions) -> Result<Retrieval> {
        let mut run = self.start(query, options)?;
        while let Some(evidence) = run.next_stage() {
            let judgement = self.check.judge(self.kb, &evidence);
            run.judge(judgement);
        }
        run.finish()
    }

    /// Starts a retrieval whose stages the caller runs and judges one by one (see
    /// [`RetrievalRun`]); finds the seeds now.
    pub fn start(&self, query: &EmbeddedQuery, options: RetrieveOptions) -> Result<RetrievalRun<'kb>> {
        let started = Instant::now();
        let (seeds, stages, dense) = match options.strategy {
            Strategy::Text(_) => (Seeds::default(), Vec::new(), Vec::new()),
            strategy => {
                let seeds = seeds::find_seeds(self.kb, self.settings, query)?;
                let entities = !seeds.entities.is_empty();
                let stages: &[Stage] = match strategy {
                    Strategy::LocalOnly if entities => &[Stage::Local],
                    Strategy::LocalOnly => &[],
                    _ if entities || !seeds.facts.is_empty() => match strategy {
                        Strategy::PprAlways => &[Stage::Global],
                        // Local and bridge walk from aligned mentions; with facts alone only
                        // the global stage has a start.
                        _ if entities => &[Stage::Local, Stage::Bridge, Stage::Global],
                        _ => &[Stage::Global],
                    },
                    _ => &[],
                };
                let stages: Vec<Stage> = stages.iter().copied().filter(|s| *s >= options.min_stage).collect();
                // The dense seeds serve the global stage, and `ppr-always` when nothing links;
                // a query that never gets there does not pay for the wide search.
                let dense = if stages.contains(&Stage::Global) || strategy == Strategy::PprAlways {
                    self.kb.chunk_index().search(&query.vector, self.settings.passage_seed_candidates)?
                } else {
                    Vec::new()
                };
                let dense: Vec<(ChunkId, f32)> = dense.into_iter().map(|(c, s)| (c as ChunkId, s)).collect();
                (seeds, stages, dense)
            }
        };
        Ok(RetrievalRun {
            kb: self.kb,
            settings: self.settings,
            query: query.clone(),
            options,
            seeds,
            dense,
            evidence: Evidence::default(),
            remaining: stages.into(),
            pending: None,
            reports: Vec::new(),
            stage: Stage::Fallback,
            sufficient: false,
            started,
        })
    }
}

/// One retrieval as an explicit run, so that the sufficiency judge may be async (an LLM
/// call) or chosen per stage by the caller:
///
/// ```text
/// let mut run = retriever.start(query, options)?;
/// while let Some(evidence) = run.next_stage() {
///     let judgement = /* judge `evidence` */;
///     run.judge(judgement);
/// }
/// let retrieval = run.finish()?;
/// ```
///
/// Escalation is monotonic: each stage of the strategy (from `min_stage` on) runs at most
/// once, in order, and a sufficient judgement ends it.
pub struct RetrievalRun<'kb> {
    kb: &'kb Kb,
    settings: &'kb RetrieveSettings,
    query: EmbeddedQuery,
    options: RetrieveOptions,
    seeds: Seeds,
    /// The best passages by dense score (the global stage's dense seeds).
    dense: Vec<(ChunkId, f32)>,
    evidence: Evidence,
    /// Stages not yet run, in order.
    remaining: VecDeque<Stage>,
    /// The stage run last, while it awaits its judgement.
    pending: Option<PendingStage>,
    reports: Vec<StageReport>,
    /// The last stage run.
    stage: Stage,
    sufficient: bool,
    started: Instant,
}

/// A stage that has run and awaits its judgement.
struct PendingStage {
    stage: Stage,
    started: Instant,
    edges: usize,
    nodes: usize,
    /// Chunks with evidence after the stage.
    chunk_total: usize,
    edge_ids: Vec<EdgeId>,
    ranked_chunks: Vec<ChunkId>,
}

impl<'kb> RetrievalRun<'kb> {
    pub fn seeds(&self) -> &Seeds {
        &self.seeds
    }

    /// The per-stage reports so far (judged stages only).
    pub fn reports(&self) -> &[StageReport] {
        &self.reports
    }

    /// Runs the next stage and returns the evidence to judge, or `None` when escalation is
    /// over (a stage was judged sufficient, the strategy has no stage left, or no seed
    /// aligned). While a stage awaits its judgement, returns that stage's evidence again
    /// rather than running another.
    pub fn next_stage(&mut self) -> Option<StageEvidence<'_>> {
        if self.pending.is_none() {
            let stage = self.remaining.pop_front()?;
            let started = Instant::now();
            let (edges, nodes) = self.run_stage(stage);
            self.stage = stage;
            self.pending = Some(PendingStage {
                stage,
                started,
                edges,
                nodes,
                chunk_total: self.evidence.chunk_scores.len(),
                edge_ids: self.evidence.edges.iter().map(|(e, _)| *e).collect(),
                ranked_chunks: self.evidence.ranked().into_iter().take(self.options.top_k).map(|(c, _)| c).collect(),
            });
        }
        let pending = self.pending.as_ref()?;
        Some(StageEvidence {
            stage: pending.stage,
            query: &self.query.text,
            seeds: &self.seeds,
            edges: &pending.edge_ids,
            chunks: &pending.ranked_chunks,
            paths: &self.evidence.paths,
        })
    }

    /// Records the judgement of the stage [`RetrievalRun::next_stage`] just ran; a sufficient
    /// one ends escalation. Does nothing when no stage awaits a judgement.
    pub fn judge(&mut self, judgement: Judgement) {
        let Some(p) = self.pending.take() else { return };
        tracing::debug!(stage = ?p.stage, edges = p.edges, nodes = p.nodes, sufficient = judgement.sufficient, reason = %judgement.reason, "retrieval stage");
        self.sufficient = judgement.sufficient;
        if judgement.sufficient {
            self.remaining.clear();
        }
        self.reports.push(StageReport {
            stage: p.stage,
            micros: p.started.elapsed().as_micros() as u64,
            edges: p.edges,
            nodes: p.nodes,
            chunks: p.chunk_total,
            judgement,
        });
    }

    /// Maps the graph evidence back to chunks and fuses it with text retrieval (adaptive
    /// strategy). A stage left unjudged counts as insufficient.
    pub fn finish(mut self) -> Result<Retrieval> {
        if self.pending.is_some() {
            self.judge(Judgement { sufficient: false, reason: "not judged".into() });
        }
        let kb = self.kb;
        let settings = self.settings;
        let graph_ranked = self.evidence.ranked();
        if graph_ranked.is_empty() {
            self.stage = Stage::Fallback;
        }
        let mut graph_share = 0.0;
        let hits = match self.options.strategy {
            Strategy::Text(mode) => kb.search(&self.query, mode, self.options.top_k, settings.into())?,
            Strategy::Adaptive => {
                let text = kb.search_reusing(
                    &self.query,
                    fusion::text_mode(kb.embedder().kind()),
                    settings.text_candidates,
                    settings.into(),
                    &self.dense,
                )?;
                graph_share = fusion::graph_share(kb, self.stage);
                let fused = fusion::fuse(&text, &graph_ranked, graph_share, settings.rrf_k);
                let (ranking, link) =
                    lead::lead_with_link(kb, text.first().map(|(c, _)| *c), fused, settings.link_candidates);
                self.evidence.paths.extend(link.map(|hop| vec![hop]));
                ranking
            }
            // HippoRAG 2 falls back to dense retrieval when nothing seeds the graph.
            Strategy::PprAlways if graph_ranked.is_empty() => self.dense.clone(),
            Strategy::LocalOnly | Strategy::PprAlways => graph_ranked,
        };
        let chunks = hits
            .into_iter()
            .filter_map(|(id, score)| {
                let chunk = kb.chunk(id)?;
                let doc = kb.doc(chunk.doc)?;
                Some(RankedChunk {
                    chunk: id,
                    doc_id: doc.id.clone(),
                    title: doc.title.clone(),
                    span: chunk.span,
                    score,
                    text: chunk.text.clone(),
                })
            })
            .take(self.options.top_k)
            .collect();
        Ok(Retrieval {
            chunks,
            paths: self.evidence.paths,
            stage: self.stage,
            sufficient: self.sufficient,
            seeds: self.seeds,
            graph_share,
            stages: self.reports,
            micros: self.started.elapsed().as_micros() as u64,
        })
    }

    /// Runs one stage, adding to the evidence; returns (edges, nodes) it contributed.
    fn run_stage(&mut self, stage: Stage) -> (usize, usize) {
        let kb = self.kb;
        let settings = self.settings;
        let seeds = &self.seeds;
        let state = &mut self.evidence;
        match stage {
            Stage::Local => {
                let edges = local::expand(kb, seeds, settings.local_max_edges);
                let seed_nodes: Vec<(NodeId, f32)> = seeds.entities.iter().map(|s| (s.node, s.score)).collect();
                mapback::from_edges(kb, &edges, &mut state.chunk_scores);
                mapback::from_nodes(kb, &seed_nodes, &mut state.chunk_scores);
                let n = edges.len();
                state.edges.extend(edges);
                (n, seed_nodes.len())
            }
            Stage::Bridge => {
                let params = bridge::BridgeParams {
                    hops: settings.bridge_hops,
                    max_bridges: settings.bridge_max_nodes,
                    max_paths: settings.bridge_max_paths,
                };
                let bridges = bridge::find_bridges(kb, &seeds.node_ids(), &params);
                let mut edges = Vec::new();
                for b in &bridges {
                    edges.extend(bridge::path_edges(b).map(|e| (e, b.score)));
                    for path in &b.paths {
                        state.paths.push(describe(kb, path.iter().map(|s| s.edge)));
                    }
                }
                mapback::from_edges(kb, &edges, &mut state.chunk_scores);
                let bridge_nodes: Vec<(NodeId, f32)> = bridges.iter().map(|b| (b.node, b.score)).collect();
                mapback::from_nodes(kb, &bridge_nodes, &mut state.chunk_scores);
                let n = edges.len();
                state.edges.extend(edges);
                (n, bridges.len())
            }
            Stage::Global => {
                // HippoRAG 2 seeds its walk from linked facts alone; a2rag adds the query's
                // aligned mentions, which its earlier stages walk from too.
                let entities: &[EntitySeed] = match self.options.strategy {
                    Strategy::PprAlways => &[],
                    _ => &seeds.entities,
                };
                let phrases = global::phrase_weights(kb, &seeds.facts, entities);
                let ranking = global::rank_passages(kb, settings, &phrases, &self.dense);
                // Nothing seeded the graph: keep what the earlier stages found.
                if !ranking.is_empty() {
                    state.global = Some(ranking);
                }
                (0, phrases.len())
            }
            Stage::Fallback => (0, 0),
        }
    }
}

/// A graph path by name.
pub fn describe(kb: &Kb, edges: impl Iterator<Item = EdgeId>) -> Vec<PathHop> {
    let name = |n: NodeId| kb.node(n).map_or_else(|| format!("#{n}"), |n| n.name.clone());
    edges
        .filter_map(|e| kb.edge(e))
        .map(|e| PathHop {
            subject: name(e.subject),
            relation: e.relation.clone(),
            object: name(e.object),
            chunk: e.chunk,
        })
        .collect()
}
