//! The command line as a user meets it: the real binary on the JSON-RPC fixtures (ingested
//! with their triples, so accepted answers propose some), for the commands whose output is
//! read by people and scripts: `ask`, `retrieve`, `search`, `review`, `audit`, `check`,
//! `reindex`, `migrate`, `--kb`, `kbs`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{ingested_rpc_fixtures, rpc_fixture};

const BIN: &str = env!("CARGO_BIN_EXE_a2rag");

fn a2rag(data: &Path, args: &[&str]) -> Output {
    Command::new(BIN).arg("--data-dir").arg(data).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn ingested() -> (tempfile::TempDir, PathBuf) {
    let dir = ingested_rpc_fixtures();
    let data = dir.path().join("data");
    (dir, data)
}

/// Issue 17: the stage was printed as `Some(Global)`.
#[test]
fn ask_and_retrieve_print_stages_as_words() {
    let (_dir, data) = ingested();
    let asked = stdout(&a2rag(&data, &["ask", "Where was Marie Curie born?"]));
    let stage = asked.lines().find(|l| l.starts_with("Stage: ")).expect(&asked);
    let word = stage["Stage: ".len()..].split_whitespace().next().unwrap();
    assert!(["local", "bridge", "global", "fallback"].contains(&word), "{stage}");
    assert!(asked.starts_with("Answer: Warsaw"), "{asked}");

    let found = stdout(&a2rag(&data, &["retrieve", "Where was Marie Curie born?"]));
    let head = found.lines().next().unwrap();
    assert!(head.starts_with("In scope") && !head.contains("Some("), "{found}");
    assert!(found.lines().nth(1).unwrap().contains("curie.txt"), "{found}");
    // A question with evidence in two passages, cut to one by --top-k.
    let numbered =
        |found: &str| found.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).count();
    let shared = "Who shared the Nobel Prize with Marie Curie?";
    assert!(numbered(&stdout(&a2rag(&data, &["retrieve", shared]))) >= 2);
    let cut = stdout(&a2rag(&data, &["retrieve", shared, "--top-k", "1"]));
    assert_eq!(numbered(&cut), 1, "{cut}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&a2rag(&data, &["retrieve", "--json", "Where was Marie Curie born?"]))).unwrap();
    assert_eq!(json["gate"]["in_scope"], true);
    let outside = stdout(&a2rag(&data, &["retrieve", "Zebra quantum banana?"]));
    assert!(outside.starts_with("Out of scope"), "{outside}");
}

#[test]
fn review_decisions_show_in_audit_and_check_stays_clean() {
    let (_dir, data) = ingested();
    let asked = stdout(&a2rag(&data, &["ask", "Where was Marie Curie born?"]));
    assert!(asked.contains("proposed for review"), "{asked}");
    // The ingests are the owner's (the CLI needs no token), and there is no decision yet.
    let ingests = stdout(&a2rag(&data, &["audit", "--who", "owner"]));
    assert_eq!(ingests, stdout(&a2rag(&data, &["audit"])), "no decision yet");
    assert_eq!(ingests.lines().count(), 3, "{ingests}");
    assert!(ingests.lines().all(|l| l.contains("\"action\":\"ingest\"")), "{ingests}");

    let mut review = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["review", "--who", "tester"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    review.stdin.take().unwrap().write_all(b"a\nr\nq\n").unwrap();
    stdout(&review.wait_with_output().unwrap());

    let audit = stdout(&a2rag(&data, &["audit"]));
    let entries: Vec<serde_json::Value> = audit.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let entries = &entries[3..];
    assert_eq!(entries.len(), 2, "{audit}");
    assert!(entries.iter().all(|e| e["who"] == "tester"), "{audit}");
    let decisions: Vec<String> = entries.iter().map(|e| e["action"].to_string().to_lowercase()).collect();
    assert!(decisions[0].contains("approve") && decisions[1].contains("reject"), "{decisions:?}");

    let check = a2rag(&data, &["check"]);
    let text = stdout(&check);
    assert!(text.starts_with("0 violations in 3 documents"), "{text}");
    // Nothing to release in a whole store: the repair leaves it as it was.
    let repaired = stdout(&a2rag(&data, &["check", "--repair"]));
    assert_eq!(repaired, text);
}

/// `a2rag review` with `input` on its stdin.
fn review(data: &Path, who: &str, input: &str) -> Output {
    let mut review = Command::new(BIN)
        .arg("--data-dir")
        .arg(data)
        .args(["review", "--who", who])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    review.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    review.wait_with_output().unwrap()
}

/// The review loop shows each proposal with its sentence, asks again on a key it does not
/// know, and stops at `q` or at the end of its input; an edit asks for each part, an empty
/// answer keeping the proposed one. A reviewer without a name is refused before any question.
#[test]
fn review_asks_again_skips_edits_and_stops_at_end_of_input() {
    let (_dir, data) = ingested();
    stdout(&a2rag(&data, &["ask", "Where was Marie Curie born?"]));
    let skipped = stdout(&review(&data, "tester", "x\ns\nq\n"));
    assert!(skipped.contains(" pending proposal(s)\n"), "{skipped}");
    assert!(skipped.contains("please answer a, r, e, s or q"), "{skipped}");
    assert!(skipped.contains("Marie Curie was born in Warsaw."), "{skipped}");
    assert!(skipped.ends_with("approved 0, rejected 0, edited 0, skipped 1\n"), "{skipped}");
    let ended = stdout(&review(&data, "tester", "s\n"));
    assert!(ended.ends_with("approved 0, rejected 0, edited 0, skipped 1\n"), "{ended}");

    let nobody = review(&data, " ", "a\n");
    let err = String::from_utf8_lossy(&nobody.stderr);
    assert!(!nobody.status.success() && err.contains("--who"), "{err}");
    assert!(String::from_utf8_lossy(&nobody.stdout).is_empty(), "asked before refusing: {nobody:?}");

    let edited = stdout(&review(&data, "tester", "e\n\nnamed after\n\nq\n"));
    assert!(edited.ends_with("approved 0, rejected 0, edited 1, skipped 0\n"), "{edited}");
    let audit = stdout(&a2rag(&data, &["audit"]));
    let last: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!((last["who"].as_str(), last["action"].as_str()), (Some("tester"), Some("edit")), "{audit}");
    assert_eq!(last["triple"]["relation"], "named after", "{audit}");
}

/// `search` lists chunks with their score and document title, best first, at most `-k`.
#[test]
fn search_lists_the_best_chunks_with_their_titles() {
    let (_dir, data) = ingested();
    let found = stdout(&a2rag(&data, &["search", "Marie Curie born", "-k", "2"]));
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines.len(), 2, "{found}");
    assert!(lines[0].starts_with(" 1. [") && lines[1].starts_with(" 2. ["), "{found}");
    assert!(lines[0].contains("Warsaw"), "{found}");
    let bm25 = stdout(&a2rag(&data, &["search", "Warsaw", "--mode", "bm25", "-k", "1"]));
    assert!(bm25.contains("Warsaw") && bm25.lines().count() == 1, "{bm25}");
}

/// `reindex` re-embeds the KB with the configured embedder and reports what it rewrote;
/// after it, the KB answers as before.
#[test]
fn reindex_reports_what_it_re_embedded() {
    let (_dir, data) = ingested();
    let before = stdout(&a2rag(&data, &["search", "Marie Curie born"]));
    let reindexed = stdout(&a2rag(&data, &["reindex"]));
    assert!(reindexed.starts_with("re-embedded ") && reindexed.contains(" chunks, "), "{reindexed}");
    assert!(!reindexed.contains("(was none)"), "{reindexed}");
    assert_eq!(stdout(&a2rag(&data, &["search", "Marie Curie born"])), before);
}

#[test]
fn named_knowledge_bases_from_the_command_line() {
    let (_dir, data) = ingested();
    let curie = rpc_fixture("curie.txt");
    stdout(&a2rag(&data, &["--kb", "papers", "ingest", curie.to_str().unwrap()]));
    assert_eq!(stdout(&a2rag(&data, &["kbs"])), "default\npapers\n");
    let stats: serde_json::Value =
        serde_json::from_str(&stdout(&a2rag(&data, &["--kb", "papers", "stats", "--json"]))).unwrap();
    assert_eq!(stats["documents"], 1);
    let missing = a2rag(&data, &["--kb", "nope", "stats"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("kbs/nope"), "{missing:?}");
    assert!(!data.join("kbs/nope").exists(), "a read created a KB");
    let listed = stdout(&a2rag(&data, &["--kb", "papers", "docs"]));
    let id = listed.split('\t').next().unwrap();
    assert!(id.ends_with("curie.txt") && listed.lines().count() == 1, "{listed}");
    assert_eq!(stdout(&a2rag(&data, &["--kb", "papers", "delete", id])), format!("deleted {id}\n"));
    let again = a2rag(&data, &["--kb", "papers", "delete", id]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("`a2rag docs`"), "{again:?}");
    assert_eq!(stdout(&a2rag(&data, &["--kb", "papers", "docs"])), "");
    let missing_path = a2rag(&data, &["--kb", "nope", "ingest", "/no/such/dir"]);
    let err = String::from_utf8_lossy(&missing_path.stderr);
    assert!(!missing_path.status.success() && err.contains("/no/such/dir not found"), "{err}");
    assert!(!data.join("kbs/nope").exists(), "an ingest of nothing created a KB");
    let reindexed = a2rag(&data, &["--kb", "nope", "reindex"]);
    assert!(!reindexed.status.success(), "{reindexed:?}");
    assert!(!data.join("kbs/nope").exists(), "reindex created a KB");
    let bad = a2rag(&data, &["--kb", "../etc", "stats"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("letters, digits"), "{bad:?}");
}

/// Common mistakes fail with one message that names the mistake, and leave nothing behind.
#[test]
fn mistakes_are_named_once_and_leave_nothing_behind() {
    let (dir, data) = ingested();
    let failure = |out: Output| {
        assert!(!out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(failure(a2rag(&data, &["search", " ?? "])).contains("nothing to search for"));
    assert!(failure(a2rag(&data, &["search", "Curie", "-k", "0"])).contains("1..=10000"));

    let fresh = dir.path().join("fresh");
    let curie = rpc_fixture("curie.txt");
    let err = failure(a2rag(&fresh, &["ingest", curie.to_str().unwrap(), "--triples", "/no/such/triples.json"]));
    assert!(err.contains("--triples") && err.contains("/no/such/triples.json"), "{err}");
    assert!(!fresh.exists(), "a failed ingest left a data directory behind");

    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = failure(a2rag(&file, &["ingest", curie.to_str().unwrap()]));
    assert!(err.contains("is a file") && err.contains("must be a directory"), "{err}");

    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[x\n").unwrap();
    let out =
        Command::new(BIN).arg("--config").arg(&config).args(["--data-dir"]).arg(&data).arg("stats").output().unwrap();
    let err = failure(out);
    assert_eq!(err.matches("configuration error").count(), 1, "{err}");
}

/// `migrate` checks every destination before it copies anything, copies every KB into an
/// empty store, and knows the source directory however it is spelled.
#[test]
fn migrate_refuses_before_copying_anything() {
    let (dir, data) = ingested();
    let curie = rpc_fixture("curie.txt");
    stdout(&a2rag(&data, &["--kb", "papers", "ingest", curie.to_str().unwrap()]));
    let to = dir.path().join("copy");
    stdout(&a2rag(&to, &["--kb", "papers", "ingest", curie.to_str().unwrap()]));
    let refused = a2rag(&data, &["migrate", "--to", to.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("already holds documents"), "{err}");
    let copied = a2rag(&to, &["docs"]);
    assert!(
        String::from_utf8_lossy(&copied.stdout).is_empty(),
        "the default KB was copied before the refusal: {copied:?}"
    );

    let fresh = dir.path().join("fresh");
    let migrated = stdout(&a2rag(&data, &["migrate", "--to", fresh.to_str().unwrap()]));
    let lines: Vec<&str> = migrated.lines().collect();
    assert_eq!(lines.len(), 2, "{migrated}");
    assert!(lines[0].starts_with("default: ") && lines[1].starts_with("papers: "), "{migrated}");
    assert!(lines[1].ends_with(&format!("entries copied to {}", fresh.join("kbs/papers").display())), "{migrated}");
    assert_eq!(stdout(&a2rag(&fresh, &["docs"])), stdout(&a2rag(&data, &["docs"])));

    let spelled = format!("{}/./", data.display());
    let same = a2rag(&data, &["migrate", "--to", &spelled]);
    let err = String::from_utf8_lossy(&same.stderr);
    assert!(!same.status.success() && err.contains("the configured store itself"), "{err}");
}

/// Ingesting unchanged documents again with their triples file is no error: the triples
/// matched, and the stored documents keep the graph they were ingested with.
#[test]
fn unchanged_documents_match_their_imported_triples_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (curie, triples) = (rpc_fixture("curie.txt"), rpc_fixture("triples.jsonl"));
    let args = ["ingest", curie.to_str().unwrap(), "--triples", triples.to_str().unwrap()];
    let first = a2rag(&data, &args);
    let again = a2rag(&data, &args);
    let (err_first, err_again) = (String::from_utf8_lossy(&first.stderr), String::from_utf8_lossy(&again.stderr));
    assert_eq!(first.status.success(), again.status.success(), "{err_first}\n---\n{err_again}");
    assert!(!err_again.contains("curie") || !err_again.contains("no ingested document"), "{err_again}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("1 unchanged"), "{again:?}");
    assert!(err_again.contains("kept the graph they were ingested with"), "{err_again}");
}

/// A reader that stops early (`a2rag search x | head -1`) ends the command quietly, with the
/// status SIGPIPE gives a Unix tool, not a panic about a broken pipe.
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let (_dir, data) = ingested();
    let mut child = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["search", "Marie Curie"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closed before the command has opened the KB, let alone printed.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(141) && err.is_empty(), "{:?}: {err}", out.status);
}

/// `bench ppr` compares top-10 lists: a graph of ten nodes or fewer is refused with what
/// to pass instead, and a small valid one runs.
#[test]
fn bench_ppr_refuses_graphs_too_small_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    for nodes in ["0", "10"] {
        let out = a2rag(dir.path(), &["bench", "ppr", "--nodes", nodes, "--edges", "50", "--queries", "2"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--nodes between 11"), "{nodes}: {err}");
    }
    let ran = stdout(&a2rag(dir.path(), &["bench", "ppr", "--nodes", "50", "--edges", "200", "--queries", "3"]));
    assert!(ran.contains("ppr: 50 nodes, 200 edges, 3 queries"), "{ran}");
}

/// Issue 33: `bench large-doc --rounds` ingests every size once per round and reports each
/// row's median CPU per MB, with every round's figure beside it; no rounds is refused.
#[test]
fn bench_large_doc_reports_the_median_of_its_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let refused = a2rag(dir.path(), &["bench", "large-doc", "--megabytes", "1", "--rounds", "0"]);
    assert!(!refused.status.success(), "no rounds ran");
    let out =
        stdout(&a2rag(dir.path(), &["bench", "large-doc", "--megabytes", "1,1", "--names", "linear", "--rounds", "2"]));
    assert!(out.contains("medians of 2 rounds"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(" MB: wall")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    for row in rows {
        let rounds: Vec<f64> = row[row.find("[rounds ").expect(row) + 8..row.find(']').expect(row)]
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(rounds.len(), 2, "{row}");
        // The nearest-rank median of two is the smaller (printed to two places in brackets).
        let median = rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let cpu_per_mb: f64 =
            row.split("s/MB").nth(1).and_then(|cpu| cpu.split_whitespace().last()).unwrap().parse().unwrap();
        assert!(median > 0.0 && (cpu_per_mb - median).abs() <= 0.0051, "{row}");
    }
}

/// Issue 33: `bench scale --dev` puts the real corpora of a datasets directory inside the
/// synthetic one and asks their MuSiQue-shaped questions: the row counts every passage, and
/// its recall is that of those questions.
#[test]
fn bench_scale_measures_real_questions_inside_the_synthetic_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("datasets");
    let set = |name: &str, paragraphs: &[(&str, &str)], question: &str, gold: &[&str]| {
        let folder = data.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let corpus: Vec<_> = paragraphs.iter().map(|(t, x)| serde_json::json!({"title": t, "text": x})).collect();
        std::fs::write(folder.join("corpus.json"), serde_json::to_string(&corpus).unwrap()).unwrap();
        let paragraphs: Vec<_> = paragraphs
            .iter()
            .map(|(t, x)| serde_json::json!({"title": t, "paragraph_text": x, "is_supporting": gold.contains(t)}))
            .collect();
        let record = serde_json::json!({"id": "q1", "question": question, "answer": "Tarn", "answer_aliases": [], "paragraphs": paragraphs});
        std::fs::write(folder.join("questions.json"), serde_json::to_string(&[record]).unwrap()).unwrap();
    };
    let orwick = ("Orwick", "Orwick is a port in Kell. Ada Lind was born in Orwick.");
    set(
        "musique",
        &[orwick, ("Kell", "Kell is a country whose capital is Tarn.")],
        "What is the capital of the country where Ada Lind was born?",
        &["Orwick", "Kell"],
    );
    let triples =
        serde_json::json!([{"title": orwick.0, "text": orwick.1, "triples": [["Orwick", "is a port in", "Kell"]]}]);
    std::fs::write(data.join("musique/openie_triples.json"), triples.to_string()).unwrap();
    set("hotpotqa", &[("Nils Moe", "Nils Moe is a Nordic author.")], "Who is Nils Moe?", &["Nils Moe"]);
    std::fs::create_dir_all(data.join("distractors")).unwrap();
    let distractors = serde_json::json!([{"title": "Rain", "text": "Rain falls in Orwick most days."}]);
    std::fs::write(data.join("distractors/paragraphs.json"), distractors.to_string()).unwrap();

    let dev = data.to_str().unwrap();
    let table = stdout(&a2rag(dir.path(), &["bench", "scale", "--sizes", "40", "--questions", "5", "--dev", dev]));
    assert!(table.contains("the first 5 MuSiQue dev questions"), "{table}");
    let row =
        table.lines().find(|l| l.starts_with("| 44 |")).unwrap_or_else(|| panic!("40 synthetic + 4 real: {table}"));
    let recall = row.rsplit('|').nth(1).unwrap().split('/').next().unwrap().trim();
    assert_eq!(recall, "1.000", "both gold paragraphs among a2rag's first five: {row}");

    let missing = a2rag(dir.path(), &["bench", "scale", "--sizes", "40", "--dev", "/no/such/datasets"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success() && err.contains("/no/such/datasets"), "{err}");
}
