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
pub mod pod;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use self::pod::PodWorker;
use crate::node::memory;
pub use crate::node::workers::Kubelet;
use crate::node::workers::{PodUpdate, Worker};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, meta};

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
    tokio::spawn(enforce_memory_limits(state.clone(), shutdown.clone()));
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

/// Enforces memory limits until shutdown (see [`memory`]).
async fn enforce_memory_limits(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let watch = &state.kubelet.memory;
    let interval = state.config.timings.oom_poll_interval;
    loop {
        let added = watch.added().notified();
        let groups = watch.groups();
        if groups.is_empty() {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = added => continue,
            }
        }
        match state
            .kubelet
            .on_host(move || memory::groups_usage(&groups))
            .await
        {
            Ok(usage) => watch.enforce(&usage),
            Err(error) => tracing::warn!(message = "cannot read memory usage", %error),
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
