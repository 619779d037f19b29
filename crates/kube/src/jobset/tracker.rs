//! Per namespace: one watch of managed JobSets, one of their child Jobs and one of those Jobs'
//! pods, shared by every query. The children are found by the JobSet controller's
//! `jobset.sigs.k8s.io/jobset-name` label together with kubeferry's job id label (the manifest
//! puts the job id on them and leaves out the managed-by label that selects container jobs).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kubeferry_core::container::PodView;
use kubeferry_core::jobset::{
    ChildJobView, JOB_INDEX_LABEL, JOBSET_NAME_LABEL, JobSetView, REPLICATED_JOB_NAME_LABEL,
    RESTART_ATTEMPT_LABEL,
};
use kubeferry_core::marks::{JOB_ID_LABEL, MANAGED_SELECTOR};
use tokio::sync::broadcast;

use crate::cluster::Cluster;
use crate::kind::Watches;
use crate::manifest::jobset::api_resource;
use crate::tracker::{Entry, Reflector, ReflectorSettings, WatchHealth};

/// How health reports name the watch of JobSets.
pub const JOBSETS_WATCH: &str = "jobsets.jobset.x-k8s.io";
/// How health reports name the watch of the JobSets' Jobs.
pub const CHILD_JOBS_WATCH: &str = "jobs (jobset children)";
/// How health reports name the watch of the JobSets' pods.
pub const CHILD_PODS_WATCH: &str = "pods (jobset children)";

/// The label selector of the Jobs and pods of kubeferry's JobSets.
pub fn children_selector() -> String {
    format!("{JOB_ID_LABEL},{JOBSET_NAME_LABEL}")
}

/// A pod of a JobSet: its view, and where it sits in the set.
#[derive(Clone, Debug)]
pub struct ChildPod {
    /// The pod, read as any Job's pod is.
    pub view: PodView,
    /// Its replicated job.
    pub replicated_job: String,
    /// Its Job's index within the replicated job.
    pub index: u32,
    /// The JobSet restart it belongs to.
    pub restart_attempt: u32,
    /// Its node, once scheduled.
    pub node: Option<String>,
}

impl ChildPod {
    /// Reads a pod; `None` when it carries no JobSet's name.
    pub fn of(pod: &Pod) -> Option<(String, ChildPod)> {
        let labels = pod.metadata.labels.as_ref()?;
        let jobset = labels.get(JOBSET_NAME_LABEL)?.clone();
        let number = |key: &str| labels.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
        Some((
            jobset,
            ChildPod {
                view: PodView::from(pod),
                replicated_job: labels
                    .get(REPLICATED_JOB_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default(),
                index: number(JOB_INDEX_LABEL),
                restart_attempt: number(RESTART_ATTEMPT_LABEL),
                node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            },
        ))
    }
}

/// The watches of one namespace.
pub struct JobSetNamespaceWatch {
    /// The managed JobSets, by name.
    pub jobsets: Reflector<JobSetView>,
    /// Their Jobs, by name, indexed by their JobSet's name.
    pub jobs: Reflector<ChildJobView>,
    /// Their Jobs' pods, by name, indexed by their JobSet's name.
    pub pods: Reflector<ChildPod>,
}

impl JobSetNamespaceWatch {
    /// Starts the watches of `namespace`.
    pub(crate) fn start(
        cluster: &Cluster,
        namespace: &str,
        settings: &ReflectorSettings,
    ) -> JobSetNamespaceWatch {
        let client = cluster.client().clone();
        let jobsets: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &api_resource());
        let jobsets = Reflector::spawn(
            jobsets,
            watcher::Config::default().labels(MANAGED_SELECTOR),
            settings.clone(),
            |object: &DynamicObject| {
                let view = JobSetView::from_parts(&object.metadata, &object.data);
                Some(Entry {
                    name: view.name.clone(),
                    job: view.name.clone(),
                    view,
                })
            },
        );
        let selector = children_selector();
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        let jobs = Reflector::spawn(
            jobs,
            watcher::Config::default().labels(&selector),
            settings.clone(),
            |job: &Job| {
                let view = ChildJobView::from(job);
                Some(Entry {
                    name: view.job.name.clone(),
                    job: view.jobset.clone()?,
                    view,
                })
            },
        );
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        let pods = Reflector::spawn(
            pods,
            watcher::Config::default().labels(&selector),
            settings.clone(),
            |pod: &Pod| {
                let (jobset, view) = ChildPod::of(pod)?;
                Some(Entry {
                    name: view.view.name.clone(),
                    job: jobset,
                    view,
                })
            },
        );
        JobSetNamespaceWatch {
            jobsets,
            jobs,
            pods,
        }
    }

    /// Waits until every watch has listed, at most `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let (a, b, c) = tokio::join!(
            self.jobsets.wait_synced(timeout),
            self.jobs.wait_synced(timeout),
            self.pods.wait_synced(timeout),
        );
        a && b && c
    }

    /// Whether the watches of the children are current (listed, not failing).
    pub fn children_current(&self) -> bool {
        [self.jobs.health(), self.pods.health()]
            .iter()
            .all(|h| h.synced && h.failing.is_none())
    }

    /// The Jobs and pods of the JobSet `name` in the cache.
    pub fn children_of(&self, name: &str) -> (Vec<ChildJobView>, Vec<ChildPod>) {
        (
            self.jobs.of_job(name).into_iter().map(|e| e.view).collect(),
            self.pods.of_job(name).into_iter().map(|e| e.view).collect(),
        )
    }
}

impl Watches for JobSetNamespaceWatch {
    fn subscribe(&self) -> Vec<broadcast::Receiver<String>> {
        vec![
            self.jobsets.subscribe(),
            self.jobs.subscribe(),
            self.pods.subscribe(),
        ]
    }

    fn health(&self) -> Vec<(String, WatchHealth)> {
        vec![
            (JOBSETS_WATCH.to_string(), self.jobsets.health()),
            (CHILD_JOBS_WATCH.to_string(), self.jobs.health()),
            (CHILD_PODS_WATCH.to_string(), self.pods.health()),
        ]
    }

    /// Whether a JobSet of that name is in the cache.
    fn holds(&self, name: &str) -> bool {
        self.jobsets.get(name).is_some()
    }

    fn objects_current(&self) -> bool {
        self.jobsets.is_current()
    }

    fn deleted(&self, name: &str) -> bool {
        self.jobsets.tombstone(name).is_some()
    }

    fn meta(&self, name: &str) -> Option<kubeferry_core::observation::ManagedMeta> {
        self.jobsets.get(name).map(|entry| (*entry.view).clone())
    }

    fn names(&self) -> Vec<String> {
        self.jobsets.names()
    }

    async fn wait_synced(&self, timeout: Duration) -> bool {
        JobSetNamespaceWatch::wait_synced(self, timeout).await
    }
}
