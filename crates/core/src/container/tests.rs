//! Unit tests of the container views and of mapping rules the fixtures do not reach.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::observation::ManagedMeta;
use crate::status::{ExecutionInfo, JobState, Reason};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_749_542_400 + seconds).expect("in range")
}

fn pod_from(value: serde_json::Value) -> PodView {
    let pod: Pod = serde_json::from_value(value).expect("a pod");
    PodView::from(&pod)
}

fn status(name: &str, state: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "image": "img", "imageID": "", "ready": false, "restartCount": 0,
           "state": state})
}

#[test]
fn the_main_container_is_found_by_name() {
    let pod = pod_from(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "sidecar"}, {"name": "main"}]},
        "status": {"containerStatuses": [
            status("main", json!({"running": {"startedAt": "2025-06-10T08:00:05Z"}})),
            status("sidecar", json!({"waiting": {"reason": "ContainerCreating"}})),
        ]},
    }));
    let main = pod.main.expect("main");
    assert_eq!(main.name, MAIN_CONTAINER);
    assert_eq!(
        main.state,
        ContainerStateView::Running {
            started_at: Some(at(5))
        }
    );
}

#[test]
fn without_a_main_container_the_first_of_the_spec_is_read() {
    // The kubelet sorts container statuses by name; the spec's order decides.
    let pod = pod_from(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "worker"}, {"name": "agent"}]},
        "status": {"containerStatuses": [
            status("agent", json!({"running": {}})),
            status("worker", json!({"waiting": {"reason": "ContainerCreating"}})),
        ]},
    }));
    assert_eq!(pod.main.expect("first container").name, "worker");

    let no_spec = pod_from(json!({
        "metadata": {"name": "p"},
        "status": {"containerStatuses": [status("only", json!({}))]},
    }));
    let main = no_spec.main.expect("first status");
    assert_eq!(main.name, "only");
    assert_eq!(main.state, ContainerStateView::Unreported);
}

#[test]
fn an_init_container_that_holds_the_main_container_back_is_kept() {
    let spec = json!({
        "containers": [{"name": "main"}],
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always"},
            {"name": "done"},
            {"name": "fetch"},
        ],
    });
    let init_statuses = json!([
        status("proxy", json!({"running": {}})),
        status("done", json!({"terminated": {"exitCode": 0}})),
        status(
            "fetch",
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "nope"}})
        ),
    ]);
    let pod = pod_from(json!({
        "metadata": {"name": "p", "creationTimestamp": "2025-06-10T08:00:01Z"},
        "spec": spec.clone(),
        "status": {
            "phase": "Pending",
            "startTime": "2025-06-10T08:00:02Z",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": init_statuses,
            "containerStatuses": [status("main", json!({"waiting": {"reason": "PodInitializing"}}))],
        },
    }));
    let init = pod.blocking_init.as_ref().expect("blocking init container");
    assert_eq!(init.name, "fetch");

    let job = JobView {
        meta: ManagedMeta {
            name: "j".into(),
            ..ManagedMeta::default()
        },
        ..JobView::default()
    };
    let config = MappingConfig::default();
    let mapped = container_status(
        &JobObservation::Present(&job),
        std::slice::from_ref(&pod),
        at(60),
        &config,
        None,
    )
    .expect("mapped");
    assert_eq!(
        mapped.info,
        ExecutionInfo::new(JobState::Queued, Reason::ImagePullBackOff)
            .with_message("init container fetch is waiting: ImagePullBackOff: nope")
    );
    let expired = container_status(
        &JobObservation::Present(&job),
        &[pod],
        at(182),
        &config,
        None,
    )
    .expect("mapped");
    assert_eq!(expired.info.reason, Reason::ImagePullFailed);
    assert!(expired.must_record());

    // Once the main container runs, init containers are not kept.
    let running = pod_from(json!({
        "metadata": {"name": "p"},
        "spec": spec,
        "status": {"containerStatuses": [status("main", json!({"running": {}}))]},
    }));
    assert_eq!(running.blocking_init, None);
}

#[test]
fn job_marks_and_counts_are_read() {
    let job: Job = serde_json::from_value(json!({
        "metadata": {
            "name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "annotations": {"kubeferry.dev/cancel-requested": "not a time"},
            "labels": {"kubeferry.dev/job-id": "label-id", "kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"suspend": true, "template": {}},
        "status": {"active": 1, "failed": 2, "conditions": [
            {"type": "Failed", "status": "Maybe"},
        ]},
    }))
    .expect("a job");
    let view = JobView::from(&job);
    assert_eq!(view.job_id.as_deref(), Some("label-id"));
    assert_eq!(
        view.cancel_mark,
        Some(CancelMark {
            requested_at: None,
            requested_by: None
        })
    );
    assert_eq!(view.queue_name.as_deref(), Some("q"));
    assert!(view.suspend);
    assert_eq!((view.active, view.succeeded, view.failed), (1, 0, 2));
    assert_eq!(
        view.conditions[0].status,
        ConditionStatus::Other("Maybe".into())
    );
}

#[test]
fn the_deletion_request_is_the_deletion_timestamp_less_the_grace_period() {
    let pod = PodView {
        pod: PodSummary {
            deletion_timestamp: Some(at(150)),
            ..PodSummary::default()
        },
        deletion_grace_period_seconds: Some(30),
        ..PodView::default()
    };
    assert_eq!(pod.deletion_requested_at(), Some(at(120)));
}

// --- Mapping rules on hand-built views. ---

fn job() -> JobView {
    JobView {
        meta: ManagedMeta {
            name: "j".into(),
            namespace: "ns".into(),
            uid: "job-uid".into(),
            ..ManagedMeta::default()
        },
        start_time: Some(at(1)),
        ..JobView::default()
    }
}

fn condition(kind: JobConditionType, reason: &str, at_second: i64) -> JobConditionView {
    JobConditionView {
        kind,
        status: ConditionStatus::True,
        reason: Some(reason.into()),
        message: None,
        last_transition_time: Some(at(at_second)),
    }
}

fn running_pod(name: &str, created: i64) -> PodView {
    PodView {
        pod: PodSummary {
            name: name.into(),
            uid: format!("{name}-uid"),
            owner_uid: Some("job-uid".into()),
            created_at: Some(at(created)),
            phase: Some(PodPhase::Running),
            ..PodSummary::default()
        },
        node_name: Some("worker-1".into()),
        start_time: Some(at(created + 1)),
        main: Some(ContainerView {
            name: MAIN_CONTAINER.into(),
            state: ContainerStateView::Running {
                started_at: Some(at(created + 4)),
            },
            last_terminated: None,
            restart_count: 0,
            sidecar: false,
        }),
        ..PodView::default()
    }
}

fn failed_pod(name: &str, created: i64, reason: Option<&str>) -> PodView {
    let mut pod = running_pod(name, created);
    pod.phase = Some(PodPhase::Failed);
    pod.reason = reason.map(str::to_string);
    pod
}

fn map(job: &JobView, pods: &[PodView], now: i64) -> Mapped {
    container_status(
        &JobObservation::Present(job),
        pods,
        at(now),
        &MappingConfig::default(),
        None,
    )
    .expect("mapped")
}

#[test]
fn pods_of_another_job_are_ignored() {
    let mut other = running_pod("other", 1);
    other.owner_uid = Some("someone-else".into());
    let mapped = map(&job(), &[other], 10);
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.reason, Reason::Pending);
}

#[test]
fn disruptions_are_told_apart() {
    let cases = [
        (Some("NodeLost"), None, Reason::NodeLost),
        (Some("Shutdown"), None, Reason::NodeLost),
        (Some("Preempting"), None, Reason::Preempted),
        (Some("OutOfcpu"), None, Reason::Disrupted),
        (Some("UnexpectedAdmissionError"), None, Reason::Disrupted),
        (None, Some("DeletionByTaintManager"), Reason::Disrupted),
        (None, Some("SomethingNew"), Reason::Disrupted),
        (
            Some("Evicted"),
            Some("TerminationByKubelet"),
            Reason::Evicted,
        ),
        (None, Some("TerminationByKubelet"), Reason::NodeLost),
    ];
    let mut job = job();
    job.failed = 1;
    job.conditions = vec![condition(
        JobConditionType::Failed,
        "BackoffLimitExceeded",
        100,
    )];
    for (pod_reason, condition_reason, expected) in cases {
        let mut pod = failed_pod("p", 1, pod_reason);
        pod.disruption = condition_reason.map(|reason| PodConditionView {
            status: ConditionStatus::True,
            reason: Some(reason.into()),
            message: None,
            last_transition_time: Some(at(90)),
        });
        let mapped = map(&job, &[pod], 110);
        assert_eq!(mapped.info.state, JobState::Failed);
        assert_eq!(
            mapped.info.reason, expected,
            "{pod_reason:?} {condition_reason:?}"
        );
        assert!(mapped.info.reason.is_retryable());
    }
}

#[test]
fn contradicting_verdicts_keep_the_last_status_and_warn() {
    let mut job = job();
    job.conditions = vec![
        condition(JobConditionType::Complete, "CompletionsReached", 60),
        condition(JobConditionType::Failed, "BackoffLimitExceeded", 60),
    ];
    let mut previous = ExecutionInfo::new(JobState::Started, Reason::Running);
    previous.started_at = Some(at(5));
    let mapped = container_status(
        &JobObservation::Present(&job),
        &[running_pod("p", 1)],
        at(70),
        &MappingConfig::default(),
        Some(&previous),
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(mapped.info.reason, Reason::UnrecognizedStatus);
    assert_eq!(mapped.info.started_at, Some(at(5)));
    assert!(mapped.warning.is_some());
}

#[test]
fn a_job_without_a_retry_left_stays_started_until_its_verdict() {
    // The only attempt failed and its pod is gone from view; the Job controller counted it
    // (status.failed) but has not written its verdict yet.
    let mut previous = ExecutionInfo::new(JobState::Started, Reason::Running);
    previous.started_at = Some(at(5));
    let map_with = |backoff_limit: Option<i32>| {
        let mut job = job();
        job.failed = 1;
        job.backoff_limit = backoff_limit;
        container_status(
            &JobObservation::Present(&job),
            &[],
            at(70),
            &MappingConfig::default(),
            Some(&previous),
        )
        .expect("mapped")
        .info
    };
    let exhausted = map_with(Some(0));
    assert_eq!(
        (exhausted.state, exhausted.reason),
        (JobState::Started, Reason::Running),
        "{exhausted:?}"
    );
    assert!(
        exhausted.message.contains("no retry is left"),
        "{}",
        exhausted.message
    );
    assert_eq!(exhausted.started_at, Some(at(5)));
    // With retries left, the next attempt's pod is on its way: queued again.
    for backoff_limit in [Some(3), None] {
        let retrying = map_with(backoff_limit);
        assert_eq!(
            (retrying.state, retrying.reason),
            (JobState::Queued, Reason::Pending),
            "{retrying:?}"
        );
        assert!(
            retrying.message.contains("next attempt"),
            "{}",
            retrying.message
        );
    }
}

#[test]
fn a_condition_status_this_version_cannot_read_warns() {
    let mut job = job();
    let mut odd = condition(JobConditionType::Failed, "BackoffLimitExceeded", 60);
    odd.status = ConditionStatus::Other("Maybe".into());
    job.conditions = vec![odd];
    let mapped = map(&job, &[running_pod("p", 1)], 70);
    assert_eq!(mapped.info.state, JobState::Started);
    assert!(
        mapped
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("\"Maybe\""))
    );
}

#[test]
fn a_restarting_container_has_started() {
    let mut pod = running_pod("p", 1);
    let main = pod.main.as_mut().expect("main");
    main.restart_count = 1;
    main.last_terminated = Some(TerminatedView {
        exit_code: 1,
        signal: None,
        reason: Some("Error".into()),
        message: None,
        started_at: Some(at(5)),
        finished_at: Some(at(9)),
    });
    main.state = ContainerStateView::Waiting {
        reason: Some("CrashLoopBackOff".into()),
        message: Some("back-off 10s".into()),
    };
    let mapped = map(&job(), &[pod], 12);
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(mapped.info.started_at, Some(at(5)));
    assert_eq!(
        mapped.info.message,
        "the main container is waiting: CrashLoopBackOff: back-off 10s"
    );
}

#[test]
fn a_pod_being_deleted_is_not_an_outcome_until_the_job_says_so() {
    let mut pod = running_pod("p", 1);
    pod.deletion_timestamp = Some(at(60));
    let mapped = map(&job(), &[pod], 40);
    assert_eq!(mapped.info.state, JobState::Started);
}

#[test]
fn an_ended_attempt_waits_for_the_job_controller() {
    // backoffLimit may allow another attempt: only the Job's verdict ends the job.
    let mut pod = failed_pod("p", 1, None);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 2,
        signal: None,
        reason: Some("Error".into()),
        message: None,
        started_at: Some(at(5)),
        finished_at: Some(at(20)),
    });
    let mapped = map(&job(), &[pod], 21);
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(
        mapped.info.message,
        "pod p ended (exit code 2); waiting for the Job controller"
    );
}

#[test]
fn a_container_that_never_started_has_no_start_time() {
    // containerd reports a StartError with startedAt at the Unix epoch.
    let mut pod = failed_pod("p", 1, None);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 128,
        signal: None,
        reason: Some("StartError".into()),
        message: Some("exec: \"report\": executable file not found in $PATH".into()),
        started_at: Some(Timestamp::UNIX_EPOCH),
        finished_at: Some(at(6)),
    });
    let mut job = job();
    job.failed = 1;
    job.conditions = vec![condition(
        JobConditionType::Failed,
        "BackoffLimitExceeded",
        7,
    )];
    let mapped = map(&job, &[pod], 8);
    assert_eq!(mapped.info.reason, Reason::Error);
    assert_eq!(mapped.info.exit_code, Some(128));
    assert_eq!(mapped.info.started_at, None);
    assert_eq!(
        mapped.info.message,
        "StartError, exit code 128: exec: \"report\": executable file not found in $PATH"
    );
}

#[test]
fn a_cancel_of_a_suspended_job_with_a_running_pod_is_in_progress() {
    let mut job = job();
    job.suspend = true;
    job.active = 1;
    job.cancel_mark = Some(CancelMark {
        requested_at: Some(at(30)),
        requested_by: None,
    });
    let mapped = map(&job, &[running_pod("p", 1)], 31);
    assert_eq!(mapped.info.state, JobState::Cancelling);
}

#[test]
fn a_cancel_of_a_job_held_by_a_queue_is_done_at_once() {
    let mut job = job();
    job.suspend = true;
    job.start_time = None;
    job.queue_name = Some("team-a".into());
    job.conditions = vec![condition(JobConditionType::Suspended, "JobSuspended", 0)];
    job.cancel_mark = Some(CancelMark {
        requested_at: Some(at(30)),
        requested_by: None,
    });
    let mapped = map(&job, &[], 31);
    assert_eq!(mapped.info.state, JobState::Cancelled);
    // Held since T0, cancelled at T0+30s: the cancel took effect when it was requested.
    assert_eq!(mapped.info.finished_at, Some(at(30)));
}

#[test]
fn a_verdict_in_the_same_second_as_the_deletion_stands() {
    let mut job = job();
    job.succeeded = 1;
    job.conditions = vec![condition(
        JobConditionType::Complete,
        "CompletionsReached",
        60,
    )];
    job.deletion_timestamp = Some(at(60));
    job.cancel_mark = Some(CancelMark {
        requested_at: Some(at(59)),
        requested_by: None,
    });
    let mapped = map(&job, &[], 61);
    assert_eq!(mapped.info.state, JobState::Succeeded);
    assert_eq!(mapped.info.finished_at, Some(at(60)));
}

#[test]
fn a_job_deleted_after_its_attempt_succeeded_on_its_own_succeeded() {
    // No verdict was seen (the Job was deleted right after the pod succeeded).
    let mut pod = running_pod("p", 1);
    pod.phase = Some(PodPhase::Succeeded);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 0,
        signal: None,
        reason: Some("Completed".into()),
        message: None,
        started_at: Some(at(5)),
        finished_at: Some(at(20)),
    });
    let mut job = job();
    job.deletion_timestamp = Some(at(21));
    let mapped = map(&job, std::slice::from_ref(&pod), 22);
    assert_eq!(mapped.info.state, JobState::Succeeded);
    assert_eq!(mapped.info.finished_at, Some(at(20)));

    // Exiting 0 on the SIGTERM of the deletion is no success.
    job.deletion_timestamp = Some(at(20));
    let mapped = map(&job, &[pod], 22);
    assert_eq!(mapped.info.reason, Reason::DeletedExternally);
}

#[test]
fn an_unschedulable_pod_and_a_gated_one_are_queued() {
    let mut pod = running_pod("p", 1);
    pod.node_name = None;
    pod.main = None;
    pod.phase = Some(PodPhase::Pending);
    pod.scheduled = Some(PodConditionView {
        status: ConditionStatus::False,
        reason: Some("SchedulingGated".into()),
        message: Some("Scheduling is blocked due to non-empty scheduling gates".into()),
        last_transition_time: Some(at(1)),
    });
    let mapped = map(&job(), &[pod.clone()], 10);
    assert_eq!(
        mapped.info,
        ExecutionInfo::new(JobState::Queued, Reason::Pending).with_message(
            "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates"
        )
    );
    pod.scheduled = None;
    let mapped = map(&job(), &[pod], 10);
    assert_eq!(mapped.info.message, "waiting for the scheduler");
}

#[test]
fn a_success_is_read_from_its_pod_even_when_the_node_clock_runs_ahead() {
    let mut pod = running_pod("p", 1);
    pod.phase = Some(PodPhase::Succeeded);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 0,
        signal: None,
        reason: Some("OOMKilled".into()),
        message: None,
        started_at: Some(at(5)),
        finished_at: Some(at(68)),
    });
    let mut job = job();
    job.succeeded = 1;
    job.conditions = vec![condition(
        JobConditionType::SuccessCriteriaMet,
        "CompletionsReached",
        66,
    )];
    let mapped = map(&job, &[pod], 70);
    assert_eq!(mapped.info.reason, Reason::OomKilled);
    assert_eq!(mapped.info.exit_code, Some(0));
    assert_eq!(mapped.info.finished_at, Some(at(68)));
}

#[test]
fn a_container_killed_in_the_second_of_the_deadline_lends_no_exit_code() {
    // The Job controller fails the Job at its deadline and deletes the running pod; the
    // container ends on SIGTERM within the same second. A replica that looked before the kill
    // saw no exit code; one that looks after must not see 143 either.
    let mut deadline = job();
    deadline.conditions = vec![condition(
        JobConditionType::FailureTarget,
        "DeadlineExceeded",
        60,
    )];
    let mut before_the_kill = running_pod("p", 1);
    before_the_kill.deletion_timestamp = Some(at(62));
    before_the_kill.deletion_grace_period_seconds = Some(2);
    let mut after_the_kill = before_the_kill.clone();
    after_the_kill.phase = Some(PodPhase::Failed);
    after_the_kill.main.as_mut().expect("main").state =
        ContainerStateView::Terminated(TerminatedView {
            exit_code: 143,
            signal: None,
            reason: Some("Error".into()),
            message: None,
            started_at: Some(at(5)),
            finished_at: Some(at(60)),
        });
    let before = map(&deadline, &[before_the_kill], 60);
    let after = map(&deadline, &[after_the_kill.clone()], 61);
    assert_eq!(before.info.reason, Reason::DeadlineExceeded);
    assert_eq!(after.info, before.info);
    assert_eq!(after.info.exit_code, None);

    // A pod deleted (evicted) before the verdict was not killed by it: its exit code stands.
    let mut backoff = job();
    backoff.conditions = vec![condition(
        JobConditionType::FailureTarget,
        "BackoffLimitExceeded",
        61,
    )];
    after_the_kill.deletion_timestamp = Some(at(60));
    after_the_kill.deletion_grace_period_seconds = Some(0);
    let evicted = map(&backoff, &[after_the_kill], 62);
    assert_eq!(evicted.info.reason, Reason::DeletedExternally);
    assert_eq!(evicted.info.exit_code, Some(143));
}

#[test]
fn a_failure_verdict_whose_pods_are_all_gone_waits_for_a_recorded_outcome() {
    // A replica that never saw the pods (lost with their node, removed once counted) sees only
    // the Job's verdict. It waits, within the pod status wait, for the outcome a replica that
    // saw them records; then it reports the verdict alone.
    let mut job = job();
    job.failed = 1;
    job.conditions = vec![condition(
        JobConditionType::FailureTarget,
        "BackoffLimitExceeded",
        60,
    )];
    // Meanwhile it started, as the Job says (it counts an attempt that ended).
    let waiting = map(&job, &[], 61);
    assert_eq!(
        (waiting.info.state, waiting.info.started_at),
        (JobState::Started, job.start_time),
        "{:?}",
        waiting.info
    );
    // Condition times are whole seconds: the wait counts from the end of the verdict's second.
    assert!(!map(&job, &[], 60 + 10).info.is_terminal());
    let alone = map(&job, &[], 60 + 1 + 10);
    assert_eq!(alone.info.state, JobState::Failed);
    assert_eq!(alone.info.reason, Reason::BackoffLimitExceeded);

    let mut recorded = ExecutionInfo::new(JobState::Failed, Reason::NodeLost);
    recorded.message = "the node was lost".into();
    job.recorded_outcome = Some(Ok(recorded.clone()));
    assert_eq!(map(&job, &[], 61).info, recorded);

    // The Job's own reason names a deadline's cause: nothing to wait for.
    job.recorded_outcome = None;
    job.conditions = vec![condition(
        JobConditionType::FailureTarget,
        "DeadlineExceeded",
        60,
    )];
    assert_eq!(map(&job, &[], 61).info.reason, Reason::DeadlineExceeded);
}

#[test]
fn of_two_attempts_created_in_one_second_the_ended_one_is_older() {
    let ended = failed_pod("z-first", 10, None);
    let newer = running_pod("a-second", 10);
    let mut pods = [newer.clone(), ended.clone()];
    pods.sort_by(oldest_attempt_first);
    assert_eq!(pods.map(|p| p.pod.name), ["z-first", "a-second"]);
    // A success ends a Job: any attempt of the same second that failed came before it.
    let mut succeeded = running_pod("a-succeeded", 10);
    succeeded.phase = Some(PodPhase::Succeeded);
    succeeded.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 0,
        signal: None,
        reason: Some("Completed".into()),
        message: None,
        started_at: Some(at(10)),
        finished_at: Some(at(10)),
    });
    let mut pods = [succeeded, ended];
    pods.sort_by(oldest_attempt_first);
    assert_eq!(pods.map(|p| p.pod.name), ["z-first", "a-succeeded"]);
    let mut older_by_time = running_pod("z-older", 5);
    older_by_time.phase = Some(PodPhase::Running);
    let mut pods = [newer, older_by_time];
    pods.sort_by(oldest_attempt_first);
    assert_eq!(pods.map(|p| p.pod.name), ["z-older", "a-second"]);
}

/// A Job whose pods are gone still says by its counts whether its work ended: a cancel marked
/// then stops nothing, and the end is the job's own.
#[test]
fn a_jobs_counts_say_whether_its_work_ended() {
    let job = |spec: serde_json::Value, status: serde_json::Value| {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": "j"}, "spec": spec, "status": status,
        }))
        .expect("a Job");
        JobView::from(&job)
    };
    let template = json!({"spec": {"containers": [{"name": "main"}]}});
    let plain = |status| job(json!({"backoffLimit": 1, "template": template}), status);
    assert!(!plain(json!({"active": 1})).counts_ended());
    assert!(plain(json!({"succeeded": 1})).counts_ended());
    // One failed attempt of two allowed: a retry comes.
    assert!(!plain(json!({"failed": 1})).counts_ended());
    assert!(plain(json!({"failed": 2})).counts_ended());
    let indexed = |status| {
        job(
            json!({"completionMode": "Indexed", "completions": 3, "backoffLimit": 6,
                   "template": template}),
            status,
        )
    };
    assert!(!indexed(json!({"succeeded": 2, "completedIndexes": "0-1"})).counts_ended());
    assert!(indexed(json!({"succeeded": 3, "completedIndexes": "0-2"})).counts_ended());
}

#[test]
fn an_oom_kill_decides_unless_a_disruption_began_first() {
    let mut job = job();
    job.failed = 1;
    job.conditions = vec![condition(
        JobConditionType::Failed,
        "BackoffLimitExceeded",
        100,
    )];
    let oom_pod_exiting = |finished: i64, exit_code: i32| {
        let mut pod = failed_pod("p", 1, None);
        if let Some(main) = pod.main.as_mut() {
            main.state = ContainerStateView::Terminated(TerminatedView {
                exit_code,
                signal: None,
                reason: Some("OOMKilled".into()),
                message: None,
                started_at: Some(at(2)),
                finished_at: Some(at(finished)),
            });
        }
        pod.disruption = Some(PodConditionView {
            status: ConditionStatus::True,
            reason: Some("PreemptionByScheduler".into()),
            message: None,
            last_transition_time: Some(at(90)),
        });
        pod
    };
    let oom_pod = |finished: i64| oom_pod_exiting(finished, 143);
    // The OOM kill came first: the job's own fault, whatever came after.
    assert_eq!(
        map(&job, &[oom_pod(80)], 110).info.reason,
        Reason::OomKilled
    );
    // In the preemption's own second, a main process killed by the OOM killer (SIGKILL, 137):
    // the kubelet's stop is never an OOM kill, so the OOM kill came first.
    assert_eq!(
        map(&job, &[oom_pod_exiting(90, 137)], 110).info.reason,
        Reason::OomKilled
    );
    // In that second, a main process that died of a SIGTERM (143): the OOM killer never sends
    // one, so it took a child (the main process went on) and the preemption's stop ended the
    // container.
    // A SIGKILL in that second on a pod deleted with a grace period: the API server saw the pod
    // still running when it was stopped (one that had ended would have been deleted with
    // none), so the OOM kill came during the stop.
    let mut stopping = oom_pod_exiting(90, 137);
    stopping.deletion_timestamp = Some(at(120));
    stopping.deletion_grace_period_seconds = Some(30);
    assert_eq!(
        map(&job, &[stopping.clone()], 110).info.reason,
        Reason::Preempted
    );
    // Deleted with none: it had ended before it was deleted, so the OOM kill came first.
    stopping.deletion_timestamp = Some(at(90));
    stopping.deletion_grace_period_seconds = Some(0);
    assert_eq!(map(&job, &[stopping], 110).info.reason, Reason::OomKilled);
    // The kubelet's own eviction (node pressure) tells no start: a main process that died of
    // its SIGTERM was stopped by it; one the OOM killer ended (SIGKILL) was not.
    let evicted_by_the_kubelet = |exit_code: i32| {
        let mut pod = oom_pod_exiting(90, exit_code);
        pod.reason = Some("Evicted".into());
        if let Some(condition) = pod.disruption.as_mut() {
            condition.reason = Some("TerminationByKubelet".into());
        }
        pod
    };
    assert_eq!(
        map(&job, &[evicted_by_the_kubelet(143)], 110).info.reason,
        Reason::Evicted
    );
    assert_eq!(
        map(&job, &[evicted_by_the_kubelet(137)], 110).info.reason,
        Reason::OomKilled
    );
    let stopped_in_its_second = map(&job, &[oom_pod(90)], 110);
    assert_eq!(stopped_in_its_second.info.state, JobState::Failed);
    assert_eq!(
        stopped_in_its_second.info.reason,
        Reason::Preempted,
        "{stopped_in_its_second:?}"
    );
    // The preemption began first and the container ended while it was being stopped.
    let stopped = map(&job, &[oom_pod(95)], 110);
    assert_eq!(stopped.info.state, JobState::Failed);
    assert!(stopped.info.reason.is_retryable(), "{stopped:?}");
}

#[test]
fn an_oom_kill_before_an_eviction_in_the_verdicts_second_says_oom_killed() {
    // The container is OOM-killed; in the same second the Job controller judges the Job and
    // the Eviction API marks the pod and deletes it (at once: it had ended). Whole seconds
    // cannot order the kill and the deletion; the eviction's condition says the kill came
    // first, and an OOM kill says so, as a replica that looked before the deletion read it.
    let mut job = job();
    job.failed = 1;
    job.conditions = vec![condition(
        JobConditionType::Failed,
        "BackoffLimitExceeded",
        90,
    )];
    let mut pod = failed_pod("p", 1, None);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 137,
        signal: None,
        reason: Some("OOMKilled".into()),
        message: None,
        started_at: Some(at(2)),
        finished_at: Some(at(90)),
    });
    let before = map(&job, std::slice::from_ref(&pod), 110);
    pod.disruption = Some(PodConditionView {
        status: ConditionStatus::True,
        reason: Some("EvictionByEvictionAPI".into()),
        message: None,
        last_transition_time: Some(at(90)),
    });
    pod.deletion_timestamp = Some(at(90));
    pod.deletion_grace_period_seconds = Some(0);
    let after = map(&job, &[pod], 110);
    assert_eq!(before.info.reason, Reason::OomKilled, "{before:?}");
    assert_eq!(after.info, before.info);
}

#[test]
fn an_oom_kill_during_the_stop_that_followed_the_verdict_is_its_consequence() {
    // The kubelet evicts the pod (its own disruption, which tells no start); the disruption
    // rule fails the Job, and the pod is stopped. The main process, still running, is then
    // OOM-killed while it stops: the kill came after the outcome was decided, and is not why
    // the job failed.
    let mut job = job();
    job.failed = 1;
    let mut verdict = condition(JobConditionType::FailureTarget, "PodFailurePolicy", 90);
    verdict.message =
        Some("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0".into());
    job.conditions = vec![verdict];
    let mut pod = failed_pod("p", 1, Some("Evicted"));
    pod.disruption = Some(PodConditionView {
        status: ConditionStatus::True,
        reason: Some("TerminationByKubelet".into()),
        message: None,
        last_transition_time: None,
    });
    // Asked to stop at 90 (the deletion's time less its grace period), killed within that
    // second.
    pod.deletion_timestamp = Some(at(120));
    pod.deletion_grace_period_seconds = Some(30);
    pod.main.as_mut().expect("main").state = ContainerStateView::Terminated(TerminatedView {
        exit_code: 137,
        signal: None,
        reason: Some("OOMKilled".into()),
        message: None,
        started_at: Some(at(2)),
        finished_at: Some(at(90)),
    });
    let mapped = map(&job, &[pod], 110);
    assert_eq!(mapped.info.state, JobState::Failed);
    assert_eq!(mapped.info.reason, Reason::Evicted, "{mapped:?}");
    assert_eq!(mapped.info.exit_code, None, "{mapped:?}");
}

/// A pod whose main container waits for its image, as the kubelet shows it.
fn pulling(reason: &str, message: &str) -> PodView {
    pod_from(json!({
        "metadata": {"name": "p", "creationTimestamp": "2025-06-10T08:00:01Z"},
        "spec": {"containers": [{"name": "main"}]},
        "status": {
            "phase": "Pending",
            "startTime": "2025-06-10T08:00:02Z",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                status("main", json!({"waiting": {"reason": reason, "message": message}}))
            ],
        },
    }))
}

#[test]
fn the_registrys_error_goes_on_through_the_back_off_to_the_final_message() {
    let job = JobView {
        meta: ManagedMeta {
            name: "j".into(),
            ..ManagedMeta::default()
        },
        ..JobView::default()
    };
    let config = MappingConfig::default();
    let map = |pod: PodView, now: i64, previous: Option<&ExecutionInfo>| {
        container_status(
            &JobObservation::Present(&job),
            &[pod],
            at(now),
            &config,
            previous,
        )
        .expect("mapped")
        .info
    };
    let error = "failed to pull and unpack image \"registry.invalid/x:1\": dial tcp: lookup \
                 registry.invalid: no such host";
    let failed_pull = map(pulling("ErrImagePull", error), 10, None);
    assert_eq!(
        failed_pull,
        ExecutionInfo::new(JobState::Queued, Reason::ImagePullBackOff).with_message(format!(
            "the main container is waiting: ErrImagePull: {error}"
        ))
    );
    let back_off = "Back-off pulling image \"registry.invalid/x:1\"";
    let backing_off = map(
        pulling("ImagePullBackOff", back_off),
        20,
        Some(&failed_pull),
    );
    assert_eq!(
        backing_off.message,
        format!(
            "the main container is waiting: ImagePullBackOff: {back_off}; the last pull failed: \
             {error}"
        )
    );
    // Carried on from one back-off to the next, and into the outcome.
    let again = map(
        pulling("ImagePullBackOff", back_off),
        40,
        Some(&backing_off),
    );
    assert_eq!(again, backing_off);
    let expired = map(pulling("ImagePullBackOff", back_off), 183, Some(&again));
    assert_eq!(expired.reason, Reason::ImagePullFailed);
    assert_eq!(
        expired.message,
        format!(
            "the main container did not start within 180s: ImagePullBackOff: {back_off}; the \
             last pull failed: {error}"
        )
    );
    // Without an answer before it, the back-off says what it can.
    assert_eq!(
        map(pulling("ImagePullBackOff", back_off), 20, None).message,
        format!("the main container is waiting: ImagePullBackOff: {back_off}")
    );
}

#[test]
fn the_main_containers_memory_limit_is_read_as_written() {
    let pod = pod_from(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [
            {"name": "sidecar", "resources": {"limits": {"memory": "1Gi"}}},
            {"name": "main", "resources": {"limits": {"memory": "64Mi", "cpu": "1"}}},
        ]},
    }));
    assert_eq!(pod.memory_limit.as_deref(), Some("64Mi"));
    let unlimited = pod_from(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"memory": "64Mi"}}}]},
    }));
    assert_eq!(unlimited.memory_limit, None);
}
