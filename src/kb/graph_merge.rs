//! A KB's side of merging full HNSW graphs (see [`super::vector::merge`]): which of its
//! vector indexes is due a merge, and adopting one that was built.

use super::vector::merge;
use super::{INDEX_NAMES, Kb};
use crate::error::Result;

/// A merge of one vector index's full graphs, planned under the KB's lock and built off it.
pub struct GraphMerge {
    index: &'static str,
    plan: merge::GraphMerge,
}

/// A built [`GraphMerge`], for [`Kb::adopt_graph_merge`].
pub struct MergedGraph {
    index: &'static str,
    graph: merge::MergedGraph,
}

impl GraphMerge {
    /// The index merged, by its name in the saved-graph manifest.
    pub fn index(&self) -> &'static str {
        self.index
    }

    /// Vectors the merged graph will hold.
    pub fn vectors(&self) -> usize {
        self.plan.vectors()
    }

    /// Builds the merged graph; needs nothing of the KB (see [`merge`]).
    pub fn build(self) -> Result<MergedGraph> {
        Ok(MergedGraph { index: self.index, graph: self.plan.build()? })
    }
}

impl MergedGraph {
    pub fn index(&self) -> &'static str {
        self.index
    }

    /// Vectors the merged graph holds.
    pub fn vectors(&self) -> usize {
        self.graph.vectors()
    }
}

impl Kb {
    /// The next merge of full graphs one of the vector indexes is due, if any.
    pub fn plan_graph_merge(&self) -> Option<GraphMerge> {
        INDEX_NAMES
            .into_iter()
            .zip(self.vector_indexes())
            .find_map(|(index, vectors)| vectors.plan_merge().map(|plan| GraphMerge { index, plan }))
    }

    /// Runs every merge due, here and now: for an open that linked its vectors afresh, which
    /// holds the KB alone anyway. A merge that fails leaves its graphs as they were.
    pub fn merge_due_graphs(&mut self) {
        while let Some(plan) = self.plan_graph_merge() {
            match plan.build() {
                Ok(merged) => {
                    self.adopt_graph_merge(merged);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not merge full vector graphs; they stay as they are");
                    return;
                }
            }
        }
    }

    /// Puts a built merge in place; false where its index changed under it (see
    /// [`super::vector::VectorIndex::adopt_merge`]). The next save writes it.
    pub fn adopt_graph_merge(&mut self, merged: MergedGraph) -> bool {
        let MergedGraph { index, graph } = merged;
        self.saved_indexes().find(|(name, _)| *name == index).is_some_and(|(_, vectors)| vectors.adopt_merge(graph))
    }
}
