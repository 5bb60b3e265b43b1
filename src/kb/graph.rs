//! The navigation graph: entities as nodes, triples as directed edges. The graph only
//! points at evidence; the evidence itself is always the source chunks (provenance).
//!
//! Held as a base, every node's steps in one array (CSR), and the changes since: edges added,
//! base edges removed. An open counts its edges into place in two passes; built edge by edge
//! into a linked graph and two hash tables, the three million edges of a million passages cost
//! it over a second of a core and 170 MB of fresh memory. The changes are folded into a new
//! base once they reach a quarter of it, so a write costs amortised constant work and a node's
//! steps stay a slice of the base, found by its id, and a probe of the few changes.

use std::cmp::Reverse;

use super::Table;
use super::mapped::{Reader, put_u32s};
use super::model::{EdgeId, NodeId};

#[derive(Default)]
pub struct KnowledgeGraph {
    base: Base,
    /// Steps of the edges added since the base was built, by node, in [`step_order`].
    added: Table<NodeId, Vec<Step>>,
    /// The endpoints of the edges added since the base was built.
    added_edges: Table<EdgeId, (NodeId, NodeId)>,
    /// Base edges removed since it was built.
    removed: foldhash::HashSet<EdgeId>,
    /// How many of each node's base steps the removed edges are. Degrees are kept, not
    /// counted: retrieval weighs steps by the degree of where they lead, and a hub has a
    /// third of a million edges at a million pages.
    removed_steps: Table<NodeId, usize>,
}

/// The edges at one moment in CSR form: row `r` holds its node's steps at
/// `steps[starts[r]..starts[r + 1]]`, the outgoing ones before `incoming[r]`, each part in
/// [`step_order`]. Positions are `u32`: a base holds far fewer than 2^31 edges (each costs 28
/// bytes here alone), and the arrays are a third of what `usize` would make them.
#[derive(Default)]
struct Base {
    /// Each node's row, by node id ([`NO_ROW`] for a node without edges): ids are dense, so
    /// this costs four bytes per id the KB has issued, and an open finds the rows of its six
    /// million edge ends at a million passages without hashing one (a table from node to row
    /// was most of this structure's build).
    rows: Vec<u32>,
    starts: Vec<u32>,
    incoming: Vec<u32>,
    /// Positions in `edges`.
    steps: Vec<u32>,
    /// `(edge, subject, object)`, by edge id.
    edges: Vec<(EdgeId, NodeId, NodeId)>,
}

const NO_ROW: u32 = u32::MAX;

/// One step from a node: the edge taken, the node reached, and whether the edge was
/// followed forwards (subject -> object) or against its direction (an inverse edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub edge: EdgeId,
    pub to: NodeId,
    pub forward: bool,
}

/// The order of a node's steps: outgoing before incoming, each newest (highest edge id)
/// first. Fixed, so that retrieval's ties break the same way whatever order edges came in.
fn step_order(step: &Step) -> Reverse<(bool, EdgeId)> {
    Reverse((step.forward, step.edge))
}

impl KnowledgeGraph {
    /// The graph of `edges`, each `(edge, subject, object)`; an edge id given twice is taken
    /// once.
    pub fn of(edges: Vec<(EdgeId, NodeId, NodeId)>) -> KnowledgeGraph {
        KnowledgeGraph { base: Base::of(edges), ..KnowledgeGraph::default() }
    }

    /// Adds edge `id` from `subject` to `object`, unless the graph holds an edge `id` already.
    pub fn add_edge(&mut self, id: EdgeId, subject: NodeId, object: NodeId) {
        let in_base = self.base.edge(id).is_some() && !self.removed.contains(&id);
        if in_base || self.added_edges.contains_key(&id) {
            return;
        }
        self.added_edges.insert(id, (subject, object));
        for (node, step) in [
            (subject, Step { edge: id, to: object, forward: true }),
            (object, Step { edge: id, to: subject, forward: false }),
        ] {
            let steps = self.added.entry(node).or_default();
            let at = steps.partition_point(|s| step_order(s) < step_order(&step));
            steps.insert(at, step);
        }
        self.fold_if_grown();
    }

    /// Removes every edge of `node`: a node without edges has no steps.
    pub fn remove_node(&mut self, node: NodeId) {
        for step in self.steps(node) {
            self.remove_edge(step.edge);
        }
    }

    pub fn remove_edge(&mut self, id: EdgeId) {
        if let Some((subject, object)) = self.added_edges.remove(&id) {
            for node in [subject, object] {
                if let Some(steps) = self.added.get_mut(&node) {
                    steps.retain(|s| s.edge != id);
                    if steps.is_empty() {
                        self.added.remove(&node);
                    }
                }
            }
        } else if let Some((_, subject, object)) = self.base.edge(id)
            && self.removed.insert(id)
        {
            *self.removed_steps.entry(subject).or_default() += 1;
            *self.removed_steps.entry(object).or_default() += 1;
            self.fold_if_grown();
        }
    }

    /// Edges around `node` in both directions (the graph with inverse edges), in
    /// [`step_order`].
    pub fn steps(&self, node: NodeId) -> Vec<Step> {
        let base = self.base.steps(node).filter(|s| self.removed.is_empty() || !self.removed.contains(&s.edge));
        match self.added.get(&node) {
            None => base.collect(),
            Some(added) => merged(base, added.iter().copied()),
        }
    }

    /// Incident edges in both directions (the number of [`KnowledgeGraph::steps`]; a loop
    /// counts twice).
    pub fn degree(&self, node: NodeId) -> usize {
        let removed = self.removed_steps.get(&node).copied().unwrap_or(0);
        self.base.degree(node) - removed + self.added.get(&node).map_or(0, Vec::len)
    }

    /// Builds the base again from every edge once the changes since reach a quarter of it.
    fn fold_if_grown(&mut self) {
        if !super::fold_due(self.added_edges.len() + self.removed.len(), self.base.edges.len()) {
            return;
        }
        *self = KnowledgeGraph::of(self.edges());
    }

    /// Every edge as `(edge, subject, object)`, in no set order.
    fn edges(&self) -> Vec<(EdgeId, NodeId, NodeId)> {
        let kept = self.base.edges.iter().filter(|(id, _, _)| !self.removed.contains(id)).copied();
        kept.chain(self.added_edges.iter().map(|(&id, &(subject, object))| (id, subject, object))).collect()
    }

    /// The graph as [`KnowledgeGraph::decoded`] reads it: the arrays of a base of every edge.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let folded;
        let base = if self.added_edges.is_empty() && self.removed.is_empty() {
            &self.base
        } else {
            folded = Base::of(self.edges());
            &folded
        };
        for array in [&base.rows, &base.starts, &base.incoming, &base.steps] {
            put_u32s(out, array);
        }
        out.extend_from_slice(&(base.edges.len() as u64).to_le_bytes());
        for (edge, subject, object) in &base.edges {
            out.extend_from_slice(&edge.to_le_bytes());
            out.extend_from_slice(&subject.to_le_bytes());
            out.extend_from_slice(&object.to_le_bytes());
        }
    }

    /// The graph [`KnowledgeGraph::encode`] wrote; `None` where the arrays are not a base:
    /// every row, step and edge they name must be there, so that no read can fall outside.
    pub fn decoded(r: &mut Reader) -> Option<KnowledgeGraph> {
        let (rows, starts, incoming, steps) = (r.u32s()?, r.u32s()?, r.u32s()?, r.u32s()?);
        let edges = r.long_list(|r| Some((r.u64()?, r.u32()?, r.u32()?)))?;
        let rows_in_range = starts.len() == incoming.len() + 1
            && starts.first().is_some_and(|&first| first == 0)
            && starts.last().is_some_and(|&last| last as usize == steps.len())
            && starts.is_sorted()
            && incoming.iter().enumerate().all(|(row, &at)| starts[row] <= at && at <= starts[row + 1])
            && rows.iter().all(|&row| row == NO_ROW || (row as usize) < incoming.len());
        let empty = rows.is_empty() && starts.is_empty() && incoming.is_empty() && steps.is_empty() && edges.is_empty();
        // An encoder writes two steps per edge, its subject's and its object's (a loop's
        // both in one row). Only the count is checked here, which a damaged count or list
        // breaks; the file's checksum covers the rest.
        let whole = (rows_in_range || empty)
            && steps.len() == 2 * edges.len()
            && steps.iter().all(|&at| (at as usize) < edges.len())
            && edges.windows(2).all(|pair| pair[0].0 < pair[1].0);
        let base = Base { rows, starts, incoming, steps, edges };
        whole.then(|| KnowledgeGraph { base, ..KnowledgeGraph::default() })
    }
}

/// Two runs of steps, each in [`step_order`], as one.
fn merged(a: impl Iterator<Item = Step>, b: impl Iterator<Item = Step>) -> Vec<Step> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut out = Vec::new();
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if step_order(x) <= step_order(y) => a.next(),
            (Some(_), None) => a.next(),
            _ => b.next(),
        };
        match next {
            Some(step) => out.push(step),
            None => return out,
        }
    }
}

impl Base {
    fn of(mut edges: Vec<(EdgeId, NodeId, NodeId)>) -> Base {
        // Stored and saved edges come in id order: then the sort only checks it.
        edges.sort_by_key(|&(id, _, _)| id);
        edges.dedup_by_key(|&mut (id, _, _)| id);
        // Rows in order of first appearance, each with its outgoing and incoming count.
        let highest = edges.iter().map(|&(_, subject, object)| subject.max(object)).max();
        let mut rows = vec![NO_ROW; highest.map_or(0, |node| node as usize + 1)];
        let mut counts: Vec<(u32, u32)> = Vec::new();
        let row = |node: NodeId, counts: &mut Vec<(u32, u32)>, rows: &mut [u32]| {
            let row = &mut rows[node as usize];
            if *row == NO_ROW {
                *row = counts.len() as u32;
                counts.push((0, 0));
            }
            *row as usize
        };
        let mut ends: Vec<(u32, u32)> = Vec::with_capacity(edges.len());
        for &(_, subject, object) in &edges {
            let (from, to) = (row(subject, &mut counts, &mut rows), row(object, &mut counts, &mut rows));
            counts[from].0 += 1;
            counts[to].1 += 1;
            ends.push((from as u32, to as u32));
        }
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut incoming = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &(outgoing, incoming_count) in &counts {
            starts.push(at);
            incoming.push(at + outgoing);
            at += outgoing + incoming_count;
        }
        starts.push(at);
        // Newest edge first into each part, a row's two cursors starting where its parts do.
        let mut steps = vec![0u32; at as usize];
        let (mut next_out, mut next_in) = (starts.clone(), incoming.clone());
        for (position, &(from, to)) in ends.iter().enumerate().rev() {
            for cursor in [&mut next_out[from as usize], &mut next_in[to as usize]] {
                steps[*cursor as usize] = position as u32;
                *cursor += 1;
            }
        }
        Base { rows, starts, incoming, steps, edges }
    }

    fn edge(&self, id: EdgeId) -> Option<(EdgeId, NodeId, NodeId)> {
        self.edges.binary_search_by_key(&id, |&(edge, _, _)| edge).ok().map(|at| self.edges[at])
    }

    fn steps(&self, node: NodeId) -> impl Iterator<Item = Step> + '_ {
        let (range, incoming) = match self.row(node) {
            Some(row) => (self.starts[row]..self.starts[row + 1], self.incoming[row]),
            None => (0..0, 0),
        };
        range.map(move |at| {
            let (edge, subject, object) = self.edges[self.steps[at as usize] as usize];
            let forward = at < incoming;
            Step { edge, to: if forward { object } else { subject }, forward }
        })
    }

    fn degree(&self, node: NodeId) -> usize {
        self.row(node).map_or(0, |row| (self.starts[row + 1] - self.starts[row]) as usize)
    }

    fn row(&self, node: NodeId) -> Option<usize> {
        self.rows.get(node as usize).filter(|row| **row != NO_ROW).map(|row| *row as usize)
    }
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

    /// Steps as a graph kept in the plainest way would give them: every edge held, a node's
    /// steps read off in [`step_order`].
    fn expected(edges: &[(EdgeId, NodeId, NodeId)], node: NodeId) -> Vec<Step> {
        let mut steps: Vec<Step> = edges
            .iter()
            .flat_map(|&(edge, subject, object)| {
                let out = (subject == node).then_some(Step { edge, to: object, forward: true });
                let inc = (object == node).then_some(Step { edge, to: subject, forward: false });
                out.into_iter().chain(inc)
            })
            .collect();
        steps.sort_by_key(step_order);
        steps
    }

    #[test]
    fn steps_follow_both_directions_and_removal_cleans_edges() {
        let mut g = KnowledgeGraph::default();
        g.add_edge(10, 1, 2);
        g.add_edge(11, 3, 1);
        assert_eq!(g.steps(1), vec![Step { edge: 10, to: 2, forward: true }, Step { edge: 11, to: 3, forward: false }]);
        assert_eq!(g.degree(1), 2);
        g.add_edge(12, 2, 2);
        assert_eq!((g.degree(2), g.steps(2).len()), (3, 3), "a loop is two steps");
        g.remove_node(1);
        assert_eq!((g.degree(1), g.degree(2), g.degree(3)), (0, 2, 0), "a removed node's neighbours lose its edges");
        g.remove_edge(12);
        assert_eq!(g.degree(2), 0);
        assert!(g.steps(2).is_empty());
    }

    /// The graph [`KnowledgeGraph::encode`] writes, read back.
    fn read_back(graph: &KnowledgeGraph) -> Option<KnowledgeGraph> {
        let mut out = Vec::new();
        graph.encode(&mut out);
        let mut r = Reader { rest: &out };
        KnowledgeGraph::decoded(&mut r).filter(|_| r.rest.is_empty())
    }

    #[test]
    fn an_encoded_graph_reads_back_with_its_changes_folded_in() {
        let mut g = KnowledgeGraph::of(vec![(5, 1, 2), (3, 1, 3), (9, 4, 1), (7, 1, 1)]);
        g.add_edge(11, 2, 3);
        g.remove_edge(3);
        let read = read_back(&g).expect("the encoded graph reads back");
        let now = [(5, 1, 2), (7, 1, 1), (9, 4, 1), (11, 2, 3)];
        for node in 0..=5 {
            assert_eq!(read.steps(node), expected(&now, node), "node {node}");
            assert_eq!(read.degree(node), g.degree(node), "node {node}");
        }
        assert!(read.added_edges.is_empty() && read.removed.is_empty(), "the changes are in the base");
        assert!(read_back(&KnowledgeGraph::default()).is_some_and(|g| g.steps(1).is_empty()));
    }

    #[test]
    fn a_graph_whose_arrays_point_outside_is_refused() {
        let mut out = Vec::new();
        KnowledgeGraph::of(vec![(5, 1, 2), (7, 2, 3)]).encode(&mut out);
        // The last step, just before the edges' count and two edges of 16 bytes, is made to
        // name an edge past the two there are.
        let last_step = out.len() - 8 - 2 * 16 - 4;
        assert!(KnowledgeGraph::decoded(&mut Reader { rest: &out }).is_some());
        out[last_step..last_step + 4].copy_from_slice(&2u32.to_le_bytes());
        assert!(KnowledgeGraph::decoded(&mut Reader { rest: &out }).is_none());
    }

    #[test]
    fn a_graph_with_an_edge_in_no_row_is_refused() {
        let mut out = Vec::new();
        KnowledgeGraph::of(vec![(5, 1, 2), (7, 2, 3)]).encode(&mut out);
        // A third edge after the two, which no row's steps name.
        let count_at = out.len() - 8 - 2 * 16;
        out[count_at..count_at + 8].copy_from_slice(&3u64.to_le_bytes());
        for field in [9u64.to_le_bytes().as_slice(), &1u32.to_le_bytes(), &3u32.to_le_bytes()] {
            out.extend_from_slice(field);
        }
        assert!(KnowledgeGraph::decoded(&mut Reader { rest: &out }).is_none());
    }

    #[test]
    fn a_built_graph_orders_steps_outgoing_first_newest_first_and_ignores_repeated_ids() {
        let edges = vec![(5, 1, 2), (3, 1, 3), (9, 4, 1), (7, 1, 1), (3, 8, 9)];
        let g = KnowledgeGraph::of(edges.clone());
        let taken = [(3, 1, 3), (5, 1, 2), (7, 1, 1), (9, 4, 1)];
        for node in 1..=9 {
            assert_eq!(g.steps(node), expected(&taken, node), "node {node}");
            assert_eq!(g.degree(node), expected(&taken, node).len(), "node {node}");
        }
        let mut added = KnowledgeGraph::default();
        for (id, subject, object) in edges {
            added.add_edge(id, subject, object);
        }
        for node in 1..=9 {
            assert_eq!(added.steps(node), g.steps(node), "edges added one by one read as the built graph");
        }
    }

    #[test]
    fn a_removed_base_edge_can_come_back_once() {
        let mut g = KnowledgeGraph::of(vec![(1, 1, 2), (2, 2, 3)]);
        g.remove_edge(1);
        assert_eq!(g.steps(1), vec![]);
        g.add_edge(1, 1, 2);
        g.add_edge(1, 5, 6);
        assert_eq!(g.steps(2), expected(&[(1, 1, 2), (2, 2, 3)], 2), "the edge is back once, where it was");
        assert_eq!(g.degree(5), 0, "an id the graph holds is not added again");
    }

    #[test]
    fn random_changes_read_as_the_plain_graph_before_and_after_folds() {
        // Enough nodes that removing one takes few edges, so the changes reach a fold.
        const NODES: u64 = 1_000;
        let mut next = crate::kb::test_sequence(0x9E37_79B9_7F4A_7C15u64);
        let mut plain: Vec<(EdgeId, NodeId, NodeId)> =
            (0..300).map(|id| (id, next(NODES) as NodeId, next(NODES) as NodeId)).collect();
        let mut g = KnowledgeGraph::of(plain.clone());
        let mut fresh_id = 300;
        for round in 0..12_000 {
            match next(10) {
                0..=5 => {
                    let edge = (fresh_id, next(NODES) as NodeId, next(NODES) as NodeId);
                    fresh_id += 1;
                    g.add_edge(edge.0, edge.1, edge.2);
                    plain.push(edge);
                }
                6..=8 if !plain.is_empty() => {
                    let (id, _, _) = plain.swap_remove(next(plain.len() as u64) as usize);
                    g.remove_edge(id);
                }
                _ => {
                    let node = next(NODES) as NodeId;
                    g.remove_node(node);
                    plain.retain(|&(_, subject, object)| subject != node && object != node);
                }
            }
            if round % 1_000 == 0 || round == 11_999 {
                for node in 0..NODES as NodeId {
                    assert_eq!(g.steps(node), expected(&plain, node), "node {node} after {round} changes");
                    assert_eq!(g.degree(node), expected(&plain, node).len(), "node {node} after {round} changes");
                }
            }
        }
        assert!(g.base.edges.iter().any(|&(id, _, _)| id >= 300), "edges added later were folded into the base");
    }
}
