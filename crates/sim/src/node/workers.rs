//! The kubelet's bookkeeping, kept in the cluster's state: the worker of each pod and what is
//! sent to it, the pods that ended, the nodes that are down, the process groups with a memory
//! limit, and the slots for blocking work on the host.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, watch};

use super::memory::MemoryWatch;

/// The latest view of a pod, sent to its worker.
#[derive(Clone, Debug)]
pub struct PodUpdate {
    /// The pod.
    pub pod: Arc<Value>,
    /// The pod is gone from the store (force deletion).
    pub removed: bool,
}

/// Why the kubelet ends a pod early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disruption {
    /// `status.reason` (`Evicted`, `NodeLost`, `DeadlineExceeded`).
    pub reason: String,
    /// `status.message`.
    pub message: String,
    /// A DisruptionTarget condition (reason, message), if the disruption sets one.
    pub condition: Option<(String, String)>,
    /// Grace period.
    pub grace: Duration,
    /// Stop without reporting anything (the node is gone).
    pub silent: bool,
}

/// The worker of one pod: where its updates and disruptions go, and its node.
pub(crate) struct Worker {
    pub(crate) updates: watch::Sender<PodUpdate>,
    pub(crate) disruptions: mpsc::Sender<Disruption>,
    pub(crate) node: String,
}

/// How many blocking host operations (directories, files, process starts) run at once.
const HOST_WORKERS: usize = 8;

/// The kubelet's bookkeeping: one worker per pod, and the nodes that are down.
pub struct Kubelet {
    pub(crate) workers: Mutex<HashMap<String, Worker>>,
    /// Pods whose worker has ended (by uid): a change of the pod that arrives late (from
    /// before its end) must not start it again.
    pub(crate) finished: Mutex<HashSet<String>>,
    down: Mutex<HashSet<String>>,
    /// The containers with a memory limit.
    pub memory: MemoryWatch,
    host: Semaphore,
}

impl Default for Kubelet {
    fn default() -> Self {
        Kubelet {
            workers: Mutex::default(),
            finished: Mutex::default(),
            down: Mutex::default(),
            memory: MemoryWatch::default(),
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

    pub(crate) fn is_down(&self, node: &str) -> bool {
        self.down.lock().contains(node)
    }
}
