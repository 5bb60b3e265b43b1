//! A file's bytes as a document's title and text, one reader per format. Every reader gives
//! its text in one shape, Markdown-like: headings as `#` lines (`##` for a second level), then
//! paragraphs, so chunking and heading handling downstream do not care where a text came
//! from. A file that cannot be read is an error for that file alone, never half a document.

mod docx;
mod html;
pub mod markdown;
mod pdf;

use std::path::Path;

use crate::error::Error;
use crate::kb::model::Link;

/// The formats read as one document each (JSON and JSONL corpora are read by `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Html,
    Docx,
    Pdf,
}

/// The extensions read as one document each, with their reader.
const BY_EXTENSION: &[(&str, Format)] = &[
    ("txt", Format::Text),
    ("text", Format::Text),
    ("md", Format::Markdown),
    ("markdown", Format::Markdown),
    ("html", Format::Html),
    ("htm", Format::Html),
    ("docx", Format::Docx),
    ("pdf", Format::Pdf),
];

impl Format {
    /// By extension, ignoring case.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        BY_EXTENSION.iter().find(|(known, _)| *known == ext).map(|(_, format)| *format)
    }

    /// Every extension [`Format::of`] knows.
    pub fn extensions() -> impl Iterator<Item = &'static str> {
        BY_EXTENSION.iter().map(|(ext, _)| *ext)
    }

    /// Whether the file is text (decoded line by line as UTF-8) rather than a binary
    /// container the reader decodes itself.
    pub fn is_text(self) -> bool {
        matches!(self, Format::Text | Format::Markdown | Format::Html)
    }
}

/// What a reader made of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// From the file itself (first heading, metadata); `None` leaves the file's name.
    pub title: Option<String>,
    pub text: String,
    /// Its hyperlinks (Markdown and HTML), anchors as byte ranges of `text`, targets as
    /// written.
    pub links: Vec<Link>,
    /// Parts that could not be read although the rest could ("page 3 has no text layer"),
    /// reported as warnings with the file's path.
    pub gaps: Vec<String>,
}

/// Reads a text format (`Text`, `Markdown`, `Html`) from its decoded content.
pub fn extract_text(format: Format, content: &str) -> Extracted {
    match format {
        Format::Html => html::extract(content),
        Format::Markdown => {
            let (text, links) = markdown::unlink(content);
            Extracted { title: markdown::title(content), text, links, gaps: Vec::new() }
        }
        _ => Extracted { title: None, text: content.to_string(), links: Vec::new(), gaps: Vec::new() },
    }
}

/// Reads a binary format (`Docx`, `Pdf`) from its bytes.
pub fn extract_binary(format: Format, bytes: &[u8], path: &Path) -> Result<Extracted, Error> {
    match format {
        Format::Docx => docx::extract(bytes, path),
        Format::Pdf => pdf::extract(bytes, path),
        text => Err(Error::Internal(format!("{text:?} is a text format, read as text"))),
    }
}

/// A reader's failure, with what to do about it.
fn unreadable(path: &Path, what: &str, cause: impl std::fmt::Display) -> Error {
    Error::Invalid(format!(
        "{}: not a readable {what} ({cause}); the file was skipped, repair or re-export it",
        path.display()
    ))
}

/// `lines` as the text shape every reader gives: trimmed lines, paragraphs apart by one
/// blank line, no runs of blanks.
fn tidy(lines: impl IntoIterator<Item = String>) -> String {
    let mut out = String::new();
    for line in lines {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&line);
    }
    out
}

/// A heading line at `level` (1 = `#`).
fn heading(level: usize, text: &str) -> String {
    format!("{} {}", "#".repeat(level.clamp(1, 6)), text.trim())
}
