//! The edges stating one distinct fact (see `Kb::fact_edges`), ascending. Nearly every fact
//! is stated once, so the first edge is held inline and the others behind one pointer: a KB
//! of a million passages holds three million facts, and a `BTreeSet` per fact cost a 112-byte
//! node each, a `Vec` beside the first edge 24 bytes each.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::Table;
use super::id_table::IdTable;
use super::model::{Edge, EdgeId, NodeId};

/// What makes two edges state the same fact: subject, relation label and object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FactKey(NodeId, Arc<str>, NodeId);

impl FactKey {
    pub fn of(edge: &Edge) -> FactKey {
        FactKey(edge.subject, Arc::clone(&edge.relation), edge.object)
    }
}

/// The edges stating each distinct fact.
pub type FactTable = Table<FactKey, FactEdges>;

/// `edge` among the edges stating its fact.
pub fn add_fact(facts: &mut FactTable, edge: &Edge) {
    match facts.entry(FactKey::of(edge)) {
        Entry::Occupied(mut ids) => ids.get_mut().insert(edge.id),
        Entry::Vacant(slot) => {
            slot.insert(FactEdges::new(edge.id));
        }
    }
}

/// The edges stating each distinct fact among `edges`.
pub fn fact_table(edges: &IdTable<Edge>) -> FactTable {
    let mut facts = Table::with_capacity_and_hasher(edges.len(), Default::default());
    for edge in edges.values() {
        add_fact(&mut facts, edge);
    }
    facts
}

/// The fact table, built of the edges when first read: by a write, by `check`, by a
/// follower applying another daemon's edges, or by an open that reads every vector from the
/// store. Retrieval finds a fact's first edge among one node's steps instead (see
/// `Kb::fact_vector_edges_at`), as does an open replaying the edges written since its save,
/// so an open from a save and a daemon that only serves never build it: three million
/// inserts at a million passages, about a second of a core and 190 MB. The first write pays
/// them instead, under the write lock.
#[derive(Debug, Default)]
pub struct LazyFacts(std::sync::OnceLock<FactTable>);

impl LazyFacts {
    /// The table, built of `edges` if no read has built it yet.
    pub fn get(&self, edges: &IdTable<Edge>) -> &FactTable {
        self.0.get_or_init(|| fact_table(edges))
    }

    /// The table to change, where one was built. An unbuilt table needs no change: it is
    /// built of the edges as they are when first read.
    pub fn built_mut(&mut self) -> Option<&mut FactTable> {
        self.0.get_mut()
    }
}

/// A non-empty ascending set of edge ids: `first`, then `rest`, each above the one before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactEdges {
    first: EdgeId,
    /// `None` rather than an empty list, so that sets compare by their ids alone. Boxed: the
    /// second allocation is paid by the few facts stated twice, the pointer saved by all.
    #[allow(clippy::box_collection)]
    rest: Option<Box<Vec<EdgeId>>>,
}

impl FactEdges {
    pub fn new(id: EdgeId) -> FactEdges {
        FactEdges { first: id, rest: None }
    }

    /// The lowest id: the edge the fact's vector is stored and indexed under.
    pub fn first(&self) -> EdgeId {
        self.first
    }

    pub fn insert(&mut self, id: EdgeId) {
        if id < self.first {
            let first = std::mem::replace(&mut self.first, id);
            self.rest.get_or_insert_default().insert(0, first);
        } else if id > self.first {
            let rest = self.rest.get_or_insert_default();
            if let Err(at) = rest.binary_search(&id) {
                rest.insert(at, id);
            }
        }
    }

    /// The set without `id`, or `None` when `id` was its only edge.
    pub fn without(mut self, id: EdgeId) -> Option<FactEdges> {
        if id != self.first {
            if let Some(rest) = &mut self.rest
                && let Ok(at) = rest.binary_search(&id)
            {
                rest.remove(at);
                if rest.is_empty() {
                    self.rest = None;
                }
            }
            return Some(self);
        }
        let mut rest = self.rest.take()?;
        self.first = rest.remove(0);
        self.rest = Some(rest).filter(|rest| !rest.is_empty());
        Some(self)
    }

    /// The ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = EdgeId> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().flat_map(|rest| rest.iter().copied()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_ascending_and_distinct_whatever_the_order_they_come_in() {
        let mut set = FactEdges::new(40);
        for id in [70, 10, 40, 55, 10, 90, 5] {
            set.insert(id);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![5, 10, 40, 55, 70, 90]);
        assert_eq!(set.first(), 5);
    }

    #[test]
    fn removing_the_first_hands_its_place_to_the_next_and_the_last_empties_it() {
        let mut set = FactEdges::new(3);
        set.insert(8);
        set.insert(6);
        let set = set.without(3).expect("two left");
        assert_eq!((set.first(), set.iter().collect::<Vec<_>>()), (6, vec![6, 8]));
        let set = set.without(99).expect("an absent id changes nothing");
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![6, 8]);
        let set = set.without(8).expect("one left");
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![6]);
        assert_eq!(set.without(6), None);
    }

    #[test]
    fn a_set_emptied_down_to_its_first_equals_one_never_grown() {
        let mut set = FactEdges::new(4);
        set.insert(9);
        assert_eq!(set.without(9), Some(FactEdges::new(4)));
        assert_eq!(std::mem::size_of::<FactEdges>(), 16, "an edge id and a pointer");
    }
}
