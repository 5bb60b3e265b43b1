//! Embeddings behind one trait. The embedded default is [`HashEmbedder`]; others plug in
//! through [`from_settings`]: a local sentence-transformer ([`MiniLmEmbedder`], its files from
//! a directory or the Hugging Face hub, [`hub`]) and remote models through rig-core
//! ([`RemoteEmbedder`]: OpenAI-compatible servers, Ollama).

pub mod bert;
pub mod cache;
mod hash;
pub mod hub;
pub mod minilm;
pub mod remote;

use std::sync::Arc;
use std::time::Instant;

pub use cache::CachedEmbedder;
pub use hash::HashEmbedder;
pub use minilm::MiniLmEmbedder;
pub use remote::RemoteEmbedder;

use crate::config::{EmbedProvider, EmbedSettings};
use crate::error::{Error, Result};
use crate::net::Remote;

pub type Embedding = Vec<f32>;

/// What an embedding space knows beyond the words a text contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderKind {
    /// Hashed surface features (words, character trigrams): it matches what two texts spell
    /// alike and nothing else, which BM25 over the same words (with IDF, length normalisation
    /// and no hash collisions) ranks better than its vectors do.
    Lexical,
    /// A trained model: it matches meaning that shares no word, which BM25 cannot.
    Semantic,
}

pub trait Embedder: Send + Sync {
    /// Stable identity of the embedding space ("hash-512", "minilm:all-MiniLM-L6-v2").
    /// A knowledge base records it; vectors from two identities are never mixed.
    fn id(&self) -> String;
    fn dim(&self) -> usize;
    fn kind(&self) -> EmbedderKind;
    /// One L2-normalised vector per input, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>>;

    fn embed_one(&self, text: &str) -> Result<Embedding> {
        self.embed(&[text])?.pop().ok_or_else(|| Error::Embed("embedder returned no vector".into()))
    }
}

/// The embedder `settings` describe; remote ones make their requests through `remote`. Model
/// embedders sit behind a [`CachedEmbedder`] (unless `embed.cache_entries` is 0); the hash
/// embedder is cheaper than a cache lookup.
pub fn from_settings(settings: &EmbedSettings, remote: &Remote) -> Result<Arc<dyn Embedder>> {
    let model: Arc<dyn Embedder> = match settings.provider {
        EmbedProvider::Hash => return Ok(Arc::new(HashEmbedder::new(settings.dim))),
        EmbedProvider::MiniLm => Arc::new(MiniLmEmbedder::from_settings(settings, remote)?),
        EmbedProvider::OpenAi | EmbedProvider::Ollama => Arc::new(RemoteEmbedder::from_settings(settings, remote)?),
    };
    Ok(match settings.cache_entries {
        0 => model,
        entries => Arc::new(CachedEmbedder::new(model, entries)),
    })
}

/// A query with its embedding, and the embeddings of its parts (the entity mentions and
/// relation phrase that seed alignment compares with the graph). Computed once per retrieval,
/// in one embedder call, and passed to everything that compares the query with the KB (scope
/// gate, seeds, dense search, fact linking), so a neural embedder runs one forward pass for
/// the query however many steps use it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedQuery {
    pub text: String,
    pub vector: Embedding,
    parts: Vec<(String, Embedding)>,
}

impl EmbeddedQuery {
    pub fn new(embedder: &dyn Embedder, text: &str) -> Result<EmbeddedQuery> {
        EmbeddedQuery::with_parts(embedder, text, Vec::new())
    }

    /// The query and `parts` of it, embedded in one call.
    pub fn with_parts(embedder: &dyn Embedder, text: &str, parts: Vec<String>) -> Result<EmbeddedQuery> {
        let texts: Vec<&str> = std::iter::once(text).chain(parts.iter().map(String::as_str)).collect();
        let mut vectors = embedder.embed(&texts)?.into_iter();
        let vector = vectors.next().ok_or_else(|| Error::Embed("the embedder returned no vector".into()))?;
        let parts: Vec<(String, Embedding)> = parts.into_iter().zip(vectors).collect();
        Ok(EmbeddedQuery { text: text.to_string(), vector, parts })
    }

    /// The embedding of `part`, when it was embedded with the query.
    pub fn part(&self, part: &str) -> Option<&Embedding> {
        self.parts.iter().find(|(p, _)| p == part).map(|(_, v)| v)
    }
}

/// Sentences per second that `embedder` sustains when fed `sentences` in groups of `batch`
/// (the way ingest feeds a document's chunks). One untimed warm-up call first, so one-off
/// costs (thread pools, first allocations) do not count. Errors from the embedder propagate:
/// a throughput for vectors that were never produced would be meaningless.
pub fn embedding_throughput(embedder: &dyn Embedder, sentences: &[&str], batch: usize) -> Result<f64> {
    let batch = batch.max(1);
    if sentences.is_empty() {
        return Ok(0.0);
    }
    embedder.embed(&sentences[..batch.min(sentences.len())])?;
    let start = Instant::now();
    for group in sentences.chunks(batch) {
        embedder.embed(group)?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(if secs > 0.0 { sentences.len() as f64 / secs } else { f64::INFINITY })
}

/// Cosine of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent partial sums let the compiler use SIMD lanes; one running sum is a
    // serial dependency chain it may not reorder. Every scan over stored vectors (exact
    // rescoring, staged vectors, alias checks) runs through here.
    const LANES: usize = 8;
    let (a_head, a_tail) = a.split_at(a.len() - a.len() % LANES);
    let (b_head, b_tail) = b.split_at(b.len().min(a_head.len()));
    let mut partial = [0f32; LANES];
    for (x, y) in a_head.chunks_exact(LANES).zip(b_head.chunks_exact(LANES)) {
        for lane in 0..LANES {
            partial[lane] += x[lane] * y[lane];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    partial.iter().sum::<f32>() + tail
}

pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Test double shared by the unit tests: the hash embedder, counting the calls and the texts
/// that reach it.
#[cfg(test)]
pub(crate) struct CountingEmbedder {
    pub inner: HashEmbedder,
    pub calls: std::sync::atomic::AtomicUsize,
    pub texts: std::sync::atomic::AtomicUsize,
}

#[cfg(test)]
impl CountingEmbedder {
    pub fn new(dim: usize) -> Arc<CountingEmbedder> {
        Arc::new(CountingEmbedder {
            inner: HashEmbedder::new(dim),
            calls: Default::default(),
            texts: Default::default(),
        })
    }
}

#[cfg(test)]
impl Embedder for CountingEmbedder {
    fn id(&self) -> String {
        self.inner.id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn kind(&self) -> EmbedderKind {
        self.inner.kind()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        use std::sync::atomic::Ordering;
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_counts_every_sentence() {
        let e = HashEmbedder::new(64);
        let sentences = ["alpha beta", "gamma delta", "epsilon"];
        let rate = embedding_throughput(&e, &sentences, 2).unwrap();
        assert!(rate > 0.0);
        assert_eq!(embedding_throughput(&e, &[], 2).unwrap(), 0.0);
    }

    #[test]
    fn cosine_matches_the_plain_sum_at_every_length() {
        for n in [0, 1, 7, 8, 9, 16, 23, 512] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 10.0).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((cosine(&a, &b) - plain).abs() < 1e-4, "length {n}");
        }
    }
}
