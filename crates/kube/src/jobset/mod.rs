//! JobSets (`jobset.x-k8s.io/v1alpha2`): submit, status, wait, cancel, logs, list and sweep.
//!
//! The status comes from label-scoped watches of the managed JobSets, of their Jobs and of
//! those Jobs' pods (`tracker.rs`), mapped by [`jobset_status`]: the JobSet's conditions decide,
//! the Job and pod that caused a failure say why. The one action the mapping asks for (record
//! the outcome of a set whose pod can never start, then delete the set) is carried out by the
//! namespace's settler (`crate::evaluating`), which also keeps each ended set's outcome record; a
//! status query writes nothing. Submission, cancel, waiting and logs follow the same protocols
//! as the other kinds (`crate::protocol`). A cluster that does not serve the JobSet CRD runs no
//! JobSets ([`Error::JobSetUnavailable`]) and lists none.

pub mod tracker;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kubeferry_core::container::{ContainerView, MappingConfig};
use kubeferry_core::jobset::{
    ChildJobView, JOBSET_GROUP, JOBSET_NAME_LABEL, JOBSET_VERSION, JOBSETS, JobSetAction,
    JobSetView, jobset_status,
};
use kubeferry_core::marks::{MANAGED_SELECTOR, jobset_object_name};
use kubeferry_core::observation::Mapped;
use kubeferry_core::spec::JobSetSpec;
use kubeferry_core::timeline;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind};
use tokio::time::Instant;

use crate::cluster::Op;
use crate::error::{Error, Result};
use crate::evaluating::Evaluates;
use crate::kind::{Acting, Common, Kind, Listed, ManagedObjects, Relisted, Shared, Watches};
use crate::manifest::MAIN_CONTAINER;
use crate::manifest::jobset::{api_resource, jobset_manifest};
use crate::objects::{Attempt, Current, Objects};
use crate::replies::{DryRun, Submission};
use crate::tracker::{Watching, lock};
use tracker::{ChildPod, JobSetNamespaceWatch, children_selector};

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
    /// Its watches, and how long and how often their readers wait.
    pub watching: Watching,
    /// How long what discovery found out (whether the JobSet CRD is served) is trusted.
    pub discovery_ttl: Duration,
}

impl Default for JobSetSettings {
    fn default() -> Self {
        Self {
            mapping: MappingConfig::default(),
            watching: Watching::default(),
            discovery_ttl: Duration::from_secs(60),
        }
    }
}

/// The JobSet backend of one cluster.
pub struct JobSets {
    /// What it keeps in common with every kind: the cluster, each watched namespace's watches,
    /// settler and last answers, and the outcome records.
    common: Common<JobSets>,
    settings: JobSetSettings,
    /// Whether the cluster serves the JobSet CRD, and since when that is known.
    installed: Mutex<Option<(Instant, bool)>>,
    /// Held while discovery asks: concurrent callers wait for its answer, not ask again.
    discovering: tokio::sync::Mutex<()>,
}

/// The job's object as last seen.
type Seen = crate::kind::Seen<JobSetView>;

/// What is known of a job: its JobSet, the set's Jobs and their pods.
pub(crate) type Found = crate::kind::Found<JobSetView, Children>;

/// A JobSet's Jobs and their pods.
pub(crate) struct Children {
    jobs: Vec<ChildJobView>,
    pods: Vec<ChildPod>,
}

impl JobSets {
    /// A backend over `shared`.
    pub(crate) fn new(shared: &Shared, settings: JobSetSettings) -> Arc<Self> {
        Common::build(shared, settings.watching.clone(), |common| Self {
            common,
            installed: Mutex::new(None),
            discovering: tokio::sync::Mutex::new(()),
            settings,
        })
    }

    fn objects(&self, namespace: &str) -> Objects<DynamicObject> {
        Objects {
            api: Api::namespaced_with(self.cluster().client().clone(), namespace, &api_resource()),
            resource: RESOURCE,
            kind: Self::NOUN,
            namespace: namespace.to_string(),
            dependents_first: true,
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
        let client = self.cluster().client();
        let installed = match self
            .cluster()
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

    /// The JobSet a submission of `spec` under `job_id` would create, as kubeferry builds it
    /// or as the API server would store it ([`DryRun`]).
    pub(crate) async fn dry_run(
        &self,
        spec: &JobSetSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        let object = planned(spec, job_id, namespace)?;
        if mode == DryRun::Server {
            self.check_installed(namespace).await?;
        }
        self.objects(namespace)
            .dry_run(self.cluster(), object, mode)
            .await
    }

    /// Creates the JobSet for `spec` under `job_id` in `namespace`, or adopts the one a lost
    /// response already created; says whether the job id already named a job (nothing
    /// created).
    pub async fn submit_or_find(
        &self,
        spec: &JobSetSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        self.check_installed(namespace).await?;
        let object = planned(spec, job_id, namespace)?;
        self.submit_object(&self.objects(namespace), &object, job_id, &spec.hash())
            .await
    }

    /// The JobSet's metadata and what is known of it, with its Jobs and pods, read from the
    /// API server; `None` when there is no JobSet.
    async fn fetch(&self, id: &ExecutionId) -> Result<Option<(ObjectMeta, Found)>> {
        let Some(object) = self
            .objects(&id.namespace)
            .get(self.cluster(), &id.name)
            .await?
        else {
            return Ok(None);
        };
        let found = Found {
            observed: Seen::Present(view_of(&object)),
            parts: self.list_children(&id.namespace, &id.name).await?,
            listed: true,
        };
        Ok(Some((object.metadata, found)))
    }

    /// The Jobs and pods of the JobSet `name`, listed from the API server.
    async fn list_children(&self, namespace: &str, name: &str) -> Result<Children> {
        let selector = format!("{JOBSET_NAME_LABEL}={name}");
        let (jobs, pods) = self.all_children(Some(namespace), &selector).await?;
        Ok(Children {
            jobs: jobs.into_iter().map(|(_, _, job)| job).collect(),
            pods: pods.into_iter().map(|(_, _, pod)| pod).collect(),
        })
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
        let (jobs_api, pods_api): (Api<Job>, Api<Pod>) = match namespace {
            Some(namespace) => (
                Api::namespaced(self.cluster().client().clone(), namespace),
                Api::namespaced(self.cluster().client().clone(), namespace),
            ),
            None => (
                Api::all(self.cluster().client().clone()),
                Api::all(self.cluster().client().clone()),
            ),
        };
        let cluster = self.cluster();
        let jobs = cluster.list(&jobs_api, JOBS, namespace, &selector).await?;
        let pods = cluster.list(&pods_api, PODS, namespace, &selector).await?;
        let jobs = jobs
            .iter()
            .filter_map(|job| {
                let view = ChildJobView::from(job);
                Some((view.job.namespace.clone(), view.jobset.clone()?, view))
            })
            .collect();
        let pods = pods
            .iter()
            .filter_map(|pod| {
                let (jobset, view) = ChildPod::of(pod)?;
                let namespace = pod.metadata.namespace.clone().unwrap_or_default();
                Some((namespace, jobset, view))
            })
            .collect();
        Ok((jobs, pods))
    }

    async fn list_objects(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<DynamicObject>> {
        let api = match namespace {
            Some(namespace) => self.objects(namespace).api,
            None => Api::all_with(self.cluster().client().clone(), &api_resource()),
        };
        self.cluster()
            .list(&api, RESOURCE, namespace, selector)
            .await
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
            .get(self.cluster(), &id.name)
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

    const JOB_KIND: JobKind = JobKind::JobSet;

    /// The watches of `namespace`, started (with its settler) if they are not yet.
    async fn watch(&self, namespace: &str) -> Result<Arc<JobSetNamespaceWatch>> {
        if self.namespaces().existing(namespace).is_none() {
            self.check_installed(namespace).await?;
        }
        let cluster = self.cluster();
        let start =
            || JobSetNamespaceWatch::start(cluster, namespace, &self.settings.watching.reflector);
        Ok(self.common.watches(namespace, || Arc::new(start())))
    }

    /// The managed JobSets of `namespace` (of every namespace when `None`) that match
    /// `selector`, with their Jobs and pods. None when the cluster does not serve JobSets.
    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
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
                    observed: Seen::Present(view),
                    parts: Children {
                        jobs: set_jobs,
                        pods: set_pods,
                    },
                    listed: true,
                },
            });
        }
        Ok(listed)
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<DynamicObject>>> {
        if !self.installed().await? {
            return Ok(Vec::new());
        }
        let listed = self.list_objects(Some(namespace), MANAGED_SELECTOR).await?;
        Ok(vec![(self.objects(namespace), listed)])
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<DynamicObject>>> {
        let Some((meta, found)) = self.fetch(id).await? else {
            return Ok(None);
        };
        let objects = self.objects(&id.namespace);
        Ok(Some(self.read_now(id, (objects, meta), found, true).await?))
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        let watch = self.watch(&id.namespace).await?;
        let mut pods = if watch.holds(&id.name)
            && watch.wait_synced(self.settings.watching.sync_timeout).await
            && watch.children_current()
        {
            watch.children_of(&id.name).1
        } else {
            self.list_children(&id.namespace, &id.name).await?.pods
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

    fn object_names(&self, job_id: &str) -> Vec<String> {
        vec![jobset_object_name(job_id)]
    }

    async fn served(&self) -> bool {
        self.installed().await.unwrap_or(false)
    }

    async fn subscribed(&self, namespace: &str) -> Result<Option<Arc<JobSetNamespaceWatch>>> {
        if !self.installed().await? {
            return Ok(None);
        }
        self.watch(namespace).await.map(Some)
    }

    async fn log_part(
        &self,
        id: &ExecutionId,
        replica: Option<String>,
        index: Option<u32>,
    ) -> Result<(Option<String>, Option<u32>)> {
        // The first replicated job of the JobSet's spec, and its Job 0.
        let replica = match replica {
            Some(replica) => Some(replica),
            None => self.first_replicated_job(id).await?,
        };
        Ok((replica, Some(index.unwrap_or(0))))
    }

    type View = JobSetView;
    type Parts = Children;
    type Action = JobSetAction;

    fn log_container(&self, _children: &Children, _pod: &str) -> Option<String> {
        Some(MAIN_CONTAINER.to_string())
    }

    fn attempts_in(&self, _view: &JobSetView, children: &Children) -> Vec<timeline::Attempt> {
        let mut pods: Vec<&ChildPod> = children.pods.iter().collect();
        pods.sort_by_key(|pod| (pod.view.created_at, pod.view.name.clone()));
        pods.iter()
            .map(|pod| {
                let view = &pod.view;
                timeline::Attempt::of(&view.pod, view.main.as_ref(), pod.node.as_deref())
            })
            .collect()
    }

    fn common(&self) -> &Common<Self> {
        &self.common
    }

    async fn observed(&self, watch: &JobSetNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        let observed = Seen::in_watch(&watch.jobsets, &id.name)?;
        let (jobs, pods) = watch.children_of(&id.name);
        Some(Found {
            observed,
            parts: Children { jobs, pods },
            listed: false,
        })
    }

    async fn complete(
        &self,
        watch: &JobSetNamespaceWatch,
        id: &ExecutionId,
        found: Found,
    ) -> Result<Found> {
        if watch.children_current() {
            return Ok(found);
        }
        Ok(Found {
            parts: self.list_children(&id.namespace, &id.name).await?,
            listed: true,
            ..found
        })
    }

    async fn fetched(
        &self,
        _watch: &JobSetNamespaceWatch,
        id: &ExecutionId,
    ) -> Result<Option<Found>> {
        Ok(self.fetch(id).await?.map(|(_, found)| found))
    }

    fn map(
        &self,
        _id: &ExecutionId,
        observed: &Seen,
        children: &Children,
        (previous, now): (Option<&ExecutionInfo>, Timestamp),
    ) -> Option<Mapped<JobSetAction>> {
        let pods: Vec<_> = children.pods.iter().map(|p| p.view.clone()).collect();
        let mapping = &self.settings.mapping;
        let observed = observed.as_observation();
        jobset_status(&observed, &children.jobs, &pods, now, mapping, previous)
    }

    /// Children that cannot be listed leave the outcome to what the cache shows.
    async fn relisted(
        &self,
        id: &ExecutionId,
        (view, _, _): (&JobSetView, &Children, &Mapped<JobSetAction>),
        _acting: Acting,
    ) -> Relisted<Children> {
        match self.list_children(&id.namespace, &view.name).await {
            Ok(children) => Relisted::Fresh(children),
            Err(_) => Relisted::Same,
        }
    }

    fn objects_of(&self, view: &JobSetView) -> Objects<DynamicObject> {
        self.objects(&view.namespace)
    }

    fn view_of(&self, _like: &JobSetView, object: &DynamicObject) -> JobSetView {
        view_of(object)
    }

    /// The JobSets of the namespace, if the cluster serves them.
    async fn served_apis(&self, namespace: &str) -> Result<Vec<Api<DynamicObject>>> {
        let served = self.installed().await?;
        Ok(served
            .then(|| self.objects(namespace).api)
            .into_iter()
            .collect())
    }
}

/// The view of a JobSet object.
fn view_of(object: &DynamicObject) -> JobSetView {
    JobSetView::from_parts(&object.metadata, &object.data)
}

/// The JobSet a submission of `spec` under `job_id` builds.
fn planned(spec: &JobSetSpec, job_id: &str, namespace: &str) -> Result<DynamicObject> {
    let name = jobset_object_name(job_id);
    let manifest = jobset_manifest(spec, job_id, &name, namespace);
    let object = serde_json::from_value(manifest).map_err(|source| Error::Manifest {
        operation: format!("build JobSet {namespace}/{name}"),
        source,
    })?;
    Ok(object)
}
