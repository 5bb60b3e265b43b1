//! The text a check reads: the sentences of the retrieved chunks, each with its passage's
//! title, Markdown headings left out.

use crate::kb::model::ChunkId;
use crate::retrieve::Retrieval;
use crate::text;

pub(super) struct Line<'a> {
    pub chunk: ChunkId,
    pub title: &'a str,
    pub text: &'a str,
}

/// Every sentence of the evidence, in retrieval order.
pub(super) fn lines(r: &Retrieval) -> Vec<Line<'_>> {
    r.chunks
        .iter()
        .flat_map(|c| {
            c.text
                .split_inclusive('\n')
                .filter(|body| !text::is_heading(body))
                .flat_map(|body| text::sentence_spans(body).into_iter().map(move |span| &body[span]))
                .map(move |sentence| Line { chunk: c.chunk, title: &c.title, text: sentence })
        })
        .collect()
}

/// Does `haystack` hold `needle` as whole words, case aside?
pub(super) fn says(haystack: &str, needle: &str) -> bool {
    text::find_words(&haystack.to_lowercase(), &needle.to_lowercase()).is_some()
}
