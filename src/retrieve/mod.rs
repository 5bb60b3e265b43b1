//! The agentic retriever. Escalation is monotonic, Local -> Bridge -> Global, each stage at
//! most once per call; a sufficiency check after each stage decides whether to stop. Graph
//! evidence is mapped back to source chunks and fused (RRF) with dense + BM25 text
//! retrieval, which also carries queries where no seed aligns.
//!
//! [`Retriever::retrieve`] judges with a synchronous [`SufficiencyCheck`]; a caller with an
//! async judge (the controller's LLM judge) drives a [`RetrievalRun`] stage by stage.

pub mod bridge;
pub mod local;
pub mod mapback;
pub mod ppr;
pub mod seeds;
pub mod sufficiency;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::RetrieveSettings;
use crate::error::Result;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::kb::{Kb, SearchMode};
use crate::rank::weighted_rank_fusion;
use seeds::Seeds;
use sufficiency::{CoverageCheck, Judgement, StageEvidence, SufficiencyCheck};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Local,
    Bridge,
    Global,
    /// No seed aligned: dense + BM25 text retrieval only.
    Fallback,
}

/// How to retrieve. `Adaptive` is a2rag; the others are the baselines of `a2rag eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    Adaptive,
    /// LightRAG-style: 1-hop neighbourhood only, no escalation, no text fusion.
    LocalOnly,
    /// HippoRAG-style: PPR every time, no escalation, no text fusion.
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

#[derive(Debug, Clone, Serialize)]
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
    pub chunks: Vec<RankedChunk>,
    pub paths: Vec<Vec<PathHop>>,
    /// The last stage run.
    pub stage: Stage,
    pub sufficient: bool,
    pub seeds: Seeds,
    pub stages: Vec<StageReport>,
    pub micros: u64,
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

    /// Retrieves with the synchronous check judging after each stage.
    pub fn retrieve(&self, query: &str, options: RetrieveOptions) -> Result<Retrieval> {
        let mut run = self.start(query, options)?;
        while let Some(evidence) = run.next_stage() {
            let judgement = self.check.judge(self.kb, &evidence);
            run.judge(judgement);
        }
        run.finish()
    }

    /// Starts a retrieval whose stages the caller runs and judges one by one (see
    /// [`RetrievalRun`]); finds the seeds now.
    pub fn start(&self, query: &str, options: RetrieveOptions) -> Result<RetrievalRun<'kb>> {
        let started = Instant::now();
        let (seeds, stages) = match options.strategy {
            Strategy::Text(_) => (Seeds::default(), Vec::new()),
            strategy => {
                let seeds = seeds::find_seeds(self.kb, self.settings, query)?;
                let stages: &[Stage] = match strategy {
                    Strategy::LocalOnly => &[Stage::Local],
                    Strategy::PprAlways => &[Stage::Global],
                    _ => &[Stage::Local, Stage::Bridge, Stage::Global],
                };
                let stages = if seeds.entities.is_empty() { Vec::new() } else { stages.iter().copied().filter(|s| *s >= options.min_stage).collect() };
                (seeds, stages)
            }
        };
        Ok(RetrievalRun {
            kb: self.kb,
            settings: self.settings,
            query: query.to_string(),
            options,
            seeds,
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
    query: String,
    options: RetrieveOptions,
    seeds: Seeds,
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
                ranked_chunks: mapback::ranked(&self.evidence.chunk_scores)
                    .into_iter()
                    .take(self.options.top_k)
                    .map(|(c, _)| c)
                    .collect(),
            });
        }
        let pending = self.pending.as_ref()?;
        Some(StageEvidence {
            stage: pending.stage,
            query: &self.query,
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
        let query = self.query.as_str();
        let graph_ranked = mapback::ranked(&self.evidence.chunk_scores);
        let hits = match self.options.strategy {
            Strategy::Text(mode) => kb.search(query, mode, self.options.top_k, settings.into())?,
            Strategy::Adaptive => {
                let ids = |hits: Vec<(ChunkId, f32)>| hits.into_iter().map(|(c, _)| c as u64).collect::<Vec<_>>();
                let graph = ids(graph_ranked);
                let text = ids(kb.search(query, SearchMode::Hybrid, settings.text_candidates, settings.into())?);
                // How much the graph's vote counts depends on how its edges were made.
                let rule = kb.rule_edge_share();
                let weight = settings.graph_weight * (1.0 - rule) + settings.rule_graph_weight * rule;
                let lists = [(graph.as_slice(), weight), (text.as_slice(), 1.0)];
                weighted_rank_fusion(&lists, settings.rrf_k)
                    .into_iter()
                    .map(|(c, s)| (c as ChunkId, s))
                    .collect()
            }
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
                let nodes = personalized_pagerank(kb, settings, seeds);
                // PPR scores are probabilities; scale so they are comparable to earlier stages.
                let scaled: Vec<(NodeId, f32)> = nodes.iter().map(|(n, s)| (*n, s * 10.0)).collect();
                mapback::from_nodes(kb, &scaled, &mut state.chunk_scores);
                (0, nodes.len())
            }
            Stage::Fallback => (0, 0),
        }
    }
}

/// Top nodes by degree-normalised PPR from the entity seeds.
fn personalized_pagerank(kb: &Kb, settings: &RetrieveSettings, seeds: &Seeds) -> Vec<(NodeId, f32)> {
    let csr = kb.csr();
    let rows: Vec<usize> = seeds
        .entities
        .iter()
        .filter_map(|s| csr.position.get(&s.node).map(|r| *r as usize))
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let p = ppr::personalization(&csr, &rows);
    let scores = ppr::scores(&csr, &p, settings);
    let mut ranked: Vec<(NodeId, f32)> = scores
        .iter()
        .enumerate()
        .filter(|(_, s)| **s > 0.0)
        .map(|(i, s)| (csr.ids[i], *s as f32))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(settings.ppr_top_nodes);
    ranked
}

/// A graph path by name.
fn describe(kb: &Kb, edges: impl Iterator<Item = EdgeId>) -> Vec<PathHop> {
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
