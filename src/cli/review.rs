//! `a2rag review`: a line-oriented loop over the pending proposals, each decision an
//! [`Engine::decide`]. Plain stdin lines rather than a TUI so that it works over ssh, in
//! scripts and in tests.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};

use a2rag::curate::{Proposal, Status};
use a2rag::engine::Decision;
use a2rag::error::Error;
use a2rag::kb::model::RawTriple;

use super::Door;

/// What a review session decided.
#[derive(Default)]
struct Summary {
    approved: usize,
    rejected: usize,
    edited: usize,
    skipped: usize,
}

/// Asks for one key per pending proposal: `a` approve, `r` reject, `e` edit (then subject,
/// relation, object; empty keeps the proposed value), `s` skip, `q` quit. End of input quits.
pub fn review(door: &Door, who: Option<String>) -> Result<ExitCode> {
    let engine = door.open_existing()?;
    let (mut input, mut output) = (std::io::stdin().lock(), std::io::stdout().lock());
    let who = door.owner.author(who.as_deref()).who;
    // Checked once here: every decision would refuse it, one "not applied" at a time.
    if who.trim().is_empty() {
        anyhow::bail!("the reviewer's name is empty: pass --who NAME (default: $USER)");
    }
    let decide = |id, decision| door.runtime.block_on(engine.decide(&door.owner, &door.kb, id, Some(&who), decision));
    let pending = door.runtime.block_on(engine.proposals(&door.owner, &door.kb, Some(Status::Pending)))?;
    let mut summary = Summary::default();
    writeln!(output, "{} pending proposal(s)", pending.len())?;
    'proposals: for (n, p) in pending.iter().enumerate() {
        show(&mut output, n + 1, pending.len(), p)?;
        loop {
            write!(output, "[a]pprove [r]eject [e]dit [s]kip [q]uit > ")?;
            output.flush()?;
            let Some(answer) = read_line(&mut input)? else { break 'proposals };
            let outcome = match answer.as_str() {
                "a" => decide(p.id, Decision::Approve).map(|_| summary.approved += 1),
                "r" => decide(p.id, Decision::Reject).map(|_| summary.rejected += 1),
                "e" => {
                    let Some(corrected) = ask_triple(&mut input, &mut output, &p.triple)? else { break 'proposals };
                    decide(p.id, Decision::Edit(corrected)).map(|_| summary.edited += 1)
                }
                "s" => {
                    summary.skipped += 1;
                    Ok(())
                }
                "q" => break 'proposals,
                _ => {
                    writeln!(output, "please answer a, r, e, s or q")?;
                    continue;
                }
            };
            match outcome {
                Ok(()) => continue 'proposals,
                // Someone else decided it meanwhile (the daemon, another reviewer), or the
                // chunk it points at was deleted: say so and move on.
                Err(e @ (Error::Invalid(_) | Error::NotFound(_) | Error::Conflict(_))) => {
                    writeln!(output, "not applied: {e}")?;
                    continue 'proposals;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    writeln!(
        output,
        "approved {}, rejected {}, edited {}, skipped {}",
        summary.approved, summary.rejected, summary.edited, summary.skipped
    )?;
    Ok(ExitCode::SUCCESS)
}

fn show(output: &mut impl Write, n: usize, total: usize, p: &Proposal) -> std::io::Result<()> {
    writeln!(output)?;
    writeln!(
        output,
        "({n}/{total}) proposal {}: {} -[{}]-> {}",
        p.id, p.triple.subject, p.triple.relation, p.triple.object
    )?;
    writeln!(
        output,
        "  from {} (chunk {}, bytes {}..{}): {}",
        p.doc_id,
        p.chunk,
        p.span.0,
        p.span.1,
        p.sentence.trim()
    )?;
    writeln!(output, "  asked: {}", p.question)
}

fn read_line(input: &mut impl BufRead) -> Result<Option<String>> {
    let mut line = String::new();
    let n = input.read_line(&mut line).context("reading the review's input")?;
    Ok((n > 0).then(|| line.trim().to_string()))
}

/// Prompts for each part of a corrected triple; `None` on end of input.
fn ask_triple(input: &mut impl BufRead, output: &mut impl Write, proposed: &RawTriple) -> Result<Option<RawTriple>> {
    let mut ask = |label: &str, current: &str| -> Result<Option<String>> {
        write!(output, "  {label} [{current}]: ")?;
        output.flush()?;
        Ok(read_line(input)?.map(|answer| if answer.is_empty() { current.to_string() } else { answer }))
    };
    let Some(subject) = ask("subject", &proposed.subject)? else { return Ok(None) };
    let Some(relation) = ask("relation", &proposed.relation)? else { return Ok(None) };
    let Some(object) = ask("object", &proposed.object)? else { return Ok(None) };
    Ok(Some(RawTriple { subject, relation, object }))
}
