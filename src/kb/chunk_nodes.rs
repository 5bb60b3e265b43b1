//! Reverse provenance: the nodes each chunk mentions (the inverse of `Node::chunks`).
//!
//! Held as a base, every chunk's nodes in one array (CSR) indexed by chunk id, and the chunks
//! changed since, each with its whole list. Ids are dense (one counter for every record,
//! `kb::store`), so the base's offsets cost four bytes per id the KB has issued, and an open
//! counts the mentions into place in two passes with no lookup: a list per chunk, grown a
//! push at a time, cost the open of a million passages a second of a core and a small
//! allocation per chunk, and a hash table from chunk to row a fifth of the open's CPU in its
//! probes. A chunk's list is copied out of the base the first time a write changes it, so a
//! lookup is one slice either way, and the changes are folded into a new base once they
//! are as many as its chunks (at least 1,024). A lookup asks the changes first whatever
//! their number, so they cost reads little; a fold reads every list and the offsets of every
//! id, so folding at a quarter, as the other tables do, read a large document's lists again
//! and again as its chunks came in (one 16 MB document: 2.7 % of the 1 MB row's time per
//! MB, none at 1 MB).

use super::Table;
use super::mapped::{Reader, put_u32s};
use super::model::{ChunkId, Node, NodeId};

/// Changed chunks below which no fold is due, however small the base.
const FOLD_MIN: usize = 1_024;

#[derive(Default)]
pub struct ChunkNodes {
    base: Base,
    /// The lists of the chunks changed since the base was built; an empty list stands for a
    /// chunk with no nodes or no longer there.
    changed: Table<ChunkId, Vec<NodeId>>,
}

/// Chunk `c` lists its nodes at `nodes[starts[c]..starts[c + 1]]`; a chunk past the end of
/// `starts` lists none.
#[derive(Default)]
struct Base {
    starts: Vec<u32>,
    nodes: Vec<NodeId>,
    /// Chunks with at least one node.
    chunks: usize,
}

impl ChunkNodes {
    /// The chunks `nodes` cite, each listing the nodes that cite it in the order of `nodes`.
    pub fn of(nodes: &[Node]) -> ChunkNodes {
        let citations = || nodes.iter().flat_map(|node| node.chunks.iter().map(move |&chunk| (chunk, node.id)));
        ChunkNodes { base: Base::of(citations), changed: Table::default() }
    }

    /// The nodes that cite `chunk`.
    pub fn get(&self, chunk: ChunkId) -> &[NodeId] {
        match self.changed.get(&chunk) {
            Some(nodes) => nodes,
            None => self.base.get(chunk),
        }
    }

    /// Adds `node` at the end of `chunk`'s list.
    pub fn add(&mut self, chunk: ChunkId, node: NodeId) {
        self.list_mut(chunk).push(node);
        self.fold_if_grown();
    }

    /// Takes `node` out of `chunk`'s list.
    pub fn remove(&mut self, chunk: ChunkId, node: NodeId) {
        if self.get(chunk).contains(&node) {
            self.list_mut(chunk).retain(|n| *n != node);
            self.fold_if_grown();
        }
    }

    /// Forgets `chunk`.
    pub fn remove_chunk(&mut self, chunk: ChunkId) {
        if !self.get(chunk).is_empty() {
            self.list_mut(chunk).clear();
            self.fold_if_grown();
        }
    }

    /// Every chunk some node cites, with those nodes.
    pub fn iter(&self) -> impl Iterator<Item = (ChunkId, &[NodeId])> {
        let base = (0..self.base.starts.len().saturating_sub(1))
            .map(|at| (at as ChunkId, self.base.get(at as ChunkId)))
            .filter(|(chunk, nodes)| !nodes.is_empty() && !self.changed.contains_key(chunk));
        let changed = self.changed.iter().map(|(&chunk, nodes)| (chunk, nodes.as_slice()));
        base.chain(changed.filter(|(_, nodes)| !nodes.is_empty()))
    }

    /// `chunk`'s list, copied out of the base the first time it changes.
    fn list_mut(&mut self, chunk: ChunkId) -> &mut Vec<NodeId> {
        let base = &self.base;
        self.changed.entry(chunk).or_insert_with(|| base.get(chunk).to_vec())
    }

    /// Builds the base again from every list once the changed chunks are as many as its own.
    fn fold_if_grown(&mut self) {
        if self.changed.len() < self.base.chunks.max(FOLD_MIN) {
            return;
        }
        *self = ChunkNodes { base: self.folded(), changed: Table::default() };
    }

    /// A base of every list as it is now.
    fn folded(&self) -> Base {
        Base::of(|| self.iter().flat_map(|(chunk, nodes)| nodes.iter().map(move |&node| (chunk, node))))
    }

    /// The lists as [`ChunkNodes::decoded`] reads them: the arrays of a base of them all.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let folded;
        let base = if self.changed.is_empty() {
            &self.base
        } else {
            folded = self.folded();
            &folded
        };
        put_u32s(out, &base.starts);
        put_u32s(out, &base.nodes);
    }

    /// The lists [`ChunkNodes::encode`] wrote; `None` where the arrays are not a base (a
    /// list that ends before it starts, or past the nodes).
    pub fn decoded(r: &mut Reader) -> Option<ChunkNodes> {
        let (starts, nodes) = (r.u32s()?, r.u32s()?);
        let whole = match (starts.first(), starts.last()) {
            (Some(0), Some(&end)) => end as usize == nodes.len() && starts.is_sorted(),
            _ => starts.is_empty() && nodes.is_empty(),
        };
        let chunks = starts.windows(2).filter(|list| list[0] < list[1]).count();
        whole.then(|| ChunkNodes { base: Base { starts, nodes, chunks }, changed: Table::default() })
    }
}

impl Base {
    /// The base listing each chunk's nodes in the order `citations` yields them; it is
    /// called twice (a count, then the placing) and must yield the same pairs each time.
    fn of<I: Iterator<Item = (ChunkId, NodeId)>>(citations: impl Fn() -> I) -> Base {
        // `starts[c + 1]` counts chunk c's citations, then becomes its end by a running sum.
        let mut starts: Vec<u32> = vec![0];
        for (chunk, _) in citations() {
            let end = chunk as usize + 1;
            if end >= starts.len() {
                starts.resize(end + 1, 0);
            }
            starts[end] += 1;
        }
        let chunks = starts.iter().filter(|count| **count > 0).count();
        for at in 1..starts.len() {
            starts[at] += starts[at - 1];
        }
        let mut next = starts.clone();
        let mut nodes = vec![0; starts.last().copied().unwrap_or_default() as usize];
        for (chunk, node) in citations() {
            let slot = &mut next[chunk as usize];
            nodes[*slot as usize] = node;
            *slot += 1;
        }
        Base { starts, nodes, chunks }
    }

    fn get(&self, chunk: ChunkId) -> &[NodeId] {
        let at = chunk as usize;
        match (self.starts.get(at), self.starts.get(at + 1)) {
            (Some(&start), Some(&end)) => &self.nodes[start as usize..end as usize],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: NodeId, chunks: &[ChunkId]) -> Node {
        Node { id, name: format!("Node {id}"), aliases: vec![format!("Node {id}")], chunks: chunks.to_vec() }
    }

    #[test]
    fn a_built_index_lists_each_chunks_citing_nodes_in_node_order() {
        let index = ChunkNodes::of(&[node(1, &[10, 11]), node(2, &[11]), node(3, &[12, 10])]);
        assert_eq!(index.get(10), &[1, 3]);
        assert_eq!(index.get(11), &[1, 2]);
        assert_eq!(index.get(12), &[3]);
        assert!(index.get(99).is_empty());
        let mut all: Vec<(ChunkId, Vec<NodeId>)> = index.iter().map(|(c, n)| (c, n.to_vec())).collect();
        all.sort();
        assert_eq!(all, vec![(10, vec![1, 3]), (11, vec![1, 2]), (12, vec![3])]);
    }

    #[test]
    fn encoded_lists_read_back_with_their_changes_folded_in() {
        let mut index = ChunkNodes::of(&[node(1, &[10, 11]), node(2, &[11]), node(3, &[12, 10])]);
        let saved = |index: &ChunkNodes| {
            let mut out = Vec::new();
            index.encode(&mut out);
            let mut r = Reader { rest: &out };
            let read = ChunkNodes::decoded(&mut r).expect("the encoded lists read back");
            assert!(r.rest.is_empty() && read.changed.is_empty());
            let mut lists: Vec<(ChunkId, Vec<NodeId>)> = read.iter().map(|(c, n)| (c, n.to_vec())).collect();
            lists.sort();
            lists
        };
        assert_eq!(saved(&index), vec![(10, vec![1, 3]), (11, vec![1, 2]), (12, vec![3])]);
        index.add(13, 4);
        index.remove(10, 1);
        assert_eq!(saved(&index), vec![(10, vec![3]), (11, vec![1, 2]), (12, vec![3]), (13, vec![4])]);
        assert_eq!(saved(&ChunkNodes::default()), vec![]);
        // A list running past the nodes is refused rather than read.
        let mut out = Vec::new();
        put_u32s(&mut out, &[0, 2, 5]);
        put_u32s(&mut out, &[1, 2, 3]);
        assert!(ChunkNodes::decoded(&mut Reader { rest: &out }).is_none());
    }

    #[test]
    fn changes_read_as_a_plain_table_before_and_after_folds() {
        let mut next = crate::kb::test_sequence(0x2545_F491_4F6C_DD1Du64);
        let nodes: Vec<Node> = (0..200).map(|id| node(id, &[(id % 50) as ChunkId, 50 + (id % 7) as ChunkId])).collect();
        let mut index = ChunkNodes::of(&nodes);
        let mut plain: Table<ChunkId, Vec<NodeId>> = Table::default();
        for n in &nodes {
            for &c in &n.chunks {
                plain.entry(c).or_default().push(n.id);
            }
        }
        let mut folded = false;
        for round in 0..20_000 {
            let chunk = next(3_000) as ChunkId;
            let before = index.changed.len();
            match next(10) {
                0..=5 => {
                    let node = 1_000 + round as NodeId;
                    index.add(chunk, node);
                    plain.entry(chunk).or_default().push(node);
                }
                6..=8 => {
                    let node = plain.get(&chunk).and_then(|list| list.first().copied()).unwrap_or(7);
                    index.remove(chunk, node);
                    if let Some(list) = plain.get_mut(&chunk) {
                        list.retain(|n| *n != node);
                    }
                }
                _ => {
                    index.remove_chunk(chunk);
                    plain.remove(&chunk);
                }
            }
            // Only a fold empties the changes.
            folded |= index.changed.len() < before;
            if round % 2_000 == 0 || round == 19_999 {
                for chunk in 0..3_000 {
                    assert_eq!(index.get(chunk), plain.get(&chunk).map_or(&[][..], Vec::as_slice), "chunk {chunk}");
                }
                let listed = index.iter().count();
                assert_eq!(listed, plain.values().filter(|l| !l.is_empty()).count(), "after {round} changes");
            }
        }
        assert!(folded, "the changes were folded into the base");
    }
}
