//! Per-token request limits: a token bucket (requests per second, with a burst of one
//! second's worth) and a count of requests running at once, kept per token name in this
//! process. A request beyond either is refused at once, never queued: the caller is told to
//! slow down, and other tokens are unaffected.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One token's limits; `None` (or zero) means none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub rps: Option<f64>,
    pub concurrent: Option<u32>,
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Rate,
    Concurrency,
}

struct Bucket {
    /// Requests that may start now (up to the rate: a burst of one second's worth).
    allowance: f64,
    refilled: Instant,
    running: Arc<AtomicU32>,
}

#[derive(Default)]
pub struct Limiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// A running request's place under its token's concurrency limit, given back on drop.
pub struct Slot(Option<Arc<AtomicU32>>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(running) = &self.0 {
            running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Slot {
    /// A slot under no limit (callers without a token).
    pub fn unlimited() -> Slot {
        Slot(None)
    }
}

impl Limiter {
    /// Lets a request of token `name` start, or says which limit it is over.
    pub fn admit(&self, name: &str, limits: Limits) -> Result<Slot, Exceeded> {
        let rps = limits.rps.filter(|r| *r > 0.0);
        let concurrent = limits.concurrent.filter(|c| *c > 0);
        if rps.is_none() && concurrent.is_none() {
            return Ok(Slot::unlimited());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let bucket = buckets.entry(name.to_string()).or_insert_with(|| Bucket {
            allowance: rps.unwrap_or(0.0).max(1.0),
            refilled: now,
            running: Arc::new(AtomicU32::new(0)),
        });
        if let Some(max) = concurrent
            && bucket.running.load(Ordering::SeqCst) >= max
        {
            return Err(Exceeded::Concurrency);
        }
        if let Some(rate) = rps {
            let burst = rate.max(1.0);
            let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
            bucket.allowance = (bucket.allowance + elapsed * rate).min(burst);
            bucket.refilled = now;
            if bucket.allowance < 1.0 {
                return Err(Exceeded::Rate);
            }
            bucket.allowance -= 1.0;
        }
        bucket.running.fetch_add(1, Ordering::SeqCst);
        Ok(Slot(Some(bucket.running.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_allows_its_burst_then_refuses_and_other_names_are_apart() {
        let limiter = Limiter::default();
        let five = Limits { rps: Some(5.0), concurrent: None };
        let admitted = (0..20).filter(|_| limiter.admit("a", five).is_ok()).count();
        assert_eq!(admitted, 5, "a burst of one second's worth, then refusals");
        assert_eq!(limiter.admit("a", five).err(), Some(Exceeded::Rate));
        assert!(limiter.admit("b", five).is_ok(), "another token has its own bucket");
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert!(limiter.admit("a", five).is_ok(), "the bucket refills at the rate");
    }

    #[test]
    fn concurrency_counts_running_requests_until_their_slots_drop() {
        let limiter = Limiter::default();
        let two = Limits { rps: None, concurrent: Some(2) };
        let first = limiter.admit("a", two).unwrap();
        let _second = limiter.admit("a", two).unwrap();
        assert_eq!(limiter.admit("a", two).err(), Some(Exceeded::Concurrency));
        drop(first);
        assert!(limiter.admit("a", two).is_ok());
        assert!(limiter.admit("x", Limits::default()).is_ok(), "no limits, no bookkeeping");
    }
}
