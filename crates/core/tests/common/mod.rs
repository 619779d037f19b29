//! What the fixture-based tests of both kinds share: the fixtures' clock, how an object is observed, and expected statuses.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use kubeferry_core::observation::Observation;
use kubeferry_core::{ExecutionInfo, JobState, Reason};

/// The fixtures' time origin: every fixture's object was created at this instant.
pub const T0: &str = "2025-06-10T08:00:00Z";

/// `T0` plus `seconds`.
pub fn at(seconds: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().expect("T0 parses");
    t0.checked_add(jiff::SignedDuration::from_secs(seconds))
        .expect("in range")
}

/// The fixtures of a kind (`container`, `spark`).
pub fn kind_dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
}

/// The names of the fixtures in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixtures directory")
        .map(|entry| {
            entry
                .expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// How the object is observed.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// It exists.
    Present,
    /// It is gone; `final_state` tells whether the view is the one its DELETED event carried.
    Vanished { final_state: bool },
}

impl Seen {
    /// Gone from now on (a view seen gone stays gone).
    pub fn vanish(&mut self, final_state: bool) {
        if matches!(self, Seen::Present) {
            *self = Seen::Vanished { final_state };
        }
    }

    /// `view` observed so.
    pub fn observe<V>(self, view: &V) -> Observation<'_, V> {
        match self {
            Seen::Present => Observation::Present(view),
            Seen::Vanished { final_state } => Observation::Vanished {
                last_seen: view,
                final_state,
            },
        }
    }
}

/// An expected status, built field by field.
pub struct Expect(pub ExecutionInfo);

/// Expects `state` with `reason`.
pub fn expect(state: JobState, reason: Reason) -> Expect {
    Expect(ExecutionInfo::new(state, reason))
}

impl Expect {
    /// With this message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.0.message = message.into();
        self
    }

    /// With this exit code.
    pub fn exit_code(mut self, code: i32) -> Self {
        self.0.exit_code = Some(code);
        self
    }

    /// Started at this time.
    pub fn started_at(mut self, at: Timestamp) -> Self {
        self.0.started_at = Some(at);
        self
    }

    /// Started at `T0 + seconds`.
    pub fn started(self, seconds: i64) -> Self {
        self.started_at(at(seconds))
    }

    /// Finished at this time.
    pub fn finished_at(mut self, at: Timestamp) -> Self {
        self.0.finished_at = Some(at);
        self
    }

    /// Finished at `T0 + seconds`.
    pub fn finished(self, seconds: i64) -> Self {
        self.finished_at(at(seconds))
    }

    /// With these last words (the main container's termination message as kept).
    pub fn last_words(mut self, words: impl Into<String>) -> Self {
        self.0.last_words = Some(words.into());
        self
    }

    /// The expected status.
    pub fn info(self) -> ExecutionInfo {
        self.0
    }
}
