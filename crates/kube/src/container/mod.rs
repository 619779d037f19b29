//! Container jobs (`batch/v1` Jobs): submit, status, wait, cancel, logs, list and sweep.

pub mod tracker;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubeferry_core::container::{
    JobObservation, JobView, MAIN_CONTAINER, MappingConfig, PodView, container_status,
};
use kubeferry_core::marks::{MANAGED_SELECTOR, OUTCOME_ANNOTATION, object_name};
use kubeferry_core::spec::ContainerJobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use tracing::{debug, info, warn};

use crate::cluster::{Cluster, Op};
use crate::error::{Error, Result};
use crate::logs::{FollowOptions, TailOptions};
use crate::manifest::job_manifest;
use crate::protocol;
use crate::tracker::ReflectorSettings;
use tracker::{ContainerTracker, NamespaceWatch};

const JOBS: &str = "jobs.batch";
const PODS: &str = "pods";

/// Timings of the container job backend; every one is configurable so that tests run fast.
#[derive(Clone, Debug)]
pub struct ContainerSettings {
    /// Grace periods and timeouts of the status mapping.
    pub mapping: MappingConfig,
    /// The watches' settings.
    pub reflector: ReflectorSettings,
    /// How long a status query waits for a namespace's first list before asking the API
    /// server directly.
    pub sync_timeout: Duration,
    /// How often a waiter re-evaluates time-based rules (grace periods) when nothing changes.
    pub recheck_interval: Duration,
    /// A prefix for object names (a DNS label, may be empty).
    pub name_prefix: String,
}

impl Default for ContainerSettings {
    fn default() -> Self {
        Self {
            mapping: MappingConfig::default(),
            reflector: ReflectorSettings::default(),
            sync_timeout: Duration::from_secs(10),
            recheck_interval: Duration::from_secs(1),
            name_prefix: String::new(),
        }
    }
}

/// What a cancel did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job had already ended; its outcome stands.
    AlreadyEnded(ExecutionInfo),
    /// The cancel was requested (now or earlier) and the work is being stopped.
    Requested(ExecutionInfo),
}

impl CancelOutcome {
    /// The job's status after the cancel.
    pub fn info(&self) -> &ExecutionInfo {
        match self {
            CancelOutcome::AlreadyEnded(info) | CancelOutcome::Requested(info) => info,
        }
    }
}

/// One managed job as listed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The execution id.
    pub id: ExecutionId,
    /// The caller's job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When the object was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// The job's status.
    pub status: ExecutionInfo,
}

/// A managed Job whose job id the caller does not know.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    /// The execution id.
    pub id: ExecutionId,
    /// The job id it carries (`None` when it carries none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When it was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// Whether it was deleted.
    pub deleted: bool,
}

/// The container job backend of one cluster.
pub struct ContainerJobs {
    cluster: Cluster,
    settings: ContainerSettings,
    tracker: Arc<ContainerTracker>,
}

impl ContainerJobs {
    /// A backend for `cluster`.
    pub fn new(cluster: Cluster, settings: ContainerSettings) -> Self {
        let tracker = Arc::new(ContainerTracker::new(
            cluster.clone(),
            settings.reflector.clone(),
        ));
        Self {
            cluster,
            settings,
            tracker,
        }
    }

    /// The tracker (for health and metrics).
    pub fn tracker(&self) -> &ContainerTracker {
        &self.tracker
    }

    fn jobs(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.cluster.client().clone(), namespace)
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client().clone(), namespace)
    }

    fn objects(&self, namespace: &str) -> protocol::Objects<Job> {
        protocol::Objects {
            api: self.jobs(namespace),
            resource: JOBS,
            kind: "Job",
            namespace: namespace.to_string(),
        }
    }

    fn id(&self, namespace: &str, name: &str) -> ExecutionId {
        ExecutionId::new(self.cluster.name(), JobKind::Job, namespace, name)
    }

    /// Creates the Job for `spec` under `job_id` in `namespace`, or adopts the one a lost
    /// response already created. Submitting the same job id twice runs the job once.
    pub async fn submit(
        &self,
        spec: &ContainerJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<ExecutionId> {
        let name = object_name(&self.settings.name_prefix, job_id);
        let manifest = job_manifest(spec, job_id, &name, namespace);
        self.objects(namespace)
            .create_or_adopt(&self.cluster, &manifest, job_id, &spec.hash())
            .await?;
        Ok(self.id(namespace, &name))
    }

    /// The job's status, from the watch cache (one GET on a miss).
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        let watch = self.tracker.namespace(&id.namespace);
        let synced = watch.wait_synced(self.settings.sync_timeout).await;
        let (observed, pods) = match self.observe(&watch, id, synced).await? {
            Some(found) => found,
            None => return Err(self.no_such_job(id, &watch)),
        };
        self.evaluate(id, &observed, &pods).await
    }

    /// What is known of a Job: from the cache, else (a Job created a moment ago by another
    /// replica, or a cache not synced yet) straight from the API server.
    async fn observe(
        &self,
        watch: &NamespaceWatch,
        id: &ExecutionId,
        synced: bool,
    ) -> Result<Option<(Observed, Vec<PodView>)>> {
        if let Some(entry) = watch.jobs.get(&id.name) {
            return Ok(Some((
                Observed::Present(entry.view),
                watch.pods_of(&id.name),
            )));
        }
        if let Some(tombstone) = watch.jobs.tombstone(&id.name) {
            let final_state = tombstone.departure == crate::tracker::Departure::Deleted;
            // Its pods are likely gone too (deleted with it): their last states still say
            // when the job started, which a replica that never answered for it must report.
            return Ok(Some((
                Observed::Vanished(tombstone.last, final_state),
                watch.last_pods_of(&id.name),
            )));
        }
        // A miss: a Job created a moment ago (perhaps by another replica) that the watch has not
        // delivered yet, or a watch that has not synced. One GET settles it.
        debug!(message = "cache miss", id = %id, synced);
        self.cluster.check_reachable()?;
        let op = Op::named("get", JOBS, &id.namespace, &id.name);
        let api = self.jobs(&id.namespace);
        let Some(job) = self
            .cluster
            .call(&op, true, || api.get_opt(&id.name))
            .await?
        else {
            return Ok(None);
        };
        let pods = self.list_pods(&id.namespace, &id.name).await?;
        Ok(Some((Observed::Present(JobView::from(&job)), pods)))
    }

    async fn list_pods(&self, namespace: &str, job: &str) -> Result<Vec<PodView>> {
        let op = Op::collection("list", PODS, namespace);
        let api = self.pods(namespace);
        let params = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
        let pods = self.cluster.call(&op, true, || api.list(&params)).await?;
        Ok(pods.items.iter().map(PodView::from).collect())
    }

    fn no_such_job(&self, id: &ExecutionId, watch: &NamespaceWatch) -> Error {
        let hint = if watch.jobs.tombstone(&id.name).is_some() {
            " (it was deleted: cancelled through another replica, or removed by someone else)"
        } else {
            " (never created on this cluster, or already removed: cancelled, deleted, or expired after ttlAfterFinished)"
        };
        Error::NoSuchJob {
            id: id.clone(),
            hint: hint.to_string(),
        }
    }

    /// Maps an observation, records outcomes kubeferry decides itself, and remembers the
    /// answer.
    async fn evaluate(
        &self,
        id: &ExecutionId,
        observed: &Observed,
        pods: &[PodView],
    ) -> Result<ExecutionInfo> {
        let previous = self.tracker.last_reported(&id.namespace, &id.name);
        let observation = observed.as_observation();
        let Some(mapped) = container_status(
            &observation,
            pods,
            Timestamp::now(),
            &self.settings.mapping,
            previous.as_ref(),
        ) else {
            return Err(Error::NoSuchJob {
                id: id.clone(),
                hint: " (it is gone and what became of it is unknown: if it was being cancelled, it was cancelled)".into(),
            });
        };
        if let Some(warning) = &mapped.warning
            && previous.as_ref().map(|p| &p.message) != Some(&mapped.info.message)
        {
            warn!(message = "unreadable status", id = %id, %warning);
        }
        let mut info = mapped.info;
        if mapped.must_record
            && let Observed::Present(job) = observed
            && let Err(error) = self.record_and_stop(job, &info).await
        {
            // Until the outcome is recorded, other replicas may still see the job go on:
            // report what was known before rather than an outcome no one else would report.
            warn!(message = "could not record an outcome; will retry", id = %id, %error);
            info = previous.unwrap_or_else(|| {
                ExecutionInfo::new(JobState::Queued, Reason::Pending)
                    .with_message(format!("deciding the outcome: {}", info.message))
            });
        }
        self.tracker.remember(&id.namespace, &id.name, &info);
        Ok(info)
    }

    /// Records an outcome kubeferry decided on the Job (with a resourceVersion precondition,
    /// so a Job that changed meanwhile is judged again), then deletes the Job.
    async fn record_and_stop(&self, job: &JobView, info: &ExecutionInfo) -> Result<()> {
        let api = self.jobs(&job.namespace);
        let outcome = serde_json::to_string(info).unwrap_or_default();
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": job.resource_version,
                "annotations": { OUTCOME_ANNOTATION: outcome },
            }
        });
        let op = Op::named("patch", JOBS, &job.namespace, &job.name);
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        self.cluster
            .call(&op, true, || api.patch(&job.name, &params, &patch))
            .await?;
        info!(message = "recorded an outcome kubeferry decided", job = %job.name, state = %info.state, reason = %info.reason);
        self.delete(&job.namespace, &job.name, &job.uid).await
    }

    /// Deletes a Job and its pods (background propagation), only if it is still the same Job.
    async fn delete(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        // 404: done; 409: another Job of that name now.
        self.objects(namespace)
            .delete(&self.cluster, name, uid, None)
            .await
            .map(|_| ())
    }

    /// Waits for the job to end, calling `on_change` with each new status. Costs no API
    /// requests while the watch is healthy: changes come from the namespace's watch.
    pub async fn wait(
        &self,
        id: &ExecutionId,
        timeout: Option<Duration>,
        on_change: impl FnMut(&ExecutionInfo),
    ) -> Result<ExecutionInfo> {
        protocol::wait(self, id, timeout, on_change).await
    }

    /// Cancels the job: returns at once. A job that already ended keeps its outcome; the
    /// cancel mark goes on with a resourceVersion precondition (so an outcome reached meanwhile
    /// is seen, not overwritten), then the Job is deleted with its pods.
    pub async fn cancel(&self, id: &ExecutionId) -> Result<CancelOutcome> {
        protocol::cancel(self, id).await
    }

    /// The pods of a job, oldest attempt first.
    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<PodView>> {
        let watch = self.tracker.namespace(&id.namespace);
        let mut pods = if watch.wait_synced(self.settings.sync_timeout).await
            && watch.jobs.get(&id.name).is_some()
        {
            watch.pods_of(&id.name)
        } else {
            self.list_pods(&id.namespace, &id.name).await?
        };
        pods.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        Ok(pods)
    }

    /// The end of the job's log: the newest attempt's main container, or the attempt before it
    /// with `previous`. Empty when no attempt has started yet.
    pub async fn tail(&self, id: &ExecutionId, options: &TailOptions) -> Result<String> {
        protocol::tail(self, id, options).await
    }

    /// Follows the job's log, attempt after attempt, until the job ends.
    pub fn follow(
        self: &Arc<Self>,
        id: ExecutionId,
        options: FollowOptions,
    ) -> impl Stream<Item = Result<String>> + Send + 'static {
        protocol::follow(self.clone(), id, options)
    }

    /// The managed jobs of a namespace, optionally filtered by a label selector.
    pub async fn list(&self, namespace: &str, selector: Option<&str>) -> Result<Vec<JobSummary>> {
        let selector = match selector {
            Some(extra) if !extra.trim().is_empty() => format!("{MANAGED_SELECTOR},{extra}"),
            _ => MANAGED_SELECTOR.to_string(),
        };
        let params = ListParams::default().labels(&selector);
        let jobs_api = self.jobs(namespace);
        let pods_api = self.pods(namespace);
        let jobs = self
            .cluster
            .call(&Op::collection("list", JOBS, namespace), true, || {
                jobs_api.list(&params)
            })
            .await?;
        let managed = ListParams::default().labels(MANAGED_SELECTOR);
        let pods = self
            .cluster
            .call(&Op::collection("list", PODS, namespace), true, || {
                pods_api.list(&managed)
            })
            .await?;
        let mut pods_by_job: BTreeMap<String, Vec<PodView>> = BTreeMap::new();
        for pod in &pods.items {
            if let Some(job) = tracker::job_of_pod(pod) {
                pods_by_job.entry(job).or_default().push(PodView::from(pod));
            }
        }
        let mut summaries = Vec::new();
        for job in &jobs.items {
            let view = JobView::from(job);
            let id = self.id(namespace, &view.name);
            let pods = pods_by_job.remove(&view.name).unwrap_or_default();
            let status = self
                .evaluate(&id, &Observed::Present(view.clone()), &pods)
                .await?;
            summaries.push(JobSummary {
                id,
                job_id: view.job_id.clone(),
                created_at: view.created_at,
                status,
            });
        }
        summaries.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(summaries)
    }

    /// Finds managed Jobs whose job ids are not in `known`, and deletes them when asked.
    pub async fn sweep(
        &self,
        namespace: &str,
        known: &HashSet<String>,
        delete: bool,
    ) -> Result<Vec<Orphan>> {
        let params = ListParams::default().labels(MANAGED_SELECTOR);
        let api = self.jobs(namespace);
        let jobs = self
            .cluster
            .call(&Op::collection("list", JOBS, namespace), true, || {
                api.list(&params)
            })
            .await?;
        let mut orphans = Vec::new();
        for job in &jobs.items {
            let view = JobView::from(job);
            if view.job_id.as_ref().is_some_and(|id| known.contains(id)) {
                continue;
            }
            let mut deleted = false;
            if delete {
                self.delete(namespace, &view.name, &view.uid).await?;
                deleted = true;
                info!(message = "deleted an orphan", namespace, name = %view.name, job_id = ?view.job_id);
            }
            orphans.push(Orphan {
                id: self.id(namespace, &view.name),
                job_id: view.job_id,
                created_at: view.created_at,
                deleted,
            });
        }
        Ok(orphans)
    }
}

/// A change in which managed Jobs of a namespace match a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorEvent {
    /// The Job (by name) matches: it was listed, appeared, or changed.
    Matches(String),
    /// The Job no longer matches: deleted, relabelled, or missing from a relist.
    Left(String),
    /// Every Job matching at this moment has been reported (after the first list and after
    /// each relist).
    Listed,
}

impl ContainerJobs {
    /// Follows which managed Jobs of `namespace` match `selector` (a Kubernetes label
    /// selector, evaluated by the API server): one watch for as long as the stream is read,
    /// relisting on 410 and reconnecting with backoff like the tracker's. Statuses come from
    /// [`ContainerJobs::status`], changes of status from the tracker's notifications; this
    /// stream only says which jobs to look at. A failing watch is retried and logged, not
    /// yielded: check the selector first (e.g. with [`ContainerJobs::list`]).
    pub fn matching(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Stream<Item = SelectorEvent> + Send + 'static {
        use kube::runtime::{WatchStreamExt, watcher};
        let selector = match selector.trim() {
            "" => MANAGED_SELECTOR.to_string(),
            extra => format!("{MANAGED_SELECTOR},{extra}"),
        };
        let timeout = u32::try_from(self.settings.reflector.watch_timeout.as_secs())
            .unwrap_or(290)
            .max(1);
        let config = watcher::Config::default()
            .labels(&selector)
            .timeout(timeout);
        let namespace = namespace.to_string();
        let mut known: HashSet<String> = HashSet::new();
        let mut relisted: Option<HashSet<String>> = None;
        let mut failing = false;
        watcher(self.jobs(&namespace), config)
            .default_backoff()
            .flat_map(move |event| {
                let name_of = |job: &Job| job.metadata.name.clone().unwrap_or_default();
                let events = match event {
                    Ok(event) => {
                        failing = false;
                        match event {
                            watcher::Event::Init => {
                                relisted = Some(HashSet::new());
                                Vec::new()
                            }
                            watcher::Event::InitApply(job) => {
                                let name = name_of(&job);
                                if let Some(seen) = relisted.as_mut() {
                                    seen.insert(name.clone());
                                }
                                known.insert(name.clone());
                                vec![SelectorEvent::Matches(name)]
                            }
                            watcher::Event::InitDone => {
                                let seen = relisted.take().unwrap_or_default();
                                let mut events: Vec<SelectorEvent> = known
                                    .difference(&seen)
                                    .map(|name| SelectorEvent::Left(name.clone()))
                                    .collect();
                                known = seen;
                                events.push(SelectorEvent::Listed);
                                events
                            }
                            watcher::Event::Apply(job) => {
                                let name = name_of(&job);
                                known.insert(name.clone());
                                vec![SelectorEvent::Matches(name)]
                            }
                            watcher::Event::Delete(job) => {
                                let name = name_of(&job);
                                known.remove(&name);
                                vec![SelectorEvent::Left(name)]
                            }
                        }
                    }
                    Err(error) => {
                        if !failing {
                            warn!(message = "selector watch failed; retrying", namespace = %namespace, selector = %selector, %error);
                        }
                        failing = true;
                        Vec::new()
                    }
                };
                futures::stream::iter(events)
            })
    }
}

/// Whether a pod's main container has started (so it has a log to follow).
fn has_started(pod: &PodView) -> bool {
    use kubeferry_core::container::ContainerStateView;
    pod.main.as_ref().is_some_and(|main| {
        matches!(
            main.state,
            ContainerStateView::Running { .. } | ContainerStateView::Terminated(_)
        ) || main.last_terminated.is_some()
    })
}

impl protocol::Jobs for ContainerJobs {
    type Object = Job;

    fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn recheck_interval(&self) -> Duration {
        self.settings.recheck_interval
    }

    async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        ContainerJobs::status(self, id).await
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<protocol::Current<Job>>> {
        let objects = self.objects(&id.namespace);
        let Some(job) = objects.get(&self.cluster, &id.name).await? else {
            return Ok(None);
        };
        let view = JobView::from(&job);
        let pods = match self.list_pods(&id.namespace, &id.name).await {
            Ok(pods) => pods,
            Err(_) => self.tracker.namespace(&id.namespace).pods_of(&id.name),
        };
        let status = self.evaluate(id, &Observed::Present(view), &pods).await?;
        Ok(Some(protocol::Current {
            objects,
            meta: job.metadata,
            status,
        }))
    }

    async fn changes(
        &self,
        id: &ExecutionId,
    ) -> Result<Vec<tokio::sync::broadcast::Receiver<String>>> {
        let (jobs, pods) = self.tracker.namespace(&id.namespace).subscribe();
        Ok(vec![jobs, pods])
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<protocol::Attempt>> {
        Ok(ContainerJobs::attempts(self, id)
            .await?
            .iter()
            .map(|pod| protocol::Attempt {
                pod: pod.name.clone(),
                uid: pod.uid.clone(),
                container: MAIN_CONTAINER.to_string(),
                started: has_started(pod),
            })
            .collect())
    }
}

/// A Job as observed, owning its view.
enum Observed {
    Present(JobView),
    Vanished(JobView, bool),
}

impl Observed {
    fn as_observation(&self) -> JobObservation<'_> {
        match self {
            Observed::Present(view) => JobObservation::Present(view),
            Observed::Vanished(view, final_state) => JobObservation::Vanished {
                last_seen: view,
                final_state: *final_state,
            },
        }
    }
}
