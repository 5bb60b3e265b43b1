//! Query-to-fact linking (HippoRAG 2): every triple is embedded at ingest as a fact string,
//! "subject relation object" (`kb::model::fact_text`); the facts closest to the query seed
//! their entities. A fact carries the relation the question asks about, so it picks the
//! right entity among those its words mention far better than linking the query to entity
//! names alone.
//!
//! HippoRAG 2 then lets an LLM drop the facts that are not about the question ("recognition
//! memory"). Without a model, a fact counts as found only when one of its entities' names
//! shares a content word with the query: the nearest facts of a question about something the
//! corpus does not know are noise, and such a question falls back to text retrieval.

use std::collections::HashSet;

use serde::Serialize;

use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::kb::Kb;
use crate::kb::model::{EdgeId, NodeId};
use crate::text;

/// Nearest facts fetched per fact kept, so duplicates (one fact read from several passages)
/// do not crowd out distinct ones.
const FACT_OVERSAMPLE: usize = 4;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FactSeed {
    pub edge: EdgeId,
    pub subject: NodeId,
    pub object: NodeId,
    /// "subject relation object" by node name.
    pub fact: String,
    /// Cosine to the query over the best fact's cosine: 1 for the best fact, so the scale
    /// does not depend on the embedder's cosine range.
    pub score: f32,
}

/// The `k` facts closest to `query` that name something it names, best first (ties on edge
/// id), one per distinct (subject, relation, object) of nodes.
pub fn link_facts(kb: &Kb, query: &EmbeddedQuery, k: usize) -> Result<Vec<FactSeed>> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let terms: HashSet<String> = text::content_terms(&query.text).into_iter().collect();
    let hits = kb.fact_index().search(&query.vector, k * FACT_OVERSAMPLE)?;
    let Some(top) = hits.first().map(|(_, cos)| *cos).filter(|c| *c > 0.0) else {
        return Ok(Vec::new());
    };
    let mut seen = HashSet::new();
    let mut facts = Vec::with_capacity(k);
    for (id, cos) in hits {
        let Some(edge) = kb.edge(id) else { continue };
        if cos <= 0.0 || !seen.insert((edge.subject, &*edge.relation, edge.object)) {
            continue;
        }
        let name = |n: NodeId| kb.node(n).map_or("", |n| n.name.as_str());
        let named = |n: NodeId| text::content_terms(name(n)).iter().any(|t| terms.contains(t));
        if !named(edge.subject) && !named(edge.object) {
            continue;
        }
        facts.push(FactSeed {
            edge: id,
            subject: edge.subject,
            object: edge.object,
            fact: format!("{} {} {}", name(edge.subject), edge.relation, name(edge.object)),
            score: cos / top,
        });
        if facts.len() == k {
            break;
        }
    }
    Ok(facts)
}
