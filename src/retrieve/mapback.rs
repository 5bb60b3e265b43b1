//! Provenance map-back: graph evidence (edges, nodes with scores) becomes ranked source
//! chunks. The graph navigates; the reader only ever sees source text.

use super::RANKING_DEPTH;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::kb::{Kb, Table};

/// Chunk scores from scored edges: each edge votes for the chunk it was read from.
pub fn from_edges(kb: &Kb, edges: &[(EdgeId, f32)], scores: &mut Table<ChunkId, f32>) {
    for (id, score) in edges {
        if let Some(edge) = kb.edge(*id) {
            *scores.entry(edge.chunk).or_default() += score;
        }
    }
}

/// Chunk scores from scored nodes: a node's score is shared by the chunks that mention it,
/// damped by sqrt(#chunks) so that hub entities do not flood the ranking.
pub fn from_nodes(kb: &Kb, nodes: &[(NodeId, f32)], scores: &mut Table<ChunkId, f32>) {
    for (id, score) in nodes {
        let Some(node) = kb.node(*id) else { continue };
        let share = score / (node.chunks.len().max(1) as f32).sqrt();
        for chunk in &node.chunks {
            *scores.entry(*chunk).or_default() += share;
        }
    }
}

/// The first [`RANKING_DEPTH`] chunks, best first; ties break on chunk id for determinism.
pub fn ranked(scores: &Table<ChunkId, f32>) -> Vec<(ChunkId, f32)> {
    crate::rank::top_k(scores.iter().map(|(c, s)| (*c, *s)).collect(), RANKING_DEPTH)
}
