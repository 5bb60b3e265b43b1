//! The agentic retriever. Escalation is monotonic, Local -> Bridge -> Global, each stage at
//! most once per call; a sufficiency check after each stage decides whether to stop. Graph
//! evidence is mapped back to source chunks and fused (RRF) with dense + BM25 text
//! retrieval, which also carries queries where no seed aligns.

pub mod bridge;
pub mod local;
pub mod mapback;
pub mod ppr;
pub mod seeds;
pub mod sufficiency;

use std::collections::HashMap;
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
struct State {
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

    pub fn retrieve(&self, query: &str, options: RetrieveOptions) -> Result<Retrieval> {
        let started = Instant::now();
        let kb = self.kb;
        let settings = self.settings;
        if let Strategy::Text(mode) = options.strategy {
            let hits = kb.search(query, mode, options.top_k)?;
            return Ok(self.finish(options.top_k, hits, Vec::new(), Stage::Fallback, false, Seeds::default(), Vec::new(), started));
        }
        let seeds = seeds::find_seeds(kb, settings, query)?;
        let mut state = State::default();
        let mut reports = Vec::new();
        let mut stage = Stage::Fallback;
        let mut sufficient = false;
        let stages: &[Stage] = match options.strategy {
            Strategy::LocalOnly => &[Stage::Local],
            Strategy::PprAlways => &[Stage::Global],
            _ => &[Stage::Local, Stage::Bridge, Stage::Global],
        };
        if !seeds.entities.is_empty() {
            for &next in stages.iter().filter(|s| **s >= options.min_stage) {
                let t = Instant::now();
                let (edges, nodes) = self.run_stage(next, &seeds, &mut state);
                stage = next;
                let ranked_chunks: Vec<ChunkId> = mapback::ranked(&state.chunk_scores)
                    .into_iter()
                    .take(options.top_k)
                    .map(|(c, _)| c)
                    .collect();
                let edge_ids: Vec<EdgeId> = state.edges.iter().map(|(e, _)| *e).collect();
                let judgement = self.check.judge(kb, query, &seeds, &StageEvidence { edges: &edge_ids, chunks: &ranked_chunks });
                tracing::debug!(?next, edges, nodes, sufficient = judgement.sufficient, reason = %judgement.reason, "retrieval stage");
                sufficient = judgement.sufficient;
                reports.push(StageReport {
                    stage: next,
                    micros: t.elapsed().as_micros() as u64,
                    edges,
                    nodes,
                    chunks: state.chunk_scores.len(),
                    judgement,
                });
                if sufficient {
                    break;
                }
            }
        }
        let graph_ranked = mapback::ranked(&state.chunk_scores);
        let hits = match options.strategy {
            Strategy::Adaptive => {
                let ids = |hits: Vec<(ChunkId, f32)>| hits.into_iter().map(|(c, _)| c as u64).collect::<Vec<_>>();
                let graph = ids(graph_ranked);
                let text = ids(kb.search(query, SearchMode::Hybrid, settings.text_candidates)?);
                // How much the graph's vote counts depends on how its edges were made.
                let rule = kb.rule_edge_share();
                let weight = settings.graph_weight * (1.0 - rule) + settings.rule_graph_weight * rule;
                let lists = [(graph.as_slice(), weight), (text.as_slice(), 1.0)];
                weighted_rank_fusion(&lists, settings.rrf_k)
                    .into_iter()
                    .map(|(c, s)| (c as ChunkId, s))
                    .collect()
            }
            _ => graph_ranked,
        };
        Ok(self.finish(options.top_k, hits, state.paths, stage, sufficient, seeds, reports, started))
    }

    /// Runs one stage, adding to the evidence; returns (edges, nodes) it contributed.
    fn run_stage(&self, stage: Stage, seeds: &Seeds, state: &mut State) -> (usize, usize) {
        let kb = self.kb;
        let settings = self.settings;
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
                        state.paths.push(self.describe(path.iter().map(|s| s.edge)));
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
                let nodes = self.personalized_pagerank(seeds);
                // PPR scores are probabilities; scale so they are comparable to earlier stages.
                let scaled: Vec<(NodeId, f32)> = nodes.iter().map(|(n, s)| (*n, s * 10.0)).collect();
                mapback::from_nodes(kb, &scaled, &mut state.chunk_scores);
                (0, nodes.len())
            }
            Stage::Fallback => (0, 0),
        }
    }

    /// Top nodes by degree-normalised PPR from the entity seeds.
    pub fn personalized_pagerank(&self, seeds: &Seeds) -> Vec<(NodeId, f32)> {
        let settings = self.settings;
        let csr = self.kb.csr();
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

    fn describe(&self, edges: impl Iterator<Item = EdgeId>) -> Vec<PathHop> {
        let name = |n: NodeId| self.kb.node(n).map_or_else(|| format!("#{n}"), |n| n.name.clone());
        edges
            .filter_map(|e| self.kb.edge(e))
            .map(|e| PathHop {
                subject: name(e.subject),
                relation: e.relation.clone(),
                object: name(e.object),
                chunk: e.chunk,
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        top_k: usize,
        hits: Vec<(ChunkId, f32)>,
        paths: Vec<Vec<PathHop>>,
        stage: Stage,
        sufficient: bool,
        seeds: Seeds,
        stages: Vec<StageReport>,
        started: Instant,
    ) -> Retrieval {
        let chunks = hits
            .into_iter()
            .filter_map(|(id, score)| {
                let chunk = self.kb.chunk(id)?;
                let doc = self.kb.doc(chunk.doc)?;
                Some(RankedChunk {
                    chunk: id,
                    doc_id: doc.id.clone(),
                    title: doc.title.clone(),
                    span: chunk.span,
                    score,
                    text: chunk.text.clone(),
                })
            })
            .take(top_k)
            .collect();
        Retrieval {
            chunks,
            paths,
            stage,
            sufficient,
            seeds,
            stages,
            micros: started.elapsed().as_micros() as u64,
        }
    }
}
