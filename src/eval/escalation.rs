//! How escalation pays: every question retrieved through all its stages with each stage's
//! evidence recorded (what the judge saw, its confidence, the recall the reader would have
//! had if retrieval stopped there), a threshold sweep over those records, and one row per
//! policy run through the controller with what it cost.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::dataset::EvalQuestion;
use super::metrics::{self, recall_at};
use crate::config::Settings;
use crate::control::{Controller, QueryRequest};
use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::kb::Kb;
use crate::kb::model::ChunkId;
use crate::retrieve::sufficiency::{EvidenceCheck, Judgement, Signals};
use crate::retrieve::{RetrieveOptions, Retriever, Stage, StageReport, Strategy};

/// One stage of one question's retrieval, escalated to the end.
#[derive(Debug, Clone, Serialize)]
pub struct StageRecord {
    pub stage: Stage,
    pub signals: Signals,
    pub confidence: f32,
    /// Recall of the reader's evidence had retrieval stopped after this stage.
    pub recall_at_2: f64,
    pub recall_at_5: f64,
    /// Retrieval time up to the end of this stage (seeds and text list included).
    pub micros: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuestionStages {
    pub id: String,
    /// Recall of the final ranking (that of the last stage, or of the text list where no
    /// stage ran).
    pub final_recall_at_5: f64,
    pub stages: Vec<StageRecord>,
}

/// A threshold's outcome over the stage records: where each question would have stopped.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub threshold: f32,
    pub recall_at_5: f64,
    /// Share of questions whose retrieval stops before the global stage (of those that
    /// plan one).
    pub before_global: f64,
}

/// A policy's figures, from running every question through the controller under it.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    pub policy: String,
    pub threshold: f32,
    pub recall_at_2: f64,
    pub recall_at_5: f64,
    pub retrieval_mean_ms: f64,
    pub retrieval_p50_ms: f64,
    pub retrieval_p95_ms: f64,
    pub stages_per_query: f64,
    pub judge_calls_per_query: f64,
    pub reader_calls_per_query: f64,
    pub llm_calls_per_query: f64,
    pub tokens_per_query: f64,
    /// Share of questions whose first retrieval ended at each stage.
    pub last_stage: BTreeMap<String, f64>,
    /// Share of questions with a global stage planned that stopped before it.
    pub before_global: f64,
}

/// The stage reports of a retrieval's first attempt: a rewrite's retrieval starts again
/// from its own first stage, and stages only rise within one attempt.
fn first_attempt(stages: &[StageReport]) -> &[StageReport] {
    let end = stages.windows(2).position(|w| w[1].stage <= w[0].stage).map_or(stages.len(), |i| i + 1);
    &stages[..end]
}

/// Ranked chunks as document ids, first occurrence order.
fn docs_of(kb: &Kb, chunks: &[ChunkId]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    chunks
        .iter()
        .filter_map(|c| kb.chunk(*c).and_then(|ch| kb.doc(ch.doc)))
        .filter(|d| seen.insert(d.id.clone()))
        .map(|d| d.id.clone())
        .collect()
}

/// Every question retrieved adaptively with no stage judged sufficient, each stage recorded.
pub fn record_stages(
    kb: &Kb,
    settings: &Settings,
    questions: &[EvalQuestion],
    embedded: &[EmbeddedQuery],
    top_k: usize,
) -> Result<Vec<QuestionStages>> {
    let retriever = Retriever::with_settings(kb, &settings.retrieve);
    let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k };
    let mut out = Vec::with_capacity(questions.len());
    for (q, query) in questions.iter().zip(embedded) {
        let started = Instant::now();
        let mut run = retriever.start(query, options)?;
        let mut stages = Vec::new();
        while let Some(evidence) = run.next_stage()? {
            let micros = started.elapsed().as_micros() as u64;
            let signals = Signals::measure(kb, &evidence);
            let docs = docs_of(kb, evidence.chunks);
            stages.push(StageRecord {
                stage: evidence.stage,
                signals,
                confidence: EvidenceCheck::confidence(&signals),
                recall_at_2: recall_at(&docs, &q.gold, 2),
                recall_at_5: recall_at(&docs, &q.gold, 5),
                micros,
            });
            run.judge(Judgement::verdict(false, "recording every stage".into()));
        }
        let finished = run.finish()?;
        let final_r5 = recall_at(&super::ranked_docs(&finished.chunks), &q.gold, 5);
        out.push(QuestionStages { id: q.id.clone(), final_recall_at_5: final_r5, stages });
    }
    Ok(out)
}

/// Where each question stops at `threshold`: its first stage with that confidence, or its
/// last stage.
pub fn sweep(records: &[QuestionStages], thresholds: &[f32]) -> Vec<SweepRow> {
    thresholds
        .iter()
        .map(|&threshold| {
            let mut r5 = Vec::with_capacity(records.len());
            let (mut planned, mut early) = (0usize, 0usize);
            for q in records {
                let stop =
                    q.stages.iter().position(|s| s.confidence >= threshold).unwrap_or(q.stages.len().saturating_sub(1));
                r5.push(q.stages.get(stop).map_or(q.final_recall_at_5, |s| s.recall_at_5));
                if q.stages.iter().any(|s| s.stage == Stage::Global) {
                    planned += 1;
                    early += usize::from(q.stages.get(stop).is_some_and(|s| s.stage < Stage::Global));
                }
            }
            SweepRow { threshold, recall_at_5: metrics::mean(&r5), before_global: early as f64 / planned.max(1) as f64 }
        })
        .collect()
}

/// Every question through the controller under `settings` (a policy), with its cost.
pub async fn policy_row(
    kb: &Kb,
    name: &str,
    settings: &Settings,
    controller: &Controller,
    questions: &[EvalQuestion],
) -> PolicyRow {
    let n = questions.len().max(1) as f64;
    let (mut r2, mut r5, mut ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut stages, mut judge, mut reader, mut calls, mut tokens) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut last_stage: BTreeMap<String, f64> = BTreeMap::new();
    let (mut planned, mut early) = (0usize, 0usize);
    for q in questions {
        let request = QueryRequest { question: q.question.clone(), policy: None, budget: None };
        let response = controller.run(kb, settings, &request).await;
        let docs = super::ranked_docs(&response.evidence);
        r2.push(recall_at(&docs, &q.gold, 2));
        r5.push(recall_at(&docs, &q.gold, 5));
        let entries = &response.ledger.entries;
        ms.push(entries.iter().find(|e| e.step == "retrieve").map_or(0.0, |e| e.micros as f64 / 1000.0));
        judge += entries.iter().filter(|e| e.step == "sufficiency").map(|e| e.llm_calls as f64).sum::<f64>();
        reader += entries.iter().filter(|e| e.step == "answer").map(|e| e.llm_calls as f64).sum::<f64>();
        calls += response.ledger.llm_calls as f64;
        tokens += response.ledger.tokens() as f64;
        let stage = match &response.retrieval {
            None => "abstained-gate".to_string(),
            Some(r) => {
                stages += r.stages.len() as f64;
                let first = first_attempt(&r.stages);
                let last = first.last().map_or(Stage::Fallback, |s| s.stage);
                // Local runs where an entity seed aligned, and the global stage is planned
                // after it: these are the questions that may stop early.
                if first.first().is_some_and(|s| s.stage == Stage::Local) {
                    planned += 1;
                    early += usize::from(last < Stage::Global);
                }
                last.name().to_string()
            }
        };
        *last_stage.entry(stage).or_default() += 1.0 / n;
    }
    PolicyRow {
        policy: name.to_string(),
        threshold: settings.retrieve.sufficiency_threshold,
        recall_at_2: metrics::mean(&r2),
        recall_at_5: metrics::mean(&r5),
        retrieval_mean_ms: metrics::mean(&ms),
        retrieval_p50_ms: metrics::percentile(&ms, 0.5),
        retrieval_p95_ms: metrics::percentile(&ms, 0.95),
        stages_per_query: stages / n,
        judge_calls_per_query: judge / n,
        reader_calls_per_query: reader / n,
        llm_calls_per_query: calls / n,
        tokens_per_query: tokens / n,
        last_stage,
        before_global: early as f64 / planned.max(1) as f64,
    }
}
