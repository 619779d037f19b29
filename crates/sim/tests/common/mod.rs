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
    client_with(kubeconfig, true).await
}

/// A kube-rs client that does not retry 429/503/504 by itself (kube-rs 5 does by default).
pub async fn client_without_retries(kubeconfig: &str) -> kube::Client {
    client_with(kubeconfig, false).await
}

async fn client_with(kubeconfig: &str, retry: bool) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig).expect("the kubeconfig parses");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("the kubeconfig is usable");
    config.default_retry = retry;
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

/// A raw answer: status code, headers, body.
pub struct Raw {
    pub code: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Raw {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends a raw request through the client (its base URL and token).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> Raw {
    let mut builder = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    let request = builder
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let code = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .expect("a body")
        .to_vec();
    Raw {
        code,
        headers,
        body,
    }
}

/// The Status of a kube-rs API error.
pub fn status_of<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A Job's condition of type `kind` that is True: its reason and message.
pub fn condition(job: &k8s_openapi::api::batch::v1::Job, kind: &str) -> Option<(String, String)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}
