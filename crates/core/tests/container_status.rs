//! The container status mapping, one test per situation, on Job and pod YAML as a Kubernetes
//! 1.33 API server returns them (fixtures under `tests/fixtures/container/<case>/`).

mod common;
mod support;

use std::time::Duration;

use kubeferry_core::container::{
    ContainerStateView, ContainerView, MappingConfig, PodView, TerminatedView,
};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use support::{Seen, assert_recorded, assert_reports, at, expect, map, map_views, map_with, views};

const PULL_IMAGE: &str = "registry.example.com/analytics/report:2.4.9";

fn pod_name(case: &str) -> String {
    let (_, pods) = views(case);
    pods.last()
        .map(|p: &PodView| p.name.clone())
        .expect("a pod")
}

fn started_previously() -> ExecutionInfo {
    let mut previous = ExecutionInfo::new(JobState::Started, Reason::Running);
    previous.started_at = Some(at(5));
    previous
}

#[test]
fn every_fixture_deserializes_and_maps() {
    for case in support::fixture_names() {
        let (job, pods) = views(&case);
        assert!(!job.name.is_empty(), "{case}: the Job has a name");
        assert!(!job.uid.is_empty(), "{case}: the Job has a uid");
        assert_eq!(job.job_id.as_deref(), Some(case.replace('_', "-").as_str()));
        for pod in &pods {
            assert_eq!(pod.owner_uid.as_deref(), Some(job.uid.as_str()), "{case}");
        }
        let mapped = map(&case, Seen::Present, at(3600));
        assert!(mapped.is_some(), "{case}: a present Job is always mapped");
    }
}

#[test]
fn no_pod_yet() {
    assert_reports(
        map("no_pod_yet", Seen::Present, at(1)),
        expect(JobState::Queued, Reason::Pending)
            .message("waiting for the Job controller to create a pod"),
    );
}

#[test]
fn no_pod_yet_with_a_refused_creation() {
    let (mut job, pods) = views("no_pod_yet");
    job.creation_refused = Some(
        "Error creating: pods \"no-pod-yet-\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10".into(),
    );
    let mapped = map_views(
        &job,
        &pods,
        Seen::Present,
        at(30),
        &MappingConfig::default(),
        None,
    );
    assert_reports(
        mapped,
        expect(JobState::Queued, Reason::Pending).message(
            "waiting for the Job controller to create a pod: Error creating: pods \"no-pod-yet-\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10",
        ),
    );
}

#[test]
fn no_pod_past_pending_timeout_says_why_when_refused() {
    let (mut job, pods) = views("no_pod_yet");
    job.creation_refused =
        Some("Error creating: pods \"no-pod-yet-\" is forbidden: exceeded quota: compute".into());
    let config = MappingConfig {
        pending_timeout: Some(Duration::from_secs(600)),
        ..MappingConfig::default()
    };
    assert_recorded(
        map_views(&job, &pods, Seen::Present, at(600), &config, None),
        expect(JobState::Failed, Reason::UnschedulableTimeout).message(
            "no pod was created within the pending timeout of 600s: Error creating: pods \"no-pod-yet-\" is forbidden: exceeded quota: compute",
        )
        .finished(600),
    );
}

#[test]
fn no_pod_past_pending_timeout() {
    let config = MappingConfig {
        pending_timeout: Some(Duration::from_secs(600)),
        ..MappingConfig::default()
    };
    assert_recorded(
        map_with("no_pod_yet", Seen::Present, at(600), &config, None),
        expect(JobState::Failed, Reason::UnschedulableTimeout)
            .message("no pod was created within the pending timeout of 600s")
            .finished(600),
    );
}

#[test]
fn suspended_by_kueue() {
    assert_reports(
        map("suspended_by_kueue", Seen::Present, at(60)),
        expect(JobState::Queued, Reason::Suspended)
            .message("waiting for admission by queue team-a"),
    );
}

const UNSCHEDULABLE: &str = "0/3 nodes are available: 1 node(s) had untolerated taint \
    {node-role.kubernetes.io/control-plane: }, 2 Insufficient memory. preemption: 0/3 nodes are \
    available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for \
    incoming pod.";

#[test]
fn unschedulable() {
    assert_reports(
        map("unschedulable", Seen::Present, at(61)),
        expect(JobState::Queued, Reason::Unschedulable).message(UNSCHEDULABLE),
    );
}

#[test]
fn unschedulable_past_pending_timeout() {
    let config = MappingConfig {
        pending_timeout: Some(Duration::from_secs(600)),
        ..MappingConfig::default()
    };
    let pod = pod_name("unschedulable");
    assert_reports(
        map_with("unschedulable", Seen::Present, at(600), &config, None),
        expect(JobState::Queued, Reason::Unschedulable).message(UNSCHEDULABLE),
    );
    assert_recorded(
        map_with("unschedulable", Seen::Present, at(601), &config, None),
        expect(JobState::Failed, Reason::UnschedulableTimeout)
            .message(format!(
                "pod {pod} found no node within the pending timeout of 600s: {UNSCHEDULABLE}"
            ))
            .finished(601),
    );
}

#[test]
fn container_creating() {
    assert_reports(
        map("container_creating", Seen::Present, at(4)),
        expect(JobState::Queued, Reason::ContainerCreating)
            .message("the main container is waiting: ContainerCreating"),
    );
}

fn pull_backoff_message() -> String {
    format!(
        "Back-off pulling image \"{PULL_IMAGE}\": ErrImagePull: failed to pull and unpack image \
         \"{PULL_IMAGE}\": failed to resolve reference \"{PULL_IMAGE}\": {PULL_IMAGE}: not found"
    )
}

#[test]
fn image_pull_backoff_within_grace() {
    assert_reports(
        map("image_pull_backoff", Seen::Present, at(181)),
        expect(JobState::Queued, Reason::ImagePullBackOff).message(format!(
            "the main container is waiting: ImagePullBackOff: {}",
            pull_backoff_message()
        )),
    );
}

#[test]
fn image_pull_backoff_past_grace() {
    // The kubelet took the pod at T0+2s; the default grace is 3 minutes.
    assert_recorded(
        map("image_pull_backoff", Seen::Present, at(182)),
        expect(JobState::Failed, Reason::ImagePullFailed)
            .message(format!(
                "the main container did not start within 180s: ImagePullBackOff: {}",
                pull_backoff_message()
            ))
            .finished(182),
    );
}

#[test]
fn image_pull_grace_is_configurable() {
    let config = MappingConfig {
        image_pull_grace: Duration::from_secs(10),
        ..MappingConfig::default()
    };
    let mapped =
        map_with("image_pull_backoff", Seen::Present, at(12), &config, None).expect("mapped");
    assert_eq!(mapped.info.reason, Reason::ImagePullFailed);
    assert_eq!(mapped.info.finished_at, Some(at(12)));
}

#[test]
fn err_image_pull() {
    let message = format!(
        "failed to pull and unpack image \"{PULL_IMAGE}\": failed to resolve reference \
         \"{PULL_IMAGE}\": pull access denied, repository does not exist or may require \
         authorization: server message: insufficient_scope: authorization failed"
    );
    assert_reports(
        map("err_image_pull", Seen::Present, at(32)),
        expect(JobState::Queued, Reason::ImagePullBackOff).message(format!(
            "the main container is waiting: ErrImagePull: {message}"
        )),
    );
}

#[test]
fn invalid_image_name() {
    let image = "registry.example.com/Analytics/Report:2.4.1";
    assert_recorded(
        map("invalid_image_name", Seen::Present, at(3)),
        expect(JobState::Failed, Reason::InvalidImageName)
            .message(format!(
                "the main container cannot start: InvalidImageName: Failed to apply default \
                 image tag \"{image}\": couldn't parse image name \"{image}\": invalid reference \
                 format: repository name (Analytics/Report) must be lowercase"
            ))
            .finished(2),
    );
}

#[test]
fn create_container_config_error() {
    assert_recorded(
        map("create_container_config_error", Seen::Present, at(3)),
        expect(JobState::Failed, Reason::CreateContainerConfigError)
            .message(
                "the main container cannot start: CreateContainerConfigError: secret \
                 \"warehouse-credentials\" not found",
            )
            .finished(2),
    );
}

#[test]
fn create_container_error_within_and_past_grace() {
    let within = map("create_container_error", Seen::Present, at(62)).expect("mapped");
    assert_eq!(within.info.state, JobState::Queued);
    assert_eq!(within.info.reason, Reason::ContainerCreating);
    assert!(
        within
            .info
            .message
            .starts_with("the main container is waiting: CreateContainerError: failed to generate"),
        "{}",
        within.info.message
    );
    assert!(!within.must_record());

    let past = map("create_container_error", Seen::Present, at(182)).expect("mapped");
    assert_eq!(past.info.state, JobState::Failed);
    assert_eq!(past.info.reason, Reason::CreateContainerError);
    assert_eq!(past.info.finished_at, Some(at(182)));
    assert!(
        past.info.message.ends_with(
            "failed to mkdir \"/mnt/scratch/report\": mkdir /mnt/scratch: read-only file system"
        ),
        "{}",
        past.info.message
    );
    assert!(past.must_record());
}

#[test]
fn running() {
    assert_reports(
        map("running", Seen::Present, at(30)),
        expect(JobState::Started, Reason::Running).started(5),
    );
}

#[test]
fn succeeded() {
    assert_reports(
        map("succeeded", Seen::Present, at(70)),
        expect(JobState::Succeeded, Reason::Completed)
            .exit_code(0)
            .started(5)
            .finished(65),
    );
}

#[test]
fn success_criteria_met_only() {
    // Kubernetes 1.31+: the outcome is known at SuccessCriteriaMet, before Complete.
    assert_reports(
        map("success_criteria_met_only", Seen::Present, at(67)),
        expect(JobState::Succeeded, Reason::Completed)
            .exit_code(0)
            .started(5)
            .finished(65),
    );
}

#[test]
fn failed_with_exit_code() {
    assert_reports(
        map("failed_with_exit_code", Seen::Present, at(70)),
        expect(JobState::Failed, Reason::Error)
            .message(
                "exit code 3: Traceback (most recent call last):\n  File \
                 \"/app/report/nightly.py\", line 88, in main\n    rows = \
                 warehouse.query(SQL_DAILY)\nreport.warehouse.TableMissing: table \
                 warehouse.orders_daily does not exist",
            )
            .exit_code(3)
            .last_words("Traceback (most recent call last):\n  File \"/app/report/nightly.py\", line 88, in main\n    rows = warehouse.query(SQL_DAILY)\nreport.warehouse.TableMissing: table warehouse.orders_daily does not exist\n")
            .started(5)
            .finished(65),
    );
}

#[test]
fn oom_killed() {
    assert_reports(
        map("oom_killed", Seen::Present, at(70)),
        expect(JobState::Failed, Reason::OomKilled)
            .message("the main container was OOMKilled (exceeded its memory limit of 2Gi), exit code 137")
            .exit_code(137)
            .started(5)
            .finished(65),
    );
}

#[test]
fn oom_killed_exit_zero() {
    assert_reports(
        map("oom_killed_exit_zero", Seen::Present, at(70)),
        expect(JobState::Failed, Reason::OomKilled)
            .message(
                "the main container was OOMKilled (exceeded its memory limit of 2Gi) although it \
                 exited with code 0",
            )
            .exit_code(0)
            .started(5)
            .finished(65),
    );
}

#[test]
fn oom_killed_in_last_state() {
    assert_reports(
        map("oom_killed_in_last_state", Seen::Present, at(45)),
        expect(JobState::Failed, Reason::OomKilled)
            .message("the main container was OOMKilled (exceeded its memory limit of 2Gi), exit code 137")
            .exit_code(137)
            .started(5)
            .finished(41),
    );
}

/// The fixtures' Jobs have `activeDeadlineSeconds: 600`.
const JOB_DEADLINE: &str = "timeout 10m reached: Job was active longer than specified deadline";

#[test]
fn deadline_exceeded() {
    // The container was killed after the verdict: its exit code is the kill's, not an outcome.
    assert_reports(
        map("deadline_exceeded", Seen::Present, at(700)),
        expect(JobState::Failed, Reason::DeadlineExceeded)
            .message(JOB_DEADLINE)
            .started(5)
            .finished(602),
    );
}

#[test]
fn deadline_exceeded_pods_terminating() {
    // FailureTarget alone: terminal at once, and the same answer as once Failed is written.
    assert_reports(
        map("deadline_exceeded_pods_terminating", Seen::Present, at(603)),
        expect(JobState::Failed, Reason::DeadlineExceeded)
            .message(JOB_DEADLINE)
            .started(5)
            .finished(602),
    );
}

#[test]
fn deadline_exceeded_pod() {
    assert_reports(
        map("deadline_exceeded_pod", Seen::Present, at(700)),
        expect(JobState::Failed, Reason::DeadlineExceeded)
            .message("Pod was active on the node longer than the specified deadline")
            .exit_code(137)
            .started(5)
            .finished(603),
    );
}

#[test]
fn backoff_limit_exceeded_after_retries() {
    assert_reports(
        map(
            "backoff_limit_exceeded_after_retries",
            Seen::Present,
            at(130),
        ),
        expect(JobState::Failed, Reason::BackoffLimitExceeded)
            .message(
                "Job has reached the specified backoff limit after 3 attempts; the last one: \
                 exit code 1: connection to warehouse.internal:5432 refused",
            )
            .exit_code(1)
            .last_words("connection to warehouse.internal:5432 refused\n")
            .started(5)
            .finished(120),
    );
}

#[test]
fn retry_running_after_failure() {
    // The newest attempt decides the state; the first attempt's start stays the job's start.
    assert_reports(
        map("retry_running_after_failure", Seen::Present, at(60)),
        expect(JobState::Started, Reason::Running).started(5),
    );
}

#[test]
fn pod_failure_policy() {
    let pod = pod_name("pod_failure_policy");
    assert_reports(
        map("pod_failure_policy", Seen::Present, at(70)),
        expect(JobState::Failed, Reason::PodFailurePolicy)
            .message(format!(
                "Container main for pod batch-jobs/{pod} failed with exit code 42 matching \
                 FailJob rule at index 0"
            ))
            .exit_code(42)
            .last_words("input manifest is empty; refusing to publish\n")
            .started(5)
            .finished(65),
    );
}

#[test]
fn evicted_node_pressure() {
    let mapped = map("evicted_node_pressure", Seen::Present, at(310));
    assert_reports(
        mapped.clone(),
        expect(JobState::Failed, Reason::Evicted)
            .message(
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: \
                 87436Ki. Container main was using 1873412Ki, request is 2Gi, has larger \
                 consumption of memory.",
            )
            .exit_code(137)
            .started(5)
            .finished(300),
    );
    assert!(mapped.expect("mapped").info.reason.is_retryable());
}

#[test]
fn evicted_by_eviction_api() {
    assert_reports(
        map("evicted_by_eviction_api", Seen::Present, at(280)),
        expect(JobState::Failed, Reason::Evicted)
            .message("Eviction API: evicting")
            .exit_code(143)
            .started(5)
            .finished(272),
    );
}

#[test]
fn disrupted_by_the_fail_job_rule() {
    // A job without retries gets a FailJob rule on DisruptionTarget (the manifest's): the
    // verdict names the disruption. The pod, while seen, tells how.
    assert_reports(
        map("disrupted_by_fail_job_rule", Seen::Present, at(280)),
        expect(JobState::Failed, Reason::Evicted)
            .message("Eviction API: evicting")
            .exit_code(143)
            .started(5)
            .finished(272),
    );
    // Once the pod is gone (a drain removes it), the verdict waits a moment for a replica
    // that saw the pod to record it, as any verdict does; then the verdict alone still says
    // the job was disrupted, not failed by its own work.
    let (job, _) = views("disrupted_by_fail_job_rule");
    let pod = pod_name("disrupted_by_fail_job_rule");
    let waiting = map_views(
        &job,
        &[],
        Seen::Present,
        at(280),
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert!(!waiting.info.is_terminal(), "{waiting:?}");
    let after = waiting.recheck_at.expect("the end of the wait");
    let mapped = map_views(
        &job,
        &[],
        Seen::Present,
        after,
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason, mapped.info.exit_code),
        (JobState::Failed, Reason::Disrupted, None),
        "{mapped:?}"
    );
    assert_eq!(
        mapped.info.message,
        format!(
            "Pod batch-jobs/{pod} has condition DisruptionTarget matching FailJob rule at index 0"
        )
    );
    assert!(mapped.info.reason.is_retryable());
}

#[test]
fn failed_by_the_exit_code_rule() {
    // A job without retries gets, first, a FailJob rule on an exit code of the main
    // container's own (not 0, 137 or 143) and, last, one on any non-zero exit code (the
    // manifest's): the verdict names the exit code. The pod, while seen, tells the rest.
    assert_reports(
        map("failed_by_exit_code_rule", Seen::Present, at(140)),
        expect(JobState::Failed, Reason::Error)
            .message("exit code 3")
            .exit_code(3)
            .started(5)
            .finished(130),
    );
    // Once the pod is gone unseen (drained, its node lost), the verdict waits a moment for a
    // replica that saw the pod to record it; then the verdict alone still names the
    // container's own failure and its exit code, not a bare BackoffLimitExceeded.
    let (job, _) = views("failed_by_exit_code_rule");
    assert_eq!(
        (0..4)
            .filter(|i| job.exit_code_rules.contains(*i))
            .collect::<Vec<_>>(),
        [0, 2]
    );
    let waiting = map_views(
        &job,
        &[],
        Seen::Present,
        at(140),
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert!(!waiting.info.is_terminal(), "{waiting:?}");
    let after = waiting.recheck_at.expect("the end of the wait");
    let mapped = map_views(
        &job,
        &[],
        Seen::Present,
        after,
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason, mapped.info.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{mapped:?}"
    );
    assert_eq!(mapped.info.message, "exit code 3");
    assert_eq!(mapped.info.finished_at, Some(at(131)));
    assert!(!mapped.info.reason.is_retryable());
    // A verdict that names another rule's index (one the job file listed) is that rule's.
    let mut listed = job.clone();
    listed.exit_code_rules = [1, 2].into_iter().collect();
    let mapped = map_views(
        &listed,
        &[],
        Seen::Present,
        after,
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert_eq!(
        (mapped.info.reason, mapped.info.exit_code),
        (Reason::PodFailurePolicy, None),
        "{mapped:?}"
    );
}

#[test]
fn preempted() {
    assert_reports(
        map("preempted", Seen::Present, at(280)),
        expect(JobState::Failed, Reason::Preempted)
            .message("default-scheduler: preempting to accommodate a higher priority pod")
            .exit_code(143)
            .started(5)
            .finished(271),
    );
}

#[test]
fn node_lost_pod_gc() {
    assert_reports(
        map("node_lost_pod_gc", Seen::Present, at(1510)),
        expect(JobState::Failed, Reason::NodeLost)
            .message("PodGC: node no longer exists")
            .started(5)
            .finished(1501),
    );
}

#[test]
fn node_shutdown() {
    assert_reports(
        map("node_shutdown", Seen::Present, at(430)),
        expect(JobState::Failed, Reason::NodeLost)
            .message("Pod was terminated in response to imminent node shutdown.")
            .exit_code(143)
            .started(5)
            .finished(420),
    );
}

#[test]
fn taint_manager_eviction() {
    // The taint manager deleted the pod of a node tainted NoExecute, marking it first.
    let mapped = map("taint_manager_eviction", Seen::Present, at(280));
    assert_reports(
        mapped.clone(),
        expect(JobState::Failed, Reason::Disrupted)
            .message("Taint manager: deleting due to NoExecute taint")
            .exit_code(143)
            .started(5)
            .finished(271),
    );
    assert!(mapped.expect("mapped").info.reason.is_retryable());
}

#[test]
fn kubelet_admission_rejected() {
    // The kubelet refused the pod at admission: it never ran, and no one is to blame but the
    // node.
    let mapped = map("kubelet_admission_rejected", Seen::Present, at(10));
    assert_reports(
        mapped.clone(),
        expect(JobState::Failed, Reason::Disrupted)
            .message(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: \
                 7800, capacity: 8000",
            )
            .finished(3),
    );
    assert!(mapped.expect("mapped").info.reason.is_retryable());
}

#[test]
fn node_not_reporting() {
    // Not an outcome until the Job controller decides: the last status stays.
    let pod = pod_name("node_not_reporting");
    let message = format!("the node of pod {pod} stopped reporting (phase Unknown)");
    assert_reports(
        map_with(
            "node_not_reporting",
            Seen::Present,
            at(400),
            &MappingConfig::default(),
            Some(&started_previously()),
        ),
        expect(JobState::Started, Reason::Running)
            .message(message.clone())
            .started(5),
    );
    assert_reports(
        map("node_not_reporting", Seen::Present, at(400)),
        expect(JobState::Started, Reason::Running)
            .message(message)
            .started(5),
    );
}

#[test]
fn job_deleted_externally() {
    assert_reports(
        map("job_deleted_externally", Seen::Present, at(301)),
        expect(JobState::Failed, Reason::DeletedExternally)
            .message("the Job was deleted at 2025-06-10T08:05:00Z without a cancel request")
            .started(5)
            .finished(300),
    );
}

#[test]
fn job_vanished_while_running() {
    assert_reports(
        map(
            "job_vanished_while_running",
            Seen::Vanished { final_state: true },
            at(301),
        ),
        expect(JobState::Failed, Reason::DeletedExternally)
            .message("the Job was deleted without a cancel request")
            .started(5),
    );
}

#[test]
fn job_found_missing_with_a_stale_view() {
    // The last view may predate a cancel requested through another replica: "no such job".
    assert_eq!(
        map(
            "job_vanished_while_running",
            Seen::Vanished { final_state: false },
            at(301),
        ),
        None
    );
}

#[test]
fn job_removed_by_ttl() {
    let succeeded = || {
        expect(JobState::Succeeded, Reason::Completed)
            .exit_code(0)
            .started(5)
            .finished(65)
    };
    for seen in [
        Seen::Present,
        Seen::Vanished { final_state: true },
        Seen::Vanished { final_state: false },
    ] {
        assert_reports(map("job_removed_by_ttl", seen, at(127)), succeeded());
    }
}

#[test]
fn pod_deleted_externally() {
    let pod = pod_name("pod_deleted_externally");
    assert_reports(
        map("pod_deleted_externally", Seen::Present, at(130)),
        expect(JobState::Failed, Reason::DeletedExternally)
            .message(format!(
                "pod {pod} was deleted at 2025-06-10T08:02:00Z by someone other than kubeferry"
            ))
            .exit_code(143)
            .started(5)
            .finished(121),
    );
}

const CANCEL_REQUESTED: &str = "cancel requested at 2025-06-10T08:00:30Z";

#[test]
fn cancel_requested() {
    assert_reports(
        map("cancel_requested", Seen::Present, at(31)),
        expect(JobState::Cancelling, Reason::CancelRequested)
            .message(format!("{CANCEL_REQUESTED}; waiting for the job to stop"))
            .started(5),
    );
}

#[test]
fn cancelled_by_deletion() {
    assert_reports(
        map("cancelled_by_deletion", Seen::Present, at(32)),
        expect(JobState::Cancelled, Reason::Cancelled)
            .message(format!(
                "{CANCEL_REQUESTED}; the Job was deleted at 2025-06-10T08:00:31Z"
            ))
            .started(5)
            .finished(31),
    );
}

#[test]
fn cancelled_and_gone() {
    for final_state in [true, false] {
        assert_reports(
            map("cancelled_and_gone", Seen::Vanished { final_state }, at(32)),
            expect(JobState::Cancelled, Reason::Cancelled)
                .message(format!("{CANCEL_REQUESTED}; the Job is gone"))
                .started(5)
                .finished(30),
        );
    }
}

#[test]
fn cancelled_by_suspension() {
    assert_reports(
        map("cancelled_by_suspension", Seen::Present, at(40)),
        expect(JobState::Cancelled, Reason::Cancelled)
            .message(format!(
                "{CANCEL_REQUESTED}; the Job is suspended and none of its pods runs"
            ))
            .started(5)
            .finished(31),
    );
}

#[test]
fn cancel_after_completion() {
    // The job finished on its own before the cancel took effect: its outcome stands.
    assert_reports(
        map("cancel_after_completion", Seen::Present, at(72)),
        expect(JobState::Succeeded, Reason::Completed)
            .exit_code(0)
            .started(5)
            .finished(65),
    );
}

#[test]
fn completion_after_cancel_took_effect() {
    // Recorded only after the deletion: the cancel, not the job, ended the work.
    assert_reports(
        map("completion_after_cancel_took_effect", Seen::Present, at(40)),
        expect(JobState::Cancelled, Reason::Cancelled)
            .message(format!(
                "{CANCEL_REQUESTED}; the Job was deleted at 2025-06-10T08:00:31Z"
            ))
            .started(5)
            .finished(31),
    );
}

#[test]
fn unknown_job_condition() {
    let mapped = map("unknown_job_condition", Seen::Present, at(30)).expect("mapped");
    assert_eq!(
        mapped.info,
        expect(JobState::Started, Reason::Running).started(5).info()
    );
    assert_eq!(
        mapped.warning.as_deref(),
        Some("Job condition Quiesced=True is not one this version knows; ignored")
    );
}

#[test]
fn unknown_pod_phase() {
    let pod = pod_name("unknown_pod_phase");
    let warning = format!(
        "pod {pod} has phase \"Hibernating\", which this version does not know; keeping the \
         last status"
    );
    for previous in [Some(started_previously()), None] {
        let mapped = map_with(
            "unknown_pod_phase",
            Seen::Present,
            at(30),
            &MappingConfig::default(),
            previous.as_ref(),
        )
        .expect("mapped");
        assert_eq!(
            mapped.info,
            expect(JobState::Started, Reason::UnrecognizedStatus)
                .message(warning.clone())
                .started(5)
                .info()
        );
        assert_eq!(mapped.warning.as_deref(), Some(warning.as_str()));
    }
}

#[test]
fn verdict_before_pod_status() {
    // The Job's Complete arrived before the pod's final status: wait for the pod a little...
    assert_reports(
        map("verdict_before_pod_status", Seen::Present, at(70)),
        expect(JobState::Started, Reason::Running)
            .message("the Job controller reported the outcome; waiting for the pod's final status")
            .started(5),
    );
    // ...but not for ever (from the end of the verdict's second: condition times are whole
    // seconds).
    assert_reports(
        map("verdict_before_pod_status", Seen::Present, at(76)),
        expect(JobState::Started, Reason::Running)
            .message("the Job controller reported the outcome; waiting for the pod's final status")
            .started(5),
    );
    assert_reports(
        map("verdict_before_pod_status", Seen::Present, at(77)),
        expect(JobState::Succeeded, Reason::Completed)
            .started(5)
            .finished(66),
    );
}

#[test]
fn a_terminal_previous_status_never_changes() {
    let mut previous = ExecutionInfo::new(JobState::Failed, Reason::ImagePullFailed);
    previous.finished_at = Some(at(182));
    for case in support::fixture_names() {
        let mapped = map_with(
            &case,
            Seen::Present,
            at(3600),
            &MappingConfig::default(),
            Some(&previous),
        )
        .expect("mapped");
        assert_eq!(mapped.info, previous, "{case}");
    }
}

/// An image-pull failure decided by kubeferry's grace, as kubeferry records it on the Job.
fn recorded_pull_failure() -> ExecutionInfo {
    let mut info = ExecutionInfo::new(JobState::Failed, Reason::ImagePullFailed)
        .with_message("the image could not be pulled within 3m");
    info.finished_at = Some(at(180));
    info
}

#[test]
fn recorded_outcome_wins_and_survives_the_stop() {
    let (mut job, pods) = support::objects("image_pull_backoff");
    let recorded = recorded_pull_failure();
    job.metadata.annotations.get_or_insert_default().insert(
        kubeferry_core::marks::OUTCOME_ANNOTATION.to_string(),
        serde_json::to_string(&recorded).unwrap(),
    );
    let job = kubeferry_core::container::JobView::from(&job);
    let pods: Vec<PodView> = pods.iter().map(PodView::from).collect();
    let config = MappingConfig::default();
    // Long before the grace would expire by this replica's clock, and after the Job is gone:
    // every replica reports what was recorded.
    for seen in [
        Seen::Present,
        Seen::Vanished { final_state: true },
        Seen::Vanished { final_state: false },
    ] {
        let mapped = support::map_views(&job, &pods, seen, at(1), &config, None).unwrap();
        assert_eq!(mapped.info, recorded, "{seen:?}");
        assert!(!mapped.must_record(), "{seen:?}: already recorded");
    }
}

#[test]
fn unreadable_recorded_outcome_is_ignored_with_a_warning() {
    let (mut job, pods) = support::objects("running");
    job.metadata.annotations.get_or_insert_default().insert(
        kubeferry_core::marks::OUTCOME_ANNOTATION.to_string(),
        "{\"state\":\"EXPLODED\"}".to_string(),
    );
    let job = kubeferry_core::container::JobView::from(&job);
    let pods: Vec<PodView> = pods.iter().map(PodView::from).collect();
    let mapped = support::map_views(
        &job,
        &pods,
        Seen::Present,
        at(60),
        &MappingConfig::default(),
        None,
    )
    .unwrap();
    assert_eq!(mapped.info.state, JobState::Started);
    assert!(
        mapped.warning.unwrap().contains("recorded outcome"),
        "the warning names the annotation"
    );
}

#[test]
fn verdict_before_any_pod_is_seen_waits_for_the_pod_watch() {
    // The Job watch delivered the failure; the pod watch has not delivered the pod yet.
    let (job, _) = views("failed_with_exit_code");
    let config = MappingConfig::default();
    let waiting = support::map_views(&job, &[], Seen::Present, at(70), &config, None).unwrap();
    assert!(!waiting.info.is_terminal(), "{:?}", waiting.info);
    assert_eq!(
        waiting.info.message,
        "the Job controller reported the outcome; waiting for the pod's final status"
    );
    // Past the wait (the pods are gone for good), the Job's own verdict is the outcome.
    let decided = support::map_views(&job, &[], Seen::Present, at(80), &config, None).unwrap();
    assert_eq!(decided.info.state, JobState::Failed);
    assert_eq!(decided.info.reason, Reason::BackoffLimitExceeded);
}

#[test]
fn a_verdict_waiting_for_its_pod_is_answered_as_where_the_job_stood() {
    // The pod watch lags the Job's failure and shows nothing of the pod: the answer meanwhile
    // never steps back from one given before.
    let waiting = "the Job controller reported the outcome; waiting for the pod's final status";
    let config = MappingConfig::default();
    let (mut job, _) = support::objects("failed_with_exit_code");
    let started = kubeferry_core::container::JobView::from(&job).start_time;
    // The Job counts an attempt that ended: the job started, when the Job says.
    let (plain, _) = views("failed_with_exit_code");
    let mapped = support::map_views(&plain, &[], Seen::Present, at(70), &config, None).unwrap();
    assert_eq!(
        (
            mapped.info.state,
            mapped.info.reason,
            mapped.info.started_at
        ),
        (JobState::Started, Reason::Running, started)
    );
    assert_eq!(mapped.info.message, waiting);
    // An earlier answer's start stands.
    let previous = started_previously();
    let mapped =
        support::map_views(&plain, &[], Seen::Present, at(70), &config, Some(&previous)).unwrap();
    assert_eq!(
        (mapped.info.state, mapped.info.started_at),
        (JobState::Started, Some(at(5)))
    );
    // A job being cancelled is still being cancelled.
    job.metadata.annotations.get_or_insert_default().insert(
        kubeferry_core::marks::CANCEL_ANNOTATION.to_string(),
        "2025-06-10T08:01:00Z".to_string(),
    );
    let marked = kubeferry_core::container::JobView::from(&job);
    let mapped = support::map_views(&marked, &[], Seen::Present, at(70), &config, None).unwrap();
    assert_eq!(
        (mapped.info.state, mapped.info.reason),
        (JobState::Cancelling, Reason::CancelRequested)
    );
    assert_eq!(mapped.info.message, waiting);
}

#[test]
fn a_recorded_and_suspended_job_expires_with_its_ttl() {
    let (mut job, _) = support::objects("image_pull_backoff");
    let recorded = recorded_pull_failure(); // finished at(180)
    job.metadata.annotations.get_or_insert_default().insert(
        kubeferry_core::marks::OUTCOME_ANNOTATION.to_string(),
        serde_json::to_string(&recorded).unwrap(),
    );
    let spec = job.spec.get_or_insert_default();
    spec.suspend = Some(true);
    spec.ttl_seconds_after_finished = Some(60);
    let view = kubeferry_core::container::JobView::from(&job);
    assert!(!view.record_expired(at(239)), "within its TTL");
    assert!(view.record_expired(at(240)), "past its TTL");

    // Without a TTL it stays, as a finished Job would; unrecorded or running Jobs are never
    // kubeferry's to remove.
    let mut no_ttl = view.clone();
    no_ttl.ttl_seconds_after_finished = None;
    assert!(!no_ttl.record_expired(at(100_000)));
    let mut running = view.clone();
    running.suspend = false;
    assert!(!running.record_expired(at(100_000)));
    let mut unrecorded = view;
    unrecorded.recorded_outcome = None;
    assert!(!unrecorded.record_expired(at(100_000)));
}

/// A disruption fixture and what it shows: when the disruption began (the control plane's
/// DisruptionTarget condition) or when the kubelet noted its own, and what it reports.
struct DisruptionCase {
    fixture: &'static str,
    /// Seconds after T0 of the pod's DisruptionTarget condition.
    noted: i64,
    /// Whether the kubelet wrote the condition (it does so once the containers are stopped).
    by_kubelet: bool,
    reason: Reason,
    message: &'static str,
}

const NODE_PRESSURE: &str = "The node was low on resource: memory. Threshold quantity: 100Mi, \
    available: 87436Ki. Container main was using 1873412Ki, request is 2Gi, has larger \
    consumption of memory.";

fn disruption_cases() -> [DisruptionCase; 6] {
    [
        DisruptionCase {
            fixture: "evicted_by_eviction_api",
            noted: 270,
            by_kubelet: false,
            reason: Reason::Evicted,
            message: "Eviction API: evicting",
        },
        DisruptionCase {
            fixture: "preempted",
            noted: 270,
            by_kubelet: false,
            reason: Reason::Preempted,
            message: "default-scheduler: preempting to accommodate a higher priority pod",
        },
        DisruptionCase {
            fixture: "taint_manager_eviction",
            noted: 270,
            by_kubelet: false,
            reason: Reason::Disrupted,
            message: "Taint manager: deleting due to NoExecute taint",
        },
        DisruptionCase {
            fixture: "node_lost_pod_gc",
            noted: 1500,
            by_kubelet: false,
            reason: Reason::NodeLost,
            message: "PodGC: node no longer exists",
        },
        DisruptionCase {
            fixture: "evicted_node_pressure",
            noted: 270,
            by_kubelet: true,
            reason: Reason::Evicted,
            message: NODE_PRESSURE,
        },
        DisruptionCase {
            fixture: "node_shutdown",
            noted: 415,
            by_kubelet: true,
            reason: Reason::NodeLost,
            message: "Pod was terminated in response to imminent node shutdown.",
        },
    ]
}

/// The fixture's pod with its main container terminated with `exit_code` at `T0 + finished`.
fn with_main_ended(
    case: &str,
    exit_code: i32,
    finished: i64,
) -> (kubeferry_core::container::JobView, Vec<PodView>) {
    let (job, mut pods) = views(case);
    let pod = pods.last_mut().expect("a pod");
    let main = pod.main.as_mut().expect("a main container");
    main.state = ContainerStateView::Terminated(TerminatedView {
        exit_code,
        signal: None,
        reason: Some(if exit_code == 0 { "Completed" } else { "Error" }.to_string()),
        message: None,
        started_at: Some(at(5)),
        finished_at: Some(at(finished)),
    });
    (job, pods)
}

fn verdict_time(job: &kubeferry_core::container::JobView) -> i64 {
    let verdict = job
        .conditions
        .iter()
        .filter_map(|c| c.last_transition_time)
        .min()
        .expect("a verdict");
    verdict.duration_since(at(0)).as_secs()
}

/// I1: a container that failed on its own before its pod's disruption decides the outcome (its
/// reason and exit code); one that ended with or after the disruption, stopped by it, leaves
/// the outcome to the disruption. Each disruption of the control plane, each side, and the tie
/// of one second.
#[test]
fn a_container_that_failed_before_the_disruption_decides_the_outcome() {
    // The control plane's disruptions, whose condition tells when they began; the kubelet's
    // own are below.
    for case in disruption_cases().into_iter().filter(|c| !c.by_kubelet) {
        let (job, _) = views(case.fixture);
        let now = at(verdict_time(&job) + 5);
        let map_ended = |exit_code: i32, finished: i64| {
            let (job, pods) = with_main_ended(case.fixture, exit_code, finished);
            map_views(
                &job,
                &pods,
                Seen::Present,
                now,
                &MappingConfig::default(),
                None,
            )
        };
        let own = |finished: i64| {
            expect(JobState::Failed, Reason::Error)
                .message("exit code 4")
                .exit_code(4)
                .started(5)
                .finished(finished)
        };
        let disrupted = |exit_code: i32, finished: i64| {
            expect(JobState::Failed, case.reason)
                .message(case.message)
                .exit_code(exit_code)
                .started(5)
                .finished(finished)
        };
        let name = case.fixture;
        // Ended a second before the disruption began (or the kubelet noted it): its own failure.
        let before = case.noted - 1;
        let mapped = map_ended(4, before).expect(name);
        assert_eq!(mapped.info, own(before).info(), "{name}: ended before");
        // Ended in the disruption's own second: whole seconds cannot order them, the exit can.
        let mapped = map_ended(4, case.noted).expect(name);
        assert_eq!(
            mapped.info,
            own(case.noted).info(),
            "{name}: ended in the same second"
        );
        for stopped in [143, 137] {
            let mapped = map_ended(stopped, case.noted).expect(name);
            assert_eq!(
                mapped.info,
                disrupted(stopped, case.noted).info(),
                "{name}: stopped by SIGTERM/SIGKILL in the same second"
            );
        }
        // Ended after the disruption began: stopped by it, whatever its exit code says.
        let after = case.noted + 1;
        let mapped = map_ended(4, after).expect(name);
        assert_eq!(
            mapped.info,
            disrupted(4, after).info(),
            "{name}: ended after"
        );
    }
}

/// I1: the issue's own case. A container exits 4 on its own, its pod is drained half a second
/// later (in the same second): a replica that looks before the drain and one that looks after
/// report the same FAILED Error with exit code 4, for each disruption that removes the pod.
#[test]
fn an_own_failure_reads_the_same_before_and_after_a_disruption() {
    for case in disruption_cases().into_iter().filter(|c| !c.by_kubelet) {
        let (job, pods) = with_main_ended(case.fixture, 4, case.noted);
        let now = at(verdict_time(&job) + 5);
        let mut undisturbed = pods.clone();
        for pod in &mut undisturbed {
            pod.disruption = None;
            pod.deletion_timestamp = None;
            pod.deletion_grace_period_seconds = None;
            pod.reason = None;
            pod.message = None;
        }
        let config = MappingConfig::default();
        let before = map_views(&job, &undisturbed, Seen::Present, now, &config, None);
        let after = map_views(&job, &pods, Seen::Present, now, &config, None);
        let expected = || {
            expect(JobState::Failed, Reason::Error)
                .message("exit code 4")
                .exit_code(4)
                .started(5)
                .finished(case.noted)
        };
        assert_reports(before, expected());
        assert_reports(after, expected());
    }
}

/// The kubelet writes its DisruptionTarget condition (TerminationByKubelet) only once the pod's
/// containers are stopped, after a grace period in which a container that catches SIGTERM may
/// exit with any code (a graceful node shutdown, a soft node-pressure eviction): nothing tells
/// when the disruption began, so it decides the outcome whatever the exit, as it always did.
#[test]
fn a_kubelet_disruption_decides_whatever_the_exit() {
    for case in disruption_cases().into_iter().filter(|c| c.by_kubelet) {
        let name = case.fixture;
        let (job, _) = views(name);
        let now = at(verdict_time(&job) + 5);
        let map_ended = |exit_code: i32, finished: i64| {
            let (job, mut pods) = with_main_ended(name, exit_code, finished);
            let noted = pods
                .last_mut()
                .and_then(|p| p.disruption.as_mut())
                .expect("a DisruptionTarget condition");
            noted.last_transition_time = Some(at(finished + 1));
            map_views(
                &job,
                &pods,
                Seen::Present,
                now,
                &MappingConfig::default(),
                None,
            )
        };
        let finished = case.noted;
        // Stopped by SIGKILL, or exiting 1 from its SIGTERM handler: the disruption's either way.
        for exit_code in [137, 1, 4] {
            let mapped = map_ended(exit_code, finished).expect(name);
            assert_eq!(
                mapped.info,
                expect(JobState::Failed, case.reason)
                    .message(case.message)
                    .exit_code(exit_code)
                    .started(5)
                    .finished(finished)
                    .info(),
                "{name}: exit {exit_code} under the kubelet's disruption"
            );
        }
    }
}

/// An OOM kill before a disruption stays the job's own failure, as it was before.
#[test]
fn an_oom_kill_before_a_disruption_stays_oom_killed() {
    let (job, mut pods) = with_main_ended("preempted", 137, 269);
    if let Some(ContainerStateView::Terminated(t)) = pods
        .last_mut()
        .and_then(|p| p.main.as_mut())
        .map(|m| &mut m.state)
    {
        t.reason = Some("OOMKilled".into());
    }
    let mapped = map_views(
        &job,
        &pods,
        Seen::Present,
        at(280),
        &MappingConfig::default(),
        None,
    );
    assert_reports(
        mapped,
        expect(JobState::Failed, Reason::OomKilled)
            .message("the main container was OOMKilled (exceeded its memory limit of 2Gi), exit code 137")
            .exit_code(137)
            .started(5)
            .finished(269),
    );
}

/// An init container that failed on its own before the pod was drained (the main container
/// never started) decides the outcome too; one stopped by the drain leaves it Evicted.
#[test]
fn an_init_container_that_failed_before_the_disruption_decides_the_outcome() {
    let map_init_ended = |exit_code: i32, finished: i64| {
        let (job, mut pods) = views("evicted_by_eviction_api");
        let pod = pods.last_mut().expect("a pod");
        if let Some(main) = pod.main.as_mut() {
            main.state = ContainerStateView::Waiting {
                reason: Some("PodInitializing".into()),
                message: None,
            };
        }
        pod.blocking_init = Some(Box::new(ContainerView {
            name: "fetch-inputs".into(),
            state: ContainerStateView::Terminated(TerminatedView {
                exit_code,
                signal: None,
                reason: Some("Error".into()),
                message: None,
                started_at: Some(at(3)),
                finished_at: Some(at(finished)),
            }),
            last_terminated: None,
            restart_count: 0,
            sidecar: false,
        }));
        map_views(
            &job,
            &pods,
            Seen::Present,
            at(280),
            &MappingConfig::default(),
            None,
        )
    };
    assert_reports(
        map_init_ended(2, 270),
        expect(JobState::Failed, Reason::Error)
            .message("init container fetch-inputs: exit code 2")
            .exit_code(2)
            .finished(273),
    );
    assert_reports(
        map_init_ended(143, 270),
        expect(JobState::Failed, Reason::Evicted)
            .message("Eviction API: evicting")
            .finished(273),
    );
}
