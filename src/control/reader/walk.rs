//! The graph walk: from the question's seeds along the evidence edges (edges whose chunk was
//! retrieved), every node reached becomes a candidate scored by how well its path states the
//! question's relations.

use std::collections::{HashMap, HashSet};

use super::candidate::{Candidate, answer_surface};
use crate::control::question::Question;
use crate::kb::Kb;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::retrieve::Retrieval;
use crate::text;

/// Hops walked from a seed through the evidence graph: multi-hop questions chain up to four
/// facts, and the seeds already stand on the first.
const MAX_HOPS: usize = 3;
/// A hop whose relation states none of the question's relation words costs this factor.
const UNALIGNED_HOP: f32 = 0.6;
/// Paths explored per seed; hubs in the evidence graph would otherwise explode at 3 hops.
const MAX_PATHS_PER_SEED: usize = 20_000;
/// Alignment of a path for a question with no relation words: every path says as little.
const UNASKED_ALIGNMENT: f32 = 0.5;
/// Share of a path's score a node keeps when one seed of many reaches it; reached from every
/// seed, it keeps all: the answer a question's every named entity leads to is the one it
/// describes.
const ONE_SEED_SHARE: f32 = 0.6;

/// What one evidence edge states of the question's relations.
struct Hop<'q> {
    /// The question's relation words its label states.
    stated: Vec<&'q str>,
    /// Its cosine to the question's relation phrase when it is a relation seed, else 0.
    seeded: f32,
}

/// Walks the evidence graph from each seed, up to [`MAX_HOPS`], and makes every node reached
/// a candidate scored by its best path.
pub(super) fn walk(kb: &Kb, question: &Question, retrieval: &Retrieval, candidates: &mut HashMap<String, Candidate>) {
    let evidence: HashSet<ChunkId> = retrieval.chunks.iter().map(|c| c.chunk).collect();
    let mut adjacency: HashMap<NodeId, Vec<(NodeId, EdgeId)>> = HashMap::new();
    let mut seen = HashSet::new();
    for chunk in &evidence {
        for node in kb.nodes_in_chunk(*chunk) {
            for step in kb.graph().steps(*node) {
                let Some(edge) = kb.edge(step.edge) else {
                    continue;
                };
                if evidence.contains(&edge.chunk) && seen.insert((*node, step.edge, step.to)) {
                    adjacency.entry(*node).or_default().push((step.to, step.edge));
                }
            }
        }
    }
    let relation_seeds: HashMap<&str, f32> =
        retrieval.seeds.relations.iter().map(|r| (r.label.as_str(), r.score)).collect();
    // What each evidence edge states of the question's relations, computed once.
    let hops: HashMap<EdgeId, Hop<'_>> = seen
        .iter()
        .filter_map(|(_, e, _)| {
            let edge = kb.edge(*e)?;
            let stated = question.relations_in(&edge.relation);
            let seeded = relation_seeds.get(&*edge.relation).copied().unwrap_or(0.0);
            Some((*e, Hop { stated, seeded }))
        })
        .collect();
    let seeds: Vec<NodeId> = retrieval.seeds.entities.iter().map(|s| s.node).collect();
    let (best, reached_by) = best_paths(question, &seeds, &adjacency, &hops);
    for (node, (alignment, edges)) in best {
        let Some(n) = kb.node(node) else { continue };
        if seeds.contains(&node) || question.names(&n.name) {
            continue;
        }
        let reach = reached_by.get(&node).map_or(0, HashSet::len) as f32 / seeds.len().max(1) as f32;
        let score = alignment * (ONE_SEED_SHARE + (1.0 - ONE_SEED_SHARE) * reach);
        let surface = answer_surface(&n.name);
        if question.names(&surface) {
            continue;
        }
        let c = candidates.entry(text::normalize_answer(&surface)).or_default();
        if c.surface.is_empty() {
            c.surface = surface;
        }
        if score > c.path {
            c.path = score;
            c.path_hops = crate::retrieve::describe(kb, edges.iter().copied());
        }
    }
}

type BestPaths = (HashMap<NodeId, (f32, Vec<EdgeId>)>, HashMap<NodeId, HashSet<NodeId>>);

/// Depth-first from each seed: the best-aligned path to every node reached, and which seeds
/// reach it.
fn best_paths(
    question: &Question,
    seeds: &[NodeId],
    adjacency: &HashMap<NodeId, Vec<(NodeId, EdgeId)>>,
    hops: &HashMap<EdgeId, Hop<'_>>,
) -> BestPaths {
    let mut reached_by: HashMap<NodeId, HashSet<NodeId>> = HashMap::new();
    let mut best: HashMap<NodeId, (f32, Vec<EdgeId>)> = HashMap::new();
    for seed in seeds {
        let mut stack: Vec<(NodeId, Vec<EdgeId>, Vec<NodeId>)> = vec![(*seed, Vec::new(), vec![*seed])];
        let mut explored = 0;
        while let Some((node, edges, visited)) = stack.pop() {
            explored += 1;
            if explored > MAX_PATHS_PER_SEED {
                break;
            }
            if !edges.is_empty() {
                reached_by.entry(node).or_default().insert(*seed);
                let alignment = path_alignment(question, hops, &edges);
                if best.get(&node).is_none_or(|(a, _)| alignment > *a) {
                    best.insert(node, (alignment, edges.clone()));
                }
            }
            if edges.len() == MAX_HOPS {
                continue;
            }
            for (next, edge) in adjacency.get(&node).into_iter().flatten() {
                if visited.contains(next) {
                    continue;
                }
                let mut e = edges.clone();
                e.push(*edge);
                let mut v = visited.clone();
                v.push(*next);
                stack.push((*next, e, v));
            }
        }
    }
    (best, reached_by)
}

/// Share of the question's relation words the path's relations state, discounted for each
/// hop that states none (a relation seed, aligned by embedding, is discounted by its cosine
/// instead).
fn path_alignment(question: &Question, hops: &HashMap<EdgeId, Hop<'_>>, edges: &[EdgeId]) -> f32 {
    let mut covered: HashSet<&str> = HashSet::new();
    let mut factor = 1.0;
    for hop in edges.iter().filter_map(|e| hops.get(e)) {
        if hop.stated.is_empty() {
            factor *= UNALIGNED_HOP.max(hop.seeded);
        }
        covered.extend(hop.stated.iter().copied());
    }
    if question.relation_words.is_empty() {
        UNASKED_ALIGNMENT * factor
    } else {
        factor * covered.len() as f32 / question.relation_words.len() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_aligns_by_the_relation_words_it_states() {
        let q = Question::parse("Who founded the company that built the Kell Dam?", None);
        let hop = |stated: Vec<&'static str>| Hop { stated, seeded: 0.0 };
        let hops: HashMap<EdgeId, Hop<'_>> =
            [(1, hop(vec!["built"])), (2, hop(vec!["founded"])), (3, hop(Vec::new()))].into_iter().collect();
        let both = path_alignment(&q, &hops, &[1, 2]);
        assert!((both - 2.0 * path_alignment(&q, &hops, &[1])).abs() < 1e-6, "two relations state twice one");
        let with_unaligned = path_alignment(&q, &hops, &[1, 3, 2]);
        assert!((with_unaligned - UNALIGNED_HOP * both).abs() < 1e-6, "a hop stating neither costs its factor");
    }
}
