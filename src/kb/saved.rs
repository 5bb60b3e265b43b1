//! Saved HNSW graphs: the vector indexes' graphs written beside the store, so that opening a
//! KB reads them back instead of linking every vector again (about 2 ms a passage, which made
//! a 100k-passage KB take minutes to open).
//!
//! Layout of the directory ([`super::Kb::index_dir`]):
//! - `manifest.json`: format, embedder, graph options, and for each index the files of its
//!   graphs, each with its CRC-32, the CRC-32 of all but its codes ([`CheckedLinks`], which
//!   an open checks) and its member count;
//! - `NAME-GEN-I.usearch`: graph `I` of index `NAME` as usearch serialises it, written by the
//!   save of generation `GEN`;
//! - `NAME-GEN-I.keys`: its members, little-endian `(key, fingerprint)` pairs of `u64`, the
//!   fingerprint being that of the exact vector the graph was given.
//!
//! A save writes only the graphs that changed since the previous one, under a new generation,
//! syncs them, then replaces the manifest by a rename and removes the files it no longer
//! names. A crash at any point leaves the old manifest with its files, or the new one with
//! its files.
//!
//! The store stays the source of truth. At open every member's fingerprint is compared with
//! the stored vector: a member whose vector changed or went is dropped from its graph, and a
//! stored vector that no graph holds is linked. A save that lags behind the store (a crash
//! during an ingest, another daemon's writes, a `reindex`) therefore costs linking what
//! changed, never a wrong candidate; a damaged or foreign file costs a rebuild of that index.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::mapped;
use super::postings::{self, SavedPostings};
use super::segment::{self, SavedSegment};
use crate::error::{Error, Result};

/// Bumped when the files' meaning changes; a manifest of another format is ignored.
const FORMAT: u32 = 2;
const MANIFEST: &str = "manifest.json";
const LOCK: &str = "lock";

/// What the graphs were built for: a manifest recorded for other settings is not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphFingerprint {
    pub embedder: String,
    pub dim: usize,
    /// The usearch options that shape a graph (quantisation, connectivity).
    pub options: String,
}

/// A graph's members: `(key, fingerprint of the vector it was linked with)`.
pub type Members = Vec<(u64, u64)>;

/// One graph's files, as the manifest names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedGraph {
    pub file: String,
    /// CRC-32 of the whole file: what earlier builds check.
    pub crc: u32,
    /// Where the file's quantised codes lie and the CRC-32 of the rest, which an open checks
    /// instead of `crc` (see [`map_graph`]). Absent in saves of earlier builds.
    #[serde(default)]
    pub links: Option<CheckedLinks>,
    pub members: String,
    pub members_crc: u32,
    pub count: usize,
}

/// A graph file as its header, its vectors' quantised codes and its links: usearch writes the
/// code matrix's size (rows, then bytes per row, as u32), the codes, then the index header
/// and the nodes with their neighbour lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckedLinks {
    pub codes_at: usize,
    pub codes_len: usize,
    /// CRC-32 of the file before the codes, then after them.
    pub crc: u32,
}

impl CheckedLinks {
    /// The layout of `graph`, a usearch file with its codes; `None` if its matrix size does
    /// not fit it.
    fn of(graph: &[u8]) -> Option<CheckedLinks> {
        const MATRIX_SIZE: usize = 8;
        let rows = mapped::u32_at(graph.get(..MATRIX_SIZE)?, 0) as usize;
        let row_bytes = mapped::u32_at(graph, 4) as usize;
        let codes_len = rows.checked_mul(row_bytes)?;
        let crc = crc_outside(graph, MATRIX_SIZE..MATRIX_SIZE.checked_add(codes_len)?)?;
        Some(CheckedLinks { codes_at: MATRIX_SIZE, codes_len, crc })
    }

    /// Where the codes lie in the file.
    fn codes(&self) -> std::ops::Range<usize> {
        self.codes_at..self.codes_at.saturating_add(self.codes_len)
    }

    /// Whether `graph` still has this layout and checksum.
    fn hold_in(&self, graph: &[u8]) -> bool {
        crc_outside(graph, self.codes()) == Some(self.crc)
    }
}

/// CRC-32 of `bytes` before `skipped`, then after it; `None` if `skipped` ends past them.
fn crc_outside(bytes: &[u8], skipped: std::ops::Range<usize>) -> Option<u32> {
    let (before, after) = (bytes.get(..skipped.start)?, bytes.get(skipped.end..)?);
    let mut crc = crc32fast::Hasher::new();
    crc.update(before);
    crc.update(after);
    Some(crc.finalize())
}

/// An index's exact vectors as one save left them (see [`super::segment`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedVectors {
    pub segments: Vec<SavedSegment>,
    /// Live vectors in the segments together.
    pub len: usize,
    /// Of those, how many no graph held (all of a small index searched exactly; normally
    /// none of a linked one, since a save links first).
    pub staged: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub built_for: GraphFingerprint,
    pub generation: u64,
    /// The graphs of each index, in the order they were filled.
    pub indexes: BTreeMap<String, Vec<SavedGraph>>,
    /// The store's change the save is current with: an open that maps the saved vectors
    /// replays the changes after it. Absent in saves of earlier builds, which saved graphs
    /// only.
    #[serde(default)]
    pub change: Option<u64>,
    /// Each index's exact vectors, saved with its graphs.
    #[serde(default)]
    pub vectors: BTreeMap<String, SavedVectors>,
    /// The store the save was made from ([`crate::kb::store::Store::instance`]).
    #[serde(default)]
    pub store: Option<u64>,
    /// BM25's postings, rewritten only now and then: current with a change of their own.
    #[serde(default)]
    pub bm25: Option<SavedPostings>,
    /// The relation labels with their vectors, so that an open embeds none it knows.
    #[serde(default)]
    pub relation_labels: Option<SavedLabels>,
    /// The PPR snapshot and the pages by topic ([`super::snapshot`]), where they were built
    /// before the save: each current with a change of its own, and read only while the store
    /// has not changed since.
    #[serde(default)]
    pub passages: Option<SavedSnapshot>,
    #[serde(default)]
    pub pages: Option<SavedSnapshot>,
    /// The records ([`super::records`]), rewritten only now and then: current with a change
    /// of their own, and read with the records written since taken from the store.
    #[serde(default)]
    pub records: Option<SavedSnapshot>,
}

/// A snapshot's file ([`super::snapshot::Snapshot::encode`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSnapshot {
    pub file: String,
    pub crc: u32,
    /// The store change whose contents the snapshot was built from.
    pub change: u64,
}

/// A file of relation labels and their vectors, as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedLabels {
    pub file: String,
    pub crc: u32,
}

impl Manifest {
    pub fn new(built_for: GraphFingerprint, generation: u64, store: u64, change: u64) -> Manifest {
        Manifest {
            format: FORMAT,
            built_for,
            generation,
            indexes: BTreeMap::new(),
            store: Some(store),
            change: Some(change),
            vectors: BTreeMap::new(),
            bm25: None,
            relation_labels: None,
            passages: None,
            pages: None,
            records: None,
        }
    }

    /// The manifest in `dir`, if there is one this build can use for `built_for`; a missing
    /// one is `None` quietly, an unreadable or foreign one with a warning (the indexes are
    /// then linked from the stored vectors, as without a save).
    pub fn read(dir: &Path, built_for: &GraphFingerprint) -> Option<Manifest> {
        let path = dir.join(MANIFEST);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "saved indexes unreadable; linking them again");
                return None;
            }
        };
        match serde_json::from_slice::<Manifest>(&bytes) {
            Ok(m) if m.format == FORMAT && &m.built_for == built_for => Some(m),
            Ok(_) => {
                tracing::info!(path = %path.display(), "saved indexes were built for other settings; linking them again");
                None
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "saved index manifest is damaged; linking the indexes again");
                None
            }
        }
    }

    /// Replaces the manifest in `dir` atomically, then removes the graph files it does not
    /// name (those of earlier generations).
    pub fn commit(&self, dir: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| Error::Index(format!("encoding the manifest: {e}")))?;
        let staging = dir.join(format!("{MANIFEST}.tmp"));
        write_synced(&staging, &bytes)?;
        let path = dir.join(MANIFEST);
        fs::rename(&staging, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(dir)?;
        let named: HashSet<&str> = self
            .indexes
            .values()
            .flatten()
            .flat_map(|g| [g.file.as_str(), g.members.as_str()])
            .chain(self.vectors.values().flat_map(|v| v.segments.iter().map(|s| s.file.as_str())))
            .chain(self.bm25.iter().map(|p| p.file.as_str()))
            .chain(self.relation_labels.iter().map(|l| l.file.as_str()))
            .chain(self.passages.iter().chain(&self.pages).chain(&self.records).map(|p| p.file.as_str()))
            .collect();
        let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // A file left half-written by a crash ends in `.tmp`.
            let stem = name.strip_suffix(".tmp").unwrap_or(name);
            let graph_file = [".usearch", ".keys", segment::SUFFIX, postings::SUFFIX, LABELS, SNAPSHOT]
                .iter()
                .any(|s| stem.ends_with(s));
            if graph_file && !named.contains(name) {
                // A leftover costs disk, not correctness: the next save tries again.
                if let Err(e) = fs::remove_file(entry.path()) {
                    tracing::debug!(file = name, error = %e, "could not remove an old graph file");
                }
            }
        }
        Ok(())
    }
}

/// Exclusive use of a saved-index directory while a save writes it. On sled the store's own
/// lock already makes one process the writer; daemons sharing a PostgreSQL KB and a data
/// directory take turns here, and one that finds it taken skips its save.
pub struct SaveLock {
    _file: File,
}

impl SaveLock {
    /// Creates `dir` if needed and takes its lock; `None` while another process holds it.
    pub fn try_take(dir: &Path) -> Result<Option<SaveLock>> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        // The graphs hold the KB's vectors: owner-only, like the store beside them.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(LOCK);
        let file =
            File::options().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(&path, e))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; released when `file` closes.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        Ok(taken.then_some(SaveLock { _file: file }))
    }
}

/// Writes one graph (already serialised) and its members; returns what the manifest records.
pub fn write_graph(dir: &Path, stem: &str, graph: &[u8], members: &[(u64, u64)]) -> Result<SavedGraph> {
    let file = format!("{stem}.usearch");
    write_synced(&dir.join(&file), graph)?;
    let encoded: Vec<u8> =
        members.iter().flat_map(|(key, print)| key.to_le_bytes().into_iter().chain(print.to_le_bytes())).collect();
    let members_file = format!("{stem}.keys");
    write_synced(&dir.join(&members_file), &encoded)?;
    Ok(SavedGraph {
        file,
        crc: crc32fast::hash(graph),
        links: CheckedLinks::of(graph),
        members: members_file,
        members_crc: crc32fast::hash(&encoded),
        count: members.len(),
    })
}

/// A saved graph as an open found it: its bytes, its members, and its files as the manifest
/// should name them from now on. A save of an earlier build gains the links' checksum from the
/// whole-file check that read it, so that later opens skip its codes once a save has
/// rewritten the manifest: sealed graphs are never written again.
pub struct FoundGraph {
    pub bytes: memmap2::Mmap,
    pub members: Members,
    pub file: SavedGraph,
}

impl FoundGraph {
    fn of(bytes: memmap2::Mmap, dir: &Path, saved: &SavedGraph) -> Result<FoundGraph> {
        let links = saved.links.clone().or_else(|| CheckedLinks::of(&bytes));
        Ok(FoundGraph { members: read_members(dir, saved)?, bytes, file: SavedGraph { links, ..saved.clone() } })
    }
}

/// Reads one graph's bytes and members back, refusing either if its checksum or size is off.
pub fn read_graph(dir: &Path, saved: &SavedGraph) -> Result<FoundGraph> {
    FoundGraph::of(read_checked(&dir.join(&saved.file), saved.crc)?, dir, saved)
}

/// A graph's member list, refused if its checksum or size is off.
fn read_members(dir: &Path, saved: &SavedGraph) -> Result<Members> {
    let encoded = read_checked(&dir.join(&saved.members), saved.members_crc)?;
    if encoded.len() != saved.count * 16 {
        return Err(Error::Index(format!("{}: {} bytes for {} members", saved.members, encoded.len(), saved.count)));
    }
    let members = encoded
        .chunks_exact(16)
        .map(|pair| {
            let (key, print) = pair.split_at(8);
            (mapped::u64_at(key, 0), mapped::u64_at(print, 0))
        })
        .collect();
    Ok(members)
}

/// Maps one graph's file for viewing in place and reads its members, refusing either if its
/// checksum or size is off. The header and the links are read in whole for the check and for
/// usearch's walk over its nodes; the caller releases their pages and advises scattered reads
/// after that walk (see [`mapped::release`], [`mapped::scatter`]), so they cost an open time,
/// not resident memory.
///
/// The quantised codes, most of the file (four fifths at 512 dimensions), are neither read
/// nor checked at open, as a vector segment's rows are not ([`super::segment`]): a search
/// reads the codes of the nodes it visits, and a damaged code can only cost a candidate, since
/// every candidate is rescored from its exact vector. The links are checked: usearch follows
/// them as offsets. At a million passages the codes are 2.1 of the graphs' 2.6 GB, which
/// every open read and summed.
pub fn map_graph(dir: &Path, saved: &SavedGraph) -> Result<FoundGraph> {
    let path = dir.join(&saved.file);
    let whole = match &saved.links {
        Some(links) => {
            let map = mapped::map(&path)?;
            mapped::read_in_except(&map, links.codes());
            links.hold_in(&map).then_some(map)
        }
        None => Some(mapped::map_read_in(&path)?).filter(|map| crc32fast::hash(map) == saved.crc),
    };
    let map = whole.ok_or_else(|| Error::Index(format!("{}: checksum mismatch", path.display())))?;
    FoundGraph::of(map, dir, saved)
}

/// Writes `labels` with their vectors as `NAME.labels`: per label its length (u32), its bytes,
/// then its vector's floats, little-endian.
pub fn write_labels<'a>(
    dir: &Path,
    name: &str,
    labels: impl Iterator<Item = (&'a str, Vec<f32>)>,
) -> Result<SavedLabels> {
    let mut bytes = Vec::new();
    for (label, vector) in labels {
        mapped::put_str(&mut bytes, label);
        vector.iter().for_each(|x| bytes.extend_from_slice(&x.to_le_bytes()));
    }
    let file = format!("{name}{LABELS}");
    write_synced(&dir.join(&file), &bytes)?;
    Ok(SavedLabels { file, crc: crc32fast::hash(&bytes) })
}

/// The labels and vectors of `NAME.labels`, each vector of `dim` floats; an error if the file
/// is damaged.
pub fn read_labels(dir: &Path, saved: &SavedLabels, dim: usize) -> Result<HashMap<String, Vec<f32>>> {
    let path = dir.join(&saved.file);
    let bytes = read_checked(&path, saved.crc)?;
    let damaged = || Error::Index(format!("{}: not a list of labels of {dim} dimensions", path.display()));
    let mut labels = HashMap::new();
    let mut reader = mapped::Reader { rest: &bytes };
    while !reader.rest.is_empty() {
        let label = reader.str().ok_or_else(damaged)?.to_string();
        let floats = reader.bytes(4 * dim).ok_or_else(damaged)?;
        let vector = floats.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        labels.insert(label, vector);
    }
    Ok(labels)
}

/// The suffix of a relation-labels file.
const LABELS: &str = ".labels";

/// Writes an encoded snapshot, built from store change `change`, as `NAME.snapshot`.
pub fn write_snapshot(dir: &Path, name: &str, encoded: &[u8], change: u64) -> Result<SavedSnapshot> {
    let file = format!("{name}{SNAPSHOT}");
    write_synced(&dir.join(&file), encoded)?;
    Ok(SavedSnapshot { file, crc: crc32fast::hash(encoded), change })
}

/// The encoded snapshot `saved` names; an error if the file is damaged.
pub fn read_snapshot(dir: &Path, saved: &SavedSnapshot) -> Result<memmap2::Mmap> {
    read_checked(&dir.join(&saved.file), saved.crc)
}

/// The suffix of a snapshot's file.
const SNAPSHOT: &str = ".snapshot";

/// A fingerprint of a vector's exact values: equal vectors, equal prints; a changed vector
/// almost surely changes it. Not a defence against crafted input (the files are the
/// process's own), only against staleness.
pub fn fingerprint(vector: &[f32]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64 ^ vector.len() as u64;
    for x in vector {
        hash = (hash.rotate_left(5) ^ u64::from(x.to_bits())).wrapping_mul(0x0100_0000_01b3_9e37);
    }
    hash ^ (hash >> 29)
}

/// The file at `path`, mapped, if its bytes have checksum `crc`. Mapped rather than read: a
/// read copies the file into memory the process has just asked for, and the kernel zeroes
/// every page of that first (at a million passages the records alone are 0.9 GB, and the
/// zeroing took most of an open), while a map hands over the page cache's pages as they are.
fn read_checked(path: &Path, crc: u32) -> Result<memmap2::Mmap> {
    let bytes = mapped::map(path)?;
    if crc32fast::hash(&bytes) != crc {
        return Err(Error::Index(format!("{}: checksum mismatch", path.display())));
    }
    Ok(bytes)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = File::create(path).map_err(|e| Error::io(path, e))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| Error::io(path, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built_for() -> GraphFingerprint {
        GraphFingerprint { embedder: "hash-8".into(), dim: 8, options: "i8/16".into() }
    }

    #[test]
    fn a_graph_reads_back_and_a_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let saved = write_graph(dir.path(), "chunks-1-0", b"graph bytes", &[(7, 70), (9, 90)]).unwrap();
        let found = read_graph(dir.path(), &saved).unwrap();
        assert_eq!((&found.bytes[..], found.members), (b"graph bytes".as_slice(), vec![(7, 70), (9, 90)]));
        let path = dir.path().join(&saved.file);
        let mut bytes = fs::read(&path).unwrap();
        bytes[0] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(read_graph(dir.path(), &saved).is_err());
    }

    #[test]
    fn a_graph_names_its_codes_where_its_matrix_size_fits_it() {
        let graph = [&2u32.to_le_bytes()[..], &3u32.to_le_bytes(), b"codes!", b"header and links"].concat();
        let links = CheckedLinks::of(&graph).expect("two rows of three bytes fit");
        assert_eq!((links.codes_at, links.codes_len), (8, 6));
        let mut other_codes = graph.clone();
        other_codes[9] ^= 1;
        assert!(links.hold_in(&other_codes), "the codes are not summed");
        let mut other_links = graph.clone();
        other_links[20] ^= 1;
        assert!(!links.hold_in(&other_links) && !links.hold_in(&graph[..10]));
        assert_eq!(CheckedLinks::of(b"graph bytes"), None, "a matrix larger than the file");
        assert_eq!(CheckedLinks::of(b"tiny"), None);
    }

    #[test]
    fn a_commit_replaces_the_manifest_and_removes_unnamed_graph_files() {
        let dir = tempfile::tempdir().unwrap();
        let old = write_graph(dir.path(), "chunks-1-0", b"old", &[(1, 1)]).unwrap();
        let mut first = Manifest::new(built_for(), 1, 7, 0);
        first.indexes.insert("chunks".into(), vec![old.clone()]);
        first.commit(dir.path()).unwrap();
        let new = write_graph(dir.path(), "chunks-2-0", b"new", &[(1, 2)]).unwrap();
        let mut second = Manifest::new(built_for(), 2, 7, 0);
        second.indexes.insert("chunks".into(), vec![new.clone()]);
        second.commit(dir.path()).unwrap();
        let read = Manifest::read(dir.path(), &built_for()).unwrap();
        assert_eq!((read.generation, &read.indexes["chunks"]), (2, &vec![new]));
        assert!(!dir.path().join(&old.file).exists() && !dir.path().join(&old.members).exists());
        let other = GraphFingerprint { dim: 16, ..built_for() };
        assert!(Manifest::read(dir.path(), &other).is_none(), "graphs built for other settings are not used");
        fs::write(dir.path().join(MANIFEST), b"{ not json").unwrap();
        assert!(Manifest::read(dir.path(), &built_for()).is_none());
    }

    #[test]
    fn relation_labels_read_back_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let labels = [("born in", vec![0.5f32, -1.0]), ("capital of", vec![2.0, 0.25])];
        let saved = write_labels(dir.path(), "relations-1", labels.iter().map(|(l, v)| (*l, v.clone()))).unwrap();
        let read = read_labels(dir.path(), &saved, 2).unwrap();
        assert_eq!(read, labels.iter().map(|(l, v)| (l.to_string(), v.clone())).collect::<HashMap<_, _>>());
        assert!(read_labels(dir.path(), &saved, 3).is_err(), "vectors of another dimension");
        assert!(read_labels(dir.path(), &SavedLabels { crc: saved.crc ^ 1, ..saved.clone() }, 2).is_err());
    }

    #[test]
    fn fingerprints_tell_vectors_apart() {
        let a = [0.5f32, -0.25, 0.125];
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        assert_ne!(fingerprint(&a), fingerprint(&[0.5, -0.25, 0.126]));
        assert_ne!(fingerprint(&a), fingerprint(&[-0.25, 0.5, 0.125]));
    }

    #[test]
    fn a_taken_lock_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = SaveLock::try_take(dir.path()).unwrap();
        assert!(first.is_some());
        assert!(SaveLock::try_take(dir.path()).unwrap().is_none());
        drop(first);
        assert!(SaveLock::try_take(dir.path()).unwrap().is_some());
    }
}
