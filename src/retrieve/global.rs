//! Stage 3, the global stage (the HippoRAG 2 recipe): Personalized PageRank over the graph
//! of entities and passages ([`PassageGraph`]), passages ranked by their own PPR mass.
//!
//! The reset vector holds two kinds of mass:
//! - phrase seeds: entities of the linked facts and the query's aligned mentions, each
//!   weighted by its best evidence (the fact or alignment score) times its specificity,
//!   1 / (number of passages mentioning it), so that a hub entity does not flood the walk;
//! - dense seeds: every candidate passage gets its min-max-normalised dense score times
//!   `retrieve.passage_seed_weight` (0.05 in HippoRAG 2), so the walk starts from what
//!   dense retrieval already knows and the graph reorders and adds to it.
//!
//! Without a phrase seed in the graph the stage has nothing to add: the caller falls back to
//! text retrieval.

use std::collections::BTreeMap;

use super::facts::FactSeed;
use super::seeds::EntitySeed;
use super::{RANKING_DEPTH, ppr};
use crate::config::RetrieveSettings;
use crate::kb::Kb;
use crate::kb::model::{ChunkId, NodeId};
use crate::kb::passage_graph::PassageGraph;

/// Phrase seeds with their reset weight, in node order: for each node the best of (the mean
/// score of the linked facts naming it, its alignment score as an entity seed), divided by
/// the number of passages mentioning it. Nodes without passages are skipped (forgotten).
pub fn phrase_weights(kb: &Kb, facts: &[FactSeed], entities: &[EntitySeed]) -> Vec<(NodeId, f64)> {
    weigh_phrases(facts, entities, |node| kb.node_chunk_count(node))
}

/// [`phrase_weights`] with `passages` counting the passages that mention a node.
fn weigh_phrases(
    facts: &[FactSeed],
    entities: &[EntitySeed],
    passages: impl Fn(NodeId) -> usize,
) -> Vec<(NodeId, f64)> {
    let mut fact_scores: BTreeMap<NodeId, (f64, usize)> = BTreeMap::new();
    for fact in facts {
        for node in [fact.subject, fact.object] {
            let entry = fact_scores.entry(node).or_default();
            entry.0 += fact.score as f64;
            entry.1 += 1;
        }
    }
    let mut best: BTreeMap<NodeId, f64> =
        fact_scores.into_iter().map(|(n, (sum, count))| (n, sum / count as f64)).collect();
    for seed in entities {
        let w = best.entry(seed.node).or_default();
        *w = w.max(seed.score as f64);
    }
    best.into_iter()
        .filter_map(|(node, score)| match passages(node) {
            0 => None,
            passages => Some((node, score / passages as f64)),
        })
        .collect()
}

/// The reset vector over `graph`'s rows as `(row, mass)`, rows ascending, summing to 1, or
/// `None` when no phrase seed is in the graph. `dense` lists candidate passages with their
/// dense scores. Sparse: its size follows the seeds, not the graph.
pub fn reset_vector(
    graph: &PassageGraph,
    phrases: &[(NodeId, f64)],
    dense: &[(ChunkId, f32)],
    passage_weight: f64,
) -> Option<Vec<(usize, f64)>> {
    let mut p: std::collections::BTreeMap<usize, f64> = std::collections::BTreeMap::new();
    let mut phrase_mass = 0.0;
    for (node, w) in phrases {
        if let Some(row) = graph.node_row(*node) {
            *p.entry(row).or_default() += w;
            phrase_mass += w;
        }
    }
    if phrase_mass <= 0.0 {
        return None;
    }
    let (lo, hi) = dense.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
    for (chunk, score) in dense {
        let normalised = if hi > lo { (score - lo) / (hi - lo) } else { 1.0 };
        if let Some(row) = graph.chunk_row(*chunk) {
            *p.entry(row).or_default() += passage_weight * normalised as f64;
        }
    }
    let total: f64 = p.values().sum();
    Some(p.into_iter().filter(|(_, x)| *x > 0.0).map(|(row, x)| (row, x / total)).collect())
}

/// Every passage the walk reached, with its PPR mass: a head, best first (ties on chunk
/// id), then the rest in no set order. A walk over a large KB reaches hundreds of thousands
/// of passages and only the head of their ranking is read whole; the rest is asked for a few
/// passages at a time (see `lead`).
#[derive(Debug, Default)]
pub struct Walk {
    reached: Vec<(ChunkId, f32)>,
    head: usize,
}

impl Walk {
    /// `reached` with its first `depth` passages by mass put first, in order.
    pub fn new(mut reached: Vec<(ChunkId, f32)>, depth: usize) -> Walk {
        let head = crate::rank::top_first(&mut reached, depth);
        Walk { reached, head }
    }

    /// The best passages, best first.
    pub fn head(&self) -> &[(ChunkId, f32)] {
        &self.reached[..self.head]
    }

    /// The other passages the walk reached, in no set order.
    pub fn below_head(&self) -> &[(ChunkId, f32)] {
        &self.reached[self.head..]
    }
}

/// The walk from the reset vector of `phrases` and `dense`; empty when no phrase seed is in
/// the graph.
pub fn rank_passages(
    kb: &Kb,
    settings: &RetrieveSettings,
    phrases: &[(NodeId, f64)],
    dense: &[(ChunkId, f32)],
) -> Walk {
    rank_on(&kb.passage_graph(), settings, phrases, dense)
}

fn rank_on(
    graph: &PassageGraph,
    settings: &RetrieveSettings,
    phrases: &[(NodeId, f64)],
    dense: &[(ChunkId, f32)],
) -> Walk {
    let Some(p) = reset_vector(graph, phrases, dense, settings.passage_seed_weight) else {
        return Walk::default();
    };
    let scores = ppr::scores(&graph.csr, &p, settings);
    let reached: Vec<(ChunkId, f32)> =
        scores.iter().filter_map(|(row, s)| graph.chunk_at(*row).map(|c| (c, *s as f32))).collect();
    Walk::new(reached, RANKING_DEPTH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::kb::passage_graph::{Links, Outline};

    fn fact(edge: u64, subject: NodeId, object: NodeId, score: f32) -> FactSeed {
        FactSeed { edge, subject, object, fact: String::new(), score }
    }

    /// Issue 34: in a folder of ordinary documents the walk from a name in one section of a
    /// long document reaches the passages beside it, and follows a hyperlink to another
    /// file, though no entity joins them.
    #[test]
    fn the_walk_follows_a_documents_sections_and_its_hyperlinks() {
        let filler = |topic: &str| format!("{topic} is described here in plain words. ").repeat(30);
        let handbook = format!(
            "# Harbour handbook\n\n## Gatekeeper\n\nAda Lind runs Gatekeeper. {}\n\n{}\n\n\
             ## Releases\n\n{}\n\nReleases go out on Tuesdays, see [the pipeline](shipyard.md).\n",
            filler("sign-in"),
            filler("session handling"),
            filler("release timing")
        );
        let (_dir, kb) = crate::ingest::testing::kb_with_files(&[
            ("handbook.md", handbook.as_str()),
            ("shipyard.md", "# Shipyard\n\nShipyard builds every service.\n"),
            ("weather.md", "# Weather\n\nRain falls in Orwick most days.\n"),
        ]);
        let graph = kb.passage_graph();
        assert!(graph.outline_rows() >= 3, "the handbook, its two sections: {}", graph.outline_rows());
        let title = |c: ChunkId| kb.chunk(c).map(|c| kb.chunk_title(c).to_string()).unwrap();
        let section = |c: ChunkId| kb.chunk(c).unwrap().section.clone();
        let seed = kb.node_by_alias("Ada Lind").expect("an entity");
        let ranked = rank_on(&graph, &Settings::defaults().retrieve, &[(seed, 1.0)], &[]).head().to_vec();
        let order: Vec<(String, String)> = ranked.iter().map(|(c, _)| (title(*c), section(*c))).collect();
        let at = |t: &str, s: &str| order.iter().position(|(x, y)| x == t && y.starts_with(s));
        let (beside, releases, linked) =
            (at("Harbour handbook", "Gatekeeper"), at("Harbour handbook", "Releases"), at("Shipyard", ""));
        assert!(beside.is_some() && releases.is_some() && linked.is_some(), "{order:?}");
        assert!(at("Weather", "").is_none(), "nothing leads to an unrelated file: {order:?}");
    }
    #[test]
    fn phrase_seeds_are_weighted_by_specificity() {
        // Node 1 is in 10 passages, node 2 in 2, node 3 in 1; node 4 was forgotten.
        let passages = |n: NodeId| [0, 10, 2, 1, 0][n as usize];
        let facts = [fact(7, 1, 2, 1.0), fact(8, 2, 3, 0.5), fact(9, 4, 3, 0.5)];
        let entity = EntitySeed { node: 1, name: "one".into(), mention: "one".into(), score: 0.9 };
        let weights = weigh_phrases(&facts, &[entity], passages);
        // Node 2: mean fact score 0.75 over 2 passages; node 3: 0.5 over 1; node 1: max(1.0,
        // 0.9) over 10.
        assert_eq!(weights, vec![(1, 0.1), (2, 0.375), (3, 0.5)]);
    }

    /// Solves r = a p + (1 - a) M r exactly (Gaussian elimination on the dense system),
    /// M column-stochastic by weighted degree, dangling columns pointing back to p.
    fn exact_ppr(n: usize, edges: &[(u32, u32, f32)], p: &[f64], a: f64) -> Vec<f64> {
        let mut adj = vec![vec![0.0; n]; n];
        for &(x, y, w) in edges {
            adj[x as usize][y as usize] += w as f64;
            adj[y as usize][x as usize] += w as f64;
        }
        // System (I - (1 - a) M) r = a p, augmented with its right-hand side.
        let mut m = vec![vec![0.0; n + 1]; n];
        for j in 0..n {
            let strength: f64 = adj[j].iter().sum();
            for i in 0..n {
                let mij = if strength > 0.0 { adj[j][i] / strength } else { p[i] };
                m[i][j] = f64::from(i == j) - (1.0 - a) * mij;
            }
        }
        for i in 0..n {
            m[i][n] = a * p[i];
        }
        for col in 0..n {
            let pivot = (col..n).max_by(|x, y| m[*x][col].abs().total_cmp(&m[*y][col].abs())).unwrap();
            m.swap(col, pivot);
            let pivot_row = m[col].clone();
            for (row, values) in m.iter_mut().enumerate() {
                if row != col {
                    let f = values[col] / pivot_row[col];
                    for (v, p) in values.iter_mut().zip(&pivot_row).skip(col) {
                        *v -= f * p;
                    }
                }
            }
        }
        (0..n).map(|i| m[i][n] / m[i][i]).collect()
    }

    #[test]
    fn passage_ppr_matches_the_exact_solution() {
        // Entities 1..=4, passages 10..=13. Triples 1-2, 2-3; synonym 3~4 (0.9); passage 10
        // mentions 1, 11 mentions 2 and 3, 12 mentions 4, 13 mentions nothing.
        let links = Links {
            triples: &[(1, 2), (2, 3)],
            mentions: &[(1, 10), (2, 11), (3, 11), (4, 12)],
            topics: &[],
            synonyms: &[(3, 4, 0.9)],
        };
        let graph = PassageGraph::assemble(vec![4, 2, 3, 1], vec![13, 11, 10, 12], links, &Outline::default());
        assert_eq!(
            (graph.nodes.clone(), graph.chunks.clone(), graph.synonym_edges),
            (vec![1, 2, 3, 4], vec![10, 11, 12, 13], 1)
        );
        let phrases = [(1, 0.5), (4, 0.25)];
        let dense = [(11, 0.8), (13, 0.6), (10, 0.2)];
        let mut settings = Settings::defaults().retrieve;
        settings.ppr_tolerance = 1e-14;
        settings.ppr_max_iterations = 10_000;
        let sparse = reset_vector(&graph, &phrases, &dense, 0.05).unwrap();
        let mut p = vec![0.0; 8];
        for (row, mass) in &sparse {
            p[*row] = *mass;
        }
        assert_eq!(sparse.len(), 4, "the seeds' rows only: the dense candidate scored lowest adds nothing");
        // Dense scores min-max to 1, 2/3, 0 (in f32), times 0.05, beside the phrase weights; sum to 1.
        let raw = [0.5, 0.0, 0.0, 0.25, 0.0, 0.05, 0.0, 0.05 * 2.0 / 3.0];
        let total: f64 = raw.iter().sum();
        for (a, b) in p.iter().zip(raw.iter().map(|x| x / total)) {
            assert!((a - b).abs() < 1e-6, "{p:?}");
        }
        let rows = |x: NodeId| graph.node_row(x).unwrap() as u32;
        let chunk = |c: ChunkId| graph.chunk_row(c).unwrap() as u32;
        let edges = [
            (rows(1), rows(2), 1.0),
            (rows(2), rows(3), 1.0),
            (rows(1), chunk(10), 1.0),
            (rows(2), chunk(11), 1.0),
            (rows(3), chunk(11), 1.0),
            (rows(4), chunk(12), 1.0),
            (rows(3), rows(4), 0.9),
        ];
        let exact = exact_ppr(8, &edges, &p, settings.restart_prob);
        let ranked = rank_on(&graph, &settings, &phrases, &dense).head().to_vec();
        assert_eq!(ranked.len(), 4, "every passage is reached or seeded");
        for (c, score) in &ranked {
            let want = exact[graph.chunk_row(*c).unwrap()];
            assert!((*score as f64 - want).abs() < 1e-6, "passage {c}: {score} vs {want}");
        }
        assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(ranked[0].0, 10, "the passage of the strongest phrase seed leads");
        assert!(
            rank_on(&graph, &settings, &[(99, 1.0)], &dense).head().is_empty(),
            "no phrase seed in the graph: nothing to add"
        );
    }

    #[test]
    fn a_walk_at_an_entity_prefers_the_passage_about_it() {
        // The question names entity 1; passage 10 (about 1) names 2. Passage 11 is about 2
        // and names 3 and 4; passage 12 names 2, 5 and 6 in passing. Without topics 11 and 12
        // are mirror images; with them, the walk at 2 takes the edge to 2's own page.
        let mentions = [(1, 10), (2, 10), (2, 11), (3, 11), (4, 11), (2, 12), (5, 12), (6, 12)];
        let graph = |topics: &[(NodeId, ChunkId)]| {
            let links = Links { mentions: &mentions, topics, ..Links::default() };
            PassageGraph::assemble(vec![1, 2, 3, 4, 5, 6], vec![10, 11, 12], links, &Outline::default())
        };
        let settings = Settings::defaults().retrieve;
        let score = |ranked: &[(ChunkId, f32)], c: ChunkId| ranked.iter().find(|(x, _)| *x == c).unwrap().1;
        let plain = rank_on(&graph(&[]), &settings, &[(1, 1.0)], &[]).head().to_vec();
        assert!((score(&plain, 11) - score(&plain, 12)).abs() < 1e-6, "{plain:?}");
        let topical = rank_on(&graph(&[(1, 10), (2, 11)]), &settings, &[(1, 1.0)], &[]).head().to_vec();
        let order: Vec<ChunkId> = topical.iter().map(|(c, _)| *c).collect();
        assert_eq!(order, vec![10, 11, 12], "the bridge entity's own page comes second");
        assert!(score(&topical, 11) > 1.5 * score(&topical, 12), "{topical:?}");
    }
}
