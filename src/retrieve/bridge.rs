//! Stage 2: bridge discovery. On the graph with inverse edges, a bridge is a node within
//! `hops` of at least two seeds; the shortest paths from it to those seeds are the
//! multi-hop evidence ("the spouse of the performer of Green": performer -> spouse).

use std::collections::VecDeque;

use crate::kb::graph::Step;
use crate::kb::model::{EdgeId, NodeId};
use crate::kb::{Kb, Table};

/// Nodes visited per seed before the search stops widening (hubs explode at 2 hops).
const MAX_VISITED_PER_SEED: usize = 20_000;

/// Steps above which a node the search reaches is not walked through: a hub one hop from a
/// seed (a country, a year, a shared employer) would bring in thousands of nodes the next hop,
/// each joined to the seed by nothing in particular, and a search's cost would grow with the
/// KB. The hub itself can still be a bridge.
const HUB_STEPS: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Bridge {
    pub node: NodeId,
    /// Sum over reaching seeds of 1 / (1 + distance).
    pub score: f32,
    /// Each path is a list of steps from a seed to the bridge.
    pub paths: Vec<Vec<Step>>,
}

pub struct BridgeParams {
    pub hops: usize,
    pub max_bridges: usize,
    pub max_paths: usize,
}

struct Reach {
    distance: usize,
    /// Up to `max_paths` (previous node, step taken) pairs on shortest paths.
    parents: Vec<(NodeId, Step)>,
}

fn bfs(kb: &Kb, seed: NodeId, params: &BridgeParams) -> Table<NodeId, Reach> {
    let mut reach = Table::from_iter([(seed, Reach { distance: 0, parents: Vec::new() })]);
    let mut queue = VecDeque::from([seed]);
    while let Some(node) = queue.pop_front() {
        let d = reach[&node].distance;
        if d == params.hops || reach.len() >= MAX_VISITED_PER_SEED {
            continue;
        }
        if d > 0 && kb.graph().degree(node) > HUB_STEPS {
            continue;
        }
        for step in kb.graph().steps(node) {
            match reach.get_mut(&step.to) {
                Some(r) if r.distance == d + 1 && r.parents.len() < params.max_paths => r.parents.push((node, step)),
                Some(_) => {}
                None => {
                    reach.insert(step.to, Reach { distance: d + 1, parents: vec![(node, step)] });
                    queue.push_back(step.to);
                }
            }
        }
    }
    reach
}

/// Paths from the BFS root to `target`, as steps walked from the root.
fn paths_to(reach: &Table<NodeId, Reach>, target: NodeId, cap: usize) -> Vec<Vec<Step>> {
    let Some(r) = reach.get(&target) else {
        return Vec::new();
    };
    if r.distance == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (prev, step) in &r.parents {
        for mut path in paths_to(reach, *prev, cap) {
            path.push(*step);
            out.push(path);
            if out.len() >= cap {
                return out;
            }
        }
    }
    out
}

pub fn find_bridges(kb: &Kb, seeds: &[NodeId], params: &BridgeParams) -> Vec<Bridge> {
    if seeds.len() < 2 {
        return Vec::new();
    }
    let reaches: Vec<Table<NodeId, Reach>> = seeds.iter().map(|s| bfs(kb, *s, params)).collect();
    let mut hits: Table<NodeId, (usize, f32)> = Table::default();
    for reach in &reaches {
        for (node, r) in reach {
            let entry = hits.entry(*node).or_default();
            entry.0 += 1;
            entry.1 += 1.0 / (1.0 + r.distance as f32);
        }
    }
    let mut bridges: Vec<(NodeId, f32)> =
        hits.into_iter().filter(|(_, (count, _))| *count >= 2).map(|(node, (_, score))| (node, score)).collect();
    bridges.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    bridges.truncate(params.max_bridges);
    bridges
        .into_iter()
        .map(|(node, score)| Bridge {
            node,
            score,
            paths: reaches
                .iter()
                .flat_map(|reach| paths_to(reach, node, params.max_paths))
                .filter(|p| !p.is_empty())
                .collect(),
        })
        .collect()
}

/// Every edge on a bridge's paths.
pub fn path_edges(bridge: &Bridge) -> impl Iterator<Item = EdgeId> + '_ {
    bridge.paths.iter().flatten().map(|s| s.edge)
}
