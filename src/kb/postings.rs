//! BM25's postings saved in one memory-mapped file, so that an open maps them instead of
//! tokenising every chunk again (see [`super::bm25`], which serves them with the chunks
//! indexed since beside them).
//!
//! File layout, little-endian, 64-byte header (magic `A2RBM251`, rows `n`, terms `t`,
//! postings `p`, total length of all rows in terms), then:
//! - `n` row keys (u64, sorted);
//! - `t + 1` offsets (u64) of each term's postings;
//! - `n` row lengths (u32);
//! - `n + 1` offsets (u32) of each row's terms;
//! - `t + 1` offsets (u32) of each term's bytes;
//! - `p` (term, tf) pairs, each row's terms (the forward index: what removing a row takes away);
//! - `p` (row, tf) pairs, each term's postings in row order;
//! - the terms' bytes, sorted.
//!
//! The manifest holds a CRC-32 of everything but the two pair lists, checked at open; the pair
//! lists are read through bounds-checked lookups, so a damaged pair costs a wrong score, never
//! a crash.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::mapped;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"A2RBM251";
const HEADER: usize = 64;
/// The file suffix the manifest's clean-up recognises.
pub const SUFFIX: &str = ".postings";

#[cfg(not(target_endian = "little"))]
compile_error!("saved postings are little-endian");

/// The postings file as the manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedPostings {
    pub file: String,
    pub crc: u32,
    /// The store's change the file is current with: an open re-indexes the chunks written
    /// after it.
    pub change: u64,
}

/// One row to write: its key, its length in terms, and its distinct terms as (id, count),
/// each id a place in the vocabulary the rows are written with.
pub struct Row {
    pub key: u64,
    pub len: u32,
    pub terms: Vec<[u32; 2]>,
}

/// A mapped postings file.
pub struct Postings {
    saved: SavedPostings,
    map: memmap2::Mmap,
    rows: usize,
    terms: usize,
    pairs: usize,
    total_len: u64,
}

/// Where each section starts.
struct Sections {
    keys: usize,
    term_postings: usize,
    lengths: usize,
    row_terms: usize,
    term_bytes_at: usize,
    forward: usize,
    postings: usize,
    bytes: usize,
}

impl Sections {
    fn of(rows: usize, terms: usize, pairs: usize) -> Sections {
        let keys = HEADER;
        let term_postings = keys + 8 * rows;
        let lengths = term_postings + 8 * (terms + 1);
        let row_terms = lengths + 4 * rows;
        let term_bytes_at = row_terms + 4 * (rows + 1);
        let forward = term_bytes_at + 4 * (terms + 1);
        let postings = forward + 8 * pairs;
        let bytes = postings + 8 * pairs;
        Sections { keys, term_postings, lengths, row_terms, term_bytes_at, forward, postings, bytes }
    }
}

impl Postings {
    pub fn open(dir: &Path, saved: &SavedPostings) -> Result<Postings> {
        let path = dir.join(&saved.file);
        let map = mapped::map(&path)?;
        let damaged = |why: &str| Error::Index(format!("{}: {why}", path.display()));
        if map.len() < HEADER || &map[..8] != MAGIC {
            return Err(damaged("not a postings file"));
        }
        let field = |at: usize| mapped::u64_at(&map, at);
        let (rows, terms, pairs, total_len) = (field(8) as usize, field(16) as usize, field(24) as usize, field(32));
        let at = Sections::of(rows, terms, pairs);
        if at.bytes > map.len() {
            return Err(damaged("shorter than its counts"));
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&map[..at.forward]);
        crc.update(&map[at.bytes..]);
        if crc.finalize() != saved.crc {
            return Err(damaged("checksum mismatch"));
        }
        let postings = Postings { saved: saved.clone(), map, rows, terms, pairs, total_len };
        let ascending = |offsets: &[u32], end: usize| {
            offsets.first() == Some(&0)
                && offsets.windows(2).all(|w| w[0] <= w[1])
                && offsets.last() == Some(&(end as u32))
        };
        let term_offsets = postings.term_postings_offsets();
        let term_offsets_ok = term_offsets.first() == Some(&0)
            && term_offsets.windows(2).all(|w| w[0] <= w[1])
            && term_offsets.last() == Some(&(pairs as u64));
        if !term_offsets_ok
            || !ascending(postings.row_term_offsets(), pairs)
            || !ascending(postings.term_byte_offsets(), postings.map.len() - at.bytes)
        {
            return Err(damaged("its offsets are out of order"));
        }
        Ok(postings)
    }

    pub fn saved(&self) -> &SavedPostings {
        &self.saved
    }

    fn sections(&self) -> Sections {
        Sections::of(self.rows, self.terms, self.pairs)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn terms(&self) -> usize {
        self.terms
    }

    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    pub fn keys(&self) -> &[u64] {
        let at = self.sections();
        bytemuck::cast_slice(&self.map[at.keys..at.term_postings])
    }

    fn term_postings_offsets(&self) -> &[u64] {
        let at = self.sections();
        bytemuck::cast_slice(&self.map[at.term_postings..at.lengths])
    }

    fn lengths(&self) -> &[u32] {
        let at = self.sections();
        bytemuck::cast_slice(&self.map[at.lengths..at.row_terms])
    }

    fn row_term_offsets(&self) -> &[u32] {
        let at = self.sections();
        bytemuck::cast_slice(&self.map[at.row_terms..at.term_bytes_at])
    }

    fn term_byte_offsets(&self) -> &[u32] {
        let at = self.sections();
        bytemuck::cast_slice(&self.map[at.term_bytes_at..at.forward])
    }

    fn pairs(&self, start: usize, range: std::ops::Range<usize>) -> &[[u32; 2]] {
        let pairs: &[[u32; 2]] = bytemuck::cast_slice(&self.map[start..start + 8 * self.pairs]);
        pairs.get(range).unwrap_or(&[])
    }

    /// The row of `key`, if the file holds it.
    pub fn row(&self, key: u64) -> Option<usize> {
        self.keys().binary_search(&key).ok()
    }

    pub fn length(&self, row: usize) -> u32 {
        self.lengths().get(row).copied().unwrap_or(0)
    }

    /// Term `id`'s text.
    pub fn term(&self, id: usize) -> &str {
        let offsets = self.term_byte_offsets();
        let start = self.sections().bytes;
        let (Some(from), Some(to)) = (offsets.get(id), offsets.get(id + 1)) else { return "" };
        std::str::from_utf8(&self.map[start + *from as usize..start + *to as usize]).unwrap_or("")
    }

    /// The id of `term`, if the file holds it.
    pub fn term_id(&self, term: &str) -> Option<usize> {
        let (mut low, mut high) = (0, self.terms);
        while low < high {
            let middle = (low + high) / 2;
            match self.term(middle).cmp(term) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(middle),
            }
        }
        None
    }

    /// Term `id`'s postings: (row, tf), in row order.
    pub fn postings(&self, id: usize) -> &[[u32; 2]] {
        let offsets = self.term_postings_offsets();
        let (Some(from), Some(to)) = (offsets.get(id), offsets.get(id + 1)) else { return &[] };
        self.pairs(self.sections().postings, *from as usize..*to as usize)
    }

    /// Row `row`'s terms: (term id, tf).
    pub fn row_terms(&self, row: usize) -> &[[u32; 2]] {
        let offsets = self.row_term_offsets();
        let (Some(from), Some(to)) = (offsets.get(row), offsets.get(row + 1)) else { return &[] };
        self.pairs(self.sections().forward, *from as usize..*to as usize)
    }

    /// Writes `rows` (sorted by key) as `NAME.postings` in `dir`, synced and renamed into place.
    /// The rows' term ids are places in `vocabulary` (sorted, distinct); the file keeps the
    /// terms some row holds, numbered in that order. Rows name their terms by id so that a
    /// rewrite of millions of rows compares no strings per posting (building the dictionary
    /// from every row's strings was most of a rewrite at a million passages).
    pub fn write(dir: &Path, name: &str, vocabulary: &[&str], rows: &[Row], change: u64) -> Result<SavedPostings> {
        let mut held = vec![0u32; vocabulary.len()];
        for [id, _] in rows.iter().flat_map(|r| &r.terms) {
            if let Some(count) = held.get_mut(*id as usize) {
                *count += 1;
            }
        }
        let mut terms: Vec<&str> = Vec::new();
        let mut by_term: Vec<u32> = vec![0];
        let renumbered: Vec<Option<u32>> = vocabulary
            .iter()
            .zip(&held)
            .map(|(term, count)| {
                (*count > 0).then(|| {
                    terms.push(*term);
                    by_term.push(*count);
                    terms.len() as u32 - 1
                })
            })
            .collect();
        let mut forward: Vec<[u32; 2]> = Vec::with_capacity(held.iter().map(|c| *c as usize).sum());
        let mut row_offsets: Vec<u32> = Vec::with_capacity(rows.len() + 1);
        for row in rows {
            row_offsets.push(forward.len() as u32);
            forward
                .extend(row.terms.iter().filter_map(|[id, tf]| Some([renumbered.get(*id as usize).copied()??, *tf])));
        }
        row_offsets.push(forward.len() as u32);
        let pairs = forward.len();
        let mut term_offsets: Vec<u64> = Vec::with_capacity(terms.len() + 1);
        let mut running = 0u64;
        for count in &by_term {
            running += u64::from(*count);
            term_offsets.push(running);
        }
        // Rows are visited in order, so each term's postings come out in row order.
        let mut postings: Vec<[u32; 2]> = vec![[0, 0]; pairs];
        let mut next: Vec<u64> = term_offsets[..terms.len()].to_vec();
        for (row, (from, to)) in row_offsets.iter().zip(&row_offsets[1..]).enumerate() {
            for [id, tf] in &forward[*from as usize..*to as usize] {
                let slot = &mut next[*id as usize];
                postings[*slot as usize] = [row as u32, *tf];
                *slot += 1;
            }
        }
        let mut byte_offsets: Vec<u32> = Vec::with_capacity(terms.len() + 1);
        let mut bytes = 0u32;
        byte_offsets.push(0);
        for term in &terms {
            bytes += term.len() as u32;
            byte_offsets.push(bytes);
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        let total_len: u64 = rows.iter().map(|r| u64::from(r.len)).sum();
        for (at, value) in [(8, rows.len() as u64), (16, terms.len() as u64), (24, pairs as u64), (32, total_len)] {
            header[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        let keys: Vec<u64> = rows.iter().map(|r| r.key).collect();
        let lengths: Vec<u32> = rows.iter().map(|r| r.len).collect();
        let text: Vec<u8> = terms.iter().flat_map(|t| t.bytes()).collect();
        let checked: [&[u8]; 6] = [
            &header,
            bytemuck::cast_slice(&keys),
            bytemuck::cast_slice(&term_offsets),
            bytemuck::cast_slice(&lengths),
            bytemuck::cast_slice(&row_offsets),
            bytemuck::cast_slice(&byte_offsets),
        ];
        let mut crc = crc32fast::Hasher::new();
        checked.iter().for_each(|part| crc.update(part));
        crc.update(&text);
        let file_name = format!("{name}{SUFFIX}");
        let pairs: [&[u8]; 3] = [bytemuck::cast_slice(&forward), bytemuck::cast_slice(&postings), &text];
        mapped::write_aside(dir, &file_name, |out| {
            checked.iter().chain(&pairs).try_for_each(|part| out.write_all(part))
        })?;
        Ok(SavedPostings { file: file_name, crc: crc.finalize(), change })
    }
}
