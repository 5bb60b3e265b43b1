//! The command line's doors: one function per command, each turning its arguments into one
//! `Engine` operation (or a tool of its own: eval, bench, fetch-model) and its result into
//! text. What a request means is decided by the engine, not here.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use a2rag::access::Caller;
use a2rag::config::{LogFormat, Settings};
use a2rag::engine::Engine;
use a2rag::ingest;
use a2rag::kb::catalog::KbName;
use a2rag::kb::store::Location;

/// `println!` that ends the process through [`stdout_failed`] when stdout cannot be written.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::cli::stdout_failed(e)
        }
    }};
}

pub mod args;
pub mod kb;
mod print;
pub mod review;
pub mod serve;
pub mod store;
pub mod token;
pub mod tools;

pub use args::{Cli, Command};

/// What every command starts from: the settings, the one knowledge base it works on, the
/// caller (the person running the CLI owns the data directory: no token needed) and the
/// runtime the engine's operations run on.
pub struct Door {
    pub settings: Settings,
    config: Option<PathBuf>,
    pub kb: KbName,
    pub owner: Caller,
    pub runtime: tokio::runtime::Runtime,
}

impl Door {
    pub fn new(cli: &Cli) -> Result<Door> {
        let settings = load_settings(cli)?;
        init_tracing(&settings);
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let kb = match (cli.kb.as_slice(), &cli.command) {
            ([], _) | (_, Command::Token { .. }) => KbName::default(),
            ([one], _) => one.clone(),
            _ => anyhow::bail!(
                "--kb is given more than once: commands work on one knowledge base (`token create` takes several)"
            ),
        };
        Ok(Door { settings, config: cli.config.clone(), kb, owner: Caller::owner(), runtime })
    }

    /// The engine, creating the default knowledge base if there is none yet.
    pub fn open(&self) -> Result<Engine> {
        Engine::open(self.settings.clone(), self.config.as_deref()).context("opening the knowledge base")
    }

    /// The engine, for a command that reads the knowledge base: a mistyped directory must not
    /// be left with an empty one.
    pub fn open_existing(&self) -> Result<Arc<Engine>> {
        self.existing()?;
        self.open().map(Arc::new)
    }

    /// The engine with every knowledge base closed, for the commands that work on the store
    /// itself.
    pub fn open_without_kbs(&self) -> Result<Engine> {
        Engine::open_without_kbs(self.settings.clone(), self.config.as_deref()).context("opening the engine")
    }

    /// Where the knowledge base is, refusing one that does not exist.
    pub fn existing(&self) -> Result<Location> {
        let location = Location::of(&self.settings, &self.kb);
        if !location.exists()? {
            anyhow::bail!(
                "no knowledge base in {location}: run `a2rag ingest` first, or point --data-dir (or --kb) at one"
            );
        }
        Ok(location)
    }

    pub fn config(&self) -> Option<&Path> {
        self.config.as_deref()
    }
}

/// Ends the process on a failed write to stdout: quietly when its reader went away (`a2rag
/// search x | head -1`), where `println!` would panic, with the status of a Unix tool that
/// SIGPIPE ended (128 + 13), so that `pipefail` still sees a run that did not finish.
pub fn stdout_failed(e: std::io::Error) -> ! {
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

/// indicatif bar for ingest; hidden when stderr is not a terminal.
#[derive(Default)]
pub struct ProgressBar(Option<indicatif::ProgressBar>);

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
