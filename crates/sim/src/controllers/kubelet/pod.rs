//! One pod on a node: runs its init containers in order (a native sidecar, `restartPolicy:
//! Always`, lets the next one start once it runs, keeps running, is restarted when it exits and
//! is stopped after the regular containers) and then its containers together, keeps its status
//! (phase decided by the regular containers, conditions, container states) up to date, and
//! stops it on deletion, on its active deadline, on eviction or when its node is lost.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::container::{ContainerEvent, ContainerId, ContainerTask, is_sidecar};
pub use crate::node::workers::{Disruption, PodUpdate};
use crate::ops::{self, DeleteOptions};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{ObjectKey, meta};

struct ContainerState {
    name: String,
    image: String,
    state: Value,
    last_state: Value,
    restart_count: i64,
    ready: bool,
    started: bool,
    image_id: String,
    container_id: Option<String>,
    done: bool,
    succeeded: bool,
    ever_started: bool,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    sidecar: bool,
}

impl ContainerState {
    /// A container not started yet: waiting with `PodInitializing` in a pod with init
    /// containers, else `ContainerCreating` (the kubelet's default waiting states).
    fn new(spec: &Value, init: bool, pod_has_inits: bool) -> Self {
        let reason = if pod_has_inits {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        ContainerState {
            name: spec
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            image: spec
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            state: json!({"waiting": {"reason": reason}}),
            last_state: json!({}),
            restart_count: 0,
            ready: false,
            started: false,
            image_id: String::new(),
            container_id: None,
            done: false,
            succeeded: false,
            ever_started: false,
            sidecar: init && is_sidecar(spec),
        }
    }

    fn to_json(&self) -> Value {
        let mut s = json!({
            "name": self.name,
            "image": self.image,
            "imageID": self.image_id,
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started,
            "state": self.state,
            "lastState": self.last_state,
        });
        if let Some(id) = &self.container_id {
            s["containerID"] = json!(id);
        }
        s
    }

    fn terminated_exit(&self) -> Option<i64> {
        self.state
            .pointer("/terminated/exitCode")
            .and_then(Value::as_i64)
    }
}

/// A pod worker.
pub struct PodWorker {
    pub(super) state: Arc<State>,
    pub(super) pod: Arc<Value>,
    pub(super) node: String,
    pub(super) updates: watch::Receiver<PodUpdate>,
    pub(super) disruptions: mpsc::Receiver<Disruption>,
}

fn condition(
    kind: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    since: &str,
) -> Value {
    let mut c = json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": since});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

struct Status {
    inits: Vec<ContainerState>,
    mains: Vec<ContainerState>,
    pod_ip: String,
    host_ip: String,
    start_time: String,
    disruption: Option<Disruption>,
    final_phase: Option<&'static str>,
    /// The regular containers have been started: every init container completed and every
    /// sidecar started (the Initialized condition stays true from then on).
    initialized: bool,
    transitions: HashMap<&'static str, (bool, String)>,
}

impl Status {
    fn get(&mut self, id: ContainerId) -> Option<&mut ContainerState> {
        if id.init {
            self.inits.get_mut(id.index)
        } else {
            self.mains.get_mut(id.index)
        }
    }

    fn apply(&mut self, event: &ContainerEvent) {
        match event {
            ContainerEvent::Waiting {
                id,
                reason,
                message,
            } => {
                if let Some(c) = self.get(*id) {
                    if c.state.get("terminated").is_some() {
                        c.last_state = c.state.clone();
                    }
                    let mut w = json!({"reason": reason});
                    if let Some(m) = message {
                        w["message"] = json!(m);
                    }
                    c.state = json!({"waiting": w});
                    c.ready = false;
                    c.started = false;
                }
            }
            ContainerEvent::Running {
                id,
                started_at,
                container_id,
                image_id,
            } => {
                let init = id.init;
                if let Some(c) = self.get(*id) {
                    if c.ever_started {
                        c.restart_count += 1;
                        if c.state.get("terminated").is_some() {
                            c.last_state = c.state.clone();
                        }
                    }
                    c.ever_started = true;
                    c.state = json!({"running": {"startedAt": meta::format_time(*started_at)}});
                    // Without a readiness probe a sidecar is ready once it runs.
                    c.ready = !init || c.sidecar;
                    c.started = true;
                    c.container_id = Some(container_id.clone());
                    c.image_id = image_id.clone();
                }
            }
            ContainerEvent::Terminated {
                id,
                exit_code,
                signal,
                reason,
                message,
                started_at,
                finished_at,
                container_id,
            } => {
                if let Some(c) = self.get(*id) {
                    let mut t = json!({
                        "exitCode": exit_code,
                        "reason": reason,
                        "finishedAt": meta::format_time(*finished_at),
                        "containerID": container_id,
                    });
                    if let Some(s) = started_at {
                        t["startedAt"] = json!(meta::format_time(*s));
                    }
                    if let Some(m) = message {
                        t["message"] = json!(m);
                    }
                    if let Some(sig) = signal {
                        t["signal"] = json!(sig);
                    }
                    c.state = json!({"terminated": t});
                    c.ready = false;
                    c.started = false;
                }
            }
            ContainerEvent::Done { id, succeeded } => {
                if let Some(c) = self.get(*id) {
                    c.done = true;
                    c.succeeded = *succeeded;
                }
            }
        }
    }

    fn transition(&mut self, kind: &'static str, ok: bool) -> String {
        let now = meta::now();
        match self.transitions.get(kind) {
            Some((was, since)) if *was == ok => since.clone(),
            _ => {
                self.transitions.insert(kind, (ok, now.clone()));
                now
            }
        }
    }

    fn phase(&self) -> &'static str {
        if let Some(p) = self.final_phase {
            return p;
        }
        if self.initialized && self.mains.iter().any(|c| c.ever_started) {
            "Running"
        } else {
            "Pending"
        }
    }

    fn render(&mut self) -> Value {
        let phase = self.phase();
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let init_pending: Vec<String> = self
            .inits
            .iter()
            .filter(|c| !((c.done && c.succeeded) || (c.sidecar && c.started)))
            .map(|c| c.name.clone())
            .collect();
        let initialized = self.initialized || init_pending.is_empty();
        // Sidecars count for the pod's readiness, before the regular containers.
        let unready: Vec<String> = self
            .inits
            .iter()
            .filter(|c| c.sidecar)
            .chain(self.mains.iter())
            .filter(|c| !c.ready)
            .map(|c| c.name.clone())
            .collect();
        let ready = unready.is_empty() && !terminal;
        let sandbox = !terminal;
        let t_sandbox = self.transition("PodReadyToStartContainers", sandbox);
        let t_init = self.transition("Initialized", initialized);
        let t_ready = self.transition("Ready", ready);
        let t_cready = self.transition("ContainersReady", ready);
        let not_ready = |what: &str, list: &[String]| -> (Option<&'static str>, Option<String>) {
            if phase == "Succeeded" {
                (Some("PodCompleted"), None)
            } else {
                (
                    Some(if what == "init" {
                        "ContainersNotInitialized"
                    } else {
                        "ContainersNotReady"
                    }),
                    Some(format!(
                        "containers with {} status: [{}]",
                        if what == "init" {
                            "incomplete"
                        } else {
                            "unready"
                        },
                        list.join(" ")
                    )),
                )
            }
        };
        let mut conditions = vec![condition(
            "PodReadyToStartContainers",
            sandbox,
            None,
            None,
            &t_sandbox,
        )];
        if initialized {
            let reason = if phase == "Succeeded" && !self.inits.is_empty() {
                Some("PodCompleted")
            } else {
                None
            };
            conditions.push(condition("Initialized", true, reason, None, &t_init));
        } else {
            let (r, m) = not_ready("init", &init_pending);
            conditions.push(condition("Initialized", false, r, m, &t_init));
        }
        if ready {
            conditions.push(condition("Ready", true, None, None, &t_ready));
            conditions.push(condition("ContainersReady", true, None, None, &t_cready));
        } else {
            let (r, m) = not_ready("main", &unready);
            conditions.push(condition("Ready", false, r, m.clone(), &t_ready));
            conditions.push(condition("ContainersReady", false, r, m, &t_cready));
        }
        let mut status = json!({
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
            "startTime": self.start_time,
            "containerStatuses": self.mains.iter().map(ContainerState::to_json).collect::<Vec<_>>(),
        });
        if !self.inits.is_empty() {
            status["initContainerStatuses"] = json!(
                self.inits
                    .iter()
                    .map(ContainerState::to_json)
                    .collect::<Vec<_>>()
            );
        }
        // The kubelet holds a disruption's reason and message back, with the terminal phase,
        // until no container can run any more (kubelet status manager, `mergePodStatus`).
        if terminal && let Some(d) = &self.disruption {
            status["reason"] = json!(d.reason);
            status["message"] = json!(d.message);
        }
        status
    }
}

/// Merges the kubelet's status into the pod's, keeping what others own (PodScheduled,
/// DisruptionTarget, qosClass).
fn merge_status(pod: &mut Value, ours: &Value, disruption_condition: Option<&Value>) {
    let mut conditions: Vec<Value> = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let our_conditions = ours
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in our_conditions.iter().chain(disruption_condition) {
        let kind = c.get("type").cloned();
        match conditions
            .iter_mut()
            .find(|x| x.get("type") == kind.as_ref())
        {
            Some(existing) => {
                if existing.get("status") != c.get("status")
                    || existing.get("reason") != c.get("reason")
                    || existing.get("message") != c.get("message")
                {
                    *existing = c.clone();
                }
            }
            None => conditions.push(c.clone()),
        }
    }
    let qos = pod.pointer("/status/qosClass").cloned();
    let nominated = pod.pointer("/status/nominatedNodeName").cloned();
    let mut status = ours.clone();
    status["conditions"] = json!(conditions);
    if let Some(q) = qos {
        status["qosClass"] = q;
    }
    if let Some(n) = nominated {
        status["nominatedNodeName"] = n;
    }
    pod["status"] = status;
}

/// Where a pod's containers report and what stops them.
struct Channels<'a> {
    workdir: &'a Path,
    events: &'a mpsc::Sender<ContainerEvent>,
    stop: &'a watch::Sender<Option<Duration>>,
    sidecar_stops: &'a SidecarStops,
}

/// Stops a pod's sidecars after its regular containers: one at a time, the last one first
/// (each once the one after it has exited), all within one grace period.
struct SidecarStops {
    /// One per init container (used for the sidecars only).
    senders: Vec<watch::Sender<Option<Duration>>>,
    /// When the grace period of the sidecars ends, once they are being stopped.
    until: parking_lot::Mutex<Option<tokio::time::Instant>>,
}

impl SidecarStops {
    /// Starts stopping the sidecars (of those started, the first `started`), with `grace`.
    fn begin(&self, grace: Duration, status: &Status, started: usize) {
        let until = tokio::time::Instant::now() + grace;
        {
            let mut current = self.until.lock();
            if current.is_none_or(|u| until < u) {
                *current = Some(until);
            }
        }
        self.next(status, started);
    }

    /// Signals the last sidecar still running, unless it has been signalled already.
    fn next(&self, status: &Status, started: usize) {
        let Some(until) = *self.until.lock() else {
            return;
        };
        let last = status
            .inits
            .iter()
            .enumerate()
            .take(started)
            .rev()
            .find(|(_, c)| c.sidecar && !c.done);
        if let Some((index, _)) = last
            && self.senders[index].borrow().is_none()
        {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            self.senders[index].send_replace(Some(left));
        }
    }

    /// Stops every sidecar at once (the pod is gone).
    fn kill_all(&self) {
        for sender in &self.senders {
            sender.send_replace(Some(Duration::ZERO));
        }
    }
}

/// How far a pod's start-up order has come.
struct Startup<'a> {
    inits: &'a [Value],
    mains: &'a [Value],
    /// The next init container to start.
    next_init: usize,
}

impl PodWorker {
    fn key(&self) -> ObjectKey {
        ObjectKey::new(
            GroupResource::new("", "pods"),
            meta::namespace(&self.pod),
            meta::name(&self.pod),
        )
    }

    fn write(&self, status: &mut Status) -> bool {
        // The kubelet of a lost node posts nothing more: what its pods did is the control
        // plane's to say (NodeLost), not a late report of a process the node went down with.
        if self.state.kubelet.is_down(&self.node) {
            return false;
        }
        let ours = status.render();
        // Like the reason, the DisruptionTarget condition waits for the terminal phase.
        let terminal = status.final_phase.is_some();
        let disruption_condition = status.disruption.as_ref().filter(|_| terminal).and_then(|d| {
            d.condition.as_ref().map(|(reason, message)| {
                json!({"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message, "lastProbeTime": null, "lastTransitionTime": meta::now()})
            })
        });
        ops::mutate(&self.state, &self.key(), |pod| {
            if pod.pointer("/metadata/uid") != self.pod.pointer("/metadata/uid") {
                return false;
            }
            // Asked again under the store's lock: a node lost since the question above has
            // had its pods failed by the control plane already.
            if self.state.kubelet.is_down(&self.node) {
                return false;
            }
            // A pod in a terminal phase stays there: the API server refuses the way back, and
            // the kubelet never moves a pod from one terminal phase to the other ("illegal
            // phase transition"). A pod the control plane failed meanwhile is reported neither
            // running again nor succeeded.
            let stored = pod.pointer("/status/phase").and_then(Value::as_str);
            if matches!(stored, Some("Succeeded" | "Failed")) && stored != status.final_phase {
                return false;
            }
            merge_status(pod, &ours, disruption_condition.as_ref());
            true
        })
        .is_ok()
    }

    fn grace_of(&self, pod: &Value) -> Duration {
        let seconds = pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0) as u64;
        Duration::from_secs(seconds).min(self.state.config.timings.max_grace_period)
    }

    fn spawn_container(
        &self,
        id: ContainerId,
        spec: Value,
        workdir: &Path,
        events: &mpsc::Sender<ContainerEvent>,
        stop: &watch::Sender<Option<Duration>>,
    ) {
        let pod = self
            .state
            .store
            .get(&self.key())
            .unwrap_or_else(|| self.pod.clone());
        let task = ContainerTask {
            state: self.state.clone(),
            pod,
            spec,
            id,
            restart_policy: self
                .pod
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("Always")
                .to_string(),
            node: self.node.clone(),
            workdir: workdir.to_path_buf(),
            events: events.clone(),
            stop: stop.subscribe(),
        };
        tokio::spawn(task.run());
    }

    /// Starts what comes next in the pod's start-up order: the next init container (the one
    /// after a sidecar starts once the sidecar runs, the one after a regular init container
    /// once it has completed), or, when none is left, every regular container. Returns how
    /// many containers it started.
    fn advance(&self, startup: &mut Startup, status: &mut Status, channels: &Channels) -> usize {
        if let Some(spec) = startup.inits.get(startup.next_init) {
            let stop = if is_sidecar(spec) {
                &channels.sidecar_stops.senders[startup.next_init]
            } else {
                channels.stop
            };
            let id = ContainerId {
                init: true,
                index: startup.next_init,
            };
            self.spawn_container(id, spec.clone(), channels.workdir, channels.events, stop);
            startup.next_init += 1;
            return 1;
        }
        if status.initialized {
            return 0;
        }
        status.initialized = true;
        for (index, spec) in startup.mains.iter().enumerate() {
            let id = ContainerId { init: false, index };
            self.spawn_container(
                id,
                spec.clone(),
                channels.workdir,
                channels.events,
                channels.stop,
            );
        }
        startup.mains.len()
    }

    /// Runs the pod to its end.
    pub async fn run(mut self) {
        let key = self.key();
        let specs = |field: &str| -> Vec<Value> {
            self.pod
                .pointer(&format!("/spec/{field}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let init_specs = specs("initContainers");
        let main_specs = specs("containers");
        if meta::is_deleting(&self.pod) {
            self.finish_deletion(&key).await;
            return;
        }
        let host_ip = self
            .state
            .store
            .get(&ObjectKey::new(
                GroupResource::new("", "nodes"),
                "",
                &self.node,
            ))
            .and_then(|n| {
                n.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|x| x.get("type").and_then(Value::as_str) == Some("InternalIP"))
                            .cloned()
                    })
                    .and_then(|a| a.get("address").and_then(Value::as_str).map(str::to_string))
            })
            .unwrap_or_else(|| "10.0.0.2".to_string());
        let mut status = Status {
            inits: init_specs
                .iter()
                .map(|s| ContainerState::new(s, true, true))
                .collect(),
            mains: main_specs
                .iter()
                .map(|s| ContainerState::new(s, false, !init_specs.is_empty()))
                .collect(),
            pod_ip: self.state.allocate_pod_ip(),
            host_ip,
            start_time: meta::now(),
            disruption: None,
            final_phase: None,
            transitions: HashMap::new(),
            initialized: false,
        };
        let uid = meta::uid(&self.pod).unwrap_or("").to_string();
        let workdir = self.state.pods_dir.join(&uid);
        let dir = workdir.clone();
        let created = self
            .state
            .kubelet
            .on_host(move || std::fs::create_dir_all(dir))
            .await
            .and_then(|r| r);
        if let Err(error) = created {
            tracing::warn!(message = "cannot create a pod working directory", path = %workdir.display(), %error);
        }
        if !self.write(&mut status) {
            return;
        }
        let (events_tx, mut events_rx) = mpsc::channel::<ContainerEvent>(64);
        // Sidecars stop on their own signals: after the regular containers have exited.
        let (stop_tx, _) = watch::channel::<Option<Duration>>(None);
        let sidecars = SidecarStops {
            senders: init_specs.iter().map(|_| watch::channel(None).0).collect(),
            until: parking_lot::Mutex::new(None),
        };
        let channels = Channels {
            workdir: &workdir,
            events: &events_tx,
            stop: &stop_tx,
            sidecar_stops: &sidecars,
        };
        let mut startup = Startup {
            inits: &init_specs,
            mains: &main_specs,
            next_init: 0,
        };
        let mut active = self.advance(&mut startup, &mut status, &channels);
        let mut mains_active = if status.initialized {
            main_specs.len()
        } else {
            0
        };
        let mut stopping = false;
        let mut removed = false;
        let mut init_failed = false;
        let deadline = self
            .pod
            .pointer("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .map(|s| tokio::time::Instant::now() + Duration::from_secs(s.max(0) as u64));
        // Stops the regular containers with a grace period, and the sidecars too when no
        // regular container runs (else they stop once the last one has exited).
        let stop_all = |grace: Duration, mains_active: usize, status: &Status, started: usize| {
            stop_tx.send_replace(Some(grace));
            if grace.is_zero() {
                sidecars.kill_all();
            } else if mains_active == 0 {
                sidecars.begin(grace, status, started);
            }
        };
        loop {
            tokio::select! {
                Some(event) = events_rx.recv() => {
                    // Every report already waiting goes into one status write, as the
                    // kubelet's status manager coalesces updates.
                    let mut next = Some(event);
                    while let Some(event) = next.take() {
                        status.apply(&event);
                        match event {
                            ContainerEvent::Running { id, .. }
                                if id.init
                                    && status.inits.get(id.index).is_some_and(|c| c.sidecar)
                                    && id.index + 1 == startup.next_init
                                    && !status.initialized
                                    && !stopping =>
                            {
                                // A sidecar that runs lets the next container start.
                                active += self.advance(&mut startup, &mut status, &channels);
                                if status.initialized {
                                    mains_active = main_specs.len();
                                }
                            }
                            ContainerEvent::Done { id, succeeded } => {
                                active = active.saturating_sub(1);
                                let sidecar = id.init
                                    && status.inits.get(id.index).is_some_and(|c| c.sidecar);
                                if sidecar {
                                    sidecars.next(&status, startup.next_init);
                                } else if !id.init {
                                    mains_active = mains_active.saturating_sub(1);
                                    if mains_active == 0 {
                                        let grace = stop_tx
                                            .borrow()
                                            .unwrap_or_else(|| self.grace_of(&self.pod));
                                        sidecars.begin(grace, &status, startup.next_init);
                                    }
                                } else if !stopping {
                                    if succeeded {
                                        active +=
                                            self.advance(&mut startup, &mut status, &channels);
                                        if status.initialized {
                                            mains_active = main_specs.len();
                                        }
                                    } else {
                                        // The pod cannot start: its sidecars stop too.
                                        init_failed = true;
                                        sidecars.begin(
                                            self.grace_of(&self.pod),
                                            &status,
                                            startup.next_init,
                                        );
                                    }
                                }
                            }
                            _ => {}
                        }
                        next = events_rx.try_recv().ok();
                    }
                    if active == 0 {
                        break;
                    }
                    if !removed && !self.write(&mut status) {
                        // The pod is gone: stop everything at once.
                        removed = true;
                        stopping = true;
                        stop_all(Duration::ZERO, 0, &status, startup.next_init);
                    }
                }
                changed = self.updates.changed() => {
                    let update = if changed.is_ok() { Some(self.updates.borrow().clone()) } else { None };
                    match update {
                        None => {
                            removed = true;
                            stopping = true;
                            stop_all(Duration::ZERO, 0, &status, startup.next_init);
                        }
                        Some(u) if u.removed => {
                            removed = true;
                            stopping = true;
                            stop_all(Duration::ZERO, 0, &status, startup.next_init);
                        }
                        Some(u) => {
                            if meta::is_deleting(&u.pod) {
                                let grace = self.grace_of(&u.pod);
                                let shorter = stop_tx.borrow().is_none_or(|g| grace < g);
                                stopping = true;
                                if shorter {
                                    stop_all(grace, mains_active, &status, startup.next_init);
                                }
                            }
                            self.pod = u.pod;
                        }
                    }
                }
                Some(d) = self.disruptions.recv() => {
                    stopping = true;
                    if d.silent {
                        removed = true;
                        stop_all(Duration::ZERO, 0, &status, startup.next_init);
                        continue;
                    }
                    let grace = d.grace.min(self.state.config.timings.max_grace_period);
                    status.disruption = Some(d);
                    stop_all(grace, mains_active, &status, startup.next_init);
                    self.write(&mut status);
                }
                _ = sleep_until_opt(deadline), if !stopping => {
                    stopping = true;
                    status.disruption = Some(Disruption {
                        reason: "DeadlineExceeded".into(),
                        message: "Pod was active on the node longer than the specified deadline".into(),
                        condition: None,
                        grace: self.grace_of(&self.pod),
                        silent: false,
                    });
                    stop_all(self.grace_of(&self.pod), mains_active, &status, startup.next_init);
                    self.write(&mut status);
                }
            }
        }
        // The regular containers alone decide the phase: a sidecar's exit never does.
        let all_zero = status.mains.iter().all(|c| c.terminated_exit() == Some(0));
        status.final_phase = Some(if status.disruption.is_some() || init_failed || !all_zero {
            "Failed"
        } else {
            "Succeeded"
        });
        if !removed {
            self.write(&mut status);
            self.state.kubelet.finish(&uid);
            if meta::is_deleting(&self.pod)
                || self
                    .state
                    .store
                    .get(&key)
                    .is_some_and(|p| meta::is_deleting(&p))
            {
                self.finish_deletion(&key).await;
            }
        }
        let dir = workdir.clone();
        let removed = self
            .state
            .kubelet
            .on_host(move || std::fs::remove_dir_all(dir))
            .await
            .and_then(|r| r);
        if let Err(error) = removed
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(message = "cannot remove a pod working directory", path = %workdir.display(), %error);
        }
    }

    async fn finish_deletion(&self, key: &ObjectKey) {
        let Some(rt) = self.state.registry.get(&key.resource) else {
            return;
        };
        let opts = DeleteOptions {
            grace_period: Some(0),
            uid: meta::uid(&self.pod).map(str::to_string),
            propagation: Some(ops::Propagation::Background),
            ..DeleteOptions::default()
        };
        if let Err(error) = ops::delete(&self.state, &rt, key, &opts)
            && error.code != 404
            && error.code != 409
        {
            tracing::warn!(message = "cannot finish a pod's deletion", pod = %key.name, %error);
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
