//! Sentence chains: a sentence joined with one of another passage that names what the
//! sentence's passage is about, the two hops of a question read as text.

use super::evidence::{Sentence, TermWeights};
use crate::text;

/// The sentences a candidate's sentence stands on, and what of the question they state.
pub(super) struct Chain {
    /// Share of the question's content words the sentence, its passage's title and the
    /// linking sentence state together.
    pub coverage: f32,
    /// (the linking passage's subject, the bridge: the entity the sentence's passage is about)
    pub link: Option<(String, String)>,
    pub link_sentence: usize,
}

/// For each sentence, the chain of at most two passages that states the most of the
/// question: the sentence itself (with its passage's title), joined with a sentence of
/// another passage that names the entity this passage is about (the bridge of a two-hop
/// question: "Kell Hall is a hall of Norrmark College" leads to "Norrmark College is in
/// Vasa").
pub(super) fn chains(sentences: &[Sentence<'_>], weights: &TermWeights) -> Vec<Chain> {
    let padded: Vec<String> = sentences.iter().map(|s| format!(" {} ", text::normalize_answer(s.text))).collect();
    let subjects: Vec<Option<String>> = sentences
        .iter()
        .map(|s| text::title_entity(s.title).map(|t| text::normalize_answer(&t)).filter(|t| !t.is_empty()))
        .collect();
    sentences
        .iter()
        .zip(&subjects)
        .map(|(s, subject)| {
            let mut best = (weights.share(s.covered), None);
            if let Some(subject) = subject {
                let needle = format!(" {subject} ");
                for (j, l) in sentences.iter().enumerate() {
                    if l.chunk != s.chunk && padded[j].contains(&needle) {
                        let covered = weights.share(s.covered | l.covered);
                        if covered > best.0 {
                            best = (covered, Some(j));
                        }
                    }
                }
            }
            // An untitled passage links by its text alone: no path hop names it.
            let link = best.1.and_then(|j| {
                let from = text::title_entity(sentences[j].title).unwrap_or_else(|| sentences[j].title.to_string());
                let topic = text::title_entity(s.title).unwrap_or_else(|| s.title.to_string());
                // The bridge as the linking sentence writes it ("Comet Kell-Varga" for a
                // passage titled "kell_varga").
                let written = text::find_name(sentences[j].text, &topic).map(|r| sentences[j].text[r].to_string());
                (!from.trim().is_empty()).then(|| (from, written.unwrap_or(topic)))
            });
            Chain { coverage: best.0, link, link_sentence: best.1.unwrap_or(0) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::question::Question;
    use crate::control::reader::evidence::sentences;
    use crate::retrieve::testing::retrieval;

    #[test]
    fn a_sentence_chain_joins_the_passage_about_the_bridge_to_the_question() {
        let r = retrieval(&[
            ("Kell Hall", "Kell Hall is a student hall of Norrmark College."),
            ("Norrmark College", "Norrmark College is a college located in Vasa."),
            ("Lintu", "Lintu is a village east of the city of Vasa."),
        ]);
        let q = Question::parse("Kell Hall is a student hall of a college located in what city?", None);
        let sentences = sentences(&q, &r);
        let chains = chains(&sentences, &TermWeights::uniform(&q));
        // The college's sentence alone states little of the question; with the hall's
        // sentence that names the college it states all but the asked-for city.
        let college = &chains[1];
        assert!(college.coverage > sentences[1].overlap + 0.3, "{} vs {}", college.coverage, sentences[1].overlap);
        assert_eq!(college.link, Some(("Kell Hall".to_string(), "Norrmark College".to_string())));
        assert_eq!(sentences[college.link_sentence].chunk, 0);
        // No other passage names Lintu: no chain, and less of the question.
        assert!(chains[2].link.is_none() && chains[2].coverage < college.coverage);
    }

    #[test]
    fn rare_question_words_outweigh_common_ones() {
        let common = "The books of the era were many books.";
        let (_dir, kb) = crate::ingest::testing::kb_with_docs(&[
            ("Oswin of Tarrow", "Oswin of Tarrow was a scribe in the era of the abbeys."),
            ("Library", common),
            ("Archive", "Its books cover an era of books."),
            ("Press", "The press printed books in that era."),
        ]);
        let q = Question::parse("What language were books copied into during the era of Oswin of Tarrow?", None);
        let r = retrieval(&[("Library", common), ("Oswin", "Oswin of Tarrow copied from Greek.")]);
        let sentences = sentences(&q, &r);
        // Uniform weights: each sentence states about as many of the question's words.
        let uniform = chains(&sentences, &TermWeights::uniform(&q));
        let weighted = chains(&sentences, &TermWeights::new(&kb, &q));
        assert!(
            weighted[1].coverage - weighted[0].coverage > uniform[1].coverage - uniform[0].coverage,
            "the sentence naming Tarrow gains on the one about books: {} {} vs {} {}",
            weighted[1].coverage,
            weighted[0].coverage,
            uniform[1].coverage,
            uniform[0].coverage
        );
    }
}
