//! The audit log: one append-only record per write a person or a client asked for (a
//! document ingested, replaced or deleted; a curation decision), each naming the credential
//! it came through. Kept in the `Audit` keyspace, written in the same atomic batch as the
//! write it records, so a write is never on disk without its record, nor the reverse.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::model::{ChunkId, EdgeId, RawTriple};
pub use super::store::OWNER;
use super::store::{KbBatch, Keyspace};
use crate::error::{Error, Result};

/// Who a write is recorded under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    /// The name of the token the request came with, or [`OWNER`] for the data directory's
    /// owner (the CLI, stdio, an unauthenticated unix socket).
    pub token: String,
    /// The name the person or client gave (a reviewer's name): a label, not a credential.
    pub who: String,
}

impl Author {
    /// The data directory's owner, labelled with the login name where there is one.
    pub fn owner() -> Author {
        let who = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| OWNER.to_string());
        Author { token: OWNER.to_string(), who }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Approve,
    Reject,
    Edit,
    /// A new document.
    Ingest,
    /// A document whose content changed.
    Replace,
    Delete,
}

impl Action {
    /// Whether the entry records a curation decision (and names a proposal).
    pub fn is_decision(self) -> bool {
        matches!(self, Action::Approve | Action::Reject | Action::Edit)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    /// The name given for the write (a reviewer's, a client's): a label.
    pub who: String,
    /// The token the write came through ([`OWNER`] without one). Empty in entries written
    /// before tokens were recorded.
    #[serde(default)]
    pub token: String,
    /// Unix time in milliseconds.
    pub when_ms: u64,
    pub action: Action,
    pub doc_id: String,
    /// The decided proposal, for a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<u64>,
    /// The triple that went into the graph (the corrected one for an edit) or was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triple: Option<RawTriple>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<ChunkId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeId>,
}

impl AuditEntry {
    /// The record of a document write, to be filled into the write's batch.
    pub fn document(seq: u64, author: &Author, action: Action, doc_id: &str) -> AuditEntry {
        AuditEntry {
            seq,
            who: author.who.clone(),
            token: author.token.clone(),
            when_ms: now_ms(),
            action,
            doc_id: doc_id.to_string(),
            proposal: None,
            triple: None,
            chunk: None,
            edge: None,
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl KbBatch {
    /// Adds `entry` to the audit log and names its token as the batch's author (the change
    /// log's, where the store keeps one).
    pub fn put_audit(&mut self, entry: &AuditEntry) -> Result<()> {
        let bytes =
            serde_json::to_vec(entry).map_err(|e| Error::Invalid(format!("cannot encode an audit entry: {e}")))?;
        self.put_raw(Keyspace::Audit, &entry.seq.to_be_bytes(), bytes);
        self.set_author(&entry.token);
        Ok(())
    }
}
