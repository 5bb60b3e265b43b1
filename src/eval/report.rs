//! Report files: `report.json`, `report.md`, `node_deletion.svg` and `answers.jsonl`.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::escalation::QuestionStages;
use super::{QuestionRecord, Report};
use crate::error::{Error, Result};

pub fn write(report: &Report, dir: &Path) -> Result<()> {
    let json = serde_json::to_string_pretty(report).map_err(|e| Error::Invalid(e.to_string()))?;
    let json_path = dir.join("report.json");
    std::fs::write(&json_path, json).map_err(|e| Error::io(&json_path, e))?;
    let md_path = dir.join("report.md");
    std::fs::write(&md_path, markdown(report)).map_err(|e| Error::io(&md_path, e))?;
    if !report.node_deletion.is_empty() {
        chart(report, &dir.join("node_deletion.svg"))?;
    }
    if !report.policies.is_empty() {
        cost_chart(report, &dir.join("recall_cost.svg"))?;
    }
    Ok(())
}

/// One JSON line per question: every stage of its retrieval escalated to the end.
pub fn write_stages(records: &[QuestionStages], dir: &Path) -> Result<()> {
    write_lines(records, &dir.join("stages.jsonl"))
}

fn write_lines<T: serde::Serialize>(records: &[T], path: &Path) -> Result<()> {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r).map_err(|e| Error::Invalid(e.to_string()))?);
        out.push('\n');
    }
    std::fs::write(path, out).map_err(|e| Error::io(path, e))
}

/// One JSON line per question: the answers of a2rag and of the reader alone.
pub fn write_answers(records: &[QuestionRecord], dir: &Path) -> Result<()> {
    write_lines(records, &dir.join("answers.jsonl"))
}

pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} ({} questions, {} documents, {} nodes, {} edges, embedder {}{})\n",
        r.dataset,
        r.questions,
        r.documents,
        r.nodes,
        r.edges,
        r.embedder,
        r.triples.as_ref().map(|t| format!(", triples {t}")).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "PPR graph: {:.0}% of passages in the largest component, {} synonym edges, {:.0}% rule-extracted edges; graph share in a2rag's fusion {:.2}, with the {} text list.\n",
        r.largest_component_share * 100.0,
        r.synonym_edges,
        r.rule_edge_share * 100.0,
        r.graph_share,
        r.fusion_text.name()
    );
    let _ = writeln!(
        out,
        "| system | R@2 | R@5 | EM | F1 | coverage | accepted precision | LLM calls/q | tokens/q | retrieval p50 ms | p95 ms |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    let opt = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{:.3}", v));
    for s in &r.systems {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} | {} | {} | {} | {} | {:.2} | {:.0} | {:.2} | {:.2} |",
            s.system,
            s.recall_at_2,
            s.recall_at_5,
            opt(s.exact_match),
            opt(s.f1),
            opt(s.coverage),
            opt(s.accepted_precision),
            s.llm_calls_per_query,
            s.tokens_per_query,
            s.latency_p50_ms,
            s.latency_p95_ms
        );
    }
    if let Some(a) = r.systems.iter().find(|s| !s.stages.is_empty()) {
        let parts: Vec<String> = a.stages.iter().map(|(k, v)| format!("{k} {:.0}%", v * 100.0)).collect();
        let _ = writeln!(out, "\nLast retrieval stage of a2rag (share of questions): {}", parts.join(", "));
    }
    let repeated = r.repeated_title_second;
    if repeated.documents > 0 {
        let _ = writeln!(
            out,
            "\n{} documents share their title with another. The lead's page step put one of them at rank 2 on {} of {} questions; it was gold on {} of those.",
            repeated.documents, repeated.questions, r.questions, repeated.gold
        );
    }
    let find = |name: &str| r.systems.iter().find(|s| s.system == name);
    if let (Some(a), Some(b)) = (find("a2rag"), find("reader-only"))
        && let (Some(pa), Some(pb), Some(ca), Some(cb)) =
            (a.accepted_precision, b.accepted_precision, a.coverage, b.coverage)
    {
        let _ = writeln!(
            out,
            "\nTrust: verification and the confidence gate take accepted precision from {pb:.3} (reader-only, answers {:.0}%) to {pa:.3} (a2rag, answers {:.0}%), {:+.3}.",
            cb * 100.0,
            ca * 100.0,
            pa - pb
        );
    }
    if !r.node_deletion.is_empty() {
        let systems: Vec<&String> = r.node_deletion[0].recall_at_5.keys().collect();
        let _ = writeln!(
            out,
            "\nR@5 under node deletion (the retriever alone on the original question; the table above runs a2rag through the controller, whose rewrites can change its final evidence):\n"
        );
        let _ = writeln!(
            out,
            "| dropped | nodes left | {} |",
            systems.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(out, "|---|---|{}", "---|".repeat(systems.len()));
        for row in &r.node_deletion {
            let vals: Vec<String> = systems.iter().map(|s| format!("{:.3}", row.recall_at_5[*s])).collect();
            let _ = writeln!(out, "| {:.0}% | {} | {} |", row.dropped * 100.0, row.nodes_left, vals.join(" | "));
        }
    }
    escalation_tables(r, &mut out);
    let ingest = match r.ingest_seconds {
        Some(seconds) => format!("Ingest took {seconds:.1} s."),
        None => "The KB of an earlier run was reused (--reuse-kb).".to_string(),
    };
    let _ = writeln!(
        out,
        "\n{}  Retrieval latency is one retrieval of the question (a2rag: the first, before any rewrite; iterative: all its steps, its later queries' embeddings included), query embedding excluded: embedding a question took {:.2} ms (p50), in one embedder call with the parts seed alignment compares with the graph (its entity mentions and relation phrase), once per retrieval for every system but bm25 (systems that align no seeds are measured with the same embedding).  {ingest}",
        r.cost_note, r.query_embedding_p50_ms
    );
    out
}

fn chart(r: &Report, path: &Path) -> Result<()> {
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let max_x = r.node_deletion.iter().map(|d| d.dropped).fold(0.0, f64::max).max(0.1);
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("R@5 vs node deletion ({})", r.dataset), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(45)
            .build_cartesian_2d(0.0..max_x, 0.0..1.0)?;
        chart.configure_mesh().x_desc("share of nodes deleted").y_desc("Recall@5").draw()?;
        let systems: Vec<String> = r.node_deletion[0].recall_at_5.keys().cloned().collect();
        for (i, system) in systems.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = r.node_deletion.iter().map(|d| (d.dropped, d.recall_at_5[system])).collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                .label(system.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::Invalid(format!("drawing {}: {e}", path.display())))
}

/// The baselines drawn against the policies, with the cost axis they share.
const COST_BASELINES: [&str; 5] = ["bm25", "dense", "hybrid", "ppr-always", "iterative"];

/// The best R@5 among the baselines whose retrieval p50 is at most `ms`: the frontier a
/// policy must reach.
fn frontier(r: &Report, ms: f64) -> Option<f64> {
    r.systems
        .iter()
        .filter(|s| COST_BASELINES.contains(&s.system.as_str()) && s.latency_p50_ms <= ms)
        .map(|s| s.recall_at_5)
        .reduce(f64::max)
}

fn escalation_tables(r: &Report, out: &mut String) {
    if !r.policies.is_empty() {
        let _ = writeln!(
            out,
            "\nPolicies (the full controller under each; cost is the question's first retrieval, model calls are the whole query's):\n"
        );
        let _ = writeln!(
            out,
            "| policy | threshold | R@2 | R@5 | baselines' best R@5 at this cost | retrieval mean / p50 / p95 ms | stages/q | judge calls/q | reader calls/q | model calls/q | tokens/q | stopped before global | last stage |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for p in &r.policies {
            let mix: Vec<String> = p.last_stage.iter().map(|(k, v)| format!("{k} {:.0}%", v * 100.0)).collect();
            let threshold = if p.threshold > 1.0 { "never".to_string() } else { format!("{:.2}", p.threshold) };
            let best = frontier(r, p.retrieval_p50_ms).map_or("–".to_string(), |b| format!("{b:.3}"));
            let _ = writeln!(
                out,
                "| {} | {threshold} | {:.3} | {:.3} | {best} | {:.2} / {:.2} / {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0}% | {} |",
                p.policy,
                p.recall_at_2,
                p.recall_at_5,
                p.retrieval_mean_ms,
                p.retrieval_p50_ms,
                p.retrieval_p95_ms,
                p.stages_per_query,
                p.judge_calls_per_query,
                p.reader_calls_per_query,
                p.llm_calls_per_query,
                p.tokens_per_query,
                p.before_global * 100.0,
                mix.join(", ")
            );
        }
    }
    if !r.sweep.is_empty() {
        let _ = writeln!(
            out,
            "\nSufficiency threshold sweep (the retriever alone, every stage recorded, the embedded judge's confidence; `stages.jsonl`):\n"
        );
        let _ = writeln!(out, "| threshold | R@5 | stopped before global |");
        let _ = writeln!(out, "|---|---|---|");
        for row in r.sweep.iter().step_by(2) {
            let _ =
                writeln!(out, "| {:.2} | {:.3} | {:.0}% |", row.threshold, row.recall_at_5, row.before_global * 100.0);
        }
    }
}

/// R@5 against retrieval p50 (log scale): the policies and always-global as one series,
/// the baselines as labelled points.
fn cost_chart(r: &Report, path: &Path) -> Result<()> {
    let baselines: Vec<(String, f64, f64)> = r
        .systems
        .iter()
        .filter(|s| COST_BASELINES.contains(&s.system.as_str()))
        .map(|s| (s.system.clone(), s.latency_p50_ms, s.recall_at_5))
        .collect();
    let policies: Vec<(String, f64, f64)> =
        r.policies.iter().map(|p| (p.policy.clone(), p.retrieval_p50_ms, p.recall_at_5)).collect();
    let all = || baselines.iter().chain(&policies);
    let lo = all().map(|(_, ms, _)| *ms).fold(f64::INFINITY, f64::min).max(0.01) / 1.5;
    let hi = all().map(|(_, ms, _)| *ms).fold(0.0, f64::max).max(lo * 10.0) * 1.5;
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("R@5 against retrieval cost ({}, {})", r.dataset, r.embedder), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(45)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
        chart.configure_mesh().x_desc("retrieval p50 ms (log)").y_desc("Recall@5").draw()?;
        let label = |name: &str, x: f64, y: f64, color: RGBColor| {
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 5, color.filled())
                + Text::new(name.to_string(), (7, -12), ("sans-serif", 13).into_font())
        };
        chart
            .draw_series(baselines.iter().map(|(n, x, y)| label(n, *x, *y, RGBColor(120, 120, 120))))?
            .label("baselines")
            .legend(|(x, y)| Circle::new((x + 10, y), 5, RGBColor(120, 120, 120).filled()));
        let blue = RGBColor(30, 90, 200);
        let mut line = policies.iter().map(|(_, x, y)| (*x, *y)).collect::<Vec<_>>();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.draw_series(LineSeries::new(line, blue.stroke_width(2)))?;
        chart
            .draw_series(policies.iter().map(|(n, x, y)| label(n, *x, *y, blue)))?
            .label("a2rag policies")
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, blue.filled()));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::Invalid(format!("drawing {}: {e}", path.display())))
}
