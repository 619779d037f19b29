//! Fixture loading shared by the Spark status tests: SparkApplications of both operators and
//! their driver pods as a Kubernetes 1.33 API server returns them (`kubectl get -o yaml`),
//! turned into views.

#![allow(dead_code)]

use std::path::PathBuf;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::ExecutionInfo;
use kubeferry_core::spark::{
    DriverView, SparkAppView, SparkMapped, SparkMappingConfig, spark_status,
};

// Not every test binary that includes this module uses each of them.
#[allow(unused_imports)]
pub use crate::common::{Expect, Seen, at, expect};

/// `T0` plus `seconds` and `micros` microseconds (the apache operator's transition times).
pub fn at_micros(seconds: i64, micros: i64) -> Timestamp {
    at(seconds)
        .checked_add(jiff::SignedDuration::from_micros(micros))
        .expect("in range")
}

fn fixtures_dir() -> PathBuf {
    crate::common::kind_dir("spark")
}

/// The fixtures of an operator (`apache` or `kubeflow`).
pub fn fixture_names(operator: &str) -> Vec<String> {
    crate::common::names_in(&fixtures_dir().join(operator))
}

/// The SparkApplication (as JSON) and driver pod (if the fixture has one) of a fixture.
pub fn objects(operator: &str, case: &str) -> (serde_json::Value, Option<Pod>) {
    let dir = fixtures_dir().join(operator).join(case);
    let app_text = std::fs::read_to_string(dir.join("app.yaml"))
        .unwrap_or_else(|e| panic!("{operator}/{case}/app.yaml: {e}"));
    let app: serde_json::Value = serde_saphyr::from_str(&app_text)
        .unwrap_or_else(|e| panic!("{operator}/{case}/app.yaml: {e}"));
    let driver = std::fs::read_to_string(dir.join("driver.yaml"))
        .ok()
        .map(|text| {
            serde_saphyr::from_str::<Pod>(&text)
                .unwrap_or_else(|e| panic!("{operator}/{case}/driver.yaml: {e}"))
        });
    (app, driver)
}

/// The views of a fixture.
pub fn views(operator: &str, case: &str) -> (SparkAppView, Vec<DriverView>) {
    let (app, driver) = objects(operator, case);
    let view = SparkAppView::from_object(&app).expect("a SparkApplication");
    (view, driver.iter().map(DriverView::from).collect())
}

/// Maps views as observed by `seen`.
pub fn map_views(
    app: &SparkAppView,
    drivers: &[DriverView],
    seen: Seen,
    now: Timestamp,
    previous: Option<&ExecutionInfo>,
) -> Option<SparkMapped> {
    spark_status(
        &seen.observe(app),
        drivers,
        now,
        &SparkMappingConfig::default(),
        previous,
    )
}

/// Maps a fixture, with its driver pod if it has one.
pub fn map(operator: &str, case: &str, seen: Seen, now: Timestamp) -> Option<SparkMapped> {
    let (app, drivers) = views(operator, case);
    map_views(&app, &drivers, seen, now, None)
}

/// Maps a fixture without its driver pod (gone, or not readable).
pub fn map_without_driver(
    operator: &str,
    case: &str,
    seen: Seen,
    now: Timestamp,
) -> Option<SparkMapped> {
    let (app, _) = views(operator, case);
    map_views(&app, &[], seen, now, None)
}

/// Asserts that `mapped` reports `expected`, with no warning and no action.
#[track_caller]
pub fn assert_reports(mapped: Option<SparkMapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert_eq!(mapped.action, None, "unexpected action");
}
