//! A scripted HTTP/1.1 server on 127.0.0.1 for provider and hub tests: it records every
//! request and answers from a script or a handler. Keep-alive connections are served until
//! the client closes them or the server is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// What the server does with one request.
#[derive(Clone)]
pub enum Reply {
    /// Status code and JSON body.
    Json(u16, String),
    /// Status 200 with a body that is not JSON.
    Garbage,
    /// Read the request, then never answer (the connection stays open).
    Hang,
    /// Any status, extra headers and body (`content-length` is added).
    Raw { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
}

/// `{"error": {"message": ...}}` with `status`, the shape OpenAI-compatible servers send.
pub fn error_reply(status: u16, message: &str) -> Reply {
    let body = serde_json::json!({"error": {"message": message, "type": "mock_error"}});
    Reply::Json(status, body.to_string())
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub request_line: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn method(&self) -> &str {
        self.request_line.split(' ').next().unwrap_or("")
    }

    /// The request target ("/v1/embeddings").
    pub fn path(&self) -> &str {
        self.request_line.split(' ').nth(1).unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("JSON request body")
    }
}

type Handler = dyn Fn(usize, &Seen) -> Reply + Send + Sync;

pub struct MockServer {
    /// `http://127.0.0.1:PORT`
    pub root: String,
    /// `{root}/v1`, what OpenAI-compatible clients are pointed at.
    pub base_url: String,
    hits: Arc<AtomicUsize>,
    /// Connections accepted, to tell a pooled client (one connection) from one that
    /// reconnects per request.
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
    /// The runtime of a server started with [`MockServer::background`]; dropped last.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        // The accept loop owns the connection tasks, so this closes every connection too.
        self.task.abort();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl MockServer {
    /// Serves `script` in order, one entry per request; past its end, the last entry again.
    pub async fn start(script: Vec<Reply>) -> MockServer {
        assert!(!script.is_empty());
        MockServer::respond_with(move |index, _| {
            script.get(index).or(script.last()).cloned().unwrap_or(Reply::Garbage)
        })
        .await
    }

    /// Answers request number `index` (from 0) with `handler(index, request)`.
    pub async fn respond_with(
        handler: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static,
    ) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let task = {
            let hits = Arc::clone(&hits);
            let accepted = Arc::clone(&accepted);
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut connections = JoinSet::new();
                loop {
                    let Ok((stream, _)) = listener.accept().await else { return };
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let hits = Arc::clone(&hits);
                    let seen = Arc::clone(&seen);
                    let handler = Arc::clone(&handler);
                    connections.spawn(async move {
                        serve(stream, &hits, &seen, handler.as_ref()).await;
                    });
                    while connections.try_join_next().is_some() {}
                }
            })
        };
        let root = format!("http://{addr}");
        MockServer { base_url: format!("{root}/v1"), root, hits, connections: accepted, seen, task, runtime: None }
    }

    /// [`MockServer::respond_with`] on a runtime of its own, for tests that call the code
    /// under test synchronously or from runtimes of their own.
    pub fn background(handler: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static) -> MockServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let mut server = runtime.block_on(MockServer::respond_with(handler));
        server.runtime = Some(runtime);
        server
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

/// Answers every request on one connection (clients may keep it alive).
async fn serve(mut stream: TcpStream, hits: &AtomicUsize, seen: &Mutex<Vec<Seen>>, handler: &Handler) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer).await else { return };
        let index = hits.fetch_add(1, Ordering::SeqCst);
        seen.lock().expect("seen lock").push(request.clone());
        let (status, headers, body) = match handler(index, &request) {
            Reply::Json(status, body) => {
                (status, vec![("content-type".to_string(), "application/json".to_string())], body.into_bytes())
            }
            Reply::Garbage => (
                200,
                vec![("content-type".to_string(), "application/json".to_string())],
                b"this is <not> json {".to_vec(),
            ),
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(120)).await;
                return;
            }
            Reply::Raw { status, headers, body } => (status, headers, body),
        };
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (name, value) in &headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&body).await.is_err() {
            return;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// Reads one request (head and `content-length` body); `None` at end of stream.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Seen> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = String::from_utf8_lossy(&buffer[body_start..body_start + length]).to_string();
    buffer.drain(..body_start + length);
    Some(Seen { request_line, headers, body })
}
