//! [`CachedEmbedder`]: a model embedder that embeds each distinct short text once.
//!
//! Ingest embeds every mention and relation label of every document, and the same names
//! ("United States", "born in") recur across thousands of documents; queries repeat too. The
//! cache keeps the vectors of short texts only: passages almost never repeat, and each would
//! push out hundreds of names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Embedder, EmbedderKind, Embedding};
use crate::error::{Error, Result};

/// Texts up to this many bytes are cached: names, labels and questions, not passages.
pub const MAX_CACHED_BYTES: usize = 128;

pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    capacity: usize,
    generations: Mutex<Generations>,
}

/// Two generations approximate least-recently-used eviction in O(1): inserts go to `recent`;
/// when it is full it becomes `older` (the previous `older` is dropped), and a hit in `older`
/// moves the entry back to `recent`. Whatever was used since the last turnover survives it.
#[derive(Default)]
struct Generations {
    recent: HashMap<String, Embedding>,
    older: HashMap<String, Embedding>,
}

impl Generations {
    fn get(&mut self, text: &str, half: usize) -> Option<Embedding> {
        if let Some(v) = self.recent.get(text) {
            return Some(v.clone());
        }
        let (text, v) = self.older.remove_entry(text)?;
        self.insert(text, v.clone(), half);
        Some(v)
    }

    fn insert(&mut self, text: String, v: Embedding, half: usize) {
        if self.recent.len() >= half {
            self.older = std::mem::take(&mut self.recent);
        }
        self.recent.insert(text, v);
    }
}

impl CachedEmbedder {
    /// `inner` behind a cache of at most `capacity` vectors.
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> CachedEmbedder {
        CachedEmbedder { inner, capacity, generations: Mutex::new(Generations::default()) }
    }

    fn half(&self) -> usize {
        (self.capacity / 2).max(1)
    }
}

impl Embedder for CachedEmbedder {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn kind(&self) -> EmbedderKind {
        self.inner.kind()
    }

    /// Cached texts are answered from memory; the others, each distinct text once, go to the
    /// model in one call, in their input order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let half = self.half();
        let mut out: Vec<Option<Embedding>> = vec![None; texts.len()];
        let mut missing: Vec<&str> = Vec::new();
        // Where each input's vector comes from when it is not cached: its slot in `missing`.
        let mut from_missing: Vec<Option<usize>> = vec![None; texts.len()];
        let mut first_seen: HashMap<&str, usize> = HashMap::new();
        {
            let mut cache = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
            for (i, &text) in texts.iter().enumerate() {
                let cacheable = text.len() <= MAX_CACHED_BYTES;
                if cacheable && let Some(v) = cache.get(text, half) {
                    out[i] = Some(v);
                    continue;
                }
                let slot = if cacheable {
                    *first_seen.entry(text).or_insert_with(|| {
                        missing.push(text);
                        missing.len() - 1
                    })
                } else {
                    missing.push(text);
                    missing.len() - 1
                };
                from_missing[i] = Some(slot);
            }
        }
        let fresh = if missing.is_empty() { Vec::new() } else { self.inner.embed(&missing)? };
        if fresh.len() != missing.len() {
            return Err(Error::Embed(format!(
                "the embedder returned {} vectors for {} texts",
                fresh.len(),
                missing.len()
            )));
        }
        {
            let mut cache = self.generations.lock().unwrap_or_else(PoisonError::into_inner);
            for (&text, v) in missing.iter().zip(&fresh) {
                if text.len() <= MAX_CACHED_BYTES {
                    cache.insert(text.to_string(), v.clone(), half);
                }
            }
        }
        out.into_iter()
            .zip(from_missing)
            .map(|(cached, slot)| match (cached, slot) {
                (Some(v), _) => Ok(v),
                (None, Some(slot)) => Ok(fresh[slot].clone()),
                (None, None) => Err(Error::Embed("a text got no vector".into())),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::CountingEmbedder;
    use std::sync::atomic::Ordering;

    fn counting() -> Arc<CountingEmbedder> {
        CountingEmbedder::new(32)
    }

    #[test]
    fn repeats_reach_the_model_once_and_vectors_are_unchanged() {
        let model = counting();
        let cached = CachedEmbedder::new(model.clone(), 100);
        let long = "a passage ".repeat(20);
        let texts = ["Paris", "born in", "Paris", long.as_str(), long.as_str()];
        let got = cached.embed(&texts).unwrap();
        // Paris once, born in once, the long text (never cached, never merged) twice.
        assert_eq!(model.texts.load(Ordering::SeqCst), 4);
        assert_eq!(got, model.inner.embed(&texts).unwrap());
        let again = cached.embed(&["born in", "Paris"]).unwrap();
        assert_eq!(model.texts.load(Ordering::SeqCst), 4);
        assert_eq!(again, model.inner.embed(&["born in", "Paris"]).unwrap());
        assert_eq!(cached.id(), model.id());
    }

    #[test]
    fn eviction_keeps_recently_used_entries_and_bounds_the_size() {
        let model = counting();
        let cached = CachedEmbedder::new(model.clone(), 4);
        cached.embed(&["a", "b"]).unwrap();
        cached.embed(&["c", "d"]).unwrap(); // recent was full: a, b turn older
        cached.embed(&["a"]).unwrap(); // a moves back to recent; that turnover drops b
        cached.embed(&["e", "f"]).unwrap(); // another turnover: a is older, not gone
        let before = model.texts.load(Ordering::SeqCst);
        cached.embed(&["a"]).unwrap();
        assert_eq!(model.texts.load(Ordering::SeqCst), before);
        cached.embed(&["b"]).unwrap();
        assert_eq!(model.texts.load(Ordering::SeqCst), before + 1);
        let g = cached.generations.lock().unwrap();
        assert!(g.recent.len() + g.older.len() <= 4);
    }
}
