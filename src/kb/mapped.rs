//! Files beside the store that an open maps rather than reads (vector segments, BM25
//! postings, sealed HNSW graphs): mapping one, handing its pages back, writing one aside,
//! and reading the little-endian integers of their headers.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Maps the file at `path` read-only.
pub fn map(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the saved files are written once, synced, and named by a manifest; nothing
    // modifies one afterwards (a later save writes new names), and a removed file stays
    // mapped until it is unmapped.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))
}

/// Maps the file at `path` read-only for reads scattered over all of it (vector rows, graph
/// nodes): see [`scatter`].
pub fn map_scattered(path: &Path) -> Result<memmap2::Mmap> {
    let map = map(path)?;
    scatter(&map);
    Ok(map)
}

/// Tells the kernel not to read ahead around each page of `map` touched, which would
/// otherwise bring in (and count as this process's memory) tens of neighbouring rows for
/// every row a search rescores. A pass over all of the file should come first: under this
/// advice every page it touches is a fault of its own, and on a cold cache a read of one
/// page from disk.
pub fn scatter(map: &memmap2::Mmap) {
    if let Err(e) = map.advise(memmap2::Advice::Random) {
        tracing::debug!(error = %e, "could not advise a mapped file's access pattern");
    }
}

/// Maps the file at `path` read-only with all of it read in at once, for passes over the
/// whole file (a checksum, usearch walking a graph's nodes): the kernel reads it in large
/// sequential blocks, where faulting it in page by page would cost a fault per page.
pub fn map_read_in(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: as in `map`.
    unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(|e| Error::io(path, e))
}

/// Reads all of `map` but `skipped` in ahead of a pass over it, as [`map_read_in`] reads a
/// whole file: a graph's links are walked at open, its codes only as searches visit them.
pub fn read_in_except(map: &memmap2::Mmap, skipped: std::ops::Range<usize>) {
    let (start, end) = (skipped.start.min(map.len()), skipped.end.clamp(skipped.start, map.len()));
    for (offset, len) in [(0, start), (end, map.len() - end)] {
        if len == 0 {
            continue;
        }
        // Populating maps the pages as they are read; where the kernel predates it (5.14),
        // reading ahead still spares a read per page, and the pass maps them.
        #[cfg(target_os = "linux")]
        let advised = map
            .advise_range(memmap2::Advice::PopulateRead, offset, len)
            .or_else(|_| map.advise_range(memmap2::Advice::WillNeed, offset, len));
        #[cfg(not(target_os = "linux"))]
        let advised = map.advise_range(memmap2::Advice::WillNeed, offset, len);
        if let Err(e) = advised {
            tracing::debug!(error = %e, "could not read a mapped file in ahead");
        }
    }
}

/// Hands a mapped file's pages back to the kernel: reading a whole file (a checksum, usearch
/// walking a viewed graph's nodes) would otherwise leave all of it counted as this process's
/// memory. Later reads fault the pages they need in again from the page cache.
pub fn release(map: &memmap2::Mmap) {
    release_range(map, 0, map.len());
}

/// [`release`] for `len` bytes from `offset` (a multiple of the page size).
pub fn release_range(map: &memmap2::Mmap, offset: usize, len: usize) {
    // SAFETY: the mapping is read-only and backed by a file that is never modified, so
    // dropping its pages loses nothing: the next access reads the same bytes again.
    if let Err(e) = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) } {
        tracing::debug!(error = %e, "could not release a mapped file's pages");
    }
}

/// Writes the file `name` in `dir` through `write`, under a temporary name (`NAME.tmp`, which
/// a save's clean-up removes if a crash leaves it), synced, then renamed into place: a file
/// that has its name is whole.
pub fn write_aside(dir: &Path, name: &str, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let staging = dir.join(format!("{name}.tmp"));
    let io = |e| Error::io(&staging, e);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&staging).map_err(io)?);
    write(&mut out).map_err(io)?;
    out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
    let path = dir.join(name);
    std::fs::rename(&staging, &path).map_err(|e| Error::io(&path, e))
}

/// The little-endian u32 at `at` (the caller has checked the length).
pub fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The little-endian u64 at `at` (the caller has checked the length).
pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Reads a saved file's little-endian fields off the front of its bytes, in order.
pub struct Reader<'a> {
    pub rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next `N` bytes, zeros past the end: for a reader that checked the length first.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let (piece, rest) = self.rest.split_first_chunk::<N>().map_or(([0; N], &[][..]), |(p, r)| (*p, r));
        self.rest = rest;
        piece
    }

    /// The next `n` bytes, if there are that many.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (piece, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(piece)
    }

    /// The next little-endian u32, if there is one.
    pub fn u32(&mut self) -> Option<u32> {
        let (piece, rest) = self.rest.split_first_chunk::<4>()?;
        self.rest = rest;
        Some(u32::from_le_bytes(*piece))
    }

    /// The next little-endian u64, if there is one.
    pub fn u64(&mut self) -> Option<u64> {
        let (piece, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        Some(u64::from_le_bytes(*piece))
    }

    /// The next text as [`put_str`] wrote it, if it is there whole and UTF-8.
    pub fn str(&mut self) -> Option<&'a str> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.bytes(len)?).ok()
    }

    /// The next list written as its count (little-endian u64) and its items, each read by
    /// `item`, if all are there.
    pub fn long_list<T>(&mut self, item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let count = self.u64()?;
        self.list(count, item)
    }

    /// [`Reader::long_list`] for a list whose count is a u32.
    pub fn short_list<T>(&mut self, item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let count = self.u32()?;
        self.list(count.into(), item)
    }

    /// `count` items, sized once: growing a list of a million records doubles it (and has
    /// fresh pages zeroed) twenty times. Every item takes at least a byte, so a damaged
    /// count cannot ask for more room than the bytes left.
    fn list<T>(&mut self, count: u64, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let count = usize::try_from(count).ok()?;
        if count > self.rest.len() {
            return None;
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Some(items)
    }

    /// The next list of u32s as [`put_u32s`] wrote it, if it is there whole.
    pub fn u32s(&mut self) -> Option<Vec<u32>> {
        let count = self.u32()? as usize;
        let bytes = self.bytes(count.checked_mul(4)?)?;
        Some(bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
}

/// Appends `values` as their count (little-endian u32) and each value.
pub fn put_u32s(out: &mut Vec<u8>, values: &[u32]) {
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
}

/// Appends `text` as its length (little-endian u32) and its bytes.
pub fn put_str(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}
