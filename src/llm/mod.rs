//! Language models behind one trait. Each LLM-backed step (reader, validators, rewriter,
//! extractor, summariser) has an embedded deterministic implementation and an LLM one that
//! goes through [`LanguageModel`] (the ingest roles are in `ingest::llm`, the controller's in
//! `control::roles`). Providers: [`provider`] (rig-core).

pub mod parse;
pub mod prompts;
pub mod provider;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::net::RemoteError;
pub use provider::{Retrying, RigModel, from_settings};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    pub system: Option<String>,
    pub prompt: String,
    pub max_tokens: u32,
    pub temperature: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// True when the provider reported no usage and the numbers are estimates.
    pub estimated: bool,
}

impl Usage {
    pub fn estimate(request: &CompletionRequest, completion: &str) -> Usage {
        let prompt = request.system.as_deref().map_or(0, crate::text::estimate_tokens)
            + crate::text::estimate_tokens(&request.prompt);
        Usage { prompt_tokens: prompt, completion_tokens: crate::text::estimate_tokens(completion), estimated: true }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub usage: Usage,
}

#[async_trait]
pub trait LanguageModel: Send + Sync {
    /// "openai:gpt-4o-mini", "ollama:llama3", ...
    fn name(&self) -> String;
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, RemoteError>;
}
