//! Bare pods (`kind: Pod`): one pod that runs once, no controller in between, as Airflow's
//! KubernetesPodOperator runs its pods.
//!
//! The status comes from a label-scoped watch of the namespace's bare pods (`tracker.rs`),
//! mapped by [`pod_status`]: a container job's rules for a Job of one pod that retries nothing.
//! The one action the mapping asks for (record an outcome kubeferry decided, then delete the
//! pod) is carried out by the namespace's settler (`crate::evaluating`), which also keeps each
//! ended pod's outcome record; a status query writes nothing. Submission, cancel, waiting,
//! logs, list and sweep follow the protocols every kind follows (`crate::protocol`). Its
//! timings and graces are a container job's ([`ContainerSettings`]).

pub mod tracker;

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kubeferry_core::container::ContainerView;
use kubeferry_core::marks::object_name;
use kubeferry_core::observation::Mapped;
use kubeferry_core::pod::{
    BARE_POD_SELECTOR, BARE_POD_VALUE, BarePodView, KIND_LABEL, PodAction, pod_status,
};
use kubeferry_core::spec::PodJobSpec;
use kubeferry_core::timeline;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind};

use crate::container::ContainerSettings;
use crate::error::Result;
use crate::evaluating::Evaluates;
use crate::kind::{Acting, Common, Kind, Listed, Looked, ManagedObjects, Relisted, Shared};
use crate::manifest::MAIN_CONTAINER;
use crate::manifest::pod::pod_manifest;
use crate::objects::{Attempt, Current, Objects};
use crate::replies::Placement;
use crate::replies::{DryRun, Submission};
use tracker::PodNamespaceWatch;

/// The resource of pods, as errors name it.
const RESOURCE: &str = "pods";

/// The bare pod backend of one cluster.
pub struct Pods {
    /// What it keeps in common with every kind: the cluster, each watched namespace's watches,
    /// settler and last answers, and the outcome records.
    common: Common<Pods>,
    /// A container job's settings: a bare pod is mapped, named and timed as one.
    settings: ContainerSettings,
}

/// The job's object as last seen.
type Seen = crate::kind::Seen<BarePodView>;

/// What is known of a job: its pod (there is nothing else to read).
pub(crate) type Found = crate::kind::Found<BarePodView, ()>;

impl Pods {
    /// A backend over `shared`.
    pub(crate) fn new(shared: &Shared, settings: ContainerSettings) -> Arc<Self> {
        Common::build(shared, settings.watching.clone(), |common| Self {
            common,
            settings,
        })
    }

    fn objects(&self, namespace: &str) -> Objects<Pod> {
        Objects {
            api: Api::namespaced(self.cluster().client().clone(), namespace),
            resource: RESOURCE,
            kind: Self::NOUN,
            namespace: namespace.to_string(),
            dependents_first: false,
        }
    }

    /// The pod a submission of `spec` under `job_id` would create, as kubeferry builds it or
    /// as the API server would store it ([`DryRun`]).
    pub(crate) async fn dry_run(
        &self,
        spec: &PodJobSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        let pod = pod_manifest(spec, job_id, &self.name(job_id), namespace);
        self.objects(namespace)
            .dry_run(self.cluster(), pod, mode)
            .await
    }

    /// Creates the pod for `spec` under `job_id` in `namespace`, or adopts the one a lost
    /// response already created; says whether the job id already named a job (nothing
    /// created).
    pub(crate) async fn submit_or_find(
        &self,
        spec: &PodJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        let name = self.name(job_id);
        let object = pod_manifest(spec, job_id, &name, namespace);
        self.submit_object(&self.objects(namespace), &object, job_id, &spec.hash())
            .await
    }

    /// The pod's name for `job_id`: a container job's Job's name.
    fn name(&self, job_id: &str) -> String {
        object_name(&self.settings.name_prefix, job_id)
    }

    /// The bare pods of `namespace` (of every namespace when `None`) that match `selector`
    /// (already narrowed to managed objects).
    async fn list_pods(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Pod>> {
        let api: Api<Pod> = match namespace {
            Some(namespace) => Api::namespaced(self.cluster().client().clone(), namespace),
            None => Api::all(self.cluster().client().clone()),
        };
        self.cluster()
            .list(&api, RESOURCE, namespace, &bare(selector))
            .await
    }
}

/// What a pod read from the API server tells of its job.
fn found_in(pod: &Pod) -> Found {
    Found {
        observed: Seen::Present(BarePodView::from(pod)),
        parts: (),
        listed: true,
    }
}

/// `selector` (already narrowed to managed objects) narrowed to bare pods.
fn bare(selector: &str) -> String {
    match selector.trim() {
        "" => BARE_POD_SELECTOR.to_string(),
        narrower => format!("{narrower},{KIND_LABEL}={BARE_POD_VALUE}"),
    }
}

impl Kind for Pods {
    type Object = Pod;
    type Watches = PodNamespaceWatch;

    const JOB_KIND: JobKind = JobKind::Pod;

    /// The watch of `namespace`, started (with its settler) if it is not yet.
    async fn watch(&self, namespace: &str) -> Result<Arc<PodNamespaceWatch>> {
        let cluster = self.cluster();
        let start =
            || PodNamespaceWatch::start(cluster, namespace, &self.settings.watching.reflector);
        Ok(self.common.watches(namespace, || Arc::new(start())))
    }

    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
        let pods = self.list_pods(namespace, selector).await?;
        Ok(pods
            .iter()
            .map(|pod| {
                let view = BarePodView::from(pod);
                Listed {
                    id: self.id(&view.namespace, &view.name),
                    job_id: view.job_id.clone(),
                    created_at: view.created_at,
                    newest: Some((view.name.clone(), view.pod.node_name.clone())),
                    attempts: 1,
                    found: Found {
                        observed: Seen::Present(view),
                        parts: (),
                        listed: true,
                    },
                }
            })
            .collect())
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<Pod>>> {
        let pods = self.list_pods(Some(namespace), "").await?;
        Ok(vec![(self.objects(namespace), pods)])
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<Pod>>> {
        let Some(pod) = self
            .objects(&id.namespace)
            .get(self.cluster(), &id.name)
            .await?
        else {
            return Ok(None);
        };
        let found = found_in(&pod);
        let objects = self.objects(&id.namespace);
        Ok(Some(
            self.read_now(id, (objects, pod.metadata), found, true)
                .await?,
        ))
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        let watch = self.watch(&id.namespace).await?;
        let view = match watch.pods.get(&id.name) {
            Some(entry) => Some(entry.view),
            None => self
                .objects(&id.namespace)
                .get(self.cluster(), &id.name)
                .await?
                .map(|pod| BarePodView::from(&pod)),
        };
        Ok(view
            .map(|view| Attempt {
                pod: view.pod.name.clone(),
                uid: view.pod.uid.clone(),
                container: MAIN_CONTAINER.to_string(),
                started: view
                    .pod
                    .main
                    .as_ref()
                    .is_some_and(ContainerView::has_started),
                index: None,
                replica: None,
            })
            .into_iter()
            .collect())
    }

    fn object_names(&self, job_id: &str) -> Vec<String> {
        vec![self.name(job_id)]
    }

    async fn served_apis(&self, namespace: &str) -> Result<Vec<Api<Pod>>> {
        Ok(vec![self.objects(namespace).api])
    }

    /// Bare pods share the API of pods with every other pod.
    fn narrowed(&self, selector: &str) -> String {
        bare(selector)
    }

    fn placement(&self, id: &ExecutionId) -> Option<Placement> {
        let entry = self
            .namespaces()
            .existing(&id.namespace)?
            .pods
            .get(&id.name)?;
        Some(Placement {
            pod: entry.view.pod.name.clone(),
            node: entry.view.pod.node_name.clone(),
            attempts: 1,
        })
    }

    type View = BarePodView;
    type Parts = ();
    type Action = PodAction;

    fn log_container(&self, _parts: &(), _pod: &str) -> Option<String> {
        Some(MAIN_CONTAINER.to_string())
    }

    fn common(&self) -> &Common<Self> {
        &self.common
    }

    async fn observed(&self, watch: &PodNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        Some(Found {
            observed: Seen::in_watch(&watch.pods, &id.name)?,
            parts: (),
            listed: false,
        })
    }

    async fn fetched(&self, _watch: &PodNamespaceWatch, id: &ExecutionId) -> Result<Option<Found>> {
        Ok(self
            .objects(&id.namespace)
            .get(self.cluster(), &id.name)
            .await?
            .as_ref()
            .map(found_in))
    }

    fn map(
        &self,
        _id: &ExecutionId,
        observed: &Seen,
        _parts: &(),
        (previous, now): (Option<&ExecutionInfo>, Timestamp),
    ) -> Option<Mapped<PodAction>> {
        pod_status(
            &observed.as_observation(),
            now,
            &self.settings.mapping,
            previous,
        )
    }

    /// Nothing besides the pod: a relist tells nothing a read of the pod does not.
    async fn relisted(&self, _: &ExecutionId, _: Looked<'_, Self>, _: Acting) -> Relisted<()> {
        Relisted::Same
    }

    fn objects_of(&self, view: &BarePodView) -> Objects<Pod> {
        self.objects(&view.namespace)
    }

    fn view_of(&self, _like: &BarePodView, object: &Pod) -> BarePodView {
        BarePodView::from(object)
    }

    fn attempts_in(&self, view: &BarePodView, _parts: &()) -> Vec<timeline::Attempt> {
        let pod = &view.pod;
        vec![timeline::Attempt::of(
            &pod.pod,
            pod.main.as_ref(),
            pod.node_name.as_deref(),
        )]
    }

    /// The pod itself says its work ended (its phase), its outcome perhaps not decided yet.
    fn work_ended(&self, view: &BarePodView, _parts: &()) -> bool {
        view.pod.phase_ended()
    }
}
