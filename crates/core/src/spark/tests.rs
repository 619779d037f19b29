//! Unit tests of reading SparkApplication views and of the Kubeflow retry rule.

use serde_json::{Value, json};

use super::kubeflow::retries_left;
use super::*;
use crate::status::JobState;

fn apache(status: Value) -> SparkAppView {
    SparkAppView::from_object(&json!({
        "apiVersion": "spark.apache.org/v1",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u-1",
                     "creationTimestamp": "2025-06-10T08:00:00Z"},
        "spec": {"applicationTolerations": {"restartConfig": {"restartPolicy": "OnFailure"}}},
        "status": status,
    }))
    .expect("an apache SparkApplication")
}

fn kubeflow(spec: Value, status: Value) -> SparkAppView {
    SparkAppView::from_object(&json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u-2"},
        "spec": spec,
        "status": status,
    }))
    .expect("a kubeflow SparkApplication")
}

fn state(summary: &str) -> Value {
    json!({"currentStateSummary": summary, "lastTransitionTime": "2025-06-10T08:00:01.5Z"})
}

#[test]
fn apache_history_is_ordered_by_its_numeric_keys() {
    let mut history = serde_json::Map::new();
    for i in 0..12 {
        let summary = if i == 11 {
            "RunningHealthy"
        } else {
            "DriverRequested"
        };
        history.insert(i.to_string(), state(summary));
    }
    history.insert("x".into(), state("Failed"));
    history.insert(
        "12".into(),
        json!({"lastTransitionTime": "2025-06-10T08:00:01Z"}),
    );
    let app = apache(json!({"stateTransitionHistory": history}));
    let SparkStatus::Apache(status) = &app.status else {
        panic!("readable: {:?}", app.status);
    };
    assert_eq!(status.history.len(), 12);
    assert_eq!(status.unreadable_history, 2);
    // No currentState: the newest readable history entry stands in.
    assert_eq!(status.current.summary, ApacheSummary::RunningHealthy);
    assert_eq!(
        status.current.last_transition_time,
        Some("2025-06-10T08:00:01.5Z".parse().expect("a time"))
    );
    assert_eq!(app.restart.policy, RestartPolicyView::OnFailure);
}

#[test]
fn statuses_that_cannot_be_read_are_not_absent() {
    for status in [json!({"phase": "Running"}), json!("Running"), json!([1])] {
        assert!(
            matches!(apache(status.clone()).status, SparkStatus::Unreadable(_)),
            "{status}"
        );
        assert!(
            matches!(
                kubeflow(json!({}), status.clone()).status,
                SparkStatus::Unreadable(_)
            ),
            "{status}"
        );
    }
    assert_eq!(apache(Value::Null).status, SparkStatus::Absent);
    let unknown = apache(json!({"currentState": state("Hibernating")}));
    let SparkStatus::Apache(status) = unknown.status else {
        panic!("readable");
    };
    assert_eq!(
        status.current.summary,
        ApacheSummary::Other("Hibernating".into())
    );
    assert_eq!(status.current.summary.as_str(), "Hibernating");
}

#[test]
fn kubeflow_states_and_names() {
    for name in [
        "",
        "SUBMITTED",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "SUBMISSION_FAILED",
        "PENDING_RERUN",
        "INVALIDATING",
        "SUCCEEDING",
        "FAILING",
        "SUSPENDING",
        "SUSPENDED",
        "RESUMING",
        "UNKNOWN",
        "HIBERNATING",
    ] {
        assert_eq!(KubeflowState::parse(name).as_str(), name);
    }
    assert_eq!(
        KubeflowState::parse("HIBERNATING"),
        KubeflowState::Other("HIBERNATING".into())
    );
}

/// The Kubeflow operator's own rule for "retries left": `Always` retries; `OnFailure` while the
/// attempts so far are at most the retries; `Never` (or no count) does not.
#[test]
fn kubeflow_retries_left_follows_the_operators_rule() {
    let cases = [
        // (restart policy, state, submissionAttempts, executionAttempts, retries left)
        (json!({"type": "Never"}), "SUBMISSION_FAILED", 1, 0, false),
        (json!({}), "FAILING", 1, 1, false),
        (json!({"type": "Always"}), "FAILING", 9, 9, true),
        (
            json!({"type": "OnFailure", "onSubmissionFailureRetries": 2}),
            "SUBMISSION_FAILED",
            2,
            0,
            true,
        ),
        (
            json!({"type": "OnFailure", "onSubmissionFailureRetries": 2}),
            "SUBMISSION_FAILED",
            3,
            0,
            false,
        ),
        (
            json!({"type": "OnFailure"}),
            "SUBMISSION_FAILED",
            1,
            0,
            false,
        ),
        (
            json!({"type": "OnFailure", "onFailureRetries": 1}),
            "FAILING",
            1,
            1,
            true,
        ),
        (
            json!({"type": "OnFailure", "onFailureRetries": 1}),
            "FAILING",
            2,
            2,
            false,
        ),
        (
            json!({"type": "OnFailure", "onFailureRetries": 1}),
            "RUNNING",
            1,
            1,
            false,
        ),
    ];
    for (policy, state, submissions, executions, expected) in cases {
        let app = kubeflow(
            json!({"restartPolicy": policy}),
            json!({"applicationState": {"state": state},
                   "submissionAttempts": submissions, "executionAttempts": executions}),
        );
        let SparkStatus::Kubeflow(status) = &app.status else {
            panic!("readable");
        };
        assert_eq!(
            retries_left(&app, status),
            expected,
            "{policy} {state} {submissions} {executions}"
        );
    }
}

#[test]
fn kubeflow_driver_pod_name_sources() {
    let name = |spec: Value, status: Value| kubeflow(spec, status).driver_pod_name;
    let state = json!({"applicationState": {"state": "RUNNING"}});
    assert_eq!(name(json!({}), state.clone()), Some("pi-driver".into()));
    assert_eq!(
        name(json!({"driver": {"podName": "custom"}}), state.clone()),
        Some("custom".into())
    );
    assert_eq!(
        name(
            json!({"sparkConf": {"spark.kubernetes.driver.pod.name": "from-conf"}}),
            state
        ),
        Some("from-conf".into())
    );
    assert_eq!(
        name(
            json!({"driver": {"podName": "custom"}}),
            json!({"applicationState": {"state": "RUNNING"}, "driverInfo": {"podName": "actual"}})
        ),
        Some("actual".into())
    );
}

/// The deletion time has whole seconds and the apache operator's times do not: an outcome in
/// the same second as the deletion is the application's own.
#[test]
fn an_outcome_in_the_second_of_the_deletion_stands() {
    let app = SparkAppView::from_object(&json!({
        "apiVersion": "spark.apache.org/v1",
        "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "ns", "uid": "u-1",
                     "creationTimestamp": "2025-06-10T08:00:00Z",
                     "deletionTimestamp": "2025-06-10T08:01:00Z",
                     "annotations": {"kubeferry.dev/cancel-requested": "2025-06-10T08:00:59Z"}},
        "spec": {},
        "status": {"currentState": {"currentStateSummary": "Succeeded",
                                    "lastTransitionTime": "2025-06-10T08:01:00.700000Z"}},
    }))
    .expect("an apache SparkApplication");
    let now = "2025-06-10T08:02:00Z".parse().expect("a time");
    let mapped = spark_status(
        &AppObservation::Present(&app),
        &[],
        now,
        &SparkMappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Succeeded);
}
