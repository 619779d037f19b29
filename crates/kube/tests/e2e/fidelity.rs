//! Behaviours of Kubernetes that kubeferry's correctness rests on and that the simulated cluster
//! once lacked: each test states the real behaviour, so that the simulated cluster keeps it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_pod_waits_for_the_deleted_one_to_terminate() {
    // kubeferry's Jobs set `podReplacementPolicy: Failed` so that one job never runs two pods
    // at once: Kubernetes creates the replacement only once the deleted pod is terminal.
    let env = Env::start().await;
    let gate = Gate::new();
    // The container ignores SIGTERM, so its pod stays terminating until the grace period ends.
    let script = format!("trap '' TERM; {}", gate.wait("never"));
    let id = env.submit(&shell("slowstop", &script, "retries: 1")).await;
    env.status_until(&id, "running", is(kubeferry_core::JobState::Started))
        .await;
    let pod = env.pod_of(&id).await;
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    // While the deleted pod terminates, no second pod may exist.
    let end = tokio::time::Instant::now() + Duration::from_millis(500);
    while tokio::time::Instant::now() < end {
        let terminating = env
            .sim
            .object("", "pods", NS, &pod)
            .is_some_and(|p| p["status"]["phase"] == "Running");
        if terminating {
            assert_eq!(env.sim.count("", "pods"), 1, "a replacement started early");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_delete_keeps_when_the_deletion_was_requested() {
    // The API server, asked to delete an object already being deleted with a shorter grace
    // period, moves deletionTimestamp back by the difference, so that deletionTimestamp less
    // deletionGracePeriodSeconds stays the time the deletion was requested (apiserver
    // `rest.BeforeDelete`). The kubelet's final delete (grace 0) must not lose it.
    let env = Env::start().await;
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "busybox:1.36",
                "command": ["sh", "-c", "sleep 30"]}]},
    });
    env.sim.create(NS, pod).unwrap();
    eventually("the pod to run", || async {
        env.sim
            .object("", "pods", NS, "held")
            .filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    // The answer to the delete is the pod as the deletion left it.
    let answer = pods.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = serde_json::to_value(answer.left().expect("the pod, being deleted")).unwrap();
    let requested = |p: &serde_json::Value| {
        let at: jiff::Timestamp = p["metadata"]["deletionTimestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let grace = p["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap();
        at - jiff::SignedDuration::from_secs(grace)
    };
    let first = requested(&deleting);
    // The kubelet's final delete (grace 0) follows the container's end.
    let terminated = eventually("the kubelet's final delete", || async {
        env.sim
            .object("", "pods", NS, "held")
            .filter(|p| p["metadata"]["deletionGracePeriodSeconds"] == 0)
    })
    .await;
    assert_eq!(requested(&terminated), first);
}
