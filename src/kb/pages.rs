//! The corpus's pages by the name of their topic: where a hyperlink would point. A passage is
//! about the entity its document's title names ("Mira" for "Mira (ship)"), and a text
//! that names that entity as a whole name links to it, the way an encyclopaedia's anchor text
//! links to a page. Read off titles and text rather than the extraction, so the links hold
//! whatever the extractor missed or a curator forgot.
//!
//! A snapshot of the KB's documents, rebuilt lazily after a write like the PPR graph.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::Kb;
use super::model::ChunkId;
use crate::text;

pub struct Pages {
    /// Passages about each topic, by [`Pages::topic_key`].
    by_topic: HashMap<String, Vec<ChunkId>>,
    /// Every leading run of words of a topic key ("new", "new york", "new york city"): a
    /// text's words that start none end the search for a name there.
    prefixes: HashSet<String>,
}

/// Where a text names a page's topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The first mention, as the text writes it.
    pub first: Range<usize>,
    /// The first mention written as a name, with a capital letter: "Iowa" names a page, while
    /// "time", "water" or "1984" may be a common word that happens to title one.
    pub capitalised: Option<Range<usize>>,
}

impl Pages {
    /// The snapshot of `kb`'s current documents.
    pub fn build(kb: &Kb) -> Pages {
        Pages::from_titles(kb.docs.values().map(|doc| (doc.title.as_str(), doc.chunks.as_slice())))
    }

    /// The pages of documents with these titles and chunks.
    pub fn from_titles<'t>(docs: impl IntoIterator<Item = (&'t str, &'t [ChunkId])>) -> Pages {
        let mut by_topic: HashMap<String, Vec<ChunkId>> = HashMap::new();
        for (title, chunks) in docs {
            if let Some(key) = Pages::topic_key(title) {
                by_topic.entry(key).or_default().extend_from_slice(chunks);
            }
        }
        by_topic.values_mut().for_each(|chunks| chunks.sort_unstable());
        let mut prefixes = HashSet::new();
        for key in by_topic.keys() {
            prefixes.extend(key.match_indices(' ').map(|(at, _)| key[..at].to_string()));
            prefixes.insert(key.clone());
        }
        Pages { by_topic, prefixes }
    }

    /// The key of the topic a title names: its entity's lower-case words joined by spaces
    /// ("mira" for "Mira (ship)"). None for a title of stopwords alone ("It", "She"):
    /// every text names those.
    pub fn topic_key(title: &str) -> Option<String> {
        let words: Vec<String> = text::words(&text::title_entity(title)?).collect();
        (!words.iter().all(|w| text::is_stopword(w))).then(|| words.join(" "))
    }

    /// The passages whose topic `text` names as a whole name ([`text::whole_name`]), with
    /// where it names it.
    pub fn named_in(&self, text: &str) -> HashMap<ChunkId, Anchor> {
        let spans = text::word_spans(text);
        let lower: Vec<String> = spans.iter().map(|(_, w)| w.to_lowercase()).collect();
        let mut named: HashMap<ChunkId, Anchor> = HashMap::new();
        for first in 0..lower.len() {
            let mut key = String::new();
            for (len, word) in lower[first..].iter().enumerate().map(|(i, w)| (i + 1, w)) {
                if len > 1 {
                    key.push(' ');
                }
                key.push_str(word);
                if !self.prefixes.contains(&key) {
                    break;
                }
                let Some(chunks) = self.by_topic.get(&key) else { continue };
                let Some(range) = text::whole_name(text, &spans, first, len) else { continue };
                let capitalised = text[range.clone()].chars().any(char::is_uppercase);
                for chunk in chunks {
                    let anchor =
                        named.entry(*chunk).or_insert_with(|| Anchor { first: range.clone(), capitalised: None });
                    if capitalised && anchor.capitalised.is_none() {
                        anchor.capitalised = Some(range.clone());
                    }
                }
            }
        }
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_names_the_pages_whose_topic_it_names_as_a_whole_name() {
        let pages = Pages::from_titles([
            ("Kell", &[1][..]),
            ("North Kell", &[2]),
            ("Mira (ship)", &[3, 6]),
            ("Time", &[4]),
            ("Orwick, North Selby", &[5]),
            ("It", &[7]),
        ]);
        let text = "Mira, a ship of North Kell, was built in Orwick, North Selby. In time, Time named it.";
        let named = pages.named_in(text);
        let mut chunks: Vec<ChunkId> = named.keys().copied().collect();
        chunks.sort_unstable();
        assert_eq!(chunks, vec![2, 3, 4, 5, 6], "\"Kell\" runs on from \"North\"; \"It\" titles no topic: {named:?}");
        let written = |r: &Range<usize>| &text[r.clone()];
        assert_eq!(written(&named[&5].first), "Orwick, North Selby");
        assert_eq!(named[&3], named[&6], "two passages of one page");
        let time = &named[&4];
        assert_eq!((written(&time.first), time.capitalised.as_ref().map(written)), ("time", Some("Time")));
        assert!(pages.named_in("in time").get(&4).is_some_and(|a| a.capitalised.is_none()));
        assert!(pages.named_in("").is_empty());
        assert_eq!(Pages::topic_key("Mira (ship)").as_deref(), Some("mira"));
        assert_eq!(Pages::topic_key("It"), None);
    }
}
