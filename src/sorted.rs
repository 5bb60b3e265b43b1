//! Searches of ascending slices that start from a guess rather than from the middle.
//!
//! The long sorted lists a query reads (a segment's keys, a hub entity's chunks) are larger
//! than the caches, and a binary search of one misses them at most of its twenty steps. Where
//! the caller knows about where the answer is (the last answer, in a merge of two ascending
//! lists; where evenly spread ids put a key), a search that gallops out from there takes a
//! few probes, close together in memory.

/// The first position in `sorted` (ascending) whose element is not below `key`, or
/// `sorted.len()`, searched outward from `from` by doubling steps: O(log d) probes where the
/// answer is `d` away. Any `from` gives the right answer; a near one gives it sooner.
pub fn lower_bound_from<T: Ord>(sorted: &[T], from: usize, key: &T) -> usize {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    let from = from.min(n - 1);
    let (lo, hi) = if sorted[from] < *key {
        // Right of `from`: double the step while it still lands below `key`.
        let (mut lo, mut step) = (from, 1);
        while lo + step < n && sorted[lo + step] < *key {
            lo += step;
            step *= 2;
        }
        (lo + 1, (lo + step).min(n))
    } else {
        // At or left of `from`: double the step while it still lands on `key` or above.
        let (mut hi, mut step) = (from, 1);
        while hi >= step && sorted[hi - step] >= *key {
            hi -= step;
            step *= 2;
        }
        (hi.saturating_sub(step - 1), hi)
    };
    lo + sorted[lo..hi].partition_point(|x| x < key)
}

/// Calls `found` with the position in `keys` of each of `keys` that `sorted` holds; both
/// ascending. One pass over both: each search starts where the last one ended.
pub fn for_each_shared<T: Ord>(keys: &[T], sorted: &[T], mut found: impl FnMut(usize)) {
    let mut at = 0;
    for (i, key) in keys.iter().enumerate() {
        at = lower_bound_from(sorted, at, key);
        if at == sorted.len() {
            return;
        }
        if sorted[at] == *key {
            found(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From every start, over lists with gaps, runs and duplicates, the answer is the
    /// standard library's.
    #[test]
    fn the_search_from_any_start_finds_the_lower_bound() {
        let lists: [Vec<u32>; 5] = [
            vec![],
            vec![7],
            (0..40).map(|i| i * 5 + 1).collect(),
            vec![1, 2, 2, 2, 9, 9, 30, 31, 32, 100],
            (0..300).map(|i| i * i / 7).collect(),
        ];
        for sorted in &lists {
            let top = sorted.last().copied().unwrap_or(0) + 3;
            for key in 0..=top {
                let expected = sorted.partition_point(|x| *x < key);
                for from in 0..=sorted.len() + 1 {
                    assert_eq!(lower_bound_from(sorted, from, &key), expected, "{key} from {from} in {sorted:?}");
                }
            }
        }
    }

    #[test]
    fn shared_keys_are_those_both_lists_hold() {
        let keys: Vec<u32> = (0..200).map(|i| i * 3).collect();
        let sorted: Vec<u32> = (0..150).map(|i| i * 4 + 2).collect();
        let mut found = Vec::new();
        for_each_shared(&keys, &sorted, |i| found.push(keys[i]));
        let expected: Vec<u32> = keys.iter().copied().filter(|k| sorted.binary_search(k).is_ok()).collect();
        assert!(!expected.is_empty());
        assert_eq!(found, expected);
        let mut none = 0;
        for_each_shared(&keys, &[], |_| none += 1);
        for_each_shared(&[], &sorted, |_| none += 1);
        assert_eq!(none, 0);
    }
}
