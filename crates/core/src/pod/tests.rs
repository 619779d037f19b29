//! The bare pod mapping, over pods in Kubernetes' words: each outcome a container job gives,
//! a pod gives alike.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::status::{JobState, Reason};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_749_542_400 + seconds).expect("in range")
}

fn time(seconds: i64) -> String {
    at(seconds).to_string()
}

/// A bare pod created at 0, scheduled and started at 2, with `status` merged over a running
/// one and `metadata` over its metadata.
fn pod(metadata: Value, status: Value) -> BarePodView {
    let mut value = json!({
        "metadata": {
            "name": "hello-pod-1a2b", "namespace": "ns", "uid": "u1",
            "creationTimestamp": time(0),
            "labels": {"app.kubernetes.io/managed-by": "kubeferry", "kubeferry.dev/job-id": "hello"},
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 60,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"limits": {"memory": "64Mi"}}}],
        },
        "status": {
            "phase": "Running",
            "startTime": time(2),
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [container(json!({"running": {"startedAt": time(3)}}))],
        },
    });
    merge(&mut value["metadata"], metadata);
    merge(&mut value["status"], status);
    let pod: Pod = serde_json::from_value(value).expect("a pod");
    BarePodView::from(&pod)
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        into.extend(from);
    }
}

fn container(state: Value) -> Value {
    json!({"name": "main", "image": "busybox", "imageID": "", "ready": false,
           "restartCount": 0, "state": state})
}

fn ended(phase: &str, exit_code: i32, reason: &str, finished: i64) -> Value {
    json!({
        "phase": phase,
        "containerStatuses": [container(json!({"terminated": {
            "exitCode": exit_code, "reason": reason, "message": "last words\n",
            "startedAt": time(3), "finishedAt": time(finished),
        }}))],
    })
}

fn config() -> MappingConfig {
    MappingConfig {
        image_pull_grace: Duration::from_secs(30),
        create_container_error_grace: Duration::from_secs(30),
        pending_timeout: Some(Duration::from_secs(60)),
        pod_status_wait: Duration::from_secs(10),
    }
}

fn map_at(view: &BarePodView, now: i64) -> PodMapped {
    pod_status(&Observation::Present(view), at(now), &config(), None).expect("an answer")
}

#[test]
fn a_running_pod_is_started_and_a_succeeded_one_succeeded() {
    let running = map_at(&pod(json!({}), json!({})), 5);
    assert_eq!(running.info.state, JobState::Started);
    assert_eq!(running.info.started_at, Some(at(3)));

    let done = map_at(&pod(json!({}), ended("Succeeded", 0, "Completed", 9)), 10);
    assert_eq!(done.info.state, JobState::Succeeded);
    assert_eq!(done.info.reason, Reason::Completed);
    assert_eq!(done.info.exit_code, Some(0));
    assert_eq!(done.info.finished_at, Some(at(9)));
    assert_eq!(done.action, None);
}

#[test]
fn a_failed_container_fails_the_pod_with_its_exit_code_and_last_words() {
    let failed = map_at(&pod(json!({}), ended("Failed", 3, "Error", 9)), 10);
    assert_eq!(failed.info.state, JobState::Failed);
    assert_eq!(failed.info.reason, Reason::Error);
    assert_eq!(failed.info.exit_code, Some(3));
    assert_eq!(failed.info.last_words.as_deref(), Some("last words\n"));
    assert_eq!(failed.info.started_at, Some(at(3)));
}

#[test]
fn an_oom_kill_fails_the_pod_even_with_exit_code_0() {
    let killed = map_at(&pod(json!({}), ended("Failed", 137, "OOMKilled", 9)), 10);
    assert_eq!(
        (killed.info.state, killed.info.reason),
        (JobState::Failed, Reason::OomKilled)
    );
    assert!(
        killed.info.message.contains("64Mi"),
        "{}",
        killed.info.message
    );
    let zero = map_at(&pod(json!({}), ended("Succeeded", 0, "OOMKilled", 9)), 10);
    assert_eq!(
        (zero.info.state, zero.info.reason, zero.info.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(0))
    );
}

#[test]
fn an_image_that_cannot_be_pulled_is_recorded_and_the_pod_deleted_past_its_grace() {
    let waiting = json!({
        "phase": "Pending",
        "containerStatuses": [container(json!({"waiting": {
            "reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope\"",
        }}))],
    });
    let early = map_at(&pod(json!({}), waiting.clone()), 10);
    assert_eq!(early.info.state, JobState::Queued);
    assert_eq!(early.info.reason, Reason::ImagePullBackOff);
    assert_eq!(early.action, None);
    assert!(early.recheck_at.is_some(), "the grace's end is a deadline");

    let late = map_at(&pod(json!({}), waiting.clone()), 100);
    assert!(
        !late.info.is_terminal(),
        "nothing stands before the deletion"
    );
    let Some(PodAction { outcome }) = &late.action else {
        panic!("record and delete: {late:?}");
    };
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::ImagePullFailed)
    );

    // Recorded, not yet deleted: the deletion is still to be done.
    let record = crate::marks::outcome_record(outcome);
    let recorded = pod(
        json!({"annotations": {"kubeferry.dev/outcome": record.clone()}}),
        waiting.clone(),
    );
    let still = map_at(&recorded, 101);
    assert!(matches!(still.action, Some(PodAction { .. })));
    // Being deleted: the recorded outcome stands.
    let deleting = pod(
        json!({"annotations": {"kubeferry.dev/outcome": record},
               "deletionTimestamp": time(131), "deletionGracePeriodSeconds": 30}),
        waiting,
    );
    let stands = map_at(&deleting, 102);
    assert_eq!(stands.info, *outcome);
    assert_eq!(stands.action, None);
}

#[test]
fn a_pod_no_node_takes_is_unschedulable_then_failed_at_the_pending_timeout() {
    let unschedulable = json!({
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient cpu.",
                        "lastTransitionTime": time(1)}],
        "containerStatuses": [],
    });
    let waiting = map_at(&pod(json!({}), unschedulable.clone()), 10);
    assert_eq!(
        (waiting.info.state, waiting.info.reason),
        (JobState::Queued, Reason::Unschedulable)
    );
    let late = map_at(&pod(json!({}), unschedulable), 61);
    let Some(PodAction { outcome }) = &late.action else {
        panic!("record and delete: {late:?}");
    };
    assert_eq!(outcome.reason, Reason::UnschedulableTimeout);
    assert!(outcome.message.contains("Insufficient cpu"), "{outcome:?}");
}

#[test]
fn the_pods_deadline_fails_it_as_deadline_exceeded() {
    let mut status = ended("Failed", 137, "Error", 62);
    merge(
        &mut status,
        json!({"reason": "DeadlineExceeded",
               "message": "Pod was active on the node longer than the specified deadline"}),
    );
    let failed = map_at(&pod(json!({}), status), 63);
    assert_eq!(
        (failed.info.state, failed.info.reason),
        (JobState::Failed, Reason::DeadlineExceeded)
    );
    assert!(
        failed.info.message.contains("timeout 1m"),
        "{}",
        failed.info.message
    );
}

#[test]
fn evictions_preemptions_and_lost_nodes_say_so() {
    // The kubelet evicted it under node pressure.
    let mut evicted = ended("Failed", 137, "Error", 20);
    merge(
        &mut evicted,
        json!({"reason": "Evicted", "message": "The node was low on resource: memory.",
               "conditions": [{"type": "DisruptionTarget", "status": "True",
                               "reason": "TerminationByKubelet", "lastTransitionTime": time(19)}]}),
    );
    let answer = map_at(&pod(json!({}), evicted), 21);
    assert_eq!(
        (answer.info.state, answer.info.reason),
        (JobState::Failed, Reason::Evicted)
    );

    // The scheduler preempted it: marked, then deleted; the container still stopping.
    let preempting = json!({
        "conditions": [{"type": "DisruptionTarget", "status": "True",
                        "reason": "PreemptionByScheduler", "lastTransitionTime": time(19),
                        "message": "preempted by a higher priority pod"}],
    });
    let deleted = json!({"deletionTimestamp": time(50), "deletionGracePeriodSeconds": 30});
    let stopping = pod(deleted.clone(), preempting.clone());
    let answer = map_at(&stopping, 21);
    assert_eq!(
        (answer.info.state, answer.info.message.as_str()),
        (
            JobState::Started,
            "the pod's outcome is known; waiting for its final status"
        ),
        "as a Job's verdict waits for its pod"
    );
    // Its final status, whichever copy of the pod (deleted or not) a replica saw first; or,
    // still stopping, once the wait for it is over.
    let mut killed = ended("Failed", 137, "Error", 22);
    merge(&mut killed, preempting);
    for view in [pod(deleted.clone(), killed.clone()), pod(json!({}), killed)] {
        let answer = map_at(&view, 23);
        assert_eq!(
            (answer.info.state, answer.info.reason, answer.info.exit_code),
            (JobState::Failed, Reason::Preempted, None)
        );
    }
    let answer = map_at(&stopping, 31);
    assert_eq!(
        (answer.info.state, answer.info.reason),
        (JobState::Failed, Reason::Preempted)
    );

    // Its node is gone: the taint manager failed it (the container lost) and deleted it at
    // once, in the same second. Each copy says the same, exit code included.
    let mut unknown = ended("Failed", 137, "ContainerStatusUnknown", 19);
    merge(
        &mut unknown,
        json!({"reason": "NodeLost",
               "conditions": [{"type": "DisruptionTarget", "status": "True",
                               "reason": "DeletionByTaintManager", "lastTransitionTime": time(19)}]}),
    );
    let gone_now = json!({"deletionTimestamp": time(19), "deletionGracePeriodSeconds": 0});
    for view in [pod(json!({}), unknown.clone()), pod(gone_now, unknown)] {
        let answer = map_at(&view, 20);
        assert_eq!(
            (answer.info.state, answer.info.reason, answer.info.exit_code),
            (JobState::Failed, Reason::NodeLost, Some(137))
        );
    }

    // Its node is gone: the pod GC marked it and removed it.
    let lost = json!({
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True",
                        "reason": "DeletionByPodGC", "lastTransitionTime": time(19)}],
    });
    let last = pod(deleted, lost);
    let answer = pod_status(
        &Observation::Vanished {
            last_seen: &last,
            final_state: true,
        },
        at(30),
        &config(),
        None,
    )
    .expect("an answer");
    assert_eq!(
        (answer.info.state, answer.info.reason),
        (JobState::Failed, Reason::NodeLost)
    );
}

#[test]
fn a_cancel_is_cancelling_until_the_pods_deletion_then_cancelled() {
    let mark = json!({"annotations": {"kubeferry.dev/cancel-requested": time(10)}});
    let marked = map_at(&pod(mark.clone(), json!({})), 11);
    assert_eq!(
        (marked.info.state, marked.info.reason),
        (JobState::Cancelling, Reason::CancelRequested)
    );

    // Deleted at 12 with 30 seconds of grace; the container, killed, ended at 13.
    let mut deleted = mark;
    merge(
        &mut deleted,
        json!({"deletionTimestamp": time(42), "deletionGracePeriodSeconds": 30}),
    );
    for status in [json!({}), ended("Failed", 137, "Error", 13)] {
        let answer = map_at(&pod(deleted.clone(), status), 14);
        assert_eq!(
            (answer.info.state, answer.info.reason),
            (JobState::Cancelled, Reason::Cancelled)
        );
        assert_eq!(answer.info.finished_at, Some(at(12)));
    }

    // Killed in the deletion's own second: the kill's exit (137) says the deletion ended it.
    let same_second = map_at(&pod(deleted.clone(), ended("Failed", 137, "Error", 12)), 14);
    assert_eq!(same_second.info.state, JobState::Cancelled);

    // A failure of its own before the cancel's deletion stands.
    let failed_first = map_at(&pod(deleted, ended("Failed", 3, "Error", 11)), 14);
    assert_eq!(
        (failed_first.info.state, failed_first.info.exit_code),
        (JobState::Failed, Some(3))
    );
}

#[test]
fn a_pod_that_failed_on_its_own_then_was_deleted_in_the_same_second_failed() {
    // Timestamps have whole seconds: an exit no stop gives (3) ended it on its own.
    let deleted = json!({"deletionTimestamp": time(42), "deletionGracePeriodSeconds": 30});
    let answer = map_at(&pod(deleted, ended("Failed", 3, "Error", 12)), 14);
    assert_eq!(
        (answer.info.state, answer.info.reason, answer.info.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{answer:?}"
    );
}

#[test]
fn a_pod_someone_else_deleted_says_the_pod_was_deleted() {
    let deleted = json!({"deletionTimestamp": time(42), "deletionGracePeriodSeconds": 30});
    let answer = map_at(&pod(deleted, json!({})), 14);
    assert_eq!(
        (answer.info.state, answer.info.reason),
        (JobState::Failed, Reason::DeletedExternally)
    );
    assert_eq!(
        answer.info.message,
        format!("the pod was deleted at {} without a cancel request", at(12))
    );
}
