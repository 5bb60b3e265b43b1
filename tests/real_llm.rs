//! A real model behind the `openai` provider. Needs a running OpenAI-compatible server:
//!
//! ```sh
//! scripts/local-llm.sh install
//! export A2RAG_TEST_LLM_URL="$(scripts/local-llm.sh start)"
//! cargo test --test real_llm -- --nocapture
//! scripts/local-llm.sh stop
//! ```
//!
//! `A2RAG_TEST_LLM_MODEL` names the model (llama-cpp-python serves its one model under any
//! name); `A2RAG_TEST_LLM_KEY_ENV` names a variable holding an API key, for hosted servers.

use std::path::PathBuf;

use a2rag::config::LlmSettings;
use a2rag::llm::{CompletionRequest, from_settings};

fn base_url() -> Option<String> {
    std::env::var("A2RAG_TEST_LLM_URL").ok().map(|url| url.trim().to_string()).filter(|url| !url.is_empty())
}

#[tokio::test]
async fn real_model_answers_with_reported_usage() {
    let Some(base_url) = base_url() else {
        eprintln!();
        eprintln!("**************************************************************************");
        eprintln!("SKIPPED: set A2RAG_TEST_LLM_URL (scripts/local-llm.sh start)");
        eprintln!("**************************************************************************");
        return;
    };
    let settings = LlmSettings {
        provider: "openai".to_string(),
        model: std::env::var("A2RAG_TEST_LLM_MODEL").unwrap_or_else(|_| "smollm2".to_string()),
        base_url,
        api_key_env: std::env::var("A2RAG_TEST_LLM_KEY_ENV")
            .unwrap_or_else(|_| "A2RAG_TEST_LLM_API_KEY".to_string()),
        // A 135M model on two shared cores answers in seconds; leave room for a cold start.
        timeout_ms: 120_000,
        max_retries: 1,
        retry_backoff_ms: 500,
        max_completion_tokens: 32,
        temperature: 0.0,
        prompts_dir: PathBuf::new(),
    };
    let model = from_settings(&settings).expect("valid settings").expect("a network model");
    let request = CompletionRequest {
        system: Some("You are a helpful assistant. Answer in one short sentence.".to_string()),
        prompt: "What is the capital of France?".to_string(),
        max_tokens: 32,
        temperature: 0.0,
    };
    let completion = model.complete(&request).await.expect("the real model answers");
    eprintln!("{} answered {:?} with {:?}", model.name(), completion.text, completion.usage);
    assert!(!completion.text.trim().is_empty(), "empty completion");
    assert!(completion.usage.prompt_tokens > 0, "no prompt tokens: {:?}", completion.usage);
    assert!(!completion.usage.estimated, "usage was estimated, not reported: {:?}", completion.usage);
}
