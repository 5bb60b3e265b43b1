//! What kind of answer a question asks for. Shared by the extractive reader (what to pick)
//! and the adequacy validator (whether the answer is of that kind).

use serde::Serialize;

use crate::ingest::extract::entity_mentions;
use crate::text;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "options")]
pub enum AnswerType {
    Date,
    Number,
    /// A named entity: person, place, organisation, work.
    Entity,
    YesNo,
    /// One of two named options ("who was born first, A or B?").
    Choice(Vec<String>),
    Free,
}

const YES_NO_OPENERS: &[&str] =
    &["is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would", "should"];

pub fn classify(question: &str) -> AnswerType {
    let lower = question.trim().to_lowercase();
    let first = lower.split_whitespace().next().unwrap_or("");
    if let Some(options) = choice_options(question) {
        return AnswerType::Choice(options);
    }
    if YES_NO_OPENERS.contains(&first) {
        return AnswerType::YesNo;
    }
    if lower.starts_with("when")
        || lower.contains("what year")
        || lower.contains("which year")
        || lower.contains("what date")
    {
        return AnswerType::Date;
    }
    if lower.contains("how many")
        || lower.contains("how much")
        || lower.contains("how old")
        || lower.contains("how long")
    {
        return AnswerType::Number;
    }
    if ["who", "whom", "whose", "where", "which", "what"].contains(&first) || lower.contains(" who ") {
        return AnswerType::Entity;
    }
    AnswerType::Free
}

/// "A or B" comparisons: the two capitalised options around the last " or ".
fn choice_options(question: &str) -> Option<Vec<String>> {
    let idx = question.rfind(" or ")?;
    let (left, right) = (&question[..idx], &question[idx + 4..]);
    let before = entity_mentions(left).pop()?;
    let after = entity_mentions(right).into_iter().next()?;
    let adjacent = left.trim_end().trim_end_matches(',').ends_with(before.as_str());
    adjacent.then(|| vec![before, after])
}

pub fn looks_like_date(answer: &str) -> bool {
    answer.split(|c: char| !c.is_alphanumeric()).any(|w| {
        (w.len() == 4 && w.chars().all(|c| c.is_ascii_digit()))
            || crate::text::MONTHS.contains(&w.to_lowercase().as_str())
            || w.ends_with("s") && w.len() == 5 && w[..4].chars().all(|c| c.is_ascii_digit())
    })
}

pub fn looks_like_number(answer: &str) -> bool {
    const WORDS: &[&str] = &[
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "hundred",
        "thousand", "million", "billion",
    ];
    answer.chars().any(|c| c.is_ascii_digit()) || text::words(answer).any(|w| WORDS.contains(&w.as_str()))
}

/// Does `answer` have the shape `kind` asks for?
pub fn fits(kind: &AnswerType, answer: &str) -> bool {
    let answer = answer.trim();
    if answer.is_empty() {
        return false;
    }
    match kind {
        AnswerType::Date => looks_like_date(answer),
        AnswerType::Number => looks_like_number(answer),
        AnswerType::Entity => answer.chars().any(|c| c.is_uppercase() || c.is_ascii_digit()),
        AnswerType::YesNo => matches!(text::normalize_answer(answer).as_str(), "yes" | "no"),
        AnswerType::Choice(options) => {
            let a = text::normalize_answer(answer);
            options.iter().any(|o| {
                let o = text::normalize_answer(o);
                a.contains(&o) || o.contains(&a)
            })
        }
        AnswerType::Free => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_question_kinds() {
        assert_eq!(classify("When was the Eiffel Tower built?"), AnswerType::Date);
        assert_eq!(classify("How many members does the band have?"), AnswerType::Number);
        assert_eq!(classify("Who founded Microsoft?"), AnswerType::Entity);
        assert_eq!(classify("Is Paris the capital of France?"), AnswerType::YesNo);
        assert_eq!(
            classify("Who was born first, Albert Einstein or Niels Bohr?"),
            AnswerType::Choice(vec!["Albert Einstein".into(), "Niels Bohr".into()])
        );
    }

    #[test]
    fn fits_checks_shape() {
        assert!(fits(&AnswerType::Date, "14 March 1879"));
        assert!(!fits(&AnswerType::Date, "Albert Einstein"));
        assert!(fits(&AnswerType::Number, "three"));
        assert!(fits(&AnswerType::YesNo, "Yes."));
        assert!(fits(&AnswerType::Choice(vec!["A Bc".into(), "D Ef".into()]), "d ef"));
        assert!(!fits(&AnswerType::Entity, ""));
    }
}
