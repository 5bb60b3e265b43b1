//! `a2rag mcp`: the Model Context Protocol over stdio (newline-delimited JSON-RPC), with the
//! official Rust SDK (`rmcp`). A front door like `rpc`: each tool decodes its arguments,
//! calls one `Engine` operation and returns the result as JSON (text and structured
//! content).
//!
//! Failures an assistant can act on (bad arguments, an unknown knowledge base or proposal, an
//! empty question) come back as tool errors (`isError: true`) whose text says what to fix, so
//! the model sees them; only an unknown tool name is a protocol error. stdout carries nothing
//! but protocol messages: logs go to stderr. The server ends when stdin ends.
//!
//! Access: the server acts for one caller for its whole session, the token in `A2RAG_TOKEN`
//! (set in the client's configuration for the server) or, without one, the data directory's
//! owner, who started it. Tools the token's scope lacks are not listed, and refused if called.
//!
//! Protocol revisions: whatever the SDK knows, from 2024-11-05 to its latest; an `initialize`
//! naming an older revision is answered with that revision.

pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::access::{Caller, Scope};
use crate::control::QueryRequest;
use crate::engine::{Decision, Engine, IngestInput, RetrieveRequest};
use crate::error::{Error, Result};
use crate::kb::catalog::KbName;
use crate::metrics::{Door, Outcome};
use tools::*;

const INSTRUCTIONS: &str = "a2rag answers questions over document collections (knowledge bases) with a knowledge graph \
and verified retrieval. Use `retrieve` to get cited evidence passages and write the answer yourself, or `ask` for a2rag's \
own verified answer. `kb_stats` shows which knowledge bases exist; every tool takes an optional `kb` name. \
`ingest_text` adds documents. Answers propose new graph triples; `list_proposals` and `review_proposal` let you help a \
person curate them: decide only what they asked you to.";

/// The environment variable an MCP client passes the server's token in.
pub const TOKEN_ENV: &str = "A2RAG_TOKEN";

/// The MCP server: the engine, whom it acts for, and the knowledge base a call without `kb`
/// works on.
#[derive(Clone)]
pub struct McpServer {
    engine: Arc<Engine>,
    caller: Caller,
    default_kb: KbName,
}

/// The caller of an MCP session: the token in [`TOKEN_ENV`], else the owner.
pub fn caller_from_env(engine: &Engine) -> Result<Caller> {
    match std::env::var(TOKEN_ENV).ok().filter(|t| !t.trim().is_empty()) {
        Some(token) => engine.authenticate(&token).map_err(|e| Error::Unauthorized(format!("{TOKEN_ENV}: {e}"))),
        None => Ok(Caller::owner()),
    }
}

/// Serves MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(engine: Arc<Engine>, caller: Caller, default_kb: KbName) -> Result<()> {
    let server = McpServer::new(engine.clone(), caller, default_kb);
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            // A client that goes away before the handshake ends the session; it is no fault here.
            tracing::warn!(error = %e, "MCP session ended before it started");
            return engine.flush_idle();
        }
    };
    let reason = running.waiting().await.map_err(|e| Error::Internal(format!("the MCP service stopped: {e}")))?;
    tracing::info!(?reason, "MCP session ended");
    engine.flush_idle()
}

impl McpServer {
    pub fn new(engine: Arc<Engine>, caller: Caller, default_kb: KbName) -> McpServer {
        McpServer { engine, caller, default_kb }
    }

    /// Every tool with its input schema and the scope it needs.
    pub fn all_tools() -> std::result::Result<Vec<(Tool, Scope)>, String> {
        Ok(vec![
            (tool::<RetrieveArgs>("retrieve", "Retrieve evidence", RETRIEVE, Effect::ReadOnly)?, Scope::Read),
            // Proposes triples: a write, but one that removes nothing.
            (tool::<AskArgs>("ask", "Ask for a verified answer", ASK, Effect::Adds)?, Scope::Read),
            (tool::<IngestTextArgs>("ingest_text", "Add documents", INGEST_TEXT, Effect::Adds)?, Scope::Write),
            (tool::<KbArgs>("kb_stats", "Knowledge base sizes", KB_STATS, Effect::ReadOnly)?, Scope::Read),
            (
                tool::<ListProposalsArgs>("list_proposals", "List triple proposals", LIST_PROPOSALS, Effect::ReadOnly)?,
                Scope::Curate,
            ),
            (
                tool::<ReviewProposalArgs>(
                    "review_proposal",
                    "Decide a triple proposal",
                    REVIEW_PROPOSAL,
                    Effect::Decides,
                )?,
                Scope::Curate,
            ),
        ])
    }

    /// The tools this session's caller may use.
    pub fn tools(&self) -> std::result::Result<Vec<Tool>, String> {
        Ok(McpServer::all_tools()?.into_iter().filter(|(_, scope)| self.caller.may(*scope)).map(|(t, _)| t).collect())
    }

    fn kb(&self, name: Option<String>) -> Result<KbName> {
        name.map_or_else(|| Ok(self.default_kb.clone()), |n| KbName::new(&n))
    }

    /// Runs tool `name`; `Ok(None)` when there is no such tool.
    async fn run(&self, name: &str, args: Map<String, Value>, client: &str) -> Result<Option<Value>> {
        let (engine, caller) = (&self.engine, &self.caller);
        let value = match name {
            "retrieve" => {
                let RetrieveArgs { question, kb, policy, top_k } = decode(name, args)?;
                to_json(engine.retrieve(caller, &self.kb(kb)?, &RetrieveRequest { question, policy, top_k }).await?)
            }
            "ask" => {
                let AskArgs { question, kb, policy, budget } = decode(name, args)?;
                let request = QueryRequest { question, policy, budget };
                to_json(engine.query(caller, &self.kb(kb)?, &request).await?)
            }
            "ingest_text" => {
                let IngestTextArgs { documents, kb } = decode(name, args)?;
                if documents.is_empty() {
                    return Err(Error::Invalid("`documents` is empty: give at least one document".into()));
                }
                let input = IngestInput::documents(documents, "mcp");
                to_json(engine.ingest(caller, &self.kb(kb)?, input, ()).await?)
            }
            "kb_stats" => {
                let KbArgs { kb } = decode(name, args)?;
                let kb = self.kb(kb)?;
                let stats = engine.stats(caller, &kb).await?;
                Ok(json!({"kb": kb, "stats": stats, "kbs": engine.kbs(caller)?}))
            }
            "list_proposals" => {
                let ListProposalsArgs { status, kb } = decode(name, args)?;
                // Structured content must be an object.
                Ok(json!({"proposals": engine.proposals(caller, &self.kb(kb)?, status).await?}))
            }
            "review_proposal" => {
                let args: ReviewProposalArgs = decode(name, args)?;
                let decision = match (args.decision, args.corrected().map_err(Error::Invalid)?) {
                    (DecisionArg::Approve, _) => Decision::Approve,
                    (DecisionArg::Reject, _) => Decision::Reject,
                    (DecisionArg::Edit, Some(triple)) => Decision::Edit(triple),
                    (DecisionArg::Edit, None) => {
                        return Err(Error::Invalid("decision `edit` needs the corrected triple".into()));
                    }
                };
                let who = args.who.clone().unwrap_or_else(|| format!("mcp:{client}"));
                to_json(engine.decide(caller, &self.kb(args.kb)?, args.id, Some(&who), decision).await?)
            }
            _ => return Ok(None),
        };
        value.map(Some)
    }
}

/// What a tool does to the knowledge base, for the clients' annotations (hints only).
enum Effect {
    ReadOnly,
    Adds,
    /// Irreversible: a decided proposal cannot be decided again.
    Decides,
}

fn tool<T: JsonSchema + 'static>(
    name: &'static str,
    title: &str,
    description: &'static str,
    effect: Effect,
) -> std::result::Result<Tool, String> {
    let schema = rmcp::handler::server::tool::schema_for_input::<T>()?;
    let annotations = ToolAnnotations::with_title(title).open_world(false);
    let annotations = match effect {
        Effect::ReadOnly => annotations.read_only(true),
        Effect::Adds => annotations.read_only(false).destructive(false),
        Effect::Decides => annotations.read_only(false).destructive(true).idempotent(false),
    };
    Ok(Tool::new(name, description, schema).with_title(title).with_annotations(annotations))
}

fn decode<T: DeserializeOwned>(tool: &str, args: Map<String, Value>) -> Result<T> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| Error::Invalid(format!("arguments of `{tool}`: {e} (see the tool's input schema)")))
}

fn to_json<T: Serialize>(value: T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Internal(format!("cannot encode the result: {e}")))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("a2rag", env!("CARGO_PKG_VERSION")).with_title("a2rag knowledge bases"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        self.tools()
            .map(ListToolsResult::with_all_items)
            .map_err(|e| ErrorData::internal_error(format!("tool schema: {e}"), None))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().ok()?.into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let client =
            context.peer.peer_info().map_or_else(|| "client".to_string(), |info| info.client_info.name.clone());
        let name = request.name.to_string();
        let metrics = &self.engine.metrics;
        let in_flight = metrics.in_flight();
        let ran = self.run(&name, request.arguments.unwrap_or_default(), &client).await;
        drop(in_flight);
        // Unknown tool names are the client's to choose: they are not a label.
        if let Ok(Some(_)) | Err(_) = &ran {
            metrics.request(Door::Mcp, &name, Outcome::of(&ran));
        }
        match ran {
            Ok(Some(value)) => Ok(CallToolResult::structured(value).into()),
            Ok(None) => {
                let known: Vec<String> =
                    self.tools().unwrap_or_default().into_iter().map(|t| t.name.to_string()).collect();
                Err(ErrorData::invalid_params(format!("unknown tool `{name}` (tools: {})", known.join(", ")), None))
            }
            Err(e) => {
                tracing::debug!(tool = %name, error = %e, "tool call failed");
                Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into())
            }
        }
    }
}
