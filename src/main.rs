//! The `a2rag` command line: the binary edge, where library errors become `anyhow` reports.
//! Each command is one function of [`cli`]; this file only hands it its arguments.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cli::{Cli, Command, Door};

fn main() -> ExitCode {
    let args = Cli::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Cli) -> Result<ExitCode> {
    let door = Door::new(&args)?;
    match args.command {
        Command::Ingest { paths, triples } => cli::kb::ingest(&door, paths, triples.as_deref()),
        Command::Delete { id } => cli::kb::delete(&door, &id),
        Command::Docs { json } => cli::kb::docs(&door, json),
        Command::Kbs => cli::kb::kbs(&door),
        Command::Stats { json } => cli::kb::stats(&door, json),
        Command::Search { query, mode, k } => cli::kb::search(&door, query, mode, k),
        Command::Retrieve { question, policy, top_k, json } => cli::kb::retrieve(&door, question, policy, top_k, json),
        Command::Ask { question, policy, json } => cli::kb::ask(&door, question, policy, json),
        Command::Check { repair } => cli::kb::check(&door, repair),
        Command::Audit { who } => cli::kb::audit(&door, who),
        Command::Review { who } => cli::review::review(&door, who),
        Command::Serve { stdio, listen, http, watch } => cli::serve::serve(door, stdio, listen, http, watch),
        Command::Watch { dir } => cli::serve::watch(door, dir),
        Command::Mcp => cli::serve::mcp(door),
        Command::Token { action } => cli::token::token(&door, action, args.kb),
        Command::Reindex => cli::store::reindex(&door),
        Command::Migrate { to } => cli::store::migrate(&door, &to),
        Command::FetchModel { model_id } => cli::tools::fetch_model(&door, model_id),
        Command::Eval(eval) => cli::tools::eval(&door, eval),
        Command::Bench(bench) => cli::tools::bench(&door, bench),
    }
}
