//! The commands on one knowledge base: ingest, delete, list, count, search, ask, retrieve,
//! check and audit it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};

use a2rag::control::QueryRequest;
use a2rag::curate::AuditFilter;
use a2rag::engine::{IngestInput, Integrity, RetrieveRequest, SearchRequest};
use a2rag::ingest::source::Access;
use a2rag::ingest::triples::TripleImport;
use a2rag::kb::catalog::KbName;
use a2rag::kb::store::Location;

use super::args::ModeArg;
use super::print::{preview, print_response, print_retrieved};
use super::{Door, ProgressBar};

pub fn ingest(door: &Door, paths: Vec<PathBuf>, triples: Option<&Path>) -> Result<ExitCode> {
    // Read before the KB is opened: a mistyped triples path must not leave one behind.
    let triples = match triples {
        Some(file) => Some(TripleImport::load(file).context("reading the triples file (--triples)")?),
        None => None,
    };
    let mut engine = door.open()?;
    engine.pipeline.triples = triples;
    let engine = Arc::new(engine);
    // The user's own files: any path this process may read.
    let input = IngestInput {
        paths,
        access: Access::anywhere(engine.settings.ingest.max_file_bytes),
        documents: Vec::new(),
        source: "cli".into(),
    };
    let ingested = door.runtime.block_on(engine.ingest(&door.owner, &door.kb, input, ProgressBar::default()))?;
    let (report, stats) = (ingested.report, ingested.stats);
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for e in report.errors.iter().chain(&report.dropped_triples) {
        eprintln!("error: {e}");
    }
    let dropped = if report.triples_dropped > 0 {
        format!(", {} imported triples left out", report.triples_dropped)
    } else {
        String::new()
    };
    say!(
        "{} files: {} added, {} replaced, {} unchanged, {} errors{dropped}; KB has {} documents, {} chunks, {} nodes, {} edges",
        report.files,
        report.added,
        report.replaced,
        report.unchanged,
        report.errors.len(),
        stats.documents,
        stats.chunks,
        stats.nodes,
        stats.edges
    );
    Ok(if report.failed() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

pub fn delete(door: &Door, id: &str) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    door.runtime.block_on(engine.delete(&door.owner, &door.kb, id))?;
    say!("deleted {id}");
    Ok(ExitCode::SUCCESS)
}

pub fn docs(door: &Door, json: bool) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let docs = door.runtime.block_on(engine.documents(&door.owner, &door.kb))?;
    if json {
        say!("{}", serde_json::to_string_pretty(&docs)?);
    } else {
        for d in &docs {
            say!("{}\t{} chunks\t{}", d.id, d.chunks, d.title);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn kbs(door: &Door) -> Result<ExitCode> {
    let default = Location::of(&door.settings, &KbName::default());
    if !default.exists()? {
        anyhow::bail!("no knowledge base in {default}: run `a2rag ingest` first");
    }
    // Names only: an engine that opens no KB lists them without loading any.
    for name in door.open_without_kbs()?.kbs(&door.owner)? {
        say!("{name}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats(door: &Door, json: bool) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let stats = door.runtime.block_on(engine.stats(&door.owner, &door.kb))?;
    if json {
        say!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        let v = serde_json::to_value(&stats)?;
        for (k, v) in v.as_object().into_iter().flatten() {
            say!("{k:>18}: {v}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn search(door: &Door, query: String, mode: ModeArg, k: u16) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let request = SearchRequest { query, mode: mode.into(), k: usize::from(k) };
    let hits = door.runtime.block_on(engine.search(&door.owner, &door.kb, &request))?;
    for (rank, hit) in hits.iter().enumerate() {
        say!("{:>2}. [{:.4}] {} — {}", rank + 1, hit.score, hit.title, preview(&hit.text, 160));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn ask(door: &Door, question: String, policy: Option<String>, json: bool) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let request = QueryRequest { question, policy, budget: None };
    let answered = door.runtime.block_on(engine.query(&door.owner, &door.kb, &request))?;
    if json {
        say!("{}", serde_json::to_string_pretty(&answered)?);
    } else {
        print_response(&answered.response);
        if !answered.proposals.is_empty() {
            say!("\n{} triple(s) proposed for review (`a2rag review`)", answered.proposals.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn retrieve(
    door: &Door,
    question: String,
    policy: Option<String>,
    top_k: Option<usize>,
    json: bool,
) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let request = RetrieveRequest { question, policy, top_k };
    let retrieved = door.runtime.block_on(engine.retrieve(&door.owner, &door.kb, &request))?;
    if json {
        say!("{}", serde_json::to_string_pretty(&retrieved)?);
    } else {
        print_retrieved(&retrieved);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(door: &Door, repair: bool) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let Integrity { violations, stats, released, .. } =
        door.runtime.block_on(engine.check(&door.owner, &door.kb, repair))?;
    for triple in released.unwrap_or_default() {
        say!("released: `{triple}` can be proposed again");
    }
    for v in &violations {
        say!("violation: {v}");
    }
    say!(
        "{} violations in {} documents, {} chunks, {} nodes, {} edges",
        violations.len(),
        stats.documents,
        stats.chunks,
        stats.nodes,
        stats.edges
    );
    Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub fn audit(door: &Door, who: Option<String>) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let filter = AuditFilter { token: who, ..Default::default() };
    for entry in door.runtime.block_on(engine.audit(&door.owner, &door.kb, &filter))? {
        say!("{}", serde_json::to_string(&entry)?);
    }
    Ok(ExitCode::SUCCESS)
}
