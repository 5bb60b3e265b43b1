//! The embedded reader: answers the way the graph was walked. Candidates are the entities
//! reached from the question's seeds along evidence edges whose relations state the
//! question's relation words ([`walk`]), and the entity mentions and typed spans (dates,
//! numbers) of the sentences that best support the question ([`spans`], over the sentence
//! [`chains`] of the [`evidence`]). Each is scored by path alignment, sentence support, and
//! fit to the answer type ([`typing`]); an entity the question names is never a candidate.
//! The score of the best candidate, discounted by how close the runner-up comes, is the
//! reader's confidence: an ambiguous path gives a low one, and the controller abstains.
//! Yes/no and "A or B" questions are read by [`compare`].
//!
//! The file graph is a tree: `evidence` and `candidate` are leaves, every other file reads
//! them, and only this one reads the others.

mod candidate;
mod chains;
mod compare;
mod evidence;
mod spans;
mod typing;
mod walk;

use std::collections::HashMap;

use self::candidate::Candidate;
use self::evidence::{Sentence, TermWeights, sentences};
use super::answer::{AnswerForm, ReaderAnswer};
use super::answer_type::AnswerType;
use super::question::Question;
use crate::kb::Kb;
use crate::kb::model::ChunkId;
use crate::lexicon::{self, NAME_SUFFIXES};
use crate::retrieve::lead::MENTIONS;
use crate::retrieve::{PathHop, Retrieval};
use crate::text;

/// Temperature of the softmax over candidate scores whose top share is the confidence: a
/// runner-up 0.05 behind counts e^-1 as much as the winner.
const TEMPERATURE: f32 = 0.05;
/// Candidates that share the probability mass (the long tail of weak mentions does not).
const CONTENDERS: usize = 10;
/// Weight of path alignment against sentence support in a candidate's score, in a graph of
/// relation-grade edges (LLM, imported or curated triples). A rule-made edge's label is only
/// the words between two mentions, so the weight shrinks with the KB's share of them.
const PATH_WEIGHT: f32 = 0.6;
/// Most confidence in a sentence answer to a free-form question, for a sentence stating all
/// of its words. The sentence that restates a question best is where its answer may be, not
/// an answer the checks can verify ("how are X and Y connected?" is best matched by a
/// sentence naming both), so it stays below the default `gate.min_answer_confidence`: the
/// query abstains with the sentence as its candidate and the evidence to read.
const SENTENCE_CONFIDENCE: f32 = 0.2;
/// Share of its type fit the entity the lead passage links to keeps as an answer: it is the
/// bridge of a two-hop question more often than its answer.
const BRIDGE_FIT: f32 = 0.5;
/// The best candidate's confidence before the runner-ups share it: half for being the best,
/// half its score.
const WINNER_FLOOR: f32 = 0.5;

/// Reads an answer out of `retrieval`; `kb` gives the edges between the retrieved chunks'
/// entities.
pub fn read(kb: &Kb, question: &Question, retrieval: &Retrieval) -> ReaderAnswer {
    let sentences = sentences(question, retrieval);
    match &question.kind {
        AnswerType::YesNo => compare::yes_no(question, &sentences),
        AnswerType::Choice(options) => compare::choice(question, options, &sentences),
        AnswerType::Free => sentence_answer(&sentences),
        AnswerType::Date | AnswerType::Number | AnswerType::Entity => span_answer(kb, question, retrieval, &sentences),
    }
}

/// The sentence that states the most of a free-form question, at a confidence the checks
/// never accept alone.
fn sentence_answer(sentences: &[Sentence<'_>]) -> ReaderAnswer {
    let Some(best) = sentences.iter().max_by(|a, b| a.overlap.total_cmp(&b.overlap).then(b.rank.cmp(&a.rank))) else {
        return ReaderAnswer::default();
    };
    ReaderAnswer {
        answer: best.text.trim().to_string(),
        used: vec![best.chunk],
        confidence: best.overlap * SENTENCE_CONFIDENCE,
        form: AnswerForm::Sentence,
        path: Vec::new(),
    }
}

/// A name, date or amount: the best of the walk's and the spans' candidates.
fn span_answer(kb: &Kb, question: &Question, retrieval: &Retrieval, sentences: &[Sentence<'_>]) -> ReaderAnswer {
    let mut candidates: HashMap<String, Candidate> = HashMap::new();
    walk::walk(kb, question, retrieval, &mut candidates);
    let chains = chains::chains(sentences, &TermWeights::new(kb, question));
    spans::read_spans(question, sentences, &chains, &mut candidates);
    // A passage about a candidate that calls it by the type noun ("Ada Lind is a
    // Swedish-born sculptor"), for candidates only the graph walk found.
    if let Some(noun) = &question.type_noun {
        for c in candidates.values_mut().filter(|c| !c.typed) {
            c.typed = typing::called(noun, &c.surface, sentences);
        }
    }
    let scored = score(kb, question, retrieval, sentences, candidates);
    let Some((top, best)) = scored.first() else {
        return ReaderAnswer::default();
    };
    // The winner's share of a softmax over the contenders, scaled by how good it is.
    let mass: f32 = scored.iter().take(CONTENDERS).map(|(s, _)| ((s - top) / TEMPERATURE).exp()).sum();
    let confidence = ((WINNER_FLOOR + (1.0 - WINNER_FLOOR) * top) / mass).clamp(0.0, 1.0);
    let (used, path) = cite(question, sentences, best);
    let answer = fullest_name(question, &best.surface, sentences).unwrap_or_else(|| best.surface.clone());
    ReaderAnswer { answer, used, confidence, form: AnswerForm::Span, path }
}

/// The fuller name the evidence writes for a one-word answer: "Selby" is "Ivar Selby" where a
/// passage names him so (or is titled so), and "Ivar K. Selby Jr." where one also writes
/// that, the shorter names being the longest with words left out. A candidate read where the
/// evidence used the surname alone is the person the full name names; with two people of
/// that name the word alone is all the reader knows.
fn fullest_name(question: &Question, surface: &str, sentences: &[Sentence<'_>]) -> Option<String> {
    if surface.split_whitespace().count() != 1 || !surface.starts_with(char::is_uppercase) {
        return None;
    }
    let ends_in_surface = |name: &String| {
        let mut words: Vec<&str> = name.split_whitespace().map(|w| w.trim_end_matches([',', '.'])).collect();
        while words.len() > 1 && words.last().is_some_and(|w| lexicon::contains(NAME_SUFFIXES, w)) {
            words.pop();
        }
        (2..=4).contains(&words.len()) && words.last() == Some(&surface)
    };
    let mut fuller: Vec<String> = sentences
        .iter()
        .flat_map(|s| written_names(s.text, surface).into_iter().chain(text::title_entity(s.title)))
        .filter(|name| ends_in_surface(name) && !question.names(name))
        .collect();
    fuller.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    fuller.dedup();
    let longest = fuller.first()?;
    fuller.iter().all(|other| other == longest || text::is_about(other, longest)).then(|| longest.clone())
}

/// The names `text` writes around each mention of the word `surface`: the capitalised words
/// and initials right before it ("Ivar K. Selby"), and a suffix right after it ("Selby
/// Jr."), stopping at punctuation, a function word or an honorific ("Mr. Selby" is no name).
fn written_names(text: &str, surface: &str) -> Vec<String> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let bare = |t: &str| t.trim_matches(|c: char| !c.is_alphanumeric()).to_string();
    let initial = |t: &str| t.len() == 2 && t.starts_with(char::is_uppercase) && t.ends_with('.');
    let joins = |t: &str| {
        t.starts_with(char::is_uppercase)
            && !text::is_stopword(&bare(t).to_lowercase())
            && !lexicon::contains(lexicon::ABBREVIATIONS, t)
            && (initial(t) || t.chars().last().is_some_and(char::is_alphanumeric))
    };
    let mut names = Vec::new();
    for (i, token) in tokens.iter().enumerate().filter(|(_, t)| bare(t) == surface) {
        let mut start = i;
        while start > 0 && joins(tokens[start - 1]) {
            start -= 1;
        }
        let suffix = !token.ends_with([',', ';', ':', '.'])
            && tokens.get(i + 1).is_some_and(|next| lexicon::contains(NAME_SUFFIXES, &bare(next)));
        let end = if suffix { i + 2 } else { i + 1 };
        let name = tokens[start..end].join(" ");
        names.push(name.trim_end_matches([',', ';', ':']).to_string());
    }
    names
}

/// Candidates by score, best first: type fit times the mix of path alignment and sentence
/// support.
fn score(
    kb: &Kb,
    question: &Question,
    retrieval: &Retrieval,
    sentences: &[Sentence<'_>],
    candidates: HashMap<String, Candidate>,
) -> Vec<(f32, Candidate)> {
    let people = typing::people(sentences);
    let path_weight = PATH_WEIGHT * (1.0 - kb.rule_edge_share());
    // The page the lead passage links to is the bridge: the answer to the question's inner
    // description ("the composer whose teacher is whom": the composer), of which the
    // question asks something else. It keeps part of its fit, for the questions the first
    // hop answers whole, and all of it when the evidence calls it by the question's type
    // noun: then the question asks for it.
    let bridge: Option<String> = retrieval
        .paths
        .iter()
        .flatten()
        .find(|h| h.relation == MENTIONS)
        .map(|h| text::normalize_answer(&h.object))
        .filter(|b| !question.names(b));
    let mut scored: Vec<(f32, Candidate)> = candidates
        .into_values()
        .filter(|c| !c.surface.is_empty())
        .filter_map(|c| {
            let key = text::normalize_answer(&c.surface);
            let mut fit = typing::type_fit(question, &c, people.contains(&key));
            if !c.typed && bridge.as_ref() == Some(&key) {
                fit *= BRIDGE_FIT;
            }
            // The type gates the evidence: a well-supported span of the wrong kind scores low.
            (fit > 0.0).then_some((fit * (path_weight * c.path + (1.0 - path_weight) * c.support), c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.surface.cmp(&b.1.surface)));
    scored
}

/// The chunks an answer cites and the path it went: the supporting sentence's chunk, the
/// graph path when the walk found the answer (else the sentence chain that did), and the
/// best sentence naming the answer with an entity of the question, which ties it to what
/// was asked.
fn cite(question: &Question, sentences: &[Sentence<'_>], best: &Candidate) -> (Vec<ChunkId>, Vec<PathHop>) {
    let mut used: Vec<ChunkId> = best.support_chunk.into_iter().collect();
    let path = if best.path_hops.is_empty() || best.support > best.path {
        best.link.iter().cloned().collect()
    } else {
        best.path_hops.clone()
    };
    let tie = sentences
        .iter()
        .filter(|s| {
            let about = |e: &String| text::names(s.text, e) || s.is_about(e);
            text::names(s.text, &best.surface) && question.entities.iter().any(about)
        })
        .max_by(|a, b| a.overlap.total_cmp(&b.overlap).then(b.rank.cmp(&a.rank)));
    for chunk in path.iter().map(|hop| hop.chunk).chain(tie.map(|s| s.chunk)) {
        if !used.contains(&chunk) {
            used.push(chunk);
        }
    }
    (used, path)
}

#[cfg(test)]
mod tests;
