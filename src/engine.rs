//! The long-lived state a CLI command or a daemon works with, and the operations every front
//! door (CLI, JSON-RPC, MCP, web) calls: query-and-propose, evidence-only retrieval, text
//! search, ingest, delete, curation decisions, stats, integrity check, reindex and migrate. A
//! front door only decodes its input and encodes the result; what a request means is decided
//! here, so a new front door is an adapter, not a copy.
//!
//! Knowledge bases are named (see [`crate::kb::catalog`]); each sits behind a readers-writer
//! lock: queries read a consistent snapshot, writes are exclusive and run on a blocking
//! thread so that they never stall the async workers answering queries.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::access::{self, Caller, Gatekeeper, Slot, TokenRecord, TokenSpec};
use crate::config::Settings;
use crate::control::{Controller, QueryRequest, QueryResponse, Scope};
use crate::curate::{self, AuditEntry, AuditFilter, Proposal, ProposalId, ReviewItem, Status};
use crate::error::{Error, Result};
use crate::ingest::source::{Access, SourceDoc};
use crate::ingest::{self, IngestReport, Pipeline, Progress, SharedAs};
use crate::kb::catalog::{Catalog, KbName, Open, SharedKb};
use crate::kb::explore::{EntitySuggestion, EntityView};
use crate::kb::follow::SyncReport;
use crate::kb::model::{ChunkId, NodeId, RawTriple};
use crate::kb::reindex::ReindexReport;
use crate::kb::store::Location;
use crate::kb::{Kb, SearchMode, Stats};
use crate::llm::LanguageModel;
use crate::metrics::{Metrics, QueryOutcome};
use crate::net::Remote;
use crate::retrieve::{Retrieval, Retriever};

/// Most chunks an evidence-only retrieval may ask for.
pub const MAX_TOP_K: usize = 100;

/// Most chunks a text search may list.
pub const MAX_SEARCH_K: usize = 10_000;

/// [`Engine::store_status`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreStatus {
    pub backend: crate::config::StoreBackend,
    /// Each followed KB's position in the shared store's change log, by name (empty for sled).
    pub sync: std::collections::BTreeMap<String, SyncReport>,
}

/// Polls a follower may miss before its view of the shared store counts as stale.
const STALE_POLLS: u64 = 10;
/// The least time without a look at the store that counts as stale, however short the poll.
const MIN_STALE_MS: u64 = 5_000;

impl StoreStatus {
    /// Has some follower gone many polls (`poll_ms` each) without a successful look at the
    /// shared store? Then the database is unreachable or stuck, and what this daemon serves
    /// is growing old: `health` says `degraded`.
    pub fn stale(&self, poll_ms: u64) -> bool {
        let limit = poll_ms.saturating_mul(STALE_POLLS).max(MIN_STALE_MS);
        self.sync.values().any(|r| r.checked_ms_ago > limit)
    }
}

pub struct Engine {
    pub settings: Arc<Settings>,
    pub pipeline: Pipeline,
    pub controller: Controller,
    pub llm: Option<Arc<dyn LanguageModel>>,
    /// What every operation and front door counts, for `GET /metrics`.
    pub metrics: Metrics,
    /// Who may do what: every operation admits its caller here first.
    pub access: Gatekeeper,
    catalog: Catalog,
    policies: HashMap<String, Arc<Settings>>,
}

/// A query's response and the ids of the triple proposals its accepted answer created.
#[derive(Debug, Clone, Serialize)]
pub struct Answered {
    #[serde(flatten)]
    pub response: QueryResponse,
    pub proposals: Vec<ProposalId>,
}

/// Evidence-only retrieval: the gate and the agentic retriever, no reader, no LLM call.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRequest {
    pub question: String,
    /// Named policy from `policies/` (its gate and retrieve settings apply).
    #[serde(default)]
    pub policy: Option<String>,
    /// Chunks to return (default `retrieve.top_k`), 1 to [`MAX_TOP_K`].
    #[serde(default)]
    pub top_k: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Retrieved {
    pub question: String,
    pub gate: Scope,
    /// Ranked chunks with provenance, graph paths (each hop names the chunk it was read
    /// from), the stage reached, the seeds and a report per stage. Absent when the gate
    /// judged the question out of scope.
    pub retrieval: Option<Retrieval>,
}

/// Text search over a KB's chunks: a sanity tool, without the gate or the agentic retriever.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// What to search for: at least one word.
    pub query: String,
    pub mode: SearchMode,
    /// Chunks to list, 1 to [`MAX_SEARCH_K`].
    pub k: usize,
}

/// A chunk a text search found, best first.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub chunk: ChunkId,
    pub score: f32,
    /// The title of the chunk's document.
    pub title: String,
    pub text: String,
}

/// One knowledge base [`Engine::migrate`] copied.
#[derive(Debug, Clone)]
pub struct Migrated {
    pub kb: KbName,
    pub entries: usize,
    /// Where the copy is.
    pub to: Location,
}

/// A document given inline rather than as a file.
// Doc comments here are also the schema of MCP `ingest_text`'s documents, read by assistants.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineDoc {
    /// Stable id (re-ingesting the same id replaces the document); defaults to the title, then to a hash of the text.
    #[serde(default)]
    pub id: Option<String>,
    /// Title, shown with its passages; defaults to the given id, else stays empty.
    #[serde(default)]
    pub title: Option<String>,
    /// The document's text.
    pub text: String,
}

impl InlineDoc {
    fn into_source(self, index: usize, source: &str) -> Result<SourceDoc> {
        if self.text.trim().is_empty() {
            return Err(Error::Invalid(format!("documents[{index}].text is empty")));
        }
        // An id is what `delete` and listings name a document by: a line of text.
        if let Some(id) = &self.id
            && (id.trim().is_empty() || id.chars().any(char::is_control))
        {
            return Err(Error::Invalid(format!(
                "documents[{index}].id must be non-empty text without control characters (or left out)"
            )));
        }
        let title = self.title.or_else(|| self.id.clone()).unwrap_or_default();
        let id = match self.id.or_else(|| (!title.is_empty()).then(|| title.clone())) {
            Some(id) => id,
            None => format!("{source}-{}", &ingest::content_hash(&title, &self.text, &[])[..16]),
        };
        Ok(SourceDoc { id, title, text: self.text, source: source.into(), links: Vec::new() })
    }
}

/// What to ingest: files or directories read by this process (as far as `access` allows),
/// and documents given inline.
pub struct IngestInput {
    pub paths: Vec<PathBuf>,
    pub access: Access,
    pub documents: Vec<InlineDoc>,
    /// Recorded as the inline documents' source, and the prefix of their hashed ids.
    pub source: String,
}

impl IngestInput {
    /// Inline documents only (no file is read).
    pub fn documents(documents: Vec<InlineDoc>, source: &str) -> IngestInput {
        IngestInput { paths: Vec::new(), access: Access::within(&[], 0), documents, source: source.into() }
    }
}

#[derive(Debug, Serialize)]
pub struct Ingested {
    pub report: IngestReport,
    pub stats: Stats,
}

/// What [`Engine::sync_dir`] did.
#[derive(Debug, Serialize)]
pub struct Synced {
    pub report: IngestReport,
    /// The documents deleted because their file, or their record in it, is gone.
    pub deleted: Vec<String>,
    pub stats: Stats,
}

/// Longest question, in characters: a few paragraphs. Reading one costs time in its length
/// (a 400 KB "question" held a worker for over a minute, past the deadline, and the daemon's
/// other requests with it).
pub const MAX_QUESTION_CHARS: usize = 4000;

fn check_question(question: &str) -> Result<()> {
    if question.trim().is_empty() {
        return Err(Error::Invalid("question is empty".into()));
    }
    let chars = question.chars().count();
    if chars > MAX_QUESTION_CHARS {
        return Err(Error::Invalid(format!(
            "question is {chars} characters long, more than {MAX_QUESTION_CHARS}: ask it shorter, or ingest the text as a document"
        )));
    }
    Ok(())
}

/// A stored document as a listing shows it: the id that `delete` and re-ingest go by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DocumentInfo {
    pub id: String,
    pub title: String,
    pub source: String,
    pub chunks: usize,
    /// The section paths of its chunks, in order, each once (none for text without headings).
    pub sections: Vec<String>,
}

/// The integrity check's findings: graph, provenance and documents, and curation decisions.
#[derive(Debug, Serialize)]
pub struct Integrity {
    pub ok: bool,
    pub violations: Vec<String>,
    pub stats: Stats,
    /// With a repair first: the triples it released (see [`Engine::repair`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released: Option<Vec<String>>,
}

/// An entity named by its node id or by one of its aliases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntityRef {
    Id(NodeId),
    Name(String),
}

impl EntityRef {
    /// From a request's optional `id` and `name`, exactly one of which must be given.
    pub fn one_of(id: Option<NodeId>, name: Option<String>) -> Result<EntityRef> {
        match (id, name) {
            (Some(id), None) => Ok(EntityRef::Id(id)),
            (None, Some(name)) => Ok(EntityRef::Name(name)),
            _ => Err(Error::Invalid("give exactly one of `id` or `name`".into())),
        }
    }
}

/// A reviewer's decision on a pending proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Reject,
    /// Approve this corrected triple in place of the proposed one.
    Edit(RawTriple),
}

impl Engine {
    /// Opens everything `settings` describes, the default knowledge base included.
    /// `config_file` is the user's file, re-read when layering policies so that a policy sits
    /// between it and the environment.
    pub fn open(settings: Settings, config_file: Option<&Path>) -> Result<Engine> {
        Engine::build(settings, config_file, Catalog::open)
    }

    /// [`Engine::open`], but with every knowledge base closed until an operation names one:
    /// for [`Engine::reindex`] and [`Engine::migrate`], which work on the store itself.
    pub fn open_without_kbs(settings: Settings, config_file: Option<&Path>) -> Result<Engine> {
        Engine::build(settings, config_file, |settings, embedder| Ok(Catalog::unopened(settings, embedder)))
    }

    fn build(
        settings: Settings,
        config_file: Option<&Path>,
        catalog: impl FnOnce(Arc<Settings>, Arc<dyn crate::embed::Embedder>) -> Result<Catalog>,
    ) -> Result<Engine> {
        let settings = Arc::new(settings);
        // The one owner of remote model I/O for everything this engine calls.
        let remote = Remote::new();
        let embedder = crate::embed::from_settings(&settings.embed, &remote)?;
        let llm = crate::llm::from_settings(&settings.llm, &remote)?;
        let catalog = catalog(settings.clone(), embedder.clone())?;
        let pipeline = Pipeline::from_settings(&settings, embedder, llm.clone(), &remote)?;
        let controller = Controller::from_settings(&settings, llm.clone())?;
        let policies = load_policies(&settings.policy.policies_dir, config_file)?;
        // The controller's roles come from the base settings: a policy cannot bring a model.
        if llm.is_none()
            && let Some((name, _)) =
                policies.iter().find(|(_, p)| p.retrieve.sufficiency_judge == crate::config::SufficiencyJudge::Llm)
        {
            return Err(Error::Config(format!(
                "policy `{name}` sets retrieve.sufficiency_judge = \"llm\", but no [llm] provider is configured (llm.provider = \"embedded\")"
            )));
        }
        if !settings.policy.default.is_empty() && !policies.contains_key(&settings.policy.default) {
            return Err(Error::Config(format!(
                "policy.default `{}` is not in {}",
                settings.policy.default,
                settings.policy.policies_dir.display()
            )));
        }
        let metrics = Metrics::new()?;
        let access = Gatekeeper::open(&settings)?;
        Ok(Engine { settings, pipeline, controller, llm, metrics, access, catalog, policies })
    }

    pub fn policy_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.policies.keys().cloned().collect();
        names.sort();
        names
    }

    /// The settings in force for a request naming `policy` (or the default policy).
    pub fn settings_for(&self, policy: Option<&str>) -> Result<Arc<Settings>> {
        let name = policy.or(Some(self.settings.policy.default.as_str()).filter(|s| !s.is_empty()));
        match name {
            None => Ok(self.settings.clone()),
            Some(name) => self.policies.get(name).cloned().ok_or_else(|| {
                Error::Invalid(format!("unknown policy `{name}` (known: {})", self.policy_names().join(", ")))
            }),
        }
    }

    /// The knowledge base called `name`; see [`Catalog::get`] for what `open` allows.
    pub async fn kb(&self, name: &KbName, open: Open) -> Result<SharedKb> {
        self.catalog.get(name, open).await
    }

    /// Where the KBs persist and, for a store other daemons share, how far behind its change
    /// log each open KB is (kept by the followers; reading it does no I/O).
    pub fn store_status(&self) -> StoreStatus {
        StoreStatus {
            backend: self.settings.store.backend,
            sync: self.catalog.sync_reports().into_iter().map(|(name, report)| (name.to_string(), report)).collect(),
        }
    }

    /// Lets `caller` do what needs `scope` (on KB `kb`), counting a refusal in the metrics;
    /// the slot holds the caller's place under its limits until dropped. Every operation
    /// below starts here, and a door asks it for what is its own (shutdown, metrics).
    pub fn admit(&self, caller: &Caller, scope: access::Scope, kb: Option<&KbName>) -> Result<Slot> {
        self.access.admit(caller, scope, kb).inspect_err(|e| {
            let reason = match e {
                Error::Overloaded(_) => "overloaded",
                Error::Forbidden(_) => "forbidden",
                _ => "unauthorized",
            };
            self.metrics.refused(caller.name(), reason);
        })
    }

    /// The caller a door's credential stands for (see [`Gatekeeper::authenticate`]), counting
    /// a refused one in the metrics. Every door that takes a token asks here.
    pub fn authenticate(&self, token: &str) -> Result<Caller> {
        self.access.authenticate(token).inspect_err(|_| self.metrics.refused("?", "unauthorized"))
    }

    /// The knowledge bases in the data directory `caller` reaches, the default first.
    pub fn kbs(&self, caller: &Caller) -> Result<Vec<KbName>> {
        let _slot = self.admit(caller, access::Scope::Read, None)?;
        Ok(self.catalog.names()?.into_iter().filter(|kb| caller.reaches(kb)).collect())
    }

    /// Runs the controller on `request`; an accepted answer proposes the new triples of the
    /// chunks it cites, for a person to review.
    pub async fn query(&self, caller: &Caller, name: &KbName, request: &QueryRequest) -> Result<Answered> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        check_question(&request.question)?;
        let settings = self.settings_for(request.policy.as_deref())?;
        let kb = self.reach(caller, name, Open::Existing).await?;
        let kb = kb.read().await;
        let started = std::time::Instant::now();
        let response = self.controller.run(&kb, &settings, request).await;
        self.metrics.query(QueryOutcome {
            elapsed: started.elapsed(),
            llm_calls: u64::from(response.ledger.llm_calls),
            tokens: response.ledger.tokens(),
            stage: response.stage.map(|s| s.name()),
            abstained: response.abstain_reason.as_ref().map(|r| r.kind()),
        });
        let proposals = if response.answer.is_some() {
            match curate::propose_from_response(&kb, &response) {
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
        Ok(Answered { response, proposals })
    }

    /// The evidence a query's first retrieval reads: the gate, then the agentic retriever
    /// with the embedded sufficiency check. Never calls a model, whatever `llm.provider` and
    /// `retrieve.sufficiency_judge` say.
    pub async fn retrieve(&self, caller: &Caller, name: &KbName, request: &RetrieveRequest) -> Result<Retrieved> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        check_question(&request.question)?;
        let settings = self.settings_for(request.policy.as_deref())?;
        let mut options = crate::control::first_retrieval(&settings);
        if let Some(k) = request.top_k {
            if !(1..=MAX_TOP_K).contains(&k) {
                return Err(Error::Invalid(format!("top_k must be 1 to {MAX_TOP_K}, not {k}")));
            }
            options.top_k = k;
        }
        let kb = self.reach(caller, name, Open::Existing).await?;
        let kb = kb.read().await;
        let question = crate::retrieve::embed_query(&kb, &request.question)?;
        let gate = Scope::judge(&kb, &settings, &question);
        let retrieval = if gate.in_scope {
            Some(Retriever::with_settings(&kb, &settings.retrieve).retrieve_embedded(&question, options)?)
        } else {
            None
        };
        Ok(Retrieved { question: request.question.clone(), gate, retrieval })
    }

    /// The chunks of KB `name` that `request`'s text search ranks first.
    pub async fn search(&self, caller: &Caller, name: &KbName, request: &SearchRequest) -> Result<Vec<SearchHit>> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        // Without a word every score is noise: a list would look like an answer.
        if !request.query.chars().any(char::is_alphanumeric) {
            return Err(Error::Invalid("nothing to search for: give at least one word".into()));
        }
        if !(1..=MAX_SEARCH_K).contains(&request.k) {
            return Err(Error::Invalid(format!("k must be 1 to {MAX_SEARCH_K}, not {}", request.k)));
        }
        let kb = self.reach(caller, name, Open::Existing).await?;
        let kb = kb.read().await;
        let query = crate::embed::EmbeddedQuery::new(kb.embedder().as_ref(), &request.query)?;
        let found = kb.search(&query, request.mode, request.k, (&kb.settings().retrieve).into())?;
        Ok(found
            .into_iter()
            .filter_map(|(id, score)| {
                let chunk = kb.chunk(id)?;
                Some(SearchHit {
                    chunk: id,
                    score,
                    title: kb.chunk_title(chunk).to_string(),
                    text: chunk.text.to_string(),
                })
            })
            .collect())
    }

    /// Ingests into `name`, creating that knowledge base when it does not exist yet. The
    /// write lock is taken per document (see [`ingest::KbAccess`]), so queries run between
    /// the documents of a long ingest; a cancel through `progress` stops between documents,
    /// and what the report counts as committed is durable when this returns.
    pub async fn ingest(
        self: &Arc<Self>,
        caller: &Caller,
        name: &KbName,
        input: IngestInput,
        mut progress: impl Progress + Send + 'static,
    ) -> Result<Ingested> {
        let _slot = self.admit(caller, access::Scope::Write, Some(name))?;
        let author = caller.author(None);
        if input.paths.is_empty() && input.documents.is_empty() {
            return Err(Error::Invalid("nothing to ingest: give paths or documents".into()));
        }
        for path in &input.paths {
            input.access.check(path)?;
        }
        // Nothing there to read: say so before a new KB is created for it.
        if input.documents.is_empty() && !input.paths.iter().any(|p| p.symlink_metadata().is_ok()) {
            let listed: Vec<String> = input.paths.iter().map(|p| p.display().to_string()).collect();
            return Err(Error::Invalid(format!("nothing to ingest: {} not found", listed.join(", "))));
        }
        let docs = input
            .documents
            .into_iter()
            .enumerate()
            .map(|(i, d)| d.into_source(i, &input.source))
            .collect::<Result<Vec<_>>>()?;
        // Two documents of one request under one id: the second would silently replace the
        // first, which is a client's mistake.
        let mut first_of: HashMap<&str, usize> = HashMap::new();
        for (i, doc) in docs.iter().enumerate() {
            if let Some(first) = first_of.insert(doc.id.as_str(), i) {
                return Err(Error::Invalid(format!("documents[{i}] has the id `{}` of documents[{first}]", doc.id)));
            }
        }
        let (paths, access) = (input.paths, input.access);
        let shared = self.reach(caller, name, Open::OrCreate).await?;
        let engine = self.clone();
        let started = std::time::Instant::now();
        let ingested = blocking(move || {
            let mut kb = SharedAs { kb: &shared, author };
            let mut report = if paths.is_empty() {
                IngestReport::default()
            } else {
                ingest::ingest_paths_within(&mut kb, &engine.pipeline, &paths, &access, &mut progress)?
            };
            if !docs.is_empty() && !report.cancelled {
                ingest::ingest_docs(&mut kb, &engine.pipeline, docs, &mut progress, &mut report)?;
            }
            let kb = shared.blocking_read();
            kb.flush()?;
            Ok(Ingested { report, stats: kb.stats() })
        })
        .await?;
        let committed = ingested.report.added + ingested.report.replaced;
        self.metrics.ingest(committed as u64, started.elapsed());
        Ok(ingested)
    }

    /// Makes KB `name` hold what the files under the directory `root` hold: the files in
    /// `changed` (files or directories under `root`; empty: all of `root`, a full catch-up)
    /// are read and ingested (unchanged content costs nothing), and the documents that came
    /// from one of them and are no longer there (the file or directory gone, renamed, or no
    /// longer holding that record) are deleted. Each document is one atomic update; reads stay
    /// inside `root`.
    pub async fn sync_dir(
        self: &Arc<Self>,
        caller: &Caller,
        name: &KbName,
        root: &Path,
        changed: Vec<PathBuf>,
    ) -> Result<Synced> {
        let _slot = self.admit(caller, access::Scope::Write, Some(name))?;
        let root = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        if !root.is_dir() {
            return Err(Error::Invalid(format!("{} is not a directory to watch", root.display())));
        }
        let author = caller.author(Some("watch"));
        let full = changed.is_empty();
        // What changed, as the documents' `source` names it (their files' canonical paths).
        let scope: Vec<String> = if full {
            vec![root.display().to_string()]
        } else {
            changed.iter().map(|p| ingest::source::document_path(p)).collect()
        };
        let present: Vec<PathBuf> =
            if full { vec![root.clone()] } else { changed.into_iter().filter(|p| p.exists()).collect() };
        let access = Access::within(std::slice::from_ref(&root), self.settings.ingest.max_file_bytes);
        let shared = self.reach(caller, name, Open::OrCreate).await?;
        let engine = self.clone();
        blocking(move || {
            let mut kb = SharedAs { kb: &shared, author: author.clone() };
            let report = if present.is_empty() {
                IngestReport::default()
            } else {
                ingest::ingest_paths_within(&mut kb, &engine.pipeline, &present, &access, &mut ())?
            };
            let read: HashSet<&str> = report.read.iter().map(|(id, _)| id.as_str()).collect();
            let under = |source: &str| {
                scope.iter().any(|s| source == s || source.strip_prefix(s.as_str()).is_some_and(|r| r.starts_with('/')))
            };
            let stale: Vec<String> = shared
                .blocking_read()
                .docs()
                .filter(|d| under(&d.source) && !read.contains(d.id.as_str()))
                .map(|d| d.id.clone())
                .collect();
            let mut deleted = Vec::new();
            for id in stale {
                if shared.blocking_write().delete_document(&id, &author)? {
                    deleted.push(id);
                }
            }
            let kb = shared.blocking_read();
            kb.flush()?;
            Ok(Synced { report, deleted, stats: kb.stats() })
        })
        .await
    }

    /// Removes a document and everything derived from it.
    pub async fn delete(&self, caller: &Caller, name: &KbName, id: &str) -> Result<()> {
        let _slot = self.admit(caller, access::Scope::Write, Some(name))?;
        let id = id.to_string();
        let author = caller.author(None);
        self.write(caller, name, move |kb| {
            if !kb.delete_document(&id, &author)? {
                return Err(Error::NotFound(format!(
                    "document `{id}` (`a2rag docs`, or the JSON-RPC method `documents`, lists the ids)"
                )));
            }
            kb.flush()
        })
        .await
    }

    /// The documents of KB `name`, by id.
    pub async fn documents(&self, caller: &Caller, name: &KbName) -> Result<Vec<DocumentInfo>> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        let shared = self.reach(caller, name, Open::Existing).await?;
        let kb = shared.read().await;
        let mut docs: Vec<DocumentInfo> = kb
            .docs()
            .map(|d| {
                let mut sections: Vec<String> = Vec::new();
                for section in d.chunks.iter().filter_map(|c| kb.chunk(*c)).map(|c| &c.section) {
                    if !section.is_empty() && sections.last() != Some(section) {
                        sections.push(section.clone());
                    }
                }
                DocumentInfo {
                    id: d.id.clone(),
                    title: d.title.clone(),
                    source: d.source.clone(),
                    chunks: d.chunks.len(),
                    sections,
                }
            })
            .collect();
        docs.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(docs)
    }

    pub async fn stats(&self, caller: &Caller, name: &KbName) -> Result<Stats> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        Ok(self.reach(caller, name, Open::Existing).await?.read().await.stats())
    }

    /// Proposals in id order, optionally only those with `status`.
    pub async fn proposals(&self, caller: &Caller, name: &KbName, status: Option<Status>) -> Result<Vec<Proposal>> {
        let _slot = self.admit(caller, access::Scope::Curate, Some(name))?;
        curate::list(&*self.reach(caller, name, Open::Existing).await?.read().await, status)
    }

    /// Proposals in id order with the source text each was read from, for a reviewer.
    pub async fn review_items(
        &self,
        caller: &Caller,
        name: &KbName,
        status: Option<Status>,
    ) -> Result<Vec<ReviewItem>> {
        let _slot = self.admit(caller, access::Scope::Curate, Some(name))?;
        curate::review_items(&*self.reach(caller, name, Open::Existing).await?.read().await, status)
    }

    /// What the graph knows about one entity, with at most `limit` neighbours and chunks.
    pub async fn entity(&self, caller: &Caller, name: &KbName, entity: &EntityRef, limit: usize) -> Result<EntityView> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        let shared = self.reach(caller, name, Open::Existing).await?;
        let kb = shared.read().await;
        let id = match entity {
            EntityRef::Id(id) => *id,
            EntityRef::Name(typed) => {
                kb.node_by_alias(typed).ok_or_else(|| Error::NotFound(format!("entity named `{typed}`")))?
            }
        };
        kb.entity_view(id, limit).ok_or_else(|| Error::NotFound(format!("entity {id}")))
    }

    /// Entities whose names resemble `typed` (the alias matcher's candidates), best first.
    pub async fn suggest_entities(
        &self,
        caller: &Caller,
        name: &KbName,
        typed: &str,
        limit: usize,
    ) -> Result<Vec<EntitySuggestion>> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        Ok(self.reach(caller, name, Open::Existing).await?.read().await.find_entities(typed, limit))
    }

    /// Records the caller's decision on a pending proposal (an approval puts its edge in the
    /// graph at once), labelled `who` when given, and returns the updated proposal.
    pub async fn decide(
        &self,
        caller: &Caller,
        name: &KbName,
        id: ProposalId,
        who: Option<&str>,
        decision: Decision,
    ) -> Result<Proposal> {
        let _slot = self.admit(caller, access::Scope::Curate, Some(name))?;
        let by = caller.author(who);
        self.write(caller, name, move |kb| match decision {
            Decision::Approve => curate::approve(kb, id, &by),
            Decision::Reject => curate::reject(kb, id, &by),
            Decision::Edit(triple) => curate::edit(kb, id, &by, triple),
        })
        .await
    }

    /// The audit log entries `filter` selects, oldest first.
    pub async fn audit(&self, caller: &Caller, name: &KbName, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        let mut log = curate::audit_log(&*self.reach(caller, name, Open::Existing).await?.read().await)?;
        log.retain(|e| filter.matches(e));
        Ok(log)
    }

    /// The integrity check: graph, provenance and documents, then curation decisions; with
    /// `repair`, after [`Engine::repair`] (admin only).
    pub async fn check(&self, caller: &Caller, name: &KbName, repair: bool) -> Result<Integrity> {
        let released = if repair { Some(self.repair(caller, name).await?) } else { None };
        let _slot = self.admit(caller, access::Scope::Read, Some(name))?;
        let shared = self.reach(caller, name, Open::Existing).await?;
        let kb = shared.read().await;
        let mut violations = kb.integrity_violations();
        violations.extend(curate::integrity_violations(&kb)?);
        Ok(Integrity { ok: violations.is_empty(), violations, stats: kb.stats(), released })
    }

    /// Repairs what [`Engine::check`] reports and can be repaired without a person: decision
    /// keys naming a missing proposal are removed, so their triples can be proposed again.
    /// Returns the triples released.
    pub async fn repair(&self, caller: &Caller, name: &KbName) -> Result<Vec<String>> {
        let _slot = self.admit(caller, access::Scope::Admin, Some(name))?;
        self.write(caller, name, curate::release_orphan_decisions).await
    }

    /// Re-embeds every chunk, summary, entity and fact of KB `name` with the configured
    /// embedder (admin only): after `embed.provider` or `embed.dim` changed, before the KB
    /// opens again. The KB must be closed in this engine (see [`Engine::open_without_kbs`]).
    pub async fn reindex(&self, caller: &Caller, name: &KbName) -> Result<ReindexReport> {
        let _slot = self.admit(caller, access::Scope::Admin, Some(name))?;
        self.catalog.reindex(name).await.map_err(|e| reached_only(caller, e))
    }

    /// Copies every knowledge base of the configured store into the store `to` names (a
    /// PostgreSQL connection string, or a sled data directory), exactly, reporting the entries
    /// copied per KB to `progress` as it goes (admin only, over every KB). The KBs must be
    /// closed in this engine (see [`Engine::open_without_kbs`]); daemons writing the store
    /// must be stopped first.
    pub async fn migrate(
        &self,
        caller: &Caller,
        to: &str,
        progress: impl FnMut(&KbName, usize) + Send + 'static,
    ) -> Result<Vec<Migrated>> {
        let _slot = self.admit(caller, access::Scope::Admin, None)?;
        // The same words whatever the KBs are: a token learns nothing of those it does not reach.
        if !self.catalog.names()?.iter().all(|kb| caller.reaches(kb)) {
            return Err(Error::Forbidden(format!(
                "migrate copies every knowledge base, and token `{}` does not reach them all",
                caller.name()
            )));
        }
        let destination = crate::kb::catalog::destination(&self.settings, to);
        let copied = self.catalog.migrate(destination.clone(), progress).await?;
        Ok(copied
            .into_iter()
            .map(|(kb, entries)| Migrated { to: Location::of(&destination, &kb), kb, entries })
            .collect())
    }

    /// Makes a named token (admin only); returns its record and the token, shown this once.
    pub fn create_token(&self, caller: &Caller, spec: TokenSpec) -> Result<(TokenRecord, String)> {
        let _slot = self.admit(caller, access::Scope::Admin, None)?;
        self.access.create(spec)
    }

    /// The named tokens (admin only).
    pub fn tokens(&self, caller: &Caller) -> Result<Vec<TokenRecord>> {
        let _slot = self.admit(caller, access::Scope::Admin, None)?;
        self.access.list()
    }

    /// Revokes token `name` (admin only): every daemon refuses it within `access.refresh_ms`.
    pub fn revoke_token(&self, caller: &Caller, name: &str) -> Result<()> {
        let _slot = self.admit(caller, access::Scope::Admin, None)?;
        self.access.revoke(name)
    }

    /// Flushes every open knowledge base no writer holds (a write still running flushes
    /// its own work when it ends).
    pub fn flush_idle(&self) -> Result<()> {
        for kb in self.catalog.open_kbs() {
            match kb.try_read() {
                Ok(kb) => kb.flush()?,
                Err(_) => tracing::warn!("a write is still running; not flushing its knowledge base"),
            }
        }
        Ok(())
    }

    /// KB `name` for `caller`: when it does not exist, the error lists only the KBs the
    /// caller reaches.
    async fn reach(&self, caller: &Caller, name: &KbName, open: Open) -> Result<SharedKb> {
        self.kb(name, open).await.map_err(|e| reached_only(caller, e))
    }

    /// Runs `f` with the write lock of the existing KB `name` on a blocking thread.
    async fn write<T, F>(&self, caller: &Caller, name: &KbName, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Kb) -> Result<T> + Send + 'static,
    {
        let shared = self.reach(caller, name, Open::Existing).await?;
        blocking(move || f(&mut shared.blocking_write())).await
    }
}

/// `e`, where it lists the known KBs, listing only those `caller` reaches.
fn reached_only(caller: &Caller, e: Error) -> Error {
    match e {
        Error::UnknownKb { name, known } => {
            let reached = |kb: &String| KbName::new(kb).is_ok_and(|kb| caller.reaches(&kb));
            Error::UnknownKb { name, known: known.into_iter().filter(reached).collect() }
        }
        other => other,
    }
}

/// Runs synchronous sled and index work on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Internal(format!("a write did not finish: {e}")))?
}

/// The policies shipped in `policies/`, for when no policies directory is found.
const EMBEDDED_POLICIES: &[(&str, &str)] = &[
    ("balanced", include_str!("../policies/balanced.toml")),
    ("cheap", include_str!("../policies/cheap.toml")),
    ("strict", include_str!("../policies/strict.toml")),
];

/// Where the policies directory is: a relative `policy.policies_dir` is taken next to the
/// config file (not the working directory, which changes with where a command is run).
/// Without a config file, the default name means the embedded policies (`None`), and any
/// other relative name is the user's own, under the working directory.
fn policies_dir(dir: &Path, config_file: Option<&Path>) -> Option<PathBuf> {
    let default = Settings::defaults().policy.policies_dir;
    let resolved = match config_file.and_then(Path::parent) {
        _ if dir.is_absolute() => dir.to_path_buf(),
        Some(config_dir) => config_dir.join(dir),
        None if dir == default => return None,
        None => dir.to_path_buf(),
    };
    // The default name where the config file has no such directory: the embedded ones.
    (resolved.is_dir() || dir != default).then_some(resolved)
}

/// The named policies of `dir` (relative to the config file's directory), or the embedded
/// ones where there is no such directory.
pub fn load_policies(dir: &Path, config_file: Option<&Path>) -> Result<HashMap<String, Arc<Settings>>> {
    let mut policies = HashMap::new();
    let Some(dir) = policies_dir(dir, config_file) else {
        for (name, toml) in EMBEDDED_POLICIES {
            let settings = Settings::load_with_policy_text(config_file, toml)
                .map_err(|e| Error::Config(format!("embedded policy {name}: {e}")))?;
            policies.insert(name.to_string(), Arc::new(settings));
        }
        return Ok(policies);
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        // No policies directory is fine: requests may then name no policy.
        return Ok(policies);
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for file in files {
        let name = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let settings = Settings::load_with_policy(config_file, Some(&file))
            .map_err(|e| Error::Config(format!("policy {}: {e}", file.display())))?;
        policies.insert(name, Arc::new(settings));
    }
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_many_polls_behind_makes_the_store_stale() {
        let with = |ago: &[u64]| StoreStatus {
            backend: crate::config::StoreBackend::Postgres,
            sync: ago
                .iter()
                .enumerate()
                .map(|(i, &checked_ms_ago)| {
                    let report = SyncReport { applied_change: 1, latest_change: 1, lag_ms: 0, checked_ms_ago };
                    (format!("kb{i}"), report)
                })
                .collect(),
        };
        assert!(!with(&[]).stale(500), "sled follows nothing");
        assert!(!with(&[200, 4_000]).stale(500), "within 5 s");
        assert!(with(&[200, 6_000]).stale(500), "one KB 12 polls behind");
        assert!(!with(&[6_000]).stale(1_000), "10 polls of 1 s not yet missed");
    }

    /// Issue 17: `--policy cheap` failed outside the checkout ("known: " and nothing).
    #[test]
    fn policies_do_not_depend_on_the_working_directory() {
        let embedded = load_policies(Path::new("policies"), None).unwrap();
        let mut names: Vec<_> = embedded.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["balanced", "cheap", "strict"]);
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("a2rag.toml");
        std::fs::write(&config, "").unwrap();
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::write(dir.path().join("policies/mine.toml"), "[gate]\nthreshold = 0.11\n").unwrap();
        let next_to_config = load_policies(Path::new("policies"), Some(&config)).unwrap();
        assert_eq!(next_to_config.keys().collect::<Vec<_>>(), ["mine"]);
        assert_eq!(next_to_config["mine"].gate.threshold, 0.11);
        std::fs::remove_dir_all(dir.path().join("policies")).unwrap();
        assert_eq!(
            load_policies(Path::new("policies"), Some(&config)).unwrap().len(),
            3,
            "embedded when the config has none beside it"
        );
    }
}
