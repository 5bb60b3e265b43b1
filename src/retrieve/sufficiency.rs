//! The sufficiency check after each stage: stop escalating when the evidence the reader
//! would receive already covers what the query names and a later stage could change little
//! of it. A judge gives a confidence; the policy's `retrieve.sufficiency_threshold` decides.

use std::collections::HashSet;

use serde::Serialize;

use super::seeds::Seeds;
use super::{PathHop, Stage};
use crate::kb::Kb;
use crate::kb::model::{ChunkId, EdgeId};
use crate::kb::pages::Pages;
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
    /// The graph's share in the fusion ([`super::fusion::GraphShare::overall`]) that its
    /// ranking after this stage earns, whether the strategy fuses it or not.
    pub graph_share: f32,
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
    /// Share of the query's key terms the judged passages that chain from the query contain
    /// ([`chained`]): a term only a passage off the chain holds (one that merely mentions a
    /// seed) is a hop still missing.
    pub term_coverage: f32,
    /// The graph's share in the fusion that makes the reader's ranking
    /// ([`super::fusion::GraphShare::overall`]).
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
        let covered: HashSet<String> = chained(kb, &judged, evidence.seeds)
            .iter()
            .filter_map(|c| kb.chunk(*c).map(|ch| format!("{}\n{}", kb.chunk_title(ch), ch.text)))
            .flat_map(|t| text::content_terms(&t))
            .filter(|t| terms.contains(t))
            .collect();
        Signals {
            seed_coverage: share(mentioned, seeds.len()),
            term_coverage: share(covered.len(), terms.len()),
            graph_share: evidence.graph_share,
        }
    }
}

/// The judged passages a reader can chain from the query: the lead, the passages about an
/// entity the query names (a page whose topic is a seed), and the passages either of those
/// names ([`Pages::named_in`], a hyperlink). A passage that only mentions a seed (a page that
/// names the query's organisation in passing) is off the chain: it shares the query's words
/// without being the hop the query asks for, the page its first hop points to.
fn chained(kb: &Kb, judged: &[ChunkId], seeds: &Seeds) -> Vec<ChunkId> {
    let pages = kb.pages();
    let seed_topics: HashSet<String> = seeds.entities.iter().filter_map(|seed| Pages::topic_key(&seed.name)).collect();
    let about_seed = |chunk: &ChunkId| {
        kb.chunk(*chunk)
            .and_then(|ch| Pages::topic_key(kb.chunk_title(ch)))
            .is_some_and(|topic| seed_topics.contains(&topic))
    };
    let anchors: Vec<ChunkId> =
        judged.iter().enumerate().filter(|(rank, c)| *rank == 0 || about_seed(c)).map(|(_, c)| *c).collect();
    let named: HashSet<ChunkId> =
        anchors.iter().filter_map(|c| kb.chunk(*c)).flat_map(|ch| pages.named_in(&ch.text).into_keys()).collect();
    judged.iter().copied().filter(|c| anchors.contains(c) || named.contains(c)).collect()
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
/// seed, or holds a key term of the query only off the chain from it (the second hop of a
/// question that does not name it), needs the later hops, and where the graph's ranking holds
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
            "evidence: confidence {confidence:.2} (need {:.2}): seeds {:.2}, key terms on the chain {:.2}, graph share {:.2}",
            self.threshold, signals.seed_coverage, signals.term_coverage, signals.graph_share
        );
        Judgement::from_confidence(confidence, self.threshold, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::testing::{chunk_of, kb_with_docs};
    use crate::retrieve::seeds::EntitySeed;

    fn seeds_for(kb: &Kb, names: &[&str]) -> Seeds {
        let entities = names
            .iter()
            .map(|name| EntitySeed {
                node: kb.node_by_alias(name).expect("an entity of the corpus"),
                name: name.to_string(),
                mention: name.to_string(),
                score: 1.0,
            })
            .collect();
        Seeds { entities, relations: Vec::new(), relation_phrase: String::new(), facts: Vec::new() }
    }

    fn term_coverage(kb: &Kb, query: &str, seeds: &Seeds, chunks: &[ChunkId]) -> f32 {
        let evidence = StageEvidence {
            stage: Stage::Local,
            query,
            seeds,
            edges: &[],
            chunks,
            graph_share: 0.0,
            paths: &[],
            next: Some(Stage::Global),
        };
        Signals::measure(kb, &evidence).term_coverage
    }

    #[test]
    fn a_term_only_a_passage_off_the_chain_holds_counts_as_missing() {
        let (_dir, kb) = kb_with_docs(&[
            ("Kava Lomesu", "Kava Lomesu is a guild of weavers. It was founded by Tira Bemo in 1901."),
            ("Tira Bemo", "Tira Bemo was a weaver who was born in Dornholm."),
            ("Sela Rin", "Sela Rin studied at Kava Lomesu. She was born in Vaskby."),
        ]);
        let [guild, founder, student] = ["Kava Lomesu", "Tira Bemo", "Sela Rin"].map(|t| chunk_of(&kb, t));
        let seeds = seeds_for(&kb, &["Kava Lomesu"]);
        let query = "Where was the founder of Kava Lomesu born?";
        // "born" is in the student's page, which names the guild but which the guild's page
        // does not name: the hop to the founder is still missing.
        let off_chain = term_coverage(&kb, query, &seeds, &[guild, student]);
        // The founder's page is the one the lead names.
        let on_chain = term_coverage(&kb, query, &seeds, &[guild, founder]);
        assert!(on_chain > off_chain, "on the chain {on_chain}, off it {off_chain}");
        assert_eq!(off_chain, term_coverage(&kb, query, &seeds, &[guild]));
    }

    #[test]
    fn a_passage_about_an_entity_the_query_names_is_on_the_chain() {
        let (_dir, kb) = kb_with_docs(&[
            ("Kava Lomesu", "Kava Lomesu is a guild of weavers in the north."),
            ("Orrin Vale", "Orrin Vale is a guild of potters in the south."),
        ]);
        let [weavers, potters] = ["Kava Lomesu", "Orrin Vale"].map(|t| chunk_of(&kb, t));
        let seeds = seeds_for(&kb, &["Kava Lomesu", "Orrin Vale"]);
        // Neither page names the other, but the query names both.
        let query = "Are Kava Lomesu and Orrin Vale both guilds of potters?";
        let both = term_coverage(&kb, query, &seeds, &[weavers, potters]);
        assert!(both > term_coverage(&kb, query, &seeds, &[weavers]), "{both}");
        assert!(both > 0.0);
    }
}
