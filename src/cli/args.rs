//! The command line's arguments, as clap reads them: every command and its options.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use a2rag::kb::SearchMode;
use a2rag::kb::catalog::KbName;

#[derive(Parser)]
#[command(name = "a2rag", version, about = "Adaptive agentic graph retrieval over your documents")]
pub struct Cli {
    /// Configuration file (TOML); only the keys it sets override the defaults.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Data directory (overrides `data_dir`).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Log output format.
    #[arg(long, global = true, value_parser = ["human", "json"])]
    pub log_format: Option<String>,
    /// More logging (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Knowledge base to work on (letters, digits, `-`, `_`); each is its own store under
    /// DATA_DIR/kbs/, created by its first ingest. Default: the data directory's own.
    /// `token create` takes it more than once: the KBs the token may use.
    #[arg(long, global = true, value_name = "KB", action = clap::ArgAction::Append)]
    pub kb: Vec<KbName>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum TokenCommand {
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
pub enum Command {
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
    Eval(EvalArgs),
    /// Benchmarks; each prints a ratio against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
pub enum BenchCommand {
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
        /// How the document's distinct names grow with its length.
        #[arg(long, value_enum, default_value = "gradual")]
        names: a2rag::bench::NameGrowth,
        /// Ingest every size this many times and report medians; a round ingests a smaller
        /// size as many times as the largest holds it, half before the larger sizes and half
        /// after.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
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
        /// Recall at scale: put the real corpora of this datasets directory (`musique/` with
        /// its OpenIE triples, `hotpotqa/`, `distractors/`) inside each size's synthetic
        /// corpus and ask MuSiQue's dev questions, e.g. `--dev ../shared/datasets`.
        #[arg(long)]
        dev: Option<PathBuf>,
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
        #[arg(long)]
        dev: Option<PathBuf>,
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
pub enum ModeArg {
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

#[derive(clap::Args)]
pub struct EvalArgs {
    #[arg(long)]
    pub dataset: PathBuf,
    /// Precomputed triples to import instead of running the extractor.
    #[arg(long)]
    pub triples: Option<PathBuf>,
    /// Shares of graph nodes to delete for the extraction-loss stress test.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.4")]
    pub drop_nodes: Vec<f64>,
    /// Evaluate only the first N questions.
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long, default_value_t = 13)]
    pub seed: u64,
    /// Where report.json, report.md, answers.jsonl, node_deletion.svg and the eval KB go.
    #[arg(long, default_value = "eval-out")]
    pub out: PathBuf,
    /// Rounds of the iterative (IRCoT-style) baseline.
    #[arg(long, default_value_t = 3)]
    pub iterative_steps: usize,
    /// Keep the KB an earlier run ingested into --out instead of ingesting again: for
    /// comparing retrieval settings. Only use it with the same corpus, triples and ingest
    /// settings (embedder, extractor, chunking) as that run.
    #[arg(long)]
    pub reuse_kb: bool,
    /// Run a2rag under these named policies too (e.g. cheap,balanced,strict): one row
    /// each with its recall and cost, next to always escalating to the global stage.
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// Ask every question in lower case, as many users type: what seeding from names
    /// loses when nothing is capitalised.
    #[arg(long)]
    pub lower_case: bool,
}
