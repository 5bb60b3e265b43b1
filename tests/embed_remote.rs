//! The `openai` and `ollama` embedders against a scripted server on 127.0.0.1: what is sent,
//! batching, normalisation, reply checks, retries, and a real sled KB built and searched
//! with vectors from the server.
//!
//! The embedder is synchronous (its requests run on `net::Remote`'s I/O runtime while the
//! caller waits), so the server runs on a runtime of its own ([`MockServer::background`]) and the tests are plain `#[test]`s.

mod common;

use std::time::{Duration, Instant};

use a2rag::config::{EmbedProvider, EmbedSettings, Settings};
use a2rag::embed::{self, Embedder, cosine};
use a2rag::error::Error;
use a2rag::kb::SearchMode;
use a2rag::net::Remote;
use common::http::{MockServer, Reply, Seen, error_reply};
use serde_json::{Value, json};

const DIM: usize = 32;

/// The mock model: words hashed into `DIM` buckets, scaled so that the raw vector is not
/// unit length. Texts sharing words get similar vectors, which is all search needs.
fn raw_vector(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; DIM];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        v[(hash % DIM as u64) as usize] += 2.5;
    }
    v[DIM - 1] += 0.1; // never the zero vector
    v
}

fn unit(v: &[f64]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| (x / norm) as f32).collect()
}

fn inputs(seen: &Seen) -> Vec<String> {
    seen.json()["input"]
        .as_array()
        .expect("input is an array")
        .iter()
        .map(|t| t.as_str().expect("input texts are strings").to_string())
        .collect()
}

/// An OpenAI `/embeddings` reply for the request's inputs.
fn openai_reply(seen: &Seen) -> Reply {
    let texts = inputs(seen);
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": raw_vector(t)}))
        .collect();
    let body = json!({
        "object": "list",
        "data": data,
        "model": seen.json()["model"],
        "usage": {"prompt_tokens": texts.len(), "total_tokens": texts.len()}
    });
    Reply::Json(200, body.to_string())
}

/// An Ollama `/api/embed` reply for the request's inputs.
fn ollama_reply(seen: &Seen) -> Reply {
    let vectors: Vec<Vec<f64>> = inputs(seen).iter().map(|t| raw_vector(t)).collect();
    Reply::Json(200, json!({"model": seen.json()["model"], "embeddings": vectors}).to_string())
}

fn settings(provider: EmbedProvider, base_url: &str) -> EmbedSettings {
    let mut s = Settings::defaults().embed;
    s.provider = provider;
    s.connection.model = "mock-embed".to_string();
    s.connection.base_url = base_url.to_string();
    s.dim = DIM;
    s.connection.api_key_env = "A2RAG_TEST_KEY_THAT_IS_NEVER_SET".to_string();
    s.connection.timeout_ms = 5_000;
    s.connection.max_retries = 2;
    s.connection.retry_backoff_ms = 10;
    s.batch_size = 32;
    s
}

fn embedder(settings: &EmbedSettings) -> std::sync::Arc<dyn Embedder> {
    embed::from_settings(settings, &Remote::new()).expect("valid embed settings")
}

#[test]
fn openai_request_carries_path_model_and_inputs_and_no_key_when_none_is_set() {
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let e = embedder(&settings(EmbedProvider::OpenAi, &server.base_url));
    assert_eq!(e.id(), "openai:mock-embed");
    assert_eq!(e.dim(), DIM);

    let out = e.embed(&["alpha beta", "gamma"]).expect("vectors");
    assert_eq!(out.len(), 2);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method(), "POST");
    assert_eq!(seen[0].path(), "/v1/embeddings");
    let body = seen[0].json();
    assert_eq!(body["model"], "mock-embed");
    assert_eq!(body["input"], json!(["alpha beta", "gamma"]));
    // No width is asked for: local servers may refuse OpenAI's `dimensions`.
    assert!(body.get("dimensions").is_none(), "{body}");
    // A local server must not get an Authorization header it did not ask for.
    assert_eq!(seen[0].header("authorization"), None);
}

#[test]
fn api_key_comes_from_the_named_environment_variable() {
    // A variable cargo sets for every test process, so the test needs no unsafe set_var.
    let Ok(expected) = std::env::var("CARGO_PKG_NAME") else {
        eprintln!("CARGO_PKG_NAME unset; not run outside cargo");
        return;
    };
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.connection.api_key_env = "CARGO_PKG_NAME".to_string();
    embedder(&s).embed_one("hello").expect("vector");
    assert_eq!(server.seen()[0].header("authorization"), Some(format!("Bearer {expected}").as_str()));
}

#[test]
fn batches_split_requests_keep_order_and_vectors_are_unit_length() {
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.batch_size = 2;
    let texts = ["one fish", "two fish", "red fish", "blue fish", "the end"];
    let out = embedder(&s).embed(&texts).expect("vectors");

    let sizes: Vec<usize> = server.seen().iter().map(|r| inputs(r).len()).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    let sent: Vec<String> = server.seen().iter().flat_map(inputs).collect();
    assert_eq!(sent, texts);
    assert_eq!(out.len(), texts.len());
    for (text, v) in texts.iter().zip(&out) {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm} for {text:?}");
        assert!(cosine(v, &unit(&raw_vector(text))) > 0.9999, "vector of {text:?} out of order");
    }
}

#[test]
fn dimension_mismatch_is_a_config_error_naming_the_right_dim() {
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.dim = 768;
    match embedder(&s).embed(&["some text"]) {
        Err(Error::Config(message)) => {
            assert!(message.contains("embed.dim"), "{message}");
            assert!(message.contains(&format!("embed.dim = {DIM}")), "{message}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn malformed_body_is_an_error_not_a_panic_and_not_retried() {
    let server = MockServer::background(|_, _| Reply::Garbage);
    let result = embedder(&settings(EmbedProvider::OpenAi, &server.base_url)).embed(&["text"]);
    assert!(matches!(result, Err(Error::Embed(_))), "got {result:?}");
    assert_eq!(server.hits(), 1);
}

#[test]
fn reply_with_too_few_vectors_is_an_error() {
    let server = MockServer::background(|_, _| {
        let body = json!({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": raw_vector("x")}],
                          "model": "mock-embed"});
        Reply::Json(200, body.to_string())
    });
    let result = embedder(&settings(EmbedProvider::OpenAi, &server.base_url)).embed(&["first", "second"]);
    assert!(matches!(result, Err(Error::Embed(_))), "got {result:?}");
}

#[test]
fn server_error_is_retried_until_success() {
    let server = MockServer::background(|index, seen| {
        if index == 0 { error_reply(500, "boom") } else { openai_reply(seen) }
    });
    let out = embedder(&settings(EmbedProvider::OpenAi, &server.base_url)).embed(&["retry me"]).expect("second attempt");
    assert_eq!(out.len(), 1);
    assert_eq!(server.hits(), 2);
}

#[test]
fn persistent_server_error_gives_up_after_the_retries() {
    let server = MockServer::background(|_, _| error_reply(503, "down"));
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.connection.max_retries = 3;
    let error = embedder(&s).embed(&["text"]).expect_err("always 503");
    assert!(error.to_string().contains("503"), "{error}");
    assert_eq!(server.hits(), 4, "max_retries + 1 attempts");
}

#[test]
fn silent_server_times_out_within_the_bound() {
    let server = MockServer::background(|_, _| Reply::Hang);
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.connection.timeout_ms = 300;
    s.connection.max_retries = 0;
    let started = Instant::now();
    let error = embedder(&s).embed(&["text"]).expect_err("never answers");
    assert!(error.to_string().contains("timed out"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
}

#[test]
fn ollama_uses_the_native_embed_endpoint() {
    let server = MockServer::background(|_, seen| ollama_reply(seen));
    let e = embedder(&settings(EmbedProvider::Ollama, &server.root));
    assert_eq!(e.id(), "ollama:mock-embed");
    let out = e.embed(&["alpha", "beta gamma"]).expect("vectors");
    let seen = server.seen();
    assert_eq!(seen[0].path(), "/api/embed");
    assert_eq!(seen[0].json()["model"], "mock-embed");
    assert_eq!(inputs(&seen[0]), ["alpha", "beta gamma"]);
    assert!(cosine(&out[1], &unit(&raw_vector("beta gamma"))) > 0.9999);

    // The daemon URL may be given with the `/v1` of its OpenAI-compatible API.
    let e = embedder(&settings(EmbedProvider::Ollama, &server.base_url));
    e.embed_one("alpha").expect("vector");
    assert_eq!(server.seen()[1].path(), "/api/embed");
}

#[test]
fn ingest_and_search_a_real_kb_with_server_vectors() {
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let docs = [
        ("lighthouse.md", "# Lighthouse\nThe old lighthouse keeper lit the lamp every evening on the rocky coast."),
        ("bakery.md", "# Bakery\nThe village bakery sells sourdough bread and almond croissants each morning."),
        ("glacier.md", "# Glacier\nA slow glacier carved the valley during the last ice age in the northern mountains."),
    ];
    for (name, text) in docs {
        std::fs::write(corpus.join(name), text).unwrap();
    }
    let mut s = common::settings_in(&dir.path().join("kb"));
    s.embed = settings(EmbedProvider::OpenAi, &server.base_url);
    s.embed.batch_size = 4;
    let (mut kb, pipeline) = common::open(&s);
    let report = common::ingest(&mut kb, &pipeline, &[corpus]);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.added, 3);
    assert_eq!(kb.stats().embedder, "openai:mock-embed");
    assert!(server.hits() > 0);

    for (query, expected) in [
        ("sourdough bread bakery", "bakery"),
        ("glacier valley ice age", "glacier"),
        ("lighthouse keeper lamp", "lighthouse"),
    ] {
        let hits = kb.search(query, SearchMode::Vector, 3, (&kb.settings().retrieve).into()).expect("search");
        let top = hits.first().and_then(|(id, _)| kb.chunk(*id)).expect("a hit");
        assert!(top.text.to_lowercase().contains(expected), "{query:?} found {:?}", top.text);
    }

    // Reopening with the same embedder works; the stored id guards the embedding space.
    drop(kb);
    let (kb, _) = common::open(&s);
    assert_eq!(kb.stats().chunks, 3);
}

#[test]
fn batches_reuse_one_pooled_connection() {
    let server = MockServer::background(|_, seen| openai_reply(seen));
    let mut s = settings(EmbedProvider::OpenAi, &server.base_url);
    s.batch_size = 2;
    let e = embedder(&s);
    let texts = ["one", "two", "three", "four", "five", "six", "seven"];
    assert_eq!(e.embed(&texts).expect("vectors").len(), texts.len());
    // From inside a current-thread runtime too (eval's), which once panicked.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    assert_eq!(runtime.block_on(async { e.embed(&texts) }).expect("vectors").len(), texts.len());
    assert_eq!(server.hits(), 8, "four requests of up to two texts, twice");
    // hyper hands a connection back to the pool just after its reply is read, so a request
    // sent at once may still open a second one; a client without a pool opens eight.
    assert!(server.connections() <= 2, "{} connections for 8 requests", server.connections());
}
