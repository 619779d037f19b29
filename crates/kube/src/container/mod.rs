//! Container jobs (`batch/v1` Jobs): a Job and its pods, mapped by [`container_status`] and
//! settled by the namespace's settler (`crate::evaluating`), like every kind.

mod acting;
pub mod tracker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubeferry_core::container::{
    ContainerView, JobView, MAIN_CONTAINER, MappingConfig, PodView, container_status,
    oldest_attempt_first,
};
use kubeferry_core::marks::{MANAGED_SELECTOR, object_name};
use kubeferry_core::observation::Mapped;
use kubeferry_core::spec::ContainerJobSpec;
use kubeferry_core::timeline;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind};
use tracing::debug;

use crate::cluster::Op;
use crate::error::{ALL_NAMESPACES, Result};
use crate::evaluating::{Evaluates, copy_key};
use crate::kind::{
    Acted, Acting, Common, Kind, KindHealth, Listed, Looked, ManagedObjects, Relisted, Shared,
    Watches,
};
use crate::manifest::job_manifest;
use crate::objects::{Attempt, Current, Objects};
use crate::replies::Placement;
use crate::replies::{DryRun, Submission};
use crate::settling::while_deciding;
use crate::tracker::{Recent, Watching};
use acting::JobAction;
use tracker::NamespaceWatch;

const JOBS: &str = "jobs.batch";
const PODS: &str = "pods";

/// Timings of the container job backend; every one is configurable so that tests run fast.
#[derive(Clone, Debug)]
pub struct ContainerSettings {
    /// Grace periods and timeouts of the status mapping.
    pub mapping: MappingConfig,
    /// Its watches, and how long and how often their readers wait.
    pub watching: Watching,
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
            watching: Watching::default(),
            name_prefix: String::new(),
            janitor_interval: Duration::from_secs(60),
            refusal_freshness: Duration::from_secs(10 * 60),
        }
    }
}

/// The container job backend of one cluster.
pub struct ContainerJobs {
    /// What it keeps in common with every kind: the cluster, each watched namespace's watches,
    /// settler and last answers, and the outcome records.
    common: Common<ContainerJobs>,
    settings: ContainerSettings,
    /// Copies of Jobs ([`copy_key`]) whose verdict came while an attempt still showed
    /// unfinished: their pods are listed only if that still shows a moment later.
    lagging: Recent,
}

/// What is known of a job: its Job, and its pods.
pub(crate) type Found = crate::kind::Found<JobView, Vec<PodView>>;

impl ContainerJobs {
    /// A backend over `shared`.
    pub(crate) fn new(shared: &Shared, settings: ContainerSettings) -> Arc<Self> {
        Common::build(shared, settings.watching.clone(), |common| Self {
            common,
            settings,
            lagging: Recent::new(10_000),
        })
    }

    /// The watches of `namespace`, if they are started.
    pub fn existing(&self, namespace: &str) -> Option<Arc<NamespaceWatch>> {
        self.namespaces().existing(namespace)
    }

    /// The watches of `namespace` and its settler, started if this is the first question
    /// about it.
    pub fn watch(&self, namespace: &str) -> Arc<NamespaceWatch> {
        self.common
            .watches(namespace, || self.started_watches(namespace))
    }

    /// New watches of `namespace`, and beside them the sweep of stopped Jobs past their TTL.
    fn started_watches(&self, namespace: &str) -> Arc<NamespaceWatch> {
        let cluster = self.cluster();
        let watch = Arc::new(NamespaceWatch::start(
            cluster,
            namespace,
            &self.settings.watching.reflector,
        ));
        tokio::spawn(acting::delete_expired_every(
            Arc::downgrade(&watch),
            self.objects(namespace),
            cluster.clone(),
            self.settings.janitor_interval,
        ));
        watch
    }

    fn jobs(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.cluster().client().clone(), namespace)
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster().client().clone(), namespace)
    }

    fn objects(&self, namespace: &str) -> Objects<Job> {
        Objects {
            api: self.jobs(namespace),
            resource: JOBS,
            kind: Self::NOUN,
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
        self.submit_object(&self.objects(namespace), &manifest, job_id, &spec.hash())
            .await
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
            .dry_run(self.cluster(), job, mode)
            .await
    }

    /// What the namespace's watches know of a Job, if they saw it.
    fn cached(&self, watch: &NamespaceWatch, id: &ExecutionId) -> Option<Found> {
        Some(Found {
            observed: Seen::in_watch(&watch.jobs, &id.name)?,
            parts: watch.pods_of(&id.name),
            listed: false,
        })
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
        let job = self.namespaces().existing(&id.namespace)?.with_refusal(
            job,
            pods,
            now,
            self.settings.refusal_freshness,
        )?;
        Some(Seen::Present(job))
    }

    /// Whether a Job still present in the cache would be reported ended for the first time.
    fn would_end(&self, id: &ExecutionId, found: &Found) -> bool {
        let Seen::Present(_) = &found.observed else {
            // A Job's final state, as a DELETED event brought it, is as fresh as it gets.
            return false;
        };
        let previous = self.namespaces().last_reported(&id.namespace, &id.name);
        if previous.as_ref().is_some_and(ExecutionInfo::is_terminal) {
            return false;
        }
        container_status(
            &found.observed.as_observation(),
            &found.parts,
            Timestamp::now(),
            &self.settings.mapping,
            previous.as_ref(),
        )
        .is_some_and(|mapped| mapped.info.is_terminal())
    }

    /// A Job and its pods read from the API server; `None` when there is no such Job.
    async fn fetch(&self, watch: &NamespaceWatch, id: &ExecutionId) -> Result<Option<Found>> {
        let Some(job) = self.get_job(id).await? else {
            return Ok(None);
        };
        let pods = self.fresh_pods(watch, &id.namespace, &id.name).await?;
        Ok(Some(Found {
            observed: Seen::Present(JobView::from(&job)),
            parts: pods,
            listed: true,
        }))
    }

    /// The Job read from the API server; `None` when there is no such Job.
    async fn get_job(&self, id: &ExecutionId) -> Result<Option<Job>> {
        self.cluster().check_reachable()?;
        let op = Op::named("get", JOBS, &id.namespace, &id.name);
        let api = self.jobs(&id.namespace);
        self.cluster()
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
        tracker::listed_pods(self.cluster(), namespace, job, Some(watch)).await
    }

    async fn list_pods(&self, namespace: &str, job: &str) -> Result<Vec<PodView>> {
        tracker::listed_pods(self.cluster(), namespace, job, None).await
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
        let mut pods = if watch.wait_synced(self.settings.watching.sync_timeout).await
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
    ) -> Result<Vec<Listed<Found>>> {
        let params = ListParams::default().labels(selector);
        let client = self.cluster().client().clone();
        let (jobs_api, pods_api): (Api<Job>, Api<Pod>) = match namespace {
            Some(namespace) => (self.jobs(namespace), self.pods(namespace)),
            None => (Api::all(client.clone()), Api::all(client)),
        };
        let scope = namespace.unwrap_or(ALL_NAMESPACES);
        let jobs = self
            .cluster()
            .call(&Op::collection("list", JOBS, scope), true, || {
                jobs_api.list(&params)
            })
            .await?;
        let managed = ListParams::default().labels(MANAGED_SELECTOR);
        let pods = self
            .cluster()
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
                    found: Found {
                        observed: Seen::Present(view),
                        parts: pods,
                        listed: true,
                    },
                }
            })
            .collect())
    }
}

pub use crate::selector::SelectorEvent;

impl ContainerJobs {
    /// A Job as read from the server, with the status it shows given its pods as the server
    /// lists them now (and the final states of deleted ones the watch still knows).
    async fn current(&self, id: &ExecutionId, job: Job) -> Result<Current<Job>> {
        let watch = self.watch(&id.namespace);
        let (pods, fresh) = match self.fresh_pods(&watch, &id.namespace, &id.name).await {
            Ok(pods) => (pods, true),
            Err(_) => (watch.pods_of(&id.name), false),
        };
        let found = Found {
            observed: Seen::Present(JobView::from(&job)),
            parts: pods,
            listed: fresh,
        };
        let objects = self.objects(&id.namespace);
        self.read_now(id, (objects, job.metadata), found, fresh)
            .await
    }
}

impl Kind for ContainerJobs {
    type Object = Job;
    type Watches = NamespaceWatch;

    const JOB_KIND: JobKind = JobKind::Job;

    /// The watches of `namespace`, started (with its settler) if they are not yet.
    async fn watch(&self, namespace: &str) -> Result<Arc<NamespaceWatch>> {
        Ok(ContainerJobs::watch(self, namespace))
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<Job>>> {
        let objects = self.objects(&id.namespace);
        match objects.get(self.cluster(), &id.name).await? {
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

    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
        self.listed_jobs(namespace, selector).await
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<Job>>> {
        let params = ListParams::default().labels(MANAGED_SELECTOR);
        let api = self.jobs(namespace);
        let jobs = self
            .cluster()
            .call(&Op::collection("list", JOBS, namespace), true, || {
                api.list(&params)
            })
            .await?;
        Ok(vec![(self.objects(namespace), jobs.items)])
    }

    fn object_names(&self, job_id: &str) -> Vec<String> {
        vec![object_name(&self.settings.name_prefix, job_id)]
    }

    async fn served_apis(&self, namespace: &str) -> Result<Vec<Api<Job>>> {
        Ok(vec![self.jobs(namespace)])
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

    type View = JobView;
    type Parts = Vec<PodView>;
    type Action = JobAction;

    fn common(&self) -> &Common<Self> {
        &self.common
    }

    async fn observed(&self, watch: &NamespaceWatch, id: &ExecutionId) -> Option<Found> {
        self.cached(watch, id)
    }

    /// A refused watch is an error, not a stale cache. A watch catching up (a relist after
    /// 410 Gone, a reconnect) may hold a Job's verdict and not yet its pods, and an outcome,
    /// once reported, is final: it is read from the server itself, once per job that ends
    /// meanwhile; should the Job be gone by then, what the cache holds is all there is.
    async fn complete(
        &self,
        watch: &NamespaceWatch,
        id: &ExecutionId,
        found: Found,
    ) -> Result<Found> {
        watch.check_permitted(&id.namespace)?;
        if watch.is_current() || !self.would_end(id, &found) {
            return Ok(found);
        }
        debug!(message = "cache catching up; reading the job", id = %id);
        Ok(self.fetch(watch, id).await?.unwrap_or(found))
    }

    /// A Job this process creates or created a moment ago is waited for on the watch (an
    /// event stream may ask before the create's answer is even back); not one created longer
    /// ago: it may be gone, and waiting would only delay the answer. Otherwise one GET settles
    /// whether it exists, and a current watch then delivers it with its pods shortly: the
    /// answer is the cache's, for pods read now and the watch's older copies of them would
    /// take a started job back to queued in the next answer.
    async fn fetched(&self, watch: &NamespaceWatch, id: &ExecutionId) -> Result<Option<Found>> {
        watch.check_permitted(&id.namespace)?;
        let wait = self.settings.watching.sync_timeout;
        if watch.is_current()
            && self
                .namespaces()
                .created_lately(&id.namespace, &id.name, wait)
            && watch.wait_for_job(&id.name, wait).await
        {
            return Ok(self.cached(watch, id));
        }
        let Some(job) = self.get_job(id).await? else {
            return Ok(None);
        };
        if watch.is_current() && watch.wait_for_job(&id.name, wait).await {
            return Ok(self.cached(watch, id));
        }
        let pods = self.fresh_pods(watch, &id.namespace, &id.name).await?;
        Ok(Some(Found {
            observed: Seen::Present(JobView::from(&job)),
            parts: pods,
            listed: true,
        }))
    }

    /// The container mapping, the Job enriched with the Job controller's refusal to create a
    /// pod; the action it asks for, and the outcomes worth writing on the Job.
    fn map(
        &self,
        id: &ExecutionId,
        observed: &Seen,
        pods: &Vec<PodView>,
        (previous, now): (Option<&ExecutionInfo>, Timestamp),
    ) -> Option<Mapped<JobAction>> {
        let enriched = self.with_refusal(id, observed, pods, now);
        let observed = enriched.as_ref().unwrap_or(observed);
        let mapped = container_status(
            &observed.as_observation(),
            pods,
            now,
            &self.settings.mapping,
            previous,
        )?;
        let must_record = mapped.must_record();
        let Mapped {
            info,
            warning,
            recheck_at,
            ..
        } = mapped;
        let action = match observed {
            Seen::Vanished { .. } => None,
            Seen::Present(job) if must_record && job.queue_name.is_some() => {
                Some(JobAction::RecordAndLeaveQueue(info.clone()))
            }
            Seen::Present(_) if must_record => Some(JobAction::RecordAndStop(info.clone())),
            Seen::Present(job) if acting::stopped_in_a_queue(job) => {
                Some(JobAction::DeleteFromQueue(info.clone()))
            }
            Seen::Present(job)
                if info.is_terminal() && self.worth_recording(job, pods, &info, now) =>
            {
                Some(JobAction::Record(info.clone()))
            }
            Seen::Present(_) => None,
        };
        // Until the settler carried its action out, an outcome is not the answer: where the
        // job stood.
        let info = match &action {
            None => info,
            Some(_) if previous.is_some_and(ExecutionInfo::is_terminal) => info,
            Some(_) => while_deciding(observed.view(), &info),
        };
        Some(Mapped {
            info,
            warning,
            action,
            recheck_at,
        })
    }

    /// The pods as the API server lists them, before a verdict the Job reached without an
    /// exit code is first reported while an attempt still shows unfinished: the pods' watch
    /// may lag the Job's by a moment, and the listed pods tell the container's end if it had
    /// one. Pods that cannot be listed decide nothing: the outcome waits for them.
    async fn relisted(
        &self,
        id: &ExecutionId,
        (job, pods, mapped): Looked<'_, Self>,
        acting: Acting,
    ) -> Relisted<Vec<PodView>> {
        let verdict = mapped.action.is_none() && mapped.info.is_terminal();
        if !verdict || mapped.info.exit_code.is_some() || !acting::pods_may_lag(job, pods) {
            return Relisted::Same;
        }
        // The pods' watch is given a moment to deliver the attempt's end: the settler looks
        // again then, and lists the pods only if it still lags.
        if acting == Acting::Delegate || self.lagging.insert(copy_key(job)) {
            return Relisted::Later(None);
        }
        let watch = self.existing(&id.namespace);
        let listed =
            tracker::listed_pods(self.cluster(), &id.namespace, &id.name, watch.as_deref());
        match listed.await {
            Ok(pods) => Relisted::Fresh(pods),
            Err(error) => Relisted::Later(Some(error)),
        }
    }

    async fn act(&self, id: &ExecutionId, job: &JobView, action: &JobAction) -> Acted<JobView> {
        self.act_on(id, job, action).await
    }

    async fn abandoned_cancel(
        &self,
        job: &JobView,
        _info: &ExecutionInfo,
    ) -> std::result::Result<ExecutionInfo, Option<Timestamp>> {
        self.cancel_of_running(job).await
    }

    fn objects_of(&self, job: &JobView) -> Objects<Job> {
        self.objects(&job.namespace)
    }

    fn view_of(&self, _like: &JobView, job: &Job) -> JobView {
        JobView::from(job)
    }

    fn attempts_in(&self, _job: &JobView, pods: &Vec<PodView>) -> Vec<timeline::Attempt> {
        timeline::attempts_of(pods)
    }

    fn log_container(&self, _pods: &Vec<PodView>, _pod: &str) -> Option<String> {
        Some(MAIN_CONTAINER.to_string())
    }

    /// The Job counts its work ended, its verdict perhaps not in yet.
    fn work_ended(&self, job: &JobView, _pods: &Vec<PodView>) -> bool {
        job.counts_ended()
    }
}

/// The job's object as last seen.
type Seen = crate::kind::Seen<JobView>;

#[cfg(test)]
mod tests;
