//! JSON-RPC 2.0 framing: error codes, response builders, and a bounded line reader that never
//! holds more than `max` bytes of one message in memory.

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::error::Error;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// More requests in flight than `server.max_pending`.
pub const OVERLOADED: i64 = -32000;
/// Missing or wrong `auth` token on a connection that requires one.
pub const UNAUTHORIZED: i64 = -32001;
/// A document, proposal or node that does not exist.
pub const NOT_FOUND: i64 = -32002;
/// The server is shutting down and takes no new work.
pub const SHUTTING_DOWN: i64 = -32003;
/// A valid token whose scope or knowledge bases do not cover the request.
pub const FORBIDDEN: i64 = -32004;
/// The request was cancelled by `$/cancelRequest` (the LSP code).
pub const REQUEST_CANCELLED: i64 = -32800;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// What the request did before failing (a cancelled ingest's report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }
}

impl From<Error> for RpcError {
    fn from(e: Error) -> RpcError {
        let code = match e {
            Error::Invalid(_) | Error::UnknownKb { .. } | Error::Conflict(_) => INVALID_PARAMS,
            Error::NotFound(_) => NOT_FOUND,
            Error::Unauthorized(_) => UNAUTHORIZED,
            Error::Forbidden(_) => FORBIDDEN,
            Error::Overloaded(_) => OVERLOADED,
            _ => INTERNAL_ERROR,
        };
        RpcError::new(code, e.to_string())
    }
}

pub fn success(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn failure(id: Value, error: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub enum Frame {
    Line(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded up to the next newline.
    TooLarge,
}

/// Newline-delimited frames with a size limit. `AsyncBufReadExt::read_until` would buffer an
/// endless line whole; this keeps at most `max` bytes and skips the rest.
pub struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max: usize) -> LineReader<R> {
        LineReader { inner: BufReader::new(inner), max }
    }

    /// The next frame; `None` at end of input.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        let mut line = Vec::new();
        let mut too_large = false;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Ok(match (too_large, line.is_empty()) {
                    (true, _) => Some(Frame::TooLarge),
                    (false, true) => None,
                    (false, false) => Some(Frame::Line(line)),
                });
            }
            let newline = buf.iter().position(|b| *b == b'\n');
            let piece = &buf[..newline.unwrap_or(buf.len())];
            if !too_large {
                if line.len() + piece.len() > self.max {
                    too_large = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(piece);
                }
            }
            let consumed = newline.map_or(buf.len(), |i| i + 1);
            self.inner.consume(consumed);
            if newline.is_some() {
                return Ok(Some(if too_large { Frame::TooLarge } else { Frame::Line(line) }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_skipped_and_the_next_line_survives() {
        let input = format!("{}\n{{\"a\":1}}\nshort-without-newline", "x".repeat(100));
        let mut reader = LineReader::new(input.as_bytes(), 16);
        assert!(matches!(reader.next().await.unwrap(), Some(Frame::TooLarge)));
        assert!(matches!(reader.next().await.unwrap(), Some(Frame::Line(l)) if l == b"{\"a\":1}"));
        assert!(matches!(reader.next().await.unwrap(), Some(Frame::TooLarge)));
        assert!(reader.next().await.unwrap().is_none());
    }
}
