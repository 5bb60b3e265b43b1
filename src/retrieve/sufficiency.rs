//! The sufficiency check after each stage: stop escalating when the evidence already
//! answers the query's needs.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::seeds::Seeds;
use super::{PathHop, Stage};
use crate::kb::Kb;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::text;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Judgement {
    pub sufficient: bool,
    pub reason: String,
}

/// What the evidence looks like after a stage (everything found so far), as a judge sees it.
#[derive(Debug, Clone, Copy)]
pub struct StageEvidence<'a> {
    /// The stage just run.
    pub stage: Stage,
    /// The query being retrieved for.
    pub query: &'a str,
    pub seeds: &'a Seeds,
    pub edges: &'a [EdgeId],
    /// The graph's best chunks so far, best first, at most `top_k`.
    pub chunks: &'a [ChunkId],
    /// Bridge paths found so far.
    pub paths: &'a [Vec<PathHop>],
}

/// A synchronous judge of a stage's evidence (the embedded default is [`CoverageCheck`]; the
/// LLM judge is async and lives with the controller's roles).
pub trait SufficiencyCheck: Send + Sync {
    fn judge(&self, kb: &Kb, evidence: &StageEvidence<'_>) -> Judgement;
}

/// Embedded default: every seed is covered by the evidence, all seeds are connected by
/// evidence edges, and the evidence text covers enough of the query's key terms. Its reasons
/// start with `coverage:`.
pub struct CoverageCheck {
    pub min_coverage: f32,
}

impl SufficiencyCheck for CoverageCheck {
    fn judge(&self, kb: &Kb, evidence: &StageEvidence<'_>) -> Judgement {
        let seeds = evidence.seeds;
        if evidence.chunks.is_empty() {
            return verdict(false, "no evidence");
        }
        let mut touched: HashSet<NodeId> = HashSet::new();
        let mut links = UnionFind::default();
        for edge in evidence.edges.iter().filter_map(|e| kb.edge(*e)) {
            touched.insert(edge.subject);
            touched.insert(edge.object);
            links.union(edge.subject, edge.object);
        }
        let chunk_set: HashSet<ChunkId> = evidence.chunks.iter().copied().collect();
        for seed in &seeds.entities {
            let in_chunks = kb.node(seed.node).is_some_and(|n| n.chunks.iter().any(|c| chunk_set.contains(c)));
            if !touched.contains(&seed.node) && !in_chunks {
                return verdict(false, &format!("seed `{}` not covered", seed.name));
            }
        }
        if let Some((first, rest)) = seeds.entities.split_first() {
            let root = links.find(first.node);
            if let Some(loose) = rest.iter().find(|s| links.find(s.node) != root) {
                return verdict(false, &format!("seeds `{}` and `{}` not connected", first.name, loose.name));
            }
        }
        let terms: HashSet<String> = text::content_terms(evidence.query).into_iter().collect();
        if terms.is_empty() {
            return verdict(true, "query has no key terms");
        }
        let covered: HashSet<String> = evidence
            .chunks
            .iter()
            .filter_map(|c| kb.chunk(*c).map(|ch| format!("{}\n{}", kb.chunk_title(ch), ch.text)))
            .flat_map(|t| text::content_terms(&t))
            .filter(|t| terms.contains(t))
            .collect();
        let coverage = covered.len() as f32 / terms.len() as f32;
        let ok = coverage >= self.min_coverage;
        verdict(ok, &format!("key-term coverage {coverage:.2} (need {:.2})", self.min_coverage))
    }
}

fn verdict(sufficient: bool, reason: &str) -> Judgement {
    Judgement { sufficient, reason: format!("coverage: {reason}") }
}

#[derive(Default)]
struct UnionFind {
    parent: HashMap<NodeId, NodeId>,
}

impl UnionFind {
    fn find(&mut self, x: NodeId) -> NodeId {
        let p = *self.parent.get(&x).unwrap_or(&x);
        if p == x {
            return x;
        }
        let root = self.find(p);
        self.parent.insert(x, root);
        root
    }

    fn union(&mut self, a: NodeId, b: NodeId) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.parent.insert(ra, rb);
        }
    }
}
