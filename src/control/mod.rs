//! The adaptive controller: an explicit state machine
//! `Gate -> Retrieve -> Answer -> Verify -> (Accept | Rewrite -> Retrieve ... | Abstain)`.
//! One transition function; every transition is logged with `tracing` and returned in the
//! query trace together with the cost ledger.

pub mod answer_type;
pub mod budget;
pub mod roles;

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::{LLM_JUDGE_NEEDS_MODEL, OutOfScope, Settings, SufficiencyJudge};
use crate::embed::EmbeddedQuery;
use crate::error::{Error, Result};
use crate::kb::Kb;
use crate::llm::LanguageModel;
use crate::llm::prompts::Prompts;
use crate::retrieve::{PathHop, Retrieval, RetrieveOptions, Retriever, Stage, Strategy};
use crate::text;
use budget::{BudgetOverride, Exceeded, Ledger};
use roles::{CallGate, Check, ExtractiveReader, HeuristicValidator, LlmReader, LlmRewriter, LlmRoles, LlmSufficiencyJudge, LlmValidator, Reader, ReaderAnswer, RoleError, Rewriter, TemplateRewriter, Validator, Verdict};

/// Share of the question's key terms the embedded relevance validator wants in evidence.
const MIN_RELEVANCE: f32 = 0.5;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    Gate,
    Retrieve { query: String, min_stage: Stage },
    Answer,
    Verify,
    Rewrite { failure: Check },
    Accept,
    Abstain { reason: AbstainReason },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AbstainReason {
    OutOfScope { similarity: f32 },
    Budget { exceeded: Exceeded },
    Unverified { failure: Check },
    NoNewQuery,
    Provider { message: String },
}

impl std::fmt::Display for AbstainReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbstainReason::OutOfScope { similarity } => write!(f, "out of scope (summary similarity {similarity:.3})"),
            AbstainReason::Budget { exceeded } => write!(f, "{exceeded}"),
            AbstainReason::Unverified { failure } => write!(f, "no verified answer within the iteration budget (last failure: {failure:?})"),
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
pub struct EvidenceItem {
    pub doc_id: String,
    pub title: String,
    pub chunk: u32,
    pub span: (usize, usize),
    pub score: f32,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryResponse {
    pub question: String,
    pub answer: Option<String>,
    pub abstained: Option<String>,
    pub evidence: Vec<EvidenceItem>,
    /// Chunks the accepted answer was read from.
    pub cited: Vec<u32>,
    pub paths: Vec<Vec<PathHop>>,
    pub stage: Option<Stage>,
    pub iterations: u32,
    pub queries: Vec<String>,
    pub verdicts: Vec<Vec<Verdict>>,
    pub ledger: Ledger,
    pub trace: Vec<Transition>,
    /// The last retrieval (seeds, per-stage reports), for inspection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<Retrieval>,
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

impl Controller {
    /// Embedded deterministic roles.
    pub fn embedded() -> Controller {
        Controller {
            reader: Box::new(ExtractiveReader),
            validators: [Check::Relevance, Check::Grounding, Check::Adequacy]
                .into_iter()
                .map(|check| Box::new(HeuristicValidator { check, min_relevance: MIN_RELEVANCE }) as Box<dyn Validator>)
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
            [Check::Relevance, Check::Grounding, Check::Adequacy]
                .into_iter()
                .map(|c| Box::new(LlmValidator(roles.clone(), c)) as Box<dyn Validator>)
                .collect(),
            Box::new(LlmRewriter(roles)),
            settings,
        );
        controller.judge = Some(judge);
        Ok(controller)
    }

    pub fn with_roles(reader: Box<dyn Reader>, validators: Vec<Box<dyn Validator>>, rewriter: Box<dyn Rewriter>, settings: &Settings) -> Controller {
        Controller {
            reader,
            validators,
            rewriter,
            judge: None,
            max_completion_tokens: settings.llm.max_completion_tokens,
            temperature: settings.llm.temperature,
        }
    }

    fn gate<'a>(&self, ledger: &'a mut Ledger) -> CallGate<'a> {
        CallGate { ledger, max_completion_tokens: self.max_completion_tokens, temperature: self.temperature }
    }

    /// Retrieval with the LLM judging each stage, through the same budget as the other roles.
    /// The judge keeps the calls one read and one round of validation need.
    async fn retrieve_judged(&self, judge: &LlmSufficiencyJudge, retriever: &Retriever<'_>, query: &EmbeddedQuery, options: RetrieveOptions, ledger: &mut Ledger) -> Result<Retrieval> {
        let reserved_calls = 1 + self.validators.len() as u32;
        let mut retrieval = retriever.start(query, options)?;
        while let Some(evidence) = retrieval.next_stage() {
            let mut gate = self.gate(ledger);
            let judgement = judge.judge(retriever.kb(), &evidence, retriever.check(), &mut gate, reserved_calls).await;
            retrieval.judge(judgement);
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
            retrieval: None,
            embedded: None,
            answer: None,
            last_step: Instant::now(),
        };
        let mut state = State::Gate;
        loop {
            let next = self.step(kb, settings, request, &state, &mut run).await;
            let detail = transition_detail(&next);
            tracing::info!(from = state_name(&state), to = state_name(&next), iteration = run.iteration, %detail, "controller transition");
            run.trace.push(Transition {
                from: state_name(&state).into(),
                to: state_name(&next).into(),
                iteration: run.iteration,
                detail,
                micros: run.last_step.elapsed().as_micros() as u64,
            });
            run.last_step = Instant::now();
            state = next;
            if matches!(state, State::Accept | State::Abstain { .. }) {
                break;
            }
        }
        run.into_response(request, state)
    }

    /// The transition function.
    async fn step(&self, kb: &Kb, settings: &Settings, request: &QueryRequest, state: &State, run: &mut Run) -> State {
        let abstain = |reason| State::Abstain { reason };
        match state {
            State::Gate => {
                let embedded = match EmbeddedQuery::new(kb.embedder().as_ref(), &request.question) {
                    Ok(q) => run.embedded.insert(q),
                    Err(e) => return abstain(AbstainReason::Provider { message: format!("embedding the question failed: {e}") }),
                };
                let similarity = gate_similarity(kb, embedded);
                if similarity >= settings.gate.threshold {
                    State::Retrieve { query: request.question.clone(), min_stage: Stage::Local }
                } else if settings.gate.out_of_scope == OutOfScope::NoRetrieval {
                    run.retrieval = None;
                    State::Answer
                } else {
                    abstain(AbstainReason::OutOfScope { similarity })
                }
            }
            State::Retrieve { query, min_stage } => {
                if let Err(exceeded) = run.ledger.check_deadline() {
                    return abstain(AbstainReason::Budget { exceeded });
                }
                let started = Instant::now();
                run.queries.push(query.clone());
                let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: *min_stage, top_k: settings.retrieve.top_k };
                let retriever = Retriever::with_settings(kb, &settings.retrieve);
                // The gate's embedding of the question serves its first retrieval; a rewritten
                // query is embedded once here.
                let embedded = match run.embedded.take().filter(|q| q.text == *query) {
                    Some(q) => q,
                    None => match EmbeddedQuery::new(kb.embedder().as_ref(), query) {
                        Ok(q) => q,
                        Err(e) => return abstain(AbstainReason::Provider { message: format!("retrieval failed: {e}") }),
                    },
                };
                let retrieved = match (&self.judge, settings.retrieve.sufficiency_judge) {
                    (Some(judge), SufficiencyJudge::Llm) => self.retrieve_judged(judge, &retriever, &embedded, options, &mut run.ledger).await,
                    _ => retriever.retrieve_embedded(&embedded, options),
                };
                run.embedded = Some(embedded);
                match retrieved {
                    Ok(r) => {
                        run.retrieval = Some(r);
                        run.ledger.record("retrieve", None, started);
                        State::Answer
                    }
                    Err(e) => abstain(AbstainReason::Provider { message: format!("retrieval failed: {e}") }),
                }
            }
            State::Answer => {
                let evidence = run.retrieval.clone().unwrap_or_else(empty_retrieval);
                let started = Instant::now();
                let mut gate = self.gate(&mut run.ledger);
                match self.reader.read(&request.question, &evidence, &mut gate).await {
                    Ok(answer) => {
                        if answer.answer.is_empty() {
                            tracing::debug!("reader found no answer");
                        }
                        run.ledger.record("read", None, started);
                        run.answer = Some(answer);
                        State::Verify
                    }
                    Err(e) => role_failure(e),
                }
            }
            State::Verify => {
                let evidence = run.retrieval.clone().unwrap_or_else(empty_retrieval);
                let answer = run.answer.clone().unwrap_or_default();
                let mut verdicts = Vec::new();
                let mut failure = None;
                for validator in &self.validators {
                    let mut gate = self.gate(&mut run.ledger);
                    match validator.validate(&request.question, &answer, &evidence, &mut gate).await {
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
                            return role_failure(e);
                        }
                    }
                }
                run.verdicts.push(verdicts);
                match failure {
                    None => State::Accept,
                    Some(failure) if run.iteration >= run.ledger.budget.max_iterations => abstain(AbstainReason::Unverified { failure }),
                    Some(failure) => State::Rewrite { failure },
                }
            }
            State::Rewrite { failure } => {
                let answer = run.answer.clone().unwrap_or_default();
                let mut gate = self.gate(&mut run.ledger);
                let rewritten = match self.rewriter.rewrite(&request.question, *failure, &answer, &run.queries, &mut gate).await {
                    Ok(q) => q,
                    Err(e) => return role_failure(e),
                };
                let repeated = run.queries.iter().any(|q| text::normalize_answer(q) == text::normalize_answer(&rewritten));
                if rewritten.trim().is_empty() || repeated {
                    return abstain(AbstainReason::NoNewQuery);
                }
                run.iteration += 1;
                // Unsupported answers suggest the local evidence misled the reader: search
                // the whole graph next time.
                let min_stage = if *failure == Check::Grounding { Stage::Global } else { Stage::Local };
                State::Retrieve { query: rewritten, min_stage }
            }
            State::Accept | State::Abstain { .. } => state.clone(),
        }
    }
}

fn role_failure(e: RoleError) -> State {
    let reason = match e {
        RoleError::Budget(exceeded) => AbstainReason::Budget { exceeded },
        RoleError::Llm(e) => AbstainReason::Provider { message: e.to_string() },
    };
    State::Abstain { reason }
}

/// Scope score of a question: the max cosine between it and any document summary, or the
/// share of its key terms the corpus vocabulary knows, whichever is higher. The lexical
/// half matters for the hash embedder, whose cosines between short unrelated texts have a
/// noise floor near 0.2 over a corpus of thousands of summaries.
pub fn gate_similarity(kb: &Kb, question: &EmbeddedQuery) -> f32 {
    let cosine = kb
        .summary_index()
        .search(&question.vector, 1)
        .ok()
        .and_then(|hits| hits.first().map(|(_, s)| *s))
        .unwrap_or(0.0);
    let terms = text::content_terms(&question.text);
    let known = terms.iter().filter(|t| kb.bm25().knows(t)).count();
    let coverage = if terms.is_empty() { 0.0 } else { known as f32 / terms.len() as f32 };
    cosine.max(coverage)
}

fn empty_retrieval() -> Retrieval {
    Retrieval {
        chunks: Vec::new(),
        paths: Vec::new(),
        stage: Stage::Fallback,
        sufficient: false,
        seeds: Default::default(),
        graph_share: 0.0,
        stages: Vec::new(),
        micros: 0,
    }
}

fn state_name(state: &State) -> &'static str {
    match state {
        State::Gate => "gate",
        State::Retrieve { .. } => "retrieve",
        State::Answer => "answer",
        State::Verify => "verify",
        State::Rewrite { .. } => "rewrite",
        State::Accept => "accept",
        State::Abstain { .. } => "abstain",
    }
}

fn transition_detail(state: &State) -> String {
    match state {
        State::Retrieve { query, min_stage } => format!("query `{query}` from stage {min_stage:?}"),
        State::Rewrite { failure } => format!("failed {failure:?}"),
        State::Abstain { reason } => reason.to_string(),
        _ => String::new(),
    }
}

struct Run {
    ledger: Ledger,
    trace: Vec<Transition>,
    iteration: u32,
    queries: Vec<String>,
    verdicts: Vec<Vec<Verdict>>,
    retrieval: Option<Retrieval>,
    /// The query last embedded, reused while the query text is unchanged.
    embedded: Option<EmbeddedQuery>,
    answer: Option<ReaderAnswer>,
    last_step: Instant,
}

impl Run {
    fn into_response(self, request: &QueryRequest, end: State) -> QueryResponse {
        let (answer, abstained) = match &end {
            State::Accept => (self.answer.as_ref().map(|a| a.answer.clone()), None),
            State::Abstain { reason } => (None, Some(reason.to_string())),
            _ => (None, None),
        };
        let evidence = self
            .retrieval
            .as_ref()
            .map(|r| {
                r.chunks
                    .iter()
                    .map(|c| EvidenceItem { doc_id: c.doc_id.clone(), title: c.title.clone(), chunk: c.chunk, span: c.span, score: c.score, text: c.text.clone() })
                    .collect()
            })
            .unwrap_or_default();
        QueryResponse {
            question: request.question.clone(),
            answer,
            abstained,
            evidence,
            cited: self.answer.as_ref().map(|a| a.used.clone()).unwrap_or_default(),
            paths: self.retrieval.as_ref().map(|r| r.paths.clone()).unwrap_or_default(),
            stage: self.retrieval.as_ref().map(|r| r.stage),
            iterations: self.iteration,
            queries: self.queries,
            verdicts: self.verdicts,
            ledger: self.ledger,
            trace: self.trace,
            retrieval: self.retrieval,
        }
    }
}
