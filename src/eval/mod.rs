//! `a2rag eval`: runs every question of a dataset through a2rag and the baselines on the
//! same corpus, embedder and KB, and writes a JSON report, a Markdown table and an SVG chart.

pub mod dataset;
pub mod escalation;
pub mod metrics;
mod report;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::config::Settings;
use crate::control::budget::Ledger;
use crate::control::{Controller, QueryRequest};
use crate::error::{Error, Result};
use crate::ingest::{self, Pipeline, triples::TripleImport};
use crate::kb::model::NodeId;
use crate::kb::{Kb, SearchMode};
use crate::net::Remote;
use crate::rank::reciprocal_rank_fusion;
use crate::retrieve::lead;
use crate::retrieve::{RankedChunk, Retrieval, RetrieveOptions, Retriever, Stage, Strategy};
use dataset::{Dataset, EvalQuestion};
pub use metrics::{exact_match, f1, recall_at};
pub use report::markdown as report_markdown;

pub struct EvalOptions {
    pub dataset: PathBuf,
    pub triples: Option<PathBuf>,
    pub drop_nodes: Vec<f64>,
    pub limit: Option<usize>,
    pub seed: u64,
    pub out_dir: PathBuf,
    /// Retrieve-reason rounds of the iterative (IRCoT-style) baseline.
    pub iterative_steps: usize,
    /// Keep a KB an earlier run left in `out_dir` rather than ingesting again.
    pub reuse_kb: bool,
    /// Named policies to run a2rag under, one row each with its cost.
    pub policies: Vec<String>,
    /// Ask every question in lower case.
    pub lower_case: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemResult {
    pub system: String,
    pub recall_at_2: f64,
    pub recall_at_5: f64,
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
    /// Share of questions answered (not abstained on).
    pub coverage: Option<f64>,
    /// Share of answered questions whose answer has F1 >= [`ACCEPTED_F1`].
    pub accepted_precision: Option<f64>,
    pub llm_calls_per_query: f64,
    pub tokens_per_query: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    /// Share of questions whose (last) retrieval ended at each stage, `fallback` when the
    /// graph contributed nothing, `abstained-gate` when the gate refused (a2rag only).
    pub stages: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DropRow {
    pub dropped: f64,
    pub nodes_left: usize,
    pub recall_at_5: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub dataset: String,
    pub questions: usize,
    pub documents: usize,
    pub nodes: usize,
    pub edges: usize,
    pub embedder: String,
    pub triples: Option<String>,
    /// The PPR graph: share of passages in its largest component, synonym edges, share of
    /// rule-extracted edges, and the graph's share in a2rag's fusion that follows from them.
    pub largest_component_share: f32,
    pub synonym_edges: usize,
    pub rule_edge_share: f32,
    pub graph_share: f32,
    /// The text list a2rag fuses the graph's ranking with (it follows the embedder).
    pub fusion_text: SearchMode,
    /// `None` when the KB of an earlier run was reused.
    pub ingest_seconds: Option<f64>,
    /// Median time to embed a question (the first time, uncached). The retrieval latencies
    /// leave it out: every system but bm25 embeds its query once per retrieval.
    pub query_embedding_p50_ms: f64,
    pub systems: Vec<SystemResult>,
    pub node_deletion: Vec<DropRow>,
    /// Recall and the share stopping before the global stage at each sufficiency
    /// threshold, from every question's stages recorded to the end.
    pub sweep: Vec<escalation::SweepRow>,
    /// a2rag under each policy asked for, and always escalating to the global stage.
    pub policies: Vec<escalation::PolicyRow>,
    /// How often the lead's page step put a document at a2rag's rank 2 whose title other
    /// documents share ("README"), and how often that document was gold.
    pub repeated_title_second: RepeatedTitleSecond,
    /// How LLM calls and tokens are counted in this run.
    pub cost_note: String,
}

/// a2rag's rank 2 on documents whose title is not theirs alone, where the lead's page step
/// put it there: where titles repeat, that step must stay out of the way unless such a
/// document is gold.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RepeatedTitleSecond {
    /// Documents whose title another document has too.
    pub documents: usize,
    pub questions: usize,
    pub gold: usize,
}

/// F1 at which an answer counts as right for accepted precision.
pub const ACCEPTED_F1: f64 = 0.5;

/// One question's answers, written to `answers.jsonl` for error analysis: what a2rag
/// answered (or the candidate it abstained on, and why) next to the reader alone.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionRecord {
    pub id: String,
    pub question: String,
    pub gold: Vec<String>,
    pub a2rag: Option<String>,
    pub a2rag_candidate: Option<String>,
    pub a2rag_confidence: Option<f32>,
    pub a2rag_abstained: Option<String>,
    pub a2rag_f1: f64,
    pub reader_only: String,
    pub reader_only_confidence: f32,
    pub reader_only_f1: f64,
}

#[derive(Default)]
struct Tally {
    recall2: Vec<f64>,
    recall5: Vec<f64>,
    em: Vec<f64>,
    f1: Vec<f64>,
    /// F1 of each answered question.
    answered_f1: Vec<f64>,
    calls: Vec<f64>,
    tokens: Vec<f64>,
    latency_ms: Vec<f64>,
    stages: BTreeMap<String, usize>,
}

impl Tally {
    fn add_retrieval(&mut self, q: &EvalQuestion, docs: &[String], latency_ms: f64) {
        self.recall2.push(recall_at(docs, &q.gold, 2));
        self.recall5.push(recall_at(docs, &q.gold, 5));
        self.latency_ms.push(latency_ms);
    }

    /// `answer` is `None` for an abstention (it scores 0 and does not count as answered).
    fn add_answer(&mut self, q: &EvalQuestion, answer: Option<&str>, ledger: &Ledger) {
        let answer = answer.filter(|a| !a.trim().is_empty());
        let text = answer.unwrap_or("");
        let f1 = best_f1(q, text);
        self.em.push(q.answers.iter().map(|a| exact_match(text, a)).fold(0.0, f64::max));
        self.f1.push(f1);
        if answer.is_some() {
            self.answered_f1.push(f1);
        }
        self.calls.push(ledger.llm_calls as f64);
        self.tokens.push(ledger.tokens() as f64);
    }

    fn result(&self, system: &str) -> SystemResult {
        let n = self.recall5.len().max(1) as f64;
        SystemResult {
            system: system.to_string(),
            recall_at_2: metrics::mean(&self.recall2),
            recall_at_5: metrics::mean(&self.recall5),
            exact_match: (!self.em.is_empty()).then(|| metrics::mean(&self.em)),
            f1: (!self.f1.is_empty()).then(|| metrics::mean(&self.f1)),
            coverage: (!self.f1.is_empty()).then(|| self.answered_f1.len() as f64 / self.f1.len() as f64),
            accepted_precision: (!self.f1.is_empty()).then(|| {
                let right = self.answered_f1.iter().filter(|f| **f >= ACCEPTED_F1).count();
                right as f64 / self.answered_f1.len().max(1) as f64
            }),
            llm_calls_per_query: metrics::mean(&self.calls),
            tokens_per_query: metrics::mean(&self.tokens),
            latency_p50_ms: metrics::percentile(&self.latency_ms, 0.5),
            latency_p95_ms: metrics::percentile(&self.latency_ms, 0.95),
            stages: self.stages.iter().map(|(k, v)| (k.clone(), *v as f64 / n)).collect(),
        }
    }
}

/// F1 of `answer` against the closest of the question's gold answers.
fn best_f1(q: &EvalQuestion, answer: &str) -> f64 {
    q.answers.iter().map(|a| f1(answer, a)).fold(0.0, f64::max)
}

/// Document ids of ranked chunks, first occurrence order.
/// The titles more than one document of `kb` has.
fn repeated_titles(kb: &Kb) -> HashSet<String> {
    let mut seen = HashSet::new();
    kb.docs().filter(|d| !seen.insert(d.title.as_str())).map(|d| d.title.clone()).collect()
}

pub fn ranked_docs(chunks: &[RankedChunk]) -> Vec<String> {
    let mut seen = HashSet::new();
    chunks.iter().filter(|c| seen.insert(c.doc_id.clone())).map(|c| c.doc_id.clone()).collect()
}

/// A ledger that admits every call: baselines are metered, never stopped.
fn unbounded_ledger() -> Ledger {
    Ledger::new(crate::config::BudgetSettings {
        max_iterations: 1,
        max_llm_calls: u32::MAX,
        max_tokens: u64::MAX,
        deadline_ms: u64::MAX / 4,
    })
}

/// An empty KB in `dir` (wiped first) with the embedded pipeline, for benches and eval; a
/// remote embedder calls through `remote`.
pub fn scratch_kb(settings: Settings, dir: &Path, remote: &Remote) -> Result<(Kb, Pipeline)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| crate::Error::io(dir, e))?;
    }
    open_kb(settings, dir, remote)
}

/// The KB in `dir` (created when absent) with the embedded pipeline.
fn open_kb(mut settings: Settings, dir: &Path, remote: &Remote) -> Result<(Kb, Pipeline)> {
    settings.data_dir = dir.to_path_buf();
    let settings = Arc::new(settings);
    let embedder = crate::embed::from_settings(&settings.embed, remote)?;
    let kb = Kb::open(settings.clone(), embedder.clone())?;
    let pipeline = Pipeline::from_settings(&settings, embedder, None, remote)?;
    Ok((kb, pipeline))
}

/// Ingests the dataset's corpus into `kb`; the seconds it took.
/// Ingests `dataset`'s corpus into `kb`; any document that fails fails the whole run (it would
/// change what is measured). Returns the seconds it took.
pub fn ingest_corpus(
    kb: &mut Kb,
    pipeline: &Pipeline,
    dataset: &Dataset,
    progress: &mut dyn ingest::Progress,
) -> Result<f64> {
    let started = Instant::now();
    let ingest_report = ingest::ingest_paths(kb, pipeline, std::slice::from_ref(&dataset.corpus), progress)?;
    // Documents that failed would change what is measured; malformed imported triples (the
    // published OpenIE files have some) only leave the graph as the extractor made it.
    if !ingest_report.errors.is_empty() {
        return Err(Error::Invalid(format!("ingesting the corpus failed: {}", ingest_report.errors.join("; "))));
    }
    if ingest_report.triples_dropped > 0 {
        tracing::warn!(
            dropped = ingest_report.triples_dropped,
            "imported triples left out (malformed or for no document)"
        );
    }
    Ok(started.elapsed().as_secs_f64())
}

pub fn run(mut settings: Settings, options: &EvalOptions, progress: &mut dyn ingest::Progress) -> Result<Report> {
    let dataset = Dataset::load(&options.dataset)?;
    let mut questions = dataset.questions.clone();
    if let Some(limit) = options.limit {
        questions.truncate(limit);
    }
    if options.lower_case {
        questions.iter_mut().for_each(|q| q.question = q.question.to_lowercase());
    }
    if questions.is_empty() {
        return Err(Error::Invalid("the dataset has no questions".into()));
    }
    std::fs::create_dir_all(&options.out_dir).map_err(|e| Error::io(&options.out_dir, e))?;
    // Retrieval depth must cover Recall@5 in documents even when chunks repeat a document.
    settings.retrieve.top_k = settings.retrieve.top_k.max(10);
    let kb_dir = options.out_dir.join(format!("kb-{}", dataset.name));
    let (mut kb, mut pipeline) = if options.reuse_kb && kb_dir.exists() {
        open_kb(settings, &kb_dir, &Remote::new())?
    } else {
        scratch_kb(settings, &kb_dir, &Remote::new())?
    };
    let settings = Arc::new(kb.settings().clone());
    if let Some(t) = &options.triples {
        pipeline.triples = Some(TripleImport::load(t)?);
    }
    let ingest_seconds = if options.reuse_kb && kb.stats().documents > 0 {
        None
    } else {
        Some(ingest_corpus(&mut kb, &pipeline, &dataset, progress)?)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    let remote = Remote::new();
    // Embedded roles, metered; a configured model judges sufficiency where the settings ask
    // for it (`retrieve.sufficiency_judge = "llm"`), so its calls are measured.
    let controller = match (settings.retrieve.sufficiency_judge, crate::llm::from_settings(&settings.llm, &remote)?) {
        (crate::config::SufficiencyJudge::Llm, Some(model)) => {
            Controller::metered(&settings)?.with_llm_judge(model, &settings)?
        }
        _ => Controller::metered(&settings)?,
    };
    let top_k = settings.retrieve.top_k;
    let mut systems = Vec::new();

    // Each question embedded once, timed, before any system runs: the systems' latencies
    // are then the retrieval work alone, measured alike (the embedder's cache answers the
    // controller's own embedding of the question).
    let mut embedding_ms = Vec::with_capacity(questions.len());
    let mut embedded = Vec::with_capacity(questions.len());
    for q in &questions {
        let t = Instant::now();
        embedded.push(crate::retrieve::embed_query(&kb, &q.question)?);
        embedding_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let query_embedding_p50_ms = metrics::percentile(&embedding_ms, 0.5);

    // a2rag: the full controller loop.
    let mut a2rag = Tally::default();
    let repeated_titles = repeated_titles(&kb);
    let mut repeated_title_second = RepeatedTitleSecond {
        documents: kb.docs().filter(|d| repeated_titles.contains(&d.title)).count(),
        ..RepeatedTitleSecond::default()
    };
    let mut records = Vec::with_capacity(questions.len());
    for q in &questions {
        let request = QueryRequest { question: q.question.clone(), policy: None, budget: None };
        let response = runtime.block_on(controller.run(&kb, &settings, &request));
        let docs = ranked_docs(&response.evidence);
        // The question's own retrieval, as for every other system (a rewrite's retrieval
        // comes with its own query embedding and is a second retrieval, not this one).
        let retrieve_ms =
            response.ledger.entries.iter().find(|e| e.step == "retrieve").map_or(0.0, |e| e.micros as f64 / 1000.0);
        a2rag.add_retrieval(q, &docs, retrieve_ms);
        let lead = response.evidence.first().map(|c| c.chunk);
        let led_to_second = response
            .paths
            .iter()
            .any(|p| matches!(p.as_slice(), [hop] if hop.relation == lead::MENTIONS && Some(hop.chunk) == lead));
        let repeated = |id: &&String| kb.doc_by_id(id).is_some_and(|d| repeated_titles.contains(&d.title));
        if let Some(second) = docs.get(1).filter(repeated).filter(|_| led_to_second) {
            repeated_title_second.questions += 1;
            repeated_title_second.gold += usize::from(q.gold.contains(second));
        }
        a2rag.add_answer(q, response.answer.as_deref(), &response.ledger);
        records.push(QuestionRecord {
            id: q.id.clone(),
            question: q.question.clone(),
            gold: q.answers.clone(),
            a2rag: response.answer.clone(),
            a2rag_candidate: response.candidate.clone(),
            a2rag_confidence: response.confidence,
            a2rag_abstained: response.abstained.clone(),
            a2rag_f1: best_f1(q, response.answer.as_deref().unwrap_or("")),
            reader_only: String::new(),
            reader_only_confidence: 0.0,
            reader_only_f1: 0.0,
        });
        let stage = match &response.retrieval {
            None => "abstained-gate".to_string(),
            Some(r) => format!("{:?}", r.stage).to_lowercase(),
        };
        *a2rag.stages.entry(stage).or_default() += 1;
    }
    systems.push(a2rag.result("a2rag"));

    // reader-only: the same retrieval and reader, nothing verified, rewritten or withheld.
    let mut reader_only = Tally::default();
    for ((q, query), record) in questions.iter().zip(&embedded).zip(&mut records) {
        let mut ledger = unbounded_ledger();
        let t = Instant::now();
        let r = Retriever::with_settings(&kb, &settings.retrieve).retrieve_embedded(
            query,
            RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k },
        )?;
        reader_only.add_retrieval(q, &ranked_docs(&r.chunks), t.elapsed().as_secs_f64() * 1000.0);
        let answer = runtime
            .block_on(controller.read(&kb, &q.question, Some(&r), &mut ledger))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        reader_only.add_answer(q, Some(answer.answer.as_str()), &ledger);
        record.reader_only_f1 = best_f1(q, &answer.answer);
        record.reader_only_confidence = answer.confidence;
        record.reader_only = answer.answer;
    }
    systems.push(reader_only.result("reader-only"));

    let baselines = [
        ("bm25", Strategy::Text(SearchMode::Bm25)),
        ("dense", Strategy::Text(SearchMode::Vector)),
        ("hybrid", Strategy::Text(SearchMode::Hybrid)),
        ("local-only", Strategy::LocalOnly),
        ("ppr-always", Strategy::PprAlways),
    ];
    for (name, strategy) in baselines {
        let mut tally = Tally::default();
        for (q, query) in questions.iter().zip(&embedded) {
            let t = Instant::now();
            let r = Retriever::new(&kb)
                .retrieve_embedded(query, RetrieveOptions { strategy, min_stage: Stage::Local, top_k })?;
            tally.add_retrieval(q, &ranked_docs(&r.chunks), t.elapsed().as_secs_f64() * 1000.0);
        }
        systems.push(tally.result(name));
    }
    systems.push(runtime.block_on(iterative(&kb, &settings, &controller, &questions, options.iterative_steps))?);

    let stage_records = escalation::record_stages(&kb, &settings, &questions, &embedded, top_k)?;
    report::write_stages(&stage_records, &options.out_dir)?;
    let thresholds: Vec<f32> = (0..=20).map(|i| i as f32 / 20.0).collect();
    let sweep = escalation::sweep(&stage_records, &thresholds);
    let policies = policy_rows(&kb, &settings, &controller, &questions, &options.policies, &runtime)?;

    let stats = kb.stats();
    let passage_graph = kb.passage_graph();
    let (largest_component_share, synonym_edges) = (passage_graph.largest_component_share, passage_graph.synonym_edges);
    let graph_share = crate::retrieve::fusion::GraphShare::new(&kb, Stage::Global, &[]).overall();
    let rule_edge_share = kb.rule_edge_share();
    let node_deletion = node_deletion(&mut kb, &questions, options, top_k)?;
    let report = Report {
        dataset: dataset.name.clone(),
        questions: questions.len(),
        documents: stats.documents,
        nodes: stats.nodes,
        edges: stats.edges,
        embedder: kb.embedder().id(),
        triples: options.triples.as_ref().map(|p| p.display().to_string()),
        largest_component_share,
        synonym_edges,
        rule_edge_share,
        graph_share,
        fusion_text: crate::retrieve::fusion::text_mode(kb.embedder().kind()),
        ingest_seconds,
        query_embedding_p50_ms,
        systems,
        node_deletion,
        sweep,
        policies,
        repeated_title_second,
        cost_note: "Embedded roles. The reader is metered as one LLM call with the answer prompt's estimated tokens; \
                    embedded validators and the template rewriter make no call. The reader-only and iterative baselines meter their reader the same way. \
                    Coverage is the share of questions answered; accepted precision the share of answered questions with F1 >= 0.5 \
                    (EM and F1 count an abstention as 0)."
            .into(),
    };
    report::write(&report, &options.out_dir)?;
    report::write_answers(&records, &options.out_dir)?;
    Ok(report)
}

/// a2rag always escalating to its last stage (a threshold no confidence reaches), then
/// under each named policy.
fn policy_rows(
    kb: &Kb,
    settings: &Settings,
    controller: &Controller,
    questions: &[EvalQuestion],
    names: &[String],
    runtime: &tokio::runtime::Runtime,
) -> Result<Vec<escalation::PolicyRow>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let known = crate::engine::load_policies(&settings.policy.policies_dir, None)?;
    let mut always = settings.clone();
    always.retrieve.sufficiency_threshold = ALWAYS_ESCALATE;
    // Its judgements are ignored: no model need be asked for them.
    always.retrieve.sufficiency_judge = crate::config::SufficiencyJudge::Embedded;
    let mut rows = vec![runtime.block_on(escalation::policy_row(kb, "always-global", &always, controller, questions))];
    for name in names {
        let policy = known.get(name).ok_or_else(|| {
            let mut names: Vec<&String> = known.keys().collect();
            names.sort();
            Error::Invalid(format!("unknown policy `{name}` (known: {names:?})"))
        })?;
        rows.push(runtime.block_on(escalation::policy_row(kb, name, policy, controller, questions)));
    }
    Ok(rows)
}

/// A sufficiency threshold above any confidence: every stage runs.
const ALWAYS_ESCALATE: f32 = 2.0;

/// IRCoT-style baseline: retrieve, reason (a reader call), retrieve again with the
/// question plus what was inferred, for a fixed number of steps; evidence from all steps is
/// fused, then one final reader call answers.
async fn iterative(
    kb: &Kb,
    settings: &Settings,
    controller: &Controller,
    questions: &[EvalQuestion],
    steps: usize,
) -> Result<SystemResult> {
    let mut tally = Tally::default();
    for q in questions {
        let mut ledger = unbounded_ledger();
        let mut lists: Vec<Vec<u64>> = Vec::new();
        let mut query = q.question.clone();
        let mut latency = 0.0;
        let mut last: Option<Retrieval> = None;
        for _ in 0..steps.max(1) {
            let t = Instant::now();
            let r = Retriever::new(kb).retrieve(
                &query,
                RetrieveOptions {
                    strategy: Strategy::Text(SearchMode::Hybrid),
                    min_stage: Stage::Local,
                    top_k: settings.retrieve.top_k,
                },
            )?;
            latency += t.elapsed().as_secs_f64() * 1000.0;
            lists.push(r.chunks.iter().map(|c| c.chunk as u64).collect());
            let thought = controller
                .read(kb, &q.question, Some(&r), &mut ledger)
                .await
                .map_err(|e| Error::Invalid(e.to_string()))?;
            query = format!("{} {}", q.question, thought.answer);
            last = Some(r);
        }
        let fused = reciprocal_rank_fusion(&lists, settings.retrieve.rrf_k);
        let Some(mut evidence) = last else { continue };
        evidence.chunks = fused
            .iter()
            .filter_map(|(c, s)| RankedChunk::of(kb, *c as u32, *s))
            .take(settings.retrieve.top_k)
            .collect();
        let answer = controller
            .read(kb, &q.question, Some(&evidence), &mut ledger)
            .await
            .map_err(|e| Error::Invalid(e.to_string()))?;
        tally.add_retrieval(q, &ranked_docs(&evidence.chunks), latency);
        tally.add_answer(q, Some(answer.answer.as_str()), &ledger);
    }
    Ok(tally.result("iterative"))
}

/// R@5 of the graph-using systems as a growing share of nodes is forgotten.
fn node_deletion(kb: &mut Kb, questions: &[EvalQuestion], options: &EvalOptions, top_k: usize) -> Result<Vec<DropRow>> {
    let mut levels = options.drop_nodes.clone();
    levels.sort_by(f64::total_cmp);
    if levels.is_empty() {
        return Ok(Vec::new());
    }
    let mut order: Vec<NodeId> = kb.nodes().map(|n| n.id).collect();
    order.sort_unstable();
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(options.seed));
    let total = order.len();
    let mut dropped = 0usize;
    let mut rows = Vec::new();
    for level in levels {
        let target = ((level.clamp(0.0, 1.0)) * total as f64).round() as usize;
        if target > dropped {
            kb.forget_nodes_in_memory(&order[dropped..target])?;
            dropped = target;
        }
        let mut recall = BTreeMap::new();
        for (name, strategy) in
            [("a2rag", Strategy::Adaptive), ("local-only", Strategy::LocalOnly), ("ppr-always", Strategy::PprAlways)]
        {
            let mut r5 = Vec::new();
            for q in questions {
                let r = Retriever::new(kb)
                    .retrieve(&q.question, RetrieveOptions { strategy, min_stage: Stage::Local, top_k })?;
                r5.push(recall_at(&ranked_docs(&r.chunks), &q.gold, 5));
            }
            recall.insert(name.to_string(), metrics::mean(&r5));
        }
        rows.push(DropRow { dropped: level, nodes_left: kb.stats().nodes, recall_at_5: recall });
    }
    Ok(rows)
}
