//! Network-backed [`LanguageModel`]s through rig-core. Their requests run through
//! [`Remote`] (pooled client, I/O runtime), under the [`RetryPolicy`] that [`Retrying`]
//! applies.
//!
//! * `openai`: any server that speaks OpenAI's *Chat Completions* API (`POST
//!   {base_url}/chat/completions`): OpenAI itself, vLLM, llama.cpp / llama-cpp-python, LM
//!   Studio. rig's default OpenAI route is the newer Responses API, which the local servers
//!   do not implement, so the chat wire is chosen explicitly.
//! * `ollama`: the daemon's OpenAI-compatible endpoint (`{base_url}/v1/chat/completions`).
//! * `anthropic`: the Messages API.
//!
//! [`from_settings`] builds the configured one wrapped in [`Retrying`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use rig_core::DynModel;
use rig_core::operation::Completion as CompletionOp;
use rig_core::providers::anthropic::AnthropicConfig;
use rig_core::providers::openai::wire::BodyRewrite;

use super::{Completion, CompletionRequest, LanguageModel, Usage};
use crate::config::{LlmProvider, LlmSettings};
use crate::net::rig::{Endpoint, map_provider_error, ollama_config, openai_config, truncate};
use crate::net::{Remote, RemoteError, RetryPolicy};

/// Builds the model `settings` describe, its requests made through `remote` and wrapped in
/// [`Retrying`]; `Ok(None)` for the `embedded` provider, which needs no network model.
pub fn from_settings(settings: &LlmSettings, remote: &Remote) -> Result<Option<Arc<dyn LanguageModel>>, RemoteError> {
    if settings.provider == LlmProvider::Embedded {
        return Ok(None);
    }
    let model = RigModel::from_settings(settings, remote)?;
    let retrying = Retrying::new(model, RetryPolicy::from_settings(&settings.connection));
    Ok(Some(Arc::new(retrying)))
}

/// One provider model reached through rig-core. Makes exactly one HTTP request per
/// [`LanguageModel::complete`]; timeouts and retries are [`Retrying`]'s job.
pub struct RigModel {
    kind: LlmProvider,
    model_name: String,
    model: DynModel<CompletionOp>,
    /// Runs the request (on its I/O runtime, through its pooled client).
    remote: Remote,
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
    pub fn from_settings(settings: &LlmSettings, remote: &Remote) -> Result<RigModel, RemoteError> {
        let kind = settings.provider;
        let Endpoint { model_name, base_url, api_key, http } =
            Endpoint::new(remote, "llm", kind.name(), &settings.connection)?;
        let model = match kind {
            LlmProvider::Embedded => {
                return Err(RemoteError::Config("the embedded provider has no network model".to_string()));
            }
            LlmProvider::OpenAi => {
                let mut config = openai_config(&base_url, api_key);
                // rig sends message content as an array of parts; llama-cpp-python's server
                // (and other strict compatible servers) accept only a plain string, which
                // OpenAI also takes. This rewrite sends text-only content as one string.
                config.dialect.quirks.rewrite = BodyRewrite::Perplexity;
                config.connect(http).chat(model_name.as_str()).erase()
            }
            LlmProvider::Ollama => ollama_config(&base_url, api_key).connect(http).completion(model_name.as_str()).erase(),
            LlmProvider::Anthropic => {
                let Some(key) = api_key else {
                    return Err(RemoteError::Config(format!(
                        "provider anthropic needs an API key in the environment variable {:?} (llm.api_key_env)",
                        settings.connection.api_key_env
                    )));
                };
                let mut config = AnthropicConfig::new(key);
                if !base_url.is_empty() {
                    config = config.with_base_url(base_url.as_str());
                }
                config.connect(http).completion(model_name.as_str()).erase()
            }
        };
        Ok(RigModel { kind, model_name, model, remote: remote.clone() })
    }

    pub fn kind(&self) -> LlmProvider {
        self.kind
    }
}

#[async_trait]
impl LanguageModel for RigModel {
    fn name(&self) -> String {
        format!("{}:{}", self.kind.name(), self.model_name)
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, RemoteError> {
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

        let response =
            self.remote.run(self.model.call(rig_request)).await?.map_err(|error| map_provider_error(error, "llm"))?;
        if let Some(error) = response.error.as_deref() {
            return Err(RemoteError::Provider(format!("the model reported a failure: {error}")));
        }
        if response.choice.is_empty() {
            // A reply that decoded but carried no assistant content at all is a broken or
            // foreign reply shape; callers would otherwise parse "" as the model's answer.
            return Err(RemoteError::Malformed(format!(
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

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, RemoteError> {
        let name = self.inner.name();
        self.policy
            .run(&name, || {
                self.attempts.fetch_add(1, Ordering::Relaxed);
                self.inner.complete(request)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Answers from a script, one entry per call; past its end, the last entry again.
    struct Scripted {
        script: Mutex<Vec<Result<Completion, RemoteError>>>,
        stall: Option<Duration>,
    }

    impl Scripted {
        fn new(script: Vec<Result<Completion, RemoteError>>) -> Scripted {
            Scripted { script: Mutex::new(script), stall: None }
        }
    }

    #[async_trait]
    impl LanguageModel for Scripted {
        fn name(&self) -> String {
            "scripted".to_string()
        }

        async fn complete(&self, _request: &CompletionRequest) -> Result<Completion, RemoteError> {
            if let Some(stall) = self.stall {
                tokio::time::sleep(stall).await;
            }
            let mut script = self.script.lock().expect("test mutex");
            if script.len() > 1 { script.remove(0) } else { script[0].clone() }
        }
    }

    fn ok(text: &str) -> Result<Completion, RemoteError> {
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
            Scripted::new(vec![Err(RemoteError::Provider("500".into())), ok("fine")]),
            policy(2),
        );
        let completion = model.complete(&request()).await.expect("second attempt succeeds");
        assert_eq!(completion.text, "fine");
        assert_eq!(model.attempts(), 2);
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let model =
            Retrying::new(Scripted::new(vec![Err(RemoteError::RateLimited("slow".into()))]), policy(3));
        let error = model.complete(&request()).await.expect_err("always rate limited");
        assert!(matches!(error, RemoteError::RateLimited(_)));
        assert_eq!(model.attempts(), 4);
    }

    #[tokio::test]
    async fn does_not_retry_permanent_errors() {
        let model =
            Retrying::new(Scripted::new(vec![Err(RemoteError::Malformed("x".into())), ok("no")]), policy(3));
        assert!(matches!(model.complete(&request()).await, Err(RemoteError::Malformed(_))));
        assert_eq!(model.attempts(), 1);
    }

    #[tokio::test]
    async fn times_out_each_attempt() {
        let mut slow = Scripted::new(vec![ok("late")]);
        slow.stall = Some(Duration::from_secs(30));
        let model = Retrying::new(slow, policy(1));
        let started = std::time::Instant::now();
        assert_eq!(model.complete(&request()).await, Err(RemoteError::Timeout(200)));
        assert_eq!(model.attempts(), 2);
        assert!(started.elapsed() < Duration::from_secs(5));
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
}
