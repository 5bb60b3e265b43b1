//! The embedded checks, each able to fail:
//! - [`relevance`]: the evidence covers every entity the question names;
//! - [`grounding`]: a cited sentence states the answer together with a question entity (or
//!   a bridge entity on the reader's path), with one of the question's relations between
//!   them;
//! - [`adequacy`]: the answer is of the kind the question asks for, as the check reads the
//!   question itself; not the entity the question only describes on the way (the
//!   intermediate hop); not a unit, a time zone or an adjective where a thing is asked; all
//!   of a list; short, and not copied from the question.
//!
//! The checks read the question, the answer and the cited text with their own logic: they
//! share nothing with the reader but the question's parse and the text primitives below
//! both, so a mistake of the reader's is not repeated by the check that should catch it.
//! Each verdict carries a score in [0, 1] that the controller folds into the answer's
//! confidence.

mod adequacy;
mod cited;
mod grounding;
mod relevance;

use super::answer::{Check, ReaderAnswer, Verdict};
use super::question::Question;
use crate::retrieve::Retrieval;

pub fn run(check: Check, question: &str, answer: &ReaderAnswer, retrieval: Option<&Retrieval>) -> Verdict {
    let q = Question::parse(question, retrieval);
    let (pass, score, reason) = match (check, retrieval) {
        (_, None) => (false, 0.0, "no evidence was retrieved".to_string()),
        (Check::Relevance, Some(r)) => relevance::relevance(&q, r),
        (Check::Grounding, Some(r)) => grounding::grounding(&q, answer, r),
        (Check::Adequacy, Some(r)) => adequacy::adequacy(&q, answer, r),
    };
    Verdict { check, pass, score: if pass { score } else { 0.0 }, reason }
}

#[cfg(test)]
fn span(answer: &str, used: &[u32], path: Vec<crate::retrieve::PathHop>) -> ReaderAnswer {
    use super::answer::AnswerForm;
    ReaderAnswer { answer: answer.into(), used: used.to_vec(), confidence: 0.9, form: AnswerForm::Span, path }
}
