//! The exact scan of a small vector index, over i8 codes. A query against a few thousand
//! f32 vectors reads megabytes that a busy daemon no longer has in cache (the relation labels
//! of a 1,000-passage KB: 3,345 vectors of 512 floats, 1.4 ms a scan), and every query scans
//! several such indexes. i8 codes with one scale per vector are a quarter of the bytes; the
//! best `k` by code are then rescored from the exact vectors over an oversampled list, so
//! the scores a caller sees stay exact.

use std::collections::HashMap;

/// Candidates rescored per requested hit, and on top: codes rank within a percent of the
/// exact cosine, so near-ties at the cut are all rescored.
const OVERSAMPLE: usize = 4;
const OVERSAMPLE_MIN_EXTRA: usize = 32;

/// i8 codes of every vector of an index, in one contiguous array.
#[derive(Default)]
pub struct ExactCodes {
    dim: usize,
    keys: Vec<u64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    row_of: HashMap<u64, usize>,
}

impl ExactCodes {
    pub fn new<V: AsRef<[f32]>>(dim: usize, vectors: impl Iterator<Item = (u64, V)>) -> ExactCodes {
        let mut codes = ExactCodes { dim, ..ExactCodes::default() };
        for (key, v) in vectors {
            codes.upsert(key, v.as_ref());
        }
        codes
    }

    pub fn memory_bytes(&self) -> usize {
        self.codes.len() + self.keys.len() * (std::mem::size_of::<u64>() * 2 + std::mem::size_of::<f32>())
    }

    pub fn upsert(&mut self, key: u64, v: &[f32]) {
        let (code, scale) = quantise(v);
        match self.row_of.get(&key) {
            Some(&row) => {
                self.codes[row * self.dim..(row + 1) * self.dim].copy_from_slice(&code);
                self.scales[row] = scale;
            }
            None => {
                self.row_of.insert(key, self.keys.len());
                self.keys.push(key);
                self.codes.extend_from_slice(&code);
                self.scales.push(scale);
            }
        }
    }

    pub fn remove(&mut self, key: u64) {
        let Some(row) = self.row_of.remove(&key) else { return };
        let last = self.keys.len() - 1;
        if row != last {
            let moved = self.keys[last];
            self.keys[row] = moved;
            self.scales[row] = self.scales[last];
            self.codes.copy_within(last * self.dim..(last + 1) * self.dim, row * self.dim);
            self.row_of.insert(moved, row);
        }
        self.keys.pop();
        self.scales.pop();
        self.codes.truncate(last * self.dim);
    }

    /// The keys worth rescoring for the best `k` by cosine to `query`: the best by code,
    /// oversampled.
    pub fn candidates(&self, query: &[f32], k: usize) -> Vec<u64> {
        let (q, q_scale) = quantise(query);
        let hits: Vec<(u64, f32)> = self
            .codes
            .chunks_exact(self.dim.max(1))
            .zip(&self.keys)
            .zip(&self.scales)
            .map(|((code, key), scale)| (*key, dot_i8(&q, code) as f32 * scale * q_scale))
            .collect();
        let wanted = k.saturating_mul(OVERSAMPLE).max(k + OVERSAMPLE_MIN_EXTRA);
        crate::rank::top_k(hits, wanted).into_iter().map(|(key, _)| key).collect()
    }
}

/// `v` as i8 codes and the scale that maps a code back (`v[i] ≈ code[i] * scale`).
fn quantise(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    (v.iter().map(|x| (x / scale).round() as i8).collect(), scale)
}

fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Sixteen partial sums, so the compiler keeps them in SIMD lanes.
    const LANES: usize = 16;
    let mut partial = [0i32; LANES];
    for (x, y) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for lane in 0..LANES {
            partial[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    let done = a.len() - a.len() % LANES;
    let tail: i32 = a[done..].iter().zip(&b[done..]).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    partial.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim as u64).map(|i| ((seed * 7919 + i * 104_729) % 1000) as f32 - 500.0).collect();
        crate::embed::l2_normalize(&mut v);
        v
    }

    #[test]
    fn the_best_by_exact_cosine_are_among_the_candidates_after_updates_and_removals() {
        let dim = 37;
        let vectors: Vec<(u64, Vec<f32>)> = (0..300).map(|k| (k, unit(k, dim))).collect();
        let mut codes = ExactCodes::new(dim, vectors.iter().map(|(k, v)| (*k, v.as_slice())));
        let mut live: HashMap<u64, Vec<f32>> = vectors.into_iter().collect();
        for key in (0..300).step_by(3) {
            codes.remove(key);
            live.remove(&key);
        }
        for key in (1..300).step_by(7) {
            let v = unit(key + 1000, dim);
            codes.upsert(key, &v);
            live.insert(key, v);
        }
        codes.remove(12_345);
        for probe in 0..20 {
            let query = unit(probe + 5000, dim);
            let mut exact: Vec<(u64, f32)> = live.iter().map(|(k, v)| (*k, crate::embed::cosine(&query, v))).collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let candidates = codes.candidates(&query, 5);
            assert!(candidates.iter().all(|k| live.contains_key(k)), "removed keys are gone");
            for (key, _) in exact.iter().take(5) {
                assert!(candidates.contains(key), "probe {probe}: {key} missing");
            }
        }
    }
}
