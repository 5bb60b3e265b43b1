//! The corpus's pages by the name of their topic: where a hyperlink would point. A passage is
//! about the entity its document's title names ("Mira" for "Mira (ship)"), and a text
//! that names that entity as a whole name links to it, the way an encyclopaedia's anchor text
//! links to a page. Read off titles and text rather than the extraction, so the links hold
//! whatever the extractor missed or a curator forgot.
//!
//! A snapshot of the KB's documents, rebuilt lazily after a write like the PPR graph, and
//! saved like it ([`super::snapshot`]).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::ops::Range;

use super::mapped::{Reader, put_str, put_u32s};
use super::model::ChunkId;
use super::snapshot::Snapshot;
use super::{Kb, Table};
use crate::error::{Error, Result};
use crate::{lexicon, text};

pub struct Pages {
    /// Passages about each topic, by [`Pages::topic_key`].
    by_topic: Table<String, Vec<ChunkId>>,
    /// Every leading run of words of a topic key ("new", "new york", "new york city"), by
    /// its hash under `hasher`: a text's words that start none end the search for a name
    /// there. Hashes rather than strings, as this only cuts a search short (a collision lets
    /// it go on to the exact lookup in `by_topic`), and a million topics have millions of
    /// prefixes to allocate.
    prefixes: foldhash::HashSet<u64>,
    hasher: foldhash::fast::RandomState,
    /// Read back from a save rather than built.
    pub read_from_save: bool,
}

/// The first bytes of saved pages, with the version of what [`Pages::from_titles`] computes.
const PAGES_MAGIC: &[u8; 8] = b"a2rpages";
const PAGES_VERSION: u32 = 1;

impl Snapshot for Pages {
    const NAME: &'static str = "pages";

    fn build_from(kb: &Kb) -> Self {
        Pages::from_titles(kb.docs.values().map(|doc| {
            let opening = doc.chunks.first().and_then(|c| kb.chunks.get(c)).map(|c| c.text.as_str());
            (doc.title.as_str(), opening, doc.chunks.as_slice())
        }))
    }

    fn encode(&self, _: &Kb) -> Vec<u8> {
        self.encoded()
    }

    fn decode(bytes: &[u8], _: &Kb) -> Result<Self> {
        Pages::decoded(bytes)
    }
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
    /// The magic and version, the topic count (u64), then per topic in key order its key's
    /// length (u32) and bytes and its passages' count (u32) and ids (u32), little-endian.
    fn encoded(&self) -> Vec<u8> {
        let mut topics: Vec<(&String, &Vec<ChunkId>)> = self.by_topic.iter().collect();
        topics.sort_unstable();
        let mut out = Vec::new();
        out.extend_from_slice(PAGES_MAGIC);
        out.extend_from_slice(&PAGES_VERSION.to_le_bytes());
        out.extend_from_slice(&(topics.len() as u64).to_le_bytes());
        for (key, chunks) in topics {
            put_str(&mut out, key);
            put_u32s(&mut out, chunks);
        }
        out
    }

    /// The pages [`Pages::encoded`] wrote; an error for bytes of another version, cut short,
    /// or that run on.
    fn decoded(bytes: &[u8]) -> Result<Pages> {
        let damaged = |what: &str| Error::Index(format!("the saved pages are unusable: {what}"));
        let rest = bytes.strip_prefix(PAGES_MAGIC).ok_or_else(|| damaged("not a pages file"))?;
        let mut reader = Reader { rest };
        if reader.u32() != Some(PAGES_VERSION) {
            return Err(damaged("another version"));
        }
        let topics = reader.u64().ok_or_else(|| damaged("cut short"))?;
        // Sized once (a topic takes at least 8 bytes, whatever the count claims): a first
        // query after an open reads a million topics here.
        let room = usize::try_from(topics).unwrap_or(usize::MAX).min(reader.rest.len() / 8);
        let mut by_topic = Table::with_capacity_and_hasher(room, Default::default());
        for _ in 0..topics {
            let key = reader.str().ok_or_else(|| damaged("a key"))?.to_string();
            let chunks = reader.u32s().ok_or_else(|| damaged("cut short"))?;
            by_topic.insert(key, chunks);
        }
        if !reader.rest.is_empty() {
            return Err(damaged("bytes after the last topic"));
        }
        let mut pages = Pages::indexed(by_topic);
        pages.read_from_save = true;
        Ok(pages)
    }

    /// The pages of documents with these titles, opening texts and chunks. A page is found
    /// by its title's topic and by the shorter name its text opens with, when the title
    /// starts with that name: "Ledger is the billing service ..." under "Ledger service",
    /// where a heading adds what kind of thing its subject is and other texts name it alone.
    pub fn from_titles<'t>(docs: impl IntoIterator<Item = (&'t str, Option<&'t str>, &'t [ChunkId])>) -> Pages {
        let mut by_topic: Table<String, Vec<ChunkId>> = Table::default();
        for (title, opening, chunks) in docs {
            let Some(key) = Pages::topic_key(title) else { continue };
            let short = opening.and_then(opening_name).filter(|name| {
                key.strip_prefix(name.as_str()).is_some_and(|rest| rest.starts_with(' '))
                    && !text::words(name).all(|w| text::is_stopword(&w))
            });
            by_topic.entry(key).or_default().extend_from_slice(chunks);
            if let Some(short) = short {
                by_topic.entry(short).or_default().extend_from_slice(chunks);
            }
        }
        by_topic.values_mut().for_each(|chunks| {
            chunks.sort_unstable();
            chunks.dedup();
        });
        Pages::indexed(by_topic)
    }

    /// The pages of these topics, with the prefixes a search for names walks.
    fn indexed(by_topic: Table<String, Vec<ChunkId>>) -> Pages {
        let hasher = foldhash::fast::RandomState::default();
        let mut prefixes = foldhash::HashSet::with_capacity_and_hasher(2 * by_topic.len(), Default::default());
        for key in by_topic.keys() {
            prefixes.extend(key.match_indices(' ').map(|(at, _)| hasher.hash_one(&key[..at])));
            prefixes.insert(hasher.hash_one(key.as_str()));
        }
        Pages { by_topic, prefixes, hasher, read_from_save: false }
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
                if !self.prefixes.contains(&self.hasher.hash_one(key.as_str())) {
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

/// The name a text's first sentence defines, as a topic key: the capitalised words it opens
/// with (after any heading lines and an article) when a copula follows them ("The Relay
/// Bus is ..." -> "relay bus"). A run cut short by a lower-case word ("Bank" of "Bank of
/// Kell Tower is ...") is no name of the page.
fn opening_name(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'))?;
    let spans = text::word_spans(line);
    let skip = usize::from(spans.first().is_some_and(|(_, w)| lexicon::contains(lexicon::ARTICLES, &w.to_lowercase())));
    let name: Vec<String> = spans[skip..]
        .iter()
        .take_while(|(_, w)| w.starts_with(char::is_uppercase))
        .map(|(_, w)| w.to_lowercase())
        .collect();
    let next = spans.get(skip + name.len()).map(|(_, w)| w.to_lowercase());
    let defined = next.is_some_and(|w| lexicon::contains(lexicon::COPULAS, &w));
    (!name.is_empty() && defined).then(|| name.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_names_the_pages_whose_topic_it_names_as_a_whole_name() {
        let pages = Pages::from_titles([
            ("Kell", None, &[1][..]),
            ("North Kell", None, &[2]),
            ("Mira (ship)", None, &[3, 6]),
            ("Time", None, &[4]),
            ("Orwick, North Selby", None, &[5]),
            ("It", None, &[7]),
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

    /// Saved pages name what the built ones name; bytes of another version, cut short or
    /// running on are refused.
    #[test]
    fn saved_pages_read_back_as_built_and_damage_is_refused() {
        let pages = Pages::from_titles([
            ("Kell", None, &[1][..]),
            ("North Kell", None, &[2]),
            ("Mira (ship)", None, &[3, 6]),
            ("Ledger service", Some("Ledger is the billing service."), &[7]),
        ]);
        let bytes = pages.encoded();
        let read = Pages::decoded(&bytes).unwrap();
        assert!(read.read_from_save && !pages.read_from_save);
        for text in ["Mira sailed from North Kell to Kell.", "Ledger bills.", "nothing here", ""] {
            let sorted = |p: &Pages| {
                let mut named: Vec<(ChunkId, Anchor)> = p.named_in(text).into_iter().collect();
                named.sort_by_key(|(c, _)| *c);
                named
            };
            assert_eq!(sorted(&read), sorted(&pages), "{text}");
        }
        assert_eq!(pages.named_in("Mira sailed from North Kell to Kell.").len(), 4);
        let mut other_version = bytes.clone();
        other_version[PAGES_MAGIC.len()] += 1;
        let mut running_on = bytes.clone();
        running_on.push(0);
        let cut_short = bytes[..bytes.len() - 2].to_vec();
        for (damage, bytes) in
            [("another version", other_version), ("cut short", cut_short), ("running on", running_on)]
        {
            assert!(Pages::decoded(&bytes).is_err(), "{damage} was accepted");
        }
    }

    /// Issue 34: a page titled with its subject's kind ("Ledger service") is found by the
    /// name its text opens with, and only by a name the title starts with.
    #[test]
    fn a_page_is_named_by_the_name_its_text_opens_with() {
        let pages = Pages::from_titles([
            ("Ledger service", Some("# Ledger service\n\n## Overview\nLedger is the billing service."), &[1][..]),
            ("Relay event bus", Some("The Relay event bus carries events."), &[2]),
            ("Bank of Kell Tower", Some("Bank of Kell Tower is a building."), &[5]),
            ("Harbour team", Some("Ada Lind leads it."), &[3]),
            ("The Orwick", Some("The Orwick flows north."), &[4]),
        ]);
        let named = |text: &str| {
            let mut chunks: Vec<ChunkId> = pages.named_in(text).into_keys().collect();
            chunks.sort_unstable();
            chunks
        };
        assert_eq!(named("Invoices come from Ledger."), [1]);
        assert_eq!(named("Relay keeps events for Ledger service."), [1], "no sentence defines \"Relay\"");
        assert!(named("a Bank").is_empty(), "a name cut short by a lower-case word");
        assert!(named("Orwick").is_empty(), "an article is no name: the whole title is its topic");
        assert_eq!(named("Ada Lind and the Harbour team."), [3]);
        assert!(named("Ada Lind").is_empty(), "a name the title does not start with names no page");
        assert_eq!(super::opening_name("## Overview\nThe Relay Event Bus is fast."), Some("relay event bus".into()));
    }
}
