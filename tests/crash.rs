//! The crash loop: the real daemon is killed with SIGKILL at random (seeded) moments while
//! it ingests and while it approves or rejects proposals. After every kill the knowledge base
//! must open, pass the integrity check (documents, provenance, and curation: every decision
//! whole or absent), and hold everything the daemon acknowledged before it died.
//!
//! `A2RAG_CRASH_ITERATIONS` (default 100) and `A2RAG_CRASH_SEED` (default 17) steer it; a
//! failure prints the seed and iteration to replay.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use a2rag::control::QueryResponse;
use a2rag::control::budget::Ledger;
use a2rag::curate::{self, Status};
use a2rag::ingest::triples::TripleImport;
use a2rag::kb::audit::Action;

const TOWNS: usize = 60;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A KB of towns whose graph holds only imported triples, so the rule extractor's triples of
/// every sentence can be proposed: a pool of pending proposals to decide.
fn prepare(dir: &Path) {
    let docs = dir.join("towns.jsonl");
    let triples = dir.join("towns-triples.jsonl");
    let mut d = std::fs::File::create(&docs).unwrap();
    let mut t = std::fs::File::create(&triples).unwrap();
    for i in 0..TOWNS {
        let title = format!("Crash Town {i}");
        let text = format!(
            "{title} lies on the River Ember{}. The mayor of {title} is Person{i} Novak. {title} was founded by Count Vel{i}.",
            i % 7
        );
        writeln!(d, "{}", json!({"id": title, "title": title, "text": text})).unwrap();
        writeln!(t, "{}", json!({"doc_title": title, "subject": title, "relation": "is in", "object": "Crashland"}))
            .unwrap();
    }
    let settings = common::settings_in(&dir.join("data"));
    let (mut kb, mut pipeline) = common::open(&settings);
    pipeline.triples = Some(TripleImport::load(&triples).unwrap());
    let report = common::ingest(&mut kb, &pipeline, &[docs]);
    assert_eq!(report.added, TOWNS, "{report:?}");
    let cited: Vec<u32> = kb.chunk_ids().collect();
    let response = QueryResponse {
        question: "What do the towns say?".into(),
        answer: Some("they say much".into()),
        answer_form: None,
        confidence: Some(1.0),
        candidate: None,
        abstained: None,
        abstain_reason: None,
        evidence: Vec::new(),
        cited,
        paths: Vec::new(),
        answer_path: Vec::new(),
        stage: None,
        iterations: 1,
        queries: Vec::new(),
        verdicts: Vec::new(),
        ledger: Ledger::new(settings.budget),
        trace: Vec::new(),
        retrieval: None,
    };
    let proposed = curate::propose_from_response(&kb, &response).unwrap();
    assert!(proposed.len() >= 100, "only {} proposals", proposed.len());
    kb.flush().unwrap();
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let socket = dir.join("crash.sock");
        let listen = vec!["--listen".to_string(), format!("unix:{}", socket.display())];
        let (child, _) = common::spawn_serve(&dir.join("data"), &listen, "a2rag: listening on");
        Daemon { child, socket }
    }

    fn connect(&self) -> UnixStream {
        let stream = UnixStream::connect(&self.socket).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
    }

    /// SIGKILL, then every line the daemon had sent before it died.
    fn kill(mut self, stream: UnixStream) -> Vec<Value> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        drop(self);
        BufReader::new(stream).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn send(stream: &mut UnixStream, message: Value) {
    writeln!(stream, "{message}").unwrap();
}

fn acknowledged(replies: &[Value], id: &str) -> bool {
    replies.iter().any(|r| r["id"] == id && r.get("result").is_some())
}

#[test]
fn kill_9_during_ingest_and_curation_loses_nothing_acknowledged_and_keeps_decisions_whole() {
    let iterations = env_or("A2RAG_CRASH_ITERATIONS", 100);
    let seed = env_or("A2RAG_CRASH_SEED", 17);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let started = Instant::now();
    let mut acked_docs: Vec<String> = Vec::new();
    let mut acked_decisions: Vec<(u64, Status)> = Vec::new();
    let (mut kills_mid_ingest, mut kills_mid_decision) = (0, 0);
    for i in 0..iterations {
        let context = format!("seed {seed}, iteration {i}");
        let daemon = Daemon::start(dir.path());
        let mut stream = daemon.connect();
        let decision = if i % 2 == 0 {
            let docs: Vec<Value> = (0..12)
                .map(|k| json!({"id": format!("c{i}-{k}"), "title": format!("Crashed Village {i} {k}"),
                                "text": format!("Crashed Village {i} {k} lies near Crash Town {k}. Its bell was cast by Smith{i} Brass in {}.", 1500 + k)}))
                .collect();
            send(
                &mut stream,
                json!({"jsonrpc": "2.0", "id": "ingest", "method": "ingest", "params": {"documents": docs}}),
            );
            std::thread::sleep(Duration::from_micros(rng.random_range(0..150_000)));
            None
        } else {
            send(
                &mut stream,
                json!({"jsonrpc": "2.0", "id": "list", "method": "proposals.list", "params": {"status": "pending"}}),
            );
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let pending: Value = serde_json::from_str(&line).unwrap();
            let pending = pending["result"].as_array().unwrap().clone();
            assert!(!pending.is_empty(), "{context}: the pool of proposals ran out");
            let id = pending[rng.random_range(0..pending.len())]["id"].as_u64().unwrap();
            let approve = rng.random_bool(0.5);
            let method = if approve { "proposals.approve" } else { "proposals.reject" };
            send(
                &mut stream,
                json!({"jsonrpc": "2.0", "id": "decide", "method": method, "params": {"id": id, "who": "crash"}}),
            );
            std::thread::sleep(Duration::from_micros(rng.random_range(0..8_000)));
            Some((id, if approve { Status::Approved } else { Status::Rejected }))
        };
        let replies = daemon.kill(stream);
        match decision {
            None if acknowledged(&replies, "ingest") => acked_docs.extend((0..12).map(|k| format!("c{i}-{k}"))),
            None => kills_mid_ingest += 1,
            Some(d) if acknowledged(&replies, "decide") => acked_decisions.push(d),
            Some(_) => kills_mid_decision += 1,
        }

        // Reopen as the next start would, and check everything.
        let settings = common::settings_in(&dir.path().join("data"));
        let (kb, _) = common::open(&settings);
        let violations = kb.integrity_violations();
        assert!(violations.is_empty(), "{context}: {violations:?}");
        let violations = curate::integrity_violations(&kb).unwrap();
        assert!(violations.is_empty(), "{context}: {violations:?}");
        for doc in &acked_docs {
            assert!(kb.doc_by_id(doc).is_some(), "{context}: acknowledged document {doc} is gone");
        }
        // Every document the KB holds, acknowledged or not, came with its audit entry.
        let audited: std::collections::HashSet<String> = curate::audit_log(&kb)
            .unwrap()
            .into_iter()
            .filter(|entry| entry.action == Action::Ingest)
            .map(|entry| entry.doc_id)
            .collect();
        for doc in kb.docs() {
            assert!(audited.contains(&doc.id), "{context}: document {} has no audit entry", doc.id);
        }
        for (id, status) in &acked_decisions {
            let p = curate::get(&kb, *id).unwrap();
            assert_eq!(p.status, *status, "{context}: acknowledged decision on proposal {id} is gone");
            if *status == Status::Approved {
                assert!(p.edge.and_then(|e| kb.edge(e)).is_some(), "{context}: approved proposal {id} lost its edge");
            }
        }
    }
    eprintln!(
        "crash loop: {iterations} kills (seed {seed}) in {:.1} s; {kills_mid_ingest} before an ingest was acknowledged, {kills_mid_decision} before a decision was; {} documents and {} decisions acknowledged and kept",
        started.elapsed().as_secs_f64(),
        acked_docs.len(),
        acked_decisions.len()
    );
    assert!(kills_mid_ingest > 0 && kills_mid_decision > 0, "no kill landed mid-write: widen the offsets");
}

/// Version `v` of one document large enough that its commit goes in several sled batches:
/// each sentence names people, a society and a place no other version names.
fn large_version(v: usize) -> String {
    (0..500)
        .map(|k| {
            format!(
                "Alder{v}x{k} Moss joined the Brook{v}x{k} Society in Fenwick{v}x{k} in {}.{}",
                1500 + k,
                if k % 9 == 8 { "\n\n" } else { " " }
            )
        })
        .collect()
}

/// The undo records a kill left in the default KB's sled database, read before any open
/// undoes them.
fn undo_records_left(data: &Path) -> usize {
    let db = sled::open(data.join("db")).unwrap();
    let count = db.open_tree("kb").unwrap().scan_prefix(b"meta/undo/").count();
    drop(db);
    count
}

/// The daemon is killed while it replaces one large document with its next version, 0.4 to
/// 1.1 times the first version's ingest after the request (the commit comes last): every
/// open finds one version whole (the last acknowledged or a later one) and the integrity
/// check clean, and some kill must land between the commit's batches.
#[test]
fn kill_9_during_a_large_document_keeps_one_version_whole() {
    // A kill finds undo records on disk only where sled wrote its buffer out between the
    // batches and before the last one: kills go on, up to four times as many, until one has.
    let iterations = env_or("A2RAG_CRASH_LARGE_ITERATIONS", 24) as usize;
    let seed = env_or("A2RAG_CRASH_SEED", 17);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let settings = common::settings_in(&data);
    let (mut acknowledged_version, mut full_ingest, mut cut_between_batches) = (None, Duration::ZERO, 0);
    let mut versions = 0;
    for v in 0..iterations * 4 {
        if v >= iterations && cut_between_batches > 0 {
            break;
        }
        versions += 1;
        let context = format!("seed {seed}, version {v}");
        let daemon = Daemon::start(dir.path());
        let mut stream = daemon.connect();
        let doc = json!({"id": "large", "title": format!("Large {v}"), "text": large_version(v)});
        let started = Instant::now();
        send(
            &mut stream,
            json!({"jsonrpc": "2.0", "id": "ingest", "method": "ingest", "params": {"documents": [doc]}}),
        );
        let replies = if v == 0 {
            // The first version is not killed: it times the ingest the kills aim at.
            let reply = BufReader::new(stream.try_clone().unwrap())
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
                .find(|reply| reply["id"] == "ingest");
            full_ingest = started.elapsed();
            daemon.kill(stream).into_iter().chain(reply).collect()
        } else {
            std::thread::sleep(full_ingest.mul_f64(rng.random_range(0.4..1.1)));
            daemon.kill(stream)
        };
        if acknowledged(&replies, "ingest") {
            acknowledged_version = Some(v);
        }
        if undo_records_left(&data) > 0 {
            cut_between_batches += 1;
        }
        let (kb, _) = common::open(&settings);
        let violations = kb.integrity_violations();
        assert!(
            violations.is_empty(),
            "{context}: {} violations, the first {:?}",
            violations.len(),
            &violations[..3.min(violations.len())]
        );
        match kb.doc_by_id("large") {
            Some(doc) => {
                let version: usize = doc.title.trim_start_matches("Large ").parse().unwrap();
                assert!(acknowledged_version.is_none_or(|a| version >= a), "{context}: version {version} is back");
                assert_eq!(kb.chunk_ids().count(), doc.chunks.len(), "{context}: chunks of another version are left");
                let text: String = doc.chunks.iter().map(|&c| kb.chunk(c).unwrap().text.to_string()).collect();
                assert!(
                    text.contains(&format!("Alder{version}x499 Moss")),
                    "{context}: version {version} is cut short"
                );
            }
            None => assert_eq!(acknowledged_version, None, "{context}: the acknowledged document is gone"),
        }
    }
    eprintln!(
        "large-document crash loop: {} kills (seed {seed}) of an ingest taking {:.2} s; {cut_between_batches} between the commit's batches",
        versions - 1,
        full_ingest.as_secs_f64()
    );
    assert!(cut_between_batches > 0, "no kill landed between a large commit's batches: aim the kills later");
}
