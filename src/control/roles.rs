//! The controller's roles: reader, the three validators, rewriter, and the sufficiency judge
//! of retrieval stages. Each has an embedded deterministic implementation (the judge's is the
//! retriever's evidence check) and an LLM one. Every model call goes through [`CallBudget`],
//! which admits it against the query's budget before it is made and records what it cost.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde::Deserialize;

use super::answer::{AnswerForm, Check, ReaderAnswer, Verdict};
use super::budget::{Exceeded, Ledger, token_bound};
use super::question::Question;
use super::{checks, reader};
use crate::ingest::extract::entity_mentions;
use crate::kb::Kb;
use crate::llm::prompts::{PromptId, Prompts};
use crate::llm::{CompletionRequest, LanguageModel, parse};
use crate::net::RemoteError;
use crate::retrieve::sufficiency::{Judgement, StageEvidence, SufficiencyCheck};
use crate::retrieve::{PathHop, Retrieval, Stage};
use crate::text;

/// Chunks the LLM prompts show.
pub const READ_DEPTH: usize = 5;
/// Confidence in an answer a model gave in the asked-for JSON; the checks then decide.
const LLM_ANSWER_CONFIDENCE: f32 = 0.8;
/// Confidence in a reply that was not the asked-for JSON, taken as plain text.
const LLM_UNPARSED_CONFIDENCE: f32 = 0.5;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RoleError {
    #[error("{0}")]
    Budget(Exceeded),
    #[error("{0}")]
    Llm(#[from] RemoteError),
}

/// The one way to the model: admitted by the budget first, then the call, then the ledger.
pub struct CallBudget<'a> {
    pub ledger: &'a mut Ledger,
    pub max_completion_tokens: u32,
    pub temperature: f64,
}

impl CallBudget<'_> {
    pub async fn complete(
        &mut self,
        step: &str,
        model: &dyn LanguageModel,
        prompt: String,
    ) -> Result<String, RoleError> {
        self.complete_reserving(step, model, prompt, 0).await
    }

    /// Like [`CallBudget::complete`], admitted only if the budget still allows `reserved_calls`
    /// more calls afterwards (see [`Ledger::admit_reserving`]).
    pub async fn complete_reserving(
        &mut self,
        step: &str,
        model: &dyn LanguageModel,
        prompt: String,
        reserved_calls: u32,
    ) -> Result<String, RoleError> {
        self.ledger
            .admit_reserving(token_bound(&prompt, self.max_completion_tokens), reserved_calls)
            .map_err(RoleError::Budget)?;
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

#[async_trait]
pub trait Reader: Send + Sync {
    /// `evidence` is `None` when the question is answered without retrieval (out of scope
    /// with `gate.out_of_scope = "no_retrieval"`).
    async fn read(
        &self,
        kb: &Kb,
        question: &str,
        evidence: Option<&Retrieval>,
        calls: &mut CallBudget<'_>,
    ) -> Result<ReaderAnswer, RoleError>;
}

#[async_trait]
pub trait Validator: Send + Sync {
    fn check(&self) -> Check;
    async fn validate(
        &self,
        question: &str,
        answer: &ReaderAnswer,
        evidence: Option<&Retrieval>,
        calls: &mut CallBudget<'_>,
    ) -> Result<Verdict, RoleError>;
}

#[async_trait]
pub trait Rewriter: Send + Sync {
    /// A new query for `failure`; may repeat history, which the controller then refuses.
    async fn rewrite(
        &self,
        question: &str,
        failure: Check,
        answer: &ReaderAnswer,
        history: &[String],
        calls: &mut CallBudget<'_>,
    ) -> Result<String, RoleError>;
}

/// "[1] Title: text" lines plus graph paths, as the LLM prompts show evidence.
pub fn format_evidence(evidence: Option<&Retrieval>) -> String {
    match evidence {
        Some(r) => write_evidence(r.chunks.iter().map(|c| (c.title.as_str(), c.text.as_str())), &r.paths),
        None => "(no evidence retrieved)".into(),
    }
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
        let hops: Vec<String> =
            path.iter().map(|h| format!("({} -{}-> {})", h.subject, h.relation, h.object)).collect();
        out.push_str(&format!("Path: {}\n", hops.join(" ")));
    }
    out
}

// ---------------------------------------------------------------- embedded roles

/// The embedded reader (see [`reader`](super::reader)): follows the graph the retrieval
/// walked, no model.
pub struct GraphReader;

#[async_trait]
impl Reader for GraphReader {
    async fn read(
        &self,
        kb: &Kb,
        question: &str,
        evidence: Option<&Retrieval>,
        _calls: &mut CallBudget<'_>,
    ) -> Result<ReaderAnswer, RoleError> {
        Ok(embedded_read(kb, question, evidence))
    }
}

fn embedded_read(kb: &Kb, question: &str, evidence: Option<&Retrieval>) -> ReaderAnswer {
    evidence.map(|r| reader::read(kb, &Question::parse(question, Some(r)), r)).unwrap_or_default()
}

/// The embedded checks (see [`checks`](super::checks)): lexical and graph evidence, no model.
pub struct EmbeddedValidator(pub Check);

#[async_trait]
impl Validator for EmbeddedValidator {
    fn check(&self) -> Check {
        self.0
    }

    async fn validate(
        &self,
        question: &str,
        answer: &ReaderAnswer,
        evidence: Option<&Retrieval>,
        _calls: &mut CallBudget<'_>,
    ) -> Result<Verdict, RoleError> {
        Ok(checks::run(self.0, question, answer, evidence))
    }
}

/// Template rewriter: one template per failure type.
pub struct TemplateRewriter;

#[async_trait]
impl Rewriter for TemplateRewriter {
    async fn rewrite(
        &self,
        question: &str,
        failure: Check,
        answer: &ReaderAnswer,
        history: &[String],
        _calls: &mut CallBudget<'_>,
    ) -> Result<String, RoleError> {
        let mentions = entity_mentions(question);
        let terms = text::content_terms(question);
        let relation: Vec<&String> =
            terms.iter().filter(|t| !mentions.iter().any(|m| text::normalize_answer(m).contains(t.as_str()))).collect();
        let relation = relation.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
        let candidates: Vec<String> = match failure {
            // Sharpen: the named entities verbatim, then the relation words.
            Check::Relevance => vec![format!("{} {relation}", mentions.join(" ")), terms.join(" ")],
            // Stricter grounding: look for a passage stating the candidate answer.
            Check::Grounding => vec![
                format!("{} {} {relation}", answer.answer, mentions.join(" ")),
                format!("{question} {}", answer.answer),
            ],
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
    async fn read(
        &self,
        _kb: &Kb,
        question: &str,
        evidence: Option<&Retrieval>,
        calls: &mut CallBudget<'_>,
    ) -> Result<ReaderAnswer, RoleError> {
        let ev = format_evidence(evidence);
        let prompt = self.0.prompts.render(PromptId::Answer, &[("question", question), ("evidence", &ev)]);
        let reply = calls.complete("answer", self.0.model.as_ref(), prompt).await?;
        // Small models often ignore the JSON instruction: take the plain text as the answer.
        let (answer, used, confidence) = match parse::json_in::<AnswerReply>(&reply) {
            Ok(r) => {
                let answer = match r.answer {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                let used = r
                    .used
                    .iter()
                    .filter_map(|v| {
                        v.as_u64().or_else(|| {
                            v.as_str().and_then(|s| s.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
                        })
                    })
                    .filter_map(|n| evidence?.chunks.get((n as usize).checked_sub(1)?).map(|c| c.chunk))
                    .collect();
                (answer, used, LLM_ANSWER_CONFIDENCE)
            }
            Err(_) => (
                reply.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string(),
                Vec::new(),
                LLM_UNPARSED_CONFIDENCE,
            ),
        };
        // An answer the evidence never states is the model's own knowledge or invention.
        let stated = evidence.is_some_and(|r| {
            r.chunks.iter().any(|c| text::normalize_answer(&c.text).contains(&text::normalize_answer(&answer)))
        });
        let confidence = if stated { confidence } else { confidence * 0.5 };
        Ok(ReaderAnswer {
            answer: answer.trim().to_string(),
            used,
            confidence,
            form: AnswerForm::Span,
            path: Vec::new(),
        })
    }
}

#[async_trait]
impl Validator for LlmValidator {
    fn check(&self) -> Check {
        self.1
    }

    async fn validate(
        &self,
        question: &str,
        answer: &ReaderAnswer,
        evidence: Option<&Retrieval>,
        calls: &mut CallBudget<'_>,
    ) -> Result<Verdict, RoleError> {
        let (id, step) = match self.1 {
            Check::Relevance => (PromptId::VerifyRelevance, "verify_relevance"),
            Check::Grounding => (PromptId::VerifyGrounding, "verify_grounding"),
            Check::Adequacy => (PromptId::VerifyAdequacy, "verify_adequacy"),
        };
        let ev = format_evidence(evidence);
        let prompt =
            self.0.prompts.render(id, &[("question", question), ("answer", &answer.answer), ("evidence", &ev)]);
        let reply = calls.complete(step, self.0.model.as_ref(), prompt).await?;
        let pass = parse::verdict(&reply)?;
        Ok(Verdict { check: self.1, pass, score: f32::from(u8::from(pass)), reason: excerpt(&reply) })
    }
}

/// The start of a model's reply, as the reason of a verdict.
fn excerpt(reply: &str) -> String {
    reply.trim().chars().take(300).collect()
}

/// Judges after each retrieval stage whether the evidence suffices, by asking the model
/// (`prompts/sufficiency.txt`, step `sufficiency`). Cost-aware: a stage without chunks is
/// insufficient without a call; the model is asked only when the embedded check (at the
/// policy's threshold) would go on to the global stage, so a policy that stops early on its
/// own asks less and a retrieval asks at most once; when the call is not affordable or
/// fails, the embedded check decides. Reasons start with the judge that decided (`llm:` or `evidence:`).
pub struct LlmSufficiencyJudge(pub Arc<LlmRoles>);

impl LlmSufficiencyJudge {
    /// `fallback` judges when the model cannot; `reserved_calls` are the calls the budget
    /// must keep for the steps after retrieval (reading and verifying the answer). Also says
    /// which limit refused the call when the budget could not afford it.
    pub async fn judge(
        &self,
        kb: &Kb,
        evidence: &StageEvidence<'_>,
        fallback: &dyn SufficiencyCheck,
        calls: &mut CallBudget<'_>,
        reserved_calls: u32,
    ) -> (Judgement, Option<Exceeded>) {
        if evidence.chunks.is_empty() {
            return (Judgement::verdict(false, "llm: no evidence (model not asked)".into()), None);
        }
        // The model is asked only where the embedded check would start the global stage, the
        // one escalation that costs: it can stop a retrieval earlier, never make one cost
        // more, and a question costs at most one judge call per retrieval.
        let embedded = fallback.judge(kb, evidence);
        let why = match evidence.next {
            _ if embedded.sufficient => Some("sufficient already".to_string()),
            Some(Stage::Global) => None,
            Some(next) => Some(format!("the {} stage is next", next.name())),
            None => Some("last stage".to_string()),
        };
        if let Some(why) = why {
            return (Judgement { reason: format!("{} ({why}: model not asked)", embedded.reason), ..embedded }, None);
        }
        let ev = format_stage_evidence(kb, evidence);
        let prompt = self.0.prompts.render(PromptId::Sufficiency, &[("question", evidence.query), ("evidence", &ev)]);
        let verdict = calls
            .complete_reserving("sufficiency", self.0.model.as_ref(), prompt, reserved_calls)
            .await
            .and_then(|reply| Ok((parse::verdict(&reply)?, reply)));
        match verdict {
            Ok((sufficient, reply)) => (Judgement::verdict(sufficient, format!("llm: {}", excerpt(&reply))), None),
            Err(e) => {
                let (why, exceeded) = match e {
                    RoleError::Budget(exceeded) => (format!("llm judge not afforded: {exceeded}"), Some(exceeded)),
                    RoleError::Llm(e) => (format!("llm judge failed: {e}"), None),
                };
                tracing::debug!(stage = ?evidence.stage, %why, "sufficiency judge falls back to the embedded check");
                (Judgement { reason: format!("{} ({why})", embedded.reason), ..embedded }, exceeded)
            }
        }
    }
}

#[async_trait]
impl Rewriter for LlmRewriter {
    async fn rewrite(
        &self,
        question: &str,
        failure: Check,
        answer: &ReaderAnswer,
        history: &[String],
        calls: &mut CallBudget<'_>,
    ) -> Result<String, RoleError> {
        let id = match failure {
            Check::Relevance => PromptId::RewriteOffTopic,
            Check::Grounding => PromptId::RewriteUnsupported,
            Check::Adequacy => PromptId::RewriteInadequate,
        };
        let history = history.join("\n");
        let prompt =
            self.0.prompts.render(id, &[("question", question), ("answer", &answer.answer), ("history", &history)]);
        let reply = calls.complete("rewrite", self.0.model.as_ref(), prompt).await?;
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
    async fn read(
        &self,
        kb: &Kb,
        question: &str,
        evidence: Option<&Retrieval>,
        calls: &mut CallBudget<'_>,
    ) -> Result<ReaderAnswer, RoleError> {
        let prompt =
            self.prompts.render(PromptId::Answer, &[("question", question), ("evidence", &format_evidence(evidence))]);
        calls.ledger.admit(token_bound(&prompt, calls.max_completion_tokens)).map_err(RoleError::Budget)?;
        let started = Instant::now();
        let answer = embedded_read(kb, question, evidence);
        let request =
            CompletionRequest { system: None, prompt, max_tokens: calls.max_completion_tokens, temperature: 0.0 };
        calls.ledger.record("answer", Some(crate::llm::Usage::estimate(&request, &answer.answer)), started);
        Ok(answer)
    }
}
