//! Hand-made retrievals for the unit tests of the layers above.

use super::seeds::Seeds;
use super::{RankedChunk, Retrieval, Stage};

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
