//! How the answers and evidence of `ask` and `retrieve` read to a person.

pub fn print_response(r: &a2rag::control::QueryResponse) {
    let confidence = r.confidence.map_or_else(String::new, |c| format!("   (confidence {c:.2})"));
    let form = if r.answer_form == Some(a2rag::control::answer::AnswerForm::Sentence) {
        " [a sentence, not a short answer]"
    } else {
        ""
    };
    match (&r.answer, &r.abstained) {
        (Some(a), _) => say!("Answer: {a}{form}{confidence}"),
        (None, Some(reason)) => {
            say!("Abstained: {reason}");
            if let Some(c) = &r.candidate {
                say!("  (withheld candidate: {c}{confidence})");
            }
        }
        _ => say!("No answer"),
    }
    if !r.answer_path.is_empty() {
        let hops: Vec<String> =
            r.answer_path.iter().map(|h| format!("{} -[{}]-> {}", h.subject, h.relation, h.object)).collect();
        say!("Answer path: {}", hops.join(" ; "));
    }
    say!(
        "Stage: {}   iterations: {}   LLM calls: {}   tokens: {}",
        stage_name(r.stage),
        r.iterations,
        r.ledger.llm_calls,
        r.ledger.tokens()
    );
    say!("\nEvidence:");
    for (i, e) in r.evidence.iter().take(5).enumerate() {
        let cited = if r.cited.contains(&e.chunk) { "*" } else { " " };
        say!(
            "{cited}{:>2}. {} (chunk {}, bytes {}..{}): {}",
            i + 1,
            e.heading(),
            e.chunk,
            e.span.0,
            e.span.1,
            preview(&e.text, 140)
        );
    }
    if !r.paths.is_empty() {
        say!("\nGraph paths:");
        for p in r.paths.iter().take(3) {
            let hops: Vec<String> =
                p.iter().map(|h| format!("{} -[{}]-> {}", h.subject, h.relation, h.object)).collect();
            say!("  {}", hops.join(" ; "));
        }
    }
    say!("\nTrace:");
    for t in &r.trace {
        say!("  [{}] {} -> {} {}", t.iteration, t.from, t.to, t.detail);
    }
    for (i, verdicts) in r.verdicts.iter().enumerate() {
        let v: Vec<String> =
            verdicts.iter().map(|v| format!("{:?}={}", v.check, if v.pass { "pass" } else { "fail" })).collect();
        say!("  verify #{}: {}", i + 1, v.join(", "));
    }
}

pub fn print_retrieved(r: &a2rag::engine::Retrieved) {
    let gate = &r.gate;
    let Some(retrieval) = &r.retrieval else {
        say!("Out of scope (similarity {:.3} < threshold {:.3}): nothing retrieved", gate.similarity, gate.threshold);
        return;
    };
    say!(
        "In scope (similarity {:.3})   stage: {}   sufficient: {}   {:.1} ms",
        gate.similarity,
        stage_name(Some(retrieval.stage)),
        retrieval.sufficient,
        retrieval.micros as f64 / 1000.0
    );
    for (i, c) in retrieval.chunks.iter().enumerate() {
        say!(
            "{:>2}. [{:.4}] {} ({}, chunk {}, bytes {}..{}): {}",
            i + 1,
            c.score,
            c.heading(),
            c.doc_id,
            c.chunk,
            c.span.0,
            c.span.1,
            preview(&c.text, 140)
        );
        for path in retrieval.paths.iter().filter(|p| p.iter().any(|h| h.chunk == c.chunk)).take(2) {
            let hops: Vec<String> =
                path.iter().map(|h| format!("{} -[{}]-> {}", h.subject, h.relation, h.object)).collect();
            say!("      via {}", hops.join(" ; "));
        }
    }
}

/// The stage as the JSON output names it ("global"), or "none" when retrieval did not run.
fn stage_name(stage: Option<a2rag::retrieve::Stage>) -> String {
    stage
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| "none".into())
}

pub fn preview(text: &str, n: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}
