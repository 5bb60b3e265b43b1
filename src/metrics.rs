//! What a long-running daemon tells its scraper: requests by front door, method and outcome,
//! query latency, LLM calls and tokens, abstentions by reason, the retrieval stage reached,
//! requests in flight, ingest throughput. One registry per [`crate::engine::Engine`],
//! rendered in the Prometheus text format at `GET /metrics` (see `web`).
//!
//! Labels come from closed sets (door and outcome are enums, methods and reasons are the
//! callers' fixed names), so a client cannot grow the number of series.

use std::time::{Duration, Instant};

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::error::{Error, Result};

/// The front door a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    Rpc,
    Http,
    Mcp,
}

impl Door {
    fn label(self) -> &'static str {
        match self {
            Door::Rpc => "rpc",
            Door::Http => "http",
            Door::Mcp => "mcp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
}

impl Outcome {
    pub fn of<T, E>(result: &std::result::Result<T, E>) -> Outcome {
        if result.is_ok() { Outcome::Ok } else { Outcome::Error }
    }
}

/// How one query ended, as the metrics count it.
pub struct QueryOutcome<'a> {
    pub elapsed: Duration,
    pub llm_calls: u64,
    pub tokens: u64,
    /// The last retrieval stage, as its wire name (`local`, `bridge`, `global`, `fallback`).
    pub stage: Option<&'a str>,
    /// The abstention's kind (`out_of_scope`, `low_confidence`, ...), `None` when answered.
    pub abstained: Option<&'a str>,
}

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    queries: IntCounterVec,
    query_seconds: Histogram,
    llm_calls: IntCounter,
    llm_tokens: IntCounter,
    abstentions: IntCounterVec,
    stages: IntCounterVec,
    pending: IntGauge,
    ingested_documents: IntCounter,
    ingest_seconds: prometheus::Counter,
    ingest_rate: Gauge,
    uptime: Gauge,
    refusals: IntCounterVec,
    started: Instant,
}

impl Metrics {
    pub fn new() -> Result<Metrics> {
        let registry = Registry::new_custom(Some("a2rag".into()), None).map_err(internal)?;
        let requests = IntCounterVec::new(
            Opts::new("requests_total", "Requests by front door, method and outcome."),
            &["door", "method", "outcome"],
        )
        .map_err(internal)?;
        let queries = IntCounterVec::new(
            Opts::new("queries_total", "Questions run through the controller, by outcome (answered or abstained)."),
            &["outcome"],
        )
        .map_err(internal)?;
        let query_seconds = Histogram::with_opts(
            HistogramOpts::new("query_duration_seconds", "Time to answer (or abstain on) one question.")
                .buckets(prometheus::exponential_buckets(0.001, 2.0, 14).map_err(internal)?),
        )
        .map_err(internal)?;
        let llm_calls = IntCounter::new("llm_calls_total", "LLM calls made by queries.").map_err(internal)?;
        let llm_tokens = IntCounter::new("llm_tokens_total", "LLM tokens (prompt and completion) used by queries.")
            .map_err(internal)?;
        let abstentions = IntCounterVec::new(Opts::new("abstentions_total", "Abstentions by reason."), &["reason"])
            .map_err(internal)?;
        let stages = IntCounterVec::new(
            Opts::new("retrieval_stage_total", "The last retrieval stage a query reached."),
            &["stage"],
        )
        .map_err(internal)?;
        let pending =
            IntGauge::new("pending_requests", "Requests in flight, over every front door.").map_err(internal)?;
        let ingested_documents =
            IntCounter::new("ingested_documents_total", "Documents committed by ingests.").map_err(internal)?;
        let ingest_seconds = prometheus::Counter::new("ingest_seconds_total", "Wall-clock seconds spent in ingests.")
            .map_err(internal)?;
        let ingest_rate =
            Gauge::new("ingest_documents_per_second", "Throughput of the last ingest, in documents per second.")
                .map_err(internal)?;
        let uptime = Gauge::new("uptime_seconds", "Seconds since the engine started.").map_err(internal)?;
        let refusals = IntCounterVec::new(
            Opts::new(
                "access_refusals_total",
                "Requests refused by access control, by token name and reason (overloaded, forbidden, unauthorized).",
            ),
            &["token", "reason"],
        )
        .map_err(internal)?;
        let collectors: [Box<dyn prometheus::core::Collector>; 13] = [
            Box::new(refusals.clone()),
            Box::new(requests.clone()),
            Box::new(queries.clone()),
            Box::new(query_seconds.clone()),
            Box::new(llm_calls.clone()),
            Box::new(llm_tokens.clone()),
            Box::new(abstentions.clone()),
            Box::new(stages.clone()),
            Box::new(pending.clone()),
            Box::new(ingested_documents.clone()),
            Box::new(ingest_seconds.clone()),
            Box::new(ingest_rate.clone()),
            Box::new(uptime.clone()),
        ];
        for collector in collectors {
            registry.register(collector).map_err(internal)?;
        }
        Ok(Metrics {
            registry,
            requests,
            queries,
            query_seconds,
            llm_calls,
            llm_tokens,
            abstentions,
            stages,
            pending,
            ingested_documents,
            ingest_seconds,
            ingest_rate,
            uptime,
            refusals,
            started: Instant::now(),
        })
    }

    pub fn request(&self, door: Door, method: &str, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
        };
        self.requests.with_label_values(&[door.label(), method, outcome]).inc();
    }

    /// Counts a request access control refused: `reason` is `overloaded`, `forbidden` or
    /// `unauthorized`.
    pub fn refused(&self, token: &str, reason: &str) {
        self.refusals.with_label_values(&[token, reason]).inc();
    }

    /// Counts a request in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight {
        self.pending.inc();
        InFlight(self.pending.clone())
    }

    pub fn pending(&self) -> u64 {
        self.pending.get().max(0) as u64
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn query(&self, q: QueryOutcome<'_>) {
        self.query_seconds.observe(q.elapsed.as_secs_f64());
        self.llm_calls.inc_by(q.llm_calls);
        self.llm_tokens.inc_by(q.tokens);
        if let Some(stage) = q.stage {
            self.stages.with_label_values(&[stage]).inc();
        }
        match q.abstained {
            Some(reason) => {
                self.queries.with_label_values(&["abstained"]).inc();
                self.abstentions.with_label_values(&[reason]).inc();
            }
            None => self.queries.with_label_values(&["answered"]).inc(),
        }
    }

    pub fn ingest(&self, documents: u64, elapsed: Duration) {
        self.ingested_documents.inc_by(documents);
        let seconds = elapsed.as_secs_f64();
        self.ingest_seconds.inc_by(seconds);
        if documents > 0 && seconds > 0.0 {
            self.ingest_rate.set(documents as f64 / seconds);
        }
    }

    /// Every metric in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> Result<String> {
        self.uptime.set(self.started.elapsed().as_secs_f64());
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).map_err(internal)?;
        String::from_utf8(out).map_err(|e| Error::Internal(format!("metrics text is not UTF-8: {e}")))
    }
}

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// A request in flight; dropping it ends the count.
pub struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn internal(e: prometheus::Error) -> Error {
    Error::Internal(format!("metrics registry: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn counters_move_with_what_they_count() {
        let m = Metrics::new().unwrap();
        m.request(Door::Rpc, "query", Outcome::Ok);
        m.request(Door::Rpc, "query", Outcome::Ok);
        m.request(Door::Http, "/api/ask", Outcome::Error);
        m.query(QueryOutcome {
            elapsed: Duration::from_millis(30),
            llm_calls: 2,
            tokens: 900,
            stage: Some("global"),
            abstained: Some("low_confidence"),
        });
        {
            let _a = m.in_flight();
            let _b = m.in_flight();
            assert_eq!(m.pending(), 2);
        }
        m.ingest(10, Duration::from_secs(2));
        let text = m.render().unwrap();
        assert_eq!(sample(&text, r#"a2rag_requests_total{door="rpc",method="query",outcome="ok"}"#), Some(2.0));
        assert_eq!(sample(&text, r#"a2rag_requests_total{door="http",method="/api/ask",outcome="error"}"#), Some(1.0));
        assert_eq!(sample(&text, "a2rag_llm_tokens_total"), Some(900.0));
        assert_eq!(sample(&text, r#"a2rag_abstentions_total{reason="low_confidence"}"#), Some(1.0));
        assert_eq!(sample(&text, r#"a2rag_queries_total{outcome="abstained"}"#), Some(1.0));
        assert_eq!(sample(&text, r#"a2rag_retrieval_stage_total{stage="global"}"#), Some(1.0));
        assert_eq!(sample(&text, "a2rag_query_duration_seconds_count"), Some(1.0));
        assert_eq!(sample(&text, "a2rag_pending_requests"), Some(0.0));
        assert_eq!(sample(&text, "a2rag_ingest_documents_per_second"), Some(5.0));
    }
}
