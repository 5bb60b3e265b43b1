//! The methods. Reads (query, stats, lists, graph) share the KB read lock and run in
//! parallel; writes (ingest, delete, decisions) take the write lock on a blocking thread, one
//! at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Server;
use super::protocol::{INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED, RpcError, notification};
use crate::control::QueryRequest;
use crate::curate::{self, ProposalId, Status};
use crate::engine::Engine;
use crate::error::Error;
use crate::ingest::source::{Access, SourceDoc};
use crate::ingest::{self, IngestReport, Progress};
use crate::kb::model::{NodeId, RawTriple};

pub const METHODS: &[&str] = &[
    "query",
    "ingest",
    "delete",
    "stats",
    "health",
    "check",
    "proposals.list",
    "proposals.approve",
    "proposals.reject",
    "proposals.edit",
    "graph.node",
    "shutdown",
];

/// Methods that stop by themselves when cancelled (and report what they did) instead of
/// being aborted.
pub fn stops_on_cancel(method: &str) -> bool {
    method == "ingest"
}

/// What a method may use besides its parameters.
pub struct Context {
    pub server: Arc<Server>,
    /// The connection's outgoing lines, for notifications.
    pub out: mpsc::Sender<String>,
    pub id: Value,
    /// Set by `$/cancelRequest` (for methods that [`stops_on_cancel`]).
    pub cancelled: Arc<AtomicBool>,
}

type MethodResult = Result<Value, RpcError>;

/// The methods answered on the spot, without a task or a permit: they only read the
/// server's own state, so neither load nor shutdown may refuse them.
pub fn immediate(server: &Server, method: &str, params: &Value) -> Option<MethodResult> {
    let no_params = || decode::<Empty>(params.clone());
    match method {
        "health" => Some(no_params().map(|_| {
            json!({
                "status": if server.is_shutting_down() { "shutting_down" } else { "ok" },
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_ms": server.started.elapsed().as_millis() as u64,
                "pending": server.max_pending - server.permits.available_permits(),
                "max_pending": server.max_pending,
            })
        })),
        "shutdown" => Some(no_params().map(|_| {
            server.begin_shutdown();
            json!({"shutting_down": true})
        })),
        _ => None,
    }
}

pub async fn call(cx: Context, method: &str, params: Value) -> MethodResult {
    match method {
        "check" => {
            decode::<Empty>(params)?;
            let kb = cx.server.engine.kb.read().await;
            let mut violations = kb.integrity_violations();
            violations.extend(curate::integrity_violations(&kb)?);
            Ok(json!({"ok": violations.is_empty(), "violations": violations}))
        }
        "stats" => {
            decode::<Empty>(params)?;
            to_json(&cx.server.engine.kb.read().await.stats())
        }
        "query" => query(&cx, decode(params)?).await,
        "ingest" => ingest_method(cx, decode(params)?).await,
        "delete" => {
            let IdParam { id } = decode(params)?;
            write(&cx.server.engine, move |kb| {
                if !kb.delete_document(&id)? {
                    return Err(Error::NotFound(format!("document `{id}`")));
                }
                kb.flush()?;
                Ok(json!({"deleted": id}))
            })
            .await
        }
        "proposals.list" => {
            let ListParams { status } = decode(params)?;
            to_json(&curate::list(&*cx.server.engine.kb.read().await, status)?)
        }
        "proposals.approve" | "proposals.reject" => {
            let DecideParams { id, who } = decode(params)?;
            let approve = method == "proposals.approve";
            let who = who.unwrap_or_else(|| "rpc".into());
            write(&cx.server.engine, move |kb| {
                let p = if approve { curate::approve(kb, id, &who)? } else { curate::reject(kb, id, &who)? };
                serde_json::to_value(p).map_err(|e| Error::Invalid(e.to_string()))
            })
            .await
        }
        "proposals.edit" => {
            let EditParams { id, who, subject, relation, object } = decode(params)?;
            let who = who.unwrap_or_else(|| "rpc".into());
            write(&cx.server.engine, move |kb| {
                let p = curate::edit(kb, id, &who, RawTriple { subject, relation, object })?;
                serde_json::to_value(p).map_err(|e| Error::Invalid(e.to_string()))
            })
            .await
        }
        "graph.node" => graph_node(&cx.server.engine, decode(params)?).await,
        _ => Err(RpcError::new(super::protocol::METHOD_NOT_FOUND, format!("method not found: {method}"))),
    }
}

/// Absent params mean "no parameters"; unknown fields are refused by each type.
fn decode<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { json!({}) } else { params };
    serde_json::from_value(params).map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid params: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> MethodResult {
    serde_json::to_value(value).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdParam {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideParams {
    id: ProposalId,
    #[serde(default)]
    who: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditParams {
    id: ProposalId,
    #[serde(default)]
    who: Option<String>,
    subject: String,
    relation: String,
    object: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestParams {
    #[serde(default)]
    paths: Vec<PathBuf>,
    #[serde(default)]
    documents: Vec<InlineDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InlineDoc {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    title: Option<String>,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeParams {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    id: Option<NodeId>,
    /// Most neighbours and provenance chunks to return (hubs have thousands).
    #[serde(default = "default_limit")]
    limit: usize,
}

fn default_limit() -> usize {
    100
}

/// Runs `f` with the write lock on a blocking thread: KB writes are synchronous sled and
/// index work that must not stall the async workers answering queries.
async fn write<F>(engine: &Arc<Engine>, f: F) -> MethodResult
where
    F: FnOnce(&mut crate::kb::Kb) -> crate::Result<Value> + Send + 'static,
{
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || f(&mut engine.kb.blocking_write()))
        .await
        .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("internal error: {e}")))?
        .map_err(RpcError::from)
}

async fn query(cx: &Context, request: QueryRequest) -> MethodResult {
    let engine = &cx.server.engine;
    let response = engine.query(&request).await?;
    let proposals = if response.answer.is_some() {
        match curate::propose_from_response(&*engine.kb.read().await, &response) {
            Ok(p) => p.into_iter().map(|p| p.id).collect(),
            // The answer stands on its own; failing to propose must not cost the caller it.
            Err(e) => {
                tracing::warn!(error = %e, "proposing triples failed");
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let mut value = to_json(&response)?;
    if let Value::Object(map) = &mut value {
        map.insert("proposals".into(), json!(proposals));
    }
    Ok(value)
}

/// Sends `ingest/progress` notifications to the requesting client. Notifications are dropped
/// rather than awaited when the client reads slowly: the ingest must not wait on one
/// client's socket.
struct Notifier {
    out: mpsc::Sender<String>,
    request: Value,
    cancelled: Arc<AtomicBool>,
    done: usize,
    total: usize,
}

impl Progress for Notifier {
    fn start(&mut self, total: usize) {
        self.done = 0;
        self.total = total;
    }
    fn advance(&mut self, doc: &str) {
        self.done += 1;
        let params = json!({"request": self.request, "done": self.done, "total": self.total, "doc": doc});
        let _ = self.out.try_send(notification("ingest/progress", params).to_string());
    }
    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

async fn ingest_method(cx: Context, params: IngestParams) -> MethodResult {
    if params.paths.is_empty() && params.documents.is_empty() {
        return Err(RpcError::new(INVALID_PARAMS, "invalid params: give `paths` or `documents`"));
    }
    let settings = &cx.server.engine.settings;
    let access = Access::within(&settings.server.ingest_roots, settings.ingest.max_file_bytes);
    for path in &params.paths {
        access.check(path)?;
    }
    let mut docs = Vec::with_capacity(params.documents.len());
    for (i, d) in params.documents.into_iter().enumerate() {
        if d.text.trim().is_empty() {
            return Err(RpcError::new(INVALID_PARAMS, format!("invalid params: documents[{i}].text is empty")));
        }
        let title = d.title.or_else(|| d.id.clone()).unwrap_or_default();
        let id = match d.id.or_else(|| (!title.is_empty()).then(|| title.clone())) {
            Some(id) => id,
            None => format!("rpc-{}", &ingest::content_hash(&title, &d.text)[..16]),
        };
        docs.push(SourceDoc { id, title, text: d.text, source: "rpc".into() });
    }
    let mut progress =
        Notifier { out: cx.out.clone(), request: cx.id.clone(), cancelled: cx.cancelled.clone(), done: 0, total: 0 };
    let paths = params.paths;
    let engine = cx.server.engine.clone();
    // The write lock is taken per document (see `ingest::KbAccess`), so queries run between
    // the documents of a long ingest.
    let (report, stats) = tokio::task::spawn_blocking(move || -> crate::Result<(IngestReport, crate::kb::Stats)> {
        let mut kb = &engine.kb;
        let mut report = if paths.is_empty() {
            IngestReport::default()
        } else {
            ingest::ingest_paths_within(&mut kb, &engine.pipeline, &paths, &access, &mut progress)?
        };
        if !docs.is_empty() && !report.cancelled {
            ingest::ingest_docs(&mut kb, &engine.pipeline, docs, &mut progress, &mut report)?;
        }
        // Durable before the answer, cancelled or not: what the report says committed did.
        let kb = engine.kb.blocking_read();
        kb.flush()?;
        Ok((report, kb.stats()))
    })
    .await
    .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("internal error: {e}")))??;
    if report.cancelled {
        let committed = report.added + report.replaced + report.unchanged;
        return Err(RpcError::new(
            REQUEST_CANCELLED,
            format!("request cancelled: {committed} document(s) were ingested before the cancel, the rest were not"),
        )
        .with_data(json!({"report": report, "stats": stats})));
    }
    Ok(json!({"report": report, "stats": stats}))
}

async fn graph_node(engine: &Engine, params: NodeParams) -> MethodResult {
    let kb = engine.kb.read().await;
    let id = match (params.id, &params.name) {
        (Some(id), None) => id,
        (None, Some(name)) => kb.node_by_alias(name).ok_or_else(|| Error::NotFound(format!("node named `{name}`")))?,
        _ => {
            return Err(RpcError::new(INVALID_PARAMS, "invalid params: give exactly one of `name` or `id`"));
        }
    };
    let node = kb.node(id).ok_or_else(|| Error::NotFound(format!("node {id}")))?;
    let steps = kb.graph().steps(id);
    let neighbours: Vec<Value> = steps
        .iter()
        .take(params.limit)
        .filter_map(|s| {
            let edge = kb.edge(s.edge)?;
            Some(json!({
                "edge": edge.id,
                "relation": edge.relation,
                "direction": if s.forward { "out" } else { "in" },
                "node": s.to,
                "name": kb.node(s.to).map(|n| n.name.as_str()),
                "chunk": edge.chunk,
                "origin": edge.origin,
            }))
        })
        .collect();
    let chunks: Vec<Value> = node
        .chunks
        .iter()
        .take(params.limit)
        .filter_map(|c| {
            let chunk = kb.chunk(*c)?;
            Some(json!({
                "chunk": chunk.id,
                "doc_id": kb.doc(chunk.doc).map(|d| d.id.as_str()),
                "title": kb.chunk_title(chunk),
                "span": chunk.span,
                "text": chunk.text,
            }))
        })
        .collect();
    Ok(json!({
        "id": node.id,
        "name": node.name,
        "aliases": node.aliases,
        "degree": steps.len(),
        "neighbours": neighbours,
        "provenance_count": node.chunks.len(),
        "provenance": chunks,
    }))
}
