//! Embeddings behind one trait. The embedded default is [`HashEmbedder`]; others (a local
//! sentence-transformer, remote providers) plug in through [`from_settings`].

mod hash;

use std::sync::Arc;

pub use hash::HashEmbedder;

use crate::config::EmbedSettings;
use crate::error::{Error, Result};

pub type Embedding = Vec<f32>;

pub trait Embedder: Send + Sync {
    /// Stable identity of the embedding space ("hash-512", "minilm:all-MiniLM-L6-v2").
    /// A knowledge base records it; vectors from two identities are never mixed.
    fn id(&self) -> String;
    fn dim(&self) -> usize;
    /// One L2-normalised vector per input, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>>;

    fn embed_one(&self, text: &str) -> Result<Embedding> {
        self.embed(&[text])?
            .pop()
            .ok_or_else(|| Error::Embed("embedder returned no vector".into()))
    }
}

pub fn from_settings(settings: &EmbedSettings) -> Result<Arc<dyn Embedder>> {
    match settings.provider.as_str() {
        "hash" => Ok(Arc::new(HashEmbedder::new(settings.dim))),
        other => Err(Error::Config(format!(
            "unknown embed.provider `{other}` (known: hash)"
        ))),
    }
}

/// Cosine of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
