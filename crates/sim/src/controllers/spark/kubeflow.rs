//! The simulated Kubeflow spark-operator (`sparkoperator.k8s.io/v1beta2` SparkApplication).
//!
//! States (`status.applicationState.state`), as the operator's controller moves them: a new
//! application gets an empty state `""`; submission creates the driver pod (`<app>-driver`, or
//! `spec.driver.podName`) → `SUBMITTED` (`submissionAttempts`, `executionAttempts`,
//! `lastSubmissionAttemptTime`, `submissionID`, `sparkApplicationId`, `driverInfo.podName`), or
//! `SUBMISSION_FAILED` with the error when the API server refuses the pod. The driver pod then
//! decides: running → `RUNNING` (executors created, `executorState`), exit 0 → `SUCCEEDING` →
//! `COMPLETED`, otherwise (or evicted) → `FAILING` (`errorMessage` `driver container failed
//! with ExitCode: N, Reason: R`, or `driver container status missing`) → `FAILED`. The driver's
//! end (`SUCCEEDING`/`FAILING`) sets `terminationTime`. With `restartPolicy` `OnFailure` (or
//! `Always`), a failed run is rerun (`PENDING_RERUN`, which clears `terminationTime`,
//! `errorMessage`, `driverInfo`, `executorState` and `sparkApplicationId`: old driver deleted,
//! then submitted again) while `executionAttempts <= onFailureRetries`, and a failed
//! submission retried while `submissionAttempts <= onSubmissionFailureRetries`, each after its
//! retry interval; a submission that failed for good ends at `FAILED`, which then sets
//! `terminationTime`. `timeToLiveSeconds` after it the application is deleted. The driver pod
//! is kept until then (it goes with its application). Its admission webhook
//! (`kinds::spark_application::admission`) refuses names that are not DNS-1035 labels and the
//! `sparkConf` keys the operator reserves.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::pods::{self, DriverState, PodPlan};
use super::{Ctx, Operator, SparkFault, remaining, time_of, write_status};
use crate::config::CrdBundle;
use crate::kinds::spark_application::KUBEFLOW_GROUP;
pub use crate::kinds::spark_application::{DENIED_SPARK_CONF, VALIDATING_WEBHOOK};
use crate::store::{ObjectKey, meta};

/// The label naming a pod's SparkApplication.
pub const APP_NAME_LABEL: &str = "sparkoperator.k8s.io/app-name";
/// The label marking the pods the operator launched.
pub const LAUNCHED_BY_LABEL: &str = "sparkoperator.k8s.io/launched-by-spark-operator";
/// The label with the submission's id.
pub const SUBMISSION_ID_LABEL: &str = "sparkoperator.k8s.io/submission-id";

const DEFAULT_RETRY_INTERVAL_SECONDS: u64 = 5;

/// The error the operator records for a failed (or evicted) driver pod, read from its driver
/// container's terminated state: `driver container failed with ExitCode: N, Reason: R`, nothing
/// for exit code 0, `driver container status missing` when the container has no terminated
/// state (the operator's `updateDriverState`).
fn driver_error(driver: &Value) -> Option<String> {
    let statuses = driver
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let container = statuses.and_then(|all| {
        all.iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(pods::DRIVER_CONTAINER))
    });
    let Some(terminated) = container.and_then(|c| c.pointer("/state/terminated")) else {
        return Some("driver container status missing".to_string());
    };
    let code = terminated
        .get("exitCode")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let reason = terminated
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    (code != 0).then(|| format!("driver container failed with ExitCode: {code}, Reason: {reason}"))
}

/// The simulated Kubeflow operator.
#[derive(Default)]
pub struct Kubeflow;

impl Operator for Kubeflow {
    const BUNDLE: CrdBundle = CrdBundle::SparkKubeflow;
    const GROUP: &'static str = KUBEFLOW_GROUP;
    const APP_NAME_LABEL: &'static str = APP_NAME_LABEL;
    const SERVICE_ACCOUNT: &'static str = "spark-operator-spark";

    fn reconcile(&mut self, ctx: &Ctx, key: &ObjectKey, app: &Value) -> Option<Duration> {
        let fault = ctx.fault(app);
        if fault == Some(SparkFault::NoStatus) || meta::is_deleting(app) {
            return None;
        }
        let uid = meta::uid(app)?.to_string();
        if fault == Some(SparkFault::UnreadableStatus) {
            write_status(ctx, key, &uid, |status| {
                *status = json!({"phase": "Running"})
            });
            return None;
        }
        let step = Step {
            ctx,
            key,
            app,
            uid: &uid,
        };
        step.advance(fault)
    }
}

/// The restart policy (`spec.restartPolicy`).
struct Restart {
    kind: String,
    on_failure_retries: Option<i64>,
    on_failure_interval: Duration,
    on_submission_failure_retries: Option<i64>,
    on_submission_failure_interval: Duration,
}

impl Restart {
    fn read(app: &Value) -> Restart {
        let policy = app.pointer("/spec/restartPolicy");
        let int = |name: &str| policy.and_then(|p| p.get(name)).and_then(Value::as_i64);
        let interval = |name: &str| {
            Duration::from_secs(
                int(name)
                    .and_then(|s| u64::try_from(s).ok())
                    .unwrap_or(DEFAULT_RETRY_INTERVAL_SECONDS),
            )
        };
        Restart {
            kind: policy
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("Never")
                .to_string(),
            on_failure_retries: int("onFailureRetries"),
            on_failure_interval: interval("onFailureRetryInterval"),
            on_submission_failure_retries: int("onSubmissionFailureRetries"),
            on_submission_failure_interval: interval("onSubmissionFailureRetryInterval"),
        }
    }

    /// The operator's rule: `Always` retries; `OnFailure` while `attempts <= retries`.
    fn retries(&self, attempts: i64, retries: Option<i64>) -> bool {
        match self.kind.as_str() {
            "Always" => true,
            "OnFailure" => retries.is_some_and(|r| attempts <= r),
            _ => false,
        }
    }
}

struct Step<'a> {
    ctx: &'a Ctx,
    key: &'a ObjectKey,
    app: &'a Value,
    uid: &'a str,
}

fn count(app: &Value, name: &str) -> i64 {
    app.pointer(&format!("/status/{name}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl Step<'_> {
    fn name(&self) -> &str {
        meta::name(self.app)
    }

    fn namespace(&self) -> &str {
        meta::namespace(self.app)
    }

    fn spec(&self, path: &str) -> Option<&Value> {
        self.app.pointer(&format!("/spec{path}"))
    }

    fn spec_text(&self, path: &str) -> Option<String> {
        self.spec(path).and_then(Value::as_str).map(str::to_string)
    }

    fn driver_name(&self) -> String {
        self.spec_text("/driver/podName")
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{}-driver", self.name()))
    }

    fn driver(&self) -> Option<std::sync::Arc<Value>> {
        let name = self.driver_name();
        pods::owned_by(self.ctx, self.uid)
            .into_iter()
            .find(|p| meta::name(p) == name)
    }

    fn set_state(&self, state: &str, error: Option<&str>, change: impl FnOnce(&mut Value)) {
        write_status(self.ctx, self.key, self.uid, |status| {
            let mut app_state = json!({"state": state});
            if let Some(error) = error {
                app_state["errorMessage"] = json!(error);
            }
            status["applicationState"] = app_state;
            change(status);
        });
    }

    /// COMPLETED or FAILED: `terminationTime` was set when the driver ended; a run that never
    /// got a driver (submission failures) ends now.
    fn terminate(&self, state: &str, error: Option<&str>) {
        self.set_state(state, error, |status| {
            if status.get("terminationTime").is_none_or(Value::is_null) {
                status["terminationTime"] = json!(meta::now());
            }
        });
    }

    /// SUCCEEDING or FAILING: the driver ended, so does the run (`terminationTime`, kept if
    /// already set).
    fn driver_ended(&self, state: &str, error: Option<&str>) {
        self.set_state(state, error, |status| {
            if status.get("terminationTime").is_none_or(Value::is_null) {
                status["terminationTime"] = json!(meta::now());
            }
        });
    }

    /// PENDING_RERUN, with what the operator resets for a new run: the application id, the
    /// termination time, the error, the driver's details and the executors' states.
    fn pending_rerun(&self) {
        self.set_state("PENDING_RERUN", None, |status| {
            status["driverInfo"] = json!({});
            if let Some(s) = status.as_object_mut() {
                for field in ["sparkApplicationId", "terminationTime", "executorState"] {
                    s.remove(field);
                }
            }
        });
    }

    fn advance(&self, fault: Option<SparkFault>) -> Option<Duration> {
        let Some(state) = self
            .app
            .pointer("/status/applicationState/state")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            write_status(self.ctx, self.key, self.uid, |status| {
                // The operator's zero times are `null`, which the CRD's structural schema prunes.
                *status = json!({
                    "applicationState": {"state": ""},
                    "driverInfo": {},
                });
            });
            return None;
        };
        let restart = Restart::read(self.app);
        let error = self
            .app
            .pointer("/status/applicationState/errorMessage")
            .and_then(Value::as_str)
            .map(str::to_string);
        match state.as_str() {
            "" => self.submit(),
            "SUBMITTED" | "RUNNING" => self.watch_driver(&state, fault),
            "SUCCEEDING" => {
                if restart.retries(count(self.app, "executionAttempts"), None) {
                    self.pending_rerun();
                } else {
                    self.terminate("COMPLETED", None);
                }
                None
            }
            "FAILING" => {
                let attempts = count(self.app, "executionAttempts");
                if !restart.retries(attempts, restart.on_failure_retries) {
                    self.terminate("FAILED", error.as_deref());
                    return None;
                }
                let ended = self
                    .driver()
                    .and_then(|d| {
                        time_of(
                            d.pointer("/status/containerStatuses/0/state/terminated/finishedAt"),
                        )
                    })
                    .unwrap_or_else(jiff::Timestamp::now);
                match remaining(ended, restart.on_failure_interval) {
                    Some(wait) => Some(wait),
                    None => {
                        self.pending_rerun();
                        None
                    }
                }
            }
            "SUBMISSION_FAILED" => {
                let attempts = count(self.app, "submissionAttempts");
                if !restart.retries(attempts, restart.on_submission_failure_retries) {
                    self.terminate("FAILED", error.as_deref());
                    return None;
                }
                let last = time_of(self.app.pointer("/status/lastSubmissionAttemptTime"))
                    .unwrap_or_else(jiff::Timestamp::now);
                match remaining(last, restart.on_submission_failure_interval) {
                    Some(wait) => Some(wait),
                    None => self.submit(),
                }
            }
            "PENDING_RERUN" => match self.driver() {
                Some(driver) => {
                    pods::release(self.ctx, &driver, true);
                    None
                }
                None => self.submit(),
            },
            "COMPLETED" | "FAILED" => self.expire(),
            // A state this simulation does not produce: leave it.
            _ => None,
        }
    }

    /// Deletes the application `timeToLiveSeconds` after it terminated.
    fn expire(&self) -> Option<Duration> {
        let ttl = self.spec("/timeToLiveSeconds").and_then(Value::as_u64)?;
        let terminated = time_of(self.app.pointer("/status/terminationTime"))?;
        match remaining(terminated, Duration::from_secs(ttl)) {
            Some(wait) => Some(wait),
            None => {
                super::delete_application(self.ctx, self.key, self.uid);
                None
            }
        }
    }

    /// Submits the application: creates its driver pod, as spark-submit does.
    fn submit(&self) -> Option<Duration> {
        if let Some(existing) = self.driver() {
            // A driver of an earlier run is still going away.
            pods::release(self.ctx, &existing, true);
            return None;
        }
        let submission = meta::new_uid();
        let plan = self.driver_plan(&submission);
        let attempts = count(self.app, "submissionAttempts") + 1;
        let now = meta::now();
        match pods::create(self.ctx, self.namespace(), plan.to_pod()) {
            Ok(_) => {
                let executions = count(self.app, "executionAttempts") + 1;
                let selector = pods::app_selector(self.app);
                let driver = plan.name.clone();
                self.set_state("SUBMITTED", None, |status| {
                    status["submissionAttempts"] = json!(attempts);
                    status["executionAttempts"] = json!(executions);
                    status["lastSubmissionAttemptTime"] = json!(now);
                    status["submissionID"] = json!(submission);
                    status["sparkApplicationId"] = json!(selector);
                    status["driverInfo"] = json!({"podName": driver});
                    if let Some(s) = status.as_object_mut() {
                        s.remove("terminationTime");
                        s.remove("executorState");
                    }
                });
            }
            Err(error) => {
                let message = format!(
                    "failed to run spark-submit: exit status 1: Exception in thread \"main\" io.fabric8.kubernetes.client.KubernetesClientException: Failure executing: POST at: https://kubernetes.default.svc/api/v1/namespaces/{}/pods. Message: {}.",
                    self.namespace(),
                    error.message
                );
                self.set_state("SUBMISSION_FAILED", Some(&message), |status| {
                    status["submissionAttempts"] = json!(attempts);
                    status["lastSubmissionAttemptTime"] = json!(now);
                });
            }
        }
        None
    }

    fn watch_driver(&self, state: &str, fault: Option<SparkFault>) -> Option<Duration> {
        let Some(driver) = self.driver() else {
            self.driver_ended("FAILING", Some("driver pod not found"));
            return None;
        };
        match pods::driver_state(&driver) {
            DriverState::Pending | DriverState::Deleting => None,
            DriverState::Running { .. } if fault == Some(SparkFault::FailWithDriverRunning) => {
                self.terminate(
                    "FAILED",
                    Some("driver pod failed: spark-submit timed out waiting for the driver"),
                );
                None
            }
            DriverState::Running { .. } => {
                let executors = self.executors(&driver);
                let executor_state = executor_states(&executors);
                if state != "RUNNING" {
                    self.set_state("RUNNING", None, |status| {
                        if !executors.is_empty() {
                            status["executorState"] = executor_state;
                        }
                    });
                } else if self.app.pointer("/status/executorState") != Some(&executor_state)
                    && !executors.is_empty()
                {
                    write_status(self.ctx, self.key, self.uid, |status| {
                        status["executorState"] = executor_state;
                    });
                }
                None
            }
            DriverState::Succeeded => {
                self.finish_executors(&driver);
                self.driver_ended("SUCCEEDING", None);
                None
            }
            DriverState::Failed { .. } | DriverState::Evicted { .. } => {
                self.finish_executors(&driver);
                self.driver_ended("FAILING", driver_error(&driver).as_deref());
                None
            }
        }
    }

    /// The executors of a running driver, created on first sight (as the driver requests them).
    fn executors(&self, driver: &Value) -> Vec<std::sync::Arc<Value>> {
        let Some(uid) = meta::uid(driver) else {
            return Vec::new();
        };
        let existing = pods::owned_by(self.ctx, uid);
        if !existing.is_empty() || !self.ctx.config.executors {
            return existing;
        }
        for plan in self.executor_plans(driver) {
            // A refused executor stays missing: the application runs without it.
            let _ = pods::create(self.ctx, self.namespace(), plan.to_pod());
        }
        pods::owned_by(self.ctx, uid)
    }

    /// The driver ended: its executors stop (their last state stays in `executorState`).
    fn finish_executors(&self, driver: &Value) {
        if let Some(uid) = meta::uid(driver) {
            let executors = pods::owned_by(self.ctx, uid);
            if !executors.is_empty() {
                let states: Map<String, Value> = executors
                    .iter()
                    .map(|e| {
                        let state = match executor_state(e) {
                            "RUNNING" | "PENDING" => "COMPLETED",
                            other => other,
                        };
                        (meta::name(e).to_string(), json!(state))
                    })
                    .collect();
                write_status(self.ctx, self.key, self.uid, |status| {
                    status["executorState"] = Value::Object(states);
                });
            }
        }
        pods::release(self.ctx, driver, false);
    }

    fn labels(&self, side: &str, role: &str, submission: &str) -> Map<String, Value> {
        pods::labels(
            self.spec(&format!("/{side}/labels")),
            [
                (APP_NAME_LABEL, self.name().to_string()),
                (pods::SPARK_ROLE, role.to_string()),
                (LAUNCHED_BY_LABEL, "true".to_string()),
                (SUBMISSION_ID_LABEL, submission.to_string()),
                ("spark-app-name", self.name().to_string()),
                ("spark-app-selector", pods::app_selector(self.app)),
                (
                    "spark-version",
                    self.spec_text("/sparkVersion").unwrap_or_default(),
                ),
            ],
        )
    }

    fn annotations(&self, side: &str) -> Map<String, Value> {
        self.spec(&format!("/{side}/annotations"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    fn image(&self, side: &str) -> String {
        self.spec_text(&format!("/{side}/image"))
            .or_else(|| self.spec_text("/image"))
            .unwrap_or_else(|| "apache/spark".to_string())
    }

    fn env(&self, side: &str) -> Vec<Value> {
        self.spec(&format!("/{side}/env"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    fn cores(&self, side: &str) -> u64 {
        self.spec(&format!("/{side}/cores"))
            .and_then(Value::as_u64)
            .unwrap_or(1)
    }

    fn memory(&self, side: &str) -> u64 {
        let jvm = self
            .spec_text(&format!("/{side}/memory"))
            .and_then(|m| pods::memory_mib(&m))
            .unwrap_or(1024);
        pods::with_overhead(jvm)
    }

    fn pull_secrets(&self) -> Vec<String> {
        meta::strings(self.spec("/imagePullSecrets"))
    }

    fn driver_plan(&self, submission: &str) -> PodPlan {
        let args = pods::args(self.spec("/arguments"));
        PodPlan {
            name: self.driver_name(),
            labels: self.labels("driver", "driver", submission),
            annotations: self.annotations("driver"),
            owner: pods::owner_reference(self.app),
            container: pods::DRIVER_CONTAINER.to_string(),
            image: self.image("driver"),
            pull_policy: self.spec_text("/imagePullPolicy"),
            pull_secrets: self.pull_secrets(),
            args: pods::driver_args(
                self.spec_text("/mainClass").as_deref(),
                &self.spec_text("/mainApplicationFile").unwrap_or_default(),
                args,
            ),
            env: pods::driver_env(self.app, self.env("driver")),
            service_account: self.spec_text("/driver/serviceAccount"),
            cores: self.cores("driver"),
            memory_mib: self.memory("driver"),
            ports: pods::driver_ports(),
            // The operator adds `driver.sidecars` to the driver pod.
            sidecars: self
                .spec("/driver/sidecars")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }

    fn executor_plans(&self, driver: &Value) -> Vec<PodPlan> {
        let selector = pods::app_selector(self.app);
        let instances = self
            .spec("/executor/instances")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let prefix = pods::executor_prefix(self.name(), &selector, instances);
        let submission = meta::label(driver, SUBMISSION_ID_LABEL).unwrap_or("");
        (1..=instances)
            .map(|id| {
                let mut labels = self.labels("executor", "executor", submission);
                labels.insert("spark-exec-id".into(), json!(id.to_string()));
                let env = pods::executor_env(id, &selector, self.env("executor"));
                PodPlan {
                    name: format!("{prefix}-exec-{id}"),
                    labels,
                    annotations: self.annotations("executor"),
                    owner: pods::owner_reference(driver),
                    container: pods::EXECUTOR_CONTAINER.to_string(),
                    image: self.image("executor"),
                    pull_policy: self.spec_text("/imagePullPolicy"),
                    pull_secrets: self.pull_secrets(),
                    args: vec!["executor".to_string()],
                    env,
                    service_account: self.spec_text("/executor/serviceAccount"),
                    cores: self.cores("executor"),
                    memory_mib: self.memory("executor"),
                    ports: json!([]),
                    sidecars: Vec::new(),
                }
            })
            .collect()
    }
}

/// The Kubeflow operator's executor state of an executor pod.
fn executor_state(pod: &Value) -> &'static str {
    match pod.pointer("/status/phase").and_then(Value::as_str) {
        Some("Running") => "RUNNING",
        Some("Succeeded") => "COMPLETED",
        Some("Failed") => "FAILED",
        _ => "PENDING",
    }
}

fn executor_states(executors: &[std::sync::Arc<Value>]) -> Value {
    Value::Object(
        executors
            .iter()
            .map(|e| (meta::name(e).to_string(), json!(executor_state(e))))
            .collect(),
    )
}
