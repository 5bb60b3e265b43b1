//! Property-based fuzzing of everything that reads untrusted input: the JSON-RPC framing,
//! every method's parameters (taken from the daemon's own method table, so methods added
//! later are covered), and every ingest parser. `PROPTEST_CASES` sets the cases per property
//! (the CI default is below); `scripts/fuzz-long.sh` runs a long campaign.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use a2rag::ingest::source::{self, SourceProblem};
use a2rag::ingest::triples::TripleImport;
use a2rag::rpc::protocol::{Frame, LineReader};

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(default);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------- framing

fn frames(input: &[u8], max: usize) -> Vec<Option<Vec<u8>>> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(frame) = reader.next().await.unwrap() {
            out.push(match frame {
                Frame::Line(l) => Some(l),
                Frame::TooLarge => None,
            });
        }
        out
    })
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Each newline-terminated piece is one frame: itself when within the limit, `TooLarge`
    /// otherwise; nothing is lost, merged or held beyond the limit.
    #[test]
    fn framing_splits_exactly_on_newlines_and_bounds_every_frame(input in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..600), max in 1usize..64) {
        let mut expected: Vec<Option<Vec<u8>>> = input.split(|b| *b == b'\n').map(|l| (l.len() <= max).then(|| l.to_vec())).collect();
        // A trailing newline ends the last line rather than starting an empty one.
        if input.is_empty() || input.ends_with(b"\n") {
            expected.pop();
        }
        prop_assert_eq!(frames(&input, max), expected);
    }
}

// ---------------------------------------------------------------- methods

/// One daemon for every case, serving a small KB on a unix socket in this process.
struct Served {
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let settings = common::settings_in(&dir.path().join("data"));
        let engine = Arc::new(a2rag::engine::Engine::open(settings, None).unwrap());
        let docs = [("curie", "Marie Curie was born in Warsaw. Marie Curie studied in Paris.")];
        {
            let kb = common::default_kb(&engine);
            let mut kb = kb.blocking_write();
            let docs = docs
                .iter()
                .map(|(id, text)| a2rag::ingest::source::SourceDoc {
                    id: id.to_string(),
                    title: id.to_string(),
                    text: text.to_string(),
                    source: "fuzz".into(),
                    links: Vec::new(),
                })
                .collect();
            a2rag::ingest::ingest_docs(&mut *kb, &engine.pipeline, docs, &mut (), &mut Default::default()).unwrap();
        }
        let socket = dir.path().join("fuzz.sock");
        let options = a2rag::rpc::ServeOptions {
            stdio: false,
            listen: vec![a2rag::rpc::Listen::Unix(socket.clone())],
            grace: Duration::from_secs(1),
            tls: None,
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async { a2rag::rpc::serve(engine, options).await.unwrap() });
        });
        while !socket.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        Served { socket, _dir: dir }
    })
}

struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect() -> Client {
        let stream = UnixStream::connect(&served().socket).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Client { writer: stream.try_clone().unwrap(), reader: BufReader::new(stream) }
    }

    /// Sends `line`, then returns the reply with `id`, skipping notifications and late
    /// answers to earlier lines (a batch is answered once all its elements are done).
    fn exchange(&mut self, line: &str, id: &Value) -> Value {
        self.writer.write_all(line.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
        loop {
            let mut reply = String::new();
            assert!(self.reader.read_line(&mut reply).unwrap() > 0, "the daemon closed the connection after {line}");
            let reply: Value = serde_json::from_str(&reply).unwrap();
            if reply.get("id") == Some(id) {
                return reply;
            }
        }
    }
}

fn client() -> &'static std::sync::Mutex<Client> {
    static CLIENT: OnceLock<std::sync::Mutex<Client>> = OnceLock::new();
    CLIENT.get_or_init(|| std::sync::Mutex::new(Client::connect()))
}

/// Field names the methods know, so generated objects hit real fields as well as unknown ones.
const FIELDS: &[&str] = &[
    "question",
    "policy",
    "budget",
    "id",
    "paths",
    "documents",
    "text",
    "title",
    "status",
    "who",
    "subject",
    "relation",
    "object",
    "name",
    "limit",
    "token",
    "x",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u64..5).prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "\\PC{0,24}".prop_map(Value::from),
        prop_oneof![
            Just("pending"),
            Just("approved"),
            Just("Marie Curie"),
            Just("Where was Marie Curie born?"),
            Just("/etc/passwd")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(FIELDS), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// Codes a reply may carry: the protocol's and the server's own.
const CODES: &[i64] = &[-32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003, -32800];

proptest! {
    #![proptest_config(cases(2000))]

    /// Whatever the parameters, every method answers with its id and either a result or an
    /// error with a documented code, and the daemon keeps serving.
    #[test]
    fn every_method_answers_any_params_with_a_result_or_a_documented_error(
        method in proptest::sample::select(a2rag::rpc::METHODS.iter().copied().filter(|m| *m != "shutdown").collect::<Vec<_>>()),
        params in prop_oneof![json_value(), proptest::collection::vec((proptest::sample::select(FIELDS), json_value()), 0..4)
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))],
        id in any::<u32>(),
    ) {
        let mut c = client().lock().unwrap();
        let reply = c.exchange(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(), &json!(id));
        prop_assert!(reply["jsonrpc"] == "2.0", "{}", reply);
        match reply.get("error") {
            None => {
                prop_assert_eq!(&reply["id"], &json!(id));
                prop_assert!(reply.get("result").is_some());
            }
            Some(e) => {
                let code = e["code"].as_i64().unwrap_or_default();
                prop_assert!(CODES.contains(&code), "{}", reply);
                prop_assert!(code != -32603, "internal error for {} {}: {}", method, params, reply);
            }
        }
    }

    /// Raw lines, however broken, get one well-formed answer (or none for notifications).
    #[test]
    fn arbitrary_lines_never_break_the_connection(line in prop_oneof!["\\PC{0,64}", json_value().prop_map(|v| v.to_string())]) {
        let line = line.replace('\n', " ");
        prop_assume!(!line.trim().is_empty());
        let mut c = client().lock().unwrap();
        // A probe after the line proves the connection still works, whatever the line did.
        c.writer.write_all(format!("{line}\n").as_bytes()).unwrap();
        let probe = c.exchange(r#"{"jsonrpc":"2.0","id":"probe","method":"health"}"#, &json!("probe"));
        prop_assert_eq!(&probe["result"]["status"], "ok");
    }
}

// ---------------------------------------------------------------- ingest parsers

fn jsonl_line() -> impl Strategy<Value = (Vec<u8>, bool)> {
    prop_oneof![
        ("[a-z]{1,8}", "\\PC{1,40}")
            .prop_map(|(id, text)| (json!({"id": id, "text": format!("x{text}")}).to_string().into_bytes(), true)),
        proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 1..40)
            .prop_map(|b| (b, false)),
    ]
}

proptest! {
    #![proptest_config(cases(1000))]

    /// Any bytes in any supported format: no panic, and only documents with text come out.
    #[test]
    fn every_format_reads_arbitrary_bytes_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400), ext in proptest::sample::select(vec!["txt", "md", "jsonl", "json"])) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("f.{ext}"));
        std::fs::write(&path, &bytes).unwrap();
        let out = source::read_file(&path, 1 << 20);
        prop_assert!(out.docs.iter().all(|d| !d.text.trim().is_empty()));
        let _ = TripleImport::load(&path.with_extension(ext));
    }

    /// A `.jsonl` keeps every good line, whatever surrounds it, and names each bad line.
    #[test]
    fn jsonl_keeps_good_lines_and_reports_bad_ones_by_number(lines in proptest::collection::vec(jsonl_line(), 1..20)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        let mut content = Vec::new();
        for (line, _) in &lines {
            content.extend_from_slice(line);
            content.push(b'\n');
        }
        std::fs::write(&path, &content).unwrap();
        let out = source::read_file(&path, 1 << 20);
        let good: Vec<usize> = lines.iter().enumerate().filter(|(_, (_, ok))| *ok).map(|(i, _)| i + 1).collect();
        prop_assert_eq!(out.docs.len(), good.len());
        let reported: Vec<usize> = out.problems.iter().filter_map(|p| match p {
            SourceProblem::Error(a2rag::Error::Parse { line, .. }) => Some(*line),
            _ => None,
        }).collect();
        for (i, (line, ok)) in lines.iter().enumerate() {
            // A random line may happen to be blank or valid JSON of the right shape.
            let blank = String::from_utf8_lossy(line).trim().is_empty();
            if !ok && !blank && serde_json::from_slice::<Value>(line).is_err() {
                prop_assert!(reported.contains(&(i + 1)), "line {} not reported: {:?}", i + 1, out.problems);
            }
        }
    }

    /// Triples files: any content loads or fails cleanly, and every triple is either kept or
    /// accounted for.
    #[test]
    fn triples_are_kept_or_counted(raw in proptest::collection::vec(proptest::collection::vec(json_value(), 0..5), 0..8)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, json!([{"title": "T", "text": "x", "triples": raw}]).to_string()).unwrap();
        let import = TripleImport::load(&path).unwrap();
        let kept = import.for_document("T", "x").map_or(0, |t| t.len());
        prop_assert_eq!(import.total, raw.len());
        prop_assert!(kept + import.skipped <= raw.len());
        prop_assert_eq!(import.problems().iter().filter(|p| p.triples == 1).count(), import.skipped);
    }
}
