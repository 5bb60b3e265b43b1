//! The engine's text search, reindex and migrate as every door calls them: with a caller,
//! admitted by scope and knowledge base, on real sled stores.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2rag::Error;
use a2rag::access::{Caller, Scope, TokenSpec};
use a2rag::config::{EmbedProvider, Settings};
use a2rag::engine::{Engine, IngestInput, InlineDoc, SearchRequest};
use a2rag::kb::SearchMode;
use a2rag::kb::catalog::KbName;

const DOCS: &[(&str, &str)] = &[
    ("Danube", "The Danube is the second-longest river in Europe. It flows through Vienna and Budapest."),
    ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889."),
    ("Photosynthesis", "Green plants use sunlight to turn carbon dioxide and water into glucose."),
];

fn settings(dir: &Path, dim: usize) -> Settings {
    let mut s = Settings::defaults();
    s.data_dir = dir.to_path_buf();
    s.embed.provider = EmbedProvider::Hash;
    s.embed.dim = dim;
    s
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()
}

/// sled releases its directory lock from a background thread shortly after the last handle
/// drops, so opening it again at once can briefly find it held; retry only that case.
fn retry<T>(what: impl Fn() -> a2rag::Result<T>) -> a2rag::Result<T> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match what() {
            Err(Error::InUse(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => return other,
        }
    }
}

/// A caller holding a new token of `scope` that reaches `kbs` (all where empty).
fn caller(engine: &Engine, name: &str, scope: Scope, kbs: Vec<KbName>) -> Caller {
    let spec = TokenSpec::new(name.into(), scope, kbs, "never", None, None).unwrap();
    let (_, token) = engine.create_token(&Caller::owner(), spec).unwrap();
    engine.authenticate(&token).unwrap()
}

/// An engine over `settings` whose KB `kb` holds [`DOCS`].
fn ingested(runtime: &tokio::runtime::Runtime, settings: &Settings, kbs: &[KbName]) -> Arc<Engine> {
    let engine = Arc::new(retry(|| Engine::open(settings.clone(), None)).unwrap());
    for kb in kbs {
        let docs = DOCS
            .iter()
            .map(|(title, text)| InlineDoc { id: None, title: Some(title.to_string()), text: text.to_string() })
            .collect();
        let input = IngestInput::documents(docs, "test");
        runtime.block_on(engine.ingest(&Caller::owner(), kb, input, ())).unwrap();
    }
    engine
}

#[test]
fn search_ranks_chunks_for_a_reader_of_the_kb() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime();
    let default = KbName::default();
    let engine = ingested(&runtime, &settings(dir.path(), 256), std::slice::from_ref(&default));
    let reader = caller(&engine, "reader", Scope::Read, Vec::new());
    let search = |caller: &Caller, query: &str, mode, k| {
        let request = SearchRequest { query: query.into(), mode, k };
        runtime.block_on(engine.search(caller, &default, &request))
    };

    for mode in [SearchMode::Bm25, SearchMode::Vector, SearchMode::Hybrid] {
        let hits = search(&reader, "river through Vienna and Budapest", mode, 2).unwrap();
        assert!(!hits.is_empty() && hits.len() <= 2, "{mode:?}: {hits:?}");
        assert_eq!(hits[0].title, "Danube", "{mode:?}: {hits:?}");
        assert!(hits[0].text.contains("Vienna"), "{hits:?}");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{hits:?}");
    }

    let nothing = search(&reader, " ?? ", SearchMode::Hybrid, 5).unwrap_err().to_string();
    assert!(nothing.contains("nothing to search for"), "{nothing}");
    let none = search(&reader, "river", SearchMode::Hybrid, 0).unwrap_err().to_string();
    assert!(none.contains("k must be 1 to 10000"), "{none}");
    let elsewhere = caller(&engine, "elsewhere", Scope::Admin, vec![KbName::new("other").unwrap()]);
    let refused = search(&elsewhere, "river", SearchMode::Hybrid, 5).unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)), "{refused}");
    let unknown = runtime.block_on(engine.search(
        &reader,
        &KbName::new("nope").unwrap(),
        &SearchRequest { query: "river".into(), mode: SearchMode::Hybrid, k: 5 },
    ));
    assert!(matches!(unknown, Err(Error::UnknownKb { .. })), "{unknown:?}");
}

/// After the embedder changed, the KB cannot open until reindexed: an engine that opened no
/// KB reindexes it for an admin, and one that has it open refuses to.
#[test]
fn reindex_re_embeds_a_closed_kb_for_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime();
    let default = KbName::default();
    drop(ingested(&runtime, &settings(dir.path(), 256), std::slice::from_ref(&default)));

    let changed = settings(dir.path(), 512);
    let mismatch = retry(|| Engine::open(changed.clone(), None)).err();
    assert!(matches!(mismatch, Some(Error::EmbedderMismatch { .. })), "{mismatch:?}");
    let engine = Engine::open_without_kbs(changed.clone(), None).unwrap();
    let curator = caller(&engine, "curator", Scope::Curate, Vec::new());
    let refused = runtime.block_on(engine.reindex(&curator, &default)).unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)), "{refused}");
    let nope = KbName::new("nope").unwrap();
    let unknown = runtime.block_on(engine.reindex(&Caller::owner(), &nope));
    assert!(matches!(unknown, Err(Error::UnknownKb { .. })), "{unknown:?}");
    assert!(!dir.path().join("kbs/nope").exists(), "reindex created a KB");

    let report = retry(|| runtime.block_on(engine.reindex(&Caller::owner(), &default))).unwrap();
    assert_eq!((report.previous_embedder.as_deref(), report.embedder.as_str()), (Some("hash-256"), "hash-512"));
    drop(engine);

    let engine = retry(|| Engine::open(changed.clone(), None)).unwrap();
    let stats = runtime.block_on(engine.stats(&Caller::owner(), &default)).unwrap();
    assert_eq!((stats.embedder.as_str(), stats.documents), ("hash-512", DOCS.len()));
    assert_eq!((report.chunks, report.summaries), (stats.chunks, stats.summary_vectors));
    let open = runtime.block_on(engine.reindex(&Caller::owner(), &default)).unwrap_err();
    assert!(matches!(open, Error::Conflict(_)) && open.to_string().contains("open in this process"), "{open}");
}

/// Migrate copies every KB, so it needs an admin who reaches them all, and all of them closed.
#[test]
fn migrate_copies_every_closed_kb_for_an_admin_of_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime();
    let (default, papers) = (KbName::default(), KbName::new("papers").unwrap());
    let source = settings(&dir.path().join("source"), 256);
    let open = ingested(&runtime, &source, &[default.clone(), papers.clone()]);
    let to = dir.path().join("copy");
    let migrate = |engine: &Engine, caller: &Caller| {
        runtime.block_on(engine.migrate(caller, to.to_str().unwrap(), |_: &KbName, _: usize| {}))
    };
    let busy = migrate(&open, &Caller::owner()).unwrap_err();
    assert!(matches!(busy, Error::Conflict(_)), "{busy}");
    drop(open);

    let engine = Engine::open_without_kbs(source.clone(), None).unwrap();
    let writer = caller(&engine, "writer", Scope::Write, Vec::new());
    let refused = migrate(&engine, &writer).unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)), "{refused}");
    let partial = caller(&engine, "papers-admin", Scope::Admin, vec![papers.clone()]);
    let refused = migrate(&engine, &partial).unwrap_err();
    assert!(matches!(refused, Error::Forbidden(_)) && refused.to_string().contains("reach them all"), "{refused}");
    assert!(!to.exists(), "a refused migrate wrote to its destination");

    let reported = Arc::new(AtomicUsize::new(0));
    let progress = reported.clone();
    let copied = retry(|| {
        let progress = progress.clone();
        runtime.block_on(engine.migrate(&Caller::owner(), to.to_str().unwrap(), move |_: &KbName, n: usize| {
            progress.store(n, Ordering::Relaxed)
        }))
    })
    .unwrap();
    let names: Vec<&KbName> = copied.iter().map(|m| &m.kb).collect();
    assert_eq!(names, [&default, &papers]);
    assert!(copied.iter().all(|m| m.entries > 0) && reported.load(Ordering::Relaxed) > 0);
    assert_eq!(copied[1].to.to_string(), to.join("kbs/papers").display().to_string());
    drop(engine);

    let copy = Engine::open(settings(&to, 256), None).unwrap();
    let docs = runtime.block_on(copy.documents(&Caller::owner(), &papers)).unwrap();
    assert_eq!(docs.iter().map(|d| d.title.as_str()).collect::<Vec<_>>(), ["Danube", "Eiffel Tower", "Photosynthesis"]);
}
