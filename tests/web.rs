//! The curation web page (`a2rag serve --http`), on the real daemon: access control, CSRF
//! and the JSON API over plain HTTP from here; the review loop in a real headless Chromium
//! driven by Selenium (tests/web_client.py, from the venv `scripts/web-client.sh install`
//! caches), whose decisions are then checked through JSON-RPC on the same daemon.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

mod common;
use common::tls::TestCa;
use common::{bin, ingested_rpc_fixtures};

/// A document whose text is markup: it must show as text wherever the page shows chunks.
const HOSTILE: &str = "Mallory Quill founded Script Works in Oslo. \
    <script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\"> \
    Script Works makes tools for editors.";

struct Daemon {
    child: Child,
    dir: tempfile::TempDir,
    http: String,
    socket: PathBuf,
    token: String,
}

impl Daemon {
    /// The JSON-RPC fixtures (whose imported triples leave accepted answers something to
    /// propose), the hostile document and the example corpus, served over a unix socket and HTTP.
    fn start() -> Daemon {
        Daemon::serve(None)
    }

    /// As [`Daemon::start`], the page served over TLS with a certificate `ca` signed; `http`
    /// is then an https address.
    fn start_tls(ca: &TestCa) -> Daemon {
        Daemon::serve(Some(ca))
    }

    fn serve(ca: Option<&TestCa>) -> Daemon {
        let dir = ingested_rpc_fixtures();
        let data = dir.path().join("data");
        let hostile = dir.path().join("hostile.txt");
        std::fs::write(&hostile, HOSTILE).unwrap();
        // The example corpus too, for an entity view worth a screenshot.
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/corpus");
        let status = Command::new(bin())
            .arg("--data-dir")
            .arg(&data)
            .arg("ingest")
            .arg(&hostile)
            .arg(examples)
            .status()
            .unwrap();
        assert!(status.success());
        let socket = dir.path().join("rpc.sock");
        let args = ["--http", "127.0.0.1:0", "--listen"].map(String::from);
        let mut args = [args.as_slice(), &[format!("unix:{}", socket.display())]].concat();
        let ready = match ca {
            None => "a2rag: web page at http://",
            Some(ca) => {
                let (_, cert, key) = ca.write_server(dir.path(), "web");
                args.extend(["--config".to_string(), dir.path().join("tls.toml").display().to_string()]);
                let toml = format!(
                    "[server]\ntls_cert = {:?}\ntls_key = {:?}\n",
                    cert.display().to_string(),
                    key.display().to_string()
                );
                std::fs::write(dir.path().join("tls.toml"), toml).unwrap();
                "a2rag: web page at https://"
            }
        };
        let (child, line) = common::spawn_serve(&data, &args, ready);
        let http = line[ready.len()..].split('/').next().unwrap().to_string();
        let token = std::fs::read_to_string(data.join("rpc-token")).unwrap().trim().to_string();
        Daemon { child, dir, http, socket, token }
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn rpc(&self, method: &str, params: Value) -> Value {
        let mut stream = UnixStream::connect(&self.socket).unwrap();
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        writeln!(stream, "{request}").unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request on its own connection: what a browser or a scraper sends, no more.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Reply {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers = lines.filter_map(|l| l.split_once(": ")).map(|(n, v)| (n.to_string(), v.to_string())).collect();
    Reply { status, headers, body: body.to_string() }
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines().filter_map(|l| l.strip_prefix(series)).filter_map(|v| v.trim().parse::<f64>().ok()).sum()
}

#[test]
fn the_api_needs_the_token_and_a_session_post_needs_its_csrf_token() {
    let d = Daemon::start();
    let page = http(&d.http, "GET", "/", &[], None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script src=\"/app.js\""), "the page itself is public: it holds no data");
    assert!(page.header("content-security-policy").is_some_and(|p| p.contains("default-src 'self'")));

    assert_eq!(http(&d.http, "GET", "/api/status", &[], None).status, 401);
    assert_eq!(http(&d.http, "GET", "/metrics", &[], None).status, 401);
    assert_eq!(http(&d.http, "GET", "/api/status", &[("Authorization", "Bearer nope")], None).status, 401);
    let status = http(&d.http, "GET", "/api/status", &[("Authorization", &d.bearer())], None);
    assert_eq!(status.status, 200);
    assert_eq!(status.json()["stats"]["documents"], 11);

    assert_eq!(http(&d.http, "POST", "/login", &[], Some(&json!({"token": "nope"}))).status, 401);
    let login = http(&d.http, "POST", "/login", &[], Some(&json!({"token": d.token})));
    assert_eq!(login.status, 200);
    let cookie_header = login.header("set-cookie").unwrap().to_string();
    assert!(cookie_header.contains("HttpOnly") && cookie_header.contains("SameSite=Strict"), "{cookie_header}");
    let cookie = cookie_header.split(';').next().unwrap().to_string();
    let csrf = login.json()["csrf"].as_str().unwrap().to_string();
    let session = [("Cookie", cookie.as_str())];

    // Reads need only the session; writes also its CSRF token, which another site cannot read.
    assert_eq!(http(&d.http, "GET", "/api/proposals", &session, None).status, 200);
    let ask = json!({"question": "Where was Marie Curie born?"});
    assert_eq!(http(&d.http, "POST", "/api/ask", &session, Some(&ask)).status, 403);
    let wrong = [("Cookie", cookie.as_str()), ("X-CSRF-Token", "0000")];
    assert_eq!(http(&d.http, "POST", "/api/ask", &wrong, Some(&ask)).status, 403);
    let with_csrf = [("Cookie", cookie.as_str()), ("X-CSRF-Token", csrf.as_str())];
    let answered = http(&d.http, "POST", "/api/ask", &with_csrf, Some(&ask));
    assert_eq!(answered.status, 200, "{}", answered.body);
    assert_eq!(answered.json()["answer"], "Warsaw");
    // State changes are POSTs only.
    assert_eq!(http(&d.http, "GET", "/api/ask", &with_csrf, None).status, 405);
    // Malformed requests are answered in the API's JSON error shape, which the page shows.
    let who = json!({"who": "ann"});
    for (method, path, body) in [
        ("POST", "/api/proposals/abc/approve", Some(&who)),
        ("POST", "/api/ask", Some(&json!({"question": "Where?", "colour": 1}))),
        ("GET", "/api/entities", None),
    ] {
        let refused = http(&d.http, method, path, &with_csrf, body);
        assert!((400..500).contains(&refused.status), "{path}: {}", refused.status);
        assert!(refused.header("content-type").is_some_and(|t| t.starts_with("application/json")), "{path}");
        assert!(refused.json()["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}: {}", refused.body);
    }

    assert_eq!(http(&d.http, "POST", "/api/logout", &with_csrf, None).status, 200);
    assert_eq!(http(&d.http, "GET", "/api/proposals", &session, None).status, 401, "signed out");

    // A scraper with the token: the refusals and the query above are counted.
    let metrics = http(&d.http, "GET", "/metrics", &[("Authorization", &d.bearer())], None);
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").is_some_and(|t| t.starts_with("text/plain")));
    let text = &metrics.body;
    assert_eq!(metric(text, r#"a2rag_requests_total{door="http",method="/api/status",outcome="error"}"#), 2.0);
    assert_eq!(metric(text, r#"a2rag_requests_total{door="http",method="/api/ask",outcome="ok"}"#), 1.0);
    assert_eq!(metric(text, r#"a2rag_queries_total{outcome="answered"}"#), 1.0);
    assert_eq!(metric(text, "a2rag_query_duration_seconds_count"), 1.0);
}

#[test]
fn the_page_api_decides_explores_and_exports_what_json_rpc_sees() {
    let d = Daemon::start();
    let auth = [("Authorization", d.bearer())];
    let auth: Vec<(&str, &str)> = auth.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let asked = http(&d.http, "POST", "/api/ask", &auth, Some(&json!({"question": "Where was Marie Curie born?"})));
    assert!(!asked.json()["proposals"].as_array().unwrap().is_empty(), "{}", asked.body);

    let queue = http(&d.http, "GET", "/api/proposals", &auth, None).json();
    let items = queue["proposals"].as_array().unwrap();
    assert!(items.len() >= 2, "{queue}");
    let first = &items[0];
    assert_eq!(first["question"], "Where was Marie Curie born?");
    assert_eq!(first["answer"], "Warsaw");
    assert_eq!(first["highlight"], first["sentence"], "the sentence the triple was read from is highlighted");
    let (approve, edit) = (first["id"].as_u64().unwrap(), items[1]["id"].as_u64().unwrap());

    let who = json!({"who": "ben"});
    assert_eq!(http(&d.http, "POST", "/api/proposals/99999/approve", &auth, Some(&who)).status, 404);
    let anonymous =
        http(&d.http, "POST", &format!("/api/proposals/{approve}/approve"), &auth, Some(&json!({"who": " "})));
    assert_eq!(anonymous.status, 400, "a decision names its reviewer: {}", anonymous.body);
    let no_triple = http(&d.http, "POST", &format!("/api/proposals/{edit}/edit"), &auth, Some(&who));
    assert_eq!(no_triple.status, 400);
    assert_eq!(http(&d.http, "POST", &format!("/api/proposals/{approve}/approve"), &auth, Some(&who)).status, 200);
    let again = http(&d.http, "POST", &format!("/api/proposals/{approve}/reject"), &auth, Some(&who));
    assert_eq!(again.status, 409, "decided already: {}", again.body);
    let corrected =
        json!({"who": "ben", "triple": {"subject": "Marie Curie", "relation": "studied in", "object": "Paris"}});
    assert_eq!(http(&d.http, "POST", &format!("/api/proposals/{edit}/edit"), &auth, Some(&corrected)).status, 200);

    // JSON-RPC on the same daemon sees the decisions in the graph and in the one audit log.
    let node = d.rpc("graph.node", json!({"name": "Marie Curie"}));
    assert!(
        node["neighbours"].as_array().unwrap().iter().any(|n| n["relation"] == "studied in" && n["name"] == "Paris")
    );
    let audit = d.rpc("audit", json!({"who": "ben"}));
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    assert_eq!((entries[0]["action"].as_str(), entries[1]["action"].as_str()), (Some("approve"), Some("edit")));

    // The page's log is newest first, filterable, and exports as JSONL.
    let log = http(&d.http, "GET", "/api/audit?action=edit", &auth, None).json();
    assert_eq!(log["entries"].as_array().unwrap().len(), 1);
    let export = http(&d.http, "GET", "/api/audit.jsonl?who=ben", &auth, None);
    assert!(export.header("content-disposition").is_some_and(|c| c.contains("attachment")));
    let lines: Vec<Value> = export.body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["triple"]["object"], "Paris");

    // Suggestions and the entity view.
    let suggested = http(&d.http, "GET", "/api/entities?q=Mari", &auth, None).json();
    assert_eq!(suggested["entities"][0]["name"], "Marie Curie", "{suggested}");
    let entity = http(&d.http, "GET", "/api/entity?name=Paris", &auth, None).json();
    assert_eq!(entity["neighbours"][0]["name"], "Marie Curie");
    assert_eq!(http(&d.http, "GET", "/api/entity?name=Nobody%20At%20All", &auth, None).status, 404);
    assert_eq!(http(&d.http, "GET", "/api/entity", &auth, None).status, 400);
    let hostile = http(&d.http, "GET", "/api/entity?name=Mallory%20Quill", &auth, None);
    assert!(hostile.header("content-type").is_some_and(|t| t.starts_with("application/json")));
    assert!(hostile.json()["provenance"][0]["text"].as_str().unwrap().contains("<script>"));
}

/// `A2RAG_TEST_WEB_PYTHON`, else the cached venv's python, with Chromium and its driver.
fn browser_python(root: &Path) -> Option<PathBuf> {
    let python = std::env::var_os("A2RAG_TEST_WEB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".cache/web-venv/bin/python"));
    let ready = Command::new(&python)
        .args(["-c", "import selenium.webdriver, prometheus_client.parser, shutil, sys; sys.exit(not (shutil.which('chromedriver') and shutil.which('chromium')))"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ready {
        return Some(python);
    }
    common::skip(
        "headless browser",
        &format!(
            "no chromium, chromedriver and a Python with selenium at {} (run scripts/web-client.sh install, or set A2RAG_TEST_WEB_PYTHON)",
            python.display()
        ),
    );
    None
}

#[test]
fn a_real_browser_reviews_with_the_keyboard_and_renders_untrusted_text_inert() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(python) = browser_python(root) else { return };
    // Over TLS, as a page reached across a network is: the browser goes to https://, and the
    // script's own requests verify the certificate against the test CA.
    let ca = TestCa::new("a2rag web test CA");
    let d = Daemon::start_tls(&ca);
    let ca_file = d.dir.path().join("web-ca.pem");
    // The screenshots in docs/ are this test's: `A2RAG_SCREENSHOTS=docs/screenshots` renews them.
    let shots = std::env::var_os("A2RAG_SCREENSHOTS").map_or_else(|| d.dir.path().join("shots"), |d| root.join(d));
    std::fs::create_dir_all(&shots).unwrap();
    let url = format!("https://{}", d.http);
    let token_file = d.dir.path().join("data/rpc-token");
    let args = [url.as_ref(), token_file.as_os_str(), shots.as_os_str(), ca_file.as_os_str()];
    let stdout = common::run_python_client(&python, "web_client.py", &args);
    for shot in ["review-queue.png", "entity-view.png"] {
        assert!(std::fs::metadata(shots.join(shot)).is_ok_and(|m| m.len() > 10_000), "{shot} was taken");
    }

    // What the page decided, as JSON-RPC on the same daemon sees it.
    let decided: Value = serde_json::from_str(stdout.lines().rev().nth(1).unwrap()).unwrap();
    let approved = d.rpc("proposals.list", json!({"status": "approved"}));
    let by_id = |id: &Value| approved.as_array().unwrap().iter().find(|p| &p["id"] == id).cloned();
    let first = by_id(&decided["approved"]).expect("the approval landed");
    assert_eq!(first["decided_by"], "ana");
    assert!(first["corrected"].is_null());
    let edited = by_id(&decided["edited"]).expect("the edit landed as an approval");
    assert_eq!(edited["corrected"], decided["triple"]);
    let node = d.rpc("graph.node", json!({"name": decided["triple"]["object"]}));
    let relation = decided["triple"]["relation"].as_str().unwrap().trim().to_lowercase();
    assert!(
        node["neighbours"].as_array().unwrap().iter().any(|n| n["relation"] == relation.as_str()),
        "the corrected triple is in the graph: {node}"
    );
    let audit = d.rpc("audit", json!({"who": "ana"}))["entries"].clone();
    let actions: Vec<_> = audit.as_array().unwrap().iter().map(|e| (e["who"].clone(), e["action"].clone())).collect();
    assert_eq!(actions, [(json!("ana"), json!("approve")), (json!("ana"), json!("edit"))]);
}
