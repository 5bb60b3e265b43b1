//! Rank fusion shared by the hybrid text retriever, the baselines and the final evidence
//! ranking.

/// Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over lists of 1 / (k + rank).
/// Ties break by key so results are deterministic.
pub fn reciprocal_rank_fusion(lists: &[Vec<u64>], k: f32) -> Vec<(u64, f32)> {
    let weighted: Vec<(&[u64], f32)> = lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
    weighted_rank_fusion(&weighted, k)
}

/// RRF where each list's votes are scaled by its weight.
pub fn weighted_rank_fusion(lists: &[(&[u64], f32)], k: f32) -> Vec<(u64, f32)> {
    let mut scores: foldhash::HashMap<u64, f32> = foldhash::HashMap::default();
    for (list, weight) in lists {
        for (rank, key) in list.iter().enumerate() {
            *scores.entry(*key).or_default() += weight / (k + rank as f32 + 1.0);
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
        assert!(top_k(hits, 0).is_empty());
    }

    #[test]
    fn agreement_beats_a_single_first_place() {
        let fused = reciprocal_rank_fusion(&[vec![1, 2, 3], vec![2, 3, 1], vec![2]], 60.0);
        assert_eq!(fused[0].0, 2);
        assert_eq!(fused.len(), 3);
    }
}
