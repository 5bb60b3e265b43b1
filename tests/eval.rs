//! `a2rag eval` on a small hand-written corpus: the same build on the same data gives the
//! same recall for every system, run after run (retrieval is deterministic).

mod common;

use std::path::Path;

use a2rag::eval::{EvalOptions, Report, run};
use common::*;
use serde_json::json;

const PARAGRAPHS: [(&str, &str); 8] = [
    ("Alice Moreau", "Alice Moreau married Bob Lenoir in 1990. Alice Moreau was born in Rome."),
    ("Bob Lenoir", "Bob Lenoir was born in Paris and studied at the Sorbonne."),
    ("Carol Diaz", "Carol Diaz works at Acme Tools as an engineer."),
    ("Acme Tools", "Acme Tools is located in Paris and makes hand tools."),
    ("Rome", "Rome is the capital of Italy and lies on the Tiber."),
    ("Paris", "Paris is the capital of France and lies on the Seine."),
    ("Sorbonne", "The Sorbonne is a university founded in 1257 by Robert de Sorbon."),
    ("Tiber", "The Tiber is the third-longest river in Italy."),
];

/// A MuSiQue-shaped dataset: every question sees every paragraph, `gold` marks its support.
fn dataset(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let corpus: Vec<_> = PARAGRAPHS.iter().map(|(t, x)| json!({"title": t, "text": x})).collect();
    std::fs::write(dir.join("corpus.json"), serde_json::to_string(&corpus).unwrap()).unwrap();
    let questions = [
        ("q1", "Where was the spouse of Alice Moreau born?", "Paris", ["Alice Moreau", "Bob Lenoir"]),
        ("q2", "In which country is the city where Acme Tools is located?", "France", ["Acme Tools", "Paris"]),
        ("q3", "Which river flows through the birthplace of Alice Moreau?", "Tiber", ["Alice Moreau", "Rome"]),
        ("q4", "Who founded the university where Bob Lenoir studied?", "Robert de Sorbon", ["Bob Lenoir", "Sorbonne"]),
    ];
    let records: Vec<_> = questions
        .iter()
        .map(|(id, q, a, gold)| {
            let paragraphs: Vec<_> = PARAGRAPHS
                .iter()
                .map(|(t, x)| json!({"title": t, "paragraph_text": x, "is_supporting": gold.contains(t)}))
                .collect();
            json!({"id": id, "question": q, "answer": a, "answer_aliases": [], "paragraphs": paragraphs})
        })
        .collect();
    std::fs::write(dir.join("questions.json"), serde_json::to_string(&records).unwrap()).unwrap();
}

fn recalls(report: &Report) -> Vec<(String, f64, f64)> {
    let systems = report.systems.iter().map(|s| (s.system.clone(), s.recall_at_2, s.recall_at_5));
    let policies = report.policies.iter().map(|p| (format!("policy {}", p.policy), p.recall_at_2, p.recall_at_5));
    let sweep = report.sweep.iter().map(|s| (format!("threshold {}", s.threshold), s.before_global, s.recall_at_5));
    systems.chain(policies).chain(sweep).collect()
}

#[test]
fn two_eval_runs_give_identical_recall_for_every_system() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("small");
    dataset(&data);
    // The default settings search these small indexes exactly; `exact_search_max = 0` links
    // every vector into HNSW graphs, built on one thread, which must reproduce too.
    for exact_search_max in [4096, 0] {
        let eval = |name: &str, reuse_kb: bool| {
            let mut settings = settings_in(&dir.path().join("unused"));
            settings.index.exact_search_max = exact_search_max;
            let options = EvalOptions {
                dataset: data.clone(),
                triples: None,
                drop_nodes: vec![0.0, 0.4],
                limit: None,
                seed: 7,
                out_dir: dir.path().join(name),
                iterative_steps: 2,
                reuse_kb,
                policies: vec!["cheap".into(), "strict".into()],
                lower_case: false,
            };
            run(settings, &options, &mut ()).unwrap()
        };
        let (first, second) = (eval("first", false), eval("second", false));
        assert_eq!(first.systems.len(), 8, "a2rag and seven baselines");
        let policies: Vec<&str> = first.policies.iter().map(|p| p.policy.as_str()).collect();
        assert_eq!(policies, ["always-global", "cheap", "strict"]);
        assert!(first.policies[0].before_global == 0.0, "always-global never stops early");
        for file in ["stages.jsonl", "recall_cost.svg", "report.md"] {
            assert!(dir.path().join("first").join(file).exists(), "{file}");
        }
        assert_eq!(recalls(&first), recalls(&second), "exact_search_max = {exact_search_max}");
        // The KB the first run left behind, opened again rather than ingested, ranks the same.
        let reused = eval("first", true);
        assert_eq!(reused.ingest_seconds, None, "nothing was ingested");
        assert!(first.ingest_seconds.is_some());
        assert_eq!(recalls(&first), recalls(&reused), "exact_search_max = {exact_search_max}, KB reused");
        let deletion = |r: &Report| r.node_deletion.iter().map(|d| d.recall_at_5.clone()).collect::<Vec<_>>();
        assert_eq!(deletion(&first), deletion(&second));
        assert!(first.systems.iter().any(|s| s.recall_at_5 > 0.0), "the runs retrieve something");
    }
}

/// The ordinary-documents set the README's escalation figures are checked on: every question
/// finds its gold documents in the corpus (a repeated title, `README`, is matched by text).
#[test]
fn the_handbook_set_loads_with_every_gold_document_found() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/handbook");
    let dataset = a2rag::eval::dataset::Dataset::load(&dir).expect("the handbook set loads");
    assert_eq!(dataset.questions.len(), 28);
    let raw: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("questions.json")).unwrap()).unwrap();
    for (question, record) in dataset.questions.iter().zip(&raw) {
        let supporting = record["paragraphs"].as_array().unwrap().len();
        assert_eq!(question.gold.len(), supporting, "{}: gold documents found", question.id);
        assert!(!question.answers[0].is_empty());
    }
    let two_hop = dataset.questions.iter().filter(|q| q.gold.len() == 2).count();
    assert_eq!(two_hop, 19);
}

/// Issue 34: `--lower-case` asks the questions as many users type them, and retrieval, which
/// writes a lower-case name as the corpus writes it before seeding, finds what it finds for
/// the questions as typed (without that, local-only finds nothing in lower case).
#[test]
fn questions_asked_in_lower_case_find_what_the_typed_ones_find() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("small");
    dataset(&data);
    let eval = |name: &str, lower_case: bool| {
        let options = EvalOptions {
            dataset: data.clone(),
            triples: None,
            drop_nodes: vec![0.0],
            limit: None,
            seed: 7,
            out_dir: dir.path().join(name),
            iterative_steps: 1,
            reuse_kb: false,
            policies: Vec::new(),
            lower_case,
        };
        run(settings_in(&dir.path().join("unused")), &options, &mut ()).unwrap()
    };
    let (typed, lower) = (eval("typed", false), eval("lower", true));
    let answers = std::fs::read_to_string(dir.path().join("lower/answers.jsonl")).unwrap();
    assert!(answers.contains("where was the spouse of alice moreau born?"), "{answers}");
    // Every system that seeds from names (local-only most of all, which has nothing else)
    // and every stage of a2rag's escalation sees the same seeds.
    let local = |r: &Report| r.systems.iter().find(|s| s.system == "local-only").map(|s| s.recall_at_5).unwrap();
    assert!(local(&typed) > 0.0);
    assert_eq!(recalls(&lower), recalls(&typed));
}
