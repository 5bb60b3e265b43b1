//! Okapi BM25 over chunks, kept incrementally (documents come and go).
//!
//! The index is a saved base ([`Postings`], mapped) plus the chunks indexed since it was
//! written, on the heap. A base row removed or indexed again is dead: skipped by searches, and
//! taken out of every figure (chunk count, total length, each term's document frequency), so
//! scores equal those of one index over the same chunks. A save rewrites the base once the
//! changes since reach a quarter of it ([`Bm25::worth_rewriting`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::Table;
use super::postings::{Postings, Row, SavedPostings};
use crate::config::Bm25Settings;
use crate::error::Result;
use crate::rank::TopK;
use crate::text;

#[derive(Default)]
pub struct Bm25 {
    base: Option<Postings>,
    /// Base rows removed or indexed again since the base was written, by key.
    dead: HashSet<u64>,
    /// Per base term id, how many of its postings are dead.
    dead_df: Table<u32, u32>,
    dead_len: u64,
    postings: Table<Arc<str>, Table<u64, u32>>,
    lengths: Table<u64, u32>,
    /// The distinct terms of each key, sharing the postings' strings: removing a chunk
    /// touches its own postings only, not the whole vocabulary (removing a large document
    /// would otherwise cost its chunks times the vocabulary).
    terms: Table<u64, Vec<Arc<str>>>,
    total_len: u64,
    k1: f32,
    b: f32,
}

impl Bm25 {
    pub fn new(settings: &Bm25Settings) -> Self {
        Bm25 { k1: settings.k1, b: settings.b, ..Default::default() }
    }

    /// An index serving the saved base in `dir`; the caller then indexes again the chunks
    /// written after the base's change.
    pub fn open(settings: &Bm25Settings, dir: &Path, saved: &SavedPostings) -> Result<Self> {
        Ok(Bm25 { base: Some(Postings::open(dir, saved)?), ..Bm25::new(settings) })
    }

    /// The saved base, if any.
    pub fn saved(&self) -> Option<&SavedPostings> {
        self.base.as_ref().map(Postings::saved)
    }

    fn base_live(&self) -> usize {
        self.base.as_ref().map_or(0, |b| b.rows() - self.dead.len())
    }

    pub fn len(&self) -> usize {
        self.base_live() + self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn vocabulary(&self) -> usize {
        let Some(base) = &self.base else { return self.postings.len() };
        let base_terms = (0..base.terms()).filter(|id| self.base_df(*id) > 0).count();
        let only_new = self.postings.keys().filter(|t| base.term_id(t).is_none_or(|id| self.base_df(id) == 0)).count();
        base_terms + only_new
    }

    /// Whether the base row of `key` was removed or indexed again since the base was
    /// written. Most bases have no dead row, and a search asks for every row it visits, so
    /// an empty set is not hashed into.
    fn is_dead(&self, key: u64) -> bool {
        !self.dead.is_empty() && self.dead.contains(&key)
    }

    /// Live base postings of term `id`.
    fn base_df(&self, id: usize) -> usize {
        let Some(base) = &self.base else { return 0 };
        base.postings(id).len() - self.dead_df.get(&(id as u32)).copied().unwrap_or(0) as usize
    }

    /// Whether any indexed chunk contains `term` (already lowercased).
    pub fn knows(&self, term: &str) -> bool {
        self.frequency(term) > 0
    }

    pub fn insert(&mut self, key: u64, content: &str) {
        self.remove(key);
        let mut tf: Table<String, u32> = Table::default();
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
            self.kill_base_row(key);
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

    /// Marks the base row of `key`, if it is live, dead.
    fn kill_base_row(&mut self, key: u64) {
        let Some(base) = &self.base else { return };
        let Some(row) = base.row(key) else { return };
        if !self.dead.insert(key) {
            return;
        }
        self.dead_len += u64::from(base.length(row));
        for [id, _] in base.row_terms(row) {
            *self.dead_df.entry(*id).or_default() += 1;
        }
    }

    /// How many indexed chunks contain `term` (already lowercased).
    pub fn frequency(&self, term: &str) -> usize {
        self.frequency_with(self.base_term(term), term)
    }

    /// `frequency` for a term whose base id (`base_term`) is already looked up.
    fn frequency_with(&self, base_term: Option<(&Postings, usize)>, term: &str) -> usize {
        base_term.map_or(0, |(_, id)| self.base_df(id)) + self.postings.get(term).map_or(0, Table::len)
    }

    /// The base file with the id it gives `term`, where it holds the term.
    fn base_term(&self, term: &str) -> Option<(&Postings, usize)> {
        self.base.as_ref().and_then(|b| Some((b, b.term_id(term)?)))
    }

    /// Inverse document frequency of `term` (already lowercased), as the ranking weighs it:
    /// high for a term few chunks contain, highest for one none does.
    pub fn idf(&self, term: &str) -> f32 {
        self.idf_of(self.frequency(term))
    }

    /// Inverse document frequency of a term `df` chunks contain.
    fn idf_of(&self, df: usize) -> f32 {
        let (n, df) = (self.len() as f32, df as f32);
        ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
    }

    /// Top `k` keys by BM25 score for `query`, best first, ties on the key: the same hits,
    /// with the same scores, as scoring every chunk holding a query term. The chunks indexed
    /// since the base are few and scored in full; the base is searched by MaxScore, since a
    /// common query word's postings reach a third of a million chunks and scoring each cost
    /// most of a text search.
    pub fn search(&self, query: &str, k: usize) -> Vec<(u64, f32)> {
        if self.is_empty() || k == 0 {
            return Vec::new();
        }
        let n = self.len() as f32;
        let total = self.base.as_ref().map_or(0, Postings::total_len) - self.dead_len + self.total_len;
        let weights = Weights { k1: self.k1, b: self.b, avg: total as f32 / n };
        let mut words = text::content_terms(query);
        words.sort();
        words.dedup();
        let terms: Vec<QueryTerm<'_>> = words
            .iter()
            .map(|word| {
                let base_term = self.base_term(word);
                QueryTerm {
                    idf: self.idf_of(self.frequency_with(base_term, word)),
                    base: base_term.map_or(&[], |(base, id)| base.postings(id)),
                    added: self.postings.get(word.as_str()),
                }
            })
            .collect();
        let mut best = TopK::new(k);
        // Each key's terms are summed in the query's (sorted) term order on both paths, so
        // a score does not depend on which path found it.
        let mut added: Table<u64, f32> = Table::default();
        for term in &terms {
            for (key, tf) in term.added.into_iter().flatten() {
                *added.entry(*key).or_default() += weights.score(term.idf, *tf, self.lengths[key]);
            }
        }
        added.into_iter().for_each(|(key, score)| best.offer(key, score));
        if let Some(base) = &self.base {
            self.search_base(base, &terms, &weights, k, &mut best);
        }
        best.into_ranked()
    }

    /// Offers `best` every live base row that can enter it, by MaxScore over the terms' row-
    /// ordered postings: no term contributes more than `idf * (k1 + 1)`, so once the `k`th
    /// best score exceeds the bounds of the weakest terms together, a row holding only those
    /// cannot enter; their postings stop driving the walk and are only looked into (by
    /// galloping) for rows the other terms bring up. Rows come in key order, so a row that
    /// only ties the `k`th best loses the tie.
    fn search_base(&self, base: &Postings, terms: &[QueryTerm<'_>], weights: &Weights, k: usize, best: &mut TopK<u64>) {
        // The terms with base postings, weakest bound first.
        let mut order: Vec<usize> = (0..terms.len()).filter(|t| !terms[*t].base.is_empty()).collect();
        order.sort_by(|a, b| weights.bound(terms[*a].idf).total_cmp(&weights.bound(terms[*b].idf)));
        // `within[i]`: the bounds of `order[..=i]` together.
        let within: Vec<f32> = order
            .iter()
            .scan(0.0f32, |sum, t| {
                *sum += weights.bound(terms[*t].idf);
                Some(*sum)
            })
            .collect();
        let floor = self.score_floor(base, terms, &order, weights, k);
        let mut at = vec![0usize; terms.len()];
        let mut contributions = vec![0.0f32; terms.len()];
        // `order[..essential]` cannot bring a row in by themselves.
        let mut essential = 0;
        loop {
            let threshold = best.threshold().max(floor);
            while essential < order.len() && below(within[essential], threshold) {
                essential += 1;
            }
            let driving = &order[essential..];
            let Some(row) = driving.iter().filter_map(|t| terms[*t].base.get(at[*t]).map(|[row, _]| *row)).min() else {
                return;
            };
            let Some(key) = base.keys().get(row as usize).copied() else { return };
            let live = !self.is_dead(key);
            let length = base.length(row as usize);
            contributions.iter_mut().for_each(|c| *c = 0.0);
            let mut partial = 0.0;
            for t in driving {
                if let Some([r, tf]) = terms[*t].base.get(at[*t])
                    && *r == row
                {
                    at[*t] += 1;
                    contributions[*t] = weights.score(terms[*t].idf, *tf, length);
                    partial += contributions[*t];
                }
            }
            if !live {
                continue;
            }
            let mut reachable = true;
            for (i, t) in order[..essential].iter().enumerate().rev() {
                if below(partial + within[i], threshold) {
                    reachable = false;
                    break;
                }
                let postings = terms[*t].base;
                at[*t] = gallop(postings, at[*t], row);
                if let Some([r, tf]) = postings.get(at[*t])
                    && *r == row
                {
                    contributions[*t] = weights.score(terms[*t].idf, *tf, length);
                    partial += contributions[*t];
                }
            }
            if reachable {
                best.offer(key, contributions.iter().sum());
            }
        }
    }

    /// A score the `k`th best base row reaches at least: the `k`th best full score among the
    /// live rows of the rarest terms (strongest bounds first, `order` reversed), as many of
    /// them as hold at most [`FLOOR_ROWS`] postings together. The walk in row order
    /// otherwise meets the common terms' rows long before enough rare ones to raise its
    /// threshold, and scores most of their postings before it can set them aside. A lower
    /// bound only prunes, so the hits stay exact; the rows scored here are scored again,
    /// and offered, by the walk.
    fn score_floor(
        &self,
        base: &Postings,
        terms: &[QueryTerm<'_>],
        order: &[usize],
        weights: &Weights,
        k: usize,
    ) -> f32 {
        let mut rows: Vec<u32> = Vec::new();
        for t in order.iter().rev() {
            if rows.len() + terms[*t].base.len() > FLOOR_ROWS {
                break;
            }
            rows.extend(terms[*t].base.iter().map(|[row, _]| *row));
        }
        rows.sort_unstable();
        rows.dedup();
        let mut floor = TopK::new(k);
        for row in &rows {
            let Some(key) = base.keys().get(*row as usize) else { continue };
            if self.is_dead(*key) {
                continue;
            }
            let length = base.length(*row as usize);
            let score: f32 = terms
                .iter()
                .filter_map(|term| {
                    let at = term.base.partition_point(|[r, _]| r < row);
                    term.base.get(at).filter(|[r, _]| r == row).map(|[_, tf]| weights.score(term.idf, *tf, length))
                })
                .sum();
            floor.offer(*key, score);
        }
        floor.threshold()
    }

    /// Whether the changes since the base was written (or the whole index, without one) are
    /// worth a new base: a quarter of the base, or a base older than `stale_after` changes
    /// at `change`, which an open could no longer replay from the log.
    pub fn worth_rewriting(&self, change: u64, stale_after: u64) -> bool {
        let changed = self.dead.len() + self.lengths.len();
        match &self.base {
            None => changed > 0,
            Some(base) => changed > 0 && (changed * 4 >= base.rows() || change > base.saved().change + stale_after),
        }
    }

    /// Writes every live chunk as a new base file `NAME.postings` current with `change`, and
    /// serves it from now on.
    pub fn rewrite(&mut self, dir: &Path, name: &str, change: u64) -> Result<()> {
        let vocabulary = self.merged_vocabulary();
        let mut rows: Vec<Row> = Vec::with_capacity(self.len());
        if let Some(base) = &self.base {
            for (row, key) in base.keys().iter().enumerate() {
                if !self.is_dead(*key) {
                    let renumber = |[id, tf]: &[u32; 2]| Some([*vocabulary.of_base.get(*id as usize)?, *tf]);
                    let terms = base.row_terms(row).iter().filter_map(renumber).collect();
                    rows.push(Row { key: *key, len: base.length(row), terms });
                }
            }
        }
        for (key, terms) in &self.terms {
            let renumber = |term: &Arc<str>| Some([*vocabulary.of_added.get(&**term)?, self.postings[term][key]]);
            rows.push(Row { key: *key, len: self.lengths[key], terms: terms.iter().filter_map(renumber).collect() });
        }
        rows.sort_unstable_by_key(|r| r.key);
        let saved = Postings::write(dir, name, &vocabulary.terms, &rows, change)?;
        drop(rows);
        drop(vocabulary);
        let base = Postings::open(dir, &saved)?;
        *self = Bm25 { base: Some(base), ..Bm25 { k1: self.k1, b: self.b, ..Default::default() } };
        Ok(())
    }

    /// The base's terms and those of the chunks indexed since, sorted and distinct, with the
    /// place of each base term id and of each added term among them.
    fn merged_vocabulary(&self) -> Vocabulary<'_> {
        let base: Vec<&str> =
            self.base.as_ref().map_or_else(Vec::new, |b| (0..b.terms()).map(|id| b.term(id)).collect());
        let mut added: Vec<&str> =
            self.postings.keys().map(|t| &**t).filter(|t| base.binary_search(t).is_err()).collect();
        added.sort_unstable();
        let mut terms = Vec::with_capacity(base.len() + added.len());
        let mut of_base = Vec::with_capacity(base.len());
        let (mut from_base, mut from_added) = (base.iter().peekable(), added.iter().peekable());
        loop {
            let base_first = match (from_base.peek(), from_added.peek()) {
                (Some(b), Some(a)) => b < a,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if base_first {
                of_base.push(terms.len() as u32);
                terms.extend(from_base.next());
            } else {
                terms.extend(from_added.next());
            }
        }
        let of_added =
            self.postings.keys().filter_map(|t| Some((&**t, terms.binary_search(&&**t).ok()? as u32))).collect();
        Vocabulary { terms, of_base, of_added }
    }
}

/// Every term a rewrite writes, sorted, and where each term of the base and of the chunks
/// indexed since falls among them: rows are renumbered by lookups, not by comparing strings
/// per posting.
struct Vocabulary<'a> {
    terms: Vec<&'a str>,
    /// By base term id.
    of_base: Vec<u32>,
    of_added: Table<&'a str, u32>,
}

/// Rows a search scores for its floor at most (see [`Bm25::score_floor`]): a query of
/// common words only has no rows worth scoring twice.
const FLOOR_ROWS: usize = 4096;

/// BM25's weighting of one term in one row.
struct Weights {
    k1: f32,
    b: f32,
    /// The average row length in terms.
    avg: f32,
}

impl Weights {
    fn score(&self, idf: f32, tf: u32, length: u32) -> f32 {
        let (tf, dl) = (tf as f32, length as f32);
        idf * tf * (self.k1 + 1.0) / (tf + self.k1 * (1.0 - self.b + self.b * dl / self.avg))
    }

    /// More than [`Weights::score`] gives any row for a term of weight `idf`: its limit as
    /// the term's count grows.
    fn bound(&self, idf: f32) -> f32 {
        idf * (self.k1 + 1.0)
    }
}

/// Whether a row whose score is at most `bound` cannot beat `threshold`, with a margin for
/// the rounding of sums taken in another order (so the pruning never drops a row a full
/// scoring would keep).
fn below(bound: f32, threshold: f32) -> bool {
    bound * (1.0 + 1e-4) < threshold
}

/// The first index from `from` (at most `postings.len()`) on whose row is at least `row`
/// (postings in row order).
fn gallop(postings: &[[u32; 2]], from: usize, row: u32) -> usize {
    let mut step = 1;
    while from + step < postings.len() && postings[from + step][0] < row {
        step *= 2;
    }
    // The row at `from + step / 2` is below `row` once `step` has doubled, and the one at
    // `from + step`, if any, is not.
    let (low, high) = (from + step / 2, (from + step + 1).min(postings.len()));
    low + postings[low..high].partition_point(|[r, _]| *r < row)
}

/// A query term's weight and postings, in the base file and among the chunks indexed since.
struct QueryTerm<'a> {
    idf: f32,
    base: &'a [[u32; 2]],
    added: Option<&'a Table<u64, u32>>,
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

    /// A saved base plus later changes scores exactly as one index over the same chunks.
    #[test]
    fn a_saved_base_with_later_changes_scores_like_one_index() {
        let settings = Settings::defaults().bm25;
        let dir = tempfile::tempdir().unwrap();
        let texts = [
            "amber harbour lighthouse",
            "harbour crane amber dock",
            "granite quarry",
            "lighthouse keeper cottage",
            "dock amber amber",
        ];
        let mut saved = Bm25::new(&settings);
        let mut reference = Bm25::new(&settings);
        for (key, text) in texts.iter().enumerate() {
            saved.insert(key as u64, text);
            reference.insert(key as u64, text);
        }
        saved.rewrite(dir.path(), "base-1", 7).unwrap();
        let mut reopened = Bm25::open(&settings, dir.path(), saved.saved().unwrap()).unwrap();
        for bm in [&mut saved, &mut reopened, &mut reference] {
            bm.remove(1);
            bm.insert(3, "lighthouse amber beacon");
            bm.insert(9, "quarry dock granite granite");
        }
        for bm in [&saved, &reopened] {
            assert_eq!((bm.len(), bm.vocabulary()), (reference.len(), reference.vocabulary()));
            for term in ["amber", "crane", "granite", "lighthouse", "beacon", "nothing"] {
                assert_eq!(bm.frequency(term), reference.frequency(term), "{term}");
            }
            for query in ["amber dock", "granite lighthouse beacon", "crane"] {
                assert_eq!(bm.search(query, 5), reference.search(query, 5), "{query}");
            }
        }
        assert!(reopened.worth_rewriting(7, 100), "four changed rows of five are worth a new base");
        reopened.rewrite(dir.path(), "base-2", 9).unwrap();
        // The new base merges both vocabularies and keeps only the terms live rows hold
        // ("crane" was only in the removed row), still sorted for lookups.
        assert_eq!((reopened.len(), reopened.vocabulary()), (reference.len(), reference.vocabulary()));
        for term in ["amber", "crane", "granite", "lighthouse", "beacon", "harbour", "quarry", "nothing"] {
            assert_eq!(reopened.frequency(term), reference.frequency(term), "{term}");
        }
        for query in ["amber dock", "granite lighthouse beacon", "crane keeper cottage"] {
            assert_eq!(reopened.search(query, 5), reference.search(query, 5), "{query}");
        }
        assert!(!reopened.worth_rewriting(9, 100), "nothing changed since");
        assert!(
            Bm25::open(&settings, dir.path(), &SavedPostings { crc: 1, ..reopened.saved().unwrap().clone() }).is_err()
        );
    }

    /// The pruned search returns what scoring every chunk does, scores included, over a
    /// saved base with rows removed and added since, for queries mixing rare and common
    /// words and for every `k`.
    #[test]
    fn the_pruned_search_finds_the_exhaustive_top_k() {
        use rand::{Rng, SeedableRng};
        let settings = Settings::defaults().bm25;
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Word `i` is about `i + 1` times rarer than the first: a few words are in most rows.
        let words: Vec<String> =
            (0..60).map(|i| format!("word{}", char::from(b'a' + (i % 26) as u8)) + &"x".repeat(i / 26)).collect();
        let row = |rng: &mut rand_chacha::ChaCha8Rng| -> String {
            let len = rng.random_range(3..20);
            (0..len)
                .map(|_| words[(words.len() as f64 * rng.random::<f64>().powi(3)) as usize].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut bm = Bm25::new(&settings);
        let mut texts: Table<u64, String> = Table::default();
        for key in 0..400u64 {
            let text = row(&mut rng);
            bm.insert(key, &text);
            texts.insert(key, text);
        }
        bm.rewrite(dir.path(), "base", 1).unwrap();
        for _ in 0..60 {
            let key = rng.random_range(0..460u64);
            if rng.random_bool(0.3) {
                bm.remove(key);
                texts.remove(&key);
            } else {
                let text = row(&mut rng);
                bm.insert(key, &text);
                texts.insert(key, text);
            }
        }
        let total: usize = texts.values().map(|t| text::content_terms(t).len()).sum();
        let avg = total as f32 / texts.len() as f32;
        for _ in 0..200 {
            let query = (0..rng.random_range(1..6))
                .map(|_| words[rng.random_range(0..words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" ");
            let mut terms = text::content_terms(&query);
            terms.sort();
            terms.dedup();
            let mut exhaustive: Vec<(u64, f32)> = Vec::new();
            for (key, text) in &texts {
                let row_terms = text::content_terms(text);
                let mut score = 0.0f32;
                for term in &terms {
                    let tf = row_terms.iter().filter(|t| *t == term).count() as f32;
                    if tf > 0.0 {
                        let dl = row_terms.len() as f32;
                        score += bm.idf(term) * tf * (settings.k1 + 1.0)
                            / (tf + settings.k1 * (1.0 - settings.b + settings.b * dl / avg));
                    }
                }
                if score > 0.0 {
                    exhaustive.push((*key, score));
                }
            }
            for k in [1, 3, 10, 50, 1000] {
                let expected = crate::rank::top_k(exhaustive.clone(), k);
                assert_eq!(bm.search(&query, k), expected, "{query} (k = {k})");
            }
        }
    }

    fn keys(hits: &[(u64, f32)]) -> Vec<u64> {
        hits.iter().map(|(k, _)| *k).collect()
    }
}
