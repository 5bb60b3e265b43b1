//! Who may do what (README "Access"), through every door of a real daemon: scoped tokens on
//! JSON-RPC over TCP and unix sockets, the web API and `/metrics`, and MCP; revocation and
//! expiry; the token store holding hashes only; every write attributed to its token; per-token
//! rate limits; TLS on the JSON-RPC listener and the web page. On sled, and on PostgreSQL
//! (two daemons on one database) where the test server runs.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::tls::TestCa;
use common::*;

const FORBIDDEN: i64 = -32004;
const UNAUTHORIZED: i64 = -32001;
const OVERLOADED: i64 = -32000;

/// `a2rag ARGS` on `data` in `store`; stdout, or a panic with stderr.
fn cli(data: &Path, store: &TestStore, args: &[&str]) -> String {
    let out = Command::new(bin()).arg("--data-dir").arg(data).args(args).envs(store.env()).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Makes a token with `a2rag token create NAME ARGS`; returns it.
fn token(data: &Path, store: &TestStore, name: &str, args: &[&str]) -> String {
    let out = cli(data, store, &[&["token", "create", name], args].concat());
    let token = out.trim().to_string();
    assert!(token.starts_with("a2r_"), "{out}");
    token
}

struct Daemon {
    child: Child,
    tcp: String,
    unix: PathBuf,
    http: Option<String>,
}

impl Daemon {
    /// `a2rag serve` on a TCP port and a unix socket (and the web page, with `http`), with
    /// `env` on top of the store's.
    fn start(data: &Path, store: &TestStore, http: bool, env: &[(&str, String)]) -> Daemon {
        let unix = data.join("rpc.sock");
        let mut args = vec!["--listen".to_string(), "tcp:127.0.0.1:0".into(), "--listen".into()];
        args.push(format!("unix:{}", unix.display()));
        if http {
            args.extend(["--http".to_string(), "127.0.0.1:0".into()]);
        }
        let env = [store.env().as_slice(), env].concat();
        let ready = if http { "a2rag: web page at http://" } else { "a2rag: listening on unix:" };
        let (child, lines) = spawn_serve_until(data, &args, &env, |line| line.starts_with(ready));
        let after = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).map(str::to_string);
        let tcp = after("a2rag: listening on tcp:").expect("a TCP listener");
        let http =
            after("a2rag: web page at http://").map(|rest| rest.split('/').next().unwrap_or_default().to_string());
        Daemon { child, tcp, unix, http }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One JSON-RPC connection, line by line.
struct Rpc {
    reader: BufReader<Box<dyn Read>>,
    writer: Box<dyn Write>,
}

impl Rpc {
    fn tcp(addr: &str) -> Rpc {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Rpc { reader: BufReader::new(Box::new(stream.try_clone().unwrap())), writer: Box::new(stream) }
    }

    fn unix(path: &Path) -> Rpc {
        let stream = UnixStream::connect(path).unwrap();
        Rpc { reader: BufReader::new(Box::new(stream.try_clone().unwrap())), writer: Box::new(stream) }
    }

    /// A connection that sent `token` first (and was accepted).
    fn with(door: &dyn Fn() -> Rpc, token: &str) -> Rpc {
        let mut rpc = door();
        let reply = rpc.request("auth", json!({"token": token}));
        assert_eq!(reply["result"]["authenticated"], true, "{reply}");
        rpc
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        writeln!(self.writer, "{request}").unwrap();
        self.writer.flush().unwrap();
        // Progress notifications (no id) come before the reply.
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: `{line}`"));
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params);
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// The error code and message of a request that must fail.
    fn refused(&mut self, method: &str, params: Value) -> (i64, String) {
        let reply = self.request(method, params);
        let error = reply.get("error").unwrap_or_else(|| panic!("{method} was not refused: {reply}"));
        (error["code"].as_i64().unwrap(), error["message"].as_str().unwrap().to_string())
    }
}

/// The JSON-RPC fixtures in the default KB and in a KB `other`.
fn served_kbs(store: &TestStore) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ingest_rpc_fixtures(&data, &store.env());
    cli(&data, store, &["--kb", "other", "ingest", rpc_fixture("curie.txt").to_str().unwrap()]);
    dir
}

#[test]
fn scopes_and_knowledge_bases_bound_every_json_rpc_door() {
    for store in TestStore::all() {
        eprintln!("store: {store:?}");
        let dir = served_kbs(&store);
        let data = dir.path().join("data");
        let reader = token(&data, &store, "reader", &["--scope", "read", "--kb", "default", "--kb", "ghost"]);
        let writer = token(&data, &store, "writer", &["--scope", "write"]);
        let daemon = Daemon::start(&data, &store, false, &[]);
        let tcp = || Rpc::tcp(&daemon.tcp);
        let unix = || Rpc::unix(&daemon.unix);
        for (door, connect) in [("tcp", &tcp as &dyn Fn() -> Rpc), ("unix", &unix)] {
            let mut c = Rpc::with(connect, &reader);
            let found = c.ok("retrieve", json!({"question": "Where was Marie Curie born?"}));
            assert!(!found["retrieval"]["chunks"].as_array().unwrap().is_empty(), "{door}: {found}");
            let answered = c.ok("query", json!({"question": "Where was Marie Curie born?"}));
            assert_eq!(answered["answer"], "Warsaw", "{door}: a reader may query");
            assert_eq!(c.ok("kbs", json!({}))["kbs"], json!(["default"]), "{door}: only the KBs it reaches");
            let doc = json!({"documents": [{"id": "n", "text": "Nora Vale founded Vale Works in Tromso."}]});
            let (code, message) = c.refused("ingest", doc.clone());
            assert_eq!(code, FORBIDDEN, "{door}");
            assert!(message.contains("`write`") && message.contains("`reader`"), "{door}: {message}");
            assert_eq!(c.refused("delete", json!({"id": "n"})).0, FORBIDDEN, "{door}");
            let (code, message) = c.refused("proposals.approve", json!({"id": 1}));
            assert!(code == FORBIDDEN && message.contains("`curate`"), "{door}: {message}");
            assert_eq!(c.refused("shutdown", json!({})).0, FORBIDDEN, "{door}");
            // Another KB is refused in the same words whether or not it exists.
            let (code, there) = c.refused("stats", json!({"kb": "other"}));
            let (_, absent) = c.refused("stats", json!({"kb": "nowhere"}));
            assert_eq!(code, FORBIDDEN, "{door}");
            assert_eq!(there.replace("other", "KB"), absent.replace("nowhere", "KB"), "{door}");
            // A KB it reaches that does not exist yet: the known names are its own only.
            let (code, message) = c.refused("stats", json!({"kb": "ghost"}));
            assert!(code == -32602 && message.contains("(known: default)"), "{door}: {message}");

            let mut w = Rpc::with(connect, &writer);
            let added = w.ok("ingest", doc);
            let report = &added["report"];
            assert_eq!(report["added"].as_u64().unwrap() + report["unchanged"].as_u64().unwrap(), 1, "{added}");
            assert_eq!(w.ok("stats", json!({"kb": "other"}))["documents"], 1, "no --kb: every KB");
            for (method, params) in [("proposals.list", json!({})), ("proposals.reject", json!({"id": 1, "who": "w"}))]
            {
                let (code, message) = w.refused(method, params);
                assert!(code == FORBIDDEN && message.contains("`curate`"), "{door} {method}: {message}");
            }
        }
        // Tokens and repairs are an admin's: the owner's unix socket may, a reader may not.
        let mut c = Rpc::with(&tcp, &reader);
        for (method, params) in [("tokens.list", json!({})), ("check", json!({"repair": true}))] {
            let (code, message) = c.refused(method, params);
            assert!(code == FORBIDDEN && message.contains("`admin`"), "{method}: {message}");
        }
        let made = unix().ok("tokens.create", json!({"name": "over-rpc", "scope": "read", "expires": "1h"}));
        let listed = unix().ok("tokens.list", json!({}));
        assert!(listed.to_string().contains("over-rpc") && !listed.to_string().contains("argon2"), "{listed}");
        Rpc::with(&tcp, made["token"].as_str().unwrap()).ok("stats", json!({}));
        assert_eq!(unix().ok("tokens.revoke", json!({"name": "over-rpc"}))["revoked"], "over-rpc");
        assert_eq!(unix().ok("check", json!({"repair": true}))["released"], json!([]));
        // Without a token, TCP takes nothing but `auth`; the unix socket is the owner's.
        let (code, _) = tcp().refused("stats", json!({}));
        assert_eq!(code, UNAUTHORIZED);
        let (code, _) = tcp().refused("auth", json!({"token": "a2r_0000_nope"}));
        assert_eq!(code, UNAUTHORIZED);
        assert_eq!(unix().ok("kbs", json!({}))["kbs"], json!(["default", "other"]));
    }
}

#[test]
fn revoked_and_expired_tokens_are_refused_within_two_seconds() {
    for store in TestStore::all() {
        eprintln!("store: {store:?}");
        let dir = served_kbs(&store);
        let data = dir.path().join("data");
        // Long enough to outlive two daemons' starts on a loaded machine (over two seconds on
        // PostgreSQL), short enough to wait out below.
        let soon = token(&data, &store, "soon", &["--scope", "read", "--expires", "8s"]);
        let soon_expires = Instant::now() + Duration::from_millis(8_100);
        let gone = token(&data, &store, "gone", &["--scope", "read"]);
        let daemon = Daemon::start(&data, &store, false, &[]);
        // On PostgreSQL the revocation goes through the database to a second daemon.
        let second_dir = dir.path().join("second");
        let second = matches!(store, TestStore::Postgres(_)).then(|| Daemon::start(&second_dir, &store, false, &[]));
        let serving = second.as_ref().unwrap_or(&daemon);
        let mut open = Rpc::with(&|| Rpc::tcp(&serving.tcp), &gone);
        open.ok("stats", json!({}));
        let mut soon_conn = Rpc::with(&|| Rpc::tcp(&serving.tcp), &soon);
        soon_conn.ok("stats", json!({}));

        assert_eq!(cli(&data, &store, &["token", "revoke", "gone"]).trim(), "revoked gone");
        let revoked = Instant::now();
        let refused = |mut rpc: Rpc| rpc.request("auth", json!({"token": gone}))["error"]["code"] == UNAUTHORIZED;
        while !refused(Rpc::tcp(&serving.tcp)) {
            assert!(
                revoked.elapsed() < Duration::from_secs(2),
                "still accepted {:?} after revoking",
                revoked.elapsed()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("revocation seen after {:?}", revoked.elapsed());
        // A connection that authenticated before is refused from its next request on.
        let (code, message) = open.refused("stats", json!({}));
        assert!(code == UNAUTHORIZED && message.contains("revoked"), "{message}");

        std::thread::sleep(soon_expires.saturating_duration_since(Instant::now()));
        let (code, message) = soon_conn.refused("stats", json!({}));
        assert!(code == UNAUTHORIZED && message.contains("expired"), "{message}");
        let (code, _) = Rpc::tcp(&serving.tcp).refused("auth", json!({"token": soon}));
        assert_eq!(code, UNAUTHORIZED);
        let listed = cli(&data, &store, &["token", "list"]);
        assert!(listed.contains("\"soon\"") && !listed.contains("\"gone\""), "{listed}");
    }
}

#[test]
fn the_token_store_holds_hashes_never_tokens() {
    for store in TestStore::all() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let made = token(&data, &store, "ci-bot", &["--scope", "write"]);
        let secret = made.rsplit('_').next().unwrap();
        let stored: Vec<u8> = match &store {
            TestStore::Sled => {
                let file = data.join("tokens.json");
                use std::os::unix::fs::PermissionsExt;
                assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
                std::fs::read(file).unwrap()
            }
            TestStore::Postgres(url) | TestStore::PostgresTls { url, .. } => {
                pg_text(url, "SELECT record FROM a2rag_tokens")
            }
        };
        let stored = String::from_utf8(stored).unwrap();
        assert!(stored.contains("ci-bot") && stored.contains("$argon2"), "{stored}");
        assert!(!stored.contains(&made) && !stored.contains(secret), "the token is not stored: {stored}");
        assert!(!cli(&data, &store, &["token", "list"]).contains("argon2"), "list shows no hash either");
    }
}

/// Every row of the first column `sql` returns, joined by newlines.
fn pg_text(url: &str, sql: &str) -> Vec<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        let driver = tokio::spawn(connection);
        let rows = client.query(sql, &[]).await.unwrap();
        let text: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
        drop(client);
        let _ = driver.await;
        text.join("\n").into_bytes()
    })
}

#[test]
fn every_write_names_the_token_it_came_through() {
    for store in TestStore::all() {
        eprintln!("store: {store:?}");
        let dir = served_kbs(&store);
        let data = dir.path().join("data");
        let writer = token(&data, &store, "writer", &["--scope", "write"]);
        let curator = token(&data, &store, "curator", &["--scope", "curate"]);
        let daemon = Daemon::start(&data, &store, false, &[]);
        let mut w = Rpc::with(&|| Rpc::tcp(&daemon.tcp), &writer);
        let doc = json!({"documents": [{"id": "vale", "text": "Nora Vale founded Vale Works in Tromso."}]});
        w.ok("ingest", doc);
        w.ok("delete", json!({"id": "vale"}));
        let mut c = Rpc::with(&|| Rpc::tcp(&daemon.tcp), &curator);
        let answer = c.ok("query", json!({"question": "Where was Marie Curie born?"}));
        let proposal = answer["proposals"][0].as_u64().expect("the answer proposes a triple");
        c.ok("proposals.approve", json!({"id": proposal, "who": "ann"}));
        drop(daemon);

        let entries: Vec<Value> =
            cli(&data, &store, &["audit"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(entries.iter().all(|e| !e["token"].as_str().unwrap().is_empty()), "every entry names a token");
        let by = |token: &str| -> Vec<(String, String)> {
            let out = cli(&data, &store, &["audit", "--who", token]);
            out.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .map(|e| (e["action"].as_str().unwrap().to_string(), e["who"].as_str().unwrap().to_string()))
                .collect()
        };
        let ingested = entries.iter().filter(|e| e["token"] == "owner" && e["action"] == "ingest").count();
        assert_eq!(ingested, 3, "the CLI's ingests are the owner's");
        assert_eq!(by("writer"), [("ingest".into(), "writer".into()), ("delete".into(), "writer".into())]);
        assert_eq!(by("curator"), [("approve".into(), "ann".into())], "the reviewer's name stays a label");
        if let TestStore::Postgres(url) = &store {
            let authors = String::from_utf8(pg_text(url, "SELECT author FROM a2rag_changes ORDER BY kb, seq")).unwrap();
            assert!(authors.lines().all(|a| !a.is_empty()), "every change names its token: {authors}");
            for name in ["owner", "writer", "curator"] {
                assert!(authors.lines().any(|a| a == name), "{name} in the change log: {authors}");
            }
        }
    }
}

#[test]
fn a_token_over_its_rate_is_overloaded_while_another_goes_on() {
    let store = TestStore::Sled;
    let dir = served_kbs(&store);
    let data = dir.path().join("data");
    let limited = token(&data, &store, "limited", &["--scope", "read", "--rps", "5"]);
    let free = token(&data, &store, "free", &["--scope", "read"]);
    let daemon = Daemon::start(&data, &store, true, &[]);
    let run = |token: &str| {
        let mut c = Rpc::with(&|| Rpc::tcp(&daemon.tcp), token);
        (0..25).map(|_| c.request("stats", json!({}))).collect::<Vec<_>>()
    };
    let (limited_replies, free_replies) = std::thread::scope(|s| {
        let limited = s.spawn(|| run(&limited));
        let free = s.spawn(|| run(&free));
        (limited.join().unwrap(), free.join().unwrap())
    });
    let overloaded = limited_replies.iter().filter(|r| r["error"]["code"] == OVERLOADED).count();
    let ok = limited_replies.iter().filter(|r| r.get("error").is_none()).count();
    assert!(overloaded > 0 && ok >= 5 && ok + overloaded == 25, "limited: {ok} ok, {overloaded} overloaded");
    let message = limited_replies.iter().find_map(|r| r["error"]["message"].as_str()).unwrap();
    assert!(message.contains("5 requests per second"), "{message}");
    assert!(free_replies.iter().all(|r| r.get("error").is_none()), "the other token is not limited");
    let metrics = http_get(daemon.http.as_deref().unwrap(), "/metrics", Some(&free));
    assert!(metrics.0 == 200, "{metrics:?}");
    let line = metrics.1.lines().find(|l| l.starts_with("a2rag_access_refusals_total") && l.contains("\"limited\""));
    let counted: f64 = line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0);
    assert_eq!(counted as usize, overloaded, "{line:?}");
}

/// Status and body of `GET path` on the web server, with `token` as a bearer header.
fn http_get(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    http_request(addr, "GET", path, token, None)
}

fn http_request(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(raw_request(addr, method, path, token, body).as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    parse_reply(&raw)
}

fn raw_request(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> String {
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn parse_reply(raw: &str) -> (u16, String) {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

#[test]
fn the_web_page_and_metrics_check_the_same_scopes() {
    let store = TestStore::Sled;
    let dir = served_kbs(&store);
    let data = dir.path().join("data");
    let reader = token(&data, &store, "reader", &["--scope", "read", "--kb", "default"]);
    let writer = token(&data, &store, "writer", &["--scope", "write"]);
    let daemon = Daemon::start(&data, &store, true, &[]);
    let web = daemon.http.as_deref().unwrap();
    assert_eq!(http_get(web, "/api/status", None).0, 401);
    assert_eq!(http_get(web, "/metrics", None).0, 401, "metrics need a token too");
    let ask = json!({"question": "Where was Marie Curie born?"});
    let (status, body) = http_request(web, "POST", "/api/ask", Some(&reader), Some(&ask));
    assert!(status == 200 && body.contains("Warsaw"), "a reader may ask: {status} {body}");
    let (status, body) =
        http_request(web, "POST", "/api/proposals/1/reject", Some(&writer), Some(&json!({"who": "w"})));
    assert!(status == 403 && body.contains("curate"), "a writer may not decide: {status} {body}");
    assert_eq!(http_get(web, "/api/status", Some("a2r_0_wrong")).0, 401);
    let (status, body) = http_get(web, "/api/session", Some(&reader));
    assert_eq!(status, 200, "{body}");
    let session: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((session["token"].clone(), session["scope"].clone()), (json!("reader"), json!("read")));
    assert_eq!(session["may"], json!(["read"]), "the page offers reading only");
    assert_eq!(session["kbs"], json!(["default"]));
    assert_eq!(http_get(web, "/api/status", Some(&reader)).0, 200);
    assert_eq!(http_get(web, "/metrics", Some(&reader)).0, 200);
    let (status, body) = http_get(web, "/api/proposals", Some(&reader));
    assert!(status == 403 && body.contains("curate"), "{status} {body}");
    let decision = json!({"who": "ann"});
    let (status, body) = http_request(web, "POST", "/api/proposals/1/approve", Some(&reader), Some(&decision));
    assert!(status == 403 && body.contains("curate"), "{status} {body}");
    let (status, _) = http_get(web, "/api/status?kb=other", Some(&reader));
    assert_eq!(status, 403);
    // A session opened with the token ends with it.
    let login = json!({"token": reader});
    let mut stream = std::net::TcpStream::connect(web).unwrap();
    stream.write_all(raw_request(web, "POST", "/login", None, Some(&login)).as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let cookie =
        raw.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap().split(';').next().unwrap().to_string();
    let with_cookie = |path: &str| {
        let mut stream = std::net::TcpStream::connect(web).unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {web}\r\nConnection: close\r\nCookie: {cookie}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        parse_reply(&raw)
    };
    assert_eq!(with_cookie("/api/status").0, 200);
    cli(&data, &store, &["token", "revoke", "reader"]);
    std::thread::sleep(Duration::from_millis(1200));
    let (status, body) = with_cookie("/api/status");
    assert!(status == 401 && body.contains("revoked"), "{status} {body}");
}

/// MCP over stdio with a token in the environment: the tools its scope lacks are not listed,
/// and calling one anyway is refused.
#[test]
fn mcp_lists_only_the_tools_a_token_may_use() {
    let store = TestStore::Sled;
    let dir = served_kbs(&store);
    let data = dir.path().join("data");
    let reader = token(&data, &store, "reader", &["--scope", "read", "--kb", "default"]);
    let session = |token: &str, calls: &[Value]| -> Vec<Value> {
        let mut child = Command::new(bin())
            .arg("--data-dir")
            .arg(&data)
            .arg("mcp")
            .env("A2RAG_TOKEN", token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut send = |m: Value| writeln!(stdin, "{m}").unwrap();
        send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let mut replies = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let mut call = call.clone();
            call["jsonrpc"] = json!("2.0");
            call["id"] = json!(i + 1);
            send(call);
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            replies.push(serde_json::from_str(&line).unwrap());
        }
        drop(stdin);
        let _ = child.wait();
        replies
    };
    let calls = [
        json!({"method": "tools/list", "params": {}}),
        json!({"method": "tools/call", "params": {"name": "ingest_text",
            "arguments": {"documents": [{"id": "x", "text": "Nora Vale founded Vale Works."}]}}}),
        json!({"method": "tools/call", "params": {"name": "kb_stats", "arguments": {}}}),
        json!({"method": "tools/call", "params": {"name": "review_proposal",
            "arguments": {"id": 1, "decision": "reject"}}}),
        json!({"method": "tools/call", "params": {"name": "kb_stats", "arguments": {"kb": "other"}}}),
    ];
    let replies = session(&reader, &calls);
    let names: Vec<&str> =
        replies[0]["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["retrieve", "ask", "kb_stats"]);
    let refused = &replies[1]["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(refused["content"][0]["text"].as_str().unwrap().contains("`write`"), "{refused}");
    assert_eq!(replies[2]["result"]["structuredContent"]["stats"]["documents"], 3);
    assert_eq!(replies[2]["result"]["structuredContent"]["kbs"], json!(["default"]), "only its KBs");
    let refused = &replies[3]["result"];
    assert!(refused["isError"] == true && refused.to_string().contains("`curate`"), "{refused}");
    let refused = &replies[4]["result"];
    assert!(refused["isError"] == true && refused.to_string().contains("does not reach"), "{refused}");
    // The owner, without a token, has every tool.
    let owner = Command::new(bin()).arg("--data-dir").arg(&data).arg("mcp").env("A2RAG_TOKEN", "a2r_0_wrong").output();
    let owner = owner.unwrap();
    assert!(!owner.status.success(), "a wrong token stops the server at start");
    assert!(
        String::from_utf8_lossy(&owner.stderr).contains("A2RAG_TOKEN"),
        "{}",
        String::from_utf8_lossy(&owner.stderr)
    );
}

/// TLS on the JSON-RPC listener and the web page: a client that trusts the test CA gets
/// through, a plain-text client does not, and a new certificate is served after SIGHUP.
#[test]
fn json_rpc_and_the_web_page_speak_tls_and_reload_on_sighup() {
    let store = TestStore::Sled;
    let dir = served_kbs(&store);
    let data = dir.path().join("data");
    let (first, second) = (TestCa::new("first test CA"), TestCa::new("second test CA"));
    let (_, cert, key) = first.write_server(dir.path(), "first");
    let reader = token(&data, &store, "reader", &["--scope", "read"]);
    let env = [
        ("A2RAG__SERVER__TLS_CERT", cert.display().to_string()),
        ("A2RAG__SERVER__TLS_KEY", key.display().to_string()),
    ];
    let args = ["--listen", "tls:127.0.0.1:0", "--http", "127.0.0.1:0"].map(String::from);
    let (mut child, lines) =
        spawn_serve_until(&data, &args, &env, |line| line.starts_with("a2rag: web page at https://"));
    let after = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).map(str::to_string);
    let rpc = after("a2rag: listening on tls:");
    let web = after("a2rag: web page at https://").map(|rest| rest.split('/').next().unwrap_or_default().to_string());
    let (rpc, web) = (rpc.expect("a tls listener"), web.expect("an https page"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let exchange = |addr: &str, ca: &TestCa, request: String| -> std::io::Result<String> {
        runtime.block_on(async {
            use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
            let mut stream = common::tls::connect(addr, ca).await?;
            stream.write_all(request.as_bytes()).await?;
            if request.starts_with('{') {
                let mut line = String::new();
                tokio::io::BufReader::new(stream).read_line(&mut line).await?;
                Ok(line)
            } else {
                let mut raw = Vec::new();
                // A TLS peer may close without close_notify once the reply is sent.
                let _ = stream.read_to_end(&mut raw).await;
                Ok(String::from_utf8_lossy(&raw).into_owned())
            }
        })
    };
    let auth = format!("{}\n", json!({"jsonrpc": "2.0", "id": 1, "method": "auth", "params": {"token": reader}}));
    let reply = exchange(&rpc, &first, auth.clone()).unwrap();
    assert!(reply.contains("\"authenticated\":true"), "{reply}");
    let (status, body) =
        parse_reply(&exchange(&web, &first, raw_request(&web, "GET", "/api/session", Some(&reader), None)).unwrap());
    assert!(status == 200 && body.contains("\"reader\""), "{status} {body}");
    assert!(exchange(&rpc, &second, auth.clone()).is_err(), "a client trusting another CA refuses the server");

    // Plain text is not served on either port.
    let mut plain = std::net::TcpStream::connect(&rpc).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    plain.write_all(auth.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("authenticated"), "plain JSON-RPC on the TLS port");
    let (status, _) = http_get(&web, "/api/session", Some(&reader));
    assert_ne!(status, 200, "plain HTTP on the HTTPS port");

    // A renewed certificate, from another CA, is served after SIGHUP without a restart.
    let (_, cert2, key2) = second.write_server(dir.path(), "second");
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while exchange(&rpc, &second, auth.clone()).is_err() {
        assert!(Instant::now() < deadline, "the new certificate is not served after SIGHUP");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(exchange(&web, &second, raw_request(&web, "GET", "/api/session", Some(&reader), None)).is_ok());
    assert!(exchange(&rpc, &first, auth).is_err(), "the old certificate is gone");
    let _ = child.kill();
    let _ = child.wait();
}
