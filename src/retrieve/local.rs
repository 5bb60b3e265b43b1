//! Stage 1: the 1-hop neighbourhood of the entity seeds. With relation seeds, only edges
//! whose relation label is one of them survive: "spouse of X" should not walk X's birthplace.

use std::collections::{HashMap, HashSet};

use super::seeds::Seeds;
use crate::kb::Kb;
use crate::kb::model::EdgeId;

/// Edges of the seeds' neighbourhood with a relevance score, best first, capped.
pub fn expand(kb: &Kb, seeds: &Seeds, max_edges: usize) -> Vec<(EdgeId, f32)> {
    let relation_scores: HashMap<&str, f32> = seeds.relations.iter().map(|r| (r.label.as_str(), r.score)).collect();
    let filter = !relation_scores.is_empty();
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for seed in &seeds.entities {
        for step in kb.graph().steps(seed.node) {
            let Some(edge) = kb.edge(step.edge) else {
                continue;
            };
            if !seen.insert(step.edge) {
                continue;
            }
            let score = match relation_scores.get(&*edge.relation) {
                Some(r) => seed.score * r,
                None if filter => continue,
                // Without relation seeds every edge is equally plausible; prefer edges
                // towards specific (low-degree) neighbours.
                None => seed.score / (1.0 + (kb.graph().degree(step.to) as f32).ln()),
            };
            kept.push((step.edge, score));
        }
    }
    kept.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    kept.truncate(max_edges);
    kept
}
