//! Per-document summaries, used by the controller's scope gate.

use std::collections::HashMap;

use crate::error::Result;
use crate::text;

pub trait Summarizer: Send + Sync {
    fn summarize(&self, title: &str, text: &str, entities: &[String]) -> Result<String>;
}

/// Lead sentences plus the most frequently mentioned entities.
pub struct ExtractiveSummarizer {
    pub sentences: usize,
    pub entities: usize,
}

impl Summarizer for ExtractiveSummarizer {
    fn summarize(&self, title: &str, body: &str, entities: &[String]) -> Result<String> {
        let lead: Vec<&str> = text::sentence_spans(body)
            .into_iter()
            .map(|r| &body[r])
            .filter(|s| !text::is_heading(s))
            .take(self.sentences)
            .collect();
        let counts = mention_counts(&body.to_lowercase(), entities);
        let mut counted: Vec<(usize, usize, &String)> =
            entities.iter().enumerate().map(|(first, e)| (counts[first], first, e)).collect();
        // Most mentioned first; ties keep document order.
        counted.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut seen = HashMap::new();
        let salient: Vec<&str> = counted
            .into_iter()
            .filter(|(_, _, e)| seen.insert(e.to_lowercase(), ()).is_none())
            .take(self.entities)
            .map(|(_, _, e)| e.as_str())
            .collect();
        let mut summary = String::new();
        if !title.is_empty() {
            summary.push_str(title);
            summary.push_str(". ");
        }
        summary.push_str(&lead.join(" "));
        if !salient.is_empty() {
            summary.push_str(" Entities: ");
            summary.push_str(&salient.join(", "));
        }
        Ok(summary.trim().to_string())
    }
}

/// How often each entity occurs in `lower_body` (case-insensitively), all entities in one
/// pass: counting them one by one is entities x body, quadratic on a large document.
/// Occurrences of one entity may overlap ("aa" twice in "aaa"), unlike `str::matches`.
fn mention_counts(lower_body: &str, entities: &[String]) -> Vec<usize> {
    let mut distinct: HashMap<String, usize> = HashMap::new();
    let slots: Vec<Option<usize>> = entities
        .iter()
        .map(|e| {
            let lower = e.to_lowercase();
            if lower.is_empty() {
                return None;
            }
            let next = distinct.len();
            Some(*distinct.entry(lower).or_insert(next))
        })
        .collect();
    let mut patterns = vec![String::new(); distinct.len()];
    for (pattern, slot) in distinct {
        patterns[slot] = pattern;
    }
    let per_pattern = match aho_corasick::AhoCorasick::new(&patterns) {
        Ok(matcher) => {
            let mut counts = vec![0usize; patterns.len()];
            for m in matcher.find_overlapping_iter(lower_body) {
                counts[m.pattern().as_usize()] += 1;
            }
            counts
        }
        // Only past the automaton's size limits: count one by one, slowly but exactly.
        Err(_) => patterns.iter().map(|p| lower_body.matches(p.as_str()).count()).collect(),
    };
    slots.into_iter().map(|s| s.map_or(0, |s| per_pattern[s])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lead_sentences_and_salient_entities() {
        let s = ExtractiveSummarizer { sentences: 1, entities: 2 };
        let out = s
            .summarize(
                "Oslo",
                "Oslo is the capital of Norway. Oslo lies on a fjord. Bergen is elsewhere in Norway.",
                &["Oslo".into(), "Bergen".into(), "Norway".into()],
            )
            .unwrap();
        assert_eq!(out, "Oslo. Oslo is the capital of Norway. Entities: Oslo, Norway");
    }
}
