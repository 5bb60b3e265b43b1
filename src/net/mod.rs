//! Remote model I/O, owned in one place: the HTTP clients (pooled, long-lived), the
//! [`RetryPolicy`], and the I/O runtime every model request runs on. One [`Remote`] is made
//! per process (by `Engine::open` or the CLI command) and handed to the LLM providers and the
//! remote embedders.
//!
//! Every request future runs on the I/O runtime, a small multi-thread tokio runtime this
//! module owns, whoever asks:
//! * async callers (the controller) await [`Remote::run`], which is async all the way;
//! * synchronous callers (the `Embedder` trait, ingest's worker threads, the hub download)
//!   call [`Remote::block_on`], which waits on a channel while the I/O runtime does the work.
//!   That is safe from any thread, inside another runtime of either flavour too, because the
//!   waiting thread never drives the future.
//!
//! Because all connections are opened on the one runtime that outlives them, the clients keep
//! idle connections pooled: a keep-alive connection opened by one call is reused by the next.

mod retry;
pub mod rig;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rig_reqwest::ReqwestClient;
use tokio::runtime::Runtime;

pub use retry::RetryPolicy;

/// Name of the I/O runtime's threads; [`Remote::block_on`] refuses to wait on one of them.
const IO_THREAD: &str = "a2rag-io";
/// Threads of the I/O runtime: requests are I/O-bound, and replies are parsed here.
const IO_THREADS: usize = 2;
/// A server that has not accepted a connection in this long is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RemoteError {
    #[error("provider request failed: {0}")]
    Provider(String),
    #[error("provider timed out after {0} ms")]
    Timeout(u64),
    #[error("provider rate limited the request: {0}")]
    RateLimited(String),
    #[error("model output could not be parsed: {0}")]
    Malformed(String),
    #[error("configuration: {0}")]
    Config(String),
}

impl RemoteError {
    /// Worth trying again after a pause.
    pub fn is_transient(&self) -> bool {
        matches!(self, RemoteError::Timeout(_) | RemoteError::RateLimited(_) | RemoteError::Provider(_))
    }
}

impl From<RemoteError> for crate::error::Error {
    fn from(error: RemoteError) -> Self {
        match error {
            RemoteError::Config(message) => crate::error::Error::Config(message),
            other => crate::error::Error::Remote(other.to_string()),
        }
    }
}

/// The process's remote model I/O. Cheap to clone (clones share everything); the runtime and
/// the clients are built on first use, so a configuration without remote models starts none.
#[derive(Clone, Default)]
pub struct Remote {
    io: Arc<OnceLock<Result<Io, String>>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("started", &self.io.get().is_some()).finish()
    }
}

struct Io {
    /// `Some` until dropped; see the `Drop` impl.
    runtime: Option<Runtime>,
    handle: tokio::runtime::Handle,
    /// For servers on this machine, which are never behind the proxy `HTTP(S)_PROXY` names.
    direct: ReqwestClient,
    /// For everything else, through the environment's proxy if it names one.
    proxied: ReqwestClient,
}

impl Drop for Io {
    fn drop(&mut self) {
        // The last `Remote` may be dropped inside an async context (a daemon shutting down),
        // where dropping a runtime normally would panic; nothing waits on it by then.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Io {
    fn build() -> Result<Io, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(IO_THREADS)
            .thread_name(IO_THREAD)
            .enable_all()
            .build()
            .map_err(|error| format!("could not start the I/O runtime: {error}"))?;
        let client = |direct: bool| {
            let mut builder = rig_reqwest::reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
            if direct {
                builder = builder.no_proxy();
            }
            builder.build().map(ReqwestClient::from).map_err(|error| format!("could not build the HTTP client: {error}"))
        };
        Ok(Io { direct: client(true)?, proxied: client(false)?, handle: runtime.handle().clone(), runtime: Some(runtime) })
    }

}

/// Aborts the spawned request when the awaiting caller gives up (a cancelled query).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Remote {
    pub fn new() -> Remote {
        Remote::default()
    }

    fn io(&self) -> Result<&Io, RemoteError> {
        self.io.get_or_init(Io::build).as_ref().map_err(|message| RemoteError::Config(message.clone()))
    }

    /// The pooled client for requests to `base_url` (clones share one connection pool).
    pub fn http(&self, base_url: &str) -> Result<ReqwestClient, RemoteError> {
        let io = self.io()?;
        Ok(if is_loopback(base_url) { io.direct.clone() } else { io.proxied.clone() })
    }

    /// Runs `call` on the I/O runtime and awaits it from whatever runtime the caller is on.
    /// Dropping the returned future aborts the call.
    pub async fn run<T: Send + 'static>(
        &self,
        call: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, RemoteError> {
        let mut task = AbortOnDrop(self.io()?.handle.spawn(call));
        (&mut task.0).await.map_err(|error| RemoteError::Provider(format!("the request task failed: {error}")))
    }

    /// Runs `call` on the I/O runtime and blocks this thread until it is done: the bridge for
    /// synchronous code. Works on any thread, including one that is driving another runtime
    /// (current-thread or multi-thread), since this thread only waits on a channel.
    pub fn block_on<T: Send + 'static>(&self, call: impl Future<Output = T> + Send + 'static) -> Result<T, RemoteError> {
        if std::thread::current().name() == Some(IO_THREAD) {
            // The I/O runtime waiting on itself could run out of threads and never finish.
            return Err(RemoteError::Config("a blocking model call was made from the I/O runtime itself".into()));
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.io()?.handle.spawn(async move {
            // The receiver only goes away with this thread; nothing is left to tell then.
            let _ = sender.send(call.await);
        });
        receiver.recv().map_err(|_| RemoteError::Provider("the I/O runtime stopped before the request finished".into()))
    }
}

/// A server on this machine (`127.*`, `localhost`, `[::1]`).
fn is_loopback(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://localhost:11434"));
        assert!(!is_loopback("https://api.openai.com/v1"));
    }

    #[test]
    fn block_on_works_from_plain_threads_and_from_inside_either_runtime() {
        let remote = Remote::new();
        let call = || async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            std::thread::current().name().map(str::to_string)
        };
        assert_eq!(remote.block_on(call()).unwrap().as_deref(), Some(IO_THREAD));
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert_eq!(current.block_on(async { remote.block_on(call()) }).unwrap().as_deref(), Some(IO_THREAD));
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let inside = multi.block_on(async {
            let remote = remote.clone();
            tokio::spawn(async move { remote.block_on(call()) }).await.unwrap()
        });
        assert_eq!(inside.unwrap().as_deref(), Some(IO_THREAD));
    }

    #[test]
    fn run_is_awaited_from_a_current_thread_runtime() {
        let remote = Remote::new();
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let name = current.block_on(remote.run(async { std::thread::current().name().map(str::to_string) })).unwrap();
        assert_eq!(name.as_deref(), Some(IO_THREAD));
    }

    #[test]
    fn a_blocking_call_from_the_io_runtime_is_refused_not_deadlocked() {
        let remote = Remote::new();
        let inner = remote.clone();
        let nested = remote.block_on(async move { inner.block_on(async {}) }).unwrap();
        assert!(matches!(nested, Err(RemoteError::Config(_))), "{nested:?}");
    }

    #[test]
    fn dropping_the_last_handle_inside_a_runtime_does_not_panic() {
        let remote = Remote::new();
        remote.block_on(async {}).unwrap();
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        current.block_on(async move { drop(remote) });
    }

    #[test]
    fn dropping_the_awaiting_caller_aborts_the_call() {
        let remote = Remote::new();
        let (sender, receiver) = std::sync::mpsc::channel::<()>();
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        current.block_on(async {
            let slow = remote.run(async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                let _ = sender.send(());
            });
            assert!(tokio::time::timeout(Duration::from_millis(20), slow).await.is_err());
        });
        // The aborted task dropped its sender without sending.
        assert!(receiver.recv_timeout(Duration::from_secs(5)).is_err());
    }
}
