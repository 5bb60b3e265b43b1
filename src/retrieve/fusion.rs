//! The final ranking: the graph's passages fused with a text list by complexity-weighted
//! reciprocal rank fusion (after EA-GraphRAG):
//! `score(d) = (1 - s) / (k + r_text(d)) + s / (k + r_graph(d))`, where `s`, the graph's
//! share, follows the corpus rather than a constant, and the text list follows the embedder.

use super::Stage;
use crate::embed::EmbedderKind;
use crate::kb::model::ChunkId;
use crate::kb::{Kb, SearchMode};
use crate::rank::weighted_rank_fusion;

/// `text` and `graph` (each best first) fused with graph share `s`; ties on chunk id.
pub fn fuse(text: &[(ChunkId, f32)], graph: &[(ChunkId, f32)], s: f32, k: f32) -> Vec<(ChunkId, f32)> {
    let ids = |list: &[(ChunkId, f32)]| list.iter().map(|(c, _)| *c as u64).collect::<Vec<_>>();
    let (text, graph) = (ids(text), ids(graph));
    let lists = [(text.as_slice(), 1.0 - s), (graph.as_slice(), s)];
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

/// The graph's share `s` in the fusion, from what the corpus's graph can be trusted with:
/// `s = L (3 - 2r) / 3`, where `L` is the share of passages in the graph's largest connected
/// component (a walk can only add passages it can reach) and `r` the share of edges made by
/// the rule extractor (co-occurrence grade, trusted a third as much as relation-grade edges
/// from an LLM, an import or a curator). A fully connected graph of relation-grade edges
/// ranks alone (`s = 1`): its walk already starts from the dense scores, and the text list
/// still leads the final ranking with its best passage ([`super::lead`]); fusing the text
/// list's later ranks in again would only push the passages the walk reached, the later
/// hops, below passages that merely look like the question. A rule-made graph gets 1/3.
/// Without graph evidence (`Fallback`) the share is 0.
pub fn graph_share(kb: &Kb, stage: Stage) -> f32 {
    if stage == Stage::Fallback {
        return 0.0;
    }
    let connected = kb.passage_graph().largest_component_share;
    let rule = kb.rule_edge_share();
    connected * (3.0 - 2.0 * rule) / 3.0
}
