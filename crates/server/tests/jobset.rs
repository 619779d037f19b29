//! JobSets through the API: a JobSet runs to SUCCEEDED with its replicated jobs' summary in
//! its info, a replica's log is read by `replica=` and `index=`, `replica=` is refused for other
//! kinds, and a cluster without the JobSet CRD refuses JobSets (`jobset_unavailable`).

mod common;

use common::*;
use hyper::http::StatusCode;
use kubeferry_sim::{CrdBundle, SimConfig};
use serde_json::{Value, json};

/// A leader and two workers, each printing its place.
fn jobset_job(job_id: &str) -> Value {
    json!({
        "jobId": job_id,
        "spec": "kind: JobSet\nname: train\nreplicatedJobs:\n  - {name: leader, image: busybox:1.36, command: [sh, -c, 'echo leading']}\n  - {name: workers, replicas: 2, image: busybox:1.36, command: [sh, -c, 'echo working on $POD'], env: {POD: {field: podName}}}\n",
    })
}

#[tokio::test]
async fn a_jobset_runs_with_its_replicas_summary_and_logs() {
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    let sim = Sim::start_with(config).await;
    let service = sim.serve().await;
    let api = &service.api;
    let id = api.submit(jobset_job("train-1")).await;
    assert!(id.contains("/jobset/default/train-1-"), "{id}");
    let info = api.wait_for(&id, "SUCCEEDED").await;
    assert_eq!(info["replicas"]["restarts"], 0);
    assert_eq!(info["replicas"]["terminalState"], "Completed");
    assert_eq!(
        info["replicas"]["replicatedJobs"][1],
        json!({"name": "workers", "replicas": 2, "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0})
    );
    let logs = |query: &'static str| {
        let id = id.clone();
        async move { api.get(&format!("/v1/jobs/{id}/logs{query}")).await }
    };
    assert_eq!(logs("").await.json()["log"], "leading\n");
    let name = id.rsplit('/').next().unwrap_or_default();
    let worker = logs("?replica=workers&index=1").await.json()["log"].clone();
    assert!(
        worker
            .as_str()
            .is_some_and(|log| log.starts_with(&format!("working on {name}-workers-1-"))),
        "{worker}"
    );
    // A replicated job the JobSet does not have: the caller's parameter, named.
    let body = logs("?replica=chief")
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    assert_eq!(body["field"], "replica", "{body}");
    // A container job has no replicas.
    let once = api.submit(shell_job("once", "echo only")).await;
    api.wait_for(&once, "SUCCEEDED").await;
    assert!(api.job(&once).await.json().get("replicas").is_none());
    api.get(&format!("/v1/jobs/{once}/logs?replica=workers"))
        .await
        .error(StatusCode::BAD_REQUEST, "bad_parameter");
    service.stop().await;
}

#[tokio::test]
async fn a_cluster_without_jobsets_refuses_them() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let reply = service.api.post("/v1/jobs", &jobset_job("train-2")).await;
    let error = reply.error(StatusCode::UNPROCESSABLE_ENTITY, "jobset_unavailable");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("install the JobSet controller")),
        "{error}"
    );
    service.stop().await;
}
