//! The last status reported per job, so that every later answer builds on it (a terminal
//! status never changes; a start time is kept, an older copy of the object never takes a
//! status back).

use std::collections::{HashMap, VecDeque};

use kubeferry_core::{ExecutionInfo, JobState};

/// The last status reported per job, bounded: the oldest entries go first.
pub struct LastReported {
    capacity: usize,
    /// Boxed, as the reflectors' entries are: a map keeps room for more entries than it holds.
    entries: HashMap<String, Box<Reported>>,
    order: VecDeque<String>,
}

/// What was last reported for one job.
struct Reported {
    info: ExecutionInfo,
    /// The newest resourceVersion of the job's object a reported status was computed from.
    version: Option<u64>,
}

impl LastReported {
    /// An empty record keeping at most `capacity` jobs.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// What was last reported under `key`.
    pub fn get(&self, key: &str) -> Option<ExecutionInfo> {
        self.entries.get(key).map(|reported| reported.info.clone())
    }

    /// Whether a copy of the job's object at `version` is older than one a reported status was
    /// computed from: a watch cache may lag a fresh read, and its copy must not take the status
    /// back. resourceVersions are opaque to clients, but every API server kubeferry meets gives
    /// increasing integers; one that is not an integer is never judged older.
    pub fn is_older(&self, key: &str, version: Option<&str>) -> bool {
        let version = version.and_then(|v| v.parse::<u64>().ok());
        match (self.entries.get(key).and_then(|r| r.version), version) {
            (Some(reported), Some(version)) => version < reported,
            _ => false,
        }
    }

    /// Stores `info` under `key`, computed from the job's object at `version`.
    pub fn put(&mut self, key: String, info: ExecutionInfo, version: Option<&str>) {
        let version = version.and_then(|v| v.parse::<u64>().ok());
        match self.entries.get_mut(&key) {
            Some(reported) => {
                // Two answers computed at once: the one from the older copy does not replace
                // the other (checked here, under the lock, not only before mapping).
                let older =
                    matches!((reported.version, version), (Some(kept), Some(v)) if v < kept);
                // From the same copy of the object, a job that started does not go back to
                // queued: only pods seen at different moments (a fresh list, a lagging watch)
                // differ, and the one that saw the container run saw more. A new attempt
                // changes the object (its status counts), and may then queue again.
                let same =
                    matches!((reported.version, version), (Some(kept), Some(v)) if v == kept);
                let backwards = same
                    && reported.info.state == JobState::Started
                    && info.state == JobState::Queued;
                // A terminal status never changes, whatever copy another answer came from.
                if !older && !backwards && !reported.info.is_terminal() {
                    reported.info = info;
                    reported.version = reported.version.max(version);
                }
            }
            None => {
                let reported = Reported { info, version };
                self.entries.insert(key.clone(), Box::new(reported));
                self.order.push_back(key);
            }
        }
        while self.entries.len() > self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeferry_core::Reason;

    #[test]
    fn last_reported_is_bounded() {
        let mut reported = LastReported::new(2);
        let info = ExecutionInfo::new(JobState::Queued, Reason::Pending);
        for name in ["a", "b", "c"] {
            reported.put(name.into(), info.clone(), None);
        }
        assert!(reported.get("a").is_none());
        assert!(reported.get("b").is_some() && reported.get("c").is_some());
        reported.put("c".into(), info, None);
        assert_eq!(reported.order.len(), 2);
    }

    #[test]
    fn an_older_copy_of_the_object_is_recognised() {
        let mut reported = LastReported::new(4);
        let info = ExecutionInfo::new(JobState::Started, Reason::Running);
        assert!(!reported.is_older("a", Some("5")), "nothing reported yet");
        reported.put("a".into(), info.clone(), Some("10"));
        assert!(reported.is_older("a", Some("9")));
        assert!(!reported.is_older("a", Some("10")));
        assert!(!reported.is_older("a", Some("11")));
        assert!(!reported.is_older("a", None));
        assert!(!reported.is_older("a", Some("opaque")));
        // An answer from an older copy, computed while a newer one was, neither replaces the
        // newer answer nor lowers the mark.
        let stale = ExecutionInfo::new(JobState::Queued, Reason::Pending);
        reported.put("a".into(), stale, Some("7"));
        assert!(reported.is_older("a", Some("9")));
        assert_eq!(reported.get("a"), Some(info.clone()));
        // A terminal answer (from a deleted object's last copy, with no version) stands against
        // one computed at the same time from a newer copy.
        let cancelled = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled);
        reported.put("a".into(), cancelled.clone(), None);
        reported.put("a".into(), info, Some("12"));
        assert_eq!(reported.get("a"), Some(cancelled));
    }

    #[test]
    fn a_started_job_does_not_go_back_to_queued_from_the_same_copy() {
        let mut reported = LastReported::new(4);
        let started = ExecutionInfo::new(JobState::Started, Reason::Running);
        let waiting = ExecutionInfo::new(JobState::Queued, Reason::ContainerCreating);
        reported.put("a".into(), started.clone(), Some("10"));
        // Lagging pods, same Job: the start stands.
        reported.put("a".into(), waiting.clone(), Some("10"));
        assert_eq!(reported.get("a"), Some(started.clone()));
        // A newer Job (another attempt): it may queue again.
        reported.put("a".into(), waiting.clone(), Some("11"));
        assert_eq!(reported.get("a"), Some(waiting));
    }
}
