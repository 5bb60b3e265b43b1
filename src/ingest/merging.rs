//! The graph merges an ingest runs beside its committer (see [`crate::kb::graph_merge`]):
//! full HNSW graphs sealed by the ingest are merged on another thread while documents go on
//! committing, so a long ingest leaves a few large graphs rather than many small ones.

use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

use super::KbAccess;
use crate::error::{Error, Result};
use crate::kb::Kb;
use crate::kb::graph_merge::{GraphMerge, MergedGraph};

/// At most one merge at a time; a failed one stops merging for the rest of the ingest (the
/// graphs stay as they were, which costs query time, not correctness).
#[derive(Default)]
pub(super) struct Merging<'scope> {
    running: Option<ScopedJoinHandle<'scope, Result<MergedGraph>>>,
    failed: bool,
}

impl<'scope> Merging<'scope> {
    /// Under the write lock: adopts the running merge once it is built, and starts the next
    /// one due on a thread of `scope`.
    pub(super) fn step<'env>(&mut self, kb: &mut Kb, scope: &'scope Scope<'scope, 'env>) {
        if self.running.as_ref().is_some_and(ScopedJoinHandle::is_finished) {
            let built = self.running.take().map(join);
            self.adopt(kb, built);
        }
        if self.running.is_none() && !self.failed {
            self.running = kb.plan_graph_merge().map(|plan| scope.spawn(move || build(plan)));
        }
    }

    /// Waits for the running merge and adopts it; then, unless `only_running` (a cancelled
    /// ingest), runs every merge still due, each planned and adopted under the write lock
    /// and built off it. Leaves the graphs as one run of the same ingest would, however the
    /// merges fell in time.
    pub(super) fn finish<K: KbAccess + ?Sized>(mut self, kb: &mut K, only_running: bool) {
        let mut built = self.running.take().map(join);
        loop {
            let plan = kb.write(|kb| {
                self.adopt(kb, built.take());
                if only_running || self.failed { None } else { kb.plan_graph_merge() }
            });
            let Some(plan) = plan else { return };
            built = Some(build(plan));
        }
    }

    fn adopt(&mut self, kb: &mut Kb, built: Option<Result<MergedGraph>>) {
        match built {
            None => {}
            Some(Ok(merged)) => {
                let (index, vectors) = (merged.index(), merged.vectors());
                if kb.adopt_graph_merge(merged) {
                    tracing::info!(index, vectors, "merged full vector graphs into one");
                } else {
                    tracing::debug!(index, "the graphs a merge was made of changed; merging them again later");
                }
            }
            Some(Err(e)) => {
                self.failed = true;
                tracing::warn!(error = %e, "could not merge full vector graphs; they stay as they are");
            }
        }
    }
}

fn build(plan: GraphMerge) -> Result<MergedGraph> {
    let (index, vectors, started) = (plan.index(), plan.vectors(), Instant::now());
    let built = plan.build();
    tracing::debug!(index, vectors, seconds = started.elapsed().as_secs_f64(), "built a merged vector graph");
    built
}

fn join(handle: ScopedJoinHandle<'_, Result<MergedGraph>>) -> Result<MergedGraph> {
    handle.join().unwrap_or_else(|_| Err(Error::Index("a graph merge panicked".into())))
}
