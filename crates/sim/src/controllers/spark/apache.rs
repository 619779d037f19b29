//! The simulated apache/spark-kubernetes-operator (`spark.apache.org/v1` SparkApplication).
//!
//! States, as the operator writes them (`status.currentState` and every step in
//! `status.stateTransitionHistory`, keyed `"0"`, `"1"`, …): `Submitted` → `DriverRequested`
//! (driver pod `<app>-<attempt>-driver` created; `SchedulingFailure` when the API server
//! refuses it) → `DriverStarted` (container running) → `DriverReady` (pod Ready) →
//! `RunningHealthy` (every executor started) → `Succeeded` | `Failed` | `DriverEvicted` (with
//! the driver's `lastObservedDriverStatus`), or `DriverStartTimedOut` / `DriverReadyTimedOut`
//! / `ExecutorsStartTimedOut` after `applicationTimeoutConfig` (5 min each by default). Then,
//! by `restartConfig`: `ScheduledToRestart` and a new attempt after `restartBackoffMillis`
//! (at most `maxRestartAttempts`), else `TerminatedWithoutReleaseResources` (driver kept, by
//! `resourceRetainPolicy`; released after `resourceRetainDurationMillis`) or
//! `ResourceReleased` (driver and executors deleted). `ttlAfterStopMillis` after the stop the
//! application is deleted. The operator's finalizer makes it release the pods of a deleted
//! application and note `ResourceReleased` ("shutdown as requested") before it goes.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::pods::{self, DriverState, PodPlan};
use super::{Ctx, Operator, SparkFault, remaining, set_finalizer, time_of, write_status};
use crate::config::CrdBundle;
use crate::store::{ObjectKey, meta};

/// The operator's finalizer on its applications.
pub const FINALIZER: &str = "sparkapplications.spark.apache.org/finalizer";
/// The label naming a pod's SparkApplication.
pub const APP_NAME_LABEL: &str = "spark.operator/spark-app-name";

const DEFAULT_TIMEOUT_MS: u64 = 300_000;
const DEFAULT_RESTART_BACKOFF_MS: u64 = 30_000;
const DEFAULT_MAX_RESTARTS: u64 = 3;

const SUBMITTED: &str = "Spark application has been created on Kubernetes Cluster.";
const DRIVER_REQUESTED: &str = "Requested driver from resource scheduler.";
const DRIVER_STARTED: &str = "Driver has started running.";
const DRIVER_READY: &str = "Driver has reached ready state.";
const RUNNING_HEALTHY: &str = "Application is running healthy.";
const SUCCEEDED: &str = "Spark application completed successfully.";
const FAILED: &str =
    "Driver has one or more failed critical container(s), refer last observed status for details.";
const DRIVER_START_TIMED_OUT: &str = "The driver has not responded to the initial health check request within the allotted start-up time. This can be configured by setting .spec.applicationTolerations.applicationTimeoutConfig.";
const EXECUTORS_START_TIMED_OUT: &str =
    "The Spark application failed to get enough executors in the given time threshold.";
const DRIVER_EVICTED: &str = "Driver removed. This could caused by 'exit' called in driver process with non-zero code, involuntary disruptions or unintentional destroy behavior, check Kubernetes events for more details.";
const TERMINATED_WITHOUT_RELEASE: &str =
    "Application is terminated without releasing resources as configured.";
const SHUTDOWN: &str = "Spark application has been shutdown as requested.";

/// The simulated apache operator.
#[derive(Default)]
pub struct Apache;

/// The states that end an attempt with an outcome.
const OUTCOMES: [&str; 7] = [
    "Succeeded",
    "Failed",
    "SchedulingFailure",
    "DriverEvicted",
    "DriverStartTimedOut",
    "DriverReadyTimedOut",
    "ExecutorsStartTimedOut",
];

/// The states after which the application has stopped.
const STOPPED: [&str; 2] = ["ResourceReleased", "TerminatedWithoutReleaseResources"];

impl Operator for Apache {
    const BUNDLE: CrdBundle = CrdBundle::SparkApache;
    const GROUP: &'static str = "spark.apache.org";
    const APP_NAME_LABEL: &'static str = APP_NAME_LABEL;
    const SERVICE_ACCOUNT: &'static str = "spark";

    fn reconcile(&mut self, ctx: &Ctx, key: &ObjectKey, app: &Value) -> Option<Duration> {
        let fault = ctx.fault(app);
        if fault == Some(SparkFault::NoStatus) {
            return None;
        }
        let uid = meta::uid(app)?.to_string();
        let step = Step {
            ctx,
            key,
            app,
            uid: &uid,
        };
        if meta::is_deleting(app) {
            step.shut_down();
            return None;
        }
        if !meta::finalizers(app).iter().any(|f| f == FINALIZER) {
            set_finalizer(ctx, key, FINALIZER, true);
            return None;
        }
        if fault == Some(SparkFault::UnreadableStatus) {
            write_status(ctx, key, &uid, |status| {
                *status = json!({"phase": "Running"})
            });
            return None;
        }
        step.advance(&Spec::read(app), fault)
    }
}

/// The spec fields the operator acts on.
struct Spec {
    main_class: Option<String>,
    resource: String,
    driver_args: Vec<String>,
    conf: Map<String, Value>,
    restart_policy: String,
    max_restarts: u64,
    restart_backoff: Duration,
    driver_start_timeout: Duration,
    driver_ready_timeout: Duration,
    executor_start_timeout: Duration,
    retain_policy: String,
    retain_for: Option<Duration>,
    ttl_after_stop: Option<Duration>,
    spark_version: String,
}

fn millis(value: Option<&Value>) -> Option<Duration> {
    value.and_then(Value::as_u64).map(Duration::from_millis)
}

impl Spec {
    fn read(app: &Value) -> Spec {
        let spec = app.get("spec").cloned().unwrap_or(Value::Null);
        let at = |path: &str| spec.pointer(path);
        let text = |path: &str| at(path).and_then(Value::as_str).map(str::to_string);
        let first_of = |path: &str| {
            text(path).map(|list| list.split(',').next().unwrap_or("").trim().to_string())
        };
        let resource = first_of("/jars")
            .filter(|r| !r.is_empty())
            .or_else(|| first_of("/pyFiles"))
            .unwrap_or_default();
        let tolerations = "/applicationTolerations";
        let timeout = |name: &str| {
            millis(at(&format!(
                "{tolerations}/applicationTimeoutConfig/{name}"
            )))
            .unwrap_or(Duration::from_millis(DEFAULT_TIMEOUT_MS))
        };
        Spec {
            main_class: text("/mainClass"),
            resource,
            driver_args: pods::args(at("/driverArgs")),
            conf: at("/sparkConf")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            restart_policy: text(&format!("{tolerations}/restartConfig/restartPolicy"))
                .unwrap_or_else(|| "Never".to_string()),
            max_restarts: at(&format!("{tolerations}/restartConfig/maxRestartAttempts"))
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_MAX_RESTARTS),
            restart_backoff: millis(at(&format!(
                "{tolerations}/restartConfig/restartBackoffMillis"
            )))
            .unwrap_or(Duration::from_millis(DEFAULT_RESTART_BACKOFF_MS)),
            driver_start_timeout: timeout("driverStartTimeoutMillis"),
            driver_ready_timeout: timeout("driverReadyTimeoutMillis"),
            executor_start_timeout: timeout("executorStartTimeoutMillis"),
            retain_policy: text(&format!("{tolerations}/resourceRetainPolicy"))
                .unwrap_or_else(|| "Never".to_string()),
            retain_for: millis(at(&format!("{tolerations}/resourceRetainDurationMillis")))
                .filter(|d| !d.is_zero()),
            ttl_after_stop: millis(at(&format!("{tolerations}/ttlAfterStopMillis")))
                .filter(|d| !d.is_zero()),
            spark_version: text("/runtimeVersions/sparkVersion").unwrap_or_default(),
        }
    }

    fn conf(&self, key: &str) -> Option<&str> {
        self.conf.get(key).and_then(Value::as_str)
    }

    fn count(&self, key: &str, default: u64) -> u64 {
        self.conf(key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    }

    fn memory(&self, key: &str) -> u64 {
        pods::with_overhead(self.conf(key).and_then(pods::memory_mib).unwrap_or(1024))
    }

    /// Environment variables from the properties with `prefix` (`spark.kubernetes.driverEnv.`).
    fn env(&self, prefix: &str) -> Vec<Value> {
        self.conf
            .iter()
            .filter_map(|(key, value)| {
                let name = key.strip_prefix(prefix)?;
                Some(json!({"name": name, "value": value.as_str().unwrap_or("")}))
            })
            .collect()
    }

    /// Whether the restart policy restarts after `outcome`.
    fn restarts_after(&self, outcome: &str) -> bool {
        match self.restart_policy.as_str() {
            "Always" => true,
            "OnFailure" => outcome != "Succeeded",
            "OnInfrastructureFailure" => matches!(
                outcome,
                "DriverStartTimedOut" | "ExecutorsStartTimedOut" | "SchedulingFailure"
            ),
            _ => false,
        }
    }

    /// Whether the resources are kept after `outcome`.
    fn retains_after(&self, outcome: &str) -> bool {
        match self.retain_policy.as_str() {
            "Always" => true,
            "OnFailure" => outcome != "Succeeded",
            _ => false,
        }
    }
}

/// The current state and attempt, as the status shows them.
struct Current {
    summary: Option<String>,
    since: Option<jiff::Timestamp>,
    attempt: u64,
}

fn current(app: &Value) -> Current {
    let state = app.pointer("/status/currentState");
    Current {
        summary: state
            .and_then(|s| s.get("currentStateSummary"))
            .and_then(Value::as_str)
            .map(str::to_string),
        since: time_of(state.and_then(|s| s.get("lastTransitionTime"))),
        attempt: app
            .pointer("/status/currentAttemptSummary/attemptInfo/id")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    }
}

/// The history entries, oldest first.
fn history(app: &Value) -> Vec<Value> {
    let mut entries: Vec<(u64, Value)> = app
        .pointer("/status/stateTransitionHistory")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, v.clone())))
                .collect()
        })
        .unwrap_or_default();
    entries.sort_by_key(|(id, _)| *id);
    entries.into_iter().map(|(_, v)| v).collect()
}

fn summary_of(state: &Value) -> &str {
    state
        .get("currentStateSummary")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// When the application stopped: the first stop state of its last attempt.
fn stopped_at(app: &Value) -> Option<jiff::Timestamp> {
    let history = history(app);
    let start = history
        .iter()
        .rposition(|s| summary_of(s) == "ScheduledToRestart")
        .map_or(0, |i| i + 1);
    history[start..]
        .iter()
        .find(|s| STOPPED.contains(&summary_of(s)))
        .and_then(|s| time_of(s.get("lastTransitionTime")))
}

/// One reconcile of one application.
struct Step<'a> {
    ctx: &'a Ctx,
    key: &'a ObjectKey,
    app: &'a Value,
    uid: &'a str,
}

impl Step<'_> {
    fn name(&self) -> &str {
        meta::name(self.app)
    }

    fn namespace(&self) -> &str {
        meta::namespace(self.app)
    }

    fn driver_name(&self, attempt: u64) -> String {
        format!("{}-{attempt}-driver", self.name())
    }

    /// Writes the next state (and history entry).
    fn transition(&self, summary: &str, message: Option<&str>, driver: Option<&Value>) {
        self.transition_attempt(summary, message, driver, None);
    }

    fn transition_attempt(
        &self,
        summary: &str,
        message: Option<&str>,
        driver: Option<&Value>,
        attempt: Option<u64>,
    ) {
        let mut state = json!({
            "currentStateSummary": summary,
            "lastTransitionTime": meta::format_micro_time(jiff::Timestamp::now()),
        });
        if let Some(message) = message {
            state["message"] = json!(message);
        }
        if let Some(status) = driver.and_then(|pod| pod.get("status")) {
            state["lastObservedDriverStatus"] = status.clone();
        }
        write_status(self.ctx, self.key, self.uid, |status| {
            let history = status
                .as_object_mut()
                .map(|s| {
                    s.entry("stateTransitionHistory")
                        .or_insert_with(|| json!({}))
                })
                .and_then(Value::as_object_mut);
            if let Some(history) = history {
                let next = history
                    .keys()
                    .filter_map(|k| k.parse::<u64>().ok())
                    .max()
                    .map_or(0, |m| m + 1);
                history.insert(next.to_string(), state.clone());
            }
            status["currentState"] = state;
            match attempt {
                Some(id) => status["currentAttemptSummary"] = json!({"attemptInfo": {"id": id}}),
                None if status.get("currentAttemptSummary").is_none() => {
                    status["currentAttemptSummary"] = json!({"attemptInfo": {"id": 0}});
                }
                None => {}
            }
        });
    }

    fn drivers(&self) -> Vec<std::sync::Arc<Value>> {
        pods::owned_by(self.ctx, self.uid)
            .into_iter()
            .filter(|p| meta::label(p, pods::SPARK_ROLE) == Some("driver"))
            .collect()
    }

    fn driver(&self, attempt: u64) -> Option<std::sync::Arc<Value>> {
        let name = self.driver_name(attempt);
        self.drivers().into_iter().find(|p| meta::name(p) == name)
    }

    fn release_all(&self) {
        for driver in self.drivers() {
            pods::release(self.ctx, &driver, true);
        }
    }

    /// The application is being deleted: release its pods, note it, let it go.
    fn shut_down(&self) {
        if !meta::finalizers(self.app).iter().any(|f| f == FINALIZER) {
            return;
        }
        self.release_all();
        let summary = current(self.app).summary;
        if summary.as_deref().is_some_and(|s| s != "ResourceReleased") {
            self.transition("ResourceReleased", Some(SHUTDOWN), None);
        }
        set_finalizer(self.ctx, self.key, FINALIZER, false);
    }

    fn advance(&self, spec: &Spec, fault: Option<SparkFault>) -> Option<Duration> {
        let now = current(self.app);
        let Some(summary) = now.summary.clone() else {
            self.transition("Submitted", Some(SUBMITTED), None);
            return None;
        };
        let since = now.since.unwrap_or_else(jiff::Timestamp::now);
        match summary.as_str() {
            "Submitted" => self.request_driver(spec, 0),
            "ScheduledToRestart" => match remaining(since, spec.restart_backoff) {
                Some(wait) => Some(wait),
                None => self.request_driver(spec, now.attempt + 1),
            },
            "DriverRequested" | "DriverStarted" | "DriverReady" | "RunningHealthy" => {
                self.watch_driver(spec, &summary, since, now.attempt, fault)
            }
            s if OUTCOMES.contains(&s) => self.end_attempt(spec, s, since, now.attempt, fault),
            "TerminatedWithoutReleaseResources" => {
                let release = spec.retain_for.map(|d| remaining(since, d));
                match release {
                    Some(None) => {
                        self.release_all();
                        self.transition("ResourceReleased", None, None);
                        None
                    }
                    Some(Some(wait)) => Some(self.expire(spec).map_or(wait, |t| t.min(wait))),
                    None => self.expire(spec),
                }
            }
            "ResourceReleased" => self.expire(spec),
            // A state this simulation does not produce: leave it.
            _ => None,
        }
    }

    /// Deletes the application once its TTL after the stop ran out.
    fn expire(&self, spec: &Spec) -> Option<Duration> {
        let ttl = spec.ttl_after_stop?;
        let stopped = stopped_at(self.app)?;
        match remaining(stopped, ttl) {
            Some(wait) => Some(wait),
            None => {
                super::delete_application(self.ctx, self.key, self.uid);
                None
            }
        }
    }

    fn request_driver(&self, spec: &Spec, attempt: u64) -> Option<Duration> {
        let plan = self.driver_plan(spec, attempt);
        match pods::create(self.ctx, self.namespace(), plan.to_pod()) {
            Ok(_) => {}
            Err(error) if error.code == 409 => {}
            Err(error) => {
                let message = format!(
                    "Failed to request driver from scheduler backend. StatusCode: {}, {}",
                    error.code, error.message
                );
                self.transition_attempt("SchedulingFailure", Some(&message), None, Some(attempt));
                return None;
            }
        }
        self.transition_attempt(
            "DriverRequested",
            Some(DRIVER_REQUESTED),
            None,
            Some(attempt),
        );
        None
    }

    fn labels(&self, spec: &Spec, template: &str, role: &str) -> Map<String, Value> {
        let template = format!("/spec/{template}/podTemplateSpec/metadata/labels");
        pods::labels(
            self.app.pointer(&template),
            [
                (APP_NAME_LABEL, self.name().to_string()),
                (pods::SPARK_ROLE, role.to_string()),
                ("spark-app-name", self.name().to_string()),
                ("spark-app-selector", pods::app_selector(self.app)),
                ("spark-version", spec.spark_version.clone()),
            ],
        )
    }

    fn annotations(&self, template: &str) -> Map<String, Value> {
        self.app
            .pointer(&format!(
                "/spec/{template}/podTemplateSpec/metadata/annotations"
            ))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    fn image(&self, spec: &Spec) -> String {
        spec.conf("spark.kubernetes.container.image")
            .unwrap_or("apache/spark")
            .to_string()
    }

    fn pull_secrets(&self, spec: &Spec) -> Vec<String> {
        spec.conf("spark.kubernetes.container.image.pullSecrets")
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn driver_plan(&self, spec: &Spec, attempt: u64) -> PodPlan {
        let template: Vec<Value> = self
            .app
            .pointer("/spec/driverSpec/podTemplateSpec/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (container, sidecars) = pods::template_containers(
            &template,
            spec.conf("spark.kubernetes.driver.podTemplateContainerName"),
        );
        PodPlan {
            name: self.driver_name(attempt),
            labels: self.labels(spec, "driverSpec", "driver"),
            annotations: self.annotations("driverSpec"),
            owner: pods::owner_reference(self.app),
            container,
            image: self.image(spec),
            pull_policy: spec
                .conf("spark.kubernetes.container.image.pullPolicy")
                .map(str::to_string),
            pull_secrets: self.pull_secrets(spec),
            args: pods::driver_args(
                spec.main_class.as_deref(),
                &spec.resource,
                spec.driver_args.iter().cloned(),
            ),
            env: pods::driver_env(self.app, spec.env("spark.kubernetes.driverEnv.")),
            service_account: spec
                .conf("spark.kubernetes.authenticate.driver.serviceAccountName")
                .map(str::to_string),
            cores: spec.count("spark.driver.cores", 1),
            memory_mib: spec.memory("spark.driver.memory"),
            ports: pods::driver_ports(),
            sidecars,
        }
    }

    fn executor_plans(&self, spec: &Spec, driver: &Value) -> Vec<PodPlan> {
        let selector = pods::app_selector(self.app);
        let instances = spec.count("spark.executor.instances", 2);
        let prefix = pods::executor_prefix(self.name(), &selector, instances);
        (1..=instances)
            .map(|id| {
                let mut labels = self.labels(spec, "executorSpec", "executor");
                labels.insert("spark-exec-id".into(), json!(id.to_string()));
                let env = pods::executor_env(id, &selector, spec.env("spark.executorEnv."));
                PodPlan {
                    name: format!("{prefix}-exec-{id}"),
                    labels,
                    annotations: self.annotations("executorSpec"),
                    owner: pods::owner_reference(driver),
                    container: pods::EXECUTOR_CONTAINER.to_string(),
                    image: self.image(spec),
                    pull_policy: spec
                        .conf("spark.kubernetes.container.image.pullPolicy")
                        .map(str::to_string),
                    pull_secrets: self.pull_secrets(spec),
                    args: vec!["executor".to_string()],
                    env,
                    service_account: spec
                        .conf("spark.kubernetes.authenticate.executor.serviceAccountName")
                        .map(str::to_string),
                    cores: spec.count("spark.executor.cores", 1),
                    memory_mib: spec.memory("spark.executor.memory"),
                    ports: json!([]),
                    sidecars: Vec::new(),
                }
            })
            .collect()
    }

    /// Follows the driver of the running attempt.
    fn watch_driver(
        &self,
        spec: &Spec,
        summary: &str,
        since: jiff::Timestamp,
        attempt: u64,
        fault: Option<SparkFault>,
    ) -> Option<Duration> {
        let Some(driver) = self.driver(attempt) else {
            // The driver pod went away under the operator.
            self.transition("DriverEvicted", Some(DRIVER_EVICTED), None);
            return None;
        };
        let state = pods::driver_state(&driver);
        let ended = |outcome: &str, message: &str| {
            pods::release(self.ctx, &driver, false);
            self.transition(outcome, Some(message), Some(&driver));
            None
        };
        match state {
            DriverState::Succeeded => ended("Succeeded", SUCCEEDED),
            DriverState::Failed { .. } => ended("Failed", FAILED),
            DriverState::Evicted { .. } => ended("DriverEvicted", DRIVER_EVICTED),
            // Being deleted by someone: what is left of it decides once it is gone.
            DriverState::Deleting => None,
            DriverState::Running { .. } if fault == Some(SparkFault::FailWithDriverRunning) => {
                self.transition("Failed", Some(FAILED), Some(&driver));
                None
            }
            DriverState::Pending => match summary {
                "DriverRequested" => match remaining(since, spec.driver_start_timeout) {
                    Some(wait) => Some(wait),
                    None => {
                        self.transition(
                            "DriverStartTimedOut",
                            Some(DRIVER_START_TIMED_OUT),
                            Some(&driver),
                        );
                        None
                    }
                },
                // The container ran and waits again: nothing to note.
                _ => None,
            },
            DriverState::Running { ready } => match summary {
                "DriverRequested" => {
                    self.transition("DriverStarted", Some(DRIVER_STARTED), None);
                    None
                }
                "DriverStarted" if ready => {
                    self.transition("DriverReady", Some(DRIVER_READY), None);
                    None
                }
                "DriverStarted" => match remaining(since, spec.driver_ready_timeout) {
                    Some(wait) => Some(wait),
                    None => {
                        self.transition(
                            "DriverReadyTimedOut",
                            // The operator words both driver timeouts alike.
                            Some(DRIVER_START_TIMED_OUT),
                            Some(&driver),
                        );
                        None
                    }
                },
                "DriverReady" => self.start_executors(spec, &driver, since),
                _ => None,
            },
        }
    }

    /// Creates the executors (as the driver would), and moves on once every one has started.
    fn start_executors(
        &self,
        spec: &Spec,
        driver: &Value,
        since: jiff::Timestamp,
    ) -> Option<Duration> {
        if !self.ctx.config.executors {
            self.transition("RunningHealthy", Some(RUNNING_HEALTHY), None);
            return None;
        }
        let executors = meta::uid(driver)
            .map(|uid| pods::owned_by(self.ctx, uid))
            .unwrap_or_default();
        if executors.is_empty() {
            let plans = self.executor_plans(spec, driver);
            if plans.is_empty() {
                self.transition("RunningHealthy", Some(RUNNING_HEALTHY), None);
                return None;
            }
            for plan in plans {
                // A refused executor stays missing; the start timeout tells.
                let _ = pods::create(self.ctx, self.namespace(), plan.to_pod());
            }
            return None;
        }
        if executors.iter().all(|e| pods::has_started(e)) {
            self.transition("RunningHealthy", Some(RUNNING_HEALTHY), None);
            return None;
        }
        match remaining(since, spec.executor_start_timeout) {
            Some(wait) => Some(wait),
            None => {
                self.transition(
                    "ExecutorsStartTimedOut",
                    Some(EXECUTORS_START_TIMED_OUT),
                    Some(driver),
                );
                None
            }
        }
    }

    /// The attempt ended with `outcome` at `since`: restart, keep the resources, or release
    /// them (after the release delay).
    fn end_attempt(
        &self,
        spec: &Spec,
        outcome: &str,
        since: jiff::Timestamp,
        attempt: u64,
        fault: Option<SparkFault>,
    ) -> Option<Duration> {
        let keep = !spec.restarts_after(outcome)
            && (spec.retains_after(outcome) || fault == Some(SparkFault::FailWithDriverRunning));
        if keep {
            self.transition(
                "TerminatedWithoutReleaseResources",
                Some(TERMINATED_WITHOUT_RELEASE),
                None,
            );
            return None;
        }
        if let Some(wait) = remaining(since, self.ctx.config.release_delay) {
            return Some(wait);
        }
        self.release_all();
        if !spec.restarts_after(outcome) {
            self.transition("ResourceReleased", None, None);
        } else if attempt < spec.max_restarts {
            self.transition("ScheduledToRestart", None, None);
        } else {
            let message = format!(
                "The maximum number of restart attempts ({}) has been exceeded.",
                spec.max_restarts
            );
            self.transition("ResourceReleased", Some(&message), None);
        }
        None
    }
}
