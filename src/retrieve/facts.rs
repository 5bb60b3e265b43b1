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
//!
//! So only the facts of the nodes the query's words name can link, and those are read and
//! scored one by one (exactly) rather than searched for among all facts, unless they are
//! many (a word naming thousands of nodes, a hub): then the fact index is searched and its
//! nearest facts filtered.

use std::collections::{BTreeSet, HashSet};

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

/// Where the blocks of the query's words hold more nodes than this together, or the nodes
/// they name have more edges than this, the facts are searched in the fact index's graphs
/// instead of read one by one (about a microsecond each), so that a long question of common
/// words costs no more than that search.
const NAMED_READ_MAX: usize = 4096;

/// The `k` facts closest to `query` that name something it names, best first (ties on edge
/// id), one per distinct (subject, relation, object) of nodes.
///
/// The facts of the nodes the query's words name are few for most questions, and are all
/// scored: the work follows what the question names, not the size of the KB, where a search
/// of the fact index asks each of its graphs (about 90 at a million passages). A question
/// naming a common word falls back to that search, keeping its nearest facts that name
/// something the question names.
pub fn link_facts(kb: &Kb, query: &EmbeddedQuery, k: usize) -> Result<Vec<FactSeed>> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let terms: HashSet<String> = text::content_terms(&query.text).into_iter().collect();
    let hits = match facts_of_named_nodes(kb, &terms, NAMED_READ_MAX) {
        Some(facts) => {
            let similarity = |id: EdgeId| kb.fact_index().similarity(id, &query.vector).map(|cos| (id, cos));
            crate::rank::top_k(facts.into_iter().filter_map(similarity).collect(), usize::MAX)
        }
        None => kb.fact_index().search(&query.vector, k * FACT_OVERSAMPLE)?,
    };
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
        if !names_a_term(kb, edge.subject, &terms) && !names_a_term(kb, edge.object, &terms) {
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

/// Whether the name of `node` holds one of `terms`.
fn names_a_term(kb: &Kb, node: NodeId, terms: &HashSet<String>) -> bool {
    kb.node(node).is_some_and(|n| text::content_terms(&n.name).iter().any(|t| terms.contains(t)))
}

/// The facts, by the edge each one's vector is stored under, stated by an edge of a node
/// whose name holds one of `terms`; `None` where the terms' blocking keys hold more than
/// `limit` nodes together or the named nodes have more than `limit` edges (see
/// [`NAMED_READ_MAX`]).
fn facts_of_named_nodes(kb: &Kb, terms: &HashSet<String>, limit: usize) -> Option<BTreeSet<EdgeId>> {
    let mut nodes = BTreeSet::new();
    let mut unread = limit;
    for term in terms {
        let candidates = kb.nodes_by_word(term, unread)?;
        unread -= candidates.len();
        nodes.extend(candidates.into_iter().filter(|n| names_a_term(kb, *n, terms)));
    }
    let edges: usize = nodes.iter().map(|n| kb.graph().degree(*n)).sum();
    if edges > limit {
        return None;
    }
    Some(nodes.iter().flat_map(|n| kb.fact_vector_edges_at(*n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::testing::kb_with_docs;

    #[test]
    fn the_named_nodes_facts_are_read_up_to_a_limit_on_nodes_and_edges() {
        let (_dir, kb) = kb_with_docs(&[
            ("Nora Pell", "Nora Pell founded Pell Works. Nora Pell admired Pell Works."),
            ("Pell Works", "Pell Works hired Nora Pell."),
            ("Odo Quist", "Odo Quist founded Quist Mills."),
        ]);
        let terms: HashSet<String> = ["pell".to_string()].into();
        let facts = facts_of_named_nodes(&kb, &terms, 100).expect("few enough to read");
        let stated: BTreeSet<String> = facts
            .iter()
            .filter_map(|id| kb.edge(*id))
            .map(|e| format!("{} {} {}", kb.node(e.subject).unwrap().name, e.relation, kb.node(e.object).unwrap().name))
            .collect();
        assert!(!stated.is_empty() && stated.iter().all(|f| f.contains("Pell")), "{stated:?}");
        assert!(stated.iter().all(|f| !f.contains("Quist")), "nothing the term does not name: {stated:?}");
        let edges: usize =
            kb.edges().filter(|e| [e.subject, e.object].iter().any(|n| names_a_term(&kb, *n, &terms))).count();
        assert!(facts.len() <= edges && edges >= 2, "{facts:?} of {edges} edges");
        assert_eq!(facts_of_named_nodes(&kb, &terms, 1), None, "more than the limit: the index is searched");
    }
}
