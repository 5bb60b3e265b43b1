//! The commands that work on the store itself, with every knowledge base closed in this
//! process: reindex one KB, migrate them all.

use std::process::ExitCode;

use anyhow::Result;

use super::Door;

pub fn reindex(door: &Door) -> Result<ExitCode> {
    door.existing()?;
    let engine = door.open_without_kbs()?;
    let r = door.runtime.block_on(engine.reindex(&door.owner, &door.kb))?;
    say!(
        "re-embedded {} chunks, {} summaries, {} entities, {} facts with {} (was {}) in {:.1} s",
        r.chunks,
        r.summaries,
        r.nodes,
        r.facts,
        r.embedder,
        r.previous_embedder.as_deref().unwrap_or("none"),
        r.seconds
    );
    Ok(ExitCode::SUCCESS)
}

pub fn migrate(door: &Door, to: &str) -> Result<ExitCode> {
    let engine = door.open_without_kbs()?;
    let bar = indicatif::ProgressBar::new_spinner();
    let spinner = bar.clone();
    let copied = door.runtime.block_on(engine.migrate(&door.owner, to, move |kb, entries| {
        spinner.set_message(format!("{kb}: {entries} entries copied"));
        spinner.tick();
    }))?;
    bar.finish_and_clear();
    for migrated in copied {
        say!("{}: {} entries copied to {}", migrated.kb, migrated.entries, migrated.to);
    }
    Ok(ExitCode::SUCCESS)
}
