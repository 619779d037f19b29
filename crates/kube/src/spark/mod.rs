//! Spark jobs (SparkApplications of apache/spark-kubernetes-operator or of the Kubeflow
//! spark-operator): submit, status, wait, cancel, logs, list and sweep.
//!
//! `crates/core/SPARK.md` is the contract this follows: the operator is resolved and checked
//! before anything is created; the status comes from a label-scoped watch of the
//! SparkApplications of every installed operator and of their driver pods, mapped by
//! [`spark_status`]; the [`SparkAction`]s the mapping asks for are carried out by the
//! namespace's settler (`settler.rs`) before the outcome they carry is reported
//! (record-then-delete for an application the operator never took up; deleting the driver of
//! a failed application that still runs), and a status query writes nothing; a driver pod that
//! cannot be looked up (a 403 on `list pods`) is a named error that never holds a job back.
//! Submission, cancel, waiting and logs follow the same protocols as container jobs
//! (`crate::protocol`).

pub mod tracker;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Preconditions, PropagationPolicy};
use kubeferry_core::container::ContainerView;
use kubeferry_core::marks::{
    MANAGED_SELECTOR, OUTCOME_ANNOTATION, dns1035_object_name, object_name,
};
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::spark::{
    DRIVER_CONTAINER, DriverView, SparkAction, SparkAppView, SparkMappingConfig, SparkOperator,
    spark_status,
};
use kubeferry_core::spec::SparkJobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::cluster::{Cluster, Op};
use crate::error::ALL_NAMESPACES;
use crate::error::{Error, Result};
use crate::evaluating::{Acting, Evaluated, EvaluatedWatch, Evaluates, Settlers};
use crate::kind::{Kind, Listed, ManagedObjects};
use crate::manifest::spark::{api_resource, spark_application};
use crate::objects::{Attempt, Current, Deletion, Objects};
use crate::records::{Records, check_resubmission};
use crate::selector::SelectorEvent;
use crate::settling::retry_delay;
use crate::tracker::{Departure, Namespaces, Recent, ReflectorSettings, lock};
use tracker::{SparkNamespaceWatch, app_of_pod, driver_pods_selector};

const PODS: &str = "pods";
const KIND: &str = "SparkApplication";

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
    /// The watches' settings.
    pub reflector: ReflectorSettings,
    /// How long a status query waits for a namespace's first list before asking the API
    /// server directly.
    pub sync_timeout: Duration,
    /// How often a waiter re-evaluates time-based rules (the no-status timeout) when nothing
    /// changes.
    pub recheck_interval: Duration,
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
            reflector: ReflectorSettings::default(),
            sync_timeout: Duration::from_secs(10),
            recheck_interval: Duration::from_secs(1),
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
    /// This backend, for the settlers it starts.
    me: Weak<SparkJobs>,
    cluster: Cluster,
    settings: SparkSettings,
    /// Each watched namespace's watches, and the last answers.
    namespaces: Namespaces<SparkNamespaceWatch>,
    /// The outcome records.
    records: Arc<Records>,
    installed: Mutex<Option<(Instant, Vec<SparkOperator>)>>,
    /// The warnings logged, each once.
    warned: Recent,
    /// Copies of applications (name and resourceVersion) an action found gone: mapped as gone
    /// from then on rather than acted on again while a stalled watch still holds them.
    found_gone: Recent,
    /// Each watched namespace's settler, the one writer of its jobs.
    settlers: Settlers<SparkJobs>,
}

/// The job's object as observed.
type Observed = crate::kind::Observed<SparkAppView>;

/// What is known of a job: its application (of which operator) and its driver pods, or why
/// they could not be looked up.
pub(crate) struct Found {
    operator: SparkOperator,
    observed: Observed,
    /// The driver pods, or why they could not be looked up.
    drivers: Result<Vec<DriverView>, String>,
    /// Whether the driver pods were listed from the API server just now (not from the cache).
    drivers_listed: bool,
}

/// What carrying out an action came to.
enum Acted {
    /// Done: the action's outcome may be reported.
    Done,
    /// The application changed or went: map this instead.
    Remap(Box<Observed>),
    /// It failed; the job is not decided yet.
    Failed(Error),
}

impl SparkJobs {
    /// A backend for `cluster`, keeping its jobs' outcomes in `records`.
    pub(crate) fn new(
        cluster: Cluster,
        settings: SparkSettings,
        records: Arc<Records>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            records,
            cluster,
            settings,
            namespaces: Namespaces::default(),
            installed: Mutex::new(None),
            warned: Recent::new(10_000),
            found_gone: Recent::new(10_000),
            settlers: Settlers::default(),
        })
    }

    /// The watches of `namespace`, if they are started.
    pub(crate) fn existing(&self, namespace: &str) -> Option<Arc<SparkNamespaceWatch>> {
        self.namespaces.existing(namespace)
    }

    /// The namespaces watched so far, with their watches.
    #[cfg(feature = "internals")]
    pub fn watched(&self) -> Vec<(String, Arc<SparkNamespaceWatch>)> {
        self.namespaces.watched()
    }

    fn objects(&self, operator: SparkOperator, namespace: &str) -> Objects<DynamicObject> {
        Objects {
            api: Api::namespaced_with(
                self.cluster.client().clone(),
                namespace,
                &api_resource(operator),
            ),
            resource: resource(operator),
            kind: KIND,
            namespace: namespace.to_string(),
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.cluster.client().clone(), namespace)
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
            let client = self.cluster.client();
            match self
                .cluster
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

    /// The watches of `namespace` (the driver pods, and the SparkApplications of every
    /// operator installed), started if they are not yet.
    pub async fn watch(&self, namespace: &str) -> Result<Arc<SparkNamespaceWatch>> {
        let watch = match self.namespaces.existing(namespace) {
            Some(watch) => watch,
            None => {
                let installed = self.installed().await?;
                let watch = self.namespaces.get_or_start(namespace, || {
                    self.records.watch(namespace);
                    SparkNamespaceWatch::start(&self.cluster, namespace, &self.settings.reflector)
                });
                for operator in installed {
                    watch.apps_of(operator);
                }
                watch
            }
        };
        self.settlers.start(&self.me, namespace, &watch);
        Ok(watch)
    }

    /// Hands a job whose mapping asks for an action to its namespace's settler, and answers
    /// what the settler decided.
    async fn settle_now(&self, id: &ExecutionId, found: Found) -> Result<ExecutionInfo> {
        let watch = self.watch(&id.namespace).await?;
        self.settlers.settle_now(&self.me, &watch, id, found).await
    }

    /// Creates the SparkApplication for `spec` under `job_id` in `namespace`, or adopts the
    /// one a lost response already created. The operator is the file's, else the cluster's;
    /// fields it cannot honour are refused before anything is created.
    pub async fn submit(
        &self,
        spec: &SparkJobSpec,
        job_id: &str,
        namespace: &str,
    ) -> Result<ExecutionId> {
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
        // A job id whose run ended (and whose application may be gone) answers that run: it
        // never runs twice.
        if let Some(record) = self
            .records
            .lookup(namespace, JobKind::SparkApp, &name, job_id)
            .await?
        {
            check_resubmission(&record, KIND, namespace, &name, job_id, &spec.hash())?;
            return Ok(self.id(namespace, &name));
        }
        self.namespaces.forget_absent(namespace, &name);
        let object: DynamicObject =
            serde_json::from_value(manifest).map_err(|source| Error::Manifest {
                operation: format!("build SparkApplication {namespace}/{name}"),
                source,
            })?;
        let created = self
            .objects(operator, namespace)
            .create_or_adopt(&self.cluster, &object, job_id, &spec.hash())
            .await;
        match created {
            Ok(()) => {
                // The namespace is looked after from now on: its settler fails an application
                // the operator never takes up at the no-status timeout, whether or not anyone
                // asks. The job exists whatever becomes of that: a failure here is the next
                // query's to report.
                if let Err(error) = self.watch(namespace).await {
                    debug!(message = "the namespace's watches did not start", namespace, %error);
                }
                Ok(self.id(namespace, &name))
            }
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

    /// The job's status, from the watch cache (one GET on a miss).
    pub async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        let watch = self.watch(&id.namespace).await?;
        let synced = watch.wait_synced(self.settings.sync_timeout).await;
        if let Some(answer) = self.final_answer(id).await {
            return Ok(answer);
        }
        let Some(found) = self.observe(&watch, id, synced).await? else {
            return Err(self.no_such_job(id, &watch));
        };
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
    }

    /// What the watches know of a job, if they saw its application (the driver pods from the
    /// cache, or listed while their watch is not current).
    async fn cached(&self, watch: &SparkNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        let watched = watch.watched();
        let (operator, observed) = watched
            .iter()
            .find_map(|(op, apps)| Some((*op, Observed::Present(apps.get(&id.name)?.view))))
            .or_else(|| {
                watched.iter().find_map(|(op, apps)| {
                    let tombstone = apps.tombstone(&id.name)?;
                    let final_state = tombstone.departure == Departure::Deleted;
                    Some((*op, Observed::Vanished(tombstone.last, final_state)))
                })
            })?;
        let (drivers, drivers_listed) =
            self.drivers(watch, operator, &id.namespace, &id.name).await;
        Some(Found {
            operator,
            observed,
            drivers,
            drivers_listed,
        })
    }

    /// What is known of a job: from the cache, else (an application created a moment ago by
    /// another replica, or a cache not synced yet) straight from the API server.
    async fn observe(
        &self,
        watch: &SparkNamespaceWatch,
        id: &ExecutionId,
        synced: bool,
    ) -> Result<Option<Found>> {
        if let Some(found) = self.cached(watch, id).await {
            return Ok(Some(found));
        }
        // The watches of every operator's applications, current, would have delivered one
        // created since the server last said it has none.
        let current = watch.watched().iter().all(|(_, apps)| apps.is_current());
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
        let Some((operator, view)) = self.get(id).await? else {
            if current {
                self.namespaces.note_absent(&id.namespace, &id.name);
            }
            return Ok(None);
        };
        watch.apps_of(operator);
        let (drivers, drivers_listed) =
            self.drivers(watch, operator, &id.namespace, &id.name).await;
        Ok(Some(Found {
            operator,
            observed: Observed::Present(view),
            drivers,
            drivers_listed,
        }))
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
                .get(&self.cluster, &id.name)
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
    ) -> (Result<Vec<DriverView>, String>, bool) {
        if watch.drivers_synced() {
            return (Ok(watch.drivers_of(app)), false);
        }
        let listed = self.list_drivers(operator, namespace, app).await;
        (listed.map_err(|e| e.to_string()), true)
    }

    /// The driver pods of an application, listed from the API server.
    async fn list_drivers(
        &self,
        operator: SparkOperator,
        namespace: &str,
        app: &str,
    ) -> Result<Vec<DriverView>> {
        let api = self.pods(namespace);
        let params = ListParams::default().labels(&operator.driver_selector(app));
        let op = Op::collection("list", PODS, namespace);
        let pods = self.cluster.call(&op, true, || api.list(&params)).await?;
        Ok(pods.items.iter().map(DriverView::from).collect())
    }

    fn no_such_job(&self, id: &ExecutionId, watch: &SparkNamespaceWatch) -> Error {
        let deleted = watch
            .watched()
            .iter()
            .any(|(_, apps)| apps.tombstone(&id.name).is_some());
        let hint = if deleted {
            " (its SparkApplication was deleted: cancelled through another replica, expired after its TTL, or removed by someone else)"
        } else {
            " (never created on this cluster, or already removed: cancelled, deleted, or expired after its TTL)"
        };
        Error::NoSuchJob {
            id: id.clone(),
            hint: hint.to_string(),
        }
    }

    /// Maps an observation and remembers the answer. The actions the mapping asks for are
    /// carried out by the namespace's settler: with [`Acting::Delegate`] (a status query, a
    /// wait, a list) a job with an action due is handed to it and the answer is the settler's.
    async fn evaluate(&self, id: &ExecutionId, found: Found, acting: Acting) -> Result<Evaluated> {
        let previous = self.namespaces.last_reported(&id.namespace, &id.name);
        let Found {
            operator,
            mut observed,
            drivers,
            drivers_listed,
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
        // A copy an action already found gone (a stalled watch still holds it) is gone.
        if let Observed::Present(view) = &observed
            && self.found_gone.contains(&copy_key(view))
        {
            observed = Observed::Vanished(view.clone(), false);
        }
        let (mut drivers, lookup_error) = match drivers {
            Ok(drivers) => (drivers, None),
            Err(error) => {
                self.warn_once(id, "cannot look up the driver pod", &error);
                (Vec::new(), Some(error))
            }
        };
        // The outcome's details (exit code, times) come from the driver as of the outcome; the
        // pod watch may lag the application's, so the drivers are listed once before an
        // outcome is first reported, and every replica reports the same details.
        let mut drivers_listed = drivers_listed || lookup_error.is_some();
        // A changed or vanished application is mapped again; a few rounds settle it.
        for _ in 0..4 {
            let Some(mapped) = spark_status(
                &observed.as_observation(),
                &drivers,
                Timestamp::now(),
                &self.settings.mapping,
                previous.as_ref(),
            ) else {
                return Err(Error::NoSuchJob {
                    id: id.clone(),
                    hint: " (its SparkApplication is gone and what became of it is unknown: if it was being cancelled, it was cancelled)".into(),
                });
            };
            let deciding = mapped.info.is_terminal() || mapped.action.is_some();
            if deciding && !drivers_listed && previous.as_ref().is_none_or(|p| !p.is_terminal()) {
                drivers_listed = true;
                let name = &observed.view().name;
                if let Ok(listed) = self.list_drivers(operator, &id.namespace, name).await
                    && listed != drivers
                {
                    drivers = listed;
                    continue;
                }
            }
            let unrecorded = acting == Acting::Delegate
                && self
                    .awaits_record(id, &mapped.info, previous.as_ref())
                    .await;
            if acting == Acting::Delegate && (mapped.action.is_some() || unrecorded) {
                let found = Found {
                    operator,
                    observed,
                    drivers: match lookup_error {
                        Some(error) => Err(error),
                        None => Ok(drivers),
                    },
                    drivers_listed,
                };
                // What stands until the settler is done: never an outcome it has not recorded.
                let holding = if mapped.info.is_terminal() {
                    previous.clone().unwrap_or_else(|| {
                        ExecutionInfo::new(JobState::Queued, kubeferry_core::Reason::Pending)
                    })
                } else {
                    mapped.info.clone()
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
            if let Some(warning) = &mapped.warning {
                self.warn_once(id, "unreadable status", warning);
            }
            let recheck_at = mapped.recheck_at;
            let mut info = mapped.info;
            if let Some(action) = &mapped.action {
                match self.act(id, operator, observed.view(), action).await {
                    Acted::Done => info = action.outcome().clone(),
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
                            // Remembered with why, for whoever is answered from it before the
                            // next try.
                            info.message = format!("{}; not done yet: {error}", info.message);
                        }
                        self.remember_from(id, &info, &observed);
                        if matches!(error, Error::Forbidden { .. }) {
                            // A missing permission does not go away by itself: say so.
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
            if let Some(error) = &lookup_error
                && !info.is_terminal()
            {
                info.message = format!("{} (driver pod not looked up: {error})", info.message);
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
            message: "the SparkApplication kept changing while kubeferry acted on it; ask again"
                .into(),
        })
    }

    /// Remembers an answer, computed from `observed`, as the one later answers build on.
    fn remember_from(&self, id: &ExecutionId, info: &ExecutionInfo, observed: &Observed) {
        self.namespaces.remember(
            &id.namespace,
            &id.name,
            info,
            None,
            present_version(observed),
        );
    }

    /// Keeps the outcome record of a job that ended (nothing when it is kept already).
    async fn keep(
        &self,
        id: &ExecutionId,
        view: &SparkAppView,
        outcome: &ExecutionInfo,
    ) -> Result<()> {
        let record = OutcomeRecord {
            kind: JobKind::SparkApp,
            object: view.name.clone(),
            job_id: view.job_id.clone(),
            spec_hash: view.spec_hash.clone(),
            outcome: outcome.clone(),
            recorded_at: Some(Timestamp::now()),
            cancelled_by: None,
        };
        self.records.keep(&id.namespace, record).await.map(|_| ())
    }

    /// Carries out what the mapping asks for before it may report an outcome.
    async fn act(
        &self,
        id: &ExecutionId,
        operator: SparkOperator,
        view: &SparkAppView,
        action: &SparkAction,
    ) -> Acted {
        match action {
            SparkAction::RecordOutcomeAndDeleteApp { outcome } => {
                self.record_and_delete(id, operator, view, outcome).await
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

    /// Records an outcome kubeferry decided (no status from the operator) on the application,
    /// then deletes it; only then may the outcome be reported.
    async fn record_and_delete(
        &self,
        id: &ExecutionId,
        operator: SparkOperator,
        view: &SparkAppView,
        outcome: &ExecutionInfo,
    ) -> Acted {
        let objects = self.objects(operator, &id.namespace);
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
                Ok(patched) => last = view_of(operator, &patched),
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
                info!(message = "deleted a SparkApplication after recording its outcome", id = %id);
                Acted::Done
            }
            Ok(Deletion::Gone) => Acted::Remap(Box::new(Observed::Vanished(last, false))),
            Ok(Deletion::Conflict) => self.reread(id, &last).await,
            Err(error) => Acted::Failed(error),
        }
    }

    /// The application as it is now, to be mapped again.
    async fn reread(&self, id: &ExecutionId, last: &SparkAppView) -> Acted {
        match self.get(id).await {
            Ok(Some((_, view))) => Acted::Remap(Box::new(Observed::Present(view))),
            Ok(None) => Acted::Remap(Box::new(Observed::Vanished(last.clone(), false))),
            Err(error) => Acted::Failed(error),
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
            .cluster
            .call(&op, true, || api.delete(name, &params))
            .await
        {
            // 409: another pod of that name now; the one that outlived the failure is gone.
            Ok(_) | Err(Error::Api { code: 404, .. }) | Err(Error::Api { code: 409, .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn warn_once(&self, id: &ExecutionId, what: &str, detail: &str) {
        if self.warned.insert(format!("{id} {what} {detail}")) {
            warn!(message = what, id = %id, detail);
        }
    }

    /// The managed SparkApplications of `namespace` (of every installed operator), or of every
    /// namespace when it is `None`, that match `selector`, with their driver pods.
    async fn listed_apps(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Listed<Found>>> {
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
                        operator,
                        observed: Observed::Present(view),
                        drivers: app_drivers,
                        drivers_listed: true,
                    },
                });
            }
        }
        Ok(listed)
    }

    async fn list_objects(
        &self,
        operator: SparkOperator,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<DynamicObject>> {
        let api = match namespace {
            Some(namespace) => self.objects(operator, namespace).api,
            None => Api::all_with(self.cluster.client().clone(), &api_resource(operator)),
        };
        let params = ListParams::default().labels(selector);
        let scope = namespace.unwrap_or(ALL_NAMESPACES);
        let op = Op::collection("list", resource(operator), scope);
        let list = self.cluster.call(&op, true, || api.list(&params)).await?;
        Ok(list.items)
    }

    /// Every managed driver pod of a namespace (of every namespace when `None`).
    async fn all_drivers(&self, namespace: Option<&str>) -> Result<Vec<Driver>> {
        let api = match namespace {
            Some(namespace) => self.pods(namespace),
            None => Api::all(self.cluster.client().clone()),
        };
        let params = ListParams::default().labels(&driver_pods_selector());
        let op = Op::collection("list", PODS, namespace.unwrap_or(ALL_NAMESPACES));
        let pods = self.cluster.call(&op, true, || api.list(&params)).await?;
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

    /// Follows which managed SparkApplications of `namespace` (of every installed operator)
    /// match `selector`, as [`crate::container::ContainerJobs::matching`] does for Jobs: one
    /// watch per installed operator for as long as the stream is read. While the operators
    /// cannot be discovered (the API server unreachable, discovery refused), discovery is tried
    /// again with backoff and the stream does not report its listing done.
    pub fn matching(
        self: &Arc<Self>,
        namespace: &str,
        selector: &str,
    ) -> impl Stream<Item = SelectorEvent> + Send + 'static {
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
                        warn!(message = "cannot discover the Spark operators; trying again", namespace = %namespace, %error, retry_in = ?delay);
                        tokio::time::sleep(delay).await;
                        attempt = attempt.saturating_add(1);
                    }
                }
            };
            let watches = installed
                .into_iter()
                .map(|operator| {
                    crate::selector::label_watch(
                        jobs.objects(operator, &namespace).api,
                        JobKind::SparkApp,
                        &namespace,
                        &selector,
                        jobs.settings.reflector.watch_timeout,
                    )
                    .boxed()
                })
                .collect();
            crate::selector::merge(watches)
        })
        .flatten()
    }
}

impl Kind for SparkJobs {
    type Object = DynamicObject;
    type Watches = SparkNamespaceWatch;
    type Found = Found;

    const JOB_KIND: JobKind = JobKind::SparkApp;

    fn namespaces(&self) -> &Namespaces<SparkNamespaceWatch> {
        &self.namespaces
    }

    fn records(&self) -> &Arc<Records> {
        &self.records
    }

    async fn watch(&self, namespace: &str) -> Result<Arc<SparkNamespaceWatch>> {
        SparkJobs::watch(self, namespace).await
    }

    async fn listed(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Listed<Found>>> {
        self.listed_apps(namespace, selector).await
    }

    async fn status_of(&self, id: &ExecutionId, found: Found) -> Result<ExecutionInfo> {
        if let Some(answer) = self.final_answer(id).await {
            return Ok(answer);
        }
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
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
        SparkJobs::status(self, id).await
    }

    async fn read(&self, id: &ExecutionId) -> Result<Option<Current<DynamicObject>>> {
        let Some((operator, object)) = self.get_object(id).await? else {
            return Ok(None);
        };
        let watch = self.watch(&id.namespace).await?;
        watch.apps_of(operator);
        let view = view_of(operator, &object);
        let (drivers, drivers_listed) = self
            .drivers(&watch, operator, &id.namespace, &id.name)
            .await;
        let status = self
            .evaluate(
                id,
                Found {
                    operator,
                    observed: Observed::Present(view),
                    drivers,
                    drivers_listed,
                },
                Acting::Delegate,
            )
            .await?
            .info;
        Ok(Some(Current {
            objects: self.objects(operator, &id.namespace),
            meta: object.metadata,
            status,
        }))
    }

    async fn attempts(&self, id: &ExecutionId) -> Result<Vec<Attempt>> {
        let watch = self.watch(&id.namespace).await?;
        let known = watch
            .watched()
            .iter()
            .any(|(_, apps)| apps.get(&id.name).is_some());
        let mut drivers = if known
            && watch.wait_synced(self.settings.sync_timeout).await
            && watch.drivers_synced()
        {
            watch.drivers_of(&id.name)
        } else {
            let api = self.pods(&id.namespace);
            let params = ListParams::default().labels(&driver_pods_selector());
            let op = Op::collection("list", PODS, &id.namespace);
            let pods = self.cluster.call(&op, true, || api.list(&params)).await?;
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
}

/// The view of a SparkApplication object.
fn view_of(operator: SparkOperator, object: &DynamicObject) -> SparkAppView {
    SparkAppView::from_parts(operator, &object.metadata, &object.data)
}

/// One copy of an application: its namespace, name and resourceVersion.
fn copy_key(view: &SparkAppView) -> String {
    format!(
        "{}/{}@{}",
        view.namespace,
        view.name,
        view.resource_version.as_deref().unwrap_or("")
    )
}

/// The resourceVersion of an application still present (a vanished one's last copy says
/// nothing about how fresh an answer is).
fn present_version(observed: &Observed) -> Option<&str> {
    match observed {
        Observed::Present(view) => view.resource_version.as_deref(),
        Observed::Vanished(..) => None,
    }
}

impl Evaluates for SparkJobs {
    async fn observed(&self, watch: &SparkNamespaceWatch, id: &ExecutionId) -> Option<Found> {
        self.cached(watch, id).await
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

impl EvaluatedWatch for SparkNamespaceWatch {
    fn holds(&self, name: &str) -> bool {
        SparkNamespaceWatch::holds(self, name)
    }

    fn names(&self) -> Vec<String> {
        self.watched()
            .iter()
            .flat_map(|(_, apps)| apps.all().into_iter().map(|entry| entry.name))
            .collect()
    }

    fn watched(&self) -> Option<tokio::sync::watch::Receiver<usize>> {
        Some(self.operators_changed())
    }
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
