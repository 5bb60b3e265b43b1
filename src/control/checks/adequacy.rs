//! Adequacy: is the answer the kind of thing the question asks for? Besides the answer type
//! of the question's parse, the check reads the asking phrase itself ("what was the
//! population of ..." asks for a number whatever else the question says), and refuses the
//! answers a reader gives for a question's parts rather than for the question: the entity a
//! relative clause only describes on the way ("the city where she was born" for the
//! population of that city), one name where a plural asks for all of a list, and words that
//! measure, zone or qualify rather than name (a unit, a time zone, a nationality adjective).

use super::cited::{Line, lines};
use crate::control::answer::{AnswerForm, ReaderAnswer};
use crate::control::answer_type::{self, AnswerType};
use crate::control::question::{Question, same_word};
use crate::lexicon::{self, AMOUNT_NOUNS, ARTICLES, COPULAS, DATE_NOUNS, KIND_NOUNS, NATIONALITY_NOUNS, RELATIVES};
use crate::retrieve::Retrieval;
use crate::text;

/// Longest answer span, in words, that is still an answer rather than a passage.
const MAX_SPAN_WORDS: usize = 10;
/// What an answer the evidence never calls by the question's type noun is worth.
const UNTYPED_ADEQUACY: f32 = 0.7;
/// Words after "X is" or "X," within which a noun still calls X ("Beacon, an in-memory cache").
const CALLING_WINDOW: usize = 5;

pub(super) fn adequacy(q: &Question, answer: &ReaderAnswer, r: &Retrieval) -> (bool, f32, String) {
    let a = answer.answer.trim();
    let fail = |why: String| (false, 0.0, why);
    if a.is_empty() {
        return fail("no answer".into());
    }
    if a.starts_with('#') {
        return fail("the answer is a heading".into());
    }
    if answer.form == AnswerForm::Sentence {
        return if q.kind == AnswerType::Free {
            (true, 1.0, "free-form question answered by a sentence".into())
        } else {
            fail(format!("expected {:?}, got a whole sentence", q.kind))
        };
    }
    if a.split_whitespace().count() > MAX_SPAN_WORDS {
        return fail(format!("the answer has more than {MAX_SPAN_WORDS} words"));
    }
    if matches!(q.kind, AnswerType::Choice(_) | AnswerType::YesNo) {
        return if answer_type::fits(&q.kind, a) {
            (true, 1.0, format!("expected {:?}; `{a}` fits", q.kind))
        } else {
            fail(format!("expected {:?}; `{a}` does not fit", q.kind))
        };
    }
    if q.names(a) {
        return fail("the answer only repeats the question".into());
    }
    if !answer_type::fits(&q.kind, a) {
        return fail(format!("expected {:?}; `{a}` does not fit", q.kind));
    }
    if q.kind == AnswerType::Entity
        && (q.who() || q.where_())
        && a.chars().all(|c| c.is_ascii_digit() || c.is_whitespace() || c == ',')
    {
        return fail(format!("a {} question is not answered by a number", if q.who() { "who" } else { "where" }));
    }
    let lines = lines(r);
    let asked = asked_noun(&q.text);
    if let Some(why) = asked.as_deref().and_then(|noun| wrong_measure(noun, a)) {
        return fail(why);
    }
    if q.kind == AnswerType::Number
        && a.starts_with(|c: char| c.is_ascii_digit())
        && let Some(name) = named_by_number(a, &lines)
    {
        return fail(format!("`{a}` is the number in the name `{name}`, not an amount"));
    }
    if q.kind == AnswerType::Entity {
        let why = asked
            .as_deref()
            .and_then(|noun| one_of_a_list(noun, a))
            .or_else(|| described_on_the_way(q, asked.as_deref(), a, &lines))
            .or_else(|| not_a_name(q, asked.as_deref(), a, &lines));
        if let Some(why) = why {
            return fail(why);
        }
    }
    if let Some(noun) = q.type_noun.as_deref().filter(|_| q.kind == AnswerType::Entity)
        && !calls(&lines, a, noun)
    {
        return (
            true,
            UNTYPED_ADEQUACY,
            format!("expected {:?}; `{a}` fits, but no evidence calls it a {noun}", q.kind),
        );
    }
    (true, 1.0, format!("expected {:?}; `{a}` fits", q.kind))
}

/// The noun the question asks for, read here rather than taken from the parse: the first
/// content word after the question's "what" (or a "which" that opens it or follows a
/// preposition or a copula), whatever function words stand between ("what was the population
/// of", "what is the name of the river"). None for "who", "when", "where" and "how".
fn asked_noun(question: &str) -> Option<String> {
    let words: Vec<String> = text::words(question).collect();
    let opens = |i: usize| {
        words[i] == "what"
            || (words[i] == "which" && (i == 0 || lexicon::contains(lexicon::ASKING_BEFORE_WHICH, &words[i - 1])))
    };
    let at = (0..words.len()).find(|&i| opens(i))?;
    words[at + 1..]
        .iter()
        .find(|w| !text::is_stopword(w) && !lexicon::contains(KIND_NOUNS, w) && !w.chars().all(|c| c.is_ascii_digit()))
        .cloned()
}

/// A number or a date asked for by its noun ("what was the population", "in which year"),
/// answered by something else.
fn wrong_measure(noun: &str, answer: &str) -> Option<String> {
    if lexicon::contains(AMOUNT_NOUNS, noun) && !answer_type::looks_like_number(answer) {
        return Some(format!("the question asks for the {noun}, a number; `{answer}` is none"));
    }
    if lexicon::contains(DATE_NOUNS, noun) && !answer_type::looks_like_date(answer) {
        return Some(format!("the question asks for the {noun}, a date; `{answer}` is none"));
    }
    None
}

/// A plural asks for every member ("what actresses were involved"): one name is part of
/// the answer at best.
fn one_of_a_list(noun: &str, answer: &str) -> Option<String> {
    let plural = noun.len() > 3
        && noun.ends_with('s')
        && !["ss", "us", "is", "ics"].iter().any(|e| noun.ends_with(e))
        && !lexicon::contains(lexicon::SINGULARS_IN_S, noun);
    let several = answer.contains(',') || text::words(answer).any(|w| w == "and");
    (plural && !several).then(|| format!("the question asks for {noun}; `{answer}` names one"))
}

/// The nouns a relative clause describes in the question ("the cache that the gateway keeps
/// sessions in", "the city where she was born"): entities a multi-hop question goes through,
/// of which it asks something else. An answer the evidence calls by such a noun is that
/// intermediate entity, unless the question asks for that very noun ("which sculptor who
/// ...").
fn described_on_the_way(q: &Question, asked: Option<&str>, answer: &str, lines: &[Line<'_>]) -> Option<String> {
    let words: Vec<String> = text::words(&q.text).collect();
    let asked = asked.or(q.type_noun.as_deref());
    words
        .windows(2)
        .filter(|w| RELATIVES.contains(&w[1].as_str()) && !text::is_stopword(&w[0]))
        .map(|w| w[0].as_str())
        .filter(|noun| asked.is_none_or(|a| !same_word(a, noun)))
        .find(|noun| calls(lines, answer, noun))
        .map(|noun| format!("`{answer}` is the {noun} the question describes on the way, not what it asks of it"))
}

/// A unit, a time zone or an adjective of nationality where a thing is asked for: words
/// that measure, zone or qualify the answer's place rather than name it.
fn not_a_name(q: &Question, asked: Option<&str>, answer: &str, lines: &[Line<'_>]) -> Option<String> {
    let words: Vec<String> = text::words(answer).collect();
    let question: Vec<String> = text::words(&q.text).collect();
    let asks = |w: &str| question.iter().any(|x| x == w);
    if words.iter().any(|w| lexicon::contains(lexicon::UNITS, w))
        && words.iter().any(|w| w.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Some(format!("`{answer}` is a measure, not a name"));
    }
    // A zone's name ends in a capitalised "Time" ("Central European Time", "Eastern Time").
    let named_zone = words.len() >= 2 && answer.trim_end().ends_with(" Time");
    let zone = named_zone || words.iter().any(|w| lexicon::contains(lexicon::TIME_ZONES, w));
    if zone && !asks("zone") && !asks("timezone") {
        return Some(format!("`{answer}` is a time zone, which the question does not ask for"));
    }
    let nationality = asked.is_some_and(|n| lexicon::contains(NATIONALITY_NOUNS, n))
        || question.iter().any(|w| lexicon::contains(NATIONALITY_NOUNS, w));
    (words.len() == 1 && !nationality && qualifies(answer, lines))
        .then(|| format!("`{answer}` is an adjective in the evidence, not a name of what is asked"))
}

/// Is one-word `answer` a nationality-like adjective in the evidence: shaped like one
/// ("Swedish", "Nordic", "Australian") and written before a lower-case noun wherever the
/// evidence has it ("a Swedish sculptor")?
fn qualifies(answer: &str, lines: &[Line<'_>]) -> bool {
    let lower = answer.to_lowercase();
    if !lexicon::DEMONYM_ENDINGS.iter().any(|e| lower.ends_with(e)) {
        return false;
    }
    let uses: Vec<bool> = lines
        .iter()
        .flat_map(|l| {
            let spans = text::word_spans(l.text);
            let modifier = |i: usize| {
                spans
                    .get(i + 1)
                    .is_some_and(|(_, next)| next.starts_with(char::is_lowercase) && !text::is_stopword(next))
            };
            (0..spans.len()).filter(|&i| spans[i].1 == answer).map(modifier).collect::<Vec<_>>()
        })
        .collect();
    !uses.is_empty() && uses.iter().all(|modifier| *modifier)
}

/// The name a number in digits is part of wherever the evidence writes it: right after a
/// capitalised word that does not open the sentence and is no month ("PostgreSQL 16", "Route
/// 66", "Apollo 11"), which is a version, a road or a mission, not a count.
fn named_by_number(answer: &str, lines: &[Line<'_>]) -> Option<String> {
    let mut names = Vec::new();
    for l in lines {
        let spans = text::word_spans(l.text);
        for i in (0..spans.len()).filter(|&i| spans[i].1 == answer) {
            let before = i.checked_sub(1).map(|b| spans[b]);
            match before {
                Some((at, word))
                    if at > 0
                        && word.starts_with(char::is_uppercase)
                        && !lexicon::is_month(word)
                        && l.text[at + word.len()..spans[i].0].chars().all(char::is_whitespace) =>
                {
                    names.push(format!("{word} {answer}"))
                }
                _ => return None,
            }
        }
    }
    names.into_iter().next()
}

/// Does the evidence call `answer` a `noun`: a name headed by it ("Beacon Cache"), the noun
/// right before it ("the cache Beacon"), or within a few words
/// after a comma or a copula that follows it ("Beacon, an in-memory cache", "Beacon is the
/// team's cache"); or its own passage saying "it is a ... cache"?
fn calls(lines: &[Line<'_>], answer: &str, noun: &str) -> bool {
    let name: Vec<String> = text::words(answer).collect();
    if name.len() > 1 && name.last().is_some_and(|w| same_word(w, noun)) {
        return true;
    }
    let lower = answer.to_lowercase();
    lines.iter().any(|l| {
        let sentence = l.text.to_lowercase();
        let spans = text::word_spans(&sentence);
        let own = text::is_about(l.title, answer)
            && spans.first().is_some_and(|(_, w)| lexicon::contains(lexicon::PRONOUNS, w))
            && spans.get(1).is_some_and(|(_, w)| COPULAS.contains(w));
        if own && spans.iter().skip(2).take(CALLING_WINDOW).any(|(_, w)| same_word(w, noun)) {
            return true;
        }
        let Some(at) = text::find_words(&sentence, &lower) else {
            return false;
        };
        let before: Vec<&str> =
            spans.iter().filter(|(b, _)| *b < at.start).map(|(_, w)| *w).filter(|w| !ARTICLES.contains(w)).collect();
        let after: Vec<&str> = spans.iter().filter(|(b, _)| *b >= at.end).map(|(_, w)| *w).collect();
        let rest = sentence[at.end..].trim_start();
        let opens = rest.starts_with(',') || after.first().is_some_and(|w| COPULAS.contains(w));
        before.last().is_some_and(|w| same_word(w, noun))
            || (opens && after.iter().take(CALLING_WINDOW).any(|w| same_word(w, noun)))
    })
}

#[cfg(test)]
mod tests;
