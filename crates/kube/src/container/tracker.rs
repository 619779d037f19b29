//! One watch of managed Jobs, one of their pods and one of the Job controller's refusals to
//! create pods per namespace, shared by every query.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use kubeferry_core::container::{JobView, PodView};
use kubeferry_core::marks::MANAGED_SELECTOR;
use tokio::sync::broadcast;

use crate::cluster::{Cluster, Op};
use crate::error::{Error, Result};
use crate::kind::Watches;
use crate::tracker::{Departure, Entry, Reflector, ReflectorSettings, WatchHealth};

/// The label the Job controller puts on a Job's pods (Kubernetes 1.27+), and its older twin.
const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];

/// The events that say the Job controller was refused a pod (by admission, a quota): the
/// Job's status does not show them.
const REFUSAL_EVENTS: &str =
    "involvedObject.apiVersion=batch/v1,involvedObject.kind=Job,reason=FailedCreate";

/// The watches of one namespace.
pub struct NamespaceWatch {
    /// Managed Jobs, by name.
    pub jobs: Reflector<JobView>,
    /// Their pods, by name, indexed by their Job's name.
    pub pods: Reflector<PodView>,
    /// The Job controller's `FailedCreate` events, by name, indexed by their Job's name. Only
    /// enriches messages: a refused watch of events (a Role without them) changes nothing else.
    pub refusals: Reflector<RefusalView>,
}

/// A `FailedCreate` event of a Job: the Job controller was refused a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusalView {
    /// The event's name (ties between refusals of the same second go to the later name).
    pub name: String,
    /// The uid of the Job the event is about.
    pub job_uid: Option<String>,
    /// When the refusal last happened.
    pub at: Option<Timestamp>,
    /// The Job controller's message (`Error creating: pods "x-" is forbidden: ...`).
    pub message: String,
}

impl From<&Event> for RefusalView {
    fn from(event: &Event) -> Self {
        let at = event
            .series
            .as_ref()
            .and_then(|series| series.last_observed_time.as_ref().map(|t| t.0))
            .or(event.last_timestamp.as_ref().map(|t| t.0))
            .or(event.event_time.as_ref().map(|t| t.0))
            .or(event.first_timestamp.as_ref().map(|t| t.0))
            .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0));
        RefusalView {
            name: event.metadata.name.clone().unwrap_or_default(),
            job_uid: event.involved_object.uid.clone(),
            at,
            message: event.message.clone().unwrap_or_default(),
        }
    }
}

/// The newest refusal of the Job with `uid` that is still news: not before `not_before` (the
/// newest attempt's pod was created after older ones, so they are over), not older than
/// `freshness`, with a message. Events of another Job of the same name (another uid) do not
/// count.
pub fn current_refusal(
    refusals: &[RefusalView],
    uid: &str,
    not_before: Option<Timestamp>,
    now: Timestamp,
    freshness: Duration,
) -> Option<String> {
    let fresh_after = jiff::SignedDuration::try_from(freshness)
        .ok()
        .and_then(|window| now.checked_sub(window).ok());
    refusals
        .iter()
        .filter(|r| uid.is_empty() || r.job_uid.as_deref().is_none_or(|u| u == uid))
        .filter(|r| !r.message.is_empty())
        .filter(|r| match (r.at, not_before, fresh_after) {
            (Some(at), since, fresh) => {
                since.is_none_or(|since| at >= since) && fresh.is_none_or(|fresh| at >= fresh)
            }
            (None, _, _) => false,
        })
        .max_by(|a, b| (a.at, &a.name).cmp(&(b.at, &b.name)))
        .map(|r| r.message.clone())
}

impl NamespaceWatch {
    /// Waits until the watches of Jobs and pods have listed, at most `timeout` (the refusals
    /// only add to messages: a status does not wait for them).
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let (jobs, pods) = tokio::join!(
            self.jobs.wait_synced(timeout),
            self.pods.wait_synced(timeout)
        );
        jobs && pods
    }

    /// The pods of one Job: those that exist, and the final states of those deleted lately.
    ///
    /// A deleted pod still tells how its attempt ended: a pod lost with its node, evicted,
    /// or deleted by someone is often gone (the Job controller lifts its finalizer once it
    /// counted it) before the Job's verdict arrives, and without it the verdict's cause
    /// (`NodeLost`, `DeletedExternally`) would be unknown. Pods that merely went missing from a
    /// relist are left out: their last view may be stale.
    pub fn pods_of(&self, job: &str) -> Vec<PodView> {
        self.pods
            .of_job_and_departed(job, |t| t.departure == Departure::Deleted)
    }

    /// The final states of one Job's pods that were deleted lately.
    pub fn departed_pods_of(&self, job: &str) -> Vec<PodView> {
        self.pods
            .tombstones_of_job(job)
            .into_iter()
            .filter(|t| t.departure == Departure::Deleted)
            .map(|t| t.last)
            .collect()
    }

    /// The pods of one Job that exist.
    pub fn live_pods_of(&self, job: &str) -> Vec<PodView> {
        self.pods.of_job(job).into_iter().map(|e| e.view).collect()
    }

    /// The Job controller's refusal to create a pod for the Job `name` with `uid` that is
    /// still news (see [`current_refusal`]).
    pub fn creation_refused(
        &self,
        name: &str,
        uid: &str,
        not_before: Option<Timestamp>,
        now: Timestamp,
        freshness: Duration,
    ) -> Option<String> {
        let refusals: Vec<RefusalView> = self
            .refusals
            .of_job(name)
            .into_iter()
            .map(|entry| entry.view)
            .collect();
        current_refusal(&refusals, uid, not_before, now, freshness)
    }

    /// The Job with the Job controller's refusal to create a pod for it, while it has none and
    /// the refusal is news; `None` when there is nothing to add.
    pub(crate) fn with_refusal(
        &self,
        job: &JobView,
        pods: &[PodView],
        now: Timestamp,
        freshness: Duration,
    ) -> Option<JobView> {
        // The pods the mapping counts as the Job's attempts (an earlier Job of the same name
        // may have left some behind).
        let attempts: Vec<&PodView> = pods.iter().filter(|pod| job.owns(pod)).collect();
        if attempts.iter().any(|pod| pod.deletion_timestamp.is_none()) {
            return None;
        }
        // A refusal from before the newest attempt's pod was created is over.
        let not_before = attempts.iter().filter_map(|pod| pod.created_at).max();
        let refusal = self.creation_refused(&job.name, &job.uid, not_before, now, freshness)?;
        Some(JobView {
            creation_refused: Some(refusal),
            ..job.clone()
        })
    }

    /// Waits, at most `timeout`, until the watch of Jobs has delivered the Job `name`; true
    /// once it has.
    pub(crate) async fn wait_for_job(&self, name: &str, timeout: Duration) -> bool {
        let mut changes = self.jobs.subscribe();
        if self.jobs.get(name).is_some() {
            return true;
        }
        let delivered = async {
            loop {
                match changes.recv().await {
                    Ok(job) if job == name => return true,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if self.jobs.get(name).is_some() {
                            return true;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return false,
                }
            }
        };
        tokio::time::timeout(timeout, delivered)
            .await
            .unwrap_or(false)
            && self.jobs.get(name).is_some()
    }

    /// Whether the watches of Jobs and pods are current (see [`Reflector::is_current`]).
    pub fn is_current(&self) -> bool {
        self.jobs.is_current() && self.pods.is_current()
    }

    /// Fails when the server refuses one of the watches for lack of permission: the cache
    /// would silently go stale (a refused watch after a permitted list) or never fill.
    pub fn check_permitted(&self, namespace: &str) -> Result<()> {
        for (resource, health) in [
            ("jobs.batch", self.jobs.health()),
            ("pods", self.pods.health()),
        ] {
            if let Some(refusal) = health.refused() {
                return Err(Error::Forbidden {
                    verb: refusal.verb,
                    resource: resource.to_string(),
                    namespace: namespace.to_string(),
                    message: refusal.message.clone(),
                });
            }
        }
        Ok(())
    }
}

impl Watches for NamespaceWatch {
    /// Notifications naming the Jobs whose Job, pods or refusals changed.
    fn subscribe(&self) -> Vec<broadcast::Receiver<String>> {
        vec![
            self.jobs.subscribe(),
            self.pods.subscribe(),
            self.refusals.subscribe(),
        ]
    }
    /// The health of every watch, by resource: the Jobs and their pods (every answer needs
    /// them, and they come first), then the refusal events (they only add to messages).
    fn health(&self) -> Vec<(String, WatchHealth)> {
        vec![
            ("jobs.batch".to_string(), self.jobs.health()),
            ("pods".to_string(), self.pods.health()),
            ("events".to_string(), self.refusals.health()),
        ]
    }

    /// Whether a Job of that name is in the cache.
    fn holds(&self, name: &str) -> bool {
        self.jobs.get(name).is_some()
    }

    fn objects_current(&self) -> bool {
        self.jobs.is_current()
    }

    fn deleted(&self, name: &str) -> bool {
        self.jobs.tombstone(name).is_some()
    }

    fn meta(&self, name: &str) -> Option<kubeferry_core::observation::ManagedMeta> {
        self.jobs.get(name).map(|entry| entry.view.meta)
    }

    fn names(&self) -> Vec<String> {
        self.jobs.names()
    }

    async fn wait_synced(&self, timeout: Duration) -> bool {
        NamespaceWatch::wait_synced(self, timeout).await
    }

    /// Nothing is decided from Jobs and pods while their watches catch up: their cache may
    /// lack pods or hold stale ones.
    fn settling(&self) -> bool {
        self.is_current()
    }
}

/// A Job's pods as the API server lists them now, with the final states of deleted ones only
/// `watch` still knows: a pod lost with its node may carry the outcome the Job's verdict names.
pub(crate) async fn listed_pods(
    cluster: &Cluster,
    namespace: &str,
    job: &str,
    watch: Option<&NamespaceWatch>,
) -> Result<Vec<PodView>> {
    let api: Api<Pod> = Api::namespaced(cluster.client().clone(), namespace);
    let params = ListParams::default().labels(&format!("{}={job}", JOB_NAME_LABELS[0]));
    let op = Op::collection("list", "pods", namespace);
    let listed = cluster.call(&op, true, || api.list(&params)).await?;
    let mut pods: Vec<PodView> = listed.items.iter().map(PodView::from).collect();
    if let Some(watch) = watch {
        let departed: Vec<PodView> = watch
            .departed_pods_of(job)
            .into_iter()
            .filter(|gone| !pods.iter().any(|pod| pod.uid == gone.uid))
            .collect();
        pods.extend(departed);
    }
    Ok(pods)
}

impl NamespaceWatch {
    /// Starts the watches of `namespace`.
    pub(crate) fn start(
        cluster: &Cluster,
        namespace: &str,
        settings: &ReflectorSettings,
    ) -> NamespaceWatch {
        let client = cluster.client().clone();
        let config = watcher::Config::default().labels(MANAGED_SELECTOR);
        let jobs = Reflector::spawn(
            Api::<Job>::namespaced(client.clone(), namespace),
            config.clone(),
            settings.clone(),
            |job: &Job| {
                let view = JobView::from(job);
                Some(Entry {
                    name: view.name.clone(),
                    job: view.name.clone(),
                    view,
                })
            },
        );
        let pods = Reflector::spawn(
            Api::<Pod>::namespaced(client.clone(), namespace),
            config,
            settings.clone(),
            |pod: &Pod| {
                let job = job_of_pod(pod)?;
                let view = PodView::from(pod);
                Some(Entry {
                    name: view.name.clone(),
                    job,
                    view,
                })
            },
        );
        let refusals = Reflector::spawn(
            Api::<Event>::namespaced(client, namespace),
            watcher::Config::default().fields(REFUSAL_EVENTS),
            ReflectorSettings {
                // Nothing reads a refusal that is gone, and the permission is optional.
                max_tombstones: 0,
                optional: true,
                ..settings.clone()
            },
            |event: &Event| {
                Some(Entry {
                    name: event.metadata.name.clone()?,
                    job: event.involved_object.name.clone()?,
                    view: RefusalView::from(event),
                })
            },
        );
        NamespaceWatch {
            jobs,
            pods,
            refusals,
        }
    }
}

/// The name of the Job a pod belongs to: its job-name label, else its controller owner.
pub fn job_of_pod(pod: &Pod) -> Option<String> {
    let labels = pod.metadata.labels.as_ref();
    JOB_NAME_LABELS
        .iter()
        .find_map(|label| labels.and_then(|l| l.get(*label)).cloned())
        .or_else(|| {
            pod.metadata
                .owner_references
                .as_ref()?
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == "Job")
                .map(|o| o.name.clone())
        })
}

#[cfg(test)]
mod tests;
