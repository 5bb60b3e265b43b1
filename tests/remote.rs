//! The CLI end to end with a remote embedder and a remote LLM: `ingest`, `ask`, `eval` and
//! `serve` (answering a query) against one scripted OpenAI-compatible server on 127.0.0.1.
//! `eval` once panicked here (a blocking embed inside its current-thread runtime); every
//! model request now runs on `net::Remote`'s I/O runtime.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::http::{MockServer, Reply, Seen};
use serde_json::{Value, json};

const DIM: usize = 16;
const ANSWER: &str = "Warsaw";

/// Words hashed into `DIM` buckets: texts sharing words get similar vectors.
fn vector(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; DIM];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let hash = word.to_lowercase().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        v[(hash % DIM as u64) as usize] += 1.0;
    }
    v[DIM - 1] += 0.1;
    v
}

/// `/v1/embeddings` answers with hashed vectors; `/v1/chat/completions` answers the answer
/// prompt with [`ANSWER`] and every verification prompt with a pass.
fn model_server(_: usize, seen: &Seen) -> Reply {
    let body = seen.json();
    if seen.path().ends_with("/embeddings") {
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t.as_str().unwrap_or(""))}))
            .collect();
        let reply = json!({"object": "list", "data": data, "model": "mock-embed", "usage": {"prompt_tokens": 1, "total_tokens": 1}});
        return Reply::Json(200, reply.to_string());
    }
    let prompt = body["messages"].to_string();
    let text = if prompt.contains("numbered evidence passages") {
        json!({"answer": ANSWER, "used": [1]}).to_string()
    } else {
        json!({"verdict": "yes", "reason": "the evidence says so"}).to_string()
    };
    let reply = json!({
        "id": "chatcmpl-mock", "object": "chat.completion", "created": 1, "model": "mock-llm",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    Reply::Json(200, reply.to_string())
}

/// The CLI with a remote embedder and LLM at `server` and its data in `dir`.
fn a2rag(server: &MockServer, dir: &Path) -> Command {
    let mut command = Command::new(common::bin());
    command
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("A2RAG__EMBED__PROVIDER", "openai")
        .env("A2RAG__EMBED__BASE_URL", &server.base_url)
        .env("A2RAG__EMBED__MODEL", "mock-embed")
        .env("A2RAG__EMBED__DIM", DIM.to_string())
        .env("A2RAG__EMBED__API_KEY_ENV", "")
        .env("A2RAG__LLM__PROVIDER", "openai")
        .env("A2RAG__LLM__BASE_URL", &server.base_url)
        .env("A2RAG__LLM__MODEL", "mock-llm")
        .env("A2RAG__LLM__API_KEY_ENV", "");
    command
}

fn check(output: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert!(output.status.success(), "{what} failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rpc").join(name)
}

fn paths_seen(server: &MockServer) -> Vec<String> {
    server.seen().iter().map(|s| s.path().to_string()).collect()
}

#[test]
fn ingest_then_ask_and_serve_with_remote_models() {
    let server = MockServer::background(model_server);
    let dir = tempfile::tempdir().unwrap();
    let ingest = a2rag(&server, dir.path()).arg("ingest").args(["curie.txt", "prize.txt"].map(fixture)).output().unwrap();
    check(&ingest, "ingest");
    assert!(paths_seen(&server).iter().all(|p| p == "/v1/embeddings"), "{:?}", paths_seen(&server));

    let ask = a2rag(&server, dir.path()).args(["ask", "--json", "Where was Marie Curie born?"]).output().unwrap();
    let response: Value = serde_json::from_str(&check(&ask, "ask")).expect("JSON response");
    assert_eq!(response["answer"], ANSWER, "{response}");
    assert!(paths_seen(&server).iter().any(|p| p == "/v1/chat/completions"));

    let before = server.hits();
    let mut serve = a2rag(&server, dir.path())
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = serve.stdin.take().unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "query", "params": {"question": "Where was Marie Curie born?"}});
    writeln!(stdin, "{request}").unwrap();
    let mut reply = None;
    for line in BufReader::new(serve.stdout.take().unwrap()).lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).expect("JSON-RPC line");
        if message["id"] == 7 {
            reply = Some(message);
            break;
        }
    }
    drop(stdin);
    let output = serve.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "serve panicked: {stderr}");
    let reply = reply.expect("an answer to the query");
    assert_eq!(reply["result"]["answer"], ANSWER, "{reply} {stderr}");
    assert!(server.hits() > before, "the daemon called the models");
}

#[test]
fn eval_with_remote_models_does_not_panic() {
    let server = MockServer::background(model_server);
    let dir = tempfile::tempdir().unwrap();
    let dataset = dir.path().join("tiny");
    std::fs::create_dir(&dataset).unwrap();
    let corpus = json!({
        "Marie Curie": ["Marie Curie was born in Warsaw.", " She discovered polonium with Pierre Curie."],
        "Warsaw": ["Warsaw is the capital of Poland."]
    });
    let questions = json!([
        {"_id": "q1", "question": "Where was Marie Curie born?", "answer": "Warsaw", "supporting_facts": [["Marie Curie", 0]]},
        {"_id": "q2", "question": "Warsaw is the capital of which country?", "answer": "Poland", "supporting_facts": [["Warsaw", 0]]}
    ]);
    std::fs::write(dataset.join("corpus.json"), corpus.to_string()).unwrap();
    std::fs::write(dataset.join("questions.json"), questions.to_string()).unwrap();
    let output = a2rag(&server, dir.path())
        .arg("eval")
        .arg("--dataset")
        .arg(&dataset)
        .args(["--drop-nodes", "0", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let report = check(&output, "eval");
    assert!(report.contains("a2rag"), "{report}");
    assert!(dir.path().join("out/report.json").is_file());
    assert!(server.hits() > 0 && paths_seen(&server).iter().any(|p| p == "/v1/embeddings"));
}

#[test]
fn a_mistyped_setting_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("a2rag.toml");
    std::fs::write(&config, "[retrieve]\ntop_kk = 4\n").unwrap();
    let run = |command: &mut Command| {
        let output = command.arg("--data-dir").arg(dir.path().join("data")).arg("stats").output().unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = run(Command::new(common::bin()).arg("--config").arg(&config));
    assert!(stderr.contains("retrieve.top_kk") && stderr.contains(&*config.to_string_lossy()), "{stderr}");
    let stderr = run(Command::new(common::bin()).env("A2RAG__RETRIEVE__TOP_KK", "4"));
    assert!(stderr.contains("A2RAG__RETRIEVE__TOP_KK") && stderr.contains("retrieve.top_k`?"), "{stderr}");
}
