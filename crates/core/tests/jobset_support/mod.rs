//! Real-looking JobSets, child Jobs and pods for the JobSet status tests, built as the JobSet
//! controller (kubernetes-sigs/jobset, `jobset.x-k8s.io/v1alpha2`), the Job controller and the
//! kubelet of Kubernetes 1.33 write them: the JobSet's labels on every Job and pod, Jobs
//! named `<jobset>-<replicated job>-<index>`, one pod each, Indexed (the JobSet webhook's
//! default `completionMode`).

#![allow(dead_code)]

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::container::PodView;
use kubeferry_core::jobset::{ChildJobView, JobSetView};
use serde_json::{Value, json};

// Not every test binary that includes this module uses each of them.
#[allow(unused_imports)]
pub use crate::common::{Seen, at, expect};

/// The JobSet's name and uid.
pub const NAME: &str = "train-5f5fbbfa";
const UID: &str = "6b1c1e1a-8d1f-4c55-9a61-0f1e2d3c4b5a";

/// `T0 + seconds` as the API server writes it.
pub fn time(seconds: i64) -> String {
    at(seconds).to_string()
}

/// A condition as the controllers write it.
pub fn condition(kind: &str, reason: &str, message: &str, seconds: i64) -> Value {
    json!({
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": time(seconds),
    })
}

/// A JobSet of a leader and two workers (`maxRestarts` 1), with this status.
pub fn jobset(status: Value) -> Value {
    let template = |args: &str| {
        json!({
            "spec": {
                "backoffLimit": 0,
                "completions": 1,
                "parallelism": 1,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", args]}],
                }},
            },
        })
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": NAME,
            "namespace": "ml",
            "uid": UID,
            "resourceVersion": "4711",
            "creationTimestamp": time(0),
            "labels": {"app.kubernetes.io/managed-by": "kubeferry", "kubeferry.dev/job-id": "train"},
            "annotations": {"kubeferry.dev/job-id": "train", "kubeferry.dev/spec-hash": "0123456789abcdef"},
        },
        "spec": {
            "failurePolicy": {"maxRestarts": 1, "restartStrategy": "Recreate"},
            "network": {"enableDNSHostnames": true, "publishNotReadyAddresses": true},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": []},
            "suspend": false,
            "replicatedJobs": [
                {"name": "leader", "replicas": 1, "groupName": "default", "template": template("echo leading")},
                {"name": "workers", "replicas": 2, "groupName": "default", "template": template("echo working")},
            ],
        },
        "status": status,
    })
}

/// `status.replicatedJobsStatus` counts: (name, ready, succeeded, failed, active).
pub fn counts(rows: &[(&str, u32, u32, u32, u32)]) -> Value {
    json!(
        rows.iter()
            .map(|(name, ready, succeeded, failed, active)| json!({
                "name": name, "ready": ready, "succeeded": succeeded,
                "failed": failed, "active": active, "suspended": 0,
            }))
            .collect::<Vec<_>>()
    )
}

/// How a child Job (and its one pod) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pod1 {
    /// No pod yet.
    None,
    /// Waiting for its image since `T0 + s`.
    ImagePull(i64),
    /// Running since `T0 + s`.
    Running(i64),
    /// Succeeded: started at `.0`, ended at `.1`.
    Succeeded(i64, i64),
    /// Exited with a code: started, ended, code.
    Exited(i64, i64, i32),
    /// OOM killed: started, ended.
    OomKilled(i64, i64),
}

/// A child Job of restart `attempt`, its verdict as the Job controller writes it, and its pod.
pub fn child(replicated_job: &str, index: u32, attempt: u32, pod: Pod1) -> (Value, Option<Value>) {
    let name = format!("{NAME}-{replicated_job}-{index}");
    let job_uid = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        index,
        attempt as u64 * 100 + replicated_job.len() as u64
    );
    let labels = json!({
        "jobset.sigs.k8s.io/jobset-name": NAME,
        "jobset.sigs.k8s.io/jobset-uid": UID,
        "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
        "jobset.sigs.k8s.io/replicatedjob-replicas": if replicated_job == "leader" { "1" } else { "2" },
        "jobset.sigs.k8s.io/job-index": index.to_string(),
        "jobset.sigs.k8s.io/restart-attempt": attempt.to_string(),
        "jobset.sigs.k8s.io/global-replicas": "3",
    });
    let (conditions, succeeded, failed, active, start) = match pod {
        Pod1::None => (json!([]), 0, 0, 0, None),
        Pod1::ImagePull(s) | Pod1::Running(s) => (json!([]), 0, 0, 1, Some(s)),
        Pod1::Succeeded(s, e) => (
            json!([
                condition(
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    e + 1
                ),
                condition(
                    "Complete",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    e + 1
                ),
            ]),
            1,
            0,
            0,
            Some(s),
        ),
        Pod1::Exited(s, e, _) | Pod1::OomKilled(s, e) => (
            json!([
                condition(
                    "FailureTarget",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    e + 1
                ),
                condition(
                    "Failed",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    e + 1
                ),
            ]),
            0,
            1,
            0,
            Some(s),
        ),
    };
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name, "namespace": "ml", "uid": job_uid, "labels": labels, "annotations": labels,
            "creationTimestamp": time(i64::from(attempt) * 100),
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": NAME, "uid": UID, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1, "completionMode": "Indexed", "suspend": false},
        "status": {
            "conditions": conditions, "succeeded": succeeded, "failed": failed, "active": active,
            "startTime": start.map(|s| time(s - 1)),
            "completedIndexes": if succeeded > 0 { "0" } else { "" },
        },
    });
    let Some(started) = start else {
        return (job, None);
    };
    let (phase, state) = match pod {
        Pod1::ImagePull(_) => (
            "Pending",
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"busybox:1.99\""}}),
        ),
        Pod1::Running(s) => ("Running", json!({"running": {"startedAt": time(s)}})),
        Pod1::Succeeded(s, e) => (
            "Succeeded",
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": time(s), "finishedAt": time(e)}}),
        ),
        Pod1::Exited(s, e, code) => (
            "Failed",
            json!({"terminated": {"exitCode": code, "reason": "Error", "startedAt": time(s), "finishedAt": time(e)}}),
        ),
        Pod1::OomKilled(s, e) => (
            "Failed",
            json!({"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": time(s), "finishedAt": time(e)}}),
        ),
        Pod1::None => unreachable!("no pod"),
    };
    let mut pod_labels = labels.clone();
    pod_labels["batch.kubernetes.io/job-completion-index"] = json!("0");
    pod_labels["batch.kubernetes.io/job-name"] = json!(name);
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{name}-0-x{index}{attempt}q"),
            "namespace": "ml",
            "uid": format!("{job_uid}-pod"),
            "creationTimestamp": time(started - 1),
            "labels": pod_labels,
            "annotations": pod_labels,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job_uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "hostname": format!("{name}-0"),
            "subdomain": NAME,
            "nodeName": "worker-1",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        },
        "status": {
            "phase": phase,
            "startTime": time(started - 1),
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": time(started - 1)}],
            "containerStatuses": [{
                "name": "main", "image": "busybox:1.36", "imageID": "", "ready": phase == "Running",
                "restartCount": 0, "started": phase == "Running", "state": state,
            }],
        },
    });
    (job, Some(pod))
}

/// The views of a JobSet and its children.
pub fn views(
    jobset: &Value,
    children: &[(Value, Option<Value>)],
) -> (JobSetView, Vec<ChildJobView>, Vec<PodView>) {
    let jobs: Vec<ChildJobView> = children
        .iter()
        .map(|(job, _)| {
            let job: Job = serde_json::from_value(job.clone()).expect("a Job");
            ChildJobView::from(&job)
        })
        .collect();
    let pods: Vec<PodView> = children
        .iter()
        .filter_map(|(_, pod)| pod.as_ref())
        .map(|pod| {
            let pod: Pod = serde_json::from_value(pod.clone()).expect("a Pod");
            PodView::from(&pod)
        })
        .collect();
    (JobSetView::from_object(jobset), jobs, pods)
}
