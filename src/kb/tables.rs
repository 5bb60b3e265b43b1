//! The tables an open builds of the records' names and links: the alias table and blocks,
//! the reverse provenance ([`ChunkNodes`]) and the graph's CSR ([`KnowledgeGraph`]). A save
//! writes them in the records file after the records (see [`super::records`]), and an open
//! whose records file the store has not changed since reads them instead of building them:
//! at a million passages the building was about half of an open's work, two seconds of it
//! the alias tables alone (a hash and a probe per alias and blocking key), where reading them
//! back is a copy of the arrays and one insert per alias, on the core that decodes the chunks
//! while the store opens. An open that takes records written since the file from the store
//! builds the tables as before, since any of them may have changed.
//!
//! The document ids are not saved: a table of a million or more keys, whose keys read back
//! cost an open as much to insert as building it of the records does. Nor is the fact
//! table, which an open does not build at all (see `fact_edges::LazyFacts`).

use super::Table;
use super::align::{AliasBlocks, NameSketch};
use super::chunk_nodes::ChunkNodes;
use super::graph::KnowledgeGraph;
use super::mapped::{Reader, put_str};
use super::model::{Edge, Node, NodeId};
use crate::error::{Error, Result};

/// The alias table (normalised alias -> node) and blocking index of a KB's nodes.
pub struct NameTables {
    pub keys: Table<String, NodeId>,
    pub blocks: AliasBlocks,
}

/// The tables an open builds of the nodes and edges.
pub struct Tables {
    pub names: NameTables,
    pub chunk_nodes: ChunkNodes,
    pub graph: KnowledgeGraph,
}

/// The tables of a KB, to write (see [`Tables::encode`]).
pub struct TablesToWrite<'a> {
    /// The nodes, in id order: the alias table is written of them rather than copied from
    /// the live one (see [`Tables::encode`]).
    pub nodes: &'a [&'a Node],
    pub blocks: &'a AliasBlocks,
    pub chunk_nodes: &'a ChunkNodes,
    pub graph: &'a KnowledgeGraph,
}

/// `node`'s aliases in the alias table and the blocking index.
pub fn index_names(keys: &mut Table<String, NodeId>, blocks: &mut AliasBlocks, node: &Node) {
    // Normalised once a name: an open does this for every alias of every node.
    let name_key = crate::text::normalize_entity(&node.name);
    let sketch = NameSketch::of(&node.name, &name_key);
    for alias in &node.aliases {
        let key = if *alias == node.name { name_key.clone() } else { crate::text::normalize_entity(alias) };
        blocks.insert_normalized(alias, &key, node.id, sketch);
        keys.insert(key, node.id);
    }
}

impl NameTables {
    fn of(nodes: &[Node]) -> NameTables {
        // The key table is sized once for every alias: grown a doubling at a time, it is built
        // again and its fresh pages zeroed at every step. The blocks are far fewer (a word's
        // first letters, initials) and grow: sized for every alias, their table would be
        // mostly empty, and every lookup a cache miss in it.
        let aliases = nodes.iter().map(|n| n.aliases.len()).sum();
        let mut tables = NameTables {
            keys: Table::with_capacity_and_hasher(aliases, Default::default()),
            blocks: AliasBlocks::default(),
        };
        for node in nodes {
            index_names(&mut tables.keys, &mut tables.blocks, node);
        }
        tables
    }
}

impl Tables {
    /// The tables of `nodes` and `edges`, built on two cores: the alias tables on one, the
    /// provenance and the graph on the other, about as much work at a million passages.
    pub fn of(nodes: &[Node], edges: &[Edge]) -> Result<Tables> {
        std::thread::scope(|scope| {
            let names = scope.spawn(|| NameTables::of(nodes));
            let chunk_nodes = ChunkNodes::of(nodes);
            let graph = KnowledgeGraph::of(edges.iter().map(|e| (e.id, e.subject, e.object)).collect());
            let names = names.join().map_err(|_| Error::Internal("building the name tables panicked".into()))?;
            Ok(Tables { names, chunk_nodes, graph })
        })
    }

    /// Writes the tables as [`Tables::decoded`] reads them.
    pub fn encode(tables: TablesToWrite, out: &mut Vec<u8>) {
        // Every alias of every node as (key, node), nodes in id order: read back, a key two
        // nodes share goes to the later one, as in a table built of the records. The live
        // table may differ there: when the node a shared key points to goes, the key goes
        // with it until the tables are built again, and a file copied from it would keep
        // that gap for good.
        let aliases: usize = tables.nodes.iter().map(|node| node.aliases.len()).sum();
        out.extend_from_slice(&(aliases as u64).to_le_bytes());
        for node in tables.nodes {
            for alias in &node.aliases {
                put_str(out, &crate::text::normalize_entity(alias));
                out.extend_from_slice(&node.id.to_le_bytes());
            }
        }
        tables.blocks.encode(out);
        tables.chunk_nodes.encode(out);
        tables.graph.encode(out);
    }

    /// The tables [`Tables::encode`] wrote, if they are there whole.
    pub fn decoded(r: &mut Reader) -> Option<Tables> {
        // Each alias takes at least a byte: a damaged count cannot ask for more room than that.
        // A key written twice keeps its last node (see `Tables::encode`).
        let count = usize::try_from(r.u64()?).ok().filter(|count| *count <= r.rest.len())?;
        let mut keys = Table::with_capacity_and_hasher(count, Default::default());
        for _ in 0..count {
            let key = r.str()?.to_owned();
            keys.insert(key, r.u32()?);
        }
        let blocks = AliasBlocks::decoded(r)?;
        let chunk_nodes = ChunkNodes::decoded(r)?;
        let graph = KnowledgeGraph::decoded(r)?;
        Some(Tables { names: NameTables { keys, blocks }, chunk_nodes, graph })
    }
}
