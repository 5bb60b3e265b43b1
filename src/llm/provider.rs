//! Network-backed [`LanguageModel`]s through rig-core, and the retry/timeout policy every
//! one of them runs under.
//!
//! * `openai`: any server that speaks OpenAI's *Chat Completions* API (`POST
//!   {base_url}/chat/completions`): OpenAI itself, vLLM, llama.cpp / llama-cpp-python, LM
//!   Studio. rig's default OpenAI route is the newer Responses API, which the local servers
//!   do not implement, so the chat wire is chosen explicitly.
//! * `ollama`: the daemon's OpenAI-compatible endpoint (`{base_url}/v1/chat/completions`).
//! * `anthropic`: the Messages API.
//!
//! [`from_settings`] builds the configured one wrapped in [`Retrying`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rig_core::DynModel;
use rig_core::ProviderError;
use rig_core::operation::Completion as CompletionOp;
use rig_core::providers::anthropic::AnthropicConfig;
use rig_core::providers::ollama::OllamaConfig;
use rig_core::providers::openai::OpenAIConfig;
use rig_core::providers::openai::wire::{Auth, BodyRewrite};
use rig_reqwest::ReqwestClient;

use super::{Completion, CompletionRequest, LanguageModel, LlmError, Usage};
use crate::config::LlmSettings;

/// Longest pause between two attempts, whatever the backoff doubling reaches.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How much of a provider's error body is kept in an [`LlmError`] message.
const MAX_BODY_CHARS: usize = 300;

/// The provider names `llm.provider` accepts.
pub const PROVIDERS: [&str; 4] = ["embedded", "openai", "ollama", "anthropic"];

/// Builds the model `settings` describe, wrapped in [`Retrying`]; `Ok(None)` for the
/// `embedded` provider, which needs no network model.
pub fn from_settings(settings: &LlmSettings) -> Result<Option<Arc<dyn LanguageModel>>, LlmError> {
    if ProviderKind::parse(&settings.provider)?.is_none() {
        return Ok(None);
    }
    let model = RigModel::from_settings(settings)?;
    let retrying = Retrying::new(model, RetryPolicy::from_settings(settings));
    Ok(Some(Arc::new(retrying)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Ollama,
    Anthropic,
}

impl ProviderKind {
    /// `Ok(None)` for `embedded`.
    pub fn parse(name: &str) -> Result<Option<ProviderKind>, LlmError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "embedded" => Ok(None),
            "openai" => Ok(Some(ProviderKind::OpenAi)),
            "ollama" => Ok(Some(ProviderKind::Ollama)),
            "anthropic" => Ok(Some(ProviderKind::Anthropic)),
            other => Err(LlmError::Config(format!(
                "unknown llm.provider {other:?}; expected one of {}",
                PROVIDERS.join(", ")
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Ollama => "ollama",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// One provider model reached through rig-core. Makes exactly one HTTP request per
/// [`LanguageModel::complete`]; timeouts and retries are [`Retrying`]'s job.
pub struct RigModel {
    kind: ProviderKind,
    model_name: String,
    model: DynModel<CompletionOp>,
}

impl std::fmt::Debug for RigModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RigModel")
            .field("kind", &self.kind)
            .field("model", &self.model_name)
            .finish()
    }
}

impl RigModel {
    pub fn from_settings(settings: &LlmSettings) -> Result<RigModel, LlmError> {
        let Some(kind) = ProviderKind::parse(&settings.provider)? else {
            return Err(LlmError::Config(
                "the embedded provider has no network model".to_string(),
            ));
        };
        let Connection { model_name, base_url, api_key, http } = Connection::new(
            "llm",
            kind,
            &settings.model,
            &settings.base_url,
            &settings.api_key_env,
            settings.timeout_ms,
        )?;

        let model = match kind {
            ProviderKind::OpenAi => {
                let mut config = openai_config(&base_url, api_key);
                // rig sends message content as an array of parts; llama-cpp-python's server
                // (and other strict compatible servers) accept only a plain string, which
                // OpenAI also takes. This rewrite sends text-only content as one string.
                config.dialect.quirks.rewrite = BodyRewrite::Perplexity;
                config.connect(http).chat(model_name.as_str()).erase()
            }
            ProviderKind::Ollama => {
                ollama_config(&base_url, api_key).connect(http).completion(model_name.as_str()).erase()
            }
            ProviderKind::Anthropic => {
                let Some(key) = api_key else {
                    return Err(LlmError::Config(format!(
                        "provider anthropic needs an API key in the environment variable {:?} \
                         (llm.api_key_env)",
                        settings.api_key_env
                    )));
                };
                let mut config = AnthropicConfig::new(key);
                if !base_url.is_empty() {
                    config = config.with_base_url(base_url.as_str());
                }
                config.connect(http).completion(model_name.as_str()).erase()
            }
        };
        Ok(RigModel { kind, model_name, model })
    }

    pub fn kind(&self) -> ProviderKind {
        self.kind
    }
}

/// What any rig-core model needs from its settings section (`llm`, `embed`): the model
/// name, the server, the key and an HTTP client for them.
pub(crate) struct Connection {
    pub model_name: String,
    /// Without trailing slashes; empty means the provider's default.
    pub base_url: String,
    pub api_key: Option<String>,
    pub http: ReqwestClient,
}

impl Connection {
    pub(crate) fn new(
        section: &str,
        kind: ProviderKind,
        model: &str,
        base_url: &str,
        api_key_env: &str,
        timeout_ms: u64,
    ) -> Result<Connection, LlmError> {
        let model_name = model.trim().to_string();
        if model_name.is_empty() {
            return Err(LlmError::Config(format!(
                "{section}.model must name a model for provider {}",
                kind.as_str()
            )));
        }
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        let api_key = read_api_key(api_key_env);
        let http = http_client(&base_url, Duration::from_millis(timeout_ms))?;
        Ok(Connection { model_name, base_url, api_key, http })
    }
}

/// An OpenAI-compatible server at `base_url` (empty: OpenAI itself), with `api_key` or none.
pub(crate) fn openai_config(base_url: &str, api_key: Option<String>) -> OpenAIConfig {
    let keyless = api_key.is_none();
    let mut config = OpenAIConfig::new(api_key.unwrap_or_default());
    if !base_url.is_empty() {
        config = config.with_base_url(base_url);
    }
    if keyless {
        // Local servers (llama.cpp, vLLM, LM Studio) need no key, and llama.cpp's server
        // rejects an Authorization header it was not told to expect, so send none at all
        // rather than a dummy. OpenAI itself then answers 401, which surfaces as a Config
        // error naming the variable.
        config.auth = Auth::OptionalBearer;
    }
    config
}

/// The Ollama daemon at `base_url` (empty: the local default), with `api_key` or none.
pub(crate) fn ollama_config(base_url: &str, api_key: Option<String>) -> OllamaConfig {
    let mut config = OllamaConfig::new();
    if !base_url.is_empty() {
        // rig appends `/v1` itself where it needs it; accept either spelling of the daemon URL.
        let root = base_url.strip_suffix("/v1").unwrap_or(base_url);
        config = config.with_base_url(root);
    }
    if let Some(key) = api_key {
        config = config.with_api_key(key);
    }
    config
}

/// The key from the variable an `api_key_env` setting names; `None` when unnamed, unset or
/// blank.
fn read_api_key(var: &str) -> Option<String> {
    let var = var.trim();
    if var.is_empty() {
        return None;
    }
    std::env::var(var).ok().map(|key| key.trim().to_string()).filter(|key| !key.is_empty())
}

/// A client of our own rather than rig's process-wide one: [`super::block_on`] may run each
/// call on a short-lived runtime, and a pooled keep-alive connection belongs to the runtime
/// that opened it, so reusing one after that runtime is gone fails the request. Not pooling
/// costs one connect (and TLS handshake) per call, small beside a model's latency.
fn http_client(base_url: &str, timeout: Duration) -> Result<ReqwestClient, LlmError> {
    let mut builder = rig_reqwest::reqwest::Client::builder().pool_max_idle_per_host(0);
    if !timeout.is_zero() {
        builder = builder.connect_timeout(timeout);
    }
    if is_loopback(base_url) {
        // A server on this machine is never behind the proxy HTTP(S)_PROXY names.
        builder = builder.no_proxy();
    }
    let client = builder
        .build()
        .map_err(|error| LlmError::Config(format!("could not build the HTTP client: {error}")))?;
    Ok(ReqwestClient::from(client))
}

fn is_loopback(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

#[async_trait]
impl LanguageModel for RigModel {
    fn name(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.model_name)
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let mut rig_request = rig_core::completion::CompletionRequest::new(request.prompt.clone())
            .temperature(request.temperature);
        if request.max_tokens > 0 {
            rig_request = rig_request.max_tokens(u64::from(request.max_tokens));
        }
        if let Some(system) = request.system.as_deref().filter(|system| !system.is_empty()) {
            rig_request = rig_request.preamble(system);
        }
        // Small local models and some gateways report finish reasons outside OpenAI's set;
        // the text is still the answer.
        rig_request.accept_unknown_finish_reasons = true;

        let response = self
            .model
            .call(rig_request)
            .await
            .map_err(|error| map_provider_error(error, "llm"))?;
        if let Some(error) = response.error.as_deref() {
            return Err(LlmError::Provider(format!("the model reported a failure: {error}")));
        }
        if response.choice.is_empty() {
            // A reply that decoded but carried no assistant content at all is a broken or
            // foreign reply shape; callers would otherwise parse "" as the model's answer.
            return Err(LlmError::Malformed(format!(
                "the reply carried no assistant content: {}",
                truncate(&response.raw.to_string())
            )));
        }
        let text = response.text();
        let usage = usage_of(request, &text, &response.usage);
        Ok(Completion { text, usage })
    }
}

/// The provider's counts where it sent them; estimates (flagged) for any it left out.
fn usage_of(request: &CompletionRequest, text: &str, reported: &rig_core::completion::Usage) -> Usage {
    match (reported.input_tokens, reported.output_tokens) {
        (Some(prompt_tokens), Some(completion_tokens)) => {
            Usage { prompt_tokens, completion_tokens, estimated: false }
        }
        (prompt, completion) => {
            let estimate = Usage::estimate(request, text);
            Usage {
                prompt_tokens: prompt.unwrap_or(estimate.prompt_tokens),
                completion_tokens: completion.unwrap_or(estimate.completion_tokens),
                estimated: true,
            }
        }
    }
}

/// Sorts rig's errors into ours. Only `Provider`, `Timeout` and `RateLimited` are retried
/// ([`LlmError::is_transient`]), so answers that will not change on a second try (bad
/// credentials, unknown model or URL, an unreadable reply) map to `Config` or `Malformed`.
/// `section` is the settings section to point at ("llm", "embed").
pub(crate) fn map_provider_error(error: ProviderError, section: &str) -> LlmError {
    if let Some(response) = error.provider_response() {
        let body = truncate(&response.body);
        return match response.status.map(|status| status.as_u16()) {
            Some(429) => LlmError::RateLimited(body),
            Some(status @ (401 | 403)) => LlmError::Config(format!(
                "the provider rejected the credentials (HTTP {status}); check \
                 {section}.api_key_env: {body}"
            )),
            Some(404) => LlmError::Config(format!(
                "the provider has no such endpoint or model (HTTP 404); check {section}.base_url \
                 and {section}.model: {body}"
            )),
            Some(status) => LlmError::Provider(format!("HTTP {status}: {body}")),
            None => LlmError::Provider(body),
        };
    }
    match error {
        ProviderError::Json(_) | ProviderError::Response(_) => {
            LlmError::Malformed(format!("unreadable provider reply: {}", truncate(&error.to_string())))
        }
        ProviderError::Url(_) | ProviderError::Request(_) | ProviderError::UnsupportedOption(_) => {
            LlmError::Config(truncate(&error.to_string()))
        }
        other => LlmError::Provider(truncate(&other.to_string())),
    }
}

fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_BODY_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// Per-attempt time limit and how often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Limit on one attempt; zero means none.
    pub timeout: Duration,
    /// Attempts after the first.
    pub max_retries: u32,
    /// Pause before the first retry; each later one doubles it (capped at a minute).
    pub backoff: Duration,
}

impl RetryPolicy {
    pub fn new(timeout_ms: u64, max_retries: u32, retry_backoff_ms: u64) -> RetryPolicy {
        RetryPolicy {
            timeout: Duration::from_millis(timeout_ms),
            max_retries,
            backoff: Duration::from_millis(retry_backoff_ms),
        }
    }

    pub fn from_settings(settings: &LlmSettings) -> RetryPolicy {
        RetryPolicy::new(settings.timeout_ms, settings.max_retries, settings.retry_backoff_ms)
    }

    /// Runs `attempt` until it succeeds, fails permanently, or `max_retries` retries are
    /// spent: each attempt is cut off after `timeout` ([`LlmError::Timeout`]), and transient
    /// failures ([`LlmError::is_transient`]) are retried after an exponential backoff.
    /// `what` names the model in the logs.
    pub async fn run<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let mut retry = 0u32;
        loop {
            tracing::debug!(model = %what, retry, "provider request");
            let result = if self.timeout.is_zero() {
                attempt().await
            } else {
                match tokio::time::timeout(self.timeout, attempt()).await {
                    Ok(result) => result,
                    Err(_) => Err(LlmError::Timeout(duration_ms(self.timeout))),
                }
            };
            match result {
                Ok(value) => return Ok(value),
                Err(error) if error.is_transient() && retry < self.max_retries => {
                    let delay = self.delay(retry);
                    tracing::warn!(
                        model = %what,
                        %error,
                        retry = retry + 1,
                        max_retries = self.max_retries,
                        delay_ms = duration_ms(delay),
                        "provider request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Pause before retry number `retry` (0-based).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(MAX_BACKOFF)
    }
}

/// Runs another model under a [`RetryPolicy`] ([`RetryPolicy::run`]).
#[derive(Debug)]
pub struct Retrying<M> {
    inner: M,
    policy: RetryPolicy,
    attempts: AtomicU64,
}

impl<M> Retrying<M> {
    pub fn new(inner: M, policy: RetryPolicy) -> Retrying<M> {
        Retrying { inner, policy, attempts: AtomicU64::new(0) }
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Attempts started since construction, retries included.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl<M: LanguageModel> LanguageModel for Retrying<M> {
    fn name(&self) -> String {
        self.inner.name()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let name = self.inner.name();
        self.policy
            .run(&name, || {
                self.attempts.fetch_add(1, Ordering::Relaxed);
                self.inner.complete(request)
            })
            .await
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers from a script, one entry per call; past its end, the last entry again.
    struct Scripted {
        script: Mutex<Vec<Result<Completion, LlmError>>>,
        stall: Option<Duration>,
    }

    impl Scripted {
        fn new(script: Vec<Result<Completion, LlmError>>) -> Scripted {
            Scripted { script: Mutex::new(script), stall: None }
        }
    }

    #[async_trait]
    impl LanguageModel for Scripted {
        fn name(&self) -> String {
            "scripted".to_string()
        }

        async fn complete(&self, _request: &CompletionRequest) -> Result<Completion, LlmError> {
            if let Some(stall) = self.stall {
                tokio::time::sleep(stall).await;
            }
            let mut script = self.script.lock().expect("test mutex");
            if script.len() > 1 { script.remove(0) } else { script[0].clone() }
        }
    }

    fn ok(text: &str) -> Result<Completion, LlmError> {
        Ok(Completion { text: text.to_string(), usage: Usage::default() })
    }

    fn request() -> CompletionRequest {
        CompletionRequest { system: None, prompt: "hi".into(), max_tokens: 8, temperature: 0.0 }
    }

    fn policy(max_retries: u32) -> RetryPolicy {
        RetryPolicy {
            timeout: Duration::from_millis(200),
            max_retries,
            backoff: Duration::from_millis(1),
        }
    }

    #[tokio::test]
    async fn retries_transient_errors_then_succeeds() {
        let model = Retrying::new(
            Scripted::new(vec![Err(LlmError::Provider("500".into())), ok("fine")]),
            policy(2),
        );
        let completion = model.complete(&request()).await.expect("second attempt succeeds");
        assert_eq!(completion.text, "fine");
        assert_eq!(model.attempts(), 2);
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let model =
            Retrying::new(Scripted::new(vec![Err(LlmError::RateLimited("slow".into()))]), policy(3));
        let error = model.complete(&request()).await.expect_err("always rate limited");
        assert!(matches!(error, LlmError::RateLimited(_)));
        assert_eq!(model.attempts(), 4);
    }

    #[tokio::test]
    async fn does_not_retry_permanent_errors() {
        let model =
            Retrying::new(Scripted::new(vec![Err(LlmError::Malformed("x".into())), ok("no")]), policy(3));
        assert!(matches!(model.complete(&request()).await, Err(LlmError::Malformed(_))));
        assert_eq!(model.attempts(), 1);
    }

    #[tokio::test]
    async fn times_out_each_attempt() {
        let mut slow = Scripted::new(vec![ok("late")]);
        slow.stall = Some(Duration::from_secs(30));
        let model = Retrying::new(slow, policy(1));
        let started = std::time::Instant::now();
        assert_eq!(model.complete(&request()).await, Err(LlmError::Timeout(200)));
        assert_eq!(model.attempts(), 2);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            timeout: Duration::ZERO,
            max_retries: 100,
            backoff: Duration::from_millis(250),
        };
        assert_eq!(policy.delay(0), Duration::from_millis(250));
        assert_eq!(policy.delay(1), Duration::from_millis(500));
        assert_eq!(policy.delay(3), Duration::from_millis(2000));
        assert_eq!(policy.delay(40), MAX_BACKOFF);
    }

    #[test]
    fn provider_names() {
        assert_eq!(ProviderKind::parse("embedded"), Ok(None));
        assert_eq!(ProviderKind::parse(" OpenAI "), Ok(Some(ProviderKind::OpenAi)));
        assert!(matches!(ProviderKind::parse("gpt"), Err(LlmError::Config(_))));
    }

    #[test]
    fn usage_falls_back_to_estimates() {
        let reported = rig_core::completion::Usage::new().input_tokens(7).output_tokens(3);
        assert_eq!(
            usage_of(&request(), "ok", &reported),
            Usage { prompt_tokens: 7, completion_tokens: 3, estimated: false }
        );
        let missing = rig_core::completion::Usage::new();
        assert!(usage_of(&request(), "some answer", &missing).estimated);
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert!(is_loopback("http://localhost:11434"));
        assert!(!is_loopback("https://api.openai.com/v1"));
    }
}
