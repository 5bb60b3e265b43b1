//! Embeddings from a server, through rig-core's embedding models.
//!
//! * `openai`: any server with OpenAI's `POST {base_url}/embeddings` (OpenAI, vLLM,
//!   llama.cpp's server, LM Studio).
//! * `ollama`: the daemon's `POST {base_url}/api/embed`.
//!
//! Texts go out `embed.batch_size` per request, run by [`Remote`] (its pooled client and I/O
//! runtime, since [`Embedder::embed`] is synchronous), each request under the same
//! [`RetryPolicy`] the language models use (per-attempt timeout, transient failures retried
//! with backoff). Every reply is checked: one vector per text, each `embed.dim` wide and
//! finite; the vectors are then L2-normalised, since the KB's indexes score by inner product.

use rig_core::DynModel;
use rig_core::operation::Embedding as EmbeddingOp;

use super::{Embedder, EmbedderKind, Embedding, l2_normalize};
use crate::config::{EmbedProvider, EmbedSettings};
use crate::error::{Error, Result};
use crate::net::rig::{Endpoint, map_provider_error, ollama_config, openai_config};
use crate::net::{Remote, RemoteError, RetryPolicy};

pub struct RemoteEmbedder {
    kind: EmbedProvider,
    model_name: String,
    dim: usize,
    batch_size: usize,
    policy: RetryPolicy,
    model: DynModel<EmbeddingOp>,
    /// Runs the requests (on its I/O runtime, through its pooled client).
    remote: Remote,
}

impl RemoteEmbedder {
    /// The `openai` or `ollama` embedder `settings` describe, its requests made through
    /// `remote`. Makes no request: a wrong URL, key, model or dimension shows on the first
    /// [`Embedder::embed`].
    pub fn from_settings(settings: &EmbedSettings, remote: &Remote) -> Result<RemoteEmbedder> {
        let kind = settings.provider;
        let Endpoint { model_name, base_url, api_key, http } =
            Endpoint::new(remote, "embed", kind.name(), &settings.connection)?;
        // No width is asked of the server (`None`): a local server given OpenAI's
        // `dimensions` field may refuse it, and embed.dim is checked against every reply.
        let model = match kind {
            EmbedProvider::OpenAi => {
                openai_config(&base_url, api_key).connect(http).embedding(model_name.as_str(), None).erase()
            }
            EmbedProvider::Ollama => {
                ollama_config(&base_url, api_key).connect(http).embedding(model_name.as_str(), None).erase()
            }
            EmbedProvider::Hash | EmbedProvider::MiniLm => {
                return Err(Error::Config(format!(
                    "embed.provider `{}` has no remote embedding model (remote: openai, ollama)",
                    kind.name()
                )));
            }
        };
        Ok(RemoteEmbedder {
            kind,
            model_name,
            dim: settings.dim,
            batch_size: settings.batch_size.max(1),
            policy: RetryPolicy::from_settings(&settings.connection),
            model,
            remote: remote.clone(),
        })
    }

    /// One request for `batch`, retried under the policy; the vectors as the server sent them.
    /// Owns everything it needs, so the I/O runtime can run it.
    fn request(&self, batch: &[&str]) -> impl Future<Output = Result<Vec<Vec<f64>>, RemoteError>> + Send + 'static {
        let (id, policy, model) = (self.id(), self.policy, self.model.clone());
        let texts: Vec<String> = batch.iter().map(|text| text.to_string()).collect();
        async move {
            let response = policy
                .run(&id, || {
                    let call = model.call(texts.clone());
                    async move { call.await.map_err(|error| map_provider_error(error, "embed")) }
                })
                .await?;
            Ok(response.embeddings.into_iter().map(|embedding| embedding.vec).collect())
        }
    }

    /// Checks one batch's reply and turns it into unit vectors.
    fn accept(&self, texts: usize, vectors: Vec<Vec<f64>>) -> Result<Vec<Embedding>> {
        if vectors.len() != texts {
            return Err(Error::Embed(format!(
                "{}: the server returned {} vectors for {texts} texts",
                self.id(),
                vectors.len()
            )));
        }
        vectors
            .into_iter()
            .map(|vector| {
                if vector.len() != self.dim {
                    return Err(Error::Config(format!(
                        "{} returns {}-dimensional vectors but embed.dim is {}; set embed.dim = {} \
                         (and run `a2rag reindex` on a KB built with the old setting)",
                        self.id(),
                        vector.len(),
                        self.dim,
                        vector.len()
                    )));
                }
                let mut vector: Embedding = vector.into_iter().map(|x| x as f32).collect();
                if vector.iter().any(|x| !x.is_finite()) {
                    return Err(Error::Embed(format!(
                        "{}: the server returned a vector with a non-finite component",
                        self.id()
                    )));
                }
                l2_normalize(&mut vector);
                Ok(vector)
            })
            .collect()
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> String {
        format!("{}:{}", self.kind.name(), self.model_name)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn kind(&self) -> EmbedderKind {
        EmbedderKind::Semantic
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let vectors = self
                .remote
                .block_on(self.request(batch))
                .and_then(|reply| reply)
                .map_err(|error| Error::Embed(format!("{}: {error}", self.id())))?;
            out.extend(self.accept(batch.len(), vectors)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: EmbedProvider, model: &str) -> EmbedSettings {
        let mut s = crate::config::Settings::defaults().embed;
        s.provider = provider;
        s.connection.model = model.into();
        s.dim = 3;
        s
    }

    fn embedder(provider: EmbedProvider, model: &str) -> Result<RemoteEmbedder> {
        RemoteEmbedder::from_settings(&settings(provider, model), &Remote::new())
    }

    #[test]
    fn id_names_provider_and_model() {
        let e = embedder(EmbedProvider::OpenAi, "text-embedding-3-small").unwrap();
        assert_eq!(e.id(), "openai:text-embedding-3-small");
        assert_eq!(e.dim(), 3);
        let e = embedder(EmbedProvider::Ollama, "nomic-embed-text").unwrap();
        assert_eq!(e.id(), "ollama:nomic-embed-text");
    }

    #[test]
    fn model_name_is_required() {
        let err = embedder(EmbedProvider::OpenAi, " ").err().expect("refused");
        assert!(err.to_string().contains("embed.model"), "{err}");
    }

    #[test]
    fn replies_are_checked_and_normalised() {
        let e = embedder(EmbedProvider::OpenAi, "m").unwrap();
        let out = e.accept(1, vec![vec![3.0, 0.0, 4.0]]).unwrap();
        assert_eq!(out, vec![vec![0.6, 0.0, 0.8]]);
        assert!(matches!(e.accept(2, vec![vec![1.0, 0.0, 0.0]]), Err(Error::Embed(_))));
        let err = e.accept(1, vec![vec![1.0, 0.0]]).unwrap_err().to_string();
        assert!(err.contains("embed.dim = 2"), "{err}");
        assert!(matches!(e.accept(1, vec![vec![f64::NAN, 0.0, 0.0]]), Err(Error::Embed(_))));
    }
}
