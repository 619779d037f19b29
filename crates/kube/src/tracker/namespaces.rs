//! The watches of every namespace a kind of job looks after, started on first use, and what was
//! last reported of each of its jobs: one table, whatever the kind watches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kubeferry_core::ExecutionInfo;

use super::{LastReported, Recent};

/// How many jobs' last answers a kind remembers (the oldest go first).
const REPORTED_CAPACITY: usize = 100_000;

/// How many absent jobs a kind remembers (the oldest go first).
const ABSENT_CAPACITY: usize = 10_000;

/// A kind's watches by namespace (`W`: what it watches in one namespace), and its last answers.
pub(crate) struct Namespaces<W> {
    watches: Mutex<HashMap<String, Arc<W>>>,
    reported: Arc<Mutex<LastReported>>,
    /// Jobs the API server said lately it does not have, by `namespace/name`.
    absent: Recent,
    /// Jobs this process creates or created lately, by `namespace/name`: the watches deliver
    /// them in a moment, and a "no such object" read before the create is stale.
    creating: Recent,
}

impl<W> Default for Namespaces<W> {
    fn default() -> Self {
        Self {
            watches: Mutex::default(),
            reported: Arc::new(Mutex::new(LastReported::new(REPORTED_CAPACITY))),
            absent: Recent::new(ABSENT_CAPACITY),
            creating: Recent::new(ABSENT_CAPACITY),
        }
    }
}

impl<W> Namespaces<W> {
    /// The watches of `namespace`, if they are started.
    pub(crate) fn existing(&self, namespace: &str) -> Option<Arc<W>> {
        lock(&self.watches).get(namespace).cloned()
    }

    /// The watches of `namespace`, started with `start` if this is the first question about it
    /// (under the table's lock: two first questions start one set of watches).
    pub(crate) fn get_or_start(&self, namespace: &str, start: impl FnOnce() -> Arc<W>) -> Arc<W> {
        lock(&self.watches)
            .entry(namespace.to_string())
            .or_insert_with(start)
            .clone()
    }

    /// The namespaces watched so far, with their watches.
    pub(crate) fn watched(&self) -> Vec<(String, Arc<W>)> {
        lock(&self.watches)
            .iter()
            .map(|(namespace, watch)| (namespace.clone(), watch.clone()))
            .collect()
    }

    /// Whether the API server said less than `ttl` ago that it does not have the job, and
    /// this process has not created it since.
    pub(crate) fn absent_lately(&self, namespace: &str, name: &str, ttl: Duration) -> bool {
        let key = reported_key(namespace, name);
        self.absent.contains_within(&key, ttl) && !self.creating.contains_within(&key, ttl)
    }

    /// Notes that the API server said it does not have the job.
    pub(crate) fn note_absent(&self, namespace: &str, name: &str) {
        let key = reported_key(namespace, name);
        // Noted again: the period starts anew.
        self.absent.remove(&key);
        self.absent.insert(key);
    }

    /// Notes that this process is creating the job: it is absent no more.
    pub(crate) fn note_creating(&self, namespace: &str, name: &str) {
        let key = reported_key(namespace, name);
        self.absent.remove(&key);
        self.creating.remove(&key);
        self.creating.insert(key);
    }

    /// Forgets that this process was creating the job (it created nothing).
    pub(crate) fn forget_creating(&self, namespace: &str, name: &str) {
        self.creating.remove(&reported_key(namespace, name));
    }

    /// Whether this process created the job less than `window` ago.
    pub(crate) fn created_lately(&self, namespace: &str, name: &str, window: Duration) -> bool {
        self.creating
            .contains_within(&reported_key(namespace, name), window)
    }

    /// What was last reported for a job, for the mapping's `previous`.
    pub(crate) fn last_reported(&self, namespace: &str, name: &str) -> Option<ExecutionInfo> {
        lock(&self.reported).get(&reported_key(namespace, name))
    }

    /// Remembers what was reported for a job, from its object at `version`.
    pub(crate) fn remember(
        &self,
        namespace: &str,
        name: &str,
        info: &ExecutionInfo,
        version: Option<&str>,
    ) {
        lock(&self.reported).put(reported_key(namespace, name), info.clone(), version);
    }

    /// The status last reported for a job, if it was computed from a copy of its object newer
    /// than one at `version`: that copy tells nothing new. Checked and read in one step, so
    /// that an answer computed meanwhile from a newer copy (a terminal one) is the one given,
    /// not what was reported before it.
    pub(crate) fn reported_from_newer(
        &self,
        namespace: &str,
        name: &str,
        version: Option<&str>,
    ) -> Option<ExecutionInfo> {
        let reported = lock(&self.reported);
        let key = reported_key(namespace, name);
        reported
            .is_older(&key, version)
            .then(|| reported.get(&key))
            .flatten()
    }
}

/// The key of a job's last reported status.
pub(crate) fn reported_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Locks plain data updated in single steps: a poisoned lock still holds a usable value.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeferry_core::{JobState, Reason};

    #[test]
    fn a_namespace_is_started_once_and_answers_are_kept_per_job() {
        let namespaces: Namespaces<String> = Namespaces::default();
        assert!(namespaces.existing("a").is_none());
        let first = namespaces.get_or_start("a", || Arc::new("first".to_string()));
        let second = namespaces.get_or_start("a", || Arc::new("second".to_string()));
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(namespaces.watched().len(), 1);

        let running = ExecutionInfo::new(JobState::Started, Reason::Running);
        namespaces.remember("a", "j", &running, Some("7"));
        namespaces.remember("a", "j", &running, Some("8"));
        assert_eq!(namespaces.last_reported("a", "j"), Some(running.clone()));
        assert_eq!(namespaces.last_reported("b", "j"), None);
        assert_eq!(
            namespaces.reported_from_newer("a", "j", Some("7")),
            Some(running)
        );
        assert_eq!(namespaces.reported_from_newer("a", "j", Some("9")), None);
        assert_eq!(namespaces.reported_from_newer("b", "j", Some("1")), None);

        // An answer from an older copy computed while a terminal one was given from a newer
        // copy gets the terminal one, whatever it had read as reported before.
        let cancelling = ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested);
        let cancelled = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled);
        namespaces.remember("a", "k", &cancelling, Some("5"));
        namespaces.remember("a", "k", &cancelled, Some("6"));
        assert_eq!(
            namespaces.reported_from_newer("a", "k", Some("5")),
            Some(cancelled.clone())
        );
        namespaces.remember("a", "k", &cancelling, Some("5"));
        assert_eq!(namespaces.last_reported("a", "k"), Some(cancelled));
    }

    #[test]
    fn a_job_this_process_creates_is_absent_no_more_whatever_answer_comes_late() {
        let namespaces: Namespaces<String> = Namespaces::default();
        let ttl = Duration::from_secs(3600);
        namespaces.note_absent("a", "j");
        assert!(namespaces.absent_lately("a", "j", ttl));
        namespaces.note_creating("a", "j");
        assert!(!namespaces.absent_lately("a", "j", ttl));
        assert!(namespaces.created_lately("a", "j", ttl));
        // A "no such object" read before the create lands after it: still not absent.
        namespaces.note_absent("a", "j");
        assert!(!namespaces.absent_lately("a", "j", ttl));
        // A create that made nothing: what the server says stands again.
        namespaces.forget_creating("a", "j");
        assert!(!namespaces.created_lately("a", "j", ttl));
        namespaces.note_absent("a", "j");
        assert!(namespaces.absent_lately("a", "j", ttl));
        assert!(!namespaces.absent_lately("a", "other", ttl));
    }
}
