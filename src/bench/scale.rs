//! `a2rag bench scale`: what a knowledge base costs as it grows. A seeded synthetic
//! encyclopaedia (titled pages of about 70 words naming one another, and two-hop questions
//! over them) is ingested at each size into a fresh KB; then a fresh process opens it and
//! answers the questions. Per size: ingest passages/s, open seconds, peak RSS while serving,
//! bytes on disk, retrieval p50/p95 for a2rag and for hybrid text retrieval on the same KB
//! (the baseline), recall; and the log-log slope of each figure over the sizes.
//!
//! Each phase runs in a child process (`bench scale-step`), so that peak RSS and open time
//! are those of one process serving one KB, as a daemon after a restart would be.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::Settings;
use crate::error::{Error, Result};
use crate::eval::metrics::{mean, percentile, recall_at};
use crate::eval::scratch_kb;
use crate::ingest::{self, source::SourceDoc};
use crate::kb::Kb;
use crate::net::Remote;
use crate::retrieve::{RetrieveOptions, Retriever, Stage, Strategy};

/// Pages generated and ingested at a time, so that a million pages never sit in memory.
const INGEST_BATCH: usize = 20_000;
/// Seed of the generator: the same size gives the same corpus and questions in every run.
const SEED: u64 = 20_261_125;

/// One two-hop question over the synthetic pages, with the titles of its gold pages.
pub struct SyntheticQuestion {
    pub question: String,
    pub gold: Vec<String>,
}

/// The kinds of page; page `i` is of kind `i % 3`, so each kind is a third of the corpus.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Organisation,
    Person,
    Place,
}

impl Kind {
    fn of(page: usize) -> Kind {
        match page % 3 {
            0 => Kind::Organisation,
            1 => Kind::Person,
            _ => Kind::Place,
        }
    }
}

/// The synthetic encyclopaedia of `pages` pages: names, links and text are functions of the
/// page number and [`SEED`], so any page can be generated alone.
pub struct Encyclopedia {
    pages: usize,
}

impl Encyclopedia {
    pub fn new(pages: usize) -> Result<Encyclopedia> {
        if pages < 30 {
            return Err(Error::Invalid(format!("a synthetic corpus needs at least 30 pages, not {pages}")));
        }
        Ok(Encyclopedia { pages })
    }

    /// The title of page `i`: a two-word name unique to it ("Kavalome Dusipe"). Both words
    /// are three syllables drawn by a permutation, so names sharing a first word differ all
    /// through the second, as real names do, and the alias matcher keeps them apart.
    pub fn title(&self, i: usize) -> String {
        // FIRSTS is prime, so `* 7919 % FIRSTS` permutes the first words; for a fixed first
        // word the second is an injective function of `i / FIRSTS` (7 is prime to SECONDS).
        const FIRSTS: u64 = 49_999;
        const SECONDS: u64 = 300_000;
        const THREE_SYLLABLES: u64 = 70 * 70;
        let (a, b) = (i as u64 % FIRSTS, i as u64 / FIRSTS);
        let first = THREE_SYLLABLES + a * 7919 % FIRSTS;
        let second = THREE_SYLLABLES + (b * 7 + a * 7919) % SECONDS;
        format!("{} {}", syllables(first), syllables(second))
    }

    /// A page of `kind` linked from page `from` by its `slot`-th link: a function of both.
    fn link(&self, from: usize, slot: u64, kind: Kind) -> usize {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SEED ^ (from as u64).wrapping_mul(0x9E37_79B9) ^ slot);
        let offset = kind as usize;
        let per_kind = (self.pages - offset).div_ceil(3);
        let j = offset + 3 * rng.random_range(0..per_kind);
        if j == from { (j + 3) % self.pages } else { j }
    }

    fn year(&self, i: usize, salt: u64) -> u32 {
        1700 + ((i as u64).wrapping_mul(2_654_435_761).wrapping_add(salt) % 320) as u32
    }

    /// Page `i`: about 70 words stating its kind's facts, each naming another page.
    pub fn page(&self, i: usize) -> SourceDoc {
        const NOUNS: &[&str] = &[
            "archives",
            "bridges",
            "festivals",
            "gardens",
            "harbours",
            "libraries",
            "mills",
            "orchards",
            "railways",
            "schools",
            "theatres",
            "vineyards",
        ];
        let title = self.title(i);
        let name = |j: usize| self.title(j);
        let noun = |salt: usize| NOUNS[(i * 7 + salt * 5) % NOUNS.len()];
        let text = match Kind::of(i) {
            Kind::Organisation => format!(
                "{title} is an organisation based in {place}. It was founded by {founder} in {year}. {title} is known \
                 for its work on {a} and {b}, and it works closely with {partner}. Critics often compare {title} with \
                 {rival}, which has its offices near {place}. The organisation has about {members} members and \
                 publishes a yearly report on {c}.",
                place = name(self.link(i, 0, Kind::Place)),
                founder = name(self.link(i, 1, Kind::Person)),
                year = self.year(i, 1),
                a = noun(1),
                b = noun(2),
                partner = name(self.link(i, 2, Kind::Organisation)),
                rival = name(self.link(i, 3, Kind::Organisation)),
                members = 20 + i % 900,
                c = noun(3),
            ),
            Kind::Person => format!(
                "{title} is a writer and engineer who was born in {place} in {year}. She studied at {school} and later \
                 taught there for many years. {title} wrote several books about {a} and the history of {b}. Her \
                 closest colleague was {colleague}, with whom she travelled to {trip}. In her later life she \
                 returned to {place} and advised the local council on {c}.",
                place = name(self.link(i, 0, Kind::Place)),
                year = self.year(i, 2),
                school = name(self.link(i, 1, Kind::Organisation)),
                a = noun(1),
                b = noun(2),
                colleague = name(self.link(i, 2, Kind::Person)),
                trip = name(self.link(i, 3, Kind::Place)),
                c = noun(3),
            ),
            Kind::Place => format!(
                "{title} is a town in the region of {region}. It lies on a river about {km} kilometres from \
                 {neighbour}. {title} was first recorded in {year}, and it is known for its {a} and its old {b}. \
                 The town is twinned with {twin}. Its largest employer is {employer}, and most of its \
                 inhabitants work in farming, trade or the making of {c}.",
                region = name(self.link(i, 0, Kind::Place)),
                km = 3 + i % 60,
                neighbour = name(self.link(i, 1, Kind::Place)),
                year = self.year(i, 3),
                a = noun(1),
                b = noun(2),
                twin = name(self.link(i, 2, Kind::Place)),
                employer = name(self.link(i, 3, Kind::Organisation)),
                c = noun(3),
            ),
        };
        SourceDoc { id: title.clone(), title, text, source: "synthetic".into(), links: Vec::new() }
    }

    /// `count` two-hop questions, each over an organisation page and its founder's page:
    /// "Where was the founder of X born?" needs both.
    pub fn questions(&self, count: usize) -> Vec<SyntheticQuestion> {
        let organisations = self.pages.div_ceil(3);
        let step = (organisations / count.max(1)).max(1);
        (0..organisations)
            .step_by(step)
            .take(count)
            .map(|k| {
                let org = 3 * k;
                let founder = self.link(org, 1, Kind::Person);
                SyntheticQuestion {
                    question: format!("Where was the founder of {} born?", self.title(org)),
                    gold: vec![self.title(org), self.title(founder)],
                }
            })
            .collect()
    }
}

/// A pronounceable capitalised word for `n` ("Kava", "Lomesu", ...), distinct per `n`.
pub fn syllables(mut n: u64) -> String {
    const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
    const VOWELS: &[u8] = b"aeiou";
    let mut name = String::new();
    loop {
        let s = (n % 70) as usize;
        name.push(CONSONANTS[s % 14] as char);
        name.push(VOWELS[s / 14] as char);
        n /= 70;
        if n == 0 {
            break;
        }
    }
    crate::text::capitalise(&name)
}

/// What `bench scale` was asked for.
pub struct ScaleOptions {
    pub sizes: Vec<usize>,
    pub questions: usize,
    /// Where the KBs are built; each size's is removed after its row unless `keep`.
    pub scratch: PathBuf,
    pub keep: bool,
    /// The `--config` file the child processes are given (environment overrides are
    /// inherited).
    pub config: Option<PathBuf>,
    /// A datasets directory (`musique/`, `hotpotqa/`, `distractors/`) whose real corpora go
    /// into every size's KB beside the synthetic pages, and whose MuSiQue questions are the
    /// ones asked: recall at scale on questions with real answers, not only cost.
    pub dev: Option<PathBuf>,
}

/// The real corpora `--dev` puts inside the synthetic one, and the questions asked there.
struct DevCorpora {
    /// MuSiQue (with its OpenIE triples) and HotpotQA, as `a2rag eval` reads them.
    datasets: Vec<crate::eval::dataset::Dataset>,
    triples: PathBuf,
    /// Real Wikipedia paragraphs with no questions.
    distractors: Vec<PathBuf>,
}

impl DevCorpora {
    fn load(dir: &Path) -> Result<DevCorpora> {
        let datasets = ["musique", "hotpotqa"]
            .iter()
            .map(|name| crate::eval::dataset::Dataset::load(&dir.join(name)))
            .collect::<Result<Vec<_>>>()?;
        let folder = dir.join("distractors");
        let mut distractors: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map_err(|e| Error::io(&folder, e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        distractors.sort();
        Ok(DevCorpora { datasets, triples: dir.join("musique/openie_triples.json"), distractors })
    }

    /// The MuSiQue dev questions, as synthetic ones are asked.
    fn questions(&self) -> Vec<SyntheticQuestion> {
        self.datasets[0]
            .questions
            .iter()
            .map(|q| SyntheticQuestion { question: q.question.clone(), gold: q.gold.clone() })
            .collect()
    }
}

/// What the ingest step reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct IngestFigures {
    pub passages: usize,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
}

/// What the serve step reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct ServeFigures {
    pub open_seconds: f64,
    pub first_query_ms: f64,
    pub a2rag_p50_ms: f64,
    pub a2rag_p95_ms: f64,
    pub hybrid_p50_ms: f64,
    pub hybrid_p95_ms: f64,
    pub a2rag_recall_at_5: f64,
    pub hybrid_recall_at_5: f64,
    /// Mean milliseconds per question by stage of a2rag's retrieval.
    pub a2rag_phases: String,
    pub peak_rss_bytes: u64,
    /// Anonymous memory (heap) resident at the end: the part of the peak the kernel cannot
    /// drop, where the rest is clean pages of the mapped index files, which it can.
    #[serde(default)]
    pub anon_rss_bytes: u64,
}

/// One size's figures.
struct Row {
    size: usize,
    ingest: IngestFigures,
    disk: u64,
    serve: ServeFigures,
}

/// Which step a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScaleStep {
    Ingest,
    Serve,
}

/// Runs every size (each step in a child process) and returns the table with its slopes.
pub fn run(options: &ScaleOptions) -> Result<String> {
    if options.sizes.is_empty() || options.questions == 0 {
        return Err(Error::Invalid("bench scale needs at least one size and one question".into()));
    }
    if let Some(dev) = &options.dev {
        DevCorpora::load(dev)?;
    }
    for &size in &options.sizes {
        Encyclopedia::new(size)?;
    }
    let mut rows = Vec::new();
    for &size in &options.sizes {
        let dir = options.scratch.join(format!("scale-{size}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        let ingest: IngestFigures = child(options, ScaleStep::Ingest, size, &dir)?;
        let disk = disk_bytes(&dir)?;
        // Said at once: a long ingest's figures outlive a serve step that fails.
        eprintln!(
            "bench scale: {size} passages: ingest {:.0}/s ({:.1} s, {:.1} CPU s, peak RSS {:.2} GB), disk {:.2} GB",
            ingest.passages as f64 / ingest.seconds.max(1e-9),
            ingest.seconds,
            ingest.cpu_seconds,
            ingest.peak_rss_bytes as f64 / 1e9,
            disk as f64 / 1e9
        );
        let serve: ServeFigures = child(options, ScaleStep::Serve, size, &dir)?;
        eprintln!(
            "bench scale: {size} passages: open {:.2} s, a2rag p50 {:.1} ms (mean ms by phase: {})",
            serve.open_seconds, serve.a2rag_p50_ms, serve.a2rag_phases
        );
        if !options.keep {
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        rows.push(Row { size, ingest, disk, serve });
    }
    Ok(table(&rows, options.questions, options.dev.is_some()))
}

/// Runs one step in a child process of this binary and reads its one-line JSON report.
fn child<T: serde::de::DeserializeOwned>(
    options: &ScaleOptions,
    step: ScaleStep,
    size: usize,
    dir: &Path,
) -> Result<T> {
    // Linux runs the binary this process runs even after a rebuild replaced its file, which a
    // run of an hour or more may well see; elsewhere, the file at its path.
    let proc_exe = Path::new("/proc/self/exe");
    let exe = if proc_exe.exists() {
        proc_exe.to_path_buf()
    } else {
        std::env::current_exe().map_err(|e| Error::io("the a2rag executable", e))?
    };
    let mut command = Command::new(exe);
    if let Some(config) = &options.config {
        command.arg("--config").arg(config);
    }
    let step_name = match step {
        ScaleStep::Ingest => "ingest",
        ScaleStep::Serve => "serve",
    };
    command
        .args(["bench", "scale-step", step_name, "--size", &size.to_string(), "--questions"])
        .arg(options.questions.to_string())
        .arg("--dir")
        .arg(dir)
        .stderr(std::process::Stdio::inherit());
    if let Some(dev) = &options.dev {
        command.arg("--dev").arg(dev);
    }
    let output = command.output().map_err(|e| Error::io("the a2rag executable", e))?;
    if !output.status.success() {
        return Err(Error::Internal(format!("the {step_name} step at {size} passages failed ({})", output.status)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|e| Error::Internal(format!("the {step_name} step at {size} passages reported `{line}`: {e}")))
}

/// The ingest step: generates the corpus of `size` pages and ingests it into a fresh KB in
/// `dir`; one JSON line on stdout.
pub fn ingest_step(settings: Settings, size: usize, dir: &Path, dev: Option<&Path>) -> Result<String> {
    let corpus = Encyclopedia::new(size)?;
    let (mut kb, mut pipeline) = scratch_kb(settings, dir, &Remote::new())?;
    let (started, cpu) = (Instant::now(), super::process_cpu_seconds());
    let mut real = 0;
    if let Some(dev) = dev.map(DevCorpora::load).transpose()? {
        pipeline.triples = Some(crate::ingest::triples::TripleImport::load(&dev.triples)?);
        for dataset in &dev.datasets {
            crate::eval::ingest_corpus(&mut kb, &pipeline, dataset, &mut ())?;
        }
        let report = ingest::ingest_paths(&mut kb, &pipeline, &dev.distractors, &mut ())?;
        if let Some(e) = report.errors.first() {
            return Err(Error::Internal(format!("a distractor failed to ingest: {e}")));
        }
        pipeline.triples = None;
        real = kb.stats().documents;
    }
    let mut report = ingest::IngestReport::default();
    let mut next = 0;
    while next < size {
        let end = (next + INGEST_BATCH).min(size);
        let docs: Vec<SourceDoc> = (next..end).map(|i| corpus.page(i)).collect();
        ingest::ingest_docs(&mut kb, &pipeline, docs, &mut (), &mut report)?;
        if let Some(e) = report.errors.first() {
            return Err(Error::Internal(format!("a synthetic page failed to ingest: {e}")));
        }
        next = end;
    }
    // As `a2rag ingest` ends (`ingest::ingest_paths`).
    kb.save_with_snapshot();
    kb.flush()?;
    let figures = IngestFigures {
        passages: size + real,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: super::process_cpu_seconds().zip(cpu).map_or(0.0, |(after, before)| after - before),
        peak_rss_bytes: super::peak_rss_bytes(),
    };
    serde_json::to_string(&figures).map_err(|e| Error::Internal(e.to_string()))
}

/// The serve step: opens the KB in `dir` as a restarted daemon would, then times the
/// questions with a2rag and with hybrid text retrieval; one JSON line on stdout.
pub fn serve_step(settings: Settings, size: usize, questions: usize, dir: &Path, dev: Option<&Path>) -> Result<String> {
    let questions = match dev {
        Some(dev) => DevCorpora::load(dev)?.questions().into_iter().take(questions).collect(),
        None => Encyclopedia::new(size)?.questions(questions),
    };
    let started = Instant::now();
    let mut settings = settings;
    settings.data_dir = dir.to_path_buf();
    let settings = Arc::new(settings);
    let embedder = crate::embed::from_settings(&settings.embed, &Remote::new())?;
    let kb = Kb::open(settings, embedder)?;
    let open_seconds = started.elapsed().as_secs_f64();
    let options = |strategy| RetrieveOptions { strategy, min_stage: Stage::Local, top_k: 10 };
    let first = Instant::now();
    Retriever::new(&kb).retrieve(&questions[0].question, options(Strategy::Adaptive))?;
    let first_query_ms = first.elapsed().as_secs_f64() * 1000.0;
    let mut phases = std::collections::BTreeMap::new();
    let mut time = |strategy| -> Result<(Vec<f64>, Vec<f64>)> {
        let (mut ms, mut recall) = (Vec::new(), Vec::new());
        for q in &questions {
            let t = Instant::now();
            let r = Retriever::new(&kb).retrieve(&q.question, options(strategy))?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if strategy == Strategy::Adaptive {
                super::add_phases(&r, &mut phases);
            }
            let ranked = crate::eval::ranked_docs(&r.chunks);
            let at_5 = recall_at(&ranked, &q.gold, 5);
            // Which questions lose their gold passages as the KB grows (`RUST_LOG=debug`).
            tracing::debug!(?strategy, question = q.question, recall = at_5, gold = ?q.gold, top = ?&ranked[..ranked.len().min(5)], "scale question");
            recall.push(at_5);
        }
        Ok((ms, recall))
    };
    let (a2rag, a2rag_recall) = time(Strategy::Adaptive)?;
    let (hybrid, hybrid_recall) = time(Strategy::Text(crate::kb::SearchMode::Hybrid))?;
    let figures = ServeFigures {
        open_seconds,
        first_query_ms,
        a2rag_p50_ms: percentile(&a2rag, 0.5),
        a2rag_p95_ms: percentile(&a2rag, 0.95),
        hybrid_p50_ms: percentile(&hybrid, 0.5),
        hybrid_p95_ms: percentile(&hybrid, 0.95),
        a2rag_recall_at_5: mean(&a2rag_recall),
        hybrid_recall_at_5: mean(&hybrid_recall),
        a2rag_phases: super::mean_phases(&phases, questions.len()),
        peak_rss_bytes: super::peak_rss_bytes(),
        anon_rss_bytes: super::status_bytes("RssAnon:"),
    };
    serde_json::to_string(&figures).map_err(|e| Error::Internal(e.to_string()))
}

fn table(rows: &[Row], questions: usize, dev: bool) -> String {
    let gb = |b: u64| b as f64 / 1e9;
    let what = if dev {
        format!(
            "MuSiQue, HotpotQA and the distractor paragraphs inside a synthetic encyclopaedia of the size given, \
             the first {questions} MuSiQue dev questions"
        )
    } else {
        format!(
            "synthetic encyclopaedia (~70-word titled pages naming each other), {questions} two-hop questions per size"
        )
    };
    let mut out = format!(
        "scale: {what}; each step in its own process\n\
         | passages | ingest passages/s | ingest CPU s | open s | first query ms | peak RSS serving GB (anon at end) | disk GB | a2rag p50 / p95 ms | hybrid p50 / p95 ms | a2rag/hybrid p50 | R@5 a2rag / hybrid |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for Row { ingest, disk, serve, .. } in rows {
        let size = ingest.passages;
        out.push_str(&format!(
            "| {size} | {:.0} | {:.1} | {:.2} | {:.1} | {:.2} ({:.2}) | {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1}x | {:.3} / {:.3} |\n",
            ingest.passages as f64 / ingest.seconds.max(1e-9),
            ingest.cpu_seconds,
            serve.open_seconds,
            serve.first_query_ms,
            gb(serve.peak_rss_bytes),
            gb(serve.anon_rss_bytes),
            gb(*disk),
            serve.a2rag_p50_ms,
            serve.a2rag_p95_ms,
            serve.hybrid_p50_ms,
            serve.hybrid_p95_ms,
            serve.a2rag_p50_ms / serve.hybrid_p50_ms.max(1e-9),
            serve.a2rag_recall_at_5,
            serve.hybrid_recall_at_5,
        ));
    }
    if rows.len() >= 2 {
        let sizes: Vec<f64> = rows.iter().map(|r| r.size as f64).collect();
        let slope = |figure: &dyn Fn(&Row) -> f64| {
            let values: Vec<f64> = rows.iter().map(figure).collect();
            log_log_slope(&sizes, &values).map_or_else(|| "-".to_string(), |s| format!("{s:.2}"))
        };
        out.push_str(&format!(
            "log-log slope against passages (1 = linear, 0 = flat): ingest time {}, open {}, peak RSS {}, disk {}, \
             a2rag p50 {}, hybrid p50 {}\n",
            slope(&|r| r.ingest.seconds),
            slope(&|r| r.serve.open_seconds),
            slope(&|r| r.serve.peak_rss_bytes as f64),
            slope(&|r| r.disk as f64),
            slope(&|r| r.serve.a2rag_p50_ms),
            slope(&|r| r.serve.hybrid_p50_ms),
        ));
    }
    out
}

/// Least-squares slope of `ln y` against `ln x`; `None` without two usable points.
pub fn log_log_slope(x: &[f64], y: &[f64]) -> Option<f64> {
    let points: Vec<(f64, f64)> =
        x.iter().zip(y).filter(|(a, b)| **a > 0.0 && **b > 0.0).map(|(a, b)| (a.ln(), b.ln())).collect();
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Bytes the files under `dir` occupy on disk (allocated blocks, so sparse files count as
/// what they use).
fn disk_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).map_err(|e| Error::io(&next, e))? {
            let entry = entry.map_err(|e| Error::io(&next, e))?;
            let meta = entry.metadata().map_err(|e| Error::io(entry.path(), e))?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    Ok(total)
}

/// A size such as `10k`, `100k`, `1m` or `2500`.
pub fn parse_size(text: &str) -> std::result::Result<usize, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, factor) = match lower.strip_suffix('k') {
        Some(d) => (d, 1_000),
        None => match lower.strip_suffix('m') {
            Some(d) => (d, 1_000_000),
            None => (lower.as_str(), 1),
        },
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{text}` is not a size such as 10k, 100k, 1m or 2500"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn pages_are_titled_uniquely_link_existing_pages_and_are_reproducible() {
        let corpus = Encyclopedia::new(3000).unwrap();
        let titles: HashSet<String> = (0..3000).map(|i| corpus.title(i)).collect();
        assert_eq!(titles.len(), 3000, "every page has its own title");
        let page = corpus.page(42);
        assert_eq!(page.text, corpus.page(42).text, "a page is a function of its number");
        let words = page.text.split_whitespace().count();
        assert!((55..=90).contains(&words), "pages are about 70 words, not {words}");
        let named = titles.iter().filter(|t| page.text.contains(t.as_str()) && **t != page.title).count();
        assert!(named >= 3, "a page names other pages: {}", page.text);
    }

    #[test]
    fn questions_name_their_first_gold_page_and_the_second_is_linked_from_it() {
        let corpus = Encyclopedia::new(900).unwrap();
        let questions = corpus.questions(50);
        assert_eq!(questions.len(), 50);
        for q in &questions {
            assert!(q.question.contains(&q.gold[0]));
            let organisation = (0..900).find(|i| corpus.title(*i) == q.gold[0]).unwrap();
            assert!(corpus.page(organisation).text.contains(&format!("founded by {}", q.gold[1])));
        }
        assert!(Encyclopedia::new(10).is_err());
    }

    #[test]
    fn sizes_read_with_suffixes_and_slopes_fit_powers() {
        assert_eq!(parse_size("10k"), Ok(10_000));
        assert_eq!(parse_size("1M"), Ok(1_000_000));
        assert_eq!(parse_size("2500"), Ok(2500));
        assert!(parse_size("0").is_err() && parse_size("ten").is_err() && parse_size("k").is_err());
        let x = [1e3, 1e4, 1e5];
        let linear: Vec<f64> = x.iter().map(|v| 3.0 * v).collect();
        let root: Vec<f64> = x.iter().map(|v: &f64| v.sqrt()).collect();
        assert!((log_log_slope(&x, &linear).unwrap() - 1.0).abs() < 1e-9);
        assert!((log_log_slope(&x, &root).unwrap() - 0.5).abs() < 1e-9);
        assert!(log_log_slope(&x[..1], &linear[..1]).is_none());
    }
}
