//! The corpus's pages by the name of their topic: where a hyperlink would point. A passage is
//! about the entity its document's title names ("Lilu" for "Lilu (mythology)"), and a text
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
    /// Passages about each topic, by the topic's lower-case words joined by spaces.
    by_topic: HashMap<String, Vec<ChunkId>>,
    /// First words of the topics: a text's other words start no name.
    first_words: HashSet<String>,
    /// Words in the longest topic.
    longest: usize,
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
        Pages::from_titles(kb.chunks.iter().map(|(id, chunk)| (*id, kb.chunk_title(chunk))))
    }

    /// The pages of passages with these titles.
    pub fn from_titles<'t>(titles: impl IntoIterator<Item = (ChunkId, &'t str)>) -> Pages {
        let mut by_topic: HashMap<String, Vec<ChunkId>> = HashMap::new();
        for (chunk, title) in titles {
            let Some(topic) = text::title_entity(title) else { continue };
            let words: Vec<String> = text::words(&topic).collect();
            if !words.is_empty() {
                by_topic.entry(words.join(" ")).or_default().push(chunk);
            }
        }
        by_topic.values_mut().for_each(|chunks| chunks.sort_unstable());
        let first_words = by_topic.keys().filter_map(|k| k.split(' ').next()).map(str::to_string).collect();
        let longest = by_topic.keys().map(|k| k.split(' ').count()).max().unwrap_or(0);
        Pages { by_topic, first_words, longest }
    }

    /// The passages whose topic `text` names as a whole name ([`text::whole_name`]), with
    /// where it names it.
    pub fn named_in(&self, text: &str) -> HashMap<ChunkId, Anchor> {
        let spans = text::word_spans(text);
        let lower: Vec<String> = spans.iter().map(|(_, w)| w.to_lowercase()).collect();
        let mut named: HashMap<ChunkId, Anchor> = HashMap::new();
        for first in (0..lower.len()).filter(|i| self.first_words.contains(&lower[*i])) {
            let mut key = String::new();
            for (len, word) in lower[first..].iter().take(self.longest).enumerate().map(|(i, w)| (i + 1, w)) {
                if len > 1 {
                    key.push(' ');
                }
                key.push_str(word);
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
            (1, "Virginia"),
            (2, "West Virginia"),
            (3, "Lilu (mythology)"),
            (4, "Time"),
            (5, "Young, New South Wales"),
            (6, "Lilu (mythology)"),
        ]);
        let text = "Lilu, a demon of West Virginia, was born in Young, New South Wales. In time, Time named it.";
        let named = pages.named_in(text);
        let mut chunks: Vec<ChunkId> = named.keys().copied().collect();
        chunks.sort_unstable();
        assert_eq!(chunks, vec![2, 3, 4, 5, 6], "\"Virginia\" runs on from \"West\": {named:?}");
        let written = |r: &Range<usize>| &text[r.clone()];
        assert_eq!(written(&named[&5].first), "Young, New South Wales");
        assert_eq!(named[&3], named[&6], "two passages of one page");
        let time = &named[&4];
        assert_eq!((written(&time.first), time.capitalised.as_ref().map(written)), ("time", Some("Time")));
        assert!(pages.named_in("in time").get(&4).is_some_and(|a| a.capitalised.is_none()));
        assert!(pages.named_in("").is_empty());
    }
}
