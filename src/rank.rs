//! Rank fusion shared by the hybrid text retriever, the baselines and the final evidence
//! ranking.

use std::collections::HashMap;

/// Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum over lists of 1 / (k + rank).
/// Ties break by key so results are deterministic.
pub fn reciprocal_rank_fusion(lists: &[Vec<u64>], k: f32) -> Vec<(u64, f32)> {
    let weighted: Vec<(&[u64], f32)> = lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
    weighted_rank_fusion(&weighted, k)
}

/// RRF where each list's votes are scaled by its weight.
pub fn weighted_rank_fusion(lists: &[(&[u64], f32)], k: f32) -> Vec<(u64, f32)> {
    let mut scores: HashMap<u64, f32> = HashMap::new();
    for (list, weight) in lists {
        for (rank, key) in list.iter().enumerate() {
            *scores.entry(*key).or_default() += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(u64, f32)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_beats_a_single_first_place() {
        let fused = reciprocal_rank_fusion(&[vec![1, 2, 3], vec![2, 3, 1], vec![2]], 60.0);
        assert_eq!(fused[0].0, 2);
        assert_eq!(fused.len(), 3);
    }
}
