//! What every Spark end-to-end test shares: a simulated cluster running both Spark operators
//! with an executor on fast settings, Spark job specs from YAML text, files that release a
//! running driver on demand, and waiting for a condition with a deadline.

#![allow(dead_code)] // Each test module uses a part of it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use kubeferry_core::spark::{SparkMappingConfig, SparkOperator};
use kubeferry_core::spec::{self, JobSpec, Params};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState};
use kubeferry_kube::cluster::Kubeconfig;
use kubeferry_kube::manifest::spark::api_resource;
use kubeferry_kube::{Executor, ExecutorSettings, RecordSettings, SparkSettings};
use kubeferry_sim::controllers::spark::{SparkFaults, with_spark_operators};
use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::Value;

pub use crate::cluster::{CLUSTER, NS, Settings, executor_as};
use crate::cluster::{eventually_within, fast_cluster, fast_watching};

/// How long any condition may take before a test fails. A bound on failure, never a claim
/// about speed: a passing test returns as soon as its condition holds.
pub const DEADLINE: Duration = Duration::from_secs(30);

impl Settings {
    /// Tiny backoffs, fast rechecks, the real no-status timeout (10 minutes).
    pub fn fast() -> Settings {
        let executor = ExecutorSettings {
            spark: SparkSettings {
                mapping: SparkMappingConfig {
                    driver_status_wait: Duration::from_secs(2),
                    ..SparkMappingConfig::default()
                },
                watching: fast_watching(),
                ..SparkSettings::default()
            },
            records: RecordSettings {
                // Shorter than the read timeout, which the hold must outlast where it
                // matters: the tests of the hold set their own.
                name_hold: Duration::from_millis(300),
                ..RecordSettings::default()
            },
            ..ExecutorSettings::default()
        };
        Settings {
            cluster: fast_cluster(Duration::from_millis(200)),
            executor,
        }
    }

    /// The same with another no-status timeout.
    pub fn no_status_timeout(mut self, timeout: Duration) -> Settings {
        self.executor.spark.mapping.no_status_timeout = timeout;
        self
    }

    /// The same with another default operator.
    pub fn default_operator(mut self, operator: Option<SparkOperator>) -> Settings {
        self.executor.spark.default_operator = operator;
        self
    }

    /// The same with another retry deadline.
    pub fn retry_deadline(mut self, deadline: Duration) -> Settings {
        self.cluster.retry.deadline = deadline;
        self
    }
}

/// A simulated cluster with both Spark operators (test timings) and an executor connected to
/// it as the admin.
pub struct Env {
    /// The cluster.
    pub sim: SimCluster,
    /// The simulated operators' faults.
    pub faults: SparkFaults,
    /// The executor under test.
    pub executor: Executor,
    /// The settings it was built with.
    pub settings: Settings,
}

/// The simulated cluster's configuration for Spark tests.
pub fn spark_config() -> SimConfig {
    let mut config = with_spark_operators(SimConfig::for_tests());
    config.spark.release_delay = Duration::from_millis(100);
    config
}

impl Env {
    /// A cluster running both operators and an executor with fast settings.
    pub async fn start() -> Env {
        Env::start_with(spark_config(), Settings::fast()).await
    }

    /// A cluster and an executor of the given configurations.
    pub async fn start_with(config: SimConfig, settings: Settings) -> Env {
        let faults = config.spark.faults.clone();
        let sim = SimCluster::start(config).await.expect("the cluster starts");
        let executor = executor_as(&sim, sim.admin_token(), &settings).await;
        Env {
            sim,
            faults,
            executor,
            settings,
        }
    }

    /// Another executor on the same cluster (another replica): it shares nothing with the
    /// first but the cluster.
    pub async fn fresh_executor(&self, settings: &Settings) -> Executor {
        executor_as(&self.sim, self.sim.admin_token(), settings).await
    }

    /// The SparkApplication of a job as the cluster stores it.
    pub fn app(&self, operator: SparkOperator, name: &str) -> Option<Value> {
        self.sim
            .object(operator.group(), "sparkapplications", NS, name)
    }

    /// A pod as the cluster stores it.
    pub fn pod(&self, name: &str) -> Option<Value> {
        self.sim.object("", "pods", NS, name)
    }

    /// An admin client of the cluster.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::from_yaml(&self.sim.kubeconfig_yaml("admin"))
            .expect("the kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("usable");
        kube::Client::try_from(config).expect("a client")
    }

    /// The SparkApplications of an operator, through an admin client.
    pub async fn apps_api(&self, operator: SparkOperator) -> Api<DynamicObject> {
        Api::namespaced_with(self.client().await, NS, &api_resource(operator))
    }

    /// The pods, through an admin client.
    pub async fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client().await, NS)
    }

    /// Every change of one SparkApplication from now on, until it is deleted or `DEADLINE`.
    pub async fn app_history(
        &self,
        operator: SparkOperator,
        name: &str,
    ) -> tokio::task::JoinHandle<Vec<(String, Value)>> {
        let api = self.apps_api(operator).await;
        let params = WatchParams::default().fields(&format!("metadata.name={name}"));
        let from = self.sim.resource_version().to_string();
        let mut events = api.watch(&params, &from).await.expect("watch").boxed();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let deadline = tokio::time::Instant::now() + DEADLINE;
            while let Ok(Some(Ok(event))) = tokio::time::timeout_at(deadline, events.next()).await {
                let (kind, object) = match event {
                    WatchEvent::Added(o) => ("ADDED", o),
                    WatchEvent::Modified(o) => ("MODIFIED", o),
                    WatchEvent::Deleted(o) => ("DELETED", o),
                    _ => continue,
                };
                let object = serde_json::to_value(object).expect("json");
                seen.push((kind.to_string(), object));
                if kind == "DELETED" {
                    break;
                }
            }
            seen
        })
    }
}

/// A Spark job spec from YAML text (a `kind: SparkJob` file).
pub fn spec(yaml: &str) -> JobSpec {
    spec::load("test.yaml", yaml, &Params::new()).expect("a valid job file")
}

/// A SparkPi job for `operator`, with extra lines of YAML (`args`, timeouts, ...).
pub fn spark_pi(operator: SparkOperator, extra: &str) -> JobSpec {
    let account = match operator {
        SparkOperator::Apache => "spark",
        SparkOperator::Kubeflow => "spark-operator-spark",
    };
    spec(&format!(
        "kind: SparkJob\nname: spark-pi\noperator: {operator}\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\nmainClass: org.apache.spark.examples.SparkPi\ndriver: {{cores: 1, memory: 512m}}\nexecutor: {{cores: 1, memory: 512m, instances: 1}}\nserviceAccount: {account}\n{extra}\n"
    ))
}

/// A fresh job id.
pub fn job_id(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A file whose creation lets a driver started with `until=<file>` in its args finish.
pub struct Gate {
    path: PathBuf,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        let path = std::env::temp_dir().join(format!("kubeferry-spark-gate-{}", job_id("g")));
        let _ = std::fs::remove_file(&path);
        Gate { path }
    }

    /// The driver argument that waits for this gate.
    pub fn arg(&self) -> String {
        format!("until={}", self.path.display())
    }

    /// Lets the driver finish.
    pub fn open(&self) {
        std::fs::write(&self.path, "").expect("the gate opens");
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Polls `check` until it returns `Some`, failing after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(DEADLINE, Duration::from_millis(10), what, check).await
}

/// Waits until the executor reports `state` for `id`.
pub async fn until_state(executor: &Executor, id: &ExecutionId, state: JobState) -> ExecutionInfo {
    eventually(&format!("{id} to be {state}"), || async {
        executor.status(id).await.ok().filter(|i| i.state == state)
    })
    .await
}

/// Waits for the end of a job (with [`DEADLINE`]), collecting every status on the way.
pub async fn run_to_end(
    executor: &Executor,
    id: &ExecutionId,
) -> (ExecutionInfo, Vec<ExecutionInfo>) {
    let mut seen = Vec::new();
    let end = executor
        .wait(id, Some(DEADLINE), |info| seen.push(info.clone()))
        .await
        .expect("the job ends");
    (end, seen)
}

/// Sleeps until a point in time has passed (for rules that count time, such as the no-status
/// timeout).
pub async fn pass(at: jiff::Timestamp) {
    let now = jiff::Timestamp::now();
    if at > now {
        tokio::time::sleep(at.duration_since(now).unsigned_abs()).await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// The apache application once the operator released its pods.
pub async fn released(env: &Env, name: &str) -> serde_json::Value {
    eventually("the operator to release the application", || async {
        env.app(SparkOperator::Apache, name).filter(|app| {
            apache_history(app).last().map(String::as_str) == Some("ResourceReleased")
        })
    })
    .await
}

/// The `currentStateSummary` of every step of an apache SparkApplication's history.
pub fn apache_history(app: &Value) -> Vec<String> {
    let mut entries: Vec<(u64, String)> = app
        .pointer("/status/stateTransitionHistory")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.parse().ok()?,
                        v["currentStateSummary"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries.into_iter().map(|(_, s)| s).collect()
}

/// The distinct states of a sequence of statuses, in order.
pub fn states(seen: &[ExecutionInfo]) -> Vec<JobState> {
    let mut states: Vec<JobState> = Vec::new();
    for info in seen {
        if states.last() != Some(&info.state) {
            states.push(info.state);
        }
    }
    states
}

/// An executor acting as a service account `account` that is granted exactly `permissions`
/// (a Role and a RoleBinding in [`NS`]); the cluster must enforce RBAC.
pub async fn executor_with_permissions(
    env: &Env,
    account: &str,
    permissions: &[kubeferry_kube::rbac::Permission],
) -> Executor {
    let role = kubeferry_kube::rbac::role(account, Some(NS), permissions);
    let (service_account, binding) = kubeferry_kube::rbac::binding(account, account, Some(NS));
    for object in [
        serde_json::to_value(&role).expect("json"),
        serde_json::to_value(&service_account).expect("json"),
        serde_json::to_value(&binding).expect("json"),
    ] {
        env.sim.create(NS, object).expect("created");
    }
    let token = env.sim.token_for(NS, account);
    executor_as(&env.sim, &token, &env.settings).await
}

/// A cluster enforcing RBAC, running both operators, with an admin executor.
pub async fn rbac_env(settings: Settings) -> Env {
    let mut config = spark_config();
    config.rbac = true;
    Env::start_with(config, settings).await
}

/// `permissions` with the verbs of one resource replaced by `verbs`.
pub fn with_verbs(
    permissions: &[kubeferry_kube::rbac::Permission],
    resource: &str,
    verbs: &'static [&'static str],
) -> Vec<kubeferry_kube::rbac::Permission> {
    permissions
        .iter()
        .map(|p| {
            let mut p = *p;
            if p.resource == resource {
                p.verbs = verbs;
            }
            p
        })
        .collect()
}
