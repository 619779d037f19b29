//! The Rust API of the cluster: kubeconfigs, HTTPS and plain HTTP on one port, running without
//! TLS or authentication, node disruptions through the admin endpoints, shutdown.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::json;

use common::{client_for, eventually, raw, start};

#[tokio::test]
async fn kubeconfigs_point_at_https_with_the_ca_and_token() {
    let sim = start().await;
    let yaml = sim.cluster.kubeconfig_yaml("mine");
    let parsed: serde_json::Value = serde_saphyr::from_str(&yaml).expect("YAML");
    assert_eq!(parsed["current-context"], json!("mine"));
    assert_eq!(
        parsed["clusters"][0]["cluster"]["server"],
        json!(sim.cluster.url())
    );
    assert!(sim.cluster.url().starts_with("https://127.0.0.1:"));
    assert!(parsed["clusters"][0]["cluster"]["certificate-authority-data"].is_string());
    assert_eq!(
        parsed["users"][0]["user"]["token"],
        json!(sim.cluster.admin_token())
    );
    assert_eq!(
        parsed["contexts"][0]["context"]["namespace"],
        json!("default")
    );

    let dir = std::env::temp_dir().join(format!("kubeferry-sim-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("config");
    sim.cluster.write_kubeconfig(&path).expect("written");
    let text = std::fs::read_to_string(&path).expect("read");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(mode, 0o600);
    assert!(text.contains("current-context: kubeferry-sim"));

    // Plain HTTP is served on the same port, with the same token.
    let http = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        sim.cluster.http_url(),
        sim.cluster.admin_token()
    );
    let plain = client_for(&http).await;
    let namespaces: Api<Namespace> = Api::all(plain);
    assert_eq!(
        namespaces
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        4
    );
}

#[tokio::test]
async fn without_tls_or_auth_anyone_local_may_call() {
    let cluster = SimCluster::start(SimConfig {
        tls: false,
        auth: false,
        ..SimConfig::for_tests()
    })
    .await
    .expect("started");
    assert!(cluster.url().starts_with("http://"));
    let yaml = cluster.kubeconfig_yaml("open");
    assert!(!yaml.contains("certificate-authority-data"));
    let anonymous = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        cluster.url()
    );
    let client = client_for(&anonymous).await;
    let r = raw(&client, "GET", "/api/v1/namespaces", None, "").await;
    assert_eq!(r.code, 200);
    cluster.shutdown().await;
}

#[tokio::test]
async fn node_disruptions_through_the_admin_endpoints() {
    let sim = start().await;
    let admin = &sim.client;
    let r = raw(admin, "POST", "/sim/nodes/sim-node-1/drain", None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert_eq!(
        sim.cluster
            .object("", "nodes", "", "sim-node-1")
            .expect("node")["spec"]["unschedulable"],
        json!(true)
    );
    let r = raw(admin, "POST", "/sim/nodes/sim-node-1/restore", None, "").await;
    assert_eq!(r.code, 200);
    assert_eq!(
        sim.cluster
            .object("", "nodes", "", "sim-node-1")
            .expect("node")["spec"]
            .get("unschedulable"),
        None
    );
    let r = raw(admin, "POST", "/sim/nodes/no-such-node/lose", None, "").await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (404, json!("NotFound"))
    );
    let r = raw(admin, "POST", "/sim/pods/default/nothing/evict", None, "").await;
    assert_eq!(r.code, 404);
    sim.cluster
        .create("default", common::shell_job("after-restore", "true"))
        .expect("job");
    eventually(
        "the job to complete on the restored node",
        Duration::from_secs(10),
        || async {
            let job = sim
                .cluster
                .object("batch", "jobs", "default", "after-restore")?;
            job["status"]["succeeded"].as_i64().filter(|n| *n == 1)
        },
    )
    .await;
}

#[tokio::test]
async fn stopping_removes_the_pods_working_directories() {
    let base = std::env::temp_dir().join(format!("kubeferry-sim-workdirs-{}", std::process::id()));
    let sim = common::start_with(SimConfig {
        work_dir: Some(base.clone()),
        ..SimConfig::for_tests()
    })
    .await;
    sim.cluster
        .create(
            "default",
            common::shell_job("lingers", "touch here; sleep 30"),
        )
        .expect("job");
    let root = base.join("kubeferry-sim");
    eventually(
        "the pod's directory to hold its file",
        Duration::from_secs(10),
        || {
            let root = root.clone();
            async move {
                let cluster_dir = std::fs::read_dir(&root).ok()?.next()?.ok()?.path();
                let pod_dir = std::fs::read_dir(&cluster_dir).ok()?.next()?.ok()?.path();
                pod_dir.join("here").exists().then_some(())
            }
        },
    )
    .await;
    sim.cluster.shutdown().await;
    let left: Vec<_> = std::fs::read_dir(&root)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&base);
    assert!(left.is_empty(), "{left:?}");
}

/// A pod that sleeps, held after its deletion by a finalizer so what was done to it stays
/// visible.
fn held_pod(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "finalizers": ["example.com/hold"]},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "30"]}]}
    })
}

fn pod(sim: &common::Sim, name: &str) -> Option<serde_json::Value> {
    sim.cluster.object("", "pods", "default", name)
}

fn disruption_reason(pod: &serde_json::Value) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
        .and_then(|c| c["reason"].as_str())
        .map(str::to_string)
}

async fn running(sim: &common::Sim, name: &str) {
    sim.cluster
        .create("default", held_pod(name))
        .expect("the pod is created");
    eventually(
        &format!("{name} to run"),
        Duration::from_secs(10),
        || async { (pod(sim, name)?["status"]["phase"] == "Running").then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn pod_disruptions_through_the_admin_endpoints_and_the_eviction_api() {
    let sim = start().await;
    let admin = &sim.client;
    let wait = Duration::from_secs(10);

    running(&sim, "evicted").await;
    let r = raw(admin, "POST", "/sim/pods/default/evicted/evict", None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    let evicted = eventually("the kubelet's eviction", wait, || async {
        let p = pod(&sim, "evicted")?;
        (p["status"]["phase"] == "Failed").then_some(p)
    })
    .await;
    assert_eq!(evicted["status"]["reason"], json!("Evicted"));
    assert_eq!(
        disruption_reason(&evicted).as_deref(),
        Some("TerminationByKubelet")
    );

    running(&sim, "preempted").await;
    let r = raw(
        admin,
        "POST",
        "/sim/pods/default/preempted/preempt",
        None,
        "",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let preempted = pod(&sim, "preempted").expect("held by its finalizer");
    assert_eq!(
        disruption_reason(&preempted).as_deref(),
        Some("PreemptionByScheduler")
    );
    assert!(
        preempted["metadata"]["deletionTimestamp"].is_string(),
        "a graceful delete follows: {preempted}"
    );

    // The Eviction API, as kubectl drain calls it.
    running(&sim, "api-evicted").await;
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": "api-evicted", "namespace": "default"}});
    let r = raw(
        admin,
        "POST",
        "/api/v1/namespaces/default/pods/api-evicted/eviction",
        Some("application/json"),
        &eviction.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(r.json()["status"], json!("Success"));
    let api_evicted = pod(&sim, "api-evicted").expect("held by its finalizer");
    assert_eq!(
        disruption_reason(&api_evicted).as_deref(),
        Some("EvictionByEvictionAPI")
    );
    assert!(api_evicted["metadata"]["deletionTimestamp"].is_string());
    let r = raw(
        admin,
        "POST",
        "/api/v1/namespaces/default/pods/nothing/eviction",
        Some("application/json"),
        &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nothing"}})
            .to_string(),
    )
    .await;
    assert_eq!(r.code, 404);

    running(&sim, "lost").await;
    let node = pod(&sim, "lost").expect("the pod")["spec"]["nodeName"]
        .as_str()
        .expect("scheduled")
        .to_string();
    let r = raw(admin, "POST", &format!("/sim/nodes/{node}/lose"), None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    let lost = eventually("the pod of the lost node to fail", wait, || async {
        let p = pod(&sim, "lost")?;
        (p["status"]["phase"] == "Failed").then_some(p)
    })
    .await;
    assert_eq!(lost["status"]["reason"], json!("NodeLost"));
    assert_eq!(
        disruption_reason(&lost).as_deref(),
        Some("DeletionByTaintManager")
    );
    assert!(lost["metadata"]["deletionTimestamp"].is_string(), "{lost}");
}
