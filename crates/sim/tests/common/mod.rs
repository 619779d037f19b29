//! Helpers shared by the integration tests: a started cluster with a kube-rs client, and
//! waiting for a condition with a deadline.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kubeferry_sim::{SimCluster, SimConfig};

/// A running cluster and an admin client for it.
pub struct Sim {
    pub cluster: SimCluster,
    pub client: kube::Client,
}

/// A kube-rs client for a kubeconfig text.
pub async fn client_for(kubeconfig: &str) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig).expect("the kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable");
    kube::Client::try_from(config).expect("a client")
}

/// Starts a cluster with test timings.
pub async fn start() -> Sim {
    start_with(SimConfig::for_tests()).await
}

/// Starts a cluster with a configuration.
pub async fn start_with(config: SimConfig) -> Sim {
    let cluster = SimCluster::start(config).await.expect("the cluster starts");
    let client = client_for(&cluster.kubeconfig_yaml("sim")).await;
    Sim { cluster, client }
}

/// Polls `check` until it returns `Some`, failing after `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > end {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A Job running `sh -c script` once (backoffLimit 0, restartPolicy Never).
pub fn shell_job(name: &str, script: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]
            }}
        }
    })
}
