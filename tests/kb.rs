//! Knowledge-base foundation: ingestion into real sled on disk and into a real PostgreSQL
//! server (every test runs on both back ends; see `TestStore`), re-ingest, crash safety, bad
//! input.

mod common;

use a2rag::kb::audit::Author;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use a2rag::ingest::triples::TripleImport;
use a2rag::kb::VectorsAtOpen;
use a2rag::kb::catalog::KbName;
use a2rag::kb::store::{Family, Location, Store};
use common::*;

#[test]
fn musique_with_openie_import_gives_every_passage_and_triple() {
    for store in TestStore::all() {
        musique_with_openie_import_gives_every_passage_and_triple_on(&store);
    }
}

fn musique_with_openie_import_gives_every_passage_and_triple_on(store: &TestStore) {
    let Some(data) = datasets() else { return };
    let dir = tempfile::tempdir().unwrap();
    let settings = store.settings(dir.path());
    let (mut kb, mut pipeline) = open(&settings);
    let triples_file = data.join("musique/openie_triples.json");
    pipeline.triples = Some(TripleImport::load(&triples_file).unwrap());
    let report = ingest(&mut kb, &pipeline, &[data.join("musique/corpus.json")]);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.added, 1890);
    // The published file has malformed entries (two, four or more elements): each is counted
    // and explained, none silently.
    assert_eq!(report.triples_dropped, report.dropped_triples.len());
    assert!(report.dropped_triples.iter().all(|m| m.contains("triple left out")), "{:?}", report.dropped_triples);

    // Expected edges: valid triples of each passage (three non-empty strings, named ends),
    // exact duplicates within a passage removed.
    let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&triples_file).unwrap()).unwrap();
    let expected: usize = raw
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["triples"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| {
                    let t = t.as_array()?;
                    let parts: Vec<String> =
                        t.iter().filter_map(|x| x.as_str().map(|s| s.trim().to_string())).collect();
                    // An entity with no letters or digits ("?") cannot become a node.
                    let named = |s: &String| !a2rag::text::normalize_entity(s).is_empty();
                    let valid = t.len() == 3
                        && parts.len() == 3
                        && parts.iter().all(|s| !s.is_empty())
                        && named(&parts[0])
                        && named(&parts[2]);
                    valid.then_some(parts)
                })
                .collect::<HashSet<_>>()
                .len()
        })
        .sum();
    let stats = kb.stats();
    assert_eq!(stats.documents, 1890);
    assert_eq!(stats.edges, expected, "one edge per distinct valid triple");
    assert!(stats.aliases_merged > 0, "alias normalisation merged some mentions");
    assert!(
        kb.integrity_violations().is_empty(),
        "{:?}",
        &kb.integrity_violations()[..3.min(kb.integrity_violations().len())]
    );

    // Re-ingesting unchanged content is a no-op.
    let again = ingest(&mut kb, &pipeline, &[data.join("musique/corpus.json")]);
    assert_eq!((again.added, again.replaced, again.unchanged), (0, 0, 1890));
    assert_eq!(kb.stats().edges, stats.edges);
    assert_eq!(kb.stats().nodes, stats.nodes);

    // Restart: the same KB comes back from sled.
    drop(kb);
    let (kb, _) = open(&settings);
    let reopened = kb.stats();
    assert_eq!(
        (reopened.documents, reopened.chunks, reopened.nodes, reopened.edges),
        (stats.documents, stats.chunks, stats.nodes, stats.edges)
    );
}

fn write_corpus(dir: &std::path::Path, n: usize) -> PathBuf {
    let path = dir.join("corpus.jsonl");
    let lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": format!("doc-{i}"),
                "title": format!("Town {i}"),
                "text": format!("Town {i} is a village in Province {}. It was founded by Mayor {} Smith in {}. The Town {i} Museum holds the Charter of Town {i}.", i % 7, i, 1800 + i)
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

#[test]
fn changed_document_replaces_its_chunks_and_edges_and_delete_removes_everything() {
    for store in TestStore::all() {
        changed_document_replaces_its_chunks_and_edges_and_delete_removes_everything_on(&store);
    }
}

fn changed_document_replaces_its_chunks_and_edges_and_delete_removes_everything_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let settings = store.settings(&dir.path().join("kb"));
    let (mut kb, pipeline) = open(&settings);
    let file = dir.path().join("a.jsonl");
    std::fs::write(&file, "{\"id\":\"x\",\"title\":\"Alpha\",\"text\":\"Alpha Corp was founded by Jane Doe in Paris.\"}\n{\"id\":\"y\",\"title\":\"Beta\",\"text\":\"Beta Ltd is based in Paris.\"}\n").unwrap();
    ingest(&mut kb, &pipeline, std::slice::from_ref(&file));
    assert!(kb.node_by_alias("Jane Doe").is_some());
    std::fs::write(&file, "{\"id\":\"x\",\"title\":\"Alpha\",\"text\":\"Alpha Corp was founded by John Roe in Berlin.\"}\n{\"id\":\"y\",\"title\":\"Beta\",\"text\":\"Beta Ltd is based in Paris.\"}\n").unwrap();
    let report = ingest(&mut kb, &pipeline, std::slice::from_ref(&file));
    assert_eq!((report.replaced, report.unchanged), (1, 1));
    assert!(kb.node_by_alias("Jane Doe").is_none(), "node only the old version mentioned is gone");
    assert!(kb.node_by_alias("John Roe").is_some());
    assert!(kb.node_by_alias("Paris").is_some(), "Beta still mentions Paris");
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    assert!(kb.delete_document("x", &Author::owner()).unwrap());
    assert!(kb.node_by_alias("John Roe").is_none());
    assert!(
        kb.search(
            &a2rag::embed::EmbeddedQuery::new(kb.embedder().as_ref(), "Berlin").unwrap(),
            a2rag::kb::SearchMode::Bm25,
            5,
            (&kb.settings().retrieve).into()
        )
        .unwrap()
        .is_empty()
    );
    assert_eq!(kb.stats().documents, 1);
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
}

#[test]
fn killed_ingest_leaves_a_consistent_kb_and_finishing_it_matches_a_clean_run() {
    for store in TestStore::all() {
        killed_ingest_leaves_a_consistent_kb_and_finishing_it_matches_a_clean_run_on(&store);
    }
}

fn killed_ingest_leaves_a_consistent_kb_and_finishing_it_matches_a_clean_run_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), 1500);
    let crashed = dir.path().join("crashed");
    let mut child = spawn_ingest(store, &crashed, &corpus);
    // Kill it once some documents have been committed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let crashed_settings = store.settings(&crashed);
    let committed_enough = || match store {
        TestStore::Sled => sled_bytes(&crashed) > 200_000,
        // PostgreSQL can be read while the ingest writes.
        TestStore::Postgres(_) | TestStore::PostgresTls { .. } => {
            let location = Location::of(&crashed_settings, &KbName::default());
            location.exists().unwrap() && Store::open(&location).unwrap().docs().count() > 100
        }
    };
    loop {
        std::thread::sleep(std::time::Duration::from_millis(150));
        if committed_enough() || std::time::Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the ingest was killed before it finished");

    let settings = store.settings(&crashed);
    let (mut kb, pipeline) = open(&settings);
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    let partial = kb.stats().documents;
    assert!(partial < 1500, "killed mid-way ({partial} documents)");
    let report = ingest(&mut kb, &pipeline, std::slice::from_ref(&corpus));
    assert_eq!(report.unchanged, partial, "committed documents are not redone");
    let finished = kb.stats();

    let clean_settings = store.another().settings(&dir.path().join("clean"));
    let (mut clean, pipeline) = open(&clean_settings);
    ingest(&mut clean, &pipeline, std::slice::from_ref(&corpus));
    let reference = clean.stats();
    assert_eq!(
        (finished.documents, finished.chunks, finished.nodes, finished.edges),
        (reference.documents, reference.chunks, reference.nodes, reference.edges)
    );
}

#[test]
fn a_kill_after_a_save_opens_from_the_save_and_replays_what_followed() {
    for store in TestStore::all() {
        a_kill_after_a_save_opens_from_the_save_and_replays_what_followed_on(&store);
    }
}

/// A KB of 400 documents, saved, and a corpus of 3,000 (the same 400, then 2,600 new) for an
/// ingest to be killed.
struct SavedThenMore {
    _dir: tempfile::TempDir,
    data: PathBuf,
    settings: a2rag::config::Settings,
    index_dir: PathBuf,
    later_corpus: PathBuf,
}

impl SavedThenMore {
    fn new(store: &TestStore) -> SavedThenMore {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("kb");
        let settings = store.settings(&data);
        let (mut kb, pipeline) = open(&settings);
        ingest(&mut kb, &pipeline, &[write_corpus(dir.path(), 400)]);
        let index_dir = kb.index_dir();
        assert!(index_dir.join("manifest.json").is_file(), "the first ingest saved");
        let later = dir.path().join("later");
        std::fs::create_dir(&later).unwrap();
        let later_corpus = write_corpus(&later, 3000);
        SavedThenMore { _dir: dir, data, settings, index_dir, later_corpus }
    }
}

/// `id`'s first chunk is found by its own vector and by BM25 over its text.
fn assert_found_by_vector_and_bm25(kb: &a2rag::kb::Kb, id: &str) {
    let doc = kb.doc_by_id(id).unwrap_or_else(|| panic!("{id} is committed"));
    let chunk = doc.chunks[0];
    let vector = kb.chunk_index().get(u64::from(chunk)).unwrap();
    assert_eq!(kb.chunk_index().search(&vector, 1).unwrap()[0].0, u64::from(chunk), "{id} by vector");
    let text = kb.chunk(chunk).unwrap().text.clone();
    let query = a2rag::embed::EmbeddedQuery::new(kb.embedder().as_ref(), &text).unwrap();
    let hits = kb.search(&query, a2rag::kb::SearchMode::Bm25, 3, (&kb.settings().retrieve).into()).unwrap();
    assert!(hits.iter().any(|(c, _)| *c == chunk), "{id} by BM25: {hits:?}");
}

fn a_kill_after_a_save_opens_from_the_save_and_replays_what_followed_on(store: &TestStore) {
    let SavedThenMore { data, settings, later_corpus, .. } = &SavedThenMore::new(store);
    let saved_size = sled_bytes(data);
    let mut child = spawn_ingest(store, data, later_corpus);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let location = Location::of(settings, &KbName::default());
    let committed_enough = || match store {
        TestStore::Sled => sled_bytes(data) > saved_size + 400_000,
        TestStore::Postgres(_) | TestStore::PostgresTls { .. } => Store::open(&location).unwrap().docs().count() > 600,
    };
    while !committed_enough() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success(), "the ingest was killed before it finished");

    let (kb, _) = open(settings);
    let replayed = match kb.vectors_at_open() {
        VectorsAtOpen::Mapped { changes_replayed } => changes_replayed,
        other => panic!("the save is mapped, not {other:?}"),
    };
    assert!(replayed > 0, "the killed ingest's documents are replayed");
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    let documents = kb.stats().documents;
    assert!(documents > 400 && documents < 3400, "killed mid-way ({documents} documents)");
    // Documents committed before the save and after it are found by vector and by BM25.
    let mut found = 0;
    // The second corpus repeats the first's 400 documents (unchanged) and adds the rest.
    let after_save = kb.docs().map(|d| d.id.clone()).filter(|id| id["doc-".len()..].parse::<usize>().unwrap() >= 400);
    for id in ["doc-3".to_string(), "doc-399".to_string()].into_iter().chain(after_save.take(3)) {
        assert_found_by_vector_and_bm25(&kb, &id);
        found += 1;
    }
    assert_eq!(found, 5, "both sides of the save were probed");
}

/// An ingest run ends with the PPR graph and the pages saved: the next open reads them
/// instead of building them, and they are what a build gives. A write makes them stale; the
/// next run saves the new ones.
#[test]
fn an_ingest_saves_the_snapshots_and_the_next_open_reads_them_until_a_write() {
    use a2rag::kb::pages::Pages;
    use a2rag::kb::passage_graph::PassageGraph;
    use a2rag::kb::snapshot::Snapshot;
    let dir = tempfile::tempdir().unwrap();
    let settings = TestStore::Sled.settings(&dir.path().join("kb"));
    let threshold = settings.retrieve.synonym_threshold;
    let same = |a: &PassageGraph, b: &PassageGraph| {
        a.nodes == b.nodes
            && a.chunks == b.chunks
            && a.csr.offsets == b.csr.offsets
            && a.csr.targets == b.csr.targets
            && a.csr.weights == b.csr.weights
    };
    let (mut kb, pipeline) = open(&settings);
    // Enough documents for the run to save its indexes (and with them the snapshots).
    ingest(&mut kb, &pipeline, &[write_corpus(dir.path(), 300)]);
    drop(kb);

    // A text naming pages: the saved pages must name the same passages where it does.
    let text = "Town 7 and Town 42 lie in Province 3, near Town 119.";
    let named = |pages: &Pages| {
        let mut chunks: Vec<u32> = pages.named_in(text).into_keys().collect();
        chunks.sort_unstable();
        chunks
    };
    let (mut kb, pipeline) = open(&settings);
    let read = kb.passage_graph();
    assert!(read.read_from_save, "the open read the saved snapshot");
    assert!(same(&read, &PassageGraph::build(&kb, threshold)), "the saved snapshot is the one a build gives");
    let pages = kb.pages();
    assert!(pages.read_from_save, "the open read the saved pages");
    assert_eq!(named(&pages), named(&Pages::build_from(&kb)));
    assert_eq!(named(&pages).len(), 3, "the text names three pages");
    let later = dir.path().join("later");
    std::fs::create_dir(&later).unwrap();
    ingest(&mut kb, &pipeline, &[write_corpus(&later, 600)]);
    let chunk = kb.doc_by_id("doc-599").unwrap().chunks[0];
    let after_write = kb.passage_graph();
    assert!(!after_write.read_from_save && after_write.chunk_row(chunk).is_some(), "built again after the write");
    assert!(!kb.pages().read_from_save, "the pages too");
    drop((read, after_write, pages, kb));

    let (kb, _) = open(&settings);
    let reopened = kb.passage_graph();
    assert!(reopened.read_from_save && reopened.chunk_row(chunk).is_some(), "the second run saved the new snapshot");
    assert!(same(&reopened, &PassageGraph::build(&kb, threshold)));
    assert!(kb.pages().read_from_save && named(&kb.pages()) == named(&Pages::build_from(&kb)));
    drop((reopened, kb));

    // A run too small to save leaves the saved snapshots behind the store: never read again.
    let (mut kb, pipeline) = open(&settings);
    let small = dir.path().join("small.txt");
    std::fs::write(&small, "Quiet Bay is a cove in Province 3.").unwrap();
    ingest(&mut kb, &pipeline, &[small]);
    let chunk = kb.chunk_ids().max().unwrap();
    drop(kb);
    let (kb, _) = open(&settings);
    let graph = kb.passage_graph();
    assert!(!graph.read_from_save && graph.chunk_row(chunk).is_some(), "the stale snapshot was not read");
    assert!(!kb.pages().read_from_save);
}

/// Every record of a KB, each family in id order: what two opens must agree on.
fn all_records(
    kb: &a2rag::kb::Kb,
) -> (
    Vec<a2rag::kb::model::Document>,
    Vec<a2rag::kb::model::Chunk>,
    Vec<a2rag::kb::model::Node>,
    Vec<a2rag::kb::model::Edge>,
) {
    let mut docs: Vec<_> = kb.docs().cloned().collect();
    docs.sort_by_key(|d| d.key);
    let mut chunks: Vec<_> = kb.chunk_ids().filter_map(|id| kb.chunk(id)).cloned().collect();
    chunks.sort_by_key(|c| c.id);
    let mut nodes: Vec<_> = kb.nodes().cloned().collect();
    nodes.sort_by_key(|n| n.id);
    let mut edges: Vec<_> = kb.edges().cloned().collect();
    edges.sort_by_key(|e| e.id);
    (docs, chunks, nodes, edges)
}

/// What the tables built of the records answer (see `kb::tables`): each node's aliases
/// looked up, its steps in the graph and its alias candidates, and each chunk's nodes.
type TablesView = (Vec<(u32, Vec<Option<u32>>, Vec<(u64, u32, bool)>, Vec<u32>)>, Vec<(u32, Vec<u32>)>);

fn tables_view(kb: &a2rag::kb::Kb) -> TablesView {
    let mut nodes: Vec<_> = kb
        .nodes()
        .map(|node| {
            let aliases = node.aliases.iter().map(|alias| kb.node_by_alias(alias)).collect();
            let steps = kb.graph().steps(node.id).into_iter().map(|s| (s.edge, s.to, s.forward)).collect();
            let candidates = kb.alias_candidates(&a2rag::kb::align::blocking_keys(&node.name));
            (node.id, aliases, steps, candidates)
        })
        .collect();
    nodes.sort();
    let mut chunks: Vec<_> = kb
        .chunk_ids()
        .map(|chunk| {
            let mut nodes = kb.nodes_in_chunk(chunk).to_vec();
            nodes.sort();
            (chunk, nodes)
        })
        .collect();
    chunks.sort();
    (nodes, chunks)
}

/// An ingest run saves the records in one file; the next open reads that file and takes
/// from the store only the records written since (new, changed and deleted ones), and ends
/// with the KB a read of every stored record gives, which is what an open without the file
/// does (and then saves the file again).
#[test]
fn an_open_reads_the_saved_records_and_what_was_written_since() {
    for store in TestStore::all() {
        an_open_reads_the_saved_records_and_what_was_written_since_on(&store);
    }
}

fn an_open_reads_the_saved_records_and_what_was_written_since_on(store: &TestStore) {
    use a2rag::kb::RecordsAtOpen;
    let dir = tempfile::tempdir().unwrap();
    let settings = store.settings(&dir.path().join("kb"));
    let (mut kb, pipeline) = open(&settings);
    ingest(&mut kb, &pipeline, &[write_corpus(dir.path(), 300)]);
    let ingested = tables_view(&kb);
    drop(kb);

    let (mut kb, pipeline) = open(&settings);
    let read = RecordsAtOpen::Saved { changes_replayed: 0, tables_read: true };
    assert_eq!(kb.records_at_open(), read, "the run saved its records and their tables");
    assert!(tables_view(&kb) == ingested, "the tables read back are the ones the ingest built");
    // Writes too small to save: a new document, a deleted one, and one whose text changed.
    let doc = |id: &str, text: &str| a2rag::ingest::source::SourceDoc {
        id: id.into(),
        title: format!("Note {id}"),
        text: text.into(),
        source: "test".into(),
        links: Vec::new(),
    };
    ingest_doc(&mut kb, &pipeline, doc("note-a", "Quiet Bay is a cove near Town 7, founded by Ada Fenwick."));
    assert!(kb.delete_document("doc-5", &Author::owner()).unwrap());
    ingest_doc(&mut kb, &pipeline, doc("note-b", "Ada Fenwick moved to Town 9."));
    ingest_doc(&mut kb, &pipeline, doc("note-b", "Ada Fenwick moved to Town 11, where she ran the ferry."));
    let expected = all_records(&kb);
    assert!(expected.0.iter().any(|d| d.id == "note-a") && !expected.0.iter().any(|d| d.id == "doc-5"));
    drop(kb);

    let (kb, _) = open(&settings);
    match kb.records_at_open() {
        RecordsAtOpen::Saved { changes_replayed, tables_read } => {
            assert!(changes_replayed >= 4, "{changes_replayed} replayed");
            assert!(!tables_read, "the saved tables are of records changed since");
        }
        other => panic!("the saved records were not read: {other:?}"),
    }
    assert!(all_records(&kb) == expected, "the saved records with the writes since are the stored ones");
    let violations = kb.integrity_violations();
    assert!(violations.is_empty(), "{violations:?}");
    let index = kb.index_dir();
    drop(kb);

    let records_files: Vec<PathBuf> = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("records-"))
        .collect();
    assert_eq!(records_files.len(), 1, "one records file: {records_files:?}");
    // Damaged by a replacement, as the texts of `expected` still point into the file it
    // replaces (a KB keeps the records file it opened mapped; nothing rewrites one in place).
    let damaged = index.join("damaged");
    std::fs::write(&damaged, b"not the records").unwrap();
    std::fs::rename(&damaged, &records_files[0]).unwrap();
    let (kb, _) = open(&settings);
    assert_eq!(kb.records_at_open(), RecordsAtOpen::ReadFromStore, "a damaged file is not read");
    assert!(all_records(&kb) == expected);
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(kb.records_at_open(), read, "the full read saved them again");
    assert!(all_records(&kb) == expected);
}

/// A kill while a save writes its files (merged segments, graphs, postings) leaves the save
/// before it in force: the KB opens from that one, replays what followed, and has every
/// document the killed ingest committed.
#[test]
fn a_kill_while_a_save_writes_its_files_opens_from_the_save_before() {
    for store in TestStore::all() {
        a_kill_while_a_save_writes_its_files_opens_from_the_save_before_on(&store);
    }
}

fn a_kill_while_a_save_writes_its_files_opens_from_the_save_before_on(store: &TestStore) {
    let SavedThenMore { data, settings, index_dir, later_corpus, .. } = &SavedThenMore::new(store);
    let manifest_before = std::fs::read(index_dir.join("manifest.json")).unwrap();
    // Commits every document, then saves once: its segments merge with the first save's.
    let mut child = spawn_ingest(store, data, later_corpus);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    let mut caught = None;
    while caught.is_none() && std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        caught = std::fs::read_dir(index_dir)
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .find(|name| name.ends_with(".tmp"));
        if caught.is_none() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let caught = caught.unwrap_or_else(|| panic!("no save was caught writing a file (the ingest ended {status})"));
    assert!(!status.success(), "the ingest was killed while it wrote {caught}");
    assert_eq!(std::fs::read(index_dir.join("manifest.json")).unwrap(), manifest_before, "the save never committed");

    let (kb, _) = open(settings);
    match kb.vectors_at_open() {
        // About one change per document committed after the first save.
        VectorsAtOpen::Mapped { changes_replayed } => assert!(changes_replayed > 2000, "{changes_replayed} replayed"),
        other => panic!("the first save is mapped, not {other:?}"),
    }
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    assert_eq!(kb.stats().documents, 3000, "every document was committed before the save began");
    for i in (0..3000).step_by(97) {
        assert_found_by_vector_and_bm25(&kb, &format!("doc-{i}"));
    }
}

#[test]
fn a_save_made_beside_another_store_is_not_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (store_settings(&dir.path().join("first")), store_settings(&dir.path().join("second")));
    let (mut kb, pipeline) = open(&first);
    ingest(&mut kb, &pipeline, &[write_corpus(dir.path(), 300)]);
    let saved_beside_first = kb.index_dir();
    drop(kb);
    // More changes than the first store made, so its save's change is one this log has.
    let other = dir.path().join("other.jsonl");
    let lines: Vec<String> = (0..320)
        .map(|i| serde_json::json!({"id": format!("cove-{i}"), "title": format!("Cove {i}"), "text": format!("Cove {i} lies below Cliff {} near Harbour {}.", i * 3, i % 11)}).to_string())
        .collect();
    std::fs::write(&other, lines.join("\n")).unwrap();
    let (mut kb, pipeline) = open(&second);
    ingest(&mut kb, &pipeline, &[other]);
    let index_dir = kb.index_dir();
    drop(kb);
    // As a data directory kept while its store was made again under the same name.
    if index_dir.exists() {
        std::fs::remove_dir_all(&index_dir).unwrap();
    }
    std::fs::create_dir(&index_dir).unwrap();
    for entry in std::fs::read_dir(&saved_beside_first).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, index_dir.join(path.file_name().unwrap())).unwrap();
    }
    let (kb, _) = open(&second);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::ReadFromStore);
    assert_eq!(kb.stats().documents, 320);
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
}

/// The chunk, entity and fact indexes fill graphs of their own bounds (`index.graph_max`,
/// `entity_graph_max`, `fact_graph_max`), and the graphs a save writes are what the next open
/// reads and searches.
#[test]
fn each_index_fills_graphs_of_its_own_size() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), 300);
    let mut settings = store_settings(&dir.path().join("kb"));
    settings.index.graph_max = 100;
    settings.index.entity_graph_max = 40;
    settings.index.fact_graph_max = 25;
    let (mut kb, pipeline) = open(&settings);
    ingest(&mut kb, &pipeline, std::slice::from_ref(&corpus));
    let stats = kb.stats();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kb.index_dir().join("manifest.json")).unwrap()).unwrap();
    let graphs = |name: &str| manifest["indexes"][name].as_array().map_or(0, Vec::len);
    for (name, vectors, bound) in
        [("chunks", stats.chunk_vectors, 100), ("nodes", stats.entity_vectors, 40), ("facts", stats.fact_vectors, 25)]
    {
        assert!(vectors > 2 * bound, "{name}: {vectors} vectors fill several graphs of {bound}");
        assert_eq!(graphs(name), vectors.div_ceil(bound), "{name}: {vectors} vectors in graphs of {bound}");
    }
    let probe = kb.nodes().find_map(|node| kb.node_index().get(u64::from(node.id))).unwrap();
    let before = kb.node_index().search(&probe, 5).unwrap();
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(kb.node_index().search(&probe, 5).unwrap(), before);
    assert!(before[0].1 > 0.999, "the probe finds its own vector: {before:?}");
}

/// Settings of a sled KB in `dir` whose indexes are all linked, however small.
fn store_settings(dir: &std::path::Path) -> a2rag::config::Settings {
    let mut settings = TestStore::Sled.settings(dir);
    settings.index.exact_search_max = 0;
    settings
}

/// The bytes of a sled KB's database files (0 for a PostgreSQL KB, whose records are elsewhere).
fn sled_bytes(data: &std::path::Path) -> u64 {
    std::fs::read_dir(data.join("db"))
        .map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// `a2rag ingest CORPUS` into `data` in a child process, to be killed.
fn spawn_ingest(store: &TestStore, data: &std::path::Path, corpus: &std::path::Path) -> std::process::Child {
    Command::new(bin()).envs(store.env()).arg("--data-dir").arg(data).arg("ingest").arg(corpus).spawn().unwrap()
}

#[test]
fn bad_input_is_reported_and_does_not_stop_the_rest() {
    for store in TestStore::all() {
        bad_input_is_reported_and_does_not_stop_the_rest_on(&store);
    }
}

fn bad_input_is_reported_and_does_not_stop_the_rest_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("good.md"), "# Good\nGood Corp is in Oslo.").unwrap();
    std::fs::write(input.join("bad.jsonl"), "{\"text\":\"fine line\",\"title\":\"F\"}\nnot json\n").unwrap();
    std::fs::write(input.join("latin1.txt"), [0x41u8, 0xe9, 0xff, 0x00]).unwrap();
    std::fs::write(input.join("empty.txt"), "   \n").unwrap();
    std::fs::write(input.join("broken.json"), "[{\"title\": ").unwrap();
    let out = Command::new(bin())
        .envs(store.env())
        .arg("--data-dir")
        .arg(dir.path().join("kb"))
        .arg("ingest")
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "errors make the exit code non-zero");
    assert!(stderr.contains("bad.jsonl:2:"), "names file and line: {stderr}");
    assert!(stderr.contains("broken.json:"), "{stderr}");
    assert!(stderr.contains("latin1.txt:1: not valid UTF-8"), "bad lines are named with their number: {stderr}");
    assert!(stdout.contains("2 added"), "good.md and the good jsonl line still ingested: {stdout}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn reading_commands_refuse_a_directory_without_a_kb_and_leave_it_untouched() {
    for store in TestStore::all() {
        reading_commands_refuse_a_directory_without_a_kb_and_leave_it_untouched_on(&store);
    }
}

fn reading_commands_refuse_a_directory_without_a_kb_and_leave_it_untouched_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-kb-here");
    for args in [&["stats"][..], &["search", "oslo"], &["ask", "Where is Oslo?"], &["delete", "d1"]] {
        let out = Command::new(bin()).envs(store.env()).arg("--data-dir").arg(&missing).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no knowledge base in") && stderr.contains("a2rag ingest"), "{args:?}: {stderr}");
    }
    assert!(!missing.exists(), "nothing was created");
    assert!(!Location::of(&store.settings(&missing), &KbName::default()).exists().unwrap());
}

#[test]
fn newer_schema_and_other_embedder_are_refused_with_clear_messages() {
    for store in TestStore::all() {
        newer_schema_and_other_embedder_are_refused_with_clear_messages_on(&store);
    }
}

fn newer_schema_and_other_embedder_are_refused_with_clear_messages_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let kb_dir = dir.path().join("kb");
    let doc = dir.path().join("d.txt");
    std::fs::write(&doc, "Some text about Oslo.").unwrap();
    assert!(
        Command::new(bin())
            .envs(store.env())
            .arg("--data-dir")
            .arg(&kb_dir)
            .arg("ingest")
            .arg(&doc)
            .status()
            .unwrap()
            .success()
    );
    let out = Command::new(bin())
        .envs(store.env())
        .arg("--data-dir")
        .arg(&kb_dir)
        .arg("stats")
        .env("A2RAG__EMBED__DIM", "64")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("a2rag reindex"), "{}", String::from_utf8_lossy(&out.stderr));
    match store {
        TestStore::Sled => {
            let db = sled::open(kb_dir.join("db")).unwrap();
            db.open_tree("kb").unwrap().insert(b"meta/schema", &999u32.to_be_bytes()).unwrap();
            db.flush().unwrap();
        }
        TestStore::Postgres(url) | TestStore::PostgresTls { url, .. } => {
            run_sql(url, "INSERT INTO a2rag_schema (version) VALUES (999)")
        }
    }
    let out = Command::new(bin()).envs(store.env()).arg("--data-dir").arg(&kb_dir).arg("stats").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema version 999"));
}

/// One synthetic document of about `bytes`, as the `large-doc` bench makes them.
fn synthetic(id: &str, bytes: usize, seed: u64) -> a2rag::ingest::source::SourceDoc {
    a2rag::ingest::source::SourceDoc {
        id: id.into(),
        title: format!("Synthetic {id}"),
        text: a2rag::bench::synthetic_document(bytes, seed, a2rag::bench::NameGrowth::Gradual),
        source: "test".into(),
        links: Vec::new(),
    }
}

fn ingest_doc(kb: &mut a2rag::kb::Kb, pipeline: &a2rag::ingest::Pipeline, doc: a2rag::ingest::source::SourceDoc) {
    let mut report = a2rag::ingest::IngestReport::default();
    a2rag::ingest::ingest_docs(kb, pipeline, vec![doc], &mut (), &mut report).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

/// A fact stated in several chunks is indexed once for query-to-fact linking, and stays
/// indexed while any chunk states it.
#[test]
fn a_repeated_fact_is_indexed_once_until_its_last_edge_goes() {
    for store in TestStore::all() {
        a_repeated_fact_is_indexed_once_until_its_last_edge_goes_on(&store);
    }
}

fn a_repeated_fact_is_indexed_once_until_its_last_edge_goes_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let (mut kb, pipeline) = open(&store.settings(&dir.path().join("kb")));
    let doc = |id: &str, extra: &str| a2rag::ingest::source::SourceDoc {
        id: id.into(),
        title: format!("Note {id}"),
        text: format!("Alpha Corp was founded by Jane Doe. {extra}"),
        source: "test".into(),
        links: Vec::new(),
    };
    ingest_doc(&mut kb, &pipeline, doc("a", "Jane Doe lives in Paris."));
    let one = kb.stats();
    ingest_doc(&mut kb, &pipeline, doc("b", "Alpha Corp sells lenses."));
    let two = kb.stats();
    assert!(two.edges > one.edges, "the second document adds edges");
    assert!(two.fact_vectors < two.edges, "the shared fact has two edges and one vector: {two:?}");
    assert_eq!(kb.store().scan_vectors(Family::FactVec).count(), two.fact_vectors, "one stored vector per fact");
    let violations = kb.integrity_violations();
    assert!(violations.is_empty(), "{violations:?}");
    let founded = |kb: &a2rag::kb::Kb| {
        let q = kb.embedder().embed_one("Alpha Corp founded by Jane Doe").unwrap();
        let hits = kb.fact_index().search(&q, 1).unwrap();
        hits.first().and_then(|(id, _)| kb.edge(*id)).map(|e| (e.relation.clone(), kb.chunk(e.chunk).map(|c| c.doc)))
    };
    let (relation, first_doc) = founded(&kb).unwrap();
    assert!(relation.contains("founded"), "{relation}");
    assert!(kb.delete_document("a", &Author::owner()).unwrap());
    let violations = kb.integrity_violations();
    assert!(violations.is_empty(), "{violations:?}");
    let (relation, then_doc) = founded(&kb).expect("the fact is still indexed, under document b's edge");
    assert!(relation.contains("founded"), "{relation}");
    assert_ne!(first_doc, then_doc);
    // The store holds one vector per distinct fact, and the delete stored the shared fact's
    // vector under b's edge: a reopened KB indexes it from there.
    let stored_facts = |kb: &a2rag::kb::Kb| kb.store().scan_vectors(Family::FactVec).count();
    assert_eq!(stored_facts(&kb), kb.stats().fact_vectors);
    drop(kb);
    let (mut kb, _) = open(&store.settings(&dir.path().join("kb")));
    let violations = kb.integrity_violations();
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(founded(&kb).map(|(_, doc)| doc), Some(then_doc), "indexed under b's edge after reopening");
    assert_eq!(stored_facts(&kb), kb.stats().fact_vectors);
    assert!(kb.delete_document("b", &Author::owner()).unwrap());
    assert_eq!(kb.stats().fact_vectors, 0);
    assert!(kb.integrity_violations().is_empty());
}

/// On PostgreSQL each daemon takes ids in blocks, so a daemon can add an edge with a lower id
/// than another daemon's edge of the same fact: the new edge takes the fact's vector over,
/// in both daemons' memory and in the store, and hands it back when it goes.
#[test]
fn a_fact_moves_to_a_lower_edge_id_from_another_daemons_block() {
    let Some(url) = postgres_database() else {
        return;
    };
    let store = TestStore::Postgres(url);
    let dir = tempfile::tempdir().unwrap();
    let settings = store.settings(&dir.path().join("kb"));
    let (mut a, pipeline) = open(&settings);
    let (mut b, _) = open(&settings);
    let doc = |id: &str, text: &str| a2rag::ingest::source::SourceDoc {
        id: id.into(),
        title: format!("Note {id}"),
        text: text.into(),
        source: "test".into(),
        links: Vec::new(),
    };
    // A takes the first block of ids, B the next; A's later edges sort before B's.
    ingest_doc(&mut a, &pipeline, doc("warm-up", "Ravi Rao lives in Lyon."));
    ingest_doc(&mut b, &pipeline, doc("from-b", "Alpha Corp was founded by Jane Doe. Alpha Corp sells lenses."));
    let founded = |kb: &a2rag::kb::Kb| {
        let q = kb.embedder().embed_one("Alpha Corp founded by Jane Doe").unwrap();
        let (id, _) = kb.fact_index().search(&q, 1).unwrap()[0];
        kb.chunk(kb.edge(id).unwrap().chunk).map(|c| kb.doc(c.doc).unwrap().id.clone())
    };
    let consistent = |kb: &mut a2rag::kb::Kb| {
        kb.catch_up().unwrap();
        let violations = kb.integrity_violations();
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(kb.store().scan_vectors(Family::FactVec).count(), kb.stats().fact_vectors, "one per fact");
    };
    consistent(&mut a);
    assert_eq!(founded(&a).as_deref(), Some("from-b"));
    ingest_doc(&mut a, &pipeline, doc("from-a", "Alpha Corp was founded by Jane Doe. Jane Doe lives in Paris."));
    for kb in [&mut a, &mut b] {
        consistent(kb);
        assert_eq!(founded(kb).as_deref(), Some("from-a"), "A's new edge has a lower id than B's and takes over");
    }
    assert!(b.delete_document("from-a", &Author::owner()).unwrap());
    for kb in [&mut a, &mut b] {
        consistent(kb);
        assert_eq!(founded(kb).as_deref(), Some("from-b"), "and hands the fact back when it goes");
    }
    drop((a, b));
    let (mut reopened, _) = open(&settings);
    consistent(&mut reopened);
    assert_eq!(founded(&reopened).as_deref(), Some("from-b"));
}

#[test]
fn replacing_and_deleting_a_large_document_keeps_every_index_in_step() {
    for store in TestStore::all() {
        replacing_and_deleting_a_large_document_keeps_every_index_in_step_on(&store);
    }
}

fn replacing_and_deleting_a_large_document_keeps_every_index_in_step_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let (mut kb, pipeline) = open(&store.settings(&dir.path().join("kb")));
    // A second document shares the cast of people, so many nodes keep part of their
    // provenance when the large one is replaced.
    ingest_doc(&mut kb, &pipeline, synthetic("other", 20_000, 1));
    ingest_doc(&mut kb, &pipeline, synthetic("big", 150_000, 2));
    ingest_doc(&mut kb, &pipeline, synthetic("big", 90_000, 3));
    // The integrity check includes the reverse provenance (chunk -> nodes) in both directions.
    assert!(
        kb.integrity_violations().is_empty(),
        "{:?}",
        &kb.integrity_violations()[..3.min(kb.integrity_violations().len())]
    );
    let replaced = kb.stats();

    let fresh_dir = tempfile::tempdir().unwrap();
    let (mut fresh, pipeline) = open(&store.another().settings(&fresh_dir.path().join("kb")));
    ingest_doc(&mut fresh, &pipeline, synthetic("other", 20_000, 1));
    ingest_doc(&mut fresh, &pipeline, synthetic("big", 90_000, 3));
    let expected = fresh.stats();
    assert_eq!(
        (replaced.chunks, replaced.edges, replaced.bm25_terms),
        (expected.chunks, expected.edges, expected.bm25_terms),
        "the replaced KB indexes what a fresh ingest of the new version does"
    );

    for id in ["big", "other"] {
        assert!(kb.delete_document(id, &Author::owner()).unwrap());
        assert!(
            kb.integrity_violations().is_empty(),
            "{:?}",
            &kb.integrity_violations()[..3.min(kb.integrity_violations().len())]
        );
    }
    let empty = kb.stats();
    assert_eq!(
        (empty.chunks, empty.nodes, empty.edges, empty.bm25_terms),
        (0, 0, 0, 0),
        "nothing outlives its documents"
    );
}

/// The curation page's entity view and name suggestions (issue 13), on the example corpus.
#[test]
fn an_entity_view_shows_edges_with_provenance_and_suggestions_complete_names() {
    for store in TestStore::all() {
        an_entity_view_shows_edges_with_provenance_and_suggestions_complete_names_on(&store);
    }
}

fn an_entity_view_shows_edges_with_provenance_and_suggestions_complete_names_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let (mut kb, pipeline) = open(&store.settings(dir.path()));
    ingest(&mut kb, &pipeline, &[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/corpus")]);
    let id = kb.node_by_alias("Aurora Observatory").expect("the example corpus names it");
    let view = kb.entity_view(id, 50).unwrap();
    assert_eq!(view.name, "Aurora Observatory");
    assert!(view.degree >= 1 && !view.neighbours.is_empty(), "{view:?}");
    for n in &view.neighbours {
        let edge = kb.edge(n.edge).unwrap();
        assert_eq!(edge.chunk, n.chunk, "each edge names the chunk it was read from");
        let expected = if edge.subject == id { (edge.subject, edge.object) } else { (edge.object, edge.subject) };
        assert_eq!((id, n.node), expected);
    }
    let listed: HashSet<_> = view.neighbours.iter().map(|n| n.node).collect();
    for link in &view.links {
        assert!(listed.contains(&link.subject) && listed.contains(&link.object), "{link:?}");
        assert!(kb.edge(link.edge).is_some());
    }
    assert!(view.provenance.iter().all(|c| c.text.contains("Aurora")), "chunks mentioning it");
    assert_eq!(kb.entity_view(id, 1).unwrap().neighbours.len(), 1, "the limit holds");
    assert!(kb.entity_view(u32::MAX, 10).is_none());

    let found = kb.find_entities("lena varga", 5);
    assert_eq!(found.first().map(|s| s.name.as_str()), Some("Lena Varga"), "{found:?}");
    let typing = kb.find_entities("Auro", 10);
    assert!(typing.iter().any(|s| s.name == "Aurora Observatory"), "a prefix completes: {typing:?}");
    assert!(typing.iter().all(|s| s.alias.to_lowercase().contains("auro")), "{typing:?}");
    assert!(kb.find_entities("  ", 5).is_empty());
}

/// A proposal's decision key and record are one write: a second claim of the key writes
/// nothing, and a decision key whose proposal is missing (what a crash between two separate
/// writes used to leave, which blocked that triple for good) is an integrity violation that
/// repair removes.
#[test]
fn a_claimed_key_and_its_record_are_written_together_or_not_at_all() {
    for store in TestStore::all() {
        a_claimed_key_and_its_record_are_written_together_or_not_at_all_on(&store);
    }
}

fn a_claimed_key_and_its_record_are_written_together_or_not_at_all_on(store: &TestStore) {
    use a2rag::kb::store::{KbBatch, Keyspace};
    let dir = tempfile::tempdir().unwrap();
    let (mut kb, pipeline) = open(&store.settings(dir.path()));
    let doc = dir.path().join("oslo.txt");
    std::fs::write(&doc, "Oslo is the capital of Norway.").unwrap();
    ingest(&mut kb, &pipeline, &[doc]);
    let (decisions, proposals) = (Keyspace::Decisions, Keyspace::Proposals);
    let mut batch = KbBatch::default();
    batch.put_raw(
        decisions,
        "oslo\u{1f}capital of\u{1f}norway".as_bytes(),
        br#"{"proposal":7,"status":"pending"}"#.to_vec(),
    );
    kb.store().commit(batch).unwrap();
    let problems = a2rag::curate::integrity_violations(&kb).unwrap();
    assert!(
        problems.iter().any(|p| p.contains("`oslo | capital of | norway` names missing proposal 7")),
        "{store:?}: {problems:?}"
    );
    let released = a2rag::curate::release_orphan_decisions(&mut kb).unwrap();
    assert_eq!(released, ["oslo | capital of | norway"], "{store:?}");
    assert_eq!(kb.store().get_raw(decisions, "oslo\u{1f}capital of\u{1f}norway".as_bytes()).unwrap(), None);

    // (The records below are no proposals: the integrity check, which reads them, is done.)
    let decision = br#"{"proposal":41,"status":"pending"}"#;
    let claimed =
        kb.store().insert_new_raw_with((decisions, b"key", decision), (proposals, b"record-41", b"{}")).unwrap();
    assert!(claimed, "{store:?}");
    let again =
        kb.store().insert_new_raw_with((decisions, b"key", b"other"), (proposals, b"record-42", b"{}")).unwrap();
    assert!(!again, "{store:?}");
    assert_eq!(kb.store().get_raw(decisions, b"key").unwrap().as_deref(), Some(&decision[..]), "{store:?}");
    assert_eq!(kb.store().get_raw(proposals, b"record-41").unwrap().as_deref(), Some(&b"{}"[..]), "{store:?}");
    assert_eq!(kb.store().get_raw(proposals, b"record-42").unwrap(), None, "nothing of a refused claim: {store:?}");
}

/// A file ingested by an earlier build kept the path as typed for its id; ingesting it again
/// by another spelling gives the stored document the file's one id in place (curated edges
/// and all), and it is unchanged, not a second copy.
#[test]
fn a_document_stored_under_a_typed_path_takes_the_file_s_id_in_place() {
    for store in TestStore::all() {
        a_document_stored_under_a_typed_path_takes_the_file_s_id_in_place_on(&store);
    }
}

fn a_document_stored_under_a_typed_path_takes_the_file_s_id_in_place_on(store: &TestStore) {
    use a2rag::ingest::source::{SourceDoc, document_path};
    let dir = tempfile::tempdir().unwrap();
    let (mut kb, pipeline) = open(&store.settings(&dir.path().join("data")));
    let text = "Oslo is the capital of Norway.";
    let file = dir.path().join("oslo.txt");
    std::fs::write(&file, text).unwrap();
    let typed = dir.path().join("./oslo.txt");
    let earlier = SourceDoc {
        id: typed.display().to_string(),
        title: "oslo".into(),
        text: text.into(),
        source: typed.display().to_string(),
        links: Vec::new(),
    };
    let mut report = a2rag::ingest::IngestReport::default();
    a2rag::ingest::ingest_docs(&mut kb, &pipeline, vec![earlier], &mut (), &mut report).unwrap();
    let key = kb.doc_by_id(&typed.display().to_string()).expect("stored as typed").key;

    let report = ingest(&mut kb, &pipeline, std::slice::from_ref(&typed));
    assert_eq!((report.added, report.replaced, report.unchanged), (0, 0, 1), "{store:?}: {report:?}");
    let id = document_path(&file);
    assert_ne!(id, typed.display().to_string());
    assert_eq!(kb.doc_by_id(&id).map(|d| (d.key, d.source.clone())), Some((key, id.clone())), "{store:?}");
    assert!(kb.doc_by_id(&typed.display().to_string()).is_none(), "{store:?}");
    assert_eq!(kb.stats().documents, 1);
    // Reopened from the store, the id is the new one.
    drop(kb);
    let (kb, _) = open(&store.settings(&dir.path().join("data")));
    assert_eq!(kb.doc_by_id(&id).map(|d| d.key), Some(key), "{store:?}");
    assert!(a2rag::curate::integrity_violations(&kb).unwrap().is_empty());
    assert!(kb.integrity_violations().is_empty(), "{store:?}: {:?}", kb.integrity_violations());
}

#[test]
fn a_reopened_kb_reads_its_saved_graphs_and_repairs_what_they_miss() {
    for store in TestStore::all() {
        a_reopened_kb_reads_its_saved_graphs_and_repairs_what_they_miss_on(&store);
    }
}

fn a_reopened_kb_reads_its_saved_graphs_and_repairs_what_they_miss_on(store: &TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_corpus(dir.path(), 300);
    let mut settings = store.settings(&dir.path().join("kb"));
    // Every index links into HNSW graphs, however small.
    settings.index.exact_search_max = 0;
    let (mut kb, pipeline) = open(&settings);
    ingest(&mut kb, &pipeline, std::slice::from_ref(&corpus));
    let index_dir = kb.index_dir();
    assert!(index_dir.join("manifest.json").is_file(), "an ingest batch saves the graphs");
    let mut chunk_ids: Vec<u64> = kb.chunk_ids().map(u64::from).collect();
    chunk_ids.sort_unstable();
    let probe_ids: Vec<u64> = [3, 77, 150, 299].iter().map(|i| chunk_ids[*i]).collect();
    let probes: Vec<Vec<f32>> = probe_ids.iter().map(|id| kb.chunk_index().get(*id).unwrap()).collect();
    let answers = |kb: &a2rag::kb::Kb| -> Vec<Vec<(u64, f32)>> {
        probes
            .iter()
            .flat_map(|v| [kb.chunk_index().search(v, 8).unwrap(), kb.node_index().search(v, 8).unwrap()])
            .collect()
    };
    // The relation labels' own graph is saved and adopted like the KB's indexes.
    let labels = |kb: &a2rag::kb::Kb| -> Vec<Vec<(String, f32)>> {
        let relations = kb.relations();
        let nearest = |v: &Vec<f32>| relations.nearest(v, 3, -1.0).unwrap();
        probes
            .iter()
            .map(|v| nearest(v).into_iter().map(|(label, score)| (label.to_string(), score)).collect())
            .collect()
    };
    let before = answers(&kb);
    let labels_before = labels(&kb);
    assert!(labels_before.iter().all(|found| found.len() == 3), "{labels_before:?}");
    let generation = || -> u64 {
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(index_dir.join("manifest.json")).unwrap()).unwrap();
        manifest["generation"].as_u64().unwrap()
    };
    let saved_generation = generation();
    // One more small document is not worth rewriting the graphs it touched; an open links it.
    let extra = dir.path().join("extra.txt");
    std::fs::write(&extra, "Quiet Bay is a cove in Province 3.").unwrap();
    ingest(&mut kb, &pipeline, std::slice::from_ref(&extra));
    assert_eq!(generation(), saved_generation, "a batch of a few vectors saves nothing");
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(
        kb.vectors_at_open(),
        VectorsAtOpen::Mapped { changes_replayed: 1 },
        "the save is mapped, the batch replayed"
    );
    assert!(kb.linked_at_open() > 0, "the small batch's vectors are linked at open");
    drop(kb);

    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::Mapped { changes_replayed: 0 }, "the open that linked saved");
    assert_eq!(kb.linked_at_open(), 0, "a clean reopen links nothing, relation labels included");
    assert_eq!(answers(&kb), before, "the saved graphs answer as the ones they were saved from");
    assert_eq!(labels(&kb), labels_before);

    // A write that no save followed (as when a process dies before its batch ends): the
    // next open drops what went and links what came.
    let mut kb = kb;
    let doomed = kb.doc_by_id("doc-5").unwrap().chunks.clone();
    assert!(kb.delete_document("doc-5", &Author::owner()).unwrap());
    let doc = a2rag::ingest::source::SourceDoc {
        id: "late".into(),
        title: "Late Harbour".into(),
        text: "Late Harbour is a port in Province 2. It was built by Mayor Ann Smith in 1901.".into(),
        source: "test".into(),
        links: Vec::new(),
    };
    let prepared = pipeline.prepare(doc).unwrap();
    kb.commit_document(prepared, &Author::owner()).unwrap();
    let late = u64::from(kb.doc_by_id("late").unwrap().chunks[0]);
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::Mapped { changes_replayed: 2 }, "a delete and a commit replayed");
    assert!(kb.linked_at_open() > 0, "the new document's vectors were linked at open");
    let late_vector = kb.chunk_index().get(late).unwrap();
    assert_eq!(kb.chunk_index().search(&late_vector, 1).unwrap()[0].0, late);
    for chunk in doomed {
        let hits = kb.chunk_index().search(&probes[0], 400).unwrap();
        assert!(hits.iter().all(|(id, _)| *id != u64::from(chunk)), "a deleted chunk is not a candidate");
    }
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(kb.linked_at_open(), 0, "the open that linked saved what it linked");
    drop(kb);

    // A damaged graph file costs that index a link pass, not a wrong answer or a failure.
    let graph_file = std::fs::read_dir(&index_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name().unwrap().to_str().unwrap().starts_with("chunks-") && p.extension().unwrap() == "usearch"
        })
        .unwrap();
    let mut bytes = std::fs::read(&graph_file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&graph_file, bytes).unwrap();
    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::ReadFromStore, "a damaged save is not mapped");
    assert!(kb.linked_at_open() >= 299, "the chunk index was linked again from the store");
    for (probe, id) in probes.iter().zip(&probe_ids) {
        assert_eq!(kb.chunk_index().search(probe, 1).unwrap()[0].0, *id);
    }
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    drop(kb);

    // So does a damaged vector segment: the open reads the store and saves anew.
    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::Mapped { changes_replayed: 0 });
    drop(kb);
    let segment = std::fs::read_dir(&index_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("nodes-") && p.extension().unwrap() == "vectors")
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[70] ^= 0x01;
    std::fs::write(&segment, bytes).unwrap();
    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::ReadFromStore, "a damaged segment is not mapped");
    for (probe, id) in probes.iter().zip(&probe_ids) {
        assert_eq!(kb.chunk_index().search(probe, 1).unwrap()[0].0, *id);
    }
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    drop(kb);
    let (kb, _) = open(&settings);
    assert_eq!(kb.vectors_at_open(), VectorsAtOpen::Mapped { changes_replayed: 0 }, "that open saved again");
    let labels = kb.relations().len();
    assert!(labels > 0);
    drop(kb);

    // The relation labels' vectors are saved: without the file an open embeds them again,
    // and saves them, so the one after embeds none.
    let labels_file = || {
        std::fs::read_dir(&index_dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "labels"))
    };
    std::fs::remove_file(labels_file().expect("a save writes the relation labels")).unwrap();
    let (kb, _) = open(&settings);
    assert_eq!(kb.relations().len(), labels);
    drop(kb);
    assert!(labels_file().is_some(), "the open that embedded them saved them");
    std::fs::remove_dir_all(&index_dir).unwrap();
    let (kb, _) = open(&settings);
    assert!(kb.linked_at_open() > 0 && index_dir.join("manifest.json").is_file(), "a lost save is rebuilt and saved");
}
