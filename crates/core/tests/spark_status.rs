//! The Spark status mapping, one test per situation, on SparkApplications of both operators
//! and their driver pods as a Kubernetes 1.33 API server returns them (fixtures under
//! `tests/fixtures/spark/<operator>/<case>/`). The tests named after a review point of the
//! Gravitino executor each prove that point holds.

mod common;
mod spark_support;

use kubeferry_core::spark::{
    AppObservation, DriverView, SparkAction, SparkAppView, SparkMappingConfig, SparkOperator,
    SparkStatus, pick_driver, spark_status,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use spark_support::{
    Seen, assert_reports, at, at_micros, expect, map, map_views, map_without_driver, objects, views,
};

const APACHE: &str = "apache";
const KUBEFLOW: &str = "kubeflow";

const APACHE_FAILED: &str = "Failed: Driver has one or more failed critical container(s), refer last observed status for details.";
const DIVISION: &str = "Exception in thread \"main\" java.lang.ArithmeticException: / by zero\n\tat org.apache.spark.examples.SparkPi$.main(SparkPi.scala:38)";
const APACHE_TIMED_OUT: &str = "DriverStartTimedOut: The driver has not responded to the initial health check request within the allotted start-up time. This can be configured by setting .spec.applicationTolerations.applicationTimeoutConfig.";
const SUBMISSION_ERROR: &str = "failed to run spark-submit: exit status 1: Exception in thread \"main\" io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: POST at: https://10.96.0.1/api/v1/namespaces/analytics/pods. Message: pods \"spark-pi-driver\" is forbidden: exceeded quota: compute-resources.";

fn started(seconds: i64) -> ExecutionInfo {
    let mut info = ExecutionInfo::new(JobState::Started, Reason::Running);
    info.started_at = Some(at(seconds));
    info
}

#[test]
fn every_fixture_reads_and_maps() {
    for operator in [APACHE, KUBEFLOW] {
        for case in spark_support::fixture_names(operator) {
            let (app, drivers) = views(operator, &case);
            assert_eq!(app.operator.as_str(), operator, "{case}");
            assert!(!app.uid.is_empty(), "{operator}/{case}: a uid");
            assert_eq!(app.job_id.as_deref(), Some(case.replace('_', "-").as_str()));
            for driver in &drivers {
                assert_eq!(
                    driver.owner_uid.as_deref(),
                    Some(app.uid.as_str()),
                    "{case}"
                );
                if let Some(container) = &driver.container {
                    assert_eq!(container.name, "spark-kubernetes-driver", "{case}");
                }
            }
            let mapped = map_views(&app, &drivers, Seen::Present, at(3600), None);
            assert!(
                mapped.is_some(),
                "{operator}/{case}: a present application is mapped"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Review points.

/// A status this version cannot read (`{"phase": "Running"}`, no `currentState`) is not "no
/// status": the job stays unfinished and the caller is warned, however long it lasts, and
/// nothing is deleted.
#[test]
fn unparseable_status_is_never_no_status() {
    for operator in [APACHE, KUBEFLOW] {
        let (app, _) = views(operator, "unparseable_status");
        assert!(
            matches!(app.status, SparkStatus::Unreadable(_)),
            "{operator}"
        );
        for now in [at(1), at(601), at(86_400)] {
            let mapped = map_views(&app, &[], Seen::Present, now, None).expect("mapped");
            assert_eq!(mapped.info.state, JobState::Queued, "{operator}");
            assert_eq!(mapped.info.reason, Reason::UnrecognizedStatus);
            assert_eq!(mapped.action, None, "{operator}: never deleted");
            let warning = mapped.warning.expect("a warning");
            assert!(
                warning.contains("cannot be read") && warning.contains(r#"{"phase":"Running"}"#),
                "{warning}"
            );
        }
        // A job that had started keeps its state and start.
        let mapped =
            map_views(&app, &[], Seen::Present, at(3600), Some(&started(5))).expect("mapped");
        assert_eq!(mapped.info.state, JobState::Started);
        assert_eq!(mapped.info.started_at, Some(at(5)));
        assert_eq!(mapped.action, None);
    }
}

/// Only an absent status past the no-status timeout fails the job, and the failure is
/// reported only after the SparkApplication is deleted: until then the status stays QUEUED
/// and the action tells the caller to record the outcome, then delete, then report.
#[test]
fn absent_status_fails_only_after_the_timeout_and_the_deletion() {
    for operator in [APACHE, KUBEFLOW] {
        assert_reports(
            map(operator, "no_status", Seen::Present, at(599)),
            expect(JobState::Queued, Reason::Pending).message(format!(
                "waiting for the {operator} operator to pick up the application (no status yet)"
            )),
        );
        let mapped = map(operator, "no_status", Seen::Present, at(600)).expect("mapped");
        assert!(!mapped.info.is_terminal(), "not failed before the deletion");
        assert_eq!(mapped.info.state, JobState::Queued);
        let Some(SparkAction::RecordOutcomeAndDeleteApp { outcome }) = &mapped.action else {
            panic!("{operator}: expected the record-and-delete action, got {mapped:?}");
        };
        let (app, _) = views(operator, "no_status");
        assert_eq!(
            *outcome,
            expect(JobState::Failed, Reason::NoStatusTimeout)
                .message(format!(
                    "the {operator} operator wrote no status for SparkApplication {} within 600s of its creation: is the operator running, and does it watch namespace analytics?",
                    app.name
                ))
                .finished(600)
                .info()
        );
        assert_eq!(
            mapped.action.as_ref().map(SparkAction::outcome),
            Some(outcome)
        );
    }
}

/// The recorded no-status outcome is what every replica reports once the application is being
/// deleted or gone; before that, whichever replica sees the record completes the deletion.
#[test]
fn recorded_no_status_outcome_counts_once_the_application_is_deleted() {
    let recorded = expect(JobState::Failed, Reason::NoStatusTimeout)
        .message("the apache operator wrote no status for SparkApplication spark-pi within 600s of its creation")
        .finished(600);
    let mapped = map(APACHE, "no_status_recorded", Seen::Present, at(3600)).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(
        mapped.action,
        Some(SparkAction::RecordOutcomeAndDeleteApp {
            outcome: recorded.0.clone()
        })
    );
    assert_reports(
        map(
            APACHE,
            "no_status_recorded_deleting",
            Seen::Present,
            at(3600),
        ),
        expect(JobState::Failed, Reason::NoStatusTimeout)
            .message(recorded.0.message.clone())
            .finished(600),
    );
    // Gone, even with a view that may be stale: the record was made before any deletion.
    assert_reports(
        map(
            APACHE,
            "no_status_recorded",
            Seen::Vanished { final_state: false },
            at(3600),
        ),
        recorded,
    );
}

/// A record made while the operator was silent is void once the operator wrote a status (the
/// caller's delete, with a resourceVersion precondition, failed with 409): the job goes on.
#[test]
fn a_status_written_after_the_record_voids_it() {
    let mapped = map(APACHE, "status_after_record", Seen::Present, at(3600)).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.reason, Reason::Pending);
    assert_eq!(
        mapped.info.message,
        "DriverRequested: Requested driver from resource scheduler."
    );
    assert_eq!(mapped.action, None);
    assert!(
        mapped
            .warning
            .is_some_and(|w| w.contains("the record is void")),
        "the caller is told"
    );
}

/// A FAILED application whose driver pod still runs (kept after a start timeout) is reported
/// failed only once the caller deleted the driver: until then the action says which pod.
#[test]
fn failed_application_with_a_running_driver_gets_its_driver_deleted() {
    let cases = [
        (
            APACHE,
            "driver_start_timed_out_driver_pending",
            JobState::Queued,
        ),
        (KUBEFLOW, "failed_driver_running", JobState::Started),
    ];
    for (operator, case, holding) in cases {
        let (app, mut drivers) = views(operator, case);
        let driver = drivers[0].clone();
        let mapped = map_views(&app, &drivers, Seen::Present, at(400), None).expect("mapped");
        assert_eq!(mapped.info.state, holding, "{case}: not failed yet");
        assert!(
            mapped.info.message.contains(&format!(
                "but driver pod {} still runs: stopping it before reporting the failure",
                driver.name
            )),
            "{}",
            mapped.info.message
        );
        let Some(SparkAction::DeleteDriverPod { name, uid, outcome }) = mapped.action else {
            panic!("{case}: expected the delete-driver action");
        };
        assert_eq!((name, uid), (driver.name.clone(), driver.uid.clone()));
        assert_eq!(outcome.state, JobState::Failed);

        // The caller deleted it: the next observation reports the same outcome.
        drivers[0].deletion_timestamp = Some(at(401));
        let mapped = map_views(&app, &drivers, Seen::Present, at(402), None).expect("mapped");
        assert_eq!(mapped.info, outcome, "{case}");
        assert_eq!(mapped.action, None);
    }
    let action = map(
        APACHE,
        "driver_start_timed_out_driver_pending",
        Seen::Present,
        at(400),
    )
    .and_then(|m| m.action)
    .expect("an action");
    assert_eq!(
        action.outcome(),
        &expect(JobState::Failed, Reason::DriverStartTimedOut)
            .message(APACHE_TIMED_OUT)
            .finished_at(at_micros(301, 145_992))
            .info()
    );
}

/// A stale cached copy of an application that another replica cancelled (and that is gone
/// now) never turns the job into FAILED: "no such job", which a cancelling caller settles as
/// CANCELLED. Only a final state (a DELETED event) proves no cancel was requested.
#[test]
fn stale_cached_copy_never_turns_a_cancelled_job_into_failed() {
    for operator in [APACHE, KUBEFLOW] {
        for case in ["no_status", "running"] {
            let stale = map(
                operator,
                case,
                Seen::Vanished { final_state: false },
                at(3600),
            );
            assert_eq!(stale, None, "{operator}/{case}");
        }
        let mapped = map(
            operator,
            "running",
            Seen::Vanished { final_state: true },
            at(3600),
        )
        .expect("mapped");
        assert_eq!(
            (mapped.info.state, mapped.info.reason),
            (JobState::Failed, Reason::DeletedExternally)
        );
    }
}

/// Cancel marks keep the real outcome: an outcome recorded before the cancel took effect wins;
/// one recorded after it was caused by the cancel.
#[test]
fn cancel_mark_races_keep_the_real_outcome() {
    // Succeeded at 66, cancel marked at 70, deleted at 71.
    assert_reports(
        map(APACHE, "cancel_after_success", Seen::Present, at(80)),
        expect(JobState::Succeeded, Reason::Completed)
            .message("Succeeded: Spark application completed successfully.")
            .exit_code(0)
            .started(5)
            .finished(65),
    );
    assert_reports(
        map(
            APACHE,
            "cancel_after_success",
            Seen::Vanished { final_state: false },
            at(80),
        ),
        expect(JobState::Succeeded, Reason::Completed)
            .message("Succeeded: Spark application completed successfully.")
            .exit_code(0)
            .started(5)
            .finished(65),
    );
    // Deleted at 60 (cancel marked at 59); the driver then exited 0 and the operator wrote
    // Succeeded at 62: the stop caused it.
    assert_reports(
        map(APACHE, "success_after_deletion", Seen::Present, at(80)),
        expect(JobState::Cancelled, Reason::Cancelled)
            .message("cancel requested at 2025-06-10T08:00:59Z; the SparkApplication was deleted at 2025-06-10T08:01:00Z")
            .started(5)
            .finished(60),
    );
}

/// The driver pod lookup may fail (a 403 without pods list, the pod already gone): the mapping
/// still reaches every outcome without it, so a job never stays STARTED for want of a driver.
#[test]
fn no_driver_view_still_reaches_the_outcome() {
    assert_reports(
        map_without_driver(APACHE, "failed_retained", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(format!("{APACHE_FAILED} (driver: exit code 1: {DIVISION})"))
            .exit_code(1)
            .last_words(DIVISION)
            .started(5)
            .finished(40),
    );
    assert_reports(
        map_without_driver(
            APACHE,
            "driver_start_timed_out_driver_pending",
            Seen::Present,
            at(3600),
        ),
        expect(JobState::Failed, Reason::DriverStartTimedOut)
            .message(APACHE_TIMED_OUT)
            .finished_at(at_micros(301, 145_992)),
    );
    // The Kubeflow operator words the driver's end in its message.
    assert_reports(
        map_without_driver(KUBEFLOW, "failed", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(
                "the application failed: driver container failed with ExitCode: 1, Reason: Error",
            )
            .exit_code(1)
            .finished(41),
    );
    assert_reports(
        map_without_driver(KUBEFLOW, "driver_oom_killed", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::OomKilled)
            .message("the application failed: driver container failed with ExitCode: 137, Reason: OOMKilled")
            .exit_code(137)
            .finished(41),
    );
    // A driver the kubelet could not find when its pod was stopped did not end on its own:
    // the operator's `ContainerStatusUnknown` says the pod was disrupted.
    assert_reports(
        map_without_driver(KUBEFLOW, "driver_lost", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::Disrupted)
            .message("the application failed: driver container failed with ExitCode: 137, Reason: ContainerStatusUnknown")
            .exit_code(137)
            .finished(35),
    );
    // As is one the kubelet stopped with SIGTERM (143) or SIGKILL (137).
    assert_reports(
        map_without_driver(KUBEFLOW, "driver_evicted", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::Disrupted)
            .message(
                "the application failed: driver container failed with ExitCode: 143, Reason: Error",
            )
            .exit_code(143)
            .finished(35),
    );
    // As is one whose pod the operator found gone before it saw the driver end.
    assert_reports(
        map_without_driver(KUBEFLOW, "driver_pod_not_found", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::Disrupted)
            .message("the application failed: driver pod not found")
            .finished(35),
    );
    assert_reports(
        map_without_driver(KUBEFLOW, "completed", Seen::Present, at(3600)),
        expect(JobState::Succeeded, Reason::Completed).finished(66),
    );
    // Running: the apache history tells when the driver became ready.
    assert_reports(
        map_without_driver(APACHE, "running", Seen::Present, at(60)),
        expect(JobState::Started, Reason::Running)
            .message("RunningHealthy: Application is running healthy.")
            .started_at(at_micros(9, 127_455)),
    );
    assert_reports(
        map_without_driver(KUBEFLOW, "running", Seen::Present, at(60)),
        expect(JobState::Started, Reason::Running),
    );
}

// ---------------------------------------------------------------------------------------------
// The apache operator's states.

#[test]
fn apache_queued_states() {
    assert_reports(
        map(APACHE, "submitted", Seen::Present, at(1)),
        expect(JobState::Queued, Reason::Pending)
            .message("Submitted: Spark application has been created on Kubernetes Cluster."),
    );
    assert_reports(
        map(APACHE, "driver_unschedulable", Seen::Present, at(60)),
        expect(JobState::Queued, Reason::Unschedulable).message(
            "DriverRequested: Requested driver from resource scheduler.; driver pod spark-pi-8a026a9e-0-driver: 0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
        ),
    );
}

#[test]
fn apache_running() {
    assert_reports(
        map(APACHE, "running", Seen::Present, at(60)),
        expect(JobState::Started, Reason::Running)
            .message("RunningHealthy: Application is running healthy.")
            .started(5),
    );
    assert_reports(
        map(APACHE, "cancel_requested", Seen::Present, at(60)),
        expect(JobState::Cancelling, Reason::CancelRequested)
            .message("cancel requested at 2025-06-10T08:00:30Z; waiting for the SparkApplication to be deleted")
            .started(5),
    );
}

/// After `ResourceReleased` or `TerminatedWithoutReleaseResources` the outcome is the last
/// outcome state of the last attempt, with the driver's exit code and times from the driver
/// status the operator recorded with it.
#[test]
fn apache_released_applications_report_their_last_outcome() {
    assert_reports(
        map(APACHE, "succeeded", Seen::Present, at(3600)),
        expect(JobState::Succeeded, Reason::Completed)
            .message("Succeeded: Spark application completed successfully.")
            .exit_code(0)
            .started(5)
            .finished(65),
    );
    assert_reports(
        map(APACHE, "failed", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(format!("{APACHE_FAILED} (driver: exit code 1: {DIVISION})"))
            .exit_code(1)
            .last_words(DIVISION)
            .started(5)
            .finished(40),
    );
    assert_reports(
        map(APACHE, "failed_retained", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(format!("{APACHE_FAILED} (driver: exit code 1: {DIVISION})"))
            .exit_code(1)
            .last_words(DIVISION)
            .started(5)
            .finished(40),
    );
    // Two attempts: the second one's failure, and the first attempt's start.
    assert_reports(
        map(APACHE, "failed_after_last_restart", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(format!(
                "{APACHE_FAILED} (driver: exit code 1: java.lang.IllegalStateException: input missing)"
            ))
            .exit_code(1)
            .last_words("java.lang.IllegalStateException: input missing")
            .started(5)
            .finished(120),
    );
    // Removed by its TTL: the DELETED event's final state keeps the outcome.
    assert_reports(
        map(
            APACHE,
            "succeeded",
            Seen::Vanished { final_state: true },
            at(7200),
        ),
        expect(JobState::Succeeded, Reason::Completed)
            .message("Succeeded: Spark application completed successfully.")
            .exit_code(0)
            .started(5)
            .finished(65),
    );
}

#[test]
fn apache_failure_states_and_their_reasons() {
    assert_reports(
        map(APACHE, "driver_start_timed_out", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::DriverStartTimedOut)
            .message(APACHE_TIMED_OUT)
            .finished_at(at_micros(301, 145_992)),
    );
    assert_reports(
        map(APACHE, "driver_evicted", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::Evicted)
            .message("DriverEvicted: Driver removed. This could caused by 'exit' called in driver process with non-zero code, involuntary disruptions or unintentional destroy behavior, check Kubernetes events for more details. (driver: exit code 143)")
            .exit_code(143)
            .started(5)
            .finished(33),
    );
    assert_reports(
        map(APACHE, "executors_start_timed_out", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::ExecutorsStartTimedOut)
            .message("ExecutorsStartTimedOut: The Spark application failed to get enough executors in the given time threshold.")
            .started_at(at_micros(9, 127_455))
            .finished_at(at_micros(309, 440_101)),
    );
    assert_reports(
        map(APACHE, "scheduling_failure", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SchedulingFailure)
            .message("SchedulingFailure: Failed to request driver from scheduler backend. StatusCode: 403, exceeded quota: compute-resources, requested: limits.memory=896Mi, used: limits.memory=7680Mi, limited: limits.memory=8Gi")
            .finished_at(at_micros(1, 7_781)),
    );
}

/// With `restartPolicy: OnFailure` a `Failed` state may be followed by a restart: not an
/// outcome until the operator releases the application; a restarted attempt runs on.
#[test]
fn apache_failure_the_operator_may_restart_is_not_terminal() {
    assert_reports(
        map(APACHE, "failed_may_restart", Seen::Present, at(42)),
        expect(JobState::Started, Reason::Running)
            .message(format!(
                "the attempt ended ({APACHE_FAILED}); the operator may restart the application"
            ))
            .started(5),
    );
    assert_reports(
        map(APACHE, "restarted_after_failure", Seen::Present, at(120)),
        expect(JobState::Started, Reason::Running)
            .message("RunningHealthy: Application is running healthy.")
            .started(5),
    );
}

/// A state this version does not know: STARTED if the history shows a started state, else
/// QUEUED, with a warning; never terminal.
#[test]
fn apache_unknown_states_follow_the_history() {
    let mapped = map(APACHE, "unknown_state", Seen::Present, at(60)).expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason),
        (JobState::Started, Reason::UnrecognizedStatus)
    );
    assert_eq!(mapped.info.started_at, Some(at(5)));
    assert!(
        mapped
            .warning
            .is_some_and(|w| w.contains("RunningWithDegradedShuffle"))
    );
    let mapped = map(APACHE, "unknown_state_before_start", Seen::Present, at(60)).expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason),
        (JobState::Queued, Reason::UnrecognizedStatus)
    );
    assert!(mapped.warning.is_some_and(|w| w.contains("AwaitingQuota")));
}

#[test]
fn apache_cancel_and_deletion() {
    assert_reports(
        map(APACHE, "cancelled_deleting", Seen::Present, at(40)),
        expect(JobState::Cancelled, Reason::Cancelled)
            .message("cancel requested at 2025-06-10T08:00:30Z; the SparkApplication was deleted at 2025-06-10T08:00:31Z")
            .started(5)
            .finished(31),
    );
    assert_reports(
        map(APACHE, "deleted_externally", Seen::Present, at(60)),
        expect(JobState::Failed, Reason::DeletedExternally)
            .message(
                "the SparkApplication was deleted at 2025-06-10T08:00:50Z without a cancel request",
            )
            .started(5)
            .finished(50),
    );
    // No status yet, cancel requested: the cancel decides, not the no-status timeout.
    assert_reports(
        map(APACHE, "no_status_cancel_requested", Seen::Present, at(3600)),
        expect(JobState::Cancelling, Reason::CancelRequested).message(
            "cancel requested at 2025-06-10T08:11:40Z; waiting for the SparkApplication to be deleted",
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// The Kubeflow operator's states.

#[test]
fn kubeflow_progress() {
    assert_reports(
        map(KUBEFLOW, "new", Seen::Present, at(1)),
        expect(JobState::Queued, Reason::Pending)
            .message("waiting for the kubeflow operator to submit the application"),
    );
    assert_reports(
        map(KUBEFLOW, "submitted", Seen::Present, at(3)),
        expect(JobState::Queued, Reason::ContainerCreating).message(
            "submitted; waiting for the driver to run; driver pod spark-pi-e06f8cfc-driver: ContainerCreating",
        ),
    );
    assert_reports(
        map(KUBEFLOW, "running", Seen::Present, at(60)),
        expect(JobState::Started, Reason::Running).started(5),
    );
    // UNKNOWN keeps the last status.
    assert_reports(
        map_views(
            &views(KUBEFLOW, "unknown").0,
            &views(KUBEFLOW, "unknown").1,
            Seen::Present,
            at(60),
            Some(&started(5)),
        ),
        expect(JobState::Started, Reason::Running)
            .message("the kubeflow operator cannot tell the driver's state (UNKNOWN); keeping the last status")
            .started(5),
    );
}

#[test]
fn kubeflow_outcomes() {
    assert_reports(
        map(KUBEFLOW, "completed", Seen::Present, at(3600)),
        expect(JobState::Succeeded, Reason::Completed)
            .exit_code(0)
            .started(5)
            .finished(65),
    );
    assert_reports(
        map(KUBEFLOW, "failed", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message("the application failed: driver container failed with ExitCode: 1, Reason: Error (driver: exit code 1: Exception in thread \"main\" java.lang.ArithmeticException: / by zero)")
            .exit_code(1)
            .last_words("Exception in thread \"main\" java.lang.ArithmeticException: / by zero")
            .started(5)
            .finished(40),
    );
    assert_reports(
        map(KUBEFLOW, "driver_oom_killed", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::OomKilled)
            .message("the application failed: driver container failed with ExitCode: 137, Reason: OOMKilled (driver: OOMKilled, exit code 137, over its memory limit of 896Mi)")
            .exit_code(137)
            .started(5)
            .finished(40),
    );
    assert_reports(
        map(KUBEFLOW, "driver_evicted", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::Evicted)
            .message("the application failed: driver container failed with ExitCode: 143, Reason: Error (driver: exit code 143)")
            .exit_code(143)
            .started(5)
            .finished(33),
    );
    // With its pod in view, the pod's disruption names the cause: its node was lost.
    assert_reports(
        map(KUBEFLOW, "driver_lost", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::NodeLost)
            .message("the application failed: driver container failed with ExitCode: 137, Reason: ContainerStatusUnknown (driver: ContainerStatusUnknown, exit code 137: The container could not be located when the pod was deleted.  The container used to be Running)")
            .exit_code(137)
            .finished(35),
    );
    assert_reports(
        map(KUBEFLOW, "failed_submission", Seen::Present, at(3600)),
        expect(JobState::Failed, Reason::SparkFailed)
            .message(format!("the application failed: {SUBMISSION_ERROR}"))
            .finished(2),
    );
}

/// Only COMPLETED and FAILED are terminal. SUBMISSION_FAILED and FAILING wait for the operator,
/// whose decision (retry or FAILED) is read with its own rule to say what comes next.
#[test]
fn kubeflow_only_completed_and_failed_are_terminal() {
    assert_reports(
        map(KUBEFLOW, "submission_failed_retries_left", Seen::Present, at(3600)),
        expect(JobState::Queued, Reason::Pending).message(format!(
            "the submission failed: {SUBMISSION_ERROR} (attempt 1); the operator will submit it again"
        )),
    );
    assert_reports(
        map(KUBEFLOW, "submission_failed_no_retries", Seen::Present, at(3600)),
        expect(JobState::Queued, Reason::Pending).message(format!(
            "the submission failed: {SUBMISSION_ERROR} (attempt 1); no retries are left; waiting for the operator to mark it FAILED"
        )),
    );
    assert_reports(
        map(KUBEFLOW, "failing_retries_left", Seen::Present, at(3600)),
        expect(JobState::Started, Reason::Running)
            .message("the driver failed: driver container failed with ExitCode: 1, Reason: Error; the operator will run it again (attempt 2 of 3)")
            .started(5),
    );
}

// ---------------------------------------------------------------------------------------------
// Views and the caller's contract.

#[test]
fn views_read_from_parts_equal_views_read_from_objects() {
    for operator in [APACHE, KUBEFLOW] {
        for case in spark_support::fixture_names(operator) {
            let (object, _) = objects(operator, &case);
            let metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
                serde_json::from_value(object["metadata"].clone()).expect("metadata");
            let op: SparkOperator = operator.parse().expect("an operator");
            assert_eq!(
                SparkAppView::from_parts(op, &metadata, &object),
                SparkAppView::from_object(&object).expect("a SparkApplication"),
                "{operator}/{case}"
            );
        }
    }
    assert_eq!(
        SparkAppView::from_object(&serde_json::json!({"apiVersion": "batch/v1", "kind": "Job"})),
        None
    );
}

#[test]
fn kubeflow_driver_pod_name() {
    let (app, _) = views(KUBEFLOW, "running");
    assert_eq!(
        app.driver_pod_name.as_deref(),
        Some(format!("{}-driver", app.name).as_str())
    );
    let (app, _) = views(APACHE, "running");
    assert_eq!(app.driver_pod_name, None);
    assert_eq!(
        SparkOperator::Apache.driver_selector(&app.name),
        format!(
            "spark.operator/spark-app-name={},spark-role=driver",
            app.name
        )
    );
}

/// Driver pods of another application of the same name (an earlier job) are not read.
#[test]
fn driver_pods_of_another_application_are_ignored() {
    let (app, drivers) = views(APACHE, "running");
    let mut other = drivers[0].clone();
    other.owner_uid = Some("0b5e8a3c-1d2f-5a6b-9c7d-e8f901234567".to_string());
    other.created_at = Some(at(100));
    let both = [drivers[0].clone(), other.clone()];
    assert_eq!(pick_driver(&app, &both), Some(&drivers[0]));
    assert_eq!(pick_driver(&app, std::slice::from_ref(&other)), None);
}

#[test]
fn terminal_previous_status_never_changes() {
    let (app, drivers) = views(APACHE, "running");
    let done = expect(JobState::Succeeded, Reason::Completed)
        .started(5)
        .finished(65);
    assert_reports(
        map_views(&app, &drivers, Seen::Present, at(70), Some(&done.0)),
        expect(JobState::Succeeded, Reason::Completed)
            .started(5)
            .finished(65),
    );
}

#[test]
fn the_no_status_timeout_is_configurable() {
    let (app, _) = views(KUBEFLOW, "no_status");
    let config = SparkMappingConfig {
        no_status_timeout: std::time::Duration::from_secs(30),
        ..SparkMappingConfig::default()
    };
    let mapped =
        spark_status(&AppObservation::Present(&app), &[], at(30), &config, None).expect("mapped");
    assert!(matches!(
        mapped.action,
        Some(SparkAction::RecordOutcomeAndDeleteApp { .. })
    ));
    let drivers: [DriverView; 0] = [];
    let mapped = spark_status(
        &AppObservation::Present(&app),
        &drivers,
        at(29),
        &config,
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.action, None);
}

// ---------------------------------------------------------------------------------------------
// Every state of both operators, one row each.

const APACHE_DRIVER_TIMED_OUT: &str = "The driver has not responded to the initial health check request within the allotted start-up time. This can be configured by setting .spec.applicationTolerations.applicationTimeoutConfig.";

/// The apache operator's states between the driver's start and an outcome: QUEUED until the
/// driver is ready, STARTED from then on whatever the executors do; the start is the driver
/// container's.
#[test]
fn apache_every_state_from_driver_start_to_running() {
    let table = [
        (
            "driver_started",
            JobState::Queued,
            Reason::Pending,
            "DriverStarted: Driver has started running.",
        ),
        (
            "driver_ready",
            JobState::Started,
            Reason::Running,
            "DriverReady: Driver has reached ready state.",
        ),
        (
            "initialized_below_threshold_executors",
            JobState::Started,
            Reason::Running,
            "InitializedBelowThresholdExecutors: The application is running with less than minimal number of requested initial executors.",
        ),
        (
            "running_with_partial_capacity",
            JobState::Started,
            Reason::Running,
            "RunningWithPartialCapacity: The Spark application is running with partial capacity.",
        ),
        (
            "running_with_below_threshold_executors",
            JobState::Started,
            Reason::Running,
            "RunningWithBelowThresholdExecutors: The Spark application is running with less than minimal number of requested executors.",
        ),
    ];
    for (case, state, reason, message) in table {
        for previous in [None, Some(started(5))] {
            let (app, drivers) = views(APACHE, case);
            assert_reports(
                map_views(&app, &drivers, Seen::Present, at(600), previous.as_ref()),
                expect(state, reason).message(message).started(5),
            );
        }
    }
}

/// `DriverReadyTimedOut` (the driver started but never became ready) fails the job with the
/// start-timeout reason, once the operator released the application.
#[test]
fn apache_driver_ready_timed_out() {
    assert_reports(
        map(APACHE, "driver_ready_timed_out", Seen::Present, at(600)),
        expect(JobState::Failed, Reason::DriverStartTimedOut)
            .message(format!("DriverReadyTimedOut: {APACHE_DRIVER_TIMED_OUT}"))
            .finished_at(at_micros(305, 702_288)),
    );
    // A caller that saw the driver start keeps that start.
    let (app, _) = views(APACHE, "driver_ready_timed_out");
    assert_reports(
        map_views(&app, &[], Seen::Present, at(600), Some(&started(5))),
        expect(JobState::Failed, Reason::DriverStartTimedOut)
            .message(format!("DriverReadyTimedOut: {APACHE_DRIVER_TIMED_OUT}"))
            .started(5)
            .finished_at(at_micros(305, 702_288)),
    );
}

/// The Kubeflow operator's states on the way to an outcome: none is terminal. States that
/// follow a run (SUCCEEDING, INVALIDATING, PENDING_RERUN, RESUMING) are STARTED when a start is
/// known (the driver's, or the caller's previous status), else QUEUED; SUSPENDING and
/// SUSPENDED are QUEUED Suspended, keeping a known start.
#[test]
fn kubeflow_every_state_on_the_way_to_an_outcome() {
    let suspended = |what: &str| format!("the application is {what}");
    // (case, status without a known start, status after a known start, message)
    type Row = (&'static str, (JobState, Reason), (JobState, Reason), String);
    let table: [Row; 6] = [
        (
            "succeeding",
            // The completed driver shows the start.
            (JobState::Started, Reason::Running),
            (JobState::Started, Reason::Running),
            "the driver completed; waiting for the operator to record the outcome".to_string(),
        ),
        (
            "invalidating",
            (JobState::Started, Reason::Running),
            (JobState::Started, Reason::Running),
            "the spec changed; the operator is restarting the application".to_string(),
        ),
        (
            "pending_rerun",
            // The old driver is gone: queued, unless the caller saw it start.
            (JobState::Queued, Reason::Pending),
            (JobState::Started, Reason::Running),
            "waiting for the operator to submit the application again".to_string(),
        ),
        (
            "resuming",
            (JobState::Queued, Reason::Pending),
            (JobState::Started, Reason::Running),
            "the operator is resuming the application".to_string(),
        ),
        (
            "suspending",
            (JobState::Queued, Reason::Suspended),
            (JobState::Queued, Reason::Suspended),
            suspended("suspending"),
        ),
        (
            "suspended",
            (JobState::Queued, Reason::Suspended),
            (JobState::Queued, Reason::Suspended),
            suspended("suspended"),
        ),
    ];
    for (case, fresh, after_start, message) in table {
        let (app, drivers) = views(KUBEFLOW, case);
        let (state, reason) = fresh;
        let driver_started = !drivers.is_empty();
        let mut expected = expect(state, reason).message(message.clone());
        if driver_started {
            expected = expected.started(5);
        }
        assert_reports(
            map_views(&app, &drivers, Seen::Present, at(600), None),
            expected,
        );
        let (state, reason) = after_start;
        assert_reports(
            map_views(&app, &drivers, Seen::Present, at(600), Some(&started(5))),
            expect(state, reason).message(message).started(5),
        );
    }
}

/// UNKNOWN (the operator lost track of the driver) keeps the last status; with none, the
/// driver's own state decides. A state name this version does not know is never terminal and
/// warns.
#[test]
fn kubeflow_unknown_and_unknown_state_names() {
    let keeping =
        "the kubeflow operator cannot tell the driver's state (UNKNOWN); keeping the last status";
    assert_reports(
        map(KUBEFLOW, "unknown", Seen::Present, at(600)),
        expect(JobState::Started, Reason::Running)
            .message(keeping)
            .started(5),
    );
    let (app, _) = views(KUBEFLOW, "unknown");
    assert_reports(
        map_views(&app, &[], Seen::Present, at(600), None),
        expect(JobState::Queued, Reason::Pending).message(keeping),
    );
    let unknown = "the kubeflow operator reports state \"THROTTLED\", which this version does not know; keeping the job unfinished";
    for now in [at(60), at(86_400)] {
        let mapped = map(KUBEFLOW, "unknown_state_name", Seen::Present, now).expect("mapped");
        assert_eq!(
            mapped.info,
            expect(JobState::Started, Reason::UnrecognizedStatus)
                .message(unknown)
                .started(5)
                .info()
        );
        assert_eq!(mapped.warning.as_deref(), Some(unknown));
        assert_eq!(mapped.action, None, "never deleted for it");
    }
    let (app, _) = views(KUBEFLOW, "unknown_state_name");
    let mapped = map_views(&app, &[], Seen::Present, at(60), None).expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason),
        (JobState::Queued, Reason::UnrecognizedStatus),
        "no start known"
    );
}

/// How a driver pod's status ends in the precedence tests: its driver container terminated
/// with `exit_code` at `T0 + finished`, and, when given, a DisruptionTarget condition with this
/// reason at `T0 + noted` (the kubelet's own eviction writes reason `Evicted` instead).
struct DriverEnd {
    exit_code: i64,
    /// Whether the kernel's OOM killer ended it (reason `OOMKilled`).
    oom: bool,
    finished: i64,
    disruption: Option<(&'static str, i64)>,
}

/// Rewrites a driver pod status (a pod's `status`, or the apache operator's
/// `lastObservedDriverStatus`) to `end`.
fn end_driver_status(status: &mut serde_json::Value, end: &DriverEnd) {
    let time =
        |seconds: i64| serde_json::json!(at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    for container in status["containerStatuses"]
        .as_array_mut()
        .expect("container statuses")
    {
        container["state"] = serde_json::json!({"terminated": {
            "exitCode": end.exit_code,
            "reason": match end.exit_code {
                0 => "Completed",
                _ if end.oom => "OOMKilled",
                _ => "Error",
            },
            "startedAt": time(5),
            "finishedAt": time(end.finished),
        }});
    }
    if let Some((reason, noted)) = end.disruption {
        let object = status.as_object_mut().expect("a status");
        object.remove("reason");
        object.remove("message");
        let message = match reason {
            "EvictionByEvictionAPI" => "Eviction API: evicting",
            "PreemptionByScheduler" => {
                "default-scheduler: preempting to accommodate a higher priority pod"
            }
            _ => "Taint manager: deleting due to NoExecute taint",
        };
        status["conditions"]
            .as_array_mut()
            .expect("conditions")
            .push(serde_json::json!({
                "type": "DisruptionTarget", "status": "True", "reason": reason,
                "message": message, "lastProbeTime": null, "lastTransitionTime": time(noted),
            }));
    }
}

/// A driver OOM-killed before its pod was evicted is OOM-killed, as a container job's main
/// container is, whatever the operator calls it.
#[test]
fn a_driver_oom_killed_before_its_eviction_is_oom_killed() {
    let end = DriverEnd {
        oom: true,
        exit_code: 137,
        finished: 32,
        disruption: Some(("EvictionByEvictionAPI", 33)),
    };
    for operator in [APACHE, KUBEFLOW] {
        let (app, drivers) = evicted_driver_ending(operator, &end);
        let mapped = map_views(&app, &drivers, Seen::Present, at(3600), None).expect("mapped");
        assert_eq!(
            (mapped.info.state, mapped.info.reason, mapped.info.exit_code),
            (JobState::Failed, Reason::OomKilled, Some(137)),
            "{operator}: {:?}",
            mapped.info
        );
    }
}

/// A driver that the OOM killer's mark is on but that ended after its pod's eviction began, or
/// in its second with a SIGTERM's exit (the OOM killer sends SIGKILL: it took a child), was
/// stopped by the eviction, as a container job's main container is; one killed by SIGKILL in
/// that second is OOM-killed.
#[test]
fn a_driver_oom_killed_after_its_eviction_began_was_stopped_by_it() {
    let drain = |noted| Some(("EvictionByEvictionAPI", noted));
    let cases = [
        (137, 33, Reason::OomKilled),
        (143, 33, Reason::Evicted),
        (137, 34, Reason::Evicted),
    ];
    for (exit_code, finished, expected) in cases {
        let end = DriverEnd {
            oom: true,
            exit_code,
            finished,
            disruption: drain(33),
        };
        for operator in [APACHE, KUBEFLOW] {
            let (app, drivers) = evicted_driver_ending(operator, &end);
            let mapped = map_views(&app, &drivers, Seen::Present, at(3600), None).expect("mapped");
            assert_eq!(
                (mapped.info.state, mapped.info.reason, mapped.info.exit_code),
                (JobState::Failed, expected, Some(exit_code as i32)),
                "{operator}, exit {exit_code} at {finished}: {:?}",
                mapped.info
            );
        }
    }
}

/// Every `lastObservedDriverStatus` the apache operator recorded, rewritten to `end`.
fn end_recorded_drivers(value: &mut serde_json::Value, end: &DriverEnd) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "lastObservedDriverStatus" {
                    end_driver_status(child, end);
                } else {
                    end_recorded_drivers(child, end);
                }
            }
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .for_each(|item| end_recorded_drivers(item, end)),
        _ => {}
    }
}

/// The `driver_evicted` fixture of `operator` with its driver ended as `end`.
fn evicted_driver_ending(operator: &str, end: &DriverEnd) -> (SparkAppView, Vec<DriverView>) {
    let (mut app, driver) = objects(operator, "driver_evicted");
    end_recorded_drivers(&mut app, end);
    if let Some(message) = app.pointer_mut("/status/applicationState/errorMessage") {
        *message = serde_json::json!(format!(
            "driver container failed with ExitCode: {}, Reason: Error",
            end.exit_code
        ));
    }
    let drivers = driver
        .map(|pod| {
            let mut pod = serde_json::to_value(pod).expect("a pod");
            end_driver_status(&mut pod["status"], end);
            let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod).expect("a pod");
            DriverView::from(&pod)
        })
        .into_iter()
        .collect();
    (
        SparkAppView::from_object(&app).expect("a SparkApplication"),
        drivers,
    )
}

/// I1: an apache application the operator called `Failed` (not `DriverEvicted`) after its
/// driver's pod was drained, read once that pod is gone: the driver status the operator
/// recorded shows the disruption that stopped it (143 after the drain began), as the live pod
/// did, so the application is `Evicted`, not its own failure. A driver that failed on its own
/// before the drain stays its own failure.
#[test]
fn an_apache_driver_stopped_by_a_drain_is_evicted_once_its_pod_is_gone() {
    let drain = |noted| Some(("EvictionByEvictionAPI", noted));
    let cases = [
        (
            DriverEnd {
                oom: false,
                exit_code: 143,
                finished: 33,
                disruption: drain(32),
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 31,
                disruption: drain(32),
            },
            Reason::SparkFailed,
        ),
    ];
    for (end, expected) in cases {
        let (mut app, driver) = objects(APACHE, "failed");
        assert!(driver.is_none(), "the fixture has no driver pod");
        end_recorded_drivers(&mut app, &end);
        let app = SparkAppView::from_object(&app).expect("a SparkApplication");
        let mapped = map_views(&app, &[], Seen::Present, at(3600), None).expect("mapped");
        assert_eq!(
            (mapped.info.state, mapped.info.reason, mapped.info.exit_code),
            (JobState::Failed, expected, Some(end.exit_code as i32)),
            "{:?}",
            mapped.info
        );
    }
}

/// I1: a Spark driver that failed on its own before its pod was evicted (apache `DriverEvicted`,
/// a Kubeflow `FAILED` with the driver pod evicted) is the application's own failure, with the
/// driver's exit code; a driver stopped by the eviction (SIGTERM/SIGKILL, or ending after a drain
/// began) is still `Evicted`. The same tie rule as for container jobs (docs/statuses.md).
#[test]
fn a_driver_that_failed_before_its_eviction_decides_the_outcome() {
    let apache_message = |exit: i64| {
        format!(
            "DriverEvicted: Driver removed. This could caused by 'exit' called in driver process with non-zero code, involuntary disruptions or unintentional destroy behavior, check Kubernetes events for more details. (driver: exit code {exit})"
        )
    };
    let kubeflow_message = |exit: i64| {
        format!(
            "the application failed: driver container failed with ExitCode: {exit}, Reason: Error (driver: exit code {exit})"
        )
    };
    let drain = |noted| Some(("EvictionByEvictionAPI", noted));
    let preemption = |noted| Some(("PreemptionByScheduler", noted));
    let taint = |noted| Some(("DeletionByTaintManager", noted));
    // (driver end, reason expected)
    let cases = [
        // The kubelet's eviction under node pressure (pod reason Evicted): nothing tells when
        // it began, and a driver that catches SIGTERM may exit with any code: the eviction's.
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 33,
                disruption: None,
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 143,
                finished: 33,
                disruption: None,
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 137,
                finished: 33,
                disruption: None,
            },
            Reason::Evicted,
        ),
        // A drain, a preemption, the taint manager: when they began tells, a tie the exit.
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 32,
                disruption: drain(33),
            },
            Reason::SparkFailed,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 33,
                disruption: drain(33),
            },
            Reason::SparkFailed,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 143,
                finished: 33,
                disruption: drain(33),
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 33,
                disruption: drain(32),
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 32,
                disruption: preemption(33),
            },
            Reason::SparkFailed,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 143,
                finished: 33,
                disruption: preemption(32),
            },
            Reason::Evicted,
        ),
        (
            DriverEnd {
                oom: false,
                exit_code: 4,
                finished: 32,
                disruption: taint(33),
            },
            Reason::SparkFailed,
        ),
    ];
    for (end, reason) in cases {
        for operator in [APACHE, KUBEFLOW] {
            let (app, drivers) = evicted_driver_ending(operator, &end);
            let mapped = map_views(&app, &drivers, Seen::Present, at(3600), None);
            let message = if operator == APACHE {
                apache_message(end.exit_code)
            } else {
                kubeflow_message(end.exit_code)
            };
            // Whichever operator, the driver's pod names the disruption (the Kubeflow operator
            // only says the driver failed, the apache one `DriverEvicted` for any pod that went
            // away): the Kubeflow driver pod's DisruptionTarget condition, or the driver status
            // the apache operator recorded (the fixture has no pod left), names a preemption.
            let reason = match (reason, end.disruption) {
                (Reason::Evicted, Some(("PreemptionByScheduler", _))) => Reason::Preempted,
                _ => reason,
            };
            let expected = expect(JobState::Failed, reason)
                .message(message)
                .exit_code(end.exit_code as i32)
                .started(5)
                .finished(end.finished);
            let mapped = mapped.unwrap_or_else(|| panic!("{operator}: mapped"));
            assert_eq!(
                mapped.info,
                expected.info(),
                "{operator}: exit {} at {} and {:?}",
                end.exit_code,
                end.finished,
                end.disruption
            );
        }
    }
}

/// The operator reports success only once its driver's pod succeeded; a driver still seen
/// running is a pod watch behind the application's. The success waits for the driver's end,
/// so that every replica reports its exit code, but not for ever. (The apache operator's
/// verdict carries the driver's end itself.)
#[test]
fn a_success_waits_for_a_driver_still_seen_running() {
    use kubeferry_core::container::ContainerStateView;
    let operator = KUBEFLOW;
    let (app, mut drivers) = views(operator, "completed");
    let verdict = map_views(&app, &drivers, Seen::Present, at(3600), None).expect("mapped");
    assert_eq!(verdict.info.exit_code, Some(0), "{operator}: {verdict:?}");
    let finished = verdict.info.finished_at.expect("an end");
    let driver = drivers.first_mut().expect("a driver");
    driver.phase = Some(kubeferry_core::container::PodPhase::Running);
    if let Some(container) = driver.container.as_mut() {
        container.state = ContainerStateView::Running {
            started_at: Some(at(5)),
        };
    }
    let soon = finished
        .checked_add(jiff::SignedDuration::from_secs(2))
        .expect("a time");
    let waiting = map_views(&app, &drivers, Seen::Present, soon, None).expect("mapped");
    assert_eq!(
        waiting.info.state,
        JobState::Started,
        "{operator}: {waiting:?}"
    );
    assert!(
        waiting
            .info
            .message
            .contains("reports success; waiting for driver pod"),
        "{operator}: {waiting:?}"
    );
    // Past the wait, the operator's word stands without the driver's details.
    let later = map_views(&app, &drivers, Seen::Present, at(3600), None).expect("mapped");
    assert_eq!(
        later.info.state,
        JobState::Succeeded,
        "{operator}: {later:?}"
    );
}
