//! The records a knowledge base is made of. Every record is persisted in sled; the in-memory
//! indexes are derived from them at startup.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub type DocKey = u32;
pub type ChunkId = u32;
pub type NodeId = u32;
pub type EdgeId = u64;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub key: DocKey,
    /// The caller-visible identity (given id, title, or path); re-ingesting the same id
    /// replaces the document.
    pub id: String,
    pub title: String,
    pub source: String,
    /// Hex SHA-256 of title + text: unchanged content is a no-op on re-ingest.
    pub content_hash: Text,
    pub summary: Text,
    pub chunks: Vec<ChunkId>,
    pub edges: Vec<EdgeId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    pub id: ChunkId,
    pub doc: DocKey,
    pub ordinal: u32,
    /// Byte span of this chunk in the document text.
    pub span: (usize, usize),
    pub text: Text,
    /// The headings the chunk sits under below the title, outermost first, joined by
    /// [`SECTION_SEPARATOR`] ("Ownership › On call"); empty for text under no heading, and in
    /// chunks stored before sections were read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub section: String,
    /// The hyperlinks in the chunk, anchors as byte ranges of `text`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
}

/// A hyperlink as a document writes it: the anchor text's byte range (in the text that holds
/// it) and what it points to. A link between files of a folder points to the target's path
/// (absolute, as documents read from files are named), so it names that document's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub anchor: (usize, usize),
    pub target: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: NodeId,
    /// Display name: the first mention seen.
    pub name: String,
    /// Every distinct surface form merged into this node, `name` included.
    pub aliases: Vec<String>,
    /// Provenance: chunks that mention this entity (sorted, unique). Invariant: a superset of
    /// the chunks of every incident edge, so a node without chunks has no edges. The store
    /// keeps them as mention keys, beside the record (see `kb::store`).
    #[serde(default)]
    pub chunks: Vec<ChunkId>,
}

impl Node {
    /// Whether `other` goes by the same names: then its record, its alias keys and its
    /// blocks stay as they are, whatever chunks it gained or lost.
    pub fn same_names(&self, other: &Node) -> bool {
        self.name == other.name && self.aliases == other.aliases
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeOrigin {
    /// Found by the embedded rule-based extractor at ingest (noisy: weighs less in fusion).
    Extracted,
    /// Found by an LLM extractor at ingest.
    Llm,
    /// Imported from a precomputed triples file.
    Imported,
    /// Approved by a person from a proposal.
    Curated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub id: EdgeId,
    pub subject: NodeId,
    /// One text per label, shared by the edges naming it (a few thousand labels over millions
    /// of edges): those a records file or a full store read gives, and new ones (see
    /// [`super::relations::RelationLabels::shared`]).
    pub relation: Arc<str>,
    pub object: NodeId,
    /// Provenance: the chunk this triple was read from.
    pub chunk: ChunkId,
    pub origin: EdgeOrigin,
}

/// The form a relation is stored and matched in: trimmed, lower case.
pub fn relation_label(relation: &str) -> String {
    relation.trim().to_lowercase()
}

/// The text a triple is embedded as for query-to-fact linking (HippoRAG 2): the triple read
/// as one clause, "subject relation object".
pub fn fact_text(triple: &RawTriple) -> String {
    format!("{} {} {}", triple.subject.trim(), relation_label(&triple.relation), triple.object.trim())
}

/// What joins the headings of a section path ([`Chunk::section`]).
pub const SECTION_SEPARATOR: &str = " › ";

/// The text a chunk is embedded and BM25-indexed as: its document's title, then the chunk, so
/// that a passage that never repeats its subject's name still matches it.
pub fn passage_text(title: &str, section: &str, chunk: &str) -> String {
    if section.is_empty() {
        format!("{title}\n{chunk}")
    } else {
        format!("{title}{SECTION_SEPARATOR}{section}\n{chunk}")
    }
}

/// Whether a document of `chunks` chunks has a summary vector of its own. One that fits in
/// one chunk is embedded whole by that chunk, the better document vector; a pass over its
/// summary would double the embedding work of a corpus of short passages.
pub fn summary_embedded_apart(chunks: usize) -> bool {
    chunks != 1
}

/// A triple as extracted, before its mentions are resolved to nodes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RawTriple {
    pub subject: String,
    pub relation: String,
    pub object: String,
}

/// Bytes a [`Text`] can point into: a saved records file an open mapped, kept for as long
/// as a record read from it lives.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A record's long text (a chunk's passage, a document's summary and hash): its own, or a
/// stretch of the saved records file the KB was opened from. At a million passages those
/// texts are 0.7 GB; read from the file they cost the open no memory of its own, which the
/// kernel would first have to zero, and the page cache holds them only while they are read.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Own(Box<str>),
    Shared { bytes: SharedBytes, at: usize, len: u32 },
}

impl Text {
    /// The UTF-8 text at `at..at + len` of `bytes`; `None` if it is not there whole, or not
    /// UTF-8.
    pub fn shared(bytes: &SharedBytes, at: usize, len: usize) -> Option<Text> {
        std::str::from_utf8((**bytes).as_ref().get(at..at.checked_add(len)?)?).ok()?;
        Some(Text(Repr::Shared { bytes: Arc::clone(bytes), at, len: u32::try_from(len).ok()? }))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Own(text) => text,
            // Checked when made, of bytes that do not change (a mapped file is written
            // once); checked again rather than trusted, at the cost of one pass over a
            // passage.
            Repr::Shared { bytes, at, len } => {
                let bytes = (**bytes).as_ref();
                bytes.get(*at..at + *len as usize).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default()
            }
        }
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Default for Text {
    fn default() -> Text {
        Text(Repr::Own(Box::default()))
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text(Repr::Own(text.into_boxed_str()))
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text(Repr::Own(text.into()))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        String::deserialize(deserializer).map(Text::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8]) -> SharedBytes {
        Arc::new(bytes.to_vec())
    }

    #[test]
    fn a_shared_text_reads_its_stretch_of_the_file_and_equals_the_same_text_owned() {
        let bytes = file("xxThe ferry leaves at noon.yy".as_bytes());
        let shared = Text::shared(&bytes, 2, 25).expect("a whole UTF-8 stretch");
        assert_eq!(shared.as_str(), "The ferry leaves at noon.");
        assert_eq!(shared, Text::from("The ferry leaves at noon."));
        assert_eq!(shared, "The ferry leaves at noon.".to_string());
        assert_eq!(format!("{shared} / {shared:?}"), "The ferry leaves at noon. / \"The ferry leaves at noon.\"");
        assert!(shared.contains("noon"), "reads as a str");
    }

    #[test]
    fn a_stretch_past_the_end_or_not_utf8_is_refused() {
        let bytes = file(b"short");
        assert!(Text::shared(&bytes, 2, 4).is_none(), "past the end");
        assert!(Text::shared(&bytes, usize::MAX, 2).is_none(), "an offset that overflows");
        let split = file("caf\u{e9}".as_bytes());
        assert!(Text::shared(&split, 0, 4).is_none(), "cuts a character in two");
        assert_eq!(Text::shared(&split, 0, 5).map(|t| t.to_string()), Some("caf\u{e9}".to_string()));
    }

    #[test]
    fn a_text_serialises_as_a_plain_string_and_reads_back_owned() {
        let bytes = file(b"[Harbour opens at dawn]");
        let chunk = Chunk {
            id: 1,
            doc: 2,
            ordinal: 0,
            span: (0, 21),
            text: Text::shared(&bytes, 1, 21).expect("in the file"),
            section: String::new(),
            links: vec![],
        };
        let json = serde_json::to_value(&chunk).expect("serialises");
        assert_eq!(json["text"], "Harbour opens at dawn");
        let back: Chunk = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, chunk);
        assert_eq!(Text::default().as_str(), "");
    }
}
