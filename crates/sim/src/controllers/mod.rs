//! The controllers of the cluster: Job controller, scheduler, kubelet, garbage collector (with
//! the namespace lifecycle), and the Spark operators and JobSet controller of the installed CRD
//! bundles. Each reacts to
//! store changes through a subscription that never misses one (`Store::follow`), never by polling,
//! and queues delayed work (backoffs, deadlines, TTLs) on timers.

pub mod events;
pub mod gc;
pub mod job;
pub mod jobset;
pub mod kubelet;
pub mod scheduler;
pub mod spark;

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::state::State;

/// A de-duplicating work queue: a key queued twice before it is taken is handled once.
pub struct WorkQueue<K> {
    inner: Mutex<(VecDeque<K>, HashSet<K>)>,
    notify: Notify,
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue.
    pub fn new() -> Arc<Self> {
        Arc::new(WorkQueue {
            inner: Mutex::new((VecDeque::new(), HashSet::new())),
            notify: Notify::new(),
        })
    }

    /// Queues a key.
    pub fn add(&self, key: K) {
        let mut inner = self.inner.lock();
        if inner.1.insert(key.clone()) {
            inner.0.push_back(key);
            drop(inner);
            self.notify.notify_one();
        }
    }

    /// Queues a key after a delay.
    pub fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// The next key.
    pub async fn next(&self) -> K {
        loop {
            let notified = self.notify.notified();
            {
                let mut inner = self.inner.lock();
                if let Some(key) = inner.0.pop_front() {
                    inner.1.remove(&key);
                    if !inner.0.is_empty() {
                        self.notify.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }
}

/// Starts every controller; they stop when `shutdown` turns true.
pub fn start(
    state: &Arc<State>,
    shutdown: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    spark::install(state);
    vec![
        tokio::spawn(job::run(state.clone(), shutdown.clone())),
        tokio::spawn(scheduler::run(state.clone(), shutdown.clone())),
        tokio::spawn(kubelet::run(state.clone(), shutdown.clone())),
        tokio::spawn(gc::run(state.clone(), shutdown.clone())),
        tokio::spawn(spark::run(state.clone(), shutdown.clone())),
        tokio::spawn(jobset::run(state.clone(), shutdown.clone())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queue_deduplicates_and_delays() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.next().await, "a");
        assert_eq!(q.next().await, "b");
        q.add_after("c", Duration::from_millis(5));
        assert_eq!(q.next().await, "c");
    }
}
