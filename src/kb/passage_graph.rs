//! The graph Personalized PageRank walks (after HippoRAG 2): entity nodes and passage
//! (chunk) nodes in one undirected, weighted graph, so that passages are ranked by their own
//! PPR mass. Three kinds of edges:
//! - a triple links its two entities (weight 1 per triple);
//! - every passage links to each entity it mentions (the node's provenance), with weight 1,
//!   except its topic, the entity its document's title names, which weighs as much as all its
//!   other mentions together (at least 1). A passage is about its topic and only mentions the
//!   rest, so a walk leaving it goes to its topic at least half the time, and a walk at an
//!   entity prefers the passages about it to those that name it in passing: the second hop
//!   of a bridge question is the page of the entity the first hop's passage names;
//! - a synonym edge links two entities whose name embeddings are close (cosine at least
//!   `retrieve.synonym_threshold`, weight = cosine), beyond the alias merges, which need the
//!   names to be spelled alike too. Candidate pairs are the nodes sharing an alias blocking
//!   key (see [`super::align::blocking_keys`]), so the set is exact and deterministic rather
//!   than the output of an approximate neighbour search.
//!
//! - a document's outline: a document of more than one passage gets a row, and so does each
//!   section of it (its heading path); a passage links to its innermost section (to its
//!   document under no heading), a section to its parent section or document. A walk that
//!   reaches one passage of a long document reaches the passages beside it under the same
//!   heading first, then the rest of the document: the structure is part of the graph
//!   whatever the extractor found. A one-passage document is its passage and adds no row;
//! - a hyperlink links the passage holding it to the document it points to (that
//!   document's row, or its one passage).
//!
//! Rows: entity nodes first in node-id order, then passages in chunk-id order, then the
//! outline's rows (documents in key order, each followed by its sections in the order they
//! open); the snapshot is a pure function of the KB's contents.

use std::collections::BTreeSet;

use super::graph::Csr;
use super::mapped::Reader;
use super::model::{Chunk, ChunkId, DocKey, Document, EdgeId, NodeId, SECTION_SEPARATOR, SharedBytes};
use super::snapshot::Snapshot;
use super::{Kb, Table};
use crate::error::{Error, Result};
use crate::text;

/// Blocks with more nodes than this share only a common word prefix ("john", "univ"); their
/// pairs are not plausible synonyms and would cost quadratic time.
const MAX_SYNONYM_BLOCK: usize = 64;

pub struct PassageGraph {
    pub csr: Csr,
    /// Node of each entity row (rows `0..nodes.len()`).
    pub nodes: Vec<NodeId>,
    /// Chunk of each passage row (rows `nodes.len()..`).
    pub chunks: Vec<ChunkId>,
    node_rows: Table<NodeId, u32>,
    chunk_rows: Table<ChunkId, u32>,
    pub synonym_edges: usize,
    /// Share of the passages in the largest connected component: how much of the corpus
    /// one walk can reach.
    pub largest_component_share: f32,
    /// Read back from a save rather than built ([`PassageGraph::decode`]).
    pub read_from_save: bool,
}

/// The first bytes of an encoded snapshot, with the version of what [`PassageGraph::build`]
/// computes: bumped whenever the graph it builds from the same KB changes, so that a save of
/// an earlier build is built again rather than used.
const SNAPSHOT_MAGIC: &[u8; 8] = b"a2rpg\x00\x00\x02";

impl Snapshot for PassageGraph {
    const NAME: &'static str = "passages";

    fn build_from(kb: &Kb) -> Self {
        PassageGraph::build(kb, kb.settings.retrieve.synonym_threshold)
    }

    fn encode(&self, kb: &Kb) -> Vec<u8> {
        self.encode_with(kb.settings.retrieve.synonym_threshold)
    }

    fn decode(bytes: SharedBytes, kb: &Kb) -> Result<Self> {
        PassageGraph::decode_with((*bytes).as_ref(), kb.settings.retrieve.synonym_threshold)
    }
}

impl PassageGraph {
    pub fn node_row(&self, node: NodeId) -> Option<usize> {
        self.node_rows.get(&node).map(|r| *r as usize)
    }

    pub fn chunk_row(&self, chunk: ChunkId) -> Option<usize> {
        self.chunk_rows.get(&chunk).map(|r| *r as usize)
    }

    /// Rows of the documents' outline, after the passages (see the module's header).
    pub fn outline_rows(&self) -> usize {
        self.csr.len() - self.nodes.len() - self.chunks.len()
    }

    /// The passage at `row`, if it is a passage row.
    pub fn chunk_at(&self, row: usize) -> Option<ChunkId> {
        row.checked_sub(self.nodes.len()).and_then(|i| self.chunks.get(i).copied())
    }

    /// Builds the snapshot of `kb`'s current contents.
    pub fn build(kb: &Kb, synonym_threshold: f32) -> PassageGraph {
        let nodes: Vec<NodeId> = kb.nodes.ids().collect();
        let chunks: Vec<ChunkId> = kb.chunks.ids().collect();
        let mut edges: Vec<(EdgeId, NodeId, NodeId)> = kb.edges.values().map(|e| (e.id, e.subject, e.object)).collect();
        edges.sort_unstable_by_key(|&(id, _, _)| id);
        let triples: Vec<(NodeId, NodeId)> = edges.iter().map(|&(_, subject, object)| (subject, object)).collect();
        let mut mentions: Vec<(NodeId, ChunkId)> =
            kb.nodes.values().flat_map(|n| n.chunks.iter().map(move |c| (n.id, *c))).collect();
        mentions.sort_unstable();
        let topics: Vec<(NodeId, ChunkId)> = kb
            .chunks
            .values()
            .filter_map(|chunk| {
                let node = kb.node_by_alias(&text::title_entity(kb.chunk_title(chunk))?)?;
                Some((node, chunk.id))
            })
            .collect();
        let links = Links {
            triples: &triples,
            mentions: &mentions,
            topics: &topics,
            synonyms: &synonym_pairs(kb, synonym_threshold),
        };
        PassageGraph::assemble(nodes, chunks, links, &Outline::of(kb))
    }

    /// The graph of these entities and passages, and the `outline`'s rows after them (see
    /// [`Links`] and [`Outline`]). Links naming an unknown entity or passage are left out.
    pub fn assemble(
        mut nodes: Vec<NodeId>,
        mut chunks: Vec<ChunkId>,
        links: Links<'_>,
        outline: &Outline,
    ) -> PassageGraph {
        let Links { triples, mentions, topics, synonyms } = links;
        nodes.sort_unstable();
        chunks.sort_unstable();
        let node_rows: Table<NodeId, u32> = nodes.iter().enumerate().map(|(i, n)| (*n, i as u32)).collect();
        let chunk_rows: Table<ChunkId, u32> =
            chunks.iter().enumerate().map(|(i, c)| (*c, (nodes.len() + i) as u32)).collect();
        let mut edges: Vec<(u32, u32, f32)> = Vec::with_capacity(triples.len() + mentions.len() + synonyms.len());
        let entity_pair = |a: &NodeId, b: &NodeId| Some((*node_rows.get(a)?, *node_rows.get(b)?));
        edges.extend(triples.iter().filter_map(|(a, b)| entity_pair(a, b)).map(|(a, b)| (a, b, 1.0)));
        edges.extend(
            mentions
                .iter()
                .zip(mention_weights(mentions, topics))
                .filter_map(|((n, c), w)| Some((*node_rows.get(n)?, *chunk_rows.get(c)?, w))),
        );
        let before = edges.len();
        edges.extend(synonyms.iter().filter_map(|(a, b, cos)| entity_pair(a, b).map(|(a, b)| (a, b, *cos))));
        let synonym_edges = edges.len() - before;
        let first_outline_row = (nodes.len() + chunks.len()) as u32;
        let row = |end: &OutlineEnd| match end {
            OutlineEnd::Passage(chunk) => chunk_rows.get(chunk).copied(),
            OutlineEnd::Row(i) => Some(first_outline_row + i),
        };
        edges.extend(outline.links.iter().filter_map(|(a, b)| Some((row(a)?, row(b)?, 1.0))));
        let csr = Csr::from_weighted_edges(first_outline_row as usize + outline.rows, &edges);
        let largest_component_share = largest_component_share(&csr, nodes.len(), chunks.len());
        PassageGraph {
            csr,
            nodes,
            chunks,
            node_rows,
            chunk_rows,
            synonym_edges,
            largest_component_share,
            read_from_save: false,
        }
    }

    /// The snapshot, built with `synonym_threshold`, as bytes: the magic, the threshold
    /// (f32), the counts (entities, passages, rows, entries, synonym edges; u64), the largest
    /// component's share (f32), then entity ids and passage ids (u32), row offsets (u64),
    /// targets (u32) and weights (f32), little-endian.
    pub fn encode_with(&self, synonym_threshold: f32) -> Vec<u8> {
        let csr = &self.csr;
        let mut out = Vec::with_capacity(
            64 + 4 * (self.nodes.len() + self.chunks.len()) + 8 * csr.offsets.len() + 8 * csr.targets.len(),
        );
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&synonym_threshold.to_le_bytes());
        for count in [self.nodes.len(), self.chunks.len(), csr.len(), csr.targets.len(), self.synonym_edges] {
            out.extend_from_slice(&(count as u64).to_le_bytes());
        }
        out.extend_from_slice(&self.largest_component_share.to_le_bytes());
        self.nodes.iter().chain(&self.chunks).for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
        csr.offsets.iter().for_each(|at| out.extend_from_slice(&(*at as u64).to_le_bytes()));
        csr.targets.iter().for_each(|t| out.extend_from_slice(&t.to_le_bytes()));
        csr.weights.iter().for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
        out
    }

    /// The snapshot [`PassageGraph::encode_with`] wrote with `synonym_threshold`; an error
    /// for bytes of another version or threshold, or that do not hold what their counts say.
    pub fn decode_with(bytes: &[u8], synonym_threshold: f32) -> Result<PassageGraph> {
        let damaged = |what: &str| Error::Index(format!("the saved PPR snapshot is unusable: {what}"));
        let rest = bytes.strip_prefix(SNAPSHOT_MAGIC).ok_or_else(|| damaged("another version"))?;
        if rest.len() < 4 + 5 * 8 + 4 {
            return Err(damaged("truncated"));
        }
        let mut reader = Reader { rest };
        if f32::from_le_bytes(reader.array()) != synonym_threshold {
            return Err(damaged("built with another synonym threshold"));
        }
        let [nodes, chunks, rows, entries, synonym_edges] = [(); 5].map(|_| u64::from_le_bytes(reader.array()));
        let expected =
            4 + 4 * (u128::from(nodes) + u128::from(chunks)) + 8 * (u128::from(rows) + 1) + 8 * u128::from(entries);
        if reader.rest.len() as u128 != expected || nodes + chunks > rows {
            return Err(damaged("its counts do not match its size"));
        }
        let [nodes, chunks, rows, entries, synonym_edges] =
            [nodes, chunks, rows, entries, synonym_edges].map(|count| count as usize);
        let largest_component_share = f32::from_le_bytes(reader.array());
        let ids =
            |reader: &mut Reader, n: usize| (0..n).map(|_| u32::from_le_bytes(reader.array())).collect::<Vec<u32>>();
        let node_ids = ids(&mut reader, nodes);
        let chunk_ids = ids(&mut reader, chunks);
        let offsets: Vec<usize> = (0..=rows).map(|_| u64::from_le_bytes(reader.array()) as usize).collect();
        let targets = ids(&mut reader, entries);
        let weights: Vec<f32> = (0..entries).map(|_| f32::from_le_bytes(reader.array())).collect();
        let ordered =
            offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]) && offsets.last() == Some(&entries);
        if !ordered || targets.iter().any(|t| *t as usize >= rows) {
            return Err(damaged("its rows do not hold its entries"));
        }
        let node_rows = node_ids.iter().enumerate().map(|(i, n)| (*n, i as u32)).collect();
        let chunk_rows = chunk_ids.iter().enumerate().map(|(i, c)| (*c, (nodes + i) as u32)).collect();
        Ok(PassageGraph {
            csr: Csr { offsets, targets, weights },
            nodes: node_ids,
            chunks: chunk_ids,
            node_rows,
            chunk_rows,
            synonym_edges,
            largest_component_share,
            read_from_save: true,
        })
    }
}

/// The links between entities and passages: `triples` link two entities, `mentions` an
/// entity and a passage (weight 1, or [`mention_weights`]'s for a passage's topic among
/// `topics`), `synonyms` two entities (weight = cosine).
#[derive(Clone, Copy, Default)]
pub struct Links<'a> {
    pub triples: &'a [(NodeId, NodeId)],
    pub mentions: &'a [(NodeId, ChunkId)],
    pub topics: &'a [(NodeId, ChunkId)],
    pub synonyms: &'a [(NodeId, NodeId, f32)],
}

/// One end of an outline link: a passage, or the outline's `i`-th row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutlineEnd {
    Passage(ChunkId),
    Row(u32),
}

/// The rows and links a KB's documents add to the graph (see the module's header).
#[derive(Debug, Default, PartialEq)]
pub struct Outline {
    pub rows: usize,
    pub links: Vec<(OutlineEnd, OutlineEnd)>,
}

impl Outline {
    pub fn of(kb: &Kb) -> Outline {
        let mut docs: Vec<&Document> = kb.docs.values().collect();
        docs.sort_unstable_by_key(|doc| doc.key);
        let mut outline = Outline::default();
        let mut ends: Table<DocKey, OutlineEnd> = Table::default();
        let mut linking: Vec<&Chunk> = Vec::new();
        for doc in docs {
            let chunks: Vec<&Chunk> = doc.chunks.iter().filter_map(|c| kb.chunk(*c)).collect();
            linking.extend(chunks.iter().filter(|c| !c.links.is_empty()));
            match chunks.as_slice() {
                [] => {}
                [one] => {
                    ends.insert(doc.key, OutlineEnd::Passage(one.id));
                }
                many => {
                    let end = outline.document(many.iter().map(|c| (c.id, c.section.as_str())));
                    ends.insert(doc.key, end);
                }
            }
        }
        for chunk in linking {
            for (_, target) in kb.linked_docs(chunk) {
                if let Some(end) = ends.get(&target.key) {
                    outline.links.push((OutlineEnd::Passage(chunk.id), *end));
                }
            }
        }
        outline
    }

    /// Adds the rows of one document of several passages, given as (passage, section path)
    /// in order, and returns the document's row.
    pub fn document<'s>(&mut self, passages: impl IntoIterator<Item = (ChunkId, &'s str)>) -> OutlineEnd {
        let document = self.row();
        let mut sections: Table<&str, OutlineEnd> = Table::default();
        for (chunk, path) in passages {
            let mut parent = document;
            if !path.is_empty() {
                // Each leading part of the path is a section of its own: "A › B" sits in "A".
                let cuts = path.match_indices(SECTION_SEPARATOR).map(|(at, _)| at).chain([path.len()]);
                for cut in cuts {
                    let section = &path[..cut];
                    parent = match sections.get(section) {
                        Some(row) => *row,
                        None => {
                            let row = self.row();
                            self.links.push((row, parent));
                            sections.insert(section, row);
                            row
                        }
                    };
                }
            }
            self.links.push((OutlineEnd::Passage(chunk), parent));
        }
        document
    }

    fn row(&mut self) -> OutlineEnd {
        self.rows += 1;
        OutlineEnd::Row(self.rows as u32 - 1)
    }
}

/// The weight of each of `mentions` (entity, passage), in order: 1, except a passage's topic
/// (a pair also in `topics`), which weighs as much as the passage's other mentions together,
/// and at least 1. A topic the passage does not mention gets no edge: the link is the
/// extraction's, only its weight is the title's.
fn mention_weights(mentions: &[(NodeId, ChunkId)], topics: &[(NodeId, ChunkId)]) -> Vec<f32> {
    let topics: BTreeSet<(NodeId, ChunkId)> = topics.iter().copied().collect();
    let mut per_passage: Table<ChunkId, usize> = Table::default();
    for (_, chunk) in mentions {
        *per_passage.entry(*chunk).or_default() += 1;
    }
    mentions
        .iter()
        .map(|pair| match topics.contains(pair) {
            true => per_passage[&pair.1].saturating_sub(1).max(1) as f32,
            false => 1.0,
        })
        .collect()
}

/// Pairs of distinct nodes sharing a blocking key whose name vectors have a cosine of at
/// least `threshold`, in (a, b) order with a < b, each once.
pub fn synonym_pairs(kb: &Kb, threshold: f32) -> Vec<(NodeId, NodeId, f32)> {
    let mut pairs: Vec<(NodeId, NodeId)> = Vec::new();
    for members in kb.alias_blocks.members().filter(|m| (2..=MAX_SYNONYM_BLOCK).contains(&m.len())) {
        let mut members: Vec<NodeId> = members.keys().collect();
        members.sort_unstable();
        for (i, a) in members.iter().enumerate() {
            pairs.extend(members[i + 1..].iter().map(|b| (*a, *b)));
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    // Most of a large KB's first query: one share of the pairs per core, each share whole
    // first nodes, joined in order, so the result is the sequential one.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shares: Vec<&[(NodeId, NodeId)]> = Vec::with_capacity(cores);
    let mut rest = pairs.as_slice();
    while !rest.is_empty() {
        let mut cut = rest.len().div_ceil(cores.saturating_sub(shares.len()).max(1));
        while cut < rest.len() && rest[cut].0 == rest[cut - 1].0 {
            cut += 1;
        }
        let (share, later) = rest.split_at(cut);
        shares.push(share);
        rest = later;
    }
    std::thread::scope(|scope| {
        let workers: Vec<_> =
            shares.into_iter().map(|share| scope.spawn(move || synonyms_among(kb, share, threshold))).collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// The pairs of `pairs` (sorted by their first node) whose name vectors are at least
/// `threshold` alike, with their cosine.
fn synonyms_among(kb: &Kb, pairs: &[(NodeId, NodeId)], threshold: f32) -> Vec<(NodeId, NodeId, f32)> {
    // Copy the first node's vector once for all its partners (copying it per pair was most
    // of a large KB's first query).
    let mut synonyms = Vec::new();
    let mut first: Option<(NodeId, Option<Vec<f32>>)> = None;
    for (a, b) in pairs {
        if first.as_ref().is_none_or(|(id, _)| id != a) {
            first = Some((*a, kb.node_index.get(*a as u64)));
        }
        let Some((_, Some(va))) = &first else { continue };
        if let Some(cos) = kb.node_index.similarity(*b as u64, va)
            && cos >= threshold
        {
            synonyms.push((*a, *b, cos));
        }
    }
    synonyms
}

/// Share of the `passages` rows from `first_passage` on that lie in the component holding
/// most of them.
fn largest_component_share(csr: &Csr, first_passage: usize, passages: usize) -> f32 {
    let n = csr.len();
    if passages == 0 {
        return 0.0;
    }
    let is_passage = |row: usize| (first_passage..first_passage + passages).contains(&row);
    let mut component = vec![u32::MAX; n];
    let mut passages_in: Vec<usize> = Vec::new();
    for start in 0..n {
        if component[start] != u32::MAX {
            continue;
        }
        let id = passages_in.len() as u32;
        passages_in.push(0);
        let mut stack = vec![start];
        component[start] = id;
        while let Some(row) = stack.pop() {
            passages_in[id as usize] += usize::from(is_passage(row));
            for &next in csr.neighbours(row) {
                if component[next as usize] == u32::MAX {
                    component[next as usize] = id;
                    stack.push(next as usize);
                }
            }
        }
    }
    passages_in.iter().copied().max().unwrap_or(0) as f32 / passages as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot read back is the one written, row for row; bytes of another version, cut
    /// short, or whose counts or offsets lie are refused rather than walked.
    #[test]
    fn an_encoded_snapshot_decodes_to_itself_and_damage_is_refused() {
        let mut outline = Outline::default();
        outline.document([(10, ""), (11, "Ownership")]);
        let links = Links {
            triples: &[(1, 2), (2, 3)],
            mentions: &[(1, 10), (2, 10), (3, 11), (3, 12)],
            topics: &[(3, 11)],
            synonyms: &[(1, 3, 0.91)],
        };
        let graph = PassageGraph::assemble(vec![3, 1, 2], vec![12, 10, 11], links, &outline);
        let bytes = graph.encode_with(0.8);
        let read = PassageGraph::decode_with(&bytes, 0.8).unwrap();
        assert!(read.read_from_save && !graph.read_from_save);
        assert_eq!((&read.nodes, &read.chunks), (&graph.nodes, &graph.chunks));
        assert_eq!(
            (&read.csr.offsets, &read.csr.targets, &read.csr.weights),
            (&graph.csr.offsets, &graph.csr.targets, &graph.csr.weights)
        );
        assert_eq!((read.synonym_edges, read.largest_component_share), (1, graph.largest_component_share));
        for node in [1, 2, 3] {
            assert_eq!(read.node_row(node), graph.node_row(node));
        }
        for chunk in [10, 11, 12] {
            assert_eq!(read.chunk_row(chunk), graph.chunk_row(chunk));
        }
        assert_eq!(read.outline_rows(), 2);

        let mut other_version = bytes.clone();
        other_version[7] ^= 1;
        let mut more_rows = bytes.clone();
        more_rows[SNAPSHOT_MAGIC.len() + 4 + 16] += 1;
        let mut bad_target = bytes.clone();
        let last_target = bytes.len() - 4 * graph.csr.weights.len() - 4;
        bad_target[last_target..last_target + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(PassageGraph::decode_with(&bytes, 0.7).is_err(), "another threshold was accepted");
        for (damage, bytes) in [
            ("another version", other_version),
            ("cut short", bytes[..bytes.len() - 1].to_vec()),
            ("a row too many", more_rows),
            ("a target past the rows", bad_target),
        ] {
            assert!(PassageGraph::decode_with(&bytes, 0.8).is_err(), "{damage} was accepted");
        }
    }

    /// Issue 34: a long document's passages are linked through its sections and its
    /// document row, each section under its parent.
    #[test]
    fn a_long_documents_outline_links_its_passages_through_sections() {
        use OutlineEnd::{Passage, Row};
        let mut outline = Outline::default();
        let doc = outline.document([(10, ""), (11, "Ownership"), (12, "Ownership › On call"), (13, "Deployment")]);
        assert_eq!((doc, outline.rows), (Row(0), 4), "the document, Ownership, On call, Deployment");
        assert_eq!(
            outline.links,
            [
                (Passage(10), Row(0)),
                (Row(1), Row(0)),
                (Passage(11), Row(1)),
                (Row(2), Row(1)),
                (Passage(12), Row(2)),
                (Row(3), Row(0)),
                (Passage(13), Row(3)),
            ]
        );
        let graph = PassageGraph::assemble(vec![1], vec![10, 11, 12, 13], Links::default(), &outline);
        assert_eq!((graph.csr.len(), graph.outline_rows()), (9, 4));
        assert_eq!(graph.chunk_at(5), None, "outline rows are no passages");
        assert_eq!(graph.largest_component_share, 1.0, "the outline joins the passages");
        assert_eq!(graph.csr.neighbours(graph.chunk_row(12).unwrap()), [7], "On call's row");
    }

    #[test]
    fn a_passages_topic_weighs_as_much_as_its_other_mentions() {
        // Passage 10 is about 1 and names 2 and 3; 11 names 1 in passing; 12 is about 4 and
        // names nothing else; 13 is about 5, which it never mentions.
        let mentions = [(1, 10), (2, 10), (3, 10), (1, 11), (4, 12)];
        let topics = [(1, 10), (4, 12), (5, 13)];
        assert_eq!(mention_weights(&mentions, &topics), vec![2.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(mention_weights(&mentions, &[]), vec![1.0; 5]);
        let links = Links { mentions: &mentions, topics: &topics, ..Links::default() };
        let graph = PassageGraph::assemble(vec![1, 2, 3, 4, 5], vec![10, 11, 12, 13], links, &Outline::default());
        let row = graph.node_row(5).unwrap();
        assert!(graph.csr.neighbours(row).is_empty(), "a title adds no link the passage lacks");
    }
}
