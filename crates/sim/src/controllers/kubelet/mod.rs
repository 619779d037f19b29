//! The kubelet of every simulated node: runs the containers of the pods bound to its nodes as
//! local processes (see [`pod`] and [`container`]) and applies disruptions (eviction, node loss).
//!
//! A container without a `command` runs the entrypoint configured for its image repository in
//! `SimConfig::image_entrypoints` followed by its `args`; an image without one runs the `args`
//! as the command; with no `args` either, the container exits 0 at once with no output, unless
//! the image is listed in `SimConfig::images_without_command`: then it cannot be created and
//! waits with `CreateContainerError`.

pub mod container;
pub mod env;
pub mod image;
pub mod logs;
pub mod memory;
pub mod pod;
pub mod process;
pub mod termination;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, watch};

use self::pod::{Disruption, PodUpdate, PodWorker};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, meta};

struct Worker {
    updates: watch::Sender<PodUpdate>,
    disruptions: mpsc::Sender<Disruption>,
    node: String,
}

/// How many blocking host operations (directories, files, process starts) run at once.
const HOST_WORKERS: usize = 8;

/// The kubelet's bookkeeping: one worker per pod, and the nodes that are down.
pub struct Kubelet {
    workers: Mutex<HashMap<String, Worker>>,
    /// Pods whose worker has ended (by uid): a change of the pod that arrives late (from
    /// before its end) must not start it again.
    finished: Mutex<HashSet<String>>,
    down: Mutex<HashSet<String>>,
    /// The containers with a memory limit.
    pub memory: memory::MemoryWatch,
    host: Semaphore,
}

impl Default for Kubelet {
    fn default() -> Self {
        Kubelet {
            workers: Mutex::default(),
            finished: Mutex::default(),
            down: Mutex::default(),
            memory: memory::MemoryWatch::default(),
            host: Semaphore::new(HOST_WORKERS),
        }
    }
}

impl Kubelet {
    /// Runs blocking work on the host (directories, files, process starts) on a blocking
    /// thread, a few at a time: a burst of pods must neither block the runtime's worker
    /// threads nor start hundreds of threads.
    pub async fn on_host<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<T> {
        // The semaphore is never closed.
        let _permit = self.host.acquire().await.map_err(std::io::Error::other)?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(std::io::Error::other)
    }

    /// Sends a disruption to the worker of a pod; false when no worker runs it.
    pub fn disrupt(&self, pod_uid: &str, disruption: Disruption) -> bool {
        let sender = self
            .workers
            .lock()
            .get(pod_uid)
            .map(|w| w.disruptions.clone());
        match sender {
            Some(s) => s.try_send(disruption).is_ok(),
            None => false,
        }
    }

    /// Forgets the worker of a pod that has reached its end (its entry would keep an old
    /// version of the pod alive for as long as the pod is stored).
    pub fn finish(&self, pod_uid: &str) {
        let mut workers = self.workers.lock();
        workers.remove(pod_uid);
        self.finished.lock().insert(pod_uid.to_string());
    }

    /// The uids of the pods running on a node.
    pub fn pods_on(&self, node: &str) -> Vec<String> {
        self.workers
            .lock()
            .iter()
            .filter(|(_, w)| w.node == node)
            .map(|(uid, _)| uid.clone())
            .collect()
    }

    /// Marks a node down (its kubelet stops acting) or up again.
    pub fn set_down(&self, node: &str, down: bool) {
        if down {
            self.down.lock().insert(node.to_string());
        } else {
            self.down.lock().remove(node);
        }
    }

    fn is_down(&self, node: &str) -> bool {
        self.down.lock().contains(node)
    }
}

fn handle_pod(state: &Arc<State>, pod: &Arc<Value>, deleted: bool) {
    let Some(uid) = meta::uid(pod).map(str::to_string) else {
        return;
    };
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if deleted {
        state.kubelet.finished.lock().remove(&uid);
        if let Some(worker) = state.kubelet.workers.lock().remove(&uid) {
            worker.updates.send_replace(PodUpdate {
                pod: pod.clone(),
                removed: true,
            });
        }
        state.logs.remove_pod(&uid);
        return;
    }
    if node.is_empty()
        || !state.config.nodes.iter().any(|n| n.name == node)
        || state.kubelet.is_down(node)
    {
        return;
    }
    let mut workers = state.kubelet.workers.lock();
    if state.kubelet.finished.lock().contains(&uid) {
        return;
    }
    if let Some(worker) = workers.get(&uid) {
        worker.updates.send_replace(PodUpdate {
            pod: pod.clone(),
            removed: false,
        });
        return;
    }
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed") {
        return;
    }
    let (updates, updates_rx) = watch::channel(PodUpdate {
        pod: pod.clone(),
        removed: false,
    });
    let (disruptions, disruptions_rx) = mpsc::channel(4);
    workers.insert(
        uid,
        Worker {
            updates,
            disruptions,
            node: node.to_string(),
        },
    );
    let worker = PodWorker {
        state: state.clone(),
        pod: pod.clone(),
        node: node.to_string(),
        updates: updates_rx,
        disruptions: disruptions_rx,
    };
    tokio::spawn(worker.run());
}

/// Runs the kubelet until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let pods = GroupResource::new("", "pods");
    let mut rx = state.store.follow();
    tokio::spawn(memory::run(state.clone(), shutdown.clone()));
    let (current, _) = state.store.list(&pods, None);
    for pod in current {
        handle_pod(&state, &pod, false);
    }
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            received = rx.recv() => match received {
                Some(event) if event.key.resource == pods => {
                    handle_pod(&state, &event.object, event.event_type == EventType::Deleted);
                }
                Some(_) => {}
                None => return,
            }
        }
    }
}
