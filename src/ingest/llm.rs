//! LLM-backed implementations of the ingest roles (the controller's roles live in
//! `control`). Each renders its prompt, calls the model once, and parses tolerantly. Ingest
//! prepares documents on plain worker threads, so each call waits through
//! [`Remote::block_on`].

use std::sync::Arc;

use serde::Deserialize;

use super::extract::{Extraction, Extractor};
use super::summary::Summarizer;
use crate::config::Settings;
use crate::error::Result;
use crate::kb::model::RawTriple;
use crate::llm::prompts::{PromptId, Prompts};
use crate::llm::{CompletionRequest, LanguageModel, parse};
use crate::net::Remote;

struct Caller {
    model: Arc<dyn LanguageModel>,
    remote: Remote,
    prompts: Prompts,
    max_tokens: u32,
    temperature: f64,
}

impl Caller {
    fn new(model: Arc<dyn LanguageModel>, remote: &Remote, settings: &Settings) -> Result<Caller> {
        Ok(Caller {
            model,
            remote: remote.clone(),
            prompts: Prompts::load(&settings.llm.prompts_dir)?,
            max_tokens: settings.llm.max_completion_tokens,
            temperature: settings.llm.temperature,
        })
    }

    fn call(&self, id: PromptId, vars: &[(&str, &str)]) -> Result<String> {
        let request = CompletionRequest {
            system: None,
            prompt: self.prompts.render(id, vars),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
        };
        let model = self.model.clone();
        let completion = self.remote.block_on(async move { model.complete(&request).await })??;
        Ok(completion.text)
    }
}

pub struct LlmExtractor(Caller);

impl LlmExtractor {
    pub fn new(model: Arc<dyn LanguageModel>, remote: &Remote, settings: &Settings) -> Result<Self> {
        Ok(LlmExtractor(Caller::new(model, remote, settings)?))
    }
}

#[derive(Deserialize)]
struct ExtractionReply {
    #[serde(default)]
    entities: Vec<String>,
    #[serde(default)]
    triples: Vec<Vec<String>>,
}

impl Extractor for LlmExtractor {
    fn extract(&self, title: &str, text: &str) -> Result<Extraction> {
        let reply = self.0.call(PromptId::ExtractTriples, &[("title", title), ("text", text)])?;
        let parsed: ExtractionReply = parse::json_in(&reply)?;
        let triples = parsed
            .triples
            .into_iter()
            .filter_map(|t| match <[String; 3]>::try_from(t) {
                Ok([s, r, o]) if !s.trim().is_empty() && !r.trim().is_empty() && !o.trim().is_empty() => {
                    Some(RawTriple { subject: s, relation: r, object: o })
                }
                _ => None,
            })
            .collect();
        Ok(Extraction {
            entities: parsed.entities,
            triples,
        })
    }
}

pub struct LlmSummarizer(Caller);

impl LlmSummarizer {
    pub fn new(model: Arc<dyn LanguageModel>, remote: &Remote, settings: &Settings) -> Result<Self> {
        Ok(LlmSummarizer(Caller::new(model, remote, settings)?))
    }
}

impl Summarizer for LlmSummarizer {
    fn summarize(&self, title: &str, text: &str, _entities: &[String]) -> Result<String> {
        Ok(self.0.call(PromptId::Summarize, &[("title", title), ("text", text)])?.trim().to_string())
    }
}
