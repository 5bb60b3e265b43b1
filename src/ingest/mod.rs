//! Ingestion: read sources, chunk, extract, summarise, embed ([`Pipeline::prepare`]), then
//! commit each document atomically into the KB ([`ingest_paths`]).

pub mod chunk;
pub mod extract;
pub mod llm;
pub mod source;
pub mod summary;
pub mod triples;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{ExtractorKind, Settings, SummarizerKind};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::kb::model::{EdgeOrigin, relation_label};
use crate::kb::PreparedChunk;
use crate::kb::{IngestOutcome, Kb, PreparedDoc, PreparedTriple};
use crate::net::Remote;
use extract::{Extractor, RuleExtractor};
use source::{Access, SourceDoc, SourceProblem};
use summary::{ExtractiveSummarizer, Summarizer};
use triples::TripleImport;

/// Everything that turns a [`SourceDoc`] into a [`PreparedDoc`].
pub struct Pipeline {
    pub chunk_tokens: usize,
    pub chunk_overlap: usize,
    pub extractor: Arc<dyn Extractor>,
    pub summarizer: Arc<dyn Summarizer>,
    pub embedder: Arc<dyn Embedder>,
    pub triples: Option<TripleImport>,
    /// Origin recorded on the extractor's edges (rules or LLM).
    pub extracted_origin: EdgeOrigin,
    /// Largest input file read (`ingest.max_file_bytes`).
    pub max_file_bytes: u64,
}

impl Pipeline {
    /// The pipeline the settings describe, with the embedded defaults where no LLM is used.
    /// LLM roles wait for `llm` through `remote`.
    pub fn from_settings(
        settings: &Settings,
        embedder: Arc<dyn Embedder>,
        llm: Option<Arc<dyn crate::llm::LanguageModel>>,
        remote: &Remote,
    ) -> Result<Pipeline> {
        let extractor: Arc<dyn Extractor> = match (settings.ingest.extractor, &llm) {
            (ExtractorKind::Rules, _) => Arc::new(RuleExtractor),
            (ExtractorKind::Llm, Some(model)) => Arc::new(llm::LlmExtractor::new(model.clone(), remote, settings)?),
            (ExtractorKind::Llm, None) => {
                return Err(Error::Config("ingest.extractor = \"llm\" needs an [llm] provider other than \"embedded\"".into()));
            }
        };
        let summarizer: Arc<dyn Summarizer> = match (settings.ingest.summarizer, &llm) {
            (SummarizerKind::Extractive, _) => Arc::new(ExtractiveSummarizer {
                sentences: settings.ingest.summary_sentences,
                entities: settings.ingest.summary_entities,
            }),
            (SummarizerKind::Llm, Some(model)) => Arc::new(llm::LlmSummarizer::new(model.clone(), remote, settings)?),
            (SummarizerKind::Llm, None) => {
                return Err(Error::Config("ingest.summarizer = \"llm\" needs an [llm] provider other than \"embedded\"".into()));
            }
        };
        Ok(Pipeline {
            chunk_tokens: settings.ingest.chunk_tokens,
            chunk_overlap: settings.ingest.chunk_overlap,
            extractor,
            summarizer,
            embedder,
            triples: None,
            extracted_origin: match settings.ingest.extractor {
                ExtractorKind::Rules => EdgeOrigin::Extracted,
                ExtractorKind::Llm => EdgeOrigin::Llm,
            },
            max_file_bytes: settings.ingest.max_file_bytes,
        })
    }

    pub fn prepare(&self, doc: SourceDoc) -> Result<PreparedDoc> {
        let content_hash = content_hash(&doc.title, &doc.text);
        let spans = chunk::chunk_spans(&doc.text, self.chunk_tokens, self.chunk_overlap);
        let imported = self
            .triples
            .as_ref()
            .and_then(|t| t.for_document(&doc.title, &doc.text));
        let mut chunks = Vec::with_capacity(spans.len());
        let mut triples = Vec::new();
        let mut all_entities = Vec::new();
        for (ordinal, span) in spans.iter().enumerate() {
            let text = doc.text[span.clone()].to_string();
            let extraction = self.extractor.extract(&doc.title, &text)?;
            if imported.is_none() {
                triples.extend(extraction.triples.into_iter().map(|triple| PreparedTriple {
                    triple,
                    chunk: ordinal,
                    origin: self.extracted_origin,
                }));
            }
            all_entities.extend(extraction.entities.iter().cloned());
            chunks.push(PreparedChunk {
                span: (span.start, span.end),
                text,
                vector: Vec::new(),
                entities: extraction.entities,
            });
        }
        if let Some(imported) = imported {
            for t in imported {
                let chunk = t
                    .chunk
                    .map(|c| c as usize)
                    .filter(|c| *c < chunks.len())
                    .unwrap_or_else(|| chunk_mentioning(&chunks, &t.triple.subject, &t.triple.object));
                triples.push(PreparedTriple {
                    triple: t.triple,
                    chunk,
                    origin: EdgeOrigin::Imported,
                });
            }
        }
        // Every distinct mention once, in document order (the summary's tie-break).
        let mut seen = std::collections::HashSet::new();
        all_entities.retain(|e| seen.insert(e.clone()));
        let summary = self.summarizer.summarize(&doc.title, &doc.text, &all_entities)?;

        // One embedding call for everything the commit needs: chunks (indexed with their
        // title), the summary, and the short texts: every mention that may become a node and
        // every relation label. A neural embedder batches them; the commit thread then
        // embeds nothing.
        let short_texts = distinct_short_texts(&chunks, &triples);
        let indexed: Vec<String> = chunks.iter().map(|c| format!("{}\n{}", doc.title, c.text)).collect();
        let texts: Vec<&str> = indexed.iter().chain([&summary]).chain(&short_texts).map(String::as_str).collect();
        let mut vectors = self.embedder.embed(&texts)?.into_iter();
        for chunk in &mut chunks {
            chunk.vector = vectors.next().ok_or_else(missing_vector)?;
        }
        let summary_vector = vectors.next().ok_or_else(missing_vector)?;
        let text_vectors = short_texts.into_iter().zip(vectors).collect();
        Ok(PreparedDoc {
            id: doc.id,
            title: doc.title,
            source: doc.source,
            content_hash,
            summary,
            summary_vector,
            chunks,
            triples,
            text_vectors,
        })
    }
}

/// Every mention and relation label the commit may embed, once each, in first-seen order.
/// A large document repeats the same few thousand names hundreds of thousands of times, so
/// this dedupes as it goes (linear) instead of collecting every repeat and sorting them.
fn distinct_short_texts(chunks: &[PreparedChunk], triples: &[PreparedTriple]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut texts = Vec::new();
    let mut add = |text: std::borrow::Cow<'_, str>| {
        if !seen.contains(text.as_ref()) {
            seen.insert(text.to_string());
            texts.push(text.into_owned());
        }
    };
    for chunk in chunks {
        chunk.entities.iter().for_each(|e| add(e.as_str().into()));
    }
    for t in triples {
        add(t.triple.subject.as_str().into());
        add(t.triple.object.as_str().into());
        add(relation_label(&t.triple.relation).into());
    }
    texts
}

fn missing_vector() -> Error {
    Error::Embed("the embedder returned fewer vectors than texts".into())
}

/// The first chunk that mentions the subject, else the object, else the first chunk.
fn chunk_mentioning(chunks: &[PreparedChunk], subject: &str, object: &str) -> usize {
    let find = |needle: &str| {
        let needle = needle.to_lowercase();
        chunks.iter().position(|c| c.text.to_lowercase().contains(&needle))
    };
    find(subject).or_else(|| find(object)).unwrap_or(0)
}

pub fn content_hash(title: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(title.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What an ingest run did. `failed` problems make the CLI exit non-zero.
#[derive(Debug, Default, Serialize)]
pub struct IngestReport {
    pub files: usize,
    pub added: usize,
    pub replaced: usize,
    pub unchanged: usize,
    /// Imported triples left out (malformed, or for no ingested document); each is also
    /// explained in `errors`.
    pub triples_dropped: usize,
    /// The run was cancelled: the documents counted above committed, the rest did not.
    pub cancelled: bool,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

impl IngestReport {
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    fn record(&mut self, outcome: IngestOutcome) {
        match outcome {
            IngestOutcome::Added => self.added += 1,
            IngestOutcome::Replaced => self.replaced += 1,
            IngestOutcome::Unchanged => self.unchanged += 1,
        }
    }

    fn problem(&mut self, p: SourceProblem) {
        match p {
            SourceProblem::Error(e) => self.errors.push(e.to_string()),
            SourceProblem::Skipped { path, reason } => {
                self.warnings.push(format!("{}: skipped: {reason}", path.display()))
            }
        }
    }

    /// Accounts for the triples of `import` that no document took, after an ingest.
    pub fn record_unused_triples(&mut self, import: &TripleImport) {
        let problems = import.problems();
        self.triples_dropped += problems.iter().map(|p| p.triples).sum::<usize>();
        self.errors.extend(problems.into_iter().map(|p| p.message));
    }
}

/// Progress callbacks so the CLI can draw a bar and the daemon can send notifications.
pub trait Progress {
    fn start(&mut self, _total_docs: usize) {}
    fn advance(&mut self, _doc_id: &str) {}
    fn finish(&mut self) {}
    /// Asked before each document commits: `true` stops the run there.
    fn cancelled(&self) -> bool {
        false
    }
}

impl Progress for () {}

/// Write access to the KB for a run of commits. The CLI owns its KB; the daemon's is shared
/// with queries and is locked per document, so a long ingest lets queries in between.
pub trait KbAccess {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R;
}

impl KbAccess for Kb {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R {
        f(self)
    }
}

/// Must be used off the async runtime's worker threads (it blocks on the lock).
impl KbAccess for &tokio::sync::RwLock<Kb> {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R {
        f(&mut self.blocking_write())
    }
}

/// Ingests files and directories. Each document commits on its own; a failure in one file
/// is recorded in the report and the others go on.
pub fn ingest_paths<K: KbAccess + ?Sized>(kb: &mut K, pipeline: &Pipeline, paths: &[PathBuf], progress: &mut dyn Progress) -> Result<IngestReport> {
    ingest_paths_within(kb, pipeline, paths, &Access::anywhere(pipeline.max_file_bytes), progress)
}

/// [`ingest_paths`] reading only what `access` allows.
pub fn ingest_paths_within<K: KbAccess + ?Sized>(
    kb: &mut K,
    pipeline: &Pipeline,
    paths: &[PathBuf],
    access: &Access,
    progress: &mut dyn Progress,
) -> Result<IngestReport> {
    let mut report = IngestReport::default();
    let (files, problems) = source::collect_files(paths, access);
    problems.into_iter().for_each(|p| report.problem(p));
    let mut docs = Vec::new();
    for file in &files {
        report.files += 1;
        let read = source::read_file(file, access.max_file_bytes);
        read.problems.into_iter().for_each(|p| report.problem(p));
        docs.extend(read.docs);
    }
    ingest_docs(kb, pipeline, docs, progress, &mut report)?;
    kb.write(|kb| kb.flush())?;
    if let Some(import) = &pipeline.triples {
        report.record_unused_triples(import);
    }
    Ok(report)
}

/// Ingests documents already in memory (inline documents of the daemon, tests).
///
/// Preparation (chunking, extraction, summaries, embeddings) needs only the pipeline, so it
/// runs ahead on one worker thread per core while this thread commits the prepared
/// documents strictly in input order: node ids, alias merges and the graph come out the
/// same as in a sequential run. `progress.cancelled()` is asked before each commit.
pub fn ingest_docs<K: KbAccess + ?Sized>(
    kb: &mut K,
    pipeline: &Pipeline,
    docs: Vec<SourceDoc>,
    progress: &mut dyn Progress,
    report: &mut IngestReport,
) -> Result<()> {
    progress.start(docs.len());
    // Skip the preparation work for unchanged documents.
    let work: Vec<SourceDoc> = kb.write(|kb| {
        docs.into_iter()
            .filter(|doc| {
                let unchanged = kb.doc_by_id(&doc.id).is_some_and(|d| d.content_hash == content_hash(&doc.title, &doc.text));
                if unchanged {
                    report.record(IngestOutcome::Unchanged);
                    progress.advance(&doc.id);
                }
                !unchanged
            })
            .collect()
    });
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(work.len()).max(1);
    std::thread::scope(|scope| -> Result<()> {
        // Worker w prepares documents w, w + workers, ...; reading the channels round-robin
        // restores input order. Bounded channels keep memory flat on huge inputs.
        let mut queues = Vec::with_capacity(workers);
        let mut shares: Vec<Vec<SourceDoc>> = (0..workers).map(|_| Vec::new()).collect();
        let total = work.len();
        for (i, doc) in work.into_iter().enumerate() {
            shares[i % workers].push(doc);
        }
        for share in shares {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(String, Result<PreparedDoc>)>(PREPARED_AHEAD);
            scope.spawn(move || {
                for doc in share {
                    let id = doc.id.clone();
                    // A closed channel means the committer stopped (cancelled, or storage
                    // failure).
                    if tx.send((id, pipeline.prepare(doc))).is_err() {
                        break;
                    }
                }
            });
            queues.push(rx);
        }
        for i in 0..total {
            if progress.cancelled() {
                report.cancelled = true;
                break;
            }
            let Ok((id, prepared)) = queues[i % workers].recv() else {
                return Err(Error::Invalid("an ingest worker stopped early".into()));
            };
            match prepared.and_then(|p| kb.write(|kb| kb.commit_document(p))) {
                Ok(outcome) => report.record(outcome),
                // Storage failures are not the document's fault: stop rather than skip.
                Err(e @ Error::Store(_)) => return Err(e),
                Err(e) => report.errors.push(format!("document {id}: {e}")),
            }
            progress.advance(&id);
        }
        // Dropping the queues stops the workers at their next send.
        drop(queues);
        Ok(())
    })?;
    kb.write(|kb| kb.link_staged_vectors())?;
    progress.finish();
    Ok(())
}

/// Prepared documents each worker may hold before the committer takes them.
const PREPARED_AHEAD: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::model::RawTriple;

    #[test]
    fn short_texts_are_distinct_and_in_first_seen_order() {
        let chunk = |entities: &[&str]| PreparedChunk {
            span: (0, 0),
            text: String::new(),
            vector: Vec::new(),
            entities: entities.iter().map(|e| e.to_string()).collect(),
        };
        let chunks = [chunk(&["Oslo", "Anna Berg", "Oslo"]), chunk(&["Anna Berg", "Bergen"])];
        let triple = |s: &str, r: &str, o: &str| PreparedTriple {
            triple: RawTriple { subject: s.into(), relation: r.into(), object: o.into() },
            chunk: 0,
            origin: EdgeOrigin::Extracted,
        };
        let triples = [triple("Anna Berg", "Moved To", "Bergen"), triple("Oslo", "moved to", "Trondheim")];
        let label = relation_label("Moved To");
        assert_eq!(label, relation_label("moved to"));
        assert_eq!(distinct_short_texts(&chunks, &triples), vec!["Oslo".to_string(), "Anna Berg".into(), "Bergen".into(), label, "Trondheim".into()]);
    }
}
