//! The KB's records (documents, chunks, nodes, edges) as one file beside the store, written
//! by a save and read by the next open instead of the store's records one by one: an open
//! reads the file, then takes from the store only the records its change log says were
//! written since, so the file stays usable as the KB grows and is rewritten only now and then.
//!
//! The file is a cache of the store, like the rest of `index/`: the store stays the truth,
//! a file that is damaged, of another version, or older than the change log reaches is
//! ignored, and the open reads every record from the store as it did before.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::mapped::{self, Reader, put_str, put_u32s};
use super::model::{Chunk, Document, Edge, EdgeOrigin, Link, Node, SharedBytes, Text};
use super::saved::{self, SavedSnapshot};
use super::store::{ChangedRecords, Family, Store};
use super::tables::Tables;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"a2rrecs\0";
/// Version 3 adds the tables built of the records (see [`super::tables`]) after them, and
/// where they start; version 2 names where the chunks and the graph start, so that the chunks
/// decode on a second core while the first decodes the documents and the graph; version 1
/// files decode in one pass.
const VERSION: u32 = 3;
/// The bytes before the documents: magic, version, and the chunks', graph's and tables'
/// offsets (version 2 has the first two).
const HEADER: usize = MAGIC.len() + 4 + 24;
const HEADER_2: usize = MAGIC.len() + 4 + 16;

/// Every record of a KB, each family in id order (the order a scan of the store gives).
/// The KB's tables keep these lists as they are (see `kb::id_table`): a record is never
/// copied after it is decoded.
#[derive(Debug, Default, PartialEq)]
pub struct Records {
    pub docs: Vec<Document>,
    pub chunks: Vec<Chunk>,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

impl Records {
    /// Every record `store` holds, in one consistent read (the caller holds a snapshot
    /// session). The graph's records decode on another core while this one reads the
    /// documents and chunks.
    pub fn read(store: &Store) -> Result<Records> {
        std::thread::scope(|scope| {
            let graph = scope.spawn(|| -> Result<(Vec<Node>, Vec<Edge>)> {
                let mut edges: Vec<Edge> = store.edges().collect::<Result<_>>()?;
                share_relations(&mut edges);
                Ok((store.nodes().collect::<Result<_>>()?, edges))
            });
            let docs = store.docs().collect::<Result<Vec<_>>>()?;
            let chunks = store.chunks().collect::<Result<Vec<_>>>()?;
            let (nodes, edges) =
                graph.join().map_err(|_| Error::Internal("reading the nodes and edges panicked".into()))??;
            Ok(Records { docs, chunks, nodes, edges })
        })
    }

    /// The records in [`Records::decoded`]'s form, followed by the tables `write_tables`
    /// writes (see [`Tables::encode`]); relation labels are written once each.
    pub fn encode<'a>(
        docs: impl Iterator<Item = &'a Document>,
        chunks: impl Iterator<Item = &'a Chunk>,
        nodes: impl Iterator<Item = &'a Node>,
        edges: impl Iterator<Item = &'a Edge> + Clone,
        write_tables: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.resize(HEADER, 0);
        let mut docs: Vec<&Document> = docs.collect();
        docs.sort_unstable_by_key(|d| d.key);
        out.extend_from_slice(&(docs.len() as u64).to_le_bytes());
        for doc in docs {
            out.extend_from_slice(&doc.key.to_le_bytes());
            for text in [&*doc.id, &doc.title, &doc.source, &doc.content_hash, &doc.summary] {
                put_str(&mut out, text);
            }
            put_u32s(&mut out, &doc.chunks);
            out.extend_from_slice(&(doc.edges.len() as u32).to_le_bytes());
            doc.edges.iter().for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
        }
        let chunks_at = (out.len() as u64).to_le_bytes();
        out[HEADER - 24..HEADER - 16].copy_from_slice(&chunks_at);
        let mut chunks: Vec<&Chunk> = chunks.collect();
        chunks.sort_unstable_by_key(|c| c.id);
        out.extend_from_slice(&(chunks.len() as u64).to_le_bytes());
        for chunk in chunks {
            for field in [chunk.id, chunk.doc, chunk.ordinal] {
                out.extend_from_slice(&field.to_le_bytes());
            }
            put_span(&mut out, chunk.span);
            put_str(&mut out, &chunk.text);
            put_str(&mut out, &chunk.section);
            out.extend_from_slice(&(chunk.links.len() as u32).to_le_bytes());
            for link in &chunk.links {
                put_span(&mut out, link.anchor);
                put_str(&mut out, &link.target);
            }
        }
        let graph_at = (out.len() as u64).to_le_bytes();
        out[HEADER - 16..HEADER - 8].copy_from_slice(&graph_at);
        let mut nodes: Vec<&Node> = nodes.collect();
        nodes.sort_unstable_by_key(|n| n.id);
        out.extend_from_slice(&(nodes.len() as u64).to_le_bytes());
        for node in nodes {
            out.extend_from_slice(&node.id.to_le_bytes());
            put_str(&mut out, &node.name);
            out.extend_from_slice(&(node.aliases.len() as u32).to_le_bytes());
            node.aliases.iter().for_each(|alias| put_str(&mut out, alias));
            put_u32s(&mut out, &node.chunks);
        }
        let mut labels: Vec<&str> = edges.clone().map(|e| &*e.relation).collect::<HashSet<_>>().into_iter().collect();
        labels.sort_unstable();
        let label_ids: HashMap<&str, u32> = labels.iter().enumerate().map(|(i, l)| (*l, i as u32)).collect();
        out.extend_from_slice(&(labels.len() as u32).to_le_bytes());
        labels.iter().for_each(|label| put_str(&mut out, label));
        let mut edges: Vec<&Edge> = edges.collect();
        edges.sort_unstable_by_key(|e| e.id);
        out.extend_from_slice(&(edges.len() as u64).to_le_bytes());
        for edge in edges {
            out.extend_from_slice(&edge.id.to_le_bytes());
            for field in [edge.subject, label_ids[&*edge.relation], edge.object, edge.chunk] {
                out.extend_from_slice(&field.to_le_bytes());
            }
            out.push(origin_code(edge.origin));
        }
        let tables_at = (out.len() as u64).to_le_bytes();
        out[HEADER - 8..HEADER].copy_from_slice(&tables_at);
        write_tables(&mut out);
        out
    }

    /// The records of a save's file, refused if its checksum is off, with the tables built
    /// of them where the file holds them.
    pub fn from_save(dir: &std::path::Path, saved: &SavedSnapshot) -> Result<(Records, Option<Tables>)> {
        let file = Arc::new(saved::read_snapshot(dir, saved)?);
        let records = Records::decoded(file.clone())?;
        // Decoding read every page; the texts read from the file fault theirs in again as
        // they are read, rather than all of it counting as this process's memory.
        mapped::release(&file);
        Ok(records)
    }

    /// The records [`Records::encode`] wrote in `file`, their long texts read from it where
    /// they lie (see [`Text`]), with the tables after them (none in a file of an earlier
    /// version); an error for bytes of another version, cut short, or that run on.
    pub fn decoded(file: SharedBytes) -> Result<(Records, Option<Tables>)> {
        let damaged =
            || Error::Index("the saved records are unusable: not a records file of this version, or damaged".into());
        let bytes = (*file).as_ref();
        let rest = bytes.strip_prefix(MAGIC).ok_or_else(damaged)?;
        let mut r = Reader { rest };
        let file = &file;
        let version = r.u32();
        let mut offset = || r.u64().and_then(|at| usize::try_from(at).ok());
        // Where the chunks, the graph and the tables start.
        let sections = match version {
            Some(1) => {
                let records = whole(&bytes[MAGIC.len() + 4..], |r| {
                    let docs = documents(r, file)?;
                    let chunks = chunks(r, file)?;
                    let (nodes, edges) = graph(r)?;
                    Some(Records { docs, chunks, nodes, edges })
                });
                return records.map(|records| (records, None)).ok_or_else(damaged);
            }
            Some(2) => (HEADER_2, offset(), offset(), Some(bytes.len())),
            Some(VERSION) => (HEADER, offset(), offset(), offset()),
            _ => return Err(damaged()),
        };
        let (docs_at, chunks_at, graph_at, tables_at) = match sections {
            (d, Some(c), Some(g), Some(t)) if d <= c && c <= g && g <= t && t <= bytes.len() => (d, c, g, t),
            _ => return Err(damaged()),
        };
        let decoded = std::thread::scope(|scope| {
            // The tables are read on the chunks' core: the documents and graph are the most.
            let decoding_chunks = scope.spawn(|| {
                let chunks = whole(&bytes[chunks_at..graph_at], |r| chunks(r, file));
                let tables = (version == Some(VERSION)).then(|| whole(&bytes[tables_at..], Tables::decoded));
                (chunks, tables)
            });
            let docs = whole(&bytes[docs_at..chunks_at], |r| documents(r, file));
            let nodes_and_edges = whole(&bytes[graph_at..tables_at], graph);
            let (chunks, tables) = decoding_chunks.join().ok()?;
            let ((nodes, edges), docs, chunks) = (nodes_and_edges?, docs?, chunks?);
            // A file of this version holds its tables: ones that do not read are damage.
            let tables = match tables {
                Some(tables) => Some(tables?),
                None => None,
            };
            Some((Records { docs, chunks, nodes, edges }, tables))
        });
        decoded.ok_or_else(damaged)
    }

    /// Brings the records up to date with the store: each record `changed` names takes its
    /// stored state (written, or gone), and every family stays in id order.
    pub fn overlay(&mut self, changed: &ChangedRecords) -> Result<()> {
        overlay(&mut self.docs, changed.records(Family::Doc)?, |d| d.key as u64);
        overlay(&mut self.chunks, changed.records(Family::Chunk)?, |c| c.id as u64);
        let nodes = changed.nodes(|id| {
            let at = self.nodes.binary_search_by_key(&id, |n| n.id).ok()?;
            Some(self.nodes[at].chunks.as_slice())
        })?;
        overlay(&mut self.nodes, nodes, |n| n.id as u64);
        overlay(&mut self.edges, changed.records(Family::Edge)?, |e| e.id);
        Ok(())
    }
}

/// What `decode` reads of `bytes`, which it must read to the last byte: a file that runs on
/// is not this version's.
fn whole<T>(bytes: &[u8], decode: impl FnOnce(&mut Reader) -> Option<T>) -> Option<T> {
    let mut r = Reader { rest: bytes };
    let decoded = decode(&mut r)?;
    r.rest.is_empty().then_some(decoded)
}

/// The documents, as [`Records::encode`] wrote them in `file`.
fn documents(r: &mut Reader, file: &SharedBytes) -> Option<Vec<Document>> {
    r.long_list(|r| {
        Some(Document {
            key: r.u32()?,
            id: r.str()?.to_string(),
            title: r.str()?.to_string(),
            source: r.str()?.to_string(),
            content_hash: shared_text(r, file)?,
            summary: shared_text(r, file)?,
            chunks: r.u32s()?,
            edges: r.short_list(Reader::u64)?,
        })
    })
}

/// The chunks, as [`Records::encode`] wrote them in `file`.
fn chunks(r: &mut Reader, file: &SharedBytes) -> Option<Vec<Chunk>> {
    r.long_list(|r| {
        Some(Chunk {
            id: r.u32()?,
            doc: r.u32()?,
            ordinal: r.u32()?,
            span: span(r)?,
            text: shared_text(r, file)?,
            section: r.str()?.to_string(),
            links: r.short_list(|r| Some(Link { anchor: span(r)?, target: r.str()?.to_string() }))?,
        })
    })
}

/// The nodes and edges, as [`Records::encode`] wrote them.
fn graph(r: &mut Reader) -> Option<(Vec<Node>, Vec<Edge>)> {
    let nodes = r.long_list(|r| {
        Some(Node {
            id: r.u32()?,
            name: r.str()?.to_string(),
            aliases: r.short_list(|r| r.str().map(str::to_string))?,
            chunks: r.u32s()?,
        })
    })?;
    let labels: Vec<Arc<str>> = r.short_list(|r| r.str().map(Arc::from))?;
    let edges = r.long_list(|r| {
        Some(Edge {
            id: r.u64()?,
            subject: r.u32()?,
            relation: labels.get(r.u32()? as usize)?.clone(),
            object: r.u32()?,
            chunk: r.u32()?,
            origin: origin_of(*r.bytes(1)?.first()?)?,
        })
    })?;
    Some((nodes, edges))
}

/// The next text as [`put_str`] wrote it, read where it lies in `file`, which `r` reads.
fn shared_text(r: &mut Reader, file: &SharedBytes) -> Option<Text> {
    let len = r.u32()? as usize;
    let at = (r.rest.as_ptr() as usize).checked_sub((**file).as_ref().as_ptr() as usize)?;
    r.bytes(len)?;
    Text::shared(file, at, len)
}

fn overlay<T>(records: &mut Vec<T>, changed: Vec<(u64, Option<T>)>, id: impl Fn(&T) -> u64) {
    if changed.is_empty() {
        return;
    }
    let touched: HashSet<u64> = changed.iter().map(|(id, _)| *id).collect();
    records.retain(|record| !touched.contains(&id(record)));
    records.extend(changed.into_iter().filter_map(|(_, record)| record));
    records.sort_unstable_by_key(|record| id(record));
}

/// Gives the edges of one label one shared text, as an edge decoded from its own record
/// holds its own copy.
fn share_relations(edges: &mut [Edge]) {
    let mut labels: HashSet<Arc<str>> = HashSet::new();
    for edge in edges {
        match labels.get(&*edge.relation) {
            Some(shared) => edge.relation = Arc::clone(shared),
            None => {
                labels.insert(Arc::clone(&edge.relation));
            }
        }
    }
}

fn put_span(out: &mut Vec<u8>, (start, end): (usize, usize)) {
    out.extend_from_slice(&(start as u64).to_le_bytes());
    out.extend_from_slice(&(end as u64).to_le_bytes());
}

fn span(r: &mut Reader) -> Option<(usize, usize)> {
    Some((usize::try_from(r.u64()?).ok()?, usize::try_from(r.u64()?).ok()?))
}

fn origin_code(origin: EdgeOrigin) -> u8 {
    match origin {
        EdgeOrigin::Extracted => 0,
        EdgeOrigin::Llm => 1,
        EdgeOrigin::Imported => 2,
        EdgeOrigin::Curated => 3,
    }
}

fn origin_of(code: u8) -> Option<EdgeOrigin> {
    [EdgeOrigin::Extracted, EdgeOrigin::Llm, EdgeOrigin::Imported, EdgeOrigin::Curated].get(code as usize).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::tables::TablesToWrite;

    fn sample() -> Records {
        Records {
            docs: vec![Document {
                key: 3,
                id: "harbour-notes".into(),
                title: "Harbour notes".into(),
                source: "notes/harbour.md".into(),
                content_hash: "ab12".into(),
                summary: "The harbour opens at dawn.".into(),
                chunks: vec![7, 8],
                edges: vec![40, 41],
            }],
            chunks: vec![
                Chunk {
                    id: 7,
                    doc: 3,
                    ordinal: 0,
                    span: (0, 26),
                    text: "The harbour opens at dawn.".into(),
                    section: String::new(),
                    links: vec![],
                },
                Chunk {
                    id: 8,
                    doc: 3,
                    ordinal: 1,
                    span: (27, 60),
                    text: "Ferries leave for Quiet Bay › daily.".into(),
                    section: "Ferries › Times".into(),
                    links: vec![Link { anchor: (18, 27), target: "quiet-bay".into() }],
                },
            ],
            nodes: vec![
                Node {
                    id: 1,
                    name: "Harbour".into(),
                    aliases: vec!["Harbour".into(), "the harbour".into()],
                    chunks: vec![7],
                },
                // Shares a key with node 1: the harbour of Quiet Bay.
                Node {
                    id: 2,
                    name: "Quiet Bay".into(),
                    aliases: vec!["Quiet Bay".into(), "harbour".into()],
                    chunks: vec![8],
                },
            ],
            edges: vec![
                Edge {
                    id: 40,
                    subject: 1,
                    relation: "opens at".into(),
                    object: 1,
                    chunk: 7,
                    origin: EdgeOrigin::Extracted,
                },
                Edge {
                    id: 41,
                    subject: 1,
                    relation: "serves".into(),
                    object: 2,
                    chunk: 8,
                    origin: EdgeOrigin::Curated,
                },
            ],
        }
    }

    fn decode(bytes: Vec<u8>) -> Result<Records> {
        Records::decoded(Arc::new(bytes)).map(|(records, _)| records)
    }

    /// The records with the tables built of them.
    fn encoded(records: &Records) -> Vec<u8> {
        let tables = Tables::of(&records.nodes, &records.edges).unwrap();
        let mut nodes: Vec<&Node> = records.nodes.iter().collect();
        nodes.sort_unstable_by_key(|node| node.id);
        Records::encode(records.docs.iter(), records.chunks.iter(), records.nodes.iter(), records.edges.iter(), |out| {
            let to_write = TablesToWrite {
                nodes: &nodes,
                blocks: &tables.names.blocks,
                chunk_nodes: &tables.chunk_nodes,
                graph: &tables.graph,
            };
            Tables::encode(to_write, out)
        })
    }

    /// Where the tables start in a file of this version.
    fn tables_at(bytes: &[u8]) -> usize {
        mapped::u64_at(bytes, HEADER - 8) as usize
    }

    #[test]
    fn records_read_back_as_written_in_id_order() {
        let records = sample();
        assert_eq!(decode(encoded(&records)).unwrap(), records);
        let mut shuffled = sample();
        shuffled.chunks.reverse();
        shuffled.edges.reverse();
        assert_eq!(decode(encoded(&shuffled)).unwrap(), records, "written in id order");
    }

    #[test]
    fn the_tables_read_back_as_built() {
        let records = sample();
        let (read, tables) = Records::decoded(Arc::new(encoded(&records))).unwrap();
        assert_eq!(read, records);
        let (tables, built) = (
            tables.expect("a file of this version holds its tables"),
            Tables::of(&records.nodes, &records.edges).unwrap(),
        );
        assert_eq!(tables.names.keys, built.names.keys);
        let shared = crate::text::normalize_entity("Harbour");
        assert_eq!(tables.names.keys.get(&shared), Some(&2), "a key two nodes share is the later one's");
        for node in &records.nodes {
            let blocks = crate::kb::align::blocking_keys(&node.name);
            assert_eq!(
                tables.names.blocks.candidates(&blocks, |_| true),
                built.names.blocks.candidates(&blocks, |_| true)
            );
            assert_eq!(tables.graph.steps(node.id), built.graph.steps(node.id));
        }
        for chunk in &records.chunks {
            assert_eq!(tables.chunk_nodes.get(chunk.id), built.chunk_nodes.get(chunk.id));
        }
    }

    #[test]
    fn files_of_earlier_versions_still_read_without_tables() {
        let records = sample();
        let current = encoded(&records);
        let records_only = &current[HEADER..tables_at(&current)];
        let first = [MAGIC.as_slice(), &1u32.to_le_bytes(), records_only].concat();
        assert_eq!(decode(first).unwrap(), records);
        // Version 2's header is the third offset shorter: its offsets name places 8 bytes on.
        let offset = |at: usize| (mapped::u64_at(&current, at) - 8).to_le_bytes();
        let second =
            [MAGIC.as_slice(), &2u32.to_le_bytes(), &offset(HEADER - 24), &offset(HEADER - 16), records_only].concat();
        let (read, tables) = Records::decoded(Arc::new(second)).unwrap();
        assert_eq!(read, records);
        assert!(tables.is_none());
    }

    #[test]
    fn edges_of_one_label_share_its_text() {
        let mut edges = sample().edges;
        edges.push(Edge { id: 42, relation: String::from("serves").into(), ..edges[1].clone() });
        assert!(!Arc::ptr_eq(&edges[1].relation, &edges[2].relation));
        share_relations(&mut edges);
        assert!(Arc::ptr_eq(&edges[1].relation, &edges[2].relation));
        assert!(!Arc::ptr_eq(&edges[0].relation, &edges[1].relation), "another label keeps its own");
        let decoded = decode(encoded(&Records { edges, ..sample() })).unwrap().edges;
        assert!(Arc::ptr_eq(&decoded[1].relation, &decoded[2].relation), "a file's label is read once");
    }

    #[test]
    fn damaged_or_foreign_bytes_are_refused() {
        let bytes = encoded(&sample());
        assert!(decode(bytes[..bytes.len() - 1].to_vec()).is_err(), "cut short");
        assert!(decode([bytes.as_slice(), &[0]].concat()).is_err(), "runs on");
        let mut other_version = bytes.clone();
        other_version[8] ^= 1;
        assert!(decode(other_version).is_err());
        let mut bad_origin = bytes.clone();
        bad_origin[tables_at(&bytes) - 1] = 9;
        assert!(decode(bad_origin).is_err(), "an origin no build writes");
        for (offset, moved) in [(HEADER - 16, "the graph's offset moved"), (HEADER - 8, "the tables' offset moved")] {
            let mut elsewhere = bytes.clone();
            elsewhere[offset] ^= 1;
            assert!(decode(elsewhere).is_err(), "{moved}");
        }
        let mut bad_table = bytes.clone();
        // The first alias key's length, now longer than the file.
        bad_table[tables_at(&bytes) + 8 + 3] = 0xFF;
        assert!(decode(bad_table).is_err(), "a table that does not read");
    }

    #[test]
    fn an_overlay_replaces_removes_and_adds_in_id_order() {
        let mut records = sample();
        let renamed = Node { name: "Harbor".into(), ..records.nodes[0].clone() };
        let added = Node { id: 5, name: "Ferry".into(), aliases: vec!["Ferry".into()], chunks: vec![8] };
        overlay(&mut records.nodes, vec![(5, Some(added.clone())), (1, Some(renamed.clone())), (2, None)], |n| {
            n.id as u64
        });
        assert_eq!(records.nodes, vec![renamed, added]);
    }
}
