//! A candidate answer and what speaks for it, gathered by the walk and the span reader.

use crate::kb::model::ChunkId;
use crate::retrieve::PathHop;
use crate::text;

#[derive(Default, Debug)]
pub(super) struct Candidate {
    pub surface: String,
    /// Best alignment of a path from a seed to it, in [0, 1].
    pub path: f32,
    pub path_hops: Vec<PathHop>,
    /// Best sentence support, in [0, 1].
    pub support: f32,
    pub support_chunk: Option<ChunkId>,
    /// The sentence of another passage that leads to the supporting sentence's passage.
    pub link: Option<PathHop>,
    /// A sentence calls it by the question's type noun.
    pub typed: bool,
    /// A sentence puts it after a preposition of place ("born in Tromsø").
    pub placed: bool,
}

impl Candidate {
    /// A candidate with a surface and no evidence yet.
    #[cfg(test)]
    pub fn named(surface: &str) -> Candidate {
        Candidate { surface: surface.into(), ..Candidate::default() }
    }
}

/// The answer a name or span stands for: a parenthesised qualifier ("Mira Holt (born 1963)")
/// and a possessive ending ("Norway's") are not part of it.
pub(super) fn answer_surface(span: &str) -> String {
    let name = text::title_entity(span).unwrap_or_else(|| span.trim().to_string());
    let name = text::without_possessive(&name);
    name.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':')).to_string()
}
