//! Merging full graphs into one, without holding the KB while it is built.
//!
//! A search asks every graph of an index, so an index of many small graphs answers slowly:
//! at a million passages, 31 chunk graphs and about 90 fact graphs were most of a query's
//! time. A graph cannot grow without bound either (see the parent module: linking cost per
//! vector grows with the graph joined), so merging is what bounds the count.
//!
//! Three steps, so that neither queries nor the writer wait for the build:
//! - [`VectorIndex::plan_merge`], under the KB's lock, picks the first run of
//!   `index.merge_graphs` sealed graphs that no merge made, and takes shared handles on them
//!   and their members. Which run is picked depends only on the sequence of graphs, which
//!   linking makes the same on every run.
//! - [`GraphMerge::build`], off the lock, adds each member's code, read from its graph, to a
//!   new graph in key order on one thread: the same graph on every run, from exactly the
//!   codes the parts held (no vector is read again or quantised twice).
//! - [`VectorIndex::adopt_merge`], under the lock, puts the new graph where the run was, if
//!   the run is still there. A key unlinked meanwhile is in the new graph but no longer homed
//!   in it, which filters it out as a sealed graph's stale keys are.
//!
//! Nothing is written: the next save writes the merged graph and a manifest without the
//! parts, atomically, so a kill at any moment opens to the graphs of the last save.

use std::sync::Arc;

use usearch::{Index, IndexOptions, ScalarKind};

use super::{Graph, Links, VectorIndex, cores, index_error};
use crate::error::{Error, Result};

/// A merge planned by [`VectorIndex::plan_merge`], to be built off the KB's lock.
pub struct GraphMerge {
    /// Where the run starts among the index's graphs.
    first: usize,
    parts: Vec<Arc<Links>>,
    /// Each live member with the part holding it, in key order.
    members: Vec<(u64, usize)>,
    options: IndexOptions,
    /// Search contexts to reserve in the new graph (one per thread that may search it).
    threads: usize,
}

/// A built merge, for [`VectorIndex::adopt_merge`].
pub struct MergedGraph {
    first: usize,
    parts: Vec<Arc<Links>>,
    index: Index,
    members: usize,
}

impl MergedGraph {
    pub fn vectors(&self) -> usize {
        self.members
    }
}

impl GraphMerge {
    /// Vectors the merged graph will hold.
    pub fn vectors(&self) -> usize {
        self.members.len()
    }

    /// Builds the merged graph. Needs nothing of the KB: the parts are sealed, so they hold
    /// what they held when the merge was planned.
    pub fn build(self) -> Result<MergedGraph> {
        let index = Index::new(&self.options).map_err(index_error)?;
        index.reserve_capacity_and_threads(self.members.len().max(1), self.threads).map_err(index_error)?;
        // The codes move in the graphs' own scalar type: i8 codes copied as they are, f16 and
        // f32 through f32, which holds either exactly.
        match self.options.quantization {
            ScalarKind::I8 => self.copy_codes::<i8>(&index)?,
            _ => self.copy_codes::<f32>(&index)?,
        }
        Ok(MergedGraph { first: self.first, parts: self.parts, index, members: self.members.len() })
    }

    fn copy_codes<T: usearch::VectorType + Default + Clone>(&self, into: &Index) -> Result<()> {
        let mut code = vec![T::default(); self.options.dimensions];
        for &(key, part) in &self.members {
            let found = self.parts[part].index.get(key, &mut code).map_err(index_error)?;
            if found == 0 {
                return Err(Error::Internal(format!("graph member {key} has no code to merge")));
            }
            into.add(key, &code).map_err(index_error)?;
        }
        Ok(())
    }
}

impl VectorIndex {
    /// The next merge this index is due, if any: the first `index.merge_graphs` sealed graphs
    /// side by side that no merge made. Cheap (one pass over the homes of the linked keys).
    pub fn plan_merge(&self) -> Option<GraphMerge> {
        let width = self.merge_graphs;
        if width < 2 {
            return None;
        }
        // The last graph is linked into; all before it are sealed.
        let sealed = self.graphs.len().saturating_sub(1);
        let first = (0..sealed.saturating_sub(width - 1))
            .find(|&start| self.graphs[start..start + width].iter().all(|graph| !graph.merged))?;
        let run = first..first + width;
        let mut members: Vec<(u64, usize)> =
            self.home.iter().filter(|(_, at)| run.contains(at)).map(|(key, at)| (*key, at - first)).collect();
        members.sort_unstable();
        Some(GraphMerge {
            first,
            parts: self.graphs[run].iter().map(|graph| graph.links.clone()).collect(),
            members,
            options: self.options.clone(),
            threads: self.build_threads.max(cores()),
        })
    }

    /// Puts a built merge in the place of the graphs it was made of. Returns false, adopting
    /// nothing, where those graphs are no longer where the plan found them (the index was
    /// restored or rebuilt meanwhile).
    pub fn adopt_merge(&mut self, merged: MergedGraph) -> bool {
        let width = merged.parts.len();
        let run = merged.first..merged.first + width;
        let in_place = run.end < self.graphs.len()
            && self.graphs[run.clone()].iter().zip(&merged.parts).all(|(graph, part)| Arc::ptr_eq(&graph.links, part));
        if !in_place {
            return false;
        }
        let graph = Graph { links: Arc::new(Links { index: merged.index, view: None }), saved: None, merged: true };
        self.graphs.splice(run.clone(), [graph]);
        for at in self.home.values_mut() {
            if run.contains(at) {
                *at = run.start;
            } else if *at >= run.end {
                *at -= width - 1;
            }
        }
        self.unsaved += merged.members;
        true
    }

    /// Graphs a merge made, and graphs holding anything in all.
    pub fn graph_counts(&self) -> (usize, usize) {
        let held = || self.graphs.iter().filter(|graph| graph.index().size() > 0);
        (held().filter(|graph| graph.merged).count(), held().count())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::tests::{index, staged_index, vectors};
    use super::*;

    /// The sizes of `idx`'s graphs, with whether a merge made each.
    fn shape(idx: &VectorIndex) -> Vec<(usize, bool)> {
        idx.graphs.iter().map(|graph| (graph.index().size(), graph.merged)).collect()
    }

    fn merged_index(data: &[Vec<f32>], graph_max: usize, merge_graphs: usize) -> VectorIndex {
        let mut idx = staged_index(data, graph_max);
        idx.merge_graphs = merge_graphs;
        idx.link_staged().unwrap();
        while let Some(plan) = idx.plan_merge() {
            let built = plan.build().unwrap();
            assert!(idx.adopt_merge(built));
        }
        idx
    }

    #[test]
    fn full_graphs_side_by_side_merge_into_one_that_answers_alike() {
        let data = vectors(3000, 16);
        let idx = merged_index(&data, 200, 4);
        // 15 graphs: three runs of four merge, the last three wait for a fourth beside them.
        assert_eq!(shape(&idx), vec![(800, true), (800, true), (800, true), (200, false), (200, false), (200, false)],);
        let exact = staged_index(&data, 200);
        for v in data.iter().step_by(97) {
            assert_eq!(idx.search(v, 10).unwrap(), exact.search(v, 10).unwrap(), "narrow searches stay exact");
        }
        for (key, v) in data.iter().enumerate().step_by(7) {
            assert_eq!(idx.search(v, 1).unwrap()[0].0, key as u64, "vector {key} is found in its merged graph");
        }
        assert_eq!(idx.graph_counts(), (3, 6));
        assert!(idx.plan_merge().is_none(), "merged graphs are not merged again");
    }

    #[test]
    fn a_merge_is_the_same_graph_on_every_run() {
        let data = vectors(1200, 16);
        let (a, b) = (merged_index(&data, 100, 4), merged_index(&data, 100, 4));
        for v in data.iter().step_by(11) {
            assert_eq!(a.search(v, 20).unwrap(), b.search(v, 20).unwrap());
        }
    }

    #[test]
    fn what_changes_while_a_merge_builds_is_kept_and_a_stale_plan_is_refused() {
        let data = vectors(1000, 16);
        let mut idx = staged_index(&data[..900], 100);
        idx.merge_graphs = 4;
        idx.link_staged().unwrap();
        let plan = idx.plan_merge().unwrap();
        assert_eq!(plan.vectors(), 400);
        // While it builds: key 5 gets another vector, key 17 goes, and new vectors link.
        idx.upsert(5, &data[950]).unwrap();
        idx.remove(17).unwrap();
        for (key, v) in data.iter().enumerate().skip(900) {
            idx.upsert(key as u64, v).unwrap();
        }
        idx.link_staged().unwrap();
        assert!(idx.adopt_merge(plan.build().unwrap()));
        assert_eq!(idx.graphs.len(), 8, "four graphs of eleven became one; the rest moved up");
        let near_950 = idx.search(&data[950], 2).unwrap();
        assert_eq!(near_950.iter().map(|h| h.0).collect::<BTreeSet<_>>(), BTreeSet::from([5, 950]));
        assert!(idx.search(&data[5], 5).unwrap().iter().all(|h| h.0 != 5), "the old vector of 5 finds nothing");
        assert!(idx.search(&data[17], 5).unwrap().iter().all(|h| h.0 != 17), "17 is gone");
        for (key, v) in data.iter().enumerate().filter(|(key, _)| ![5, 17].contains(key)).step_by(9) {
            assert_eq!(idx.search(v, 1).unwrap()[0].0, key as u64, "vector {key} is found after the merge");
        }
        // A plan over graphs the index no longer has is refused.
        let mut other = staged_index(&data[..900], 100);
        other.merge_graphs = 4;
        other.link_staged().unwrap();
        let stale = other.plan_merge().unwrap().build().unwrap();
        assert!(!idx.adopt_merge(stale));
        assert_eq!(idx.graphs.len(), 8);
    }

    #[test]
    fn a_merged_graph_is_saved_viewed_and_still_not_merged_again() {
        let data = vectors(1000, 16);
        let dir = tempfile::tempdir().unwrap();
        let mut built = merged_index(&data, 100, 4);
        let files = built.save(dir.path(), "facts", 1).unwrap();
        assert_eq!(files.iter().map(|f| f.merged).collect::<Vec<_>>(), vec![true, true, false, false]);
        let mut opened = staged_index(&data, 100);
        opened.merge_graphs = 4;
        assert_eq!(opened.restore(dir.path(), &files).unwrap(), 1000);
        assert_eq!(shape(&opened), shape(&built));
        assert!(opened.graphs[0].links.view.is_some(), "a sealed merged graph is read in place");
        assert!(opened.plan_merge().is_none());
        for v in data.iter().step_by(31) {
            assert_eq!(opened.search(v, 5).unwrap(), built.search(v, 5).unwrap());
        }
    }

    #[test]
    fn an_index_merges_nothing_unless_asked_to() {
        let data = vectors(1000, 16);
        let mut idx = index(16);
        idx.graph_max = 100;
        for (key, v) in data.iter().enumerate() {
            idx.upsert(key as u64, v).unwrap();
        }
        idx.link_staged().unwrap();
        for width in [0, 1] {
            idx.merge_graphs = width;
            assert!(idx.plan_merge().is_none());
        }
        idx.merge_graphs = 20;
        assert!(idx.plan_merge().is_none(), "fewer sealed graphs than a merge takes");
    }
}
