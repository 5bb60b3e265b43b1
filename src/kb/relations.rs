//! The distinct relation labels of the graph with their use counts, and a vector index over
//! their embeddings, so that aligning a query's relation phrase is a nearest-neighbour
//! search rather than a scan of every label (MuSiQue's OpenIE graph has 5,000 of them).

use std::path::Path;
use std::sync::Arc;

use super::Table;
use super::saved::SavedGraph;
use super::vector::VectorIndex;
use crate::config::IndexSettings;
use crate::embed::Embedding;
use crate::error::Result;

struct Label {
    id: u64,
    count: usize,
}

pub struct RelationLabels {
    /// Each label's text once: edges share it (see [`RelationLabels::shared`]).
    labels: Table<Arc<str>, Label>,
    names: Table<u64, Arc<str>>,
    /// Keyed by [`label_key`]: the same label has the same key in every process, so a saved
    /// graph of the labels can be adopted by the next open (see [`RelationLabels::restore`]).
    vectors: VectorIndex,
    /// Whether a label came or went since [`RelationLabels::take_changed`] last asked.
    changed: bool,
}

impl RelationLabels {
    pub fn new(dim: usize, settings: &IndexSettings) -> Result<Self> {
        Ok(RelationLabels {
            labels: Table::default(),
            names: Table::default(),
            vectors: VectorIndex::new(dim, settings)?,
            changed: false,
        })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn contains(&self, label: &str) -> bool {
        self.labels.contains_key(label)
    }

    /// The text of `label` that the KB's edges share, where the label is known.
    pub fn shared(&self, label: &str) -> Option<Arc<str>> {
        self.labels.get_key_value(label).map(|(text, _)| Arc::clone(text))
    }

    /// One more edge uses `label`; `embed` is only called for a label not seen before.
    pub fn add_use(&mut self, label: &str, embed: impl FnOnce() -> Result<Embedding>) -> Result<()> {
        self.add_uses(label, 1, embed)
    }

    /// [`RelationLabels::add_use`] for `uses` edges at once.
    pub fn add_uses(&mut self, label: &str, uses: usize, embed: impl FnOnce() -> Result<Embedding>) -> Result<()> {
        if let Some(known) = self.labels.get_mut(label) {
            known.count += uses;
            return Ok(());
        }
        let vector = embed()?;
        let mut id = label_key(label);
        // Two labels with one key (1 in 10^10 for 20,000 labels): the later takes the next
        // free key, which only costs a saved graph its member.
        while self.names.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.vectors.upsert(id, vector)?;
        let text: Arc<str> = Arc::from(label);
        self.labels.insert(Arc::clone(&text), Label { id, count: uses });
        self.names.insert(id, text);
        self.changed = true;
        Ok(())
    }

    /// One edge fewer uses `label`; the label goes when none does.
    pub fn remove_use(&mut self, label: &str) -> Result<()> {
        let Some(known) = self.labels.get_mut(label) else {
            return Ok(());
        };
        known.count -= 1;
        if known.count == 0 {
            let id = known.id;
            self.labels.remove(label);
            self.names.remove(&id);
            self.vectors.remove(id)?;
            self.changed = true;
        }
        Ok(())
    }

    /// Up to `k` labels with cosine >= `threshold` to `query`, best first (ties by label).
    pub fn nearest(&self, query: &[f32], k: usize, threshold: f32) -> Result<Vec<(&str, f32)>> {
        let mut found: Vec<(&str, f32)> = self
            .vectors
            .search(query, k)?
            .into_iter()
            .filter(|(_, score)| *score >= threshold)
            .filter_map(|(id, score)| self.names.get(&id).map(|name| (&**name, score)))
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        Ok(found)
    }

    /// Every label with its vector.
    pub fn vectors(&self) -> impl Iterator<Item = (&str, Vec<f32>)> + '_ {
        self.names.iter().filter_map(|(id, name)| Some((&**name, self.vectors.get(*id)?)))
    }

    /// Whether a label came or went since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub fn staged(&self) -> usize {
        self.vectors.staged()
    }

    /// Label vectors the next link pass will link (none while few enough to scan).
    pub fn staged_for_linking(&self) -> usize {
        self.vectors.staged_for_linking()
    }

    pub fn link_staged(&mut self) -> Result<()> {
        self.vectors.link_staged()
    }

    /// See [`VectorIndex::start_linking`].
    pub fn start_linking(&mut self) -> Result<()> {
        self.vectors.start_linking()
    }

    /// Saves the graphs of the label vectors that changed since the last save, as
    /// [`VectorIndex::save`] does for the KB's indexes.
    pub(super) fn save_graphs(&mut self, dir: &Path, generation: u64) -> Result<Vec<SavedGraph>> {
        self.vectors.save(dir, GRAPHS, generation)
    }

    /// Adopts the saved graphs of the label vectors once every label is known, instead of
    /// linking them again (seconds for the tens of thousands of labels of an OpenIE graph);
    /// see [`VectorIndex::restore`].
    pub(super) fn restore(&mut self, dir: &Path, files: &[SavedGraph]) -> Result<usize> {
        self.vectors.restore(dir, files)
    }
}

/// The name the label vectors' graphs are saved under.
pub(super) const GRAPHS: &str = "relations";

/// A label's key in the vector index: FNV-1a of its bytes, the same in every process and
/// build.
fn label_key(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::embed::{Embedder, HashEmbedder};

    #[test]
    fn counts_uses_and_finds_close_labels() {
        let e = HashEmbedder::new(128);
        let mut labels = RelationLabels::new(128, &Settings::defaults().index).unwrap();
        let mut embeds = 0;
        for label in ["born in", "born in", "married to", "located in"] {
            labels
                .add_use(label, || {
                    embeds += 1;
                    e.embed_one(label)
                })
                .unwrap();
        }
        assert_eq!((labels.len(), embeds), (3, 3), "a known label is not embedded again");
        let q = e.embed_one("born").unwrap();
        let hits = labels.nearest(&q, 2, 0.3).unwrap();
        assert_eq!(hits[0].0, "born in");
        labels.link_staged().unwrap();
        assert_eq!(labels.nearest(&q, 2, 0.3).unwrap()[0].0, "born in", "same answer once linked");
        labels.remove_use("born in").unwrap();
        assert!(labels.contains("born in"), "one edge still uses it");
        labels.remove_use("born in").unwrap();
        assert!(!labels.contains("born in"));
        assert!(labels.nearest(&q, 3, 0.3).unwrap().iter().all(|(l, _)| *l != "born in"));
    }
}
