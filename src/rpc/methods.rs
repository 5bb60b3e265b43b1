//! The JSON-RPC methods: each decodes its params, calls one [`crate::engine::Engine`] operation and encodes
//! the result. Every method that touches a knowledge base takes an optional `kb` name.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Server;
use super::protocol::{INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED, RpcError, notification};
use crate::access::{Caller, Scope, TokenSpec};
use crate::control::QueryRequest;
use crate::curate::{AuditFilter, ProposalId, Status};
use crate::engine::{Decision, EntityRef, IngestInput, Ingested, InlineDoc, RetrieveRequest};
use crate::ingest::Progress;
use crate::ingest::source::Access;
use crate::kb::catalog::KbName;
use crate::kb::model::{NodeId, RawTriple};

pub const METHODS: &[&str] = &[
    "query",
    "retrieve",
    "ingest",
    "delete",
    "stats",
    "documents",
    "kbs",
    "health",
    "check",
    "proposals.list",
    "proposals.approve",
    "proposals.reject",
    "proposals.edit",
    "audit",
    "graph.node",
    "tokens.list",
    "tokens.create",
    "tokens.revoke",
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
    /// Who the connection acts for.
    pub caller: Caller,
    /// The connection's outgoing lines, for notifications.
    pub out: mpsc::Sender<String>,
    pub id: Value,
    /// Set by `$/cancelRequest` (for methods that [`stops_on_cancel`]).
    pub cancelled: Arc<AtomicBool>,
}

type MethodResult = Result<Value, RpcError>;

/// The methods answered on the spot, without a task or a permit: they only read the
/// server's own state, so neither load nor shutdown may refuse them.
pub fn immediate(server: &Server, caller: &Caller, method: &str, params: &Value) -> Option<MethodResult> {
    let no_params = || decode::<Empty>(params.clone());
    match method {
        "health" => Some(no_params().map(|_| {
            let store = server.engine.store_status();
            let status = if server.is_shutting_down() {
                "shutting_down"
            } else if store.stale(server.engine.settings.store.poll_ms) {
                "degraded"
            } else {
                "ok"
            };
            json!({
                "status": status,
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_ms": server.started.elapsed().as_millis() as u64,
                "pending": server.pending(),
                "max_pending": server.max_pending,
                "store": store,
            })
        })),
        "shutdown" => Some(no_params().and_then(|_| {
            server.engine.admit(caller, Scope::Admin, None)?;
            server.begin_shutdown();
            Ok(json!({"shutting_down": true}))
        })),
        _ => None,
    }
}

/// Decodes the params of `method`, calls the one [`crate::engine::Engine`] operation it stands for, and
/// encodes the result.
pub async fn call(cx: Context, method: &str, params: Value) -> MethodResult {
    let engine = &cx.server.engine;
    let caller = &cx.caller;
    match method {
        "check" => {
            let CheckParams { kb, repair } = decode(params)?;
            to_json(&engine.check(caller, &kb, repair).await?)
        }
        "tokens.list" => {
            decode::<Empty>(params)?;
            let tokens: Vec<_> = engine.tokens(caller)?.iter().map(|t| t.shown()).collect();
            Ok(json!({"tokens": tokens}))
        }
        "tokens.create" => {
            let TokenParams { name, scope, kbs, expires, rps, concurrent } = decode(params)?;
            let spec = TokenSpec::new(name, scope, kbs, expires.as_deref().unwrap_or("never"), rps, concurrent)?;
            let (record, token) = engine.create_token(caller, spec)?;
            Ok(json!({"token": token, "record": record.shown()}))
        }
        "tokens.revoke" => {
            let NameParam { name } = decode(params)?;
            engine.revoke_token(caller, &name)?;
            Ok(json!({"revoked": name}))
        }
        "stats" => {
            let KbParam { kb } = decode(params)?;
            to_json(&engine.stats(caller, &kb).await?)
        }
        "documents" => {
            let KbParam { kb } = decode(params)?;
            to_json(&engine.documents(caller, &kb).await?)
        }
        "kbs" => {
            decode::<Empty>(params)?;
            Ok(json!({"kbs": engine.kbs(caller)?}))
        }
        "query" => {
            let (kb, request) = decode_on_kb::<QueryRequest>(params)?;
            to_json(&engine.query(caller, &kb, &request).await?)
        }
        "retrieve" => {
            let (kb, request) = decode_on_kb::<RetrieveRequest>(params)?;
            to_json(&engine.retrieve(caller, &kb, &request).await?)
        }
        "ingest" => ingest(cx, decode(params)?).await,
        "delete" => {
            let IdParam { id, kb } = decode(params)?;
            engine.delete(caller, &kb, &id).await?;
            Ok(json!({"deleted": id}))
        }
        "proposals.list" => {
            let ListParams { status, kb } = decode(params)?;
            to_json(&engine.proposals(caller, &kb, status).await?)
        }
        "proposals.approve" | "proposals.reject" => {
            let DecideParams { id, who, kb } = decode(params)?;
            let decision = if method == "proposals.approve" { Decision::Approve } else { Decision::Reject };
            to_json(&engine.decide(caller, &kb, id, who.as_deref(), decision).await?)
        }
        "proposals.edit" => {
            let EditParams { id, who, subject, relation, object, kb } = decode(params)?;
            let decision = Decision::Edit(RawTriple { subject, relation, object });
            to_json(&engine.decide(caller, &kb, id, who.as_deref(), decision).await?)
        }
        "graph.node" => {
            let NodeParams { name, id, limit, kb } = decode(params)?;
            to_json(&engine.entity(caller, &kb, &EntityRef::one_of(id, name)?, limit).await?)
        }
        "audit" => {
            let (kb, filter) = decode_on_kb::<AuditFilter>(params)?;
            Ok(json!({"entries": engine.audit(caller, &kb, &filter).await?}))
        }
        _ => Err(RpcError::new(super::protocol::METHOD_NOT_FOUND, format!("method not found: {method}"))),
    }
}

/// Absent params mean "no parameters"; unknown fields are refused by each type.
fn decode<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { json!({}) } else { params };
    serde_json::from_value(params).map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid params: {e}")))
}

/// Params of a request type shared with other front doors, plus the knowledge base they are
/// for. (`kb` is taken out first: serde's `flatten` would let unknown fields through.)
fn decode_on_kb<T: DeserializeOwned>(mut params: Value) -> Result<(KbName, T), RpcError> {
    let kb = match params.as_object_mut().and_then(|map| map.remove("kb")) {
        Some(Value::Null) | None => KbName::default(),
        Some(name) => serde_json::from_value(name)
            .map_err(|e| RpcError::new(INVALID_PARAMS, format!("invalid params: kb: {e}")))?,
    };
    // `kb` was taken out above, so serde's list of the fields it expected lacks it.
    let params = decode(params).map_err(|mut e| {
        if e.message.contains("unknown field") {
            e.message.push_str(", or `kb`");
        }
        e
    })?;
    Ok((kb, params))
}

fn to_json<T: serde::Serialize>(value: &T) -> MethodResult {
    serde_json::to_value(value).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KbParam {
    #[serde(default)]
    kb: KbName,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckParams {
    #[serde(default)]
    kb: KbName,
    /// Release orphaned decisions first (`a2rag check --repair`); admin only.
    #[serde(default)]
    repair: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameParam {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenParams {
    name: String,
    scope: Scope,
    /// The KBs it may use; empty: all.
    #[serde(default)]
    kbs: Vec<KbName>,
    /// `never` (the default) or a duration from now: `30d`, `12h`, `90m`, `45s`.
    #[serde(default)]
    expires: Option<String>,
    #[serde(default)]
    rps: Option<f64>,
    #[serde(default)]
    concurrent: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdParam {
    id: String,
    #[serde(default)]
    kb: KbName,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    kb: KbName,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideParams {
    id: ProposalId,
    #[serde(default)]
    who: Option<String>,
    #[serde(default)]
    kb: KbName,
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
    #[serde(default)]
    kb: KbName,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestParams {
    #[serde(default)]
    paths: Vec<PathBuf>,
    #[serde(default)]
    documents: Vec<InlineDoc>,
    #[serde(default)]
    kb: KbName,
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
    #[serde(default)]
    kb: KbName,
}

fn default_limit() -> usize {
    100
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

async fn ingest(cx: Context, params: IngestParams) -> MethodResult {
    let engine = &cx.server.engine;
    let settings = &engine.settings;
    let input = IngestInput {
        paths: params.paths,
        access: Access::within(&settings.server.ingest_roots, settings.ingest.max_file_bytes),
        documents: params.documents,
        source: "rpc".into(),
    };
    let progress =
        Notifier { out: cx.out.clone(), request: cx.id.clone(), cancelled: cx.cancelled.clone(), done: 0, total: 0 };
    let Ingested { report, stats } = engine.ingest(&cx.caller, &params.kb, input, progress).await?;
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
