//! Settings: `config/default.toml` (embedded in the binary, so defaults always exist),
//! then an optional user file, then `A2RAG__SECTION__KEY` environment variables.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub store: StoreSettings,
    pub log: LogSettings,
    pub ingest: IngestSettings,
    pub embed: EmbedSettings,
    pub alias: AliasSettings,
    pub index: IndexSettings,
    pub bm25: Bm25Settings,
    pub retrieve: RetrieveSettings,
    pub gate: GateSettings,
    pub budget: BudgetSettings,
    pub llm: LlmSettings,
    pub policy: PolicySettings,
    pub server: ServerSettings,
    pub access: AccessSettings,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreSettings {
    pub backend: StoreBackend,
    pub url: String,
    pub pool_size: usize,
    pub poll_ms: u64,
    /// PEM certificate authorities for the PostgreSQL server; empty: the public web roots.
    pub tls_ca: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    Sled,
    Postgres,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogSettings {
    pub format: LogFormat,
    pub level: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestSettings {
    pub chunk_tokens: usize,
    pub chunk_overlap: usize,
    pub summary_sentences: usize,
    pub summary_entities: usize,
    pub extractor: ExtractorKind,
    pub summarizer: SummarizerKind,
    pub max_file_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorKind {
    Rules,
    Llm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SummarizerKind {
    Extractive,
    Llm,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmbedSettings {
    pub provider: EmbedProvider,
    pub dim: usize,
    pub model_dir: PathBuf,
    /// Hugging Face hub repository the minilm provider downloads when no local model is found;
    /// empty disables the download.
    pub model_id: String,
    pub hub_cache: PathBuf,
    /// The remote providers' server (`openai`, `ollama`).
    #[serde(flatten)]
    pub connection: ConnectionSettings,
    pub batch_size: usize,
    /// minilm: word pieces per forward pass (texts are packed without padding).
    pub batch_tokens: usize,
    /// minilm: threads one forward pass is split over; 0 = one per core.
    pub threads: usize,
    /// minilm, openai, ollama: short texts (names, labels, queries) whose vectors are kept in
    /// memory so a repeat costs no model call; 0 disables the cache.
    pub cache_entries: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedProvider {
    /// Feature-hashed words and character trigrams, embedded.
    Hash,
    /// A local sentence-transformer through candle.
    MiniLm,
    /// A server with OpenAI's `POST {base_url}/embeddings`.
    OpenAi,
    /// The Ollama daemon's `POST {base_url}/api/embed`.
    Ollama,
}

impl EmbedProvider {
    /// The name `embed.provider` spells it with.
    pub fn name(self) -> &'static str {
        match self {
            EmbedProvider::Hash => "hash",
            EmbedProvider::MiniLm => "minilm",
            EmbedProvider::OpenAi => "openai",
            EmbedProvider::Ollama => "ollama",
        }
    }
}

/// Where a remote model is and how it is called: the keys `[llm]` and `[embed]` share.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionSettings {
    /// The model name the server knows.
    pub model: String,
    /// Server URL; empty means the provider's default.
    pub base_url: String,
    /// Name of the environment variable that holds the API key (never the key itself).
    pub api_key_env: String,
    /// Limit on one attempt; 0 means none.
    pub timeout_ms: u64,
    /// Retries of transient failures (5xx, 429, timeouts).
    pub max_retries: u32,
    /// Pause before the first retry; doubling after.
    pub retry_backoff_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AliasSettings {
    pub enabled: bool,
    pub edit_threshold: f32,
    pub cosine_threshold: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexSettings {
    pub connectivity: usize,
    pub expansion_add: usize,
    /// `expansion_add` of the fact index's graphs, searched only for a question whose words
    /// name too many nodes or edges to read their facts one by one.
    pub fact_expansion_add: usize,
    /// Vectors per HNSW graph: once one holds this many, linking starts the next, and a
    /// search asks every graph (see `kb::vector`).
    pub graph_max: usize,
    /// `graph_max` of the entity index.
    pub entity_graph_max: usize,
    /// `graph_max` of the fact index, searched as rarely as `fact_expansion_add` says.
    pub fact_graph_max: usize,
    pub expansion_search: usize,
    /// Threads that link staged vectors into the HNSW graphs; 0 = one per core. One thread
    /// builds the same graph from the same inserts (reproducible retrieval).
    pub build_threads: usize,
    /// Indexes with at most this many vectors are searched exactly and not linked.
    pub exact_search_max: usize,
    /// How the HNSW graphs store vectors (candidate generation only; scores are exact).
    pub quantization: Quantization,
}

impl IndexSettings {
    /// The settings the entity index is built with.
    pub fn for_entities(&self) -> IndexSettings {
        IndexSettings { graph_max: self.entity_graph_max, ..self.clone() }
    }

    /// The settings the fact index is built with.
    pub fn for_facts(&self) -> IndexSettings {
        IndexSettings { expansion_add: self.fact_expansion_add, graph_max: self.fact_graph_max, ..self.clone() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    F32,
    F16,
    I8,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bm25Settings {
    pub k1: f32,
    pub b: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetrieveSettings {
    pub top_k: usize,
    pub seed_threshold: f32,
    pub max_entity_seeds: usize,
    pub relation_threshold: f32,
    pub local_max_edges: usize,
    pub bridge_hops: usize,
    pub bridge_max_nodes: usize,
    pub bridge_max_paths: usize,
    pub restart_prob: f64,
    pub ppr_method: PprMethod,
    pub ppr_auto_max_edges: usize,
    pub ppr_tolerance: f64,
    pub ppr_push_epsilon: f64,
    pub ppr_max_iterations: usize,
    /// Confidence the sufficiency judge must give to stop escalating (see
    /// `retrieve::sufficiency`).
    pub sufficiency_threshold: f32,
    pub sufficiency_judge: SufficiencyJudge,
    pub rrf_k: f32,
    pub text_candidates: usize,
    /// Facts linked to the query, whose entities seed the global stage.
    pub fact_seeds: usize,
    /// Weight of the min-max-normalised dense score of each passage in the PPR reset vector.
    pub passage_seed_weight: f64,
    /// Passages whose dense score seeds the global stage (the best ones).
    pub passage_seed_candidates: usize,
    /// Cosine between entity names above which a synonym edge links them in the PPR graph.
    pub synonym_threshold: f32,
    /// Passages of the fused ranking among which any mention of a page's topic in the lead
    /// passage links to it; below them only a mention written as a name does (see
    /// `retrieve::lead`).
    pub link_candidates: usize,
}

/// Why `retrieve.sufficiency_judge = "llm"` is refused without a model.
pub const LLM_JUDGE_NEEDS_MODEL: &str =
    "retrieve.sufficiency_judge = \"llm\" needs an [llm] provider other than \"embedded\"";

/// Who decides, after each retrieval stage, whether the evidence suffices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SufficiencyJudge {
    /// The embedded check on the reader's evidence (`retrieve::sufficiency::EvidenceCheck`).
    #[serde(alias = "coverage")]
    Embedded,
    /// The LLM (`prompts/sufficiency.txt`), within the query budget; falls back to the
    /// embedded check when the call is not affordable or fails.
    Llm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PprMethod {
    /// Power iteration up to `ppr_auto_max_edges` graph edges, forward push above.
    Auto,
    /// Power iteration over the whole graph to `ppr_tolerance`.
    Power,
    /// Forward push with residual threshold `ppr_push_epsilon`: cost independent of graph size.
    Push,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateSettings {
    pub threshold: f32,
    pub out_of_scope: OutOfScope,
    /// Answers whose confidence (reader and checks) is below this are withheld: the query
    /// abstains with reason `low_confidence` and still returns its evidence.
    pub min_answer_confidence: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutOfScope {
    Abstain,
    NoRetrieval,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BudgetSettings {
    pub max_iterations: u32,
    pub max_llm_calls: u32,
    pub max_tokens: u64,
    pub deadline_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmSettings {
    pub provider: LlmProvider,
    #[serde(flatten)]
    pub connection: ConnectionSettings,
    pub max_completion_tokens: u32,
    pub temperature: f64,
    pub prompts_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProvider {
    /// Deterministic roles, no model and no network.
    Embedded,
    /// Any server that speaks OpenAI's Chat Completions API.
    OpenAi,
    /// The Ollama daemon's OpenAI-compatible endpoint.
    Ollama,
    /// Anthropic's Messages API.
    Anthropic,
}

impl LlmProvider {
    /// The name `llm.provider` spells it with.
    pub fn name(self) -> &'static str {
        match self {
            LlmProvider::Embedded => "embedded",
            LlmProvider::OpenAi => "openai",
            LlmProvider::Ollama => "ollama",
            LlmProvider::Anthropic => "anthropic",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicySettings {
    pub default: String,
    pub policies_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerSettings {
    pub max_message_bytes: usize,
    pub max_pending: usize,
    pub bearer_token: String,
    pub legacy_token: bool,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub ingest_roots: Vec<PathBuf>,
    /// `HOST:PORT` of the curation web page and `/metrics`; empty: not served.
    pub http: String,
}

/// Per-token request limits by scope (0: none) and how fresh the daemon keeps the token records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessSettings {
    pub rps_read: f64,
    pub rps_write: f64,
    pub rps_curate: f64,
    pub rps_admin: f64,
    pub concurrent_read: u32,
    pub concurrent_write: u32,
    pub concurrent_curate: u32,
    pub concurrent_admin: u32,
    pub refresh_ms: u64,
}

/// Where a policy profile layered between the config file and the environment comes from.
enum PolicySource<'a> {
    None,
    File(&'a Path),
    /// A policy built into the binary (the defaults in `policies/`), as TOML text.
    Embedded(&'a str),
}

impl Settings {
    /// Defaults, then `file` (if any), then `A2RAG__SECTION__KEY` environment overrides.
    pub fn load(file: Option<&Path>) -> Result<Settings> {
        Settings::load_with_policy(file, None)
    }

    /// Like [`Settings::load`], with a policy profile layered between the file and the
    /// environment.
    pub fn load_with_policy(file: Option<&Path>, policy: Option<&Path>) -> Result<Settings> {
        Settings::layered(file, policy.map_or(PolicySource::None, PolicySource::File))
    }

    /// Like [`Settings::load_with_policy`], with the policy given as TOML text (the policies
    /// embedded in the binary).
    pub fn load_with_policy_text(file: Option<&Path>, policy: &str) -> Result<Settings> {
        Settings::layered(file, PolicySource::Embedded(policy))
    }

    fn layered(file: Option<&Path>, policy: PolicySource<'_>) -> Result<Settings> {
        let mut builder =
            config::Config::builder().add_source(config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml));
        let known = Keys::of_defaults()?;
        if let Some(path) = file {
            if !path.exists() {
                return Err(Error::Config(format!("config file {} does not exist", path.display())));
            }
            known.check_file(path, "config file")?;
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        match policy {
            PolicySource::None => {}
            PolicySource::File(path) => {
                known.check_file(path, "policy file")?;
                builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml).required(true));
            }
            PolicySource::Embedded(text) => {
                known.check_source(config::File::from_str(text, config::FileFormat::Toml), "embedded policy")?;
                builder = builder.add_source(config::File::from_str(text, config::FileFormat::Toml));
            }
        }
        known.check_env(std::env::vars_os())?;
        builder = builder.add_source(
            config::Environment::with_prefix("A2RAG").prefix_separator("__").separator("__").try_parsing(true),
        );
        let config = builder.build().map_err(|e| Error::Config(e.to_string()))?;
        let settings: Settings = config.clone().try_deserialize().map_err(|e| Error::Config(explain(&config, e)))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Built-in defaults only; what tests start from.
    pub fn defaults() -> Settings {
        config::Config::builder()
            .add_source(config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml))
            .build()
            .and_then(|c| c.try_deserialize())
            .expect("embedded default.toml matches Settings")
    }

    fn validate(&self) -> Result<()> {
        let bad = |msg: &str| Err(Error::Config(msg.to_string()));
        if self.store.backend == StoreBackend::Postgres && self.store.url.trim().is_empty() {
            return bad(
                "store.backend = \"postgres\" needs store.url (postgres://user@host/db, or set A2RAG__STORE__URL)",
            );
        }
        if self.store.pool_size == 0 {
            return bad("store.pool_size must be > 0");
        }
        if self.store.poll_ms == 0 {
            return bad("store.poll_ms must be > 0");
        }
        if self.server.tls_cert.as_os_str().is_empty() != self.server.tls_key.as_os_str().is_empty() {
            return bad("server.tls_cert and server.tls_key go together: set both (PEM files) or neither");
        }
        let a = &self.access;
        if [a.rps_read, a.rps_write, a.rps_curate, a.rps_admin].iter().any(|r| !r.is_finite() || *r < 0.0) {
            return bad("access.rps_* must be numbers >= 0 (0: no limit)");
        }
        if a.refresh_ms == 0 {
            return bad("access.refresh_ms must be > 0");
        }
        if self.ingest.chunk_tokens == 0 {
            return bad("ingest.chunk_tokens must be > 0");
        }
        if self.ingest.chunk_overlap >= self.ingest.chunk_tokens {
            return bad("ingest.chunk_overlap must be smaller than ingest.chunk_tokens");
        }
        if self.ingest.max_file_bytes == 0 {
            return bad("ingest.max_file_bytes must be > 0");
        }
        for (name, vectors, default) in [
            ("index.graph_max", self.index.graph_max, 32768),
            ("index.entity_graph_max", self.index.entity_graph_max, 16384),
            ("index.fact_graph_max", self.index.fact_graph_max, 8192),
        ] {
            if vectors == 0 {
                return bad(&format!("{name} must be > 0 (the default is {default})"));
            }
        }
        if self.embed.dim == 0 {
            return bad("embed.dim must be > 0");
        }
        if self.embed.batch_size == 0 {
            return bad("embed.batch_size must be > 0");
        }
        if self.embed.batch_tokens == 0 {
            return bad("embed.batch_tokens must be > 0");
        }
        if !(0.0..1.0).contains(&self.retrieve.restart_prob) || self.retrieve.restart_prob == 0.0 {
            return bad("retrieve.restart_prob must be in (0, 1)");
        }
        // Forward push does up to about 1 / (restart_prob * epsilon) pushes and has no other
        // bound: at 0 it never stops, far below the default it runs for minutes.
        if !(MIN_PUSH_EPSILON..1.0).contains(&self.retrieve.ppr_push_epsilon) {
            return bad(&format!(
                "retrieve.ppr_push_epsilon must be at least {MIN_PUSH_EPSILON:e} and below 1 (the default is 1e-6)"
            ));
        }
        if !(self.retrieve.ppr_tolerance > 0.0 && self.retrieve.ppr_tolerance.is_finite()) {
            return bad("retrieve.ppr_tolerance must be > 0 (the default is 1e-4)");
        }
        if !(1..=MAX_LIST).contains(&self.retrieve.top_k) {
            return bad(&format!("retrieve.top_k must be between 1 and {MAX_LIST}"));
        }
        if self.retrieve.fact_seeds > MAX_LIST {
            return bad(&format!("retrieve.fact_seeds must be at most {MAX_LIST}"));
        }
        if !(1..=MAX_PENDING).contains(&self.server.max_pending) {
            return bad(&format!("server.max_pending must be between 1 and {MAX_PENDING}"));
        }
        // Similarities, shares and confidences: outside [0, 1] (or NaN) a threshold either
        // takes everything or nothing, silently.
        let shares = [
            ("gate.threshold", self.gate.threshold),
            ("gate.min_answer_confidence", self.gate.min_answer_confidence),
            ("alias.edit_threshold", self.alias.edit_threshold),
            ("alias.cosine_threshold", self.alias.cosine_threshold),
            ("retrieve.seed_threshold", self.retrieve.seed_threshold),
            ("retrieve.relation_threshold", self.retrieve.relation_threshold),
            ("retrieve.sufficiency_threshold", self.retrieve.sufficiency_threshold),
            ("retrieve.synonym_threshold", self.retrieve.synonym_threshold),
            ("bm25.b", self.bm25.b),
        ];
        if let Some((name, _)) = shares.iter().find(|(_, value)| !(0.0..=1.0).contains(value)) {
            return bad(&format!("{name} must be in [0, 1]"));
        }
        let weights = [
            ("bm25.k1", f64::from(self.bm25.k1), "1.2"),
            ("retrieve.rrf_k", f64::from(self.retrieve.rrf_k), "60"),
            ("retrieve.passage_seed_weight", self.retrieve.passage_seed_weight, "0.05"),
        ];
        if let Some((name, _, default)) = weights.iter().find(|(_, value, _)| !(*value >= 0.0 && value.is_finite())) {
            return bad(&format!("{name} must be >= 0 (the default is {default})"));
        }
        if !(0.0..=2.0).contains(&self.llm.temperature) {
            return bad("llm.temperature must be in [0, 2]");
        }
        if self.server.max_message_bytes < MIN_MESSAGE_BYTES {
            return bad(&format!(
                "server.max_message_bytes must be at least {MIN_MESSAGE_BYTES} (the default is 1048576)"
            ));
        }
        if self.budget.max_iterations == 0 {
            return bad("budget.max_iterations must be >= 1");
        }
        if self.retrieve.sufficiency_judge == SufficiencyJudge::Llm && self.llm.provider == LlmProvider::Embedded {
            return bad(LLM_JUDGE_NEEDS_MODEL);
        }
        Ok(())
    }
}

/// The prefix of the environment variables that override settings.
const ENV_PREFIX: &str = "A2RAG__";

/// Smallest forward-push residual threshold: a thousandth of the default, minutes of pushes
/// on a large graph at worst.
const MIN_PUSH_EPSILON: f64 = 1e-10;
/// Most passages or facts a retrieval setting may ask for: far past any useful evidence
/// list, well short of the sizes whose arithmetic or allocation would fail.
const MAX_LIST: usize = 10_000;
/// Smallest request size limit: below it even a short question could not be sent.
const MIN_MESSAGE_BYTES: usize = 1024;
/// Most requests the daemon may queue at once (each holds a task and its buffers).
const MAX_PENDING: usize = 1_000_000;

/// Every setting there is: the dotted paths (`retrieve.top_k`) of the keys and sections of
/// `config/default.toml`, which lists each one. A key anywhere else that is not among them is
/// a typo, refused rather than silently ignored.
struct Keys(std::collections::BTreeSet<String>);

impl Keys {
    fn of_defaults() -> Result<Keys> {
        let mut keys = std::collections::BTreeSet::new();
        let defaults = toml_tree(config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml))
            .map_err(|e| Error::Config(format!("the built-in defaults: {e}")))?;
        collect_paths(&defaults, "", &mut keys);
        Ok(Keys(keys))
    }

    /// Refuses the first key of the TOML file at `path` that is not a setting.
    fn check_file(&self, path: &Path, what: &str) -> Result<()> {
        self.check_source(
            config::File::from(path).format(config::FileFormat::Toml),
            &format!("{what} {}", path.display()),
        )
    }

    /// Refuses the first key in `source` that names no setting; `origin` says where it came from.
    fn check_source<S: config::Source + Send + Sync + 'static>(&self, source: S, origin: &str) -> Result<()> {
        let tree = toml_tree(source).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        let mut paths = std::collections::BTreeSet::new();
        collect_paths(&tree, "", &mut paths);
        match paths.iter().find(|key| !self.0.contains(*key)) {
            Some(key) => Err(self.unknown(key, origin)),
            None => Ok(()),
        }
    }

    /// Refuses the first `A2RAG__SECTION__KEY` variable among `vars` that names no setting.
    fn check_env(&self, vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Result<()> {
        for (name, _) in vars {
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name.strip_prefix(ENV_PREFIX) else { continue };
            let key = rest.split("__").collect::<Vec<_>>().join(".").to_lowercase();
            if !self.0.contains(&key) {
                return Err(self.unknown(&key, &format!("environment variable {name}")));
            }
        }
        Ok(())
    }

    fn unknown(&self, key: &str, origin: &str) -> Error {
        let depth = key.matches('.').count();
        let closest = self
            .0
            .iter()
            .filter(|known| known.matches('.').count() == depth)
            .map(|known| (strsim::levenshtein(known, key), known))
            .filter(|(distance, _)| *distance <= 3)
            .min();
        let hint = match closest {
            Some((_, known)) => format!("; did you mean `{known}`?"),
            None => String::new(),
        };
        Error::Config(format!("unknown setting `{key}` in {origin}{hint} (config/default.toml lists every setting)"))
    }
}

/// One TOML source as a tree of values.
/// `config`'s message for a misspelt enum value names the key but not the accepted values;
/// serde's own names the values but not the key, so a bad value gets both.
fn explain(config: &config::Config, error: config::ConfigError) -> String {
    let message = error.to_string();
    if !message.contains("variant") {
        return message;
    }
    match config.clone().try_deserialize::<serde_json::Value>().map(serde_json::from_value::<Settings>) {
        Ok(Err(serde)) => format!("{message} ({serde})"),
        _ => message,
    }
}

fn toml_tree<S: config::Source + Send + Sync + 'static>(source: S) -> Result<serde_json::Value, config::ConfigError> {
    config::Config::builder().add_source(source).build().and_then(|c| c.try_deserialize())
}

/// Adds the dotted path of every key and section in `tree` under `prefix`.
fn collect_paths(tree: &serde_json::Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
    let Some(table) = tree.as_object() else { return };
    for (key, value) in table {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        collect_paths(value, &path, out);
        out.insert(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_validate() {
        let s = Settings::defaults();
        s.validate().unwrap();
        assert_eq!(s.embed.provider, EmbedProvider::Hash);
        assert_eq!(s.retrieve.restart_prob, 0.5);
    }

    #[test]
    fn user_file_overrides_only_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[gate]\nthreshold = 0.42\n").unwrap();
        let s = Settings::load(Some(&path)).unwrap();
        assert_eq!(s.gate.threshold, 0.42);
        assert_eq!(s.ingest.chunk_tokens, Settings::defaults().ingest.chunk_tokens);
    }

    #[test]
    fn invalid_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[ingest]\nchunk_overlap = 500\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("chunk_overlap"), "{err}");
        for (setting, key) in [
            ("[retrieve]\nppr_push_epsilon = 0.0\n", "ppr_push_epsilon"),
            ("[retrieve]\nppr_push_epsilon = 1e-300\n", "ppr_push_epsilon"),
            ("[retrieve]\nppr_tolerance = -1.0\n", "ppr_tolerance"),
            ("[retrieve]\ntop_k = 0\n", "top_k"),
            ("[retrieve]\nfact_seeds = 100000000000\n", "fact_seeds"),
            ("[server]\nmax_pending = 9223372036854775807\n", "max_pending"),
            ("[server]\nmax_message_bytes = 0\n", "max_message_bytes"),
            ("[gate]\nthreshold = nan\n", "gate.threshold"),
            ("[gate]\nthreshold = 7.5\n", "gate.threshold"),
            ("[alias]\nedit_threshold = -0.1\n", "alias.edit_threshold"),
            ("[bm25]\nk1 = -3.0\n", "bm25.k1"),
            ("[index]\ngraph_max = 0\n", "index.graph_max"),
            ("[index]\nentity_graph_max = 0\n", "index.entity_graph_max"),
            ("[index]\nfact_graph_max = 0\n", "index.fact_graph_max"),
            ("[llm]\ntemperature = inf\n", "llm.temperature"),
        ] {
            std::fs::write(&path, setting).unwrap();
            let err = Settings::load(Some(&path)).unwrap_err().to_string();
            assert!(err.contains(key), "{setting}: {err}");
        }
        assert!(Settings::load(Some(&dir.path().join("missing.toml"))).is_err());
    }

    #[test]
    fn unknown_keys_in_a_file_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[retrieve]\ntop_kk = 3\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("`retrieve.top_kk`") && err.contains("did you mean `retrieve.top_k`"), "{err}");
        std::fs::write(&path, "[retreive]\ntop_k = 3\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("`retreive`"), "{err}");
        std::fs::write(&path, "[retrieve]\ntop_k = 3\n[embed]\nmodel = \"m\"\n").unwrap();
        assert_eq!(Settings::load(Some(&path)).unwrap().retrieve.top_k, 3);
    }

    #[test]
    fn unknown_keys_in_a_policy_file_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fast.toml");
        std::fs::write(&path, "[budget]\nmax_llm_call = 2\n").unwrap();
        let err = Settings::load_with_policy(None, Some(&path)).unwrap_err().to_string();
        assert!(err.contains("`budget.max_llm_call`") && err.contains("policy file"), "{err}");
    }

    #[test]
    fn unknown_environment_variables_are_refused_by_name() {
        let known = Keys::of_defaults().unwrap();
        let var = |name: &str| (std::ffi::OsString::from(name), std::ffi::OsString::from("1"));
        let err = known.check_env([var("A2RAG__RETRIEVE__TOP_KK")]).unwrap_err().to_string();
        assert!(err.contains("A2RAG__RETRIEVE__TOP_KK") && err.contains("`retrieve.top_k`"), "{err}");
        known
            .check_env([var("A2RAG__RETRIEVE__TOP_K"), var("A2RAG__DATA_DIR"), var("A2RAG_DATASETS"), var("PATH")])
            .unwrap();
        assert!(known.check_env([var("A2RAG__LLM__MODEL_NAME")]).is_err());
    }

    #[test]
    fn default_toml_lists_every_setting_and_nothing_else() {
        let known = Keys::of_defaults().unwrap();
        let mut fields = std::collections::BTreeSet::new();
        collect_paths(&serde_json::to_value(Settings::defaults()).unwrap(), "", &mut fields);
        assert_eq!(known.0, fields);
    }

    #[test]
    fn providers_are_enums_and_unknown_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[embed]\nprovider = \"minilm\"\n[llm]\nprovider = \"ollama\"\n").unwrap();
        let s = Settings::load(Some(&path)).unwrap();
        assert_eq!((s.embed.provider, s.llm.provider), (EmbedProvider::MiniLm, LlmProvider::Ollama));
        std::fs::write(&path, "[llm]\nprovider = \"gpt\"\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("gpt") && err.contains("anthropic"), "{err}");
    }

    #[test]
    fn llm_sufficiency_judge_needs_a_model() {
        assert_eq!(Settings::defaults().retrieve.sufficiency_judge, SufficiencyJudge::Embedded);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "[retrieve]\nsufficiency_judge = \"llm\"\n").unwrap();
        let err = Settings::load(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("retrieve.sufficiency_judge") && err.contains("embedded"), "{err}");
        std::fs::write(&path, "[retrieve]\nsufficiency_judge = \"llm\"\n[llm]\nprovider = \"openai\"\n").unwrap();
        assert_eq!(Settings::load(Some(&path)).unwrap().retrieve.sufficiency_judge, SufficiencyJudge::Llm);
        std::fs::write(&path, "[retrieve]\nsufficiency_judge = \"oracle\"\n").unwrap();
        assert!(Settings::load(Some(&path)).is_err(), "unknown judges are refused");
    }
}
