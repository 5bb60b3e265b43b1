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
            .take(self.sentences)
            .map(|r| &body[r])
            .collect();
        let lower_body = body.to_lowercase();
        let mut counted: Vec<(usize, usize, &String)> = entities
            .iter()
            .enumerate()
            .map(|(first, e)| (lower_body.matches(&e.to_lowercase()).count(), first, e))
            .collect();
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
