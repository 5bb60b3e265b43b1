//! Settings: `config/default.toml` (embedded in the binary, so defaults always exist),
//! then an optional user file, then `A2RAG__SECTION__KEY` environment variables.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub data_dir: PathBuf,
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
    pub provider: String,
    pub dim: usize,
    pub model_dir: PathBuf,
    /// Hugging Face hub repository the minilm provider downloads when no local model is found;
    /// empty disables the download.
    pub model_id: String,
    pub hub_cache: PathBuf,
    pub model: String,
    pub base_url: String,
    pub api_key_env: String,
    pub timeout_ms: u64,
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    pub batch_size: usize,
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
    pub expansion_search: usize,
    /// Threads that link staged vectors into the HNSW graphs; 0 = one per core. One thread
    /// builds the same graph from the same inserts (reproducible retrieval).
    pub build_threads: usize,
    /// Indexes with at most this many vectors are searched exactly and not linked.
    pub exact_search_max: usize,
    /// How the HNSW graphs store vectors (candidate generation only; scores are exact).
    pub quantization: Quantization,
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
    pub sufficiency_coverage: f32,
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
}

/// Why `retrieve.sufficiency_judge = "llm"` is refused without a model.
pub const LLM_JUDGE_NEEDS_MODEL: &str = "retrieve.sufficiency_judge = \"llm\" needs an [llm] provider other than \"embedded\"";

/// Who decides, after each retrieval stage, whether the evidence suffices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SufficiencyJudge {
    /// The embedded key-term and seed coverage check (`sufficiency_coverage`).
    Coverage,
    /// The LLM (`prompts/sufficiency.txt`), within the query budget; falls back to the
    /// coverage check when the call is not affordable or fails.
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
    pub provider: String,
    pub model: String,
    pub base_url: String,
    pub api_key_env: String,
    pub timeout_ms: u64,
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    pub max_completion_tokens: u32,
    pub temperature: f64,
    pub prompts_dir: PathBuf,
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
}

impl Settings {
    /// Defaults, then `file` (if any), then `A2RAG__SECTION__KEY` environment overrides.
    pub fn load(file: Option<&Path>) -> Result<Settings> {
        Settings::load_with_policy(file, None)
    }

    /// Like [`Settings::load`], with a policy profile layered between the file and the
    /// environment.
    pub fn load_with_policy(file: Option<&Path>, policy: Option<&Path>) -> Result<Settings> {
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(path) = file {
            if !path.exists() {
                return Err(Error::Config(format!("config file {} does not exist", path.display())));
            }
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml));
        }
        if let Some(path) = policy {
            builder = builder.add_source(config::File::from(path).format(config::FileFormat::Toml).required(true));
        }
        builder = builder.add_source(
            config::Environment::with_prefix("A2RAG")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true),
        );
        let settings: Settings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| Error::Config(e.to_string()))?;
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
        if self.ingest.chunk_tokens == 0 {
            return bad("ingest.chunk_tokens must be > 0");
        }
        if self.ingest.chunk_overlap >= self.ingest.chunk_tokens {
            return bad("ingest.chunk_overlap must be smaller than ingest.chunk_tokens");
        }
        if self.embed.dim == 0 {
            return bad("embed.dim must be > 0");
        }
        if self.embed.batch_size == 0 {
            return bad("embed.batch_size must be > 0");
        }
        if !(0.0..1.0).contains(&self.retrieve.restart_prob) || self.retrieve.restart_prob == 0.0 {
            return bad("retrieve.restart_prob must be in (0, 1)");
        }
        if self.budget.max_iterations == 0 {
            return bad("budget.max_iterations must be >= 1");
        }
        if self.retrieve.sufficiency_judge == SufficiencyJudge::Llm && self.llm.provider == "embedded" {
            return bad(LLM_JUDGE_NEEDS_MODEL);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_validate() {
        let s = Settings::defaults();
        s.validate().unwrap();
        assert_eq!(s.embed.provider, "hash");
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
        assert!(Settings::load(Some(&dir.path().join("missing.toml"))).is_err());
    }

    #[test]
    fn llm_sufficiency_judge_needs_a_model() {
        assert_eq!(Settings::defaults().retrieve.sufficiency_judge, SufficiencyJudge::Coverage);
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
