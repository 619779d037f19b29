//! Retries: truncated exponential backoff with full jitter, honouring Retry-After, within a deadline.
//!
//! Only answers that say "try again" (429, and every 5xx but 501 Not Implemented, which no retry
//! changes) and lost connections are retried. 400, 403, 404, 409 and 422 are answers about the
//! request itself and go straight back to the caller, who knows what they mean for the operation
//! (a 409 on create is an adoption question, not a failure).
//!
//! The delay a server asks for is read from the `Status` body's `details.retryAfterSeconds`
//! only: kube-rs hands over an error answer as its parsed `Status` body, without the response's
//! headers, so a `Retry-After` header is not seen. When the body names no delay (a plain-text
//! 429 from the API server's in-flight limit, a proxy's 503), the backoff alone sets it.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tracing::debug;

/// How an operation is retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first backoff's upper bound.
    pub base: Duration,
    /// The largest backoff's upper bound.
    pub cap: Duration,
    /// How long an operation may keep retrying, counted from its first attempt.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
        }
    }
}

/// What a failed attempt means for retrying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The server asked to try again (429, 5xx but 501), perhaps after the delay its `Status`
    /// body names.
    RetryAfter(Option<Duration>),
    /// No answer arrived (refused, reset, timed out): the request may or may not have taken
    /// effect. Retry only operations that are safe to repeat.
    NoResponse,
    /// An answer about the request itself: do not retry.
    Final,
}

/// Classifies a client error. The server's delay comes from the `Status` body's
/// `details.retryAfterSeconds` (the `Retry-After` header is not visible through kube-rs).
pub(crate) fn verdict(error: &kube::Error) -> Verdict {
    match error {
        kube::Error::Api(status) => match status.code {
            429 | 500 | 502..=599 => Verdict::RetryAfter(
                status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s))),
            ),
            _ => Verdict::Final,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Verdict::NoResponse
        }
        _ => Verdict::Final,
    }
}

/// A failed operation: the last error and how many attempts it took.
#[derive(Debug)]
pub(crate) struct Exhausted {
    /// The last attempt's error.
    pub error: kube::Error,
    /// How many attempts were made.
    pub attempts: u32,
}

impl RetryPolicy {
    /// A policy for this crate's tests: tiny backoffs, short deadline.
    #[cfg(test)]
    pub(crate) fn fast() -> Self {
        Self {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(50),
            deadline: Duration::from_secs(5),
        }
    }

    /// The upper bound of the backoff before retry number `attempt` (0-based), before jitter.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The backoff before retry number `attempt`: uniformly random up to its ceiling ("full
    /// jitter"), so that many clients failing together do not retry together.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        if ceiling.is_zero() {
            return ceiling;
        }
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }

    /// Runs `attempt` until it succeeds, fails finally, or the deadline would pass.
    ///
    /// `retry_no_response` says whether an attempt that got no answer may be repeated: true for
    /// reads and for writes made safe by a precondition or a deterministic name.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        operation: &str,
        retry_no_response: bool,
        attempt: F,
    ) -> Result<T, Exhausted>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        self.run_checked(operation, retry_no_response, attempt, || {
            std::future::ready(None)
        })
        .await
    }

    /// [`RetryPolicy::run`], asking `before_repeat` before each repeated attempt (not bounded
    /// by an attempt's deadline): a value it gives ends the operation with it. For a write
    /// whose earlier attempts, or what happened meanwhile, may already have decided it.
    pub(crate) async fn run_checked<T, F, Fut, C, Checked>(
        &self,
        operation: &str,
        retry_no_response: bool,
        mut attempt: F,
        mut before_repeat: C,
    ) -> Result<T, Exhausted>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
        C: FnMut() -> Checked,
        Checked: Future<Output = Option<T>>,
    {
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            if attempts > 0
                && let Some(value) = before_repeat().await
            {
                return Ok(value);
            }
            let error = match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let delay = match verdict(&error) {
                Verdict::Final => None,
                Verdict::NoResponse if !retry_no_response => None,
                Verdict::NoResponse => Some(self.backoff(attempts)),
                Verdict::RetryAfter(after) => {
                    let backoff = self.backoff(attempts);
                    Some(after.map_or(backoff, |after| after.max(backoff)))
                }
            };
            attempts += 1;
            let Some(delay) = delay else {
                return Err(Exhausted { error, attempts });
            };
            if started.elapsed() + delay > self.deadline {
                return Err(Exhausted { error, attempts });
            }
            debug!(message = "retrying", operation, attempts, ?delay, %error);
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests;
