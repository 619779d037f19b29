//! Spark jobs (SparkApplications of apache/spark-kubernetes-operator or of the Kubeflow
//! spark-operator): submit, status, wait, cancel, logs, list and sweep.
//!
//! `docs/spark.md` ("The contract of the Spark backend") is what this follows: the operator
//! is resolved and checked before anything is created; the status comes from a label-scoped
//! watch of the SparkApplications of every installed operator and of their driver pods, mapped
//! by [`spark_status`]; the [`SparkAction`]s the mapping asks for are carried out by the
//! namespace's settler (`crate::evaluating`) before the outcome they carry is reported
//! (record-then-delete for an application the operator never took up; deleting the driver of
//! a failed application that still runs), and a status query writes nothing; a driver pod that
//! cannot be looked up (a 403 on `list pods`) is a named error that never holds a job back.
//! Submission, cancel, waiting and logs follow the same protocols as container jobs
//! (`crate::protocol`).

pub mod tracker;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions, PropagationPolicy};
use kubeferry_core::container::{ContainerStateView, ContainerView};
use kubeferry_core::marks::{MANAGED_SELECTOR, dns1035_object_name, object_name};
use kubeferry_core::observation::Mapped;
use kubeferry_core::spark::{
    DRIVER_CONTAINER, DriverView, RestartPolicyView, SparkAction, SparkAppView, SparkMappingConfig,
    SparkOperator, spark_status,
};
use kubeferry_core::spec::SparkJobSpec;
use kubeferry_core::timeline;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind};
use tokio::time::Instant;
use tracing::info;

use crate::cluster::Op;
use crate::error::ALL_NAMESPACES;
use crate::error::{Error, Result};
use crate::evaluating::Evaluates;
use crate::kind::{
    Acted, Acting, Common, Kind, KindHealth, Listed, ManagedObjects, Outcome, Relisted, Shared,
    Watches,
};
use crate::manifest::spark::{api_resource, spark_application};
use crate::objects::{Attempt, Current, Objects};
use crate::replies::{DryRun, Submission};
use crate::tracker::{Watching, lock};
use tracker::{SparkNamespaceWatch, app_of_pod, driver_pods_selector};

const PODS: &str = "pods";

/// A managed driver pod as listed, with where it belongs and runs.
struct Driver {
    namespace: String,
    app: String,
    node: Option<String>,
    view: DriverView,
}

/// Timings and choices of the Spark job backend; every timing is configurable so that tests
/// run fast.
#[derive(Clone, Debug)]
pub struct SparkSettings {
    /// Timeouts of the status mapping (the no-status timeout).
    pub mapping: SparkMappingConfig,
    /// Its watches, and how long and how often their readers wait.
    pub watching: Watching,
    /// A prefix for object names (a DNS label, may be empty).
    pub name_prefix: String,
    /// The operator of job files that name none. `None`: the one whose SparkApplication CRD
    /// the cluster has (apache when it has both).
    pub default_operator: Option<SparkOperator>,
    /// How long what discovery found out (which operators' CRDs are installed) is trusted.
    pub discovery_ttl: Duration,
}

impl Default for SparkSettings {
    fn default() -> Self {
        Self {
            mapping: SparkMappingConfig::default(),
            watching: Watching::default(),
            name_prefix: String::new(),
            default_operator: None,
            discovery_ttl: Duration::from_secs(60),
        }
    }
}

/// The resource of an operator's SparkApplications, as errors name it.
pub fn resource(operator: SparkOperator) -> &'static str {
    match operator {
        SparkOperator::Apache => "sparkapplications.spark.apache.org",
        SparkOperator::Kubeflow => "sparkapplications.sparkoperator.k8s.io",
    }
}

/// The Spark job backend of one cluster.
pub struct SparkJobs {
    /// What it keeps in common with every kind: the cluster, each watched namespace's watches,
    /// settler and last answers, and the outcome records.
    common: Common<SparkJobs>,
    settings: SparkSettings,
    /// The operators the cluster serves, and since when that is known.
    installed: Mutex<Option<(Instant, Vec<SparkOperator>)>>,
}

/// The job's object as last seen.
type Seen = crate::kind::Seen<SparkAppView>;

/// What is known of a job: its application (the view says of which operator) and its
/// driver pods.
pub(crate) type Found = crate::kind::Found<SparkAppView, Drivers>;

/// An application's driver pods, or why they could not be looked up.
pub(crate) struct Drivers {
    pods: Vec<DriverView>,
    lookup_error: Option<String>,
}

impl Drivers {
    fn of(looked_up: Result<Vec<DriverView>, String>) -> Self {
        match looked_up {
            Ok(pods) => Drivers {
                pods,
                lookup_error: None,
            },
            Err(error) => Drivers {
                pods: Vec::new(),
                lookup_error: Some(error),
            },
        }
    }
}

impl SparkJobs {
    /// A backend over `shared`.
    pub(crate) fn new(shared: &Shared, settings: SparkSettings) -> Arc<Self> {
        Common::build(shared, settings.watching.clone(), |common| Self {
            common,
            installed: Mutex::new(None),
            settings,
        })
    }

    /// The watches of `namespace`, if they are started.
    pub(crate) fn existing(&self, namespace: &str) -> Option<Arc<SparkNamespaceWatch>> {
        self.namespaces().existing(namespace)
    }

    /// The namespaces watched so far, with their watches.
    #[cfg(feature = "internals")]
    pub fn watched(&self) -> Vec<(String, Arc<SparkNamespaceWatch>)> {
        self.namespaces().watched()
    }

    fn objects(&self, operator: SparkOperator, namespace: &str) -> Objects<DynamicObject> {
        Objects {
            api: Api::namespaced_with(
                self.cluster().client().clone(),
                namespace,
                &api_resource(operator),
            ),
            resource: resource(operator),
            kind: Self::NOUN,
            namespace: namespace.to_string(),
            dependents_first: false,
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster().client().clone(), namespace)
    }

    /// The operators whose SparkApplication CRD the cluster serves (discovery, cached).
    pub async fn installed(&self) -> Result<Vec<SparkOperator>> {
        if let Some((at, operators)) = &*lock(&self.installed)
            && at.elapsed() < self.settings.discovery_ttl
        {
            return Ok(operators.clone());
        }
        let mut operators = Vec::new();
        for operator in SparkOperator::ALL {
            let api_version = operator.api_version();
            let op = Op::named("get", "apis", "", &api_version);
            let client = self.cluster().client();
            match self
                .cluster()
                .call(&op, true, || client.list_api_group_resources(&api_version))
                .await
            {
                Ok(list) if list.resources.iter().any(|r| r.name == "sparkapplications") => {
                    operators.push(operator);
                }
                Ok(_) | Err(Error::Api { code: 404, .. }) => {}
                Err(error) => return Err(error),
            }
        }
        *lock(&self.installed) = Some((Instant::now(), operators.clone()));
        Ok(operators)
    }

    /// The operator of job files that name none: the configured one, else the one installed
    /// (apache when both are).
    pub async fn default_operator(&self) -> Result<SparkOperator> {
        if let Some(operator) = self.settings.default_operator {
            return Ok(operator);
        }
        match self.installed().await?.first() {
            Some(operator) => Ok(*operator),
            None => Err(Error::SparkUnavailable {
                detail: "the job file names no Spark operator, none is configured (--spark-operator), and the cluster has neither operator's SparkApplication CRD (spark.apache.org/v1, sparkoperator.k8s.io/v1beta2)".into(),
            }),
        }
    }

    /// The operators in the order a job of unknown operator is looked up: the default first.
    fn lookup_order(&self) -> [SparkOperator; 2] {
        match self.settings.default_operator {
            Some(SparkOperator::Kubeflow) => [SparkOperator::Kubeflow, SparkOperator::Apache],
            _ => [SparkOperator::Apache, SparkOperator::Kubeflow],
        }
    }

    /// The operator, name and SparkApplication a submission of `spec` under `job_id` builds.
    async fn planned(
        &self,
        spec: &SparkJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<(SparkOperator, String, DynamicObject)> {
        let operator = match spec.operator {
            Some(operator) => operator,
            None => self.default_operator().await?,
        };
        spec.check_operator(operator)?;
        // The Kubeflow operator's webhook denies names that do not start with a letter.
        let name = match operator {
            SparkOperator::Kubeflow => dns1035_object_name(&self.settings.name_prefix, job_id),
            SparkOperator::Apache => object_name(&self.settings.name_prefix, job_id),
        };
        let manifest = spark_application(spec, operator, job_id, &name, namespace)?;
        let object = serde_json::from_value(manifest).map_err(|source| Error::Manifest {
            operation: format!("build SparkApplication {namespace}/{name}"),
            source,
        })?;
        Ok((operator, name, object))
    }

    /// The SparkApplication a submission of `spec` under `job_id` would create, as kubeferry
    /// builds it or as the API server would store it ([`DryRun`]).
    pub(crate) async fn dry_run(
        &self,
        spec: &SparkJobSpec,
        job_id: &str,
        namespace: &str,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        let (operator, _, object) = self.planned(spec, job_id, namespace).await?;
        self.objects(operator, namespace)
            .dry_run(self.cluster(), object, mode)
            .await
    }

    /// Creates the SparkApplication for `spec` under `job_id` in `namespace`, or adopts the
    /// one a lost response already created; says whether the job id already named a job
    /// (nothing created). The operator is the file's, else the cluster's; fields it cannot
    /// honour are refused before anything is created.
    pub async fn submit_or_find(
        &self,
        spec: &SparkJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<Submission> {
        let (operator, name, object) = self.planned(spec, job_id, namespace).await?;
        let submitted = self
            .submit_object(
                &self.objects(operator, namespace),
                &object,
                job_id,
                &spec.hash(),
            )
            .await;
        match submitted {
            Ok(submission) => Ok(submission),
            Err(Error::Api {
                code: 404, message, ..
            }) => Err(Error::SparkUnavailable {
                detail: format!(
                    "cannot create SparkApplication {namespace}/{name}: the server answered 404 ({message}); is the {operator} operator's CRD ({}) installed, and does namespace {namespace:?} exist?",
                    operator.api_version()
                ),
            }),
            Err(error) => Err(error),
        }
    }

    /// The application from the API server, looked up in each operator's group.
    async fn get(&self, id: &ExecutionId) -> Result<Option<(SparkOperator, SparkAppView)>> {
        Ok(self
            .get_object(id)
            .await?
            .map(|(op, object)| (op, view_of(op, &object))))
    }

    async fn get_object(&self, id: &ExecutionId) -> Result<Option<(SparkOperator, DynamicObject)>> {
        for operator in self.lookup_order() {
            match self
                .objects(operator, &id.namespace)
                .get(self.cluster(), &id.name)
                .await
            {
                Ok(Some(object)) => return Ok(Some((operator, object))),
                // Not there, or that operator's CRD is not installed.
                Ok(None) | Err(Error::Api { code: 404, .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(None)
    }

    /// The driver pods of an application: from the watch when it is healthy, else one list
    /// (then `listed` is true). A lookup that fails is kept as its error's text.
    async fn drivers(
        &self,
        watch: &SparkNamespaceWatch,
        operator: SparkOperator,
        namespace: &str,
        app: &str,
    ) -> (Drivers, bool) {
        if watch.drivers_synced() {
            return (Drivers::of(Ok(watch.drivers_of(app))), false);
        }
        let listed = self.list_drivers(operator, namespace, app).await;
        (Drivers::of(listed.map_err(|e| e.to_string())), true)
    }

    /// The driver pods of an application, listed from the API server, with the final states
    /// of deleted ones only the watch still knows (a disrupted driver is deleted a moment
    /// after, and only its final state tells why the application failed).
    async fn list_drivers(
        &self,
        operator: SparkOperator,
        namespace: &str,
        app: &str,
    ) -> Result<Vec<DriverView>> {
        let api = self.pods(namespace);
        let params = ListParams::default().labels(&operator.driver_selector(app));
        let op = Op::collection("list", PODS, namespace);
        let pods = self.cluster().call(&op, true, || api.list(&params)).await?;
        let mut drivers: Vec<DriverView> = pods.items.iter().map(DriverView::from).collect();
        if let Some(watch) = self.existing(namespace) {
            let departed: Vec<DriverView> = watch
                .departed_drivers_of(app)
                .into_iter()
                .filter(|gone| !drivers.iter().any(|d| d.uid == gone.uid))
                .collect();
            drivers.extend(departed);
        }
        Ok(drivers)
    }

    /// Carries out what the mapping asks for before it may report an outcome.
    async fn act_on(
        &self,
        id: &ExecutionId,
        view: &SparkAppView,
        action: &SparkAction,
    ) -> Acted<SparkAppView> {
        match action {
            SparkAction::RecordOutcomeAndDeleteApp { outcome } => {
                self.record_and_delete(id, view, outcome).await
            }
            SparkAction::DeleteDriverPod { name, uid, .. } => {
                match self.delete_driver(&id.namespace, name, uid).await {
                    Ok(()) => {
                        info!(message = "deleted the driver of a failed application", id = %id, pod = %name);
                        Acted::Done
                    }
                    Err(error) => Acted::Failed(error),
                }
            }
        }
    }

    /// Deletes a driver pod, only if it is still that pod (gone counts as done).
    async fn delete_driver(&self, namespace: &str, name: &str, uid: &str) -> Result<()> {
        let api = self.pods(namespace);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let op = Op::named("delete", PODS, namespace, name);
        match self
            .cluster()
            .call(&op, true, || api.delete(name, &params))
            .await
        {
            // 409: another pod of that name now; the one that outlived the failure is gone.
            Ok(_) | Err(Error::Api { code: 404, .. }) | Err(Error::Api { code: 409, .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn list_objects(
        &self,
        operator: SparkOperator,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<DynamicObject>> {
        let api = match namespace {
            Some(namespace) => self.objects(operator, namespace).api,
            None => Api::all_with(self.cluster().client().clone(), &api_resource(operator)),
        };
        self.cluster()
            .list(&api, resource(operator), namespace, selector)
            .await
    }

    /// Every managed driver pod of a namespace (of every namespace when `None`).
    async fn all_drivers(&self, namespace: Option<&str>) -> Result<Vec<Driver>> {
        let api = match namespace {
            Some(namespace) => self.pods(namespace),
            None => Api::all(self.cluster().client().clone()),
        };
        let params = ListParams::default().labels(&driver_pods_selector());
        let op = Op::collection("list", PODS, namespace.unwrap_or(ALL_NAMESPACES));
        let pods = self.cluster().call(&op, true, || api.list(&params)).await?;
        Ok(pods
            .items
            .iter()
            .filter_map(|pod| {
                Some(Driver {
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    app: app_of_pod(pod)?,
                    node: pod.spec.as_ref().and_then(|spec| spec.node_name.clone()),
                    view: DriverView::from(pod),
                })
            })
            .collect())
    }
}

impl Outcome for SparkAction {
    fn outcome(&self) -> &ExecutionInfo {
        SparkAction::outcome(self)
    }

    fn deletes_object(&self) -> bool {
        matches!(self, SparkAction::RecordOutcomeAndDeleteApp { .. })
    }
}

impl Kind for SparkJobs {
    type Object = DynamicObject;
    type Watches = SparkNamespaceWatch;

    const JOB_KIND: JobKind = JobKind::SparkApp;

    /// The watches of `namespace` (the driver pods, and the SparkApplications of every
    /// operator installed), started if they are not yet.
    async fn watch(&self, namespace: &str) -> Result<Arc<SparkNamespaceWatch>> {
        // The operators installed are asked once, when the namespace is first watched.
        let installed = match self.namespaces().existing(namespace) {
            Some(_) => Vec::new(),
            None => self.installed().await?,
        };
        let cluster = self.cluster();
        let start =
            || SparkNamespaceWatch::start(cluster, namespace, &self.settings.watching.reflector);
        let watch = self.common.watches(namespace, start);
        for operator in installed {
            watch.apps_of(operator);
        }
        Ok(watch)
    }

    /// The managed SparkApplications of `namespace` (of every installed operator), or of every
    /// namespace when it is `None`, that match `selector`, with their driver pods.
    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
        let mut listed = Vec::new();
        let installed = self.installed().await?;
        if installed.is_empty() {
            return Ok(listed);
        }
        let drivers = self.all_drivers(namespace).await;
        for operator in installed {
            for object in self.list_objects(operator, namespace, selector).await? {
                let view = view_of(operator, &object);
                let mine = |driver: &&Driver| {
                    driver.namespace == view.namespace && driver.app == view.name
                };
                let app_drivers = match &drivers {
                    Ok(all) => Ok(all.iter().filter(mine).map(|d| d.view.clone()).collect()),
                    Err(error) => Err(error.to_string()),
                };
                let newest = drivers.as_ref().ok().and_then(|all| {
                    all.iter()
                        .filter(mine)
                        .max_by_key(|d| (d.view.created_at, d.view.name.clone()))
                });
                let attempts = drivers
                    .as_ref()
                    .map_or(0, |all| all.iter().filter(mine).count());
                listed.push(Listed {
                    id: self.id(&view.namespace, &view.name),
                    job_id: view.job_id.clone(),
                    created_at: view.created_at,
                    newest: newest.map(|driver| (driver.view.name.clone(), driver.node.clone())),
                    attempts,
                    found: Found {
                        observed: Seen::Present(view),
                        parts: Drivers::of(app_drivers),
                        listed: true,
                    },
                });
            }
        }
        Ok(listed)
    }

    async fn managed(&self, namespace: &str) -> Result<Vec<ManagedObjects<DynamicObject>>> {
        let mut managed = Vec::new();
        for operator in self.installed().await? {
            let listed = self
                .list_objects(operator, Some(namespace), MANAGED_SELECTOR)
                .await?;
            managed.push((self.objects(operator, namespace), listed));
        }
        Ok(managed)
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<DynamicObject>>> {
        let Some((operator, object)) = self.get_object(id).await? else {
            return Ok(None);
        };
        let watch = self.watch(&id.namespace).await?;
        watch.apps_of(operator);
        let view = view_of(operator, &object);
        // The driver pods as the server lists them now; the cache stands in when it cannot.
        let (parts, listed) = match self.list_drivers(operator, &id.namespace, &id.name).await {
            Ok(pods) => (Drivers::of(Ok(pods)), true),
            Err(_) => {
                self.drivers(&watch, operator, &id.namespace, &id.name)
                    .await
            }
        };
        let fresh = listed && parts.lookup_error.is_none();
        let found = Found {
            observed: Seen::Present(view),
            parts,
            listed,
        };
        let objects = self.objects(operator, &id.namespace);
        Ok(Some(
            self.read_now(id, (objects, object.metadata), found, fresh)
                .await?,
        ))
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        let watch = self.watch(&id.namespace).await?;
        let known = watch
            .watched()
            .iter()
            .any(|(_, apps)| apps.get(&id.name).is_some());
        let mut drivers = if known
            && watch.wait_synced(self.settings.watching.sync_timeout).await
            && watch.drivers_synced()
        {
            watch.live_drivers_of(&id.name)
        } else {
            let api = self.pods(&id.namespace);
            let params = ListParams::default().labels(&driver_pods_selector());
            let op = Op::collection("list", PODS, &id.namespace);
            let pods = self.cluster().call(&op, true, || api.list(&params)).await?;
            pods.items
                .iter()
                .filter(|pod| app_of_pod(pod).as_deref() == Some(id.name.as_str()))
                .map(DriverView::from)
                .collect()
        };
        drivers.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        Ok(drivers
            .iter()
            .map(|driver| Attempt {
                pod: driver.name.clone(),
                uid: driver.uid.clone(),
                container: DRIVER_CONTAINER.to_string(),
                started: driver
                    .container
                    .as_ref()
                    .is_some_and(ContainerView::has_started),
                index: None,
                replica: None,
            })
            .collect())
    }

    fn object_names(&self, job_id: &str) -> Vec<String> {
        // One name per operator (the Kubeflow operator's start with a letter), each a
        // function of the job id.
        let mut names = vec![
            object_name(&self.settings.name_prefix, job_id),
            dns1035_object_name(&self.settings.name_prefix, job_id),
        ];
        names.dedup();
        names
    }

    async fn served(&self) -> bool {
        self.installed()
            .await
            .is_ok_and(|operators| !operators.is_empty())
    }

    fn namespace_health(&self, namespace: &str) -> KindHealth {
        // They start once the operators are discovered; a replica waits for them.
        match self.existing(namespace) {
            Some(watch) => KindHealth::Started(watch.health()),
            None => KindHealth::Starting,
        }
    }

    type View = SparkAppView;
    type Parts = Drivers;
    type Action = SparkAction;

    /// A driver that ended and will not run again (it succeeded, or the application restarts
    /// none): the operator's verdict is on its way.
    fn work_ended(&self, view: &SparkAppView, parts: &Drivers) -> bool {
        parts.pods.iter().any(|driver| {
            driver.container.as_ref().is_some_and(|container| {
                matches!(&container.state, ContainerStateView::Terminated(end)
                    if end.exit_code == 0 || view.restart.policy == RestartPolicyView::Never)
            })
        })
    }

    fn common(&self) -> &Common<Self> {
        &self.common
    }

    /// What the watches know of a job, if they saw its application (the driver pods from the
    /// cache, or listed while their watch is not current).
    async fn observed(&self, watch: &SparkNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        let watched = watch.watched();
        let (operator, observed) = watched
            .iter()
            .find_map(|(op, apps)| Some((*op, Seen::Present(apps.get(&id.name)?.view))))
            .or_else(|| {
                watched
                    .iter()
                    .find_map(|(op, apps)| Some((*op, Seen::gone(apps.tombstone(&id.name)?))))
            })?;
        let (parts, listed) = self.drivers(watch, operator, &id.namespace, &id.name).await;
        Some(Found {
            observed,
            parts,
            listed,
        })
    }

    async fn fetched(
        &self,
        watch: &SparkNamespaceWatch,
        id: &ExecutionId,
    ) -> Result<Option<Found>> {
        let Some((operator, view)) = self.get(id).await? else {
            return Ok(None);
        };
        watch.apps_of(operator);
        let (parts, listed) = self.drivers(watch, operator, &id.namespace, &id.name).await;
        Ok(Some(Found {
            observed: Seen::Present(view),
            parts,
            listed,
        }))
    }

    fn map(
        &self,
        id: &ExecutionId,
        observed: &Seen,
        drivers: &Drivers,
        (previous, now): (Option<&ExecutionInfo>, Timestamp),
    ) -> Option<Mapped<SparkAction>> {
        if let Some(error) = &drivers.lookup_error {
            self.common
                .warn_once(id, "cannot look up the driver pod", error);
        }
        let mapping = &self.settings.mapping;
        spark_status(
            &observed.as_observation(),
            &drivers.pods,
            now,
            mapping,
            previous,
        )
    }

    /// Drivers that cannot be listed leave the outcome to what the cache shows.
    async fn relisted(
        &self,
        id: &ExecutionId,
        (view, drivers, _): (&SparkAppView, &Drivers, &Mapped<SparkAction>),
        _acting: Acting,
    ) -> Relisted<Drivers> {
        let listed = self.list_drivers(view.operator, &id.namespace, &view.name);
        match listed.await {
            Ok(listed) if listed != drivers.pods => Relisted::Fresh(Drivers::of(Ok(listed))),
            _ => Relisted::Same,
        }
    }

    async fn act(
        &self,
        id: &ExecutionId,
        view: &SparkAppView,
        action: &SparkAction,
    ) -> Acted<SparkAppView> {
        self.act_on(id, view, action).await
    }

    fn objects_of(&self, view: &SparkAppView) -> Objects<DynamicObject> {
        self.objects(view.operator, &view.namespace)
    }

    fn view_of(&self, like: &SparkAppView, object: &DynamicObject) -> SparkAppView {
        view_of(like.operator, object)
    }

    fn attempts_in(&self, _view: &Self::View, drivers: &Drivers) -> Vec<timeline::Attempt> {
        let mut pods: Vec<&DriverView> = drivers.pods.iter().collect();
        pods.sort_by_key(|pod| (pod.created_at, pod.name.clone()));
        pods.iter()
            .map(|pod| timeline::Attempt::of(&pod.pod, pod.container.as_ref(), None))
            .collect()
    }

    fn log_container(&self, drivers: &Drivers, pod: &str) -> Option<String> {
        let driver = drivers.pods.iter().find(|driver| driver.name == pod)?;
        Some(driver.container.as_ref()?.name.clone())
    }

    fn note(&self, drivers: &Drivers, info: &mut ExecutionInfo) {
        if let Some(error) = &drivers.lookup_error {
            info.message = format!("{} (driver pod not looked up: {error})", info.message);
        }
    }

    /// The SparkApplications of the namespace, of every operator installed.
    async fn served_apis(&self, namespace: &str) -> Result<Vec<Api<DynamicObject>>> {
        let operators = self.installed().await?;
        Ok(operators
            .into_iter()
            .map(|operator| self.objects(operator, namespace).api)
            .collect())
    }
}

/// The view of a SparkApplication object.
fn view_of(operator: SparkOperator, object: &DynamicObject) -> SparkAppView {
    SparkAppView::from_parts(operator, &object.metadata, &object.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_name_each_operators_group() {
        assert_eq!(
            resource(SparkOperator::Apache),
            format!("sparkapplications.{}", SparkOperator::Apache.group())
        );
        assert_eq!(
            resource(SparkOperator::Kubeflow),
            format!("sparkapplications.{}", SparkOperator::Kubeflow.group())
        );
    }
}
