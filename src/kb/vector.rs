//! Approximate nearest-neighbour index over L2-normalised vectors (usearch HNSW, inner product).

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::config::IndexSettings;
use crate::error::{Error, Result};

pub struct VectorIndex {
    index: Index,
    dim: usize,
}

impl VectorIndex {
    pub fn new(dim: usize, settings: &IndexSettings) -> Result<Self> {
        let options = IndexOptions {
            dimensions: dim,
            metric: MetricKind::IP,
            quantization: ScalarKind::F32,
            connectivity: settings.connectivity,
            expansion_add: settings.expansion_add,
            expansion_search: settings.expansion_search,
            multi: false,
        };
        let index = Index::new(&options).map_err(|e| Error::Index(e.to_string()))?;
        index.reserve(1024).map_err(|e| Error::Index(e.to_string()))?;
        Ok(VectorIndex { index, dim })
    }

    pub fn len(&self) -> usize {
        self.index.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.index.memory_usage()
    }

    /// Inserts or replaces the vector stored under `key`.
    pub fn upsert(&self, key: u64, v: &[f32]) -> Result<()> {
        if v.len() != self.dim {
            return Err(Error::Index(format!(
                "vector of dimension {} for an index of dimension {}",
                v.len(),
                self.dim
            )));
        }
        if self.index.contains(key) {
            self.remove(key)?;
        }
        if self.index.size() + 1 >= self.index.capacity() {
            let grown = (self.index.capacity() * 2).max(1024);
            self.index.reserve(grown).map_err(|e| Error::Index(e.to_string()))?;
        }
        self.index.add(key, v).map_err(|e| Error::Index(e.to_string()))
    }

    pub fn remove(&self, key: u64) -> Result<()> {
        self.index
            .remove(key)
            .map(|_| ())
            .map_err(|e| Error::Index(e.to_string()))
    }

    /// Up to `k` nearest keys with their cosine similarity, best first.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        if self.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let found = self
            .index
            .search(query, k.min(self.len()))
            .map_err(|e| Error::Index(e.to_string()))?;
        Ok(found
            .keys
            .into_iter()
            .zip(found.distances)
            .map(|(key, d)| (key, 1.0 - d))
            .collect())
    }

    /// The stored vector of `key`, if any.
    pub fn get(&self, key: u64) -> Option<Vec<f32>> {
        let mut buf = vec![0f32; self.dim];
        match self.index.get(key, &mut buf) {
            Ok(n) if n > 0 => Some(buf),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn upsert_search_remove() {
        let idx = VectorIndex::new(3, &Settings::defaults().index).unwrap();
        idx.upsert(1, &[1.0, 0.0, 0.0]).unwrap();
        idx.upsert(2, &[0.0, 1.0, 0.0]).unwrap();
        idx.upsert(2, &[0.0, 0.0, 1.0]).unwrap();
        assert_eq!(idx.len(), 2);
        let hits = idx.search(&[0.1, 0.0, 0.99], 2).unwrap();
        assert_eq!(hits[0].0, 2);
        assert!(hits[0].1 > 0.9);
        idx.remove(2).unwrap();
        assert_eq!(idx.search(&[0.0, 0.0, 1.0], 5).unwrap().len(), 1);
        assert!(idx.upsert(3, &[1.0]).is_err());
    }
}
