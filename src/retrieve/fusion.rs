//! The final ranking: the graph's passages fused with a text list by complexity-weighted
//! reciprocal rank fusion (after EA-GraphRAG):
//! `score(d) = (1 - s) / (k + r_text(d)) + s / (k + r_graph(d))`, where `s`, the graph's
//! share, follows the corpus rather than a constant, and the text list follows the embedder.

use super::Stage;
use crate::embed::EmbedderKind;
use crate::kb::model::ChunkId;
use crate::kb::{Kb, SearchMode};
use crate::rank::{WeightedList, weighted_rank_fusion};

/// `text` and `graph` (each best first) fused, each passage with its own graph share
/// ([`GraphShare::of`]); ties on chunk id.
pub fn fuse(text: &[(ChunkId, f32)], graph: &[(ChunkId, f32)], share: &GraphShare<'_>, k: f32) -> Vec<(ChunkId, f32)> {
    let ids = |list: &[(ChunkId, f32)]| list.iter().map(|(c, _)| *c as u64).collect::<Vec<_>>();
    let (text, graph) = (ids(text), ids(graph));
    let text_weight = |chunk: u64| 1.0 - share.of(chunk as ChunkId);
    let graph_weight = |chunk: u64| share.of(chunk as ChunkId);
    let lists: [WeightedList<'_>; 2] = [(&text, &text_weight), (&graph, &graph_weight)];
    weighted_rank_fusion(&lists, k).into_iter().map(|(c, s)| (c as ChunkId, s)).collect()
}

/// The text list the graph's ranking is fused with: hybrid (dense + BM25) with a semantic
/// embedder, BM25 alone with a lexical one, whose vectors only repeat BM25's word matches
/// with hash collisions for noise (MuSiQue, hash: hybrid R@5 0.39 against BM25's 0.51, and
/// a2rag 0.53 fused with hybrid against 0.56 with BM25).
pub fn text_mode(embedder: EmbedderKind) -> SearchMode {
    match embedder {
        EmbedderKind::Semantic => SearchMode::Hybrid,
        EmbedderKind::Lexical => SearchMode::Bm25,
    }
}

/// How many of the graph's best passages judge how far its ranking is trusted where a
/// passage's own edges cannot: about the passages a final ranking keeps.
const GRADED_PASSAGES: usize = 10;

/// The graph's share `s` in the fusion, from what the graph's ranking can be trusted with:
/// `s = L (3 - 2r) / 3`, where `L` is the share of passages in the graph's largest connected
/// component (a walk can only add passages it can reach) and `r` the share of edges made by
/// the rule extractor (co-occurrence grade, trusted a third as much as relation-grade edges
/// from an LLM, an import or a curator). A fully connected graph of relation-grade edges
/// ranks alone (`s = 1`): its walk already starts from the dense scores, and the text list
/// still leads the final ranking with its best passage ([`super::lead`]); fusing the text
/// list's later ranks in again would only push the passages the walk reached, the later
/// hops, below passages that merely look like the question. A rule-made graph gets 1/3.
///
/// `r` is a passage's own: the share among the edges read from it, and for a passage that
/// holds none, the share among the edges of the ranking's best passages (or the whole
/// graph's). A KB mixes both grades (imported triples over one collection, the rule
/// extractor over the folders beside it): judged over the whole graph, 109,000 rule-made
/// passages beside MuSiQue's imported ones moved every passage from `s` 0.99 to 0.37, and the
/// rule-made passages' graph ranks counted as much as the imported ones'. In a KB of one
/// grade every passage gets the one share, as before.
pub struct GraphShare<'kb> {
    kb: &'kb Kb,
    /// `L`, 0 without graph evidence (`Fallback`).
    connected: f32,
    /// `r` of the ranking's best passages.
    rule: f32,
}

impl<'kb> GraphShare<'kb> {
    /// The shares for the graph's ranking `graph_ranked` (best first) after `stage`.
    pub fn new(kb: &'kb Kb, stage: Stage, graph_ranked: &[(ChunkId, f32)]) -> GraphShare<'kb> {
        let connected = if stage == Stage::Fallback { 0.0 } else { kb.passage_graph().largest_component_share };
        let best = graph_ranked.iter().take(GRADED_PASSAGES).map(|(chunk, _)| *chunk);
        let rule = kb.rule_edge_share_of(best).unwrap_or_else(|| kb.rule_edge_share());
        GraphShare { kb, connected, rule }
    }

    /// The share of the ranking as a whole: what the check weighs and a retrieval reports.
    pub fn overall(&self) -> f32 {
        share(self.connected, self.rule)
    }

    /// `chunk`'s share.
    pub fn of(&self, chunk: ChunkId) -> f32 {
        share(self.connected, self.kb.rule_edge_share_of([chunk]).unwrap_or(self.rule))
    }
}

fn share(connected: f32, rule: f32) -> f32 {
    connected * (3.0 - 2.0 * rule) / 3.0
}
