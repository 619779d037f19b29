//! The last status reported per job, so that every later answer builds on it (a terminal
//! status never changes; a start time is kept).

use std::collections::{HashMap, VecDeque};

use kubeferry_core::ExecutionInfo;

/// The last status reported per job, bounded: the oldest entries go first.
pub struct LastReported {
    capacity: usize,
    entries: HashMap<String, ExecutionInfo>,
    order: VecDeque<String>,
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
        self.entries.get(key).cloned()
    }

    /// Records what was reported under `key`.
    pub fn put(&mut self, key: String, info: ExecutionInfo) {
        if self.entries.insert(key.clone(), info).is_none() {
            self.order.push_back(key);
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
    use kubeferry_core::{JobState, Reason};

    #[test]
    fn last_reported_is_bounded() {
        let mut reported = LastReported::new(2);
        let info = ExecutionInfo::new(JobState::Queued, Reason::Pending);
        for name in ["a", "b", "c"] {
            reported.put(name.into(), info.clone());
        }
        assert!(reported.get("a").is_none());
        assert!(reported.get("b").is_some() && reported.get("c").is_some());
        reported.put("c".into(), info);
        assert_eq!(reported.order.len(), 2);
    }
}
