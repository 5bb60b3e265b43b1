//! Load generator for a running daemon: sustained `query` (or `retrieve`) throughput and
//! latency percentiles at several client counts, each client one connection with one request in
//! flight (the way an agent uses the daemon).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use crate::error::{Error, Result};
use crate::eval::metrics::percentile;
use crate::rpc::Listen;

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub address: Listen,
    /// Sent as the `auth` message first when set.
    pub token: Option<String>,
    /// Client counts to measure, one run each.
    pub clients: Vec<usize>,
    /// Queries per run, shared by its clients (questions are reused cyclically).
    pub queries: usize,
    pub policy: Option<String>,
    pub method: BenchMethod,
}

/// The method measured: the whole controller, or evidence only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchMethod {
    Query,
    Retrieve,
}

impl BenchMethod {
    pub fn name(self) -> &'static str {
        match self {
            BenchMethod::Query => "query",
            BenchMethod::Retrieve => "retrieve",
        }
    }

    /// Whether a result is useful: an answer for `query`, in-scope evidence for `retrieve`.
    fn useful(self, result: &Value) -> bool {
        match self {
            BenchMethod::Query => !result["answer"].is_null(),
            BenchMethod::Retrieve => !result["retrieval"].is_null(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub method: BenchMethod,
    pub clients: usize,
    pub queries: usize,
    pub errors: usize,
    /// Answered (`query`) or in scope (`retrieve`).
    pub useful: usize,
    pub seconds: f64,
    pub queries_per_second: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
}

/// One line-delimited JSON-RPC connection.
pub struct Client {
    reader: Box<dyn AsyncBufRead + Unpin + Send>,
    writer: Box<dyn AsyncWrite + Unpin + Send>,
    next_id: u64,
}

impl Client {
    pub async fn connect(address: &Listen, token: Option<&str>) -> Result<Client> {
        let io = |e| Error::io(address.to_string(), e);
        let mut client = match address {
            Listen::Unix(path) => {
                let (r, w) = tokio::net::UnixStream::connect(path).await.map_err(io)?.into_split();
                Client { reader: Box::new(BufReader::new(r)), writer: Box::new(w), next_id: 0 }
            }
            Listen::Tcp(addr) => {
                let stream = tokio::net::TcpStream::connect(addr.as_str()).await.map_err(io)?;
                stream.set_nodelay(true).map_err(io)?;
                let (r, w) = stream.into_split();
                Client { reader: Box::new(BufReader::new(r)), writer: Box::new(w), next_id: 0 }
            }
            Listen::Tls(_) => return Err(Error::Invalid("the benchmark drives unix: and tcp: listeners".into())),
        };
        if let Some(token) = token {
            let reply = client.call("auth", json!({"token": token})).await?;
            if reply.get("error").is_some() {
                return Err(Error::Invalid(format!("authentication refused: {reply}")));
            }
        }
        Ok(client)
    }

    /// Sends one request and returns its whole response object (`result` or `error`),
    /// skipping notifications.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string() + "\n";
        let io = |e| Error::io("<rpc connection>", e);
        self.writer.write_all(line.as_bytes()).await.map_err(io)?;
        self.writer.flush().await.map_err(io)?;
        loop {
            let mut buf = String::new();
            if self.reader.read_line(&mut buf).await.map_err(io)? == 0 {
                return Err(Error::Invalid("server closed the connection".into()));
            }
            let reply: Value =
                serde_json::from_str(&buf).map_err(|e| Error::Invalid(format!("bad reply from server: {e}")))?;
            if reply.get("id") == Some(&json!(id)) {
                return Ok(reply);
            }
        }
    }
}

/// Runs one measurement per entry of `options.clients`.
pub async fn bench_rpc(options: &BenchOptions, questions: &[String]) -> Result<Vec<BenchRow>> {
    if questions.is_empty() {
        return Err(Error::Invalid("no questions to ask".into()));
    }
    let questions: Arc<Vec<String>> = Arc::new(questions.to_vec());
    let mut rows = Vec::new();
    for &clients in &options.clients {
        let clients = clients.max(1);
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(clients);
        for _ in 0..clients {
            let mut client = Client::connect(&options.address, options.token.as_deref()).await?;
            let (questions, next, total, policy, method) =
                (questions.clone(), next.clone(), options.queries, options.policy.clone(), options.method);
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                let (mut errors, mut useful) = (0usize, 0usize);
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let question = &questions[n % questions.len()];
                    let sent = Instant::now();
                    let reply = client.call(method.name(), json!({"question": question, "policy": policy})).await?;
                    latencies.push(sent.elapsed());
                    match reply.get("result") {
                        Some(result) if method.useful(result) => useful += 1,
                        Some(_) => {}
                        None => errors += 1,
                    }
                }
                Ok::<_, Error>((latencies, errors, useful))
            }));
        }
        let mut latencies: Vec<Duration> = Vec::new();
        let (mut errors, mut useful) = (0, 0);
        for task in tasks {
            let (l, e, a) = task.await.map_err(|e| Error::Invalid(format!("bench client failed: {e}")))??;
            latencies.extend(l);
            errors += e;
            useful += a;
        }
        let seconds = started.elapsed().as_secs_f64();
        let latencies_ms: Vec<f64> = latencies.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        let ms = |q: f64| percentile(&latencies_ms, q);
        rows.push(BenchRow {
            method: options.method,
            clients,
            queries: latencies.len(),
            errors,
            useful,
            seconds,
            queries_per_second: latencies.len() as f64 / seconds.max(f64::EPSILON),
            p50_ms: ms(0.50),
            p95_ms: ms(0.95),
            max_ms: ms(1.0),
        });
    }
    Ok(rows)
}

pub fn print_table(rows: &[BenchRow], mut out: impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>8} {:>7} {:>8} {:>7} {:>7} {:>9} {:>10} {:>10} {:>10}",
        "method", "clients", "requests", "errors", "useful", "req/s", "p50 ms", "p95 ms", "max ms"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:>8} {:>7} {:>8} {:>7} {:>7} {:>9.1} {:>10.2} {:>10.2} {:>10.2}",
            r.method.name(),
            r.clients,
            r.queries,
            r.errors,
            r.useful,
            r.queries_per_second,
            r.p50_ms,
            r.p95_ms,
            r.max_ms
        )?;
    }
    Ok(())
}
