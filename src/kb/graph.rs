//! The navigation graph: entities as nodes, triples as directed edges. The graph only
//! points at evidence; the evidence itself is always the source chunks (provenance).

use std::collections::HashMap;

use petgraph::Direction;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;

use super::model::{EdgeId, NodeId};

#[derive(Default)]
pub struct KnowledgeGraph {
    g: StableDiGraph<NodeId, EdgeId>,
    nodes: HashMap<NodeId, NodeIndex>,
    edges: HashMap<EdgeId, EdgeIndex>,
}

/// One step from a node: the edge taken, the node reached, and whether the edge was
/// followed forwards (subject -> object) or against its direction (an inverse edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub edge: EdgeId,
    pub to: NodeId,
    pub forward: bool,
}

impl KnowledgeGraph {
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    pub fn contains(&self, node: NodeId) -> bool {
        self.nodes.contains_key(&node)
    }

    pub fn add_node(&mut self, node: NodeId) {
        if !self.nodes.contains_key(&node) {
            let ix = self.g.add_node(node);
            self.nodes.insert(node, ix);
        }
    }

    /// Removes the node and every incident edge.
    pub fn remove_node(&mut self, node: NodeId) {
        if let Some(ix) = self.nodes.remove(&node) {
            let incident: Vec<EdgeId> = self
                .g
                .edges_directed(ix, Direction::Outgoing)
                .chain(self.g.edges_directed(ix, Direction::Incoming))
                .map(|e| *e.weight())
                .collect();
            for e in incident {
                self.edges.remove(&e);
            }
            self.g.remove_node(ix);
        }
    }

    pub fn add_edge(&mut self, id: EdgeId, subject: NodeId, object: NodeId) {
        if self.edges.contains_key(&id) {
            return;
        }
        self.add_node(subject);
        self.add_node(object);
        let ix = self.g.add_edge(self.nodes[&subject], self.nodes[&object], id);
        self.edges.insert(id, ix);
    }

    pub fn remove_edge(&mut self, id: EdgeId) {
        if let Some(ix) = self.edges.remove(&id) {
            self.g.remove_edge(ix);
        }
    }

    /// Edges around `node` in both directions (the graph with inverse edges).
    pub fn steps(&self, node: NodeId) -> Vec<Step> {
        let Some(&ix) = self.nodes.get(&node) else {
            return Vec::new();
        };
        let out = self.g.edges_directed(ix, Direction::Outgoing).map(|e| Step {
            edge: *e.weight(),
            to: self.g[e.target()],
            forward: true,
        });
        let inc = self.g.edges_directed(ix, Direction::Incoming).map(|e| Step {
            edge: *e.weight(),
            to: self.g[e.source()],
            forward: false,
        });
        out.chain(inc).collect()
    }

    pub fn degree(&self, node: NodeId) -> usize {
        self.nodes.get(&node).map_or(0, |&ix| {
            self.g.edges_directed(ix, Direction::Outgoing).count()
                + self.g.edges_directed(ix, Direction::Incoming).count()
        })
    }

    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.keys().copied()
    }

    /// Undirected compressed-sparse-row snapshot for PageRank-style iteration.
    pub fn csr(&self) -> Csr {
        let mut ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        ids.sort_unstable();
        let position: HashMap<NodeId, u32> = ids.iter().enumerate().map(|(i, id)| (*id, i as u32)).collect();
        let mut offsets = Vec::with_capacity(ids.len() + 1);
        let mut targets = Vec::with_capacity(self.edges.len() * 2);
        offsets.push(0);
        for id in &ids {
            for step in self.steps(*id) {
                targets.push(position[&step.to]);
            }
            offsets.push(targets.len());
        }
        Csr { ids, position, offsets, targets }
    }
}

/// Adjacency in CSR form; row `i` lists the neighbours of `ids[i]` (multi-edges repeat).
pub struct Csr {
    pub ids: Vec<NodeId>,
    pub position: HashMap<NodeId, u32>,
    pub offsets: Vec<usize>,
    pub targets: Vec<u32>,
}

impl Csr {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn neighbours(&self, row: usize) -> &[u32] {
        &self.targets[self.offsets[row]..self.offsets[row + 1]]
    }

    pub fn degree(&self, row: usize) -> usize {
        self.offsets[row + 1] - self.offsets[row]
    }

    /// Builds a CSR directly from an undirected edge list (benchmarks, synthetic graphs).
    pub fn from_edges(node_count: usize, edges: &[(u32, u32)]) -> Csr {
        let mut degree = vec![0usize; node_count];
        for &(a, b) in edges {
            degree[a as usize] += 1;
            degree[b as usize] += 1;
        }
        let mut offsets = vec![0usize; node_count + 1];
        for i in 0..node_count {
            offsets[i + 1] = offsets[i] + degree[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; offsets[node_count]];
        for &(a, b) in edges {
            targets[fill[a as usize]] = b;
            fill[a as usize] += 1;
            targets[fill[b as usize]] = a;
            fill[b as usize] += 1;
        }
        let ids: Vec<NodeId> = (0..node_count as u32).collect();
        let position = ids.iter().map(|&i| (i, i)).collect();
        Csr { ids, position, offsets, targets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_follow_both_directions_and_removal_cleans_edges() {
        let mut g = KnowledgeGraph::default();
        g.add_edge(10, 1, 2);
        g.add_edge(11, 3, 1);
        let mut steps = g.steps(1);
        steps.sort_by_key(|s| s.edge);
        assert_eq!(steps, vec![Step { edge: 10, to: 2, forward: true }, Step { edge: 11, to: 3, forward: false }]);
        let csr = g.csr();
        assert_eq!(csr.degree(csr.position[&1] as usize), 2);
        g.remove_node(1);
        assert_eq!(g.edge_count(), 0);
        assert_eq!(g.node_count(), 2);
    }
}
