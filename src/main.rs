//! The `a2rag` command line: the binary edge, where library errors become `anyhow` reports.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use a2rag::config::{LogFormat, Settings};
use a2rag::control::QueryRequest;
use a2rag::engine::Engine;
use a2rag::ingest::{self, triples::TripleImport};
use a2rag::kb::SearchMode;

#[derive(Parser)]
#[command(name = "a2rag", version, about = "Adaptive agentic graph retrieval over your documents")]
struct Cli {
    /// Configuration file (TOML); only the keys it sets override the defaults.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Data directory (overrides `data_dir`).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Log output format.
    #[arg(long, global = true, value_parser = ["human", "json"])]
    log_format: Option<String>,
    /// More logging (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest files or directories (.txt, .md, .jsonl, corpus .json).
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Precomputed triples (OpenIE JSON or JSONL) used instead of the extractor.
        #[arg(long)]
        triples: Option<PathBuf>,
    },
    /// Remove a document (by id) and everything derived from it.
    Delete { id: String },
    /// Counts and index sizes.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Text search over chunks (sanity tool).
    Search {
        query: String,
        #[arg(long, value_enum, default_value = "hybrid")]
        mode: ModeArg,
        #[arg(short, default_value_t = 5)]
        k: usize,
    },
    /// Ask a question: gate, retrieve, answer, verify, rewrite.
    Ask {
        question: String,
        /// Named policy from the policies directory.
        #[arg(long)]
        policy: Option<String>,
        /// Print the full response as JSON.
        #[arg(long)]
        json: bool,
    },
    /// JSON-RPC 2.0 daemon (newline-delimited) on stdio and/or sockets; see docs/rpc.md.
    Serve {
        /// Serve on stdin/stdout.
        #[arg(long)]
        stdio: bool,
        /// unix:PATH or tcp:HOST:PORT (repeatable).
        #[arg(long, value_name = "ADDR")]
        listen: Vec<a2rag::rpc::Listen>,
    },
    /// Check the knowledge base's integrity (provenance, edges, documents, curation
    /// decisions); exits non-zero and lists the violations when there are any.
    Check,
    /// Print the curation audit log, one JSON object per line, oldest first.
    Audit,
    /// Review pending triple proposals: a=approve, r=reject, e=edit, s=skip, q=quit.
    Review {
        /// Name recorded in the audit log (default: $USER).
        #[arg(long)]
        who: Option<String>,
    },
    /// Download a sentence-transformer from the Hugging Face hub (or the HF_ENDPOINT mirror)
    /// into `embed.hub_cache`, for `embed.provider = "minilm"`; prints where the files went.
    FetchModel {
        /// Hub repository (default: `embed.model_id`).
        model_id: Option<String>,
    },
    /// Re-embed every chunk, summary and entity with the configured embedder (after
    /// changing `embed.provider` or `embed.dim`).
    Reindex,
    /// Evaluate a2rag and the baselines on a dataset directory (corpus.json + questions.json).
    Eval {
        #[arg(long)]
        dataset: PathBuf,
        /// Precomputed triples to import instead of running the extractor.
        #[arg(long)]
        triples: Option<PathBuf>,
        /// Shares of graph nodes to delete for the extraction-loss stress test.
        #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.4")]
        drop_nodes: Vec<f64>,
        /// Evaluate only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long, default_value_t = 13)]
        seed: u64,
        /// Where report.json, report.md, node_deletion.svg and the eval KB go.
        #[arg(long, default_value = "eval-out")]
        out: PathBuf,
        /// Rounds of the iterative (IRCoT-style) baseline.
        #[arg(long, default_value_t = 3)]
        iterative_steps: usize,
    },
    /// Benchmarks; each prints a ratio against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Ingest throughput (passages/s) with the configured (default: embedded) pipeline.
    Ingest {
        #[arg(long, default_value = "../shared/datasets/hotpotqa/corpus.json")]
        corpus: PathBuf,
    },
    /// PPR latency on a synthetic graph: power iteration vs forward push.
    Ppr {
        #[arg(long, default_value_t = 200_000)]
        nodes: usize,
        #[arg(long, default_value_t = 1_000_000)]
        edges: usize,
        #[arg(long, default_value_t = 100)]
        queries: usize,
    },
    /// Embedding throughput (sentences/s) of the configured embedder vs the hash embedder.
    Embed {
        #[arg(long, default_value = "../shared/datasets/hotpotqa/corpus.json")]
        corpus: PathBuf,
        #[arg(long, default_value_t = 32)]
        batch: usize,
    },
    /// JSON-RPC queries/s and latency over a unix socket against the KB in --data-dir
    /// (ingest first), served in-process with the configured roles.
    Rpc {
        #[arg(long, default_value = "../shared/datasets/musique")]
        dataset: PathBuf,
        #[arg(long, value_delimiter = ',', default_value = "1,16")]
        clients: Vec<usize>,
        #[arg(long, default_value_t = 500)]
        queries: usize,
    },
    /// Seconds to ingest one synthetic document of each size (MB), and time per MB against
    /// the smallest size: ingest of one large document must stay linear.
    LargeDoc {
        #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
        megabytes: Vec<usize>,
    },
    /// Retrieval latency (all stages, no LLM) over a dataset's questions.
    Retrieve {
        #[arg(long, default_value = "../shared/datasets/musique")]
        dataset: PathBuf,
        #[arg(long)]
        triples: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Bm25,
    Vector,
    Hybrid,
}

impl From<ModeArg> for SearchMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Bm25 => SearchMode::Bm25,
            ModeArg::Vector => SearchMode::Vector,
            ModeArg::Hybrid => SearchMode::Hybrid,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_settings(cli: &Cli) -> Result<Settings> {
    let mut settings = Settings::load(cli.config.as_deref())?;
    if let Some(dir) = &cli.data_dir {
        settings.data_dir = dir.clone();
    }
    if let Some(format) = &cli.log_format {
        settings.log.format = if format == "json" { LogFormat::Json } else { LogFormat::Human };
    }
    match cli.verbose {
        0 => {}
        1 => settings.log.level = "info".into(),
        _ => settings.log.level = "debug".into(),
    }
    Ok(settings)
}

fn init_tracing(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.log.level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match settings.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Human => builder.init(),
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let settings = load_settings(&cli)?;
    init_tracing(&settings);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let open = |settings: Settings| Engine::open(settings, cli.config.as_deref()).context("opening the knowledge base");
    // Commands that read a KB must not leave an empty one behind in a mistyped directory.
    let open_existing = |settings: Settings| {
        if !a2rag::kb::store::Store::exists(&settings.data_dir) {
            anyhow::bail!(
                "no knowledge base in {}: run `a2rag ingest` first, or point --data-dir at one",
                settings.data_dir.display()
            );
        }
        open(settings)
    };
    match &cli.command {
        Command::Ingest { paths, triples } => {
            let mut engine = open(settings)?;
            if let Some(file) = triples {
                engine.pipeline.triples = Some(TripleImport::load(file)?);
            }
            let mut bar = ProgressBar::default();
            let report = {
                let kb = engine.kb.get_mut();
                ingest::ingest_paths(kb, &engine.pipeline, paths, &mut bar)?
            };
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            for e in &report.errors {
                eprintln!("error: {e}");
            }
            let stats = engine.kb.get_mut().stats();
            let dropped = if report.triples_dropped > 0 { format!(", {} imported triples left out", report.triples_dropped) } else { String::new() };
            println!(
                "{} files: {} added, {} replaced, {} unchanged, {} errors{dropped}; KB has {} documents, {} chunks, {} nodes, {} edges",
                report.files, report.added, report.replaced, report.unchanged, report.errors.len(), stats.documents, stats.chunks, stats.nodes, stats.edges
            );
            Ok(if report.failed() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        Command::Delete { id } => {
            let mut engine = open_existing(settings)?;
            let kb = engine.kb.get_mut();
            if kb.delete_document(id)? {
                kb.flush()?;
                println!("deleted {id}");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("error: no document with id `{id}`");
                Ok(ExitCode::FAILURE)
            }
        }
        Command::Stats { json } => {
            let mut engine = open_existing(settings)?;
            let stats = engine.kb.get_mut().stats();
            if *json {
                println!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                let v = serde_json::to_value(&stats)?;
                for (k, v) in v.as_object().into_iter().flatten() {
                    println!("{k:>18}: {v}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { query, mode, k } => {
            let mut engine = open_existing(settings)?;
            let kb = engine.kb.get_mut();
            for (rank, (id, score)) in kb.search(query, (*mode).into(), *k, (&kb.settings().retrieve).into())?.into_iter().enumerate() {
                if let Some(chunk) = kb.chunk(id) {
                    println!("{:>2}. [{score:.4}] {} — {}", rank + 1, kb.chunk_title(chunk), preview(&chunk.text, 160));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ask { question, policy, json } => {
            let engine = open_existing(settings)?;
            let request = QueryRequest { question: question.clone(), policy: policy.clone(), budget: None };
            let response = runtime.block_on(engine.query(&request))?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&response)?);
            } else {
                print_response(&response);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::FetchModel { model_id } => {
            let model_id = model_id.clone().unwrap_or_else(|| settings.embed.model_id.clone());
            let cache = &settings.embed.hub_cache;
            let fetched = a2rag::embed::hub::fetch(&a2rag::net::Remote::new(), &model_id, cache, true)?;
            let how = if fetched.from_cache {
                "already in the cache".to_string()
            } else {
                format!("downloaded from {}", a2rag::embed::hub::endpoint())
            };
            println!("{model_id} ({how}) is in {}", fetched.dir.display());
            for file in &fetched.files {
                println!("  {file}");
            }
            if model_id.trim() == settings.embed.model_id.trim() {
                println!("embed.provider = \"minilm\" uses it when embed.model_dir is empty and {} has no model", a2rag::embed::minilm::DEFAULT_MODEL_DIR);
            } else {
                println!("to use it: embed.provider = \"minilm\" with embed.model_id = \"{}\" (or embed.model_dir = \"{}\")", model_id.trim(), fetched.dir.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Reindex => {
            let embedder = a2rag::embed::from_settings(&settings.embed, &a2rag::net::Remote::new())?;
            let r = a2rag::kb::reindex::reindex(&settings, embedder)?;
            println!(
                "re-embedded {} chunks, {} summaries, {} entities with {} (was {}) in {:.1} s",
                r.chunks, r.summaries, r.nodes, r.embedder, r.previous_embedder.as_deref().unwrap_or("none"), r.seconds
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval { dataset, triples, drop_nodes, limit, seed, out, iterative_steps } => {
            let options = a2rag::eval::EvalOptions {
                dataset: dataset.clone(),
                triples: triples.clone(),
                drop_nodes: drop_nodes.clone(),
                limit: *limit,
                seed: *seed,
                out_dir: out.clone(),
                iterative_steps: *iterative_steps,
            };
            let report = a2rag::eval::run(settings, &options, &mut ProgressBar::default())?;
            println!("{}", a2rag::eval::report_markdown(&report));
            println!("(written to {})", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(bench) => {
            let scratch = std::env::temp_dir().join(format!("a2rag-bench-{}", std::process::id()));
            let text = match bench {
                BenchCommand::Ingest { corpus } => a2rag::bench::ingest(settings, corpus, &scratch)?,
                BenchCommand::Ppr { nodes, edges, queries } => {
                    a2rag::bench::ppr(*nodes, *edges, *queries, &settings.retrieve)
                }
                BenchCommand::Retrieve { dataset, triples } => a2rag::bench::retrieve(settings, dataset, triples.as_deref(), &scratch)?,
                BenchCommand::LargeDoc { megabytes } => a2rag::bench::large_doc(settings, megabytes, &scratch)?,
                BenchCommand::Embed { corpus, batch } => a2rag::bench::embed(&settings, corpus, *batch)?,
                BenchCommand::Rpc { dataset, clients, queries } => {
                    let engine = std::sync::Arc::new(open(settings)?);
                    runtime.block_on(a2rag::bench::rpc(engine, dataset, clients, *queries, &scratch))?
                }
            };
            let _ = std::fs::remove_dir_all(&scratch);
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { stdio, listen } => {
            let engine = std::sync::Arc::new(open(settings)?);
            let options = a2rag::rpc::ServeOptions { stdio: *stdio, listen: listen.clone(), ..Default::default() };
            let served = runtime.block_on(async {
                let daemon = a2rag::rpc::Daemon::bind(engine, options).await?;
                for address in daemon.addresses() {
                    eprintln!("a2rag: listening on {address}");
                }
                if let Some(file) = daemon.token_file() {
                    eprintln!("a2rag: TCP clients must send the token in {} (auth)", file.display());
                }
                daemon.run().await
            });
            // Dropping the runtime would wait for a write that outlived the shutdown grace
            // period; sled keeps each document's batch atomic, so exiting is safe.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let mut engine = open_existing(settings)?;
            let kb = engine.kb.get_mut();
            let mut violations = kb.integrity_violations();
            violations.extend(a2rag::curate::integrity_violations(kb)?);
            for v in &violations {
                println!("violation: {v}");
            }
            let stats = kb.stats();
            println!("{} violations in {} documents, {} chunks, {} nodes, {} edges", violations.len(), stats.documents, stats.chunks, stats.nodes, stats.edges);
            Ok(if violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Audit => {
            let mut engine = open_existing(settings)?;
            let mut out = std::io::stdout().lock();
            for entry in a2rag::curate::audit_log(engine.kb.get_mut())? {
                use std::io::Write;
                writeln!(out, "{}", serde_json::to_string(&entry)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Review { who } => {
            let engine = open_existing(settings)?;
            let who = who.clone().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "unknown".into());
            a2rag::curate::review(&engine.kb, std::io::stdin().lock(), std::io::stdout().lock(), &who)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_response(r: &a2rag::control::QueryResponse) {
    match (&r.answer, &r.abstained) {
        (Some(a), _) => println!("Answer: {a}"),
        (None, Some(reason)) => println!("Abstained: {reason}"),
        _ => println!("No answer"),
    }
    println!("Stage: {}   iterations: {}   LLM calls: {}   tokens: {}", stage_name(r.stage), r.iterations, r.ledger.llm_calls, r.ledger.tokens());
    println!("\nEvidence:");
    for (i, e) in r.evidence.iter().take(5).enumerate() {
        let cited = if r.cited.contains(&e.chunk) { "*" } else { " " };
        println!("{cited}{:>2}. {} (chunk {}, bytes {}..{}): {}", i + 1, e.title, e.chunk, e.span.0, e.span.1, preview(&e.text, 140));
    }
    if !r.paths.is_empty() {
        println!("\nGraph paths:");
        for p in r.paths.iter().take(3) {
            let hops: Vec<String> = p.iter().map(|h| format!("{} -[{}]-> {}", h.subject, h.relation, h.object)).collect();
            println!("  {}", hops.join(" ; "));
        }
    }
    println!("\nTrace:");
    for t in &r.trace {
        println!("  [{}] {} -> {} {}", t.iteration, t.from, t.to, t.detail);
    }
    for (i, verdicts) in r.verdicts.iter().enumerate() {
        let v: Vec<String> = verdicts.iter().map(|v| format!("{:?}={}", v.check, if v.pass { "pass" } else { "fail" })).collect();
        println!("  verify #{}: {}", i + 1, v.join(", "));
    }
}

/// The stage as the JSON output names it ("global"), or "none" when retrieval did not run.
fn stage_name(stage: Option<a2rag::retrieve::Stage>) -> String {
    stage.and_then(|s| serde_json::to_value(s).ok()).and_then(|v| v.as_str().map(String::from)).unwrap_or_else(|| "none".into())
}

fn preview(text: &str, n: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// indicatif bar for ingest; hidden when stderr is not a terminal.
#[derive(Default)]
struct ProgressBar(Option<indicatif::ProgressBar>);

impl ingest::Progress for ProgressBar {
    fn start(&mut self, total: usize) {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} ingest [{bar:40}] {pos}/{len} docs {per_sec} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        self.0 = Some(bar);
    }
    fn advance(&mut self, _doc: &str) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}
