//! Human-in-the-loop triple curation. After an accepted answer the embedded extractor reads
//! the cited chunks again, sentence by sentence; triples the graph does not already hold
//! become pending [`Proposal`]s. A person approves (the edge goes live and to disk at once),
//! rejects (the triple is never proposed again) or corrects them; every decision lands in an
//! append-only audit log.
//!
//! Three keyspaces of the KB's store (`kb::store::Keyspace`): proposals (id -> proposal),
//! decisions (normalised triple -> proposal id and status, the dedupe key) and audit
//! (monotonic id -> entry). A decision — the curated edge, the proposal's new status, the
//! decision record and the audit entry — commits in one atomic batch: after a crash it
//! happened entirely or not at all.

use crate::kb::audit::now_ms;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::control::QueryResponse;
use crate::error::{Error, Result};
use crate::ingest::extract::{Extractor, RuleExtractor};
use crate::kb::Kb;
use crate::kb::model::{ChunkId, EdgeId, RawTriple, relation_label};
use crate::kb::store::{KbBatch, Keyspace};
use crate::text::{normalize_entity, sentence_spans};

pub use crate::kb::audit::{Action, AuditEntry, Author};

pub type ProposalId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Approved,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub id: ProposalId,
    pub triple: RawTriple,
    pub doc_id: String,
    pub chunk: ChunkId,
    /// Byte span of the sentence in the chunk the triple was read from.
    pub span: (usize, usize),
    pub sentence: String,
    /// The question whose accepted answer cited the chunk.
    pub question: String,
    /// That accepted answer (empty in proposals made before it was recorded).
    #[serde(default)]
    pub answer: String,
    pub status: Status,
    /// The triple as corrected by the reviewer, when it was edited before approval.
    pub corrected: Option<RawTriple>,
    /// The edge an approval created.
    pub edge: Option<EdgeId>,
    pub decided_by: Option<String>,
    pub created_ms: u64,
    pub decided_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Decision {
    proposal: ProposalId,
    status: Status,
}

fn get_proposal(kb: &Kb, id: ProposalId) -> Result<Proposal> {
    let bytes = kb
        .store()
        .get_raw(Keyspace::Proposals, &id.to_be_bytes())?
        .ok_or_else(|| Error::NotFound(format!("proposal {id}")))?;
    decode(&bytes, &id)
}

/// Every record of a keyspace keyed by a big-endian id, in id order.
fn scan_by_id<T: for<'de> Deserialize<'de>>(kb: &Kb, keyspace: Keyspace) -> impl Iterator<Item = Result<T>> + '_ {
    kb.store().scan_raw(keyspace).map(|item| {
        let (key, bytes) = item?;
        decode(&bytes, &key.as_slice().try_into().map_or(0, u64::from_be_bytes))
    })
}

/// `key`: what the record is filed under, for the error (a proposal's id, a triple).
fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], key: &dyn std::fmt::Display) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt { key: format!("curation/{key}"), message: e.to_string() })
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| Error::Invalid(format!("cannot encode curation record: {e}")))
}

/// The dedupe identity of a triple: what `Kb` would resolve it to, modulo aliases it does not
/// know yet.
fn triple_key(t: &RawTriple) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        normalize_entity(&t.subject),
        relation_label(&t.relation),
        normalize_entity(&t.object)
    )
}

/// Whether the graph already holds this triple between the nodes its mentions resolve to.
fn in_graph(kb: &Kb, t: &RawTriple) -> bool {
    let (Some(subject), Some(object)) = (kb.node_by_alias(&t.subject), kb.node_by_alias(&t.object)) else {
        return false;
    };
    let relation = relation_label(&t.relation);
    kb.graph()
        .steps(subject)
        .iter()
        .filter(|s| s.forward && s.to == object)
        .any(|s| kb.edge(s.edge).is_some_and(|e| *e.relation == *relation))
}

/// Proposes the triples of the chunks an accepted answer cites (the top evidence chunk when
/// it cites none) that are neither in the graph, nor pending, nor decided already. Abstentions
/// propose nothing: unverified evidence is no reason to grow the graph.
pub fn propose_from_response(kb: &Kb, response: &QueryResponse) -> Result<Vec<Proposal>> {
    if response.answer.is_none() {
        return Ok(Vec::new());
    }
    let mut chunks: Vec<ChunkId> = response.cited.clone();
    if chunks.is_empty() {
        chunks.extend(response.evidence.first().map(|e| e.chunk));
    }
    let store = kb.store();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for chunk_id in chunks {
        let Some(chunk) = kb.chunk(chunk_id) else {
            continue;
        };
        let Some(doc) = kb.doc(chunk.doc) else {
            continue;
        };
        for span in sentence_spans(&chunk.text) {
            let sentence = &chunk.text[span.clone()];
            for triple in RuleExtractor.extract(&doc.title, sentence)?.triples {
                let key = triple_key(&triple);
                if !seen.insert(key.clone()) || in_graph(kb, &triple) {
                    continue;
                }
                let id = store.next_id()?;
                let decision = encode(&Decision { proposal: id, status: Status::Pending })?;
                let proposal = Proposal {
                    id,
                    triple,
                    doc_id: doc.id.clone(),
                    chunk: chunk_id,
                    span: (span.start, span.end),
                    sentence: sentence.to_string(),
                    question: response.question.clone(),
                    answer: response.answer.clone().unwrap_or_default(),
                    status: Status::Pending,
                    corrected: None,
                    edge: None,
                    decided_by: None,
                    created_ms: now_ms(),
                    decided_ms: None,
                };
                // Insert-if-absent so that two queries racing on the same triple propose it
                // once; the decision key and the proposal it names are one atomic write.
                let claim = (Keyspace::Decisions, key.as_bytes(), decision.as_slice());
                let record = encode(&proposal)?;
                if !store.insert_new_raw_with(claim, (Keyspace::Proposals, &id.to_be_bytes(), &record))? {
                    continue;
                }
                out.push(proposal);
            }
        }
    }
    Ok(out)
}

/// Proposals in id order, optionally only those with `status`.
pub fn list(kb: &Kb, status: Option<Status>) -> Result<Vec<Proposal>> {
    let mut out = Vec::new();
    for p in scan_by_id::<Proposal>(kb, Keyspace::Proposals) {
        let p = p?;
        if status.is_none_or(|s| s == p.status) {
            out.push(p);
        }
    }
    Ok(out)
}

pub fn get(kb: &Kb, id: ProposalId) -> Result<Proposal> {
    get_proposal(kb, id)
}

/// A proposal with the source a reviewer judges it by: the chunk's title and text, split
/// around the sentence the triple was read from.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewItem {
    #[serde(flatten)]
    pub proposal: Proposal,
    pub title: String,
    /// The chunk's text before the sentence, the sentence, and the text after it (empty
    /// when the chunk is gone: its document was replaced or deleted since).
    pub before: String,
    pub highlight: String,
    pub after: String,
}

/// [`list`] with each proposal's source text.
pub fn review_items(kb: &Kb, status: Option<Status>) -> Result<Vec<ReviewItem>> {
    Ok(list(kb, status)?
        .into_iter()
        .map(|proposal| {
            let chunk = kb.chunk(proposal.chunk);
            let (start, end) = proposal.span;
            let part = |range: std::ops::Range<usize>| {
                chunk.and_then(|c| c.text.get(range)).map(str::to_string).unwrap_or_default()
            };
            let highlight = part(start..end);
            let (before, after) = if highlight.is_empty() {
                (String::new(), String::new())
            } else {
                (part(0..start), part(end..chunk.map_or(end, |c| c.text.len())))
            };
            ReviewItem {
                title: chunk.map(|c| kb.chunk_title(c).to_string()).unwrap_or_default(),
                highlight: if highlight.is_empty() { proposal.sentence.clone() } else { highlight },
                before,
                after,
                proposal,
            }
        })
        .collect())
}

/// The audit log, oldest first.
pub fn audit_log(kb: &Kb) -> Result<Vec<AuditEntry>> {
    scan_by_id(kb, Keyspace::Audit).collect()
}

/// Which audit entries a reader wants to see; every field given must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFilter {
    /// The name given for the write (a reviewer's), exactly.
    #[serde(default)]
    pub who: Option<String>,
    /// The token the write came through, exactly.
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub action: Option<Action>,
    /// Words that must occur (case-insensitively) in the triple or the document id.
    #[serde(default)]
    pub text: Option<String>,
}

impl AuditFilter {
    pub fn matches(&self, entry: &AuditEntry) -> bool {
        let text_matches = |needle: &str| {
            let needle = needle.to_lowercase();
            let triple = entry.triple.as_ref().map(|t| format!("{} {} {}", t.subject, t.relation, t.object));
            let hay = format!("{} {}", triple.unwrap_or_default(), entry.doc_id).to_lowercase();
            needle.split_whitespace().all(|w| hay.contains(w))
        };
        self.who.as_deref().is_none_or(|w| w.is_empty() || w == entry.who)
            && self.token.as_deref().is_none_or(|t| t.is_empty() || t == entry.token)
            && self.action.is_none_or(|a| a == entry.action)
            && self.text.as_deref().is_none_or(text_matches)
    }
}

/// Adds the proposal's triple to the graph (live and on disk) and records the approval.
pub fn approve(kb: &mut Kb, id: ProposalId, by: &Author) -> Result<Proposal> {
    decide(kb, id, by, Action::Approve, None)
}

/// Records the rejection; the triple will not be proposed again.
pub fn reject(kb: &mut Kb, id: ProposalId, by: &Author) -> Result<Proposal> {
    decide(kb, id, by, Action::Reject, None)
}

/// Approves `corrected` in place of the proposed triple.
pub fn edit(kb: &mut Kb, id: ProposalId, by: &Author, corrected: RawTriple) -> Result<Proposal> {
    decide(kb, id, by, Action::Edit, Some(corrected))
}

/// Longest subject, relation or object a reviewer may write: a name or a phrase, not a page.
const MAX_PART_CHARS: usize = 500;

fn decide(kb: &mut Kb, id: ProposalId, by: &Author, action: Action, corrected: Option<RawTriple>) -> Result<Proposal> {
    let who = by.who.as_str();
    // The proposal's state is read under the KB's write lock, held until the decision
    // commits: two daemons on one PostgreSQL store deciding one proposal at once both read
    // "pending" and both wrote, leaving two audit entries for one decision.
    let _locked = kb.begin_write()?;
    let mut proposal = get_proposal(kb, id)?;
    // An edit that changes nothing is an approval, and the audit says so.
    let (action, corrected) = match corrected {
        Some(same) if same == proposal.triple => (Action::Approve, None),
        corrected => (action, corrected),
    };
    if proposal.status != Status::Pending {
        return Err(Error::Conflict(format!("proposal {id} is already {:?}", proposal.status).to_lowercase()));
    }
    if who.trim().is_empty() {
        return Err(Error::Invalid("who is empty".into()));
    }
    if action != Action::Reject && kb.chunk(proposal.chunk).is_none() {
        return Err(Error::Invalid(format!(
            "proposal {id} was read from `{}`, which has been deleted or changed since: its sentence is \
             gone, so it can only be rejected",
            proposal.doc_id
        )));
    }
    if let Some(t) = &corrected {
        let parts = [("subject", &t.subject), ("relation", &t.relation), ("object", &t.object)];
        if let Some((part, _)) = parts.iter().find(|(_, text)| text.chars().count() > MAX_PART_CHARS) {
            return Err(Error::Invalid(format!("the {part} is longer than {MAX_PART_CHARS} characters")));
        }
    }
    let applied = corrected.clone().unwrap_or_else(|| proposal.triple.clone());
    let status = if action == Action::Reject { Status::Rejected } else { Status::Approved };
    let when = now_ms();
    let seq = kb.store().next_id()?;
    proposal.status = status;
    proposal.corrected = corrected;
    proposal.decided_by = Some(who.to_string());
    proposal.decided_ms = Some(when);
    let mut keys = vec![triple_key(&proposal.triple)];
    if applied != proposal.triple {
        keys.push(triple_key(&applied));
    }
    // The records of the decision, written into the same batch as the edge (if any).
    let record = |proposal: &mut Proposal, edge: Option<EdgeId>, batch: &mut KbBatch| -> Result<()> {
        proposal.edge = edge;
        let entry = AuditEntry {
            seq,
            who: who.to_string(),
            token: by.token.clone(),
            when_ms: when,
            action,
            doc_id: proposal.doc_id.clone(),
            proposal: Some(id),
            triple: Some(applied.clone()),
            chunk: Some(proposal.chunk),
            edge,
        };
        batch.put_raw(Keyspace::Proposals, &id.to_be_bytes(), encode(&*proposal)?);
        let decision = encode(&Decision { proposal: id, status })?;
        for key in &keys {
            batch.put_raw(Keyspace::Decisions, key.as_bytes(), decision.clone());
        }
        batch.put_audit(&entry)
    };
    match action {
        Action::Reject => {
            let mut batch = KbBatch::default();
            record(&mut proposal, None, &mut batch)?;
            kb.store().commit(batch)?;
        }
        // Approve or edit: `decide` is called with decisions only.
        _ => {
            kb.add_curated_triple(&applied, proposal.chunk, |edge, batch| record(&mut proposal, Some(edge), batch))?;
        }
    }
    // A decision is a person's work: make it durable before saying it happened.
    kb.flush()?;
    Ok(proposal)
}

/// Checks that decisions are whole: every curated edge belongs to an approved proposal, every
/// decided proposal (and only those) has exactly one audit entry that matches it, and every
/// triple's decision key names a stored proposal. Empty means consistent. (An approved edge
/// may be gone: deleting or replacing its document removes it.)
pub fn integrity_violations(kb: &Kb) -> Result<Vec<String>> {
    // Decision keys before proposals: a query may propose while this runs (under the same
    // read lock), and a key is never written without its proposal, which is never deleted,
    // so every key read here names a proposal the later read sees.
    let decisions: Vec<(Vec<u8>, Vec<u8>)> = kb.store().scan_raw(Keyspace::Decisions).collect::<Result<_>>()?;
    let proposals = list(kb, None)?;
    let audit = audit_log(kb)?;
    let mut problems = Vec::new();
    let approved_edges: std::collections::HashMap<EdgeId, ProposalId> =
        proposals.iter().filter(|p| p.status == Status::Approved).filter_map(|p| Some((p.edge?, p.id))).collect();
    for edge in kb.edges().filter(|e| e.origin == crate::kb::model::EdgeOrigin::Curated) {
        if !approved_edges.contains_key(&edge.id) {
            problems.push(format!("curated edge {} belongs to no approved proposal", edge.id));
        }
    }
    let mut audited: std::collections::HashMap<ProposalId, Vec<&AuditEntry>> = std::collections::HashMap::new();
    for entry in audit.iter().filter(|e| e.action.is_decision()) {
        match entry.proposal {
            Some(proposal) => audited.entry(proposal).or_default().push(entry),
            None => problems.push(format!("audit entry {} records a decision without its proposal", entry.seq)),
        }
    }
    for p in &proposals {
        let entries = audited.remove(&p.id).unwrap_or_default();
        match (p.status, entries.as_slice()) {
            (Status::Pending, []) => {}
            (Status::Pending, _) => problems.push(format!("pending proposal {} has audit entries", p.id)),
            (_, [entry]) if entry.edge == p.edge => {}
            (_, [_]) => problems.push(format!("proposal {} and its audit entry name different edges", p.id)),
            (_, entries) => {
                problems.push(format!("decided proposal {} has {} audit entries, not 1", p.id, entries.len()))
            }
        }
        if p.status == Status::Approved && p.edge.is_none() {
            problems.push(format!("approved proposal {} has no edge", p.id));
        }
    }
    for proposal in audited.keys() {
        problems.push(format!("audit entry for missing proposal {proposal}"));
    }
    let ids: HashSet<ProposalId> = proposals.iter().map(|p| p.id).collect();
    for (key, bytes) in decisions {
        let triple = key_label(&key);
        match decode::<Decision>(&bytes, &triple) {
            Ok(decision) if ids.contains(&decision.proposal) => {}
            Ok(decision) => problems.push(format!(
                "decision for `{triple}` names missing proposal {} (left by a crash between the two \
                 writes older builds made; this triple is not proposed again until `a2rag check \
                 --repair` releases it)",
                decision.proposal
            )),
            Err(e) => problems.push(format!("decision for `{triple}` is unreadable: {e}")),
        }
    }
    Ok(problems)
}

/// Removes the decision keys that name a missing proposal, so their triples can be proposed
/// again, and returns those triples ("subject | relation | object"). Nothing was decided for
/// such a key: a decided proposal is never deleted, and a key is written with its proposal
/// since this build. An unreadable key is left for a person to look at: its proposal, and
/// so whether the triple was decided, is unknown.
pub fn release_orphan_decisions(kb: &mut Kb) -> Result<Vec<String>> {
    let mut released = Vec::new();
    // Under the write lock: a decision another daemon makes meanwhile could rewrite a key
    // found orphaned here with a live proposal's.
    kb.commit_under_lock(|kb, batch| {
        // Keys before proposals, as in `integrity_violations`: a key read first has its
        // proposal.
        let decisions: Vec<(Vec<u8>, Vec<u8>)> = kb.store().scan_raw(Keyspace::Decisions).collect::<Result<_>>()?;
        let ids: HashSet<ProposalId> = list(kb, None)?.iter().map(|p| p.id).collect();
        for (key, bytes) in decisions {
            let triple = key_label(&key);
            if decode::<Decision>(&bytes, &triple).is_ok_and(|d| !ids.contains(&d.proposal)) {
                batch.remove_raw(Keyspace::Decisions, &key);
                released.push(triple);
            }
        }
        Ok(())
    })?;
    kb.flush()?;
    Ok(released)
}

/// A decision key as a person reads it: "subject | relation | object".
fn key_label(key: &[u8]) -> String {
    String::from_utf8_lossy(key).replace('\u{1f}', " | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(who: &str, action: Action, subject: &str) -> AuditEntry {
        AuditEntry {
            seq: 1,
            who: who.into(),
            token: "curators".into(),
            when_ms: 0,
            action,
            proposal: Some(7),
            triple: Some(RawTriple {
                subject: subject.into(),
                relation: "founded".into(),
                object: "Halden Optics".into(),
            }),
            doc_id: "halden_optics.md".into(),
            chunk: Some(3),
            edge: None,
        }
    }

    #[test]
    fn an_audit_filter_needs_every_given_field_to_match() {
        let e = entry("ana", Action::Approve, "Ingrid Halden");
        assert!(AuditFilter::default().matches(&e));
        assert!(AuditFilter { who: Some("ana".into()), ..Default::default() }.matches(&e));
        assert!(!AuditFilter { who: Some("bo".into()), ..Default::default() }.matches(&e));
        assert!(!AuditFilter { action: Some(Action::Reject), ..Default::default() }.matches(&e));
        assert!(AuditFilter { text: Some("ingrid OPTICS".into()), ..Default::default() }.matches(&e));
        assert!(!AuditFilter { text: Some("ingrid varga".into()), ..Default::default() }.matches(&e));
        assert!(AuditFilter { token: Some("curators".into()), ..Default::default() }.matches(&e));
        assert!(!AuditFilter { token: Some("ana".into()), ..Default::default() }.matches(&e));
        let both = AuditFilter { who: Some("ana".into()), action: Some(Action::Edit), ..Default::default() };
        assert!(!both.matches(&e));
        let ingest =
            AuditEntry::document(2, &Author { token: "bot".into(), who: "bot".into() }, Action::Ingest, "a.md");
        assert!(AuditFilter { text: Some("A.MD".into()), ..Default::default() }.matches(&ingest));
    }
}
