//! Provenance map-back: graph evidence (edges, nodes with scores) becomes ranked source
//! chunks. The graph navigates; the reader only ever sees source text.

use std::sync::OnceLock;

use super::RANKING_DEPTH;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::kb::{Kb, Table};
use crate::rank::TopK;

/// Chunks above which a node's share is kept as one entry for all its chunks (see
/// [`ChunkScores`]): more than a graph ranking holds.
const SPREAD_MIN: usize = RANKING_DEPTH;

/// The chunks the stages' evidence maps back to, with their scores. A node shares its
/// score among the chunks that mention it, and a hub (a region, a year, a common noun) is
/// mentioned by hundreds of thousands at a million passages: writing its share into each
/// of them took a fifth of a query. So a node of more than [`SPREAD_MIN`] chunks is kept as
/// its (sorted) chunk list and the share, and its chunks are scored only where a ranking
/// reads them. Scores are those of adding every share one by one, up to the rounding of
/// the order they are summed in.
#[derive(Default)]
pub struct ChunkScores<'kb> {
    single: Table<ChunkId, f32>,
    spread: Vec<(&'kb [ChunkId], f32)>,
    /// How many chunks have a score, once counted: each stage reports it.
    len: OnceLock<usize>,
    /// The head of the ranking, once ranked: kept until more is mapped back, since the
    /// global stage maps nothing back and ranks what the stages before it found again.
    ranking: OnceLock<Vec<(ChunkId, f32)>>,
    /// The chunks held one by one with the spread nodes' shares, once merged (see
    /// [`ChunkScores::singles_with_shares`]).
    merged: OnceLock<Vec<SharedScore>>,
}

/// A chunk held one by one: its score with the shares of the spread nodes that mention it,
/// and whether any does.
#[derive(Clone, Copy)]
struct SharedScore {
    chunk: ChunkId,
    score: f32,
    shared: bool,
}

impl<'kb> ChunkScores<'kb> {
    /// Each edge votes its score for the chunk it was read from.
    pub fn add_edges(&mut self, kb: &Kb, edges: &[(EdgeId, f32)]) {
        for (id, score) in edges {
            if let Some(edge) = kb.edge(*id) {
                self.add(edge.chunk, *score);
            }
        }
    }

    /// A node's score is shared by the chunks that mention it, damped by sqrt(#chunks) so
    /// that hub entities do not flood the ranking.
    pub fn add_nodes(&mut self, kb: &'kb Kb, nodes: &[(NodeId, f32)]) {
        for (id, score) in nodes {
            let Some(node) = kb.node(*id) else { continue };
            let share = score / (node.chunks.len().max(1) as f32).sqrt();
            self.add_shared(&node.chunks, share);
        }
    }

    fn add(&mut self, chunk: ChunkId, score: f32) {
        self.changed();
        *self.single.entry(chunk).or_default() += score;
    }

    /// Forgets what was counted and ranked before a change.
    fn changed(&mut self) {
        self.len.take();
        self.ranking.take();
        self.merged.take();
    }

    /// Adds `share` to each of `chunks` (sorted ascending, as a node's are).
    fn add_shared(&mut self, chunks: &'kb [ChunkId], share: f32) {
        if chunks.len() > SPREAD_MIN {
            self.changed();
            self.spread.push((chunks, share));
        } else {
            chunks.iter().for_each(|chunk| self.add(*chunk, share));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.single.is_empty() && self.spread.is_empty()
    }

    /// The score of `chunk`, if any evidence maps back to it.
    pub fn get(&self, chunk: ChunkId) -> Option<f32> {
        self.with_shares(chunk, self.single.get(&chunk).copied())
    }

    /// `single` (the score `chunk` holds one by one, if any) with the shares of the spread
    /// nodes that mention it.
    fn with_shares(&self, chunk: ChunkId, single: Option<f32>) -> Option<f32> {
        let mut found = single;
        for (chunks, share) in &self.spread {
            if chunks.binary_search(&chunk).is_ok() {
                *found.get_or_insert(0.0) += share;
            }
        }
        found
    }

    /// How many chunks have a score.
    pub fn len(&self) -> usize {
        *self.len.get_or_init(|| {
            // One hub (the usual case): its chunks, less those held one by one too.
            if let [(chunks, _)] = self.spread.as_slice() {
                let both = self.singles_with_shares().iter().filter(|single| single.shared).count();
                return self.single.len() + chunks.len() - both;
            }
            let mut shared_only = 0;
            self.each_spread_chunk(|chunk, _| shared_only += usize::from(!self.single.contains_key(&chunk)));
            self.single.len() + shared_only
        })
    }

    /// The first [`RANKING_DEPTH`] chunks, best first; ties break on chunk id.
    pub fn ranked(&self) -> &[(ChunkId, f32)] {
        self.ranking.get_or_init(|| {
            let mut best = TopK::new(RANKING_DEPTH);
            if self.spread.is_empty() {
                self.single.iter().for_each(|(chunk, score)| best.offer(*chunk, *score));
                return best.into_ranked();
            }
            self.singles_with_shares().iter().for_each(|single| best.offer(single.chunk, single.score));
            if let [(chunks, share)] = self.spread.as_slice() {
                // One hub: the chunks only it scores tie, so the first of them by id are the
                // best of them.
                let only_shared = chunks.iter().filter(|c| !self.single.contains_key(c));
                only_shared.take(RANKING_DEPTH).for_each(|chunk| best.offer(*chunk, *share));
                return best.into_ranked();
            }
            self.each_spread_chunk(|chunk, score| {
                if !self.single.contains_key(&chunk) {
                    best.offer(chunk, score);
                }
            });
            best.into_ranked()
        })
    }

    /// The chunks held one by one, ascending, each with the shares of the spread nodes that
    /// mention it added in (in the order [`ChunkScores::get`] adds them): one merge of the
    /// sorted chunks with each hub's list. Looking each chunk up in the hubs' long lists
    /// missed the cache at each step of each search, a tenth of a query at a million
    /// passages.
    fn singles_with_shares(&self) -> &[SharedScore] {
        self.merged.get_or_init(|| {
            let mut singles: Vec<SharedScore> = self
                .single
                .iter()
                .map(|(chunk, score)| SharedScore { chunk: *chunk, score: *score, shared: false })
                .collect();
            singles.sort_unstable_by_key(|single| single.chunk);
            let chunks: Vec<ChunkId> = singles.iter().map(|single| single.chunk).collect();
            for (spread, share) in &self.spread {
                crate::sorted::for_each_shared(&chunks, spread, |at| {
                    singles[at].score += share;
                    singles[at].shared = true;
                });
            }
            singles
        })
    }

    /// Calls `visit` once for each chunk of the spread nodes, in ascending order, with the
    /// sum of their shares in it: one merge of their sorted lists.
    fn each_spread_chunk(&self, mut visit: impl FnMut(ChunkId, f32)) {
        let mut at = vec![0usize; self.spread.len()];
        loop {
            let next = self.spread.iter().zip(&at).filter_map(|((chunks, _), i)| chunks.get(*i)).min().copied();
            let Some(chunk) = next else { return };
            let mut score = 0.0;
            for ((chunks, share), i) in self.spread.iter().zip(at.iter_mut()) {
                if chunks.get(*i) == Some(&chunk) {
                    score += share;
                    *i += 1;
                }
            }
            visit(chunk, score);
        }
    }
}

impl FromIterator<(ChunkId, f32)> for ChunkScores<'_> {
    fn from_iter<I: IntoIterator<Item = (ChunkId, f32)>>(scores: I) -> Self {
        ChunkScores { single: scores.into_iter().collect(), ..ChunkScores::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hub's chunks, kept as one entry, rank, count and score as if each had its share
    /// written in, beside chunks scored one by one and a second hub overlapping the first.
    #[test]
    fn a_hub_kept_whole_ranks_as_its_chunks_one_by_one() {
        let hub: Vec<ChunkId> = (0..3 * SPREAD_MIN as ChunkId).map(|c| c * 2).collect();
        let other_hub: Vec<ChunkId> = (0..2 * SPREAD_MIN as ChunkId).map(|c| c * 3 + 1).collect();
        let small: Vec<ChunkId> = vec![4, 7, 100_001];
        let mut lazy = ChunkScores::default();
        let mut written: Table<ChunkId, f32> = Table::default();
        for (chunks, share) in [(&small, 0.5f32), (&hub, 0.25), (&other_hub, 0.125)] {
            lazy.add_shared(chunks, share);
            chunks.iter().for_each(|c| *written.entry(*c).or_default() += share);
        }
        lazy.add(9, 0.75);
        *written.entry(9).or_default() += 0.75;
        assert_eq!(lazy.spread.len(), 2, "both hubs are kept whole");
        assert_eq!(lazy.len(), written.len());
        let reference = crate::rank::top_k(written.iter().map(|(c, s)| (*c, *s)).collect(), RANKING_DEPTH);
        assert_eq!(lazy.ranked(), reference);
        for chunk in [4, 7, 9, 1, 2, 3, 6, 100_001, 5] {
            assert_eq!(lazy.get(chunk), written.get(&chunk).copied(), "chunk {chunk}");
        }
        assert!(!lazy.is_empty() && ChunkScores::default().is_empty());
    }

    /// Far more chunks scored one by one than a ranking holds, two hubs lifting some of the
    /// low ones above the rest: merged with the hubs' lists, they rank as if every share had
    /// been written into each chunk.
    #[test]
    fn chunks_below_every_hubs_reach_rank_as_if_all_were_scored() {
        let hub: Vec<ChunkId> = (0..2 * SPREAD_MIN as ChunkId).map(|c| c * 3).collect();
        let other_hub: Vec<ChunkId> = (0..2 * SPREAD_MIN as ChunkId).map(|c| c * 7).collect();
        let mut lazy = ChunkScores::default();
        let mut written: Table<ChunkId, f32> = Table::default();
        // Binary fractions: sums come out the same in any order.
        for (chunks, share) in [(&hub, 1.0f32 / 64.0), (&other_hub, 1.0 / 128.0)] {
            lazy.add_shared(chunks, share);
            chunks.iter().for_each(|c| *written.entry(*c).or_default() += share);
        }
        for chunk in 0..5 * RANKING_DEPTH as ChunkId {
            let score = ((chunk * 37) % 101) as f32 / 128.0;
            lazy.add(chunk, score);
            *written.entry(chunk).or_default() += score;
        }
        let reference = crate::rank::top_k(written.iter().map(|(c, s)| (*c, *s)).collect(), RANKING_DEPTH);
        let own = |c: ChunkId| ((c * 37) % 101) as f32 / 128.0;
        let last = reference.last().map_or(0.0, |(_, s)| *s);
        assert!(reference.iter().any(|(c, _)| own(*c) < last), "a chunk only its hubs lift ranks");
        assert!(own(1) < last, "and most chunks held one by one rank below the last");
        assert!(lazy.ranked() == reference, "the ranking differs from scoring every chunk");
        assert_eq!(lazy.len(), written.len());
    }

    /// The same with one hub, which is counted and ranked without a merge.
    #[test]
    fn one_hub_kept_whole_ranks_as_its_chunks_one_by_one() {
        let hub: Vec<ChunkId> = (0..3 * SPREAD_MIN as ChunkId).map(|c| c * 2).collect();
        let mut lazy = ChunkScores::default();
        let mut written: Table<ChunkId, f32> = Table::default();
        lazy.add_shared(&hub, 0.25);
        hub.iter().for_each(|c| *written.entry(*c).or_default() += 0.25);
        for (chunk, score) in (0..SPREAD_MIN as ChunkId / 2).map(|c| (c * 5 + 1, 0.25)).chain([(6, 0.5), (7, 0.125)]) {
            lazy.add(chunk, score);
            *written.entry(chunk).or_default() += score;
        }
        assert_eq!(lazy.len(), written.len());
        let reference = crate::rank::top_k(written.iter().map(|(c, s)| (*c, *s)).collect(), RANKING_DEPTH);
        assert_eq!(lazy.ranked(), reference);
    }
}
