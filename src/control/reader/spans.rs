//! Typed spans: the names, dates and amounts of the evidence's sentences that can answer the
//! question, each supported by how much of the question its sentence chain states and how
//! near it stands to the question's words.

use std::collections::HashMap;

use super::candidate::{Candidate, answer_surface};
use super::chains::Chain;
use super::evidence::Sentence;
use super::typing::{after_place_preposition, near_word, word_positions};
use crate::control::answer_type::{self, AnswerType};
use crate::control::question::{Question, same_word};
use crate::ingest::extract::entity_mentions;
use crate::lexicon::{self, NUMBER_WORDS, PERIOD_QUALIFIERS, PERIODS, SCALES};
use crate::retrieve::PathHop;
use crate::retrieve::lead::MENTIONS;
use crate::text;

/// Words between a span and the question's relation word at which support halves.
const PROXIMITY_HALF: f32 = 4.0;
/// Proximity of a span in a sentence without any of the question's cue words, when the
/// question has some: as if far away.
const NO_CUE_NEARBY: f32 = 0.3;
/// Proximity when the question has no cue word to be near: neither near nor far.
const NO_CUE_ASKED: f32 = 0.6;
/// Support lost per rank down the evidence list: the retriever's order breaks ties between
/// sentences that state as much of the question.
const RANK_DISCOUNT: f32 = 0.05;

/// Adds every typed span of every sentence to `candidates`, with its best support.
pub(super) fn read_spans(
    question: &Question,
    sentences: &[Sentence<'_>],
    chains: &[Chain],
    candidates: &mut HashMap<String, Candidate>,
) {
    for (s, chain) in sentences.iter().zip(chains) {
        for (start, span) in
            spans(s.text, &question.kind).into_iter().flat_map(|(at, span)| answer_parts(question, at, span))
        {
            let surface = answer_surface(&span);
            if question.names(&surface) {
                continue;
            }
            // A lifespan states birth and death by position, with no word for either.
            let in_lifespan = text::lifespan_at(s.text, start, start + span.len())
                .is_some_and(|event| question.relation_words.iter().any(|r| same_word(r, event.word())));
            let proximity = if in_lifespan { 1.0 } else { proximity(question, s.text, start, span.len()) };
            // Coverage counts twice: a sentence chain that states most of the question is
            // worth far more than one that states half of it.
            let support = chain.coverage * chain.coverage * proximity / (1.0 + RANK_DISCOUNT * s.rank as f32);
            let typed = question.type_noun.as_deref().is_some_and(|noun| near_word(s.text, start, span.len(), noun));
            let c = candidates.entry(text::normalize_answer(&surface)).or_default();
            if c.surface.is_empty() {
                c.surface = surface.clone();
            }
            c.typed |= typed;
            c.placed |= question.where_() && after_place_preposition(&s.text[..start]);
            if support > c.support {
                c.support = support;
                c.support_chunk = Some(s.chunk);
                c.link = chain.link.as_ref().map(|(from, bridge)| PathHop {
                    subject: from.clone(),
                    relation: MENTIONS.into(),
                    object: bridge.clone(),
                    chunk: sentences[chain.link_sentence].chunk,
                });
            }
        }
    }
}

/// The parts of a span at `start` that can answer the question: the year alone of a full
/// date when the question asks "which year" ("2001" of "20 June 2001"); the span, and the
/// name after a title the type noun names ("Ada Lind" of "Harbour Master Ada Lind" for
/// "which master"; both, since the noun may head the name itself, as in "Vasa City
/// College" for "which college"); else the span alone.
pub(super) fn answer_parts(question: &Question, start: usize, span: String) -> Vec<(usize, String)> {
    let words = text::word_spans(&span);
    let noun = question.type_noun.as_deref();
    let year = words.iter().find(|(_, w)| w.len() == 4 && w.chars().all(|c| c.is_ascii_digit()));
    if let Some((offset, year)) = year
        && matches!(question.kind, AnswerType::Date)
        && noun == Some("year")
        && words.len() > 1
    {
        return vec![(start + offset, year.to_string())];
    }
    let after_title = noun.filter(|_| matches!(question.kind, AnswerType::Entity)).and_then(|noun| {
        let i = words.iter().position(|(_, w)| same_word(w, noun))?;
        // A name follows: "Order of Merit" has none after its noun, "Port Selby Harbour" nothing.
        let (offset, next) = words.get(i + 1)?;
        (next.chars().next().is_some_and(char::is_uppercase) && !text::is_stopword(&next.to_lowercase()))
            .then(|| (start + offset, span[*offset..].to_string()))
    });
    let mut parts = vec![(start, span)];
    parts.extend(after_title);
    parts
}

/// The spans of a sentence that can answer a question of `kind`, with their byte offsets:
/// a date or an amount asks for a typed span (dates, amounts, counts), never a name with a
/// number in it ("2011 Nordic"); other questions take entity mentions and typed spans.
fn spans(sentence: &str, kind: &AnswerType) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut push = |surface: String| {
        let mut from = 0;
        while let Some(i) = sentence[from..].find(&surface) {
            out.push((from + i, surface.clone()));
            from += i + surface.len();
        }
    };
    if !matches!(kind, AnswerType::Date | AnswerType::Number) {
        for m in entity_mentions(sentence) {
            push(m);
        }
    }
    for d in amounts_and_dates(sentence) {
        push(d);
    }
    out
}

/// "4 February 1948", "February 4, 1948", "150 million", "6,960", "19th century", "early
/// twentieth century", "twice", "two-time", "three times": typed spans the entity extractor
/// splits or misses.
fn amounts_and_dates(sentence: &str) -> Vec<String> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let clean = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '%').to_string();
    let is_num = |w: &str| w.chars().next().is_some_and(|c| c.is_ascii_digit());
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = clean(words[i]);
        let next = |k: usize| words.get(i + k).map(|w| clean(w)).unwrap_or_default();
        let ordinal_at = usize::from(lexicon::contains(PERIOD_QUALIFIERS, &w));
        if answer_type::is_ordinal(&next(ordinal_at)) && lexicon::contains(PERIODS, &next(ordinal_at + 1)) {
            let end = ordinal_at + 2;
            out.push((0..end).map(next).collect::<Vec<_>>().join(" "));
            i += end;
        } else if is_num(&w) && lexicon::is_month(&next(1)) && is_num(&next(2)) {
            out.push(format!("{w} {} {}", next(1), next(2)));
            i += 3;
        } else if lexicon::is_month(&w) && is_num(&next(1)) && is_num(&next(2)) && words[i + 1].ends_with(',') {
            out.push(format!("{w} {}, {}", next(1), next(2)));
            i += 3;
        } else if answer_type::is_count(&w) {
            out.push(w);
            i += 1;
        } else if ((is_num(&w) || lexicon::contains(NUMBER_WORDS, &w)) && next(1).to_lowercase() == "times")
            || (is_num(&w) && lexicon::contains(SCALES, &next(1)))
        {
            // "three times", "150 million"
            out.push(format!("{w} {}", next(1)));
            i += 2;
        } else if is_num(&w) {
            // A range of years is its two ends: "(1885–1950)" states a birth and a death
            // year. A score ("3–1") stays whole.
            let ends: Vec<&str> = w.split(['-', '–', '—']).collect();
            let year = |e: &&str| (3..=4).contains(&e.len()) && e.chars().all(|c| c.is_ascii_digit());
            if ends.len() == 2 && ends.iter().all(year) {
                out.extend(ends.iter().map(|e| e.to_string()));
            } else {
                out.push(w);
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

/// 1 next to one of the question's cue words, halving every [`PROXIMITY_HALF`] words away; a
/// sentence without any gets the weight of one far away.
fn proximity(question: &Question, sentence: &str, start: usize, len: usize) -> f32 {
    let positions = word_positions(sentence);
    let at = positions.iter().filter(|(b, _)| *b < start).count();
    let end = positions.iter().filter(|(b, _)| *b < start + len).count();
    let distance = positions
        .iter()
        .enumerate()
        .filter(|(i, (_, w))| (*i < at || *i >= end) && question.cues.iter().any(|r| same_word(w, r)))
        .filter(|(i, (b, _))| *i < at || !text::joins_next_clause(&sentence[start + len..*b]))
        .map(|(i, _)| if i < at { at - i } else { i + 1 - end })
        .min();
    match distance {
        Some(d) => 1.0 / (1.0 + d as f32 / PROXIMITY_HALF),
        None if question.cues.is_empty() => NO_CUE_ASKED,
        None => NO_CUE_NEARBY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_spans_keep_dates_and_amounts_whole() {
        assert_eq!(
            amounts_and_dates("It sailed on February 4, 1948 and carried 150 million letters."),
            vec!["February 4, 1948", "150 million"]
        );
        assert_eq!(amounts_and_dates("Opened on 1 August 1973."), vec!["1 August 1973"]);
        assert_eq!(
            amounts_and_dates("Bred in the 19th century, it spread in the early twentieth century."),
            vec!["19th century", "early twentieth century"]
        );
        assert_eq!(
            amounts_and_dates("She was mayor twice, a two-time finalist, and won it three times."),
            vec!["twice", "two-time", "three times"]
        );
        assert_eq!(amounts_and_dates("Ola Haugen (1885–1950) won 3–1."), vec!["1885", "1950", "3–1"]);
    }

    #[test]
    fn a_date_question_reads_dates_not_names_with_a_year_in_them() {
        let sentence = "It is a remake of the 2011 Nordic film Tide, released on 20 June 2013.";
        let surfaces = |kind: &AnswerType| spans(sentence, kind).into_iter().map(|(_, s)| s).collect::<Vec<_>>();
        assert!(surfaces(&AnswerType::Entity).iter().any(|s| s.contains("Nordic")));
        assert_eq!(surfaces(&AnswerType::Date), vec!["2011", "20 June 2013"]);
    }

    #[test]
    fn the_answer_is_the_part_of_a_span_the_question_asks_for() {
        let parts = |q: &Question, start: usize, span: &str| answer_parts(q, start, span.to_string());
        let owned = |list: &[(usize, &str)]| list.iter().map(|(at, s)| (*at, s.to_string())).collect::<Vec<_>>();
        let master = Question::parse("She served under which master?", None);
        let lind = "Harbour Master Ada Lind";
        assert_eq!(parts(&master, 10, lind), owned(&[(10, lind), (25, "Ada Lind")]));
        let college = Question::parse("He studied at which college?", None);
        let vasa = parts(&college, 0, "College of Vasa");
        assert_eq!(vasa[0].1, "College of Vasa", "the noun may head the name: it stays a candidate");
        let order = Question::parse("The captain was awarded which order?", None);
        assert_eq!(parts(&order, 0, "Order of Merit"), owned(&[(0, "Order of Merit")]), "no name after the noun");
        let harbour = Question::parse("She worked for the port of what harbour?", None);
        assert_eq!(parts(&harbour, 0, "Port Selby Harbour"), owned(&[(0, "Port Selby Harbour")]));
        let year = Question::parse("Tide was released in which year?", None);
        assert_eq!(parts(&year, 4, "20 June 2011"), owned(&[(12, "2011")]));
    }

    #[test]
    fn a_span_next_to_a_question_word_is_nearer_than_one_far_away() {
        let q = Question::parse("Where was the keeper born?", None);
        let s = "The keeper was born in Selby and later moved to the distant town of Orwick.";
        let near = proximity(&q, s, s.find("Selby").unwrap_or(0), 5);
        let far = proximity(&q, s, s.find("Orwick").unwrap_or(0), 6);
        assert!(near > far, "{near} vs {far}");
    }
}
