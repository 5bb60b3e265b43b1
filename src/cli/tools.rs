//! The commands that are tools of their own rather than doors over an engine: fetching a
//! model, evaluating on a dataset (in a KB of its own), and the benchmarks.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;

use a2rag::bench::scale::{ScaleOptions, ScaleStep};
use a2rag::embed::hub;
use a2rag::eval::EvalOptions;

use super::args::{BenchCommand, EvalArgs};
use super::{Door, ProgressBar};

pub fn fetch_model(door: &Door, model_id: Option<String>) -> Result<ExitCode> {
    let settings = &door.settings;
    let model_id = model_id.unwrap_or_else(|| settings.embed.model_id.clone());
    let fetched = hub::fetch(&a2rag::net::Remote::new(), &model_id, &settings.embed.hub_cache, true)?;
    let how = if fetched.from_cache {
        "already in the cache".to_string()
    } else {
        format!("downloaded from {}", hub::endpoint())
    };
    say!("{model_id} ({how}) is in {}", fetched.dir.display());
    for file in &fetched.files {
        say!("  {file}");
    }
    if model_id.trim() == settings.embed.model_id.trim() {
        say!(
            "embed.provider = \"minilm\" uses it when embed.model_dir is empty and {} has no model",
            a2rag::embed::minilm::DEFAULT_MODEL_DIR
        );
    } else {
        say!(
            "to use it: embed.provider = \"minilm\" with embed.model_id = \"{}\" (or embed.model_dir = \"{}\")",
            model_id.trim(),
            fetched.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn eval(door: &Door, args: EvalArgs) -> Result<ExitCode> {
    let options = EvalOptions {
        dataset: args.dataset,
        triples: args.triples,
        drop_nodes: args.drop_nodes,
        limit: args.limit,
        seed: args.seed,
        out_dir: args.out,
        iterative_steps: args.iterative_steps,
        reuse_kb: args.reuse_kb,
        policies: args.policies,
        lower_case: args.lower_case,
    };
    let report = a2rag::eval::run(door.settings.clone(), &options, &mut ProgressBar::default())?;
    say!("{}", a2rag::eval::report_markdown(&report));
    say!("(written to {})", options.out_dir.display());
    Ok(ExitCode::SUCCESS)
}

pub fn bench(door: &Door, bench: BenchCommand) -> Result<ExitCode> {
    let settings = door.settings.clone();
    let scratch = std::env::temp_dir().join(format!("a2rag-bench-{}", std::process::id()));
    let text = match bench {
        BenchCommand::Ingest { corpus } => a2rag::bench::ingest(settings, &corpus, &scratch)?,
        BenchCommand::Store { postgres, dataset } => a2rag::bench::store(settings, &dataset, &postgres, &scratch)?,
        BenchCommand::Ppr { nodes, edges, queries } => a2rag::bench::ppr(nodes, edges, queries, &settings.retrieve)?,
        BenchCommand::Retrieve { dataset, triples } => {
            a2rag::bench::retrieve(settings, &dataset, triples.as_deref(), &scratch)?
        }
        BenchCommand::LargeDoc { megabytes, names, rounds } => {
            a2rag::bench::large_doc(settings, &megabytes, names, rounds as usize, &scratch)?
        }
        BenchCommand::Scale { sizes, questions, keep, dev } => {
            let options = ScaleOptions {
                sizes,
                questions,
                // Not the per-process scratch directory, which is removed below.
                scratch: std::env::temp_dir().join("a2rag-bench-scale"),
                keep,
                config: door.config().map(Into::into),
                dev,
            };
            a2rag::bench::scale::run(&options)?
        }
        BenchCommand::ScaleStep { step, size, questions, dir, dev } => {
            // A child of `bench scale`: its one JSON line is its report.
            let line = match step {
                ScaleStep::Ingest => a2rag::bench::scale::ingest_step(settings, size, &dir, dev.as_deref())?,
                ScaleStep::Serve => a2rag::bench::scale::serve_step(settings, size, questions, &dir, dev.as_deref())?,
            };
            say!("{line}");
            return Ok(ExitCode::SUCCESS);
        }
        BenchCommand::Embed { corpus, batch } => a2rag::bench::embed(&settings, &corpus, batch)?,
        BenchCommand::Rpc { dataset, clients, queries } => {
            let engine = Arc::new(door.open()?);
            door.runtime.block_on(a2rag::bench::rpc(engine, &dataset, &clients, queries, &scratch))?
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    say!("{text}");
    Ok(ExitCode::SUCCESS)
}
