//! The sufficiency check after each stage: stop escalating when the evidence the reader
//! would receive already covers what the query names and a later stage could change little
//! of it. A judge gives a confidence; the policy's `retrieve.sufficiency_threshold` decides.

use std::collections::HashSet;

use serde::Serialize;

use super::seeds::Seeds;
use super::{PathHop, Stage, fusion};
use crate::kb::Kb;
use crate::kb::model::{ChunkId, EdgeId};
use crate::text;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Judgement {
    pub sufficient: bool,
    /// How sure the judge is that escalating further would not improve the evidence, in
    /// [0, 1]; a policy's `retrieve.sufficiency_threshold` turns it into `sufficient`.
    pub confidence: f32,
    pub reason: String,
}

impl Judgement {
    /// `confidence` against `threshold`.
    pub fn from_confidence(confidence: f32, threshold: f32, reason: String) -> Judgement {
        Judgement { sufficient: confidence >= threshold, confidence, reason }
    }

    /// A yes or no from a judge that gives no degree (a model's verdict).
    pub fn verdict(sufficient: bool, reason: String) -> Judgement {
        Judgement { sufficient, confidence: f32::from(u8::from(sufficient)), reason }
    }

    /// A stage nobody judged counts as insufficient.
    pub fn unjudged() -> Judgement {
        Judgement::verdict(false, "not judged".into())
    }
}

/// What the evidence looks like after a stage, as a judge sees it.
#[derive(Debug, Clone, Copy)]
pub struct StageEvidence<'a> {
    /// The stage just run.
    pub stage: Stage,
    /// The query being retrieved for.
    pub query: &'a str,
    pub seeds: &'a Seeds,
    /// Graph edges the stages so far walked.
    pub edges: &'a [EdgeId],
    /// What the reader would receive if escalation stopped now: the final ranking, best
    /// first, at most `top_k`.
    pub chunks: &'a [ChunkId],
    /// Bridge paths found so far.
    pub paths: &'a [Vec<PathHop>],
    /// The stage an insufficient judgement escalates to; `None` after the last, where a
    /// judgement no longer changes what is retrieved.
    pub next: Option<Stage>,
}

/// A synchronous judge of a stage's evidence (the embedded default is [`EvidenceCheck`]; the
/// LLM judge is async and lives with the controller's roles).
pub trait SufficiencyCheck: Send + Sync {
    fn judge(&self, kb: &Kb, evidence: &StageEvidence<'_>) -> Judgement;
}

/// How many of the reader's first passages the signals read: the reader's own window.
pub const JUDGED_DEPTH: usize = 5;

/// What the embedded check measures on the reader's evidence after a stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Signals {
    /// Share of the query's entity seeds mentioned in the judged passages.
    pub seed_coverage: f32,
    /// Share of the query's key terms the judged passages contain.
    pub term_coverage: f32,
    /// The graph's share in the fusion that makes the reader's ranking
    /// ([`fusion::graph_share`]).
    pub graph_share: f32,
}

impl Signals {
    pub fn measure(kb: &Kb, evidence: &StageEvidence<'_>) -> Signals {
        let judged: Vec<ChunkId> = evidence.chunks.iter().copied().take(JUDGED_DEPTH).collect();
        let seeds = &evidence.seeds.entities;
        let mentioned = seeds
            .iter()
            .filter(|seed| kb.node(seed.node).is_some_and(|n| n.chunks.iter().any(|c| judged.contains(c))))
            .count();
        let terms: HashSet<String> = text::content_terms(evidence.query).into_iter().collect();
        let covered: HashSet<String> = judged
            .iter()
            .filter_map(|c| kb.chunk(*c).map(|ch| format!("{}\n{}", kb.chunk_title(ch), ch.text)))
            .flat_map(|t| text::content_terms(&t))
            .filter(|t| terms.contains(t))
            .collect();
        Signals {
            seed_coverage: share(mentioned, seeds.len()),
            term_coverage: share(covered.len(), terms.len()),
            graph_share: fusion::graph_share(kb, evidence.stage),
        }
    }
}

/// `part / whole`, 1 when there is nothing to cover.
fn share(part: usize, whole: usize) -> f32 {
    if whole == 0 { 1.0 } else { part as f32 / whole as f32 }
}

/// How much of the graph's share in the fusion a later stage is taken to move. The global
/// stage replaces the graph's ranking (local and bridge map back a neighbourhood; the walk
/// ranks every passage it reaches), and the text list's best two lead either way, so a walk
/// moves about half of what the graph's share would allow. Calibrated on the dev questions
/// of both datasets with both embedders (`a2rag eval --policies`, `sweep` in its report).
pub const GRAPH_SWAY: f32 = 0.5;

/// Embedded default: is what the reader would receive about what the query names, and could
/// a later stage still change it? Its confidence is
/// `seed_coverage * term_coverage * (1 - GRAPH_SWAY * graph_share)`: evidence that misses a
/// seed or a key term of the query needs the later hops, and where the graph's ranking holds
/// most of the fusion (a relation-grade graph) the global stage reorders most of the
/// reader's evidence, so the check trusts earlier stages less. Its reasons start with
/// `evidence:`.
pub struct EvidenceCheck {
    pub threshold: f32,
}

impl EvidenceCheck {
    pub fn confidence(signals: &Signals) -> f32 {
        signals.seed_coverage * signals.term_coverage * (1.0 - GRAPH_SWAY * signals.graph_share)
    }
}

impl SufficiencyCheck for EvidenceCheck {
    fn judge(&self, kb: &Kb, evidence: &StageEvidence<'_>) -> Judgement {
        if evidence.chunks.is_empty() {
            return Judgement::verdict(false, "evidence: nothing retrieved".into());
        }
        let signals = Signals::measure(kb, evidence);
        let confidence = EvidenceCheck::confidence(&signals);
        let reason = format!(
            "evidence: confidence {confidence:.2} (need {:.2}): seeds {:.2}, key terms {:.2}, graph share {:.2}",
            self.threshold, signals.seed_coverage, signals.term_coverage, signals.graph_share
        );
        Judgement::from_confidence(confidence, self.threshold, reason)
    }
}
