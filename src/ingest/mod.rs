//! Ingestion: read sources, chunk, extract, summarise, embed ([`Pipeline::prepare`]), then
//! commit each document atomically into the KB ([`ingest_paths`]).

pub mod chunk;
pub mod extract;
pub mod format;
pub mod llm;
pub mod source;
pub mod summary;
pub mod triples;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{ExtractorKind, Settings, SummarizerKind};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::kb::audit::Author;
use crate::kb::model::{EdgeOrigin, Link, fact_text, passage_text, relation_label, summary_embedded_apart};
use crate::kb::{IngestOutcome, Kb, PreparedDoc, PreparedTriple};
use crate::kb::{PreparedChunk, packed};
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
    embed_time: EmbedClock,
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
                return Err(Error::Config(
                    "ingest.extractor = \"llm\" needs an [llm] provider other than \"embedded\"".into(),
                ));
            }
        };
        let summarizer: Arc<dyn Summarizer> = match (settings.ingest.summarizer, &llm) {
            (SummarizerKind::Extractive, _) => Arc::new(ExtractiveSummarizer {
                sentences: settings.ingest.summary_sentences,
                entities: settings.ingest.summary_entities,
            }),
            (SummarizerKind::Llm, Some(model)) => Arc::new(llm::LlmSummarizer::new(model.clone(), remote, settings)?),
            (SummarizerKind::Llm, None) => {
                return Err(Error::Config(
                    "ingest.summarizer = \"llm\" needs an [llm] provider other than \"embedded\"".into(),
                ));
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
            embed_time: EmbedClock::default(),
        })
    }

    /// One document, vectors included: [`Pipeline::draft`] then [`Pipeline::embed_drafts`].
    pub fn prepare(&self, doc: SourceDoc) -> Result<PreparedDoc> {
        let draft = self.draft(doc)?;
        self.embed_drafts(vec![draft])?.pop().ok_or_else(missing_vector)
    }

    /// Everything but the vectors: chunks, extraction, triples, summary, and the list of
    /// short texts the commit will need vectors for.
    pub fn draft(&self, doc: SourceDoc) -> Result<Draft> {
        let content_hash = content_hash(&doc.title, &doc.text, &doc.links);
        let spans = chunk::chunk_spans(&doc.text, self.chunk_tokens, self.chunk_overlap);
        // Each chunk carries the headings it starts under. (Cutting chunks at headings as
        // well was measured and not kept: section-sized chunks lifted R@2 on the handbook
        // set but cost the embedded reader its answers, which then name the first hop.)
        let starts: Vec<usize> = spans.iter().map(|s| s.start).collect();
        let sections = format::markdown::section_paths(&doc.text, &doc.title, &starts);
        let imported = self.triples.as_ref().and_then(|t| t.for_document(&doc.title, &doc.text));
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
                section: sections.get(ordinal).cloned().unwrap_or_default(),
                links: links_within(&doc.links, span),
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
                triples.push(PreparedTriple { triple: t.triple, chunk, origin: EdgeOrigin::Imported });
            }
        }
        // Every distinct mention once, in document order (the summary's tie-break).
        let mut seen = std::collections::HashSet::new();
        all_entities.retain(|e| seen.insert(e.clone()));
        let summary = self.summarizer.summarize(&doc.title, &doc.text, &all_entities)?;

        // The short texts the commit needs vectors for (see `distinct_short_texts`), so the
        // committing thread embeds nothing.
        let short_texts = distinct_short_texts(&chunks, &triples);
        Ok(Draft {
            doc: PreparedDoc {
                id: doc.id,
                title: doc.title,
                source: doc.source,
                content_hash,
                summary,
                summary_vector: None,
                chunks,
                triples,
                text_vectors: Default::default(),
            },
            short_texts,
        })
    }

    /// Fills in the vectors of several drafts with a few embedder calls in all, not two per
    /// document: one for the passages (chunks, indexed with their title, and summaries) and
    /// one for the short texts (one per [`SHORT_TEXTS_PER_CALL`] of them). Large calls make large
    /// matrix products, and a name shared by several documents is embedded once (and, behind
    /// a cache, once per process).
    pub fn embed_drafts(&self, drafts: Vec<Draft>) -> Result<Vec<PreparedDoc>> {
        let start = Instant::now();
        let passages: Vec<String> = drafts
            .iter()
            .flat_map(|d| {
                let title = &d.doc.title;
                let summary = summary_embedded_apart(d.doc.chunks.len()).then(|| d.doc.summary.clone());
                d.doc.chunks.iter().map(move |c| passage_text(title, &c.section, &c.text)).chain(summary)
            })
            .collect();
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let mut passage_vectors = self.embedder.embed(&refs)?.into_iter();
        let passage_time = start.elapsed();

        let start = Instant::now();
        let short: Vec<&str> = drafts.iter().flat_map(|d| d.short_texts.iter().map(String::as_str)).collect();
        let mut short_rows = Vec::with_capacity(short.len());
        for call in short.chunks(SHORT_TEXTS_PER_CALL) {
            short_rows.extend(self.embedder.embed(call)?.iter().map(|v| packed::Row::of(v)));
        }
        let mut short_vectors = short_rows.into_iter();
        self.embed_time.record(passage_time, refs.len(), start.elapsed(), short.len());

        let mut prepared = Vec::with_capacity(drafts.len());
        for Draft { mut doc, short_texts } in drafts {
            for chunk in &mut doc.chunks {
                chunk.vector = passage_vectors.next().ok_or_else(missing_vector)?;
            }
            if summary_embedded_apart(doc.chunks.len()) {
                doc.summary_vector = Some(passage_vectors.next().ok_or_else(missing_vector)?);
            }
            for text in short_texts {
                let vector = short_vectors.next().ok_or_else(missing_vector)?;
                doc.text_vectors.insert(text, vector);
            }
            prepared.push(doc);
        }
        Ok(prepared)
    }

    /// Time spent in the embedder by [`Pipeline::embed_drafts`] so far.
    pub fn embed_time(&self) -> EmbedTime {
        self.embed_time.snapshot()
    }
}

/// A document as [`Pipeline::draft`] leaves it: a [`PreparedDoc`] without vectors, and the
/// short texts (mentions, relation labels) it needs vectors for.
pub struct Draft {
    doc: PreparedDoc,
    short_texts: Vec<String>,
}

/// Embedding time of an ingest by kind of text, for `a2rag bench ingest`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbedTime {
    /// Chunks and summaries.
    pub passages: Duration,
    pub passage_texts: usize,
    /// Mentions and relation labels.
    pub short: Duration,
    pub short_texts: usize,
}

/// [`EmbedTime`] shared by the threads that embed.
#[derive(Default)]
struct EmbedClock(Mutex<EmbedTime>);

impl EmbedClock {
    fn record(&self, passages: Duration, passage_texts: usize, short: Duration, short_texts: usize) {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        t.passages += passages;
        t.passage_texts += passage_texts;
        t.short += short;
        t.short_texts += short_texts;
    }

    fn snapshot(&self) -> EmbedTime {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every mention, relation label and fact (a triple read as text, for query-to-fact linking)
/// the commit may embed, once each, in first-seen order.
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
        add(fact_text(&t.triple).into());
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

/// The hash that tells a document unchanged: of its title and text, and of where its links
/// point, if it has any (a link retargeted is a change).
pub fn content_hash(title: &str, text: &str, links: &[Link]) -> String {
    let mut h = Sha256::new();
    h.update(title.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    for link in links {
        h.update([0u8]);
        h.update(link.target.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The links whose anchor lies within `span` of the document text, anchors made relative
/// to the chunk's start.
fn links_within(links: &[Link], span: &std::ops::Range<usize>) -> Vec<Link> {
    links
        .iter()
        .filter(|l| span.start <= l.anchor.0 && l.anchor.1 <= span.end)
        .map(|l| Link { anchor: (l.anchor.0 - span.start, l.anchor.1 - span.start), target: l.target.clone() })
        .collect()
}

/// What an ingest run did. `failed` problems make the CLI exit non-zero.
#[derive(Debug, Default, Serialize)]
pub struct IngestReport {
    pub files: usize,
    pub added: usize,
    pub replaced: usize,
    pub unchanged: usize,
    /// Imported triples left out (malformed, or for no ingested document); each is
    /// explained in `dropped_triples`.
    pub triples_dropped: usize,
    /// Why imported triples were left out. Kept apart from `errors` (documents that failed):
    /// a triples file with a few malformed entries still builds a usable KB, but the CLI
    /// exits non-zero so nothing is dropped unnoticed.
    pub dropped_triples: Vec<String>,
    /// The run was cancelled: the documents counted above committed, the rest did not.
    pub cancelled: bool,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Every document read, as (id, source), whatever became of it: what a folder sync
    /// compares the KB with.
    #[serde(skip)]
    pub read: Vec<(String, String)>,
}

impl IngestReport {
    /// Some input was rejected: a document, a line, or an imported triple.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty() || !self.dropped_triples.is_empty()
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
            SourceProblem::RepeatedId { path, line, id, first_line } => self.warnings.push(format!(
                "{}:{line}: id `{id}` repeats line {first_line}; this record replaces that one",
                path.display()
            )),
            SourceProblem::Gap { path, detail } => self.warnings.push(format!("{}: {detail}", path.display())),
        }
    }

    /// Accounts for the triples of `import` that no document took, after an ingest.
    pub fn record_unused_triples(&mut self, import: &TripleImport) {
        let problems = import.problems();
        self.triples_dropped += problems.iter().map(|p| p.triples).sum::<usize>();
        self.dropped_triples.extend(problems.into_iter().map(|p| p.message));
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
/// Each document's audit entry names the access's author.
pub trait KbAccess {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R;
    /// Who the documents are committed under.
    fn author(&self) -> Author {
        Author::owner()
    }
}

impl KbAccess for Kb {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R {
        f(self)
    }
}

/// A shared KB written on behalf of `author` (a daemon's client), locked per document.
pub struct SharedAs<'a> {
    pub kb: &'a tokio::sync::RwLock<Kb>,
    pub author: Author,
}

/// Must be used off the async runtime's worker threads (it blocks on the lock).
impl KbAccess for SharedAs<'_> {
    fn write<R>(&mut self, f: impl FnOnce(&mut Kb) -> R) -> R {
        f(&mut self.kb.blocking_write())
    }
    fn author(&self) -> Author {
        self.author.clone()
    }
}

/// Ingests files and directories. Each document commits on its own; a failure in one file
/// is recorded in the report and the others go on.
pub fn ingest_paths<K: KbAccess + ?Sized>(
    kb: &mut K,
    pipeline: &Pipeline,
    paths: &[PathBuf],
    progress: &mut dyn Progress,
) -> Result<IngestReport> {
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
    let author = kb.author();
    let (files, problems) = source::collect_files(paths, access);
    problems.into_iter().for_each(|p| report.problem(p));
    let mut docs = Vec::new();
    for file in &files {
        report.files += 1;
        let read = source::read_file(file, access.max_file_bytes);
        read.problems.into_iter().for_each(|p| report.problem(p));
        // A document an earlier build stored under the path as typed takes its new id in
        // place, curated edges and all, and is then unchanged rather than ingested twice.
        for doc in &read.docs {
            if let Some(earlier) = source::earlier_id(&doc.id, &doc.source, file) {
                kb.write(|kb| kb.rename_document(&earlier, &doc.id, &doc.source, &author))?;
            }
        }
        docs.extend(read.docs);
    }
    ingest_docs(kb, pipeline, docs, progress, &mut report)?;
    kb.write(|kb| {
        kb.save_with_snapshot();
        kb.flush()
    })?;
    if let Some(import) = &pipeline.triples {
        report.record_unused_triples(import);
    }
    Ok(report)
}

/// Ingests documents already in memory (inline documents of the daemon, tests).
///
/// Three stages run at once: drafting (chunking, extraction, summaries) on one worker
/// thread per core; embedding on one thread that takes the drafts in input order and embeds
/// whatever is ready, up to [`EMBED_WINDOW`] documents, in one go (a neural embedder then
/// runs few large forward passes on all cores instead of many small ones competing with
/// each other); and commits on this thread, strictly in input order, so node ids, alias
/// merges and the graph come out the same as in a sequential run. `progress.cancelled()` is
/// asked before each commit.
pub fn ingest_docs<K: KbAccess + ?Sized>(
    kb: &mut K,
    pipeline: &Pipeline,
    docs: Vec<SourceDoc>,
    progress: &mut dyn Progress,
    report: &mut IngestReport,
) -> Result<()> {
    progress.start(docs.len());
    let author = kb.author();
    report.read.extend(docs.iter().map(|d| (d.id.clone(), d.source.clone())));
    // Skip the preparation work for unchanged documents.
    let mut kept_triples = 0;
    let work: Vec<SourceDoc> = kb.write(|kb| {
        docs.into_iter()
            .filter(|doc| {
                let unchanged = kb
                    .doc_by_id(&doc.id)
                    .is_some_and(|d| d.content_hash == content_hash(&doc.title, &doc.text, &doc.links));
                if unchanged {
                    report.record(IngestOutcome::Unchanged);
                    progress.advance(&doc.id);
                    // Its triples were matched, not lost: the stored document keeps its graph.
                    let import = pipeline.triples.as_ref().and_then(|i| i.for_document(&doc.title, &doc.text));
                    kept_triples += usize::from(import.is_some_and(|t| !t.is_empty()));
                }
                !unchanged
            })
            .collect()
    });
    if kept_triples > 0 {
        report.warnings.push(format!(
            "{kept_triples} unchanged document(s) kept the graph they were ingested with: imported triples \
             are applied when a document is added or changed (delete it first to import new ones)"
        ));
    }
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(work.len()).max(1);
    std::thread::scope(|scope| -> Result<()> {
        // Worker w drafts documents w, w + workers, ...; reading the channels round-robin
        // restores input order. Bounded channels keep memory flat on huge inputs.
        let mut drafts = Vec::with_capacity(workers);
        let mut shares: Vec<Vec<SourceDoc>> = (0..workers).map(|_| Vec::new()).collect();
        let total = work.len();
        for (i, doc) in work.into_iter().enumerate() {
            shares[i % workers].push(doc);
        }
        for share in shares {
            let (tx, rx) = sync_channel::<Drafted>(PREPARED_AHEAD);
            scope.spawn(move || {
                for doc in share {
                    let id = doc.id.clone();
                    // A closed channel means the committer stopped (cancelled, or storage
                    // failure).
                    if tx.send((id, pipeline.draft(doc))).is_err() {
                        break;
                    }
                }
            });
            drafts.push(rx);
        }
        let (tx, prepared) = sync_channel::<Prepared>(EMBED_WINDOW);
        scope.spawn(move || embed_in_order(pipeline, &drafts, total, &tx));
        for done in 0..total {
            if progress.cancelled() {
                report.cancelled = true;
                break;
            }
            let Ok((id, prepared)) = prepared.recv() else {
                return Err(Error::Invalid("an ingest worker stopped early".into()));
            };
            match prepared.and_then(|p| kb.write(|kb| kb.commit_document(p, &author))) {
                Ok(outcome) => report.record(outcome),
                // Storage failures are not the document's fault: stop rather than skip.
                Err(e @ (Error::Store(_) | Error::Postgres(_))) => return Err(e),
                Err(e) => report.errors.push(format!("document {id}: {e}")),
            }
            progress.advance(&id);
            if (done + 1) % SAVE_CHECK_EVERY == 0 {
                kb.write(Kb::save_indexes_if_heavy);
            }
        }
        // Dropping the receiver stops the embedding thread at its next send, and with it the
        // draft workers.
        drop(prepared);
        Ok(())
    })?;
    kb.write(|kb| {
        kb.link_staged_vectors()?;
        kb.save_indexes_if_worth_it();
        Ok::<_, Error>(())
    })?;
    progress.finish();
    Ok(())
}

type Drafted = (String, Result<Draft>);
type Prepared = (String, Result<PreparedDoc>);

/// The embedding stage of [`ingest_docs`]: reads the `total` drafts round-robin from the
/// workers' queues (input order), embeds each window of ready drafts together and passes the
/// documents on in the same order. Stops when the committer hangs up.
fn embed_in_order(pipeline: &Pipeline, drafts: &[Receiver<Drafted>], total: usize, out: &SyncSender<Prepared>) {
    let mut next = 0;
    while next < total {
        // Wait for the next document, then take those already drafted after it.
        let Ok(first) = drafts[next % drafts.len()].recv() else {
            return;
        };
        next += 1;
        let mut window = vec![first];
        while window.len() < EMBED_WINDOW && next < total {
            match drafts[next % drafts.len()].try_recv() {
                Ok(drafted) => {
                    window.push(drafted);
                    next += 1;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        for prepared in embed_window(pipeline, window) {
            if out.send(prepared).is_err() {
                return;
            }
        }
    }
}

/// Embeds the drafts of one window together; a document whose drafting failed keeps its
/// error, and an embedding failure is reported on every document of the window.
fn embed_window(pipeline: &Pipeline, window: Vec<Drafted>) -> Vec<Prepared> {
    let mut ids = Vec::with_capacity(window.len());
    let mut ready = Vec::new();
    let mut failed = Vec::new();
    for (i, (id, draft)) in window.into_iter().enumerate() {
        match draft {
            Ok(draft) => ready.push(draft),
            Err(e) => failed.push((i, e)),
        }
        ids.push(id);
    }
    let mut results: Vec<Result<PreparedDoc>> = match pipeline.embed_drafts(ready) {
        Ok(docs) => docs.into_iter().map(Ok).collect(),
        Err(e) => {
            let message = e.to_string();
            (0..ids.len() - failed.len()).map(|_| Err(Error::Embed(message.clone()))).collect()
        }
    };
    for (i, e) in failed {
        results.insert(i, Err(e));
    }
    ids.into_iter().zip(results).collect()
}

/// Drafted documents each worker may hold before the embedding stage takes them.
const PREPARED_AHEAD: usize = 16;

/// Documents committed between two looks at whether the indexes should be saved mid-ingest
/// (`Kb::save_indexes_if_heavy`).
const SAVE_CHECK_EVERY: usize = 256;

/// Documents embedded together at most: enough texts for large forward passes, few enough
/// that the committer is never long without work.
pub const EMBED_WINDOW: usize = 32;

/// Short texts per embedder call: each call's f32 vectors (2 KB each at 512 dimensions) are
/// packed as soon as it returns, so a large document's hundreds of thousands of names and
/// facts never exist as f32 all at once (0.8 GB for one of 16 MB). Far more than a window
/// of ordinary documents holds, whose calls therefore stay as large as they were.
const SHORT_TEXTS_PER_CALL: usize = 32_768;

/// A KB of small documents for unit tests above `ingest`.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use super::{IngestReport, Pipeline, ingest_docs, source::SourceDoc};
    use crate::config::Settings;
    use crate::embed::HashEmbedder;
    use crate::kb::Kb;
    use crate::kb::model::ChunkId;
    use crate::net::Remote;

    /// A fresh KB in a temporary directory (kept alive by the returned guard) with one
    /// document per (title, text), embedded pipeline and hash embedder.
    pub fn kb_with_docs(docs: &[(&str, &str)]) -> (tempfile::TempDir, Kb) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut settings = Settings::defaults();
        settings.data_dir = dir.path().to_path_buf();
        let embedder = Arc::new(HashEmbedder::new(settings.embed.dim));
        let mut kb = Kb::open(Arc::new(settings.clone()), embedder.clone()).expect("open the KB");
        let pipeline = Pipeline::from_settings(&settings, embedder, None, &Remote::new()).expect("pipeline");
        let docs = docs
            .iter()
            .enumerate()
            .map(|(i, (title, text))| SourceDoc {
                id: format!("doc{i}"),
                title: title.to_string(),
                text: text.to_string(),
                source: "test".into(),
                links: Vec::new(),
            })
            .collect();
        ingest_docs(&mut kb, &pipeline, docs, &mut (), &mut IngestReport::default()).expect("ingest");
        (dir, kb)
    }

    /// A fresh KB holding the files `files` (name, content) written into a temporary folder
    /// and ingested from it, as a user's folder would be.
    pub fn kb_with_files(files: &[(&str, &str)]) -> (tempfile::TempDir, Kb) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut settings = Settings::defaults();
        settings.data_dir = dir.path().join("kb");
        let folder = dir.path().join("docs");
        std::fs::create_dir_all(&folder).expect("folder");
        for (name, content) in files {
            std::fs::write(folder.join(name), content).expect("write a file");
        }
        let embedder = Arc::new(HashEmbedder::new(settings.embed.dim));
        let mut kb = Kb::open(Arc::new(settings.clone()), embedder.clone()).expect("open the KB");
        let pipeline = Pipeline::from_settings(&settings, embedder, None, &Remote::new()).expect("pipeline");
        super::ingest_paths(&mut kb, &pipeline, &[folder], &mut ()).expect("ingest");
        (dir, kb)
    }

    /// The (first) chunk of the document titled `title`.
    pub fn chunk_of(kb: &Kb, title: &str) -> ChunkId {
        kb.chunk_ids().find(|c| kb.chunk(*c).is_some_and(|ch| kb.chunk_title(ch) == title)).expect("ingested")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{CountingEmbedder, HashEmbedder};
    use crate::kb::model::RawTriple;
    use std::sync::atomic::Ordering;

    fn doc(i: usize) -> SourceDoc {
        SourceDoc {
            id: format!("d{i}"),
            title: format!("Title {i}"),
            text: format!(
                "Alice Smith was born in Paris. She founded Acme Corp in {}. Bob Jones joined Acme Corp.",
                1900 + i
            ),
            source: "test".into(),
            links: Vec::new(),
        }
    }

    #[test]
    fn drafts_embed_together_in_two_calls_with_the_vectors_of_one_by_one() {
        let model = CountingEmbedder::new(64);
        let pipeline = Pipeline::from_settings(&Settings::defaults(), model.clone(), None, &Remote::new()).unwrap();
        let drafts: Vec<Draft> = (0..5).map(|i| pipeline.draft(doc(i)).unwrap()).collect();
        assert_eq!(model.calls.load(Ordering::SeqCst), 0, "drafting embeds nothing");
        let together = pipeline.embed_drafts(drafts).unwrap();
        assert_eq!(model.calls.load(Ordering::SeqCst), 2);
        for (i, got) in together.iter().enumerate() {
            let alone = pipeline.prepare(doc(i)).unwrap();
            assert_eq!(got.id, alone.id);
            // The same vectors up to float rounding (the hash embedder's sums depend on its batch).
            let same = |a: &[f32], b: &[f32]| crate::embed::cosine(a, b) > 1.0 - 1e-6;
            assert_eq!(got.summary_vector.is_some(), alone.summary_vector.is_some());
            if let (Some(a), Some(b)) = (&got.summary_vector, &alone.summary_vector) {
                assert!(same(a, b));
            }
            assert!(!got.chunks.is_empty());
            for (a, b) in got.chunks.iter().zip(&alone.chunks) {
                assert!(same(&a.vector, &b.vector));
            }
            assert!(!got.text_vectors.is_empty());
            assert_eq!(got.text_vectors.len(), alone.text_vectors.len());
            for (text, row) in &got.text_vectors {
                let vector = |row: &packed::Row| row.vector(64).expect("a row of the model's dimension").into_owned();
                assert!(same(&vector(row), &vector(&alone.text_vectors[text])), "{text}");
            }
        }
        let time = pipeline.embed_time();
        assert_eq!(time.passage_texts, 5 + 5, "one chunk per document, which is also its summary vector, twice");
        for doc in &together {
            assert_eq!(doc.chunks.len(), 1);
            assert_eq!(doc.summary_vector, None, "a one-chunk document's summary is its chunk");
        }
        assert!(time.short_texts > 0);
    }

    #[test]
    fn a_window_keeps_input_order_around_a_failed_draft() {
        let pipeline =
            Pipeline::from_settings(&Settings::defaults(), Arc::new(HashEmbedder::new(64)), None, &Remote::new())
                .unwrap();
        let window: Vec<Drafted> = vec![
            ("d0".into(), pipeline.draft(doc(0))),
            ("bad".into(), Err(Error::Invalid("unreadable".into()))),
            ("d2".into(), pipeline.draft(doc(2))),
        ];
        let out = embed_window(&pipeline, window);
        let ids: Vec<&str> = out.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["d0", "bad", "d2"]);
        assert_eq!(out[0].1.as_ref().map(|d| d.id.as_str()).ok(), Some("d0"));
        assert!(out[1].1.is_err());
        assert_eq!(out[2].1.as_ref().map(|d| d.id.as_str()).ok(), Some("d2"));
    }

    #[test]
    fn short_texts_are_distinct_and_in_first_seen_order() {
        let chunk = |entities: &[&str]| PreparedChunk {
            span: (0, 0),
            text: String::new(),
            section: String::new(),
            links: Vec::new(),
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
        let facts: Vec<String> = triples.iter().map(|t| fact_text(&t.triple)).collect();
        assert_eq!(
            distinct_short_texts(&chunks, &triples),
            vec![
                "Oslo".to_string(),
                "Anna Berg".into(),
                "Bergen".into(),
                label,
                facts[0].clone(),
                "Trondheim".into(),
                facts[1].clone()
            ]
        );
    }
}
