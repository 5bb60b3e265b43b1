//! Vectors as they are kept on disk, in the store and in saved segments: either every f32
//! component, or, where most components are zero, a bitmap of the nonzero ones and their
//! values. The hash embedder's vectors of names and facts set a few dozen of 512 components,
//! so they take a tenth of the bytes; a dense vector (MiniLM's) stays as it was. Lossless to
//! the bit, so a vector read back has the same fingerprint and the same scores.
//!
//! Layout, little-endian. Dense: the components as f32, `4 * dim` bytes. Sparse: the
//! dimension (u16), `ceil(dim / 32)` u32 words of bitmap (bit `i` set: component `i` is not
//! +0.0), then the set components' values as f32 in order. A sparse encoding is `2` modulo
//! `4` bytes long and a dense one `0`, which is how a reader tells them apart; a vector is
//! encoded sparse only where that is shorter.

use std::borrow::Cow;

use super::mapped;
use crate::embed::cosine;

/// Bytes of the sparse form's dimension field.
const DIM_FIELD: usize = 2;

fn bitmap_words(dim: usize) -> usize {
    dim.div_ceil(32)
}

/// Bytes of `v` encoded sparse, with `nonzero` components set.
fn sparse_len(dim: usize, nonzero: usize) -> usize {
    DIM_FIELD + 4 * bitmap_words(dim) + 4 * nonzero
}

fn nonzero(v: &[f32]) -> usize {
    v.iter().filter(|x| x.to_bits() != 0).count()
}

/// Whether `v` is stored sparse: where that is shorter by more than the bytes a segment pads
/// a row with, so that a padded sparse row is never as long as a dense one.
fn is_sparse(v: &[f32]) -> bool {
    u16::try_from(v.len()).is_ok() && sparse_len(v.len(), nonzero(v)) + SEGMENT_PADDING < 4 * v.len()
}

/// `v` as it is stored: sparse where that is shorter, dense otherwise.
pub fn encode(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * v.len());
    write(v, &mut out);
    out
}

fn write(v: &[f32], out: &mut Vec<u8>) {
    if !is_sparse(v) {
        out.extend(v.iter().flat_map(|x| x.to_le_bytes()));
        return;
    }
    out.extend_from_slice(&(v.len() as u16).to_le_bytes());
    for word in v.chunks(32) {
        let bits = word.iter().enumerate().fold(0u32, |bits, (i, x)| bits | (u32::from(x.to_bits() != 0) << i));
        out.extend_from_slice(&bits.to_le_bytes());
    }
    out.extend(v.iter().filter(|x| x.to_bits() != 0).flat_map(|x| x.to_le_bytes()));
}

/// The bytes a segment pads a sparse row with: its rows start at multiples of four bytes, so
/// that a dense row is read in place.
const SEGMENT_PADDING: usize = 2;

/// The length of `v` as a segment stores it.
pub fn padded_len(v: &[f32]) -> usize {
    if is_sparse(v) { sparse_len(v.len(), nonzero(v)) + SEGMENT_PADDING } else { 4 * v.len() }
}

/// Appends `v` as a segment stores it: encoded, then padded to a multiple of four bytes.
pub fn write_padded(v: &[f32], out: &mut Vec<u8>) {
    write(v, out);
    if !out.len().is_multiple_of(4) {
        out.extend_from_slice(&[0; SEGMENT_PADDING]);
    }
}

/// A row of a segment with `dim` dimensions, as [`write_padded`] wrote it: read in place where
/// it is dense (and aligned), decoded where it is sparse; `None` where it is neither.
pub fn read_padded(bytes: &[u8], dim: usize) -> Option<Cow<'_, [f32]>> {
    if bytes.len() == 4 * dim {
        return Some(match bytemuck::try_cast_slice(bytes) {
            Ok(v) => Cow::Borrowed(v),
            Err(_) => Cow::Owned(bytes.chunks_exact(4).map(f32_at).collect()),
        });
    }
    let v = decode(unpadded(bytes)?)?;
    (v.len() == dim).then_some(Cow::Owned(v))
}

/// A vector as a segment row holds it ([`write_padded`]): what the vector store keeps of a
/// vector written since its last save, and what a write holds of the vectors it creates, a
/// tenth of the f32 where most components are zero (the hash embedder's names and facts).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    bytes: Vec<u8>,
    /// Encoded sparse (and padded), not dense.
    sparse: bool,
}

impl Row {
    pub fn of(v: &[f32]) -> Row {
        let mut bytes = Vec::with_capacity(padded_len(v));
        write_padded(v, &mut bytes);
        Row::padded(bytes, v.len())
    }

    /// A copy of a segment's row of `dim` components.
    pub fn copied(bytes: &[u8], dim: usize) -> Row {
        Row::padded(bytes.to_vec(), dim)
    }

    /// A row of `dim` components as [`write_padded`] wrote it: a padded sparse row is never
    /// as long as a dense one (see [`is_sparse`]).
    fn padded(bytes: Vec<u8>, dim: usize) -> Row {
        let sparse = bytes.len() != 4 * dim;
        Row { bytes, sparse }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The vector, of `dim` components; `None` where it has another dimension.
    pub fn vector(&self, dim: usize) -> Option<Cow<'_, [f32]>> {
        read_padded(&self.bytes, dim)
    }

    /// See [`cosine_padded`].
    pub fn cosine(&self, query: &[f32]) -> Option<f32> {
        cosine_padded(query, &self.bytes)
    }

    /// Whether the vector has `dim` components.
    pub fn has_dim(&self, dim: usize) -> bool {
        match self.sparse {
            true => unpadded(&self.bytes).and_then(Sparse::parse).is_some_and(|sparse| sparse.dim == dim),
            false => self.bytes.len() == 4 * dim,
        }
    }

    /// The bytes [`encode`] gives for the vector, as the store keeps it.
    pub fn encoding(&self) -> &[u8] {
        match self.sparse {
            true => unpadded(&self.bytes).unwrap_or_default(),
            false => &self.bytes,
        }
    }
}

/// A padded sparse row's encoding, without its padding.
fn unpadded(bytes: &[u8]) -> Option<&[u8]> {
    bytes.get(..bytes.len().checked_sub(SEGMENT_PADDING)?)
}

/// [`crate::embed::cosine`] of `query` and the vector of a segment row `bytes` (as
/// [`read_padded`] reads it), to the bit, without decoding a sparse row: its set components
/// go to the lanes their index gives, in order, as the dense sum adds them (the zeros it adds
/// change no sum). `None` where the row is damaged or has another dimension.
pub fn cosine_padded(query: &[f32], bytes: &[u8]) -> Option<f32> {
    const LANES: usize = 8;
    let dim = query.len();
    if bytes.len() == 4 * dim || !dim.is_multiple_of(LANES) {
        return read_padded(bytes, dim).map(|v| cosine(query, &v));
    }
    let sparse = Sparse::parse(unpadded(bytes)?)?;
    if sparse.dim != dim {
        return None;
    }
    let mut partial = [0f32; LANES];
    for (i, x) in sparse.components() {
        partial[i % LANES] += query[i] * x;
    }
    Some(partial.iter().sum())
}

/// The vector `bytes` encode; `None` where they are no encoding [`encode`] writes.
pub fn decode(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.len().is_multiple_of(4) {
        return Some(bytes.chunks_exact(4).map(f32_at).collect());
    }
    let sparse = Sparse::parse(bytes)?;
    let mut v = vec![0f32; sparse.dim];
    for (i, x) in sparse.components() {
        v[i] = x;
    }
    Some(v)
}

/// A sparse encoding's parts, checked against each other.
struct Sparse<'a> {
    dim: usize,
    words: &'a [u8],
    values: &'a [u8],
}

impl<'a> Sparse<'a> {
    /// `None` unless the bitmap fits the dimension and sets one bit per value.
    fn parse(bytes: &'a [u8]) -> Option<Sparse<'a>> {
        let dim = usize::from(u16::from_le_bytes(bytes.get(..DIM_FIELD)?.try_into().ok()?));
        let words = bytes.get(DIM_FIELD..DIM_FIELD + 4 * bitmap_words(dim))?;
        let values = &bytes[DIM_FIELD + words.len()..];
        let set: usize = words.chunks_exact(4).map(|w| mapped::u32_at(w, 0).count_ones() as usize).sum();
        let past_dim =
            words.chunks_exact(4).last().is_some_and(|w| dim % 32 != 0 && mapped::u32_at(w, 0) >> (dim % 32) != 0);
        (values.len() == 4 * set && !past_dim).then_some(Sparse { dim, words, values })
    }

    /// The set components as (index, value), in index order.
    fn components(&self) -> impl Iterator<Item = (usize, f32)> + 'a {
        let indices = self.words.chunks_exact(4).enumerate().flat_map(|(w, bytes)| {
            let mut bits = mapped::u32_at(bytes, 0);
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let i = w * 32 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i
                })
            })
        });
        indices.zip(self.values.chunks_exact(4).map(f32_at))
    }
}

fn f32_at(bytes: &[u8]) -> f32 {
    f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mostly_zero(dim: usize, set: &[(usize, f32)]) -> Vec<f32> {
        let mut v = vec![0.0; dim];
        for (i, x) in set {
            v[*i] = *x;
        }
        v
    }

    #[test]
    fn a_row_keeps_the_store_encoding_and_reads_back_to_the_bit() {
        for v in [mostly_zero(64, &[(3, 0.5), (40, -2.25)]), (0..64).map(|i| i as f32 / 7.0).collect()] {
            let row = Row::of(&v);
            assert_eq!(row.encoding(), encode(&v).as_slice());
            assert_eq!(decode(row.encoding()).as_deref(), Some(v.as_slice()));
            assert_eq!(row.vector(64).as_deref(), Some(v.as_slice()));
            assert_eq!((row.has_dim(64), row.has_dim(32), row.vector(32)), (true, false, None));
            let query: Vec<f32> = (0..64).map(|i| (i % 5) as f32 - 2.0).collect();
            assert_eq!(row.cosine(&query).map(f32::to_bits), Some(cosine(&query, &v).to_bits()));
            assert_eq!(Row::copied(row.as_bytes(), 64), row, "a segment's row reads as the row it was");
        }
        assert!(Row::of(&mostly_zero(64, &[(1, 1.0)])).as_bytes().len() < 4 * 64 / 4, "sparse rows are small");
    }

    #[test]
    fn a_mostly_zero_vector_is_stored_short_and_read_back_to_the_bit() {
        let v = mostly_zero(512, &[(0, 0.25), (31, -1.5), (32, f32::MIN_POSITIVE), (300, -0.0), (511, 7.0)]);
        let bytes = encode(&v);
        assert_eq!(bytes.len() % 4, 2, "sparse");
        assert!(bytes.len() < 100, "{} bytes", bytes.len());
        let back = decode(&bytes).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_dense_vector_is_stored_as_its_components() {
        let v: Vec<f32> = (0..384).map(|i| (i as f32 - 100.0) / 7.0).collect();
        let bytes = encode(&v);
        assert_eq!(bytes.len(), 4 * 384);
        assert_eq!(decode(&bytes).unwrap(), v);
        // Components written by an earlier build, which stored every vector this way.
        assert_eq!(decode(&[0, 0, 128, 63, 0, 0, 0, 0]).unwrap(), vec![1.0, 0.0]);
    }

    #[test]
    fn dimensions_that_do_not_fill_a_bitmap_word_round_trip() {
        for dim in [1, 5, 33, 100] {
            let v = mostly_zero(dim, &[(dim - 1, 2.0)]);
            assert_eq!(decode(&encode(&v)).unwrap(), v, "dimension {dim}");
        }
    }

    #[test]
    fn a_segment_row_is_read_in_place_when_dense_and_decoded_when_sparse() {
        let dense: Vec<f32> = (0..64).map(|i| i as f32 + 0.5).collect();
        let sparse = mostly_zero(64, &[(9, 3.0)]);
        let mut rows = Vec::new();
        write_padded(&sparse, &mut rows);
        assert_eq!(rows.len(), padded_len(&sparse));
        assert_eq!(rows.len() % 4, 0);
        write_padded(&dense, &mut rows);
        assert_eq!(rows.len(), padded_len(&sparse) + padded_len(&dense));
        let (first, second) = rows.split_at(padded_len(&sparse));
        assert_eq!(read_padded(first, 64).unwrap().as_ref(), sparse.as_slice());
        assert_eq!(read_padded(second, 64).unwrap().as_ref(), dense.as_slice());
        assert!(read_padded(first, 32).is_none(), "another dimension");
    }

    #[test]
    fn the_cosine_of_a_stored_row_is_the_dense_cosine_to_the_bit() {
        let mut state = 11u64;
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 33
        };
        for dim in [64, 384, 512] {
            let query: Vec<f32> = (0..dim).map(|_| next() as f32 / 1e9 - 1.0).collect();
            for set in [1, 5, 40, dim / 3, dim] {
                let mut v = vec![0.0; dim];
                for _ in 0..set {
                    v[next() as usize % dim] = next() as f32 / 3e9 - 0.5;
                }
                let mut row = Vec::new();
                write_padded(&v, &mut row);
                let stored = cosine_padded(&query, &row).unwrap();
                assert_eq!(stored.to_bits(), cosine(&query, &v).to_bits(), "dimension {dim}, {set} set");
            }
        }
        let mut row = Vec::new();
        write_padded(&mostly_zero(64, &[(1, 1.0)]), &mut row);
        assert_eq!(cosine_padded(&[1.0; 32], &row), None, "another dimension");
    }

    #[test]
    fn a_sparse_vector_of_the_wrong_length_is_refused() {
        let v = mostly_zero(64, &[(3, 1.0), (40, -2.0)]);
        let mut bytes = encode(&v);
        assert_eq!(decode(&bytes[..bytes.len() - 4]), None, "a value missing");
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(decode(&bytes), None, "a value too many");
        assert_eq!(decode(&[1]), None);
        // A bitmap naming a component past the dimension.
        let mut wrong = encode(&mostly_zero(40, &[(1, 1.0)]));
        wrong[DIM_FIELD + 4..DIM_FIELD + 8].copy_from_slice(&0x80u32.to_le_bytes());
        assert_eq!(decode(&wrong), None);
    }
}
