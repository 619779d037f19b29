//! The kubelet of every simulated node: runs the containers of the pods bound to its nodes as
//! local processes (see [`pod`] and [`container`]) and applies disruptions (eviction, node loss).
//!
//! A container without a `command` runs the entrypoint configured for its image repository in
//! `SimConfig::image_entrypoints` followed by its `args`; an image without one runs the `args`
//! as the command; with no `args` either, the container exits 0 at once with no output.

pub mod container;
pub mod env;
pub mod image;
pub mod logs;
pub mod memory;
pub mod pod;
pub mod process;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};

use self::pod::{Disruption, PodUpdate, PodWorker};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, meta};

struct Worker {
    updates: watch::Sender<PodUpdate>,
    disruptions: mpsc::Sender<Disruption>,
    node: String,
}

/// The kubelet's bookkeeping: one worker per pod, and the nodes that are down.
#[derive(Default)]
pub struct Kubelet {
    workers: Mutex<HashMap<String, Worker>>,
    down: Mutex<HashSet<String>>,
    /// The containers with a memory limit.
    pub memory: memory::MemoryWatch,
}

impl Kubelet {
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

fn sync_all(state: &Arc<State>) {
    let (pods, _) = state.store.list(&GroupResource::new("", "pods"), None);
    let alive: HashSet<String> = pods
        .iter()
        .filter_map(|p| meta::uid(p).map(str::to_string))
        .collect();
    // Pods removed while the kubelet lagged behind the store's changes.
    let gone: Vec<String> = state
        .kubelet
        .workers
        .lock()
        .keys()
        .filter(|uid| !alive.contains(*uid))
        .cloned()
        .collect();
    for uid in gone {
        if let Some(worker) = state.kubelet.workers.lock().remove(&uid) {
            let last = worker.updates.borrow().pod.clone();
            worker.updates.send_replace(PodUpdate {
                pod: last,
                removed: true,
            });
        }
        state.logs.remove_pod(&uid);
    }
    for pod in pods {
        handle_pod(state, &pod, false);
    }
}

/// Runs the kubelet until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let pods = GroupResource::new("", "pods");
    let mut rx = state.store.subscribe();
    tokio::spawn(memory::run(state.clone(), shutdown.clone()));
    sync_all(&state);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            received = rx.recv() => match received {
                Ok(event) if event.key.resource == pods => {
                    handle_pod(&state, &event.object, event.event_type == EventType::Deleted);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => sync_all(&state),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
