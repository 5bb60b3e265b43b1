//! The edges stating one distinct fact (see `Kb::fact_edges`), ascending. Nearly every fact
//! is stated once, so the first edge is held inline and a set of one allocates nothing: a
//! KB of a million passages holds three million facts, and a `BTreeSet` per fact cost a
//! 112-byte node each.

use super::model::EdgeId;

/// A non-empty ascending set of edge ids: `first`, then `rest`, each above the one before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactEdges {
    first: EdgeId,
    rest: Vec<EdgeId>,
}

impl FactEdges {
    pub fn new(id: EdgeId) -> FactEdges {
        FactEdges { first: id, rest: Vec::new() }
    }

    /// The lowest id: the edge the fact's vector is stored and indexed under.
    pub fn first(&self) -> EdgeId {
        self.first
    }

    pub fn insert(&mut self, id: EdgeId) {
        if id < self.first {
            self.rest.insert(0, std::mem::replace(&mut self.first, id));
        } else if id > self.first
            && let Err(at) = self.rest.binary_search(&id)
        {
            self.rest.insert(at, id);
        }
    }

    /// The set without `id`, or `None` when `id` was its only edge.
    pub fn without(mut self, id: EdgeId) -> Option<FactEdges> {
        if id != self.first {
            if let Ok(at) = self.rest.binary_search(&id) {
                self.rest.remove(at);
            }
            return Some(self);
        }
        if self.rest.is_empty() {
            return None;
        }
        self.first = self.rest.remove(0);
        Some(self)
    }

    /// The ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = EdgeId> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().copied())
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
}
