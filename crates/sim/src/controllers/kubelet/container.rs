//! One container of a pod: image checks (InvalidImageName, ErrImagePull/ImagePullBackOff),
//! environment (CreateContainerConfigError), nothing to run (CreateContainerError), the
//! process itself with its output captured as
//! the log, memory-limit enforcement (OOMKilled, also with exit code 0 when the OOM killer took
//! a child process), graceful stop, and restarts with backoff.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use nix::sys::signal::Signal;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, watch};

use super::{env, image};
use crate::controllers::events::{self, EventKind, Source};
use crate::node::logs::RunLog;
use crate::node::process::{self, Launch, Started, signal_group};
use crate::node::termination;
use crate::quantity;
use crate::state::State;
use crate::store::meta;

/// Which container of the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContainerId {
    /// An init container.
    pub init: bool,
    /// Index in `initContainers` or `containers`.
    pub index: usize,
}

/// What a container reports to its pod.
#[derive(Clone, Debug)]
pub enum ContainerEvent {
    /// Not running, with a reason.
    Waiting {
        /// Which container.
        id: ContainerId,
        /// Reason (`ContainerCreating`, `ErrImagePull`, `CrashLoopBackOff`, ...).
        reason: String,
        /// Message.
        message: Option<String>,
    },
    /// The process started.
    Running {
        /// Which container.
        id: ContainerId,
        /// When.
        started_at: Timestamp,
        /// Runtime container id.
        container_id: String,
        /// Resolved image id.
        image_id: String,
    },
    /// The process ended.
    Terminated {
        /// Which container.
        id: ContainerId,
        /// Exit code (128 + signal when killed by one).
        exit_code: i32,
        /// Signal, when killed by one.
        signal: Option<i32>,
        /// `Completed`, `Error`, `OOMKilled`, `StartError`.
        reason: String,
        /// Message.
        message: Option<String>,
        /// When it started.
        started_at: Option<Timestamp>,
        /// When it ended.
        finished_at: Timestamp,
        /// Runtime container id.
        container_id: String,
    },
    /// The container will do nothing more; `succeeded` when its last run exited 0.
    Done {
        /// Which container.
        id: ContainerId,
        /// Whether the last run exited 0.
        succeeded: bool,
    },
}

/// Everything a container task needs.
pub struct ContainerTask {
    /// Shared state.
    pub state: Arc<State>,
    /// The pod as it was when the container was started.
    pub pod: Arc<Value>,
    /// The container spec.
    pub spec: Value,
    /// Which container.
    pub id: ContainerId,
    /// Pod restart policy.
    pub restart_policy: String,
    /// Node name.
    pub node: String,
    /// Working directory when the container names none.
    pub workdir: PathBuf,
    /// Reports.
    pub events: mpsc::Sender<ContainerEvent>,
    /// Becomes `Some(grace)` when the container must stop.
    pub stop: watch::Receiver<Option<Duration>>,
}

fn random_hex(n: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..n)
        .map(|_| format!("{:x}", rng.random_range(0..16u8)))
        .collect()
}

fn exit_code_of(status: &ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (code, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        (None, None) => (1, None),
    }
}

async fn pump<R: AsyncRead + Unpin>(reader: R, run: Arc<RunLog>) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => run.append(Bytes::copy_from_slice(&buf)),
        }
    }
}

/// How a run ended.
struct RunEnd {
    exit_code: i32,
    signal: Option<i32>,
    reason: String,
    message: Option<String>,
}

impl ContainerTask {
    fn name(&self) -> String {
        self.spec
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    fn field_path(&self) -> String {
        let list = if self.id.init {
            "initContainers"
        } else {
            "containers"
        };
        format!("spec.{list}{{{}}}", self.name())
    }

    fn event(&self, kind: EventKind, reason: &str, message: &str) {
        events::record(
            &self.state,
            &self.pod,
            kind,
            reason,
            message,
            Source {
                component: "kubelet",
                host: Some(&self.node),
            },
            Some(&self.field_path()),
        );
    }

    async fn report(&self, event: ContainerEvent) {
        // The pod worker outlives its containers; a send after it ended changes nothing.
        let _ = self.events.send(event).await;
    }

    async fn waiting(&self, reason: &str, message: Option<String>) {
        self.report(ContainerEvent::Waiting {
            id: self.id,
            reason: reason.to_string(),
            message,
        })
        .await;
    }

    /// Sleeps unless asked to stop first; true when stopped.
    async fn sleep_or_stop(&mut self, d: Duration) -> bool {
        if self.stop.borrow().is_some() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => self.stop.borrow().is_some(),
            _ = self.stop.changed() => true,
        }
    }

    async fn wait_for_stop(&mut self) {
        while self.stop.borrow().is_none() {
            if self.stop.changed().await.is_err() {
                return;
            }
        }
    }

    /// The number of containers of the pod, init containers included.
    fn containers_in_pod(&self) -> usize {
        ["/spec/containers", "/spec/initContainers"]
            .iter()
            .filter_map(|p| self.pod.pointer(p).and_then(Value::as_array))
            .map(Vec::len)
            .sum()
    }

    fn memory_limit(&self) -> Option<u64> {
        self.spec
            .pointer("/resources/limits/memory")
            .and_then(Value::as_str)
            .and_then(quantity::parse)
            .map(|m| (m / 1000).max(0) as u64)
    }

    fn argv(&self, vars: &[(String, String)]) -> Vec<String> {
        let list = |field: &str| -> Vec<String> {
            self.spec
                .get(field)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|s| env::expand(s, vars))
                        .collect()
                })
                .unwrap_or_default()
        };
        let command = list("command");
        let args = list("args");
        if !command.is_empty() {
            return command.into_iter().chain(args).collect();
        }
        match self.state.config.image_entrypoints.get(&self.repository()) {
            Some(entrypoint) => entrypoint.iter().cloned().chain(args).collect(),
            None => args,
        }
    }

    /// The image's repository (the reference without tag or digest).
    fn repository(&self) -> String {
        let image = self.spec.get("image").and_then(Value::as_str).unwrap_or("");
        image::parse(image)
            .map(|r| r.repository)
            .unwrap_or_default()
    }

    /// Whether the runtime has nothing to run: no `command`, no `args`, and an image with
    /// neither an entrypoint nor a default command.
    fn nothing_to_run(&self, argv: &[String]) -> bool {
        if !argv.is_empty() {
            return false;
        }
        let config = &self.state.config;
        let repository = self.repository();
        !config.image_entrypoints.contains_key(&repository)
            && config.images_without_command.contains(&repository)
    }

    /// Pulls the image: Ok when it can run, Err(()) when asked to stop while it cannot.
    async fn pull(&mut self) -> Result<String, ()> {
        let image = self
            .spec
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let parsed = match image::parse(&image) {
            Ok(p) => p,
            Err(problem) => {
                let message = format!(
                    "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: {problem}"
                );
                self.event(EventKind::Warning, "InspectFailed", &message);
                self.waiting("InvalidImageName", Some(message)).await;
                self.wait_for_stop().await;
                return Err(());
            }
        };
        let unpullable = self
            .state
            .config
            .unpullable_registries
            .iter()
            .any(|g| image::glob_match(g, &parsed.registry));
        if !unpullable {
            let policy = self
                .spec
                .get("imagePullPolicy")
                .and_then(Value::as_str)
                .unwrap_or("IfNotPresent");
            if policy == "Always" {
                self.event(
                    EventKind::Normal,
                    "Pulling",
                    &format!("Pulling image {image:?}"),
                );
                self.event(
                    EventKind::Normal,
                    "Pulled",
                    &format!("Successfully pulled image {image:?} in 0s (0s including waiting). Image size: 0 bytes."),
                );
            } else {
                self.event(
                    EventKind::Normal,
                    "Pulled",
                    &format!("Container image {image:?} already present on machine"),
                );
            }
            let digest = parsed
                .digest
                .clone()
                .unwrap_or_else(|| format!("sha256:{}", random_hex(64)));
            return Ok(format!(
                "{}/{}@{digest}",
                parsed.registry,
                parsed
                    .repository
                    .trim_start_matches(&format!("{}/", parsed.registry))
            ));
        }
        let mut backoff = self.state.config.timings.image_pull_backoff;
        let max = self.state.config.timings.image_pull_backoff_max;
        let reference = image.to_string();
        loop {
            let path = parsed
                .repository
                .trim_start_matches(&format!("{}/", parsed.registry));
            let tag = parsed.tag.clone().unwrap_or_else(|| "latest".into());
            let message = format!(
                "failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": failed to do request: Head \"https://{}/v2/{path}/manifests/{tag}\": dial tcp: lookup {} on 127.0.0.53:53: no such host",
                parsed.registry,
                parsed.registry.split(':').next().unwrap_or(""),
            );
            self.event(
                EventKind::Normal,
                "Pulling",
                &format!("Pulling image {image:?}"),
            );
            self.event(
                EventKind::Warning,
                "Failed",
                &format!("Failed to pull image {image:?}: {message}"),
            );
            self.event(EventKind::Warning, "Failed", "Error: ErrImagePull");
            self.waiting("ErrImagePull", Some(message)).await;
            if self.sleep_or_stop(backoff).await {
                return Err(());
            }
            let back_off = format!("Back-off pulling image {image:?}");
            self.event(EventKind::Normal, "BackOff", &back_off);
            self.event(EventKind::Warning, "Failed", "Error: ImagePullBackOff");
            self.waiting("ImagePullBackOff", Some(back_off)).await;
            backoff = (backoff * 2).min(max);
            if self.sleep_or_stop(backoff).await {
                return Err(());
            }
        }
    }

    async fn run_once(
        &mut self,
        argv: Vec<String>,
        vars: Vec<(String, String)>,
        container_id: &str,
    ) -> RunEnd {
        let uid = meta::uid(&self.pod).unwrap_or("").to_string();
        let run = self.state.logs.start_run(&uid, &self.name());
        if argv.is_empty() {
            run.finish();
            return RunEnd {
                exit_code: 0,
                signal: None,
                reason: "Completed".into(),
                message: None,
            };
        }
        let workdir = self
            .spec
            .get("workingDir")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .unwrap_or_else(|| self.workdir.clone());
        let mut env: Vec<(String, String)> = ["PATH", "HOME", "LANG", "TMPDIR"]
            .into_iter()
            .filter_map(|key| std::env::var(key).ok().map(|v| (key.to_string(), v)))
            .collect();
        let port = self.state.port.get().copied().unwrap_or(0);
        // The pod's hostname: `spec.hostname` when set (Indexed Jobs set it), else its name.
        let hostname = self
            .pod
            .pointer("/spec/hostname")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| meta::name(&self.pod));
        env.push(("HOSTNAME".into(), hostname.to_string()));
        env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
        env.push(("KUBERNETES_SERVICE_PORT".into(), port.to_string()));
        env.extend(vars);
        let termination_file = termination::file_of(&self.workdir, &self.name());
        let file = termination_file.clone();
        if let Err(error) = self
            .state
            .kubelet
            .on_host(move || termination::prepare(&file))
            .await
            .and_then(|r| r)
        {
            tracing::warn!(message = "cannot create a termination message file", path = %termination_file.display(), %error);
        }
        env.push((
            termination::PATH_ENV.to_string(),
            termination_file.display().to_string(),
        ));
        let launched = process::launch(&self.state.kubelet, Launch { argv, env, workdir }).await;
        let Started {
            mut child,
            pgid,
            output,
        } = match launched {
            Ok(started) => started,
            Err(error) => {
                run.finish();
                let message = format!(
                    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: {error}: unknown"
                );
                self.event(EventKind::Warning, "Failed", &format!("Error: {message}"));
                return RunEnd {
                    exit_code: 128,
                    signal: None,
                    reason: "StartError".into(),
                    // The process never ran: its file is empty and it has no log.
                    message: termination::message(
                        Some(message),
                        termination::Written::Text(Vec::new()),
                        false,
                        Vec::new,
                        self.containers_in_pod(),
                    ),
                };
            }
        };
        self.state.processes.register(pgid);
        let reader = tokio::spawn(pump(output, run.clone()));
        self.event(
            EventKind::Normal,
            "Created",
            &format!("Created container: {}", self.name()),
        );
        self.event(
            EventKind::Normal,
            "Started",
            &format!("Started container {}", self.name()),
        );
        let _ = container_id;
        // Only containers with a limit are measured (by the kubelet's one memory poller).
        let oom_killed = self
            .memory_limit()
            .map(|limit| self.state.kubelet.memory.watch(pgid, limit));
        let mut kill_at: Option<tokio::time::Instant> = None;
        if let Some(grace) = *self.stop.borrow() {
            signal_group(pgid, Signal::SIGTERM);
            kill_at = Some(tokio::time::Instant::now() + grace);
        }
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                changed = self.stop.changed(), if kill_at.is_none() => {
                    let grace = if changed.is_ok() { *self.stop.borrow() } else { Some(Duration::ZERO) };
                    if let Some(grace) = grace {
                        self.event(EventKind::Normal, "Killing", &format!("Stopping container {}", self.name()));
                        if grace.is_zero() {
                            signal_group(pgid, Signal::SIGKILL);
                        } else {
                            signal_group(pgid, Signal::SIGTERM);
                        }
                        kill_at = Some(tokio::time::Instant::now() + grace);
                    }
                }
                _ = sleep_until_opt(kill_at) => {
                    signal_group(pgid, Signal::SIGKILL);
                    kill_at = Some(tokio::time::Instant::now() + Duration::from_secs(3600));
                }
            }
        };
        // The container ends with its first process: nothing else of the group may linger.
        signal_group(pgid, Signal::SIGKILL);
        self.state.processes.unregister(pgid);
        if oom_killed.is_some() {
            self.state.kubelet.memory.unwatch(pgid);
        }
        let oom = oom_killed.is_some_and(|k| k.load(std::sync::atomic::Ordering::SeqCst));
        if tokio::time::timeout(Duration::from_secs(1), reader)
            .await
            .is_err()
        {
            tracing::warn!(message = "container output still open after exit", container = %self.name());
        }
        run.finish();
        let (exit_code, signal) = match &status {
            Ok(s) => exit_code_of(s),
            Err(_) => (137, Some(9)),
        };
        // An OOM kill anywhere in the container makes the runtime report OOMKilled, with the
        // main process's own exit code: 137 when it was the one killed, or whatever it exited
        // with when the kill took a child and it went on (0 included).
        let reason = if oom {
            "OOMKilled"
        } else if exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        let file = termination_file.clone();
        let written = self
            .state
            .kubelet
            .on_host(move || termination::read(&file))
            .await
            .unwrap_or_else(|error| termination::Written::Unreadable(error.to_string()));
        let fallback = exit_code != 0
            && self
                .spec
                .get("terminationMessagePolicy")
                .and_then(Value::as_str)
                == Some("FallbackToLogsOnError");
        RunEnd {
            exit_code,
            signal,
            reason: reason.into(),
            message: termination::message(
                None,
                written,
                fallback,
                || run.message_tail(),
                self.containers_in_pod(),
            ),
        }
    }

    /// Runs the container to its end (with restarts as the policy says).
    pub async fn run(mut self) {
        let mut succeeded = false;
        let mut crash_backoff = self.state.config.timings.crash_loop_backoff;
        'restart: loop {
            let image_id = match self.pull().await {
                Ok(id) => id,
                Err(()) => break 'restart,
            };
            // Environment: retried until its sources exist, as the kubelet does.
            let vars = loop {
                let pod = self
                    .state
                    .store
                    .get(&crate::store::ObjectKey::new(
                        crate::resources::GroupResource::new("", "pods"),
                        meta::namespace(&self.pod),
                        meta::name(&self.pod),
                    ))
                    .unwrap_or_else(|| self.pod.clone());
                match env::resolve(&self.state, &pod, &self.spec) {
                    Ok(vars) => break vars,
                    Err(message) => {
                        self.event(EventKind::Warning, "Failed", &format!("Error: {message}"));
                        self.waiting("CreateContainerConfigError", Some(message))
                            .await;
                        let retry = self.state.config.timings.config_retry_interval;
                        if self.sleep_or_stop(retry).await {
                            break 'restart;
                        }
                    }
                }
            };
            let delay = self.state.config.timings.container_start_delay;
            if !delay.is_zero() && self.sleep_or_stop(delay).await {
                break 'restart;
            }
            if self.stop.borrow().is_some() {
                break 'restart;
            }
            let argv = self.argv(&vars);
            if self.nothing_to_run(&argv) {
                // The kubelet retries the creation, which cannot succeed: the container waits
                // until the pod stops.
                let message = format!(
                    "failed to generate container {:?} spec: failed to generate spec: no command specified",
                    random_hex(64)
                );
                self.event(EventKind::Warning, "Failed", &format!("Error: {message}"));
                self.waiting("CreateContainerError", Some(message)).await;
                self.wait_for_stop().await;
                break 'restart;
            }
            let container_id = format!("containerd://{}", random_hex(64));
            let started_at = Timestamp::now();
            self.report(ContainerEvent::Running {
                id: self.id,
                started_at,
                container_id: container_id.clone(),
                image_id: image_id.clone(),
            })
            .await;
            let end = self.run_once(argv, vars, &container_id).await;
            // The kubelet judges by the exit code alone: an OOMKilled container that exited 0
            // counts as succeeded, for the pod's phase and for restarts (kubernetes#131530).
            succeeded = end.exit_code == 0;
            self.report(ContainerEvent::Terminated {
                id: self.id,
                exit_code: end.exit_code,
                signal: end.signal,
                reason: end.reason,
                message: end.message,
                started_at: Some(started_at),
                finished_at: Timestamp::now(),
                container_id,
            })
            .await;
            if self.stop.borrow().is_some() {
                break;
            }
            // A sidecar is restarted whatever it exited with, until the pod stops it.
            let sidecar = self.id.init && is_sidecar(&self.spec);
            let restart = match (self.id.init, self.restart_policy.as_str()) {
                _ if sidecar => true,
                (true, "Never") => false,
                (true, _) => !succeeded,
                (false, "Always") => true,
                (false, "OnFailure") => !succeeded,
                _ => false,
            };
            if !restart {
                break;
            }
            let pod_ref = format!(
                "{}_{}({})",
                meta::name(&self.pod),
                meta::namespace(&self.pod),
                meta::uid(&self.pod).unwrap_or("")
            );
            let message = format!(
                "back-off {}s restarting failed container={} pod={pod_ref}",
                crash_backoff.as_secs().max(1),
                self.name()
            );
            self.event(
                EventKind::Warning,
                "BackOff",
                &format!(
                    "Back-off restarting failed container {} in pod {pod_ref}",
                    self.name()
                ),
            );
            self.waiting("CrashLoopBackOff", Some(message)).await;
            if self.sleep_or_stop(crash_backoff).await {
                break;
            }
            crash_backoff =
                (crash_backoff * 2).min(self.state.config.timings.crash_loop_backoff_max);
        }
        let id = self.id;
        self.report(ContainerEvent::Done { id, succeeded }).await;
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether an init container is a native sidecar (`restartPolicy: Always`, Kubernetes 1.29+).
pub(super) fn is_sidecar(spec: &Value) -> bool {
    spec.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}
