//! A watched folder: `a2rag watch DIR` and `a2rag serve --watch DIR` keep a knowledge base
//! equal to a directory. An adapter over [`Engine::sync_dir`], like the other front doors:
//! it first catches up with everything (what changed while nothing watched, a crash
//! included), then turns file events (inotify through `notify`, coalesced per path over
//! [`SETTLE`]) into syncs of just the paths that changed. New and changed files are ingested,
//! deleted ones and the old names of renamed ones are deleted, each document one atomic
//! update. When the event stream itself fails (an overflowing inotify queue), the next sync
//! is a full one: nothing is missed, only re-checked.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{DebounceEventResult, new_debouncer};

use crate::access::Caller;
use crate::engine::{Engine, Synced};
use crate::error::{Error, Result};
use crate::kb::catalog::KbName;

/// How long a path must be quiet before its change is applied: an editor's save (write,
/// rename, chmod) or a `cp` of a large file is one change, not several half-written ones.
pub const SETTLE: Duration = Duration::from_millis(400);

/// What a watch reports after each sync, for the caller to print or log.
pub type Report = Box<dyn Fn(&Synced) + Send + Sync>;

/// Keeps KB `kb` equal to directory `root` until `stop` resolves.
pub async fn run(
    engine: Arc<Engine>,
    caller: Caller,
    kb: KbName,
    root: PathBuf,
    report: Report,
    stop: impl Future<Output = ()> + Send,
) -> Result<()> {
    let root =
        std::fs::canonicalize(&root).map_err(|e| Error::Invalid(format!("cannot watch {}: {e}", root.display())))?;
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel::<Option<Vec<PathBuf>>>();
    // Started before the catch-up, so that nothing changing during it is missed.
    let mut debouncer = new_debouncer(SETTLE, move |result: DebounceEventResult| {
        let paths = match result {
            Ok(events) => Some(events.into_iter().map(|e| e.path).collect()),
            Err(e) => {
                tracing::warn!(error = %e, "file events were lost; the next sync re-reads everything");
                None
            }
        };
        let _ = events.send(paths);
    })
    .map_err(|e| Error::Internal(format!("cannot watch files: {e}")))?;
    debouncer
        .watcher()
        .watch(&root, RecursiveMode::Recursive)
        .map_err(|e| Error::Invalid(format!("cannot watch {}: {e}", root.display())))?;
    tracing::info!(dir = %root.display(), kb = %kb, "watching");
    sync(&engine, &caller, &kb, &root, Vec::new(), &report).await;
    tokio::pin!(stop);
    loop {
        let first = tokio::select! {
            _ = &mut stop => break,
            first = received.recv() => first,
        };
        let Some(first) = first else { break };
        // Everything already queued goes into this sync; `None` anywhere means a full one.
        let mut batch = vec![first];
        while let Ok(more) = received.try_recv() {
            batch.push(more);
        }
        let changed: Option<BTreeSet<PathBuf>> = batch.into_iter().try_fold(BTreeSet::new(), |mut all, paths| {
            all.extend(paths?);
            Some(all)
        });
        // An empty list asks `sync_dir` for a full sync: only lost events may do that, not a
        // batch whose every path was the root itself or outside it.
        let changed = match changed.map(|paths| relevant(&root, paths)) {
            Some(paths) if paths.is_empty() => continue,
            Some(paths) => paths,
            None => Vec::new(),
        };
        sync(&engine, &caller, &kb, &root, changed, &report).await;
    }
    drop(debouncer);
    Ok(())
}

/// The changed paths worth a sync: inside the root, the root itself left out (an event on
/// it says nothing about which file changed).
fn relevant(root: &Path, paths: BTreeSet<PathBuf>) -> Vec<PathBuf> {
    paths.into_iter().filter(|p| p != root && p.starts_with(root)).collect()
}

async fn sync(engine: &Arc<Engine>, caller: &Caller, kb: &KbName, root: &Path, changed: Vec<PathBuf>, report: &Report) {
    let full = changed.is_empty();
    match engine.sync_dir(caller, kb, root, changed).await {
        Ok(synced) => report(&synced),
        // The KB is as it was before the failed document; the next event or restart retries.
        Err(e) => tracing::error!(error = %e, full, "syncing the watched folder failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_root_and_not_the_root_are_synced() {
        let root = Path::new("/srv/docs");
        let paths = ["/srv/docs", "/srv/docs/a.md", "/srv/docs/sub/b.pdf", "/srv/other.md"].map(PathBuf::from);
        let kept = relevant(root, paths.into_iter().collect());
        assert_eq!(kept, [PathBuf::from("/srv/docs/a.md"), PathBuf::from("/srv/docs/sub/b.pdf")]);
    }
}
