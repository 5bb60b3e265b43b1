//! Rank fusion shared by the hybrid text retriever, the baselines and the final evidence
//! ranking.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over lists of 1 / (k + rank).
/// Ties break by key so results are deterministic.
pub fn reciprocal_rank_fusion(lists: &[Vec<u64>], k: f32) -> Vec<(u64, f32)> {
    let equal = |_: u64| 1.0_f32;
    let weighted: Vec<WeightedList<'_>> = lists.iter().map(|l| (l.as_slice(), &equal as _)).collect();
    weighted_rank_fusion(&weighted, k)
}

/// A ranked list of keys, best first, with its weight for each key.
pub type WeightedList<'a> = (&'a [u64], &'a dyn Fn(u64) -> f32);

/// RRF where each list's vote for a key is scaled by the list's weight for that key.
pub fn weighted_rank_fusion(lists: &[WeightedList<'_>], k: f32) -> Vec<(u64, f32)> {
    let mut scores: foldhash::HashMap<u64, f32> = foldhash::HashMap::default();
    for (list, weight) in lists {
        for (rank, key) in list.iter().enumerate() {
            *scores.entry(*key).or_default() += weight(*key) / (k + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(u64, f32)> = scores.into_iter().collect();
    // Keys are distinct, so the order is total and an unstable sort gives the one result.
    fused.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

/// The `k` highest-scoring hits, best first, ties on the key (a total order); selects
/// before it sorts, so a long list of scored keys costs linear time plus `k log k`.
pub fn top_k<K: Ord + Copy>(mut hits: Vec<(K, f32)>, k: usize) -> Vec<(K, f32)> {
    let head = top_first(&mut hits, k);
    hits.truncate(head);
    hits
}

/// Moves the `k` highest-scoring hits to the front of `hits`, best first, ties on the key,
/// the rest after them in no set order; returns how many lead (`k`, or all where fewer).
pub fn top_first<K: Ord + Copy>(hits: &mut [(K, f32)], k: usize) -> usize {
    let order = |a: &(K, f32), b: &(K, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let k = k.min(hits.len());
    if k == 0 {
        return 0;
    }
    if hits.len() > k {
        hits.select_nth_unstable_by(k - 1, order);
    }
    hits[..k].sort_by(order);
    k
}

/// The `k` best hits offered so far, in [`top_k`]'s order (score, then key): for a search
/// that scores far more hits than it keeps, so that it holds `k` of them rather than all.
pub struct TopK<K> {
    k: usize,
    /// Its top is the worst hit kept.
    heap: BinaryHeap<Worst<K>>,
}

/// A hit ordered so that the worse hit is the greater.
struct Worst<K>(f32, K);

impl<K: Ord> PartialEq for Worst<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Worst<K> {}

impl<K: Ord> Ord for Worst<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

impl<K: Ord> PartialOrd for Worst<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord + Copy> TopK<K> {
    pub fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)) }
    }

    /// The score a new hit must beat (or tie with a lower key) to be kept; below any score
    /// while fewer than `k` are kept.
    pub fn threshold(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.k => worst.0,
            _ => f32::NEG_INFINITY,
        }
    }

    pub fn offer(&mut self, key: K, score: f32) {
        let hit = Worst(score, key);
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if self.heap.peek().is_some_and(|worst| hit < *worst) {
            self.heap.pop();
            self.heap.push(hit);
        }
    }

    /// The hits kept, best first.
    pub fn into_ranked(self) -> Vec<(K, f32)> {
        self.heap.into_sorted_vec().into_iter().map(|Worst(score, key)| (key, score)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_k_are_the_head_of_the_full_sort() {
        let hits: Vec<(u64, f32)> = (0..200u64).map(|i| (i, ((i * 37) % 17) as f32)).collect();
        let mut sorted = hits.clone();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for k in [1, 5, 17, 199, 200, 500] {
            assert_eq!(top_k(hits.clone(), k), sorted[..k.min(200)].to_vec());
            let mut all = hits.clone();
            assert_eq!(top_first(&mut all, k), k.min(200));
            assert_eq!(all[..k.min(200)], sorted[..k.min(200)], "the head leads, in order");
            all.sort_by_key(|h| h.0);
            assert_eq!(all, hits, "and nothing is lost behind it");
        }
        assert!(top_k(hits.clone(), 0).is_empty());
        for k in [0, 1, 5, 17, 200, 500] {
            let mut kept = TopK::new(k);
            hits.iter().for_each(|(key, score)| kept.offer(*key, *score));
            assert_eq!(kept.into_ranked(), top_k(hits.clone(), k), "offered one by one, the same {k}");
        }
    }

    #[test]
    fn agreement_beats_a_single_first_place() {
        let fused = reciprocal_rank_fusion(&[vec![1, 2, 3], vec![2, 3, 1], vec![2]], 60.0);
        assert_eq!(fused[0].0, 2);
        assert_eq!(fused.len(), 3);
    }
}
