//! Okapi BM25 over chunks, kept incrementally (documents come and go).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Bm25Settings;
use crate::text;

#[derive(Default)]
pub struct Bm25 {
    postings: HashMap<Arc<str>, HashMap<u64, u32>>,
    lengths: HashMap<u64, u32>,
    /// The distinct terms of each key, sharing the postings' strings: removing a chunk
    /// touches its own postings only, not the whole vocabulary (removing a large document
    /// would otherwise cost its chunks times the vocabulary).
    terms: HashMap<u64, Vec<Arc<str>>>,
    total_len: u64,
    k1: f32,
    b: f32,
}

impl Bm25 {
    pub fn new(settings: &Bm25Settings) -> Self {
        Bm25 { k1: settings.k1, b: settings.b, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    pub fn vocabulary(&self) -> usize {
        self.postings.len()
    }

    /// Whether any indexed chunk contains `term` (already lowercased).
    pub fn knows(&self, term: &str) -> bool {
        self.postings.contains_key(term)
    }

    pub fn insert(&mut self, key: u64, content: &str) {
        self.remove(key);
        let mut tf: HashMap<String, u32> = HashMap::new();
        let mut len = 0u32;
        for term in text::content_terms(content) {
            *tf.entry(term).or_default() += 1;
            len += 1;
        }
        let mut terms = Vec::with_capacity(tf.len());
        for (term, n) in tf {
            let term = match self.postings.get_key_value(term.as_str()) {
                Some((shared, _)) => shared.clone(),
                None => Arc::from(term),
            };
            self.postings.entry(term.clone()).or_default().insert(key, n);
            terms.push(term);
        }
        self.terms.insert(key, terms);
        self.lengths.insert(key, len);
        self.total_len += len as u64;
    }

    pub fn remove(&mut self, key: u64) {
        let Some(len) = self.lengths.remove(&key) else {
            return;
        };
        self.total_len -= len as u64;
        for term in self.terms.remove(&key).unwrap_or_default() {
            if let Some(docs) = self.postings.get_mut(&term) {
                docs.remove(&key);
                if docs.is_empty() {
                    self.postings.remove(&term);
                }
            }
        }
    }

    /// How many indexed chunks contain `term` (already lowercased).
    pub fn frequency(&self, term: &str) -> usize {
        self.postings.get(term).map_or(0, HashMap::len)
    }

    /// Inverse document frequency of `term` (already lowercased), as the ranking weighs it:
    /// high for a term few chunks contain, highest for one none does.
    pub fn idf(&self, term: &str) -> f32 {
        self.idf_of(self.frequency(term))
    }

    /// Inverse document frequency of a term `df` chunks contain.
    fn idf_of(&self, df: usize) -> f32 {
        let (n, df) = (self.lengths.len() as f32, df as f32);
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    }

    /// Top `k` keys by BM25 score for `query`, best first.
    pub fn search(&self, query: &str, k: usize) -> Vec<(u64, f32)> {
        if self.is_empty() {
            return Vec::new();
        }
        let n = self.lengths.len() as f32;
        let avg = self.total_len as f32 / n;
        let mut scores: HashMap<u64, f32> = HashMap::new();
        let mut terms = text::content_terms(query);
        terms.sort();
        terms.dedup();
        for term in terms {
            let Some(docs) = self.postings.get(term.as_str()) else {
                continue;
            };
            let idf = self.idf_of(docs.len());
            for (key, tf) in docs {
                let tf = *tf as f32;
                let dl = self.lengths[key] as f32;
                let s = idf * tf * (self.k1 + 1.0) / (tf + self.k1 * (1.0 - self.b + self.b * dl / avg));
                *scores.entry(*key).or_default() += s;
            }
        }
        // A common query word scores a large share of all chunks: select the top `k` before
        // sorting.
        crate::rank::top_k(scores.into_iter().collect(), k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn ranks_by_rare_terms_and_forgets_removed_docs() {
        let mut bm = Bm25::new(&Settings::defaults().bm25);
        bm.insert(1, "the cat sat on the mat");
        bm.insert(2, "the dog sat on the log");
        bm.insert(3, "a zebra grazes");
        let hits = bm.search("zebra mat", 3);
        assert_eq!(hits.len(), 2);
        bm.remove(3);
        assert_eq!(bm.search("zebra", 3), vec![]);
        assert_eq!(bm.search("cat", 3)[0].0, 1);
        assert_eq!(bm.len(), 2);
    }

    #[test]
    fn removal_drops_exactly_the_removed_keys_postings() {
        let mut bm = Bm25::new(&Settings::defaults().bm25);
        bm.insert(1, "alpine meadow glacier");
        bm.insert(2, "glacier fjord");
        bm.insert(3, "fjord harbour");
        let vocabulary = bm.vocabulary();
        bm.remove(2);
        // "glacier" and "fjord" live on in keys 1 and 3; nothing was only in key 2.
        assert_eq!(bm.vocabulary(), vocabulary);
        assert_eq!(keys(&bm.search("glacier", 5)), vec![1]);
        assert_eq!(keys(&bm.search("fjord", 5)), vec![3]);
        bm.remove(1);
        assert!(!bm.knows("alpine") && !bm.knows("glacier") && bm.knows("fjord"));
        // Re-inserting a key replaces its old postings instead of adding to them.
        bm.insert(3, "harbour lighthouse");
        assert!(!bm.knows("fjord"));
        assert_eq!(keys(&bm.search("harbour lighthouse", 5)), vec![3]);
        bm.remove(3);
        assert_eq!((bm.vocabulary(), bm.len()), (0, 0));
    }

    fn keys(hits: &[(u64, f32)]) -> Vec<u64> {
        hits.iter().map(|(k, _)| *k).collect()
    }
}
