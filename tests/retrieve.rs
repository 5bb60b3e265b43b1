//! The retriever's stages on a small hand-built graph (triples imported from JSONL).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use a2rag::control::{Controller, QueryRequest};
use a2rag::embed::{EmbeddedQuery, Embedder, EmbedderKind, Embedding, HashEmbedder};
use a2rag::ingest::triples::TripleImport;
use a2rag::kb::passage_graph::{PassageGraph, synonym_pairs};
use a2rag::kb::{Kb, SearchMode};
use a2rag::retrieve::sufficiency::{EvidenceCheck, Judgement, SufficiencyCheck};
use a2rag::retrieve::{RetrieveOptions, Retriever, Stage, Strategy, bridge, facts, fusion, local, mapback, seeds};
use common::*;

fn embedded(kb: &Kb, text: &str) -> EmbeddedQuery {
    EmbeddedQuery::new(kb.embedder().as_ref(), text).unwrap()
}

/// Alice --married to--> Bob --born in--> Paris; Carol --works at--> Acme --located in--> Paris;
/// Alice --born in--> Rome.
fn graph_kb(dir: &std::path::Path) -> Kb {
    let settings = settings_in(&dir.join("kb"));
    let (mut kb, mut pipeline) = open(&settings);
    let docs = dir.join("docs.jsonl");
    std::fs::write(
        &docs,
        [
            r#"{"id":"d1","title":"Alice","text":"Alice Moreau married Bob Lenoir in 1990. Alice Moreau was born in Rome."}"#,
            r#"{"id":"d2","title":"Bob","text":"Bob Lenoir was born in Paris."}"#,
            r#"{"id":"d3","title":"Carol","text":"Carol Diaz works at Acme Tools."}"#,
            r#"{"id":"d4","title":"Acme","text":"Acme Tools is located in Paris."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let triples = dir.join("t.jsonl");
    std::fs::write(
        &triples,
        [
            r#"{"doc_title":"Alice","subject":"Alice Moreau","relation":"married to","object":"Bob Lenoir"}"#,
            r#"{"doc_title":"Alice","subject":"Alice Moreau","relation":"born in","object":"Rome"}"#,
            r#"{"doc_title":"Bob","subject":"Bob Lenoir","relation":"born in","object":"Paris"}"#,
            r#"{"doc_title":"Carol","subject":"Carol Diaz","relation":"works at","object":"Acme Tools"}"#,
            r#"{"doc_title":"Acme","subject":"Acme Tools","relation":"located in","object":"Paris"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    pipeline.triples = Some(TripleImport::load(&triples).unwrap());
    ingest(&mut kb, &pipeline, &[docs]);
    kb
}

#[test]
fn local_stage_keeps_only_edges_consistent_with_relation_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let s = seeds::find_seeds(&kb, &kb.settings().retrieve, &embedded(&kb, "Where was Alice Moreau born in?")).unwrap();
    assert_eq!(s.entities[0].name, "Alice Moreau");
    assert!(s.relations.iter().any(|r| r.label == "born in"), "{:?}", s.relations);
    let edges = local::expand(&kb, &s, 10);
    let relations: Vec<&str> = edges.iter().map(|(e, _)| &*kb.edge(*e).unwrap().relation).collect();
    assert!(relations.contains(&"born in"));
    assert!(!relations.contains(&"married to"), "filtered by the relation seed: {relations:?}");
}

#[test]
fn bridge_stage_finds_the_node_between_two_seeds_with_its_paths() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let alice = kb.node_by_alias("Alice Moreau").unwrap();
    let carol = kb.node_by_alias("Carol Diaz").unwrap();
    let paris = kb.node_by_alias("Paris").unwrap();
    let params = bridge::BridgeParams { hops: 2, max_bridges: 5, max_paths: 3 };
    let found = bridge::find_bridges(&kb, &[alice, carol], &params);
    assert!(found.iter().any(|b| b.node == paris), "Paris is 2 hops from both seeds");
    let paris_bridge = found.iter().find(|b| b.node == paris).unwrap();
    assert_eq!(paris_bridge.paths.len(), 2, "one shortest path from each seed");
    assert!(paris_bridge.paths.iter().all(|p| p.len() == 2));
    assert!(bridge::find_bridges(&kb, &[alice], &params).is_empty(), "one seed has no bridges");
    let params1 = bridge::BridgeParams { hops: 1, ..params };
    assert!(!bridge::find_bridges(&kb, &[alice, carol], &params1).iter().any(|b| b.node == paris), "hop cap respected");
}

#[test]
fn the_bridge_search_reaches_a_hub_but_does_not_walk_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings_in(&dir.path().join("kb"));
    let (mut kb, mut pipeline) = open(&settings);
    let docs = dir.path().join("docs.jsonl");
    std::fs::write(
        &docs,
        [
            r#"{"id":"d1","title":"Club","text":"The Harbour Club has many members."}"#,
            r#"{"id":"d2","title":"Ann","text":"Ann Quill joined the Harbour Club. Ben Roe met Member Seven."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    // 1,200 members make the club a hub; Ann is one hop from it, Ben one hop from a member.
    let mut triples: Vec<String> = (0..1200)
        .map(|i| {
            format!(r#"{{"doc_title":"Club","subject":"Member {i}","relation":"member of","object":"Harbour Club"}}"#)
        })
        .collect();
    triples.push(r#"{"doc_title":"Ann","subject":"Ann Quill","relation":"member of","object":"Harbour Club"}"#.into());
    triples.push(r#"{"doc_title":"Ann","subject":"Ben Roe","relation":"met","object":"Member 7"}"#.into());
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, triples.join("\n")).unwrap();
    pipeline.triples = Some(TripleImport::load(&path).unwrap());
    ingest(&mut kb, &pipeline, &[docs]);
    let [ann, ben, club, member] =
        ["Ann Quill", "Ben Roe", "Harbour Club", "Member 7"].map(|name| kb.node_by_alias(name).unwrap());
    let params = bridge::BridgeParams { hops: 2, max_bridges: 5, max_paths: 3 };
    let found: Vec<_> = bridge::find_bridges(&kb, &[ann, ben], &params).into_iter().map(|b| b.node).collect();
    assert!(found.contains(&club), "the hub itself joins the seeds: {found:?}");
    assert!(!found.contains(&member), "reached from Ann only through the hub: {found:?}");
}

#[test]
fn map_back_ranks_chunks_by_their_evidence_and_escalation_is_monotonic() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let bob = kb.node_by_alias("Bob Lenoir").unwrap();
    let rome = kb.node_by_alias("Rome").unwrap();
    let mut scores = mapback::ChunkScores::default();
    scores.add_nodes(&kb, &[(bob, 1.0), (rome, 0.1)]);
    let ranked = scores.ranked();
    let top_doc = &kb.doc(kb.chunk(ranked[0].0).unwrap().doc).unwrap().id;
    assert!(top_doc == "d1" || top_doc == "d2");
    assert!(ranked.windows(2).all(|w| w[0].1 >= w[1].1), "sorted by score");

    let r = Retriever::new(&kb)
        .retrieve(
            "Which city links Alice Moreau and Carol Diaz?",
            RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 },
        )
        .unwrap();
    let stages: Vec<Stage> = r.stages.iter().map(|s| s.stage).collect();
    assert!(stages.windows(2).all(|w| w[0] < w[1]), "each stage at most once, in order: {stages:?}");
    assert!(stages.len() >= 2, "two unconnected seeds escalate past local: {stages:?}");
    assert!(r.paths.iter().any(|p| p.iter().any(|h| h.object == "Paris")), "bridge paths reach Paris: {:?}", r.paths);
    let docs: Vec<&str> = r.chunks.iter().map(|c| c.doc_id.as_str()).collect();
    assert!(docs.contains(&"d2") || docs.contains(&"d4"), "{docs:?}");

    let fallback = Retriever::new(&kb)
        .retrieve(
            "zzz qqq located",
            RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 },
        )
        .unwrap();
    assert_eq!(fallback.stage, Stage::Fallback, "no seed aligns, no fact names anything the query names");
    assert_eq!(fallback.chunks[0].doc_id, "d4", "dense + BM25 still find text");
}

/// The hash embedder's vectors under a trained model's kind, to see which text list the
/// fusion picks for each kind on the same KB.
struct DeclaredSemantic(HashEmbedder);

impl Embedder for DeclaredSemantic {
    fn id(&self) -> String {
        self.0.id()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn kind(&self) -> EmbedderKind {
        EmbedderKind::Semantic
    }
    fn embed(&self, texts: &[&str]) -> a2rag::Result<Vec<Embedding>> {
        self.0.embed(texts)
    }
}

#[test]
fn without_seeds_or_facts_retrieval_falls_back_to_the_embedders_text_list() {
    let dir = tempfile::tempdir().unwrap();
    drop(graph_kb(dir.path()));
    let settings = Arc::new(settings_in(&dir.path().join("kb")));
    let lexical: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(512));
    let semantic: Arc<dyn Embedder> = Arc::new(DeclaredSemantic(HashEmbedder::new(512)));
    let ids = |r: a2rag::retrieve::Retrieval| r.chunks.iter().map(|c| c.chunk).collect::<Vec<_>>();
    let options = |strategy| RetrieveOptions { strategy, min_stage: Stage::Local, top_k: 4 };
    let mut fallbacks = Vec::new();
    for (embedder, list) in [(lexical, SearchMode::Bm25), (semantic, SearchMode::Hybrid)] {
        let kb = Kb::open(settings.clone(), embedder).unwrap();
        let query = embedded(&kb, "zzz qqq located");
        let seeds = seeds::find_seeds(&kb, &kb.settings().retrieve, &query).unwrap();
        assert!(seeds.entities.is_empty() && seeds.facts.is_empty(), "{seeds:?}");
        let retriever = Retriever::new(&kb);
        let adaptive = retriever.retrieve_embedded(&query, options(Strategy::Adaptive)).unwrap();
        assert_eq!((adaptive.stage, adaptive.graph_share, adaptive.stages.len()), (Stage::Fallback, 0.0, 0));
        let text = retriever.retrieve_embedded(&query, options(Strategy::Text(list))).unwrap();
        let adaptive = ids(adaptive);
        assert_eq!(adaptive, ids(text), "the adaptive fallback is the {list:?} ranking");
        fallbacks.push(adaptive);
        let ppr = retriever.retrieve_embedded(&query, options(Strategy::PprAlways)).unwrap();
        let dense = retriever.retrieve_embedded(&query, options(Strategy::Text(SearchMode::Vector))).unwrap();
        assert_eq!(ppr.stage, Stage::Fallback);
        assert_eq!(ids(ppr), ids(dense), "the HippoRAG baseline falls back to dense retrieval");
    }
    assert_ne!(fallbacks[0], fallbacks[1], "BM25 alone and hybrid rank this query differently");
}

#[test]
fn a_rewrite_adds_its_new_evidence_after_what_the_question_found() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let retriever = Retriever::new(&kb);
    let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 2 };
    let question = retriever.retrieve("Whom did Alice Moreau marry?", options).unwrap();
    let rewrite = retriever.retrieve("Carol Diaz works at Acme Tools", options).unwrap();
    let ids = |r: &a2rag::retrieve::Retrieval| r.chunks.iter().map(|c| c.chunk).collect::<Vec<_>>();
    let (first, later) = (ids(&question), ids(&rewrite));
    assert!(!first.is_empty() && later.iter().any(|c| !first.contains(c)), "{first:?} {later:?}");
    let new: Vec<_> = later.iter().copied().filter(|c| !first.contains(c)).collect();
    let reports = question.stages.len() + rewrite.stages.len();
    let asked: Vec<String> = question.seeds.entities.iter().map(|s| s.name.clone()).collect();
    let rewritten: Vec<String> = rewrite.seeds.entities.iter().map(|s| s.name.clone()).collect();
    assert_ne!(asked, rewritten, "the rewrite aligns other seeds");
    let merged = question.absorb(rewrite, 2);
    let merged_ids = ids(&merged);
    assert_eq!(&merged_ids[..first.len()], first.as_slice(), "the question's own evidence keeps its ranks");
    assert_eq!(&merged_ids[first.len()..], new.as_slice(), "then the rewrite's new chunks, once each");
    assert_eq!(merged.stages.len(), reports, "both attempts' stage reports are kept");
    let kept: Vec<String> = merged.seeds.entities.iter().map(|s| s.name.clone()).collect();
    assert_eq!(kept, asked, "the seeds stay what the question itself names");
}

#[test]
fn facts_closest_to_the_query_link_first_and_seed_the_global_stage() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    assert_eq!(kb.stats().fact_vectors, kb.stats().edges, "every edge is embedded as a fact");
    let query = embedded(&kb, "Where was Bob Lenoir born?");
    let linked = facts::link_facts(&kb, &query, 5).unwrap();
    assert_eq!(linked[0].fact, "Bob Lenoir born in Paris", "{linked:?}");
    assert!(
        linked.windows(2).all(|w| w[0].score > w[1].score || (w[0].score == w[1].score && w[0].edge < w[1].edge)),
        "best first, ties on edge id: {linked:?}"
    );
    assert_eq!(linked[0].score, 1.0, "scores are relative to the best fact");
    let bob = kb.node_by_alias("Bob Lenoir").unwrap();
    assert!(
        linked.iter().all(|f| f.subject == bob || f.object == bob),
        "only facts naming a query entity link: {linked:?}"
    );
    assert_eq!(facts::link_facts(&kb, &query, 1).unwrap(), linked[..1], "a smaller k keeps the head of the order");
    let r = Retriever::new(&kb)
        .retrieve_embedded(&query, RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Global, top_k: 3 })
        .unwrap();
    assert_eq!((r.stage, r.chunks[0].doc_id.as_str()), (Stage::Global, "d2"), "{:?}", r.chunks);
    let ppr = Retriever::new(&kb)
        .retrieve_embedded(&query, RetrieveOptions { strategy: Strategy::PprAlways, min_stage: Stage::Local, top_k: 3 })
        .unwrap();
    assert_eq!(ppr.stage, Stage::Global, "the HippoRAG 2 baseline walks from the linked facts alone");
}

#[test]
fn synonym_edges_join_close_names_that_share_a_blocking_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_in(&dir.path().join("kb"));
    settings.alias.enabled = false;
    let (mut kb, pipeline) = open(&settings);
    let docs = dir.path().join("docs.jsonl");
    std::fs::write(
        &docs,
        [
            r#"{"id":"a","title":"Harbour","text":"The Harbour Authority of Kell opened the pier. Kell Harbour Authority runs the port."}"#,
            r#"{"id":"b","title":"Mill","text":"Varga Mill grinds grain near the river."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    ingest(&mut kb, &pipeline, &[docs]);
    let pairs = synonym_pairs(&kb, 0.5);
    assert!(
        !pairs.is_empty(),
        "the two spellings of the authority are close: {:?}",
        kb.nodes().map(|n| &n.name).collect::<Vec<_>>()
    );
    for (a, b, cos) in &pairs {
        assert!(a < b && *cos >= 0.5);
        let key = |n: u32| a2rag::kb::align::blocking_keys(&kb.node(n).unwrap().name);
        assert!(key(*a).iter().any(|k| key(*b).contains(k)), "pairs share a blocking key");
    }
    assert!(synonym_pairs(&kb, 1.01).is_empty(), "no pair is closer than identical");
    // Every pair sharing a key (the blocks are small here), in order, each once, whichever
    // core scored it.
    let all = synonym_pairs(&kb, -1.0);
    let ids: Vec<u32> = kb.nodes().map(|n| n.id).collect();
    let keys = |n: u32| a2rag::kb::align::blocking_keys(&kb.node(n).unwrap().name);
    let sharing = ids.iter().flat_map(|a| ids.iter().map(move |b| (*a, *b))).filter(|(a, b)| a < b);
    let sharing = sharing.filter(|(a, b)| keys(*a).iter().any(|k| keys(*b).contains(k))).count();
    assert_eq!(all.len(), sharing);
    assert!(all.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)), "sorted, each once");
    let strict = synonym_pairs(&kb, 0.9);
    assert!(strict.iter().all(|p| pairs.contains(p)), "a higher threshold keeps a subset");
    let graph = PassageGraph::build(&kb, 0.5);
    assert_eq!(graph.synonym_edges, pairs.len());
    let (a, b, cos) = pairs[0];
    let row = graph.node_row(a).unwrap();
    let entry = graph
        .csr
        .neighbours(row)
        .iter()
        .position(|t| *t as usize == graph.node_row(b).unwrap())
        .expect("a synonym edge");
    assert_eq!(graph.csr.neighbour_weights(row)[entry], cos, "weighted by the cosine");
}

/// Counts how often a given text is embedded.
struct Counting {
    inner: HashEmbedder,
    text: String,
    seen: AtomicUsize,
}

impl Embedder for Counting {
    fn id(&self) -> String {
        self.inner.id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn kind(&self) -> EmbedderKind {
        self.inner.kind()
    }
    fn embed(&self, texts: &[&str]) -> a2rag::Result<Vec<Embedding>> {
        self.seen.fetch_add(texts.iter().filter(|t| **t == self.text).count(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

#[test]
fn a_question_is_embedded_once_per_query() {
    let dir = tempfile::tempdir().unwrap();
    drop(graph_kb(dir.path()));
    let question = "Which city links Alice Moreau and Carol Diaz?";
    let counting =
        Arc::new(Counting { inner: HashEmbedder::new(512), text: question.into(), seen: AtomicUsize::new(0) });
    let settings = Arc::new(settings_in(&dir.path().join("kb")));
    let kb = Kb::open(settings.clone(), counting.clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let request = QueryRequest { question: question.into(), policy: None, budget: None };
    let response = runtime.block_on(Controller::embedded().run(&kb, &settings, &request));
    assert!(response.retrieval.is_some_and(|r| r.stage != Stage::Fallback), "the question reached the graph");
    assert_eq!(response.queries[0], question, "the question itself is retrieved for first");
    assert_eq!(
        counting.seen.load(Ordering::SeqCst),
        1,
        "gate, seeds, facts and dense search share one embedding (rewrites are other texts)"
    );
    counting.seen.store(0, Ordering::SeqCst);
    Retriever::new(&kb)
        .retrieve(question, RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 })
        .unwrap();
    assert_eq!(counting.seen.load(Ordering::SeqCst), 1);
}

/// A retrieval without its timings, to compare two of them.
fn untimed(mut r: a2rag::retrieve::Retrieval) -> String {
    r.micros = 0;
    for s in &mut r.stages {
        s.micros = 0;
    }
    serde_json::to_string(&r).unwrap()
}

#[test]
fn a_run_driven_stage_by_stage_gives_what_retrieve_gives() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let check = EvidenceCheck { threshold: kb.settings().retrieve.sufficiency_threshold };
    let queries = ["Which city links Alice Moreau and Carol Diaz?", "Where was Alice Moreau born?", "zzz qqq located"];
    let strategies = [Strategy::Adaptive, Strategy::LocalOnly, Strategy::PprAlways, Strategy::Text(SearchMode::Hybrid)];
    let mut judged = 0;
    for query in queries {
        for strategy in strategies {
            for min_stage in [Stage::Local, Stage::Bridge, Stage::Global] {
                let options = RetrieveOptions { strategy, min_stage, top_k: 5 };
                let retriever = Retriever::new(&kb);
                let mut run = retriever.start(&embedded(&kb, query), options).unwrap();
                while let Some(evidence) = run.next_stage().unwrap() {
                    let judgement = check.judge(&kb, &evidence);
                    run.judge(judgement);
                    judged += 1;
                }
                let driven = run.finish().unwrap();
                let direct = retriever.retrieve(query, options).unwrap();
                assert_eq!(untimed(driven), untimed(direct), "{query} {strategy:?} {min_stage:?}");
            }
        }
    }
    assert!(judged > 10, "the graph queries ran stages: {judged}");
}

#[test]
fn a_run_escalates_until_a_judgement_says_sufficient() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let query = "Which city links Alice Moreau and Carol Diaz?";
    let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 };
    let verdict = |sufficient| Judgement::verdict(sufficient, "test".into());
    let retriever = Retriever::new(&kb);

    // Never sufficient: every stage once, in order; then nothing more runs.
    let mut run = retriever.start(&embedded(&kb, query), options).unwrap();
    let mut seen = Vec::new();
    while let Some(evidence) = run.next_stage().unwrap() {
        assert!(!evidence.chunks.is_empty() && evidence.query == query);
        seen.push(evidence.stage);
        run.judge(verdict(false));
    }
    assert_eq!(seen, [Stage::Local, Stage::Bridge, Stage::Global]);
    assert!(run.next_stage().unwrap().is_none());
    let r = run.finish().unwrap();
    assert_eq!((r.stage, r.sufficient, r.stages.len()), (Stage::Global, false, 3));

    // Insufficient after Local, sufficient after Bridge: stops there.
    let mut run = retriever.start(&embedded(&kb, query), options).unwrap();
    let local = run.next_stage().unwrap().map(|e| e.stage);
    run.judge(verdict(false));
    let bridge = run.next_stage().unwrap().map(|e| (e.stage, e.paths.len()));
    run.judge(verdict(true));
    assert_eq!(local, Some(Stage::Local));
    assert!(matches!(bridge, Some((Stage::Bridge, paths)) if paths > 0), "{bridge:?}");
    assert!(run.next_stage().unwrap().is_none(), "a sufficient stage ends escalation");
    let r = run.finish().unwrap();
    assert_eq!((r.stage, r.sufficient), (Stage::Bridge, true));
    assert_eq!(r.stages.iter().map(|s| s.judgement.sufficient).collect::<Vec<_>>(), [false, true]);

    // A stage awaiting its judgement is shown again, not run twice; unjudged, it is insufficient.
    let mut run =
        retriever.start(&embedded(&kb, query), RetrieveOptions { min_stage: Stage::Bridge, ..options }).unwrap();
    assert_eq!(run.next_stage().unwrap().map(|e| e.stage), Some(Stage::Bridge));
    assert_eq!(run.next_stage().unwrap().map(|e| e.stage), Some(Stage::Bridge));
    let r = run.finish().unwrap();
    assert_eq!(r.stages.len(), 1);
    assert_eq!((r.stage, r.sufficient, r.stages[0].judgement.reason.as_str()), (Stage::Bridge, false, "not judged"));

    // No seed: no stage to judge.
    let mut run = retriever.start(&embedded(&kb, "zzz qqq located"), options).unwrap();
    assert!(run.next_stage().unwrap().is_none());
    assert_eq!(run.finish().unwrap().stage, Stage::Fallback);
}

/// A deadline closer than the global stage's reserve: the first stage runs (a retrieval
/// answers from at least one), the global stage does not, and the retrieval says why.
#[test]
fn a_deadline_too_close_for_the_global_stage_skips_it_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let kb = graph_kb(dir.path());
    let query = embedded(&kb, "Which city links Alice Moreau and Carol Diaz?");
    let options = RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 5 };
    let never = EvidenceCheck { threshold: 2.0 };
    let retriever = Retriever::new(&kb).with_check(Box::new(never));

    let unhurried = retriever.retrieve_within(&query, options, None).unwrap();
    assert_eq!(
        unhurried.stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
        [Stage::Local, Stage::Bridge, Stage::Global]
    );
    assert!(unhurried.skipped.is_none());

    let soon = std::time::Instant::now() + std::time::Duration::from_millis(2);
    let hurried = retriever.retrieve_within(&query, options, Some(soon)).unwrap();
    assert!(hurried.stages.iter().all(|s| s.stage != Stage::Global), "{:?}", hurried.stages);
    assert_eq!(hurried.stages.first().map(|s| s.stage), Some(Stage::Local));
    let skipped = hurried.skipped.expect("a stage was skipped");
    assert!(skipped.stage > Stage::Local);
    assert!(skipped.reason.starts_with("budget: ") && skipped.reason.contains("ms left"), "{}", skipped.reason);
    assert!(!hurried.chunks.is_empty(), "it answers from what it has");

    // Already past: the first stage still runs, nothing after it.
    let past = std::time::Instant::now();
    let late = retriever.retrieve_within(&query, options, Some(past)).unwrap();
    assert_eq!(late.stages.iter().map(|s| s.stage).collect::<Vec<_>>(), [Stage::Local]);
    assert_eq!(late.skipped.map(|s| s.stage), Some(Stage::Bridge));
}

/// Forty facts about boats share the question's wording but name nothing it names; the one
/// fact about the person it names shares only the name. The nearest facts are the boats',
/// and the person's fact still links: every fact of a node the question names is scored.
#[test]
fn a_fact_naming_the_question_links_though_many_nearer_facts_name_nothing_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings_in(&dir.path().join("kb"));
    let (mut kb, mut pipeline) = open(&settings);
    let (firsts, seconds) = (
        ["Kelvar", "Tamsin", "Orlop", "Bruden", "Fenwick"],
        ["Quay", "Moss", "Dune", "Hythe", "Sorrel", "Tolk", "Wend", "Yarrow"],
    );
    let boats: Vec<String> =
        firsts.iter().flat_map(|a| seconds.iter().map(move |b| format!("{a}{}", b.to_lowercase()))).collect();
    let mut docs: Vec<String> = boats
        .iter()
        .map(|b| {
            format!(r#"{{"id":"{b}","title":"{b}","text":"{b} set sail from the harbour at dawn to fish herring."}}"#)
        })
        .collect();
    docs.push(r#"{"id":"ivo","title":"Ivo Marsh","text":"Ivo Marsh owns Green Cottage."}"#.into());
    let mut triples: Vec<String> = boats
        .iter()
        .map(|b| format!(r#"{{"doc_title":"{b}","subject":"{b}","relation":"sail from harbour at dawn to fish herring","object":"Tollo Pier"}}"#))
        .collect();
    triples
        .push(r#"{"doc_title":"Ivo Marsh","subject":"Ivo Marsh","relation":"owns","object":"Green Cottage"}"#.into());
    let (doc_file, triple_file) = (dir.path().join("docs.jsonl"), dir.path().join("t.jsonl"));
    std::fs::write(&doc_file, docs.join("\n")).unwrap();
    std::fs::write(&triple_file, triples.join("\n")).unwrap();
    pipeline.triples = Some(TripleImport::load(&triple_file).unwrap());
    ingest(&mut kb, &pipeline, &[doc_file]);
    let ivo = kb.node_by_alias("Ivo Marsh").expect("the person is a node");
    let query = embedded(&kb, "Which harbour did Ivo Marsh sail from at dawn to fish herring?");
    let nearest = kb.fact_index().search(&query.vector, 20).unwrap();
    assert_eq!(nearest.len(), 20);
    assert!(
        nearest.iter().all(|(id, _)| kb.edge(*id).is_some_and(|e| e.subject != ivo && e.object != ivo)),
        "the boats' facts are the nearest"
    );
    let linked = facts::link_facts(&kb, &query, 5).unwrap();
    assert_eq!(linked.len(), 1, "only the person's fact names what the question names: {linked:?}");
    assert_eq!(linked[0].fact, "Ivo Marsh owns Green Cottage");
    assert_eq!(linked[0].score, 1.0);
}

#[test]
fn each_passage_is_trusted_as_the_edges_read_from_it_were_made() {
    let dir = tempfile::tempdir().unwrap();
    let mut kb = graph_kb(dir.path());
    // Beside the imported triples, a folder the rule extractor reads.
    let pipeline =
        a2rag::ingest::Pipeline::from_settings(kb.settings(), kb.embedder().clone(), None, &a2rag::net::Remote::new())
            .unwrap();
    let notes = dir.path().join("notes.jsonl");
    std::fs::write(
        &notes,
        r#"{"id":"n1","title":"Dora","text":"Dora Vale met Bob Lenoir in Paris. Dora Vale later founded Vale Weaving in Lyon."}"#,
    )
    .unwrap();
    ingest(&mut kb, &pipeline, &[notes]);
    let chunk_titled =
        |title: &str| kb.chunk_ids().find(|id| kb.chunk(*id).is_some_and(|c| kb.chunk_title(c) == title)).unwrap();
    let (imported, rule) = (chunk_titled("Bob"), chunk_titled("Dora"));
    assert_eq!(kb.rule_edge_share_of([imported]), Some(0.0));
    assert_eq!(kb.rule_edge_share_of([rule]), Some(1.0), "the rule extractor read edges from the note");
    let whole = kb.rule_edge_share();
    assert!(whole > 0.0 && whole < 1.0, "{whole}");

    let share = fusion::GraphShare::new(&kb, Stage::Global, &[(rule, 1.0), (imported, 0.5)]);
    let connected = kb.passage_graph().largest_component_share;
    assert!(connected > 0.0);
    assert!((share.of(imported) - connected).abs() < 1e-6);
    assert!((share.of(rule) - connected / 3.0).abs() < 1e-6);
    // A passage without edges takes the share of the edges of the ranking's best passages.
    let best = kb.rule_edge_share_of([rule, imported]).unwrap();
    assert!(best > 0.0 && best < 1.0 && best != whole, "{best} {whole}");
    let ranked_share = connected * (3.0 - 2.0 * best) / 3.0;
    assert!((share.overall() - ranked_share).abs() < 1e-6, "{}", share.overall());
    assert!((share.of(u32::MAX) - ranked_share).abs() < 1e-6);
    // Without a ranking, the whole graph's share.
    let unranked = fusion::GraphShare::new(&kb, Stage::Global, &[]).overall();
    assert!((unranked - connected * (3.0 - 2.0 * whole) / 3.0).abs() < 1e-6);
    assert_eq!(fusion::GraphShare::new(&kb, Stage::Fallback, &[(rule, 1.0)]).overall(), 0.0);

    // The graph ranks the rule-made passage first and the imported one second; trusted three
    // times as much, the imported one leads the fusion.
    let fused = fusion::fuse(&[], &[(rule, 1.0), (imported, 0.5)], &share, 60.0);
    assert_eq!(fused.iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![imported, rule]);
    // The text list counts for a passage what its graph rank does not.
    let fused = fusion::fuse(&[(rule, 1.0)], &[(imported, 1.0), (rule, 0.5)], &share, 60.0);
    let score = |chunk| fused.iter().find(|(c, _)| *c == chunk).unwrap().1;
    let rule_expected = (1.0 - connected / 3.0) / 61.0 + (connected / 3.0) / 62.0;
    assert!((score(rule) - rule_expected).abs() < 1e-6, "{} vs {rule_expected}", score(rule));
}
