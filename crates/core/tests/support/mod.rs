//! Fixture loading shared by the container status tests: Job and pod YAML as a Kubernetes 1.33
//! API server returns them (`kubectl get -o yaml`), turned into views.

#![allow(dead_code)]

use std::path::PathBuf;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::ExecutionInfo;
use kubeferry_core::container::{JobView, Mapped, MappingConfig, PodView, container_status};
use serde::Deserialize;

// Not every test binary that includes this module uses each of them.
#[allow(unused_imports)]
pub use crate::common::{Expect, Seen, at, expect};

/// The names of all fixtures.
pub fn fixture_names() -> Vec<String> {
    crate::common::names_in(&fixtures_dir())
}

fn fixtures_dir() -> PathBuf {
    crate::common::kind_dir("container")
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

/// Maps `job` and `pods` as observed by `seen`.
pub fn map_views(
    job: &JobView,
    pods: &[PodView],
    seen: Seen,
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<Mapped> {
    container_status(&seen.observe(job), pods, now, config, previous)
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

/// Asserts that `mapped` reports `expected`, with no warning and nothing to record.
#[track_caller]
pub fn assert_reports(mapped: Option<Mapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert!(!mapped.must_record(), "unexpectedly decided by kubeferry");
}

/// Asserts that `mapped` reports `expected` decided by one of kubeferry's own rules, which the
/// caller must record.
#[track_caller]
pub fn assert_recorded(mapped: Option<Mapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert!(
        mapped.must_record(),
        "expected an outcome the caller must record"
    );
}
