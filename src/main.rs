//! The `a2rag` command line: the binary edge, where library errors become `anyhow` reports.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use a2rag::config::{LogFormat, Settings};
use a2rag::control::QueryRequest;
use a2rag::engine::{Engine, IngestInput, RetrieveRequest};
use a2rag::ingest::source::Access;
use a2rag::ingest::{self, triples::TripleImport};
use a2rag::kb::SearchMode;
use a2rag::kb::catalog::{KbName, Open};
use a2rag::kb::store::Location;

/// `println!` that ends the process through [`stdout_failed`] when stdout cannot be written.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            stdout_failed(e)
        }
    }};
}

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
    /// Knowledge base to work on (letters, digits, `-`, `_`); each is its own store under
    /// DATA_DIR/kbs/, created by its first ingest. Default: the data directory's own.
    /// `token create` takes it more than once: the KBs the token may use.
    #[arg(long, global = true, value_name = "KB", action = clap::ArgAction::Append)]
    kb: Vec<KbName>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Make a token; it is printed once, on stdout, and only its hash is kept. `--kb K`
    /// (repeatable) limits it to those knowledge bases; without, it reaches all.
    Create {
        name: String,
        /// read (query, retrieve, stats, documents, graph, audit), write (+ ingest, delete),
        /// curate (+ proposals), admin (+ tokens, check --repair, shutdown).
        #[arg(long)]
        scope: a2rag::access::Scope,
        /// When it stops working: a duration (30d, 12h, 90m, 45s) from now, or `never`.
        #[arg(long, default_value = "never")]
        expires: String,
        /// Requests per second it may make (default: access.rps_SCOPE).
        #[arg(long)]
        rps: Option<f64>,
        /// Requests it may have running at once (default: access.concurrent_SCOPE).
        #[arg(long)]
        concurrent: Option<u32>,
    },
    /// The tokens, one JSON object per line (never the tokens themselves).
    List,
    /// Stop a token working: every daemon refuses it within access.refresh_ms.
    Revoke { name: String },
}

#[derive(Subcommand)]
enum Command {
    /// Ingest files or directories (.txt, .md, .html, .docx, .pdf, .jsonl, corpus .json).
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Precomputed triples (OpenIE JSON or JSONL) used instead of the extractor.
        #[arg(long)]
        triples: Option<PathBuf>,
    },
    /// Remove a document (by id) and everything derived from it.
    Delete { id: String },
    /// The documents of the knowledge base: id (what `delete` takes), chunks, title.
    Docs {
        #[arg(long)]
        json: bool,
    },
    /// The knowledge bases in the data directory (see --kb).
    Kbs,
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
        /// How many chunks to list (1 to 10000).
        #[arg(short, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=10_000))]
        k: u16,
    },
    /// Evidence only: the gate and the agentic retriever, no reader, no LLM call. Prints the
    /// ranked chunks with document, span and score, and the graph paths that led there.
    Retrieve {
        question: String,
        /// Named policy from the policies directory.
        #[arg(long)]
        policy: Option<String>,
        /// Chunks to return (default `retrieve.top_k`).
        #[arg(long)]
        top_k: Option<usize>,
        /// Print the full result as JSON.
        #[arg(long)]
        json: bool,
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
        /// unix:PATH, tcp:HOST:PORT or tls:HOST:PORT (repeatable; tls needs
        /// server.tls_cert and server.tls_key).
        #[arg(long, value_name = "ADDR")]
        listen: Vec<a2rag::rpc::Listen>,
        /// HOST:PORT for the curation web page and /metrics (default: `server.http`).
        #[arg(long, value_name = "HOST:PORT")]
        http: Option<String>,
        /// Also keep the KB equal to this directory, as `a2rag watch` does.
        #[arg(long, value_name = "DIR")]
        watch: Option<PathBuf>,
    },
    /// Keep the knowledge base equal to a directory: catch up with it, then apply every new,
    /// changed, renamed and deleted file within about a second, until interrupted.
    Watch { dir: PathBuf },
    /// Model Context Protocol server on stdin/stdout, for assistants (tools: retrieve, ask,
    /// ingest_text, kb_stats, list_proposals, review_proposal). Logs go to stderr; it exits
    /// when stdin ends.
    Mcp,
    /// Check the knowledge base's integrity (provenance, edges, documents, curation
    /// decisions); exits non-zero and lists the violations when there are any.
    Check {
        /// First release the triples whose decision names a missing proposal (left by a crash
        /// in older builds), so they can be proposed again.
        #[arg(long)]
        repair: bool,
    },
    /// Print the audit log (ingests, deletes, curation decisions, each with the token it
    /// came through), one JSON object per line, oldest first.
    Audit {
        /// Only the entries made with this token (`owner`: without one, e.g. the CLI).
        #[arg(long, value_name = "TOKEN")]
        who: Option<String>,
    },
    /// Named access tokens for the daemon's doors (JSON-RPC, web page, MCP); see README
    /// "Access". Works while a daemon runs.
    Token {
        #[command(subcommand)]
        action: TokenCommand,
    },
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
    /// Copy every knowledge base of the configured store into another store, exactly: a
    /// PostgreSQL database (`postgres://...` or `host=... dbname=...`) or a sled data
    /// directory. Stop the daemons writing the source first.
    Migrate {
        /// The destination: a PostgreSQL connection string, or a directory for sled.
        #[arg(long)]
        to: String,
    },
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
        /// Where report.json, report.md, answers.jsonl, node_deletion.svg and the eval KB go.
        #[arg(long, default_value = "eval-out")]
        out: PathBuf,
        /// Rounds of the iterative (IRCoT-style) baseline.
        #[arg(long, default_value_t = 3)]
        iterative_steps: usize,
        /// Keep the KB an earlier run ingested into --out instead of ingesting again: for
        /// comparing retrieval settings. Only use it with the same corpus, triples and ingest
        /// settings (embedder, extractor, chunking) as that run.
        #[arg(long)]
        reuse_kb: bool,
        /// Run a2rag under these named policies too (e.g. cheap,balanced,strict): one row
        /// each with its recall and cost, next to always escalating to the global stage.
        #[arg(long, value_delimiter = ',')]
        policies: Vec<String>,
    },
    /// Benchmarks; each prints a ratio against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The same corpus on sled and on PostgreSQL: ingest passages/s, KB open time, retrieval
    /// p50 (the database must hold no KB yet).
    Store {
        /// PostgreSQL connection string of an empty database.
        #[arg(long)]
        postgres: String,
        #[arg(long, default_value = "../shared/datasets/musique")]
        dataset: PathBuf,
    },
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
    /// What a KB costs as it grows: a synthetic encyclopaedia at each size, ingested, then
    /// opened and queried by a fresh process; ingest passages/s, open s, peak RSS, disk,
    /// a2rag and hybrid retrieval p50/p95, and each figure's log-log slope.
    Scale {
        /// Passages per KB, e.g. `10k,100k,1m`.
        #[arg(long, value_delimiter = ',', default_value = "10k,100k", value_parser = a2rag::bench::scale::parse_size)]
        sizes: Vec<usize>,
        /// Questions timed per size.
        #[arg(long, default_value_t = 200)]
        questions: usize,
        /// Keep each size's KB (in `a2rag-bench-scale` under the system's temporary
        /// directory) instead of removing it.
        #[arg(long)]
        keep: bool,
    },
    /// One step of `bench scale`, run in a child process.
    #[command(hide = true)]
    ScaleStep {
        #[arg(value_enum)]
        step: a2rag::bench::scale::ScaleStep,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        questions: usize,
        #[arg(long)]
        dir: PathBuf,
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

/// Ends the process on a failed write to stdout: quietly when its reader went away (`a2rag
/// search x | head -1`), where `println!` would panic, with the status of a Unix tool that
/// SIGPIPE ended (128 + 13), so that `pipefail` still sees a run that did not finish.
fn stdout_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    eprintln!("error: writing to standard output: {e}");
    std::process::exit(1)
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
    // Colour codes only for a person at a terminal, not in a log file or a pipe.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
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
    let kb = &match (cli.kb.as_slice(), &cli.command) {
        ([], _) | (_, Command::Token { .. }) => KbName::default(),
        ([one], _) => one.clone(),
        _ => anyhow::bail!(
            "--kb is given more than once: commands work on one knowledge base (`token create` takes several)"
        ),
    };
    // The person running the CLI owns the data directory: no token needed.
    let owner = &a2rag::access::Caller::owner();
    let existing = |settings: &Settings| {
        let location = Location::of(settings, kb);
        if !location.exists()? {
            anyhow::bail!(
                "no knowledge base in {location}: run `a2rag ingest` first, or point --data-dir (or --kb) at one"
            );
        }
        Ok(location)
    };
    let open_existing = |settings: Settings| {
        existing(&settings)?;
        open(settings).map(std::sync::Arc::new)
    };
    match &cli.command {
        Command::Ingest { paths, triples } => {
            // Read before the KB is opened: a mistyped triples path must not leave one behind.
            let triples = match triples {
                Some(file) => Some(TripleImport::load(file).context("reading the triples file (--triples)")?),
                None => None,
            };
            let mut engine = open(settings)?;
            engine.pipeline.triples = triples;
            let engine = std::sync::Arc::new(engine);
            // The user's own files: any path this process may read.
            let input = IngestInput {
                paths: paths.clone(),
                access: Access::anywhere(engine.settings.ingest.max_file_bytes),
                documents: Vec::new(),
                source: "cli".into(),
            };
            let ingested = runtime.block_on(engine.ingest(owner, kb, input, ProgressBar::default()))?;
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
        Command::Delete { id } => {
            let engine = open_existing(settings)?;
            runtime.block_on(engine.delete(owner, kb, id))?;
            say!("deleted {id}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Docs { json } => {
            let engine = open_existing(settings)?;
            let docs = runtime.block_on(engine.documents(owner, kb))?;
            if *json {
                say!("{}", serde_json::to_string_pretty(&docs)?);
            } else {
                for d in &docs {
                    say!("{}\t{} chunks\t{}", d.id, d.chunks, d.title);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Kbs => {
            let default = Location::of(&settings, &KbName::default());
            if !default.exists()? {
                anyhow::bail!("no knowledge base in {default}: run `a2rag ingest` first");
            }
            // Lists names only: opening the engine would load the default KB for nothing.
            for name in a2rag::kb::catalog::names(&settings)? {
                say!("{name}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { json } => {
            let engine = open_existing(settings)?;
            let stats = runtime.block_on(engine.stats(owner, kb))?;
            if *json {
                say!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                let v = serde_json::to_value(&stats)?;
                for (k, v) in v.as_object().into_iter().flatten() {
                    say!("{k:>18}: {v}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Search { query, mode, k } => {
            // Without a word every score is noise: a list would look like an answer.
            if !query.chars().any(char::is_alphanumeric) {
                anyhow::bail!("nothing to search for: give at least one word");
            }
            let engine = open_existing(settings)?;
            let shared = runtime.block_on(engine.kb(kb, Open::Existing))?;
            let kb = shared.blocking_read();
            let query = a2rag::embed::EmbeddedQuery::new(kb.embedder().as_ref(), query)?;
            for (rank, (id, score)) in kb
                .search(&query, (*mode).into(), usize::from(*k), (&kb.settings().retrieve).into())?
                .into_iter()
                .enumerate()
            {
                if let Some(chunk) = kb.chunk(id) {
                    say!("{:>2}. [{score:.4}] {} — {}", rank + 1, kb.chunk_title(chunk), preview(&chunk.text, 160));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Ask { question, policy, json } => {
            let engine = open_existing(settings)?;
            let request = QueryRequest { question: question.clone(), policy: policy.clone(), budget: None };
            let answered = runtime.block_on(engine.query(owner, kb, &request))?;
            if *json {
                say!("{}", serde_json::to_string_pretty(&answered)?);
            } else {
                print_response(&answered.response);
                if !answered.proposals.is_empty() {
                    say!("\n{} triple(s) proposed for review (`a2rag review`)", answered.proposals.len());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Retrieve { question, policy, top_k, json } => {
            let engine = open_existing(settings)?;
            let request = RetrieveRequest { question: question.clone(), policy: policy.clone(), top_k: *top_k };
            let retrieved = runtime.block_on(engine.retrieve(owner, kb, &request))?;
            if *json {
                say!("{}", serde_json::to_string_pretty(&retrieved)?);
            } else {
                print_retrieved(&retrieved);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp => {
            let engine = std::sync::Arc::new(open(settings)?);
            let caller = a2rag::mcp::caller_from_env(&engine)?;
            let served = runtime.block_on(a2rag::mcp::serve_stdio(engine, caller, kb.clone()));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
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
        Command::Reindex => {
            let embedder = a2rag::embed::from_settings(&settings.embed, &a2rag::net::Remote::new())?;
            let r = a2rag::kb::reindex::reindex_at(&existing(&settings)?, embedder)?;
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
        Command::Migrate { to } => {
            let destination = a2rag::kb::catalog::destination(&settings, to);
            let bar = indicatif::ProgressBar::new_spinner();
            let copied = a2rag::kb::catalog::migrate(&settings, &destination, |kb, entries| {
                bar.set_message(format!("{kb}: {entries} entries copied"));
                bar.tick();
            })?;
            bar.finish_and_clear();
            for (kb, entries) in copied {
                say!("{kb}: {entries} entries copied to {}", Location::of(&destination, &kb));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval { dataset, triples, drop_nodes, limit, seed, out, iterative_steps, reuse_kb, policies } => {
            let options = a2rag::eval::EvalOptions {
                dataset: dataset.clone(),
                triples: triples.clone(),
                drop_nodes: drop_nodes.clone(),
                limit: *limit,
                seed: *seed,
                out_dir: out.clone(),
                iterative_steps: *iterative_steps,
                reuse_kb: *reuse_kb,
                policies: policies.clone(),
            };
            let report = a2rag::eval::run(settings, &options, &mut ProgressBar::default())?;
            say!("{}", a2rag::eval::report_markdown(&report));
            say!("(written to {})", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(bench) => {
            let scratch = std::env::temp_dir().join(format!("a2rag-bench-{}", std::process::id()));
            let text = match bench {
                BenchCommand::Ingest { corpus } => a2rag::bench::ingest(settings, corpus, &scratch)?,
                BenchCommand::Store { postgres, dataset } => {
                    a2rag::bench::store(settings, dataset, postgres, &scratch)?
                }
                BenchCommand::Ppr { nodes, edges, queries } => {
                    a2rag::bench::ppr(*nodes, *edges, *queries, &settings.retrieve)?
                }
                BenchCommand::Retrieve { dataset, triples } => {
                    a2rag::bench::retrieve(settings, dataset, triples.as_deref(), &scratch)?
                }
                BenchCommand::LargeDoc { megabytes } => a2rag::bench::large_doc(settings, megabytes, &scratch)?,
                BenchCommand::Scale { sizes, questions, keep } => {
                    let options = a2rag::bench::scale::ScaleOptions {
                        sizes: sizes.clone(),
                        questions: *questions,
                        // Not the per-process scratch directory, which is removed below.
                        scratch: std::env::temp_dir().join("a2rag-bench-scale"),
                        keep: *keep,
                        config: cli.config.clone(),
                    };
                    a2rag::bench::scale::run(&options)?
                }
                BenchCommand::ScaleStep { step, size, questions, dir } => {
                    // A child of `bench scale`: its one JSON line is its report.
                    let line = match step {
                        a2rag::bench::scale::ScaleStep::Ingest => {
                            a2rag::bench::scale::ingest_step(settings, *size, dir)?
                        }
                        a2rag::bench::scale::ScaleStep::Serve => {
                            a2rag::bench::scale::serve_step(settings, *size, *questions, dir)?
                        }
                    };
                    println!("{line}");
                    return Ok(ExitCode::SUCCESS);
                }
                BenchCommand::Embed { corpus, batch } => a2rag::bench::embed(&settings, corpus, *batch)?,
                BenchCommand::Rpc { dataset, clients, queries } => {
                    let engine = std::sync::Arc::new(open(settings)?);
                    runtime.block_on(a2rag::bench::rpc(engine, dataset, clients, *queries, &scratch))?
                }
            };
            let _ = std::fs::remove_dir_all(&scratch);
            say!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Watch { dir } => {
            let engine = std::sync::Arc::new(open(settings)?);
            let stop = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            let watched = runtime.block_on(a2rag::watch::run(
                engine.clone(),
                owner.clone(),
                kb.clone(),
                dir.clone(),
                Box::new(print_sync),
                stop,
            ));
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            engine.flush_idle()?;
            watched?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { stdio, listen, http, watch } => {
            let http = http.clone().or_else(|| Some(settings.server.http.clone()).filter(|a| !a.is_empty()));
            if !*stdio && listen.is_empty() && http.is_none() {
                anyhow::bail!("nothing to serve: give --stdio, --listen and/or --http (or set server.http)");
            }
            let engine = std::sync::Arc::new(open(settings)?);
            let tls = a2rag::access::tls::ServerTls::configured(&engine.settings.server)?;
            let options = a2rag::rpc::ServeOptions {
                stdio: *stdio,
                listen: listen.clone(),
                tls: tls.clone(),
                ..Default::default()
            };
            let served = runtime.block_on(async {
                if let Some(tls) = &tls {
                    tls.clone().reload_on_sighup();
                }
                let daemon = a2rag::rpc::Daemon::bind(engine.clone(), options).await?;
                for address in daemon.addresses() {
                    eprintln!("a2rag: listening on {address}");
                }
                if let Some(file) = daemon.token_file() {
                    eprintln!(
                        "a2rag: network clients send a named token (a2rag token create) or the one in {} (auth)",
                        file.display()
                    );
                }
                if let Some(dir) = watch {
                    let watching = a2rag::watch::run(
                        engine.clone(),
                        owner.clone(),
                        kb.clone(),
                        dir.clone(),
                        Box::new(log_sync),
                        daemon.stopping(),
                    );
                    eprintln!("a2rag: watching {}", dir.display());
                    tokio::spawn(async move {
                        if let Err(e) = watching.await {
                            tracing::error!(error = %e, "the watched folder is no longer followed");
                        }
                    });
                }
                let web = match &http {
                    Some(addr) => Some(a2rag::web::WebServer::bind(engine, addr, tls).await?),
                    None => None,
                };
                let web = web.map(|web| {
                    let address = web.address().map_or_else(|_| "?".into(), |a| a.to_string());
                    let scheme = if web.is_tls() { "https" } else { "http" };
                    match web.token_file() {
                        Some(file) => eprintln!(
                            "a2rag: web page at {scheme}://{address}/ (sign in with a named token or the one in {})",
                            file.display()
                        ),
                        None => eprintln!("a2rag: web page at {scheme}://{address}/ (sign in with a token)"),
                    }
                    tokio::spawn(web.run(daemon.stopping()))
                });
                daemon.run().await?;
                if let Some(web) = web {
                    // Open browser connections must not hold the exit for long.
                    match tokio::time::timeout(std::time::Duration::from_secs(5), web).await {
                        Ok(Ok(result)) => result?,
                        Ok(Err(e)) => tracing::warn!(error = %e, "the web server task failed"),
                        Err(_) => tracing::warn!("web connections still open after shutdown; exiting anyway"),
                    }
                }
                Ok::<_, a2rag::error::Error>(())
            });
            // Dropping the runtime would wait for a write that outlived the shutdown grace
            // period; sled keeps each document's batch atomic, so exiting is safe.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            served?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { repair } => {
            let engine = open_existing(settings)?;
            let a2rag::engine::Integrity { violations, stats, released, .. } =
                runtime.block_on(engine.check(owner, kb, *repair))?;
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
        Command::Audit { who } => {
            let engine = open_existing(settings)?;
            let filter = a2rag::curate::AuditFilter { token: who.clone(), ..Default::default() };
            for entry in runtime.block_on(engine.audit(owner, kb, &filter))? {
                say!("{}", serde_json::to_string(&entry)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Token { action } => token_command(&settings, action, &cli.kb),
        Command::Review { who } => {
            let engine = open_existing(settings)?;
            let by = owner.author(who.as_deref());
            let shared = runtime.block_on(engine.kb(kb, Open::Existing))?;
            a2rag::curate::review(&shared, std::io::stdin().lock(), std::io::stdout().lock(), &by)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line per sync of `a2rag watch`.
fn print_sync(synced: &a2rag::engine::Synced) {
    let r = &synced.report;
    if r.added + r.replaced + synced.deleted.len() + r.errors.len() == 0 {
        return;
    }
    eprintln!(
        "a2rag: {} added, {} replaced, {} deleted, {} errors; KB has {} documents",
        r.added,
        r.replaced,
        synced.deleted.len(),
        r.errors.len(),
        synced.stats.documents
    );
    for e in &r.errors {
        eprintln!("error: {e}");
    }
}

/// The daemon's log of each sync of `serve --watch`.
fn log_sync(synced: &a2rag::engine::Synced) {
    let r = &synced.report;
    tracing::info!(added = r.added, replaced = r.replaced, deleted = synced.deleted.len(), errors = ?r.errors, "synced the watched folder");
}

/// `a2rag token …`: the token store alone, not the KBs, so it works beside a running daemon.
fn token_command(settings: &Settings, action: &TokenCommand, kbs: &[KbName]) -> Result<ExitCode> {
    let access = a2rag::access::Gatekeeper::open(settings)?;
    if !kbs.is_empty() && !matches!(action, TokenCommand::Create { .. }) {
        anyhow::bail!("--kb is for `token create` (the KBs a new token may use)");
    }
    match action {
        TokenCommand::Create { name, scope, expires, rps, concurrent } => {
            let spec = a2rag::access::TokenSpec::new(name.clone(), *scope, kbs.to_vec(), expires, *rps, *concurrent)?;
            let (record, token) = access.create(spec)?;
            eprintln!("a2rag: token `{}` ({} scope) made; it is shown this once:", record.name, record.scope);
            say!("{token}");
        }
        TokenCommand::List => {
            for record in access.list()? {
                say!("{}", serde_json::to_string(&record.shown())?);
            }
        }
        TokenCommand::Revoke { name } => {
            access.revoke(name)?;
            say!("revoked {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_response(r: &a2rag::control::QueryResponse) {
    let confidence = r.confidence.map_or_else(String::new, |c| format!("   (confidence {c:.2})"));
    let form = if r.answer_form == Some(a2rag::control::roles::AnswerForm::Sentence) {
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

fn print_retrieved(r: &a2rag::engine::Retrieved) {
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
