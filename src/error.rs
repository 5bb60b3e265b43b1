//! Library error type. The binary edge wraps these in `anyhow`; everything below it is typed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    // The message carries the cause; it is not also a `source`, or `{:#}` prints it twice.
    #[error("storage error: {0}")]
    Store(sled::Error),

    /// sled locks its directory: one process at a time opens a KB stored there.
    #[error(
        "{0} is in use by another a2rag process (a running `serve`, `mcp` or ingest): stop it first, or send questions, ingests and reviews to that daemon (JSON-RPC, MCP or its web page)"
    )]
    InUse(PathBuf),

    /// The PostgreSQL store failed: unreachable, refused, or a statement failed.
    #[error("PostgreSQL store: {0}")]
    Postgres(String),

    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },

    #[error("{path}:{line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },

    #[error("configuration error: {0}")]
    Config(String),

    #[error("{place} was written by schema version {found}, this build understands up to {supported}; upgrade a2rag")]
    SchemaTooNew { place: String, found: u32, supported: u32 },

    #[error(
        "knowledge base was embedded with `{stored}` but the configuration asks for `{configured}`; run `a2rag reindex` to re-embed"
    )]
    EmbedderMismatch { stored: String, configured: String },

    #[error("corrupt record {key}: {message}")]
    Corrupt { key: String, message: String },

    #[error("index error: {0}")]
    Index(String),

    #[error("embedding error: {0}")]
    Embed(String),

    /// A remote model call failed for a reason other than its configuration.
    #[error("remote model call failed: {0}")]
    Remote(String),

    #[error("not found: {0}")]
    NotFound(String),

    #[error("invalid input: {0}")]
    Invalid(String),

    /// A request for a knowledge base that does not exist; `known` lists those that do (and
    /// that the caller reaches: the engine leaves out the others).
    #[error("invalid input: unknown knowledge base `{name}` (known: {}); ingest into it to create it", .known.join(", "))]
    UnknownKb { name: String, known: Vec<String> },

    /// A valid request the current state refuses: a proposal decided already.
    #[error("conflict: {0}")]
    Conflict(String),

    /// No valid credential: a missing, wrong, revoked or expired token.
    #[error("unauthorized: {0}")]
    Unauthorized(String),

    /// A valid credential whose scope or knowledge bases do not cover the request. The message
    /// names the scope that was missing, never whether a KB the caller cannot see exists.
    #[error("forbidden: {0}")]
    Forbidden(String),

    /// More requests than a token's limits allow; the caller should slow down and retry.
    #[error("overloaded: {0}")]
    Overloaded(String),

    /// A task of this process died (a panic on a worker thread): a bug, not bad input.
    #[error("internal error: {0}; please report it")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), error: source }
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        Error::Store(e)
    }
}
