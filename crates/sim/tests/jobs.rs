//! Jobs end to end through kube-rs: the kubelet runs the command, the Job controller reports the
//! outcome with the Kubernetes 1.31+ conditions, the log holds the output.

mod common;

use std::time::Duration;

use futures::{AsyncReadExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use common::{condition, eventually, shell_job, start};

async fn watch_until_finished(jobs: &Api<Job>, name: &str) -> Job {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(jobs.clone(), config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .expect("the job finishes in time")
            .expect("the watch works")
            .expect("the watch goes on");
        let job = match next {
            watcher::Event::Apply(j) | watcher::Event::InitApply(j) => j,
            _ => continue,
        };
        if condition(&job, "Complete").is_some() || condition(&job, "Failed").is_some() {
            return job;
        }
    }
}

#[tokio::test]
async fn failing_job_reports_exit_code_and_log() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job: Job = serde_json::from_value(shell_job("fails", "echo hello; exit 3")).expect("a job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");

    let finished = watch_until_finished(&jobs, "fails").await;
    let (reason, message) = condition(&finished, "Failed").expect("Failed");
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(message, "Job has reached the specified backoff limit");
    assert!(
        condition(&finished, "FailureTarget").is_some(),
        "FailureTarget comes first"
    );
    let status = finished.status.as_ref().expect("status");
    assert_eq!(status.failed, Some(1));
    assert!(status.completion_time.is_none());

    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels("job-name=fails"))
        .await
        .expect("pods");
    assert_eq!(list.items.len(), 1);
    let pod = &list.items[0];
    let name = pod.metadata.name.clone().unwrap_or_default();
    assert!(
        name.starts_with("fails-") && name.len() == "fails-".len() + 5,
        "{name}"
    );
    let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    let pod_status = pod.status.as_ref().expect("pod status");
    assert_eq!(pod_status.phase.as_deref(), Some("Failed"));
    let terminated = pod_status
        .container_statuses
        .as_ref()
        .expect("container statuses")[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!(terminated.exit_code, 3);
    assert_eq!(terminated.reason.as_deref(), Some("Error"));
    assert!(terminated.started_at.is_some() && terminated.finished_at.is_some());

    let log = pods.logs(&name, &LogParams::default()).await.expect("log");
    assert_eq!(log, "hello\n");
}

#[tokio::test]
async fn succeeding_job_completes() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job: Job =
        serde_json::from_value(shell_job("works", "echo one; echo two >&2")).expect("a job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
    let finished = watch_until_finished(&jobs, "works").await;
    assert_eq!(
        condition(&finished, "Complete"),
        Some((
            "CompletionsReached".into(),
            "Reached expected number of succeeded pods".into()
        ))
    );
    assert!(condition(&finished, "SuccessCriteriaMet").is_some());
    let status = finished.status.expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert!(status.completion_time.is_some() && status.start_time.is_some());

    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod = eventually("the pod", Duration::from_secs(5), || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default().labels("batch.kubernetes.io/job-name=works"))
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        }
    })
    .await;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let log = pods.logs(&name, &LogParams::default()).await.expect("log");
    let mut lines: Vec<&str> = log.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["one", "two"]);
    let stream = pods
        .log_stream(
            &name,
            &LogParams {
                follow: true,
                ..LogParams::default()
            },
        )
        .await
        .expect("a stream");
    let mut followed = Vec::new();
    let mut stream = std::pin::pin!(stream);
    stream
        .read_to_end(&mut followed)
        .await
        .expect("the stream ends");
    assert_eq!(followed.len(), log.len());
    assert_eq!(
        pod.metadata.finalizers, None,
        "the tracking finalizer is removed once counted"
    );
}

#[tokio::test]
async fn a_pod_admission_refuses_is_a_failed_create_event_retried_not_a_condition() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let mut manifest = shell_job("norobot", "echo ran");
    manifest["spec"]["template"]["spec"]["serviceAccountName"] = "robot".into();
    let job: Job = serde_json::from_value(manifest).expect("a job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
    // As kube-controller-manager does: a Warning event on the Job, counted up on each retry;
    // nothing on the Job's status.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(sim.client.clone(), "default");
    let event = eventually("the refusal retried", Duration::from_secs(10), || async {
        let list = events.list(&ListParams::default()).await.expect("events");
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("norobot")
                && e.reason.as_deref() == Some("FailedCreate")
                && e.count.unwrap_or(1) >= 2
        })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.message.as_deref(),
        Some(
            "Error creating: pods \"norobot-\" is forbidden: error looking up service account \
             default/robot: serviceaccount \"robot\" not found"
        )
    );
    let job = jobs.get("norobot").await.expect("the Job");
    let status = job.status.unwrap_or_default();
    assert_eq!(status.conditions, None, "{status:?}");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .is_empty()
    );
}

/// A pod that runs `sleep 30` with `resources`.
fn pod_with(name: &str, resources: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36",
                "command": ["sh", "-c", "sleep 30"], "resources": resources}]
        }
    })
}

#[tokio::test]
async fn a_resource_quota_refuses_what_would_exceed_it_in_kubernetes_words() {
    let sim = start().await;
    let quota = |name: &str, hard: serde_json::Value| {
        serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name}, "spec": {"hard": hard}})
    };
    sim.cluster
        .create(
            "default",
            quota(
                "compute",
                serde_json::json!({"requests.cpu": "1", "pods": "2"}),
            ),
        )
        .unwrap();
    let cpu = |amount: &str| serde_json::json!({"requests": {"cpu": amount}});
    // Within the quota, then past it by its cpu, then without the cpu it limits.
    sim.cluster
        .create("default", pod_with("a", cpu("600m")))
        .unwrap();
    let error = sim
        .cluster
        .create("default", pod_with("b", cpu("500m")))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "pods \"b\" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, \
             used: requests.cpu=600m, limited: requests.cpu=1"
        ),
        "{error}"
    );
    let error = sim
        .cluster
        .create("default", pod_with("c", serde_json::json!({})))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "pods \"c\" is forbidden: failed quota: compute: must specify requests.cpu for: main"
        ),
        "{error}"
    );
    // Two pods running use up the pod count too: both resources are named.
    sim.cluster
        .create("default", pod_with("d", cpu("400m")))
        .unwrap();
    let error = sim
        .cluster
        .create("default", pod_with("e", cpu("1m")))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("requested: pods=1,requests.cpu=1m, used: pods=2,requests.cpu=1"),
        "{error}"
    );
    // Object counts, on any resource; a dry run is judged alike.
    sim.cluster
        .create(
            "default",
            quota("jobs", serde_json::json!({"count/jobs.batch": "0"})),
        )
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job: Job = serde_json::from_value(shell_job("refused", "true")).unwrap();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for params in [dry, PostParams::default()] {
        let error = jobs.create(&params, &job).await.unwrap_err();
        let status = common::status_of::<Job>(Err(error));
        assert_eq!(status.code, 403);
        assert_eq!(
            status.message,
            "jobs.batch \"refused\" is forbidden: exceeded quota: jobs, requested: \
             count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0"
        );
    }
}
