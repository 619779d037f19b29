//! What the service's end-to-end tests share: a simulated cluster, a service on 127.0.0.1 with
//! millisecond timings, an HTTP client, a reader of Server-Sent Events, and waiting for a
//! condition with a deadline.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::http::{HeaderMap, Method, Request, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kubeferry_server::config::{
    AuthConfig, ClusterConfig, ClusterSource, Config, Limits, Timeouts,
};
use kubeferry_server::{Running, start};
use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::{Value, json};

/// The cluster name execution ids carry in these tests.
pub const CLUSTER: &str = "sim";

/// The longest any condition is waited for.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A token with every namespace.
pub const ADMIN_TOKEN: &str = "admin-token-0123456789abcdef";
/// A token with the `team-a` namespace only.
pub const TEAM_A_TOKEN: &str = "team-a-token-0123456789abcdef";

/// Waits until `check` gives a value, polling every 20 ms; fails the test after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A simulated cluster and a kubeconfig for it (context `sim`).
pub struct Sim {
    pub sim: SimCluster,
    pub kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Sim {
    /// A fresh cluster with the namespaces `default`, `team-a` and `team-b`.
    pub async fn start() -> Sim {
        Sim::start_with(SimConfig::for_tests()).await
    }

    /// [`Sim::start`] with a cluster configured as given.
    pub async fn start_with(config: SimConfig) -> Sim {
        let sim = SimCluster::start(config).await.unwrap();
        for namespace in ["team-a", "team-b"] {
            sim.create(
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            )
            .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig_as(&kubeconfig, CLUSTER, sim.admin_token())
            .unwrap();
        std::fs::write(
            dir.path().join("tokens.yaml"),
            format!(
                "tokens:\n  - name: admin\n    token: {ADMIN_TOKEN}\n    namespaces: [\"*\"]\n  - name: team-a\n    token: {TEAM_A_TOKEN}\n    namespaces: [team-a]\n"
            ),
        )
        .unwrap();
        let templates = dir.path().join("templates");
        std::fs::create_dir_all(&templates).unwrap();
        std::fs::write(
            templates.join("greet.yaml"),
            "name: greet\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: ['echo hello, {{who}}']\n",
        )
        .unwrap();
        Sim {
            sim,
            kubeconfig,
            dir,
        }
    }

    /// The tokens file.
    pub fn tokens_file(&self) -> PathBuf {
        self.dir.path().join("tokens.yaml")
    }

    /// A service configuration for this cluster: 127.0.0.1 on a free port, bearer tokens,
    /// namespaces `default`, `team-a` and `team-b`, millisecond timings.
    pub fn config(&self) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            tls: None,
            auth: AuthConfig::Tokens {
                file: self.tokens_file(),
            },
            clusters: vec![ClusterConfig {
                name: Some(CLUSTER.into()),
                source: ClusterSource::Kubeconfig {
                    path: Some(self.kubeconfig.clone()),
                    context: Some(CLUSTER.into()),
                },
                spark_operator: None,
            }],
            namespaces: vec!["default".into(), "team-a".into(), "team-b".into()],
            name_prefix: String::new(),
            templates_dir: Some(self.dir.path().join("templates")),
            timeouts: fast_timeouts(),
            limits: Limits::default(),
        }
    }

    /// Starts a service with [`Sim::config`] and waits until it is ready.
    pub async fn serve(&self) -> Service {
        Service::start(self.config()).await
    }

    /// A Kubernetes client for the cluster, as its admin.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&self.sim.kubeconfig_yaml(CLUSTER)).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Every Job in a namespace, as (name, job id annotation).
    pub async fn jobs(&self, namespace: &str) -> Vec<(String, String)> {
        let api: kube::Api<Job> = kube::Api::namespaced(self.client().await, namespace);
        let list = api.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .map(|job| {
                let job_id = job
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kubeferry.dev/job-id").cloned())
                    .unwrap_or_default();
                (job.metadata.name.clone().unwrap_or_default(), job_id)
            })
            .collect()
    }

    /// Every pod in a namespace, as (name, owning Job's name).
    pub async fn pods(&self, namespace: &str) -> Vec<(String, String)> {
        let api: kube::Api<Pod> = kube::Api::namespaced(self.client().await, namespace);
        let list = api.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .map(|pod| {
                let job = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("batch.kubernetes.io/job-name").cloned())
                    .unwrap_or_default();
                (pod.metadata.name.clone().unwrap_or_default(), job)
            })
            .collect()
    }
}

/// Timings for tests: everything in milliseconds except what must be longer.
pub fn fast_timeouts() -> Timeouts {
    Timeouts {
        request: Duration::from_secs(20),
        shutdown: Duration::from_secs(5),
        drain: Duration::ZERO,
        sync: Duration::from_secs(5),
        watch: Duration::from_secs(60),
        connect: Duration::from_secs(2),
        read: Duration::from_secs(10),
        retry_deadline: Duration::from_secs(2),
        unreachable_window: Duration::from_secs(1),
        recheck: Duration::from_millis(50),
        image_pull_grace: Duration::from_secs(1),
        create_container_error_grace: Duration::from_secs(1),
        pending: None,
        pod_status_wait: Duration::from_millis(500),
        watch_restart: Duration::from_secs(30),
        tombstone: Duration::from_secs(900),
        absent: Duration::from_secs(10),
        outcome_retention: Duration::from_secs(7 * 24 * 3600),
        // Shorter than `read`, which the hold must outlast where it matters.
        name_hold: Duration::from_millis(300),
        no_status: Duration::from_secs(600),
        keep_alive: Duration::from_secs(1),
        follow_reopen: Duration::from_millis(50),
        follow_idle: Duration::from_secs(60),
        tokens_reload: Duration::from_millis(50),
        state_sample: Duration::from_millis(50),
    }
}

/// A running service and a client for it.
pub struct Service {
    pub running: Option<Running>,
    pub api: Api,
}

impl Service {
    /// Starts a service and waits until `/readyz` says it is ready.
    pub async fn start(config: Config) -> Service {
        let running = start(config).await.expect("the service starts");
        let api = Api::new(running.addr(), Some(ADMIN_TOKEN));
        let service = Service {
            running: Some(running),
            api,
        };
        service.ready().await;
        service
    }

    /// Waits until the service is ready.
    pub async fn ready(&self) {
        eventually("the service to be ready", || async {
            (self.api.get("/readyz").await.status == StatusCode::OK).then_some(())
        })
        .await;
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.running.as_ref().unwrap().addr()
    }

    /// A client with another token (or none).
    pub fn client(&self, token: Option<&str>) -> Api {
        Api::new(self.addr(), token)
    }

    /// Stops it gracefully.
    pub async fn stop(mut self) {
        self.running.take().unwrap().shutdown().await.unwrap();
    }
}

/// An answer.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts an error answer: its status and code; returns the body.
    pub fn error(&self, status: StatusCode, code: &str) -> Value {
        let body = self.json();
        assert_eq!(self.status, status, "{body}");
        assert_eq!(body["code"], code, "{body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        body
    }
}

/// A client of the service's API.
#[derive(Clone)]
pub struct Api {
    addr: SocketAddr,
    base: String,
    token: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Api {
    /// A client for the service at `addr`.
    pub fn new(addr: SocketAddr, token: Option<&str>) -> Api {
        Api {
            addr,
            base: format!("http://{addr}"),
            token: token.map(str::to_string),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The address of the service it calls.
    pub fn base_addr(&self) -> SocketAddr {
        self.addr
    }

    fn request(&self, method: Method, path: &str, body: Option<Bytes>) -> Request<Full<Bytes>> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        builder.body(Full::new(body.unwrap_or_default())).unwrap()
    }

    /// Sends a request and reads the whole answer.
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Reply {
        let response = tokio::time::timeout(DEADLINE, self.client.request(request))
            .await
            .expect("an answer in time")
            .expect("the service answers");
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
            .await
            .expect("the whole body in time")
            .expect("the body")
            .to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// GET, returning only the status, or `None` when nothing answers (yet).
    pub async fn try_get(&self, path: &str) -> Option<StatusCode> {
        let request = self.request(Method::GET, path, None);
        match tokio::time::timeout(DEADLINE, self.client.request(request)).await {
            Ok(Ok(response)) => Some(response.status()),
            _ => None,
        }
    }

    /// POST, returning only the status, or `None` when no answer comes (the service died).
    pub async fn try_post(&self, path: &str, body: &Value) -> Option<StatusCode> {
        let request = self.request(Method::POST, path, Some(body.to_string().into()));
        match tokio::time::timeout(DEADLINE, self.client.request(request)).await {
            Ok(Ok(response)) => Some(response.status()),
            _ => None,
        }
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(Method::GET, path, None)).await
    }

    /// POST a JSON value.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_raw(path, body.to_string()).await
    }

    /// POST a body as it is.
    pub async fn post_raw(&self, path: &str, body: impl Into<Bytes>) -> Reply {
        self.send(self.request(Method::POST, path, Some(body.into())))
            .await
    }

    /// A request of any method with a raw body and extra headers.
    pub async fn custom(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = self.request(method, path, body);
        for (name, value) in headers {
            request.headers_mut().insert(
                hyper::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        self.send(request).await
    }

    /// GET, returning the response as soon as its headers arrive (for streams).
    pub async fn open(&self, path: &str) -> hyper::Response<Incoming> {
        tokio::time::timeout(
            DEADLINE,
            self.client.request(self.request(Method::GET, path, None)),
        )
        .await
        .expect("an answer in time")
        .expect("the service answers")
    }

    /// Submits a job; asserts 201 and returns the execution id.
    pub async fn submit(&self, body: Value) -> String {
        let reply = self.post("/v1/jobs", &body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
        reply.json()["id"].as_str().unwrap().to_string()
    }

    /// Submits a job id that already names a job: 200, `existing`, nothing created; its id.
    pub async fn resubmit(&self, body: Value) -> String {
        let reply = self.post("/v1/jobs", &body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.json()["existing"], true, "{}", reply.text());
        reply.json()["id"].as_str().unwrap().to_string()
    }

    /// A job's info.
    pub async fn job(&self, id: &str) -> Reply {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    /// Waits until a job reaches `state`; returns its info.
    pub async fn wait_for(&self, id: &str, state: &str) -> Value {
        eventually(&format!("{id} to be {state}"), || async {
            let reply = self.job(id).await;
            let info = reply.json();
            (reply.status == StatusCode::OK && info["state"] == state).then_some(info)
        })
        .await
    }

    /// Waits until a job reaches a final state; returns its info.
    pub async fn wait_final(&self, id: &str) -> Value {
        eventually(&format!("{id} to end"), || async {
            let reply = self.job(id).await;
            let info = reply.json();
            let state = info["state"].as_str().unwrap_or_default();
            matches!(state, "SUCCEEDED" | "FAILED" | "CANCELLED").then_some(info)
        })
        .await
    }
}

/// A container job that runs `script` with `sh -c`.
pub fn shell_job(job_id: &str, script: &str) -> Value {
    json!({
        "jobId": job_id,
        "spec": {
            "name": "test",
            "image": "busybox:1.36",
            "command": ["sh", "-c"],
            "args": [script],
        }
    })
}

/// A file a job waits for, so that a test decides when the job goes on (instead of hoping a
/// sleep is long enough to observe a state).
pub struct Gate {
    path: PathBuf,
}

impl Gate {
    /// A closed gate in `dir`.
    pub fn new(dir: &Path, name: &str) -> Gate {
        Gate {
            path: dir.join(format!("gate-{name}")),
        }
    }

    /// Shell that waits until the gate opens.
    pub fn wait(&self) -> String {
        format!(
            "while [ ! -e '{}' ]; do sleep 0.02; done",
            self.path.display()
        )
    }

    /// The file whose creation opens the gate.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the gate.
    pub fn open(&self) {
        std::fs::write(&self.path, "").unwrap();
    }
}

/// Server-Sent Events read from a response body.
pub struct Events {
    body: Incoming,
    buffer: String,
}

/// One event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: String,
    pub data: Value,
}

impl Events {
    /// Reads the events of a response.
    pub fn new(response: hyper::Response<Incoming>) -> Events {
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        Events {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped); `None` when the stream ended. Fails the
    /// test when none comes within [`DEADLINE`], keep-alives or not.
    pub async fn next(&mut self) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_string();
                    } else if let Some(text) = line.strip_prefix("data:") {
                        data.push_str(text.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // A comment (keep-alive).
                }
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(SseEvent { event, data });
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .expect("an event in time")?;
            let frame = frame.expect("the stream");
            if let Ok(data) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// The next event named `name`, skipping others.
    pub async fn next_named(&mut self, name: &str) -> Option<SseEvent> {
        loop {
            let event = self.next().await?;
            if event.event == name {
                return Some(event);
            }
        }
    }
}

/// Reads a whole streamed body as text.
pub async fn read_stream(response: hyper::Response<Incoming>) -> String {
    let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .expect("the stream ends in time")
        .expect("the stream")
        .to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// A port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The repository's root.
pub fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A replica of the service as a process: `kubeferry serve` in the command line's tests (which
/// include this module), `kubeferry-server` in the service's own (Cargo gives a package's tests
/// only its own binaries, and the command line depends on this crate), the same
/// `kubeferry_server::serve` with the same flags.
pub struct Process {
    pub child: tokio::process::Child,
    pub api: Api,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
}

impl Process {
    /// Starts a replica named `name` on `sim` (a configuration file with test timings, as the
    /// cluster's admin) and waits until it is ready.
    pub async fn start(sim: &Sim, name: &str) -> Process {
        Process::start_with(sim, name, &sim.kubeconfig, &[]).await
    }

    /// [`Process::start`] with another kubeconfig and more environment variables.
    pub async fn start_with(
        sim: &Sim,
        name: &str,
        kubeconfig: &Path,
        env: &[(&str, &str)],
    ) -> Process {
        let port = closed_port();
        let dir = sim.dir.path();
        let config = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &config,
            format!(
                r#"
listen: 127.0.0.1:{port}
auth:
  tokensFile: {tokens}
clusters:
  - name: {CLUSTER}
    kubeconfig: {kubeconfig}
    context: {CLUSTER}
namespaces: [default, team-a, team-b]
templatesDir: {templates}
timeouts:
  sync: 5s
  recheck: 50ms
  retryDeadline: 2s
  unreachableWindow: 1s
  keepAlive: 1s
  followReopen: 50ms
  podStatusWait: 500ms
  shutdown: 5s
  tokensReload: 50ms
  read: 3s
  nameHold: 3s
"#,
                tokens = sim.tokens_file().display(),
                kubeconfig = kubeconfig.display(),
                templates = dir.join("templates").display(),
            ),
        )
        .unwrap();
        let log = dir.join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let stdout = stderr.try_clone().unwrap();
        let child = replica_command()
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .env_remove("KUBEFERRY_CLUSTER_NAME")
            .envs(env.iter().copied())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .expect("the replica starts");
        let api = Api::new(
            format!("127.0.0.1:{port}").parse().unwrap(),
            Some(ADMIN_TOKEN),
        );
        let process = Process { child, api, log };
        eventually(&format!("{name} to be ready"), || async {
            let ready = process.api.try_get("/readyz").await;
            (ready == Some(StatusCode::OK)).then_some(())
        })
        .await;
        process
    }

    /// What it wrote so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// SIGTERM, as Kubernetes stops a pod; returns the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap();
        assert!(sent.success());
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("it stops in time")
            .unwrap()
    }

    /// SIGKILL: no graceful anything.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// The program a replica runs: `kubeferry serve` where the command line's binary is at hand,
/// else `kubeferry-server`.
fn replica_command() -> tokio::process::Command {
    match (
        option_env!("CARGO_BIN_EXE_kubeferry"),
        option_env!("CARGO_BIN_EXE_kubeferry-server"),
    ) {
        (Some(cli), _) => {
            let mut command = tokio::process::Command::new(cli);
            command.arg("serve");
            command
        }
        (None, Some(server)) => tokio::process::Command::new(server),
        (None, None) => panic!("no binary that serves the API is built for these tests"),
    }
}
