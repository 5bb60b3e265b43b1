//! The daemon: JSON-RPC 2.0, one message per line, over stdio, unix sockets and TCP at once.
//! See docs/rpc.md for the methods and error codes.
//!
//! Every request runs as its own task so that one connection can have many in flight and
//! `$/cancelRequest` can abort them (an ingest is asked to stop between documents instead,
//! and reports what committed). A semaphore of `server.max_pending` permits bounds the work
//! in flight across all connections; beyond it requests are refused ("overloaded") rather
//! than queued. `health` and `shutdown` are answered at once, outside that bound, so a
//! liveness probe and a stop always get through. Shutdown (the `shutdown` method, SIGTERM,
//! SIGINT) stops accepting connections, answers new requests with "shutting down", waits a
//! bounded time for the work in flight and its responses, then flushes sled.
//!
//! Access ([`crate::access`]): every TCP and TLS connection must first send a token (`auth`),
//! and its requests then run with that token's scope and knowledge bases. Unix sockets are
//! owner-only (0600): a connection there acts as the data directory's owner, unless its
//! first message is `auth` with a token, whose scope it then has (a client that wants less
//! than everything). stdio is the owner's. `tls:` listeners speak TLS with
//! `server.tls_cert`, reloaded on SIGHUP.

mod methods;
pub mod protocol;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::AbortHandle;

use crate::access::tls::ServerTls;
use crate::access::{BearerToken, Caller};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{Door, Outcome};
use protocol::{Frame, LineReader, RpcError, failure, success};

/// Every method the daemon answers (besides `auth` and `$/cancelRequest`).
pub use methods::METHODS;

/// Where to listen besides stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    /// `host:port`; port 0 picks a free port.
    Tcp(String),
    /// `host:port`, TLS with `server.tls_cert` and `server.tls_key`.
    Tls(String),
}

impl FromStr for Listen {
    type Err = Error;
    fn from_str(s: &str) -> Result<Listen> {
        match s.split_once(':') {
            Some(("unix", path)) if !path.is_empty() => Ok(Listen::Unix(PathBuf::from(path))),
            Some(("tcp", addr)) if addr.contains(':') => Ok(Listen::Tcp(addr.to_string())),
            Some(("tls", addr)) if addr.contains(':') => Ok(Listen::Tls(addr.to_string())),
            _ => Err(Error::Invalid(format!("listen address `{s}` is not unix:PATH, tcp:HOST:PORT or tls:HOST:PORT"))),
        }
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Unix(path) => write!(f, "unix:{}", path.display()),
            Listen::Tcp(addr) => write!(f, "tcp:{addr}"),
            Listen::Tls(addr) => write!(f, "tls:{addr}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub stdio: bool,
    pub listen: Vec<Listen>,
    /// How long shutdown waits for work in flight before exiting anyway.
    pub grace: Duration,
    /// The certificate `tls:` listeners serve (shared with the web page, reloaded on SIGHUP).
    pub tls: Option<Arc<ServerTls>>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { stdio: false, listen: Vec::new(), grace: Duration::from_secs(30), tls: None }
    }
}

/// State shared by every connection.
pub struct Server {
    engine: Arc<Engine>,
    permits: Arc<Semaphore>,
    max_pending: usize,
    /// Requests holding a permit now (shutdown's drain takes the permits too, so they alone
    /// cannot say).
    pending: AtomicUsize,
    max_message_bytes: usize,
    started: Instant,
    shutdown: watch::Sender<bool>,
    /// Set once the work in flight is done (or the grace period is over): connections stop.
    closing: watch::Sender<bool>,
}

impl Server {
    /// Requests in flight.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves once shutdown has been asked for; owns what it waits on, so it can outlive
    /// the borrow (another server stopping with this one holds it).
    fn shutdown_requested(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            // An error means the sender is gone, which only happens once everything is over.
            let _ = rx.wait_for(|down| *down).await;
        }
    }

    async fn closing(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|closing| *closing).await;
    }
}

enum Bound {
    Unix { listener: UnixListener, path: PathBuf },
    Tcp { listener: TcpListener },
    Tls { listener: TcpListener, tls: Arc<ServerTls> },
}

/// A server with its listeners bound, not yet serving: lets the caller report the actual
/// addresses (a `tcp:…:0` listener gets a free port) before the first connection.
pub struct Daemon {
    server: Arc<Server>,
    stdio: bool,
    bound: Vec<(Bound, String)>,
    grace: Duration,
    token_file: Option<PathBuf>,
}

impl Daemon {
    pub async fn bind(engine: Arc<Engine>, options: ServeOptions) -> Result<Daemon> {
        let settings = engine.settings.server.clone();
        let networked = options.listen.iter().any(|l| matches!(l, Listen::Tcp(_) | Listen::Tls(_)));
        let token_file = match networked {
            false => None,
            true => engine.access.enable_legacy(&engine.settings)?.and_then(|BearerToken { file, .. }| file),
        };
        let mut bound = Vec::new();
        for listen in &options.listen {
            let b = match listen {
                Listen::Unix(path) => bind_unix(path)?,
                Listen::Tcp(addr) => {
                    let listener = TcpListener::bind(addr.as_str()).await.map_err(|e| Error::io(addr, e))?;
                    Bound::Tcp { listener }
                }
                Listen::Tls(addr) => {
                    let tls = options.tls.clone().ok_or_else(|| {
                        Error::Config(format!(
                            "--listen tls:{addr} needs a certificate: set server.tls_cert and server.tls_key (PEM files)"
                        ))
                    })?;
                    let listener = TcpListener::bind(addr.as_str()).await.map_err(|e| Error::io(addr, e))?;
                    Bound::Tls { listener, tls }
                }
            };
            let local = |l: &TcpListener| l.local_addr().map_or_else(|_| "?".into(), |a: SocketAddr| a.to_string());
            let name = match &b {
                Bound::Unix { path, .. } => Listen::Unix(path.clone()).to_string(),
                Bound::Tcp { listener } => format!("tcp:{}", local(listener)),
                Bound::Tls { listener, .. } => format!("tls:{}", local(listener)),
            };
            bound.push((b, name));
        }
        let max_pending = settings.max_pending.max(1);
        let server = Arc::new(Server {
            engine,
            permits: Arc::new(Semaphore::new(max_pending)),
            max_pending,
            pending: AtomicUsize::new(0),
            max_message_bytes: settings.max_message_bytes.max(1),
            started: Instant::now(),
            shutdown: watch::channel(false).0,
            closing: watch::channel(false).0,
        });
        Ok(Daemon { server, stdio: options.stdio, bound, grace: options.grace, token_file })
    }

    /// The file holding the generated TCP token, when TCP is served without a configured
    /// `server.bearer_token`.
    pub fn token_file(&self) -> Option<&Path> {
        self.token_file.as_deref()
    }

    /// Resolves once shutdown has been asked for (the `shutdown` method, SIGTERM, SIGINT), for
    /// other servers that stop with this one.
    pub fn stopping(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.server.shutdown_requested()
    }

    /// The listeners' addresses, with real ports.
    pub fn addresses(&self) -> Vec<String> {
        self.bound.iter().map(|(_, name)| name.clone()).collect()
    }

    /// Serves until shutdown, then flushes the KB.
    pub async fn run(self) -> Result<()> {
        let server = self.server;
        // Every connection, request and writer holds a clone; recv() returning None means
        // all of them have finished.
        let (alive, mut all_done) = mpsc::channel::<()>(1);
        let stdio_only = self.bound.is_empty();
        for (bound, name) in self.bound {
            tracing::info!(address = %name, "listening");
            tokio::spawn(accept(server.clone(), bound, alive.clone()));
        }
        if self.stdio {
            let (read, write) = stdio_streams()?;
            let (server, alive) = (server.clone(), alive.clone());
            tokio::spawn(async move {
                connection(server.clone(), read, write, Origin::Owned, alive).await;
                // With nothing else to serve, the client closing stdin is the end.
                if stdio_only {
                    server.begin_shutdown();
                }
            });
        }
        drop(alive);
        tokio::spawn(watch_signals(server.clone()));
        server.shutdown_requested().await;
        tracing::info!("shutting down");
        let deadline = tokio::time::Instant::now() + self.grace;
        // Every request in flight holds a permit: all of them back means all work is done.
        let all_permits = u32::try_from(server.max_pending).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout_at(deadline, server.permits.acquire_many(all_permits)).await;
        if drained.is_err() {
            tracing::warn!(
                grace_s = self.grace.as_secs(),
                "work still in flight after the grace period; exiting anyway"
            );
        }
        // Until here connections kept answering "shutting down"; now they close, once their
        // last responses are written.
        server.closing.send_replace(true);
        let _ = tokio::time::timeout_at(
            deadline.max(tokio::time::Instant::now() + Duration::from_secs(1)),
            all_done.recv(),
        )
        .await;
        // A write that outlived the grace period holds its KB's lock; sled's own batches keep
        // the store consistent without this flush.
        server.engine.flush_idle()
    }
}

/// Binds and serves until shutdown.
pub async fn serve(engine: Arc<Engine>, options: ServeOptions) -> Result<()> {
    Daemon::bind(engine, options).await?.run().await
}

async fn watch_signals(server: Arc<Server>) {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
        tracing::warn!("cannot install a SIGTERM handler");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    server.begin_shutdown();
}

/// Binds under a temporary name, restricts it to the owner, then renames it into place, so
/// the socket is never reachable with looser permissions.
fn bind_unix(path: &Path) -> Result<Bound> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(Error::Invalid(format!("{} exists and is not a socket", path.display())));
        }
        // A socket someone still accepts on belongs to a live daemon: leave it alone.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::Invalid(format!(
                "another daemon is listening on {}; stop it first or choose another --listen path",
                path.display()
            )));
        }
        // A stale socket from a previous run that did not exit cleanly.
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
    }
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.tmp", std::process::id()));
    let staging = PathBuf::from(staging);
    let _ = std::fs::remove_file(&staging);
    // Errors name the path asked for: the staging name is this function's business.
    let listener = UnixListener::bind(&staging).map_err(|e| Error::io(path, e))?;
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600)).map_err(|e| Error::io(&staging, e))?;
    std::fs::rename(&staging, path).map_err(|e| Error::io(path, e))?;
    Ok(Bound::Unix { listener, path: path.to_path_buf() })
}

async fn accept(server: Arc<Server>, bound: Bound, alive: mpsc::Sender<()>) {
    loop {
        tokio::select! {
            _ = server.shutdown_requested() => break,
            accepted = accept_one(&bound) => match accepted {
                Ok(Accepted::Unix(stream)) => {
                    let (r, w) = stream.into_split();
                    tokio::spawn(connection(server.clone(), r, w, Origin::Owned, alive.clone()));
                }
                Ok(Accepted::Tcp(stream)) => {
                    let _ = stream.set_nodelay(true);
                    let (r, w) = stream.into_split();
                    tokio::spawn(connection(server.clone(), r, w, Origin::Network, alive.clone()));
                }
                Ok(Accepted::Tls(stream, tls)) => {
                    let _ = stream.set_nodelay(true);
                    let (server, alive) = (server.clone(), alive.clone());
                    // The handshake runs in the connection's task: a slow client holds up
                    // no one else.
                    tokio::spawn(async move {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(stream)).await {
                            Ok(Ok(stream)) => {
                                let (r, w) = tokio::io::split(stream);
                                connection(server, r, w, Origin::Network, alive).await;
                            }
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        }
                    });
                }
                Err(e) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    if let Bound::Unix { path, .. } = &bound {
        let _ = std::fs::remove_file(path);
    }
}

enum Accepted {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
    Tls(tokio::net::TcpStream, Arc<ServerTls>),
}

/// How long a TLS client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn accept_one(bound: &Bound) -> std::io::Result<Accepted> {
    match bound {
        Bound::Unix { listener, .. } => Ok(Accepted::Unix(listener.accept().await?.0)),
        Bound::Tcp { listener } => Ok(Accepted::Tcp(listener.accept().await?.0)),
        Bound::Tls { listener, tls } => Ok(Accepted::Tls(listener.accept().await?.0, tls.clone())),
    }
}

/// Where a connection came from, which decides who it is before any `auth`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// stdio or an owner-only unix socket: the owner, unless the first message is `auth`.
    Owned,
    /// TCP or TLS: nothing but `auth` until a token is accepted.
    Network,
}

/// stdin through a socket pair fed by a plain thread: tokio's stdin reads on a blocking-pool
/// thread that can keep the runtime from shutting down while it waits for input.
fn stdio_streams() -> Result<(tokio::net::UnixStream, tokio::io::Stdout)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| Error::io("<stdin>", e))?;
    ours.set_nonblocking(true).map_err(|e| Error::io("<stdin>", e))?;
    std::thread::Builder::new()
        .name("a2rag-stdin".into())
        .spawn(move || {
            let mut theirs = theirs;
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut theirs);
        })
        .map_err(|e| Error::io("<stdin>", e))?;
    let read = tokio::net::UnixStream::from_std(ours).map_err(|e| Error::io("<stdin>", e))?;
    Ok((read, tokio::io::stdout()))
}

/// One client. Outgoing lines go through a channel to a writer task so that responses,
/// batch results and notifications from many tasks never interleave mid-line.
struct Conn {
    server: Arc<Server>,
    /// Who the connection acts for: set before its first request, by its door or by `auth`.
    caller: Caller,
    out: mpsc::Sender<String>,
    /// Requests in flight by id (as JSON text), for `$/cancelRequest`.
    running: Mutex<HashMap<String, Running>>,
    _alive: mpsc::Sender<()>,
}

async fn connection<R, W>(server: Arc<Server>, read: R, write: W, origin: Origin, alive: mpsc::Sender<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut lines) = mpsc::channel::<String>(1024);
    let writer_alive = alive.clone();
    tokio::spawn(async move {
        let _alive = writer_alive;
        let mut w = BufWriter::new(write);
        while let Some(line) = lines.recv().await {
            let written = async {
                w.write_all(line.as_bytes()).await?;
                w.write_all(b"\n").await?;
                if lines.is_empty() {
                    w.flush().await?;
                }
                Ok::<_, std::io::Error>(())
            };
            // The client went away: stop writing; senders see a closed channel and move on.
            if written.await.is_err() {
                break;
            }
        }
    });
    let send = |message: Value| {
        let out = out.clone();
        async move {
            let _ = out.send(message.to_string()).await;
        }
    };
    let mut reader = LineReader::new(read, server.max_message_bytes);
    let mut conn: Option<Arc<Conn>> = None;
    loop {
        // After `shutdown` the connection still reads, to answer "shutting down" (-32003)
        // rather than vanish, until the work in flight is over; and then what has already
        // arrived (biased: a ready line comes before closing), so a request sent after
        // `shutdown` gets its answer however fast the daemon stops.
        let frame = tokio::select! {
            biased;
            frame = reader.next() => frame,
            _ = server.closing() => break,
        };
        let bytes = match frame {
            Ok(Some(Frame::Line(bytes))) => bytes,
            Ok(Some(Frame::TooLarge)) => {
                let max = server.max_message_bytes;
                send(failure(
                    Value::Null,
                    RpcError::new(protocol::INVALID_REQUEST, format!("message too large (limit {max} bytes)")),
                ))
                .await;
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let conn = match &conn {
            Some(conn) => conn.clone(),
            None => {
                let caller = match first_message(&bytes, origin, &server) {
                    First::Request(caller) => caller,
                    First::Authenticated(caller, reply) => {
                        if let Some(reply) = reply {
                            send(reply).await;
                        }
                        conn = Some(Conn::new(&server, caller, &out, &alive));
                        continue;
                    }
                    First::Refused(reply) => {
                        send(reply).await;
                        break;
                    }
                };
                conn.insert(Conn::new(&server, caller, &out, &alive)).clone()
            }
        };
        conn.handle_line(&bytes).await;
    }
}

/// What a connection's first message makes of it.
enum First {
    /// Not `auth`, on a door that vouches for its caller: the message is a request.
    Request(Caller),
    /// `auth` with a valid token, and its reply when it had an id.
    Authenticated(Caller, Option<Value>),
    /// The reply to send before closing the connection.
    Refused(Value),
}

/// The first message: `{"jsonrpc":"2.0","method":"auth","params":{"token":"…"}}` (an `id`
/// is optional) is required on the network and allowed on an owned door.
fn first_message(bytes: &[u8], origin: Origin, server: &Server) -> First {
    let message: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let id = message.get("id").cloned();
    let is_auth = message.get("method").and_then(Value::as_str) == Some("auth");
    if !is_auth && origin == Origin::Owned {
        return First::Request(Caller::owner());
    }
    let refuse = |message: String| {
        First::Refused(failure(id.clone().unwrap_or(Value::Null), RpcError::new(protocol::UNAUTHORIZED, message)))
    };
    let Some(token) = is_auth.then(|| message.pointer("/params/token").and_then(Value::as_str)).flatten() else {
        return refuse("unauthorized: the first message must be `auth` with a token".into());
    };
    match server.engine.authenticate(token) {
        Ok(caller) => {
            let reply = id.map(|id| {
                success(id, serde_json::json!({"authenticated": true, "token": caller.name(), "scope": caller.scope()}))
            });
            First::Authenticated(caller, reply)
        }
        Err(e) => refuse(e.to_string()),
    }
}

/// A request in flight, as `$/cancelRequest` sees it.
#[derive(Clone)]
struct Running {
    abort: AbortHandle,
    /// Asked for by a cancel; methods that stop cleanly (ingest) read it.
    cancelled: Arc<AtomicBool>,
    /// Whether the method stops on `cancelled` itself rather than being aborted.
    cooperative: bool,
}

/// A message's fate once it has been read: answered at once, running, or silent.
enum Started {
    Done(Option<Value>),
    Running(tokio::task::JoinHandle<Option<Value>>),
}

impl Started {
    async fn finish(self) -> Option<Value> {
        match self {
            Started::Done(v) => v,
            // The outer task maps every failure of the handler to a response itself.
            Started::Running(handle) => handle.await.ok().flatten(),
        }
    }
}

impl Conn {
    fn new(server: &Arc<Server>, caller: Caller, out: &mpsc::Sender<String>, alive: &mpsc::Sender<()>) -> Arc<Conn> {
        Arc::new(Conn {
            server: server.clone(),
            caller,
            out: out.clone(),
            running: Mutex::new(HashMap::new()),
            _alive: alive.clone(),
        })
    }

    async fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string()).await;
    }

    async fn handle_line(self: Arc<Self>, bytes: &[u8]) {
        let message: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                return self
                    .send(failure(Value::Null, RpcError::new(protocol::PARSE_ERROR, format!("parse error: {e}"))))
                    .await;
            }
        };
        match message {
            Value::Array(batch) if batch.is_empty() => {
                self.send(failure(
                    Value::Null,
                    RpcError::new(protocol::INVALID_REQUEST, "invalid request: empty batch"),
                ))
                .await;
            }
            Value::Array(batch) => {
                // Start every element now (in order, so a later cancel finds them), answer
                // once all are done.
                let started: Vec<Started> = batch.into_iter().map(|m| self.clone().start(m)).collect();
                let conn = self.clone();
                tokio::spawn(async move {
                    let mut replies = Vec::new();
                    for s in started {
                        replies.extend(s.finish().await);
                    }
                    if !replies.is_empty() {
                        conn.send(Value::Array(replies)).await;
                    }
                });
            }
            message => match self.clone().start(message) {
                Started::Done(reply) => {
                    if let Some(reply) = reply {
                        self.send(reply).await;
                    }
                }
                Started::Running(handle) => {
                    let conn = self.clone();
                    tokio::spawn(async move {
                        if let Ok(Some(reply)) = handle.await {
                            conn.send(reply).await;
                        }
                    });
                }
            },
        }
    }

    /// Validates one request and starts it. Synchronous up to the spawn so that requests
    /// start in the order they arrived.
    fn start(self: Arc<Self>, message: Value) -> Started {
        let invalid = |id: Value, why: &str| {
            Started::Done(Some(failure(
                id,
                RpcError::new(protocol::INVALID_REQUEST, format!("invalid request: {why}")),
            )))
        };
        let Value::Object(mut m) = message else {
            return invalid(Value::Null, "not an object");
        };
        let id = m.remove("id");
        // A number beyond 64-bit integers parses as a float and would be echoed altered;
        // refusing it keeps the promise that every id comes back exactly as sent.
        if id.as_ref().is_some_and(|id| !(id.is_string() || id.is_i64() || id.is_u64() || id.is_null())) {
            return invalid(Value::Null, "id must be a string, an integer within 64 bits, or null");
        }
        let reply_id = id.clone().unwrap_or(Value::Null);
        if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return invalid(reply_id, "jsonrpc must be \"2.0\"");
        }
        let Some(Value::String(method)) = m.remove("method") else {
            return invalid(reply_id, "method must be a string");
        };
        let params = m.remove("params").unwrap_or(Value::Null);
        if !(params.is_object() || params.is_array() || params.is_null()) {
            return invalid(reply_id, "params must be an object or an array");
        }
        let key = id.as_ref().map(Value::to_string);
        // A request without an id is a notification: it runs, but nothing is sent back.
        let reply = move |result: std::result::Result<Value, RpcError>| {
            id.clone().map(|id| match result {
                Ok(v) => success(id, v),
                Err(e) => failure(id, e),
            })
        };
        if method == "$/cancelRequest" {
            return Started::Done(reply(self.cancel(params)));
        }
        // The known name, static: what the metrics label requests with.
        let Some(&name) = methods::METHODS.iter().find(|m| **m == method) else {
            return Started::Done(reply(Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            ))));
        };
        // Liveness and stop never wait behind load, nor count towards it.
        if let Some(result) = methods::immediate(&self.server, &self.caller, &method, &params) {
            self.server.engine.metrics.request(Door::Rpc, name, Outcome::of(&result));
            return Started::Done(reply(result));
        }
        if self.server.is_shutting_down() {
            return Started::Done(reply(Err(RpcError::new(protocol::SHUTTING_DOWN, "shutting down"))));
        }
        let Ok(permit) = self.server.permits.clone().try_acquire_owned() else {
            return Started::Done(reply(Err(RpcError::new(protocol::OVERLOADED, "overloaded"))));
        };
        self.server.pending.fetch_add(1, Ordering::SeqCst);

        let cancelled = Arc::new(AtomicBool::new(false));
        let cooperative = methods::stops_on_cancel(&method);
        let cx = methods::Context {
            server: self.server.clone(),
            caller: self.caller.clone(),
            out: self.out.clone(),
            id: reply_id,
            cancelled: cancelled.clone(),
        };
        let inner = tokio::spawn(async move { methods::call(cx, &method, params).await });
        if let Some(key) = &key {
            let running = Running { abort: inner.abort_handle(), cancelled, cooperative };
            self.running.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), running);
        }
        let conn = self.clone();
        let in_flight = self.server.engine.metrics.in_flight();
        Started::Running(tokio::spawn(async move {
            let result = guard(inner).await;
            if let Some(key) = &key {
                conn.running.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
            }
            conn.server.pending.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
            drop(in_flight);
            conn.server.engine.metrics.request(Door::Rpc, name, Outcome::of(&result));
            reply(result)
        }))
    }

    fn cancel(&self, params: Value) -> std::result::Result<Value, RpcError> {
        let target = params
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
            .ok_or_else(|| RpcError::new(protocol::INVALID_PARAMS, "invalid params: missing field `id`"))?;
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner()).get(&target.to_string()).cloned();
        if let Some(r) = &running {
            r.cancelled.store(true, Ordering::SeqCst);
            if !r.cooperative {
                r.abort.abort();
            }
        }
        Ok(serde_json::json!({"cancelled": running.is_some()}))
    }
}

/// A handler's outcome with its failures made into JSON-RPC errors: a panic becomes an
/// internal error for this request only, an abort the "request cancelled" error.
async fn guard(
    handle: tokio::task::JoinHandle<std::result::Result<Value, RpcError>>,
) -> std::result::Result<Value, RpcError> {
    match handle.await {
        Ok(result) => result,
        Err(e) if e.is_cancelled() => Err(RpcError::new(protocol::REQUEST_CANCELLED, "request cancelled")),
        Err(e) => {
            tracing::error!(error = %e, "request handler panicked");
            Err(RpcError::new(protocol::INTERNAL_ERROR, "internal error: the handler panicked"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_is_an_internal_error_and_an_abort_a_cancellation() {
        let panicking = tokio::spawn(async { panic!("boom") });
        assert_eq!(guard(panicking).await.unwrap_err().code, protocol::INTERNAL_ERROR);
        let slow = tokio::spawn(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(Value::Null)
        });
        slow.abort();
        assert_eq!(guard(slow).await.unwrap_err().code, protocol::REQUEST_CANCELLED);
    }

    #[test]
    fn listen_addresses_parse() {
        assert_eq!("unix:/tmp/a.sock".parse::<Listen>().unwrap(), Listen::Unix("/tmp/a.sock".into()));
        assert_eq!("tcp:127.0.0.1:7000".parse::<Listen>().unwrap(), Listen::Tcp("127.0.0.1:7000".into()));
        assert!("tcp:7000".parse::<Listen>().is_err());
        assert_eq!("tls:0.0.0.0:7443".parse::<Listen>().unwrap(), Listen::Tls("0.0.0.0:7443".into()));
        assert!("http://x".parse::<Listen>().is_err());
    }
}
