//! Properties of the container status mapping: it never panics on arbitrary, partially filled
//! views, and an outcome Kubernetes showed never changes when later noise arrives.

mod common;
mod shared;
mod support;

use std::sync::OnceLock;
use std::time::Duration;

use jiff::Timestamp;
use kubeferry_core::container::{
    CancelMark, ConditionStatus, ContainerStateView, ContainerView, JobConditionType,
    JobConditionView, JobView, MappingConfig, PodConditionView, PodPhase, PodSummary, PodView,
    RuleIndexes, TerminatedView,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use shared::{after_each_noise, assert_covers, later, managed_meta, seen, text, timestamp};
use support::{Seen, at, map_views, views};

// ---------------------------------------------------------------------------------------------
// Arbitrary views.

fn condition_status() -> impl Strategy<Value = ConditionStatus> {
    prop_oneof![
        4 => Just(ConditionStatus::True),
        2 => Just(ConditionStatus::False),
        1 => Just(ConditionStatus::Unknown),
        1 => Just(ConditionStatus::Other("Maybe".to_string())),
    ]
}

fn job_condition() -> impl Strategy<Value = JobConditionView> {
    let kind = prop_oneof![
        Just(JobConditionType::Complete),
        Just(JobConditionType::Failed),
        Just(JobConditionType::SuccessCriteriaMet),
        Just(JobConditionType::FailureTarget),
        Just(JobConditionType::Suspended),
        Just(JobConditionType::Other("Quiesced".to_string())),
    ];
    (
        kind,
        condition_status(),
        text(&[
            "BackoffLimitExceeded",
            "DeadlineExceeded",
            "PodFailurePolicy",
            "CompletionsReached",
            "JobSuspended",
            "MaxFailedIndexesExceeded",
            "",
        ]),
        text(&[
            "Job has reached the specified backoff limit",
            "Container main for pod team-a/job-x failed with exit code 3 matching FailJob rule at index 1",
            "",
        ]),
        proptest::option::of(timestamp()),
    )
        .prop_map(
            |(kind, status, reason, message, last_transition_time)| JobConditionView {
                kind,
                status,
                reason,
                message,
                last_transition_time,
            },
        )
}

fn job_view() -> impl Strategy<Value = JobView> {
    (
        (
            select(&["", "job-uid"][..]),
            proptest::option::of(timestamp()),
            proptest::option::of(timestamp()),
            proptest::option::of(proptest::option::of(timestamp())),
            text(&["team-a"]),
            any::<bool>(),
            proptest::collection::vec(0u32..3, 0..3)
                .prop_map(|indexes| indexes.into_iter().collect::<RuleIndexes>()),
        ),
        (
            proptest::collection::vec(job_condition(), 0..5),
            -1i32..3,
            -1i32..3,
            -1i32..4,
            proptest::option::of(timestamp()),
            proptest::option::of(timestamp()),
            text(&["Error creating: pods \"job-\" is forbidden: exceeded quota: compute"]),
        ),
    )
        .prop_map(
            |(
                (uid, created_at, deletion_timestamp, cancel, queue_name, suspend, exit_code_rules),
                (conditions, active, succeeded, failed, start_time, completion_time, refused),
            )| JobView {
                meta: managed_meta("job", uid, (created_at, deletion_timestamp), cancel, None),
                queue_name,
                suspend,
                conditions,
                active,
                succeeded,
                failed,
                backoff_limit: None,
                start_time,
                completion_time,
                ttl_seconds_after_finished: None,
                active_deadline_seconds: None,
                creation_refused: refused,
                indexed: None,
                exit_code_rules,
                bare_pod: false,
            },
        )
}

fn terminated() -> impl Strategy<Value = TerminatedView> {
    (
        select(&[0, 1, 2, 42, 128, 137, 143, -1][..]),
        proptest::option::of(select(&[9, 15][..])),
        text(&[
            "Completed",
            "Error",
            "OOMKilled",
            "ContainerStatusUnknown",
            "StartError",
            "",
        ]),
        text(&["boom\n", "", "  "]),
        proptest::option::of(timestamp()),
        proptest::option::of(timestamp()),
    )
        .prop_map(
            |(exit_code, signal, reason, message, started_at, finished_at)| TerminatedView {
                exit_code,
                signal,
                reason,
                message,
                started_at,
                finished_at,
            },
        )
}

fn container_state() -> impl Strategy<Value = ContainerStateView> {
    prop_oneof![
        (
            text(&[
                "ContainerCreating",
                "PodInitializing",
                "ImagePullBackOff",
                "ErrImagePull",
                "InvalidImageName",
                "CreateContainerConfigError",
                "CreateContainerError",
                "RunContainerError",
                "CrashLoopBackOff",
                "SomethingNew",
            ]),
            text(&["details", ""]),
        )
            .prop_map(|(reason, message)| ContainerStateView::Waiting { reason, message }),
        proptest::option::of(timestamp())
            .prop_map(|started_at| ContainerStateView::Running { started_at }),
        terminated().prop_map(ContainerStateView::Terminated),
        Just(ContainerStateView::Unreported),
    ]
}

fn container() -> impl Strategy<Value = ContainerView> {
    (
        container_state(),
        proptest::option::of(terminated()),
        -1i32..3,
    )
        .prop_map(|(state, last_terminated, restart_count)| ContainerView {
            name: "main".to_string(),
            state,
            last_terminated,
            restart_count,
            sidecar: false,
        })
}

fn pod_condition(reasons: &'static [&'static str]) -> impl Strategy<Value = PodConditionView> {
    (
        condition_status(),
        text(reasons),
        text(&["msg", ""]),
        proptest::option::of(timestamp()),
    )
        .prop_map(
            |(status, reason, message, last_transition_time)| PodConditionView {
                status,
                reason,
                message,
                last_transition_time,
            },
        )
}

fn pod_view() -> impl Strategy<Value = PodView> {
    let phase = proptest::option::of(prop_oneof![
        Just(PodPhase::Pending),
        Just(PodPhase::Running),
        Just(PodPhase::Succeeded),
        Just(PodPhase::Failed),
        Just(PodPhase::Unknown),
        Just(PodPhase::Other("Hibernating".to_string())),
    ]);
    (
        (
            select(&["pod-a", "pod-b", "pod-c"][..]),
            proptest::option::of(select(&["job-uid", "other-uid"][..])),
            proptest::option::of(timestamp()),
            proptest::option::of(timestamp()),
            proptest::option::of(-5i64..60),
            phase,
        ),
        (
            text(&[
                "Evicted",
                "DeadlineExceeded",
                "NodeLost",
                "Terminated",
                "Preempting",
                "OutOfcpu",
                "UnexpectedAdmissionError",
                "",
            ]),
            text(&["message"]),
            proptest::option::of(pod_condition(&["Unschedulable", "SchedulingGated"])),
            proptest::option::of(pod_condition(&[
                "EvictionByEvictionAPI",
                "PreemptionByScheduler",
                "DeletionByPodGC",
                "DeletionByTaintManager",
                "TerminationByKubelet",
                "Novel",
            ])),
            text(&["worker-1"]),
            proptest::option::of(timestamp()),
        ),
        proptest::option::of(container()),
        proptest::option::of(container()),
    )
        .prop_map(
            |(
                (name, owner, created_at, deletion_timestamp, grace, phase),
                (reason, message, scheduled, disruption, node_name, start_time),
                main,
                blocking_init,
            )| PodView {
                pod: PodSummary {
                    name: name.to_string(),
                    uid: format!("{name}-uid"),
                    owner_uid: owner.map(str::to_string),
                    created_at,
                    deletion_timestamp,
                    phase,
                    reason,
                    message,
                    scheduled,
                    disruption,
                },
                deletion_grace_period_seconds: grace,
                node_name,
                start_time,
                main,
                memory_limit: None,
                blocking_init: blocking_init.map(Box::new),
                completion_index: None,
            },
        )
}

fn config() -> impl Strategy<Value = MappingConfig> {
    (
        0u64..400,
        0u64..400,
        proptest::option::of(prop_oneof![0u64..1000, Just(u64::MAX)]),
        0u64..60,
    )
        .prop_map(|(pull, create, pending, wait)| MappingConfig {
            image_pull_grace: Duration::from_secs(pull),
            create_container_error_grace: Duration::from_secs(create),
            pending_timeout: pending.map(Duration::from_secs),
            pod_status_wait: Duration::from_secs(wait),
        })
}

/// A status a caller may hold: a consistent state and reason.
fn previous() -> impl Strategy<Value = Option<ExecutionInfo>> {
    let pair = select(
        &[
            (JobState::Queued, Reason::Pending),
            (JobState::Queued, Reason::ImagePullBackOff),
            (JobState::Started, Reason::Running),
            (JobState::Cancelling, Reason::CancelRequested),
            (JobState::Succeeded, Reason::Completed),
            (JobState::Failed, Reason::Evicted),
            (JobState::Cancelled, Reason::Cancelled),
        ][..],
    );
    proptest::option::of((pair, proptest::option::of(timestamp())).prop_map(
        |((state, reason), started_at)| {
            let mut info = ExecutionInfo::new(state, reason);
            info.started_at = started_at;
            info
        },
    ))
}

/// Whether a reason belongs with a state.
fn consistent(info: &ExecutionInfo) -> bool {
    use Reason::*;
    match info.state {
        JobState::Queued => matches!(
            info.reason,
            Pending
                | Suspended
                | Unschedulable
                | ContainerCreating
                | ImagePullBackOff
                | UnrecognizedStatus
        ),
        JobState::Started => matches!(info.reason, Running | UnrecognizedStatus),
        JobState::Succeeded => info.reason == Completed,
        JobState::Failed => info.reason.failure_class().is_some(),
        JobState::Cancelling => matches!(info.reason, CancelRequested | UnrecognizedStatus),
        JobState::Cancelled => info.reason == Cancelled,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_and_answers_consistently(
        job in job_view(),
        pods in proptest::collection::vec(pod_view(), 0..4),
        seen in seen(),
        now in timestamp(),
        config in config(),
        previous in previous(),
    ) {
        let mapped = map_views(&job, &pods, seen, now, &config, previous.as_ref());
        let Some(mapped) = mapped else {
            // Only a Job found missing through a possibly stale view is "no such job".
            let stale = matches!(seen, Seen::Vanished { final_state: false });
            prop_assert!(stale, "only a stale view of a vanished Job answers no such job");
            prop_assert!(previous.as_ref().is_none_or(|p| !p.is_terminal()));
            return Ok(());
        };
        prop_assert!(consistent(&mapped.info), "{:?}", mapped.info);
        if mapped.must_record() {
            prop_assert_eq!(mapped.info.state, JobState::Failed);
        }
        if let Some(previous) = &previous {
            if previous.is_terminal() {
                prop_assert_eq!(&mapped.info, previous);
            } else if previous.started_at.is_some() {
                prop_assert!(mapped.info.started_at.is_some());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whoever carries out the mapping's actions looks again only at `recheck_at` when nothing
    /// changes: so no instant before it may answer otherwise, and without one, none at all.
    #[test]
    fn time_alone_changes_the_answer_only_at_the_recheck_instant(
        job in job_view(),
        pods in proptest::collection::vec(pod_view(), 0..4),
        seen in seen(),
        now in (-30i64..4000).prop_map(at),
        config in config(),
        previous in previous(),
        later in 1i64..100_000,
    ) {
        let Some(mapped) = map_views(&job, &pods, seen, now, &config, previous.as_ref()) else {
            return Ok(());
        };
        if mapped.info.is_terminal() || mapped.must_record() {
            prop_assert_eq!(mapped.recheck_at, None);
            return Ok(());
        }
        let then = shared::before_recheck(now, later, mapped.recheck_at)
            .map_err(TestCaseError::fail)?;
        let again = map_views(&job, &pods, seen, then, &config, previous.as_ref());
        prop_assert_eq!(again.map(|m| m.info), Some(mapped.info), "at {}", then);
    }
}

// ---------------------------------------------------------------------------------------------
// Terminal outcomes are stable under later noise.

/// When every fixture's story is over.
const SETTLED: i64 = 3600;

/// Something that may happen to a Job and its pods after the outcome, at `T0 + at` seconds.
#[derive(Clone, Debug)]
enum Noise {
    /// The Job's deletion is requested (its TTL, kubeferry's retention, someone else).
    DeleteJob(i64),
    /// Its pods are deleted, with a grace period.
    DeletePods(i64, i64),
    /// Its pods finish terminating: killed, ended.
    PodsEnd(i64),
    /// A node drain marks the pods for eviction.
    DisruptPods(i64),
    /// The Job is suspended.
    Suspend(i64),
    /// A cancel is requested (the cancel's resourceVersion precondition makes this impossible
    /// once Kubernetes recorded a verdict or a deletion; the mapping copes anyway for verdicts).
    MarkCancel(i64),
    /// A condition this version does not know.
    UnknownCondition(i64),
    /// The Job disappears.
    Vanish(bool),
    /// Time passes.
    Later(i64),
}

fn noise() -> impl Strategy<Value = Noise> {
    let t = || SETTLED..SETTLED + 3600;
    prop_oneof![
        t().prop_map(Noise::DeleteJob),
        (t(), 0i64..60).prop_map(|(at, grace)| Noise::DeletePods(at, grace)),
        t().prop_map(Noise::PodsEnd),
        t().prop_map(Noise::DisruptPods),
        t().prop_map(Noise::Suspend),
        t().prop_map(Noise::MarkCancel),
        t().prop_map(Noise::UnknownCondition),
        any::<bool>().prop_map(Noise::Vanish),
        (0i64..86_400).prop_map(Noise::Later),
    ]
}

struct World {
    job: JobView,
    pods: Vec<PodView>,
    seen: Seen,
    now: Timestamp,
}

impl shared::World for World {
    type Noise = Noise;

    fn apply(&mut self, noise: &Noise) {
        match *noise {
            Noise::DeleteJob(t) => {
                self.job.deletion_timestamp.get_or_insert(at(t));
            }
            Noise::DeletePods(t, grace) => {
                for pod in &mut self.pods {
                    if pod.deletion_timestamp.is_none() {
                        pod.deletion_timestamp = Some(at(t + grace));
                        pod.deletion_grace_period_seconds = Some(grace);
                    }
                }
            }
            Noise::PodsEnd(t) => {
                for pod in &mut self.pods {
                    let Some(main) = pod.main.as_mut() else {
                        continue;
                    };
                    let started_at = match &main.state {
                        ContainerStateView::Terminated(_) => continue,
                        ContainerStateView::Running { started_at } => *started_at,
                        _ => None,
                    };
                    main.state = ContainerStateView::Terminated(TerminatedView {
                        exit_code: 143,
                        signal: None,
                        reason: Some("Error".to_string()),
                        message: None,
                        started_at,
                        finished_at: Some(at(t)),
                    });
                    pod.phase = Some(PodPhase::Failed);
                }
            }
            Noise::DisruptPods(t) => {
                for pod in &mut self.pods {
                    pod.disruption.get_or_insert(PodConditionView {
                        status: ConditionStatus::True,
                        reason: Some("EvictionByEvictionAPI".to_string()),
                        message: Some("Eviction API: evicting".to_string()),
                        last_transition_time: Some(at(t)),
                    });
                }
            }
            Noise::Suspend(t) => {
                self.job.suspend = true;
                self.job.conditions.push(JobConditionView {
                    kind: JobConditionType::Suspended,
                    status: ConditionStatus::True,
                    reason: Some("JobSuspended".to_string()),
                    message: Some("Job suspended".to_string()),
                    last_transition_time: Some(at(t)),
                });
            }
            Noise::MarkCancel(t) => {
                self.job.cancel_mark.get_or_insert(CancelMark {
                    requested_at: Some(at(t)),
                    requested_by: None,
                });
            }
            Noise::UnknownCondition(t) => self.job.conditions.push(JobConditionView {
                kind: JobConditionType::Other("Quiesced".to_string()),
                status: ConditionStatus::True,
                reason: None,
                message: None,
                last_transition_time: Some(at(t)),
            }),
            Noise::Vanish(final_state) => self.seen.vanish(final_state),
            Noise::Later(seconds) => self.now = later(self.now, seconds),
        }
    }

    fn map(&self) -> Option<ExecutionInfo> {
        map_views(
            &self.job,
            &self.pods,
            self.seen,
            self.now,
            &MappingConfig::default(),
            None,
        )
        .map(|mapped| mapped.info)
    }
}

/// A fixture whose Kubernetes-shown outcome is terminal once its story is over.
struct TerminalCase {
    name: String,
    job: JobView,
    pods: Vec<PodView>,
    /// Whether the outcome is a verdict of the Job controller.
    has_verdict: bool,
}

/// The terminal fixtures, parsed once.
fn terminal_fixtures() -> &'static [TerminalCase] {
    static CASES: OnceLock<Vec<TerminalCase>> = OnceLock::new();
    CASES.get_or_init(|| {
        support::fixture_names()
            .into_iter()
            .filter_map(|name| {
                let (job, pods) = views(&name);
                let mapped = map_views(
                    &job,
                    &pods,
                    Seen::Present,
                    at(SETTLED),
                    &MappingConfig::default(),
                    None,
                )?;
                let has_verdict = job.conditions.iter().any(|c| {
                    c.status.is_true()
                        && !matches!(
                            c.kind,
                            JobConditionType::Suspended | JobConditionType::Other(_)
                        )
                });
                (mapped.info.is_terminal() && !mapped.must_record()).then_some(TerminalCase {
                    name,
                    job,
                    pods,
                    has_verdict,
                })
            })
            .collect()
    })
}

#[test]
fn the_stability_property_covers_every_kind_of_outcome() {
    assert_covers(
        terminal_fixtures().iter().map(|c| c.name.as_str()),
        &[
            "succeeded",
            "failed_with_exit_code",
            "oom_killed_exit_zero",
            "deadline_exceeded_pods_terminating",
            "backoff_limit_exceeded_after_retries",
            "node_lost_pod_gc",
            "pod_deleted_externally",
            "job_deleted_externally",
            "cancelled_by_deletion",
            "cancelled_by_suspension",
            "completion_after_cancel_took_effect",
        ],
    );
}

shared::terminal_outcomes_survive_later_noise!(
    terminal_fixtures(),
    noise(),
    |case: &TerminalCase, noises: &[Noise]| {
        let mut world = World {
            job: case.job.clone(),
            pods: case.pods.clone(),
            seen: Seen::Present,
            now: at(SETTLED),
        };
        let skip = |noise: &Noise| matches!(noise, Noise::MarkCancel(_)) && !case.has_verdict;
        after_each_noise(&mut world, noises, skip, |_, before, after, noise| {
            prop_assert_eq!(after, before, "{} after {:?}", case.name, noise);
            Ok(())
        })
    }
);

// ---------------------------------------------------------------------------------------------
// A disruption after a container's own failure changes nothing.

/// The control plane's disruptions, which it notes on the pod before deleting it.
const CONTROL_PLANE_DISRUPTIONS: &[(&str, Reason)] = &[
    ("EvictionByEvictionAPI", Reason::Evicted),
    ("PreemptionByScheduler", Reason::Preempted),
    ("DeletionByTaintManager", Reason::Disrupted),
    ("DeletionByPodGC", Reason::NodeLost),
];

/// `failed_with_exit_code` (verdict at T0 + 66 s) with its main container ended with
/// `exit_code` at `T0 + finished`, and, when given, disrupted by `reason` at `T0 + noted` (the
/// DisruptionTarget condition, then a deletion with `grace`).
fn failed_then_disrupted(
    exit_code: i32,
    finished: i64,
    disruption: Option<(&str, i64, i64)>,
) -> Option<ExecutionInfo> {
    let (job, mut pods) = views("failed_with_exit_code");
    for pod in &mut pods {
        if let Some(main) = pod.main.as_mut() {
            main.state = ContainerStateView::Terminated(TerminatedView {
                exit_code,
                signal: None,
                reason: Some("Error".to_string()),
                message: None,
                started_at: Some(at(5)),
                finished_at: Some(at(finished)),
            });
        }
        if let Some((reason, noted, grace)) = disruption {
            pod.disruption = Some(PodConditionView {
                status: ConditionStatus::True,
                reason: Some(reason.to_string()),
                message: Some(format!("{reason}: disrupting")),
                last_transition_time: Some(at(noted)),
            });
            pod.deletion_timestamp = Some(at(noted + grace));
            pod.deletion_grace_period_seconds = Some(grace);
        }
    }
    map_views(
        &job,
        &pods,
        Seen::Present,
        at(SETTLED),
        &MappingConfig::default(),
        None,
    )
    .map(|mapped| mapped.info)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// I1/I7: a container that failed on its own (any exit but a signal's 137/143) and whose pod
    /// a drain, a preemption, the taint manager or the pod GC disrupts in the same second or
    /// later reads the same as without the disruption: a replica that looked before it and one
    /// that looks after agree.
    #[test]
    fn a_disruption_after_an_own_failure_changes_nothing(
        exit_code in (1i32..=255).prop_filter("not a signal's", |c| *c != 137 && *c != 143),
        finished in 55i64..=66,
        after in 0i64..5,
        grace in 0i64..60,
        kind in select(CONTROL_PLANE_DISRUPTIONS),
    ) {
        let undisturbed = failed_then_disrupted(exit_code, finished, None);
        let disturbed =
            failed_then_disrupted(exit_code, finished, Some((kind.0, finished + after, grace)));
        prop_assert!(undisturbed.as_ref().is_some_and(|i| i.reason == Reason::Error));
        prop_assert_eq!(disturbed, undisturbed);
    }

    /// A container stopped by a disruption (143, 137) in or after the disruption's second, before
    /// the verdict, reports the disruption.
    #[test]
    fn a_container_stopped_by_a_disruption_reports_the_disruption(
        exit_code in select(&[137i32, 143][..]),
        noted in 55i64..=66,
        after in 0i64..5,
        grace in 0i64..60,
        kind in select(CONTROL_PLANE_DISRUPTIONS),
    ) {
        let finished = (noted + after).min(66);
        let info = failed_then_disrupted(exit_code, finished, Some((kind.0, noted, grace)));
        prop_assert_eq!(info.map(|i| (i.state, i.reason)), Some((JobState::Failed, kind.1)));
    }
}
