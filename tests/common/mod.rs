//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod http;
pub mod tls;

use std::path::PathBuf;
use std::sync::Arc;

use a2rag::config::Settings;
use a2rag::ingest::{self, Pipeline};
use a2rag::kb::Kb;

/// The environment variable that makes a missing part fail its test instead of skipping it
/// (`scripts/test.sh` sets it under `CI=true`).
pub const REQUIRE_ALL_PARTS: &str = "A2RAG_REQUIRE_ALL_PARTS";

/// Says loudly that a test (or part of one) is skipped for a missing `part`, and how to
/// provide it; fails instead where every part is required ([`REQUIRE_ALL_PARTS`]).
pub fn skip(part: &str, how: &str) {
    let line = format!("SKIPPED ({part}): {how}");
    if std::env::var_os(REQUIRE_ALL_PARTS).is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{line}; {REQUIRE_ALL_PARTS} is set, so a missing part fails the run");
    }
    eprintln!("\n=== {line} ===\n");
}

/// `A2RAG_DATASETS` or `../shared/datasets`; `None` (with a loud message) where absent.
pub fn datasets() -> Option<PathBuf> {
    let dir = std::env::var_os("A2RAG_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"));
    if dir.join("musique/corpus.json").exists() {
        Some(dir)
    } else {
        skip("shared datasets", &format!("not found at {} (set A2RAG_DATASETS)", dir.display()));
        None
    }
}

/// A store back end a KB test runs against.
#[derive(Debug, Clone)]
pub enum TestStore {
    Sled,
    /// A fresh database of the test server, as a connection string.
    Postgres(String),
    /// A fresh database reached over TCP with TLS, the server verified against `ca`.
    PostgresTls {
        url: String,
        ca: PathBuf,
    },
}

impl TestStore {
    /// sled, and PostgreSQL (a fresh database) where the test server runs
    /// (`A2RAG_TEST_POSTGRES`, started by scripts/test.sh); its absence is said loudly.
    pub fn all() -> Vec<TestStore> {
        let mut stores = vec![TestStore::Sled];
        stores.extend(postgres_database().map(TestStore::Postgres));
        stores
    }

    /// A second, empty store of the same kind (for PostgreSQL, another fresh database).
    pub fn another(&self) -> TestStore {
        match self {
            TestStore::Sled => TestStore::Sled,
            TestStore::Postgres(_) => TestStore::Postgres(postgres_database().expect("the test server is up")),
            TestStore::PostgresTls { .. } => postgres_tls_database().expect("the test server serves TLS"),
        }
    }

    /// Settings of a KB in this store (`dir`: its data directory).
    pub fn settings(&self, dir: &std::path::Path) -> Settings {
        let mut s = settings_in(dir);
        match self {
            TestStore::Sled => {}
            TestStore::Postgres(url) => {
                s.store.backend = a2rag::config::StoreBackend::Postgres;
                s.store.url = url.clone();
            }
            TestStore::PostgresTls { url, ca } => {
                s.store.backend = a2rag::config::StoreBackend::Postgres;
                s.store.url = url.clone();
                s.store.tls_ca = ca.clone();
            }
        }
        s
    }

    /// The environment that points an `a2rag` process at this store.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            TestStore::Sled => Vec::new(),
            TestStore::Postgres(url) => {
                vec![("A2RAG__STORE__BACKEND", "postgres".into()), ("A2RAG__STORE__URL", url.clone())]
            }
            TestStore::PostgresTls { url, ca } => vec![
                ("A2RAG__STORE__BACKEND", "postgres".into()),
                ("A2RAG__STORE__URL", url.clone()),
                ("A2RAG__STORE__TLS_CA", ca.display().to_string()),
            ],
        }
    }
}

/// A fresh database in the test server (`A2RAG_TEST_POSTGRES`: a libpq connection string
/// without dbname), as a connection string; `None`, with a loud message, without a server.
pub fn postgres_database() -> Option<String> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let Some(server) = std::env::var("A2RAG_TEST_POSTGRES").ok().filter(|s| !s.trim().is_empty()) else {
        skip(
            "PostgreSQL part",
            "no test server; set A2RAG_TEST_POSTGRES (scripts/test.sh starts one with scripts/postgres.sh)",
        );
        return None;
    };
    let name = format!("a2rag_t{}_{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    postgres_admin(&server, &format!("CREATE DATABASE {name}"));
    Some(format!("{server} dbname={name}"))
}

/// A fresh database of the test server reached over TLS on its loopback port, verified
/// against the CA `scripts/postgres.sh` made (`DIR/tls/`); `None`, loudly, where the server
/// serves no TLS.
pub fn postgres_tls_database() -> Option<TestStore> {
    let server = std::env::var("A2RAG_TEST_POSTGRES").ok()?;
    let dir = server.split_whitespace().find_map(|kv| kv.strip_prefix("host="))?;
    let tls = std::path::Path::new(dir).join("tls");
    let Ok(address) = std::fs::read_to_string(tls.join("url")) else {
        skip("PostgreSQL TLS part", "the test server serves no TLS (scripts/postgres.sh needs openssl)");
        return None;
    };
    let plain = postgres_database()?;
    let database = plain.split_whitespace().find_map(|kv| kv.strip_prefix("dbname="))?.to_string();
    Some(TestStore::PostgresTls { url: format!("{} dbname={database}", address.trim()), ca: tls.join("ca.crt") })
}

/// Runs `sql` in the test server's `postgres` database.
pub fn postgres_admin(server: &str, sql: &str) {
    run_sql(&format!("{server} dbname=postgres"), sql);
}

/// Runs `sql` in the database `url` names.
pub fn run_sql(url: &str, sql: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        let driver = tokio::spawn(connection);
        client.batch_execute(sql).await.unwrap();
        drop(client);
        let _ = driver.await;
    });
}

pub fn settings_in(dir: &std::path::Path) -> Settings {
    let mut s = Settings::defaults();
    s.data_dir = dir.to_path_buf();
    s
}

pub fn open(settings: &Settings) -> (Kb, Pipeline) {
    let settings = Arc::new(settings.clone());
    let remote = a2rag::net::Remote::new();
    let embedder = a2rag::embed::from_settings(&settings.embed, &remote).unwrap();
    let kb = Kb::open(settings.clone(), embedder.clone()).unwrap();
    let pipeline = Pipeline::from_settings(&settings, embedder, None, &remote).unwrap();
    (kb, pipeline)
}

/// The engine's default knowledge base, for a test that reaches into it; not from inside an
/// async runtime.
pub fn default_kb(engine: &a2rag::engine::Engine) -> a2rag::kb::catalog::SharedKb {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(engine.kb(&a2rag::kb::catalog::KbName::default(), a2rag::kb::catalog::Open::Existing)).unwrap()
}

pub fn ingest(kb: &mut Kb, pipeline: &Pipeline, paths: &[PathBuf]) -> ingest::IngestReport {
    ingest::ingest_paths(kb, pipeline, paths, &mut ()).unwrap()
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_a2rag")
}

/// A file of the JSON-RPC fixtures (`tests/fixtures/rpc`).
pub fn rpc_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rpc").join(name)
}

/// A directory whose `data` holds the JSON-RPC fixtures ingested by the CLI (see
/// [`ingest_rpc_fixtures`]).
pub fn ingested_rpc_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ingest_rpc_fixtures(&dir.path().join("data"), &[]);
    dir
}

/// Ingests the JSON-RPC fixtures with the CLI into the KB of `data_dir`, in the store `env`
/// points at. The triples file gives each document an imported triple, so the extractor's own
/// triples are not in the graph yet and accepted answers have something to propose.
pub fn ingest_rpc_fixtures(data_dir: &std::path::Path, env: &[(&'static str, String)]) {
    let status = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(data_dir)
        .arg("ingest")
        .arg("--triples")
        .arg(rpc_fixture("triples.jsonl"))
        .args(["curie.txt", "prize.txt", "rivers.jsonl"].map(rpc_fixture))
        .envs(env.iter().cloned())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs the Python test client `tests/SCRIPT` with `args` and returns what it printed,
/// failing with both of its streams unless it exits 0 and ends with "ALL OK".
pub fn run_python_client(python: &std::path::Path, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let output = std::process::Command::new(python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join(script))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ALL OK"),
        "{script} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    eprintln!("{stdout}");
    stdout
}

/// Starts `a2rag --data-dir DATA serve ARGS` and waits for the stderr line starting with
/// `ready`, which it returns; the rest of stderr is drained so the daemon never blocks on it.
pub fn spawn_serve(data: &std::path::Path, args: &[String], ready: &str) -> (std::process::Child, String) {
    let (child, mut lines) = spawn_serve_until(data, args, &[], |line| line.starts_with(ready));
    (child, lines.pop().unwrap_or_default())
}

/// [`spawn_serve`] with `env` set, reading stderr until `done` holds for a line; returns
/// every line read up to and with that one.
pub fn spawn_serve_until(
    data: &std::path::Path,
    args: &[String],
    env: &[(&str, String)],
    done: impl Fn(&str) -> bool,
) -> (std::process::Child, Vec<String>) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(data)
        .arg("serve")
        .args(args)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = lines.next().unwrap_or_else(|| panic!("the daemon exited first; it said {seen:?}")).unwrap();
        let last = done(&line);
        seen.push(line);
        if last {
            break;
        }
    }
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    (child, seen)
}
