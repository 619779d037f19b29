//! The service's memory of how many jobs stood in each state, sample by sample over the last
//! hour: the dashboard's picture of it. Each replica samples its own watch caches (no request)
//! and forgets it all when it stops.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;
use kubeferry_core::JobState;

/// How long samples are kept.
pub const KEPT: Duration = Duration::from_secs(3600);

/// One sample: the count of jobs in each state, by namespace.
struct Sample {
    at: Timestamp,
    counts: Vec<(String, JobState, usize)>,
}

/// The samples of the last hour, oldest first.
#[derive(Default)]
pub struct StateHistory {
    samples: Mutex<VecDeque<Sample>>,
}

impl StateHistory {
    /// Keeps a sample of `counts` (namespace, state, jobs) taken `at`, and forgets those older
    /// than [`KEPT`].
    pub fn record(&self, at: Timestamp, counts: Vec<(String, JobState, usize)>) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.push_back(Sample { at, counts });
        let oldest = at - jiff::SignedDuration::try_from(KEPT).unwrap_or_default();
        while samples.front().is_some_and(|sample| sample.at < oldest) {
            samples.pop_front();
        }
    }

    /// Each sample's counts by state, summed over `namespaces`.
    pub fn samples(&self, namespaces: &[String]) -> Vec<(Timestamp, BTreeMap<String, usize>)> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples
            .iter()
            .map(|sample| {
                let mut counts = BTreeMap::new();
                for (namespace, state, count) in &sample.counts {
                    if namespaces.contains(namespace) {
                        *counts.entry(state.as_str().to_string()).or_default() += count;
                    }
                }
                (sample.at, counts)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_keeps_an_hour_and_sums_only_the_namespaces_asked() {
        let history = StateHistory::default();
        let start: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        for minute in 0..=61 {
            let at = start + jiff::SignedDuration::from_mins(minute);
            history.record(
                at,
                vec![
                    ("a".into(), JobState::Started, 2),
                    ("b".into(), JobState::Started, 5),
                    ("a".into(), JobState::Failed, minute as usize),
                ],
            );
        }
        let samples = history.samples(&["a".to_string()]);
        assert_eq!(samples.len(), 61, "the last hour, both ends included");
        assert_eq!(samples[0].0, start + jiff::SignedDuration::from_mins(1));
        let (_, last) = samples.last().unwrap();
        assert_eq!(last["STARTED"], 2);
        assert_eq!(last["FAILED"], 61);
        assert!(
            history
                .samples(&[])
                .iter()
                .all(|(_, counts)| counts.is_empty())
        );
    }
}
