//! The adaptive controller with a scripted model behind the LLM roles: gate, failure-typed
//! rewrites, bounded retries, budgets.

mod common;

use std::sync::{Arc, Mutex};

use a2rag::config::Settings;
use a2rag::control::budget::BudgetOverride;
use a2rag::control::{Controller, QueryRequest};
use a2rag::kb::Kb;
use a2rag::llm::{Completion, CompletionRequest, LanguageModel, LlmError, Usage};
use async_trait::async_trait;
use common::*;

/// Answers by prompt kind from scripts; remembers every prompt.
#[derive(Default)]
struct Scripted {
    answers: Mutex<Vec<String>>,
    /// Verdicts for relevance, grounding, adequacy, consumed in call order.
    verdicts: Mutex<Vec<bool>>,
    prompts: Mutex<Vec<String>>,
}

#[async_trait]
impl LanguageModel for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        self.prompts.lock().unwrap().push(request.prompt.clone());
        let p = &request.prompt;
        let text = if p.starts_with("Answer the question") {
            let mut a = self.answers.lock().unwrap();
            let answer = if a.len() > 1 { a.remove(0) } else { a.first().cloned().unwrap_or_default() };
            format!("{{\"answer\": \"{answer}\", \"used\": [1]}}")
        } else if p.contains("Reply with JSON only:\n{\"verdict\"") || p.contains("{\"verdict\": \"yes\" or \"no\"") {
            let mut v = self.verdicts.lock().unwrap();
            let pass = if v.is_empty() { false } else { v.remove(0) };
            format!("{{\"verdict\": \"{}\", \"reason\": \"scripted\"}}", if pass { "yes" } else { "no" })
        } else {
            let n = self.prompts.lock().unwrap().len();
            format!("rewritten query number {n} about Oslo Harbour")
        };
        Ok(Completion { usage: Usage::estimate(request, &text), text })
    }
}

fn kb(dir: &std::path::Path) -> (Kb, Settings) {
    let settings = settings_in(dir);
    let (mut kb, pipeline) = open(&settings);
    let file = dir.join("docs.jsonl");
    std::fs::write(
        &file,
        [
            r#"{"id":"oslo","title":"Oslo Harbour","text":"Oslo Harbour was rebuilt by Nordic Works in 1952. Nordic Works was founded by Ingrid Berg."}"#,
            r#"{"id":"berg","title":"Ingrid Berg","text":"Ingrid Berg was born in Bergen in 1901. She studied in Trondheim."}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    ingest(&mut kb, &pipeline, &[file]);
    (kb, settings)
}

fn controller(model: Arc<Scripted>, settings: &Settings) -> Controller {
    Controller::from_settings(settings, Some(model as Arc<dyn LanguageModel>)).unwrap()
}

fn ask(question: &str) -> QueryRequest {
    QueryRequest { question: question.into(), policy: None, budget: None }
}

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn gate_abstains_out_of_scope_without_retrieval_or_llm_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (kb, settings) = kb(dir.path());
    let model = Arc::new(Scripted::default());
    let r = block(controller(model.clone(), &settings).run(&kb, &settings, &ask("Zxqv blorf quuxly?")));
    assert!(r.abstained.as_deref().unwrap().starts_with("out of scope"), "{:?}", r.abstained);
    assert_eq!(r.ledger.llm_calls, 0);
    assert!(model.prompts.lock().unwrap().is_empty());
    assert!(r.trace.iter().all(|t| t.to != "retrieve"));
}

#[test]
fn right_on_the_second_try_is_accepted_after_one_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let (kb, settings) = kb(dir.path());
    let model = Arc::new(Scripted::default());
    *model.answers.lock().unwrap() = vec!["Oslo".into(), "Ingrid Berg".into()];
    // Try 1: relevant, grounded, inadequate. Try 2: all pass.
    *model.verdicts.lock().unwrap() = vec![true, true, false, true, true, true];
    let r = block(controller(model.clone(), &settings).run(&kb, &settings, &ask("Who founded the company that rebuilt Oslo Harbour?")));
    assert_eq!(r.answer.as_deref(), Some("Ingrid Berg"), "{:?}", r.abstained);
    assert_eq!(r.iterations, 2);
    assert_eq!(r.queries.len(), 2);
    assert_ne!(r.queries[0], r.queries[1], "a retry never repeats a query");
    let rewrites = r.trace.iter().filter(|t| t.to == "rewrite").count();
    assert_eq!(rewrites, 1);
    // 2 answers + 6 verdicts + 1 rewrite, tokens from the model's reported usage.
    assert_eq!(r.ledger.llm_calls, 9);
    assert!(r.ledger.tokens() > 0);
    assert!(model.prompts.lock().unwrap().iter().any(|p| p.contains("did not resolve the question")), "inadequate -> decomposition prompt");
}

#[test]
fn each_failure_type_triggers_its_own_rewrite() {
    let cases = [
        (vec![false], "was off topic", "Local"),
        (vec![true, false], "was not supported", "Global"),
        (vec![true, true, false], "did not resolve", "Local"),
    ];
    for (verdicts, prompt_marker, next_stage) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (kb, settings) = kb(dir.path());
        let model = Arc::new(Scripted::default());
        *model.answers.lock().unwrap() = vec!["Nordic Works".into()];
        let mut script = verdicts.clone();
        script.extend([true, true, true]);
        *model.verdicts.lock().unwrap() = script;
        let r = block(controller(model.clone(), &settings).run(&kb, &settings, &ask("Who rebuilt Oslo Harbour?")));
        assert!(model.prompts.lock().unwrap().iter().any(|p| p.contains(prompt_marker)), "{prompt_marker}");
        let retrieve_after_rewrite = r.trace.iter().skip_while(|t| t.to != "rewrite").find(|t| t.to == "retrieve").unwrap();
        assert!(retrieve_after_rewrite.detail.contains(&format!("from stage {next_stage}")), "{}", retrieve_after_rewrite.detail);
        assert!(r.answer.is_some());
    }
}

#[test]
fn retries_stop_at_the_iteration_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (kb, settings) = kb(dir.path());
    let model = Arc::new(Scripted::default());
    *model.answers.lock().unwrap() = vec!["Nordic Works".into()];
    let mut request = ask("Who rebuilt Oslo Harbour?");
    request.budget = Some(BudgetOverride { max_iterations: Some(2), ..Default::default() });
    let r = block(controller(model.clone(), &settings).run(&kb, &settings, &request));
    assert_eq!(r.iterations, 2);
    assert!(r.abstained.unwrap().contains("no verified answer"));
    assert_eq!(r.queries.len(), 2);
}

#[test]
fn embedded_controller_answers_from_evidence_with_zero_llm_calls() {
    let dir = tempfile::tempdir().unwrap();
    let (kb, settings) = kb(dir.path());
    let r = block(Controller::embedded().run(&kb, &settings, &ask("When was Oslo Harbour rebuilt?")));
    assert_eq!(r.answer.as_deref(), Some("1952"), "{:?} {:?}", r.abstained, r.verdicts);
    assert_eq!(r.ledger.llm_calls, 0);
    assert_eq!(r.evidence[0].doc_id, "oslo");
    assert!(r.cited.contains(&r.evidence[0].chunk));
}

mod budgets {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
        #[test]
        fn no_budget_is_ever_exceeded(
            calls in 0u32..12,
            tokens in 0u64..6000,
            iterations in 1u32..4,
            verdicts in proptest::collection::vec(any::<bool>(), 0..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (kb, settings) = kb(dir.path());
            let model = Arc::new(Scripted::default());
            *model.answers.lock().unwrap() = vec!["Nordic Works".into(), "Ingrid Berg".into()];
            *model.verdicts.lock().unwrap() = verdicts;
            let mut request = ask("Who founded the company that rebuilt Oslo Harbour?");
            request.budget = Some(BudgetOverride { max_iterations: Some(iterations), max_llm_calls: Some(calls), max_tokens: Some(tokens), deadline_ms: None });
            let r = block(controller(model.clone(), &settings).run(&kb, &settings, &request));
            prop_assert!(r.ledger.llm_calls <= calls);
            prop_assert!(r.ledger.tokens() <= tokens);
            prop_assert!(r.iterations <= iterations);
            prop_assert_eq!(model.prompts.lock().unwrap().len() as u32, r.ledger.llm_calls);
            prop_assert!(r.answer.is_some() != r.abstained.is_some());
        }
    }
}
