//! Native sidecars (init containers with `restartPolicy: Always`, Kubernetes 1.29+) in the
//! simulated kubelet, driven through Jobs and kube-rs: started in order before the regular
//! containers, kept running and restarted, stopped after the regular containers have exited,
//! and never deciding the pod's phase.

mod common;

use std::time::Duration;

use futures::AsyncReadExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use serde_json::{Value, json};

use common::{Sim, eventually, start};

const WAIT: Duration = Duration::from_secs(15);

/// A Job (restartPolicy Never, no retries) with these init containers and a main container
/// running `sh -c main`.
async fn create_job(sim: &Sim, name: &str, inits: Value, main: &str) {
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "initContainers": inits,
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", main]}]
            }}
        }
    }))
    .expect("a job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
}

fn sidecar(name: &str, image: &str, script: &str) -> Value {
    json!({"name": name, "image": image, "restartPolicy": "Always", "command": ["sh", "-c", script]})
}

fn condition(job: &Job, kind: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

async fn finished_job(sim: &Sim, name: &str) -> Job {
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    eventually(&format!("{name} to finish"), WAIT, || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get(name).await.ok()?;
            (condition(&job, "Complete").is_some() || condition(&job, "Failed").is_some())
                .then_some(job)
        }
    })
    .await
}

/// The Job's only pod, once `check` holds for it.
async fn pod_when(sim: &Sim, job: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    eventually(what, WAIT, || {
        let pods = pods.clone();
        let found = async move {
            let list = pods
                .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
                .await
                .ok()?;
            list.items.into_iter().next()
        };
        let check = &check;
        async move { found.await.filter(|p| check(p)) }
    })
    .await
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn init_status(pod: &Pod, index: usize) -> Option<ContainerStatus> {
    pod.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .get(index)
        .cloned()
}

fn main_status(pod: &Pod) -> Option<ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()
        .cloned()
}

fn pod_condition(pod: &Pod, kind: &str) -> Option<(String, Option<String>)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.message.clone()))
}

#[tokio::test]
async fn a_sidecar_that_runs_forever_is_stopped_after_the_main_container_and_the_job_completes() {
    let sim = start().await;
    // The test lets the main container finish by creating a file it waits for (the kubelet
    // runs containers as local processes).
    let gate = std::env::temp_dir().join(format!("kubeferry-sidecar-gate-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let main = format!(
        "until [ -f {} ]; do sleep 0.02; done; cat sidecar.txt",
        gate.display()
    );
    // The regular init container and the main container both need the running sidecar: it
    // starts first and keeps running.
    create_job(
        &sim,
        "forever",
        json!([
            sidecar("proxy", "busybox:1.36", "echo up > sidecar.txt; echo proxy up; exec sleep 600"),
            {"name": "setup", "image": "busybox:1.36", "command": ["sh", "-c",
                "until [ -f sidecar.txt ]; do sleep 0.02; done; echo setup saw the sidecar"]},
        ]),
        &main,
    )
    .await;
    let running = pod_when(&sim, "forever", "the main container running", |p| {
        phase(p) == "Running"
            && main_status(p).is_some_and(|s| s.state.and_then(|s| s.running).is_some())
    })
    .await;
    let proxy = init_status(&running, 0).expect("the sidecar's status");
    assert!(
        proxy
            .state
            .as_ref()
            .and_then(|s| s.running.clone())
            .is_some(),
        "{proxy:?}"
    );
    assert_eq!(
        (proxy.started, proxy.ready, proxy.restart_count),
        (Some(true), true, 0)
    );
    let setup = init_status(&running, 1).expect("the init container's status");
    let done = setup
        .state
        .and_then(|s| s.terminated)
        .expect("setup completed");
    assert_eq!(
        (done.exit_code, done.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert_eq!(
        pod_condition(&running, "Initialized").map(|c| c.0),
        Some("True".into())
    );
    assert_eq!(
        pod_condition(&running, "Ready").map(|c| c.0),
        Some("True".into())
    );

    let name = running.metadata.name.clone().expect("a name");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    std::fs::write(&gate, "go").expect("the gate file");

    let job = finished_job(&sim, "forever").await;
    assert_eq!(
        condition(&job, "Complete").as_deref(),
        Some("CompletionsReached")
    );
    let pod = pods.get(&name).await.expect("the pod");
    assert_eq!(phase(&pod), "Succeeded");
    let main = main_status(&pod)
        .and_then(|s| s.state?.terminated)
        .expect("main ended");
    assert_eq!(main.exit_code, 0);
    let proxy = init_status(&pod, 0).expect("the sidecar's status");
    let stopped = proxy
        .state
        .and_then(|s| s.terminated)
        .expect("the sidecar was stopped");
    assert_eq!(stopped.exit_code, 143, "SIGTERM: {stopped:?}");
    assert_eq!(proxy.restart_count, 0);
    assert!(
        stopped.finished_at >= main.finished_at,
        "the sidecar stops after the main container"
    );
    let log = |container: &str| {
        let pods = pods.clone();
        let name = name.clone();
        let container = container.to_string();
        async move {
            pods.logs(
                &name,
                &LogParams {
                    container: Some(container),
                    ..LogParams::default()
                },
            )
            .await
            .expect("a log")
        }
    };
    assert_eq!(log("proxy").await, "proxy up\n");
    assert_eq!(log("setup").await, "setup saw the sidecar\n");
    assert_eq!(log("main").await, "up\n");
    let _ = std::fs::remove_file(&gate);
}

#[tokio::test]
async fn a_crashing_sidecar_is_restarted_and_the_main_container_decides() {
    let sim = start().await;
    create_job(
        &sim,
        "crashy",
        json!([sidecar(
            "shipper",
            "busybox:1.36",
            "echo run >> runs.txt; exit 1"
        )]),
        "until [ \"$(wc -l < runs.txt)\" -ge 3 ]; do sleep 0.02; done; echo main done",
    )
    .await;
    let job = finished_job(&sim, "crashy").await;
    assert_eq!(
        condition(&job, "Complete").as_deref(),
        Some("CompletionsReached")
    );
    let pod = pod_when(&sim, "crashy", "the pod", |_| true).await;
    assert_eq!(phase(&pod), "Succeeded");
    let shipper = init_status(&pod, 0).expect("the sidecar's status");
    assert!(shipper.restart_count >= 2, "{shipper:?}");
    let last = shipper
        .last_state
        .and_then(|s| s.terminated)
        .expect("its last run");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
}

#[tokio::test]
async fn a_failing_main_container_fails_the_pod_whatever_the_sidecar_does() {
    let sim = start().await;
    create_job(
        &sim,
        "mainfails",
        json!([sidecar("proxy", "busybox:1.36", "exec sleep 600")]),
        "exit 3",
    )
    .await;
    let job = finished_job(&sim, "mainfails").await;
    assert_eq!(
        condition(&job, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    let pod = pod_when(&sim, "mainfails", "the pod", |_| true).await;
    assert_eq!(phase(&pod), "Failed");
    let main = main_status(&pod)
        .and_then(|s| s.state?.terminated)
        .expect("main ended");
    assert_eq!(main.exit_code, 3);
    let proxy = init_status(&pod, 0)
        .and_then(|s| s.state?.terminated)
        .expect("stopped");
    assert_eq!(proxy.exit_code, 143);
}

#[tokio::test]
async fn a_sidecar_that_cannot_pull_its_image_keeps_the_pod_pending_with_its_reason() {
    let sim = start().await;
    create_job(
        &sim,
        "nopull",
        json!([sidecar("proxy", "registry.invalid/mesh/proxy:1.0", "true")]),
        "echo never",
    )
    .await;
    let pod = pod_when(&sim, "nopull", "the sidecar backing off", |p| {
        init_status(p, 0)
            .and_then(|s| s.state?.waiting?.reason)
            .as_deref()
            == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(phase(&pod), "Pending");
    let proxy = init_status(&pod, 0).expect("the sidecar's status");
    assert_eq!(
        (proxy.started, proxy.ready, proxy.restart_count),
        (Some(false), false, 0)
    );
    let main = main_status(&pod)
        .and_then(|s| s.state?.waiting)
        .expect("main waits");
    assert_eq!(main.reason.as_deref(), Some("PodInitializing"));
    assert_eq!(
        pod_condition(&pod, "Initialized"),
        Some((
            "False".into(),
            Some("containers with incomplete status: [proxy]".into())
        ))
    );
    // The pod can still be deleted: the waiting sidecar stops.
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let name = pod.metadata.name.clone().expect("a name");
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("the pod gone", WAIT, || {
        let pods = pods.clone();
        let name = name.clone();
        async move { pods.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn a_restart_policy_on_a_regular_container_is_refused() {
    let sim = start().await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
        "spec": {"restartPolicy": "Never",
            "initContainers": [{"name": "init", "image": "busybox:1.36", "restartPolicy": "Never"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "restartPolicy": "Always"}]}
    }))
    .expect("a pod");
    let error = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""),
        "{error}"
    );
    assert!(
        error.contains(
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn sidecars_are_stopped_last_one_first() {
    let sim = start().await;
    // The first sidecar, when told to stop, reports whether the second one still runs.
    create_job(
        &sim,
        "ordered",
        json!([
            sidecar("first", "busybox:1.36",
                "trap 'if [ -f second.txt ]; then echo second still running; else echo second gone; fi; exit 0' TERM; \
                 while true; do sleep 0.02; done"),
            sidecar("second", "busybox:1.36",
                "trap 'rm -f second.txt; exit 0' TERM; touch second.txt; while true; do sleep 0.02; done"),
        ]),
        "until [ -f second.txt ]; do sleep 0.02; done",
    )
    .await;
    let job = finished_job(&sim, "ordered").await;
    assert_eq!(
        condition(&job, "Complete").as_deref(),
        Some("CompletionsReached")
    );
    let pod = pod_when(&sim, "ordered", "the pod", |_| true).await;
    assert_eq!(phase(&pod), "Succeeded");
    for index in [0, 1] {
        let ended = init_status(&pod, index)
            .and_then(|s| s.state?.terminated)
            .expect("stopped");
        assert_eq!(
            ended.exit_code, 0,
            "each sidecar handled SIGTERM: {ended:?}"
        );
    }
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let name = pod.metadata.name.clone().expect("a name");
    let log = pods
        .logs(
            &name,
            &LogParams {
                container: Some("first".into()),
                ..LogParams::default()
            },
        )
        .await
        .expect("a log");
    // (The shell may first report its `sleep` killed by the same signal.)
    assert_eq!(log.lines().last(), Some("second gone"), "{log}");
}

#[tokio::test]
async fn a_deleted_pod_stops_its_main_container_before_its_sidecar() {
    let sim = start().await;
    // The main container, when told to stop, reports whether the sidecar still runs.
    create_job(
        &sim,
        "deleted",
        json!([sidecar("proxy", "busybox:1.36",
            "trap 'rm -f proxy.txt; exit 0' TERM; touch proxy.txt; while true; do sleep 0.02; done")]),
        "trap 'if [ -f proxy.txt ]; then echo proxy still running; else echo proxy gone; fi; exit 0' TERM; \
         touch main.txt; while true; do sleep 0.02; done",
    )
    .await;
    let running = pod_when(&sim, "deleted", "the main container running", |p| {
        main_status(p).is_some_and(|s| s.state.and_then(|s| s.running).is_some())
    })
    .await;
    let name = running.metadata.name.clone().expect("a name");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    // Follow the main container's log from before the deletion to the container's end.
    let params = LogParams {
        container: Some("main".into()),
        follow: true,
        ..LogParams::default()
    };
    let stream = pods.log_stream(&name, &params).await.expect("a stream");
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("deleted");
    let mut bytes = Vec::new();
    let mut stream = std::pin::pin!(stream);
    tokio::time::timeout(WAIT, stream.read_to_end(&mut bytes))
        .await
        .expect("the container ends in time")
        .expect("the log is read");
    let log = String::from_utf8_lossy(&bytes);
    assert_eq!(log.lines().last(), Some("proxy still running"), "{log}");
}
