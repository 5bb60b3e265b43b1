//! `a2rag mcp` end to end: the real binary over stdio, driven by the official Python MCP SDK
//! (tests/mcp_client.py, from the venv `scripts/mcp-client.sh install` caches in
//! .cache/mcp-venv) and by hand-written protocol lines for what a client library hides.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

mod common;
use common::ingested_rpc_fixtures;

const BIN: &str = env!("CARGO_BIN_EXE_a2rag");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `A2RAG_TEST_MCP_PYTHON`, else the cached venv's python when it has the SDK.
fn sdk_python() -> Option<PathBuf> {
    let python = std::env::var_os("A2RAG_TEST_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/mcp-venv/bin/python"));
    let has_sdk =
        Command::new(&python).args(["-c", "import mcp.client.stdio"]).output().is_ok_and(|o| o.status.success());
    if has_sdk {
        Some(python)
    } else {
        common::skip(
            "MCP SDK",
            &format!(
                "no Python with the MCP SDK at {} (run scripts/mcp-client.sh install, or set A2RAG_TEST_MCP_PYTHON)",
                python.display()
            ),
        );
        None
    }
}

#[test]
fn the_python_sdk_lists_retrieves_asks_ingests_reviews_and_survives_bad_calls() {
    let Some(python) = sdk_python() else { return };
    let dir = ingested_rpc_fixtures();
    let data = dir.path().join("data");
    common::run_python_client(&python, "mcp_client.py", &[BIN.as_ref(), data.as_os_str()]);

    // What the assistant decided is on disk in the audit log.
    let mut settings = a2rag::config::Settings::load(None).unwrap();
    settings.data_dir = dir.path().join("data");
    let engine = a2rag::engine::Engine::open(settings, None).unwrap();
    let audit = a2rag::curate::audit_log(&common::default_kb(&engine).blocking_read()).unwrap();
    let who: Vec<&str> = audit.iter().filter(|a| a.action.is_decision()).map(|a| a.who.as_str()).collect();
    assert_eq!(who, ["mcp:a2rag-test", "ann"]);
    let ingested = audit.iter().filter(|a| a.action == a2rag::curate::Action::Ingest).collect::<Vec<_>>();
    // The CLI's ingests of the fixtures, then the assistant's `ingest_text`: all the owner's,
    // since the server was started without A2RAG_TOKEN.
    assert!(ingested.len() > 3 && ingested.iter().all(|a| a.token == "owner"), "{ingested:?}");
}

/// A client speaking MCP by hand: one line per message.
struct Session {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Session {
    fn start(data: &Path) -> Session {
        let mut child = Command::new(BIN)
            .arg("--data-dir")
            .arg(data)
            .args(["-v", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Session { child, stdin, stdout }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line on stdout, which must be a JSON-RPC message.
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert!(self.stdout.read_line(&mut line).unwrap() > 0, "server closed stdout");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"))
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.recv();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    fn initialize(&mut self, version: &str) -> Value {
        let reply = self.request(
            1,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "by-hand", "version": "0"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        reply["result"].clone()
    }

    /// Closes stdin and returns the exit status and everything the server logged.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        assert!(rest.trim().is_empty(), "unexpected output after end of input: {rest}");
        let output = self.child.wait_with_output().unwrap();
        (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn older_clients_get_their_revision_and_end_of_input_ends_the_server() {
    let dir = ingested_rpc_fixtures();
    let data = dir.path().join("data");
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Session::start(&data);
        let init = s.initialize(version);
        assert_eq!(init["protocolVersion"], version, "{init}");
        assert_eq!(init["serverInfo"]["name"], "a2rag");
        let tools = s.request(2, "tools/list", json!({}));
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 6, "{tools}");
        let found = s.request(
            3,
            "tools/call",
            json!({"name": "retrieve", "arguments": {"question": "Where is the Sklodowska Medal awarded?"}}),
        );
        let chunks = &found["result"]["structuredContent"]["retrieval"]["chunks"];
        assert!(chunks[0]["doc_id"].as_str().unwrap().ends_with("prize.txt"), "{found}");
        let (status, stderr) = s.finish();
        assert!(status.success(), "{stderr}");
        // Logs went to stderr (-v), never into the protocol stream.
        assert!(stderr.contains("MCP session ended"), "{stderr}");
    }
}

#[test]
fn bad_calls_are_errors_and_the_session_goes_on() {
    let dir = ingested_rpc_fixtures();
    let mut s = Session::start(&dir.path().join("data"));
    s.initialize("2025-11-25");
    // An unknown tool is a protocol error naming the tools.
    let reply = s.request(2, "tools/call", json!({"name": "no_such_tool", "arguments": {}}));
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("retrieve"), "{reply}");
    // Bad arguments are tool errors the model can read and act on.
    for (id, arguments, says) in [
        (3, json!({}), "missing field `question`"),
        (4, json!({"question": "Where?", "top_k": 0}), "top_k must be 1 to 100"),
        (5, json!({"question": "Where?", "kb": "../etc"}), "is not 1 to 64 letters"),
        (6, json!({"question": "Where?", "kb": "nope"}), "unknown knowledge base `nope` (known: default)"),
    ] {
        let reply = s.request(id, "tools/call", json!({"name": "retrieve", "arguments": arguments}));
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(says), "{text}");
    }
    let reply =
        s.request(7, "tools/call", json!({"name": "review_proposal", "arguments": {"id": 1, "decision": "approve"}}));
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(reply["result"]["content"][0]["text"].as_str().unwrap().contains("not found: proposal 1"), "{reply}");
    // A malformed message does not kill the session either.
    s.send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": "not an object"}));
    let reply = s.recv();
    assert!(reply.get("error").is_some(), "{reply}");
    let stats = s.request(9, "tools/call", json!({"name": "kb_stats", "arguments": {}}));
    assert_eq!(stats["result"]["structuredContent"]["stats"]["documents"], 3, "{stats}");
    // A read of an unknown KB created nothing.
    assert_eq!(stats["result"]["structuredContent"]["kbs"], json!(["default"]));
    let (status, stderr) = s.finish();
    assert!(status.success(), "{stderr}");
}
