//! Fixture loading shared by the container status tests: Job and pod YAML as a Kubernetes 1.33
//! API server returns them (`kubectl get -o yaml`), turned into views.

#![allow(dead_code)]

use std::path::PathBuf;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::container::{
    JobObservation, JobView, Mapped, MappingConfig, PodView, container_status,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use serde::Deserialize;

/// The fixtures' time origin: every fixture's Job was created at this instant.
pub const T0: &str = "2025-06-10T08:00:00Z";

/// `T0` plus `seconds`.
pub fn at(seconds: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().expect("T0 parses");
    t0.checked_add(jiff::SignedDuration::from_secs(seconds))
        .expect("in range")
}

/// The names of all fixtures.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
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

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/container")
}

/// `kubectl get pods -o yaml`: a `List` of pods.
#[derive(Deserialize)]
struct PodItems {
    items: Vec<Pod>,
}

/// The Job and pods of one fixture, as Kubernetes objects.
pub fn objects(case: &str) -> (Job, Vec<Pod>) {
    let dir = fixtures_dir().join(case);
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{case}/{file}: {e}"))
    };
    let job: Job = serde_saphyr::from_str(&read("job.yaml"))
        .unwrap_or_else(|e| panic!("{case}/job.yaml: {e}"));
    let pods: PodItems = serde_saphyr::from_str(&read("pods.yaml"))
        .unwrap_or_else(|e| panic!("{case}/pods.yaml: {e}"));
    (job, pods.items)
}

/// The views of one fixture.
pub fn views(case: &str) -> (JobView, Vec<PodView>) {
    let (job, pods) = objects(case);
    (
        JobView::from(&job),
        pods.iter().map(PodView::from).collect(),
    )
}

/// How the Job is observed.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// It exists.
    Present,
    /// It is gone; `final_state` tells whether the view is the one its DELETED event carried.
    Vanished { final_state: bool },
}

/// Maps `job` and `pods` as observed by `seen`.
pub fn map_views(
    job: &JobView,
    pods: &[PodView],
    seen: Seen,
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<Mapped> {
    let observed = match seen {
        Seen::Present => JobObservation::Present(job),
        Seen::Vanished { final_state } => JobObservation::Vanished {
            last_seen: job,
            final_state,
        },
    };
    container_status(&observed, pods, now, config, previous)
}

/// Maps a fixture with the default configuration.
pub fn map(case: &str, seen: Seen, now: Timestamp) -> Option<Mapped> {
    map_with(case, seen, now, &MappingConfig::default(), None)
}

/// Maps a fixture.
pub fn map_with(
    case: &str,
    seen: Seen,
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<Mapped> {
    let (job, pods) = views(case);
    map_views(&job, &pods, seen, now, config, previous)
}

/// An expected status, built field by field.
pub struct Expect(ExecutionInfo);

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

    /// Started at `T0 + seconds`.
    pub fn started(mut self, seconds: i64) -> Self {
        self.0.started_at = Some(at(seconds));
        self
    }

    /// Finished at `T0 + seconds`.
    pub fn finished(mut self, seconds: i64) -> Self {
        self.0.finished_at = Some(at(seconds));
        self
    }

    /// The expected status.
    pub fn info(self) -> ExecutionInfo {
        self.0
    }
}

/// Asserts that `mapped` reports `expected`, with no warning and nothing to record.
#[track_caller]
pub fn assert_reports(mapped: Option<Mapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert!(!mapped.must_record, "unexpectedly decided by kubeferry");
}

/// Asserts that `mapped` reports `expected` decided by one of kubeferry's own rules, which the
/// caller must record.
#[track_caller]
pub fn assert_recorded(mapped: Option<Mapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert!(
        mapped.must_record,
        "expected an outcome the caller must record"
    );
}
