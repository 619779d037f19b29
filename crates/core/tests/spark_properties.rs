//! Properties of the Spark status mapping: reading arbitrary SparkApplication JSON and mapping
//! arbitrary, partially filled views never panics; an outcome an operator showed never changes
//! when later noise arrives (deletions, cancel marks, released resources, the driver pod going
//! away, the application vanishing, time passing).

mod common;
mod shared;
mod spark_support;

use std::sync::OnceLock;

use jiff::Timestamp;
use kubeferry_core::container::{
    CancelMark, ConditionStatus, ContainerStateView, ContainerView, PodConditionView, PodPhase,
    PodSummary, TerminatedView,
};
use kubeferry_core::spark::{
    ApacheState, ApacheStatus, ApacheSummary, AppObservation, DriverView, KubeflowState,
    KubeflowStatus, RestartPolicyView, RestartView, SparkAppView, SparkMappingConfig,
    SparkOperator, SparkStatus, spark_status,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use shared::{after_each_noise, assert_covers, later, managed_meta, seen, text, timestamp};
use spark_support::{Seen, at, map_views, views};

// ---------------------------------------------------------------------------------------------
// Arbitrary JSON.

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..100).prop_map(|n| json!(n)),
        select(
            &[
                "",
                "Running",
                "RUNNING",
                "FAILED",
                "Succeeded",
                "ResourceReleased",
                "2025-06-10T08:00:01.5Z",
                "not a time",
                "spark-kubernetes-driver",
                "Never",
                "OnFailure",
                "Always",
                "Failed",
                "Evicted",
                "OOMKilled",
                "ü",
            ][..]
        )
        .prop_map(|s| json!(s)),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        let keys = select(
            &[
                "currentState",
                "currentStateSummary",
                "lastTransitionTime",
                "message",
                "stateTransitionHistory",
                "0",
                "1",
                "10",
                "x",
                "lastObservedDriverStatus",
                "phase",
                "containerStatuses",
                "state",
                "applicationState",
                "errorMessage",
                "driverInfo",
                "podName",
                "submissionAttempts",
                "executionAttempts",
                "terminationTime",
                "restartConfig",
                "restartPolicy",
                "type",
                "onFailureRetries",
            ][..],
        );
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(keys, inner, 0..5).prop_map(|m| Value::Object(
                m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

fn application_json() -> impl Strategy<Value = Value> {
    (
        select(&["spark.apache.org/v1", "sparkoperator.k8s.io/v1beta2"][..]),
        json_value(),
        json_value(),
        proptest::option::of(select(&["2025-06-10T08:00:30Z", "garbage"][..])),
        proptest::option::of(select(
            &[
                r#"{"state":"FAILED","reason":"NoStatusTimeout"}"#,
                r#"{"state":"STARTED","reason":"Running"}"#,
                "not json",
            ][..],
        )),
    )
        .prop_map(|(api_version, spec, status, cancel, outcome)| {
            let mut annotations = serde_json::Map::new();
            if let Some(cancel) = cancel {
                annotations.insert("kubeferry.dev/cancel-requested".into(), json!(cancel));
            }
            if let Some(outcome) = outcome {
                annotations.insert("kubeferry.dev/outcome".into(), json!(outcome));
            }
            json!({
                "apiVersion": api_version,
                "kind": "SparkApplication",
                "metadata": {"name": "pi", "namespace": "ns", "uid": "u",
                             "creationTimestamp": "2025-06-10T08:00:00Z",
                             "annotations": annotations},
                "spec": spec,
                "status": status,
            })
        })
}

// ---------------------------------------------------------------------------------------------
// Arbitrary views.

fn terminated() -> impl Strategy<Value = TerminatedView> {
    (
        select(&[0, 1, 137, 143, -1][..]),
        text(&["Completed", "Error", "OOMKilled", ""]),
        text(&["boom\n", ""]),
        proptest::option::of(timestamp()),
        proptest::option::of(timestamp()),
    )
        .prop_map(
            |(exit_code, reason, message, started_at, finished_at)| TerminatedView {
                exit_code,
                signal: None,
                reason,
                message,
                started_at,
                finished_at,
            },
        )
}

fn driver() -> impl Strategy<Value = DriverView> {
    let state = prop_oneof![
        (
            text(&["ContainerCreating", "ImagePullBackOff", "New"]),
            text(&["m"])
        )
            .prop_map(|(reason, message)| ContainerStateView::Waiting { reason, message }),
        proptest::option::of(timestamp())
            .prop_map(|started_at| ContainerStateView::Running { started_at }),
        terminated().prop_map(ContainerStateView::Terminated),
        Just(ContainerStateView::Unreported),
    ];
    let phase = proptest::option::of(select(
        &[
            PodPhase::Pending,
            PodPhase::Running,
            PodPhase::Succeeded,
            PodPhase::Failed,
            PodPhase::Unknown,
        ][..],
    ));
    (
        select(&["u", "other", ""][..]),
        proptest::option::of(timestamp()),
        proptest::option::of(timestamp()),
        phase,
        text(&["Evicted", ""]),
        proptest::option::of(state),
        any::<bool>(),
    )
        .prop_map(
            |(owner, created_at, deletion_timestamp, phase, reason, state, unschedulable)| {
                DriverView {
                    pod: PodSummary {
                        name: "pi-driver".to_string(),
                        uid: "d".to_string(),
                        owner_uid: (!owner.is_empty()).then(|| owner.to_string()),
                        created_at,
                        deletion_timestamp,
                        phase,
                        reason,
                        message: None,
                        scheduled: unschedulable.then(|| PodConditionView {
                            status: ConditionStatus::False,
                            reason: Some("Unschedulable".to_string()),
                            message: Some("0/3 nodes are available".to_string()),
                            last_transition_time: None,
                        }),
                        disruption: None,
                    },
                    container: state.map(|state| ContainerView {
                        name: "spark-kubernetes-driver".to_string(),
                        state,
                        last_terminated: None,
                        restart_count: 0,
                        sidecar: false,
                    }),
                    memory_limit: None,
                }
            },
        )
}

fn apache_state() -> impl Strategy<Value = ApacheState> {
    (
        select(
            &[
                "Submitted",
                "ScheduledToRestart",
                "DriverRequested",
                "DriverStarted",
                "DriverReady",
                "RunningHealthy",
                "RunningWithBelowThresholdExecutors",
                "DriverStartTimedOut",
                "ExecutorsStartTimedOut",
                "DriverReadyTimedOut",
                "Succeeded",
                "Failed",
                "SchedulingFailure",
                "DriverEvicted",
                "ResourceReleased",
                "TerminatedWithoutReleaseResources",
                "Hibernating",
            ][..],
        ),
        proptest::option::of(timestamp()),
        text(&["msg", ""]),
        proptest::option::of(driver()),
    )
        .prop_map(
            |(summary, last_transition_time, message, driver)| ApacheState {
                summary: ApacheSummary::parse(summary),
                last_transition_time,
                message,
                driver: driver.map(Box::new),
            },
        )
}

fn status(operator: SparkOperator) -> BoxedStrategy<SparkStatus> {
    let common = prop_oneof![
        Just(SparkStatus::Absent),
        Just(SparkStatus::Unreadable("no currentState".to_string())),
    ];
    match operator {
        SparkOperator::Apache => prop_oneof![
            1 => common,
            4 => (apache_state(), proptest::collection::vec(apache_state(), 0..8), 0usize..2)
                .prop_map(|(current, history, unreadable_history)| {
                    SparkStatus::Apache(ApacheStatus { current, history, unreadable_history })
                }),
        ]
        .boxed(),
        SparkOperator::Kubeflow => prop_oneof![
            1 => common,
            4 => (
                select(
                    &[
                        "", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED", "SUBMISSION_FAILED",
                        "PENDING_RERUN", "INVALIDATING", "SUCCEEDING", "FAILING", "SUSPENDED",
                        "UNKNOWN", "HIBERNATING",
                    ][..]
                ),
                text(&["error"]),
                0i64..4,
                0i64..4,
                proptest::option::of(timestamp()),
            )
                .prop_map(|(state, error_message, submissions, executions, termination_time)| {
                    SparkStatus::Kubeflow(KubeflowStatus {
                        state: KubeflowState::parse(state),
                        error_message,
                        submission_attempts: submissions,
                        execution_attempts: executions,
                        last_submission_attempt_time: None,
                        termination_time,
                    })
                }),
        ]
        .boxed(),
    }
}

fn app_view() -> impl Strategy<Value = SparkAppView> {
    select(&SparkOperator::ALL[..]).prop_flat_map(|operator| {
        (
            status(operator),
            proptest::option::of(timestamp()),
            proptest::option::of(timestamp()),
            proptest::option::of(proptest::option::of(timestamp())),
            0u8..4,
            select(vec![
                RestartPolicyView::Never,
                RestartPolicyView::OnFailure,
                RestartPolicyView::Always,
                RestartPolicyView::Other("Sometimes".to_string()),
            ]),
        )
            .prop_map(
                move |(status, created_at, deletion_timestamp, cancel, recorded, policy)| {
                    let recorded_outcome = match recorded {
                        0 => None,
                        1 => Some(Ok(ExecutionInfo::new(
                            JobState::Failed,
                            Reason::NoStatusTimeout,
                        ))),
                        2 => Some(Err("garbage".to_string())),
                        _ => Some(Ok(ExecutionInfo::new(
                            JobState::Succeeded,
                            Reason::Completed,
                        ))),
                    };
                    SparkAppView {
                        operator,
                        meta: managed_meta(
                            "pi",
                            "u",
                            (created_at, deletion_timestamp),
                            cancel,
                            recorded_outcome,
                        ),
                        restart: RestartView {
                            policy,
                            on_failure_retries: Some(1),
                            on_submission_failure_retries: Some(1),
                        },
                        driver_pod_name: None,
                        status,
                    }
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn reading_arbitrary_applications_never_panics(object in application_json(), now in timestamp()) {
        let app = SparkAppView::from_object(&object).expect("a SparkApplication");
        let mapped = spark_status(
            &AppObservation::Present(&app),
            &[],
            now,
            &SparkMappingConfig::default(),
            None,
        );
        prop_assert!(mapped.is_some());
    }

    #[test]
    fn mapping_arbitrary_views_never_panics_and_keeps_its_promises(
        app in app_view(),
        drivers in proptest::collection::vec(driver(), 0..3),
        seen in seen(),
        now in timestamp(),
        previous_started in any::<bool>(),
    ) {
        let previous = previous_started.then(|| {
            let mut info = ExecutionInfo::new(JobState::Started, Reason::Running);
            info.started_at = Some(at(5));
            info
        });
        let Some(mapped) = map_views(&app, &drivers, seen, now, previous.as_ref()) else {
            // "No such job" only for an application that is gone.
            let vanished = matches!(seen, Seen::Vanished { .. });
            prop_assert!(vanished, "a present application is always mapped");
            return Ok(());
        };
        // An action holds its outcome back: the status reported meanwhile is never terminal,
        // and the outcome is.
        if let Some(action) = &mapped.action {
            prop_assert!(!mapped.info.is_terminal());
            prop_assert!(action.outcome().is_terminal());
        }
        // A status this version cannot read never ends a job.
        if matches!(app.status, SparkStatus::Unreadable(_)) && app.deletion_timestamp.is_none()
            && matches!(seen, Seen::Present) && app.cancel_mark.is_none()
        {
            prop_assert!(!mapped.info.is_terminal());
            prop_assert!(mapped.action.is_none());
        }
        // Once started, a job keeps its start.
        if previous.is_some() {
            prop_assert!(mapped.info.started_at.is_some());
        }
    }

    /// Whoever carries out the mapping's actions looks again only at `recheck_at` when nothing
    /// changes: so no instant before it may answer otherwise, and without one, none at all.
    #[test]
    fn time_alone_changes_the_answer_only_at_the_recheck_instant(
        app in app_view(),
        drivers in proptest::collection::vec(driver(), 0..3),
        seen in seen(),
        now in (-30i64..4000).prop_map(at),
        later in 1i64..100_000,
    ) {
        let Some(mapped) = map_views(&app, &drivers, seen, now, None) else {
            return Ok(());
        };
        if mapped.info.is_terminal() || mapped.action.is_some() {
            prop_assert_eq!(mapped.recheck_at, None);
            return Ok(());
        }
        let then = shared::before_recheck(now, later, mapped.recheck_at)
            .map_err(TestCaseError::fail)?;
        let again = map_views(&app, &drivers, seen, then, None);
        prop_assert_eq!(again.map(|m| m.info), Some(mapped.info), "at {}", then);
    }
}

// ---------------------------------------------------------------------------------------------
// Terminal outcomes under later noise.

/// When every fixture's story is over.
const SETTLED: i64 = 3600;

/// Something that may happen to a SparkApplication and its driver after the outcome.
#[derive(Clone, Debug)]
enum Noise {
    /// The application's deletion is requested (its TTL, kubeferry's retention, someone else).
    DeleteApp(i64),
    /// A cancel is requested (impossible once the operator recorded an outcome, as the cancel
    /// reads the application first; the mapping copes anyway).
    MarkCancel(i64),
    /// The apache operator releases the resources it kept (its retain duration expired).
    ReleaseResources(i64),
    /// The driver pod is deleted.
    DeleteDriver(i64),
    /// The driver pod is gone, or can no longer be read (a 403): the outcome's state stays; its
    /// details come from the operator's status instead (which cannot tell an evicted Kubeflow
    /// driver from another failure).
    LoseDriver,
    /// The application disappears.
    Vanish(bool),
    /// Time passes.
    Later(i64),
}

fn noise() -> impl Strategy<Value = Noise> {
    let t = || SETTLED..SETTLED + 3600;
    prop_oneof![
        t().prop_map(Noise::DeleteApp),
        t().prop_map(Noise::MarkCancel),
        t().prop_map(Noise::ReleaseResources),
        t().prop_map(Noise::DeleteDriver),
        Just(Noise::LoseDriver),
        any::<bool>().prop_map(Noise::Vanish),
        (0i64..86_400).prop_map(Noise::Later),
    ]
}

struct World {
    app: SparkAppView,
    drivers: Vec<DriverView>,
    seen: Seen,
    now: Timestamp,
    /// Whether the driver was lost: only the state is compared then.
    lost_driver: bool,
}

impl shared::World for World {
    type Noise = Noise;

    fn apply(&mut self, noise: &Noise) {
        match *noise {
            Noise::DeleteApp(t) => {
                self.app.deletion_timestamp.get_or_insert(at(t));
            }
            Noise::MarkCancel(t) => {
                self.app.cancel_mark.get_or_insert(CancelMark {
                    requested_at: Some(at(t)),
                    requested_by: None,
                });
            }
            Noise::ReleaseResources(t) => {
                if let SparkStatus::Apache(status) = &mut self.app.status
                    && status.current.summary == ApacheSummary::TerminatedWithoutReleaseResources
                {
                    let released = ApacheState {
                        summary: ApacheSummary::ResourceReleased,
                        last_transition_time: Some(at(t)),
                        message: Some("Spark application resources released after exceeding the configured retain duration.".to_string()),
                        driver: None,
                    };
                    status.history.push(released.clone());
                    status.current = released;
                }
            }
            Noise::DeleteDriver(t) => {
                for driver in &mut self.drivers {
                    driver.deletion_timestamp.get_or_insert(at(t));
                }
            }
            Noise::LoseDriver => {
                self.drivers.clear();
                self.lost_driver = true;
            }
            Noise::Vanish(final_state) => self.seen.vanish(final_state),
            Noise::Later(seconds) => self.now = later(self.now, seconds),
        }
    }

    fn map(&self) -> Option<ExecutionInfo> {
        map_views(&self.app, &self.drivers, self.seen, self.now, None).map(|mapped| mapped.info)
    }
}

/// A fixture whose operator-shown (or kubeferry-recorded) outcome is terminal once its story
/// is over.
struct TerminalCase {
    name: String,
    app: SparkAppView,
    drivers: Vec<DriverView>,
    /// Whether the outcome is a verdict of the operator.
    has_verdict: bool,
}

fn terminal_fixtures() -> &'static [TerminalCase] {
    static CASES: OnceLock<Vec<TerminalCase>> = OnceLock::new();
    CASES.get_or_init(|| {
        let mut cases = Vec::new();
        for operator in ["apache", "kubeflow"] {
            for case in spark_support::fixture_names(operator) {
                let (app, drivers) = views(operator, &case);
                let Some(mapped) = map_views(&app, &drivers, Seen::Present, at(SETTLED), None)
                else {
                    continue;
                };
                let has_verdict = app.deletion_timestamp.is_none() && app.cancel_mark.is_none();
                if mapped.info.is_terminal() && mapped.action.is_none() {
                    cases.push(TerminalCase {
                        name: format!("{operator}/{case}"),
                        app,
                        drivers,
                        has_verdict,
                    });
                }
            }
        }
        cases
    })
}

#[test]
fn the_stability_property_covers_every_kind_of_outcome() {
    assert_covers(
        terminal_fixtures().iter().map(|c| c.name.as_str()),
        &[
            "apache/succeeded",
            "apache/failed",
            "apache/failed_retained",
            "apache/failed_after_last_restart",
            "apache/driver_evicted",
            "apache/driver_start_timed_out",
            "apache/scheduling_failure",
            "apache/cancel_after_success",
            "apache/cancelled_deleting",
            "apache/deleted_externally",
            "apache/no_status_recorded_deleting",
            "kubeflow/completed",
            "kubeflow/failed",
            "kubeflow/driver_oom_killed",
            "kubeflow/failed_submission",
        ],
    );
}

fn state(info: &Option<ExecutionInfo>) -> Option<JobState> {
    info.as_ref().map(|i| i.state)
}

shared::terminal_outcomes_survive_later_noise!(
    terminal_fixtures(),
    noise(),
    |case: &TerminalCase, noises: &[Noise]| {
        let mut world = World {
            app: case.app.clone(),
            drivers: case.drivers.clone(),
            seen: Seen::Present,
            now: at(SETTLED),
            lost_driver: false,
        };
        let skip = |noise: &Noise| matches!(noise, Noise::MarkCancel(_)) && !case.has_verdict;
        after_each_noise(&mut world, noises, skip, |world, before, after, noise| {
            if world.lost_driver {
                prop_assert_eq!(
                    state(after),
                    state(before),
                    "{} after {:?}",
                    case.name,
                    noise
                );
            } else {
                prop_assert_eq!(after, before, "{} after {:?}", case.name, noise);
            }
            Ok(())
        })
    }
);
