//! The tools' arguments: what an assistant sees as each tool's input schema (the doc comments
//! become the field descriptions) and what its calls are decoded into.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::control::budget::BudgetOverride;
use crate::curate::Status;
use crate::engine::InlineDoc;
use crate::kb::model::RawTriple;

pub const RETRIEVE: &str = "Search the knowledge base for evidence about a question and return the ranked source passages, \
without generating an answer (no LLM is called). Each passage comes with its document id, title, byte span of the chunk in the \
document, relevance score and text, plus the knowledge-graph paths (subject -[relation]-> object) that led to it, the retrieval \
stage reached (local, bridge, global, or fallback text search) and a report per stage. `gate.in_scope` is false when the \
question is outside what the knowledge base covers; then nothing is retrieved. Use this when you will write the answer \
yourself; cite passages by doc_id and span.";

pub const ASK: &str = "Answer a question from the knowledge base with a2rag's own verified pipeline: retrieve evidence, read \
an answer, check it for relevance, grounding and adequacy, and rewrite the query and retry when a check fails. Returns \
`answer` (null when it abstains, with the reason in `abstained`), the evidence and the chunks the answer cites, graph paths, \
the cost ledger and a trace. An accepted answer may propose new knowledge-graph triples for review (their ids are in \
`proposals`; see list_proposals). Optional `policy` names a preset of settings; `budget` caps iterations, LLM calls, tokens \
and time.";

pub const INGEST_TEXT: &str = "Add documents, given as text, to a knowledge base (created if it does not exist yet). \
Each document is chunked, its entities and relations go into the knowledge graph, and it is searchable as soon as this \
returns. A document with an id that already exists is replaced (unchanged text is skipped). Returns what was added and the \
knowledge base's new size.";

pub const KB_STATS: &str = "Sizes of a knowledge base (documents, chunks, graph nodes and edges, index sizes, embedder) and \
the names of every knowledge base this server holds. Call it first to see what is there.";

pub const LIST_PROPOSALS: &str = "List the knowledge-graph triples proposed from accepted answers, for review: each has an \
id, the triple (subject, relation, object), the sentence and document it was read from, the question that led to it, and its \
status (pending, approved, rejected). Filter by status, e.g. `pending` for the ones awaiting a decision.";

pub const REVIEW_PROPOSAL: &str = "Decide a pending triple proposal: `approve` adds the triple to the knowledge graph at \
once (later questions use it), `reject` discards it for good, `edit` adds the corrected triple given in subject, relation and \
object instead. Every decision is recorded in the audit log under `who`. Only decide what the user asked you to decide or \
confirmed; a decided proposal cannot be decided again.";

/// Which knowledge base a call works on; absent means the server's default.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KbArgs {
    /// Knowledge base name (letters, digits, `-`, `_`); omit for the default one. kb_stats lists them.
    #[serde(default)]
    pub kb: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveArgs {
    /// The question, in natural language.
    pub question: String,
    /// Knowledge base name; omit for the default one.
    #[serde(default)]
    pub kb: Option<String>,
    /// Named settings preset of the server (its gate and retrieval settings apply); omit for the default.
    #[serde(default)]
    pub policy: Option<String>,
    /// How many passages to return, 1 to 100; omit for the server's default (10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub top_k: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// The question, in natural language.
    pub question: String,
    /// Knowledge base name; omit for the default one.
    #[serde(default)]
    pub kb: Option<String>,
    /// Named settings preset of the server; omit for the default.
    #[serde(default)]
    pub policy: Option<String>,
    /// Limits for this question; each omitted limit keeps the server's value.
    #[serde(default)]
    pub budget: Option<BudgetOverride>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestTextArgs {
    /// The documents to add.
    #[schemars(length(min = 1))]
    pub documents: Vec<InlineDoc>,
    /// Knowledge base name; created when it does not exist. Omit for the default one.
    #[serde(default)]
    pub kb: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListProposalsArgs {
    /// Only proposals with this status; omit for all.
    #[serde(default)]
    pub status: Option<Status>,
    /// Knowledge base name; omit for the default one.
    #[serde(default)]
    pub kb: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewProposalArgs {
    /// The proposal's id, from list_proposals or from ask's `proposals`.
    pub id: u64,
    /// approve, reject, or edit (then give subject, relation and object of the corrected triple).
    pub decision: DecisionArg,
    /// Corrected subject (edit only).
    #[serde(default)]
    pub subject: Option<String>,
    /// Corrected relation (edit only).
    #[serde(default)]
    pub relation: Option<String>,
    /// Corrected object (edit only).
    #[serde(default)]
    pub object: Option<String>,
    /// Who decides, for the audit log (the person you act for); defaults to the client's name.
    #[serde(default)]
    pub who: Option<String>,
    /// Knowledge base name; omit for the default one.
    #[serde(default)]
    pub kb: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionArg {
    Approve,
    Reject,
    Edit,
}

impl ReviewProposalArgs {
    /// The corrected triple of an edit: all three parts, and only for an edit.
    pub fn corrected(&self) -> Result<Option<RawTriple>, String> {
        let parts = (self.subject.clone(), self.relation.clone(), self.object.clone());
        match (self.decision, parts) {
            (DecisionArg::Edit, (Some(subject), Some(relation), Some(object))) => {
                Ok(Some(RawTriple { subject, relation, object }))
            }
            (DecisionArg::Edit, _) => {
                Err("decision `edit` needs subject, relation and object of the corrected triple".into())
            }
            (_, (None, None, None)) => Ok(None),
            (_, _) => Err("subject, relation and object are only for decision `edit`".into()),
        }
    }
}
