//! What the service's benchmarks share: a simulated cluster with one service on it, an HTTP
//! client, and submission of many jobs through the API.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{Method, Request, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kubeferry_server::config::{
    AuthConfig, ClusterConfig, ClusterSource, Config, Limits, Timeouts,
};
use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::json;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub const TOKEN: &str = "bench-token-0123456789abcdef";

/// A client with a pool of keep-alive connections.
pub fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(256)
        .build_http()
}

pub fn request(method: Method, url: &str, body: Option<String>) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(url)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("a request")
}

pub async fn send(client: &HttpClient, request: Request<Full<Bytes>>) -> (StatusCode, Bytes) {
    let response = client.request(request).await.expect("the service answers");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, body)
}

/// A simulated cluster with one service on it (namespace `default`, bearer token [`TOKEN`]).
pub struct Bench {
    pub sim: SimCluster,
    pub service: kubeferry_server::Running,
    pub base: String,
    _dir: tempfile::TempDir,
}

impl Bench {
    pub async fn start() -> anyhow::Result<Bench> {
        let dir = tempfile::tempdir()?;
        let sim = SimCluster::start(SimConfig::default()).await?;
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig_as(&kubeconfig, "sim", sim.admin_token())?;
        let tokens = dir.path().join("tokens.yaml");
        std::fs::write(
            &tokens,
            format!("tokens:\n  - name: bench\n    token: {TOKEN}\n    namespaces: [\"*\"]\n"),
        )?;
        let config = Config {
            listen: "127.0.0.1:0".parse()?,
            tls: None,
            auth: AuthConfig::Tokens { file: tokens },
            clusters: vec![ClusterConfig {
                name: Some("sim".into()),
                source: ClusterSource::Kubeconfig {
                    path: Some(kubeconfig),
                    context: Some("sim".into()),
                },
                spark_operator: None,
            }],
            namespaces: vec!["default".into()],
            name_prefix: String::new(),
            templates_dir: None,
            timeouts: Timeouts::default(),
            limits: Limits::default(),
        };
        let service = kubeferry_server::start(config).await?;
        let base = format!("http://{}", service.addr());
        Ok(Bench {
            sim,
            service,
            base,
            _dir: dir,
        })
    }

    /// Submits `total` jobs through the API, 32 at a time: the first `running` run (a `sleep`
    /// process each), the others are suspended, as if queued by Kueue (tracked like any job,
    /// no processes). Returns their ids.
    pub async fn submit(&self, client: &HttpClient, total: usize, running: usize) -> Vec<String> {
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (client, base, next) = (client.clone(), self.base.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return ids;
                    }
                    let body = if i < running {
                        json!({
                            "jobId": format!("bench-{i}"),
                            "spec": {"name": "bench", "image": "busybox", "command": ["sleep", "3600"]},
                        })
                    } else {
                        json!({
                            "jobId": format!("bench-{i}"),
                            "spec": {"name": "bench", "image": "busybox", "command": ["true"], "queue": "bench"},
                        })
                    };
                    let (status, body) = send(
                        &client,
                        request(Method::POST, &format!("{base}/v1/jobs"), Some(body.to_string())),
                    )
                    .await;
                    assert_eq!(status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
                    let reply: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
                    ids.push(reply["id"].as_str().expect("an id").to_string());
                }
            }));
        }
        let mut ids = Vec::new();
        for task in tasks {
            ids.extend(task.await.expect("a submitter"));
        }
        ids
    }

    /// How many jobs `/metrics` counts in `state`.
    pub async fn counted(&self, client: &HttpClient, state: &str) -> usize {
        let (_, body) = send(
            client,
            request(Method::GET, &format!("{}/metrics", self.base), None),
        )
        .await;
        String::from_utf8_lossy(&body)
            .lines()
            .find(|l| l.starts_with("kubeferry_jobs{") && l.contains(&format!("state=\"{state}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
            .unwrap_or(0)
    }

    /// Waits until the service tracks `total` jobs and `/metrics` counts
    /// `running` of them STARTED.
    pub async fn settle(
        &self,
        client: &HttpClient,
        total: usize,
        running: usize,
    ) -> anyhow::Result<()> {
        let executor = &self.service.app().clusters[0].executor;
        let tracked = || -> usize {
            executor
                .jobs_by_state()
                .iter()
                .map(|(_, _, count)| count)
                .sum()
        };
        let since = Instant::now();
        loop {
            let started = self.counted(client, "STARTED").await;
            if tracked() >= total && started >= running {
                return Ok(());
            }
            if since.elapsed() > Duration::from_secs(300) {
                anyhow::bail!(
                    "{} of {total} jobs are tracked, {started} of {running} run",
                    tracked()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The `p`th percentile of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A duration in milliseconds, three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}
