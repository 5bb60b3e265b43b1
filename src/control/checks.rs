//! The embedded checks, each able to fail:
//! - relevance: the evidence covers every entity the question names;
//! - grounding: a cited sentence states the answer together with a question entity (or a
//!   bridge entity on the reader's path), with one of the question's relations between them;
//! - adequacy: the answer is of the kind the question asks for, short, and not copied from
//!   the question.
//!
//! Each verdict carries a score in [0, 1] that the controller folds into the answer's
//! confidence.

use super::answer_type::{self, AnswerType};
use super::question::{Question, same_word};
use super::reader::{Sentence, called, sentences};
use super::roles::{AnswerForm, Check, ReaderAnswer, Verdict};
use crate::retrieve::Retrieval;
use crate::text;

/// Longest answer span, in words, that is still an answer rather than a passage.
const MAX_SPAN_WORDS: usize = 10;
/// Grounding through a bridge entity rather than one the question names is weaker evidence.
const BRIDGE_GROUNDING: f32 = 0.8;

pub fn run(check: Check, question: &str, answer: &ReaderAnswer, retrieval: Option<&Retrieval>) -> Verdict {
    let q = Question::parse(question, retrieval);
    let (pass, score, reason) = match (check, retrieval) {
        (_, None) => (false, 0.0, "no evidence was retrieved".to_string()),
        (Check::Relevance, Some(r)) => relevance(&q, r),
        (Check::Grounding, Some(r)) => grounding(&q, answer, r),
        (Check::Adequacy, Some(r)) => adequacy(&q, answer, r),
    };
    Verdict { check, pass, score: if pass { score } else { 0.0 }, reason }
}

fn relevance(q: &Question, r: &Retrieval) -> (bool, f32, String) {
    let texts: Vec<String> = r
        .chunks
        .iter()
        .map(|c| format!(" {} {} ", text::normalize_answer(&c.title), text::normalize_answer(&c.text)))
        .collect();
    let missing: Vec<&String> = q
        .entities
        .iter()
        .filter(|e| {
            let key = format!(" {} ", text::normalize_answer(e));
            !texts.iter().any(|t| t.contains(&key))
        })
        .collect();
    if missing.is_empty() {
        (true, 1.0, format!("the evidence mentions all {} entities the question names", q.entities.len()))
    } else {
        (
            false,
            0.0,
            format!(
                "the evidence never mentions {}",
                missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
            ),
        )
    }
}

fn grounding(q: &Question, answer: &ReaderAnswer, r: &Retrieval) -> (bool, f32, String) {
    if answer.answer.trim().is_empty() {
        return (false, 0.0, "no answer to ground".into());
    }
    let all = sentences(q, r);
    let cited: Vec<&Sentence<'_>> = all.iter().filter(|s| answer.used.contains(&s.chunk)).collect();
    if cited.is_empty() {
        return (false, 0.0, "the answer cites no retrieved chunk".into());
    }
    match (&q.kind, answer.form) {
        (_, AnswerForm::Sentence) => {
            let found = cited.iter().any(|s| s.text.trim() == answer.answer.trim());
            return (
                found,
                1.0,
                if found {
                    "the answer is a cited sentence".into()
                } else {
                    "the answer sentence is not in the cited chunks".into()
                },
            );
        }
        (AnswerType::YesNo, _) | (AnswerType::Choice(_), _) => {
            let named = |e: &String| cited.iter().any(|s| contains_words(s.text, e) || s.is_about(e));
            let missing: Vec<&String> = q.entities.iter().filter(|e| !named(e)).collect();
            let pass = missing.is_empty() || (matches!(q.kind, AnswerType::Choice(_)) && named(&answer.answer));
            return (
                pass,
                1.0,
                if pass {
                    "the cited passages describe the compared entities".into()
                } else {
                    format!("no cited passage describes {missing:?}")
                },
            );
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
    for s in &cited {
        if !contains_words(s.text, &answer.answer) {
            continue;
        }
        for (anchors, strength) in [(&q.entities, 1.0), (&bridges, BRIDGE_GROUNDING)] {
            for anchor in anchors.iter() {
                if let Some(relation) = relation_between(q, s, anchor, &answer.answer)
                    && best.as_ref().is_none_or(|(b, _)| strength > *b)
                {
                    best = Some((
                        strength,
                        format!("“{}” states `{}` -{relation}- `{anchor}`", s.text.trim(), answer.answer),
                    ));
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
fn relation_between(q: &Question, s: &Sentence<'_>, anchor: &str, answer: &str) -> Option<String> {
    let lower = s.text.to_lowercase();
    let answer_at = find_words(&lower, &answer.to_lowercase())?;
    let range = match find_words(&lower, &anchor.to_lowercase()) {
        Some(anchor_at) if anchor_at.0 < answer_at.0 => anchor_at.1..answer_at.0,
        Some(anchor_at) => answer_at.1..anchor_at.0,
        None if s.is_about(anchor) => 0..lower.len(),
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
            let joint = answer_at.1..start + at;
            start + at < answer_at.1
                || !cased.get(joint.clone()).or_else(|| lower.get(joint)).is_some_and(text::joins_next_clause)
        })
        .map(|(_, w)| w)
        .find(|w| q.relation_words.iter().any(|r| same_word(w, r)))
        .map(str::to_string)
        .or_else(|| lifespan(q, between, &lower[answer_at.1..]))
        .or_else(|| whole_chain(q, &lower, answer_at.0))
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

/// Does `sentence` state the date at `start..end` as the event the question asks of it (birth
/// or death) in a lifespan after a name ([`lifespan`])?
pub(super) fn in_lifespan(q: &Question, sentence: &str, start: usize, end: usize) -> bool {
    sentence[start..end].contains(|c: char| c.is_ascii_digit())
        && sentence[..start]
            .rfind('(')
            .is_some_and(|open| lifespan(q, &sentence[open..start], &sentence[end..]).is_some())
}

/// An encyclopaedia's lifespan after a name states birth and death without a verb: "Ezer
/// Weizman (Hebrew: ...; 15 June 1924 – 24 April 2005)", "(1924-2005)". `between` is the
/// text from the name to the answer, `after` the text after it. The question's birth word
/// when the answer is the date before the range's dash, its death word when it is the date
/// after it. Only dates count, after the last ";" ("Hebrew: ...; 15 June 1924"): a parenthesis
/// without a range ("(President from 1993)") or with words in it ("(President 1993 – 2000)",
/// "(Labour – Ebbw Vale)") is no lifespan.
fn lifespan(q: &Question, between: &str, after: &str) -> Option<String> {
    const DASHES: [char; 3] = ['-', '–', '—'];
    let inside = between.trim_start().strip_prefix('(')?;
    if inside.contains(')') {
        return None;
    }
    let date_words = |part: &str| {
        part.split(|c: char| c.is_whitespace() || matches!(c, ',' | '.')).all(|w| {
            w.is_empty() || w.chars().all(|c| c.is_ascii_digit()) || text::MONTHS.contains(&w.to_lowercase().as_str())
        })
    };
    let dates = inside.rsplit(';').next().unwrap_or(inside);
    let event = match dates.rsplit_once(DASHES) {
        // The birth date before the dash, the dates between the dash and the answer ("24
        // April " before 2005).
        Some((birth, death))
            if date_words(birth) && date_words(death) && birth.trim_end().ends_with(|c: char| c.is_ascii_digit()) =>
        {
            "death"
        }
        None if date_words(dates) && after.trim_start().starts_with(DASHES) => "birth",
        _ => return None,
    };
    q.relation_words.iter().find(|r| same_word(r, event)).cloned()
}

/// Byte range of `needle` in `haystack` at word boundaries.
fn find_words(haystack: &str, needle: &str) -> Option<(usize, usize)> {
    if needle.is_empty() {
        return None;
    }
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before = haystack[..start].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = haystack[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return Some((start, end));
        }
        // One char on, not past the match: "ab ab" in "cab ab ab" starts inside a rejected one.
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

fn contains_words(haystack: &str, needle: &str) -> bool {
    find_words(&haystack.to_lowercase(), &needle.to_lowercase()).is_some()
}

/// What an answer the evidence never calls by the question's type noun is worth.
const UNTYPED_ADEQUACY: f32 = 0.7;

fn adequacy(q: &Question, answer: &ReaderAnswer, r: &Retrieval) -> (bool, f32, String) {
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
    if !matches!(q.kind, AnswerType::Choice(_) | AnswerType::YesNo) && q.names(a) {
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
    if let Some(noun) = q.type_noun.as_deref().filter(|_| q.kind == AnswerType::Entity)
        && !called(noun, a, &sentences(q, r))
    {
        return (
            true,
            UNTYPED_ADEQUACY,
            format!("expected {:?}; `{a}` fits, but no evidence calls it a {noun}", q.kind),
        );
    }
    (true, 1.0, format!("expected {:?}; `{a}` fits", q.kind))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::retrieve::seeds::Seeds;
    use crate::retrieve::{PathHop, RankedChunk, Stage};

    /// A retrieval of hand-written (title, text) passages, chunk ids in order.
    pub(crate) fn retrieval(passages: &[(&str, &str)]) -> Retrieval {
        Retrieval {
            chunks: passages
                .iter()
                .enumerate()
                .map(|(i, (title, text))| RankedChunk {
                    chunk: i as u32,
                    doc_id: title.to_string(),
                    title: title.to_string(),
                    section: String::new(),
                    span: (0, text.len()),
                    score: 1.0,
                    text: text.to_string(),
                })
                .collect(),
            paths: Vec::new(),
            stage: Stage::Local,
            graph_share: 0.0,
            sufficient: true,
            seeds: Seeds::default(),
            stages: Vec::new(),
            skipped: None,
            micros: 0,
        }
    }

    fn span(answer: &str, used: &[u32], path: Vec<PathHop>) -> ReaderAnswer {
        ReaderAnswer { answer: answer.into(), used: used.to_vec(), confidence: 0.9, form: AnswerForm::Span, path }
    }

    const HALDEN: (&str, &str) = (
        "Halden Optics",
        "Halden Optics was founded by Ingrid Halden in 1961. The company built the Aurora Observatory and later supplied mirrors to the Northern Lights Array.",
    );
    const AURORA: (&str, &str) =
        ("Aurora Observatory", "The Aurora Observatory is on Mount Kell. It was built by Halden Optics in 1987.");
    const Q: &str = "Who founded the company that built the Aurora Observatory?";

    #[test]
    fn grounding_accepts_an_answer_linked_by_the_question_relation() {
        let r = retrieval(&[HALDEN, AURORA]);
        let hop = |s: &str, rel: &str, o: &str, chunk| PathHop {
            subject: s.into(),
            relation: rel.into(),
            object: o.into(),
            chunk,
        };
        let path = vec![
            hop("Aurora Observatory", "was built by", "Halden Optics", 1),
            hop("Halden Optics", "was founded by", "Ingrid Halden", 0),
        ];
        let v = run(Check::Grounding, Q, &span("Ingrid Halden", &[0, 1], path), Some(&r));
        assert!(v.pass, "{v:?}");
        assert!((v.score - BRIDGE_GROUNDING).abs() < 1e-6, "grounded through the bridge Halden Optics: {v:?}");
    }

    #[test]
    fn grounding_reads_a_relation_by_the_noun_or_form_a_passage_states_it_with() {
        let r = retrieval(&[
            ("Baure, Nigeria", "Baure is a Local Government Area in Katsina State, Nigeria."),
            ("Nigeria", "The name was taken from the Niger River running through the country."),
        ]);
        let hop = PathHop { subject: "Baure".into(), relation: "mentions".into(), object: "Nigeria".into(), chunk: 0 };
        let q = "What is the country where Baure is located named after?";
        let v = run(Check::Grounding, q, &span("Niger River", &[1, 0], vec![hop.clone()]), Some(&r));
        assert!(v.pass, "\"named after\" is stated by \"the name was taken from\": {v:?}");
        let v = run(Check::Grounding, q, &span("Katsina State", &[0], vec![hop]), Some(&r));
        assert!(!v.pass, "where Baure is, not what the country is named after: {v:?}");
        let book = retrieval(&[("Madonna (book)", "Madonna is a biography by English author Andrew Morton.")]);
        let wrote = "Who wrote the book Madonna?";
        assert!(run(Check::Grounding, wrote, &span("Andrew Morton", &[0], Vec::new()), Some(&book)).pass);
    }

    #[test]
    fn grounding_reads_a_lifespan_as_birth_and_death() {
        let r =
            retrieval(&[("Ezer Weizman", "Ezer Weizman (15 June 1924 – 24 April 2005) was the President of Israel.")]);
        let born = "In what year was Ezer Weizman born?";
        assert!(run(Check::Grounding, born, &span("1924", &[0], Vec::new()), Some(&r)).pass);
        assert!(!run(Check::Grounding, born, &span("2005", &[0], Vec::new()), Some(&r)).pass, "the death year");
        let hyphen = retrieval(&[("Ezer Weizman", "Ezer Weizman (1924-2005) was the President of Israel.")]);
        assert!(!run(Check::Grounding, born, &span("2005", &[0], Vec::new()), Some(&hyphen)).pass, "a plain hyphen");
        assert!(run(Check::Grounding, born, &span("1924", &[0], Vec::new()), Some(&hyphen)).pass);
        let hebrew = retrieval(&[(
            "Ezer Weizman",
            "Ezer Weizman (Hebrew: \"Ezer Vaytsman\"; 15 June 1924 – 24 April 2005) was President.",
        )]);
        assert!(run(Check::Grounding, born, &span("1924", &[0], Vec::new()), Some(&hebrew)).pass);
        let office = retrieval(&[("Ezer Weizman", "Ezer Weizman (President of Israel from 1993) was a pilot.")]);
        assert!(!run(Check::Grounding, born, &span("1993", &[0], Vec::new()), Some(&office)).pass, "not a lifespan");
        let term = retrieval(&[("Ezer Weizman", "Ezer Weizman (President 1993 – 2000) was a pilot.")]);
        let died = "In what year did Ezer Weizman die?";
        assert!(!run(Check::Grounding, died, &span("2000", &[0], Vec::new()), Some(&term)).pass, "a term of office");
        assert!(run(Check::Grounding, died, &span("2005", &[0], Vec::new()), Some(&r)).pass);
        assert!(!run(Check::Grounding, died, &span("1924", &[0], Vec::new()), Some(&r)).pass, "the birth year");
    }

    #[test]
    fn an_untitled_passage_on_the_path_is_no_anchor() {
        // A document ingested with neither title nor id: a path hop from it names "".
        let r =
            retrieval(&[("", "Zürich is where Emma Keller lives."), ("Zürich", "Zürich was founded by the Romans.")]);
        let hop = PathHop { subject: String::new(), relation: "mentions".into(), object: "Zürich".into(), chunk: 0 };
        let q = "Who founded the city where Emma Keller lives?";
        let v = run(Check::Grounding, q, &span("Romans", &[1, 0], vec![hop]), Some(&r));
        assert!(v.pass, "grounded through Zürich, not the empty name: {v:?}");
        assert_eq!(find_words("zürich ab", ""), None);
        assert_eq!(find_words("zürich zü zürich", "zürich"), Some((0, 7)));
        assert_eq!(find_words("zürichs zürich", "zürich"), Some((9, 16)));
        assert_eq!(find_words("cab ab ab", "ab ab"), Some((4, 9)));
    }

    #[test]
    fn grounding_rejects_an_answer_not_linked_to_the_question_entities() {
        let r = retrieval(&[HALDEN, AURORA]);
        // In the same sentence as the question's entity, but joined by "supplied mirrors to".
        let v = run(Check::Grounding, Q, &span("Northern Lights Array", &[0], Vec::new()), Some(&r));
        assert!(!v.pass, "{v:?}");
        // Named nowhere in the cited chunk.
        let v = run(Check::Grounding, Q, &span("Lena Varga", &[0, 1], Vec::new()), Some(&r));
        assert!(!v.pass, "{v:?}");
    }

    fn haugen() -> (&'static str, &'static str) {
        ("Ola Haugen", "He studied in Glasgow and later founded Bergen Marine Works.")
    }

    #[test]
    fn grounding_rejects_an_answer_of_the_clause_before_the_relation() {
        let sandberg = ("Erik Sandberg", "He was born in Uppsala in 1899 and founded Lund Chemicals after the war.");
        let r = retrieval(&[sandberg, ("Lund Chemicals", "It was founded by Erik Sandberg in 1931.")]);
        let when = "When was Lund Chemicals founded?";
        let v = run(Check::Grounding, when, &span("1899", &[0], Vec::new()), Some(&r));
        assert!(!v.pass, "1899 is the year he was born: {v:?}");
        assert!(run(Check::Grounding, when, &span("1931", &[1], Vec::new()), Some(&r)).pass);
        // Where the sentence states the whole chain, its subject links the two.
        let r = retrieval(&[haugen()]);
        let study = "Where did the founder of Bergen Marine Works study?";
        assert!(run(Check::Grounding, study, &span("Glasgow", &[0], Vec::new()), Some(&r)).pass);
        let v = run(
            Check::Grounding,
            "Where was Bergen Marine Works founded?",
            &span("Glasgow", &[0], Vec::new()),
            Some(&r),
        );
        assert!(!v.pass, "{v:?}");
        let r = retrieval(&[("Odd Rasmussen", "Rasmussen, captain of the Sjøstjerne, is a Norwegian born in Tromsø.")]);
        let born = "Where was the captain of the Sjøstjerne born?";
        assert!(run(Check::Grounding, born, &span("Tromsø", &[0], Vec::new()), Some(&r)).pass);
        assert!(!run(Check::Grounding, born, &span("Norwegian", &[0], Vec::new()), Some(&r)).pass);
        // One of the verb's subjects is linked by it.
        let r = retrieval(&[("Lund Chemicals", "Erik Sandberg and Nils Berg founded Lund Chemicals.")]);
        let who = "Who founded Lund Chemicals?";
        assert!(run(Check::Grounding, who, &span("Erik Sandberg", &[0], Vec::new()), Some(&r)).pass);
    }

    #[test]
    fn adequacy_rejects_the_wrong_type_a_copy_of_the_question_and_a_sentence() {
        let r = retrieval(&[HALDEN]);
        let when = "When was Halden Optics founded?";
        assert!(run(Check::Adequacy, when, &span("1961", &[0], Vec::new()), Some(&r)).pass);
        let v = run(Check::Adequacy, when, &span("Ingrid Halden", &[0], Vec::new()), Some(&r));
        assert!(!v.pass && v.reason.contains("does not fit"), "{v:?}");
        let how_many = "How many telescopes did Halden Optics build?";
        let v = run(Check::Adequacy, how_many, &span("Aurora Telescope 2", &[0], Vec::new()), Some(&r));
        assert!(!v.pass && v.reason.contains("does not fit"), "a name with a number is no amount: {v:?}");
        let v = run(Check::Adequacy, Q, &span("Aurora Observatory", &[0], Vec::new()), Some(&r));
        assert!(!v.pass && v.reason.contains("repeats the question"), "{v:?}");
        let sentence = ReaderAnswer { form: AnswerForm::Sentence, ..span(HALDEN.1, &[0], Vec::new()) };
        assert!(!run(Check::Adequacy, Q, &sentence, Some(&r)).pass);
        assert!(!run(Check::Adequacy, Q, &span("# Halden Optics", &[0], Vec::new()), Some(&r)).pass);
    }

    #[test]
    fn relevance_rejects_evidence_missing_an_entity_the_question_names() {
        let r = retrieval(&[HALDEN]);
        let v = run(
            Check::Relevance,
            "Which astronomer directed the Northern Lights Array and used the Aurora Telescope?",
            &span("x", &[0], Vec::new()),
            Some(&r),
        );
        assert!(!v.pass && v.reason.contains("Aurora Telescope"), "{v:?}");
        assert!(run(Check::Relevance, Q, &span("x", &[0], Vec::new()), Some(&retrieval(&[HALDEN, AURORA]))).pass);
        assert!(!run(Check::Relevance, Q, &span("x", &[0], Vec::new()), None).pass);
    }
}
