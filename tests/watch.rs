//! A watched folder (`a2rag serve --watch DIR`), on a real daemon and real files: new,
//! edited, renamed and deleted files (and a new subdirectory) are reflected in `documents`
//! and `retrieve` within 5 s; a daemon killed with SIGKILL, restarted after the folder changed
//! while it was down, converges to the folder, and its KB checks clean.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::spawn_serve_until;

/// The bound the issue sets on seeing a change.
const WITHIN: Duration = Duration::from_secs(5);

fn start(data: &Path, docs: &Path) -> Child {
    let socket = data.join("rpc.sock");
    std::fs::create_dir_all(data).unwrap();
    let args =
        ["--listen".to_string(), format!("unix:{}", socket.display()), "--watch".into(), docs.display().to_string()];
    spawn_serve_until(data, &args, &[], |line| line.starts_with("a2rag: watching")).0
}

fn call(data: &Path, method: &str, params: Value) -> Value {
    let mut stream = UnixStream::connect(data.join("rpc.sock")).unwrap();
    writeln!(stream, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert!(reply.get("error").is_none(), "{method}: {reply}");
    reply["result"].clone()
}

/// The KB's documents as file name (relative to `docs`) -> title.
fn documents(data: &Path, docs: &Path) -> BTreeMap<String, String> {
    let prefix = format!("{}/", docs.canonicalize().unwrap().display());
    call(data, "documents", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let id = d["id"].as_str().unwrap();
            (id.strip_prefix(&prefix).unwrap_or(id).to_string(), d["title"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Waits (at most [`WITHIN`]) until the KB holds exactly `expected`; returns how long it took.
fn converges(data: &Path, docs: &Path, expected: &[(&str, &str)], what: &str) -> Duration {
    let expected: BTreeMap<String, String> = expected.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect();
    let started = Instant::now();
    loop {
        let seen = documents(data, docs);
        if seen == expected {
            eprintln!("{what}: seen after {:?}", started.elapsed());
            return started.elapsed();
        }
        assert!(started.elapsed() < WITHIN, "{what}: after {WITHIN:?} the KB holds {seen:?}, not {expected:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn top_chunk(data: &Path, question: &str) -> String {
    let found = call(data, "retrieve", json!({"question": question}));
    found["retrieval"]["chunks"][0]["text"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_watched_folder_is_followed_and_a_killed_daemon_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let (data, docs) = (dir.path().join("data"), dir.path().join("docs"));
    std::fs::create_dir_all(&docs).unwrap();
    let write = |name: &str, text: &str| {
        let path = docs.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("alpha.md", "# Alpha Works\n\nAlpha Works builds kites in Bergen.\n");
    write("notes.txt", "Harbour notes: the ferry to Stord leaves at noon.\n");
    let mut daemon = start(&data, &docs);
    converges(&data, &docs, &[("alpha.md", "Alpha Works"), ("notes.txt", "notes")], "catch-up at start");

    write("alpha.md", "# Zephyr Labs\n\nZephyr Labs builds gliders in Narvik.\n");
    converges(&data, &docs, &[("alpha.md", "Zephyr Labs"), ("notes.txt", "notes")], "an edit");
    assert!(top_chunk(&data, "Where does Zephyr Labs build gliders?").contains("Narvik"));

    std::fs::rename(docs.join("notes.txt"), docs.join("ferry.txt")).unwrap();
    converges(&data, &docs, &[("alpha.md", "Zephyr Labs"), ("ferry.txt", "ferry")], "a rename");

    write(
        "guides/tides.html",
        "<html><head><title>t</title></head><body><h1>Tide Tables</h1><p>Tides in Tromso turn every six hours.</p></body></html>",
    );
    converges(
        &data,
        &docs,
        &[("alpha.md", "Zephyr Labs"), ("ferry.txt", "ferry"), ("guides/tides.html", "Tide Tables")],
        "a new subdirectory",
    );

    std::fs::remove_file(docs.join("alpha.md")).unwrap();
    converges(&data, &docs, &[("ferry.txt", "ferry"), ("guides/tides.html", "Tide Tables")], "a delete");
    assert!(!top_chunk(&data, "Where does Zephyr Labs build gliders?").contains("Narvik"), "gone from retrieval");

    // Killed while watching; the folder changes while nothing watches it.
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    std::fs::remove_file(docs.join("ferry.txt")).unwrap();
    write(
        "guides/tides.html",
        "<html><body><h1>Tide Atlas</h1><p>Tides in Tromso turn every six hours.</p></body></html>",
    );
    write("boats.md", "Boat Register\n=============\n\nThe Stord ferry carries forty cars.\n");
    let mut daemon = start(&data, &docs);
    converges(&data, &docs, &[("boats.md", "Boat Register"), ("guides/tides.html", "Tide Atlas")], "after a restart");
    assert_eq!(call(&data, "check", json!({}))["ok"], true);
    let audit = call(&data, "audit", json!({"who": "watch"}));
    let actions: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"ingest") && actions.contains(&"replace") && actions.contains(&"delete"), "{actions:?}");
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}
