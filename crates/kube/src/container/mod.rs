//! Container jobs (`batch/v1` Jobs): submit, status, wait, cancel, logs, list and sweep.

mod inbox;
mod settler;
pub mod tracker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubeferry_core::container::{
    ContainerView, JobView, MAIN_CONTAINER, MappingConfig, PodView, container_status,
    oldest_attempt_first,
};
use kubeferry_core::marks::{MANAGED_SELECTOR, object_name};
use kubeferry_core::spec::ContainerJobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tracing::{debug, warn};

use crate::cluster::{Cluster, Op};
use crate::error::{ALL_NAMESPACES, Error, Result};
use crate::executor::Placement;
use crate::kind::{Answers, Kind, KindBase, KindHealth, Listed, ManagedObjects, Watches};
use crate::manifest::job_manifest;
use crate::objects::{Attempt, Current, Objects};
use crate::records::Records;
use crate::replies::{DryRun, Submission};
use crate::settling::while_deciding;
use crate::tracker::{Namespaces, Recent, ReflectorSettings};
use inbox::SettlerContext;
use tracker::{NamespaceWatch, WatchStarter};

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
    /// How often each watched namespace is searched for Jobs kubeferry stopped after recording
    /// their outcome and whose `ttlSecondsAfterFinished` has run out (see
    /// `JobView::record_expired`), to delete them.
    pub janitor_interval: Duration,
    /// How long the Job controller's refusal to create a pod stays news: it retries a refused
    /// pod within a minute or so, and each refusal refreshes its event, so an older one is over.
    pub refusal_freshness: Duration,
}

impl Default for ContainerSettings {
    fn default() -> Self {
        Self {
            mapping: MappingConfig::default(),
            reflector: ReflectorSettings::default(),
            sync_timeout: Duration::from_secs(10),
            recheck_interval: Duration::from_secs(1),
            name_prefix: String::new(),
            janitor_interval: Duration::from_secs(60),
            refusal_freshness: Duration::from_secs(10 * 60),
        }
    }
}

/// The container job backend of one cluster.
pub struct ContainerJobs {
    /// The cluster, each watched namespace's watches and settler and the last answers, and the
    /// outcome records.
    base: KindBase<NamespaceWatch>,
    settings: ContainerSettings,
    starter: WatchStarter,
    /// The Jobs this process creates or created lately (`namespace/name`).
    submitted: Recent,
}

impl ContainerJobs {
    /// A backend for `cluster`, keeping its jobs' outcomes in `records`.
    pub(crate) fn new(
        cluster: Cluster,
        settings: ContainerSettings,
        records: Arc<Records>,
    ) -> Self {
        let namespaces = Namespaces::default();
        let starter = WatchStarter {
            settings: settings.reflector.clone(),
            settler: SettlerContext {
                cluster: cluster.clone(),
                mapping: settings.mapping.clone(),
                refusal_freshness: settings.refusal_freshness,
                retry_interval: settings.recheck_interval,
                janitor_interval: settings.janitor_interval,
                reported: namespaces.reported(),
                records: records.clone(),
            },
            start_settler: settler::start,
        };
        Self {
            base: KindBase {
                cluster,
                namespaces,
                records,
            },
            settings,
            starter,
            submitted: Recent::new(10_000),
        }
    }

    /// The watches of `namespace`, if they are started.
    pub fn existing(&self, namespace: &str) -> Option<Arc<NamespaceWatch>> {
        self.base.namespaces.existing(namespace)
    }

    /// The watches of `namespace` and its settler, started if this is the first question
    /// about it.
    pub fn watch(&self, namespace: &str) -> Arc<NamespaceWatch> {
        self.base.watches(namespace, || {
            NamespaceWatch::start(namespace, &self.starter)
        })
    }

    fn jobs(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.base.cluster.client().clone(), namespace)
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.base.cluster.client().clone(), namespace)
    }

    fn objects(&self, namespace: &str) -> Objects<Job> {
        Objects {
            api: self.jobs(namespace),
            resource: JOBS,
            kind: "Job",
            namespace: namespace.to_string(),
            dependents_first: true,
        }
    }

    /// Creates the Job for `spec` under `job_id` in `namespace`, or adopts the one a lost
    /// response already created; says whether the job id already named a job (nothing
    /// created). Submitting the same job id twice runs the job once. The namespace's watches
    /// start, if they had not.
    pub async fn submit_or_find(
        &self,
        spec: &ContainerJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        let name = object_name(&self.settings.name_prefix, job_id);
        let manifest = job_manifest(spec, job_id, &name, namespace);
        // The namespace is looked after from now on: its settler fails the job at a grace
        // period's end whether or not anyone asks. Its watch delivers the Job shortly, and a
        // question asked meanwhile waits for it rather than reading the server.
        self.watch(namespace);
        // A job id whose run ended (and whose Job may be gone) answers that run: it never
        // runs twice.
        self.submitted.insert(format!("{namespace}/{name}"));
        let submitted = self
            .submit_object(
                &self.objects(namespace),
                &manifest,
                &name,
                job_id,
                &spec.hash(),
            )
            .await;
        if !matches!(
            submitted,
            Ok(Submission {
                existing: false,
                ..
            })
        ) {
            self.submitted.remove(&format!("{namespace}/{name}"));
        }
        submitted
    }

    /// The Job a submission of `spec` under `job_id` would create, as kubeferry builds it or
    /// as the API server would store it ([`DryRun`]).
    pub(crate) async fn dry_run(
        &self,
        spec: &ContainerJobSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        let name = object_name(&self.settings.name_prefix, job_id);
        let job = job_manifest(spec, job_id, &name, namespace);
        self.objects(namespace)
            .dry_run(&self.base.cluster, job, mode)
            .await
    }

    /// The job's status, from the watch cache (one GET on a miss).
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        // One instant for the whole answer: whether the cache would report an outcome and the
        // answer itself must agree, or a grace running out in between would let the cache's
        // stale pods decide it.
        let now = Timestamp::now();
        let watch = self.watch(&id.namespace);
        let synced = watch.wait_synced(self.settings.sync_timeout).await;
        if let Some(answer) = self.final_answer(id, false).await {
            return Ok(answer);
        }
        watch.check_permitted(&id.namespace)?;
        let found = match self.cached(&watch, id) {
            Some(cached) if watch.is_current() || !self.would_end(id, &cached, now) => Some(cached),
            // A watch that failed is catching up (a relist after 410 Gone, a reconnect): the
            // cache may hold a Job's verdict and not yet its pods, and an outcome, once
            // reported, is final. It is read from the server itself, once per job that ends
            // meanwhile; should the Job be gone by then, what the cache holds is all there is.
            Some(cached) => {
                debug!(message = "cache catching up; reading the job", id = %id);
                self.fetch(&watch, id).await?.or(Some(cached))
            }
            // A Job this process creates or created a moment ago: the watch delivers it
            // shortly (an event stream may ask before the create's answer is even back). Not
            // one created longer ago: it may be gone, and waiting would only delay the answer.
            None if watch.is_current()
                && self.submitted.contains_within(
                    &format!("{}/{}", id.namespace, id.name),
                    self.settings.sync_timeout,
                )
                && watch
                    .wait_for_job(&id.name, self.settings.sync_timeout)
                    .await =>
            {
                self.cached(&watch, id)
            }
            // The server said a moment ago it has no such Job, and the watch, current since,
            // has not delivered one.
            None if watch.is_current()
                && self.base.namespaces.absent_lately(
                    &id.namespace,
                    &id.name,
                    self.settings.reflector.absent_ttl,
                ) =>
            {
                None
            }
            // A miss: a Job created a moment ago (perhaps by another replica) that the watch
            // has not delivered yet, or a watch that has not synced. One GET settles whether
            // it exists. A current watch then delivers it, with its pods, shortly: the answer
            // is the cache's, for pods read now and the watch's older copies of them would
            // take a started job back to queued in the next answer.
            None => {
                debug!(message = "cache miss", id = %id, synced);
                let current = watch.is_current();
                let Some(job) = self.get_job(id).await? else {
                    if current {
                        self.base.namespaces.note_absent(&id.namespace, &id.name);
                    }
                    return match self.recorded_gone(id).await {
                        Some(recorded) => Ok(recorded),
                        None => Err(self.no_such_job(id, &watch)),
                    };
                };
                match current
                    && watch
                        .wait_for_job(&id.name, self.settings.sync_timeout)
                        .await
                {
                    true => self.cached(&watch, id),
                    false => {
                        let pods = self.fresh_pods(&watch, &id.namespace, &id.name).await?;
                        Some((Seen::Present(JobView::from(&job)), pods))
                    }
                }
            }
        };
        let Some((observed, pods)) = found else {
            return match self.recorded_gone(id).await {
                Some(recorded) => Ok(recorded),
                None => Err(self.no_such_job(id, &watch)),
            };
        };
        self.evaluate(id, &observed, &pods, now).await
    }

    /// What the namespace's watches know of a Job, if they saw it.
    fn cached(&self, watch: &NamespaceWatch, id: &ExecutionId) -> Option<(Seen, Vec<PodView>)> {
        if let Some(entry) = watch.jobs.get(&id.name) {
            return Some((Seen::Present(entry.view), watch.pods_of(&id.name)));
        }
        let tombstone = watch.jobs.tombstone(&id.name)?;
        let final_state = tombstone.departure == crate::tracker::Departure::Deleted;
        Some((
            Seen::Vanished {
                last: tombstone.last,
                final_state,
            },
            watch.pods_of(&id.name),
        ))
    }

    /// The Job with the Job controller's refusal to create a pod for it, while it has none
    /// and the refusal is news; `None` when there is nothing to add (or the namespace is not
    /// watched: a one-off `list` does not start watches).
    fn with_refusal(
        &self,
        id: &ExecutionId,
        observed: &Seen,
        pods: &[PodView],
        now: Timestamp,
    ) -> Option<Seen> {
        let Seen::Present(job) = observed else {
            return None;
        };
        let job = self.base.namespaces.existing(&id.namespace)?.with_refusal(
            job,
            pods,
            now,
            self.settings.refusal_freshness,
        )?;
        Some(Seen::Present(job))
    }

    /// Whether a Job still present in the cache would be reported ended for the first time.
    fn would_end(
        &self,
        id: &ExecutionId,
        (observed, pods): &(Seen, Vec<PodView>),
        now: Timestamp,
    ) -> bool {
        let Seen::Present(_) = observed else {
            // A Job's final state, as a DELETED event brought it, is as fresh as it gets.
            return false;
        };
        let previous = self.base.namespaces.last_reported(&id.namespace, &id.name);
        if previous.as_ref().is_some_and(ExecutionInfo::is_terminal) {
            return false;
        }
        container_status(
            &observed.as_observation(),
            pods,
            now,
            &self.settings.mapping,
            previous.as_ref(),
        )
        .is_some_and(|mapped| mapped.info.is_terminal())
    }

    /// A Job and its pods read from the API server; `None` when there is no such Job.
    async fn fetch(
        &self,
        watch: &NamespaceWatch,
        id: &ExecutionId,
    ) -> Result<Option<(Seen, Vec<PodView>)>> {
        let Some(job) = self.get_job(id).await? else {
            return Ok(None);
        };
        let pods = self.fresh_pods(watch, &id.namespace, &id.name).await?;
        Ok(Some((Seen::Present(JobView::from(&job)), pods)))
    }

    /// The Job read from the API server; `None` when there is no such Job.
    async fn get_job(&self, id: &ExecutionId) -> Result<Option<Job>> {
        self.base.cluster.check_reachable()?;
        let op = Op::named("get", JOBS, &id.namespace, &id.name);
        let api = self.jobs(&id.namespace);
        self.base
            .cluster
            .call(&op, true, || api.get_opt(&id.name))
            .await
    }

    /// A Job's pods as the API server lists them, with the final states of deleted ones only
    /// the watch still knows.
    async fn fresh_pods(
        &self,
        watch: &NamespaceWatch,
        namespace: &str,
        job: &str,
    ) -> Result<Vec<PodView>> {
        tracker::listed_pods(&self.base.cluster, namespace, job, Some(watch)).await
    }

    async fn list_pods(&self, namespace: &str, job: &str) -> Result<Vec<PodView>> {
        tracker::listed_pods(&self.base.cluster, namespace, job, None).await
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

    /// Maps an observation and remembers the answer, logging a warning the first time it
    /// appears for the job. Writes nothing: an outcome kubeferry decides (a grace period run
    /// out) is recorded on the Job and the job stopped by the namespace's settler, normally at
    /// the deadline itself; a question that finds it due first has the settler do it now and
    /// answers once it is done, so that no replica reports an outcome not on the Job yet.
    async fn evaluate(
        &self,
        id: &ExecutionId,
        observed: &Seen,
        pods: &[PodView],
        now: Timestamp,
    ) -> Result<ExecutionInfo> {
        let previous = self.base.namespaces.last_reported(&id.namespace, &id.name);
        let version = observed.present_version();
        // A watch cache lagging a fresh read: its older copy tells nothing new. What was
        // reported from the newer one is read now, not taken from `previous`: another answer
        // (a wait's) may have been given from a newer copy since, and may be terminal.
        if let Some(current) =
            self.base
                .namespaces
                .reported_from_newer(&id.namespace, &id.name, version)
        {
            return Ok(current);
        }
        let enriched = self.with_refusal(id, observed, pods, now);
        let observed = enriched.as_ref().unwrap_or(observed);
        let Some(mapped) = container_status(
            &observed.as_observation(),
            pods,
            now,
            &self.settings.mapping,
            previous.as_ref(),
        ) else {
            return Err(Error::NoSuchJob {
                id: id.clone(),
                hint: " (it is gone and what became of it is unknown: if it was being cancelled, it was cancelled)".into(),
            });
        };
        let must_record = mapped.must_record();
        let standing = self
            .standing(
                id,
                mapped.info,
                previous.as_ref(),
                observed.undeleted(),
                observed.present_meta(),
            )
            .await;
        let (mut info, unrecorded) = standing.into_parts();
        // An outcome not recorded yet is the settler's to record first, the Job present or
        // gone: another process may have recorded another outcome for it first (a cancel
        // through another replica), which this one's watch of records has yet to deliver.
        if unrecorded || (must_record && matches!(observed, Seen::Present(_))) {
            let watch = self.watch(&id.namespace);
            // Bounded: a settler held up by a slow API server must not hold the question too.
            let settled = tokio::time::timeout(
                self.settings.sync_timeout,
                watch.settler.settle_now(observed.clone(), pods.to_vec()),
            )
            .await;
            let present = matches!(observed, Seen::Present(_));
            let meta = observed.present_meta().cloned();
            if let Some(recorded) = self.final_answer_seeing(id, present, meta).await {
                return Ok(recorded);
            }
            // Until the outcome is recorded, other replicas may still see the job go on:
            // report what was known before rather than an outcome no one else would report.
            match settled {
                Ok(Some(Err(error))) => {
                    info.message = format!("{}; not recorded yet: {error}", info.message);
                }
                Err(_) => {
                    info.message = format!(
                        "{}; not recorded yet: the namespace's settler is still busy",
                        info.message
                    );
                }
                Ok(_) => {}
            }
            // The copy of the record the object carries was recorded (the record deleted by
            // hand since, which the settler writes again): it stands meanwhile.
            let kept = observed.view().kept_outcome.clone();
            info = kept
                .or_else(|| previous.clone())
                .unwrap_or_else(|| while_deciding(observed.view(), &info));
        }
        let warning = mapped.warning.as_deref();
        if self
            .base
            .namespaces
            .remember(&id.namespace, &id.name, &info, warning, version)
            && let Some(warning) = warning
        {
            warn!(message = "unreadable status", id = %id, %warning);
        }
        // What stands: an answer computed at the same time from a newer copy wins.
        Ok(self
            .base
            .namespaces
            .last_reported(&id.namespace, &id.name)
            .unwrap_or(info))
    }

    /// Cancels, deciding the first time from `seen`, a copy of the Job read earlier, when one
    /// is given (and from a fresh read otherwise). A copy that is stale by the time the mark
    /// goes on is what the resourceVersion precondition is for: tests hand one in to play the
    /// race of a job that ends between kubeferry's read and its mark.
    #[cfg(test)]
    async fn cancel_from(
        &self,
        id: &ExecutionId,
        seen: Option<Job>,
    ) -> Result<crate::CancelOutcome> {
        let seen = match seen {
            Some(job) => Some(self.current(id, job).await?),
            None => None,
        };
        crate::protocol::cancel_from(self, id, seen, "a test").await
    }

    /// The pods of a job that still exist (a deleted pod's log is gone with it), oldest
    /// attempt first.
    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<PodView>> {
        let watch = self.watch(&id.namespace);
        let mut pods = if watch.wait_synced(self.settings.sync_timeout).await
            && watch.jobs.get(&id.name).is_some()
        {
            watch.live_pods_of(&id.name)
        } else {
            self.list_pods(&id.namespace, &id.name).await?
        };
        pods.sort_by(oldest_attempt_first);
        Ok(pods)
    }

    /// The managed Jobs of `namespace`, or of every namespace when it is `None` (one
    /// cluster-wide list of Jobs and one of pods), that match `selector`, with their pods.
    async fn listed_jobs(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Listed<(JobView, Vec<PodView>)>>> {
        let params = ListParams::default().labels(selector);
        let client = self.base.cluster.client().clone();
        let (jobs_api, pods_api): (Api<Job>, Api<Pod>) = match namespace {
            Some(namespace) => (self.jobs(namespace), self.pods(namespace)),
            None => (Api::all(client.clone()), Api::all(client)),
        };
        let scope = namespace.unwrap_or(ALL_NAMESPACES);
        let jobs = self
            .base
            .cluster
            .call(&Op::collection("list", JOBS, scope), true, || {
                jobs_api.list(&params)
            })
            .await?;
        let managed = ListParams::default().labels(MANAGED_SELECTOR);
        let pods = self
            .base
            .cluster
            .call(&Op::collection("list", PODS, scope), true, || {
                pods_api.list(&managed)
            })
            .await?;
        let mut pods_by_job: BTreeMap<(String, String), Vec<PodView>> = BTreeMap::new();
        for pod in &pods.items {
            if let Some(job) = tracker::job_of_pod(pod) {
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                pods_by_job
                    .entry((namespace, job))
                    .or_default()
                    .push(PodView::from(pod));
            }
        }
        Ok(jobs
            .items
            .iter()
            .map(|job| {
                let view = JobView::from(job);
                let mut pods = pods_by_job
                    .remove(&(view.namespace.clone(), view.name.clone()))
                    .unwrap_or_default();
                pods.sort_by(oldest_attempt_first);
                Listed {
                    id: self.id(&view.namespace, &view.name),
                    job_id: view.job_id.clone(),
                    created_at: view.created_at,
                    newest: pods
                        .last()
                        .map(|pod| (pod.name.clone(), pod.node_name.clone())),
                    attempts: pods.len(),
                    found: (view, pods),
                }
            })
            .collect())
    }
}

pub use crate::selector::SelectorEvent;

impl ContainerJobs {}

impl ContainerJobs {
    /// A Job as read from the server, with the status it shows given its pods as the server
    /// lists them now (and the final states of deleted ones the watch still knows).
    async fn current(&self, id: &ExecutionId, job: Job) -> Result<Current<Job>> {
        let view = JobView::from(&job);
        let ended = view.counts_ended();
        let watch = self.watch(&id.namespace);
        let (pods, fresh) = match self.fresh_pods(&watch, &id.namespace, &id.name).await {
            Ok(pods) => (pods, true),
            Err(_) => (watch.pods_of(&id.name), false),
        };
        let status = self
            .evaluate(id, &Seen::Present(view), &pods, Timestamp::now())
            .await?;
        Ok(Current {
            objects: self.objects(&id.namespace),
            meta: job.metadata,
            status,
            fresh,
            ended,
        })
    }
}

impl Kind for ContainerJobs {
    type Object = Job;
    type Watches = NamespaceWatch;
    type Found = (JobView, Vec<PodView>);

    const JOB_KIND: JobKind = JobKind::Job;
    const NOUN: &'static str = "Job";

    fn base(&self) -> &KindBase<NamespaceWatch> {
        &self.base
    }

    async fn watch(&self, namespace: &str) -> Result<Arc<NamespaceWatch>> {
        Ok(ContainerJobs::watch(self, namespace))
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<Job>>> {
        let objects = self.objects(&id.namespace);
        match objects.get(&self.base.cluster, &id.name).await? {
            Some(job) => Ok(Some(self.current(id, job).await?)),
            None => Ok(None),
        }
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        Ok(ContainerJobs::attempts(self, id)
            .await?
            .iter()
            .map(|pod| Attempt {
                pod: pod.name.clone(),
                uid: pod.uid.clone(),
                container: MAIN_CONTAINER.to_string(),
                started: pod.main.as_ref().is_some_and(ContainerView::has_started),
                index: pod.completion_index,
                replica: None,
            })
            .collect())
    }

    async fn listed(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Listed<(JobView, Vec<PodView>)>>> {
        self.listed_jobs(namespace, selector).await
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<Job>>> {
        let params = ListParams::default().labels(MANAGED_SELECTOR);
        let api = self.jobs(namespace);
        let jobs = self
            .base
            .cluster
            .call(&Op::collection("list", JOBS, namespace), true, || {
                api.list(&params)
            })
            .await?;
        Ok(vec![(self.objects(namespace), jobs.items)])
    }

    fn object_names(&self, job_id: &str) -> Vec<String> {
        vec![object_name(&self.settings.name_prefix, job_id)]
    }

    /// Follows which managed Jobs of `namespace` match `selector` (a Kubernetes label
    /// selector, evaluated by the API server): one watch for as long as the stream is read,
    /// relisting on 410 and reconnecting with backoff like the tracker's. Statuses come from
    /// [`ContainerJobs::status`], changes of status from the tracker's notifications; this
    /// stream only says which jobs to look at. A failing watch is retried and logged, not
    /// yielded: check the selector first (e.g. with [`Executor::list`](crate::Executor::list)).
    fn matching(
        self: &Arc<Self>,
        namespace: &str,
        selector: &str,
    ) -> BoxStream<'static, SelectorEvent> {
        crate::selector::label_watch(
            self.jobs(namespace),
            JobKind::Job,
            namespace,
            &crate::selector::managed(selector),
            self.settings.reflector.watch_timeout,
        )
        .boxed()
    }

    fn namespace_health(&self, namespace: &str) -> KindHealth {
        // Every answer about the namespace needs them: asking for their health starts them.
        KindHealth::Started(ContainerJobs::watch(self, namespace).health())
    }

    fn placement(&self, id: &ExecutionId) -> Option<Placement> {
        let watch = self.existing(&id.namespace)?;
        let mut pods = watch.live_pods_of(&id.name);
        pods.sort_by(oldest_attempt_first);
        let attempts = pods.len();
        let pod = pods.pop()?;
        Some(Placement {
            pod: pod.name.clone(),
            node: pod.node_name,
            attempts,
        })
    }
}

impl Answers for ContainerJobs {
    fn recheck_interval(&self) -> Duration {
        self.settings.recheck_interval
    }

    async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        ContainerJobs::status(self, id).await
    }

    async fn status_of(
        &self,
        id: &ExecutionId,
        (job, pods): (JobView, Vec<PodView>),
    ) -> Result<ExecutionInfo> {
        // The record judged by the copy the list found, newer than a watch's, if there is one.
        let meta = Some(job.meta.clone());
        if let Some(answer) = self.final_answer_seeing(id, true, meta).await {
            return Ok(answer);
        }
        self.evaluate(id, &Seen::Present(job), &pods, Timestamp::now())
            .await
    }

    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        self.base
            .namespaces
            .watched()
            .into_iter()
            .flat_map(|(namespace, watch)| {
                watch
                    .settler
                    .states
                    .counts()
                    .into_iter()
                    .map(move |(state, count)| (namespace.clone(), state, count))
            })
            .collect()
    }
}

/// The job's object as last seen.
type Seen = crate::kind::Seen<JobView>;

#[cfg(test)]
mod tests;
