//! The `openai` provider against a scripted OpenAI-compatible server on 127.0.0.1: usage
//! numbers, retries, rate limits, timeouts, malformed replies and what is sent.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2rag::config::{ConnectionSettings, LlmProvider, LlmSettings};
use a2rag::llm::{CompletionRequest, LanguageModel, from_settings};
use a2rag::net::{Remote, RemoteError};
use common::http::{MockServer, Reply, error_reply};
use serde_json::Value;

fn chat_reply(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Reply {
    let body = serde_json::json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "mock-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    });
    Reply::Json(200, body.to_string())
}

fn settings(base_url: &str) -> LlmSettings {
    LlmSettings {
        provider: LlmProvider::OpenAi,
        connection: ConnectionSettings {
            model: "mock-model".to_string(),
            base_url: base_url.to_string(),
            api_key_env: "A2RAG_TEST_KEY_THAT_IS_NEVER_SET".to_string(),
            timeout_ms: 5_000,
            max_retries: 2,
            retry_backoff_ms: 10,
        },
        max_completion_tokens: 64,
        temperature: 0.0,
        prompts_dir: PathBuf::new(),
    }
}

fn model(settings: &LlmSettings) -> Arc<dyn LanguageModel> {
    from_settings(settings, &Remote::new()).expect("valid settings").expect("a network provider")
}

fn request() -> CompletionRequest {
    CompletionRequest {
        system: Some("You are terse.".to_string()),
        prompt: "What is the capital of France?".to_string(),
        max_tokens: 42,
        temperature: 0.25,
    }
}

#[tokio::test]
async fn success_reports_usage_from_the_response() {
    let server = MockServer::start(vec![chat_reply("Paris.", 17, 3)]).await;
    let llm = model(&settings(&server.base_url));
    assert_eq!(llm.name(), "openai:mock-model");

    let completion = llm.complete(&request()).await.expect("completion");
    assert_eq!(completion.text, "Paris.");
    assert_eq!(completion.usage.prompt_tokens, 17);
    assert_eq!(completion.usage.completion_tokens, 3);
    assert!(!completion.usage.estimated);
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn request_uses_chat_completions_and_carries_the_parameters() {
    let server = MockServer::start(vec![chat_reply("Paris.", 17, 3)]).await;
    let llm = model(&settings(&server.base_url));
    llm.complete(&request()).await.expect("completion");

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0];
    assert!(
        sent.request_line.starts_with("POST /v1/chat/completions "),
        "not the Chat Completions API: {}",
        sent.request_line
    );
    // No key configured: a local server must not get an Authorization header.
    assert_eq!(sent.header("authorization"), None);

    let body: Value = serde_json::from_str(&sent.body).expect("JSON request body");
    assert_eq!(body["model"], "mock-model");
    assert_eq!(body["max_tokens"], 42);
    assert_eq!(body["temperature"], 0.25);
    let messages = body["messages"].as_array().expect("messages array");
    let text = serde_json::to_string(messages).expect("serialize");
    assert!(text.contains("What is the capital of France?"), "prompt missing: {text}");
    assert!(text.contains("You are terse."), "system prompt missing: {text}");
    assert_eq!(messages.first().and_then(|m| m["role"].as_str()), Some("system"));
    // llama-cpp-python rejects content given as an array of parts.
    for message in messages {
        assert!(message["content"].is_string(), "content is not a plain string: {message}");
    }
}

#[tokio::test]
async fn api_key_comes_from_the_named_environment_variable() {
    // A variable cargo sets for every test process, so the test needs no unsafe set_var.
    let Ok(expected) = std::env::var("CARGO_PKG_NAME") else {
        eprintln!("CARGO_PKG_NAME unset; not run outside cargo");
        return;
    };
    let server = MockServer::start(vec![chat_reply("ok", 1, 1)]).await;
    let mut with_key = settings(&server.base_url);
    with_key.connection.api_key_env = "CARGO_PKG_NAME".to_string();
    model(&with_key).complete(&request()).await.expect("completion");
    let authorization = server.seen()[0].header("authorization").map(str::to_string);
    assert_eq!(authorization, Some(format!("Bearer {expected}")));
}

#[tokio::test]
async fn server_error_is_retried_until_success() {
    let server =
        MockServer::start(vec![error_reply(500, "boom"), chat_reply("recovered", 5, 1)]).await;
    let llm = model(&settings(&server.base_url));
    let completion = llm.complete(&request()).await.expect("second attempt succeeds");
    assert_eq!(completion.text, "recovered");
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn rate_limit_every_time_gives_rate_limited_after_all_retries() {
    let server = MockServer::start(vec![error_reply(429, "slow down")]).await;
    let mut config = settings(&server.base_url);
    config.connection.max_retries = 3;
    let error = model(&config).complete(&request()).await.expect_err("always 429");
    assert!(matches!(error, RemoteError::RateLimited(_)), "got {error:?}");
    assert_eq!(server.hits(), 4, "max_retries + 1 attempts");
}

#[tokio::test]
async fn silent_server_times_out_within_the_bound() {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let mut config = settings(&server.base_url);
    config.connection.timeout_ms = 300;
    config.connection.max_retries = 1;
    config.connection.retry_backoff_ms = 10;
    let started = Instant::now();
    let error = model(&config).complete(&request()).await.expect_err("never answers");
    let elapsed = started.elapsed();
    assert_eq!(error, RemoteError::Timeout(300));
    assert_eq!(server.hits(), 2);
    // Two 300 ms attempts and a 10 ms pause, with room for a slow shared machine.
    assert!(elapsed >= Duration::from_millis(600), "returned too early: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[tokio::test]
async fn malformed_body_is_an_error_not_a_panic() {
    let server = MockServer::start(vec![Reply::Garbage]).await;
    let error = model(&settings(&server.base_url)).complete(&request()).await.expect_err("garbage");
    assert!(
        matches!(error, RemoteError::Malformed(_) | RemoteError::Provider(_)),
        "got {error:?}"
    );
}

#[tokio::test]
async fn reply_without_choices_shape_is_an_error() {
    let server = MockServer::start(vec![Reply::Json(200, r#"{"unexpected": true}"#.into())]).await;
    let result = model(&settings(&server.base_url)).complete(&request()).await;
    assert!(result.is_err(), "got {result:?}");
}

#[tokio::test]
async fn missing_usage_falls_back_to_estimates() {
    let body = serde_json::json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris is the capital."},
                     "finish_reason": "stop"}]
    });
    let server = MockServer::start(vec![Reply::Json(200, body.to_string())]).await;
    let completion =
        model(&settings(&server.base_url)).complete(&request()).await.expect("completion");
    assert_eq!(completion.text, "Paris is the capital.");
    assert!(completion.usage.estimated);
    assert!(completion.usage.prompt_tokens > 0);
    assert!(completion.usage.completion_tokens > 0);
}

#[tokio::test]
async fn bad_credentials_are_a_config_error_and_not_retried() {
    let server = MockServer::start(vec![error_reply(401, "invalid api key")]).await;
    let error = model(&settings(&server.base_url)).complete(&request()).await.expect_err("401");
    assert!(matches!(error, RemoteError::Config(_)), "got {error:?}");
    assert_eq!(server.hits(), 1);
}

#[test]
fn embedded_provider_builds_no_model() {
    let mut config = settings("");
    config.provider = LlmProvider::Embedded;
    assert!(from_settings(&config, &Remote::new()).expect("embedded is valid").is_none());
}

#[test]
fn anthropic_without_key_is_a_config_error() {
    let mut config = settings("");
    config.provider = LlmProvider::Anthropic;
    config.connection.model = "claude-test".to_string();
    assert!(matches!(from_settings(&config, &Remote::new()), Err(RemoteError::Config(_))));
}

#[test]
fn missing_model_name_is_a_config_error() {
    let mut config = settings("http://127.0.0.1:9/v1");
    config.connection.model = "  ".to_string();
    assert!(matches!(from_settings(&config, &Remote::new()), Err(RemoteError::Config(_))));
}

#[test]
fn ollama_and_anthropic_build() {
    let mut ollama = settings("http://127.0.0.1:11434");
    ollama.provider = LlmProvider::Ollama;
    let built = from_settings(&ollama, &Remote::new()).expect("ollama settings").expect("a model");
    assert_eq!(built.name(), "ollama:mock-model");

    let mut anthropic = settings("");
    anthropic.provider = LlmProvider::Anthropic;
    anthropic.connection.api_key_env = "CARGO_PKG_NAME".to_string();
    if std::env::var("CARGO_PKG_NAME").is_ok() {
        let built = from_settings(&anthropic, &Remote::new()).expect("anthropic settings").expect("a model");
        assert_eq!(built.name(), "anthropic:mock-model");
    }
}

#[test]
fn callers_on_any_thread_or_runtime_share_one_pooled_connection() {
    // Ingest waits for models from plain threads, eval from inside a current-thread runtime,
    // the daemon from a multi-thread one: all of them go through the one `Remote`, whose
    // pooled client keeps a single keep-alive connection to the server.
    let reply = chat_reply("again", 2, 1);
    let server = MockServer::background(move |_, _| reply.clone());
    let remote = Remote::new();
    let llm = from_settings(&settings(&server.base_url), &remote).expect("valid").expect("a model");
    let call = |llm: Arc<dyn LanguageModel>| async move { llm.complete(&request()).await };
    for _ in 0..2 {
        let completion = remote.block_on(call(llm.clone())).expect("bridge").expect("completion");
        assert_eq!(completion.text, "again");
    }
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    for _ in 0..2 {
        assert_eq!(current.block_on(call(llm.clone())).expect("completion").text, "again");
        let inside = current.block_on(async { remote.block_on(call(llm.clone())) });
        assert_eq!(inside.expect("bridge").expect("completion").text, "again");
    }
    drop(current);
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    assert_eq!(multi.block_on(call(llm.clone())).expect("completion").text, "again");
    assert_eq!(server.hits(), 7);
    // hyper hands a connection back to the pool just after its reply is read, so a request
    // sent at once may still open a second one; a client without a pool opens seven.
    assert!(server.connections() <= 2, "{} connections for 7 requests", server.connections());
}

#[tokio::test]
async fn ollama_uses_the_daemons_openai_compatible_chat_endpoint() {
    let server = MockServer::start(vec![chat_reply("Paris.", 9, 2)]).await;
    let root = server.base_url.trim_end_matches("/v1").to_string();
    let mut config = settings(&root);
    config.provider = LlmProvider::Ollama;
    let completion = model(&config).complete(&request()).await.expect("completion");
    assert_eq!(completion.text, "Paris.");
    assert_eq!((completion.usage.prompt_tokens, completion.usage.completion_tokens), (9, 2));
    assert!(server.seen()[0].request_line.starts_with("POST /v1/chat/completions "));
}

#[tokio::test]
async fn anthropic_uses_the_messages_api_and_its_usage() {
    if std::env::var("CARGO_PKG_NAME").is_err() {
        eprintln!("CARGO_PKG_NAME unset; not run outside cargo");
        return;
    }
    let reply = serde_json::json!({
        "id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "Paris."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 11, "output_tokens": 2}
    });
    let server = MockServer::start(vec![Reply::Json(200, reply.to_string())]).await;
    let root = server.base_url.trim_end_matches("/v1").to_string();
    let mut config = settings(&root);
    config.provider = LlmProvider::Anthropic;
    config.connection.model = "claude-test".to_string();
    config.connection.api_key_env = "CARGO_PKG_NAME".to_string();
    let completion = model(&config).complete(&request()).await.expect("completion");
    assert_eq!(completion.text, "Paris.");
    assert_eq!((completion.usage.prompt_tokens, completion.usage.completion_tokens), (11, 2));
    assert!(!completion.usage.estimated);
    let sent = &server.seen()[0];
    assert!(sent.request_line.starts_with("POST /v1/messages "), "{}", sent.request_line);
    let body: Value = serde_json::from_str(&sent.body).expect("JSON request body");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 42);
}
