//! What every end-to-end test shares: a simulated cluster with an executor on fast settings,
//! job specs from YAML text, gates that release a running job on demand, and waiting for a
//! condition with a deadline.

#![allow(dead_code)] // Each test binary module uses a part of it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kubeferry_core::container::{MappingConfig, PodView};
use kubeferry_core::spec::{self, JobSpec, Params};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use kubeferry_kube::cluster::Kubeconfig;
use kubeferry_kube::{
    ContainerSettings, Executor, ExecutorSettings, JobSetSettings, RecordSettings, RetryPolicy,
    generate_job_id, job_manifest,
};
use kubeferry_sim::{SimCluster, SimConfig};

pub use crate::cluster::{CLUSTER, NS, Settings, executor_as};
use crate::cluster::{eventually_within, fast_cluster, fast_watching};

/// The watches a namespace's container jobs cost: their Jobs, their pods, the Job controller's
/// refusal events, and the outcome records.
pub const NAMESPACE_WATCHES: usize = 4;

/// How long any condition may take before a test fails. A bound on failure, never a claim
/// about speed: a passing test returns as soon as its condition holds.
pub const DEADLINE: Duration = Duration::from_secs(20);

impl Settings {
    /// Tiny backoffs, a 300 ms image pull grace, fast rechecks.
    pub fn fast() -> Settings {
        Settings {
            cluster: fast_cluster(Duration::from_secs(2)),
            executor: ExecutorSettings {
                container: ContainerSettings {
                    mapping: MappingConfig {
                        image_pull_grace: Duration::from_millis(300),
                        create_container_error_grace: Duration::from_millis(300),
                        pending_timeout: None,
                        pod_status_wait: Duration::from_secs(2),
                    },
                    watching: fast_watching(),
                    name_prefix: String::new(),
                    janitor_interval: Duration::from_millis(100),
                    refusal_freshness: Duration::from_secs(600),
                },
                jobset: JobSetSettings {
                    mapping: MappingConfig {
                        image_pull_grace: Duration::from_millis(300),
                        create_container_error_grace: Duration::from_millis(300),
                        pending_timeout: None,
                        pod_status_wait: Duration::from_secs(2),
                    },
                    watching: fast_watching(),
                    ..JobSetSettings::default()
                },
                records: RecordSettings {
                    // Shorter than the read timeout, which the hold must outlast where it
                    // matters: the tests of the hold set their own.
                    name_hold: Duration::from_millis(300),
                    ..RecordSettings::default()
                },
                ..ExecutorSettings::default()
            },
        }
    }

    /// The same with every status of an unknown job asking the server (no period in which
    /// the server's "no such job" is answered from memory): for tests of that request.
    pub fn asking_for_unknown_jobs_every_time(mut self) -> Settings {
        self.executor.container.watching.reflector.absent_ttl = Duration::ZERO;
        self
    }

    /// The same with another mapping.
    pub fn with_mapping(mut self, change: impl FnOnce(&mut MappingConfig)) -> Settings {
        change(&mut self.executor.container.mapping);
        self
    }

    /// The same with another retry policy.
    pub fn with_retry(mut self, change: impl FnOnce(&mut RetryPolicy)) -> Settings {
        change(&mut self.cluster.retry);
        self
    }
}

/// A simulated cluster and an executor connected to it as the admin.
pub struct Env {
    /// The cluster.
    pub sim: SimCluster,
    /// The executor under test.
    pub executor: Executor,
    /// The settings it was built with.
    pub settings: Settings,
}

impl Env {
    /// A cluster with test timings and an executor with fast settings.
    pub async fn start() -> Env {
        Env::start_with(SimConfig::for_tests(), Settings::fast()).await
    }

    /// A cluster and an executor of the given configurations.
    pub async fn start_with(config: SimConfig, settings: Settings) -> Env {
        let sim = SimCluster::start(config).await.expect("the cluster starts");
        let executor = executor_as(&sim, sim.admin_token(), &settings).await;
        Env {
            sim,
            executor,
            settings,
        }
    }

    /// Another executor on the same cluster (another replica, or a restarted process): it shares
    /// nothing with the first but the cluster.
    pub async fn fresh_executor(&self) -> Executor {
        executor_as(&self.sim, self.sim.admin_token(), &self.settings).await
    }

    /// Submits `yaml` under a fresh job id into [`NS`].
    pub async fn submit(&self, yaml: &str) -> ExecutionId {
        let spec = spec_of(yaml);
        let job_id = generate_job_id(spec.name());
        self.executor
            .submit(&spec, &job_id, NS)
            .await
            .expect("the job is submitted")
    }

    /// Waits for the job to end; returns the outcome and every status seen on the way.
    pub async fn wait(&self, id: &ExecutionId) -> (ExecutionInfo, Vec<ExecutionInfo>) {
        wait_on(&self.executor, id).await
    }

    /// Polls the job's status until `accept` holds.
    pub async fn status_until(
        &self,
        id: &ExecutionId,
        what: &str,
        accept: impl Fn(&ExecutionInfo) -> bool,
    ) -> ExecutionInfo {
        status_until(&self.executor, id, what, accept).await
    }

    /// Waits until the simulated cluster holds `count` open watches: a watch is opened only
    /// after its first list, so a status answered from a synced cache may come before it.
    pub async fn watches_open(&self, count: usize) {
        eventually("the watches to be open", || async {
            (self.sim.open_watches() >= count).then_some(())
        })
        .await;
    }

    /// The job's pods as the executor's tracker sees them (no API request).
    pub fn pods_of(&self, id: &ExecutionId) -> Vec<PodView> {
        self.executor
            .container_jobs()
            .watch(&id.namespace)
            .pods_of(&id.name)
    }

    /// The name of the job's only pod, once there is one.
    pub async fn pod_of(&self, id: &ExecutionId) -> String {
        eventually("the job's pod", || async {
            self.pods_of(id).first().map(|p| p.name.clone())
        })
        .await
    }

    /// A client acting as someone other than kubeferry (the admin).
    pub async fn admin_client(&self) -> kube::Client {
        client_as(&self.sim, self.sim.admin_token()).await
    }

    /// The Job as stored in the cluster (no API request).
    pub fn job_object(&self, id: &ExecutionId) -> Option<serde_json::Value> {
        self.sim.object("batch", "jobs", &id.namespace, &id.name)
    }

    /// Creates a Job directly (bypassing the spec validator): the manifest kubeferry would
    /// create for `yaml` under `job_id`, changed by `edit`.
    pub fn create_job_directly(
        &self,
        yaml: &str,
        job_id: &str,
        edit: impl FnOnce(&mut serde_json::Value),
    ) -> ExecutionId {
        let JobSpec::Container(spec) = spec_of(yaml) else {
            panic!("a container job");
        };
        let name = kubeferry_core::marks::object_name("", job_id);
        let mut manifest =
            serde_json::to_value(job_manifest(&spec, job_id, &name, NS)).expect("serialises");
        edit(&mut manifest);
        self.sim.create(NS, manifest).expect("the Job is created");
        ExecutionId::new(CLUSTER, JobKind::Job, NS, name)
    }

    /// Deletes a job's object (a Job, a JobSet, or a bare pod) as someone other than kubeferry
    /// would (`kubectl delete`: background propagation).
    pub async fn delete_job_as_admin(&self, id: &ExecutionId) {
        let resource = match id.kind {
            JobKind::JobSet => kubeferry_kube::manifest::jobset::api_resource(),
            JobKind::Pod => kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
            _ => kube::api::ApiResource::erase::<Job>(&()),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.admin_client().await, &id.namespace, &resource);
        api.delete(
            &id.name,
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("the admin deletes the Job");
    }
}

/// A kube-rs client for the cluster with a bearer token.
pub async fn client_as(sim: &SimCluster, token: &str) -> kube::Client {
    let kubeconfig =
        Kubeconfig::from_yaml(&sim.kubeconfig_yaml_with_token("sim", token)).expect("parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a usable kubeconfig");
    kube::Client::try_from(config).expect("a client")
}

/// A validated job spec from YAML text.
pub fn spec_of(yaml: &str) -> JobSpec {
    spec::load("test.yaml", yaml, &Params::default())
        .unwrap_or_else(|error| panic!("the test's job spec is invalid: {error}"))
}

/// An execution id on the test cluster.
pub fn id_of(name: &str) -> ExecutionId {
    ExecutionId::new(CLUSTER, JobKind::Job, NS, name)
}

/// Waits for a job to end through `executor`; returns the outcome and every status seen.
pub async fn wait_on(executor: &Executor, id: &ExecutionId) -> (ExecutionInfo, Vec<ExecutionInfo>) {
    let mut seen = Vec::new();
    let outcome = executor
        .wait(id, Some(DEADLINE), |info| seen.push(info.clone()))
        .await
        .unwrap_or_else(|error| panic!("waiting for {id}: {error}; seen {seen:#?}"));
    (outcome, seen)
}

/// Polls a job's status through `executor` until `accept` holds.
pub async fn status_until(
    executor: &Executor,
    id: &ExecutionId,
    what: &str,
    accept: impl Fn(&ExecutionInfo) -> bool,
) -> ExecutionInfo {
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let last = match executor.status(id).await {
            Ok(info) if accept(&info) => return info,
            other => other,
        };
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what} of {id}; last status: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `check` until it gives a value; fails the test after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(DEADLINE, Duration::from_millis(20), what, check).await
}

/// Waits until a round of status queries of `ids` asks the cluster nothing: the watches are
/// open and current.
pub async fn until_a_round_reads_only(env: &Env, ids: &[&ExecutionId]) {
    eventually("a round of status queries that asks nothing", || async {
        env.sim.reset_counters();
        for id in ids {
            env.executor.status(id).await.expect("a status");
        }
        env.sim.counters().values().all(|n| *n == 0).then_some(())
    })
    .await;
}

/// Whether a status is in `state`.
pub fn is(state: JobState) -> impl Fn(&ExecutionInfo) -> bool {
    move |info| info.state == state
}

/// A file a job waits for: the job runs until the test opens the gate. Jobs run as local
/// processes of the simulated kubelet, so they see the test's files.
pub struct Gate {
    dir: PathBuf,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kubeferry-e2e-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Gate { dir }
    }

    /// The path of a named gate file.
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Shell that waits until the gate `name` opens.
    pub fn wait(&self, name: &str) -> String {
        format!("while [ ! -e {} ]; do sleep 0.02; done", self.path(name))
    }

    /// Opens the gate `name`.
    pub fn open(&self, name: &str) {
        std::fs::write(self.path(name), b"").expect("the gate opens");
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A job spec running `script` with `sh -c`, with more YAML fields appended.
pub fn shell(name: &str, script: &str, extra: &str) -> String {
    let script = serde_json::to_string(script).expect("a string");
    format!("name: {name}\nimage: busybox:1.36\ncommand: [sh, -c, {script}]\n{extra}")
}

/// What makes an outcome: state, reason and exit code. A replica that looks once a job's pods
/// are gone cannot know the details only pods hold (when the container started).
pub fn outcome_of(info: &ExecutionInfo) -> (JobState, kubeferry_core::Reason, Option<i32>) {
    (info.state, info.reason, info.exit_code)
}

/// Awaits `future`, failing the test after [`DEADLINE`] (for streams that must end).
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// What the code under test logged at WARN and above, in every test of this binary.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// The warnings logged by the tests of this binary, captured by a global subscriber installed
/// on first use (a global one, since tasks of one test run on several threads).
pub fn captured_warnings() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in the e2e tests");
        captured
    })
}

/// The outcome recorded on a Job object, if any.
pub fn outcome_annotation(job: &serde_json::Value) -> Option<ExecutionInfo> {
    annotated_outcome(job, kubeferry_core::marks::OUTCOME_ANNOTATION)
}

/// The copy of its outcome record a Job was let go with, if it carries one.
pub fn kept_annotation(job: &serde_json::Value) -> Option<ExecutionInfo> {
    annotated_outcome(job, kubeferry_core::marks::KEPT_OUTCOME_ANNOTATION)
}

fn annotated_outcome(job: &serde_json::Value, key: &str) -> Option<ExecutionInfo> {
    let text = job.pointer("/metadata/annotations")?.get(key)?.as_str()?;
    serde_json::from_str(text).ok()
}
