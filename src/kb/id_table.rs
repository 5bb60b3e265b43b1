//! Records by id (the KB's documents, chunks, nodes and edges), held as the sorted list an
//! open decodes plus the changes since.
//!
//! An open used to move each decoded record into a hash table, or a box a table pointed to: at
//! a million passages the three million edges alone became a table of 200 MB of fresh memory,
//! the list they came in freed right after. Here the list itself is the base, found through a
//! position per id (ids are handed out by one counter, so they are dense, and an array of
//! positions is a quarter of a table's size); records written since sit in a small table in
//! front of it, folded into a new base once they reach a quarter of it.

use super::Table;

/// A record's id.
pub trait Keyed {
    type Id: Copy + Into<u64>;
    fn id(&self) -> Self::Id;

    /// The id as every table keeps it.
    fn key(&self) -> u64 {
        self.id().into()
    }
}

pub struct IdTable<V> {
    /// By id, each id once.
    base: Vec<V>,
    positions: Positions,
    /// Records written since the base was built; `None`: a base record removed.
    changed: Table<u64, Option<V>>,
    len: usize,
}

/// Where each id of the base sits in it.
enum Positions {
    /// `at[id - first]`, `u32::MAX` for an id the base lacks: ids from one counter, most of
    /// them the base's.
    Dense { first: u64, at: Vec<u32> },
    /// Ids too spread out for an array (more than [`SPREAD`] slots per record).
    Sparse(Table<u64, u32>),
}

/// The most array slots per base record before positions are kept in a table instead.
const SPREAD: u64 = 8;

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable { base: Vec::new(), positions: Positions::Sparse(Table::default()), changed: Table::default(), len: 0 }
    }
}

impl<V: Keyed + Clone> IdTable<V> {
    /// The table of `records`; of records sharing an id, the last is kept.
    pub fn of(mut records: Vec<V>) -> IdTable<V> {
        // Decoded records come in id order, each id once: then nothing moves (reversing
        // three million edges twice to keep the last of a repeated id was a tenth of a
        // second of an open).
        if !records.is_sorted_by(|a, b| a.key() < b.key()) {
            records.sort_by_key(Keyed::key);
            records.reverse();
            records.dedup_by_key(|r| r.key());
            records.reverse();
        }
        let positions = Positions::of(&records);
        IdTable { len: records.len(), base: records, positions, changed: Table::default() }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, id: V::Id) -> Option<&V> {
        let id = id.into();
        match self.changed.get(&id) {
            Some(changed) => changed.as_ref(),
            None => self.positions.of_id(id).map(|at| &self.base[at]),
        }
    }

    pub fn contains(&self, id: V::Id) -> bool {
        self.get(id).is_some()
    }

    /// Every record, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> + Clone {
        let base = self.base.iter().filter(|r| self.changed.is_empty() || !self.changed.contains_key(&r.key()));
        base.chain(self.changed.values().flatten())
    }

    /// Every record's id, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = V::Id> + '_ {
        self.values().map(Keyed::id)
    }

    /// Puts `record` under its id, in place of any record there.
    pub fn insert(&mut self, record: V) {
        if !self.contains(record.id()) {
            self.len += 1;
        }
        self.changed.insert(record.key(), Some(record));
        self.fold_if_grown();
    }

    /// Takes the record `id` out, if there is one.
    pub fn remove(&mut self, id: V::Id) -> Option<V> {
        let id = id.into();
        let in_base = self.positions.of_id(id).map(|at| &self.base[at]);
        let removed = match self.changed.remove(&id) {
            Some(changed) => changed,
            None => in_base.cloned(),
        };
        if in_base.is_some() {
            self.changed.insert(id, None);
        }
        if removed.is_some() {
            self.len -= 1;
            self.fold_if_grown();
        }
        removed
    }

    /// Builds the base again from every record once the changes reach a quarter of it.
    fn fold_if_grown(&mut self) {
        if !super::fold_due(self.changed.len(), self.base.len()) {
            return;
        }
        let changed = std::mem::take(&mut self.changed);
        let mut records = std::mem::take(&mut self.base);
        records.retain(|r| !changed.contains_key(&r.key()));
        records.extend(changed.into_values().flatten());
        *self = IdTable::of(records);
    }
}

impl Positions {
    fn of<V: Keyed>(records: &[V]) -> Positions {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Positions::Sparse(Table::default());
        };
        // The largest offset rather than the count of slots: ids up to `u64::MAX` stay sparse
        // instead of overflowing the count.
        let (first, last_offset) = (first.key(), last.key() - first.key());
        if last_offset < (records.len() as u64).saturating_mul(SPREAD) && records.len() < u32::MAX as usize {
            let mut at = vec![u32::MAX; last_offset as usize + 1];
            for (position, record) in records.iter().enumerate() {
                at[(record.key() - first) as usize] = position as u32;
            }
            Positions::Dense { first, at }
        } else {
            Positions::Sparse(records.iter().enumerate().map(|(position, r)| (r.key(), position as u32)).collect())
        }
    }

    fn of_id(&self, id: u64) -> Option<usize> {
        let position = match self {
            Positions::Dense { first, at } => *at.get(usize::try_from(id.checked_sub(*first)?).ok()?)?,
            Positions::Sparse(table) => *table.get(&id)?,
        };
        (position != u32::MAX).then_some(position as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Record(u64, &'static str);

    impl Keyed for Record {
        type Id = u64;
        fn id(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn records_are_found_by_id_whether_their_ids_are_dense_or_spread_out() {
        for ids in [vec![3, 4, 6, 7], vec![5, 1_000_000, 7_000_000_000], vec![0, 4, u64::MAX]] {
            let table = IdTable::of(ids.iter().rev().map(|&id| Record(id, "x")).collect());
            assert!(matches!(table.positions, Positions::Dense { .. }) == (ids[0] == 3), "{ids:?}");
            for &id in &ids {
                assert_eq!(table.get(id), Some(&Record(id, "x")));
            }
            for probe in [0, 5, 8, u64::MAX] {
                assert_eq!(table.get(probe).is_some(), ids.contains(&probe), "{ids:?}");
            }
            assert_eq!(table.len(), ids.len());
        }
    }

    #[test]
    fn of_records_sharing_an_id_the_last_is_kept_and_ordered_ones_are_kept_as_they_come() {
        let table = IdTable::of(vec![Record(2, "first"), Record(1, "one"), Record(2, "last")]);
        assert_eq!((table.get(2), table.len()), (Some(&Record(2, "last")), 2));
        let ordered = IdTable::of(vec![Record(1, "a"), Record(2, "b"), Record(5, "c")]);
        assert_eq!(ordered.base, vec![Record(1, "a"), Record(2, "b"), Record(5, "c")]);
    }

    #[test]
    fn random_changes_read_as_a_plain_table_before_and_after_folds() {
        let mut next = crate::kb::test_sequence(0x5851_F42D_4C95_7F2Du64);
        let mut table = IdTable::of((0..500).map(|id| Record(id * 2, "base")).collect());
        let mut plain: Table<u64, Record> = (0..500).map(|id| (id * 2, Record(id * 2, "base"))).collect();
        let labels = ["a", "b", "c"];
        for round in 0..20_000u64 {
            let id = next(3_000);
            if next(3) == 0 {
                assert_eq!(table.remove(id), plain.remove(&id), "remove {id} in round {round}");
            } else {
                let record = Record(id, labels[next(3) as usize]);
                table.insert(record.clone());
                plain.insert(id, record);
            }
            if round % 2_000 == 0 || round == 19_999 {
                for id in 0..3_000 {
                    assert_eq!(table.get(id), plain.get(&id), "id {id} after {round} changes");
                }
                let mut listed: Vec<u64> = table.values().map(Keyed::id).collect();
                listed.sort_unstable();
                let mut expected: Vec<u64> = plain.keys().copied().collect();
                expected.sort_unstable();
                assert_eq!(listed, expected, "after {round} changes");
                assert_eq!(table.len(), plain.len());
            }
        }
        assert!(table.base.iter().any(|r| r.1 != "base"), "the changes were folded into the base");
    }
}
