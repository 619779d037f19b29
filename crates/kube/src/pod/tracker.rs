//! Per namespace: one watch of kubeferry's bare pods ([`BARE_POD_SELECTOR`]), shared by every
//! query. A bare pod is its own job: the watch's entries are keyed by the pod's name.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use kubeferry_core::pod::{BARE_POD_SELECTOR, BarePodView};
use tokio::sync::broadcast;

use crate::cluster::Cluster;
use crate::kind::Watches;
use crate::tracker::{Entry, Reflector, ReflectorSettings, WatchHealth};

/// How health reports name the watch of bare pods.
pub const BARE_PODS_WATCH: &str = "pods (bare)";

/// The watch of one namespace's bare pods.
pub struct PodNamespaceWatch {
    /// The bare pods, by name.
    pub pods: Reflector<BarePodView>,
}

impl PodNamespaceWatch {
    /// Starts the watch of `namespace`.
    pub(crate) fn start(
        cluster: &Cluster,
        namespace: &str,
        settings: &ReflectorSettings,
    ) -> PodNamespaceWatch {
        let pods: Api<Pod> = Api::namespaced(cluster.client().clone(), namespace);
        let pods = Reflector::spawn(
            pods,
            watcher::Config::default().labels(BARE_POD_SELECTOR),
            settings.clone(),
            |pod: &Pod| {
                let view = BarePodView::from(pod);
                Some(Entry {
                    name: view.name.clone(),
                    job: view.name.clone(),
                    view,
                })
            },
        );
        PodNamespaceWatch { pods }
    }

    /// Waits until the watch has listed, at most `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        self.pods.wait_synced(timeout).await
    }
}

impl Watches for PodNamespaceWatch {
    fn subscribe(&self) -> Vec<broadcast::Receiver<String>> {
        vec![self.pods.subscribe()]
    }

    fn health(&self) -> Vec<(String, WatchHealth)> {
        vec![(BARE_PODS_WATCH.to_string(), self.pods.health())]
    }

    fn holds(&self, name: &str) -> bool {
        self.pods.get(name).is_some()
    }

    fn objects_current(&self) -> bool {
        self.pods.is_current()
    }

    fn deleted(&self, name: &str) -> bool {
        self.pods.tombstone(name).is_some()
    }

    fn meta(&self, name: &str) -> Option<kubeferry_core::observation::ManagedMeta> {
        self.pods.get(name).map(|entry| (*entry.view).clone())
    }

    fn names(&self) -> Vec<String> {
        self.pods.names()
    }

    async fn wait_synced(&self, timeout: Duration) -> bool {
        PodNamespaceWatch::wait_synced(self, timeout).await
    }
}
