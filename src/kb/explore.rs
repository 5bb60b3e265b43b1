//! Read models for people looking at the graph: what the KB knows about one entity (aliases,
//! edges with the chunks they were read from, the neighbourhood between its neighbours), and
//! entity suggestions for a typed name, from the alias matcher's blocking keys.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;

use super::Kb;
use super::align::{blocking_keys, edit_similarity};
use super::model::{ChunkId, EdgeId, EdgeOrigin, NodeId};
use crate::text::normalize_entity;

#[derive(Debug, Clone, Serialize)]
pub struct EntityView {
    pub id: NodeId,
    pub name: String,
    pub aliases: Vec<String>,
    /// All incident edges, however many are listed.
    pub degree: usize,
    /// Incident edges, at most the requested limit, in edge order.
    pub neighbours: Vec<Neighbour>,
    /// Edges between the listed neighbours, so the neighbourhood can be drawn as a graph.
    pub links: Vec<Link>,
    /// Chunks mentioning the entity, however many are listed.
    pub provenance_count: usize,
    pub provenance: Vec<ChunkRef>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The entity is the edge's subject.
    Out,
    In,
}

#[derive(Debug, Clone, Serialize)]
pub struct Neighbour {
    pub edge: EdgeId,
    pub relation: String,
    pub direction: Direction,
    pub node: NodeId,
    pub name: Option<String>,
    /// The chunk the edge was read from.
    pub chunk: ChunkId,
    pub origin: EdgeOrigin,
}

#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub edge: EdgeId,
    pub subject: NodeId,
    pub relation: String,
    pub object: NodeId,
    pub chunk: ChunkId,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChunkRef {
    pub chunk: ChunkId,
    pub doc_id: Option<String>,
    pub title: String,
    pub span: (usize, usize),
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntitySuggestion {
    pub id: NodeId,
    pub name: String,
    /// The alias that matched best.
    pub alias: String,
    /// Chunks mentioning the entity: how well attested it is.
    pub mentions: usize,
}

impl Kb {
    /// What the graph knows about `id`, with at most `limit` neighbours and provenance chunks
    /// (hubs have thousands); `None` for an unknown node.
    pub fn entity_view(&self, id: NodeId, limit: usize) -> Option<EntityView> {
        let node = self.node(id)?;
        let steps = self.graph().steps(id);
        let neighbours: Vec<Neighbour> = steps
            .iter()
            .filter_map(|s| {
                let edge = self.edge(s.edge)?;
                Some(Neighbour {
                    edge: edge.id,
                    relation: edge.relation.to_string(),
                    direction: if s.forward { Direction::Out } else { Direction::In },
                    node: s.to,
                    name: self.node(s.to).map(|n| n.name.clone()),
                    chunk: edge.chunk,
                    origin: edge.origin,
                })
            })
            .take(limit)
            .collect();
        let listed: HashSet<NodeId> = neighbours.iter().map(|n| n.node).collect();
        let mut seen = BTreeSet::new();
        let links = listed
            .iter()
            .flat_map(|&from| self.graph().steps(from))
            .filter(|s| s.forward && s.to != id && listed.contains(&s.to) && seen.insert(s.edge))
            .filter_map(|s| self.edge(s.edge))
            .map(|e| Link {
                edge: e.id,
                subject: e.subject,
                relation: e.relation.to_string(),
                object: e.object,
                chunk: e.chunk,
            })
            .take(limit)
            .collect();
        let provenance = node
            .chunks
            .iter()
            .filter_map(|&c| {
                let chunk = self.chunk(c)?;
                Some(ChunkRef {
                    chunk: chunk.id,
                    doc_id: self.doc(chunk.doc).map(|d| d.id.clone()),
                    title: self.chunk_title(chunk).to_string(),
                    span: chunk.span,
                    text: chunk.text.to_string(),
                })
            })
            .take(limit)
            .collect();
        Some(EntityView {
            id,
            name: node.name.clone(),
            aliases: node.aliases.clone(),
            degree: steps.len(),
            neighbours,
            links,
            provenance_count: node.chunks.len(),
            provenance,
        })
    }

    /// Entities whose names resemble `typed`: an exact alias first, then every node sharing
    /// a blocking key with it (what the alias matcher would compare at ingest), best edit
    /// similarity first, ties to the better attested. At most `limit`.
    pub fn find_entities(&self, typed: &str, limit: usize) -> Vec<EntitySuggestion> {
        let key = normalize_entity(typed);
        if key.is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut blocks = blocking_keys(typed);
        // While a name is being typed its last word is a prefix shorter than a blocking key.
        if let Some(last) = key.split_whitespace().last().filter(|w| w.chars().count() < 4) {
            blocks.push(format!("w:{last}"));
        }
        let mut candidates = self.alias_candidates(&blocks);
        if candidates.is_empty() {
            // Shorter prefixes than the blocking keys: scan the block names, not the nodes.
            candidates = self.alias_candidates_by_prefix(&blocks);
        }
        let mut scored: Vec<(f32, EntitySuggestion)> = candidates
            .into_iter()
            .filter_map(|id| {
                let node = self.node(id)?;
                let (score, alias) = node
                    .aliases
                    .iter()
                    .map(|a| {
                        let k = normalize_entity(a);
                        let exact = k == key;
                        let prefix = k.starts_with(&key);
                        (edit_similarity(&k, &key) + f32::from(u8::from(prefix)) + 2.0 * f32::from(u8::from(exact)), a)
                    })
                    .max_by(|a, b| a.0.total_cmp(&b.0))?;
                Some((
                    score,
                    EntitySuggestion { id, name: node.name.clone(), alias: alias.clone(), mentions: node.chunks.len() },
                ))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.mentions.cmp(&a.1.mentions)).then(a.1.id.cmp(&b.1.id)));
        scored.into_iter().take(limit).map(|(_, s)| s).collect()
    }
}
