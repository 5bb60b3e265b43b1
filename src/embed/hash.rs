//! Feature-hashed bag of words plus character trigrams.
//!
//! Why no corpus IDF: stored vectors must not change as documents arrive, so term weights are
//! corpus-independent (sublinear TF, stopwords dropped, trigrams down-weighted). Corpus IDF
//! enters retrieval through BM25 in the hybrid ranker instead.

use super::{Embedder, EmbedderKind, Embedding, l2_normalize};
use crate::error::Result;
use crate::text;

const TRIGRAM_WEIGHT: f32 = 0.35;

pub struct HashEmbedder {
    dim: usize,
}

impl HashEmbedder {
    pub fn new(dim: usize) -> Self {
        HashEmbedder { dim: dim.max(1) }
    }

    fn embed_text(&self, input: &str) -> Embedding {
        let mut v = vec![0f32; self.dim];
        // Sorted: f32 sums depend on their order, and a stored vector must come out the same
        // bits every time its text is embedded (in another process too).
        let mut counts: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
        for term in text::content_terms(input) {
            *counts.entry(term).or_default() += 1;
        }
        for (term, tf) in &counts {
            let weight = 1.0 + (*tf as f32).ln();
            self.add(&mut v, term.as_bytes(), weight);
            let padded: Vec<char> = format!("<{term}>").chars().collect();
            for w in padded.windows(3) {
                let gram: String = w.iter().collect();
                self.add(&mut v, gram.as_bytes(), weight * TRIGRAM_WEIGHT);
            }
        }
        l2_normalize(&mut v);
        v
    }

    fn add(&self, v: &mut [f32], feature: &[u8], weight: f32) {
        let h = fnv1a(feature);
        let slot = (h % self.dim as u64) as usize;
        // A hash-derived sign keeps collisions from only ever adding up (unbiased inner products).
        let sign = if (h >> 63) & 1 == 1 { -1.0 } else { 1.0 };
        v[slot] += sign * weight;
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Embedder for HashEmbedder {
    fn id(&self) -> String {
        format!("hash-{}", self.dim)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn kind(&self) -> EmbedderKind {
        EmbedderKind::Lexical
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        Ok(texts.iter().map(|t| self.embed_text(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn deterministic_normalised_and_similarity_ordered() {
        let e = HashEmbedder::new(256);
        let a = e.embed_one("The Eiffel Tower is in Paris").unwrap();
        let b = e.embed_one("The Eiffel Tower is in Paris").unwrap();
        assert_eq!(a, b);
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
        let near = e.embed_one("Eiffel Tower in Paris, France").unwrap();
        let far = e.embed_one("Photosynthesis in green plants").unwrap();
        assert!(cosine(&a, &near) > cosine(&a, &far) + 0.3);
    }

    #[test]
    fn a_text_embeds_to_the_same_bits_every_time() {
        let e = HashEmbedder::new(64);
        let text = "Ingrid Halden founded Halden Optics in 1928, which built the Aurora Observatory \
                    near Tromsø; its director Lena Varga discovered a comet with the Aurora Telescope.";
        let first = e.embed_one(text).unwrap();
        for _ in 0..50 {
            let again = e.embed_one(text).unwrap();
            let bits = |v: &Embedding| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&again), bits(&first));
        }
    }

    #[test]
    fn empty_text_gives_zero_vector_not_nan() {
        let e = HashEmbedder::new(64);
        let v = e.embed_one("the of and").unwrap();
        assert!(v.iter().all(|x| *x == 0.0));
    }
}
