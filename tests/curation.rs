//! Curation through the library: proposals from accepted answers, dedupe, decisions through
//! the engine, the audit log. A real sled directory per test; fixture documents from tests/fixtures/rpc.

mod common;

use std::path::{Path, PathBuf};

use a2rag::access::Caller;
use a2rag::config::Settings;
use a2rag::control::{QueryRequest, QueryResponse};
use a2rag::curate::{self, Action, Status};
use a2rag::engine::{Decision, Engine};
use a2rag::ingest::{self, triples::TripleImport};
use a2rag::kb::audit::Author;
use a2rag::kb::catalog::KbName;
use a2rag::kb::model::{EdgeOrigin, RawTriple};
use common::default_kb;

/// A reviewer working through the library, as the data directory's owner.
fn reviewer(name: &str) -> Author {
    Author { token: a2rag::kb::audit::OWNER.into(), who: name.into() }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rpc").join(name)
}

/// An engine over the fixtures; with `import`, the triples file stands in for the extractor
/// so that the extractor's triples are new to the graph.
fn engine(dir: &Path, import: bool) -> Engine {
    let mut settings = Settings::load(None).unwrap();
    settings.data_dir = dir.join("data");
    let mut engine = Engine::open(settings, None).unwrap();
    if import {
        engine.pipeline.triples = Some(TripleImport::load(&fixture("triples.jsonl")).unwrap());
    }
    let paths = ["curie.txt", "prize.txt", "rivers.jsonl"].map(fixture);
    let report =
        ingest::ingest_paths(&mut *default_kb(&engine).blocking_write(), &engine.pipeline, &paths, &mut ()).unwrap();
    assert!(!report.failed(), "{:?}", report.errors);
    engine
}

fn ask(engine: &Engine, question: &str) -> QueryResponse {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let request = QueryRequest { question: question.into(), policy: None, budget: None };
    // The controller alone: these tests drive curation themselves.
    runtime.block_on(engine.controller.run(&default_kb(engine).blocking_read(), &engine.settings, &request))
}

fn relations(proposals: &[curate::Proposal]) -> Vec<&str> {
    proposals.iter().map(|p| p.triple.relation.as_str()).collect()
}

#[test]
fn accepted_answers_propose_new_triples_once_with_their_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let response = ask(&engine, "Where was Marie Curie born?");
    assert_eq!(response.answer.as_deref(), Some("Warsaw"));
    let shared = default_kb(&engine);
    let kb = shared.blocking_read();
    let proposals = curate::propose_from_response(&kb, &response).unwrap();
    assert_eq!(relations(&proposals), ["was born in", "discovered", "is the capital of"]);
    for p in &proposals {
        let chunk = kb.chunk(p.chunk).unwrap();
        assert_eq!(&chunk.text[p.span.0..p.span.1], p.sentence);
        assert_eq!(p.status, Status::Pending);
        assert_eq!(p.question, "Where was Marie Curie born?");
        assert!(p.doc_id.ends_with("curie.txt"));
    }
    // Pending triples are not proposed twice.
    assert!(curate::propose_from_response(&kb, &response).unwrap().is_empty());
    assert_eq!(curate::list(&kb, Some(Status::Pending)).unwrap(), proposals);
}

#[test]
fn triples_already_in_the_graph_and_abstentions_propose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Without the import the extractor's triples are the graph's own.
    let engine = engine(dir.path(), false);
    let response = ask(&engine, "Where was Marie Curie born?");
    assert!(response.answer.is_some());
    let shared = default_kb(&engine);
    let kb = shared.blocking_read();
    assert!(curate::propose_from_response(&kb, &response).unwrap().is_empty());
    drop(kb);
    let abstained = ask(&engine, "Zebra quantum banana?");
    assert!(abstained.answer.is_none());
    assert!(curate::propose_from_response(&default_kb(&engine).blocking_read(), &abstained).unwrap().is_empty());
}

#[test]
fn decisions_approve_reject_edit_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let response = ask(&engine, "Where was Marie Curie born?");
    let proposals = curate::propose_from_response(&default_kb(&engine).blocking_read(), &response).unwrap();
    let edges_before = default_kb(&engine).blocking_read().stats().edges;

    // Approve "was born in", reject "discovered", and correct "is the capital of", keeping
    // subject and object.
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let decide = |id, decision| {
        runtime.block_on(engine.decide(&Caller::owner(), &KbName::default(), id, Some("tester"), decision))
    };
    let corrected = RawTriple { relation: "largest city of".into(), ..proposals[2].triple.clone() };
    decide(proposals[0].id, Decision::Approve).unwrap();
    decide(proposals[1].id, Decision::Reject).unwrap();
    let edited = decide(proposals[2].id, Decision::Edit(corrected)).unwrap();
    assert_eq!((edited.status, edited.decided_by.as_deref()), (Status::Approved, Some("tester")));

    let shared = default_kb(&engine);
    let kb = shared.blocking_read();
    assert_eq!(kb.stats().edges, edges_before + 2);
    let curated: Vec<(String, String, String)> = kb
        .edges()
        .filter(|e| e.origin == EdgeOrigin::Curated)
        .map(|e| {
            (kb.node(e.subject).unwrap().name.clone(), e.relation.to_string(), kb.node(e.object).unwrap().name.clone())
        })
        .collect();
    assert!(curated.contains(&("Marie Curie".into(), "was born in".into(), "Warsaw".into())));
    assert!(curated.contains(&("Warsaw".into(), "largest city of".into(), "Poland".into())));

    let decided = curate::list(&kb, None).unwrap();
    assert_eq!(
        decided.iter().map(|p| p.status).collect::<Vec<_>>(),
        [Status::Approved, Status::Rejected, Status::Approved]
    );
    assert_eq!(decided[2].corrected.as_ref().map(|t| t.relation.as_str()), Some("largest city of"));
    assert!(decided.iter().all(|p| p.decided_by.as_deref() == Some("tester")));

    let audit = curate::audit_log(&kb).unwrap();
    let ingested = audit.iter().take_while(|a| a.action == Action::Ingest).count();
    assert!(ingested > 0 && audit[..ingested].iter().all(|a| a.token == "owner" && a.proposal.is_none()));
    let audit = &audit[ingested..];
    assert_eq!(audit.iter().map(|a| a.action).collect::<Vec<_>>(), [Action::Approve, Action::Reject, Action::Edit]);
    assert_eq!(
        audit.iter().map(|a| a.proposal).collect::<Vec<_>>(),
        proposals.iter().map(|p| Some(p.id)).collect::<Vec<_>>()
    );
    assert!(audit.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(audit[1].edge, None);
    assert!(audit[0].edge.is_some());

    // Decided triples, rejected ones included, are never proposed again.
    drop(kb);
    let again = ask(&engine, "Where was Marie Curie born?");
    assert!(curate::propose_from_response(&default_kb(&engine).blocking_read(), &again).unwrap().is_empty());
    // A decided proposal cannot be decided twice.
    let shared = default_kb(&engine);
    let mut kb = shared.blocking_write();
    assert!(curate::reject(&mut kb, proposals[0].id, &reviewer("tester")).is_err());
    let triple = RawTriple { subject: "a".into(), relation: "b".into(), object: "c".into() };
    assert!(curate::edit(&mut kb, 999_999_999, &reviewer("tester"), triple).is_err());
}

/// What a crash between the two writes of older builds left: a triple's decision key whose
/// proposal is missing. The check names it, the triple is not proposed again, and repair
/// releases it (only it) so the next accepted answer proposes it anew.
#[test]
fn repair_releases_a_decision_key_whose_proposal_is_missing() {
    use a2rag::kb::store::{KbBatch, Keyspace};
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let name = a2rag::kb::catalog::KbName::default();
    let owner = a2rag::access::Caller::owner();
    let response = ask(&engine, "Where was Marie Curie born?");
    let proposals = curate::propose_from_response(&default_kb(&engine).blocking_read(), &response).unwrap();
    let lost = proposals.iter().find(|p| p.triple.relation == "was born in").expect("proposed");
    let mut batch = KbBatch::default();
    batch.remove_raw(Keyspace::Proposals, &lost.id.to_be_bytes());
    default_kb(&engine).blocking_read().store().commit(batch).unwrap();

    let integrity = runtime.block_on(engine.check(&owner, &name, false)).unwrap();
    assert_eq!(integrity.violations.len(), 1, "{:?}", integrity.violations);
    assert!(integrity.violations[0].contains("a2rag check --repair"), "says what to do: {:?}", integrity.violations);
    assert!(curate::propose_from_response(&default_kb(&engine).blocking_read(), &response).unwrap().is_empty());

    let released = runtime.block_on(engine.repair(&owner, &name)).unwrap();
    assert_eq!(released, ["marie curie | was born in | warsaw"]);
    assert!(runtime.block_on(engine.check(&owner, &name, false)).unwrap().ok);
    assert!(runtime.block_on(engine.repair(&owner, &name)).unwrap().is_empty(), "nothing left to release");
    let again = curate::propose_from_response(&default_kb(&engine).blocking_read(), &response).unwrap();
    assert_eq!(relations(&again), ["was born in"]);
    let pending = curate::list(&default_kb(&engine).blocking_read(), Some(Status::Pending)).unwrap();
    assert_eq!(pending.len(), proposals.len(), "the other proposals are untouched: {pending:?}");
}

/// A correction is a name or a phrase, not a page, and one that changes nothing is an
/// approval; a proposal whose document is gone can only be rejected, with that said, not
/// "chunk N not found".
#[test]
fn decisions_refuse_huge_corrections_and_gone_sentences_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), true);
    let response = ask(&engine, "Where was Marie Curie born?");
    let proposals = curate::propose_from_response(&default_kb(&engine).blocking_read(), &response).unwrap();
    let (first, second) = (&proposals[0], &proposals[1]);
    let huge = RawTriple { subject: "X".repeat(501), relation: "was born in".into(), object: "Warsaw".into() };
    let err = curate::edit(&mut default_kb(&engine).blocking_write(), first.id, &reviewer("ann"), huge)
        .unwrap_err()
        .to_string();
    assert!(err.contains("subject is longer than 500"), "{err}");
    // An edit to the triple proposed is an approval.
    let unchanged =
        curate::edit(&mut default_kb(&engine).blocking_write(), first.id, &reviewer("ann"), first.triple.clone())
            .unwrap();
    assert!(unchanged.status == Status::Approved && unchanged.corrected.is_none(), "{unchanged:?}");
    let audit = curate::audit_log(&default_kb(&engine).blocking_read()).unwrap();
    let entry = audit.iter().find(|e| e.proposal == Some(first.id)).unwrap();
    assert_eq!(entry.action, curate::Action::Approve);
    assert!(curate::integrity_violations(&default_kb(&engine).blocking_read()).unwrap().is_empty());

    assert!(default_kb(&engine).blocking_write().delete_document(&second.doc_id, &Author::owner()).unwrap());
    let err = curate::approve(&mut default_kb(&engine).blocking_write(), second.id, &reviewer("ann"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("deleted or changed since") && err.contains("only be rejected"), "{err}");
    let rejected = curate::reject(&mut default_kb(&engine).blocking_write(), second.id, &reviewer("ann")).unwrap();
    assert_eq!(rejected.status, Status::Rejected);
}
