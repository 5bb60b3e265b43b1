//! The navigation graph: entities as nodes, triples as directed edges. The graph only
//! points at evidence; the evidence itself is always the source chunks (provenance).

use std::collections::hash_map::Entry;

use petgraph::Direction;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;

use super::Table;
use super::model::{EdgeId, NodeId};

#[derive(Default)]
pub struct KnowledgeGraph {
    g: StableDiGraph<Entity, EdgeId>,
    nodes: Table<NodeId, NodeIndex>,
    edges: Table<EdgeId, EdgeIndex>,
}

/// A node of the graph with its degree, kept as edges come and go: retrieval weighs steps by
/// the degree of where they lead, and counting a hub's edges (a third of a million at a
/// million pages) on every step that reaches it would cost a query as much as the hub is big.
struct Entity {
    id: NodeId,
    /// Incident edges, both directions; a loop counts twice.
    degree: usize,
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

    /// Room for `nodes` and `edges` more: a graph built a million edges at a time would
    /// otherwise grow its lists and tables by doubling, copying each and having the fresh
    /// pages zeroed every time.
    pub fn reserve(&mut self, nodes: usize, edges: usize) {
        self.g.reserve_nodes(nodes);
        self.g.reserve_edges(edges);
        self.nodes.reserve(nodes);
        self.edges.reserve(edges);
    }

    pub fn add_node(&mut self, node: NodeId) {
        node_index(&mut self.g, &mut self.nodes, node);
    }

    /// Removes the node and every incident edge.
    pub fn remove_node(&mut self, node: NodeId) {
        if let Some(&ix) = self.nodes.get(&node) {
            let incident: Vec<EdgeId> = self
                .g
                .edges_directed(ix, Direction::Outgoing)
                .chain(self.g.edges_directed(ix, Direction::Incoming))
                .map(|e| *e.weight())
                .collect();
            for e in incident {
                self.remove_edge(e);
            }
            self.nodes.remove(&node);
            self.g.remove_node(ix);
        }
    }

    pub fn add_edge(&mut self, id: EdgeId, subject: NodeId, object: NodeId) {
        // One lookup per table and key: an open adds millions of edges.
        let Entry::Vacant(slot) = self.edges.entry(id) else {
            return;
        };
        let from = node_index(&mut self.g, &mut self.nodes, subject);
        let to = node_index(&mut self.g, &mut self.nodes, object);
        slot.insert(self.g.add_edge(from, to, id));
        self.g[from].degree += 1;
        self.g[to].degree += 1;
    }

    pub fn remove_edge(&mut self, id: EdgeId) {
        if let Some(ix) = self.edges.remove(&id) {
            if let Some((from, to)) = self.g.edge_endpoints(ix) {
                self.g[from].degree -= 1;
                self.g[to].degree -= 1;
            }
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
            to: self.g[e.target()].id,
            forward: true,
        });
        let inc = self.g.edges_directed(ix, Direction::Incoming).map(|e| Step {
            edge: *e.weight(),
            to: self.g[e.source()].id,
            forward: false,
        });
        out.chain(inc).collect()
    }

    /// Incident edges in both directions (the number of [`KnowledgeGraph::steps`]).
    pub fn degree(&self, node: NodeId) -> usize {
        self.nodes.get(&node).map_or(0, |&ix| self.g[ix].degree)
    }

    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.keys().copied()
    }
}

/// The graph's index of `node`, added without edges if the graph lacks it.
fn node_index(g: &mut StableDiGraph<Entity, EdgeId>, nodes: &mut Table<NodeId, NodeIndex>, node: NodeId) -> NodeIndex {
    *nodes.entry(node).or_insert_with(|| g.add_node(Entity { id: node, degree: 0 }))
}

/// Undirected weighted adjacency in CSR form: row `i` lists its neighbours with the weight of
/// each entry (multi-edges repeat). Every edge appears in both rows with the same weight.
pub struct Csr {
    pub offsets: Vec<usize>,
    pub targets: Vec<u32>,
    pub weights: Vec<f32>,
}

impl Csr {
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn neighbours(&self, row: usize) -> &[u32] {
        &self.targets[self.offsets[row]..self.offsets[row + 1]]
    }

    /// The weights of [`Csr::neighbours`], entry for entry.
    pub fn neighbour_weights(&self, row: usize) -> &[f32] {
        &self.weights[self.offsets[row]..self.offsets[row + 1]]
    }

    pub fn degree(&self, row: usize) -> usize {
        self.offsets[row + 1] - self.offsets[row]
    }

    /// Sum of the weights of a row's entries (the weighted degree).
    pub fn strength(&self, row: usize) -> f64 {
        self.neighbour_weights(row).iter().map(|w| *w as f64).sum()
    }

    /// A CSR over rows `0..node_count` from an undirected edge list, every edge of weight 1.
    pub fn from_edges(node_count: usize, edges: &[(u32, u32)]) -> Csr {
        let weighted: Vec<(u32, u32, f32)> = edges.iter().map(|&(a, b)| (a, b, 1.0)).collect();
        Csr::from_weighted_edges(node_count, &weighted)
    }

    /// A CSR over rows `0..node_count` from undirected `(a, b, weight)` edges; rows list
    /// their entries in edge-list order, so the same list gives the same CSR.
    pub fn from_weighted_edges(node_count: usize, edges: &[(u32, u32, f32)]) -> Csr {
        let mut degree = vec![0usize; node_count];
        for &(a, b, _) in edges {
            degree[a as usize] += 1;
            degree[b as usize] += 1;
        }
        let mut offsets = vec![0usize; node_count + 1];
        for i in 0..node_count {
            offsets[i + 1] = offsets[i] + degree[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; offsets[node_count]];
        let mut weights = vec![0f32; offsets[node_count]];
        for &(a, b, w) in edges {
            for (from, to) in [(a, b), (b, a)] {
                targets[fill[from as usize]] = to;
                weights[fill[from as usize]] = w;
                fill[from as usize] += 1;
            }
        }
        Csr { offsets, targets, weights }
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
        assert_eq!(g.degree(1), 2);
        g.add_edge(12, 2, 2);
        assert_eq!((g.degree(2), g.steps(2).len()), (3, 3), "a loop is two steps");
        g.remove_node(1);
        assert_eq!(g.edge_count(), 1);
        assert_eq!(g.node_count(), 2);
        assert_eq!((g.degree(1), g.degree(2), g.degree(3)), (0, 2, 0), "a removed node's neighbours lose its edges");
        g.remove_edge(12);
        assert_eq!(g.degree(2), 0);
    }
}
