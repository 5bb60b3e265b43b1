//! The evidence as the reader sees it: the sentences of the retrieved chunks, each with how
//! much of the question it states, and the weight of each of the question's words.

use crate::control::question::{Question, same_word};
use crate::kb::Kb;
use crate::kb::model::ChunkId;
use crate::retrieve::Retrieval;
use crate::text;

/// Bits in [`Sentence::covered`]: a question's first 64 content words in sorted order.
const MAX_TERMS: usize = 64;

/// One sentence of the evidence, with how well it matches the question.
pub(super) struct Sentence<'a> {
    pub chunk: ChunkId,
    pub title: &'a str,
    pub text: &'a str,
    /// Share of the question's content words in the sentence and its passage's title.
    pub overlap: f32,
    /// Which of the question's content words (in sorted order, the first 64) it states.
    pub covered: u64,
    pub rank: usize,
}

impl Sentence<'_> {
    /// Is its passage about `entity` ([`text::is_about`])?
    pub fn is_about(&self, entity: &str) -> bool {
        text::is_about(self.title, entity)
    }
}

/// The sentences of the retrieved chunks, Markdown headings left out.
pub(super) fn sentences<'a>(question: &Question, retrieval: &'a Retrieval) -> Vec<Sentence<'a>> {
    let terms = sorted_terms(question);
    let mut out = Vec::new();
    for (rank, chunk) in retrieval.chunks.iter().enumerate() {
        let title_terms: Vec<String> = text::content_terms(&chunk.title);
        for body in chunk.text.split_inclusive('\n') {
            if text::is_heading(body) {
                continue;
            }
            for span in text::sentence_spans(body) {
                let sentence = &body[span];
                let words: Vec<String> =
                    text::content_terms(sentence).into_iter().chain(title_terms.iter().cloned()).collect();
                let covered = terms
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| words.iter().any(|w| w == **t || same_word(w, t)))
                    .fold(0u64, |mask, (k, _)| mask | 1 << k);
                let overlap = covered.count_ones() as f32 / terms.len().clamp(1, MAX_TERMS) as f32;
                out.push(Sentence { chunk: chunk.chunk, title: &chunk.title, text: sentence, overlap, covered, rank });
            }
        }
    }
    out
}

/// How much each of the question's content words (in the order of [`Sentence::covered`])
/// tells: its inverse document frequency in the KB, so that a sentence stating the rare
/// words of a question outweighs one stating its common ones.
pub(super) struct TermWeights {
    weights: Vec<f32>,
    total: f32,
}

impl TermWeights {
    pub fn new(kb: &Kb, question: &Question) -> TermWeights {
        TermWeights::of(sorted_terms(question).iter().map(|t| kb.bm25().idf(t)).collect())
    }

    /// Every word weighs the same (no KB at hand).
    #[cfg(test)]
    pub fn uniform(question: &Question) -> TermWeights {
        TermWeights::of(vec![1.0; sorted_terms(question).len()])
    }

    fn of(weights: Vec<f32>) -> TermWeights {
        let total = weights.iter().sum();
        TermWeights { weights, total }
    }

    /// The weighted share of the question's words that `covered` states.
    pub fn share(&self, covered: u64) -> f32 {
        if self.total <= 0.0 {
            return 0.0;
        }
        let said: f32 = self.weights.iter().enumerate().filter(|(k, _)| covered & (1 << k) != 0).map(|(_, w)| w).sum();
        said / self.total
    }
}

/// The question's content words in sorted order, the first 64: the bit order of
/// [`Sentence::covered`].
fn sorted_terms(question: &Question) -> Vec<&String> {
    let mut terms: Vec<&String> = question.terms.iter().collect();
    terms.sort();
    terms.truncate(MAX_TERMS);
    terms
}

/// The sentences about `entity`: those that name it and those of its own passage.
pub(super) fn profile<'s, 'a>(entity: &str, sentences: &'s [Sentence<'a>]) -> Vec<&'s Sentence<'a>> {
    let key = text::normalize_answer(entity);
    sentences.iter().filter(|s| text::normalize_answer(s.title) == key || text::names(s.text, entity)).collect()
}

/// Share of `words` the sentences state.
pub(super) fn coverage(words: &[String], sentences: &[&Sentence<'_>]) -> f32 {
    if words.is_empty() {
        return 0.0;
    }
    let said: Vec<String> = sentences.iter().flat_map(|s| text::content_terms(s.text)).collect();
    words.iter().filter(|w| said.iter().any(|s| same_word(s, w))).count() as f32 / words.len() as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieve::testing::retrieval;

    #[test]
    fn a_passage_titled_with_a_shorter_name_is_about_the_entity() {
        let r = retrieval(&[("Anna Berg", "She was a three-time regional champion.")]);
        let q = Question::parse("How many titles did Anna Maria Berg, Jr. win?", None);
        let s = &sentences(&q, &r)[0];
        assert!(s.is_about("Anna Maria Berg, Jr.") && s.is_about("Anna Berg"));
        assert!(!s.is_about("Anna") && !s.is_about("Maria Berg"), "one word, or a different name");
        let city = retrieval(&[("Port Selby", "It is the largest harbour of the coast.")]);
        let q = Question::parse("Where is Port Selby Bay?", None);
        assert!(!sentences(&q, &city)[0].is_about("Port Selby Bay"), "a longer name is another entity");
    }

    #[test]
    fn a_heading_is_no_sentence_and_overlap_counts_the_title() {
        let r = retrieval(&[("Kestrel Mill", "# Kestrel Mill\nThe mill ground wheat. It closed in 1931.")]);
        let q = Question::parse("When did Kestrel Mill close?", None);
        let s = sentences(&q, &r);
        assert_eq!(s.iter().map(|s| s.text).collect::<Vec<_>>(), vec!["The mill ground wheat.", "It closed in 1931."]);
        assert!(s[1].overlap > s[0].overlap, "the title states the name, the sentence the relation");
    }
}
