//! Entity and triple extraction behind [`Extractor`]. The embedded [`RuleExtractor`] is
//! deterministic: proper-noun phrases, dates and years are entities; the words between two
//! entities of one sentence, when they contain a verb-like lowercase word, form a relation.

use std::collections::HashSet;

use crate::kb::model::RawTriple;
use crate::lexicon::{self, NAME_CONNECTORS, PRONOUNS};
use crate::text;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    /// Entity mentions as they appear, deduplicated, in order of first occurrence.
    pub entities: Vec<String>,
    pub triples: Vec<RawTriple>,
}

pub trait Extractor: Send + Sync {
    /// Extracts from one chunk of a document titled `title`.
    fn extract(&self, title: &str, text: &str) -> crate::error::Result<Extraction>;
}

/// Relations longer than this many words are more likely clause soup than a predicate.
const MAX_RELATION_WORDS: usize = 6;

#[derive(Default)]
pub struct RuleExtractor;

#[derive(Debug, Clone)]
struct Token<'a> {
    word: &'a str,
    /// Punctuation right after this token ends any phrase running through it.
    breaks_after: bool,
}

fn tokens(sentence: &str) -> Vec<Token<'_>> {
    sentence
        .split_whitespace()
        .filter_map(|raw| {
            let trimmed_end = raw.trim_end_matches(|c: char| !c.is_alphanumeric());
            let word = trimmed_end.trim_start_matches(|c: char| !c.is_alphanumeric());
            if word.is_empty() {
                return None;
            }
            let breaks_after = trimmed_end.len() < raw.len() || raw.starts_with('(');
            Some(Token { word, breaks_after })
        })
        .collect()
}

fn is_capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_uppercase())
}

fn is_year(word: &str) -> bool {
    word.len() == 4 && word.chars().all(|c| c.is_ascii_digit()) && (word.starts_with('1') || word.starts_with('2'))
}

fn is_number(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_ascii_digit())
}

/// Entity mentions in one sentence, as (first token, end token exclusive, surface text).
fn mentions(toks: &[Token<'_>]) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let w = toks[i].word;
        let starts = (is_capitalised(w) && !text::is_stopword(&w.to_lowercase())) || is_year(w);
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let is_month = lexicon::is_month(w);
        while end < toks.len() && !toks[end - 1].breaks_after {
            let next = toks[end].word;
            let lower = next.to_lowercase();
            if is_capitalised(next)
                || (is_month && is_number(next))
                || (is_number(next) && is_number(toks[end - 1].word))
            {
                end += 1;
            } else if NAME_CONNECTORS.contains(&lower.as_str())
                && end + 1 < toks.len()
                && !toks[end].breaks_after
                && is_capitalised(toks[end + 1].word)
            {
                end += 2;
            } else {
                break;
            }
        }
        // A month name alone is not an entity; a lone capitalised sentence opener followed by a
        // lowercase word often is not either, but names like "Paris" are, so keep those.
        let surface = toks[start..end].iter().map(|t| t.word).collect::<Vec<_>>().join(" ");
        if !(end - start == 1 && lexicon::is_month(&surface)) {
            out.push((start, end, surface));
        }
        i = end;
    }
    out
}

/// Entity mentions of free text (queries included), in order, deduplicated.
pub fn entity_mentions(input: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for span in text::sentence_spans(input) {
        for (_, _, m) in mentions(&tokens(&input[span])) {
            if seen.insert(m.clone()) {
                out.push(m);
            }
        }
    }
    out
}

impl Extractor for RuleExtractor {
    fn extract(&self, title: &str, chunk: &str) -> crate::error::Result<Extraction> {
        let title_entity = text::title_entity(title);
        let mut entities = Vec::new();
        let mut seen_entities = HashSet::new();
        let mut triples = Vec::new();
        let mut seen_triples = HashSet::new();
        if let Some(t) = &title_entity {
            seen_entities.insert(t.clone());
            entities.push(t.clone());
        }
        for span in text::sentence_spans(chunk) {
            let toks = tokens(&chunk[span]);
            let found = mentions(&toks);
            for (_, _, m) in &found {
                if seen_entities.insert(m.clone()) {
                    entities.push(m.clone());
                }
            }
            // Subject of a pronoun-led sentence is the document's topic.
            let mut anchors: Vec<(usize, usize, String)> = Vec::new();
            if let (Some(t), Some(first)) = (&title_entity, toks.first())
                && PRONOUNS.contains(&first.word.to_lowercase().as_str())
            {
                anchors.push((0, 1, t.clone()));
            }
            anchors.extend(found);
            for pair in anchors.windows(2) {
                let (_, a_end, a) = &pair[0];
                let (b_start, _, b) = &pair[1];
                if let Some(relation) = relation_between(&toks[*a_end..*b_start]) {
                    let triple = RawTriple { subject: a.clone(), relation, object: b.clone() };
                    if a != b && seen_triples.insert(triple.clone()) {
                        triples.push(triple);
                    }
                }
            }
        }
        Ok(Extraction { entities, triples })
    }
}

fn relation_between(gap: &[Token<'_>]) -> Option<String> {
    if gap.is_empty() || gap.len() > MAX_RELATION_WORDS {
        return None;
    }
    let words: Vec<String> = gap.iter().map(|t| t.word.to_lowercase()).collect();
    let has_predicate = words.iter().any(|w| !text::is_stopword(w) && !is_number(w))
        || words.iter().any(|w| matches!(w.as_str(), "is" | "was" | "are" | "were" | "has" | "had"));
    // A break inside the gap (other than at its end) means the two mentions sit in
    // different clauses.
    let clause_break = gap[..gap.len() - 1].iter().any(|t| t.breaks_after);
    (has_predicate && !clause_break).then(|| words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triple(s: &str, r: &str, o: &str) -> RawTriple {
        RawTriple { subject: s.into(), relation: r.into(), object: o.into() }
    }

    #[test]
    fn proper_nouns_dates_and_connectors() {
        let got = entity_mentions(
            "The Journal of Mathematical Physics was first published in January 1960 by the American Institute of Physics.",
        );
        assert_eq!(got, vec!["Journal of Mathematical Physics", "January 1960", "American Institute of Physics"]);
    }

    #[test]
    fn svo_triples_and_pronoun_subjects() {
        let x = RuleExtractor
            .extract("Jan Solovej", "Jan Solovej works at University of Copenhagen. He was born in Denmark, in 1961.")
            .unwrap();
        assert_eq!(
            x.triples,
            vec![
                triple("Jan Solovej", "works at", "University of Copenhagen"),
                triple("Jan Solovej", "was born in", "Denmark"),
            ]
        );
        assert!(x.entities.contains(&"1961".to_string()));
    }
}
