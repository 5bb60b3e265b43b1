//! The agentic retriever. Escalation is monotonic, Local -> Bridge -> Global, each stage at
//! most once per call, each adding to one candidate set. Local and bridge evidence is mapped
//! back to source chunks; the global stage ranks passages by PPR mass over the graph of
//! entities and passages ([`global`]), and what earlier stages found that the walk did not
//! reach stays after its ranking. The graph's ranking is fused with text retrieval
//! ([`fusion`]: dense + BM25, or BM25 alone with a lexical embedder), which also carries
//! queries where no seed aligns and no fact links; the text list's best passage leads the
//! final ranking and the page of an entity it names follows it ([`lead`]).
//!
//! After each stage a judge ([`sufficiency`]) sees that final ranking as it stands, the
//! evidence the reader would receive, and decides whether to go on. Work only the global
//! stage needs (fact linking, the wide dense search) is done when it runs, and under a
//! deadline no stage starts without its [`stage_reserve`] left.
//!
//! [`Retriever::retrieve`] judges with a synchronous [`SufficiencyCheck`]; a caller with an
//! async judge (the controller's LLM judge) drives a [`RetrievalRun`] stage by stage.

pub mod bridge;
pub mod facts;
pub mod fusion;
pub mod global;
pub mod lead;
pub mod local;
pub mod mapback;
pub mod ppr;
pub mod seeds;
pub mod sufficiency;
#[cfg(test)]
pub(crate) mod testing;

pub use seeds::embed_query;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use foldhash::HashSet;
use serde::{Deserialize, Serialize};

use crate::config::RetrieveSettings;
use crate::embed::EmbeddedQuery;
use crate::error::Result;
use crate::kb::model::{ChunkId, EdgeId, NodeId};
use crate::kb::vector::Search;
use crate::kb::{Kb, SearchMode};
use seeds::{EntitySeed, Seeds};
use sufficiency::{EvidenceCheck, Judgement, StageEvidence, SufficiencyCheck};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Local,
    Bridge,
    Global,
    /// No seed aligned and no fact linked (or none of them is in the graph): dense + BM25
    /// text retrieval only.
    Fallback,
}

impl Stage {
    /// The stage's wire name (as it serialises).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Local => "local",
            Stage::Bridge => "bridge",
            Stage::Global => "global",
            Stage::Fallback => "fallback",
        }
    }
}

/// How to retrieve. `Adaptive` is a2rag; the others are the baselines of `a2rag eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    Adaptive,
    /// LightRAG-style: 1-hop neighbourhood only, no escalation, no text fusion.
    LocalOnly,
    /// HippoRAG 2 recipe: the global stage every time (fact-linked, dense-seeded PPR over
    /// entities and passages), no escalation, no text fusion; dense retrieval when no fact
    /// or seed is in the graph.
    PprAlways,
    Text(SearchMode),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RetrieveOptions {
    pub strategy: Strategy,
    /// Start escalation no lower than this stage (a rewrite may force the global stage).
    pub min_stage: Stage,
    pub top_k: usize,
}

/// A retrieved chunk with its provenance: what the retriever ranks, the reader reads and a
/// query response shows as evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedChunk {
    pub chunk: ChunkId,
    pub doc_id: String,
    pub title: String,
    /// The headings the chunk sits under below the title, when it has any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub section: String,
    pub span: (usize, usize),
    pub score: f32,
    pub text: String,
}

impl RankedChunk {
    /// The title with the section path, as a reader sees where the chunk sits.
    pub fn heading(&self) -> String {
        if self.section.is_empty() { self.title.clone() } else { format!("{} › {}", self.title, self.section) }
    }

    /// Chunk `id` of `kb` with its document's provenance, scored `score`.
    pub fn of(kb: &Kb, id: ChunkId, score: f32) -> Option<RankedChunk> {
        let chunk = kb.chunk(id)?;
        let doc = kb.doc(chunk.doc)?;
        Some(RankedChunk {
            chunk: id,
            doc_id: doc.id.clone(),
            title: doc.title.clone(),
            section: chunk.section.clone(),
            span: chunk.span,
            score,
            text: chunk.text.to_string(),
        })
    }
}

/// One hop of a graph path, by name, for the trace and the reader.
#[derive(Debug, Clone, Serialize)]
pub struct PathHop {
    pub subject: String,
    pub relation: String,
    pub object: String,
    pub chunk: ChunkId,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    pub stage: Stage,
    pub micros: u64,
    pub edges: usize,
    pub nodes: usize,
    pub chunks: usize,
    pub judgement: Judgement,
}

#[derive(Debug, Clone, Serialize)]
pub struct Retrieval {
    /// A query response moves these out into its `evidence` and `paths`, so that no chunk
    /// text is sent twice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<RankedChunk>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<Vec<PathHop>>,
    /// The last stage run (`Fallback` when the graph contributed nothing).
    pub stage: Stage,
    pub sufficient: bool,
    pub seeds: Seeds,
    /// Share of the graph's ranking in the final fusion (see [`fusion`]); 0 without one.
    pub graph_share: f32,
    pub stages: Vec<StageReport>,
    /// The stage the budget left out, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<SkippedStage>,
    pub micros: u64,
}

/// A stage a retrieval did not run because its budget could not pay for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedStage {
    pub stage: Stage,
    pub reason: String,
}

impl Retrieval {
    /// This retrieval with a later attempt's evidence (a rewritten query's) added after it:
    /// the chunks this attempt found keep their order, the later attempt's new chunks follow
    /// (at most `top_k` of them). A rewrite then adds evidence for the reader without
    /// pushing down what the user's own question found: a rewrite is a guess at what is
    /// missing, the question is what was asked. The seeds stay the question's: they are what
    /// the reader and the checks read the question's names from, and a rewrite that adds the
    /// candidate answer's name to its query must not make the question name it (or stop
    /// naming "Malmö plant" because the rewrite's seeds only have "Malmö"). Stage and
    /// sufficiency are the later attempt's; paths and stage reports are kept from both.
    pub fn absorb(mut self, later: Retrieval, top_k: usize) -> Retrieval {
        let known: HashSet<ChunkId> = self.chunks.iter().map(|c| c.chunk).collect();
        self.chunks.extend(later.chunks.into_iter().filter(|c| !known.contains(&c.chunk)).take(top_k));
        self.paths.extend(later.paths);
        self.stages.extend(later.stages);
        Retrieval {
            chunks: self.chunks,
            paths: self.paths,
            stage: later.stage,
            sufficient: later.sufficient,
            seeds: self.seeds,
            graph_share: later.graph_share,
            stages: self.stages,
            skipped: later.skipped,
            micros: self.micros + later.micros,
        }
    }
}

/// How deep the graph's rankings go into the final fusion. The reader reads `top_k`, the
/// lead's hop and the sufficiency check read the head of the fused ranking, and a passage
/// this far down a graph ranking adds at most `1 / (rrf_k + 4096)` to a fused score; a walk
/// over a million passages reaches hundreds of thousands, whose full sort and fusion once
/// cost more than the walk. Deeper than a corpus of a few thousand passages reaches at all.
pub const RANKING_DEPTH: usize = 4096;

pub struct Retriever<'kb> {
    kb: &'kb Kb,
    settings: &'kb RetrieveSettings,
    check: Box<dyn SufficiencyCheck>,
}

/// The one candidate set the stages add to: local and bridge map their edges and nodes back
/// to chunks, the global stage ranks passages by PPR mass; nothing an earlier stage found
/// is dropped.
#[derive(Default)]
struct Candidates<'kb> {
    edges: Vec<(EdgeId, f32)>,
    chunk_scores: mapback::ChunkScores<'kb>,
    paths: Vec<Vec<PathHop>>,
    /// The global stage's walk, once it has run.
    global: Option<global::Walk>,
}

impl Candidates<'_> {
    /// The head of the graph's ranking of passages so far, best first: the head of the
    /// walk's ranking once the global stage ran, then the head of what earlier stages found
    /// that it does not hold. The rest, below, is [`lead::RankedBelow`]'s.
    fn ranked(&self) -> Vec<(ChunkId, f32)> {
        let found = self.chunk_scores.ranked().iter().copied();
        let Some(walk) = &self.global else { return found.collect() };
        let head: HashSet<ChunkId> = walk.head().iter().map(|(c, _)| *c).collect();
        let floor = walk.head().last().map_or(0.0, |(_, s)| *s);
        let mut ranking = walk.head().to_vec();
        ranking.extend(found.filter(|(c, _)| !head.contains(c)).map(|(c, _)| (c, floor)));
        ranking
    }

    /// Whether any stage found anything.
    fn is_empty(&self) -> bool {
        self.chunk_scores.is_empty() && self.global.as_ref().is_none_or(|walk| walk.head().is_empty())
    }
}

impl lead::RankedBelow for Candidates<'_> {
    /// Below its head, the graph ranks the rest of the walk by mass once the global stage
    /// ran, then what earlier stages found that the walk did not reach, by their scores: the
    /// order of the full fused ranking there, since a passage below both heads has a graph
    /// rank alone.
    fn ranked_below(&self, wanted: &HashSet<ChunkId>) -> Vec<ChunkId> {
        let by_score = |scored: Vec<(ChunkId, f32)>| {
            let all = scored.len();
            crate::rank::top_k(scored, all).into_iter().map(|(c, _)| c)
        };
        // Nothing wanted is in the head: the fused ranking holds all of it.
        let walked: Vec<(ChunkId, f32)> = self
            .global
            .iter()
            .flat_map(global::Walk::below_head)
            .filter(|(c, _)| wanted.contains(c))
            .copied()
            .collect();
        let reached: HashSet<ChunkId> = walked.iter().map(|(c, _)| *c).collect();
        let found: Vec<(ChunkId, f32)> = wanted
            .iter()
            .filter(|c| !reached.contains(c))
            .filter_map(|c| self.chunk_scores.get(*c).map(|s| (*c, s)))
            .collect();
        by_score(walked).chain(by_score(found)).collect()
    }
}

impl<'kb> Retriever<'kb> {
    /// A retriever with the KB's own settings and the embedded sufficiency check.
    pub fn new(kb: &'kb Kb) -> Self {
        Retriever::with_settings(kb, &kb.settings().retrieve)
    }

    /// A retriever with other settings (a named policy), embedded sufficiency check.
    pub fn with_settings(kb: &'kb Kb, settings: &'kb RetrieveSettings) -> Self {
        let check = Box::new(EvidenceCheck { threshold: settings.sufficiency_threshold });
        Retriever { kb, settings, check }
    }

    pub fn with_check(mut self, check: Box<dyn SufficiencyCheck>) -> Self {
        self.check = check;
        self
    }

    pub fn kb(&self) -> &'kb Kb {
        self.kb
    }

    /// The synchronous check [`Retriever::retrieve`] judges stages with.
    pub fn check(&self) -> &dyn SufficiencyCheck {
        self.check.as_ref()
    }

    /// Embeds `query` once and retrieves for it (see [`Retriever::retrieve_embedded`]).
    pub fn retrieve(&self, query: &str, options: RetrieveOptions) -> Result<Retrieval> {
        let query = embed_query(self.kb, query)?;
        self.retrieve_embedded(&query, options)
    }

    /// Retrieves with the synchronous check judging after each stage.
    pub fn retrieve_embedded(&self, query: &EmbeddedQuery, options: RetrieveOptions) -> Result<Retrieval> {
        self.retrieve_within(query, options, None)
    }

    /// [`Retriever::retrieve_embedded`] that starts no stage it cannot finish by `deadline`.
    pub fn retrieve_within(
        &self,
        query: &EmbeddedQuery,
        options: RetrieveOptions,
        deadline: Option<Instant>,
    ) -> Result<Retrieval> {
        let mut run = self.start(query, options)?;
        run.deadline = deadline;
        while let Some(evidence) = run.next_stage()? {
            let judgement = self.check.judge(self.kb, &evidence);
            run.judge(judgement);
        }
        run.finish()
    }

    /// Starts a retrieval whose stages the caller runs and judges one by one (see
    /// [`RetrievalRun`]); finds the seeds and the text list now. Where the global stage is
    /// planned, the wide dense search it seeds its walk with starts now too, on the other
    /// cores, and is abandoned when the run is dropped without it (see [`DenseSeeds`]).
    pub fn start(&self, query: &EmbeddedQuery, options: RetrieveOptions) -> Result<RetrievalRun<'kb>> {
        let started = Instant::now();
        let kb = self.kb;
        let (seeds, stages, text, facts_linked, dense) = match options.strategy {
            Strategy::Text(mode) => {
                let text = kb.search(query, mode, options.top_k, self.settings.into())?;
                (Seeds::default(), Vec::new(), text, true, DenseSeeds::Unasked)
            }
            strategy => {
                let mut seeds = seeds::find_seeds(kb, self.settings, query)?;
                let entities = !seeds.entities.is_empty();
                // Only the global stage walks from linked facts; without an entity seed
                // they are its only start, so whether it has one is decided now.
                if !entities || strategy == Strategy::PprAlways {
                    seeds.facts = facts::link_facts(kb, query, self.settings.fact_seeds)?;
                }
                let facts_linked = !entities || strategy == Strategy::PprAlways;
                let stages: &[Stage] = match strategy {
                    Strategy::LocalOnly if entities => &[Stage::Local],
                    Strategy::LocalOnly => &[],
                    _ if entities || !seeds.facts.is_empty() => match strategy {
                        Strategy::PprAlways => &[Stage::Global],
                        // Local and bridge walk from aligned mentions; with facts alone only
                        // the global stage has a start.
                        _ if entities => &[Stage::Local, Stage::Bridge, Stage::Global],
                        _ => &[Stage::Global],
                    },
                    _ => &[],
                };
                let stages: Vec<Stage> = stages.iter().copied().filter(|s| *s >= options.min_stage).collect();
                let dense = match stages.contains(&Stage::Global) {
                    true => DenseSeeds::Searching(
                        kb.chunk_index().start_search(&query.vector, self.settings.passage_seed_candidates),
                    ),
                    false => DenseSeeds::Unasked,
                };
                let text = match strategy {
                    Strategy::Adaptive => kb.search(
                        query,
                        fusion::text_mode(kb.embedder().kind()),
                        self.settings.text_candidates,
                        self.settings.into(),
                    )?,
                    _ => Vec::new(),
                };
                (seeds, stages, text, facts_linked, dense)
            }
        };
        Ok(RetrievalRun {
            kb,
            settings: self.settings,
            query: query.clone(),
            options,
            seeds,
            text,
            dense,
            facts_linked,
            candidates: Candidates::default(),
            remaining: stages.into(),
            pending: None,
            reports: Vec::new(),
            skipped: None,
            deadline: None,
            stage: Stage::Fallback,
            sufficient: false,
            ranked: None,
            earned_share: 0.0,
            view: Vec::new(),
            started,
        })
    }
}

/// Time a stage must have left before it starts under a deadline; a stage started with
/// less would overrun the request. The global stage's wide dense search and walk take a
/// few ms over a thousand passages and tens of ms over a hundred thousand; local and bridge
/// read a neighbourhood.
pub fn stage_reserve(stage: Stage) -> Duration {
    Duration::from_micros(match stage {
        Stage::Global => 5_000,
        Stage::Local | Stage::Bridge | Stage::Fallback => 500,
    })
}

/// One retrieval as an explicit run, so that the sufficiency judge may be async (an LLM
/// call) or chosen per stage by the caller:
///
/// ```text
/// let mut run = retriever.start(query, options)?;
/// while let Some(evidence) = run.next_stage()? {
///     let judgement = /* judge `evidence` */;
///     run.judge(judgement);
/// }
/// let retrieval = run.finish()?;
/// ```
///
/// Escalation is monotonic: each stage of the strategy (from `min_stage` on) runs at most
/// once, in order, and a sufficient judgement ends it. Each stage adds to one candidate
/// set, and the evidence judged after a stage is the ranking the reader would receive if
/// escalation stopped there.
pub struct RetrievalRun<'kb> {
    kb: &'kb Kb,
    settings: &'kb RetrieveSettings,
    query: EmbeddedQuery,
    options: RetrieveOptions,
    seeds: Seeds,
    /// The text list the graph's ranking is fused with (adaptive), or the whole answer
    /// (text strategies).
    text: Vec<(ChunkId, f32)>,
    /// The global stage's dense seeds.
    dense: DenseSeeds<'kb>,
    /// Whether `seeds.facts` holds the linked facts yet (the global stage links them).
    facts_linked: bool,
    candidates: Candidates<'kb>,
    /// Stages not yet run, in order.
    remaining: VecDeque<Stage>,
    /// The stage run last, while it awaits its judgement.
    pending: Option<PendingStage>,
    reports: Vec<StageReport>,
    skipped: Option<SkippedStage>,
    /// No stage after the first starts without its [`stage_reserve`] left before this.
    pub deadline: Option<Instant>,
    /// The last stage run.
    stage: Stage,
    sufficient: bool,
    /// The final ranking as the last stage left it (see [`RetrievalRun::ranking`]), kept for
    /// [`RetrievalRun::finish`]; `None` before any stage ran.
    ranked: Option<Ranking>,
    /// The graph's share in the fusion ([`fusion::GraphShare::overall`]) for the last stage's
    /// graph ranking, fused or not.
    earned_share: f32,
    /// The reader's evidence as it stands (the first `top_k` of `ranked`).
    view: Vec<ChunkId>,
    started: Instant,
}

/// The best passages by dense score, which the global stage seeds its walk with.
enum DenseSeeds<'kb> {
    /// No stage has needed them.
    Unasked,
    /// The global stage is planned: its wide search of the chunk graphs began as the run
    /// started, on the cores the earlier stages leave idle, and is abandoned when the run is
    /// dropped before that stage (after an earlier stage sufficed). At a million passages it
    /// is the largest part of a query.
    Searching(Search<'kb>),
    Found(Vec<(ChunkId, f32)>),
}

impl DenseSeeds<'_> {
    /// The seeds once found; none before.
    fn found(&self) -> &[(ChunkId, f32)] {
        match self {
            DenseSeeds::Found(seeds) => seeds,
            DenseSeeds::Unasked | DenseSeeds::Searching(_) => &[],
        }
    }
}

/// A final ranking, best first, with the lead's hop and the graph's share in the fusion.
type Ranking = (Vec<(ChunkId, f32)>, Option<PathHop>, f32);

/// A stage that has run and awaits its judgement.
struct PendingStage {
    stage: Stage,
    micros: u64,
    edges: usize,
    nodes: usize,
    /// Chunks with evidence after the stage.
    chunk_total: usize,
    edge_ids: Vec<EdgeId>,
}

impl<'kb> RetrievalRun<'kb> {
    pub fn seeds(&self) -> &Seeds {
        &self.seeds
    }

    /// The per-stage reports so far (judged stages only).
    pub fn reports(&self) -> &[StageReport] {
        &self.reports
    }

    /// Ends escalation before the next stage, saying why (the budget cannot pay for it);
    /// the retrieval answers from what it has.
    pub fn stop(&mut self, reason: String) {
        if let Some(stage) = self.remaining.front().copied() {
            tracing::debug!(stage = ?stage, %reason, "retrieval stage skipped");
            self.skipped = Some(SkippedStage { stage, reason });
        }
        self.remaining.clear();
    }

    /// Runs the next stage and returns the evidence to judge, or `None` when escalation is
    /// over (a stage was judged sufficient, the strategy has no stage left, no seed
    /// aligned, or the deadline leaves no time for the next stage). While a stage awaits
    /// its judgement, returns that stage's evidence again rather than running another.
    pub fn next_stage(&mut self) -> Result<Option<StageEvidence<'_>>> {
        if self.pending.is_none() {
            let Some(stage) = self.remaining.front().copied() else { return Ok(None) };
            // The first stage always runs: a retrieval answers from at least one.
            if let Some(deadline) = self.deadline.filter(|_| !self.reports.is_empty()) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < stage_reserve(stage) {
                    self.stop(format!(
                        "budget: {:.1} ms left, the {} stage needs {:.1} ms",
                        left.as_secs_f64() * 1e3,
                        stage.name(),
                        stage_reserve(stage).as_secs_f64() * 1e3
                    ));
                    return Ok(None);
                }
            }
            self.remaining.pop_front();
            let started = Instant::now();
            let (edges, nodes) = self.run_stage(stage)?;
            self.stage = stage;
            let graph_ranked = self.candidates.ranked();
            // The check weighs the share the graph's ranking earns whether this strategy
            // fuses it or not (`local-only` and `ppr-always` rank by the graph alone).
            self.earned_share = fusion::GraphShare::new(self.kb, stage, &graph_ranked).overall();
            let ranked = self.rank(graph_ranked);
            self.view = ranked.0.iter().map(|(c, _)| *c).take(self.options.top_k).collect();
            self.ranked = Some(ranked);
            self.pending = Some(PendingStage {
                stage,
                micros: started.elapsed().as_micros() as u64,
                edges,
                nodes,
                chunk_total: self.candidates.chunk_scores.len(),
                edge_ids: self.candidates.edges.iter().map(|(e, _)| *e).collect(),
            });
        }
        let Some(pending) = self.pending.as_ref() else { return Ok(None) };
        Ok(Some(StageEvidence {
            stage: pending.stage,
            query: &self.query.text,
            seeds: &self.seeds,
            edges: &pending.edge_ids,
            chunks: &self.view,
            graph_share: self.earned_share,
            paths: &self.candidates.paths,
            next: self.remaining.front().copied(),
        }))
    }

    /// Records the judgement of the stage [`RetrievalRun::next_stage`] just ran; a sufficient
    /// one ends escalation. Does nothing when no stage awaits a judgement.
    pub fn judge(&mut self, judgement: Judgement) {
        let Some(p) = self.pending.take() else { return };
        tracing::debug!(stage = ?p.stage, edges = p.edges, nodes = p.nodes, sufficient = judgement.sufficient, confidence = judgement.confidence, reason = %judgement.reason, "retrieval stage");
        self.sufficient = judgement.sufficient;
        if judgement.sufficient {
            self.remaining.clear();
        }
        self.reports.push(StageReport {
            stage: p.stage,
            micros: p.micros,
            edges: p.edges,
            nodes: p.nodes,
            chunks: p.chunk_total,
            judgement,
        });
    }

    /// The final ranking as it stands, best first, with the lead's hop and the graph's
    /// share: the graph's ranking fused with the text list and led by the text list's best
    /// (adaptive), the graph's alone (its baselines), or the text list (text strategies).
    fn ranking(&self) -> Ranking {
        self.rank(self.candidates.ranked())
    }

    /// [`RetrievalRun::ranking`] from the graph's ranking `graph_ranked`, best first.
    fn rank(&self, graph_ranked: Vec<(ChunkId, f32)>) -> Ranking {
        match self.options.strategy {
            Strategy::Text(_) => (self.text.clone(), None, 0.0),
            Strategy::Adaptive => {
                let stage = if graph_ranked.is_empty() { Stage::Fallback } else { self.stage };
                let share = fusion::GraphShare::new(self.kb, stage, &graph_ranked);
                let fused = fusion::fuse(&self.text, &graph_ranked, &share, self.settings.rrf_k);
                let graph_share = share.overall();
                let lead = self.text.first().map(|(c, _)| *c);
                let (ranking, link) =
                    lead::lead_with_link(self.kb, lead, fused, self.settings.link_candidates, &self.candidates);
                (ranking, link, graph_share)
            }
            // HippoRAG 2 falls back to dense retrieval when nothing seeds the graph.
            Strategy::PprAlways if graph_ranked.is_empty() => (self.dense.found().to_vec(), None, 0.0),
            Strategy::LocalOnly | Strategy::PprAlways => (graph_ranked, None, 0.0),
        }
    }

    /// The final ranking as source chunks with their provenance. A stage left unjudged
    /// counts as insufficient.
    pub fn finish(mut self) -> Result<Retrieval> {
        if self.pending.is_some() {
            self.judge(Judgement::unjudged());
        }
        if self.candidates.is_empty() {
            self.stage = Stage::Fallback;
            if self.options.strategy == Strategy::PprAlways {
                self.find_dense_seeds()?;
            }
        }
        let kb = self.kb;
        // The last stage's ranking stands unless nothing was found, where the fallback may
        // have changed it (the dense list of `ppr-always`, a share of 0).
        let (hits, link, graph_share) = match self.ranked.take() {
            Some(ranked) if !self.candidates.is_empty() => ranked,
            _ => self.ranking(),
        };
        self.candidates.paths.extend(link.map(|hop| vec![hop]));
        let chunks = hits
            .into_iter()
            .filter_map(|(id, score)| RankedChunk::of(kb, id, score))
            .take(self.options.top_k)
            .collect();
        Ok(Retrieval {
            chunks,
            paths: self.candidates.paths,
            stage: self.stage,
            sufficient: self.sufficient,
            seeds: self.seeds,
            graph_share,
            stages: self.reports,
            skipped: self.skipped,
            micros: self.started.elapsed().as_micros() as u64,
        })
    }

    /// Finds the best passages by dense score, for the global stage's walk, unless found
    /// already: finishes the search the run started with, or searches now.
    fn find_dense_seeds(&mut self) -> Result<()> {
        let hits = match std::mem::replace(&mut self.dense, DenseSeeds::Unasked) {
            found @ DenseSeeds::Found(_) => {
                self.dense = found;
                return Ok(());
            }
            DenseSeeds::Searching(search) => search.finish()?,
            DenseSeeds::Unasked => {
                self.kb.chunk_index().search(&self.query.vector, self.settings.passage_seed_candidates)?
            }
        };
        self.dense = DenseSeeds::Found(hits.into_iter().map(|(c, s)| (c as ChunkId, s)).collect());
        Ok(())
    }

    /// Runs one stage, adding to the candidates; returns (edges, nodes) it contributed.
    fn run_stage(&mut self, stage: Stage) -> Result<(usize, usize)> {
        if stage == Stage::Global {
            // Facts first: the dense search's helpers go on meanwhile.
            if !self.facts_linked {
                self.seeds.facts = facts::link_facts(self.kb, &self.query, self.settings.fact_seeds)?;
                self.facts_linked = true;
            }
            self.find_dense_seeds()?;
        }
        let kb = self.kb;
        let settings = self.settings;
        let seeds = &self.seeds;
        let state = &mut self.candidates;
        Ok(match stage {
            Stage::Local => {
                let edges = local::expand(kb, seeds, settings.local_max_edges);
                let seed_nodes: Vec<(NodeId, f32)> = seeds.entities.iter().map(|s| (s.node, s.score)).collect();
                state.chunk_scores.add_edges(kb, &edges);
                state.chunk_scores.add_nodes(kb, &seed_nodes);
                let n = edges.len();
                state.edges.extend(edges);
                (n, seed_nodes.len())
            }
            Stage::Bridge => {
                let params = bridge::BridgeParams {
                    hops: settings.bridge_hops,
                    max_bridges: settings.bridge_max_nodes,
                    max_paths: settings.bridge_max_paths,
                };
                let bridges = bridge::find_bridges(kb, &seeds.node_ids(), &params);
                let mut edges = Vec::new();
                for b in &bridges {
                    edges.extend(bridge::path_edges(b).map(|e| (e, b.score)));
                    for path in &b.paths {
                        state.paths.push(describe(kb, path.iter().map(|s| s.edge)));
                    }
                }
                state.chunk_scores.add_edges(kb, &edges);
                let bridge_nodes: Vec<(NodeId, f32)> = bridges.iter().map(|b| (b.node, b.score)).collect();
                state.chunk_scores.add_nodes(kb, &bridge_nodes);
                let n = edges.len();
                state.edges.extend(edges);
                (n, bridges.len())
            }
            Stage::Global => {
                // HippoRAG 2 seeds its walk from linked facts alone; a2rag adds the query's
                // aligned mentions, which its earlier stages walk from too.
                let entities: &[EntitySeed] = match self.options.strategy {
                    Strategy::PprAlways => &[],
                    _ => &seeds.entities,
                };
                let phrases = global::phrase_weights(kb, &seeds.facts, entities);
                let dense = self.dense.found();
                let walk = global::rank_passages(kb, settings, &phrases, dense);
                // Nothing seeded the graph: keep what the earlier stages found.
                if !walk.head().is_empty() {
                    state.global = Some(walk);
                }
                (0, phrases.len())
            }
            Stage::Fallback => (0, 0),
        })
    }
}

/// A graph path by name.
pub fn describe(kb: &Kb, edges: impl Iterator<Item = EdgeId>) -> Vec<PathHop> {
    let name = |n: NodeId| kb.node(n).map_or_else(|| format!("#{n}"), |n| n.name.clone());
    edges
        .filter_map(|e| kb.edge(e))
        .map(|e| PathHop {
            subject: name(e.subject),
            relation: e.relation.to_string(),
            object: name(e.object),
            chunk: e.chunk,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::lead::RankedBelow;
    use super::*;

    #[test]
    fn below_the_heads_the_walk_ranks_by_mass_then_what_it_did_not_reach_by_score() {
        let found =
            Candidates { chunk_scores: [(4, 0.2), (5, 0.4), (6, 0.9)].into_iter().collect(), ..Candidates::default() };
        let wanted = |ids: &[ChunkId]| ids.iter().copied().collect::<HashSet<ChunkId>>();
        assert_eq!(found.ranked_below(&wanted(&[4, 5, 7])), vec![5, 4], "7 was never found");

        let walked =
            Candidates { global: Some(global::Walk::new(vec![(2, 0.1), (1, 0.9), (3, 0.3), (4, 0.3)], 1)), ..found };
        assert_eq!(walked.ranked_below(&wanted(&[2, 3, 4, 6, 7])), vec![3, 4, 2, 6], "mass, then id, then found");
    }
}
