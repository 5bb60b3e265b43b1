//! `kb::reindex` on a real sled KB: a KB embedded with one embedder is refused by another until
//! it is reindexed, and afterwards holds exactly the vectors a fresh ingest would have written.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2rag::Error;
use a2rag::config::Settings;
use a2rag::embed::{Embedder, HashEmbedder};
use a2rag::ingest::Pipeline;
use a2rag::ingest::source::SourceDoc;
use a2rag::kb::audit::Author;
use a2rag::kb::reindex::{ReindexReport, reindex};
use a2rag::kb::{Kb, SearchMode};

const DOCS: &[(&str, &str, &str)] = &[
    (
        "eiffel",
        "Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was designed by \
         Gustave Eiffel's company and completed in 1889 for the World's Fair.",
    ),
    (
        "photosynthesis",
        "Photosynthesis",
        "Photosynthesis is the process by which green plants use sunlight to turn carbon \
         dioxide and water into glucose and oxygen. Chlorophyll absorbs the light.",
    ),
    (
        "danube",
        "Danube",
        "The Danube is the second-longest river in Europe. It flows through Vienna, Budapest \
         and Belgrade before reaching the Black Sea in Romania.",
    ),
];

fn settings(dir: &Path, dim: usize) -> Settings {
    let mut s = Settings::defaults();
    s.data_dir = dir.to_path_buf();
    s.embed.provider = a2rag::config::EmbedProvider::Hash;
    s.embed.dim = dim;
    // Small chunks so that documents span several chunks and the batching is exercised.
    s.ingest.chunk_tokens = 12;
    s.ingest.chunk_overlap = 2;
    // Alias merging consults embeddings, so two embedders could merge different mentions and
    // the fresh-ingest comparison below would compare different graphs. Reindex keeps the
    // graph as it is; only vectors change.
    s.alias.enabled = false;
    s
}

/// sled releases its directory lock from a background thread shortly after the last handle
/// drops, so reopening at once can briefly see the lock still held; retry only that case.
fn retry<T>(what: impl Fn() -> a2rag::Result<T>) -> a2rag::Result<T> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match what() {
            Err(e) if e.to_string().contains("could not acquire lock") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn reindex_retry(settings: &Settings, embedder: &Arc<dyn Embedder>) -> a2rag::Result<ReindexReport> {
    retry(|| reindex(settings, embedder.clone()))
}

fn open(settings: &Settings, embedder: &Arc<dyn Embedder>) -> a2rag::Result<Kb> {
    retry(|| Kb::open(Arc::new(settings.clone()), embedder.clone()))
}

fn ingest(settings: &Settings, embedder: Arc<dyn Embedder>) {
    let mut kb = open(settings, &embedder).unwrap();
    let pipeline = Pipeline::from_settings(settings, embedder, None, &a2rag::net::Remote::new()).unwrap();
    for (id, title, text) in DOCS {
        let doc = SourceDoc {
            id: id.to_string(),
            title: title.to_string(),
            text: text.to_string(),
            source: format!("{id}.txt"),
            links: Vec::new(),
        };
        kb.commit_document(pipeline.prepare(doc).unwrap(), &Author::owner()).unwrap();
    }
    kb.flush().unwrap();
}

/// Every stored vector keyed by what it belongs to, so two KBs with different ids compare.
fn vectors_by_content(kb: &Kb) -> HashMap<String, Vec<f32>> {
    let mut out = HashMap::new();
    for id in kb.chunk_ids() {
        let chunk = kb.chunk(id).unwrap();
        let doc = kb.doc(chunk.doc).unwrap();
        out.insert(format!("chunk {} {}", doc.id, chunk.ordinal), kb.chunk_index().get(id as u64).unwrap());
    }
    for doc in kb.docs() {
        // A one-chunk document's summary vector is its chunk's.
        if let Some(summary) = kb.summary_index().get(doc.key as u64) {
            out.insert(format!("summary {}", doc.id), summary);
        }
    }
    for node in kb.nodes() {
        out.insert(format!("node {}", node.name), kb.node_index().get(node.id as u64).unwrap());
    }
    out
}

#[test]
fn reindex_switches_embedder_and_matches_fresh_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let old = settings(dir.path(), 512);
    ingest(&old, Arc::new(HashEmbedder::new(512)));

    let new = settings(dir.path(), 256);
    let new_embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(256));
    let refused = open(&new, &new_embedder).err();
    assert!(
        matches!(&refused, Some(Error::EmbedderMismatch { stored, configured }) if stored == "hash-512" && configured == "hash-256"),
        "{refused:?}"
    );

    let report = reindex_retry(&new, &new_embedder).unwrap();
    assert_eq!(report.previous_embedder.as_deref(), Some("hash-512"));
    assert_eq!(report.embedder, "hash-256");
    assert_eq!(report.orphans_removed, 0);

    let kb = open(&new, &new_embedder).unwrap();
    let stats = kb.stats();
    assert_eq!(stats.embedder, "hash-256");
    assert_eq!(report.chunks, stats.chunks);
    assert!(stats.chunks > DOCS.len(), "documents should span several chunks");
    assert_eq!(report.nodes, stats.nodes);
    assert_eq!(stats.chunk_vectors, stats.chunks);
    let apart = kb.docs().filter(|d| d.chunks.len() > 1).count();
    assert!(apart > 0, "some documents should have a summary embedded apart");
    assert_eq!((report.summaries, stats.summary_vectors), (apart, apart));
    assert_eq!(stats.entity_vectors, stats.nodes);

    let hits = kb
        .search(
            &a2rag::embed::EmbeddedQuery::new(kb.embedder().as_ref(), "river flowing through Vienna and Budapest")
                .unwrap(),
            SearchMode::Vector,
            3,
            (&kb.settings().retrieve).into(),
        )
        .unwrap();
    let top = kb.chunk(hits[0].0).unwrap();
    assert_eq!(kb.doc(top.doc).unwrap().id, "danube");
    let hits = kb
        .search(
            &a2rag::embed::EmbeddedQuery::new(kb.embedder().as_ref(), "green plants sunlight chlorophyll").unwrap(),
            SearchMode::Hybrid,
            3,
            (&kb.settings().retrieve).into(),
        )
        .unwrap();
    assert_eq!(kb.doc(kb.chunk(hits[0].0).unwrap().doc).unwrap().id, "photosynthesis");

    // The reindexed vectors are exactly those a fresh ingest with the new embedder writes.
    let reindexed = vectors_by_content(&kb);
    drop(kb);
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh_settings = settings(fresh_dir.path(), 256);
    ingest(&fresh_settings, new_embedder.clone());
    let fresh = open(&fresh_settings, &new_embedder).unwrap();
    let fresh = vectors_by_content(&fresh);
    assert_same_vectors(&reindexed, &fresh);
}

/// Equal up to float rounding: the hash embedder sums features in HashMap order, which varies
/// between runs, so the last bits of a vector may differ.
fn assert_same_vectors(a: &HashMap<String, Vec<f32>>, b: &HashMap<String, Vec<f32>>) {
    assert_eq!(a.len(), b.len());
    for (key, vb) in b {
        let va = a.get(key).unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(va.len(), vb.len(), "{key}");
        let diff = va.iter().zip(vb).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-6, "{key} differs by {diff}");
    }
}

#[test]
fn reindex_is_idempotent_and_can_go_back() {
    let dir = tempfile::tempdir().unwrap();
    let s512 = settings(dir.path(), 512);
    let e512: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(512));
    ingest(&s512, e512.clone());
    let before = vectors_by_content(&open(&s512, &e512).unwrap());

    let s256 = settings(dir.path(), 256);
    let e256: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(256));
    reindex_retry(&s256, &e256).unwrap();
    let again = reindex_retry(&s256, &e256).unwrap();
    assert_eq!(again.previous_embedder.as_deref(), Some("hash-256"));
    open(&s256, &e256).unwrap();

    reindex_retry(&s512, &e512).unwrap();
    let after = vectors_by_content(&open(&s512, &e512).unwrap());
    assert_same_vectors(&before, &after);
}

#[test]
fn reindex_of_an_empty_directory_records_the_embedder() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), 128);
    let e: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(128));
    let report = reindex_retry(&s, &e).unwrap();
    assert_eq!(report.previous_embedder, None);
    assert_eq!((report.chunks, report.summaries, report.nodes), (0, 0, 0));
    open(&s, &e).unwrap();
}

/// A document's fact vectors commit ahead of its records (`KbBatch::put_fact_vector_ahead`),
/// so a crash in between leaves vectors no edge owns: opening skips them and reindex removes
/// them.
#[test]
fn fact_vectors_no_edge_owns_are_skipped_on_open_and_removed_by_reindex() {
    use a2rag::kb::store::{Family, KbBatch};
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), 64);
    let e: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(64));
    ingest(&s, e.clone());
    let kb = open(&s, &e).unwrap();
    let facts = kb.stats().fact_vectors;
    assert!(facts > 0, "the documents state facts");
    let stored = |kb: &Kb| kb.store().scan_vectors(Family::FactVec).count();
    assert_eq!(stored(&kb), facts);
    let mut crashed = KbBatch::default();
    let orphan = e.embed_one("Danube flows through Atlantis").unwrap();
    crashed.put_fact_vector_ahead(1 << 40, &a2rag::kb::packed::Row::of(&orphan));
    kb.store().commit(crashed).unwrap();
    drop(kb);

    let kb = open(&s, &e).unwrap();
    assert_eq!(kb.stats().fact_vectors, facts, "the orphan is not indexed");
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
    assert_eq!(stored(&kb), facts + 1);
    drop(kb);

    let report = reindex_retry(&s, &e).unwrap();
    assert_eq!(report.orphans_removed, 1);
    assert_eq!(report.facts, facts, "one vector per distinct fact");
    let kb = open(&s, &e).unwrap();
    assert_eq!(stored(&kb), facts);
    assert!(kb.integrity_violations().is_empty(), "{:?}", kb.integrity_violations());
}

/// A one-chunk document's chunk vector stands for its summary: none is stored apart and the
/// KB checks clean; the copy an older build stored is no orphan, and reindex drops it.
#[test]
fn a_one_chunk_document_has_no_summary_vector_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), 512);
    let e: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(512));
    ingest(&s, e.clone());
    let mut kb = open(&s, &e).unwrap();
    let pipeline = Pipeline::from_settings(&s, e.clone(), None, &a2rag::net::Remote::new()).unwrap();
    let short = SourceDoc {
        id: "bay".into(),
        title: "Quiet Bay".into(),
        text: "Quiet Bay lies north of the harbour.".into(),
        source: "bay.txt".into(),
        links: Vec::new(),
    };
    kb.commit_document(pipeline.prepare(short).unwrap(), &Author::owner()).unwrap();
    let doc = kb.doc_by_id("bay").unwrap().clone();
    assert_eq!(doc.chunks.len(), 1);
    assert!(kb.summary_index().get(doc.key as u64).is_none());
    assert_eq!(kb.stats().summary_vectors, DOCS.len());
    assert_eq!(kb.integrity_violations(), Vec::<String>::new());

    let copy = kb.chunk_index().get(doc.chunks[0] as u64).unwrap();
    let mut batch = a2rag::kb::store::KbBatch::default();
    batch.put_vector(a2rag::kb::store::Family::SummaryVec, doc.key as u64, &copy);
    kb.store().commit(batch).unwrap();
    drop(kb);
    let kb = open(&s, &e).unwrap();
    assert_eq!(kb.stats().summary_vectors, DOCS.len() + 1);
    assert_eq!(kb.integrity_violations(), Vec::<String>::new());
    drop(kb);
    assert_eq!(reindex_retry(&s, &e).unwrap().summaries, DOCS.len());
    let kb = open(&s, &e).unwrap();
    assert_eq!(kb.stats().summary_vectors, DOCS.len());
    assert_eq!(kb.integrity_violations(), Vec::<String>::new());
}
