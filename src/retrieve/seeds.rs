//! Seeds: the query's entity mentions and relation phrases, aligned to graph nodes and
//! relation labels by the hybrid matcher (only confident matches become seeds), and the
//! facts closest to the query ([`super::facts`]).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::facts::{FactSeed, link_facts};
use crate::config::RetrieveSettings;
use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::ingest::extract::entity_mentions;
use crate::kb::Kb;
use crate::kb::align::edit_similarity;
use crate::kb::model::NodeId;
use crate::text::{self, normalize_entity};

/// Query n-grams up to this many words are looked up as exact aliases, which catches
/// entities written in lower case ("the green performer").
const MAX_NGRAM: usize = 4;
const MAX_RELATION_SEEDS: usize = 32;
const WH_WORDS: &[&str] = &["who", "what", "when", "where", "which", "why", "how", "whom", "whose"];

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

pub fn find_seeds(kb: &Kb, settings: &RetrieveSettings, embedded: &EmbeddedQuery) -> Result<Seeds> {
    let query = embedded.text.as_str();
    let mut best: HashMap<NodeId, EntitySeed> = HashMap::new();
    let mut consider = |seed: EntitySeed| {
        let keep = best.get(&seed.node).is_none_or(|old| seed.score > old.score);
        if keep {
            best.insert(seed.node, seed);
        }
    };
    let mut mentioned_words: HashSet<String> = HashSet::new();
    // Exact alias hits on query n-grams.
    let words: Vec<&str> = query.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).collect();
    for n in (1..=MAX_NGRAM).rev() {
        for window in words.windows(n) {
            let phrase = window.join(" ");
            let key = normalize_entity(&phrase);
            let content = text::content_terms(&key);
            if content.is_empty() || (n == 1 && key.len() < 3) {
                continue;
            }
            if let Some(node) = kb.node_by_alias(&phrase) {
                let name = kb.node(node).map_or_else(String::new, |n| n.name.clone());
                mentioned_words.extend(text::words(&phrase));
                consider(EntitySeed { node, name, mention: phrase, score: 1.0 });
            }
        }
    }
    // Fuzzy alignment of capitalised mentions through the entity index.
    let mentions = entity_mentions(query);
    for mention in &mentions {
        mentioned_words.extend(text::words(mention));
    }
    let relation_phrase = text::content_terms(query)
        .into_iter()
        .filter(|w| !mentioned_words.contains(w) && !WH_WORDS.contains(&w.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    // One embedding call for the mentions and the relation phrase: with a neural embedder
    // each call is a forward pass, and a query has several short texts.
    let texts: Vec<&str> =
        mentions.iter().map(String::as_str).chain(Some(relation_phrase.as_str()).filter(|p| !p.is_empty())).collect();
    let mut vectors = kb.embedder().embed(&texts)?.into_iter();
    for (mention, v) in mentions.iter().zip(vectors.by_ref()) {
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
    let relations = match vectors.next() {
        Some(v) => align_relations(kb, settings.relation_threshold, &v)?,
        None => Vec::new(),
    };
    let facts = link_facts(kb, embedded, settings.fact_seeds)?;
    Ok(Seeds { entities, relations, relation_phrase, facts })
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
