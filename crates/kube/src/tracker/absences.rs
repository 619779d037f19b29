//! Jobs a fresh read found absent, remembered for a short while: a caller asking again and again about a job that does not exist costs one read per while, not one per question.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// At most this many absences are kept; the oldest go first.
const CAPACITY: usize = 10_000;

/// Names of one kind's objects, by namespace, that a read found absent, and when.
pub(crate) struct Absences {
    ttl: Duration,
    seen: Mutex<HashMap<(String, String), Instant>>,
}

impl Absences {
    /// Absences that stand for `ttl` (zero: none is remembered).
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            seen: Mutex::default(),
        }
    }

    /// Whether a read found `name` absent within the last `ttl`.
    pub(crate) fn recent(&self, namespace: &str, name: &str) -> bool {
        let seen = lock(&self.seen);
        seen.get(&(namespace.to_string(), name.to_string()))
            .is_some_and(|at| at.elapsed() < self.ttl)
    }

    /// Remembers that a read found `name` absent just now.
    pub(crate) fn remember(&self, namespace: &str, name: &str) {
        if self.ttl.is_zero() {
            return;
        }
        let mut seen = lock(&self.seen);
        if seen.len() >= CAPACITY {
            let ttl = self.ttl;
            seen.retain(|_, at| at.elapsed() < ttl);
            if seen.len() >= CAPACITY
                && let Some(oldest) = seen
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(k, _)| k.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert((namespace.to_string(), name.to_string()), Instant::now());
    }

    /// Forgets an absence: the object was just created here.
    pub(crate) fn forget(&self, namespace: &str, name: &str) {
        lock(&self.seen).remove(&(namespace.to_string(), name.to_string()));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data updated in single steps: a poisoned lock still holds a usable value.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_absence_stands_for_its_time_and_goes_when_the_job_is_created() {
        let absences = Absences::new(Duration::from_secs(5));
        assert!(!absences.recent("ns", "a"));
        absences.remember("ns", "a");
        assert!(absences.recent("ns", "a"));
        assert!(!absences.recent("other", "a"), "by namespace");
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(absences.recent("ns", "a"));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!absences.recent("ns", "a"), "past its time");
        absences.remember("ns", "a");
        absences.forget("ns", "a");
        assert!(!absences.recent("ns", "a"), "created here since");
        let none = Absences::new(Duration::ZERO);
        none.remember("ns", "a");
        assert!(!none.recent("ns", "a"));
    }

    #[tokio::test(start_paused = true)]
    async fn absences_are_bounded() {
        let absences = Absences::new(Duration::from_secs(60));
        for i in 0..CAPACITY + 10 {
            absences.remember("ns", &i.to_string());
        }
        assert_eq!(lock(&absences.seen).len(), CAPACITY);
        assert!(absences.recent("ns", &(CAPACITY + 9).to_string()));
    }
}
