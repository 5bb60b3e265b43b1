//! Several daemons on one knowledge base in a real PostgreSQL server (issue 14): what one
//! writes the others serve within a second, curation decisions land once for all of them, a
//! daemon killed mid-ingest leaves the others serving and comes back consistent, and
//! `a2rag migrate` copies a KB exactly, there and back.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(60);
/// The lag a daemon must catch up within (the bound).
const LAG: Duration = Duration::from_secs(1);

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, store: &TestStore) -> Daemon {
        let socket = dir.join("a2rag.sock");
        let mut child = Command::new(bin())
            .arg("--data-dir")
            .arg(dir)
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .envs(store.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        loop {
            let line = lines.next().expect("the daemon exited before listening").unwrap();
            if line.starts_with("a2rag: listening on ") {
                break;
            }
        }
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
        Daemon { child, socket }
    }

    fn call(&self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params);
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    fn request(&self, method: &str, params: Value) -> Value {
        let stream = UnixStream::connect(&self.socket).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut writer = stream.try_clone().unwrap();
        writeln!(writer, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).unwrap();
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "{method}: connection closed");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id") == Some(&json!(1)) {
                return message;
            }
        }
    }

    /// Sends `method` without waiting for the reply (the connection stays open).
    fn send(&self, method: &str, params: Value) -> UnixStream {
        let mut stream = UnixStream::connect(&self.socket).unwrap();
        writeln!(stream, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).unwrap();
        stream
    }

    fn documents(&self) -> u64 {
        self.call("stats", json!({}))["documents"].as_u64().unwrap()
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `seen` until it holds, failing after `within`; returns how long it took.
fn within(within: Duration, what: &str, mut seen: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if seen() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not seen within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The test server over TLS, verified against its CA, where it serves TLS (else plainly,
/// with the TLS part's absence said loudly).
fn postgres() -> Option<TestStore> {
    postgres_tls_database().or_else(|| postgres_database().map(TestStore::Postgres))
}

#[test]
fn two_daemons_on_one_database_serve_each_others_writes() {
    let Some(store) = postgres() else { return };
    let dir = tempfile::tempdir().unwrap();
    ingest_rpc_fixtures(&dir.path().join("cli"), &store.env());
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    std::fs::create_dir_all(dir.path().join("b")).unwrap();
    let mut a = Daemon::start(&dir.path().join("a"), &store);
    let b = Daemon::start(&dir.path().join("b"), &store);
    assert_eq!((a.documents(), b.documents()), (3, 3));

    // Ingest through A: B serves the new document within the bound.
    let added = a.call(
        "ingest",
        json!({"documents": [{"id": "oder", "title": "Oder", "text": "The Oder flows through Wroclaw. The Oder forms part of the border of Germany."}]}),
    );
    assert_eq!(added["report"]["added"], 1);
    let lag =
        within(LAG, "B sees A's ingest", || b.request("graph.node", json!({"name": "Oder"})).get("error").is_none());
    eprintln!("B served A's new document after {lag:?}");
    assert_eq!(b.documents(), 4);
    let store_status = &b.call("health", json!({}))["store"];
    assert_eq!(store_status["backend"], "postgres");
    assert!(store_status["sync"]["default"]["applied_change"].as_u64().unwrap() >= 4, "{store_status}");

    // Delete through B: A no longer has it.
    assert_eq!(b.call("delete", json!({"id": "oder"}))["deleted"], "oder");
    within(LAG, "A sees B's delete", || a.request("graph.node", json!({"name": "Oder"}))["error"]["code"] == -32002);
    assert_eq!(a.documents(), 3);

    // A proposal approved on A: the edge is in B's graph, the decision in the one audit log.
    let answer = a.call("query", json!({"question": "Where was Marie Curie born?"}));
    let proposal = answer["proposals"][0].as_u64().expect("the answer proposes a triple");
    let pending = b.call("proposals.list", json!({"status": "pending"}));
    assert!(pending.as_array().unwrap().iter().any(|p| p["id"] == proposal), "B lists A's proposal: {pending}");
    let edges_before = b.call("stats", json!({}))["edges"].as_u64().unwrap();
    let approved = a.call("proposals.approve", json!({"id": proposal, "who": "ann"}));
    let edge = approved["edge"].as_u64().unwrap();
    within(LAG, "B has the approved edge", || {
        b.call("stats", json!({}))["edges"].as_u64().unwrap() == edges_before + 1
    });
    let audit = b.call("audit", json!({"who": "ann"}));
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["edge"], edge);
    assert_eq!(a.call("audit", json!({}))["entries"], b.call("audit", json!({}))["entries"], "one audit log");

    // A and B decide the same proposals at the same moment: one decision each, the other
    // told it is decided already, and one audit entry.
    for other in answer["proposals"].as_array().unwrap().iter().skip(1) {
        let (approve, reject) = std::thread::scope(|s| {
            let approve = s.spawn(|| a.request("proposals.approve", json!({"id": other, "who": "ann"})));
            let reject = s.spawn(|| b.request("proposals.reject", json!({"id": other, "who": "bob"})));
            (approve.join().unwrap(), reject.join().unwrap())
        });
        let won = [&approve, &reject].iter().filter(|r| r.get("error").is_none()).count();
        assert_eq!(won, 1, "{approve} {reject}");
        let lost = if approve.get("error").is_some() { &approve } else { &reject };
        assert!(lost["error"]["message"].as_str().unwrap().contains("already"), "{lost}");
    }
    assert_eq!(b.call("check", json!({}))["ok"], true);

    // kill -9 of A in the middle of an ingest: B keeps serving; A restarted is consistent,
    // and B, following the log, ends up holding exactly what A restarted reads back. (What
    // B holds the instant A dies is no measure: a commit A sent just before it died can land
    // after B's last look at the log.)
    let documents: Vec<Value> = (0..400)
        .map(|i| json!({"id": format!("town-{i}"), "text": format!("Town {i} lies in Province {}. Mayor {i} Smith founded Town {i} in {}.", i % 9, 1700 + i)}))
        .collect();
    let _ingesting = a.send("ingest", json!({"documents": documents}));
    within(TIMEOUT, "A commits part of the ingest", || b.documents() >= 3 + 20);
    a.kill();
    assert_eq!(b.call("health", json!({}))["status"], "ok");
    let answer = b.call("query", json!({"question": "Where was Marie Curie born?"}));
    assert_eq!(answer["answer"], "Warsaw");
    let a = Daemon::start(&dir.path().join("a"), &store);
    let check = a.call("check", json!({}));
    assert_eq!(check["ok"], true, "{check}");
    let committed = a.documents();
    assert!((3 + 20..403).contains(&committed), "A was killed mid-way ({committed} documents)");
    within(LAG, "B holds what committed", || b.documents() == committed);
    assert_eq!(b.call("check", json!({}))["ok"], true);
}

/// sled -> PostgreSQL -> sled gives the same stats and the same retrieval on the MuSiQue
/// dev questions.
#[test]
fn migrate_round_trip_keeps_stats_and_retrieval() {
    let Some(store) = postgres_database().map(TestStore::Postgres) else { return };
    let Some(data) = datasets() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (source, back) = (dir.path().join("sled"), dir.path().join("back"));
    let TestStore::Postgres(url) = &store else { unreachable!() };
    let run = |data_dir: &Path, env: &[(&'static str, String)], args: &[&str]| {
        let out = Command::new(bin()).arg("--data-dir").arg(data_dir).args(args).envs(env.to_vec()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // A slice of the corpus keeps the debug build quick; every question is asked.
    let corpus: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(data.join("musique/corpus.json")).unwrap()).unwrap();
    let slice = dir.path().join("corpus.json");
    std::fs::write(&slice, serde_json::to_string(&corpus[..300]).unwrap()).unwrap();
    run(&source, &[], &["ingest", slice.to_str().unwrap()]);
    run(&source, &[], &["migrate", "--to", url]);
    run(dir.path(), &store.env(), &["migrate", "--to", back.to_str().unwrap()]);

    let questions: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(data.join("musique/questions.json")).unwrap()).unwrap();
    let stats = |data_dir: &Path, env: &[(&'static str, String)]| run(data_dir, env, &["stats", "--json"]);
    let expected = stats(&source, &[]);
    assert_eq!(stats(dir.path(), &store.env()), expected, "PostgreSQL copy");
    assert_eq!(stats(&back, &[]), expected, "copied back to sled");
    for question in &questions {
        let q = question["question"].as_str().unwrap();
        // The ranked chunks and graph paths; the first line also has the time taken.
        let search = |data_dir: &Path, env: &[(&'static str, String)]| {
            run(data_dir, env, &["retrieve", q]).lines().skip(1).collect::<Vec<_>>().join("\n")
        };
        let reference = search(&source, &[]);
        assert_eq!(search(dir.path(), &store.env()), reference, "{q}");
        assert_eq!(search(&back, &[]), reference, "{q}");
    }
}

/// A PostgreSQL server whose certificate the configured CA did not sign is refused, with an
/// error that says what to set; the right CA connects.
#[test]
fn a_postgres_server_signed_by_another_ca_is_refused_clearly() {
    let Some(TestStore::PostgresTls { url, ca }) = postgres_tls_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong-ca.pem");
    std::fs::write(&wrong, common::tls::TestCa::new("not the server's CA").pem()).unwrap();
    let list_tokens = |ca: Option<&Path>| {
        let mut command = Command::new(bin());
        command.arg("--data-dir").arg(dir.path()).args(["token", "list"]);
        command.env("A2RAG__STORE__BACKEND", "postgres").env("A2RAG__STORE__URL", &url);
        if let Some(ca) = ca {
            command.env("A2RAG__STORE__TLS_CA", ca);
        }
        command.output().unwrap()
    };
    for (ca, what) in [(Some(wrong.as_path()), "another CA"), (None, "the public roots")] {
        let out = list_tokens(ca);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "a server signed by an unknown CA was accepted with {what}");
        assert!(stderr.contains("certificate") && stderr.contains("store.tls_ca"), "{what}: {stderr}");
    }
    let out = list_tokens(Some(&ca));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
