//! Text primitives shared by ingestion, retrieval and the embedded reader: one tokenizer,
//! one sentence splitter, one normaliser, so that every stage sees the same terms.

use std::ops::Range;

static STOPWORD_SET: std::sync::LazyLock<std::collections::HashSet<&'static str>> =
    std::sync::LazyLock::new(|| crate::lexicon::STOPWORDS.iter().copied().collect());

pub fn is_stopword(word: &str) -> bool {
    STOPWORD_SET.contains(word)
}

/// `word` with its first letter upper-case ("orwick" -> "Orwick").
pub fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// Lowercased alphanumeric terms. Apostrophes split ("Smith's" -> "smith", "s").
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase())
}

/// (byte offset, word) of each run of alphanumeric characters, in order: `words` with
/// where each one starts, and in its own case.
pub fn word_spans(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Terms that carry content: `words` minus stopwords.
pub fn content_terms(text: &str) -> Vec<String> {
    words(text).filter(|w| !is_stopword(w)).collect()
}

/// Token count estimate used where a provider reports no usage: whitespace words scaled by
/// the ~1.3 sub-word tokens per English word that BPE tokenizers average.
pub fn estimate_tokens(text: &str) -> u64 {
    let words = text.split_whitespace().count() as f64;
    (words * 1.3).ceil() as u64
}

/// Is this line (or sentence span) a Markdown heading, a title rather than a statement: one
/// to six `#` and a space or nothing after them ("#1 hit single" is a statement)?
pub fn is_heading(line: &str) -> bool {
    let line = line.trim_start();
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].chars().next().is_none_or(|c| c == ' ' || c == '\t')
}

/// Byte ranges of sentences. Splits after `.`, `!`, `?` followed by whitespace and an
/// upper-case letter, digit or quote, but not after common abbreviations or initials; and at
/// the line breaks around a Markdown heading and at a paragraph's end (a blank line follows),
/// which end what they hold without a full stop ("# Halden Optics" is no part of the
/// sentence below or above it).
pub fn sentence_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            let next = text[i + 1..].split('\n').next().unwrap_or_default();
            if is_heading(&text[line_start..i]) || is_heading(next) || next.trim().is_empty() {
                push_trimmed(text, start..i, &mut spans);
                start = i + 1;
            }
            line_start = i + 1;
            i += 1;
            continue;
        }
        // A heading ends at its line's end only ("## 1. Introduction").
        if matches!(b, b'.' | b'!' | b'?') && !is_heading(&text[line_start..i]) {
            // The quotes and brackets the sentence closes belong to it ("... large.” It").
            let end = i + 1 + text[i + 1..].len() - text[i + 1..].trim_start_matches(CLOSERS).len();
            let mut j = end;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let next_starts_sentence = j > end && text[j..].chars().next().is_some_and(starts_sentence);
            if next_starts_sentence && !ends_with_abbreviation(&text[start..=i]) {
                push_trimmed(text, start..end, &mut spans);
                if let Some(newline) = text[end..j].rfind('\n') {
                    line_start = end + newline + 1;
                }
                start = j;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    push_trimmed(text, start..text.len(), &mut spans);
    spans
}

/// Do the words `between` a span and a verb after it only join another clause to the span's
/// ("born in Uppsala in 1899 and founded Lund Chemicals": 1899 is the birth's year, not the
/// founding's)? "and" or "but", alone or with one lower-case word ("and later founded"); not
/// "and Jones founded", where the span is one of the verb's subjects.
pub fn joins_next_clause(between: &str) -> bool {
    let words = word_spans(between);
    words.first().is_some_and(|(_, w)| w.eq_ignore_ascii_case("and") || w.eq_ignore_ascii_case("but"))
        && words.len() <= 2
        && words[1..].iter().all(|(_, w)| w.starts_with(char::is_lowercase))
}

/// Can `c` open a sentence after a full stop and a space: a capital, a digit, an opening
/// quote or bracket, or a symbol outside ASCII that no word begins with ("🧪 The plant ...").
/// A lower-case letter continues the sentence ("approx. ten"), and so does a closing quote
/// after a space.
fn starts_sentence(c: char) -> bool {
    c.is_uppercase()
        || c.is_ascii_digit()
        || matches!(c, '"' | '\'' | '(' | '[')
        || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace() && !CLOSERS.contains(&c))
}

/// What closes a quote or a bracket a sentence may end inside.
const CLOSERS: &[char] = &['"', '\'', ')', ']', '”', '’', '»', '›'];

fn push_trimmed(text: &str, range: Range<usize>, spans: &mut Vec<Range<usize>>) {
    let slice = &text[range.clone()];
    let lead = slice.len() - slice.trim_start().len();
    let trail = slice.len() - slice.trim_end().len();
    if lead + trail < slice.len() {
        spans.push(range.start + lead..range.end - trail);
    }
}

fn ends_with_abbreviation(sentence: &str) -> bool {
    let last = sentence.rsplit(char::is_whitespace).next().unwrap_or("");
    let lower = last.to_lowercase();
    // A single capital letter and a dot is an initial ("John F. Kennedy").
    let is_initial = last.len() == 2 && last.as_bytes()[0].is_ascii_uppercase();
    is_initial || crate::lexicon::ABBREVIATIONS.contains(&lower.as_str())
}

/// The entity a document's title names: bracketed qualifiers dropped ("Mira (ship)" ->
/// "Mira").
pub fn title_entity(title: &str) -> Option<String> {
    let cut = title.find(['(', '[']).map_or(title, |i| &title[..i]).trim();
    (!cut.is_empty()).then(|| cut.to_string())
}

/// Where `text` names `name` as a whole name: its words in order, case aside, with no
/// capitalised word run on before or after it ("Kell" is not named in "North Kell",
/// "Orwick, North Selby" is named in "born in Orwick, North Selby"). The byte range of
/// the first such mention, as `text` writes it.
pub fn find_name(text: &str, name: &str) -> Option<Range<usize>> {
    let wanted: Vec<String> = words(name).collect();
    let spans = word_spans(text);
    if wanted.is_empty() || spans.len() < wanted.len() {
        return None;
    }
    let same = |word: &str, lower: &str| word.chars().flat_map(char::to_lowercase).eq(lower.chars());
    (0..=spans.len() - wanted.len()).find_map(|i| {
        let words_match = spans[i..i + wanted.len()].iter().zip(&wanted).all(|((_, w), x)| same(w, x));
        if words_match { whole_name(text, &spans, i, wanted.len()) } else { None }
    })
}

/// The byte range of the `len` words of `spans` (`text`'s [`word_spans`]) from `first` on,
/// when they stand as a whole name: no capitalised word runs on before or after them,
/// separated by spaces alone ("North" runs on before "Kell").
pub fn whole_name(text: &str, spans: &[(usize, &str)], first: usize, len: usize) -> Option<Range<usize>> {
    let runs_on = |word: &str, gap: &str| {
        gap.chars().all(char::is_whitespace)
            && word.chars().next().is_some_and(char::is_uppercase)
            && !is_stopword(&word.to_lowercase())
    };
    if len == 0 {
        return None;
    }
    let (start, last) = (spans.get(first)?.0, spans.get(first + len - 1)?);
    let end = last.0 + last.1.len();
    let before = first.checked_sub(1).map(|p| spans[p]).is_some_and(|(at, w)| runs_on(w, &text[at + w.len()..start]));
    let after = spans.get(first + len).is_some_and(|(at, w)| runs_on(w, &text[end..*at]));
    (!before && !after).then_some(start..end)
}

/// Does `text` name `name` as whole words, case, punctuation and articles aside ("the
/// Kell Mill" names "Kell Mill")?
pub fn names(text: &str, name: &str) -> bool {
    let n = normalize_answer(name);
    !n.is_empty() && format!(" {} ", normalize_answer(text)).contains(&format!(" {n} "))
}

/// Byte range of `needle` in `haystack` at word boundaries, as written (case counts).
pub fn find_words(haystack: &str, needle: &str) -> Option<Range<usize>> {
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
            return Some(start..end);
        }
        // One char on, not past the match: "ab ab" in "cab ab ab" starts inside a rejected one.
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// Is a passage titled `title` about `entity`: its title names it, a parenthesised qualifier
/// aside ("Mira (ship)" is about Mira), or the title is the entity's name with middle names
/// or a suffix left out ("Anna Berg" is "Anna Maria Berg, Jr.")? Such a passage says "he"
/// or "it" for the entity.
pub fn is_about(title: &str, entity: &str) -> bool {
    let key = normalize_answer(entity);
    let Some(topic) = title_entity(title).map(|t| normalize_answer(&t)) else {
        return false;
    };
    !key.is_empty() && (normalize_answer(title) == key || topic == key || shortened(&topic, &key))
}

/// Is `short` the name `full` with middle words or a suffix left out: at least two words,
/// in order, the same first word and the same last word before any suffix (both normalised)?
fn shortened(short: &str, full: &str) -> bool {
    let short: Vec<&str> = short.split(' ').collect();
    let mut full: Vec<&str> = full.split(' ').collect();
    while full.len() > 1 && full.last().is_some_and(|w| crate::lexicon::NAME_SUFFIXES.contains(w)) {
        full.pop();
    }
    let mut rest = full.iter();
    short.len() >= 2
        && short.first() == full.first()
        && short.last() == full.last()
        && short.iter().all(|w| rest.any(|f| f == w))
}

/// A life event an encyclopaedia's lifespan states by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifeEvent {
    Birth,
    Death,
}

impl LifeEvent {
    /// The word a question asks the event with, as a stem matches it ("born" -> "birth").
    pub fn word(self) -> &'static str {
        match self {
            LifeEvent::Birth => "birth",
            LifeEvent::Death => "death",
        }
    }
}

/// The event of the date at `start..end` of `sentence`, when it stands in a lifespan after a
/// name ([`lifespan_event`]).
pub fn lifespan_at(sentence: &str, start: usize, end: usize) -> Option<LifeEvent> {
    if !sentence.get(start..end)?.contains(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let open = sentence[..start].rfind('(')?;
    lifespan_event(&sentence[open..start], &sentence[end..])
}

/// An encyclopaedia's lifespan after a name states birth and death without a verb: "Ivar
/// Selby (Swedish: ...; 15 June 1924 – 24 April 2005)", "(1924-2005)". `between` is the text
/// from the opening bracket to the date, `after` the text after it: birth when the date is
/// before the range's dash, death when it is after it. Only dates count, after the last ";":
/// a parenthesis without a range ("(mayor from 1993)") or with words in it ("(mayor 1993 –
/// 2000)") is no lifespan.
pub fn lifespan_event(between: &str, after: &str) -> Option<LifeEvent> {
    const DASHES: [char; 3] = ['-', '–', '—'];
    let inside = between.trim_start().strip_prefix('(')?;
    if inside.contains(')') {
        return None;
    }
    let date_words = |part: &str| {
        part.split(|c: char| c.is_whitespace() || matches!(c, ',' | '.'))
            .all(|w| w.is_empty() || w.chars().all(|c| c.is_ascii_digit()) || crate::lexicon::is_month(w))
    };
    let dates = inside.rsplit(';').next().unwrap_or(inside);
    match dates.rsplit_once(DASHES) {
        // The birth date before the dash, the dates between the dash and the answer ("24
        // April " before 2005).
        Some((birth, death))
            if date_words(birth) && date_words(death) && birth.trim_end().ends_with(|c: char| c.is_ascii_digit()) =>
        {
            Some(LifeEvent::Death)
        }
        None if date_words(dates) && after.trim_start().starts_with(DASHES) => Some(LifeEvent::Birth),
        _ => None,
    }
}

/// A name without its possessive ending ("India's" -> "India"): what a text says of a name's
/// owner is not part of the name.
pub fn without_possessive(name: &str) -> &str {
    name.strip_suffix("'s").or_else(|| name.strip_suffix("’s")).unwrap_or(name)
}

/// Canonical key of an entity mention: lowercased, bracketed tags removed ("[GUI] CFH" ->
/// "cfh"), punctuation dropped, whitespace collapsed.
pub fn normalize_entity(mention: &str) -> String {
    // Words joined by one space as they are read: an open normalises every alias of every
    // node, and splitting and joining again cost two more allocations a name.
    let mut key = String::with_capacity(mention.len());
    let (mut depth, mut gap) = (0usize, false);
    for c in mention.chars() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            c if c.is_alphanumeric() => {
                if gap && !key.is_empty() {
                    key.push(' ');
                }
                gap = false;
                key.extend(c.to_lowercase());
            }
            _ => gap = true,
        }
    }
    if key.is_empty() {
        // Everything was inside brackets: keep the bracketed text rather than lose the mention.
        mention
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        key
    }
}

/// SQuAD answer normalisation: lowercase, drop punctuation and articles, collapse whitespace.
pub fn normalize_answer(answer: &str) -> String {
    let lower = answer.to_lowercase();
    let no_punct: String = lower.chars().map(|c| if c.is_ascii_punctuation() { ' ' } else { c }).collect();
    no_punct.split_whitespace().filter(|w| !crate::lexicon::ARTICLES.contains(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_named_whole_not_inside_a_longer_one() {
        assert!(find_name("He was born in Orwick, North Selby, in 1961.", "Orwick, North Selby").is_some());
        assert!(find_name("It was shot in Kell. low tide followed.", "Low Tide").is_some());
        assert!(find_name("Kim Jong-il's wife", "Kim Jong-il").is_some());
        assert!(
            find_name("The Kell Company sailed.", "Kell Company").is_some(),
            "a capitalised stopword opens a sentence"
        );
        assert!(find_name("a county in North Kell", "Kell").is_none());
        assert!(find_name("Kell Beach is a city", "Kell").is_none());
        assert!(find_name("Kim Jong-il's wife", "Jong").is_none());
        assert!(find_name("anything", "").is_none());
        assert!(whole_name("a b", &word_spans("a b"), 1, 0).is_none(), "no words, no name");
        let text = "The comet was named after the astronomer Lena Varga.";
        assert_eq!(find_name(text, "lena_varga").map(|r| &text[r]), Some("Lena Varga"));
    }

    #[test]
    fn title_entity_drops_qualifiers() {
        assert_eq!(title_entity("Mira (ship)").as_deref(), Some("Mira"));
        assert_eq!(title_entity("(x)"), None);
    }

    #[test]
    fn content_terms_drop_stopwords() {
        assert_eq!(content_terms("Who is the spouse of Obama's"), vec!["spouse", "obama"]);
    }

    #[test]
    fn sentences_split_but_not_on_initials_or_abbreviations() {
        let text =
            "John F. Kennedy was born in 1917. He lived in Washington, D.C. for years. Dr. Smith agreed! Did he?";
        let got: Vec<&str> = sentence_spans(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(
            got,
            vec![
                "John F. Kennedy was born in 1917.",
                "He lived in Washington, D.C. for years.",
                "Dr. Smith agreed!",
                "Did he?"
            ]
        );
    }

    #[test]
    fn a_verb_after_and_begins_another_clause() {
        assert!(joins_next_clause(" and ") && joins_next_clause(", and later ") && joins_next_clause(" but "));
        assert!(!joins_next_clause(" and Jones ") && !joins_next_clause(" ") && !joins_next_clause(" who then "));
        assert!(!joins_next_clause(" and in the end "));
    }

    #[test]
    fn a_sentence_may_open_with_a_quote_a_bracket_or_a_symbol() {
        let split =
            |text: &'static str| -> Vec<&'static str> { sentence_spans(text).into_iter().map(|r| &text[r]).collect() };
        assert_eq!(
            split("It was founded in 1931. 🧪 The company opened a plant. “It was large.” (It closed.) It sold."),
            [
                "It was founded in 1931.",
                "🧪 The company opened a plant.",
                "“It was large.”",
                "(It closed.)",
                "It sold."
            ]
        );
        // A lower-case word or a closing quote goes on with the sentence.
        assert_eq!(
            split("It weighs approx. ten tons. He said “no. ” Then left."),
            ["It weighs approx. ten tons.", "He said “no. ” Then left."]
        );
    }

    #[test]
    fn a_heading_or_a_paragraph_ends_what_it_holds() {
        let split =
            |text: &'static str| -> Vec<&'static str> { sentence_spans(text).into_iter().map(|r| &text[r]).collect() };
        let text = "# Halden Optics\nHalden Optics is a company\n\nIt makes lenses\nfor telescopes.\n";
        assert_eq!(split(text), ["# Halden Optics", "Halden Optics is a company", "It makes lenses\nfor telescopes."]);
        assert_eq!(
            split("Founded by Lars Halden\n## Products\nLenses."),
            ["Founded by Lars Halden", "## Products", "Lenses."]
        );
        // The line a sentence ends on is where the next heading test starts.
        let text = "# What is it?\nIt is a lens\nmade of glass. It is\nclear";
        assert_eq!(split(text), ["# What is it?", "It is a lens\nmade of glass.", "It is\nclear"]);
        assert_eq!(split("#1 hit single in 1990. It sold."), ["#1 hit single in 1990.", "It sold."]);
        assert_eq!(split("## 1. Introduction\nText."), ["## 1. Introduction", "Text."]);
        assert!(
            is_heading("## 1. Introduction") && is_heading("#") && !is_heading("#1 hit") && !is_heading("####### x")
        );
    }

    #[test]
    fn entity_normalisation_strips_tags_and_punctuation() {
        assert_eq!(normalize_entity("[GUI] CFH"), "cfh");
        assert_eq!(normalize_entity("  CFH   Clearing, Inc. "), "cfh clearing inc");
        assert_eq!(normalize_entity("(x)"), "x");
        assert_eq!(normalize_entity("Foo(bar)Baz, \u{130}stanbul\t-- Caf\u{e9}  "), "foobaz i\u{307}stanbul caf\u{e9}");
    }

    proptest::proptest! {
        /// Words are joined as they are read; the key is the one splitting the lowered text
        /// on its gaps and joining the words again gives.
        #[test]
        fn entity_keys_join_the_words_between_gaps_with_one_space(mention in "[a-zA-Z\u{e9}\u{130}0-9 ,.\t()\\[\\]{}-]{0,24}") {
            let mut spaced = String::new();
            let mut depth = 0usize;
            for c in mention.chars() {
                match c {
                    '[' | '(' | '{' => depth += 1,
                    ']' | ')' | '}' => depth = depth.saturating_sub(1),
                    _ if depth > 0 => {}
                    c if c.is_alphanumeric() => spaced.extend(c.to_lowercase()),
                    _ => spaced.push(' '),
                }
            }
            let joined = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
            let key = normalize_entity(&mention);
            if joined.is_empty() {
                proptest::prop_assert!(!key.contains("  ") && key.trim() == key);
            } else {
                proptest::prop_assert_eq!(key, joined);
            }
        }
    }

    #[test]
    fn squad_normalisation() {
        assert_eq!(normalize_answer("The  Beatles!"), "beatles");
        assert_eq!(normalize_answer("an Apple, a day"), "apple day");
    }
}
