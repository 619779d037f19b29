//! The instant a status mapping answers for, and when its answer next changes by time alone.

use std::cell::Cell;
use std::time::Duration;

use jiff::Timestamp;

/// The instant a mapping answers for. It keeps the earliest deadline the mapping found still
/// ahead: with nothing else observed, the answer can change only once that deadline passes,
/// which is when whoever carries out the mapping's actions must look again.
pub(crate) struct Clock {
    now: Timestamp,
    next_change: Cell<Option<Timestamp>>,
}

impl Clock {
    pub(crate) fn at(now: Timestamp) -> Self {
        Clock {
            now,
            next_change: Cell::new(None),
        }
    }

    /// Whether the instant is before `since + period` (a deadline beyond the representable
    /// range is never reached). A deadline still ahead is a moment the answer may change.
    pub(crate) fn before_deadline(&self, since: Timestamp, period: Duration) -> bool {
        match deadline(since, period) {
            Some(deadline) if self.now < deadline => {
                let earliest = self.next_change.get().map_or(deadline, |d| d.min(deadline));
                self.next_change.set(Some(earliest));
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// The earliest deadline still ahead among those asked about.
    pub(crate) fn next_change(&self) -> Option<Timestamp> {
        self.next_change.get()
    }
}

/// `since + period`, or `None` beyond the representable range.
pub(crate) fn deadline(since: Timestamp, period: Duration) -> Option<Timestamp> {
    since.checked_add(period).ok()
}

/// How finely a mapping compares two times of different sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolution {
    /// As written: a Job's and its pods' times come from the same API server and kubelet.
    Exact,
    /// In whole seconds: the Spark operators write times finer than the API server's and the
    /// kubelet's whole seconds, so a finer difference between them means nothing.
    Seconds,
}

impl Resolution {
    /// Whether `a` is at or before `b`, compared at this resolution.
    pub(crate) fn at_or_before(self, a: Timestamp, b: Timestamp) -> bool {
        match self {
            Resolution::Exact => a <= b,
            Resolution::Seconds => a.as_second() <= b.as_second(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_deadline_still_ahead_is_the_next_change() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let since: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::at(now);
        assert_eq!(clock.next_change(), None);
        // Passed: not a change to come.
        assert!(!clock.before_deadline(since, Duration::from_secs(10)));
        assert_eq!(clock.next_change(), None);
        assert!(clock.before_deadline(since, Duration::from_secs(30)));
        assert!(clock.before_deadline(since, Duration::from_secs(20)));
        assert!(clock.before_deadline(since, Duration::from_secs(25)));
        assert_eq!(
            clock.next_change(),
            Some("2026-01-01T00:00:20Z".parse().unwrap())
        );
        // Beyond the representable range: never reached, never a change.
        let far = Clock::at(now);
        assert!(far.before_deadline(since, Duration::from_secs(u64::MAX)));
        assert_eq!(far.next_change(), None);
    }
}
