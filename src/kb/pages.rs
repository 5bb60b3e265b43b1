//! The corpus's pages by the name of their topic: where a hyperlink would point. A passage is
//! about the entity its document's title names ("Mira" for "Mira (ship)"), and a text
//! that names that entity as a whole name links to it, the way an encyclopaedia's anchor text
//! links to a page. Read off titles and text rather than the extraction, so the links hold
//! whatever the extractor missed or a curator forgot.
//!
//! A snapshot of the KB's documents, rebuilt lazily after a write like the PPR graph, and
//! saved like it ([`super::snapshot`]).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::Kb;
use super::mapped::{Reader, put_str, put_u32s, u64_at};
use super::model::{ChunkId, SharedBytes};
use super::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::{lexicon, text};

/// The pages, read in place from their encoding (see [`Pages::encoded`]): a save's mapped
/// file, or the bytes built in memory. A topic is found by binary search over the keys in
/// order, so a first query after an open reads the file's header and checks its layout
/// instead of decoding a million topics into tables.
pub struct Pages {
    bytes: SharedBytes,
    topics: usize,
    /// Read back from a save rather than built.
    pub read_from_save: bool,
}

/// The first bytes of saved pages, with the version of what [`Pages::from_titles`] computes
/// and of the layout.
const PAGES_MAGIC: &[u8; 8] = b"a2rpages";
const PAGES_VERSION: u32 = 2;
/// Where the topics' offsets start: after the magic, the version and the topic count.
const OFFSETS: usize = 20;

impl Snapshot for Pages {
    const NAME: &'static str = "pages";

    fn build_from(kb: &Kb) -> Self {
        Pages::from_titles(kb.docs.values().map(|doc| {
            let opening = doc.chunks.first().and_then(|c| kb.chunks.get(*c)).map(|c| c.text.as_str());
            (doc.title.as_str(), opening, doc.chunks.as_slice())
        }))
    }

    fn encode(&self, _: &Kb) -> Vec<u8> {
        self.encoded()
    }

    fn decode(bytes: SharedBytes, _: &Kb) -> Result<Self> {
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
    /// The magic and version, the topic count (u64), each topic's offset in the bytes (u64),
    /// then per topic in key order its key's length (u32) and bytes and its passages' count
    /// (u32) and ids (u32), little-endian.
    fn encoded(&self) -> Vec<u8> {
        (*self.bytes).as_ref().to_vec()
    }

    /// The encoding of these topics (see [`Pages::encoded`]).
    fn encode_topics(by_topic: HashMap<String, Vec<ChunkId>>) -> Vec<u8> {
        let mut topics: Vec<(String, Vec<ChunkId>)> = by_topic.into_iter().collect();
        topics.sort_unstable();
        let mut out = Vec::new();
        out.extend_from_slice(PAGES_MAGIC);
        out.extend_from_slice(&PAGES_VERSION.to_le_bytes());
        out.extend_from_slice(&(topics.len() as u64).to_le_bytes());
        let mut entries = Vec::new();
        let first = (OFFSETS + 8 * topics.len()) as u64;
        for (key, chunks) in &topics {
            out.extend_from_slice(&(first + entries.len() as u64).to_le_bytes());
            put_str(&mut entries, key);
            put_u32s(&mut entries, chunks);
        }
        out.extend_from_slice(&entries);
        out
    }

    /// The pages [`Pages::encoded`] wrote; an error for bytes of another version, cut short,
    /// that run on, or whose topics are out of order. Every entry's extent is checked here,
    /// so a lookup reads only what was checked.
    fn decoded(bytes: SharedBytes) -> Result<Pages> {
        let damaged = |what: &str| Error::Index(format!("the saved pages are unusable: {what}"));
        let all = (*bytes).as_ref();
        let rest = all.strip_prefix(PAGES_MAGIC).ok_or_else(|| damaged("not a pages file"))?;
        let mut reader = Reader { rest };
        if reader.u32() != Some(PAGES_VERSION) {
            return Err(damaged("another version"));
        }
        let topics = reader.u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| damaged("cut short"))?;
        let entries_at = topics.checked_mul(8).and_then(|n| n.checked_add(OFFSETS)).filter(|at| *at <= all.len());
        let mut expected = entries_at.ok_or_else(|| damaged("cut short"))?;
        let mut previous: Option<&str> = None;
        for topic in 0..topics {
            if u64_at(all, OFFSETS + 8 * topic) != expected as u64 {
                return Err(damaged("an entry out of place"));
            }
            let mut entry = Reader { rest: &all[expected..] };
            let key = entry.str().ok_or_else(|| damaged("a key"))?;
            let chunks = entry.u32().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| damaged("cut short"))?;
            entry.bytes(4 * chunks).ok_or_else(|| damaged("cut short"))?;
            if previous.is_some_and(|p| p >= key) {
                return Err(damaged("topics out of order"));
            }
            previous = Some(key);
            expected = all.len() - entry.rest.len();
        }
        if expected != all.len() {
            return Err(damaged("bytes after the last topic"));
        }
        Ok(Pages { bytes, topics, read_from_save: true })
    }

    /// The pages of documents with these titles, opening texts and chunks. A page is found
    /// by its title's topic and by the shorter name its text opens with, when the title
    /// starts with that name: "Ledger is the billing service ..." under "Ledger service",
    /// where a heading adds what kind of thing its subject is and other texts name it alone.
    pub fn from_titles<'t>(docs: impl IntoIterator<Item = (&'t str, Option<&'t str>, &'t [ChunkId])>) -> Pages {
        let mut by_topic: HashMap<String, Vec<ChunkId>> = HashMap::new();
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
        let topics = by_topic.len();
        Pages { bytes: Arc::new(Pages::encode_topics(by_topic)), topics, read_from_save: false }
    }

    /// Topic `i`'s entry: its key, then a reader at its passages.
    fn entry(&self, i: usize) -> Option<(&str, Reader<'_>)> {
        if i >= self.topics {
            return None;
        }
        let all = (*self.bytes).as_ref();
        let at = usize::try_from(u64_at(all, OFFSETS + 8 * i)).ok()?;
        let mut entry = Reader { rest: all.get(at..)? };
        Some((entry.str()?, entry))
    }

    /// The first topic whose key is not below `key`, and that key (`None` past the last).
    fn first_from(&self, key: &str) -> (usize, Option<&str>) {
        let (mut low, mut high) = (0, self.topics);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.entry(middle) {
                Some((found, _)) if found < key => low = middle + 1,
                _ => high = middle,
            }
        }
        (low, self.entry(low).map(|(found, _)| found))
    }

    /// The passages of topic `i`.
    fn chunks(&self, i: usize) -> Vec<ChunkId> {
        self.entry(i).and_then(|(_, mut entry)| entry.short_list(Reader::u32)).unwrap_or_default()
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
                // Keys in byte order put every key that runs on from `key` (with a space)
                // right after it, so the first key from `key` says whether to read on.
                let (topic, found) = self.first_from(&key);
                let Some(found) = found else { break };
                let runs_on =
                    found.strip_prefix(key.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '));
                if !runs_on {
                    break;
                }
                if found.len() != key.len() {
                    continue;
                }
                let chunks = self.chunks(topic);
                let Some(range) = text::whole_name(text, &spans, first, len) else { continue };
                let capitalised = text[range.clone()].chars().any(char::is_uppercase);
                for chunk in &chunks {
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
        let no_pages = Pages::from_titles([("It", None, &[8][..])]);
        assert!(no_pages.named_in("It was Mira.").is_empty(), "no topic: nothing is named");
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
        let read = Pages::decoded(Arc::new(bytes.clone())).unwrap();
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
        // The first topic's key ("kell") made to sort after the second's.
        let first_key = OFFSETS + 8 * u64_at(&bytes, 12) as usize + 4;
        let mut out_of_order = bytes.clone();
        out_of_order[first_key] = b'z';
        let mut misplaced = bytes.clone();
        misplaced[OFFSETS] += 1;
        for (damage, bytes) in [
            ("another version", other_version),
            ("cut short", cut_short),
            ("running on", running_on),
            ("out of order", out_of_order),
            ("an entry out of place", misplaced),
        ] {
            assert!(Pages::decoded(Arc::new(bytes)).is_err(), "{damage} was accepted");
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
