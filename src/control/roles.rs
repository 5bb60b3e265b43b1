//! The controller's roles: reader, the three validators, rewriter, and the sufficiency judge
//! of retrieval stages. Each has an embedded deterministic implementation (the judge's is the
//! retriever's coverage check) and an LLM one; both go through [`CallGate`], which admits a
//! call against the budget before it is made and records what it cost.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::answer_type::{self, AnswerType};
use super::budget::{Exceeded, Ledger, token_bound};
use crate::ingest::extract::entity_mentions;
use crate::kb::model::ChunkId;
use crate::llm::prompts::{PromptId, Prompts};
use crate::llm::{CompletionRequest, LanguageModel, parse};
use crate::net::RemoteError;
use crate::kb::Kb;
use crate::retrieve::sufficiency::{Judgement, StageEvidence, SufficiencyCheck};
use crate::retrieve::{PathHop, Retrieval};
use crate::text;

/// Chunks the reader and validators look at.
pub const READ_DEPTH: usize = 5;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RoleError {
    #[error("{0}")]
    Budget(Exceeded),
    #[error("{0}")]
    Llm(#[from] RemoteError),
}

/// The one door to the model: budget first, then the call, then the ledger.
pub struct CallGate<'a> {
    pub ledger: &'a mut Ledger,
    pub max_completion_tokens: u32,
    pub temperature: f64,
}

impl CallGate<'_> {
    pub async fn complete(&mut self, step: &str, model: &dyn LanguageModel, prompt: String) -> Result<String, RoleError> {
        self.complete_reserving(step, model, prompt, 0).await
    }

    /// Like [`CallGate::complete`], admitted only if the budget still allows `reserved_calls`
    /// more calls afterwards (see [`Ledger::admit_reserving`]).
    pub async fn complete_reserving(&mut self, step: &str, model: &dyn LanguageModel, prompt: String, reserved_calls: u32) -> Result<String, RoleError> {
        self.ledger.admit_reserving(token_bound(&prompt, self.max_completion_tokens), reserved_calls).map_err(RoleError::Budget)?;
        let request = CompletionRequest {
            system: None,
            prompt,
            max_tokens: self.max_completion_tokens,
            temperature: self.temperature,
        };
        let started = Instant::now();
        let remaining = self.ledger.remaining_time();
        let outcome = tokio::time::timeout(remaining, model.complete(&request)).await;
        match outcome {
            Ok(Ok(completion)) => {
                self.ledger.record(step, Some(completion.usage), started);
                Ok(completion.text)
            }
            Ok(Err(e)) => {
                // A failed call still counts as a call: the provider may have billed it.
                self.ledger.record(step, Some(crate::llm::Usage::estimate(&request, "")), started);
                Err(RoleError::Llm(e))
            }
            Err(_) => {
                self.ledger.record(step, Some(crate::llm::Usage::estimate(&request, "")), started);
                Err(RoleError::Budget(Exceeded::Deadline))
            }
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReaderAnswer {
    pub answer: String,
    /// Chunks the answer was read from.
    pub used: Vec<ChunkId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Relevance,
    Grounding,
    Adequacy,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub check: Check,
    pub pass: bool,
    pub reason: String,
}

#[async_trait]
pub trait Reader: Send + Sync {
    async fn read(&self, question: &str, evidence: &Retrieval, gate: &mut CallGate<'_>) -> Result<ReaderAnswer, RoleError>;
}

#[async_trait]
pub trait Validator: Send + Sync {
    fn check(&self) -> Check;
    async fn validate(&self, question: &str, answer: &ReaderAnswer, evidence: &Retrieval, gate: &mut CallGate<'_>) -> Result<Verdict, RoleError>;
}

#[async_trait]
pub trait Rewriter: Send + Sync {
    /// A new query for `failure`; may repeat history, which the controller then refuses.
    async fn rewrite(&self, question: &str, failure: Check, answer: &ReaderAnswer, history: &[String], gate: &mut CallGate<'_>) -> Result<String, RoleError>;
}

fn evidence_texts(evidence: &Retrieval) -> impl Iterator<Item = (ChunkId, String)> + '_ {
    evidence.chunks.iter().take(READ_DEPTH).map(|c| (c.chunk, format!("{}\n{}", c.title, c.text)))
}

/// "[1] Title: text" lines plus graph paths, as the LLM prompts show evidence.
pub fn format_evidence(evidence: &Retrieval) -> String {
    write_evidence(evidence.chunks.iter().map(|c| (c.title.as_str(), c.text.as_str())), &evidence.paths)
}

/// [`format_evidence`] for the evidence of a retrieval stage (chunk ids and paths so far).
pub fn format_stage_evidence(kb: &Kb, evidence: &StageEvidence<'_>) -> String {
    let chunks = evidence.chunks.iter().filter_map(|id| kb.chunk(*id)).map(|c| (kb.chunk_title(c), c.text.as_str()));
    write_evidence(chunks, evidence.paths)
}

/// The first [`READ_DEPTH`] of `chunks` as (title, text), then the first paths.
fn write_evidence<'a>(chunks: impl Iterator<Item = (&'a str, &'a str)>, paths: &[Vec<PathHop>]) -> String {
    let mut out = String::new();
    for (i, (title, text)) in chunks.take(READ_DEPTH).enumerate() {
        out.push_str(&format!("[{}] {title}: {text}\n", i + 1));
    }
    for path in paths.iter().take(5) {
        let hops: Vec<String> = path.iter().map(|h| format!("({} -{}-> {})", h.subject, h.relation, h.object)).collect();
        out.push_str(&format!("Path: {}\n", hops.join(" ")));
    }
    out
}

// ---------------------------------------------------------------- embedded roles

/// Answer-type-aware extractive reader: the sentence that best overlaps the question, and in
/// it the first span of the expected type that the question does not already contain.
pub struct ExtractiveReader;

#[async_trait]
impl Reader for ExtractiveReader {
    async fn read(&self, question: &str, evidence: &Retrieval, _gate: &mut CallGate<'_>) -> Result<ReaderAnswer, RoleError> {
        Ok(extract_answer(question, evidence))
    }
}

fn extract_answer(question: &str, evidence: &Retrieval) -> ReaderAnswer {
    let kind = answer_type::classify(question);
    let q_terms: HashSet<String> = text::content_terms(question).into_iter().collect();
    let q_norm = text::normalize_answer(question);
    let mut sentences: Vec<(f32, ChunkId, String)> = Vec::new();
    for (rank, (chunk, _)) in evidence_texts(evidence).enumerate() {
        let Some(c) = evidence.chunks.iter().find(|c| c.chunk == chunk) else { continue };
        let title_terms: HashSet<String> = text::content_terms(&c.title).into_iter().collect();
        for span in text::sentence_spans(&c.text) {
            let sentence = &c.text[span];
            let terms: HashSet<String> = text::content_terms(sentence).into_iter().chain(title_terms.iter().cloned()).collect();
            let overlap = q_terms.intersection(&terms).count() as f32 / q_terms.len().max(1) as f32;
            sentences.push((overlap + 0.2 / (1.0 + rank as f32), chunk, sentence.to_string()));
        }
    }
    sentences.sort_by(|a, b| b.0.total_cmp(&a.0));
    if let AnswerType::Choice(options) = &kind {
        // The option mentioned in the best-matching sentence wins.
        for (_, chunk, sentence) in &sentences {
            if let Some(o) = options.iter().find(|o| sentence.contains(o.as_str())) {
                return ReaderAnswer { answer: o.clone(), used: vec![*chunk] };
            }
        }
    }
    for (score, chunk, sentence) in sentences.iter().take(3) {
        let candidate = match &kind {
            AnswerType::YesNo => Some(if *score >= 0.6 { "yes" } else { "no" }.to_string()),
            AnswerType::Free => Some(sentence.trim().to_string()),
            _ => entity_mentions(sentence)
                .into_iter()
                .chain(sentence.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string()))
                .filter(|m| !m.is_empty() && !q_norm.contains(&text::normalize_answer(m)))
                .find(|m| answer_type::fits(&kind, m)),
        };
        if let Some(answer) = candidate {
            return ReaderAnswer { answer, used: vec![*chunk] };
        }
    }
    ReaderAnswer::default()
}

/// Embedded validators: lexical evidence checks, no model.
pub struct HeuristicValidator {
    pub check: Check,
    /// Share of the question's key terms the evidence must contain (relevance).
    pub min_relevance: f32,
}

#[async_trait]
impl Validator for HeuristicValidator {
    fn check(&self) -> Check {
        self.check
    }

    async fn validate(&self, question: &str, answer: &ReaderAnswer, evidence: &Retrieval, _gate: &mut CallGate<'_>) -> Result<Verdict, RoleError> {
        let (pass, reason) = match self.check {
            Check::Relevance => {
                let q_terms: HashSet<String> = text::content_terms(question).into_iter().collect();
                let ev_terms: HashSet<String> = evidence_texts(evidence).flat_map(|(_, t)| text::content_terms(&t)).collect();
                let share = q_terms.intersection(&ev_terms).count() as f32 / q_terms.len().max(1) as f32;
                (share >= self.min_relevance, format!("evidence covers {share:.2} of the question's key terms (need {:.2})", self.min_relevance))
            }
            Check::Grounding => {
                let cited: Vec<String> = evidence_texts(evidence)
                    .filter(|(id, _)| answer.used.is_empty() || answer.used.contains(id))
                    .map(|(_, t)| text::normalize_answer(&t))
                    .collect();
                let claim = text::normalize_answer(&answer.answer);
                let grounded = !claim.is_empty()
                    && (matches!(claim.as_str(), "yes" | "no") || cited.iter().any(|t| t.contains(&claim)));
                (grounded, if grounded { "answer appears in the cited evidence".into() } else { "answer not found in the cited evidence".into() })
            }
            Check::Adequacy => {
                let kind = answer_type::classify(question);
                let fits = answer_type::fits(&kind, &answer.answer);
                let echoes = !answer.answer.is_empty() && text::normalize_answer(question).contains(&text::normalize_answer(&answer.answer)) && !matches!(kind, AnswerType::Choice(_));
                (fits && !echoes, format!("expected {kind:?}; answer {}", if fits && !echoes { "fits" } else if echoes { "only repeats the question" } else { "does not fit" }))
            }
        };
        Ok(Verdict { check: self.check, pass, reason })
    }
}

/// Template rewriter: one template per failure type.
pub struct TemplateRewriter;

#[async_trait]
impl Rewriter for TemplateRewriter {
    async fn rewrite(&self, question: &str, failure: Check, answer: &ReaderAnswer, history: &[String], _gate: &mut CallGate<'_>) -> Result<String, RoleError> {
        let mentions = entity_mentions(question);
        let terms = text::content_terms(question);
        let relation: Vec<&String> = terms.iter().filter(|t| !mentions.iter().any(|m| text::normalize_answer(m).contains(t.as_str()))).collect();
        let relation = relation.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
        let candidates: Vec<String> = match failure {
            // Sharpen: the named entities verbatim, then the relation words.
            Check::Relevance => vec![format!("{} {relation}", mentions.join(" ")), terms.join(" ")],
            // Stricter grounding: look for a passage stating the candidate answer.
            Check::Grounding => vec![format!("{} {} {relation}", answer.answer, mentions.join(" ")), format!("{question} {}", answer.answer)],
            // Decompose: the innermost "of the ..." phrase is the first hop to resolve.
            Check::Adequacy => {
                let lower = question.trim_end_matches('?');
                let inner = lower.rfind(" of ").map(|i| lower[i + 4..].to_string());
                inner.into_iter().chain([format!("{} {relation}", mentions.join(" ")), terms.join(" ")]).collect()
            }
        };
        let seen: HashSet<String> = history.iter().map(|h| text::normalize_answer(h)).collect();
        Ok(candidates
            .into_iter()
            .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|c| !c.is_empty() && !seen.contains(&text::normalize_answer(c)))
            .unwrap_or_else(|| question.to_string()))
    }
}

// ---------------------------------------------------------------- LLM roles

pub struct LlmRoles {
    pub model: Arc<dyn LanguageModel>,
    pub prompts: Prompts,
}

pub struct LlmReader(pub Arc<LlmRoles>);
pub struct LlmValidator(pub Arc<LlmRoles>, pub Check);
pub struct LlmRewriter(pub Arc<LlmRoles>);

#[derive(Deserialize)]
struct AnswerReply {
    #[serde(default)]
    answer: serde_json::Value,
    #[serde(default)]
    used: Vec<serde_json::Value>,
}

#[async_trait]
impl Reader for LlmReader {
    async fn read(&self, question: &str, evidence: &Retrieval, gate: &mut CallGate<'_>) -> Result<ReaderAnswer, RoleError> {
        let ev = format_evidence(evidence);
        let prompt = self.0.prompts.render(PromptId::Answer, &[("question", question), ("evidence", &ev)]);
        let reply = gate.complete("answer", self.0.model.as_ref(), prompt).await?;
        // Small models often ignore the JSON instruction: take the plain text as the answer.
        let (answer, used) = match parse::json_in::<AnswerReply>(&reply) {
            Ok(r) => {
                let answer = match r.answer {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                let used = r
                    .used
                    .iter()
                    .filter_map(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())))
                    .filter_map(|n| evidence.chunks.get((n as usize).checked_sub(1)?).map(|c| c.chunk))
                    .collect();
                (answer, used)
            }
            Err(_) => (reply.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string(), Vec::new()),
        };
        Ok(ReaderAnswer { answer: answer.trim().to_string(), used })
    }
}

#[async_trait]
impl Validator for LlmValidator {
    fn check(&self) -> Check {
        self.1
    }

    async fn validate(&self, question: &str, answer: &ReaderAnswer, evidence: &Retrieval, gate: &mut CallGate<'_>) -> Result<Verdict, RoleError> {
        let (id, step) = match self.1 {
            Check::Relevance => (PromptId::VerifyRelevance, "verify_relevance"),
            Check::Grounding => (PromptId::VerifyGrounding, "verify_grounding"),
            Check::Adequacy => (PromptId::VerifyAdequacy, "verify_adequacy"),
        };
        let ev = format_evidence(evidence);
        let prompt = self.0.prompts.render(id, &[("question", question), ("answer", &answer.answer), ("evidence", &ev)]);
        let reply = gate.complete(step, self.0.model.as_ref(), prompt).await?;
        let pass = parse::verdict(&reply)?;
        Ok(Verdict { check: self.1, pass, reason: excerpt(&reply) })
    }
}

/// The start of a model's reply, as the reason of a verdict.
fn excerpt(reply: &str) -> String {
    reply.trim().chars().take(300).collect()
}

/// Judges after each retrieval stage whether the evidence suffices, by asking the model
/// (`prompts/sufficiency.txt`, step `sufficiency`). Cost-aware: a stage without chunks is
/// insufficient without a call, and when the call is not affordable or fails the embedded
/// check decides. Reasons start with the judge that decided (`llm:` or `coverage:`).
pub struct LlmSufficiencyJudge(pub Arc<LlmRoles>);

impl LlmSufficiencyJudge {
    /// `fallback` judges when the model cannot; `reserved_calls` are the calls the budget
    /// must keep for the steps after retrieval (reading and verifying the answer).
    pub async fn judge(&self, kb: &Kb, evidence: &StageEvidence<'_>, fallback: &dyn SufficiencyCheck, gate: &mut CallGate<'_>, reserved_calls: u32) -> Judgement {
        if evidence.chunks.is_empty() {
            return Judgement { sufficient: false, reason: "llm: no evidence (model not asked)".into() };
        }
        let ev = format_stage_evidence(kb, evidence);
        let prompt = self.0.prompts.render(PromptId::Sufficiency, &[("question", evidence.query), ("evidence", &ev)]);
        let verdict = gate
            .complete_reserving("sufficiency", self.0.model.as_ref(), prompt, reserved_calls)
            .await
            .and_then(|reply| Ok((parse::verdict(&reply)?, reply)));
        match verdict {
            Ok((sufficient, reply)) => Judgement { sufficient, reason: format!("llm: {}", excerpt(&reply)) },
            Err(e) => {
                let why = match e {
                    RoleError::Budget(exceeded) => format!("llm judge not afforded: {exceeded}"),
                    RoleError::Llm(e) => format!("llm judge failed: {e}"),
                };
                tracing::debug!(stage = ?evidence.stage, %why, "sufficiency judge falls back to the embedded check");
                let embedded = fallback.judge(kb, evidence);
                Judgement { sufficient: embedded.sufficient, reason: format!("{} ({why})", embedded.reason) }
            }
        }
    }
}

#[async_trait]
impl Rewriter for LlmRewriter {
    async fn rewrite(&self, question: &str, failure: Check, answer: &ReaderAnswer, history: &[String], gate: &mut CallGate<'_>) -> Result<String, RoleError> {
        let id = match failure {
            Check::Relevance => PromptId::RewriteOffTopic,
            Check::Grounding => PromptId::RewriteUnsupported,
            Check::Adequacy => PromptId::RewriteInadequate,
        };
        let history = history.join("\n");
        let prompt = self.0.prompts.render(id, &[("question", question), ("answer", &answer.answer), ("history", &history)]);
        let reply = gate.complete("rewrite", self.0.model.as_ref(), prompt).await?;
        Ok(reply.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().trim_matches('"').to_string())
    }
}

/// The extractive reader, metered as if an LLM had read the answer prompt: one call and
/// the prompt's estimated tokens per read. Lets `a2rag eval` compare the cost of control
/// strategies (a2rag vs the iterative baseline) without a model.
pub struct MeteredReader {
    pub prompts: Prompts,
}

#[async_trait]
impl Reader for MeteredReader {
    async fn read(&self, question: &str, evidence: &Retrieval, gate: &mut CallGate<'_>) -> Result<ReaderAnswer, RoleError> {
        let prompt = self.prompts.render(PromptId::Answer, &[("question", question), ("evidence", &format_evidence(evidence))]);
        gate.ledger.admit(token_bound(&prompt, gate.max_completion_tokens)).map_err(RoleError::Budget)?;
        let started = Instant::now();
        let answer = extract_answer(question, evidence);
        let request = CompletionRequest { system: None, prompt, max_tokens: gate.max_completion_tokens, temperature: 0.0 };
        gate.ledger.record("answer", Some(crate::llm::Usage::estimate(&request, &answer.answer)), started);
        Ok(answer)
    }
}
