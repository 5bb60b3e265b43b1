//! Model download from the Hugging Face hub (`a2rag::embed::hub`, the hf-hub crate) against a
//! local server that answers the way the hub does:
//!
//! * `GET /{repo}/resolve/{revision}/{file}` with `Range: bytes=0-0` (hf-hub's metadata probe)
//!   answers 206 with `etag`, `x-repo-commit` and `content-range: bytes 0-0/{size}`; large
//!   (LFS) files instead answer 302 with `x-linked-etag`, `x-repo-commit` and an absolute
//!   `Location` on another host name, which serves the byte ranges, as the hub's CDN does;
//! * the download itself asks for byte ranges (`Range: bytes={start}-{stop}`);
//! * an unknown file is a 404.
//!
//! Then the cache answers with no server at all; the CLI honours `HF_ENDPOINT`; and where the
//! real all-MiniLM-L6-v2 files are present, a copy fetched through the mock hub loads and
//! embeds exactly like the local directory, also in a fresh working directory via the binary.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use a2rag::embed::{Embedder, MiniLmEmbedder, cosine, hub};
use a2rag::net::Remote;
use common::http::{MockServer, Reply, Seen};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

type Files = Arc<HashMap<String, Arc<Vec<u8>>>>;

fn files(entries: &[(&str, Vec<u8>)]) -> Files {
    Arc::new(entries.iter().map(|(name, bytes)| (name.to_string(), Arc::new(bytes.clone()))).collect())
}

/// FNV-1a, as a stand-in for the hub's content hashes (any stable, file-name-safe string).
fn etag(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

fn header(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

/// The requested byte range of `body` (all of it without a `Range` header), as a reply.
fn ranged(seen: &Seen, body: &[u8], mut headers: Vec<(String, String)>) -> Reply {
    let len = body.len();
    let Some(range) = seen.header("range").and_then(|r| r.strip_prefix("bytes=")) else {
        return Reply::Raw { status: 200, headers, body: body.to_vec() };
    };
    let (start, stop) = range.split_once('-').expect("bytes=START-STOP");
    let start: usize = start.parse().expect("range start");
    // hf-hub asks for one byte past the end of the last chunk; clamp, as HTTP servers do.
    let stop = stop.parse::<usize>().expect("range stop").min(len.saturating_sub(1));
    headers.push(header("content-range", format!("bytes {start}-{stop}/{len}")));
    Reply::Raw { status: 206, headers, body: body[start..=stop].to_vec() }
}

/// A hub serving `files` as the `main` revision of `repo`; `.safetensors` files go through
/// a redirect to `/cdn/{file}` the way LFS files do.
fn hub_server(repo: &str, files: Files) -> MockServer {
    let prefix = format!("/{repo}/resolve/main/");
    MockServer::background(move |_, seen| {
        let path = seen.path().to_string();
        if let Some(name) = path.strip_prefix("/cdn/") {
            let body = files.get(name).expect("redirected to a known file");
            return ranged(seen, body, vec![]);
        }
        let Some(name) = path.strip_prefix(&prefix) else {
            return Reply::Raw { status: 404, headers: vec![header("x-error-code", "RepoNotFound")], body: vec![] };
        };
        let Some(body) = files.get(name) else {
            return Reply::Raw { status: 404, headers: vec![header("x-error-code", "EntryNotFound")], body: vec![] };
        };
        if name.ends_with(".safetensors") {
            // Another host name for the same server, as the CDN is another host: hf-hub follows
            // only same-host redirects itself and reads the metadata before leaving the hub.
            let port = seen.header("host").and_then(|h| h.rsplit(':').next()).expect("host header");
            return Reply::Raw {
                status: 302,
                headers: vec![
                    header("location", format!("http://localhost:{port}/cdn/{name}")),
                    header("x-linked-etag", format!("\"{}\"", etag(body))),
                    header("x-repo-commit", COMMIT),
                ],
                body: vec![],
            };
        }
        let headers = vec![header("etag", format!("\"{}\"", etag(body))), header("x-repo-commit", COMMIT)];
        ranged(seen, body, headers)
    })
}

/// An endpoint where nothing listens.
fn dead_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

fn fake_repo() -> Files {
    files(&[
        ("config.json", br#"{"hidden_size": 4}"#.to_vec()),
        ("tokenizer.json", b"{}".to_vec()),
        ("model.safetensors", (0..3000u32).map(|i| (i % 251) as u8).collect()),
    ])
}

#[test]
fn fetches_a_repo_into_the_cache_then_needs_no_server() {
    let repo = fake_repo();
    let server = hub_server("org/tiny-model", Arc::clone(&repo));
    let cache = tempfile::tempdir().unwrap();

    let fetched =
        hub::fetch_from(&Remote::new(), "org/tiny-model", cache.path(), &server.root, false).expect("download");
    assert!(!fetched.from_cache);
    // sentence_bert_config.json is optional: the 404 for it is no error.
    assert_eq!(fetched.files, ["config.json", "tokenizer.json", "model.safetensors"]);
    assert!(
        fetched.dir.starts_with(cache.path().join("models--org--tiny-model/snapshots")),
        "{}",
        fetched.dir.display()
    );
    assert!(fetched.dir.ends_with(COMMIT));
    for (name, bytes) in repo.iter() {
        assert_eq!(&std::fs::read(fetched.dir.join(name)).unwrap(), bytes.as_ref(), "{name}");
    }

    let seen = server.seen();
    let first = &seen[0];
    assert_eq!(first.path(), "/org/tiny-model/resolve/main/config.json");
    assert_eq!(first.header("range"), Some("bytes=0-0"), "the metadata probe asks for one byte");
    assert!(seen.iter().any(|r| r.path() == "/cdn/model.safetensors"), "the LFS redirect was followed");
    assert!(seen.iter().any(|r| r.path() == "/org/tiny-model/resolve/main/sentence_bert_config.json"));
    drop(server);

    let again =
        hub::fetch_from(&Remote::new(), "org/tiny-model", cache.path(), &dead_endpoint(), false).expect("cache hit");
    assert!(again.from_cache);
    assert_eq!(again.dir, fetched.dir);
    assert_eq!(hub::cached("org/tiny-model", cache.path()), Some(again));
}

#[test]
fn a_missing_required_file_is_named() {
    let repo = files(&[("config.json", b"{}".to_vec())]);
    let server = hub_server("org/partial", repo);
    let cache = tempfile::tempdir().unwrap();
    let error =
        hub::fetch_from(&Remote::new(), "org/partial", cache.path(), &server.root, false).expect_err("no tokenizer");
    let message = error.to_string();
    assert!(message.contains("tokenizer.json") && message.contains("404"), "{message}");
    assert_eq!(hub::cached("org/partial", cache.path()), None);
}

#[test]
fn an_unreachable_hub_is_an_error_naming_it() {
    let cache = tempfile::tempdir().unwrap();
    let endpoint = dead_endpoint();
    let error =
        hub::fetch_from(&Remote::new(), "org/model", cache.path(), &endpoint, false).expect_err("nothing listens");
    let message = error.to_string();
    assert!(message.contains(&endpoint) && message.contains("org/model"), "{message}");
}

fn a2rag(cwd: &Path) -> Command {
    let mut command = Command::new(common::bin());
    command.current_dir(cwd).env_remove("HF_TOKEN").env_remove("A2RAG__EMBED__MODEL_DIR");
    command
}

#[test]
fn cli_fetch_model_downloads_from_hf_endpoint_and_says_where() {
    let server = hub_server("org/tiny-model", fake_repo());
    let work = tempfile::tempdir().unwrap();
    let output = a2rag(work.path())
        .args(["fetch-model", "org/tiny-model"])
        .env("HF_ENDPOINT", &server.root)
        .env("A2RAG__EMBED__HUB_CACHE", "hub-cache")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("downloaded from {}", server.root)), "{stdout}");
    assert!(stdout.contains("hub-cache/models--org--tiny-model/snapshots"), "{stdout}");
    assert!(stdout.contains("model.safetensors"), "{stdout}");
    assert!(work.path().join("hub-cache/models--org--tiny-model/refs/main").is_file());
}

#[test]
fn minilm_offline_without_a_model_names_both_ways_to_get_one() {
    // A fresh working directory: no .cache/models/all-MiniLM-L6-v2 and an empty hub cache.
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("doc.txt"), "Oslo is the capital of Norway.").unwrap();
    let output = a2rag(work.path())
        .args(["ingest", "--data-dir", "kb", "doc.txt"])
        .env("A2RAG__EMBED__PROVIDER", "minilm")
        .env("HF_ENDPOINT", dead_endpoint())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("scripts/fetch-minilm.sh"), "{stderr}");
    assert!(stderr.contains("a2rag fetch-model"), "{stderr}");
    assert!(stderr.contains("sentence-transformers/all-MiniLM-L6-v2"), "{stderr}");
}

fn local_minilm() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(a2rag::embed::minilm::DEFAULT_MODEL_DIR);
    if a2rag::embed::minilm::has_model(&dir) {
        Some(dir)
    } else {
        common::skip(
            "MiniLM model",
            &format!("no MiniLM model in {} to serve from the mock hub: run scripts/fetch-minilm.sh", dir.display()),
        );
        None
    }
}

#[test]
fn real_minilm_through_the_mock_hub_loads_and_embeds_like_the_local_copy() {
    let Some(local) = local_minilm() else { return };
    let model_id = "sentence-transformers/all-MiniLM-L6-v2";
    let names = ["config.json", "tokenizer.json", "model.safetensors", "sentence_bert_config.json"];
    let entries: Vec<(&str, Vec<u8>)> =
        names.iter().map(|name| (*name, std::fs::read(local.join(name)).unwrap())).collect();
    let server = hub_server(model_id, files(&entries));
    let cache = tempfile::tempdir().unwrap();
    let fetched = hub::fetch_from(&Remote::new(), model_id, cache.path(), &server.root, false).expect("download");
    assert_eq!(fetched.files, names);
    // The 90 MB weights come in several ranged requests.
    assert!(server.seen().iter().filter(|r| r.path() == "/cdn/model.safetensors").count() > 2);
    drop(server);

    let texts = ["The Eiffel Tower is in Paris.", "Glaciers carve valleys."];
    let from_hub = MiniLmEmbedder::load_named(&fetched.dir, hub::model_name(model_id), 8).unwrap();
    let reference = MiniLmEmbedder::load(&local, 8).unwrap();
    assert_eq!(from_hub.id(), reference.id(), "one embedding space whichever way the model came");
    for (a, b) in from_hub.embed(&texts).unwrap().iter().zip(reference.embed(&texts).unwrap()) {
        assert!(cosine(a, &b) > 0.9999);
    }

    // The configured path: a working directory without the local copy finds the hub cache,
    // with the hub gone.
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("tower.md"), "# Tower\nThe Eiffel Tower stands in Paris, France.").unwrap();
    let run = |args: &[&str]| {
        let output = a2rag(work.path())
            .args(args)
            .args(["--data-dir", "kb"])
            .env("A2RAG__EMBED__PROVIDER", "minilm")
            .env("A2RAG__EMBED__HUB_CACHE", cache.path())
            .env("HF_ENDPOINT", dead_endpoint())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(output.status.success(), "{args:?}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        stdout
    };
    run(&["ingest", "tower.md"]);
    assert!(run(&["stats"]).contains("minilm:all-MiniLM-L6-v2"));
    assert!(run(&["search", "where is the eiffel tower", "--mode", "vector"]).contains("Eiffel"));
}
