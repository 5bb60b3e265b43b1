//! The daemon end to end: the real binary, a real sled data directory, real unix and TCP
//! sockets. Fixture documents live in tests/fixtures/rpc; bigger loads are generated here.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::http::{MockServer, Reply};
use common::ingested_rpc_fixtures;

const BIN: &str = env!("CARGO_BIN_EXE_a2rag");
const TIMEOUT: Duration = Duration::from_secs(30);

struct Daemon {
    child: Child,
    socket: PathBuf,
    addresses: Vec<String>,
}

impl Daemon {
    fn start(dir: &Path, env: &[(&str, &str)], extra: &[&str]) -> Daemon {
        let socket = dir.join("a2rag.sock");
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            // Keep draining after the listening lines so the daemon never blocks on stderr.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut addresses = Vec::new();
        let deadline = Instant::now() + TIMEOUT;
        while addresses.len() < 1 + extra.iter().filter(|a| a.starts_with("tcp:") || a.starts_with("unix:")).count() {
            let line =
                rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("daemon did not start");
            if let Some(a) = line.strip_prefix("a2rag: listening on ") {
                addresses.push(a.to_string());
            }
        }
        Daemon { child, socket, addresses }
    }

    fn connect(&self) -> Client {
        Client::new(UnixStream::connect(&self.socket).unwrap())
    }

    fn tcp_address(&self) -> String {
        self.addresses.iter().find_map(|a| a.strip_prefix("tcp:")).unwrap().to_string()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
    }

    fn wait(mut self) -> i32 {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "daemon did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Client {
    reader: BufReader<Box<dyn Read + Send>>,
    writer: Box<dyn Write + Send>,
    next_id: u64,
}

impl Client {
    fn new(stream: UnixStream) -> Client {
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let writer = stream.try_clone().unwrap();
        Client { reader: BufReader::new(Box::new(stream)), writer: Box::new(writer), next_id: 1000 }
    }

    fn tcp(address: &str) -> Client {
        let stream = std::net::TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let writer = stream.try_clone().unwrap();
        Client { reader: BufReader::new(Box::new(stream)), writer: Box::new(writer), next_id: 1000 }
    }

    fn send_raw(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
        self.writer.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string());
    }

    /// The next message; `None` when the server closed the connection.
    fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap()),
        }
    }

    /// The response with `id`, skipping notifications.
    fn recv_id(&mut self, id: &Value) -> Value {
        loop {
            let m = self.recv().expect("connection closed");
            if m.get("id") == Some(id) {
                return m;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.recv_id(&id)
    }

    /// The `result` of a call that must succeed.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params);
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    fn error_code(&mut self, method: &str, params: Value) -> (i64, String) {
        error_of(&self.request(method, params))
    }
}

fn error_of(reply: &Value) -> (i64, String) {
    let e = reply.get("error").unwrap_or_else(|| panic!("expected an error, got {reply}"));
    (e["code"].as_i64().unwrap(), e["message"].as_str().unwrap().to_string())
}

fn generated_docs(n: usize, prefix: &str) -> Value {
    let docs: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("{prefix}{i}"), "title": format!("{prefix} Town {i}"),
                   "text": format!("{prefix} Town {i} lies on the River Name{}. The mayor of {prefix} Town {i} is Person{i} Smith. It was founded in {}.", i % 50, 1200 + i % 700)})
        })
        .collect();
    json!({"documents": docs})
}

#[test]
fn every_method_and_every_error_code() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[("A2RAG__SERVER__MAX_MESSAGE_BYTES", "4096")], &[]);
    assert_eq!(std::fs::metadata(&daemon.socket).unwrap().permissions().mode() & 0o777, 0o600);
    let mut c = daemon.connect();

    let health = c.call("health", json!({}));
    assert_eq!(health["status"], "ok");
    let stats = c.call("stats", Value::Null);
    assert_eq!(stats["documents"], 3);

    // query: the response JSON plus the ids of the proposals it created.
    let answer = c.call("query", json!({"question": "Where was Marie Curie born?"}));
    assert_eq!(answer["answer"], "Warsaw");
    assert!(!answer["proposals"].as_array().unwrap().is_empty());
    let abstained = c.call("query", json!({"question": "Zebra quantum banana?"}));
    assert!(abstained["answer"].is_null() && abstained["proposals"] == json!([]));

    // ingest inline documents, with progress notifications to this client.
    c.send(json!({"jsonrpc": "2.0", "id": "ing", "method": "ingest", "params": {"documents": [
        {"id": "oder", "title": "Oder", "text": "The Oder flows through Wroclaw. The Oder forms part of the border of Germany."},
        {"text": "Gdansk is a port on the Baltic Sea."}]}}));
    let mut progress = Vec::new();
    let ingested = loop {
        let m = c.recv().unwrap();
        match m.get("method") {
            Some(method) => {
                assert_eq!(method, "ingest/progress");
                progress.push(m["params"].clone());
            }
            None => break m,
        }
    };
    assert_eq!(ingested["id"], "ing");
    assert_eq!(ingested["result"]["report"]["added"], 2);
    assert_eq!(progress.len(), 2);
    assert_eq!(progress[1]["done"], 2);
    assert_eq!(progress[1]["total"], 2);
    assert_eq!(progress[0]["doc"], "oder");

    // graph.node by name and by id: aliases, neighbours, provenance.
    let oder = c.call("graph.node", json!({"name": "Oder"}));
    assert_eq!(oder["name"], "Oder");
    assert!(oder["neighbours"].as_array().unwrap().iter().any(|n| n["name"] == "Wroclaw" && n["direction"] == "out"));
    assert_eq!(oder["provenance"][0]["doc_id"], "oder");
    let same = c.call("graph.node", json!({"id": oder["id"]}));
    assert_eq!(same["name"], "Oder");
    assert_eq!(c.error_code("graph.node", json!({"name": "Atlantis"})).0, -32002);
    assert_eq!(c.error_code("graph.node", json!({"name": "Oder", "id": 1})).0, -32602);

    // documents lists the ids delete takes; delete, then the document is gone.
    let ids = |c: &mut Client| -> Vec<String> {
        let docs = c.call("documents", json!({}));
        docs.as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
    };
    let before = ids(&mut c);
    assert_eq!(before.len(), 5, "{before:?}");
    assert!(before.contains(&"oder".to_string()), "{before:?}");
    assert_eq!(c.call("delete", json!({"id": "oder"}))["deleted"], "oder");
    let (code, message) = c.error_code("delete", json!({"id": "oder"}));
    assert_eq!(code, -32002);
    assert!(message.contains("`documents`"), "says where the ids are: {message}");
    assert_eq!(c.call("stats", json!({}))["documents"], 4);
    assert!(!ids(&mut c).contains(&"oder".to_string()));

    // proposals.list with and without a status filter.
    let pending = c.call("proposals.list", json!({"status": "pending"}));
    assert_eq!(pending.as_array().unwrap().len(), answer["proposals"].as_array().unwrap().len());
    assert_eq!(c.call("proposals.list", json!({"status": "rejected"})), json!([]));
    let id = pending[0]["id"].clone();
    assert_eq!(c.call("proposals.reject", json!({"id": id, "who": "ann"}))["status"], "rejected");
    assert_eq!(c.error_code("proposals.approve", json!({"id": id})).0, -32602,);
    assert_eq!(c.error_code("proposals.approve", json!({"id": 1})).0, -32002);
    let edited = c.call(
        "proposals.edit",
        json!({"id": pending[1]["id"], "subject": "Marie Curie", "relation": "studied", "object": "Polonium"}),
    );
    assert_eq!(edited["status"], "approved");
    // Without `who`, a decision is labelled by its caller: over a unix socket, the owner.
    assert_eq!(edited["decided_by"], a2rag::kb::audit::Author::owner().who);
    assert_eq!(c.call("proposals.approve", json!({"id": pending[2]["id"]}))["status"], "approved");

    // Protocol errors.
    c.send_raw("{not json");
    assert_eq!(error_of(&c.recv().unwrap()).0, -32700);
    c.send_raw(r#"{"id": 1, "method": "health"}"#);
    let reply = c.recv().unwrap();
    assert_eq!((error_of(&reply).0, reply["id"].clone()), (-32600, json!(1)));
    c.send_raw("[]");
    assert_eq!(error_of(&c.recv().unwrap()).0, -32600);
    c.send_raw(r#"{"jsonrpc": "2.0", "id": 2, "method": "health", "params": 5}"#);
    assert_eq!(error_of(&c.recv().unwrap()).0, -32600);
    assert_eq!(c.error_code("no.such.method", json!({})).0, -32601);
    let (code, message) = c.error_code("query", json!({"question": "Where?", "colour": "red"}));
    assert_eq!(code, -32602);
    assert!(message.contains("colour"), "{message}");
    let (code, message) = c.error_code("query", json!({}));
    assert_eq!(code, -32602);
    assert!(message.contains("question"), "{message}");
    assert_eq!(c.error_code("query", json!({"question": "  "})).0, -32602);
    // (Within the 4096 bytes this daemon reads per message.)
    let (code, message) = c.error_code("retrieve", json!({"question": "ab ".repeat(1334)}));
    assert!(code == -32602 && message.contains("more than 4000"), "{message}");
    let (code, message) = c.error_code("query", json!({"question": "Where?", "budget": {"max_iterations": 0}}));
    assert_eq!(code, -32602);
    assert!(message.contains("nonzero"), "not silently raised to 1: {message}");
    assert_eq!(c.error_code("ingest", json!({})).0, -32602);
    let twice = json!({"documents": [{"id": "z", "text": "One."}, {"id": "z", "text": "Two."}]});
    let (code, message) = c.error_code("ingest", twice);
    assert!(code == -32602 && message.contains("documents[1] has the id `z` of documents[0]"), "{message}");
    let (code, message) = c.error_code("ingest", json!({"documents": [{"id": "a\nb", "text": "One."}]}));
    assert!(code == -32602 && message.contains("control characters"), "{message}");
    assert_eq!(c.error_code("ingest", json!({"documents": [{"id": " ", "text": "One."}]})).0, -32602);
    assert!(c.error_code("proposals.edit", json!({"id": 1, "subject": "a"})).1.contains("relation"));

    // An oversized message is refused without killing the connection.
    c.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"query","params":{{"question":"{}"}}}}"#,
        "x".repeat(10_000)
    ));
    let (code, message) = error_of(&c.recv().unwrap());
    assert_eq!(code, -32600);
    assert!(message.contains("too large"), "{message}");
    assert_eq!(c.call("health", json!({}))["status"], "ok");

    // A batch: answers for requests only, in order; the notification runs silently.
    c.send(json!([
        {"jsonrpc": "2.0", "id": "a", "method": "health"},
        {"jsonrpc": "2.0", "method": "health"},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        {"jsonrpc": "2.0", "id": "c", "method": "stats", "params": {}},
        5
    ]));
    let batch = c.recv().unwrap();
    let batch = batch.as_array().unwrap();
    assert_eq!(batch.len(), 4);
    assert_eq!(batch[0]["id"], "a");
    assert_eq!(batch[1]["error"]["code"], -32601);
    assert_eq!(batch[2]["result"]["documents"], 4);
    assert_eq!(batch[3]["error"]["code"], -32600);

    // The integrity check over RPC.
    let check = c.call("check", json!({}));
    assert_eq!((&check["ok"], &check["violations"]), (&json!(true), &json!([])), "{check}");
    assert_eq!(check["stats"]["documents"], 4);

    // Ids keep their exact value, however large.
    c.send_raw(r#"{"jsonrpc":"2.0","id":9007199254740993,"method":"health"}"#);
    let reply = c.recv().unwrap();
    assert_eq!(reply["id"].to_string(), "9007199254740993");
    c.send_raw(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"health"}"#);
    assert_eq!(c.recv().unwrap()["id"].to_string(), "18446744073709551615");
    // Beyond 64 bits it would come back altered: refused instead.
    c.send_raw(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"health"}"#);
    let reply = c.recv().unwrap();
    assert_eq!(error_of(&reply).0, -32600);

    // Cancelling something that is not running says so.
    assert_eq!(c.call("$/cancelRequest", json!({"id": 424242})), json!({"cancelled": false}));

    // A client that vanishes mid-request harms nobody.
    let mut gone = daemon.connect();
    gone.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "query", "params": {"question": "Where was Marie Curie born?"}}),
    );
    drop(gone);
    assert_eq!(c.call("health", json!({}))["status"], "ok");

    // shutdown answers, then the daemon exits cleanly and removes its socket.
    assert_eq!(c.call("shutdown", json!({}))["shutting_down"], true);
    let socket = daemon.socket.clone();
    assert_eq!(daemon.wait(), 0);
    assert!(!socket.exists());
}

/// Issue 17: a cancelled ingest went on and its documents appeared later; requests queued
/// behind it made `health` and `shutdown` fail with "overloaded".
#[test]
fn cancelled_ingest_stops_between_documents_and_health_is_never_refused() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[("A2RAG__SERVER__MAX_PENDING", "1")], &[]);
    let mut writer = daemon.connect();
    writer.send(json!({"jsonrpc": "2.0", "id": "big", "method": "ingest", "params": generated_docs(3000, "Cancel")}));
    assert_eq!(writer.recv().unwrap()["method"], "ingest/progress");
    // The ingest holds the only permit: other work is refused, liveness is not.
    let mut c = daemon.connect();
    assert_eq!(c.error_code("stats", json!({})), (-32000, "overloaded".to_string()));
    let batch: Vec<Value> = (0..300).map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "health"})).collect();
    c.send(Value::Array(batch));
    let replies = c.recv().unwrap();
    assert!(replies.as_array().unwrap().iter().all(|r| r["result"]["status"] == "ok"), "{replies}");
    writer.send(json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "big"}}));
    let cancelled = writer.recv_id(&json!("big"));
    let (code, message) = error_of(&cancelled);
    assert_eq!(code, -32800);
    let report = &cancelled["error"]["data"]["report"];
    assert_eq!(report["cancelled"], true);
    let committed = report["added"].as_u64().unwrap();
    assert!(committed < 3000, "{message}");
    assert!(message.contains(&format!("{committed} document(s)")), "{message}");
    // Nothing more appears after the answer: what it reported is what there is.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.call("stats", json!({}))["documents"], 3 + committed);
    assert_eq!(c.call("check", json!({}))["ok"], true);
    daemon.signal("INT");
    assert_eq!(daemon.wait(), 0);
}

/// Issue 17: an ingest held the write lock to the end, so every query stalled behind it.
#[test]
fn queries_are_answered_while_a_long_ingest_runs() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut writer = daemon.connect();
    writer.send(json!({"jsonrpc": "2.0", "id": "long", "method": "ingest", "params": generated_docs(3000, "Long")}));
    assert_eq!(writer.recv().unwrap()["method"], "ingest/progress");
    let mut c = daemon.connect();
    assert_eq!(c.call("query", json!({"question": "Where was Marie Curie born?"}))["answer"], "Warsaw");
    let documents = c.call("stats", json!({}))["documents"].as_u64().unwrap();
    assert!(documents < 3003, "the query waited for the whole ingest ({documents} documents)");
    assert_eq!(writer.recv_id(&json!("long"))["result"]["report"]["added"], 3000);
}

/// Issue 17: requests after `shutdown` got a closed connection instead of -32003.
#[test]
fn requests_after_shutdown_are_answered_shutting_down() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut writer = daemon.connect();
    writer.send(json!({"jsonrpc": "2.0", "id": "w", "method": "ingest", "params": generated_docs(600, "Late")}));
    assert_eq!(writer.recv().unwrap()["method"], "ingest/progress");
    let mut c = daemon.connect();
    assert_eq!(c.call("shutdown", json!({}))["shutting_down"], true);
    assert_eq!(c.error_code("stats", json!({})), (-32003, "shutting down".to_string()));
    assert_eq!(c.call("health", json!({}))["status"], "shutting_down");
    // The work in flight finishes and is answered before the daemon exits.
    assert_eq!(writer.recv_id(&json!("w"))["result"]["report"]["added"], 600);
    assert_eq!(daemon.wait(), 0);
}

/// Requests that arrive with `shutdown` in one write, with nothing in flight, are each
/// answered before the daemon exits (the daemon sometimes closed before reading them).
#[test]
fn requests_written_with_shutdown_are_all_answered() {
    let dir = ingested_rpc_fixtures();
    for _ in 0..5 {
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "stats"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "health"}),
        ];
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let replies: Vec<Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(replies.len(), 3, "{replies:?}");
        assert_eq!(error_of(&replies[1]).0, -32003, "{replies:?}");
        assert_eq!(replies[2]["result"]["status"], "shutting_down");
        assert_eq!(replies[2]["result"]["pending"], 0, "{replies:?}");
    }
}

/// Issue 17: a second daemon on the same socket path silently unlinked the live one's socket.
#[test]
fn a_second_daemon_leaves_a_live_socket_alone() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let other = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .arg("--data-dir")
        .arg(other.path().join("data"))
        .arg("serve")
        .arg("--listen")
        .arg(format!("unix:{}", daemon.socket.display()))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("another daemon is listening"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(daemon.connect().call("health", json!({}))["status"], "ok");
}

#[test]
fn fifty_clients_query_while_one_ingests() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut writer = daemon.connect();
    writer.send(json!({"jsonrpc": "2.0", "id": "load", "method": "ingest", "params": generated_docs(150, "Load")}));
    let questions =
        ["Where was Marie Curie born?", "Where is the Sklodowska Medal awarded?", "What flows through Krakow?"];
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let mut c = daemon.connect();
            std::thread::spawn(move || {
                let mut answered = 0;
                for round in 0..3 {
                    let result = c.call("query", json!({"question": questions[(i + round) % questions.len()]}));
                    answered += usize::from(result["answer"].is_string());
                }
                answered
            })
        })
        .collect();
    let answered: usize = clients.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(answered >= 100, "only {answered} of 150 queries answered");
    let done = writer.recv_id(&json!("load"));
    assert_eq!(done["result"]["report"]["added"], 150);
    assert_eq!(writer.call("stats", json!({}))["documents"], 153);
}

#[test]
fn approvals_survive_sigterm_and_change_the_next_query() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut c = daemon.connect();
    // One iteration, so the reported retrieval is the first one (local stage first) whether or
    // not the embedded checks accept the answer.
    let question = json!({"question": "Who is the Sklodowska Medal named after?", "budget": {"max_iterations": 1}});
    let score_of_curie_chunk = |response: &Value| {
        response["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["doc_id"].as_str().unwrap().ends_with("curie.txt"))
            .map_or(0.0, |e| e["score"].as_f64().unwrap())
    };
    let before = c.call("query", question.clone());
    let proposed = c.call("query", json!({"question": "Where was Marie Curie born?"}))["proposals"].clone();
    let proposals = c.call("proposals.list", json!({"status": "pending"}));
    let born = proposals.as_array().unwrap().iter().find(|p| p["triple"]["relation"] == "was born in").unwrap().clone();
    assert_eq!(born["sentence"], "Marie Curie was born in Warsaw.");
    assert_eq!(born["span"], json!([0, 31]));
    assert!(proposed.as_array().unwrap().contains(&born["id"]));
    // The reviewer corrects the triple: the medal is named after Curie, read from her chunk.
    let edited = c.call("proposals.edit", json!({"id": born["id"], "who": "ann", "subject": "Sklodowska Medal", "relation": "named after", "object": "Marie Curie"}));
    let edge = edited["edge"].clone();
    let reject = proposals.as_array().unwrap().iter().find(|p| p["id"] != born["id"]).unwrap().clone();
    c.call("proposals.reject", json!({"id": reject["id"], "who": "bob"}));

    // The next query sees the new edge at once: one more local edge, Curie's chunk ranks higher.
    let after = c.call("query", question.clone());
    let local_edges = |r: &Value| r["retrieval"]["stages"][0]["edges"].as_u64().unwrap();
    assert_eq!(local_edges(&after), local_edges(&before) + 1);
    assert!(score_of_curie_chunk(&after) > score_of_curie_chunk(&before), "{before}\n{after}");
    let medal = c.call("graph.node", json!({"name": "Sklodowska Medal"}));
    assert!(
        medal["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["relation"] == "named after" && n["name"] == "Marie Curie" && n["origin"] == "curated")
    );
    // Neither the rejected nor the decided triples are proposed again.
    c.call("query", json!({"question": "Where was Marie Curie born?"}));
    c.call("query", json!({"question": "Where is the Sklodowska Medal awarded?"}));
    let pending = c.call("proposals.list", json!({"status": "pending"}));
    for decided in [&born, &reject] {
        assert!(
            !pending.as_array().unwrap().iter().any(|p| p["triple"] == decided["triple"]),
            "{} proposed again: {pending}",
            decided["triple"]
        );
    }
    let counts = |s: Value| ["documents", "chunks", "nodes", "edges", "relation_labels"].map(|k| s[k].clone());
    let stats = counts(c.call("stats", json!({})));

    daemon.signal("TERM");
    assert_eq!(daemon.wait(), 0);

    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut c = daemon.connect();
    assert_eq!(counts(c.call("stats", json!({}))), stats);
    let medal = c.call("graph.node", json!({"name": "Sklodowska Medal"}));
    assert!(medal["neighbours"].as_array().unwrap().iter().any(|n| n["edge"] == edge));
    let decided: Vec<Value> = c
        .call("proposals.list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["status"] != "pending")
        .cloned()
        .collect();
    assert_eq!(decided.len(), 2);
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);

    // The audit log, read with the library once the daemon has let go of the store.
    let mut settings = a2rag::config::Settings::load(None).unwrap();
    settings.data_dir = dir.path().join("data");
    let engine = a2rag::engine::Engine::open(settings, None).unwrap();
    let audit = a2rag::curate::audit_log(&common::default_kb(&engine).blocking_read()).unwrap();
    let audit: Vec<_> = audit.into_iter().filter(|e| e.action.is_decision()).collect();
    assert_eq!(audit.len(), 2);
    assert_eq!((audit[0].who.as_str(), audit[0].action), ("ann", a2rag::curate::Action::Edit));
    assert_eq!(audit[0].triple.as_ref().unwrap().relation, "named after");
    assert_eq!(audit[0].edge, edge.as_u64());
    assert!(audit[0].doc_id.ends_with("curie.txt"));
    assert_eq!((audit[1].who.as_str(), audit[1].action), ("bob", a2rag::curate::Action::Reject));
    assert!(audit[0].seq < audit[1].seq);
}

#[test]
fn tcp_auth_and_stdio_at_once() {
    let dir = ingested_rpc_fixtures();
    let env = [("A2RAG__SERVER__BEARER_TOKEN", "s3cret")];
    let mut daemon = Daemon::start(dir.path(), &env, &["--listen", "tcp:127.0.0.1:0", "--stdio"]);
    let address = daemon.tcp_address();

    let mut refused = Client::tcp(&address);
    let (code, message) = refused.error_code("health", json!({}));
    assert_eq!(code, -32001);
    assert!(message.contains("must be `auth`"), "{message}");
    assert!(refused.recv().is_none(), "connection should close after a failed auth");
    let mut wrong = Client::tcp(&address);
    let (code, message) = wrong.error_code("auth", json!({"token": "guess"}));
    assert_eq!(code, -32001);
    assert!(message.contains("unknown or revoked token"), "{message}");

    let mut c = Client::tcp(&address);
    let accepted = c.call("auth", json!({"token": "s3cret"}));
    assert_eq!(accepted, json!({"authenticated": true, "token": "admin", "scope": "admin"}), "the daemon's own token");
    assert_eq!(c.call("health", json!({}))["status"], "ok");

    // The unix socket needs no token (its mode is the access control); stdio works alongside.
    assert_eq!(daemon.connect().call("health", json!({}))["status"], "ok");
    let mut stdin = daemon.child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":"io","method":"stats"}}"#).unwrap();
    let mut stdout = BufReader::new(daemon.child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["result"]["documents"], 3);
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);
}

/// Issue 17: TCP without a configured token accepted every request, and `paths` let any
/// client read any file the daemon could (symlinks included).
#[test]
fn tcp_always_needs_a_token_and_paths_stay_inside_the_ingest_roots() {
    let dir = ingested_rpc_fixtures();
    let roots = dir.path().join("inbox");
    std::fs::create_dir(&roots).unwrap();
    std::fs::write(roots.join("ok.txt"), "Lodz is a city in Poland.").unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "The vault code is 4321.").unwrap();
    std::os::unix::fs::symlink(&secret, roots.join("leak.txt")).unwrap();
    let config = dir.path().join("a2rag.toml");
    std::fs::write(&config, format!("[server]\ningest_roots = [{:?}]\n", roots.display().to_string())).unwrap();
    let daemon = Daemon::start(dir.path(), &[], &["--config", config.to_str().unwrap(), "--listen", "tcp:127.0.0.1:0"]);
    let token_file = dir.path().join("data/rpc-token");
    assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(dir.path().join("data")).unwrap().permissions().mode() & 0o777, 0o700);
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert!(token.len() >= 32);
    let address = daemon.tcp_address();

    let mut refused = Client::tcp(&address);
    assert_eq!(refused.error_code("health", json!({})).0, -32001);
    let mut c = Client::tcp(&address);
    c.call("auth", json!({"token": token}));
    let (code, message) = c.error_code("ingest", json!({"paths": [secret]}));
    assert_eq!(code, -32602);
    assert!(message.contains("outside server.ingest_roots"), "{message}");
    let (code, message) = c.error_code("ingest", json!({"paths": [roots.join("leak.txt")]}));
    assert_eq!(code, -32602);
    assert!(message.contains("resolves to"), "{message}");
    // A directory inside the roots: its good file is read, the symlink out is an error.
    let report = c.call("ingest", json!({"paths": [roots]}))["report"].clone();
    assert_eq!(report["added"], 1);
    assert!(report["errors"].to_string().contains("outside server.ingest_roots"), "{report}");
    let answer = c.call("query", json!({"question": "What is the vault code?"}));
    assert!(!answer.to_string().contains("4321"), "{answer}");
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);

    // Without roots, no path is read over RPC at all; inline documents still are.
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut c = daemon.connect();
    let (code, message) = c.error_code("ingest", json!({"paths": [roots.join("ok.txt")]}));
    assert_eq!(code, -32602);
    assert!(message.contains("ingest_roots is empty"), "{message}");
    assert_eq!(c.call("ingest", json!({"documents": [{"text": "Poznan is a city."}]}))["report"]["added"], 1);
}

/// `value` without its timing fields, which differ between two runs of the same work, and
/// with floats compared at f32 precision.
fn without_timings(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            map.iter().filter(|(k, _)| k.as_str() != "micros").map(|(k, v)| (k.clone(), without_timings(v))).collect()
        }
        Value::Array(items) => items.iter().map(without_timings).collect(),
        // Scores are f32: the CLI prints them shortest-form, the daemon widened to f64.
        Value::Number(n) if n.is_f64() => json!(n.as_f64().map(|x| x as f32)),
        other => other.clone(),
    }
}

/// An OpenAI-compatible chat reply that every role reads as a refusal.
fn llm_reply() -> Reply {
    let body = json!({
        "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_700_000_000, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"verdict\": \"no\", \"reason\": \"mock\"}"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    Reply::Json(200, body.to_string())
}

#[test]
fn retrieve_calls_no_model_and_returns_the_evidence_query_reads() {
    let dir = ingested_rpc_fixtures();
    let question = "Where was Marie Curie born?";

    // A model is configured for every role, the sufficiency judge included.
    let llm = MockServer::background(|_, _| llm_reply());
    let env = [
        ("A2RAG__LLM__PROVIDER", "openai"),
        ("A2RAG__LLM__MODEL", "m"),
        ("A2RAG__LLM__BASE_URL", llm.base_url.as_str()),
        ("A2RAG__LLM__MAX_RETRIES", "0"),
        ("A2RAG__RETRIEVE__SUFFICIENCY_JUDGE", "llm"),
    ];
    let cli = Command::new(BIN)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["retrieve", "--json", question])
        .envs(env)
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let from_cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let daemon = Daemon::start(dir.path(), &env, &[]);
    let mut c = daemon.connect();
    let retrieved = c.call("retrieve", json!({"question": question}));
    assert_eq!(llm.hits(), 0, "retrieve called the model");
    assert_eq!(retrieved["gate"]["in_scope"], true);
    let top = &retrieved["retrieval"]["chunks"][0];
    assert!(top["doc_id"].as_str().unwrap().ends_with("curie.txt"), "{retrieved}");
    assert_eq!((top["span"][0].as_u64(), top["title"].as_str()), (Some(0), Some("curie")));
    assert!(
        retrieved["retrieval"]["stages"][0]["judgement"]["reason"].as_str().unwrap().starts_with("evidence:"),
        "{retrieved}"
    );
    assert_eq!(without_timings(&from_cli), without_timings(&retrieved));
    // The configuration is live: a query does call the model.
    c.call("query", json!({"question": question}));
    assert!(llm.hits() > 0, "query should have called the model");
    // Out of scope: the gate says so and nothing is retrieved.
    let outside = c.call("retrieve", json!({"question": "Zebra quantum banana?"}));
    assert_eq!((outside["gate"]["in_scope"].clone(), outside["retrieval"].clone()), (json!(false), Value::Null));
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);

    // With the embedded roles, the query's retrieval is exactly what `retrieve` returns.
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut c = daemon.connect();
    let answered = c.call("query", json!({"question": question}));
    assert_eq!((answered["answer"].as_str(), answered["iterations"].as_u64()), (Some("Warsaw"), Some(1)));
    let retrieved = c.call("retrieve", json!({"question": question}));
    // A query response moves the retrieval's chunks and paths out to `evidence` and `paths`.
    let mut retrieval = retrieved["retrieval"].clone();
    let chunks = retrieval.as_object_mut().unwrap().remove("chunks").unwrap();
    let paths = retrieval.as_object_mut().unwrap().remove("paths").unwrap_or(json!([]));
    assert_eq!(without_timings(&retrieval), without_timings(&answered["retrieval"]));
    assert_eq!(without_timings(&chunks), without_timings(&answered["evidence"]));
    assert_eq!(paths, answered["paths"]);
    // A question with evidence in two passages, cut to one by `top_k`.
    let mut count = |top_k: Option<u64>| {
        let params = json!({"question": "Who shared the Nobel Prize with Marie Curie?", "top_k": top_k});
        c.call("retrieve", params)["retrieval"]["chunks"].as_array().unwrap().len()
    };
    assert!(count(None) >= 2);
    assert_eq!(count(Some(1)), 1);
    assert_eq!(c.error_code("retrieve", json!({"question": question, "top_k": 0})).0, -32602);
    assert_eq!(c.error_code("retrieve", json!({"question": " "})).0, -32602);
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);
}

#[test]
fn two_knowledge_bases_in_one_daemon_never_see_each_other() {
    let dir = ingested_rpc_fixtures();
    let daemon = Daemon::start(dir.path(), &[], &[]);
    let mut c = daemon.connect();
    assert_eq!(c.call("kbs", json!({})), json!({"kbs": ["default"]}));

    // Reads of an unknown name are refused and create nothing.
    for (method, params) in [
        ("stats", json!({"kb": "harbour"})),
        ("query", json!({"kb": "harbour", "question": "Who rebuilt Oslo Harbour?"})),
        ("retrieve", json!({"kb": "harbour", "question": "Who rebuilt Oslo Harbour?"})),
        ("proposals.list", json!({"kb": "harbour"})),
        ("delete", json!({"kb": "harbour", "id": "oslo"})),
        ("proposals.approve", json!({"kb": "harbour", "id": 1})),
        ("graph.node", json!({"kb": "harbour", "name": "Oslo"})),
    ] {
        let (code, message) = c.error_code(method, params);
        assert_eq!(code, -32602, "{method}: {message}");
        assert!(message.contains("unknown knowledge base `harbour`"), "{method}: {message}");
    }
    let (code, message) = c.error_code("stats", json!({"kb": "../x"}));
    assert_eq!(code, -32602);
    assert_eq!(message, "invalid params: knowledge base name `../x` is not 1 to 64 letters, digits, `-` or `_`");
    let (code, message) = c.error_code("query", json!({"kb": "../x", "question": "Who?"}));
    assert_eq!(
        (code, message.as_str()),
        (-32602, "invalid params: kb: knowledge base name `../x` is not 1 to 64 letters, digits, `-` or `_`")
    );
    let (_, message) = c.error_code("query", json!({"kb": "harbour", "questoin": "Who?"}));
    assert!(message.contains("unknown field `questoin`") && message.ends_with("or `kb`"), "{message}");
    assert_eq!(c.call("kbs", json!({}))["kbs"], json!(["default"]));

    // The first ingest creates it; a document id may exist in both.
    let harbour = json!({"kb": "harbour", "documents": [
        {"id": "oslo", "title": "Oslo Harbour", "text": "Oslo Harbour was rebuilt by Nordic Works in 1952. Nordic Works was founded by Ingrid Berg."},
        {"id": "shared", "title": "Shared", "text": "Bergen lies on the coast of Norway."}]});
    assert_eq!(c.call("ingest", harbour)["report"]["added"], 2);
    c.call(
        "ingest",
        json!({"documents": [{"id": "shared", "title": "Shared", "text": "Lodz lies in the middle of Poland."}]}),
    );
    assert_eq!(c.call("kbs", json!({}))["kbs"], json!(["default", "harbour"]));
    assert!(dir.path().join("data/kbs/harbour/db").is_dir());
    assert_eq!(c.call("stats", json!({"kb": "harbour"}))["documents"], 2);
    assert_eq!(c.call("stats", json!({}))["documents"], 4);

    // Queries and retrievals see their own documents only.
    let docs = |r: &Value, key: &str| -> Vec<String> {
        let list = if key == "evidence" { &r["evidence"] } else { &r["retrieval"]["chunks"] };
        list.as_array()
            .map(|l| l.iter().map(|e| e["doc_id"].as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let asked = c.call("query", json!({"kb": "harbour", "question": "Who founded Nordic Works?"}));
    assert_eq!(asked["answer"], "Ingrid Berg", "{asked}");
    assert!(docs(&asked, "evidence").iter().all(|d| d == "oslo" || d == "shared"));
    let found = c.call("retrieve", json!({"kb": "harbour", "question": "Where was Marie Curie born?"}));
    assert!(docs(&found, "retrieval").iter().all(|d| d == "oslo" || d == "shared"), "{found}");
    let found = c.call("retrieve", json!({"question": "Who founded Nordic Works?"}));
    assert!(!docs(&found, "retrieval").iter().any(|d| d == "oslo"), "{found}");
    let shared = |kb: &str, c: &mut Client| {
        c.call("graph.node", json!({"kb": kb, "name": if kb == "harbour" { "Bergen" } else { "Lodz" }}))["provenance"]
            [0]["doc_id"]
            .clone()
    };
    assert_eq!((shared("harbour", &mut c), shared("default", &mut c)), (json!("shared"), json!("shared")));
    assert_eq!(c.error_code("graph.node", json!({"kb": "harbour", "name": "Lodz"})).0, -32002);

    // Proposals and decisions stay in their KB: the default KB's answer proposes triples
    // (its graph holds only the imported ones), harbour's (rule-extracted) proposes none.
    let curie = c.call("query", json!({"question": "Where was Marie Curie born?"}));
    assert!(!curie["proposals"].as_array().unwrap().is_empty());
    let proposals = |kb: &str, c: &mut Client| c.call("proposals.list", json!({"kb": kb})).as_array().unwrap().clone();
    let in_default = proposals("default", &mut c);
    assert!(in_default.len() >= 2, "{in_default:?}");
    assert!(in_default.iter().all(|p| p["doc_id"] != "oslo"), "{in_default:?}");
    assert_eq!(proposals("harbour", &mut c), Vec::<Value>::new());
    let (code, message) = c.error_code("proposals.approve", json!({"kb": "harbour", "id": in_default[0]["id"]}));
    assert_eq!(code, -32002, "{message}");
    c.call("proposals.approve", json!({"id": in_default[0]["id"], "who": "hana"}));
    c.call("proposals.reject", json!({"id": in_default[1]["id"], "who": "dora"}));
    assert_eq!(proposals("default", &mut c).iter().filter(|p| p["status"] == "approved").count(), 1);
    assert_eq!(proposals("harbour", &mut c), Vec::<Value>::new());

    // Deletes touch one KB.
    assert_eq!(c.error_code("delete", json!({"id": "oslo"})).0, -32002);
    c.call("delete", json!({"kb": "harbour", "id": "shared"}));
    assert_eq!(c.call("stats", json!({"kb": "harbour"}))["documents"], 1);
    assert_eq!(c.call("stats", json!({}))["documents"], 4);
    c.call("shutdown", json!({}));
    assert_eq!(daemon.wait(), 0);

    // Each audit log holds its own KB's decisions only, and both survive a restart.
    let mut settings = a2rag::config::Settings::load(None).unwrap();
    settings.data_dir = dir.path().join("data");
    let engine = a2rag::engine::Engine::open(settings, None).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let harbour = runtime
        .block_on(engine.kb(&a2rag::kb::catalog::KbName::new("harbour").unwrap(), a2rag::kb::catalog::Open::Existing))
        .unwrap();
    let audit = |kb: &tokio::sync::RwLock<a2rag::kb::Kb>| {
        a2rag::curate::audit_log(&kb.blocking_read())
            .unwrap()
            .into_iter()
            .filter(|a| a.action.is_decision())
            .map(|a| (a.who, a.doc_id))
            .collect::<Vec<_>>()
    };
    assert_eq!(audit(&harbour), []);
    let who: Vec<String> = audit(&common::default_kb(&engine)).into_iter().map(|(who, _)| who).collect();
    assert_eq!(who, ["hana", "dora"]);
    assert_eq!(harbour.blocking_read().stats().documents, 1);
}
