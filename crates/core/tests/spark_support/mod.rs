//! Fixture loading shared by the Spark status tests: SparkApplications of both operators and
//! their driver pods as a Kubernetes 1.33 API server returns them (`kubectl get -o yaml`),
//! turned into views.

#![allow(dead_code)]

use std::path::PathBuf;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::spark::{
    AppObservation, DriverView, SparkAppView, SparkMapped, SparkMappingConfig, spark_status,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};

/// The fixtures' time origin: every fixture's SparkApplication was created at this instant.
pub const T0: &str = "2025-06-10T08:00:00Z";

/// `T0` plus `seconds`.
pub fn at(seconds: i64) -> Timestamp {
    let t0: Timestamp = T0.parse().expect("T0 parses");
    t0.checked_add(jiff::SignedDuration::from_secs(seconds))
        .expect("in range")
}

/// `T0` plus `seconds` and `micros` microseconds (the apache operator's transition times).
pub fn at_micros(seconds: i64, micros: i64) -> Timestamp {
    at(seconds)
        .checked_add(jiff::SignedDuration::from_micros(micros))
        .expect("in range")
}

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spark")
}

/// The fixtures of an operator (`apache` or `kubeflow`).
pub fn fixture_names(operator: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join(operator))
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

/// How the application is observed.
#[derive(Clone, Copy, Debug)]
pub enum Seen {
    /// It exists.
    Present,
    /// It is gone; `final_state` tells whether the view is the one its DELETED event carried.
    Vanished { final_state: bool },
}

/// Maps views as observed by `seen`.
pub fn map_views(
    app: &SparkAppView,
    drivers: &[DriverView],
    seen: Seen,
    now: Timestamp,
    previous: Option<&ExecutionInfo>,
) -> Option<SparkMapped> {
    let observed = match seen {
        Seen::Present => AppObservation::Present(app),
        Seen::Vanished { final_state } => AppObservation::Vanished {
            last_seen: app,
            final_state,
        },
    };
    spark_status(
        &observed,
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

    /// The expected status.
    pub fn info(self) -> ExecutionInfo {
        self.0
    }
}

/// Asserts that `mapped` reports `expected`, with no warning and no action.
#[track_caller]
pub fn assert_reports(mapped: Option<SparkMapped>, expected: Expect) {
    let mapped = mapped.expect("the job is mapped");
    assert_eq!(mapped.info, expected.0);
    assert_eq!(mapped.warning, None, "unexpected warning");
    assert_eq!(mapped.action, None, "unexpected action");
}
