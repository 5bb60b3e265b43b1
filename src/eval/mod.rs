//! `a2rag eval`: runs every question of a dataset through a2rag and the baselines on the
//! same corpus, embedder and KB, and writes a JSON report, a Markdown table and an SVG chart.

pub mod dataset;
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
use crate::control::roles::{CallGate, MeteredReader, Reader};
use crate::control::budget::Ledger;
use crate::control::{Controller, QueryRequest};
use crate::error::{Error, Result};
use crate::ingest::{self, Pipeline, triples::TripleImport};
use crate::kb::model::NodeId;
use crate::kb::{Kb, SearchMode};
use crate::llm::prompts::Prompts;
use crate::net::Remote;
use crate::rank::reciprocal_rank_fusion;
use crate::retrieve::{Retrieval, RetrieveOptions, Retriever, Stage, Strategy};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemResult {
    pub system: String,
    pub recall_at_2: f64,
    pub recall_at_5: f64,
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
    pub llm_calls_per_query: f64,
    pub tokens_per_query: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    /// Share of questions ending at each stage (a2rag only).
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
    pub ingest_seconds: f64,
    pub systems: Vec<SystemResult>,
    pub node_deletion: Vec<DropRow>,
    /// How LLM calls and tokens are counted in this run.
    pub cost_note: String,
}

#[derive(Default)]
struct Tally {
    recall2: Vec<f64>,
    recall5: Vec<f64>,
    em: Vec<f64>,
    f1: Vec<f64>,
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

    fn add_answer(&mut self, q: &EvalQuestion, answer: &str, ledger: &Ledger) {
        self.em.push(q.answers.iter().map(|a| exact_match(answer, a)).fold(0.0, f64::max));
        self.f1.push(q.answers.iter().map(|a| f1(answer, a)).fold(0.0, f64::max));
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
            llm_calls_per_query: metrics::mean(&self.calls),
            tokens_per_query: metrics::mean(&self.tokens),
            latency_p50_ms: metrics::percentile(&self.latency_ms, 0.5),
            latency_p95_ms: metrics::percentile(&self.latency_ms, 0.95),
            stages: self.stages.iter().map(|(k, v)| (k.clone(), *v as f64 / n)).collect(),
        }
    }
}

/// Document ids of ranked chunks, first occurrence order.
fn ranked_docs(retrieval: &Retrieval) -> Vec<String> {
    let mut seen = HashSet::new();
    retrieval.chunks.iter().filter(|c| seen.insert(c.doc_id.clone())).map(|c| c.doc_id.clone()).collect()
}

/// An empty KB in `dir` (wiped first) with the embedded pipeline, for benches and eval; a
/// remote embedder calls through `remote`.
pub fn scratch_kb(mut settings: Settings, dir: &Path, remote: &Remote) -> Result<(Kb, Pipeline)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| crate::Error::io(dir, e))?;
    }
    settings.data_dir = dir.to_path_buf();
    let settings = Arc::new(settings);
    let embedder = crate::embed::from_settings(&settings.embed, remote)?;
    let kb = Kb::open(settings.clone(), embedder.clone())?;
    let pipeline = Pipeline::from_settings(&settings, embedder, None, remote)?;
    Ok((kb, pipeline))
}

pub fn run(mut settings: Settings, options: &EvalOptions, progress: &mut dyn ingest::Progress) -> Result<Report> {
    let dataset = Dataset::load(&options.dataset)?;
    let mut questions = dataset.questions.clone();
    if let Some(limit) = options.limit {
        questions.truncate(limit);
    }
    if questions.is_empty() {
        return Err(Error::Invalid("the dataset has no questions".into()));
    }
    std::fs::create_dir_all(&options.out_dir).map_err(|e| Error::io(&options.out_dir, e))?;
    // Retrieval depth must cover Recall@5 in documents even when chunks repeat a document.
    settings.retrieve.top_k = settings.retrieve.top_k.max(10);
    let (mut kb, mut pipeline) = scratch_kb(settings, &options.out_dir.join(format!("kb-{}", dataset.name)), &Remote::new())?;
    let settings = Arc::new(kb.settings().clone());
    if let Some(t) = &options.triples {
        pipeline.triples = Some(TripleImport::load(t)?);
    }
    let started = Instant::now();
    let ingest_report = ingest::ingest_paths(&mut kb, &pipeline, std::slice::from_ref(&dataset.corpus), progress)?;
    if ingest_report.failed() {
        return Err(Error::Invalid(format!("ingesting the corpus failed: {}", ingest_report.errors.join("; "))));
    }
    let ingest_seconds = started.elapsed().as_secs_f64();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Error::io("tokio runtime", e))?;
    let controller = Controller::metered(&settings)?;
    let top_k = settings.retrieve.top_k;
    let mut systems = Vec::new();

    // a2rag: the full controller loop.
    let mut a2rag = Tally::default();
    for q in &questions {
        let request = QueryRequest { question: q.question.clone(), policy: None, budget: None };
        let response = runtime.block_on(controller.run(&kb, &settings, &request));
        let docs = response.retrieval.as_ref().map(ranked_docs).unwrap_or_default();
        let retrieve_ms = response.ledger.entries.iter().filter(|e| e.step == "retrieve").map(|e| e.micros as f64 / 1000.0).sum();
        a2rag.add_retrieval(q, &docs, retrieve_ms);
        a2rag.add_answer(q, response.answer.as_deref().unwrap_or(""), &response.ledger);
        let stage = match (&response.retrieval, response.answer.is_some()) {
            (None, _) => "abstained-gate".to_string(),
            (Some(r), _) if r.stage == Stage::Fallback => "fallback".into(),
            (Some(r), true) => format!("{:?}", r.stage).to_lowercase(),
            (Some(_), false) => "failed".into(),
        };
        *a2rag.stages.entry(stage).or_default() += 1;
    }
    systems.push(a2rag.result("a2rag"));

    let baselines = [
        ("bm25", Strategy::Text(SearchMode::Bm25)),
        ("dense", Strategy::Text(SearchMode::Vector)),
        ("hybrid", Strategy::Text(SearchMode::Hybrid)),
        ("local-only", Strategy::LocalOnly),
        ("ppr-always", Strategy::PprAlways),
    ];
    for (name, strategy) in baselines {
        let mut tally = Tally::default();
        for q in &questions {
            let t = Instant::now();
            let r = Retriever::new(&kb).retrieve(&q.question, RetrieveOptions { strategy, min_stage: Stage::Local, top_k })?;
            tally.add_retrieval(q, &ranked_docs(&r), t.elapsed().as_secs_f64() * 1000.0);
        }
        systems.push(tally.result(name));
    }
    systems.push(runtime.block_on(iterative(&kb, &settings, &questions, options.iterative_steps))?);

    let stats = kb.stats();
    let node_deletion = node_deletion(&mut kb, &questions, options, top_k)?;
    let report = Report {
        dataset: dataset.name.clone(),
        questions: questions.len(),
        documents: stats.documents,
        nodes: stats.nodes,
        edges: stats.edges,
        embedder: kb.embedder().id(),
        triples: options.triples.as_ref().map(|p| p.display().to_string()),
        ingest_seconds,
        systems,
        node_deletion,
        cost_note: "Embedded roles. The reader is metered as one LLM call with the answer prompt's estimated tokens; \
                    embedded validators and the template rewriter make no call. The iterative baseline meters its reader the same way."
            .into(),
    };
    report::write(&report, &options.out_dir)?;
    Ok(report)
}

/// IRCoT-style baseline: retrieve, reason (a reader call), retrieve again with the
/// question plus what was inferred, for a fixed number of steps; evidence from all steps is
/// fused, then one final reader call answers.
async fn iterative(kb: &Kb, settings: &Settings, questions: &[EvalQuestion], steps: usize) -> Result<SystemResult> {
    let reader = MeteredReader { prompts: Prompts::load(&settings.llm.prompts_dir)? };
    let mut tally = Tally::default();
    for q in questions {
        let mut ledger = Ledger::new(crate::config::BudgetSettings { max_iterations: 1, max_llm_calls: u32::MAX, max_tokens: u64::MAX, deadline_ms: u64::MAX / 4 });
        let mut lists: Vec<Vec<u64>> = Vec::new();
        let mut query = q.question.clone();
        let mut latency = 0.0;
        let mut last: Option<Retrieval> = None;
        for _ in 0..steps.max(1) {
            let t = Instant::now();
            let r = Retriever::new(kb).retrieve(&query, RetrieveOptions { strategy: Strategy::Text(SearchMode::Hybrid), min_stage: Stage::Local, top_k: settings.retrieve.top_k })?;
            latency += t.elapsed().as_secs_f64() * 1000.0;
            lists.push(r.chunks.iter().map(|c| c.chunk as u64).collect());
            let mut gate = CallGate { ledger: &mut ledger, max_completion_tokens: settings.llm.max_completion_tokens, temperature: 0.0 };
            let thought = reader.read(&q.question, &r, &mut gate).await.map_err(|e| Error::Invalid(e.to_string()))?;
            query = format!("{} {}", q.question, thought.answer);
            last = Some(r);
        }
        let fused = reciprocal_rank_fusion(&lists, settings.retrieve.rrf_k);
        let Some(mut evidence) = last else { continue };
        evidence.chunks = fused
            .iter()
            .filter_map(|(c, s)| {
                let chunk = kb.chunk(*c as u32)?;
                let doc = kb.doc(chunk.doc)?;
                Some(crate::retrieve::RankedChunk { chunk: chunk.id, doc_id: doc.id.clone(), title: doc.title.clone(), span: chunk.span, score: *s, text: chunk.text.clone() })
            })
            .take(settings.retrieve.top_k)
            .collect();
        let mut gate = CallGate { ledger: &mut ledger, max_completion_tokens: settings.llm.max_completion_tokens, temperature: 0.0 };
        let answer = reader.read(&q.question, &evidence, &mut gate).await.map_err(|e| Error::Invalid(e.to_string()))?;
        tally.add_retrieval(q, &ranked_docs(&evidence), latency);
        tally.add_answer(q, &answer.answer, &ledger);
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
        for (name, strategy) in [("a2rag", Strategy::Adaptive), ("local-only", Strategy::LocalOnly), ("ppr-always", Strategy::PprAlways)] {
            let mut r5 = Vec::new();
            for q in questions {
                let r = Retriever::new(kb).retrieve(&q.question, RetrieveOptions { strategy, min_stage: Stage::Local, top_k })?;
                r5.push(recall_at(&ranked_docs(&r), &q.gold, 5));
            }
            recall.insert(name.to_string(), metrics::mean(&r5));
        }
        rows.push(DropRow { dropped: level, nodes_left: kb.stats().nodes, recall_at_5: recall });
    }
    Ok(rows)
}
