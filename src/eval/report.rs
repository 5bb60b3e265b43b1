//! Report files: `report.json`, `report.md`, `node_deletion.svg` and `answers.jsonl`.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

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
    Ok(())
}

/// One JSON line per question: the answers of a2rag and of the reader alone.
pub fn write_answers(records: &[QuestionRecord], dir: &Path) -> Result<()> {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r).map_err(|e| Error::Invalid(e.to_string()))?);
        out.push('\n');
    }
    let path = dir.join("answers.jsonl");
    std::fs::write(&path, out).map_err(|e| Error::io(&path, e))
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
