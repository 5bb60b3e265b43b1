//! The per-query budget and the cost ledger. Every LLM call is admitted by
//! [`Ledger::admit`] *before* it is made, with a conservative bound on its tokens, so no
//! budget is ever overrun; what the provider then reports is what the ledger records.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::BudgetSettings;
use crate::llm::Usage;

/// Limits for one request; each omitted limit keeps the configured value.
// Doc comments here are also the schema of MCP `ask`'s `budget` argument, read by assistants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverride {
    /// Most retrieve-answer-verify rounds (at least 1).
    pub max_iterations: Option<NonZeroU32>,
    /// Most LLM calls. With the LLM sufficiency judge, a retrieval that cannot pay for a judge
    /// call as well as the answer and its checks does not start the global stage.
    pub max_llm_calls: Option<u32>,
    /// Most LLM tokens, prompt and completion together.
    pub max_tokens: Option<u64>,
    /// Wall-clock limit in milliseconds. Retrieval starts no stage it cannot finish in what is
    /// left (the global stage needs 5 ms); the response says which stage it left out.
    pub deadline_ms: Option<u64>,
}

impl BudgetOverride {
    pub fn apply(&self, base: BudgetSettings) -> BudgetSettings {
        BudgetSettings {
            max_iterations: self.max_iterations.map_or(base.max_iterations, NonZeroU32::get),
            max_llm_calls: self.max_llm_calls.unwrap_or(base.max_llm_calls),
            max_tokens: self.max_tokens.unwrap_or(base.max_tokens),
            deadline_ms: self.deadline_ms.unwrap_or(base.deadline_ms),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exceeded {
    Iterations,
    LlmCalls,
    Tokens,
    Deadline,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Exceeded::Iterations => "iteration budget exhausted",
            Exceeded::LlmCalls => "LLM call budget exhausted",
            Exceeded::Tokens => "token budget exhausted",
            Exceeded::Deadline => "deadline reached",
        })
    }
}

/// Cost of one step of the controller.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerEntry {
    pub step: String,
    pub llm_calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub tokens_estimated: bool,
    pub micros: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ledger {
    pub budget: BudgetSettings,
    pub llm_calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub entries: Vec<LedgerEntry>,
    #[serde(skip)]
    started: Instant,
}

impl Ledger {
    pub fn new(budget: BudgetSettings) -> Ledger {
        Ledger {
            budget,
            llm_calls: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            entries: Vec::new(),
            started: Instant::now(),
        }
    }

    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn remaining_time(&self) -> Duration {
        Duration::from_millis(self.budget.deadline_ms).saturating_sub(self.elapsed())
    }

    pub fn check_deadline(&self) -> Result<(), Exceeded> {
        if self.remaining_time().is_zero() { Err(Exceeded::Deadline) } else { Ok(()) }
    }

    /// May a call whose tokens are bounded by `token_bound` be made now?
    pub fn admit(&self, token_bound: u64) -> Result<(), Exceeded> {
        self.admit_reserving(token_bound, 0)
    }

    /// Like [`Ledger::admit`], and the budget must still allow `reserved_calls` more calls
    /// after this one (an optional step keeps the calls a later, necessary step needs).
    pub fn admit_reserving(&self, token_bound: u64, reserved_calls: u32) -> Result<(), Exceeded> {
        self.check_deadline()?;
        if u64::from(self.llm_calls) + 1 + u64::from(reserved_calls) > u64::from(self.budget.max_llm_calls) {
            return Err(Exceeded::LlmCalls);
        }
        if self.tokens().saturating_add(token_bound) > self.budget.max_tokens {
            return Err(Exceeded::Tokens);
        }
        Ok(())
    }

    pub fn record(&mut self, step: &str, usage: Option<Usage>, started: Instant) {
        let usage_or_zero = usage.unwrap_or_default();
        let calls = u32::from(usage.is_some());
        self.llm_calls = self.llm_calls.saturating_add(calls);
        // Usage is what a remote provider says: a huge figure must not wrap past the limit.
        self.prompt_tokens = self.prompt_tokens.saturating_add(usage_or_zero.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(usage_or_zero.completion_tokens);
        self.entries.push(LedgerEntry {
            step: step.to_string(),
            llm_calls: calls,
            prompt_tokens: usage_or_zero.prompt_tokens,
            completion_tokens: usage_or_zero.completion_tokens,
            tokens_estimated: usage_or_zero.estimated,
            micros: started.elapsed().as_micros() as u64,
        });
    }
}

/// Upper bound on the tokens of one call: a byte-level tokenizer never makes more tokens
/// than bytes, plus room for the chat template, plus the completion cap.
pub fn token_bound(prompt: &str, max_completion_tokens: u32) -> u64 {
    const CHAT_TEMPLATE_TOKENS: u64 = 64;
    prompt.len() as u64 + CHAT_TEMPLATE_TOKENS + max_completion_tokens as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max_tokens: u64) -> BudgetSettings {
        BudgetSettings { max_iterations: 3, max_llm_calls: 10, max_tokens, deadline_ms: 60_000 }
    }

    #[test]
    fn a_provider_reporting_absurd_usage_exhausts_the_budget_instead_of_wrapping_it() {
        let mut ledger = Ledger::new(budget(10_000));
        ledger.record(
            "read",
            Some(Usage { prompt_tokens: u64::MAX, completion_tokens: 5, estimated: false }),
            Instant::now(),
        );
        ledger.record(
            "verify",
            Some(Usage { prompt_tokens: 7, completion_tokens: u64::MAX, estimated: false }),
            Instant::now(),
        );
        assert_eq!(ledger.tokens(), u64::MAX);
        assert_eq!(ledger.admit(1), Err(Exceeded::Tokens));
    }

    #[test]
    fn admission_counts_the_bound_of_the_call_it_admits() {
        let mut ledger = Ledger::new(budget(1_000));
        ledger.record(
            "read",
            Some(Usage { prompt_tokens: 600, completion_tokens: 100, estimated: false }),
            Instant::now(),
        );
        assert_eq!(ledger.admit(300), Ok(()));
        assert_eq!(ledger.admit(301), Err(Exceeded::Tokens));
        assert_eq!(ledger.admit(u64::MAX), Err(Exceeded::Tokens));
    }
}
