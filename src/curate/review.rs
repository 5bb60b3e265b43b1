//! `a2rag review`: a line-oriented review loop over pending proposals. Plain stdin lines
//! rather than a TUI so that it works over ssh, in scripts and in tests.

use std::io::{BufRead, Write};

use serde::Serialize;

use super::{Proposal, Status};
use crate::error::{Error, Result};
use crate::kb::Kb;
use crate::kb::model::RawTriple;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReviewSummary {
    pub approved: usize,
    pub rejected: usize,
    pub edited: usize,
    pub skipped: usize,
}

/// Walks the pending proposals, asking for one key per proposal:
/// `a` approve, `r` reject, `e` edit (then subject, relation, object; empty keeps the
/// proposed value), `s` skip, `q` quit. End of input quits. `kb` is the engine's lock; must not
/// be called from inside an async runtime (it takes the lock blocking).
pub fn review(
    kb: &tokio::sync::RwLock<Kb>,
    mut input: impl BufRead,
    mut output: impl Write,
    by: &super::Author,
) -> Result<ReviewSummary> {
    // Checked once here: every decision would refuse it, one "not applied" at a time.
    if by.who.trim().is_empty() {
        return Err(Error::Invalid("the reviewer's name is empty: pass --who NAME (default: $USER)".into()));
    }
    let out_err = |e| Error::io("<review output>", e);
    let pending = super::list(&kb.blocking_read(), Some(Status::Pending))?;
    let mut summary = ReviewSummary::default();
    writeln!(output, "{} pending proposal(s)", pending.len()).map_err(out_err)?;
    'proposals: for (n, p) in pending.iter().enumerate() {
        show(&mut output, n + 1, pending.len(), p).map_err(out_err)?;
        loop {
            write!(output, "[a]pprove [r]eject [e]dit [s]kip [q]uit > ").map_err(out_err)?;
            output.flush().map_err(out_err)?;
            let Some(answer) = read_line(&mut input)? else { break 'proposals };
            let outcome = match answer.as_str() {
                "a" => super::approve(&mut kb.blocking_write(), p.id, by).map(|_| summary.approved += 1),
                "r" => super::reject(&mut kb.blocking_write(), p.id, by).map(|_| summary.rejected += 1),
                "e" => {
                    let Some(corrected) = ask_triple(&mut input, &mut output, &p.triple)? else { break 'proposals };
                    super::edit(&mut kb.blocking_write(), p.id, by, corrected).map(|_| summary.edited += 1)
                }
                "s" => {
                    summary.skipped += 1;
                    Ok(())
                }
                "q" => break 'proposals,
                _ => {
                    writeln!(output, "please answer a, r, e, s or q").map_err(out_err)?;
                    continue;
                }
            };
            match outcome {
                Ok(()) => continue 'proposals,
                // Someone else decided it meanwhile (the daemon, another reviewer), or the
                // chunk it points at was deleted: say so and move on.
                Err(e @ (Error::Invalid(_) | Error::NotFound(_))) => {
                    writeln!(output, "not applied: {e}").map_err(out_err)?;
                    continue 'proposals;
                }
                Err(e) => return Err(e),
            }
        }
    }
    writeln!(
        output,
        "approved {}, rejected {}, edited {}, skipped {}",
        summary.approved, summary.rejected, summary.edited, summary.skipped
    )
    .map_err(out_err)?;
    Ok(summary)
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
    let n = input.read_line(&mut line).map_err(|e| Error::io("<review input>", e))?;
    Ok((n > 0).then(|| line.trim().to_string()))
}

/// Prompts for each part of a corrected triple; `None` on end of input.
fn ask_triple(input: &mut impl BufRead, output: &mut impl Write, proposed: &RawTriple) -> Result<Option<RawTriple>> {
    let mut ask = |label: &str, current: &str| -> Result<Option<String>> {
        write!(output, "  {label} [{current}]: ")
            .and_then(|()| output.flush())
            .map_err(|e| Error::io("<review output>", e))?;
        Ok(read_line(input)?.map(|answer| if answer.is_empty() { current.to_string() } else { answer }))
    };
    let Some(subject) = ask("subject", &proposed.subject)? else { return Ok(None) };
    let Some(relation) = ask("relation", &proposed.relation)? else { return Ok(None) };
    let Some(object) = ask("object", &proposed.object)? else { return Ok(None) };
    Ok(Some(RawTriple { subject, relation, object }))
}
