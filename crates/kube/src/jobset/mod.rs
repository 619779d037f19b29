//! JobSets (`jobset.x-k8s.io/v1alpha2`): submit, status, wait, cancel, logs, list and sweep.
//!
//! The status comes from label-scoped watches of the managed JobSets, of their Jobs and of
//! those Jobs' pods (`tracker.rs`), mapped by [`jobset_status`]: the JobSet's conditions decide,
//! the Job and pod that caused a failure say why. The one action the mapping asks for (record
//! the outcome of a set whose pod can never start, then delete the set) is carried out by the
//! namespace's settler (`settler.rs`), which also keeps each ended set's outcome record; a
//! status query writes nothing. Submission, cancel, waiting and logs follow the same protocols
//! as the other kinds (`crate::protocol`). A cluster that does not serve the JobSet CRD runs no
//! JobSets ([`Error::JobSetUnavailable`]) and lists none.

pub mod tracker;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kubeferry_core::container::{ContainerView, MappingConfig};
use kubeferry_core::jobset::{
    ChildJobView, JOBSET_GROUP, JOBSET_NAME_LABEL, JOBSET_VERSION, JOBSETS, JobSetAction,
    JobSetView, jobset_status,
};
use kubeferry_core::marks::{MANAGED_SELECTOR, OUTCOME_ANNOTATION, jobset_object_name};
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::spec::JobSetSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::cluster::{Cluster, Op};
use crate::error::{ALL_NAMESPACES, Error, Result};
use crate::evaluating::{Acting, Evaluated, EvaluatedWatch, Evaluates, Settlers};
use crate::kind::{Kind, Listed, ManagedObjects};
use crate::manifest::MAIN_CONTAINER;
use crate::manifest::jobset::{api_resource, jobset_manifest};
use crate::objects::{Attempt, Current, Deletion, Objects};
use crate::records::{Records, check_resubmission};
use crate::settling::retry_delay;
use crate::tracker::{Departure, Namespaces, Recent, ReflectorSettings, lock};
use tracker::{ChildPod, JobSetNamespaceWatch, children_selector};

const KIND: &str = "JobSet";
/// The resource of JobSets, as errors name it.
pub const RESOURCE: &str = "jobsets.jobset.x-k8s.io";
const JOBS: &str = "jobs";
const PODS: &str = "pods";

/// Timings of the JobSet backend; every timing is configurable so that tests run fast.
#[derive(Clone, Debug)]
pub struct JobSetSettings {
    /// The grace periods applied to each child Job's pods (image pulls, container creation,
    /// the wait for a pod's final status).
    pub mapping: MappingConfig,
    /// The watches' settings.
    pub reflector: ReflectorSettings,
    /// How long a status query waits for a namespace's first list before asking the API
    /// server directly.
    pub sync_timeout: Duration,
    /// How often a waiter re-evaluates time-based rules when nothing changes.
    pub recheck_interval: Duration,
    /// How long what discovery found out (whether the JobSet CRD is served) is trusted.
    pub discovery_ttl: Duration,
}

impl Default for JobSetSettings {
    fn default() -> Self {
        Self {
            mapping: MappingConfig::default(),
            reflector: ReflectorSettings::default(),
            sync_timeout: Duration::from_secs(10),
            recheck_interval: Duration::from_secs(1),
            discovery_ttl: Duration::from_secs(60),
        }
    }
}

/// The JobSet backend of one cluster.
pub struct JobSets {
    /// This backend, for the settlers it starts.
    me: Weak<JobSets>,
    cluster: Cluster,
    settings: JobSetSettings,
    /// Each watched namespace's watches, and the last answers.
    namespaces: Namespaces<JobSetNamespaceWatch>,
    /// The outcome records.
    records: Arc<Records>,
    /// Whether the cluster serves the JobSet CRD, and since when that is known.
    installed: Mutex<Option<(Instant, bool)>>,
    /// Held while discovery asks: concurrent callers wait for its answer, not ask again.
    discovering: tokio::sync::Mutex<()>,
    /// The warnings logged, each once.
    warned: Recent,
    /// Copies of JobSets (name and resourceVersion) an action found gone.
    found_gone: Recent,
    /// Each watched namespace's settler, the one writer of its jobs.
    settlers: Settlers<JobSets>,
}

/// The job's object as observed.
type Observed = crate::kind::Observed<JobSetView>;

/// What is known of a job: its JobSet, the set's Jobs and their pods.
pub(crate) struct Found {
    observed: Observed,
    jobs: Vec<ChildJobView>,
    pods: Vec<ChildPod>,
    /// Whether the Jobs and pods were listed from the API server just now (not from a cache).
    listed: bool,
}

/// What carrying out an action came to.
enum Acted {
    /// Done: the action's outcome may be reported.
    Done,
    /// The JobSet changed or went: map this instead.
    Remap(Box<Observed>),
    /// It failed; the job is not decided yet.
    Failed(Error),
}

impl JobSets {
    /// A backend for `cluster`, keeping its jobs' outcomes in `records`.
    pub(crate) fn new(
        cluster: Cluster,
        settings: JobSetSettings,
        records: Arc<Records>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            records,
            cluster,
            settings,
            namespaces: Namespaces::default(),
            installed: Mutex::new(None),
            discovering: tokio::sync::Mutex::new(()),
            warned: Recent::new(10_000),
            found_gone: Recent::new(10_000),
            settlers: Settlers::default(),
        })
    }

    /// The watches of `namespace`, if they are started.
    pub(crate) fn existing(&self, namespace: &str) -> Option<Arc<JobSetNamespaceWatch>> {
        self.namespaces.existing(namespace)
    }

    fn objects(&self, namespace: &str) -> Objects<DynamicObject> {
        Objects {
            api: Api::namespaced_with(self.cluster.client().clone(), namespace, &api_resource()),
            resource: RESOURCE,
            kind: KIND,
            namespace: namespace.to_string(),
        }
    }

    /// Whether the cluster serves the JobSet CRD (discovery, cached).
    pub async fn installed(&self) -> Result<bool> {
        let known = || {
            lock(&self.installed)
                .filter(|(at, _)| at.elapsed() < self.settings.discovery_ttl)
                .map(|(_, installed)| installed)
        };
        if let Some(installed) = known() {
            return Ok(installed);
        }
        let _discovering = self.discovering.lock().await;
        if let Some(installed) = known() {
            return Ok(installed);
        }
        let api_version = format!("{JOBSET_GROUP}/{JOBSET_VERSION}");
        let op = Op::named("get", "apis", "", &api_version);
        let client = self.cluster.client();
        let installed = match self
            .cluster
            .call(&op, true, || client.list_api_group_resources(&api_version))
            .await
        {
            Ok(list) => list.resources.iter().any(|r| r.name == JOBSETS),
            Err(Error::Api { code: 404, .. }) => false,
            Err(error) => return Err(error),
        };
        *lock(&self.installed) = Some((Instant::now(), installed));
        Ok(installed)
    }

    /// Fails with [`Error::JobSetUnavailable`] when the cluster does not serve JobSets.
    async fn check_installed(&self, namespace: &str) -> Result<()> {
        if self.installed().await? {
            return Ok(());
        }
        Err(Error::JobSetUnavailable {
            detail: format!(
                "the cluster does not serve {JOBSET_GROUP}/{JOBSET_VERSION} JobSets (namespace {namespace:?}): install the JobSet controller (kubernetes-sigs/jobset)"
            ),
        })
    }

    /// The watches of `namespace`, started (with its settler) if they are not yet.
    pub async fn watch(&self, namespace: &str) -> Result<Arc<JobSetNamespaceWatch>> {
        let watch = match self.namespaces.existing(namespace) {
            Some(watch) => watch,
            None => {
                self.check_installed(namespace).await?;
                self.namespaces.get_or_start(namespace, || {
                    self.records.watch(namespace);
                    Arc::new(JobSetNamespaceWatch::start(
                        &self.cluster,
                        namespace,
                        &self.settings.reflector,
                    ))
                })
            }
        };
        self.settlers.start(&self.me, namespace, &watch);
        Ok(watch)
    }

    /// Hands a job whose mapping asks for an action (or whose outcome is still to be recorded)
    /// to its namespace's settler, and answers what the settler decided.
    async fn settle_now(&self, id: &ExecutionId, found: Found) -> Result<ExecutionInfo> {
        let watch = self.watch(&id.namespace).await?;
        self.settlers.settle_now(&self.me, &watch, id, found).await
    }

    /// Creates the JobSet for `spec` under `job_id` in `namespace`, or adopts the one a lost
    /// response already created.
    pub async fn submit(
        &self,
        spec: &JobSetSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<ExecutionId> {
        self.check_installed(namespace).await?;
        let name = jobset_object_name(job_id);
        let manifest = jobset_manifest(spec, job_id, &name, namespace);
        // A job id whose run ended (and whose JobSet may be gone) answers that run.
        if let Some(record) = self
            .records
            .lookup(namespace, JobKind::JobSet, &name, job_id)
            .await?
        {
            check_resubmission(&record, KIND, namespace, &name, job_id, &spec.hash())?;
            return Ok(self.id(namespace, &name));
        }
        self.namespaces.forget_absent(namespace, &name);
        let object: DynamicObject =
            serde_json::from_value(manifest).map_err(|source| Error::Manifest {
                operation: format!("build JobSet {namespace}/{name}"),
                source,
            })?;
        self.objects(namespace)
            .create_or_adopt(&self.cluster, &object, job_id, &spec.hash())
            .await?;
        // The namespace is looked after from now on (its settler keeps the outcome record);
        // the job exists whatever becomes of that.
        if let Err(error) = self.watch(namespace).await {
            debug!(message = "the namespace's watches did not start", namespace, %error);
        }
        Ok(self.id(namespace, &name))
    }

    /// The job's status, from the watch cache (one GET on a miss).
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        if let Some(answer) = self.final_answer(id).await {
            return Ok(answer);
        }
        let watch = self.watch(&id.namespace).await?;
        let synced = watch.wait_synced(self.settings.sync_timeout).await;
        let Some(found) = self.observe(&watch, id, synced).await? else {
            return Err(self.no_such_job(id, &watch));
        };
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
    }

    /// What the watches know of a job, if they saw its JobSet.
    fn cached(&self, watch: &JobSetNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        let observed = match watch.jobsets.get(&id.name) {
            Some(entry) => Observed::Present(entry.view),
            None => {
                let tombstone = watch.jobsets.tombstone(&id.name)?;
                let final_state = tombstone.departure == Departure::Deleted;
                Observed::Vanished(tombstone.last, final_state)
            }
        };
        let (jobs, pods) = watch.children_of(&id.name);
        Some(Found {
            observed,
            jobs,
            pods,
            listed: false,
        })
    }

    /// What is known of a job: from the cache, else (a JobSet created a moment ago by another
    /// replica, or a cache not synced yet) straight from the API server.
    async fn observe(
        &self,
        watch: &JobSetNamespaceWatch,
        id: &ExecutionId,
        synced: bool,
    ) -> Result<Option<Found>> {
        if let Some(found) = self.cached(watch, id) {
            if watch.children_current() {
                return Ok(Some(found));
            }
            let (jobs, pods) = self.list_children(&id.namespace, &id.name).await?;
            return Ok(Some(Found {
                jobs,
                pods,
                listed: true,
                ..found
            }));
        }
        // The server said a moment ago it has no such JobSet, and the watch, current since,
        // has not delivered one.
        let current = watch.jobsets.is_current();
        if current
            && self.namespaces.absent_lately(
                &id.namespace,
                &id.name,
                self.settings.reflector.absent_ttl,
            )
        {
            return Ok(None);
        }
        debug!(message = "cache miss", id = %id, synced);
        self.cluster.check_reachable()?;
        let Some(object) = self
            .objects(&id.namespace)
            .get(&self.cluster, &id.name)
            .await?
        else {
            if current {
                self.namespaces.note_absent(&id.namespace, &id.name);
            }
            return Ok(None);
        };
        let (jobs, pods) = self.list_children(&id.namespace, &id.name).await?;
        Ok(Some(Found {
            observed: Observed::Present(view_of(&object)),
            jobs,
            pods,
            listed: true,
        }))
    }

    /// The Jobs and pods of the JobSet `name`, listed from the API server.
    async fn list_children(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(Vec<ChildJobView>, Vec<ChildPod>)> {
        let selector = format!("{JOBSET_NAME_LABEL}={name}");
        let (jobs, pods) = self.all_children(Some(namespace), &selector).await?;
        Ok((
            jobs.into_iter().map(|(_, _, job)| job).collect(),
            pods.into_iter().map(|(_, _, pod)| pod).collect(),
        ))
    }

    /// The Jobs and pods of kubeferry's JobSets matching `selector` (narrowed to the children
    /// of kubeferry's JobSets), with their namespace and JobSet.
    async fn all_children(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<ChildrenListed> {
        let selector = match selector {
            "" => children_selector(),
            narrower => format!("{},{narrower}", children_selector()),
        };
        let params = ListParams::default().labels(&selector);
        let scope = namespace.unwrap_or(ALL_NAMESPACES);
        let (jobs_api, pods_api): (Api<Job>, Api<Pod>) = match namespace {
            Some(namespace) => (
                Api::namespaced(self.cluster.client().clone(), namespace),
                Api::namespaced(self.cluster.client().clone(), namespace),
            ),
            None => (
                Api::all(self.cluster.client().clone()),
                Api::all(self.cluster.client().clone()),
            ),
        };
        let op = Op::collection("list", JOBS, scope);
        let jobs = self
            .cluster
            .call(&op, true, || jobs_api.list(&params))
            .await?;
        let op = Op::collection("list", PODS, scope);
        let pods = self
            .cluster
            .call(&op, true, || pods_api.list(&params))
            .await?;
        let jobs = jobs
            .items
            .iter()
            .filter_map(|job| {
                let view = ChildJobView::from(job);
                Some((view.job.namespace.clone(), view.jobset.clone()?, view))
            })
            .collect();
        let pods = pods
            .items
            .iter()
            .filter_map(|pod| {
                let (jobset, view) = ChildPod::of(pod)?;
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                Some((namespace, jobset, view))
            })
            .collect();
        Ok((jobs, pods))
    }

    fn no_such_job(&self, id: &ExecutionId, watch: &JobSetNamespaceWatch) -> Error {
        let hint = if watch.jobsets.tombstone(&id.name).is_some() {
            " (its JobSet was deleted: cancelled through another replica, expired after its TTL, or removed by someone else)"
        } else {
            " (never created on this cluster, or already removed: cancelled, deleted, or expired after its TTL)"
        };
        Error::NoSuchJob {
            id: id.clone(),
            hint: hint.to_string(),
        }
    }

    /// Maps an observation and remembers the answer. The action the mapping asks for, and the
    /// first record of an outcome, are the namespace's settler's: with [`Acting::Delegate`] (a
    /// status query, a wait, a list) such a job is handed to it and the answer is the
    /// settler's.
    async fn evaluate(&self, id: &ExecutionId, found: Found, acting: Acting) -> Result<Evaluated> {
        let previous = self.namespaces.last_reported(&id.namespace, &id.name);
        let Found {
            mut observed,
            mut jobs,
            mut pods,
            mut listed,
        } = found;
        // A watch cache lagging a fresh read: its older copy tells nothing new.
        if let (Some(previous), Observed::Present(view)) = (&previous, &observed)
            && self
                .namespaces
                .is_older(&id.namespace, &id.name, view.resource_version.as_deref())
        {
            return Ok(Evaluated {
                info: previous.clone(),
                recheck_at: None,
            });
        }
        if let Observed::Present(view) = &observed
            && self.found_gone.contains(&copy_key(view))
        {
            observed = Observed::Vanished(view.clone(), false);
        }
        for _ in 0..4 {
            let pod_views: Vec<_> = pods.iter().map(|p| p.view.clone()).collect();
            let Some(mapped) = jobset_status(
                &observed.as_observation(),
                &jobs,
                &pod_views,
                Timestamp::now(),
                &self.settings.mapping,
                previous.as_ref(),
            ) else {
                return Err(Error::NoSuchJob {
                    id: id.clone(),
                    hint: " (its JobSet is gone and what became of it is unknown: if it was being cancelled, it was cancelled)".into(),
                });
            };
            // The outcome's details come from the Jobs and pods as of the outcome; their
            // watches may lag the JobSet's, so they are listed once before an outcome is first
            // reported, and every replica reports the same details.
            let deciding = mapped.info.is_terminal() || mapped.action.is_some();
            if deciding && !listed && previous.as_ref().is_none_or(|p| !p.is_terminal()) {
                listed = true;
                let name = observed.view().name.clone();
                if let Ok((fresh_jobs, fresh_pods)) = self.list_children(&id.namespace, &name).await
                {
                    jobs = fresh_jobs;
                    pods = fresh_pods;
                    continue;
                }
            }
            let unrecorded = acting == Acting::Delegate
                && self
                    .awaits_record(id, &mapped.info, previous.as_ref())
                    .await;
            if acting == Acting::Delegate && (mapped.action.is_some() || unrecorded) {
                let holding = if mapped.info.is_terminal() {
                    previous.clone().unwrap_or_else(|| {
                        ExecutionInfo::new(JobState::Queued, kubeferry_core::Reason::Pending)
                    })
                } else {
                    mapped.info.clone()
                };
                let found = Found {
                    observed,
                    jobs,
                    pods,
                    listed,
                };
                // Bounded: a settler held up by a slow API server must not hold the question.
                let info = match tokio::time::timeout(
                    self.settings.sync_timeout,
                    self.settle_now(id, found),
                )
                .await
                {
                    Ok(settled) => settled?,
                    Err(_) => ExecutionInfo {
                        message: format!(
                            "{}; not done yet: the namespace's settler is still busy",
                            holding.message
                        ),
                        ..holding
                    },
                };
                return Ok(Evaluated {
                    info,
                    recheck_at: None,
                });
            }
            if let Some(warning) = &mapped.warning
                && self.warned.insert(format!("{id} {warning}"))
            {
                warn!(message = "unreadable status", id = %id, detail = %warning);
            }
            let recheck_at = mapped.recheck_at;
            let mut info = mapped.info;
            if let Some(JobSetAction::RecordOutcomeAndDelete { outcome }) = &mapped.action {
                match self.record_and_delete(id, observed.view(), outcome).await {
                    Acted::Done => info = outcome.clone(),
                    Acted::Remap(next) => {
                        if matches!(*next, Observed::Vanished(_, false)) {
                            self.found_gone.insert(copy_key(observed.view()));
                        }
                        observed = *next;
                        continue;
                    }
                    Acted::Failed(error) => {
                        warn!(message = "could not act on the job's status; will retry", id = %id, %error);
                        if !matches!(error, Error::Forbidden { .. }) {
                            info.message = format!("{}; not done yet: {error}", info.message);
                        }
                        self.remember_from(id, &info, &observed);
                        if matches!(error, Error::Forbidden { .. }) {
                            return Err(error);
                        }
                        let retry = jiff::SignedDuration::try_from(self.settings.recheck_interval)
                            .ok()
                            .and_then(|after| Timestamp::now().checked_add(after).ok());
                        return Ok(Evaluated {
                            info,
                            recheck_at: retry,
                        });
                    }
                }
            }
            self.remember_from(id, &info, &observed);
            // What stands: an answer computed at the same time from a newer copy wins.
            let info = self
                .namespaces
                .last_reported(&id.namespace, &id.name)
                .unwrap_or(info);
            let mut recheck_at = recheck_at.filter(|_| !info.is_terminal());
            if acting == Acting::Carry
                && info.is_terminal()
                && let Err(error) = self.keep(id, observed.view(), &info).await
            {
                warn!(message = "could not keep an outcome record; will retry", id = %id, %error);
                recheck_at = jiff::SignedDuration::try_from(retry_delay(
                    &error,
                    self.settings.recheck_interval,
                ))
                .ok()
                .and_then(|after| Timestamp::now().checked_add(after).ok());
            }
            return Ok(Evaluated { info, recheck_at });
        }
        Err(Error::Contended {
            operation: format!("status {id}"),
            message: "the JobSet kept changing while kubeferry acted on it; ask again".into(),
        })
    }

    /// Remembers an answer, computed from `observed`, as the one later answers build on.
    fn remember_from(&self, id: &ExecutionId, info: &ExecutionInfo, observed: &Observed) {
        let version = match observed {
            Observed::Present(view) => view.resource_version.as_deref(),
            Observed::Vanished(..) => None,
        };
        self.remember(id, info, version);
    }

    /// Keeps the outcome record of a job that ended (nothing when it is kept already).
    async fn keep(
        &self,
        id: &ExecutionId,
        view: &JobSetView,
        outcome: &ExecutionInfo,
    ) -> Result<()> {
        let record = OutcomeRecord {
            kind: JobKind::JobSet,
            object: view.name.clone(),
            job_id: view.job_id.clone(),
            spec_hash: view.spec_hash.clone(),
            outcome: outcome.clone(),
            recorded_at: Some(Timestamp::now()),
            cancelled_by: None,
        };
        self.records.keep(&id.namespace, record).await.map(|_| ())
    }

    /// Records an outcome kubeferry decided (a pod of the set can never start) on the JobSet,
    /// then deletes it; only then may the outcome be reported.
    async fn record_and_delete(
        &self,
        id: &ExecutionId,
        view: &JobSetView,
        outcome: &ExecutionInfo,
    ) -> Acted {
        let objects = self.objects(&id.namespace);
        let mut last = view.clone();
        if !matches!(view.recorded_outcome, Some(Ok(_))) {
            let record = kubeferry_core::marks::outcome_record(outcome);
            match objects
                .annotate(
                    &self.cluster,
                    &id.name,
                    view.resource_version.as_deref(),
                    OUTCOME_ANNOTATION,
                    &record,
                    true,
                )
                .await
            {
                Ok(patched) => last = view_of(&patched),
                Err(error) if error.is_conflict() => return self.reread(id, view).await,
                Err(error) if error.is_not_found() => {
                    return Acted::Remap(Box::new(Observed::Vanished(view.clone(), false)));
                }
                Err(error) => return Acted::Failed(error),
            }
            info!(message = "recorded an outcome kubeferry decided", id = %id, state = %outcome.state, reason = %outcome.reason);
        }
        match objects
            .delete(
                &self.cluster,
                &id.name,
                &last.uid,
                last.resource_version.as_deref(),
            )
            .await
        {
            Ok(Deletion::Deleted) => {
                info!(message = "deleted a JobSet after recording its outcome", id = %id);
                Acted::Done
            }
            Ok(Deletion::Gone) => Acted::Remap(Box::new(Observed::Vanished(last, false))),
            Ok(Deletion::Conflict) => self.reread(id, &last).await,
            Err(error) => Acted::Failed(error),
        }
    }

    /// The JobSet as it is now, to be mapped again.
    async fn reread(&self, id: &ExecutionId, last: &JobSetView) -> Acted {
        match self
            .objects(&id.namespace)
            .get(&self.cluster, &id.name)
            .await
        {
            Ok(Some(object)) => Acted::Remap(Box::new(Observed::Present(view_of(&object)))),
            Ok(None) => Acted::Remap(Box::new(Observed::Vanished(last.clone(), false))),
            Err(error) => Acted::Failed(error),
        }
    }

    /// The managed JobSets of `namespace` (of every namespace when `None`) that match
    /// `selector`, with their Jobs and pods. None when the cluster does not serve JobSets.
    async fn listed_jobsets(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Listed<Found>>> {
        if !self.installed().await? {
            return Ok(Vec::new());
        }
        let objects = self.list_objects(namespace, selector).await?;
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let (jobs, pods) = self.all_children(namespace, "").await?;
        let mut listed = Vec::new();
        for object in objects {
            let view = view_of(&object);
            let mine =
                |(ns, jobset): (&String, &String)| *ns == view.namespace && *jobset == view.name;
            let set_jobs: Vec<ChildJobView> = jobs
                .iter()
                .filter(|(ns, js, _)| mine((ns, js)))
                .map(|(_, _, job)| job.clone())
                .collect();
            let set_pods: Vec<ChildPod> = pods
                .iter()
                .filter(|(ns, js, _)| mine((ns, js)))
                .map(|(_, _, pod)| pod.clone())
                .collect();
            let newest = set_pods
                .iter()
                .max_by_key(|p| (p.view.created_at, p.view.name.clone()))
                .map(|p| (p.view.name.clone(), p.node.clone()));
            listed.push(Listed {
                id: self.id(&view.namespace, &view.name),
                job_id: view.job_id.clone(),
                created_at: view.created_at,
                newest,
                attempts: set_pods.len(),
                found: Found {
                    observed: Observed::Present(view),
                    jobs: set_jobs,
                    pods: set_pods,
                    listed: true,
                },
            });
        }
        Ok(listed)
    }

    async fn list_objects(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<DynamicObject>> {
        let api = match namespace {
            Some(namespace) => self.objects(namespace).api,
            None => Api::all_with(self.cluster.client().clone(), &api_resource()),
        };
        let params = ListParams::default().labels(selector);
        let op = Op::collection("list", RESOURCE, namespace.unwrap_or(ALL_NAMESPACES));
        let list = self.cluster.call(&op, true, || api.list(&params)).await?;
        Ok(list.items)
    }

    /// Follows which managed JobSets of `namespace` match `selector`, as
    /// [`crate::container::ContainerJobs::matching`] does for Jobs: one watch of JobSets for as
    /// long as the stream is read, none on a cluster that does not serve them (the stream then
    /// only says it has listed). While discovery fails, it is tried again with backoff and the
    /// stream does not report its listing done.
    pub fn matching(
        self: &Arc<Self>,
        namespace: &str,
        selector: &str,
    ) -> impl futures::Stream<Item = crate::selector::SelectorEvent> + Send + 'static {
        use futures::StreamExt;
        let jobs = self.clone();
        let namespace = namespace.to_string();
        let selector = crate::selector::managed(selector);
        futures::stream::once(async move {
            let mut attempt = 0;
            let installed = loop {
                match jobs.installed().await {
                    Ok(installed) => break installed,
                    Err(error) => {
                        let retry = &jobs.cluster.settings().retry;
                        let delay = retry.backoff(attempt).max(retry.base);
                        warn!(message = "cannot discover whether the cluster serves JobSets; trying again", namespace = %namespace, %error, retry_in = ?delay);
                        tokio::time::sleep(delay).await;
                        attempt = attempt.saturating_add(1);
                    }
                }
            };
            let watches = if installed {
                vec![
                    crate::selector::label_watch(
                        jobs.objects(&namespace).api,
                        JobKind::JobSet,
                        &namespace,
                        &selector,
                        jobs.settings.reflector.watch_timeout,
                    )
                    .boxed(),
                ]
            } else {
                Vec::new()
            };
            crate::selector::merge(watches)
        })
        .flatten()
    }

    /// The first replicated job of the job's JobSet, as its spec lists them (the one whose
    /// first pod's log is the job's log when no replica is asked for).
    pub(crate) async fn first_replicated_job(&self, id: &ExecutionId) -> Result<Option<String>> {
        let watch = self.watch(&id.namespace).await?;
        if let Some(entry) = watch.jobsets.get(&id.name) {
            return Ok(entry
                .view
                .replicated_jobs
                .first()
                .map(|(name, _)| name.clone()));
        }
        let object = self
            .objects(&id.namespace)
            .get(&self.cluster, &id.name)
            .await?;
        Ok(object.and_then(|o| {
            view_of(&o)
                .replicated_jobs
                .first()
                .map(|(name, _)| name.clone())
        }))
    }
}

/// The Jobs and pods listed: each with its namespace and JobSet.
type ChildrenListed = (
    Vec<(String, String, ChildJobView)>,
    Vec<(String, String, ChildPod)>,
);

impl Kind for JobSets {
    type Object = DynamicObject;
    type Watches = JobSetNamespaceWatch;
    type Found = Found;

    const JOB_KIND: JobKind = JobKind::JobSet;

    fn namespaces(&self) -> &Namespaces<JobSetNamespaceWatch> {
        &self.namespaces
    }

    fn records(&self) -> &Arc<Records> {
        &self.records
    }

    async fn watch(&self, namespace: &str) -> Result<Arc<JobSetNamespaceWatch>> {
        JobSets::watch(self, namespace).await
    }

    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
        self.listed_jobsets(namespace, selector).await
    }

    async fn status_of(&self, id: &ExecutionId, found: Found) -> Result<ExecutionInfo> {
        if let Some(answer) = self.final_answer(id).await {
            return Ok(answer);
        }
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<DynamicObject>>> {
        if !self.installed().await? {
            return Ok(Vec::new());
        }
        let listed = self.list_objects(Some(namespace), MANAGED_SELECTOR).await?;
        Ok(vec![(self.objects(namespace), listed)])
    }

    fn holds(&self, id: &ExecutionId) -> bool {
        self.namespaces
            .existing(&id.namespace)
            .is_some_and(|watch| watch.holds(&id.name))
    }

    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        self.settlers.jobs_by_state()
    }

    fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn recheck_interval(&self) -> Duration {
        self.settings.recheck_interval
    }

    async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        JobSets::status(self, id).await
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<DynamicObject>>> {
        let Some(object) = self
            .objects(&id.namespace)
            .get(&self.cluster, &id.name)
            .await?
        else {
            return Ok(None);
        };
        let (jobs, pods) = self.list_children(&id.namespace, &id.name).await?;
        let status = self
            .evaluate(
                id,
                Found {
                    observed: Observed::Present(view_of(&object)),
                    jobs,
                    pods,
                    listed: true,
                },
                Acting::Delegate,
            )
            .await?
            .info;
        Ok(Some(Current {
            objects: self.objects(&id.namespace),
            meta: object.metadata,
            status,
        }))
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        let watch = self.watch(&id.namespace).await?;
        let mut pods = if watch.holds(&id.name)
            && watch.wait_synced(self.settings.sync_timeout).await
            && watch.children_current()
        {
            watch.children_of(&id.name).1
        } else {
            self.list_children(&id.namespace, &id.name).await?.1
        };
        // Oldest first: a restart's pods after the earlier restart's.
        pods.sort_by(|a, b| {
            (a.restart_attempt, a.view.created_at, &a.view.name).cmp(&(
                b.restart_attempt,
                b.view.created_at,
                &b.view.name,
            ))
        });
        Ok(pods
            .iter()
            .map(|pod| Attempt {
                pod: pod.view.name.clone(),
                uid: pod.view.uid.clone(),
                container: MAIN_CONTAINER.to_string(),
                started: pod
                    .view
                    .main
                    .as_ref()
                    .is_some_and(ContainerView::has_started),
                index: Some(pod.index),
                replica: Some(pod.replicated_job.clone()),
            })
            .collect())
    }
}

/// The view of a JobSet object.
fn view_of(object: &DynamicObject) -> JobSetView {
    JobSetView::from_parts(&object.metadata, &object.data)
}

/// One copy of a JobSet: its namespace, name and resourceVersion.
fn copy_key(view: &JobSetView) -> String {
    format!(
        "{}/{}@{}",
        view.namespace,
        view.name,
        view.resource_version.as_deref().unwrap_or("")
    )
}

impl Evaluates for JobSets {
    async fn observed(&self, watch: &JobSetNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        self.cached(watch, id)
    }

    async fn carry_out(
        &self,
        id: &ExecutionId,
        found: Found,
    ) -> Result<(ExecutionInfo, Option<Timestamp>)> {
        let evaluated = self.evaluate(id, found, Acting::Carry).await?;
        Ok((evaluated.info, evaluated.recheck_at))
    }

    fn retry_interval(&self) -> Duration {
        self.settings.recheck_interval
    }
}

impl EvaluatedWatch for JobSetNamespaceWatch {
    fn holds(&self, name: &str) -> bool {
        JobSetNamespaceWatch::holds(self, name)
    }

    fn names(&self) -> Vec<String> {
        self.jobsets
            .all()
            .into_iter()
            .map(|entry| entry.name)
            .collect()
    }

    fn watched(&self) -> Option<tokio::sync::watch::Receiver<usize>> {
        None
    }
}
