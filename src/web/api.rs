//! The page's JSON API: each handler decodes its query or body, calls one [`Engine`]
//! operation and encodes the result.
//!
//! [`Engine`]: crate::engine::Engine

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Authed;
use super::extract::{Json as Body, Path, Query};
use super::{ApiError, Shared};
use crate::access::Scope;
use crate::control::QueryRequest;
use crate::curate::{Action, AuditFilter, ProposalId, Status};
use crate::engine::{Decision, EntityRef};
use crate::error::Error;
use crate::kb::catalog::KbName;
use crate::kb::model::{NodeId, RawTriple};

type ApiResult = Result<Json<Value>, ApiError>;

fn to_json<T: serde::Serialize>(value: &T) -> ApiResult {
    serde_json::to_value(value)
        .map(Json)
        .map_err(|e| Error::Internal(format!("cannot encode the response: {e}")).into())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OnKb {
    #[serde(default)]
    kb: KbName,
}

/// Who is signed in and what the page should offer them: what their scope allows.
pub(super) async fn session(State(web): Shared, Extension(authed): Extension<Authed>) -> ApiResult {
    let caller = &authed.caller;
    let may: Vec<&str> = Scope::ALL.iter().filter(|s| caller.may(**s)).map(|s| s.name()).collect();
    Ok(Json(json!({
        "csrf": authed.csrf,
        "token": caller.name(),
        "scope": caller.scope(),
        "may": may,
        "kbs": web.engine.kbs(caller)?,
    })))
}

pub(super) async fn status(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(OnKb { kb }): Query<OnKb>,
) -> ApiResult {
    let engine = &web.engine;
    Ok(Json(json!({
        "kb": kb,
        "stats": engine.stats(&authed.caller, &kb).await?,
        "kbs": engine.kbs(&authed.caller)?,
        "llm": engine.llm.is_some(),
        "pending_requests": engine.metrics.pending(),
        "uptime_s": engine.metrics.uptime().as_secs(),
        "version": env!("CARGO_PKG_VERSION"),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProposalsQuery {
    #[serde(default)]
    kb: KbName,
    /// Default `pending`: the review queue.
    #[serde(default)]
    status: Option<Status>,
}

pub(super) async fn proposals(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(q): Query<ProposalsQuery>,
) -> ApiResult {
    let items = web.engine.review_items(&authed.caller, &q.kb, Some(q.status.unwrap_or(Status::Pending))).await?;
    to_json(&json!({"proposals": items}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    /// The reviewer, recorded in the audit log.
    who: String,
    /// For an edit: the corrected triple.
    #[serde(default)]
    triple: Option<RawTriple>,
}

/// `POST /api/proposals/{id}/{action}`: approve, reject, or edit (which takes the corrected
/// `triple`).
pub(super) async fn decide(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Path((id, action)): Path<(ProposalId, Action)>,
    Query(OnKb { kb }): Query<OnKb>,
    Body(body): Body<DecisionBody>,
) -> ApiResult {
    let decision = match (action, body.triple) {
        (Action::Approve, None) => Decision::Approve,
        (Action::Reject, None) => Decision::Reject,
        (Action::Edit, Some(triple)) => Decision::Edit(triple),
        (Action::Edit, None) => return Err(Error::Invalid("an edit needs the corrected `triple`".into()).into()),
        (Action::Approve | Action::Reject, Some(_)) => {
            return Err(Error::Invalid("only an edit takes a `triple`".into()).into());
        }
        (Action::Ingest | Action::Replace | Action::Delete, _) => {
            return Err(Error::Invalid("a proposal is approved, rejected or edited".into()).into());
        }
    };
    to_json(&web.engine.decide(&authed.caller, &kb, id, Some(&body.who), decision).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    #[serde(default)]
    kb: KbName,
    #[serde(default)]
    who: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    action: Option<Action>,
    #[serde(default)]
    text: Option<String>,
}

impl AuditQuery {
    fn split(self) -> (KbName, AuditFilter) {
        let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
        let filter = AuditFilter {
            who: nonempty(self.who),
            token: nonempty(self.token),
            action: self.action,
            text: nonempty(self.text),
        };
        (self.kb, filter)
    }
}

/// The audit log, newest first.
pub(super) async fn audit(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(q): Query<AuditQuery>,
) -> ApiResult {
    let (kb, filter) = q.split();
    let mut entries = web.engine.audit(&authed.caller, &kb, &filter).await?;
    entries.reverse();
    to_json(&json!({"entries": entries}))
}

/// The same entries as a download, one JSON object per line, oldest first (as `a2rag audit`).
pub(super) async fn audit_jsonl(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(q): Query<AuditQuery>,
) -> Result<Response, ApiError> {
    let (kb, filter) = q.split();
    let mut out = String::new();
    for entry in web.engine.audit(&authed.caller, &kb, &filter).await? {
        let line = serde_json::to_string(&entry).map_err(|e| Error::Internal(format!("cannot encode the log: {e}")))?;
        out.push_str(&line);
        out.push('\n');
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"a2rag-audit.jsonl\""),
        ],
        out,
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EntitiesQuery {
    #[serde(default)]
    kb: KbName,
    q: String,
    #[serde(default = "default_suggestions")]
    limit: usize,
}

fn default_suggestions() -> usize {
    10
}

pub(super) async fn entities(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(q): Query<EntitiesQuery>,
) -> ApiResult {
    let suggestions = web.engine.suggest_entities(&authed.caller, &q.kb, &q.q, q.limit.min(50)).await?;
    to_json(&json!({"entities": suggestions}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EntityQuery {
    #[serde(default)]
    kb: KbName,
    #[serde(default)]
    id: Option<NodeId>,
    #[serde(default)]
    name: Option<String>,
    /// Neighbours and chunks to show: a drawing stays readable up to a few dozen nodes.
    #[serde(default = "default_neighbourhood")]
    limit: usize,
}

fn default_neighbourhood() -> usize {
    30
}

pub(super) async fn entity(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Query(q): Query<EntityQuery>,
) -> ApiResult {
    let entity = EntityRef::one_of(q.id, q.name)?;
    to_json(&web.engine.entity(&authed.caller, &q.kb, &entity, q.limit.min(100)).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AskBody {
    #[serde(default)]
    kb: KbName,
    question: String,
    #[serde(default)]
    policy: Option<String>,
}

/// A question through the controller; an accepted answer proposes triples for the queue.
pub(super) async fn ask(
    State(web): Shared,
    Extension(authed): Extension<Authed>,
    Body(body): Body<AskBody>,
) -> ApiResult {
    let request = QueryRequest { question: body.question, policy: body.policy, ..Default::default() };
    to_json(&web.engine.query(&authed.caller, &body.kb, &request).await?)
}

/// Prometheus text; any token may scrape (the figures name no KB contents).
pub(super) async fn metrics(State(web): Shared, Extension(authed): Extension<Authed>) -> Result<Response, ApiError> {
    let _slot = web.engine.admit(&authed.caller, Scope::Read, None)?;
    let text = web.engine.metrics.render()?;
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
