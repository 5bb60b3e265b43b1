//! Grounding: a cited sentence states the answer together with an entity of the question
//! (or a bridge entity on the reader's path), with one of the question's relations between
//! them.

use super::cited::{Line, lines, says};
use crate::control::answer::{AnswerForm, ReaderAnswer};
use crate::control::answer_type::AnswerType;
use crate::control::question::{Question, same_word};
use crate::lexicon;
use crate::retrieve::Retrieval;
use crate::text;

/// Grounding through a bridge entity rather than one the question names is weaker evidence.
const BRIDGE_GROUNDING: f32 = 0.8;

pub(super) fn grounding(q: &Question, answer: &ReaderAnswer, r: &Retrieval) -> (bool, f32, String) {
    if answer.answer.trim().is_empty() {
        return (false, 0.0, "no answer to ground".into());
    }
    let cited: Vec<Line<'_>> = lines(r).into_iter().filter(|s| answer.used.contains(&s.chunk)).collect();
    if cited.is_empty() {
        return (false, 0.0, "the answer cites no retrieved chunk".into());
    }
    match (&q.kind, answer.form) {
        (_, AnswerForm::Sentence) => {
            let found = cited.iter().any(|s| s.text.trim() == answer.answer.trim());
            let reason =
                if found { "the answer is a cited sentence" } else { "the answer sentence is not in the cited chunks" };
            return (found, 1.0, reason.into());
        }
        (AnswerType::YesNo, _) | (AnswerType::Choice(_), _) => {
            let named = |e: &String| cited.iter().any(|s| says(s.text, e) || text::is_about(s.title, e));
            let missing: Vec<&String> = q.entities.iter().filter(|e| !named(e)).collect();
            let pass = missing.is_empty() || (matches!(q.kind, AnswerType::Choice(_)) && named(&answer.answer));
            let reason = if pass {
                "the cited passages describe the compared entities".to_string()
            } else {
                format!("no cited passage describes {missing:?}")
            };
            return (pass, 1.0, reason);
        }
        _ => {}
    }
    let bridges: Vec<String> = answer
        .path
        .iter()
        .flat_map(|h| [h.subject.clone(), h.object.clone()])
        .filter(|n| {
            let n = text::normalize_answer(n);
            !n.is_empty() && n != text::normalize_answer(&answer.answer)
        })
        .collect();
    let mut best: Option<(f32, String)> = None;
    for s in cited.iter().filter(|s| says(s.text, &answer.answer)) {
        for (anchors, strength) in [(&q.entities, 1.0), (&bridges, BRIDGE_GROUNDING)] {
            for anchor in anchors.iter() {
                if let Some(relation) = relation_between(q, s, anchor, &answer.answer)
                    && best.as_ref().is_none_or(|(b, _)| strength > *b)
                {
                    let reason = format!("“{}” states `{}` -{relation}- `{anchor}`", s.text.trim(), answer.answer);
                    best = Some((strength, reason));
                }
            }
        }
    }
    match best {
        Some((score, reason)) => (true, score, reason),
        None => (
            false,
            0.0,
            format!(
                "no cited sentence links `{}` to the question's entities by one of its relations ({})",
                answer.answer,
                q.relation_words.join(", ")
            ),
        ),
    }
}

/// The question's relation word that sentence `s` puts between `anchor` and `answer` (or
/// anywhere in it when `anchor` is what the sentence's passage is about and the sentence
/// does not name it).
fn relation_between(q: &Question, s: &Line<'_>, anchor: &str, answer: &str) -> Option<String> {
    let lower = s.text.to_lowercase();
    let answer_at = text::find_words(&lower, &answer.to_lowercase())?;
    let relations = relations_for(q, q.entities.iter().any(|e| e == anchor).then_some(anchor));
    let range = match text::find_words(&lower, &anchor.to_lowercase()) {
        Some(anchor_at) if anchor_at.start < answer_at.start => anchor_at.end..answer_at.start,
        Some(anchor_at) => answer_at.end..anchor_at.start,
        None if text::is_about(s.title, anchor) => 0..lower.len(),
        None => return None,
    };
    let start = range.start.min(range.end);
    let between = &lower[start..range.end.max(range.start)];
    // A relation after the answer that only "and" joins to it is another clause's ("born in
    // 1899 and founded Lund Chemicals" does not say Lund Chemicals was founded in 1899).
    // Offsets into the lower-cased text are the sentence's where no letter changed its length.
    let cased = if s.text.len() == lower.len() { s.text } else { lower.as_str() };
    text::word_spans(between)
        .into_iter()
        .filter(|(at, _)| {
            let joint = answer_at.end..start + at;
            start + at < answer_at.end
                || !cased.get(joint.clone()).or_else(|| lower.get(joint)).is_some_and(text::joins_next_clause)
        })
        .map(|(_, w)| w)
        .find(|w| relations.iter().any(|r| same_word(w, r)))
        .map(str::to_string)
        .or_else(|| lifespan(q, between, &lower[answer_at.end..]))
        .or_else(|| whole_chain(q, &lower, answer_at.start))
}

/// The relation words that may link `anchor` to the answer: those of the clause that asks
/// and those of the anchor's own clause, where commas set clauses apart. In "Ada Lind, known
/// for her film posters of stars like Mira Holt, is mother to which actress?" the answer
/// must be linked by "mother" (the asking clause) or, to Mira Holt, by the words of the clause
/// naming her, not by "film", which only describes Ada Lind. All the relation words for a
/// question of one clause, or where those clauses have none.
fn relations_for(q: &Question, anchor: Option<&str>) -> Vec<String> {
    let clauses: Vec<&str> = q.text.split([',', ';']).collect();
    let asking = clauses.iter().rev().find(|c| text::words(c).any(|w| lexicon::is_wh(&w)));
    let Some(asking) = asking.filter(|_| clauses.len() > 1) else {
        return q.relation_words.clone();
    };
    let own = anchor.and_then(|a| clauses.iter().find(|c| text::names(c, a)));
    let words: Vec<String> = text::words(asking).chain(own.into_iter().flat_map(|c| text::words(c))).collect();
    let allowed: Vec<String> =
        q.relation_words.iter().filter(|r| words.iter().any(|w| same_word(w, r))).cloned().collect();
    if allowed.is_empty() { q.relation_words.clone() } else { allowed }
}

/// The question's birth or death word, when the answer is a date a lifespan states as that
/// event ([`text::lifespan_event`]).
fn lifespan(q: &Question, between: &str, after: &str) -> Option<String> {
    let event = text::lifespan_event(between, after)?;
    q.relation_words.iter().find(|r| same_word(r, event.word())).cloned()
}

/// A sentence that states every relation of a chain of two or more, with an entity of the
/// question and the answer as the object of one of them (a relation word at most two words
/// before it: "studied in Glasgow"), states the chain through its subject: "He studied in
/// Glasgow and later founded Bergen Marine Works" answers "where did the founder of Bergen
/// Marine Works study?" though "founded" stands between Glasgow and the question's entity.
/// "a Norwegian sea captain born in Tromsø" does not make "Norwegian" where he was born.
fn whole_chain(q: &Question, sentence: &str, answer_at: usize) -> Option<String> {
    let words: Vec<String> = text::words(sentence).collect();
    let stated = |r: &String| words.iter().any(|w| same_word(w, r));
    let before: Vec<String> = text::words(&sentence[..answer_at]).collect();
    let object = before.iter().rev().take(2).any(|w| q.relation_words.iter().any(|r| same_word(w, r)));
    (q.relation_words.len() >= 2 && object && q.relation_words.iter().all(stated)).then(|| q.relation_words.join(" + "))
}

#[cfg(test)]
mod tests;
