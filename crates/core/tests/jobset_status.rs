//! The JobSet status mapping, on JobSets, child Jobs and pods as the JobSet controller, the Job
//! controller and the kubelet write them: the set's state from its conditions, the reason of a
//! failure from the Job and pod that caused it, and the per-replicated-job summary.

mod common;
mod jobset_support;

use jiff::Timestamp;
use jobset_support::{Pod1, Seen, at, child, condition, counts, expect, jobset, views};
use kubeferry_core::container::MappingConfig;
use kubeferry_core::jobset::{JobSetAction, JobSetMapped, jobset_status};
use kubeferry_core::status::{ReplicaSummary, ReplicatedJobCounts};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use serde_json::{Value, json};

fn map(
    jobset: &Value,
    children: &[(Value, Option<Value>)],
    seen: Seen,
    now: Timestamp,
    previous: Option<&ExecutionInfo>,
) -> Option<JobSetMapped> {
    let (view, jobs, pods) = views(jobset, children);
    jobset_status(
        &seen.observe(&view),
        &jobs,
        &pods,
        now,
        &MappingConfig::default(),
        previous,
    )
}

fn summary(
    restarts: u32,
    terminal: Option<&str>,
    rows: [(u32, u32, u32, u32); 2],
) -> ReplicaSummary {
    let row =
        |name: &str, replicas: u32, (ready, succeeded, failed, active): (u32, u32, u32, u32)| {
            ReplicatedJobCounts {
                name: name.to_string(),
                replicas,
                ready,
                succeeded,
                failed,
                active,
                suspended: 0,
            }
        };
    ReplicaSummary {
        restarts,
        terminal_state: terminal.map(str::to_string),
        replicated_jobs: vec![row("leader", 1, rows[0]), row("workers", 2, rows[1])],
    }
}

fn with_summary(mut info: ExecutionInfo, summary: ReplicaSummary) -> ExecutionInfo {
    info.replicas = Some(Box::new(summary));
    info
}

#[test]
fn every_job_succeeded() {
    let status = json!({
        "conditions": [condition("Completed", "AllJobsCompleted", "jobset completed successfully", 40)],
        "restarts": 0,
        "terminalState": "Completed",
        "replicatedJobsStatus": counts(&[("leader", 0, 1, 0, 0), ("workers", 0, 2, 0, 0)]),
    });
    let children = [
        child("leader", 0, 0, Pod1::Succeeded(5, 30)),
        child("workers", 0, 0, Pod1::Succeeded(4, 35)),
        child("workers", 1, 0, Pod1::Succeeded(6, 38)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(41), None).expect("mapped");
    let expected = expect(JobState::Succeeded, Reason::Completed)
        .message("jobset completed successfully")
        .started(4)
        .finished(40)
        .info();
    assert_eq!(
        mapped.info,
        with_summary(
            expected,
            summary(0, Some("Completed"), [(0, 1, 0, 0), (0, 2, 0, 0)])
        )
    );
    assert_eq!(mapped.action, None);
    assert_eq!(mapped.warning, None);
    assert_eq!(mapped.recheck_at, None);
}

#[test]
fn an_oom_killed_worker_fails_the_set_with_oom_killed_and_the_worker_named() {
    let status = json!({
        "conditions": [condition("Failed", "FailedJobs", &format!("jobset failed due to one or more job failures (first failed job: {}-workers-1)", jobset_support::NAME), 31)],
        "terminalState": "Failed",
        "replicatedJobsStatus": counts(&[("leader", 1, 0, 0, 1), ("workers", 1, 0, 1, 1)]),
    });
    let children = [
        child("leader", 0, 0, Pod1::Running(5)),
        child("workers", 0, 0, Pod1::Running(6)),
        child("workers", 1, 0, Pod1::OomKilled(7, 29)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(32), None).expect("mapped");
    let expected = expect(JobState::Failed, Reason::OomKilled)
        .message(format!(
            "workers index 1 (Job {}-workers-1) failed: the main container was OOMKilled (it has no memory limit: the node ran short of memory), exit code 137",
            jobset_support::NAME
        ))
        .exit_code(137)
        .started(5)
        .finished(31)
        .info();
    assert_eq!(
        mapped.info,
        with_summary(
            expected,
            summary(0, Some("Failed"), [(1, 0, 0, 1), (1, 0, 1, 1)])
        )
    );
    assert_eq!(mapped.action, None);
}

#[test]
fn reaching_max_restarts_says_how_many_and_blames_the_last_failure() {
    let name = jobset_support::NAME;
    let status = json!({
        "conditions": [condition("Failed", "ReachedMaxRestarts", &format!("jobset failed due to reaching max number of restarts (first failed job: {name}-leader-0)"), 150)],
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "terminalState": "Failed",
        "replicatedJobsStatus": counts(&[("leader", 0, 0, 1, 0), ("workers", 2, 0, 0, 2)]),
    });
    let children = [
        child("leader", 0, 1, Pod1::Exited(105, 148, 3)),
        child("workers", 0, 1, Pod1::Running(104)),
        child("workers", 1, 1, Pod1::Running(104)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(151), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Failed);
    assert_eq!(mapped.info.reason, Reason::Error);
    assert_eq!(mapped.info.exit_code, Some(3));
    assert_eq!(
        mapped.info.message,
        format!("leader index 0 (Job {name}-leader-0) failed after 1 restart: exit code 3")
    );
    assert_eq!(mapped.info.finished_at, Some(at(150)));
    assert_eq!(mapped.info.replicas.as_ref().map(|r| r.restarts), Some(1));
}

#[test]
fn a_failure_whose_job_is_gone_reports_the_jobsets_words() {
    let status = json!({
        "conditions": [condition("Failed", "FailedJobs", "jobset failed due to one or more job failures (first failed job: gone-workers-0)", 20)],
        "terminalState": "Failed",
    });
    let mapped = map(&jobset(status), &[], Seen::Present, at(21), None).expect("mapped");
    let expected = expect(JobState::Failed, Reason::Error)
        .message("FailedJobs: jobset failed due to one or more job failures (first failed job: gone-workers-0)")
        .finished(20)
        .info();
    assert_eq!(
        mapped.info,
        with_summary(
            expected,
            summary(0, Some("Failed"), [(0, 0, 0, 0), (0, 0, 0, 0)])
        )
    );
}

#[test]
fn a_failure_waits_a_little_for_the_pod_that_tells_why() {
    let status = json!({
        "conditions": [condition("Failed", "FailedJobs", &format!("jobset failed due to one or more job failures (first failed job: {}-workers-1)", jobset_support::NAME), 31)],
        "terminalState": "Failed",
    });
    // The worker's Job failed; its pod's final status has not been observed yet.
    let (job, _) = child("workers", 1, 0, Pod1::OomKilled(7, 29));
    let (_, running_pod) = child("workers", 1, 0, Pod1::Running(7));
    let children = [(job, running_pod)];
    let mapped = map(
        &jobset(status.clone()),
        &children,
        Seen::Present,
        at(32),
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(
        mapped.info.message,
        format!(
            "the JobSet failed; waiting for the pods of workers index 1 (Job {}-workers-1) to tell why",
            jobset_support::NAME
        )
    );
    let recheck = mapped.recheck_at.expect("a time to look again");
    // Past the wait the JobSet's own words are the outcome.
    let later = map(&jobset(status), &children, Seen::Present, recheck, None).expect("mapped");
    assert_eq!(later.info.state, JobState::Failed);
}

#[test]
fn a_running_set_counts_its_replicated_jobs() {
    let status = json!({
        "restarts": 0,
        "replicatedJobsStatus": counts(&[("leader", 1, 0, 0, 1), ("workers", 1, 0, 0, 2)]),
    });
    let children = [
        child("leader", 0, 0, Pod1::Running(5)),
        child("workers", 0, 0, Pod1::Running(6)),
        child("workers", 1, 0, Pod1::None),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(10), None).expect("mapped");
    let expected = expect(JobState::Started, Reason::Running)
        .message(
            "leader 0/1 succeeded, 1 active, 1 ready; workers 0/2 succeeded, 2 active, 1 ready",
        )
        .started(5)
        .info();
    assert_eq!(
        mapped.info,
        with_summary(expected, summary(0, None, [(1, 0, 0, 1), (1, 0, 0, 2)]))
    );
}

#[test]
fn a_set_without_status_or_pods_is_pending() {
    let mapped = map(&jobset(Value::Null), &[], Seen::Present, at(1), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.reason, Reason::Pending);
    assert_eq!(
        mapped.info.message,
        "leader 0/1 succeeded; workers 0/2 succeeded"
    );
}

#[test]
fn a_restart_after_a_failure_keeps_the_set_running_and_says_why() {
    let name = jobset_support::NAME;
    let status = json!({
        "conditions": [condition("RestartingJobSet", "DefaultFailurePolicy", &format!("applying RestartJobSet failure policy action (first failed job: {name}-workers-0)"), 30)],
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "replicatedJobsStatus": counts(&[("leader", 0, 0, 0, 0), ("workers", 0, 0, 0, 0)]),
    });
    let children = [
        child("leader", 0, 1, Pod1::None),
        child("workers", 0, 0, Pod1::Exited(5, 28, 1)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(31), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(mapped.info.reason, Reason::Running);
    assert_eq!(mapped.info.started_at, Some(at(5)));
    assert_eq!(
        mapped.info.message,
        format!(
            "leader 0/1 succeeded; workers 0/2 succeeded; restarted 1 time; restarting: applying RestartJobSet failure policy action (first failed job: {name}-workers-0)"
        )
    );
}

#[test]
fn the_restarts_left_are_those_the_controller_counts_towards_max_restarts() {
    // Two restarts so far, of which none counted towards maxRestarts (a failure policy rule
    // that restarts without counting): a worker of the current restart failed, one restart
    // is left, not none.
    let status = json!({
        "restarts": 2,
        "restartsCountTowardsMax": 0,
        "replicatedJobsStatus": counts(&[("leader", 0, 0, 1, 0), ("workers", 0, 0, 1, 1)]),
    });
    let children = [
        child("leader", 0, 2, Pod1::Running(40)),
        child("workers", 0, 2, Pod1::Exited(41, 45, 1)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(46), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started, "{mapped:?}");
    assert!(
        mapped.info.message.contains("1 restart(s) left"),
        "{}",
        mapped.info.message
    );
    // A controller that does not count separately: its restarts count.
    let status = json!({
        "restarts": 1,
        "replicatedJobsStatus": counts(&[("leader", 0, 0, 1, 0), ("workers", 0, 0, 1, 1)]),
    });
    let children = [
        child("leader", 0, 1, Pod1::Running(40)),
        child("workers", 0, 1, Pod1::Exited(41, 45, 1)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(46), None).expect("mapped");
    assert!(
        mapped.info.message.contains("0 restart(s) left"),
        "{}",
        mapped.info.message
    );
}

#[test]
fn an_image_that_cannot_be_pulled_holds_the_set_then_fails_it_naming_the_replica() {
    let name = jobset_support::NAME;
    let status =
        json!({"replicatedJobsStatus": counts(&[("leader", 0, 0, 0, 1), ("workers", 0, 0, 0, 2)])});
    let children = [
        child("leader", 0, 0, Pod1::None),
        child("workers", 0, 0, Pod1::ImagePull(3)),
    ];
    let mapped = map(
        &jobset(status.clone()),
        &children,
        Seen::Present,
        at(10),
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.reason, Reason::ImagePullBackOff);
    assert!(
        mapped
            .info
            .message
            .starts_with(&format!("workers index 0 (Job {name}-workers-0): ")),
        "{}",
        mapped.info.message
    );
    assert_eq!(mapped.action, None);
    let recheck = mapped.recheck_at.expect("the pull grace's end");
    assert!(recheck <= at(2 + 180), "{recheck}");

    let config_grace = MappingConfig::default().image_pull_grace;
    let late = at(10 + i64::try_from(config_grace.as_secs()).unwrap());
    let mapped = map(&jobset(status), &children, Seen::Present, late, None).expect("mapped");
    assert_eq!(
        mapped.info.state,
        JobState::Queued,
        "not failed before the record"
    );
    let Some(JobSetAction { outcome }) = &mapped.action else {
        panic!("an action: {mapped:?}");
    };
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::ImagePullFailed);
    assert!(
        outcome
            .message
            .starts_with(&format!("workers index 0 (Job {name}-workers-0) failed: ")),
        "{}",
        outcome.message
    );
    assert!(outcome.replicas.is_some());
}

#[test]
fn the_jobs_of_a_restart_the_controller_already_counted_decide_nothing() {
    // The controller counted restart 1 and is deleting restart 0's Jobs; one of those still
    // shows a pod that could never pull its image. That is the old restart's: no outcome is
    // decided from it.
    let status = json!({"restarts": 1,
        "replicatedJobsStatus": counts(&[("leader", 0, 0, 0, 1), ("workers", 0, 0, 0, 2)])});
    let children = [
        child("leader", 0, 0, Pod1::None),
        child("workers", 0, 0, Pod1::ImagePull(3)),
    ];
    let grace = MappingConfig::default().image_pull_grace;
    let late = at(10 + i64::try_from(grace.as_secs()).unwrap());
    let mapped = map(&jobset(status), &children, Seen::Present, late, None).expect("mapped");
    assert_eq!(mapped.action, None, "{mapped:?}");
    assert!(!mapped.info.is_terminal(), "{mapped:?}");
}

#[test]
fn a_recorded_outcome_counts_once_the_set_is_deleted() {
    let outcome = expect(JobState::Failed, Reason::ImagePullFailed)
        .message("workers index 0 failed: the image cannot be pulled")
        .finished(200)
        .info();
    let mut object = jobset(json!({}));
    object["metadata"]["annotations"]["kubeferry.dev/outcome"] =
        json!(serde_json::to_string(&outcome).unwrap());
    let mapped = map(&object, &[], Seen::Present, at(201), None).expect("mapped");
    assert_eq!(
        mapped.action,
        Some(JobSetAction {
            outcome: outcome.clone()
        })
    );
    assert!(!mapped.info.is_terminal());
    object["metadata"]["deletionTimestamp"] = json!(jobset_support::time(202));
    let mapped = map(&object, &[], Seen::Present, at(203), None).expect("mapped");
    assert_eq!(mapped.info, outcome);
    assert_eq!(mapped.action, None);
}

#[test]
fn suspended() {
    let status = json!({
        "conditions": [condition("Suspended", "SuspendedJobs", "jobset is suspended", 1)],
    });
    let mapped = map(&jobset(status), &[], Seen::Present, at(2), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.reason, Reason::Suspended);
}

#[test]
fn cancel_is_in_progress_until_the_set_is_deleted() {
    let mut object = jobset(
        json!({"replicatedJobsStatus": counts(&[("leader", 1, 0, 0, 1), ("workers", 2, 0, 0, 2)])}),
    );
    object["metadata"]["annotations"]["kubeferry.dev/cancel-requested"] =
        json!(jobset_support::time(20));
    let children = [child("leader", 0, 0, Pod1::Running(5))];
    let mapped = map(&object, &children, Seen::Present, at(21), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Cancelling);
    assert_eq!(mapped.info.reason, Reason::CancelRequested);
    assert_eq!(mapped.info.started_at, Some(at(5)));

    object["metadata"]["deletionTimestamp"] = json!(jobset_support::time(22));
    let mapped = map(&object, &children, Seen::Present, at(23), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Cancelled);
    assert_eq!(mapped.info.finished_at, Some(at(22)));

    // Gone, seen only by a relist: the cancel mark tells.
    let mapped = map(
        &object,
        &[],
        Seen::Vanished { final_state: false },
        at(30),
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Cancelled);
}

#[test]
fn an_outcome_decided_before_the_cancel_stands_and_one_after_it_does_not() {
    let status = |at_s: i64| json!({"conditions": [condition("Completed", "AllJobsCompleted", "jobset completed successfully", at_s)]});
    let mut object = jobset(status(20));
    object["metadata"]["annotations"]["kubeferry.dev/cancel-requested"] =
        json!(jobset_support::time(25));
    object["metadata"]["deletionTimestamp"] = json!(jobset_support::time(26));
    let mapped = map(&object, &[], Seen::Present, at(27), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Succeeded);

    let mut object = jobset(status(30));
    object["metadata"]["annotations"]["kubeferry.dev/cancel-requested"] =
        json!(jobset_support::time(25));
    object["metadata"]["deletionTimestamp"] = json!(jobset_support::time(26));
    let mapped = map(&object, &[], Seen::Present, at(31), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Cancelled);
}

#[test]
fn deleted_by_someone_else() {
    let object = jobset(json!({}));
    let mapped = map(
        &object,
        &[],
        Seen::Vanished { final_state: true },
        at(30),
        None,
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Failed);
    assert_eq!(mapped.info.reason, Reason::DeletedExternally);
    // A stale view may predate a cancel requested elsewhere: no such job.
    assert_eq!(
        map(
            &object,
            &[],
            Seen::Vanished { final_state: false },
            at(30),
            None
        ),
        None
    );
}

#[test]
fn a_terminal_previous_status_never_changes() {
    let previous = expect(JobState::Succeeded, Reason::Completed)
        .finished(40)
        .info();
    let object = jobset(json!({
        "conditions": [condition("Failed", "FailedJobs", "jobset failed due to one or more job failures", 50)],
    }));
    let mapped = map(&object, &[], Seen::Present, at(60), Some(&previous)).expect("mapped");
    assert_eq!(mapped.info, previous);
}

#[test]
fn a_status_that_cannot_be_read_keeps_the_last_state_and_warns() {
    let previous = expect(JobState::Started, Reason::Running).started(5).info();
    let object = jobset(json!({"conditions": "not a list"}));
    let mapped = map(&object, &[], Seen::Present, at(60), Some(&previous)).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(mapped.info.reason, Reason::UnrecognizedStatus);
    assert_eq!(mapped.info.started_at, Some(at(5)));
    assert!(
        mapped
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("cannot be read")),
        "{mapped:?}"
    );
    // Both outcomes at once is no outcome either.
    let object = jobset(json!({"conditions": [
        condition("Completed", "AllJobsCompleted", "done", 50),
        condition("Failed", "FailedJobs", "failed", 50),
    ]}));
    let mapped = map(&object, &[], Seen::Present, at(60), Some(&previous)).expect("mapped");
    assert_eq!(mapped.info.reason, Reason::UnrecognizedStatus);
    assert!(!mapped.info.is_terminal());
}

#[test]
fn success_policy_any_ends_the_set_while_other_jobs_still_run() {
    let status = json!({
        "conditions": [condition("Completed", "AllJobsCompleted", "jobset completed successfully", 20)],
        "terminalState": "Completed",
        "replicatedJobsStatus": counts(&[("leader", 0, 1, 0, 0), ("workers", 2, 0, 0, 2)]),
    });
    let children = [
        child("leader", 0, 0, Pod1::Succeeded(5, 19)),
        child("workers", 0, 0, Pod1::Running(6)),
        child("workers", 1, 0, Pod1::Running(6)),
    ];
    let mapped = map(&jobset(status), &children, Seen::Present, at(21), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Succeeded);
    assert_eq!(mapped.info.finished_at, Some(at(20)));
    assert_eq!(
        mapped.info.replicas.map(|r| r.counts()).as_deref(),
        Some("leader 1/1 succeeded; workers 0/2 succeeded, 2 active, 2 ready")
    );
}

#[test]
fn jobs_of_another_jobset_of_the_same_name_are_ignored() {
    let status = json!({});
    let (mut job, pod) = child("workers", 0, 0, Pod1::Running(5));
    job["metadata"]["ownerReferences"][0]["uid"] = json!("someone-else");
    let mapped = map(&jobset(status), &[(job, pod)], Seen::Present, at(10), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Queued);
    assert_eq!(mapped.info.started_at, None);
}

#[test]
fn a_startup_in_order_says_so() {
    let status = json!({
        "conditions": [condition("StartupPolicyInProgress", "InOrderStartupPolicyInProgress", "in order startup policy is in progress", 2)],
    });
    let children = [child("leader", 0, 0, Pod1::Running(5))];
    let mapped = map(&jobset(status), &children, Seen::Present, at(10), None).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert!(
        mapped
            .info
            .message
            .ends_with("starting the replicated jobs in order"),
        "{}",
        mapped.info.message
    );
}
