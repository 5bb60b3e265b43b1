//! What every rig-core model needs, whether it completes text (`llm`) or embeds it
//! (`embed`): the endpoint a settings section names, the provider configurations, and the
//! sorting of rig's errors into [`RemoteError`]s.

use rig_core::ProviderError;
use rig_core::providers::ollama::OllamaConfig;
use rig_core::providers::openai::OpenAIConfig;
use rig_core::providers::openai::wire::Auth;
use rig_reqwest::ReqwestClient;

use super::{Remote, RemoteError};
use crate::config::ConnectionSettings;

/// How much of a provider's error body is kept in a [`RemoteError`] message.
const MAX_BODY_CHARS: usize = 300;

/// The model name, the server, the key and the pooled HTTP client a settings section
/// (`llm`, `embed`) describes.
pub struct Endpoint {
    pub model_name: String,
    /// Without trailing slashes; empty means the provider's default.
    pub base_url: String,
    pub api_key: Option<String>,
    pub http: ReqwestClient,
}

impl Endpoint {
    /// `section` and `provider` name the settings in error messages.
    pub fn new(
        remote: &Remote,
        section: &str,
        provider: &str,
        settings: &ConnectionSettings,
    ) -> Result<Endpoint, RemoteError> {
        let model_name = settings.model.trim().to_string();
        if model_name.is_empty() {
            return Err(RemoteError::Config(format!("{section}.model must name a model for provider {provider}")));
        }
        let base_url = settings.base_url.trim().trim_end_matches('/').to_string();
        let api_key = read_api_key(&settings.api_key_env);
        let http = remote.http(&base_url)?;
        Ok(Endpoint { model_name, base_url, api_key, http })
    }
}

/// An OpenAI-compatible server at `base_url` (empty: OpenAI itself), with `api_key` or none.
pub fn openai_config(base_url: &str, api_key: Option<String>) -> OpenAIConfig {
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
pub fn ollama_config(base_url: &str, api_key: Option<String>) -> OllamaConfig {
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

/// Sorts rig's errors into ours. Only `Provider`, `Timeout` and `RateLimited` are retried
/// ([`RemoteError::is_transient`]), so answers that will not change on a second try (bad
/// credentials, unknown model or URL, an unreadable reply) map to `Config` or `Malformed`.
/// `section` is the settings section to point at ("llm", "embed").
pub fn map_provider_error(error: ProviderError, section: &str) -> RemoteError {
    if let Some(response) = error.provider_response() {
        let body = truncate(&response.body);
        return match response.status.map(|status| status.as_u16()) {
            Some(429) => RemoteError::RateLimited(body),
            Some(status @ (401 | 403)) => RemoteError::Config(format!(
                "the provider rejected the credentials (HTTP {status}); check {section}.api_key_env: {body}"
            )),
            Some(404) => RemoteError::Config(format!(
                "the provider has no such endpoint or model (HTTP 404); check {section}.base_url and \
                 {section}.model: {body}"
            )),
            Some(status) => RemoteError::Provider(format!("HTTP {status}: {body}")),
            None => RemoteError::Provider(body),
        };
    }
    match error {
        ProviderError::Json(_) | ProviderError::Response(_) => {
            RemoteError::Malformed(format!("unreadable provider reply: {}", truncate(&error.to_string())))
        }
        ProviderError::Url(_) | ProviderError::Request(_) | ProviderError::UnsupportedOption(_) => {
            RemoteError::Config(truncate(&error.to_string()))
        }
        other => RemoteError::Provider(truncate(&other.to_string())),
    }
}

/// `text` cut to [`MAX_BODY_CHARS`] characters.
pub fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_BODY_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
