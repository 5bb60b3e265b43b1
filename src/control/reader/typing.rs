//! Whether a candidate is of the kind the question asks for: a date in the asked unit, an
//! amount rather than a name with a number, a person for "who", a place for "where", a
//! name the evidence calls by the question's type noun ("which harbour").

use std::collections::HashSet;

use super::candidate::Candidate;
use super::evidence::Sentence;
use crate::control::answer_type::{self, AnswerType};
use crate::control::question::{Question, same_word};
use crate::lexicon::{BIRTH_WORDS, COPULAS, PERSON_WORDS, PLACE_PREPOSITIONS};
use crate::text;

/// Words after "X is" within which the type noun calls X by it ("is a Swedish-born sculptor").
const TYPE_WINDOW: usize = 4;
/// Longest candidate, in words, that can still be an answer rather than a clause.
const MAX_ANSWER_WORDS: usize = 8;

// The fit ladder: how far a candidate's kind is from the one asked for. Fit multiplies a
// candidate's evidence, so a step down the ladder must be paid for by that much more
// evidence.
/// Exactly the asked kind: a date in the asked unit, a person for "who", a place a sentence
/// puts after "in", a name called by the type noun.
const EXACT: f32 = 1.0;
/// A place no sentence puts after "in" or "at": places often stand as subjects too.
const LIKELY: f32 = 0.8;
/// A name of the right shape with no sign of its kind (two capitalised words for "who"), or
/// any name when the question gives no clue of kind.
const PLAUSIBLE: f32 = 0.5;
/// Of a neighbouring kind: a name never called by the type noun, a date with more in it, a
/// person for "where", one capitalised word for "who".
const DOUBTFUL: f32 = 0.3;
/// Of the wrong shape but not impossible: a number for a name, a name with a number for an
/// amount. Wins only where nothing else is left.
const UNLIKELY: f32 = 0.1;

/// The passages about a person, by normalised title: those that say "he", "she" or "born".
/// A pronoun in a passage titled with one word is often a person the topic's passage speaks
/// of ("Tides": "He measured the tides ..."), so a one-word title is a person's only when its
/// passage says "born".
pub(super) fn people(sentences: &[Sentence<'_>]) -> HashSet<String> {
    sentences
        .iter()
        .filter_map(|s| {
            let title = text::normalize_answer(s.title);
            let words: &[&str] = if title.contains(' ') { PERSON_WORDS } else { BIRTH_WORDS };
            text::words(s.text).any(|w| words.contains(&w.as_str())).then_some(title)
        })
        .collect()
}

/// Does the evidence call `answer` by `noun`, in apposition ("the sculptor Ada Lind") or with
/// a copula ("Ada Lind is a Swedish-born sculptor")?
pub(super) fn called(noun: &str, answer: &str, sentences: &[Sentence<'_>]) -> bool {
    sentences.iter().any(|s| s.text.match_indices(answer).any(|(at, _)| near_word(s.text, at, answer.len(), noun)))
}

/// Is the span at `start` called `noun`: `noun` right before it (or two words before, with no
/// function word but "of" between), or at most [`TYPE_WINDOW`] words after it when a copula ("is",
/// "was") follows the span? Neither reaches into or out of brackets: "Kell Airport (code:
/// KLL) is a regional airport" calls neither KLL nor anything in the aside an airport.
pub(super) fn near_word(sentence: &str, start: usize, len: usize, noun: &str) -> bool {
    let positions = word_positions(sentence);
    let at = positions.iter().filter(|(b, _)| *b < start).count();
    let end = positions.iter().filter(|(b, _)| *b < start + len).count();
    let aside = sentence[..start].rfind(['(', ')', '[', ']']).map_or(0, |i| i + 1);
    // Apposition: "the sculptor Ada Lind", "the sculptor Dr. Lind", "the city of Vasa"; not
    // "an airport in Norway", where another function word stands between.
    let before = (1..=2).any(|back| {
        at >= back
            && positions[at - back].0 >= aside
            && same_word(&positions[at - back].1, noun)
            && positions[at - back + 1..at].iter().all(|(_, w)| w == "of" || !text::is_stopword(w))
    });
    let copula = positions
        .get(end)
        .is_some_and(|(b, w)| COPULAS.contains(&w.as_str()) && !sentence[start + len..*b].contains([')', ']']));
    let after = copula && positions.iter().skip(end + 1).take(TYPE_WINDOW).any(|(_, w)| same_word(w, noun));
    before || after
}

/// Does `before` end with a preposition of place, the word before a span it precedes?
pub(super) fn after_place_preposition(before: &str) -> bool {
    text::words(before).last().is_some_and(|w| PLACE_PREPOSITIONS.contains(&w.as_str()))
}

/// (byte offset, lower-case word) of each word.
pub(super) fn word_positions(sentence: &str) -> Vec<(usize, String)> {
    text::word_spans(sentence).into_iter().map(|(at, w)| (at, w.to_lowercase())).collect()
}

/// How well a candidate fits the answer type, 0 when it cannot be the answer.
/// `person`: the candidate's own passage speaks of it as a person (he, she, born).
pub(super) fn type_fit(question: &Question, c: &Candidate, person: bool) -> f32 {
    let surface = c.surface.as_str();
    if surface.split_whitespace().count() > MAX_ANSWER_WORDS {
        return 0.0;
    }
    match &question.kind {
        AnswerType::Date if answer_type::only_a_date(surface) && in_unit(question, surface) => EXACT,
        AnswerType::Date if answer_type::looks_like_date(surface) => DOUBTFUL,
        AnswerType::Date => 0.0,
        AnswerType::Number if !answer_type::looks_like_number(surface) => 0.0,
        AnswerType::Number if answer_type::named_with_number(surface) => UNLIKELY,
        AnswerType::Number if answer_type::looks_like_date(surface) => DOUBTFUL,
        AnswerType::Number => EXACT,
        AnswerType::Entity => entity_fit(question, c, person),
        AnswerType::YesNo | AnswerType::Choice(_) | AnswerType::Free => EXACT,
    }
}

fn entity_fit(question: &Question, c: &Candidate, person: bool) -> f32 {
    let surface = c.surface.as_str();
    let numeric = surface.chars().all(|ch| ch.is_ascii_digit() || ch.is_whitespace() || ch == ',' || ch == '.');
    if numeric || answer_type::only_a_date(surface) {
        return UNLIKELY;
    }
    let capitalised = surface.split_whitespace().filter(|w| w.chars().next().is_some_and(char::is_uppercase)).count();
    if capitalised == 0 {
        return 0.0;
    }
    let digits = surface.chars().any(|ch| ch.is_ascii_digit());
    if let Some(noun) = question.type_noun.as_deref() {
        // "Which sculptor": an entity the evidence calls a sculptor, above all.
        return if c.typed || headed_by(surface, noun) { EXACT } else { DOUBTFUL };
    }
    if question.who() {
        return if person {
            EXACT
        } else if capitalised >= 2 && !digits {
            PLAUSIBLE
        } else {
            DOUBTFUL
        };
    }
    // "Where": a place, which a sentence states after "in", "at" or "near" (not the
    // "Norwegian" of "a Norwegian sea captain born in Tromsø").
    if question.where_() && !digits {
        return if person {
            DOUBTFUL
        } else if c.placed {
            EXACT
        } else {
            LIKELY
        };
    }
    PLAUSIBLE
}

/// Is a date in the unit the question's type noun names: a century for "which century", a
/// decade for "which decade"? Any date fits "when" or "which year".
fn in_unit(question: &Question, surface: &str) -> bool {
    let lower = surface.to_lowercase();
    match question.type_noun.as_deref() {
        Some("century") => lower.contains("centur"),
        Some("decade") => lower.split_whitespace().any(|w| w.len() == 5 && w.ends_with("0s")),
        _ => true,
    }
}

/// Is `noun` the head of the name, what the name says its bearer is: the word before the
/// first "of" ("Order of Merit" is an order), else the last word ("Port Selby Harbour" is a
/// harbour)? A one-word name is the noun itself, or a name that merely starts like it
/// ("Riverside").
pub(super) fn headed_by(name: &str, noun: &str) -> bool {
    let words: Vec<String> = text::words(name).collect();
    if words.len() < 2 {
        return false;
    }
    let head = words.iter().position(|w| w == "of").filter(|i| *i > 0).map_or(words.last(), |i| words.get(i - 1));
    head.is_some_and(|h| same_word(h, noun))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::reader::evidence::sentences;
    use crate::retrieve::testing::retrieval;

    #[test]
    fn a_passage_about_a_person_says_he_she_or_born() {
        let r = retrieval(&[
            ("Ada Lind", "Ada Lind is a sculptor. She carved the harbour gate."),
            ("Tove", "Tove was born in Orwick, Selby."),
            ("Tides", "Its study began with Nils Moe. He measured the tides for years."),
            ("Kell Observatory", "The Kell Observatory stands on a hill."),
        ]);
        let q = Question::parse("Who was the first keeper of the lighthouse?", None);
        let found = people(&sentences(&q, &r));
        let mut found: Vec<&str> = found.iter().map(String::as_str).collect();
        found.sort_unstable();
        assert_eq!(found, vec!["ada lind", "tove"], "the topic whose passage speaks of a man is no person");
    }

    #[test]
    fn the_fit_ladder_puts_the_asked_kind_first() {
        let typed = |surface: &str| Candidate { typed: true, ..Candidate::named(surface) };
        let q = Question::parse("Which mayor did Ada Lind work for?", None);
        assert!(type_fit(&q, &typed("April 1967"), false) < type_fit(&q, &typed("Tove Berg"), true));
        let amount = Question::parse("What amount of grain did the mill grind in 1910?", None);
        assert!(
            type_fit(&amount, &typed("County Road 7"), false) < type_fit(&amount, &typed("273,282"), false),
            "a name with a number in it is not an amount"
        );
        assert_eq!(type_fit(&amount, &typed("Five thousand"), false), EXACT);
        let order = Question::parse("Which order was the captain awarded?", None);
        assert!(
            type_fit(&order, &Candidate::named("Order of Merit"), false)
                > type_fit(&order, &Candidate::named("Harbour War"), false)
        );
        let where_ = Question::parse("Where was the keeper born?", None);
        let placed = Candidate { placed: true, ..Candidate::named("Orwick") };
        assert!(type_fit(&where_, &placed, false) > type_fit(&where_, &Candidate::named("Orwick"), false));
        assert!(type_fit(&where_, &Candidate::named("Orwick"), true) < type_fit(&where_, &placed, false), "a person");
    }

    #[test]
    fn a_name_headed_by_the_type_noun_is_of_that_type() {
        assert!(headed_by("Order of Merit", "order") && headed_by("Port Selby Harbour", "harbour"));
        assert!(
            !headed_by("Harbour Street Rovers", "harbour") && !headed_by("Merit", "order") && !headed_by("", "city")
        );
        assert!(!headed_by("Order", "order") && !headed_by("Riverside", "river"));
        let century = Question::parse("The mills were built during which century?", None);
        let year = Question::parse("Tide was released in which year?", None);
        assert!(in_unit(&century, "19th century") && !in_unit(&century, "2008") && in_unit(&year, "2008"));
    }

    #[test]
    fn the_type_noun_calls_a_name_in_apposition_outside_brackets() {
        let r = retrieval(&[
            (
                "Kell Airport",
                "Kell Airport (code: KLL, region: NKL) is a regional airport in Norway. The airport KLL opened in 1962.",
            ),
            ("Kell Hall", "It is in the city of Vasa, near the sculptor Dr. Lind's house."),
        ]);
        let q = Question::parse("What is the main regional airport in Kell?", None);
        let s = sentences(&q, &r);
        assert!(!called("airport", "NKL", &s[..1]) && !called("airport", "KLL", &s[..1]), "inside the aside");
        assert!(!called("airport", "Norway", &s), "\"an airport in Norway\" is not apposition");
        assert!(called("airport", "KLL", &s), "\"the airport KLL\" outside it");
        let closed = retrieval(&[("Kell", "It is the (airport) KLL.")]);
        assert!(!called("airport", "KLL", &sentences(&q, &closed)), "out of a closed aside");
        assert!(called("city", "Vasa", &s) && called("sculptor", "Lind", &s));
        assert!(
            after_place_preposition("born in ") && !after_place_preposition("is a ") && !after_place_preposition("")
        );
    }
}
