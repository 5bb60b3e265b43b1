//! `a2rag bench ...`: throughput and latency measurements. Each prints its numbers next to
//! a baseline measured in the same run, never a bare absolute.

pub mod rpc;
pub mod scale;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};

use crate::config::{PprMethod, Settings};
use crate::error::{Error, Result};
use crate::eval::dataset::Dataset;
use crate::eval::metrics::percentile;
use crate::eval::scratch_kb;
use crate::ingest::{self, source};
use crate::kb::graph::Csr;
use crate::net::Remote;
use crate::retrieve::ppr::{self, PprParams};
use crate::retrieve::{RetrieveOptions, Retriever, Stage, Strategy};

/// Ingest throughput in passages/s on a corpus, against the parse-and-chunk-only baseline
/// (the floor no ingest can beat) measured on the same corpus, with the embedding thread's
/// time by kind of text.
pub fn ingest(settings: Settings, corpus: &Path, scratch: &Path) -> Result<String> {
    let t = Instant::now();
    let read = source::read_file(corpus, settings.ingest.max_file_bytes);
    let docs = read.docs;
    let n = docs.len();
    let chunks: usize = docs
        .iter()
        .map(|d| ingest::chunk::chunk_spans(&d.text, settings.ingest.chunk_tokens, settings.ingest.chunk_overlap).len())
        .sum();
    let baseline = n as f64 / t.elapsed().as_secs_f64();
    let target = if settings.embed.provider == crate::config::EmbedProvider::Hash { 500 } else { 15 };
    let (mut kb, pipeline) = scratch_kb(settings, scratch, &Remote::new())?;
    let t = Instant::now();
    let mut report = ingest::IngestReport::default();
    ingest::ingest_docs(&mut kb, &pipeline, docs, &mut (), &mut report)?;
    kb.flush()?;
    let secs = t.elapsed().as_secs_f64();
    let rate = n as f64 / secs;
    let stats = kb.stats();
    let embed = pipeline.embed_time();
    let (passages, short) = (embed.passages.as_secs_f64(), embed.short.as_secs_f64());
    Ok(format!(
        "ingest {} with {}: {n} passages ({chunks} chunks) in {secs:.2} s = {rate:.1} passages/s (target >= {target})\n  \
         embedding thread: passages (chunks + summaries, {} texts) {passages:.2} s, names/labels/facts ({} texts) {short:.2} s; \
         the rest of the wall time (drafting and commits not overlapped, HNSW link) {:.2} s\n  \
         baseline parse+chunk only: {baseline:.0} passages/s; full ingest is {:.1}x slower than the floor\n  \
         KB: {} nodes, {} edges, {} aliases merged",
        corpus.display(),
        kb.embedder().id(),
        embed.passage_texts,
        embed.short_texts,
        (secs - passages - short).max(0.0),
        baseline / rate,
        stats.nodes,
        stats.edges,
        stats.aliases_merged
    ))
}

/// Nodes of the ranking by which forward push is compared with power iteration.
const TOP: usize = 10;

/// PPR on a synthetic graph: power iteration vs forward push, p50/p95 over `queries`.
pub fn ppr(nodes: usize, edges: usize, queries: usize, settings: &crate::config::RetrieveSettings) -> Result<String> {
    // Push is judged by the overlap of its top 10 with power iteration's.
    if nodes <= TOP || u32::try_from(nodes).is_err() || edges == 0 || queries == 0 {
        return Err(Error::Invalid(format!(
            "bench ppr needs --nodes between {} and {}, and --edges and --queries of at least 1",
            TOP + 1,
            u32::MAX
        )));
    }
    let (restart_prob, tolerance, epsilon) = (settings.restart_prob, settings.ppr_tolerance, settings.ppr_push_epsilon);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    // Preferential-attachment-like skew: endpoints drawn from a squared uniform.
    let list: Vec<(u32, u32)> = (0..edges)
        .map(|_| {
            let a = (rng.random::<f64>().powi(2) * nodes as f64) as u32;
            let b = rng.random_range(0..nodes as u32);
            (a.min(nodes as u32 - 1), b)
        })
        .collect();
    let csr = Csr::from_edges(nodes, &list);
    let seeds: Vec<Vec<usize>> = (0..queries).map(|_| (0..3).map(|_| rng.random_range(0..nodes)).collect()).collect();
    let params = PprParams { restart_prob, tolerance, max_iterations: 100 };
    let mut power = Vec::new();
    let mut push = Vec::new();
    let mut agree = 0usize;
    for s in &seeds {
        let p = ppr::personalization(&csr, s);
        let t = Instant::now();
        let (exact, _) = ppr::power_iteration(&csr, &p, params);
        power.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let approx = ppr::forward_push(&csr, &p, restart_prob, epsilon);
        push.push(t.elapsed().as_secs_f64() * 1000.0);
        let top = |v: &[f64]| {
            let mut idx: Vec<usize> = (0..v.len()).collect();
            idx.select_nth_unstable_by(TOP, |a, b| v[*b].total_cmp(&v[*a]));
            let mut t: Vec<usize> = idx[..TOP].to_vec();
            t.sort();
            t
        };
        agree += top(&exact).iter().filter(|i| top(&approx).contains(i)).count();
    }
    let (p50, p95) = (percentile(&power, 0.5), percentile(&power, 0.95));
    let (q50, q95) = (percentile(&push, 0.5), percentile(&push, 0.95));
    let (method, a50) = match ppr::method_for(&csr, settings) {
        PprMethod::Push => ("push", q50),
        _ => ("power", p50),
    };
    Ok(format!(
        "ppr: {nodes} nodes, {edges} edges, {queries} queries of 3 seeds, restart {restart_prob}\n  \
         power iteration (tol {tolerance:e}): p50 {p50:.2} ms  p95 {p95:.2} ms\n  \
         forward push (eps {epsilon:e}):       p50 {q50:.2} ms  p95 {q95:.2} ms   ({:.1}x faster at p50; top-10 overlap {:.0}%)\n  \
         configured method ({:?}) runs {method} on this graph: p50 {a50:.2} ms   (target p50 <= 30 ms)",
        p50 / q50.max(1e-9),
        agree as f64 / (queries * TOP) as f64 * 100.0,
        settings.ppr_method
    ))
}

/// Retrieval latency (all stages, no LLM) over a dataset's questions on an ingested KB,
/// against the hybrid text retriever measured on the same KB.
pub fn retrieve(settings: Settings, dataset_dir: &Path, triples: Option<&Path>, scratch: &Path) -> Result<String> {
    let dataset = Dataset::load(dataset_dir)?;
    let (mut kb, mut pipeline) = scratch_kb(settings, scratch, &Remote::new())?;
    if let Some(t) = triples {
        pipeline.triples = Some(ingest::triples::TripleImport::load(t)?);
    }
    ingest::ingest_paths(&mut kb, &pipeline, std::slice::from_ref(&dataset.corpus), &mut ())?;
    // Per question: wall time, and the adaptive run's time per stage (the rest is seed
    // alignment plus the final fusion).
    let time = |strategy| -> Result<(Vec<f64>, std::collections::BTreeMap<String, f64>)> {
        let mut out = Vec::new();
        let mut phases = std::collections::BTreeMap::new();
        for q in &dataset.questions {
            let t = Instant::now();
            let r = Retriever::new(&kb)
                .retrieve(&q.question, RetrieveOptions { strategy, min_stage: Stage::Local, top_k: 10 })?;
            out.push(t.elapsed().as_secs_f64() * 1000.0);
            add_phases(&r, &mut phases);
        }
        Ok((out, phases))
    };
    // Warm-up builds the PPR snapshot once, as a running daemon would have.
    time(Strategy::Adaptive)?;
    let (a2rag, phases) = time(Strategy::Adaptive)?;
    let (hybrid, _) = time(Strategy::Text(crate::kb::SearchMode::Hybrid))?;
    let (a50, a95) = (percentile(&a2rag, 0.5), percentile(&a2rag, 0.95));
    let (h50, h95) = (percentile(&hybrid, 0.5), percentile(&hybrid, 0.95));
    Ok(format!(
        "retrieve {} ({} questions): a2rag p50 {a50:.2} ms p95 {a95:.2} ms (target p50 <= 10 ms)\n  \
         mean ms per question by phase: {}\n  \
         baseline hybrid text retrieval: p50 {h50:.2} ms p95 {h95:.2} ms; a2rag/hybrid at p50 = {:.1}x",
        dataset.name,
        dataset.questions.len(),
        mean_phases(&phases, dataset.questions.len()),
        a50 / h50.max(1e-9)
    ))
}

/// Adds a retrieval's milliseconds per stage to `phases` (the rest of its time is seed
/// alignment plus the final fusion).
fn add_phases(r: &crate::retrieve::Retrieval, phases: &mut std::collections::BTreeMap<String, f64>) {
    let staged: u64 = r.stages.iter().map(|s| s.micros).sum();
    for s in &r.stages {
        *phases.entry(format!("{:?}", s.stage).to_lowercase()).or_insert(0.0) += s.micros as f64 / 1000.0;
    }
    *phases.entry("seeds+fusion".to_string()).or_insert(0.0) += r.micros.saturating_sub(staged) as f64 / 1000.0;
}

/// `phases` divided by `n`, as "phase ms, ...".
fn mean_phases(phases: &std::collections::BTreeMap<String, f64>, n: usize) -> String {
    let n = n.max(1) as f64;
    phases.iter().map(|(phase, ms)| format!("{phase} {:.2}", ms / n)).collect::<Vec<_>>().join(", ")
}

/// Sentences/s of the configured embedder against the hash embedder on the same sentences.
/// For MiniLM also tokens/s, the forward pass's achieved GFLOP/s, and the SGEMM GFLOP/s of the
/// same GEMM library on a 2048² product with as many threads: the share of the machine's
/// matrix throughput the encoder reaches.
pub fn embed(settings: &Settings, corpus: &Path, batch: usize) -> Result<String> {
    let docs = source::read_file(corpus, settings.ingest.max_file_bytes).docs;
    let sentences: Vec<String> = docs
        .iter()
        .flat_map(|d| {
            crate::text::sentence_spans(&d.text).into_iter().map(|r| d.text[r].to_string()).collect::<Vec<_>>()
        })
        .collect();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let hash = crate::embed::HashEmbedder::new(settings.embed.dim);
    let baseline = crate::embed::embedding_throughput(&hash, &refs, batch)?;
    let baseline_line = format!("baseline {} {baseline:.0} sentences/s", crate::embed::Embedder::id(&hash));
    let remote = Remote::new();
    if settings.embed.provider == crate::config::EmbedProvider::MiniLm {
        // The model itself, not the cached one `from_settings` gives: every sentence is run.
        let model = crate::embed::MiniLmEmbedder::from_settings(&settings.embed, &remote)?;
        let tokens = model.token_counts(&refs)?;
        let total_tokens: usize = tokens.iter().sum();
        // Per sequence, so independent of how texts are grouped into passes.
        let flops = model.forward_flops(tokens.iter().copied());
        let rate = crate::embed::embedding_throughput(&model, &refs, batch)?;
        let secs = refs.len() as f64 / rate.max(1e-9);
        let achieved = flops / secs / 1e9;
        let threads = model.threads();
        let sgemm = crate::embed::bert::sgemm_gflops(2048, threads, 3);
        return Ok(format!(
            "embed {} sentences ({total_tokens} word pieces, {:.1} per sentence), batch {batch}, {threads} threads: {} \
             {rate:.1} sentences/s, {:.0} tokens/s\n  \
             forward pass: {:.2} GFLOP in {secs:.2} s = {achieved:.1} GFLOP/s; SGEMM 2048x2048 (gemm crate, as candle, {threads} threads) \
             {sgemm:.1} GFLOP/s; achieved/SGEMM = {:.0}% (target >= 50%)\n  \
             {baseline_line} ({:.1}x MiniLM)",
            refs.len(),
            total_tokens as f64 / refs.len().max(1) as f64,
            crate::embed::Embedder::id(&model),
            total_tokens as f64 / secs,
            flops / 1e9,
            achieved / sgemm * 100.0,
            baseline / rate.max(1e-9)
        ));
    }
    let configured = crate::embed::from_settings(&settings.embed, &remote)?;
    let rate = crate::embed::embedding_throughput(configured.as_ref(), &refs, batch)?;
    Ok(format!(
        "embed {} sentences, batch {batch}: {} {rate:.1} sentences/s; {baseline_line} ({:.1}x)",
        refs.len(),
        configured.id(),
        baseline / rate.max(1e-9)
    ))
}

/// Serves the engine on a unix socket in this process and measures sustained requests/s and
/// latency of `query` and of evidence-only `retrieve` at each client count; each method's
/// single-client row is the baseline for its others, and `retrieve` is compared with `query`.
pub async fn rpc(
    engine: Arc<crate::engine::Engine>,
    dataset_dir: &Path,
    clients: &[usize],
    queries: usize,
    scratch: &Path,
) -> Result<String> {
    use rpc::BenchMethod;
    let dataset = Dataset::load(dataset_dir)?;
    let questions: Vec<String> = dataset.questions.iter().map(|q| q.question.clone()).collect();
    std::fs::create_dir_all(scratch).map_err(|e| crate::Error::io(scratch, e))?;
    let socket = scratch.join("bench.sock");
    let address = crate::rpc::Listen::Unix(socket);
    let options = crate::rpc::ServeOptions { stdio: false, listen: vec![address.clone()], ..Default::default() };
    let daemon = crate::rpc::Daemon::bind(engine, options).await?;
    let server = tokio::spawn(daemon.run());
    let mut rows = Vec::new();
    for method in [BenchMethod::Query, BenchMethod::Retrieve] {
        let bench = rpc::BenchOptions {
            address: address.clone(),
            token: None,
            clients: clients.to_vec(),
            queries,
            policy: None,
            method,
        };
        match rpc::bench_rpc(&bench, &questions).await {
            Ok(r) => rows.extend(r),
            Err(e) => {
                server.abort();
                return Err(e);
            }
        }
    }
    server.abort();
    let mut out = Vec::new();
    rpc::print_table(&rows, &mut out).map_err(|e| crate::Error::io("stdout", e))?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    let rate = |method: BenchMethod, n: usize| {
        rows.iter().find(|r| r.method == method && r.clients == n).map(|r| r.queries_per_second.max(1e-9))
    };
    for method in [BenchMethod::Query, BenchMethod::Retrieve] {
        if let (Some(&first), Some(&last)) = (clients.first(), clients.last())
            && let (Some(base), Some(top)) = (rate(method, first), rate(method, last))
        {
            text.push_str(&format!(
                "{}: {last} clients sustain {:.1}x the requests/s of {first}\n",
                method.name(),
                top / base
            ));
        }
    }
    if let Some(&n) = clients.last()
        && let (Some(q), Some(r)) = (rate(BenchMethod::Query, n), rate(BenchMethod::Retrieve, n))
    {
        text.push_str(&format!("retrieve at {n} clients: {:.1}x the requests/s of query", r / q));
    }
    Ok(text)
}

/// Seconds to ingest one synthetic document of each size in `megabytes`, each into a fresh
/// KB, and the time per MB relative to the smallest: linear ingest keeps the ratio near 1.
/// Every size is ingested as many times as the largest holds it (the 1 MB document 16 times
/// beside one 16 MB document), so that each row's figure covers about as much of the
/// machine's time: on a shared host the speed swings by half from one second to the next,
/// and a large document's seconds average those swings where a few short ones would not.
/// A round runs half of each smaller size's documents before the larger sizes and half
/// after ([`round_order`]), so that a drift of the host's speed over the round (it runs for
/// minutes) weighs on every row alike instead of on whichever ran in the slower part.
/// With several `rounds`, each row reports its medians.
pub fn large_doc(
    settings: Settings,
    megabytes: &[usize],
    names: NameGrowth,
    rounds: usize,
    scratch: &Path,
) -> Result<String> {
    let documents = documents_per_round(megabytes);
    let mut runs: Vec<Vec<DocRun>> = megabytes.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds.max(1) {
        let mut round: Vec<Option<DocRun>> = megabytes.iter().map(|_| None).collect();
        for size in round_order(&documents) {
            let run = ingest_one_document(&settings, megabytes[size], names, scratch)?;
            match &mut round[size] {
                Some(so_far) => so_far.add(run),
                empty => *empty = Some(run),
            }
        }
        for (runs, run) in runs.iter_mut().zip(round) {
            runs.extend(run);
        }
    }
    let mut lines = Vec::new();
    let mut base: Option<(f64, Option<f64>)> = None;
    for ((&mb, &documents), runs) in megabytes.iter().zip(&documents).zip(&runs) {
        let median = |figure: &dyn Fn(&DocRun) -> Option<f64>| {
            let xs: Vec<f64> = runs.iter().filter_map(figure).collect();
            (!xs.is_empty()).then(|| percentile(&xs, 0.5))
        };
        let per_mb = median(&|run| Some(run.wall / run.megabytes())).unwrap_or_default();
        let cpu_per_mb = median(&|run| run.cpu.map(|cpu| cpu.total() / run.megabytes()));
        let (base_wall, base_cpu) = *base.get_or_insert((per_mb, cpu_per_mb));
        let mb_f = mb.max(1) as f64;
        let cpu_column = match (cpu_per_mb, base_cpu, median(&|run| run.cpu.map(|cpu| cpu.kernel / run.megabytes()))) {
            (Some(cpu), Some(base_cpu), Some(kernel)) => {
                let each = match runs.len() {
                    1 => String::new(),
                    _ => {
                        let each: Vec<String> = runs
                            .iter()
                            .filter_map(|run| run.cpu.map(|cpu| format!("{:.2}", cpu.total() / run.megabytes())))
                            .collect();
                        format!(" [rounds {}]", each.join(", "))
                    }
                };
                format!(
                    "  cpu {:>7.2} s  {cpu:.3} s/MB  x{:.2}{each}  (kernel {:.2} s)",
                    cpu * mb_f,
                    cpu / base_cpu.max(1e-9),
                    kernel * mb_f
                )
            }
            _ => String::new(),
        };
        let peak = runs.iter().map(|run| run.peak_rss).max().unwrap_or_default();
        let stats = runs.last().map(|run| &run.stats);
        let each_round = match documents {
            1 => String::new(),
            n => format!("; {n} documents a round"),
        };
        lines.push(format!(
            "  {mb:>3} MB: wall {:>7.2} s  {per_mb:.3} s/MB  x{:.2}{cpu_column}  peak RSS {:.2} GB  ({} chunks, {} nodes, {} edges, {} distinct facts{each_round})",
            per_mb * mb_f,
            per_mb / base_wall.max(1e-9),
            peak as f64 / 1e9,
            stats.map_or(0, |s| s.chunks),
            stats.map_or(0, |s| s.nodes),
            stats.map_or(0, |s| s.edges),
            stats.map_or(0, |s| s.fact_vectors)
        ));
    }
    let rounds_note = match rounds {
        0 | 1 => String::new(),
        n => format!(
            "; medians of {n} rounds, the sizes alternating, each round's CPU s/MB in brackets, the kernel's its own median, peak RSS the largest of the rounds"
        ),
    };
    Ok(format!(
        "large-document ingest (one document per KB, {:?} name growth, rule extractor, embedder {}; each size ingested as many times a round as the largest holds it, half of them before the larger sizes and half after, its figures per document; xN = time per MB against the {} MB row; cpu = CPU seconds of all threads, the figure to compare on a shared machine, with its part in the kernel (page faults on fresh memory, mostly); peak RSS = the row's own{rounds_note}):\n{}",
        names,
        settings.embed.provider.name(),
        megabytes.first().copied().unwrap_or_default(),
        lines.join("\n")
    ))
}

/// How many documents of each size a round of `large_doc` ingests: as many as the largest
/// size holds it, rounded up.
fn documents_per_round(megabytes: &[usize]) -> Vec<usize> {
    let largest = megabytes.iter().copied().max().unwrap_or(1).max(1);
    megabytes.iter().map(|&mb| largest.div_ceil(mb.max(1))).collect()
}

/// The order of one round's ingests, as indexes of `documents` (how many of each size a
/// round ingests): the first half of each size's documents, smallest size (most documents)
/// first whatever order the sizes were given in, then the odd ones left over, then the
/// second halves in reverse. With each size odd at most once (the largest size's one
/// document) the order reads the same both ways, so every size's documents are centred on
/// the round's middle.
fn round_order(documents: &[usize]) -> Vec<usize> {
    let mut sizes: Vec<usize> = (0..documents.len()).collect();
    sizes.sort_by_key(|&size| std::cmp::Reverse(documents[size]));
    let halves = |&size: &usize| std::iter::repeat_n(size, documents[size] / 2);
    let first = sizes.iter().flat_map(halves);
    let odd = sizes.iter().copied().filter(|&size| documents[size] % 2 == 1);
    let second = sizes.iter().rev().flat_map(halves);
    first.chain(odd).chain(second).collect()
}

/// Ingests of one size's synthetic document, each into a fresh KB, measured together.
struct DocRun {
    documents: usize,
    mb: usize,
    wall: f64,
    cpu: Option<CpuTime>,
    peak_rss: u64,
    stats: crate::kb::Stats,
}

impl DocRun {
    fn megabytes(&self) -> f64 {
        (self.documents * self.mb.max(1)) as f64
    }

    /// Counts `next`, one more ingest of the same document, in this run: times add up, the
    /// peak is the larger, the stats are the last KB's.
    fn add(&mut self, next: DocRun) {
        self.documents += next.documents;
        self.wall += next.wall;
        self.cpu = self.cpu.zip(next.cpu).map(|(a, b)| CpuTime { user: a.user + b.user, kernel: a.kernel + b.kernel });
        self.peak_rss = self.peak_rss.max(next.peak_rss);
        self.stats = next.stats;
    }
}

/// The document is made anew each time (the generator is seeded), so that no round holds
/// another size's text.
fn ingest_one_document(settings: &Settings, mb: usize, names: NameGrowth, scratch: &Path) -> Result<DocRun> {
    let (mut kb, pipeline) = scratch_kb(settings.clone(), scratch, &Remote::new())?;
    let doc = source::SourceDoc {
        id: format!("synthetic-{mb}mb"),
        title: format!("Synthetic {mb} MB"),
        text: synthetic_document(mb * 1_000_000, 17, names),
        source: "bench".into(),
        links: Vec::new(),
    };
    release_freed_memory();
    reset_peak_rss();
    let t = Instant::now();
    let cpu = process_cpu();
    let mut report = ingest::IngestReport::default();
    ingest::ingest_docs(&mut kb, &pipeline, vec![doc], &mut (), &mut report)?;
    kb.flush()?;
    let wall = t.elapsed().as_secs_f64();
    let cpu = process_cpu().zip(cpu).map(|(after, before)| after.since(before));
    if let Some(e) = report.errors.first() {
        return Err(crate::Error::Invalid(format!("the {mb} MB document failed: {e}")));
    }
    Ok(DocRun { documents: 1, mb, wall, cpu, peak_rss: peak_rss_bytes(), stats: kb.stats() })
}

/// CPU seconds of this process (all threads), in user space and in the kernel: a large
/// write's kernel share is mostly page faults on fresh memory (zeroing it, reclaiming the
/// page cache for it), so it shows where memory rather than computation grows.
#[derive(Debug, Clone, Copy)]
struct CpuTime {
    user: f64,
    kernel: f64,
}

impl CpuTime {
    fn total(self) -> f64 {
        self.user + self.kernel
    }

    fn since(self, before: CpuTime) -> CpuTime {
        CpuTime { user: self.user - before.user, kernel: self.kernel - before.kernel }
    }
}

/// [`CpuTime`] of this process so far; `None` where the platform does not say.
fn process_cpu() -> Option<CpuTime> {
    #[cfg(unix)]
    {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage only writes a `rusage` through the pointer, which points at one.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: the call succeeded, so the struct is initialised (it was zeroed anyway).
        let usage = unsafe { usage.assume_init() };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some(CpuTime { user: seconds(usage.ru_utime), kernel: seconds(usage.ru_stime) })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// User plus kernel CPU seconds of this process so far (all threads); `None` where the
/// platform does not say.
fn process_cpu_seconds() -> Option<f64> {
    process_cpu().map(CpuTime::total)
}

/// The peak resident set of this process so far (VmHWM), 0 where the platform does not say.
fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// Returns to the system the memory the allocator holds freed (mimalloc, the binary's), so
/// that a document measured after a larger one neither counts that memory in its peak nor
/// reuses it instead of faulting its own: each document starts from the same state.
fn release_freed_memory() {
    // SAFETY: mi_collect takes no pointers; it only frees what mimalloc holds unused, and
    // is a no-op where another allocator serves the process.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Starts the peak resident set ([`peak_rss_bytes`]) again from what is resident now, where
/// the platform allows it (Linux), so that each of several measurements in one process has
/// its own peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The figure of this process's `/proc/self/status` line `field` (in kB there), in bytes; 0
/// where the platform does not say.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// How fast the distinct names of a `synthetic_document` grow with its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NameGrowth {
    /// A fixed cast of people and organisations, with a new place every ~20 sentences, as
    /// in a long report.
    Gradual,
    /// About one new person, organisation or place per sentence, each sharing a word with
    /// thousands of others (a first name, "Institute"), as in a register or a directory:
    /// the case where finding alias candidates must not scan everything named alike.
    Linear,
}

/// About `bytes` of English-like text whose entity vocabulary grows with its length as
/// `names` says, seeded.
pub fn synthetic_document(bytes: usize, seed: u64, names: NameGrowth) -> String {
    const FIRST: &[&str] = &[
        "Anna", "Boris", "Clara", "David", "Elena", "Farid", "Grace", "Hugo", "Irene", "Jonas", "Kira", "Lars", "Maya",
        "Nils", "Olga", "Pavel",
    ];
    const LAST: &[&str] = &[
        "Berg", "Costa", "Dahl", "Engel", "Fischer", "Gomez", "Holm", "Ivanova", "Jensen", "Keller", "Lind", "Moreau",
        "Novak", "Olsen", "Petrov", "Quist",
    ];
    const ORGS: &[&str] = &["Institute", "Company", "University", "Museum", "Railway", "Orchestra", "Bank", "Society"];
    const VERBS: &[&str] =
        &["founded", "joined", "visited", "directed", "studied at", "moved to", "wrote about", "married in"];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut text = String::with_capacity(bytes + 256);
    // Distinct names so far of each kind; a sentence names a new one or one already met.
    let (mut people, mut orgs, mut places) = (1u64, 1u64, 1u64);
    let pick = |count: &mut u64, new_one_in: u32, rng: &mut rand_chacha::ChaCha8Rng| {
        if rng.random_range(0..new_one_in) == 0 {
            *count += 1;
        }
        rng.random_range(0..*count)
    };
    while text.len() < bytes {
        let (person, org, place) = match names {
            NameGrowth::Gradual => {
                let place = pick(&mut places, 20, &mut rng);
                let person =
                    format!("{} {}", FIRST[rng.random_range(0..FIRST.len())], LAST[rng.random_range(0..LAST.len())]);
                let org =
                    format!("{} {}", scale::syllables(rng.random_range(0..200)), ORGS[rng.random_range(0..ORGS.len())]);
                (person, org, scale::syllables(1000 + place))
            }
            NameGrowth::Linear => {
                let person = pick(&mut people, 3, &mut rng);
                let org = pick(&mut orgs, 3, &mut rng);
                let place = pick(&mut places, 3, &mut rng);
                // Ids mixed so consecutive names differ in their first letters, as real ones do.
                let mixed = |n: u64, salt: u64| {
                    scale::syllables(1_000 + (n.wrapping_mul(2_654_435_761) ^ salt) % 1_000_000_007)
                };
                (
                    format!("{} {}", FIRST[(person % FIRST.len() as u64) as usize], mixed(person, 1)),
                    format!("{} {}", mixed(org, 2), ORGS[(org % ORGS.len() as u64) as usize]),
                    mixed(place, 3),
                )
            }
        };
        let verb = VERBS[rng.random_range(0..VERBS.len())];
        let year = rng.random_range(1800..2020);
        text.push_str(&format!("{person} {verb} the {org} in {place} in {year}. "));
        if rng.random_range(0..8) == 0 {
            text.push_str("\n\n");
        }
    }
    text
}

/// The same corpus in sled and in the PostgreSQL database `postgres` (which must hold no
/// documents): ingest passages/s, KB open time and retrieval p50, with PostgreSQL's ratios to
/// sled (target: query p50 within 1.2x, since both answer from memory).
pub fn store(settings: Settings, dataset_dir: &Path, postgres: &str, scratch: &Path) -> Result<String> {
    let dataset = Dataset::load(dataset_dir)?;
    let mut on_postgres = settings.clone();
    on_postgres.store.backend = crate::config::StoreBackend::Postgres;
    on_postgres.store.url = postgres.to_string();
    let mut rows = Vec::new();
    let mut embedder_id = String::new();
    for (name, settings) in [("sled", settings), ("postgres", on_postgres)] {
        let docs = source::read_file(&dataset.corpus, settings.ingest.max_file_bytes).docs;
        let n = docs.len();
        let (mut kb, pipeline) = scratch_kb(settings.clone(), &scratch.join(name), &Remote::new())?;
        if kb.stats().documents > 0 {
            return Err(crate::Error::Invalid(format!(
                "the {name} store already holds documents: give it an empty database"
            )));
        }
        let t = Instant::now();
        ingest::ingest_docs(&mut kb, &pipeline, docs, &mut (), &mut ingest::IngestReport::default())?;
        kb.flush()?;
        let rate = n as f64 / t.elapsed().as_secs_f64();
        let (embedder, location) = (kb.embedder().clone(), kb.store().location().clone());
        embedder_id = embedder.id();
        drop(kb);
        let t = Instant::now();
        let kb = crate::kb::Kb::open_at(std::sync::Arc::new(settings), embedder, &location)?;
        let open_ms = t.elapsed().as_secs_f64() * 1000.0;
        let mut times = Vec::new();
        for round in 0..2 {
            for q in &dataset.questions {
                let t = Instant::now();
                Retriever::new(&kb).retrieve(
                    &q.question,
                    RetrieveOptions { strategy: Strategy::Adaptive, min_stage: Stage::Local, top_k: 10 },
                )?;
                // The first round warms up (the PPR snapshot), as a running daemon would be.
                if round == 1 {
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
        }
        rows.push((name, rate, open_ms, percentile(&times, 0.5)));
    }
    let (sled, pg) = (rows[0], rows[1]);
    let lines: Vec<String> = rows
        .iter()
        .map(|(name, rate, open, p50)| {
            format!("  {name:<9} ingest {rate:>7.1} passages/s   open {open:>8.1} ms   retrieval p50 {p50:>6.2} ms")
        })
        .collect();
    Ok(format!(
        "store back ends on {} ({} questions, embedder {}):\n{}\n  postgres/sled: ingest rate {:.2}x, open time {:.2}x, retrieval p50 {:.2}x (target <= 1.2x)",
        dataset.name,
        dataset.questions.len(),
        embedder_id,
        lines.join("\n"),
        pg.1 / sled.1.max(1e-9),
        pg.2 / sled.2.max(1e-9),
        pg.3 / sled.3.max(1e-9)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round ingests about the largest size's megabytes of every size, and a row's figures
    /// are per MB over all its documents.
    #[test]
    fn every_size_covers_the_largest_ones_megabytes() {
        assert_eq!(documents_per_round(&[1, 4, 16]), vec![16, 4, 1]);
        assert_eq!(documents_per_round(&[3, 8]), vec![3, 1]);
        assert_eq!(documents_per_round(&[5]), vec![1]);
        let run = |wall: f64, user: f64| DocRun {
            documents: 1,
            mb: 2,
            wall,
            cpu: Some(CpuTime { user, kernel: 0.5 }),
            peak_rss: (wall * 1e9) as u64,
            stats: crate::kb::Stats::default(),
        };
        let mut two = run(3.0, 2.0);
        two.add(run(1.0, 4.0));
        assert_eq!(two.megabytes(), 4.0);
        assert_eq!(two.wall, 4.0);
        let cpu = two.cpu.expect("both measured");
        assert_eq!((cpu.total() / two.megabytes(), cpu.kernel), (1.75, 1.0));
        assert_eq!(two.peak_rss, 3_000_000_000, "the larger peak");
    }

    /// Every size's documents are split around the middle of a round, each size as often
    /// as a round ingests it.
    #[test]
    fn a_round_reads_the_same_both_ways() {
        assert_eq!(round_order(&[4, 1]), vec![0, 0, 1, 0, 0]);
        assert_eq!(round_order(&[4, 2, 1]), vec![0, 0, 1, 2, 1, 0, 0]);
        assert_eq!(round_order(&[1]), vec![0]);
        // Sizes given out of order (`--megabytes 8,4,16`) still put the smallest outermost.
        assert_eq!(round_order(&[2, 4, 1]), vec![1, 1, 0, 2, 0, 1, 1]);
        let order = round_order(&[16, 4, 1]);
        assert_eq!(order.iter().rev().copied().collect::<Vec<_>>(), order);
        assert_eq!([0, 1, 2].map(|size| order.iter().filter(|&&s| s == size).count()), [16, 4, 1]);
        // Two odd counts cannot both sit in the middle; each size is still ingested as often.
        assert_eq!(round_order(&[3, 1]), vec![0, 0, 1, 0]);
    }

    /// Each large-document row reports its own peak: memory touched and freed before a reset
    /// no longer counts after it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_reset_peak_forgets_memory_freed_before_it() {
        const TOUCHED: usize = 512 << 20;
        let before = peak_rss_bytes();
        let block = vec![1u8; TOUCHED];
        assert_eq!(block.iter().step_by(4096).map(|b| *b as usize).sum::<usize>(), TOUCHED / 4096);
        let with_block = peak_rss_bytes();
        assert!(with_block >= before.max(TOUCHED as u64), "{with_block} after touching {TOUCHED} bytes");
        drop(block);
        reset_peak_rss();
        let after = peak_rss_bytes();
        assert!(after + (TOUCHED as u64) / 2 <= with_block, "reset: {after}, with the block: {with_block}");
    }

    /// Computation counts as user time; faulting in fresh memory (what a large write's
    /// growth costs) counts as the kernel's.
    #[cfg(target_os = "linux")]
    #[test]
    fn cpu_time_counts_the_kernel_apart() {
        let before = process_cpu().expect("this platform reports CPU time");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let computed = process_cpu().expect("CPU time").since(before);
        assert!(computed.user > 0.0, "{computed:?}");
        let before = process_cpu().expect("CPU time");
        for _ in 0..4 {
            let fresh = vec![1u8; 256 << 20];
            assert_eq!(
                std::hint::black_box(&fresh).iter().step_by(4096).filter(|b| **b == 1).count(),
                (256 << 20) / 4096
            );
        }
        let faulted = process_cpu().expect("CPU time").since(before);
        assert!(faulted.kernel > 0.0, "1 GB of fresh pages took no kernel time: {faulted:?}");
    }
}
