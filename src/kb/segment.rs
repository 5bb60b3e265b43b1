//! The exact vectors of one index, saved in memory-mapped segment files so that an open maps
//! them instead of decoding every vector from the store (most of an open's time, and of a
//! serving process's memory, before this).
//!
//! A [`VectorStore`] is a stack of immutable segments, oldest first, plus the vectors written
//! or removed since the last save, which live on the heap. A lookup asks the heap, then the
//! segments from the newest: the first segment holding the key answers, and one that lists
//! the key as dead (removed or replaced after the older segments were written) hides it
//! from the older ones.
//!
//! A save writes what changed since the last save as one new segment, then merges the newest
//! two while the older is less than twice the size of the newer (a binary counter): a vector
//! is rewritten O(log n) times over the life of a KB, and an open maps O(log n) segments.
//! Segments are never rewritten in place (a merge writes a new file), so a mapped file never
//! changes under a reader, and the manifest ([`super::saved`]) names the files of one save.
//!
//! File layout, little-endian, 64-byte header: magic `A2RVEC02`, dimension (u32), zero (u32),
//! live count `n` (u64), dead count `d` (u64), zero padding; then `n` sorted keys (u64), `d`
//! sorted dead keys (u64), `n + 1` row offsets (u64, from the first row), then the `n` rows,
//! each a vector as [`super::packed`] stores it, padded to four bytes: a dense row is `dim`
//! f32 read in place, a mostly-zero one (the hash embedder's names and facts) a tenth of that.
//! The manifest holds the CRC-32 of the header, both key lists and the offsets, checked at
//! every open; the rows are not checksummed (reading gigabytes at open is what this file
//! exists to avoid).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{mapped, packed};
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"A2RVEC02";
const HEADER: usize = 64;
/// The file suffix the manifest's clean-up recognises.
pub const SUFFIX: &str = ".vectors";

// The files are read by casting the mapped bytes: only a little-endian host reads them as
// written.
#[cfg(not(target_endian = "little"))]
compile_error!("saved vector segments are little-endian");

/// One segment file as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSegment {
    pub file: String,
    /// CRC-32 of the header, the two key lists and the row offsets.
    pub crc: u32,
    pub count: usize,
    pub dead: usize,
}

/// A mapped segment file.
struct Segment {
    saved: SavedSegment,
    map: memmap2::Mmap,
    dim: usize,
}

impl Segment {
    fn open(dir: &Path, saved: &SavedSegment, dim: usize) -> Result<Segment> {
        let path = dir.join(&saved.file);
        let map = mapped::map_scattered(&path)?;
        let damaged = |why: &str| Error::Index(format!("{}: {why}", path.display()));
        let lists = HEADER + 8 * (saved.count + saved.dead + saved.count + 1);
        if map.len() < lists || map.len() - lists != mapped::u64_at(&map, lists - 8) as usize {
            return Err(damaged("its size does not match its counts"));
        }
        if &map[..8] != MAGIC
            || mapped::u32_at(&map, 8) as usize != dim
            || mapped::u64_at(&map, 16) as usize != saved.count
            || mapped::u64_at(&map, 24) as usize != saved.dead
        {
            return Err(damaged("its header does not match the manifest"));
        }
        if crc32fast::hash(&map[..lists]) != saved.crc {
            return Err(damaged("checksum mismatch"));
        }
        Ok(Segment { saved: saved.clone(), map, dim })
    }

    fn keys(&self) -> &[u64] {
        bytemuck::cast_slice(&self.map[HEADER..HEADER + 8 * self.saved.count])
    }

    fn dead(&self) -> &[u64] {
        let start = HEADER + 8 * self.saved.count;
        bytemuck::cast_slice(&self.map[start..start + 8 * self.saved.dead])
    }

    fn offsets(&self) -> &[u64] {
        let start = HEADER + 8 * (self.saved.count + self.saved.dead);
        bytemuck::cast_slice(&self.map[start..start + 8 * (self.saved.count + 1)])
    }

    /// Row `row`'s bytes as written: a vector, padded.
    fn row_bytes(&self, row: usize) -> &[u8] {
        let rows = HEADER + 8 * (self.saved.count + self.saved.dead + self.saved.count + 1);
        let offsets = self.offsets();
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        self.map.get(rows + start..rows + end).unwrap_or_default()
    }

    /// What `read` makes of row `row`'s bytes; `None` where the row is damaged (rows are not
    /// checksummed), which reads as absent rather than as a wrong vector.
    fn read<'a, T>(&'a self, row: usize, read: impl FnOnce(&'a [u8]) -> Option<T>) -> Option<T> {
        let found = read(self.row_bytes(row));
        if found.is_none() {
            tracing::warn!(file = %self.saved.file, row, "a saved vector is damaged; `a2rag reindex` writes them again");
        }
        found
    }

    fn row(&self, row: usize) -> Option<Cow<'_, [f32]>> {
        self.read(row, |bytes| packed::read_padded(bytes, self.dim))
    }

    /// The row holding `key`, if this segment holds it.
    fn row_of(&self, key: u64) -> Option<usize> {
        position_in(self.keys(), key)
    }

    fn holds(&self, key: u64) -> bool {
        self.row_of(key).is_some()
    }

    fn hides(&self, key: u64) -> bool {
        position_in(self.dead(), key).is_some()
    }

    /// Entries written: what the merge rule weighs.
    fn size(&self) -> usize {
        self.saved.count + self.saved.dead
    }
}

/// Where `key` is in `keys` (distinct, ascending). Keys come from one counter, so a segment
/// holds them spread about evenly between its first and last (an unbroken run, or a chunk
/// about one id in five where documents, nodes and edges take the others): the search starts
/// where an even spread puts `key` and gallops from there, a probe or a few. A binary search
/// of the mapped list missed the cache at most of its twenty steps, for each vector a query
/// rescores.
fn position_in(keys: &[u64], key: u64) -> Option<usize> {
    let (&first, &last) = (keys.first()?, keys.last()?);
    if key < first || key > last {
        return None;
    }
    let guess = match last - first {
        0 => 0,
        span => (u128::from(key - first) * (keys.len() as u128 - 1) / u128::from(span)) as usize,
    };
    let at = crate::sorted::lower_bound_from(keys, guess, &key);
    (keys.get(at) == Some(&key)).then_some(at)
}

/// A vector on the heap as a segment row holds it, shared by the store and a link pass that
/// reads it.
pub type SharedRow = Arc<packed::Row>;

/// The exact vectors of one index: mapped segments plus the changes since the last save.
pub struct VectorStore {
    dim: usize,
    /// Oldest first.
    segments: Vec<Segment>,
    /// Written since the last save, as the rows a save writes: these shadow every segment.
    /// Packed, because the hash embedder's vectors of names and facts, most of a large
    /// document's memory, take a tenth of the bytes that way; shared, so that a link pass
    /// beside the writer reads them where they are ([`VectorStore::shared`]).
    fresh: HashMap<u64, SharedRow>,
    /// The bytes of the rows in `fresh`.
    fresh_bytes: usize,
    /// Removed since the last save while a segment still holds them.
    dropped: HashSet<u64>,
    len: usize,
}

impl VectorStore {
    pub fn new(dim: usize) -> VectorStore {
        VectorStore {
            dim,
            segments: Vec::new(),
            fresh: HashMap::new(),
            fresh_bytes: 0,
            dropped: HashSet::new(),
            len: 0,
        }
    }

    /// Maps the segments a manifest names, which hold `len` live vectors together; an error
    /// if any is missing or damaged.
    pub fn open(dir: &Path, saved: &[SavedSegment], dim: usize, len: usize) -> Result<VectorStore> {
        let segments = saved.iter().map(|s| Segment::open(dir, s, dim)).collect::<Result<Vec<_>>>()?;
        let most = segments.iter().map(|s| s.saved.count).sum::<usize>();
        if len > most {
            return Err(Error::Index(format!("{len} vectors saved in segments that hold at most {most}")));
        }
        Ok(VectorStore { segments, len, ..VectorStore::new(dim) })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Vectors held on the heap (the rest are mapped).
    pub fn heap_bytes(&self) -> usize {
        self.fresh_bytes + self.fresh.len() * 48 + self.dropped.len() * 16
    }

    /// Changes a save would write.
    pub fn unsaved(&self) -> usize {
        self.fresh.len() + self.dropped.len()
    }

    /// The vector of `key`: borrowed where it is stored dense, decoded where it is sparse.
    pub fn get(&self, key: u64) -> Option<Cow<'_, [f32]>> {
        match self.locate(key)? {
            Place::Heap(row) => row.vector(self.dim),
            Place::Saved(segment, row) => segment.row(row),
        }
    }

    /// The cosine of `query` and the vector of `key` (see [`crate::embed::cosine`]), read in
    /// place: a sparse row is not decoded.
    pub fn cosine(&self, key: u64, query: &[f32]) -> Option<f32> {
        match self.locate(key)? {
            Place::Heap(row) => row.cosine(query),
            Place::Saved(segment, row) => segment.read(row, |bytes| packed::cosine_padded(query, bytes)),
        }
    }

    /// Where the live vector of `key` is, if anywhere.
    fn locate(&self, key: u64) -> Option<Place<'_>> {
        if let Some(v) = self.fresh.get(&key) {
            return Some(Place::Heap(v));
        }
        if self.dropped.contains(&key) {
            return None;
        }
        self.holder(key).map(|(segment, row)| Place::Saved(segment, row))
    }

    /// The segment, and its row, whose row of `key` counts: the newest that holds it, unless a
    /// newer one lists it dead.
    fn holder(&self, key: u64) -> Option<(&Segment, usize)> {
        for segment in self.segments.iter().rev() {
            if let Some(row) = segment.row_of(key) {
                return Some((segment, row));
            }
            if segment.hides(key) {
                return None;
            }
        }
        None
    }

    pub fn contains(&self, key: u64) -> bool {
        self.locate(key).is_some()
    }

    /// Stores `row` (of the store's dimension: `VectorIndex::upsert_row` checks) as the
    /// vector of `key`.
    pub fn insert(&mut self, key: u64, row: packed::Row) {
        let known = self.contains(key);
        self.dropped.remove(&key);
        self.fresh_bytes += row.as_bytes().len();
        if let Some(old) = self.fresh.insert(key, Arc::new(row)) {
            self.fresh_bytes -= old.as_bytes().len();
        }
        if !known {
            self.len += 1;
        }
    }

    /// The row of `key` for a reader that outlives this borrow: the one on the heap itself,
    /// or a copy of a saved one.
    pub fn shared(&self, key: u64) -> Option<SharedRow> {
        match self.locate(key)? {
            Place::Heap(row) => Some(Arc::clone(row)),
            Place::Saved(segment, row) => Some(Arc::new(packed::Row::copied(segment.row_bytes(row), self.dim))),
        }
    }

    pub fn remove(&mut self, key: u64) {
        if !self.contains(key) {
            return;
        }
        if let Some(old) = self.fresh.remove(&key) {
            self.fresh_bytes -= old.as_bytes().len();
        }
        if self.holder(key).is_some() {
            self.dropped.insert(key);
        }
        self.len -= 1;
    }

    /// Every live key, each once (order unspecified).
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// Every live vector, each once (order unspecified).
    pub fn iter(&self) -> impl Iterator<Item = (u64, Cow<'_, [f32]>)> + '_ {
        let fresh = self.fresh.iter().filter_map(|(key, row)| Some((*key, row.vector(self.dim)?)));
        let saved = self.segments.iter().enumerate().flat_map(move |(at, segment)| {
            segment.keys().iter().enumerate().filter_map(move |(row, key)| {
                // A key counts in the newest place that knows it.
                let shadowed = self.fresh.contains_key(key)
                    || self.dropped.contains(key)
                    || self.segments[at + 1..].iter().any(|newer| newer.holds(*key) || newer.hides(*key));
                if shadowed { None } else { Some((*key, segment.row(row)?)) }
            })
        });
        fresh.chain(saved)
    }

    /// Writes the changes since the last save as a new segment named `STEM-I.vectors` (I
    /// counting the files this save writes), merges the newest segments by the binary-counter
    /// rule, and returns the segments the manifest must name. Memory switches to the new files
    /// only once all are written and synced; on an error nothing changes.
    pub fn save(&mut self, dir: &Path, stem: &str) -> Result<Vec<SavedSegment>> {
        if self.unsaved() == 0 {
            return Ok(self.saved());
        }
        let mut written = 0usize;
        let mut next_name = || {
            written += 1;
            format!("{stem}-{}{SUFFIX}", written - 1)
        };
        let mut entries: Vec<(u64, &[u8])> = self.fresh.iter().map(|(k, row)| (*k, row.as_bytes())).collect();
        entries.sort_unstable_by_key(|(k, _)| *k);
        let mut dead: Vec<u64> = self.dropped.iter().copied().collect();
        dead.sort_unstable();
        let written_first = write_segment(dir, &next_name(), self.dim, &entries, &dead)?;
        let mut newest = Segment::open(dir, &written_first, self.dim)?;
        let mut kept = self.segments.len();
        while kept > 0 && self.segments[kept - 1].size() < 2 * newest.size().max(1) {
            kept -= 1;
            let elder = &self.segments[kept];
            let (rows, dead) = merge(elder, &newest, kept == 0);
            let rows: Vec<(u64, &[u8])> =
                rows.iter().map(|(k, from, row)| (*k, pick(elder, &newest, *from, *row))).collect();
            let saved = write_segment(dir, &next_name(), self.dim, &rows, &dead)?;
            drop(rows);
            newest = Segment::open(dir, &saved, self.dim)?;
        }
        self.segments.truncate(kept);
        self.segments.push(newest);
        self.fresh = HashMap::new();
        self.fresh_bytes = 0;
        self.dropped = HashSet::new();
        Ok(self.saved())
    }

    /// The segments a manifest names for this store now.
    pub fn saved(&self) -> Vec<SavedSegment> {
        self.segments.iter().map(|s| s.saved.clone()).collect()
    }
}

/// Where a live vector is: written since the last save, or a segment's row.
enum Place<'a> {
    Heap(&'a SharedRow),
    Saved(&'a Segment, usize),
}

/// Which of a merge's two segments a row comes from.
#[derive(Clone, Copy)]
enum From {
    Elder,
    Newer,
}

/// The rows (key, source, row) and dead keys of `elder` and `newer` merged: the newer row
/// wins, a key the newer one lists dead leaves the elder's rows, and dead keys are kept only
/// while older segments exist for them to hide (`oldest`: none do).
type Merged = (Vec<(u64, From, usize)>, Vec<u64>);

/// See [`Merged`].
fn merge(elder: &Segment, newer: &Segment, oldest: bool) -> Merged {
    let mut rows = Vec::with_capacity(elder.saved.count + newer.saved.count);
    let (old_keys, new_keys) = (elder.keys(), newer.keys());
    let (mut i, mut j) = (0, 0);
    while i < old_keys.len() || j < new_keys.len() {
        let take_new = j < new_keys.len() && (i == old_keys.len() || new_keys[j] <= old_keys[i]);
        if take_new {
            if i < old_keys.len() && old_keys[i] == new_keys[j] {
                i += 1;
            }
            rows.push((new_keys[j], From::Newer, j));
            j += 1;
        } else {
            if !newer.hides(old_keys[i]) {
                rows.push((old_keys[i], From::Elder, i));
            }
            i += 1;
        }
    }
    let dead = if oldest {
        Vec::new()
    } else {
        let mut dead: Vec<u64> = elder.dead().iter().chain(newer.dead()).copied().collect();
        dead.sort_unstable();
        dead.dedup();
        dead
    };
    (rows, dead)
}

fn pick<'a>(elder: &'a Segment, newer: &'a Segment, from: From, row: usize) -> &'a [u8] {
    match from {
        From::Elder => elder.row_bytes(row),
        From::Newer => newer.row_bytes(row),
    }
}

/// Writes one segment (entries sorted by key, each with its row as [`packed::write_padded`]
/// writes it; dead keys sorted) under a temporary name, syncs it and renames it into place.
fn write_segment(dir: &Path, name: &str, dim: usize, entries: &[(u64, &[u8])], dead: &[u64]) -> Result<SavedSegment> {
    let mut header = [0u8; HEADER];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&(dim as u32).to_le_bytes());
    header[16..24].copy_from_slice(&(entries.len() as u64).to_le_bytes());
    header[24..32].copy_from_slice(&(dead.len() as u64).to_le_bytes());
    let offsets = std::iter::once(0).chain(entries.iter().scan(0u64, |end, (_, row)| {
        *end += row.len() as u64;
        Some(*end)
    }));
    let mut crc = crc32fast::Hasher::new();
    crc.update(&header);
    mapped::write_aside(dir, name, |out| {
        out.write_all(&header)?;
        for word in entries.iter().map(|(k, _)| *k).chain(dead.iter().copied()).chain(offsets) {
            crc.update(&word.to_le_bytes());
            out.write_all(&word.to_le_bytes())?;
        }
        entries.iter().try_for_each(|(_, row)| out.write_all(row))
    })?;
    Ok(SavedSegment { file: name.to_string(), crc: crc.finalize(), count: entries.len(), dead: dead.len() })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const DIM: usize = 8;

    /// Dense for even seeds, one component set (stored sparse) for odd ones, so that a
    /// segment mixes both kinds of row.
    fn vector(seed: u64) -> Vec<f32> {
        (0..DIM as u64).map(|i| if seed % 2 == 1 && i > 0 { 0.0 } else { (seed * 10 + i + 1) as f32 }).collect()
    }

    #[test]
    fn a_key_is_found_where_a_search_of_the_whole_list_finds_it() {
        let mut next = crate::kb::test_sequence(0x9E37_79B9_7F4A_7C15);
        let mut lists: Vec<Vec<u64>> = vec![Vec::new(), vec![7], vec![0, u64::MAX], vec![u64::MAX - 2, u64::MAX]];
        for _ in 0..50 {
            // Runs broken by gaps of every size, as ids are after removals and merges.
            let mut key = next(1_000);
            let list: Vec<u64> = (0..next(400))
                .map(|_| {
                    key += 1 + [0, 0, 0, next(3), next(1_000)][next(5) as usize];
                    key
                })
                .collect();
            lists.push(list);
        }
        for keys in &lists {
            let probes = keys.iter().flat_map(|k| [k.saturating_sub(1), *k, k.saturating_add(1)]).chain([0, u64::MAX]);
            for probe in probes {
                assert_eq!(position_in(keys, probe), keys.binary_search(&probe).ok(), "{probe} in {keys:?}");
            }
        }
    }

    /// The store's contents, sorted, as owned vectors.
    fn contents(store: &VectorStore) -> BTreeMap<u64, Vec<f32>> {
        store.iter().map(|(k, v)| (k, v.into_owned())).collect()
    }

    #[test]
    fn saved_segments_answer_like_the_writes_they_hold_across_merges_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = VectorStore::new(DIM);
        let mut truth: BTreeMap<u64, Vec<f32>> = BTreeMap::new();
        let mut state = 7u64;
        for save in 0..12u64 {
            for _ in 0..40 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let key = (state >> 33) % 120;
                if (state >> 20).is_multiple_of(4) {
                    store.remove(key);
                    truth.remove(&key);
                } else {
                    let v = vector(state >> 40);
                    store.insert(key, packed::Row::of(&v));
                    truth.insert(key, v);
                }
            }
            assert_eq!(contents(&store), truth, "before save {save}");
            let saved = store.save(dir.path(), &format!("chunks-{save}")).unwrap();
            assert_eq!(store.unsaved(), 0);
            assert_eq!((store.len(), contents(&store)), (truth.len(), truth.clone()), "after save {save}");
            let reopened = VectorStore::open(dir.path(), &saved, DIM, store.len()).unwrap();
            assert_eq!((reopened.len(), contents(&reopened)), (truth.len(), truth.clone()), "reopened {save}");
            for key in 0..120 {
                assert_eq!(
                    reopened.get(key).as_deref(),
                    truth.get(&key).map(Vec::as_slice),
                    "key {key} after save {save}"
                );
            }
            assert!(saved.len() <= 6, "the binary counter keeps few segments: {}", saved.len());
        }
    }

    #[test]
    fn a_shared_row_reads_as_the_stored_vector_and_outlives_a_replacement() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = VectorStore::new(DIM);
        store.insert(1, packed::Row::of(&vector(1)));
        store.save(dir.path(), "a").unwrap();
        store.insert(2, packed::Row::of(&vector(2)));
        let read = |row: &SharedRow| row.vector(DIM).unwrap().into_owned();
        let saved = store.shared(1).unwrap();
        let fresh = store.shared(2).unwrap();
        assert_eq!((read(&saved), read(&fresh)), (vector(1), vector(2)));
        assert_eq!(Arc::strong_count(&fresh), 2, "a fresh row is shared, not copied");
        store.insert(2, packed::Row::of(&vector(3)));
        store.remove(1);
        assert_eq!((read(&saved), read(&fresh)), (vector(1), vector(2)));
        assert_eq!(store.shared(1), None);
        assert_eq!(store.shared(2).map(|row| read(&row)), Some(vector(3)));
        // Odd seeds are stored sparse, and their rows on the heap are the smaller for it.
        let before = store.heap_bytes();
        store.insert(5, packed::Row::of(&vector(5)));
        let sparse = store.heap_bytes() - before;
        store.insert(6, packed::Row::of(&vector(6)));
        assert!(sparse < store.heap_bytes() - before - sparse, "sparse {sparse} bytes");
        assert_eq!(store.get(5).as_deref(), Some(vector(5).as_slice()));
        assert_eq!(store.cosine(5, &vector(5)), Some(crate::embed::cosine(&vector(5), &vector(5))));
    }

    #[test]
    fn the_oldest_segment_keeps_no_dead_keys() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = VectorStore::new(DIM);
        for key in 0..10 {
            store.insert(key, packed::Row::of(&vector(key)));
        }
        store.save(dir.path(), "a").unwrap();
        for key in 0..10 {
            store.remove(key);
        }
        store.insert(3, packed::Row::of(&vector(99)));
        let saved = store.save(dir.path(), "b").unwrap();
        assert_eq!(saved.len(), 1, "the change was as large as the base: merged");
        assert_eq!((saved[0].count, saved[0].dead), (1, 0));
        assert_eq!(store.get(3).as_deref(), Some(vector(99).as_slice()));
    }

    #[test]
    fn a_damaged_or_mismatched_segment_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = VectorStore::new(DIM);
        store.insert(1, packed::Row::of(&vector(1)));
        let saved = store.save(dir.path(), "s").unwrap();
        assert!(VectorStore::open(dir.path(), &saved, 2 * DIM, 1).is_err(), "another dimension");
        let path = dir.path().join(&saved[0].file);
        let mut bytes = std::fs::read(&path).unwrap();
        // The row (sparse) names another dimension: not checksummed, read as absent.
        let row = HEADER + 8 * 3;
        bytes[row] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let damaged_row = VectorStore::open(dir.path(), &saved, DIM, 1).unwrap();
        assert_eq!(damaged_row.get(1), None);
        bytes[row] ^= 1;
        bytes[HEADER] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = VectorStore::open(dir.path(), &saved, DIM, 1).err().unwrap().to_string();
        assert!(err.contains("checksum"), "{err}");
        std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        assert!(VectorStore::open(dir.path(), &saved, DIM, 1).is_err(), "a truncated file");
    }
}
