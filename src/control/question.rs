//! What a question names and asks: its entities, its relation words, the kind of answer it
//! wants and the noun that names that kind ("which astronomer"). Shared by the embedded
//! reader (what to look for) and the embedded checks (what to verify).

use std::collections::HashSet;

use super::answer_type::{self, AnswerType};
use crate::ingest::extract::entity_mentions;
use crate::lexicon::{FRAME_WORDS, LEMMAS, PLACE_NOUNS, SUFFIXES, WH_WORDS};
use crate::retrieve::Retrieval;
use crate::text;

/// A word reduced to a comparable form: irregular forms to their lemma, then common
/// suffixes cut while at least four letters remain.
pub fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    if let Some((_, lemma)) = LEMMAS.iter().find(|(form, _)| *form == lower) {
        return (*lemma).to_string();
    }
    for suffix in SUFFIXES {
        if let Some(head) = lower.strip_suffix(suffix)
            && head.chars().count() >= 4
        {
            return head.to_string();
        }
    }
    // The "e" a suffix replaces: "close" meets "closed" ("clos"), "movie" meets "movies";
    // and the "y" it turns to "i": "study" meets "studied" ("studi").
    match lower.strip_suffix('e') {
        Some(head) if head.chars().count() >= 4 => head.to_string(),
        _ => match lower.strip_suffix('y') {
            Some(head) if head.chars().count() >= 4 && !head.ends_with(['a', 'e', 'i', 'o', 'u']) => {
                format!("{head}i")
            }
            _ => lower,
        },
    }
}

/// Do two words name the same thing: equal stems, or one stem the start of the other with
/// five letters in common ("discover" / "discovery", "direct" / "director").
pub fn same_word(a: &str, b: &str) -> bool {
    let (a, b) = (stem(a), stem(b));
    a == b || (a.len().min(b.len()) >= 5 && (a.starts_with(&b) || b.starts_with(&a)))
}

#[derive(Debug, Clone)]
pub struct Question {
    pub text: String,
    pub kind: AnswerType,
    /// The noun that names the answer's kind: "astronomer" in "Which astronomer ...",
    /// "city" in "in what city".
    pub type_noun: Option<String>,
    /// Entities the question names, as written, longest first.
    pub entities: Vec<String>,
    /// Content words outside the entities and the type noun: what links them to the answer.
    pub relation_words: Vec<String>,
    /// The wh-word that asks, lower case ("who", "where", "how many"), when one does.
    pub wh: Option<String>,
    /// Content words outside the entities, frame words and type noun included: the words
    /// an answer's sentence states next to the answer ("located in", "based in", "city of").
    pub cues: Vec<String>,
    /// Every content word of the question.
    pub terms: HashSet<String>,
    pub normalized: String,
}

/// "Named after" and "named for" are a relation, though "name" alone is a stopword ("what is
/// the name of"): the word a passage states it with ("the name was taken from the Niger").
fn named_after(question: &str) -> Option<String> {
    let words: Vec<String> = text::words(question).collect();
    words.windows(2).any(|w| w[0] == "named" && matches!(w[1].as_str(), "after" | "for")).then(|| "named".to_string())
}

impl Question {
    /// `retrieval` adds the names of the seeds the question's words aligned to.
    pub fn parse(question: &str, retrieval: Option<&Retrieval>) -> Question {
        let kind = answer_type::classify(question);
        // "Ada Lind and Nils Moe" are two entities; a name that has "and"
        // in it ("Tom and Jerry") comes back below when retrieval knows it as one.
        let mut entities: Vec<String> = entity_mentions(question)
            .into_iter()
            .filter(|m| !crate::lexicon::is_wh(m))
            .flat_map(|m| m.split(" and ").map(|part| text::without_possessive(part).to_string()).collect::<Vec<_>>())
            .fold(Vec::new(), |mut out, m| {
                if !m.is_empty() && !out.contains(&m) {
                    out.push(m);
                }
                out
            });
        if let Some(r) = retrieval {
            for seed in &r.seeds.entities {
                // The mention as the question writes it may be possessive ("Ada
                // Lind's"), which no passage about her says.
                for name in [&seed.mention, &seed.name].map(|n| text::without_possessive(n)) {
                    if !entities.iter().any(|e| text::normalize_entity(e) == text::normalize_entity(name))
                        && mentioned_as_name(question, name)
                    {
                        entities.push(name.to_string());
                    }
                }
            }
        }
        entities.sort_by_key(|e| std::cmp::Reverse(e.len()));
        let entity_words: HashSet<String> = entities.iter().flat_map(|e| text::words(e).collect::<Vec<_>>()).collect();
        let asked = answer_type::asked(question);
        let type_noun = asked.as_ref().and_then(|a| a.noun.clone());
        let cues: Vec<String> = text::content_terms(question)
            .into_iter()
            .chain(named_after(question))
            .filter(|w| !entity_words.contains(w) && !WH_WORDS.contains(&w.as_str()))
            .collect();
        let relation_words = cues
            .iter()
            .filter(|w| !FRAME_WORDS.contains(&w.as_str()))
            .filter(|w| type_noun.as_deref() != Some(w.as_str()))
            .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
            .fold(Vec::new(), |mut out: Vec<String>, w| {
                if !out.contains(w) {
                    out.push(w.clone());
                }
                out
            });
        Question {
            text: question.to_string(),
            cues,
            kind,
            type_noun,
            entities,
            relation_words,
            wh: asked.map(|a| a.wh),
            terms: text::content_terms(question).into_iter().collect(),
            normalized: text::normalize_answer(question),
        }
    }

    /// Is `span` something the question itself says (a named entity, or words copied from it)?
    pub fn names(&self, span: &str) -> bool {
        let norm = text::normalize_answer(span);
        if norm.is_empty() {
            return true;
        }
        let padded = format!(" {} ", self.normalized);
        padded.contains(&format!(" {norm} ")) || self.entities.iter().any(|e| text::normalize_answer(e) == norm)
    }

    /// The relation words that `label` (a relation or sentence fragment) states.
    pub fn relations_in(&self, label: &str) -> Vec<&str> {
        let words: Vec<String> = text::content_terms(label);
        self.relation_words.iter().filter(|r| words.iter().any(|w| same_word(w, r))).map(String::as_str).collect()
    }

    /// Does the question ask for a person ("who", "whom", "whose")?
    pub fn who(&self) -> bool {
        matches!(self.wh.as_deref(), Some("who" | "whom" | "whose"))
    }

    /// Does the question ask for a place ("where", "in what city")?
    pub fn where_(&self) -> bool {
        self.wh.as_deref() == Some("where") || self.type_noun.as_deref().is_some_and(|n| PLACE_NOUNS.contains(&n))
    }
}

/// Does the question contain `name` as whole words, written as a name (a capital or a
/// digit in it, and no lower-case first letter)? A seed aligned to a common word ("located",
/// "city") is not an entity the question names: its words stay relation words, and so does
/// the role before a name ("mayor" of "the mayor of North Kell", though a seed "Mayor of
/// North Kell" matches those words).
fn mentioned_as_name(question: &str, name: &str) -> bool {
    if name.trim().is_empty() {
        return false;
    }
    // Compared lower-cased char by char, each lowered char keeping the byte range of the
    // question's char it comes from: lower-casing may change a char's length ("İ", "ẞ"),
    // so offsets into a lower-cased copy would not be offsets into the question.
    let lower: Vec<(char, std::ops::Range<usize>)> =
        question.char_indices().flat_map(|(at, c)| c.to_lowercase().map(move |l| (l, at..at + c.len_utf8()))).collect();
    let needle: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    let word = |i: Option<&(char, std::ops::Range<usize>)>| i.is_some_and(|(c, _)| c.is_alphanumeric());
    (0..lower.len().saturating_sub(needle.len() - 1)).any(|i| {
        let found = &lower[i..i + needle.len()];
        let bounded = !word(i.checked_sub(1).and_then(|b| lower.get(b))) && !word(lower.get(i + needle.len()));
        let (start, end) = (found[0].1.start, found[found.len() - 1].1.end);
        found.iter().map(|(c, _)| *c).eq(needle.iter().copied())
            && bounded
            && !question[start..end].starts_with(char::is_lowercase)
            && question[start..end].chars().any(|c| c.is_uppercase() || c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_meet_across_forms() {
        assert!(same_word("founded", "founder"));
        assert!(same_word("built", "build"));
        assert!(same_word("directed", "director"));
        assert!(same_word("discovered", "discovery"));
        assert!(!same_word("county", "country"));
        assert!(same_word("wrote", "author") && same_word("writer", "written"));
        assert!(same_word("wife", "spouse") && same_word("married", "husband"));
        assert!(same_word("named", "name") && !same_word("named", "game"));
        assert!(same_word("close", "closed") && same_word("movie", "movies") && !same_word("state", "station"));
        assert!(same_word("study", "studied") && same_word("company", "companies") && !same_word("play", "plain"));
    }

    #[test]
    fn parses_entities_relations_and_type_noun() {
        let q = Question::parse(
            "Which astronomer, who directed the Northern Lights Array, discovered a comet with the Aurora Telescope?",
            None,
        );
        assert_eq!(q.type_noun.as_deref(), Some("astronomer"));
        assert!(
            q.entities.contains(&"Northern Lights Array".to_string())
                && q.entities.contains(&"Aurora Telescope".to_string())
        );
        assert_eq!(q.relation_words, vec!["directed", "discovered", "comet"]);
        let both = Question::parse("Are Ada Lind and Nils Moe both film directors?", None);
        assert_eq!(both.entities, vec!["Ada Lind", "Nils Moe"]);
        assert!(q.names("the Aurora Telescope") && !q.names("Lena Varga"));
        // "Named after" is the relation, though "name" is a stopword.
        let named = Question::parse("What is the country where Orwick is located named after?", None);
        assert_eq!(named.relation_words, vec!["named"]);
        let name = Question::parse("What is the name of the band Ingrid Halden founded?", None);
        assert!(
            !name.relation_words.contains(&"named".to_string()) && !name.relation_words.contains(&"name".to_string())
        );
    }

    #[test]
    fn a_possessive_is_not_part_of_a_question_entity() {
        let question = "Ada Lind's first novel was published where?";
        assert_eq!(Question::parse(question, None).entities, vec!["Ada Lind"]);
        // Nor of the name a seed aligned to the question's words.
        let mut r = crate::retrieve::testing::retrieval(&[("Ada Lind", "Ada Lind writes.")]);
        r.seeds.entities.push(crate::retrieve::seeds::EntitySeed {
            node: 0,
            name: "Ada Lind's".into(),
            mention: "Ada Lind's".into(),
            score: 1.0,
        });
        assert_eq!(Question::parse(question, Some(&r)).entities, vec!["Ada Lind"]);
    }

    #[test]
    fn a_seed_on_a_common_word_is_not_a_question_entity() {
        let q = "Kell Hall is a hall in a college located in what Nordic city?";
        assert!(mentioned_as_name(q, "Kell Hall") && mentioned_as_name(q, "kell hall"));
        assert!(!mentioned_as_name(q, "college") && !mentioned_as_name(q, "located"));
        assert!(!mentioned_as_name(q, "Hall in"), "written in lower case there");
        let role = "Who was mayor of North Kell in 1843?";
        assert!(!mentioned_as_name(role, "Mayor of North Kell") && mentioned_as_name(role, "North Kell"));
    }

    #[test]
    fn lower_casing_that_moves_offsets_does_not_split_a_character() {
        // "İ" grows by a byte when lower-cased and "ẞ" shrinks by one: the total length is
        // the same, the offsets in between are not.
        let q = "Is İ 東京 Tower older than ẞ?";
        assert!(mentioned_as_name(q, "東京 Tower"));
        assert!(!mentioned_as_name(q, "older than"), "written in lower case there");
        assert!(!mentioned_as_name(q, "東京 Towe"), "not a whole word");
        let parsed = Question::parse(q, None);
        assert!(parsed.names("東京 Tower"), "{parsed:?}");
    }
}
