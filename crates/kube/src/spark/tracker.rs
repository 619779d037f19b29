//! Per namespace: one watch of managed SparkApplications per installed operator, and one of
//! their driver pods, shared by every query.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kubeferry_core::marks::MANAGED_SELECTOR;
use kubeferry_core::spark::{
    DRIVER_ROLE, DriverView, SPARK_ROLE_LABEL, SparkAppView, SparkOperator,
};
use tokio::sync::broadcast;

use crate::cluster::Cluster;
use crate::kind::Watches;
use crate::manifest::spark::api_resource;
use crate::tracker::{Departure, Entry, Reflector, ReflectorSettings, WatchHealth, lock};

/// How health reports name the watch of driver pods (a second, narrower watch of pods beside
/// the container jobs' one).
pub const DRIVER_PODS_WATCH: &str = "pods (spark drivers)";

/// The label selector of the driver pods kubeferry's Spark jobs have.
pub fn driver_pods_selector() -> String {
    format!("{MANAGED_SELECTOR},{SPARK_ROLE_LABEL}={DRIVER_ROLE}")
}

/// The name of the SparkApplication a driver pod belongs to, by either operator's label.
pub fn app_of_pod(pod: &Pod) -> Option<String> {
    let labels = pod.metadata.labels.as_ref()?;
    SparkOperator::ALL
        .iter()
        .find_map(|op| labels.get(op.app_name_label()).cloned())
}

/// The watches of one namespace.
pub struct SparkNamespaceWatch {
    cluster: Cluster,
    namespace: String,
    settings: ReflectorSettings,
    apps: Mutex<BTreeMap<SparkOperator, Arc<Reflector<SparkAppView>>>>,
    /// How many operators' applications are watched, for whoever follows them all.
    operators: tokio::sync::watch::Sender<usize>,
    /// The driver pods of managed applications, by name, indexed by their application's name.
    pub drivers: Reflector<DriverView>,
}

impl SparkNamespaceWatch {
    /// The watch of `operator`'s SparkApplications, started if it is not yet.
    pub fn apps_of(&self, operator: SparkOperator) -> Arc<Reflector<SparkAppView>> {
        let mut apps = lock(&self.apps);
        let watched = apps.len();
        let reflector = apps
            .entry(operator)
            .or_insert_with(|| {
                let api: Api<DynamicObject> = Api::namespaced_with(
                    self.cluster.client().clone(),
                    &self.namespace,
                    &api_resource(operator),
                );
                let config = watcher::Config::default().labels(MANAGED_SELECTOR);
                Arc::new(Reflector::spawn(
                    api,
                    config,
                    self.settings.clone(),
                    move |object: &DynamicObject| {
                        let view =
                            SparkAppView::from_parts(operator, &object.metadata, &object.data);
                        Some(Entry {
                            name: view.name.clone(),
                            job: view.name.clone(),
                            view,
                        })
                    },
                ))
            })
            .clone();
        if apps.len() != watched {
            self.operators.send_replace(apps.len());
        }
        reflector
    }

    /// Tells when another operator's applications start being watched (the value: how many
    /// are); ends with the namespace's watches.
    pub(crate) fn operators_changed(&self) -> tokio::sync::watch::Receiver<usize> {
        self.operators.subscribe()
    }

    /// The operators whose SparkApplications are watched, with their watches.
    pub fn watched(&self) -> Vec<(SparkOperator, Arc<Reflector<SparkAppView>>)> {
        lock(&self.apps)
            .iter()
            .map(|(op, apps)| (*op, apps.clone()))
            .collect()
    }

    /// Waits until every application watch has listed, at most `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let watches = self.watched();
        let waits = watches.iter().map(|(_, apps)| apps.wait_synced(timeout));
        futures::future::join_all(waits)
            .await
            .into_iter()
            .all(|synced| synced)
    }

    /// Whether the driver pod watch has listed (now, without waiting).
    pub fn drivers_synced(&self) -> bool {
        self.drivers.health().synced && self.drivers.health().failing.is_none()
    }

    /// The driver pods of the application `app` (of either operator) in the cache, with the
    /// final states of those deleted lately: a driver drained, preempted or lost with its node
    /// is deleted a moment after it was disrupted, and only its final state tells why the
    /// application failed.
    pub fn drivers_of(&self, app: &str) -> Vec<DriverView> {
        self.drivers
            .of_job_and_departed(app, |gone| gone.departure == Departure::Deleted)
    }

    /// The driver pods of the application `app` that exist, as the cache has them (a deleted
    /// pod's log is gone with it).
    pub(crate) fn live_drivers_of(&self, app: &str) -> Vec<DriverView> {
        self.drivers
            .of_job(app)
            .into_iter()
            .map(|e| e.view)
            .collect()
    }

    /// The final states of the application's driver pods deleted lately.
    pub(crate) fn departed_drivers_of(&self, app: &str) -> Vec<DriverView> {
        self.drivers
            .tombstones_of_job(app)
            .into_iter()
            .filter(|gone| gone.departure == Departure::Deleted)
            .map(|gone| gone.last)
            .collect()
    }
}

impl SparkNamespaceWatch {
    /// Starts the watch of `namespace`'s driver pods; the applications' watches start with
    /// [`SparkNamespaceWatch::apps_of`].
    pub(crate) fn start(
        cluster: &Cluster,
        namespace: &str,
        settings: &ReflectorSettings,
    ) -> Arc<SparkNamespaceWatch> {
        let pods: Api<Pod> = Api::namespaced(cluster.client().clone(), namespace);
        let config = watcher::Config::default().labels(&driver_pods_selector());
        let drivers = Reflector::spawn(pods, config, settings.clone(), |pod: &Pod| {
            let app = app_of_pod(pod)?;
            let view = DriverView::from(pod);
            Some(Entry {
                name: view.name.clone(),
                job: app,
                view,
            })
        });
        Arc::new(SparkNamespaceWatch {
            cluster: cluster.clone(),
            namespace: namespace.to_string(),
            settings: settings.clone(),
            apps: Mutex::default(),
            operators: tokio::sync::watch::Sender::new(0),
            drivers,
        })
    }
}

impl Watches for SparkNamespaceWatch {
    /// Notifications naming the applications whose object or driver pods changed.
    fn subscribe(&self) -> Vec<broadcast::Receiver<String>> {
        let mut receivers: Vec<broadcast::Receiver<String>> = self
            .watched()
            .iter()
            .map(|(_, apps)| apps.subscribe())
            .collect();
        receivers.push(self.drivers.subscribe());
        receivers
    }
    /// The health of every watch, by the resource it watches: the driver pods
    /// ([`DRIVER_PODS_WATCH`]), then each operator's SparkApplications (e.g.
    /// `sparkapplications.spark.apache.org`).
    fn health(&self) -> Vec<(String, WatchHealth)> {
        let mut all = vec![(DRIVER_PODS_WATCH.to_string(), self.drivers.health())];
        all.extend(
            self.watched()
                .iter()
                .map(|(op, apps)| (super::resource(*op).to_string(), apps.health())),
        );
        all
    }

    /// Whether an application of that name is in the cache (of any operator).
    fn holds(&self, app: &str) -> bool {
        self.watched()
            .iter()
            .any(|(_, apps)| apps.get(app).is_some())
    }

    /// The watches of every operator's applications.
    fn objects_current(&self) -> bool {
        self.watched().iter().all(|(_, apps)| apps.is_current())
    }

    fn deleted(&self, name: &str) -> bool {
        self.watched()
            .iter()
            .any(|(_, apps)| apps.tombstone(name).is_some())
    }

    fn meta(&self, name: &str) -> Option<kubeferry_core::observation::ManagedMeta> {
        self.watched()
            .iter()
            .find_map(|(_, apps)| apps.get(name))
            .map(|entry| (*entry.view).clone())
    }

    fn names(&self) -> Vec<String> {
        self.watched()
            .iter()
            .flat_map(|(_, apps)| apps.names())
            .collect()
    }

    async fn wait_synced(&self, timeout: Duration) -> bool {
        SparkNamespaceWatch::wait_synced(self, timeout).await
    }

    fn watch_count(&self) -> Option<tokio::sync::watch::Receiver<usize>> {
        Some(self.operators_changed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_pods_belong_to_their_application_by_either_operators_label() {
        let pod = |labels: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "labels": labels}}))
                .expect("a pod")
        };
        let apache = pod(serde_json::json!({"spark.operator/spark-app-name": "a"}));
        let kubeflow = pod(serde_json::json!({"sparkoperator.k8s.io/app-name": "k"}));
        let other = pod(serde_json::json!({"spark-role": "driver"}));
        assert_eq!(app_of_pod(&apache).as_deref(), Some("a"));
        assert_eq!(app_of_pod(&kubeflow).as_deref(), Some("k"));
        assert_eq!(app_of_pod(&other), None);
        assert_eq!(
            driver_pods_selector(),
            "app.kubernetes.io/managed-by=kubeferry,spark-role=driver"
        );
    }
}
