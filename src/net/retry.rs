//! How often and how patiently a remote call is tried.

use std::future::Future;
use std::time::Duration;

use super::RemoteError;
use crate::config::ConnectionSettings;

/// Longest pause between two attempts, whatever the backoff doubling reaches.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Per-attempt time limit and how often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Limit on one attempt; zero means none.
    pub timeout: Duration,
    /// Attempts after the first.
    pub max_retries: u32,
    /// Pause before the first retry; each later one doubles it (capped at a minute).
    pub backoff: Duration,
}

impl RetryPolicy {
    pub fn new(timeout_ms: u64, max_retries: u32, retry_backoff_ms: u64) -> RetryPolicy {
        RetryPolicy {
            timeout: Duration::from_millis(timeout_ms),
            max_retries,
            backoff: Duration::from_millis(retry_backoff_ms),
        }
    }

    pub fn from_settings(settings: &ConnectionSettings) -> RetryPolicy {
        RetryPolicy::new(settings.timeout_ms, settings.max_retries, settings.retry_backoff_ms)
    }

    /// Runs `attempt` until it succeeds, fails permanently, or `max_retries` retries are
    /// spent: each attempt is cut off after `timeout` ([`RemoteError::Timeout`]), and transient
    /// failures ([`RemoteError::is_transient`]) are retried after an exponential backoff.
    /// `what` names the model in the logs.
    pub async fn run<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, RemoteError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RemoteError>>,
    {
        let mut retry = 0u32;
        loop {
            tracing::debug!(model = %what, retry, "provider request");
            let result = if self.timeout.is_zero() {
                attempt().await
            } else {
                match tokio::time::timeout(self.timeout, attempt()).await {
                    Ok(result) => result,
                    Err(_) => Err(RemoteError::Timeout(duration_ms(self.timeout))),
                }
            };
            match result {
                Ok(value) => return Ok(value),
                Err(error) if error.is_transient() && retry < self.max_retries => {
                    let delay = self.delay(retry);
                    tracing::warn!(
                        model = %what,
                        %error,
                        retry = retry + 1,
                        max_retries = self.max_retries,
                        delay_ms = duration_ms(delay),
                        "provider request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                    retry += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Pause before retry number `retry` (0-based).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(MAX_BACKOFF)
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy { timeout: Duration::ZERO, max_retries: 100, backoff: Duration::from_millis(250) };
        assert_eq!(policy.delay(0), Duration::from_millis(250));
        assert_eq!(policy.delay(1), Duration::from_millis(500));
        assert_eq!(policy.delay(3), Duration::from_millis(2000));
        assert_eq!(policy.delay(40), MAX_BACKOFF);
    }
}
