//! A bounded set of recent keys: the oldest are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys remembered for a while (warnings logged, Jobs just created, copies found gone), at
/// most `capacity` of them; safe to share.
pub(crate) struct Recent {
    capacity: usize,
    /// When each key was remembered, and the keys oldest first.
    kept: Mutex<(HashMap<String, Instant>, VecDeque<String>)>,
}

impl Recent {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            kept: Mutex::default(),
        }
    }

    /// Remembers `key`; true when it was not remembered already.
    pub(crate) fn insert(&self, key: String) -> bool {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (set, order) = &mut *kept;
        if set.contains_key(&key) {
            return false;
        }
        set.insert(key.clone(), Instant::now());
        order.push_back(key);
        while set.len() > self.capacity {
            match order.pop_front() {
                Some(oldest) => {
                    set.remove(&oldest);
                }
                None => break,
            }
        }
        true
    }

    /// Forgets `key`.
    pub(crate) fn remove(&self, key: &str) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (set, order) = &mut *kept;
        if set.remove(key).is_some() {
            order.retain(|k| k != key);
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.0.contains_key(key)
    }

    /// How long ago `key` was remembered, remembering it now (zero) if it was not.
    pub(crate) fn age(&self, key: String) -> Duration {
        let remembered = {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.0.get(&key).copied()
        };
        match remembered {
            Some(at) => at.elapsed(),
            None => {
                self.insert(key);
                Duration::ZERO
            }
        }
    }

    /// Whether `key` was remembered less than `window` ago.
    pub(crate) fn contains_within(&self, key: &str, window: Duration) -> bool {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.0.get(key).is_some_and(|at| at.elapsed() < window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_remembered_once_and_forgotten_oldest_first() {
        let recent = Recent::new(2);
        assert!(recent.insert("a".into()));
        assert!(!recent.insert("a".into()));
        assert!(recent.insert("b".into()));
        assert!(recent.insert("c".into()));
        assert!(!recent.contains("a"), "the oldest was forgotten");
        assert!(recent.insert("a".into()));
        assert!(!recent.contains("b"), "then the next oldest");
        recent.remove("c");
        assert!(!recent.contains("c"));
        assert!(recent.contains("a"));
        assert!(recent.insert("c".into()), "a removed key is new again");
        assert!(recent.contains_within("c", Duration::from_secs(3600)));
        assert!(
            !recent.contains_within("c", Duration::ZERO),
            "remembered too long ago"
        );
        assert!(!recent.contains_within("gone", Duration::from_secs(3600)));
    }

    #[test]
    fn a_keys_age_counts_from_when_it_was_first_remembered() {
        let recent = Recent::new(2);
        assert_eq!(recent.age("a".into()), Duration::ZERO, "remembered now");
        assert!(recent.contains("a"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(recent.age("a".into()) >= Duration::from_millis(5));
        recent.remove("a");
        assert_eq!(recent.age("a".into()), Duration::ZERO, "new again");
    }
}
