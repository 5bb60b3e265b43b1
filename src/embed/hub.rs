//! Sentence-transformer files from the Hugging Face hub (the `hf-hub` crate, on reqwest with
//! rustls) into a cache directory in the hub's own layout
//! (`models--ORG--NAME/{blobs,refs,snapshots}`), so a second call finds them with no network.
//!
//! The endpoint is `HF_ENDPOINT` when set (a mirror), otherwise <https://huggingface.co>;
//! `HF_TOKEN` is sent when set (gated or private repositories).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hf_hub::api::tokio::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo};

use crate::error::{Error, Result};
use crate::net::Remote;

/// What [`MiniLmEmbedder`](super::MiniLmEmbedder) needs from the repository.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// Fetched when the repository has them (the sequence cap lives here).
pub const OPTIONAL_FILES: [&str; 1] = ["sentence_bert_config.json"];
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// How long the first request may take before the hub counts as unreachable; the download
/// itself has no limit (a model is tens of megabytes).
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// A model directory on disk, fetched from the hub now or earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The snapshot directory holding the files (links into the cache's blobs).
    pub dir: PathBuf,
    /// The files present, required ones first.
    pub files: Vec<String>,
    /// True when everything was already in the cache and no request was made.
    pub from_cache: bool,
}

/// The hub endpoint in effect: `HF_ENDPOINT`, or [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .map(|url| url.trim().trim_end_matches('/').to_string())
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
}

/// The model's name without its organisation ("all-MiniLM-L6-v2"), which is also what the
/// embedder's id uses, so a copy from the hub and one from `scripts/fetch-minilm.sh` are the
/// same embedding space.
pub fn model_name(model_id: &str) -> &str {
    model_id.rsplit('/').next().unwrap_or(model_id)
}

/// `model_id`'s files from `cache` when they are all there; never touches the network.
pub fn cached(model_id: &str, cache: &Path) -> Option<Fetched> {
    let repo = Cache::new(cache.to_path_buf()).repo(Repo::model(model_id.to_string()));
    let config = repo.get(REQUIRED_FILES[0])?;
    let dir = config.parent()?.to_path_buf();
    let mut files = Vec::new();
    for name in REQUIRED_FILES {
        if repo.get(name)?.parent() != Some(dir.as_path()) {
            return None;
        }
        files.push(name.to_string());
    }
    files.extend(OPTIONAL_FILES.iter().filter(|name| dir.join(name).is_file()).map(|name| name.to_string()));
    Some(Fetched { dir, files, from_cache: true })
}

/// `model_id` from the cache, or else downloaded from [`endpoint`] into `cache`. `progress`
/// draws download bars on stderr (for the CLI).
pub fn fetch(remote: &Remote, model_id: &str, cache: &Path, progress: bool) -> Result<Fetched> {
    fetch_from(remote, model_id, cache, &endpoint(), progress)
}

/// [`fetch`] from the hub (or mirror) at `endpoint`.
/// The download runs on `remote`'s I/O runtime.
pub fn fetch_from(remote: &Remote, model_id: &str, cache: &Path, endpoint: &str, progress: bool) -> Result<Fetched> {
    let model_id = model_id.trim();
    if model_id.is_empty() {
        return Err(Error::Config("no hub model id given (embed.model_id)".into()));
    }
    if let Some(found) = cached(model_id, cache) {
        return Ok(found);
    }
    let endpoint = endpoint.trim().trim_end_matches('/');
    let download = download(model_id.to_string(), cache.to_path_buf(), endpoint.to_string(), progress);
    remote.block_on(download).map_err(|error| error.to_string()).and_then(|reply| reply).map_err(|error| {
        Error::Embed(format!(
            "downloading {model_id} from the Hugging Face hub at {endpoint} into {} failed: {error}",
            cache.display()
        ))
    })
}

async fn download(model_id: String, cache: PathBuf, endpoint: String, progress: bool) -> Result<Fetched, String> {
    let token = std::env::var("HF_TOKEN").ok().filter(|token| !token.trim().is_empty());
    let api = ApiBuilder::from_cache(Cache::new(cache))
        .with_endpoint(endpoint)
        .with_token(token)
        .with_progress(progress)
        .build()
        .map_err(|e| e.to_string())?;
    let repo = api.model(model_id);
    // hf-hub's client has no timeouts; one bounded request first tells an unreachable hub
    // from a slow download.
    match tokio::time::timeout(PROBE_TIMEOUT, api.metadata(&repo.url(REQUIRED_FILES[0]))).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(describe(&error)),
        Err(_) => return Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
    }
    let mut dir = None;
    let mut files = Vec::new();
    for name in REQUIRED_FILES {
        let path = repo.get(name).await.map_err(|error| format!("{name}: {}", describe(&error)))?;
        let parent = path.parent().map(Path::to_path_buf);
        if dir.is_none() {
            dir = parent;
        } else if dir != parent {
            return Err("the repository changed during the download; run it again".into());
        }
        files.push(name.to_string());
    }
    let dir = dir.ok_or("the hub returned no file paths")?;
    for name in OPTIONAL_FILES {
        match repo.get(name).await {
            Ok(path) if path.parent() == Some(dir.as_path()) => files.push(name.to_string()),
            Ok(_) => {}
            Err(error) if is_not_found(&error) => {}
            Err(error) => return Err(format!("{name}: {}", describe(&error))),
        }
    }
    Ok(Fetched { dir, files, from_cache: false })
}

fn is_not_found(error: &ApiError) -> bool {
    matches!(error, ApiError::RequestError(e) if e.status().is_some_and(|s| s.as_u16() == 404))
}

/// The error with its causes (reqwest hides the useful part, e.g. "dns error", in a source).
fn describe(error: &ApiError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = std::error::Error::source(cause);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_drops_the_organisation() {
        assert_eq!(model_name("sentence-transformers/all-MiniLM-L6-v2"), "all-MiniLM-L6-v2");
        assert_eq!(model_name("plain"), "plain");
    }

    #[test]
    fn empty_cache_has_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cached("org/model", dir.path()), None);
    }
}
