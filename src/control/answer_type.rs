//! What kind of answer a question asks for. Shared by the extractive reader (what to pick)
//! and the adequacy validator (whether the answer is of that kind).

use serde::Serialize;

use crate::ingest::extract::entity_mentions;
use crate::lexicon::{
    self, AMOUNT_NOUNS, ARTICLES, ASKING_BEFORE_WHICH, COPULAS, COUNT_WORDS, DATE_JOINERS, DATE_NOUNS, HOW_AMOUNT,
    IRREGULAR_PARTICIPLES, KIND_NOUNS, LEADING_PREPOSITIONS, NUMBER_WORDS, ORDINALS, PERIOD_QUALIFIERS, PERIODS,
    WH_WORDS, YES_NO_OPENERS,
};
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

/// The phrase of a question that asks: its wh-word and the noun naming the answer's kind
/// ("which astronomer", "in what year", "based where?").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// Lower-case wh-word, with the amount word for "how" ("how many").
    pub wh: String,
    /// Lower-case type noun: "astronomer" in "Which astronomer ...", "city" in "in what
    /// Australian city" (capitalised adjectives skipped).
    pub noun: Option<String>,
}

/// Finds the asking phrase: a wh-word opening the question (after a preposition at most),
/// else "how many" anywhere, else "what" / asking "which" anywhere, else a wh-word that
/// ends the question ("is based where?"). Relative clauses ("the city where ...", "the
/// association which published ...") do not ask.
pub fn asked(question: &str) -> Option<Asked> {
    let (starts, words): (Vec<usize>, Vec<&str>) = text::word_spans(question).into_iter().unzip();
    let comma_before = |i: usize| question[..starts[i]].trim_end().ends_with(',');
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let is_wh = |i: usize| lower.get(i).is_some_and(|w| WH_WORDS.contains(&w.as_str()));
    let opening = if lower.first().is_some_and(|w| LEADING_PREPOSITIONS.contains(&w.as_str())) { 1 } else { 0 };
    let how_amount = |i: usize| lower[i] == "how" && lower.get(i + 1).is_some_and(|w| HOW_AMOUNT.contains(&w.as_str()));
    // "How to Sail, released in which year": an opening "how" asks only for an amount.
    let at = if is_wh(opening) && (lower[opening] != "how" || how_amount(opening)) {
        Some(opening)
    } else if let Some(i) = (0..lower.len()).find(|&i| how_amount(i)) {
        Some(i)
    } else if let Some(i) = (0..lower.len()).find(|&i| {
        let next_is_noun = lower.get(i + 1).is_some_and(|w| !text::is_stopword(w));
        lower[i] == "what"
            || (lower[i] == "which"
                && next_is_noun
                && (i == 0 || ASKING_BEFORE_WHICH.contains(&lower[i - 1].as_str()) || comma_before(i)))
    }) {
        Some(i)
    } else {
        lower.len().checked_sub(1).filter(|&i| is_wh(i))
    }?;
    let wh = lower[at].clone();
    if wh == "how" {
        let amount = lower.get(at + 1).cloned().unwrap_or_default();
        return Some(Asked { wh: format!("how {amount}"), noun: None });
    }
    Some(Asked { noun: matches!(wh.as_str(), "what" | "which").then(|| type_noun(&words, &lower, at)).flatten(), wh })
}

/// The noun after "what" / "which" at `at`: capitalised adjectives skipped ("what Australian
/// city"), "kind of X" and "what is the name of the X" read as X ("the pop band founded by":
/// band), "what is the X of" read as X; none for "what is" alone.
fn type_noun(words: &[&str], lower: &[String], at: usize) -> Option<String> {
    let mut i = at + 1;
    if lower.get(i).is_some_and(|w| COPULAS.contains(&w.as_str())) {
        // "What is the usual average snowfall in ...": the last word before a stopword.
        if !lower.get(i + 1).is_some_and(|w| ARTICLES.contains(&w.as_str())) {
            return None;
        }
        let start = i + 2;
        let end = (start..lower.len()).find(|&j| text::is_stopword(&lower[j])).unwrap_or(lower.len());
        if KIND_NOUNS.contains(&lower.get(start)?.as_str()) && lower.get(start + 1).is_some_and(|w| w == "of") {
            // "What is the name of the X": read as X below.
            i = start;
        } else if end == start || words[start..end].iter().any(|w| w.chars().next().is_some_and(char::is_uppercase)) {
            return None;
        } else {
            i = end - 1;
        }
    } else {
        while words.get(i).is_some_and(|w| w.chars().next().is_some_and(char::is_uppercase)) && i + 1 < words.len() {
            i += 1;
        }
    }
    if KIND_NOUNS.contains(&lower.get(i)?.as_str()) && lower.get(i + 1).is_some_and(|w| w == "of") {
        i += 2;
        if lower.get(i).is_some_and(|w| ARTICLES.contains(&w.as_str())) {
            i += 1;
        }
        // "the name of the pop band founded by ...": a two-word compound's head is its second
        // word, when a participle opening a reduced relative clause follows it ("the bird
        // lays eggs" and "the actress born in" keep the first).
        let compound = lower.get(i + 1).is_some_and(|w| {
            !text::is_stopword(w) && !is_participle(w) && words[i + 1].starts_with(char::is_lowercase)
        });
        if compound && lower.get(i + 2).is_some_and(|w| is_participle(w)) {
            i += 1;
        }
    }
    let noun = lower.get(i)?;
    (!text::is_stopword(noun)).then(|| noun.clone())
}

fn is_participle(word: &str) -> bool {
    word.ends_with("ed") || word.ends_with("ing") || IRREGULAR_PARTICIPLES.contains(&word)
}

pub fn classify(question: &str) -> AnswerType {
    if let Some(options) = choice_options(question) {
        return AnswerType::Choice(options);
    }
    let asked = asked(question);
    // The last sentence opens a yes/no question ("... holds the Kell Medal. Does Tove Berg
    // also?") unless a phrase within it asks for something ("Do Kell Tales ... released
    // in which year").
    let last_sentence = question.trim().rsplit(". ").next().unwrap_or("").to_lowercase();
    let first = last_sentence.split_whitespace().next().unwrap_or("");
    let asks_within = asked.as_ref().is_some_and(|a| a.noun.is_some() || a.wh.starts_with("how "));
    if YES_NO_OPENERS.contains(&first) && !asks_within {
        return AnswerType::YesNo;
    }
    let Some(asked) = asked else {
        return AnswerType::Free;
    };
    let noun = asked.noun.as_deref().unwrap_or("");
    match asked.wh.as_str() {
        "when" => AnswerType::Date,
        "how many" | "how much" | "how old" | "how long" | "how far" | "how tall" | "how big" | "how large"
        | "how high" | "how often" => AnswerType::Number,
        "what" | "which" if DATE_NOUNS.contains(&noun) => AnswerType::Date,
        "what" | "which" if AMOUNT_NOUNS.contains(&noun) => AnswerType::Number,
        "who" | "whom" | "whose" | "where" | "what" | "which" => AnswerType::Entity,
        _ => AnswerType::Free,
    }
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
            || lexicon::is_month(w)
            || w.ends_with("s") && w.len() == 5 && w[..4].chars().all(|c| c.is_ascii_digit())
            || PERIODS.contains(&w.to_lowercase().as_str())
    })
}

/// Is `answer` a date and nothing else ("14 March 1879", "1920s", "early twentieth
/// century", "twenty-first century"), rather than a name with a year in it ("2011 Korean",
/// "1999 Harbour Regatta")?
pub fn only_a_date(answer: &str) -> bool {
    looks_like_date(answer)
        && answer.split_whitespace().all(|token| {
            let w = token.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            w.is_empty()
                || w.chars().next().is_some_and(|c| c.is_ascii_digit())
                || lexicon::is_month(&w)
                || PERIODS.contains(&w.as_str())
                || PERIOD_QUALIFIERS.contains(&w.as_str())
                || DATE_JOINERS.contains(&w.as_str())
                || is_ordinal(&w)
        })
}

/// Digits, a number word, or a count ("twice", "two-time").
pub fn looks_like_number(answer: &str) -> bool {
    answer.chars().any(|c| c.is_ascii_digit())
        || text::words(answer).any(|w| NUMBER_WORDS.contains(&w.as_str()) || COUNT_WORDS.contains(&w.as_str()))
}

/// Is it a name with a number in it ("Missouri Route 7", "Apollo 11") rather than an amount:
/// its first word a capitalised word that is not a number ("Five", "US$5" are amounts)?
pub fn named_with_number(surface: &str) -> bool {
    surface.split_whitespace().next().is_some_and(|first| {
        first.chars().next().is_some_and(char::is_uppercase)
            && first.chars().all(char::is_alphabetic)
            && !NUMBER_WORDS.contains(&first.to_lowercase().as_str())
    })
}

/// "two-time", "3-time": how many times, in one word ("full-time" is not a count).
pub fn is_count(word: &str) -> bool {
    let lower = word.to_lowercase();
    COUNT_WORDS.contains(&lower.as_str())
        || lower
            .strip_suffix("-time")
            .is_some_and(|n| NUMBER_WORDS.contains(&n) || (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())))
}

/// "19th", "1st", "twentieth": an ordinal number.
pub fn is_ordinal(word: &str) -> bool {
    let lower = word.to_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &lower[digits.len()..];
    ORDINALS.contains(&lower.as_str())
        || (!digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && matches!(suffix, "st" | "nd" | "rd" | "th"))
}

/// Does `answer` have the shape `kind` asks for?
pub fn fits(kind: &AnswerType, answer: &str) -> bool {
    let answer = answer.trim();
    if answer.is_empty() {
        return false;
    }
    match kind {
        AnswerType::Date => looks_like_date(answer),
        AnswerType::Number => looks_like_number(answer) && !named_with_number(answer),
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
        assert_eq!(classify("When was the Kell Lighthouse built?"), AnswerType::Date);
        assert_eq!(classify("How many members does the band have?"), AnswerType::Number);
        assert_eq!(classify("Who founded Microsoft?"), AnswerType::Entity);
        assert_eq!(classify("Is Paris the capital of France?"), AnswerType::YesNo);
        assert_eq!(classify("Kell Hall is a hall in a college located in what Nordic city?"), AnswerType::Entity);
        assert_eq!(classify("The publishing house was founded in 2005, and is based where?"), AnswerType::Entity);
        assert_eq!(classify("How to Sail, released in which year, is a book by Ada Lind"), AnswerType::Date);
        assert_eq!(classify("The Orwick team was formed in what year?"), AnswerType::Date);
        assert_eq!(classify("A singer that has sold more than how many records worldwide?"), AnswerType::Number);
        assert_eq!(classify("Do Kell Tales, a remake of Tide, released in which year?"), AnswerType::Date);
        assert_eq!(classify("The director X has an OBE. Does the director Y also have one?"), AnswerType::YesNo);
        assert_eq!(classify("how is the harbour board and Ada Lind connected?"), AnswerType::Free);
        assert_eq!(
            classify("Who was born first, Ada Lind or Nils Moe?"),
            AnswerType::Choice(vec!["Ada Lind".into(), "Nils Moe".into()])
        );
    }

    #[test]
    fn finds_the_asking_phrase_not_a_relative_clause() {
        let asked = |q: &str| asked(q).map(|a| (a.wh, a.noun));
        let noun = |wh: &str, n: Option<&str>| Some((wh.to_string(), n.map(str::to_string)));
        assert_eq!(
            asked("Which astronomer, who directed the Array, found a comet?"),
            noun("which", Some("astronomer"))
        );
        assert_eq!(asked("In what Nordic city is Kell Hall?"), noun("what", Some("city")));
        assert_eq!(asked("Who was the president of the association which published the Journal?"), noun("who", None));
        assert_eq!(asked("The basis began with the signing of what treaty?"), noun("what", Some("treaty")));
        assert_eq!(asked("Ada Lind is mother to which Swedish actress?"), noun("which", Some("actress")));
        assert_eq!(asked("What kind of university did the author attend?"), noun("what", Some("university")));
        assert_eq!(
            asked("What is the name of the pop band founded by one of the stars?"),
            noun("what", Some("band")),
            "the compound's head, before the participle"
        );
        assert_eq!(asked("What kind of bird lays eggs?"), noun("what", Some("bird")));
        assert_eq!(asked("What is the name of the actress born in 1980?"), noun("what", Some("actress")));
        assert_eq!(asked("What is the form factor of the device?"), noun("what", Some("factor")));
        assert_eq!(asked("What is the main regional airport in Kell?"), noun("what", Some("airport")));
        assert_eq!(asked("The German musician whose godfather is whom?"), noun("whom", None));
        assert_eq!(asked("The river which the Kell River turns into flows where?"), noun("where", None));
        assert_eq!(asked("Are X and Y both directors?"), None);
    }

    #[test]
    fn fits_checks_shape() {
        assert!(fits(&AnswerType::Date, "14 March 1879"));
        assert!(!fits(&AnswerType::Date, "Ada Lind"));
        assert!(fits(&AnswerType::Number, "three"));
        assert!(fits(&AnswerType::Number, "Five thousand") && fits(&AnswerType::Number, "US$5 million"));
        assert!(!fits(&AnswerType::Number, "Missouri Route 7"), "a name with a number in it is no amount");
        assert!(fits(&AnswerType::YesNo, "Yes."));
        assert!(fits(&AnswerType::Choice(vec!["A Bc".into(), "D Ef".into()]), "d ef"));
        assert!(!fits(&AnswerType::Entity, ""));
    }

    #[test]
    fn a_date_alone_is_told_from_a_name_with_a_year() {
        for date in [
            "14 March 1879",
            "1920s",
            "early twentieth century",
            "19th century",
            "March 2 and 3, 2012",
            "twenty-first century",
        ] {
            assert!(only_a_date(date), "{date}");
        }
        for name in ["2011 Nordic", "1999 Harbour Regatta", "Ada Lind", "North 1990"] {
            assert!(!only_a_date(name), "{name}");
        }
        assert!(is_ordinal("21st") && is_ordinal("twentieth") && !is_ordinal("21") && !is_ordinal("north"));
        assert!(looks_like_number("twice") && looks_like_number("two-time") && !looks_like_number("Paris"));
        assert!(is_count("two-time") && is_count("3-time") && is_count("Twice"));
        assert!(!is_count("full-time") && !is_count("part-time") && !is_count("-time"));
    }
}
