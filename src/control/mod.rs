//! The adaptive controller: an explicit state machine
//! `Gate -> Retrieve -> Answer -> Verify -> (Accept | Rewrite -> Retrieve ... | Abstain)`.
//! Each state carries what it works on (the retrieval to read, the answer to verify), so no
//! state can be reached without its data. One transition function; every transition is
//! logged with `tracing` and returned in the query trace together with the cost ledger.

pub mod answer;
pub mod answer_type;
pub mod budget;
pub mod checks;
pub mod question;
pub mod reader;
pub mod roles;

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::{LLM_JUDGE_NEEDS_MODEL, OutOfScope, Settings, SufficiencyJudge};
use crate::embed::EmbeddedQuery;
use crate::error::{Error, Result};
use crate::kb::Kb;
use crate::kb::model::ChunkId;
use crate::llm::LanguageModel;
use crate::llm::prompts::Prompts;
use crate::retrieve::{PathHop, RankedChunk, Retrieval, RetrieveOptions, Retriever, Stage, Strategy};
use crate::text;
use answer::{AnswerForm, Check, ReaderAnswer, Verdict};
use budget::{BudgetOverride, Exceeded, Ledger};
use roles::{
    CallBudget, EmbeddedValidator, GraphReader, LlmReader, LlmRewriter, LlmRoles, LlmSufficiencyJudge, LlmValidator,
    Reader, Rewriter, RoleError, TemplateRewriter, Validator,
};

#[derive(Debug)]
pub enum State {
    Gate,
    /// `last` is the previous attempt's retrieval, kept should this one be refused.
    Retrieve {
        query: String,
        min_stage: Stage,
        last: Option<Retrieval>,
    },
    /// `retrieval` is `None` when an out-of-scope question is answered without retrieval.
    Answer {
        retrieval: Option<Retrieval>,
    },
    Verify {
        retrieval: Option<Retrieval>,
        answer: ReaderAnswer,
    },
    Rewrite {
        failure: Check,
        retrieval: Option<Retrieval>,
        answer: ReaderAnswer,
    },
    Accept {
        retrieval: Option<Retrieval>,
        answer: ReaderAnswer,
        confidence: f32,
    },
    /// The evidence found so far stays with the abstention, for the user to read.
    Abstain {
        reason: AbstainReason,
        retrieval: Option<Retrieval>,
        answer: Option<ReaderAnswer>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AbstainReason {
    OutOfScope {
        similarity: f32,
    },
    /// Every check passed but the answer's confidence is below `gate.min_answer_confidence`.
    LowConfidence {
        confidence: f32,
        threshold: f32,
    },
    Budget {
        exceeded: Exceeded,
    },
    Unverified {
        failure: Check,
    },
    NoNewQuery,
    Provider {
        message: String,
    },
}

impl AbstainReason {
    /// The reason's wire name (the `kind` it serialises with), for counting.
    pub fn kind(&self) -> &'static str {
        match self {
            AbstainReason::OutOfScope { .. } => "out_of_scope",
            AbstainReason::LowConfidence { .. } => "low_confidence",
            AbstainReason::Budget { .. } => "budget",
            AbstainReason::Unverified { .. } => "unverified",
            AbstainReason::NoNewQuery => "no_new_query",
            AbstainReason::Provider { .. } => "provider",
        }
    }
}

impl std::fmt::Display for AbstainReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbstainReason::OutOfScope { similarity } => {
                write!(f, "out of scope (summary similarity {similarity:.3})")
            }
            AbstainReason::LowConfidence { confidence, threshold } => {
                write!(f, "low confidence ({confidence:.2} < {threshold:.2}): not sure, see the evidence")
            }
            AbstainReason::Budget { exceeded } => write!(f, "{exceeded}"),
            AbstainReason::Unverified { failure } => {
                write!(f, "no verified answer within the iteration budget (last failure: {failure:?})")
            }
            AbstainReason::NoNewQuery => f.write_str("the rewriter produced no query that was not already tried"),
            AbstainReason::Provider { message } => write!(f, "LLM provider failed: {message}"),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub iteration: u32,
    pub detail: String,
    pub micros: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    pub question: String,
    /// Named policy from `policies/`.
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub budget: Option<BudgetOverride>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryResponse {
    pub question: String,
    pub answer: Option<String>,
    /// `span`, or `sentence` for a free-form question answered by a whole sentence.
    pub answer_form: Option<AnswerForm>,
    /// Confidence in the answer read last, in [0, 1] (reader and checks); also set when the
    /// controller abstained on that answer.
    pub confidence: Option<f32>,
    /// The answer read last when the controller abstained on it (low confidence, unverified).
    pub candidate: Option<String>,
    /// Why the controller abstained, as a sentence; `abstain_reason` has it as data.
    pub abstained: Option<String>,
    pub abstain_reason: Option<AbstainReason>,
    /// The chunks of the last retrieval, best first.
    pub evidence: Vec<RankedChunk>,
    /// Chunks the answer was read from.
    pub cited: Vec<ChunkId>,
    pub paths: Vec<Vec<PathHop>>,
    /// The graph path from a question entity to the answer, when the reader walked one.
    pub answer_path: Vec<PathHop>,
    pub stage: Option<Stage>,
    pub iterations: u32,
    pub queries: Vec<String>,
    pub verdicts: Vec<Vec<Verdict>>,
    pub ledger: Ledger,
    pub trace: Vec<Transition>,
    /// The last retrieval's seeds and per-stage reports; its chunks and paths are
    /// `evidence` and `paths` above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<Retrieval>,
}

/// When the request's time runs out, as an instant for the retriever's plan.
fn deadline(ledger: &Ledger) -> Instant {
    Instant::now() + ledger.remaining_time()
}

/// The roles a controller runs with.
pub struct Controller {
    reader: Box<dyn Reader>,
    validators: Vec<Box<dyn Validator>>,
    rewriter: Box<dyn Rewriter>,
    /// Judges retrieval stages where the settings in force say `sufficiency_judge = "llm"`;
    /// `None` without a model.
    judge: Option<LlmSufficiencyJudge>,
    max_completion_tokens: u32,
    temperature: f64,
}

const CHECKS: [Check; 3] = [Check::Relevance, Check::Grounding, Check::Adequacy];

impl Controller {
    /// Embedded deterministic roles.
    pub fn embedded() -> Controller {
        Controller {
            reader: Box::new(GraphReader),
            validators: CHECKS
                .into_iter()
                .map(|check| Box::new(EmbeddedValidator(check)) as Box<dyn Validator>)
                .collect(),
            rewriter: Box::new(TemplateRewriter),
            judge: None,
            max_completion_tokens: 0,
            temperature: 0.0,
        }
    }

    /// Embedded roles with the reader metered as an LLM call (see [`roles::MeteredReader`]).
    pub fn metered(settings: &Settings) -> Result<Controller> {
        let mut c = Controller::embedded();
        c.reader = Box::new(roles::MeteredReader { prompts: Prompts::load(&settings.llm.prompts_dir)? });
        c.max_completion_tokens = settings.llm.max_completion_tokens;
        Ok(c)
    }

    /// LLM roles when a model is configured, embedded ones otherwise.
    pub fn from_settings(settings: &Settings, model: Option<Arc<dyn LanguageModel>>) -> Result<Controller> {
        let Some(model) = model else {
            if settings.retrieve.sufficiency_judge == SufficiencyJudge::Llm {
                return Err(Error::Config(LLM_JUDGE_NEEDS_MODEL.into()));
            }
            return Ok(Controller::embedded());
        };
        let roles = Arc::new(LlmRoles { model, prompts: Prompts::load(&settings.llm.prompts_dir)? });
        let judge = LlmSufficiencyJudge(roles.clone());
        let mut controller = Controller::with_roles(
            Box::new(LlmReader(roles.clone())),
            CHECKS.into_iter().map(|c| Box::new(LlmValidator(roles.clone(), c)) as Box<dyn Validator>).collect(),
            Box::new(LlmRewriter(roles)),
            settings,
        );
        controller.judge = Some(judge);
        Ok(controller)
    }

    /// This controller with `model` judging retrieval stages where the settings in force say
    /// `sufficiency_judge = "llm"` (the other roles unchanged).
    pub fn with_llm_judge(mut self, model: Arc<dyn LanguageModel>, settings: &Settings) -> Result<Controller> {
        let roles = Arc::new(LlmRoles { model, prompts: Prompts::load(&settings.llm.prompts_dir)? });
        self.judge = Some(LlmSufficiencyJudge(roles));
        Ok(self)
    }

    pub fn with_roles(
        reader: Box<dyn Reader>,
        validators: Vec<Box<dyn Validator>>,
        rewriter: Box<dyn Rewriter>,
        settings: &Settings,
    ) -> Controller {
        Controller {
            reader,
            validators,
            rewriter,
            judge: None,
            max_completion_tokens: settings.llm.max_completion_tokens,
            temperature: settings.llm.temperature,
        }
    }

    /// The reader alone, for baselines: reads `retrieval` once, nothing verified.
    pub async fn read(
        &self,
        kb: &Kb,
        question: &str,
        retrieval: Option<&Retrieval>,
        ledger: &mut Ledger,
    ) -> std::result::Result<ReaderAnswer, RoleError> {
        self.reader.read(kb, question, retrieval, &mut self.calls(ledger)).await
    }

    fn calls<'a>(&self, ledger: &'a mut Ledger) -> CallBudget<'a> {
        CallBudget { ledger, max_completion_tokens: self.max_completion_tokens, temperature: self.temperature }
    }

    /// Retrieval with the LLM judging each stage, through the same budget as the other roles.
    /// The judge keeps the calls one read and one round of validation need; when it cannot
    /// afford a call, the embedded check judges that stage and escalation stops there.
    async fn retrieve_judged(
        &self,
        judge: &LlmSufficiencyJudge,
        retriever: &Retriever<'_>,
        query: &EmbeddedQuery,
        options: RetrieveOptions,
        ledger: &mut Ledger,
    ) -> Result<Retrieval> {
        let reserved_calls = 1 + self.validators.len() as u32;
        let mut retrieval = retriever.start(query, options)?;
        retrieval.deadline = Some(deadline(ledger));
        while let Some(evidence) = retrieval.next_stage()? {
            let mut calls = self.calls(ledger);
            let (judgement, unaffordable) =
                judge.judge(retriever.kb(), &evidence, retriever.check(), &mut calls, reserved_calls).await;
            retrieval.judge(judgement);
            if let Some(exceeded) = unaffordable {
                retrieval.stop(format!("budget: {exceeded}, no model call left to judge another stage"));
            }
        }
        retrieval.finish()
    }

    /// Runs the whole loop for one question under `settings` (the policy in force).
    pub async fn run(&self, kb: &Kb, settings: &Settings, request: &QueryRequest) -> QueryResponse {
        let budget = request.budget.unwrap_or_default().apply(settings.budget);
        let mut run = Run {
            ledger: Ledger::new(budget),
            trace: Vec::new(),
            iteration: 1,
            queries: Vec::new(),
            verdicts: Vec::new(),
            embedded: None,
            last_step: Instant::now(),
        };
        let mut state = State::Gate;
        let end = loop {
            let from = state_name(&state);
            state = self.step(kb, settings, request, state, &mut run).await;
            let detail = transition_detail(&state);
            tracing::info!(from, to = state_name(&state), iteration = run.iteration, %detail, "controller transition");
            run.trace.push(Transition {
                from: from.into(),
                to: state_name(&state).into(),
                iteration: run.iteration,
                detail,
                micros: run.last_step.elapsed().as_micros() as u64,
            });
            run.last_step = Instant::now();
            state = match state {
                State::Accept { retrieval, answer, confidence } => {
                    break Outcome { reason: None, retrieval, answer: Some(ReaderAnswer { confidence, ..answer }) };
                }
                State::Abstain { reason, retrieval, answer } => {
                    break Outcome { reason: Some(reason), retrieval, answer };
                }
                going_on => going_on,
            };
        };
        run.into_response(request, end)
    }

    /// The transition function.
    async fn step(&self, kb: &Kb, settings: &Settings, request: &QueryRequest, state: State, run: &mut Run) -> State {
        match state {
            State::Gate => {
                let embedded = match crate::retrieve::embed_query(kb, &request.question) {
                    Ok(q) => run.embedded.insert(q),
                    Err(e) => {
                        let message = format!("embedding the question failed: {e}");
                        return abstain(AbstainReason::Provider { message }, None, None);
                    }
                };
                let Scope { in_scope, similarity, .. } = Scope::judge(kb, settings, embedded);
                if in_scope {
                    State::Retrieve { query: request.question.clone(), min_stage: Stage::Local, last: None }
                } else if settings.gate.out_of_scope == OutOfScope::NoRetrieval {
                    State::Answer { retrieval: None }
                } else {
                    abstain(AbstainReason::OutOfScope { similarity }, None, None)
                }
            }
            State::Retrieve { query, min_stage, last } => {
                if let Err(exceeded) = run.ledger.check_deadline() {
                    return abstain(AbstainReason::Budget { exceeded }, last, None);
                }
                let started = Instant::now();
                run.queries.push(query.clone());
                let options = RetrieveOptions { min_stage, ..first_retrieval(settings) };
                let retriever = Retriever::with_settings(kb, &settings.retrieve);
                // The gate's embedding of the question serves its first retrieval; a rewritten
                // query is embedded once here.
                let embedded = match run.embedded.take().filter(|q| q.text == *query) {
                    Some(q) => q,
                    None => match crate::retrieve::embed_query(kb, &query) {
                        Ok(q) => q,
                        Err(e) => {
                            let message = format!("retrieval failed: {e}");
                            return abstain(AbstainReason::Provider { message }, last, None);
                        }
                    },
                };
                let retrieved = match (&self.judge, settings.retrieve.sufficiency_judge) {
                    (Some(judge), SufficiencyJudge::Llm) => {
                        self.retrieve_judged(judge, &retriever, &embedded, options, &mut run.ledger).await
                    }
                    _ => retriever.retrieve_within(&embedded, options, Some(deadline(&run.ledger))),
                };
                run.embedded = Some(embedded);
                match retrieved {
                    Ok(r) => {
                        run.ledger.record("retrieve", None, started);
                        // A rewrite adds to the evidence the question itself found.
                        let r = match last {
                            Some(earlier) => earlier.absorb(r, settings.retrieve.top_k),
                            None => r,
                        };
                        State::Answer { retrieval: Some(r) }
                    }
                    Err(e) => {
                        abstain(AbstainReason::Provider { message: format!("retrieval failed: {e}") }, last, None)
                    }
                }
            }
            State::Answer { retrieval } => {
                let started = Instant::now();
                let mut calls = self.calls(&mut run.ledger);
                match self.reader.read(kb, &request.question, retrieval.as_ref(), &mut calls).await {
                    Ok(answer) => {
                        run.ledger.record("read", None, started);
                        State::Verify { retrieval, answer }
                    }
                    Err(e) => role_failure(e, retrieval, None),
                }
            }
            State::Verify { retrieval, answer } => {
                let mut verdicts = Vec::new();
                let mut failure = None;
                for validator in &self.validators {
                    let mut calls = self.calls(&mut run.ledger);
                    match validator.validate(&request.question, &answer, retrieval.as_ref(), &mut calls).await {
                        Ok(v) => {
                            let pass = v.pass;
                            verdicts.push(v);
                            if !pass {
                                failure = Some(validator.check());
                                break;
                            }
                        }
                        Err(e) => {
                            run.verdicts.push(verdicts);
                            return role_failure(e, retrieval, Some(answer));
                        }
                    }
                }
                let confidence = verdicts.iter().map(|v| v.score).fold(answer.confidence, |c, s| c * s.clamp(0.0, 1.0));
                run.verdicts.push(verdicts);
                match failure {
                    None if confidence >= settings.gate.min_answer_confidence => {
                        State::Accept { retrieval, answer, confidence }
                    }
                    None => abstain(
                        AbstainReason::LowConfidence { confidence, threshold: settings.gate.min_answer_confidence },
                        retrieval,
                        Some(ReaderAnswer { confidence, ..answer }),
                    ),
                    Some(failure) if run.iteration >= run.ledger.budget.max_iterations => {
                        abstain(AbstainReason::Unverified { failure }, retrieval, Some(answer))
                    }
                    Some(failure) => State::Rewrite { failure, retrieval, answer },
                }
            }
            State::Rewrite { failure, retrieval, answer } => {
                let mut calls = self.calls(&mut run.ledger);
                let rewritten =
                    match self.rewriter.rewrite(&request.question, failure, &answer, &run.queries, &mut calls).await {
                        Ok(q) => q,
                        Err(e) => return role_failure(e, retrieval, Some(answer)),
                    };
                let repeated =
                    run.queries.iter().any(|q| text::normalize_answer(q) == text::normalize_answer(&rewritten));
                if rewritten.trim().is_empty() || repeated {
                    return abstain(AbstainReason::NoNewQuery, retrieval, Some(answer));
                }
                run.iteration += 1;
                // Unsupported answers suggest the local evidence misled the reader: search
                // the whole graph next time.
                let min_stage = if failure == Check::Grounding { Stage::Global } else { Stage::Local };
                State::Retrieve { query: rewritten, min_stage, last: retrieval }
            }
            end @ (State::Accept { .. } | State::Abstain { .. }) => end,
        }
    }
}

fn abstain(reason: AbstainReason, retrieval: Option<Retrieval>, answer: Option<ReaderAnswer>) -> State {
    State::Abstain { reason, retrieval, answer }
}

fn role_failure(e: RoleError, retrieval: Option<Retrieval>, answer: Option<ReaderAnswer>) -> State {
    let reason = match e {
        RoleError::Budget(exceeded) => AbstainReason::Budget { exceeded },
        RoleError::Llm(e) => AbstainReason::Provider { message: e.to_string() },
    };
    abstain(reason, retrieval, answer)
}

/// Scope score of a question: the max cosine between it and any document summary, or the
/// share of its key terms the corpus vocabulary knows, whichever is higher. The lexical
/// half matters for the hash embedder, whose cosines between short unrelated texts have a
/// noise floor near 0.2 over a corpus of thousands of summaries.
/// The gate's judgement of a question: in scope when its similarity to the KB (best document
/// summary, or share of its terms the KB knows) reaches `gate.threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scope {
    pub in_scope: bool,
    pub similarity: f32,
    pub threshold: f32,
}

impl Scope {
    pub fn judge(kb: &Kb, settings: &Settings, question: &EmbeddedQuery) -> Scope {
        let similarity = gate_similarity(kb, question);
        Scope { in_scope: similarity >= settings.gate.threshold, similarity, threshold: settings.gate.threshold }
    }
}

/// The options of a query's first retrieval, before any rewrite: evidence-only retrieval
/// uses the same, so it returns what `query` reads first.
pub fn first_retrieval(settings: &Settings) -> RetrieveOptions {
    RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: settings.retrieve.top_k }
}

/// The question's best cosine with a document's summary, or its share of words the KB
/// knows. The summary index holds the summaries embedded apart; a one-chunk document's
/// summary vector is its chunk's, so the chunk index is asked too, and with it the passages
/// of longer documents: a question that close to a passage is about the collection.
fn gate_similarity(kb: &Kb, question: &EmbeddedQuery) -> f32 {
    let cosine = [kb.summary_index(), kb.chunk_index()]
        .into_iter()
        .filter_map(|index| index.search(&question.vector, 1).ok()?.first().map(|(_, s)| *s))
        .fold(0.0, f32::max);
    let terms = text::content_terms(&question.text);
    let known = terms.iter().filter(|t| kb.bm25().knows(t)).count();
    let coverage = if terms.is_empty() { 0.0 } else { known as f32 / terms.len() as f32 };
    cosine.max(coverage)
}

fn state_name(state: &State) -> &'static str {
    match state {
        State::Gate => "gate",
        State::Retrieve { .. } => "retrieve",
        State::Answer { .. } => "answer",
        State::Verify { .. } => "verify",
        State::Rewrite { .. } => "rewrite",
        State::Accept { .. } => "accept",
        State::Abstain { .. } => "abstain",
    }
}

fn transition_detail(state: &State) -> String {
    match state {
        State::Retrieve { query, min_stage, .. } => format!("query `{query}` from stage {min_stage:?}"),
        State::Verify { answer, .. } if answer.answer.is_empty() => "the reader found no answer".into(),
        State::Verify { answer, .. } => {
            format!("answer `{}` (reader confidence {:.2})", answer.answer, answer.confidence)
        }
        State::Rewrite { failure, .. } => format!("failed {failure:?}"),
        State::Accept { confidence, .. } => format!("confidence {confidence:.2}"),
        State::Abstain { reason, .. } => reason.to_string(),
        State::Answer { retrieval: Some(r) } => retrieval_detail(r),
        State::Gate | State::Answer { retrieval: None } => String::new(),
    }
}

/// The stages a retrieval ran, where it stopped and why, for the trace.
fn retrieval_detail(r: &Retrieval) -> String {
    let stages: Vec<&str> = r.stages.iter().map(|s| s.stage.name()).collect();
    let ran = if stages.is_empty() { "no graph stage".to_string() } else { format!("stages {}", stages.join(", ")) };
    let end = match (&r.skipped, r.sufficient) {
        (Some(skipped), _) => format!("; the {} stage not run: {}", skipped.stage.name(), skipped.reason),
        (None, true) => "; stopped: sufficient".to_string(),
        (None, false) => String::new(),
    };
    format!("{ran}{end}")
}

/// How a run ended: accepted (no reason) or abstained, with what was found.
struct Outcome {
    reason: Option<AbstainReason>,
    retrieval: Option<Retrieval>,
    answer: Option<ReaderAnswer>,
}

struct Run {
    ledger: Ledger,
    trace: Vec<Transition>,
    iteration: u32,
    queries: Vec<String>,
    verdicts: Vec<Vec<Verdict>>,
    /// The query last embedded, reused while the query text is unchanged.
    embedded: Option<EmbeddedQuery>,
    last_step: Instant,
}

impl Run {
    fn into_response(self, request: &QueryRequest, end: Outcome) -> QueryResponse {
        let Outcome { reason: abstained, retrieval, answer } = end;
        let accepted = abstained.is_none();
        let mut retrieval = retrieval;
        let evidence = retrieval.as_mut().map(|r| std::mem::take(&mut r.chunks)).unwrap_or_default();
        let paths = retrieval.as_mut().map(|r| std::mem::take(&mut r.paths)).unwrap_or_default();
        let answer = answer.filter(|a| !a.answer.is_empty());
        QueryResponse {
            question: request.question.clone(),
            answer: answer.as_ref().filter(|_| accepted).map(|a| a.answer.clone()),
            answer_form: answer.as_ref().map(|a| a.form),
            confidence: answer.as_ref().map(|a| a.confidence),
            candidate: answer.as_ref().filter(|_| !accepted).map(|a| a.answer.clone()),
            abstained: abstained.as_ref().map(ToString::to_string),
            abstain_reason: abstained,
            evidence,
            cited: answer.as_ref().map(|a| a.used.clone()).unwrap_or_default(),
            paths,
            answer_path: answer.map(|a| a.path).unwrap_or_default(),
            stage: retrieval.as_ref().map(|r| r.stage),
            iterations: self.iteration,
            queries: self.queries,
            verdicts: self.verdicts,
            ledger: self.ledger,
            trace: self.trace,
            retrieval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metrics count abstentions and stages by these names: they must be the wire names.
    #[test]
    fn reason_kinds_and_stage_names_are_their_serialised_names() {
        let reasons = [
            AbstainReason::OutOfScope { similarity: 0.1 },
            AbstainReason::LowConfidence { confidence: 0.1, threshold: 0.5 },
            AbstainReason::Budget { exceeded: Exceeded::Iterations },
            AbstainReason::Unverified { failure: Check::Grounding },
            AbstainReason::NoNewQuery,
            AbstainReason::Provider { message: "down".into() },
        ];
        for reason in reasons {
            assert_eq!(serde_json::to_value(&reason).unwrap()["kind"], reason.kind());
        }
        for stage in [Stage::Local, Stage::Bridge, Stage::Global, Stage::Fallback] {
            assert_eq!(serde_json::to_value(stage).unwrap(), stage.name());
        }
    }
}
