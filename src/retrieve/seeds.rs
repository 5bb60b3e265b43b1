//! Seeds: the query's entity mentions and relation phrases, aligned to graph nodes and
//! relation labels by the hybrid matcher (only confident matches become seeds), and the
//! facts closest to the query ([`super::facts`]).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::facts::FactSeed;
use crate::config::RetrieveSettings;
use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::ingest::extract::entity_mentions;
use crate::kb::Kb;
use crate::kb::align::{blocking_keys, edit_similarity};
use crate::kb::model::{ChunkId, NodeId};
use crate::lexicon::{self, WH_WORDS};
use crate::text::{self, normalize_entity};

/// Query n-grams up to this many words with a word written as a name in them are looked up
/// as exact aliases, which catches names the entity extractor splits or runs on ("the band
/// Low Tide's singer" aligns "Low Tide").
const MAX_NGRAM: usize = 4;
const MAX_RELATION_SEEDS: usize = 32;
/// Names sharing an unknown word's blocking key beyond which none is compared with it: a
/// prefix that common ("john") says nothing of which name was meant, and comparing them all
/// would cost a large KB's query milliseconds.
const MAX_SPELLING_CANDIDATES: usize = 256;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EntitySeed {
    pub node: NodeId,
    pub name: String,
    pub mention: String,
    pub score: f32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RelationSeed {
    pub label: String,
    pub score: f32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Seeds {
    pub entities: Vec<EntitySeed>,
    pub relations: Vec<RelationSeed>,
    /// The query's relation phrase (content words outside entity mentions).
    pub relation_phrase: String,
    /// The facts closest to the query, best first.
    pub facts: Vec<FactSeed>,
}

impl Seeds {
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.entities.iter().map(|s| s.node).collect()
    }
}

/// What seed alignment reads off a query: exact alias hits on its n-grams, the capitalised
/// mentions to align fuzzily, and the relation phrase (content words outside both).
struct QueryParts {
    exact: Vec<EntitySeed>,
    mentions: Vec<String>,
    relation_phrase: String,
}

fn query_parts(kb: &Kb, query: &str) -> QueryParts {
    let query = &written_as_the_corpus_writes(kb, query);
    let mut exact = Vec::new();
    let mut mentioned_words: HashSet<String> = HashSet::new();
    // Exact alias hits on the query's n-grams written as names, longest first; a word
    // belongs to one hit at most ("Orwick River" leaves no "River" seed behind it).
    let words: Vec<&str> = query.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
    let named: Vec<bool> = words.iter().enumerate().map(|(i, w)| written_as_name(i, w)).collect();
    let mut taken = vec![false; words.len()];
    for n in (1..=MAX_NGRAM).rev() {
        for (start, window) in words.windows(n).enumerate() {
            let span = start..start + n;
            if !named[span.clone()].iter().any(|n| *n) || taken[span.clone()].iter().any(|t| *t) {
                continue;
            }
            let phrase = window.join(" ");
            let key = normalize_entity(&phrase);
            let content = text::content_terms(&key);
            if content.is_empty() || (n == 1 && key.len() < 3) {
                continue;
            }
            if let Some(node) = kb.node_by_alias(&phrase) {
                let name = kb.node(node).map_or_else(String::new, |n| n.name.clone());
                mentioned_words.extend(text::words(&phrase));
                taken[span].iter_mut().for_each(|t| *t = true);
                exact.push(EntitySeed { node, name, mention: phrase, score: 1.0 });
            }
        }
    }
    let mentions = entity_mentions(query);
    for mention in &mentions {
        mentioned_words.extend(text::words(mention));
    }
    let relation_phrase = text::content_terms(query)
        .into_iter()
        .filter(|w| !mentioned_words.contains(w) && !WH_WORDS.contains(&w.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    QueryParts { exact, mentions, relation_phrase }
}

/// `query` with each lower-case run of words that the corpus writes as a name written as the
/// corpus writes it ("who owns gatekeeper?" -> "who owns Gatekeeper?"), so that a question
/// typed in lower case seeds, and is read, as it would be typed with capitals. A run is such
/// a name when it is an alias written with a capital, at least half the passages holding its
/// rarest word mention its entity, and none of those passages writes it in lower case: a
/// common word the corpus also has as an entity ("River", "Response" at the head of a
/// section) fails one test or the other and stays as typed. A word no passage holds may be
/// a name spelled without its accents ([`name_spelled_alike`]). Longest runs first; a word
/// joins one run.
fn written_as_the_corpus_writes(kb: &Kb, query: &str) -> String {
    let spans = text::word_spans(query);
    let mut runs: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut taken = vec![false; spans.len()];
    // A run neither opens nor ends on a function or question word.
    let edge_word = |w: &str| {
        let w = w.to_lowercase();
        text::is_stopword(&w) || WH_WORDS.contains(&w.as_str())
    };
    for n in (1..=MAX_NGRAM).rev() {
        for start in 0..spans.len().saturating_sub(n - 1) {
            let span = start..start + n;
            let window = &spans[span.clone()];
            let lower = window.iter().all(|(_, w)| !w.chars().any(char::is_uppercase));
            if !lower || taken[span.clone()].iter().any(|t| *t) || edge_word(window[0].1) || edge_word(window[n - 1].1)
            {
                continue;
            }
            let (first, last) = (window[0].0, window[n - 1].0 + window[n - 1].1.len());
            if let Some(written) = name_the_corpus_writes(kb, &query[first..last]) {
                taken[span].iter_mut().for_each(|t| *t = true);
                runs.push((first..last, written));
            }
        }
    }
    runs.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut out = query.to_string();
    for (range, written) in runs {
        out.replace_range(range, &written);
    }
    out
}

/// The alias `phrase` (typed in lower case) as the corpus writes it, if it writes it as a name
/// (see [`written_as_the_corpus_writes`]).
fn name_the_corpus_writes(kb: &Kb, phrase: &str) -> Option<String> {
    let key = normalize_entity(phrase);
    if key.len() < 3 {
        return None;
    }
    let Some(node) = kb.node_by_alias(phrase).and_then(|id| kb.node(id)) else {
        return name_spelled_alike(kb, phrase);
    };
    let capitalised: Vec<&String> =
        node.aliases.iter().filter(|a| normalize_entity(a) == key && a.chars().any(char::is_uppercase)).collect();
    let rarest = text::content_terms(phrase).iter().map(|w| kb.bm25().frequency(w)).min()?;
    if capitalised.is_empty() || 2 * node.chunks.len() < rarest || written_in_lower_case(kb, &node.chunks, phrase) {
        return None;
    }
    // The alias itself where it has the typed words; else the typed words with capitals
    // ("orwick river" for "Orwick River (Kell)").
    Some(match capitalised.iter().find(|a| text::words(a).eq(text::words(phrase))) {
        Some(alias) => alias.to_string(),
        None => text::word_spans(phrase)
            .iter()
            .map(|(_, w)| if text::is_stopword(w) { w.to_string() } else { text::capitalise(w) })
            .collect::<Vec<_>>()
            .join(" "),
    })
}

/// Whether a passage mentioning the entity also writes `phrase` in lower case: a common word
/// capitalised where it heads a section or opens a sentence ("## Response", "The response
/// was ...") is no name. The first passages are read, enough for a name, which is never so
/// written, and bounded for a word every passage holds.
fn written_in_lower_case(kb: &Kb, chunks: &[ChunkId], phrase: &str) -> bool {
    const PASSAGES_READ: usize = 64;
    chunks.iter().take(PASSAGES_READ).filter_map(|c| kb.chunk(*c)).any(|c| text::find_words(&c.text, phrase).is_some())
}

/// The name a single word no passage holds is spelled like ("aschenmoor" for "Aschenmöor"):
/// such a word is more likely a name typed without its capital and accents than anything
/// else. Only names spelled nearly alike count, among those sharing its blocking key.
fn name_spelled_alike(kb: &Kb, word: &str) -> Option<String> {
    const MIN_LETTERS: usize = 4;
    const SPELLED_ALIKE: f32 = 0.85;
    let unknown = word.chars().count() >= MIN_LETTERS
        && word.chars().all(char::is_alphabetic)
        && !lexicon::contains(lexicon::STOPWORDS, word)
        && kb.bm25().frequency(word) == 0;
    if !unknown {
        return None;
    }
    let key = normalize_entity(word);
    let candidates = kb.alias_candidates(&blocking_keys(word));
    if candidates.len() > MAX_SPELLING_CANDIDATES {
        return None;
    }
    candidates
        .into_iter()
        .filter_map(|id| kb.node(id))
        .flat_map(|node| node.aliases.iter())
        .filter(|alias| alias.chars().any(char::is_uppercase) && !alias.contains(char::is_whitespace))
        .map(|alias| (edit_similarity(&key, &normalize_entity(alias)), alias))
        .filter(|(similarity, _)| *similarity >= SPELLED_ALIKE)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, alias)| alias.clone())
}

/// Is the query's `index`-th word written as (part of) a name: a digit in it, or a capital
/// letter (the opening word's capital only when it is not a question or function word). A
/// common word the corpus also has as an entity ("country", "located", "independent") is
/// not what the question names, and as a seed it sends the walk to a hub.
fn written_as_name(index: usize, word: &str) -> bool {
    let capital = word.chars().any(char::is_uppercase);
    let opening_common = index == 0 && {
        let lower = word.to_lowercase();
        WH_WORDS.contains(&lower.as_str()) || text::is_stopword(&lower)
    };
    word.chars().any(|c| c.is_ascii_digit()) || (capital && !opening_common)
}

impl QueryParts {
    /// The texts seed alignment embeds: the mentions, then the relation phrase if any.
    fn texts(&self) -> Vec<String> {
        self.mentions.iter().cloned().chain(Some(self.relation_phrase.clone()).filter(|p| !p.is_empty())).collect()
    }
}

/// `query` embedded with the parts seed alignment needs, in one embedder call: with a neural
/// embedder every call is a forward pass, and a query has several short parts.
pub fn embed_query(kb: &Kb, query: &str) -> Result<EmbeddedQuery> {
    EmbeddedQuery::with_parts(kb.embedder().as_ref(), query, query_parts(kb, query).texts())
}

pub fn find_seeds(kb: &Kb, settings: &RetrieveSettings, embedded: &EmbeddedQuery) -> Result<Seeds> {
    let query = query_parts(kb, &embedded.text);
    let parts = query.texts();
    let QueryParts { exact, mentions, relation_phrase } = query;
    let mut best: HashMap<NodeId, EntitySeed> = HashMap::new();
    let mut consider = |seed: EntitySeed| {
        let keep = best.get(&seed.node).is_none_or(|old| seed.score > old.score);
        if keep {
            best.insert(seed.node, seed);
        }
    };
    exact.into_iter().for_each(&mut consider);
    // The parts' vectors come with the query when it was made by `embed_query`; any other
    // query embeds them here, in one call.
    let missing: Vec<&str> = parts.iter().map(String::as_str).filter(|p| embedded.part(p).is_none()).collect();
    let fresh: HashMap<&str, Vec<f32>> = if missing.is_empty() {
        HashMap::new()
    } else {
        missing.iter().copied().zip(kb.embedder().embed(&missing)?).collect()
    };
    let vector_of = |part: &str| embedded.part(part).or_else(|| fresh.get(part)).cloned();
    // Fuzzy alignment of capitalised mentions through the entity index.
    for mention in &mentions {
        let Some(v) = vector_of(mention) else { continue };
        let key = normalize_entity(mention);
        for (id, cos) in kb.node_index().search(&v, 5)? {
            let Some(node) = kb.node(id as NodeId) else {
                continue;
            };
            let edit = node.aliases.iter().map(|a| edit_similarity(&key, &normalize_entity(a))).fold(0.0f32, f32::max);
            let score = edit.max(cos);
            if score >= settings.seed_threshold {
                consider(EntitySeed { node: node.id, name: node.name.clone(), mention: mention.clone(), score });
            }
        }
    }
    let mut entities: Vec<EntitySeed> = best.into_values().collect();
    // Equally confident seeds: the longer mention is the more specific one ("Alice Moreau"
    // before the "Alice" inside it).
    entities.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.mention.len().cmp(&a.mention.len())).then(a.node.cmp(&b.node))
    });
    entities.truncate(settings.max_entity_seeds);
    let relations = match (relation_phrase.is_empty(), vector_of(&relation_phrase)) {
        (false, Some(v)) => align_relations(kb, settings.relation_threshold, &v)?,
        _ => Vec::new(),
    };
    // Facts are linked when the global stage needs them (see `RetrievalRun`).
    Ok(Seeds { entities, relations, relation_phrase, facts: Vec::new() })
}

/// Relation labels whose embedding is close to the query's relation phrase (`phrase`), best
/// first.
fn align_relations(kb: &Kb, threshold: f32, phrase: &[f32]) -> Result<Vec<RelationSeed>> {
    Ok(kb
        .relations()
        .nearest(phrase, MAX_RELATION_SEEDS, threshold)?
        .into_iter()
        .map(|(label, score)| RelationSeed { label: label.to_string(), score })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use crate::config::Settings;
    use crate::embed::CountingEmbedder;
    use crate::ingest::source::SourceDoc;
    use crate::ingest::{IngestReport, Pipeline, ingest_docs};
    use crate::kb::Kb;
    use crate::net::Remote;
    use crate::retrieve::{RetrieveOptions, Retriever, Stage, Strategy, embed_query};

    #[test]
    fn only_words_written_as_names_seed_and_the_longest_name_wins() {
        assert!(super::written_as_name(3, "Orwick") && super::written_as_name(5, "1986"));
        assert!(super::written_as_name(0, "Aschenmoor"), "a name may open the question");
        assert!(!super::written_as_name(0, "When") && !super::written_as_name(0, "The"));
        assert!(!super::written_as_name(4, "country") && !super::written_as_name(6, "located"));

        let (_dir, kb) = crate::ingest::testing::kb_with_docs(&[
            ("Orwick River", "The Orwick River rises in Kell and flows to Tarn."),
            ("Orwick", "Orwick is the northernmost province of Kell."),
        ]);
        assert!(kb.node_by_alias("Orwick River").is_some() && kb.node_by_alias("Orwick").is_some());
        let parts =
            super::query_parts(&kb, "When did the country where the Orwick River is located become independent?");
        let mentions: Vec<&str> = parts.exact.iter().map(|s| s.mention.as_str()).collect();
        assert_eq!(mentions, ["Orwick River"], "no seed for the \"Orwick\" inside it");
        assert_eq!(parts.relation_phrase, "country located become independent");
    }

    /// Issue 34: a question typed in lower case seeds as it would with capitals, where the
    /// corpus writes the words as a name; a common word capitalised at a section's head or a
    /// sentence's start stays as typed.
    #[test]
    fn lower_case_names_are_written_as_the_corpus_writes_them() {
        let (_dir, kb) = crate::ingest::testing::kb_with_docs(&[
            ("Gatekeeper", "# Gatekeeper\n\nGatekeeper is the sign-in service. Gatekeeper keeps sessions in Beacon."),
            (
                "Beacon",
                "# Beacon\n\nBeacon is a cache in Orwick.\n\n## Response\n\nResponse times of Beacon are low; the response is cached.",
            ),
            ("Orwick", "Orwick is a town. Ada Lind works in Orwick."),
            ("Aschenmöor", "Aschenmöor is an opera by Ada Lind."),
        ]);
        let written = |q: &str| super::written_as_the_corpus_writes(&kb, q);
        assert_eq!(written("where does gatekeeper keep sessions?"), "where does Gatekeeper keep sessions?");
        assert_eq!(written("who works in orwick with ada lind?"), "who works in Orwick with Ada Lind?");
        assert_eq!(written("how fast is the response of beacon?"), "how fast is the response of Beacon?");
        // A word no passage holds, spelled like a name, is that name typed without capitals
        // or accents; other unknown words stay as typed.
        assert_eq!(written("who wrote aschenmoor?"), "who wrote Aschenmöor?");
        assert_eq!(written("who wrote zyxwvut?"), "who wrote zyxwvut?");
        assert_eq!(written("Who keeps sessions in Beacon?"), "Who keeps sessions in Beacon?", "as typed");

        let parts = super::query_parts(&kb, "where does gatekeeper keep sessions?");
        let seeds: Vec<&str> = parts.exact.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(seeds, ["Gatekeeper"]);
        assert_eq!(parts.relation_phrase, "keep sessions");
    }

    /// Issue 12: a neural embedder runs one forward pass per retrieval, not one for the
    /// question and another for its mentions and relation phrase.
    #[test]
    fn a_retrieval_embeds_its_query_in_one_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::defaults();
        settings.data_dir = dir.path().to_path_buf();
        let model = CountingEmbedder::new(64);
        let mut kb = Kb::open(Arc::new(settings.clone()), model.clone()).unwrap();
        let pipeline = Pipeline::from_settings(&settings, model.clone(), None, &Remote::new()).unwrap();
        let doc = SourceDoc {
            id: "curie".into(),
            title: "Curie".into(),
            text: "Marie Curie was born in Warsaw. Warsaw is the capital of Poland.".into(),
            source: "test".into(),
            links: Vec::new(),
        };
        ingest_docs(&mut kb, &pipeline, vec![doc], &mut (), &mut IngestReport::default()).unwrap();

        let question = "Where was Marie Curie born?";
        let before = model.calls.load(Ordering::SeqCst);
        let embedded = embed_query(&kb, question).unwrap();
        assert_eq!(model.calls.load(Ordering::SeqCst), before + 1);
        assert!(embedded.part("Marie Curie").is_some(), "the mention came with the question");
        let retriever = Retriever::with_settings(&kb, &settings.retrieve);
        let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 };
        let retrieval = retriever.retrieve_embedded(&embedded, options).unwrap();
        assert_eq!(model.calls.load(Ordering::SeqCst), before + 1, "the retrieval embedded nothing more");
        assert!(retrieval.seeds.entities.iter().any(|s| s.name == "Marie Curie"));

        // A query embedded without its parts still gets them, in one more call.
        let bare = crate::embed::EmbeddedQuery::new(model.as_ref(), question).unwrap();
        let calls = model.calls.load(Ordering::SeqCst);
        let again = retriever.retrieve_embedded(&bare, options).unwrap();
        assert_eq!(model.calls.load(Ordering::SeqCst), calls + 1);
        assert_eq!(again.seeds.entities, retrieval.seeds.entities);
    }
}
