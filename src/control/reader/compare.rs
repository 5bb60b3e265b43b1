//! Questions that compare what the evidence says of named entities: yes/no ("are both ...")
//! and "A or B" choices.

use std::collections::HashSet;

use super::evidence::{Sentence, coverage, profile};
use crate::control::answer::{AnswerForm, ReaderAnswer};
use crate::control::question::Question;
use crate::ingest::extract::entity_mentions;
use crate::kb::model::ChunkId;
use crate::lexicon::{EARLIER, LATER};
use crate::text;

/// Share of a property's words an entity's passages must state for "yes".
const STATED: f32 = 0.5;
/// How decisive "they share a name" is for "the same X": sharing is evidence, not proof.
const SHARED_NAME_DECISIVENESS: f32 = 0.6;
/// How decisive a named property ("has an OBE") is, found or missing in each passage.
const NAMED_PROPERTY_DECISIVENESS: f32 = 0.8;
/// A yes/no answer's confidence is this plus [`YES_NO_SPREAD`] times its decisiveness: never
/// certain, since absence from the evidence is weak proof of "no".
const YES_NO_FLOOR: f32 = 0.3;
const YES_NO_SPREAD: f32 = 0.4;
/// Confidence in a choice made by comparing two years.
const YEAR_CHOICE_CONFIDENCE: f32 = 0.65;
/// A choice by which option's passages state more of the question: this plus
/// [`CHOICE_SPREAD`] times the difference.
const CHOICE_FLOOR: f32 = 0.3;
const CHOICE_SPREAD: f32 = 0.5;

/// Yes/no: "yes" when every entity the question names has the property its other words
/// describe; for "the same X", when the entities' passages share an entity besides those the
/// question names. No passage about an entity: no answer.
pub(super) fn yes_no(question: &Question, sentences: &[Sentence<'_>]) -> ReaderAnswer {
    let named: Vec<&String> = question
        .entities
        .iter()
        .filter(|e| {
            question.entities.iter().all(|o| o == *e || !text::normalize_answer(o).contains(&text::normalize_answer(e)))
        })
        .collect();
    // The entities the question asks about have passages of their own; a name without one
    // ("Nordic" in "are both ferries Nordic ships?") is part of the property.
    let titles: HashSet<String> =
        sentences.iter().filter_map(|s| text::title_entity(s.title)).map(|t| text::normalize_answer(&t)).collect();
    let (subjects, property): (Vec<&String>, Vec<&String>) =
        named.iter().partition(|e| titles.contains(&text::normalize_answer(e)));
    let (entities, property) = if subjects.is_empty() { (named, Vec::new()) } else { (subjects, property) };
    if entities.is_empty() {
        return ReaderAnswer::default();
    }
    let profiles: Vec<Vec<&Sentence<'_>>> = entities.iter().map(|e| profile(e, sentences)).collect();
    if profiles.iter().any(Vec::is_empty) {
        return ReaderAnswer::default();
    }
    let used: Vec<ChunkId> = profiles.iter().filter_map(|p| p.first().map(|s| s.chunk)).collect();
    let same = text::words(&question.text).any(|w| w == "same");
    let (yes, decisiveness) = if same && entities.len() >= 2 {
        let named = |p: &Vec<&Sentence<'_>>| -> HashSet<String> {
            p.iter()
                .flat_map(|s| entity_mentions(s.text))
                .filter(|m| !question.names(m))
                .map(|m| text::normalize_answer(&m))
                .collect()
        };
        let first = named(&profiles[0]);
        let shared = profiles[1..].iter().all(|p| !named(p).is_disjoint(&first));
        (shared, SHARED_NAME_DECISIVENESS)
    } else if !property.is_empty() {
        // A property the question names ("has an OBE", "Nordic ships") decides: each
        // entity's passages must name it too.
        let all = profiles.iter().all(|p| property.iter().all(|name| p.iter().any(|s| text::names(s.text, name))));
        (all, NAMED_PROPERTY_DECISIVENESS)
    } else {
        let mut words = question.relation_words.clone();
        words.extend(question.type_noun.clone());
        let least = profiles.iter().map(|p| coverage(&words, p)).fold(1.0f32, f32::min);
        (least >= STATED, if least >= STATED { least } else { 1.0 - least })
    };
    ReaderAnswer {
        answer: if yes { "yes" } else { "no" }.into(),
        used,
        confidence: YES_NO_FLOOR + YES_NO_SPREAD * decisiveness,
        form: AnswerForm::Span,
        path: Vec::new(),
    }
}

/// "A or B": by the years of the two when the question compares time ("opened first",
/// "oldest"), else by which one's passages state more of the question's words.
pub(super) fn choice(question: &Question, options: &[String], sentences: &[Sentence<'_>]) -> ReaderAnswer {
    let profiles: Vec<Vec<&Sentence<'_>>> = options.iter().map(|o| profile(o, sentences)).collect();
    if profiles.len() != 2 || profiles.iter().any(Vec::is_empty) {
        return ReaderAnswer::default();
    }
    let words: Vec<String> = text::words(&question.text).collect();
    let earlier = words.iter().any(|w| EARLIER.contains(&w.as_str()));
    let later = words.iter().any(|w| LATER.contains(&w.as_str()));
    let pick = |i: usize, confidence: f32| ReaderAnswer {
        answer: options[i].clone(),
        used: profiles[i].iter().take(1).map(|s| s.chunk).collect(),
        confidence,
        form: AnswerForm::Span,
        path: Vec::new(),
    };
    if earlier || later {
        let years: Vec<Option<u32>> = profiles.iter().map(|p| first_year(question, p)).collect();
        if let [Some(a), Some(b)] = years[..]
            && a != b
        {
            let a_wins = (a < b) == earlier;
            return pick(if a_wins { 0 } else { 1 }, YEAR_CHOICE_CONFIDENCE);
        }
        return ReaderAnswer::default();
    }
    let mut property = question.relation_words.clone();
    property.extend(question.type_noun.clone());
    let scores: Vec<f32> = profiles.iter().map(|p| coverage(&property, p)).collect();
    if (scores[0] - scores[1]).abs() < f32::EPSILON {
        return ReaderAnswer::default();
    }
    let i = usize::from(scores[1] > scores[0]);
    pick(i, CHOICE_FLOOR + CHOICE_SPREAD * (scores[0] - scores[1]).abs())
}

/// The year in the sentence about an entity that states the most of the question's relation
/// words (its own passage's first year when none does).
fn first_year(question: &Question, profile: &[&Sentence<'_>]) -> Option<u32> {
    let year = |s: &str| {
        text::words(s).find(|w| w.len() == 4 && w.chars().all(|c| c.is_ascii_digit())).and_then(|w| w.parse().ok())
    };
    profile
        .iter()
        .filter_map(|s| year(s.text).map(|y| (question.relations_in(s.text).len(), std::cmp::Reverse(s.rank), y)))
        .max_by_key(|(n, r, _)| (*n, *r))
        .map(|(_, _, y)| y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::reader::evidence::sentences;
    use crate::retrieve::testing::retrieval;

    #[test]
    fn a_property_the_question_names_decides_a_yes_no_question() {
        let r = retrieval(&[
            ("Ada Lind", "Ada Lind is a Swedish sculptor. She was awarded the Kell Medal in 2012."),
            ("Tove Berg", "Tove Berg is a Danish sculptor and painter."),
        ]);
        let q = Question::parse("The sculptor Ada Lind holds the Kell Medal. Does the sculptor Tove Berg also?", None);
        let answer = yes_no(&q, &sentences(&q, &r));
        assert_eq!(answer.answer, "no", "both are sculptors, but only one holds the medal");
        let both = retrieval(&[
            ("Ada Lind", "Ada Lind is a Swedish sculptor. She was awarded the Kell Medal in 2012."),
            ("Tove Berg", "Tove Berg is a Danish sculptor. She received the Kell Medal for her reliefs."),
        ]);
        assert_eq!(yes_no(&q, &sentences(&q, &both)).answer, "yes");
    }

    #[test]
    fn a_choice_in_time_compares_the_years_of_the_two() {
        let r = retrieval(&[
            ("Kell Mill", "Kell Mill opened in 1881 on the river."),
            ("Orwick Mill", "Orwick Mill opened in 1902 beside the canal."),
        ]);
        let options = vec!["Kell Mill".to_string(), "Orwick Mill".to_string()];
        let q = Question::parse("Which opened first, Kell Mill or Orwick Mill?", None);
        assert_eq!(choice(&q, &options, &sentences(&q, &r)).answer, "Kell Mill");
        let q = Question::parse("Which opened later, Kell Mill or Orwick Mill?", None);
        assert_eq!(choice(&q, &options, &sentences(&q, &r)).answer, "Orwick Mill");
        let missing = retrieval(&[("Kell Mill", "Kell Mill opened in 1881 on the river.")]);
        assert_eq!(choice(&q, &options, &sentences(&q, &missing)).answer, "", "no passage about one: no answer");
    }
}
