//! The graph each linked key of a vector index is in (see `vector`).
//!
//! An index's keys are record ids, and ids come from one counter ("Ids are dense" in
//! ARCHITECTURE), so most keys of an index fall in an array indexed by key: a chunk is about
//! one id in five, a fact's first edge one in two. At a million passages an open filled a hash
//! table of four million keys, each a hash, a probe and sixteen bytes of fresh memory, in
//! most of the time it took to map the saved indexes; an array is filled by writing in place,
//! four bytes a slot. Keys the array would have to grow too far for (a KB written by a build
//! whose ids jumped, an index whose keys are one id in twenty) sit in a table beside it.

use super::Table;

/// Graph numbers by key: each key in the array or in the table, never both.
#[derive(Default)]
pub struct Homes {
    /// `dense[key]`: the graph of `key`, or [`NONE`].
    dense: Vec<u32>,
    /// Keys beyond the array when they came.
    sparse: Table<u64, u32>,
    len: usize,
}

const NONE: u32 = u32::MAX;
/// The most array slots per key held: at four bytes a slot, about what a table spends on a
/// key, so the array never costs more than twice the table it replaces.
const SPREAD: usize = 8;
/// An array this long is allowed whatever it holds.
const FLOOR: usize = 4096;

impl Homes {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, key: u64) -> Option<usize> {
        let dense = usize::try_from(key).ok().and_then(|at| self.dense.get(at)).filter(|graph| **graph != NONE);
        dense.or_else(|| self.sparse.get(&key)).map(|graph| *graph as usize)
    }

    pub fn contains(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Homes `key` in `graph`; the graph it was in, if any.
    pub fn insert(&mut self, key: u64, graph: usize) -> Option<usize> {
        debug_assert!(graph < NONE as usize, "graph numbers stay far below u32::MAX");
        let graph = graph as u32;
        let old = match self.sparse.get_mut(&key) {
            Some(slot) => std::mem::replace(slot, graph),
            None => match self.dense_slot(key) {
                Some(slot) => std::mem::replace(slot, graph),
                None => self.sparse.insert(key, graph).unwrap_or(NONE),
            },
        };
        if old == NONE {
            self.len += 1;
            None
        } else {
            Some(old as usize)
        }
    }

    pub fn remove(&mut self, key: u64) -> Option<usize> {
        let dense = usize::try_from(key).ok().and_then(|at| self.dense.get_mut(at));
        let old = match dense {
            Some(slot) if *slot != NONE => std::mem::replace(slot, NONE),
            _ => self.sparse.remove(&key)?,
        };
        self.len -= 1;
        Some(old as usize)
    }

    /// Every key with its graph: the array's in key order, then the table's.
    pub fn iter(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        let dense = self.dense.iter().enumerate().filter(|(_, graph)| **graph != NONE);
        let dense = dense.map(|(key, graph)| (key as u64, *graph as usize));
        dense.chain(self.sparse.iter().map(|(key, graph)| (*key, *graph as usize)))
    }

    /// The array slot of `key`, the array grown to hold it if that keeps it within
    /// [`SPREAD`] slots a key.
    fn dense_slot(&mut self, key: u64) -> Option<&mut u32> {
        let at = usize::try_from(key).ok()?;
        if at >= self.dense.len() {
            let most = FLOOR.max(SPREAD.saturating_mul(self.len + 1));
            if at >= most {
                return None;
            }
            // Doubling: keys mostly come in ascending order, one slot further each.
            self.dense.resize((at + 1).max(2 * self.dense.len()).min(most), NONE);
        }
        self.dense.get_mut(at)
    }
}

impl Extend<(u64, usize)> for Homes {
    fn extend<T: IntoIterator<Item = (u64, usize)>>(&mut self, entries: T) {
        for (key, graph) in entries {
            self.insert(key, graph);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn homes_answer_as_a_map_through_random_changes_and_far_keys_stay_out_of_the_array() {
        let mut next = crate::kb::test_sequence(7);
        let (mut homes, mut model) = (Homes::default(), HashMap::new());
        for step in 0..20_000u64 {
            // Mostly ascending keys, some far above them, now and then one of the past.
            let key = match next(10) {
                0 => (1 << 40) + next(50),
                1 => next(step + 1),
                _ => step * 3,
            };
            let graph = next(5) as usize;
            if next(4) == 0 {
                assert_eq!(homes.remove(key), model.remove(&key), "remove {key}");
            } else {
                assert_eq!(homes.insert(key, graph), model.insert(key, graph), "insert {key}");
            }
            assert_eq!(homes.len(), model.len());
        }
        for (key, graph) in &model {
            assert_eq!(homes.get(*key), Some(*graph));
        }
        let mut listed: Vec<(u64, usize)> = homes.iter().collect();
        listed.sort_unstable();
        let mut expected: Vec<(u64, usize)> = model.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        assert!(homes.dense.len() < 1 << 20, "far keys did not stretch the array");
    }

    #[test]
    fn a_key_in_the_table_stays_there_when_the_array_grows_past_it() {
        let mut homes = Homes::default();
        assert_eq!(homes.insert(10_000, 1), None, "beyond the floor: the table");
        homes.extend((0..2_000).map(|i| (i * 8 + 1, 0)));
        assert!(homes.dense.len() > 10_000, "the array grew past it");
        assert_eq!(homes.insert(10_000, 2), Some(1));
        assert_eq!((homes.get(10_000), homes.len()), (Some(2), 2_001));
        assert_eq!(homes.remove(10_000), Some(2));
        assert_eq!((homes.get(10_000), homes.len(), homes.contains(10_000)), (None, 2_000, false));
    }
}
