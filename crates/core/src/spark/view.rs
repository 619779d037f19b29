//! Lean views of a SparkApplication (of either operator) and of its driver pod: only the fields
//! the Spark status mapping reads.
//!
//! SparkApplications are custom resources, so their views are read from the object's JSON
//! (`serde_json::Value`, or a kube `DynamicObject`'s metadata and data). Reading never fails:
//! what cannot be read is kept as such ([`SparkStatus::Unreadable`], [`ApacheSummary::Other`],
//! [`KubeflowState::Other`]) for the mapping to treat as "cannot tell", never as "no status".

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::operator::{DRIVER_CONTAINER, SparkOperator};
use crate::container::view::{ContainerView, PodSummary};
use crate::marks::non_empty;
use crate::observation::{ManagedMeta, embeds};

/// What the Spark status mapping reads from a SparkApplication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparkAppView {
    /// Which operator's SparkApplication it is.
    pub operator: SparkOperator,
    /// The metadata every managed object carries (name, uid, job id, times, marks); its
    /// fields read as the view's own (`app.name`), as for [`crate::container::JobView`].
    pub meta: ManagedMeta,
    /// The restart policy of the spec.
    pub restart: RestartView,
    /// Kubeflow: the driver pod's name (`status.driverInfo.podName`, else `spec.driver.podName`,
    /// else the `spark.kubernetes.driver.pod.name` property, else `<name>-driver`). Apache:
    /// `None`; its driver pods are found by label ([`SparkOperator::driver_selector`]).
    pub driver_pod_name: Option<String>,
    /// The operator's status.
    pub status: SparkStatus,
}

impl SparkAppView {
    /// Reads a SparkApplication from its metadata and the rest of its object (`spec`,
    /// `status`): the parts of a kube `DynamicObject`.
    pub fn from_parts(operator: SparkOperator, metadata: &ObjectMeta, object: &Value) -> Self {
        let meta = ManagedMeta::read(metadata);
        let spec = object.get("spec");
        let status = read_status(operator, object.get("status"));
        let driver_pod_name = match operator {
            SparkOperator::Apache => None,
            SparkOperator::Kubeflow => Some(kubeflow_driver_pod(&meta.name, spec, object)),
        };
        SparkAppView {
            operator,
            meta,
            restart: RestartView::read(operator, spec),
            driver_pod_name,
            status,
        }
    }

    /// Reads a whole SparkApplication object; the operator comes from its `apiVersion`. `None`
    /// when the object is not a SparkApplication of either operator.
    pub fn from_object(object: &Value) -> Option<Self> {
        let operator = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(SparkOperator::of_api_version)?;
        let metadata = object
            .get("metadata")
            .and_then(|m| ObjectMeta::deserialize(m).ok())
            .unwrap_or_default();
        Some(Self::from_parts(operator, &metadata, object))
    }
}

// Embedded for the reasons given at `JobView`'s.
embeds!(SparkAppView, meta: ManagedMeta);

/// The restart policy of a SparkApplication's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestartView {
    /// The policy (`Never` when the spec names none, as both operators default).
    pub policy: RestartPolicyView,
    /// Kubeflow: `restartPolicy.onFailureRetries`.
    pub on_failure_retries: Option<i64>,
    /// Kubeflow: `restartPolicy.onSubmissionFailureRetries`.
    pub on_submission_failure_retries: Option<i64>,
}

impl RestartView {
    fn read(operator: SparkOperator, spec: Option<&Value>) -> Self {
        let policy = match operator {
            SparkOperator::Apache => pointer(spec, "/applicationTolerations/restartConfig"),
            SparkOperator::Kubeflow => pointer(spec, "/restartPolicy"),
        };
        let name = match operator {
            SparkOperator::Apache => "restartPolicy",
            SparkOperator::Kubeflow => "type",
        };
        RestartView {
            policy: match policy.and_then(|p| p.get(name)).and_then(Value::as_str) {
                None | Some("") | Some("Never") => RestartPolicyView::Never,
                Some("OnFailure") => RestartPolicyView::OnFailure,
                Some("Always") => RestartPolicyView::Always,
                Some("OnInfrastructureFailure") => RestartPolicyView::OnInfrastructureFailure,
                Some(other) => RestartPolicyView::Other(other.to_string()),
            },
            on_failure_retries: policy
                .and_then(|p| p.get("onFailureRetries"))
                .and_then(Value::as_i64),
            on_submission_failure_retries: policy
                .and_then(|p| p.get("onSubmissionFailureRetries"))
                .and_then(Value::as_i64),
        }
    }
}

/// A restart policy, of either operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RestartPolicyView {
    /// Never restart.
    #[default]
    Never,
    /// Restart after a failure.
    OnFailure,
    /// Restart after every end.
    Always,
    /// Apache: restart after an infrastructure failure (start timeouts, scheduling failure).
    OnInfrastructureFailure,
    /// A policy this version does not know.
    Other(String),
}

/// A SparkApplication's status, as far as this version can read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SparkStatus {
    /// The object has no `status` at all: the operator has not written one.
    Absent,
    /// The object has a status this version cannot read (what is missing, in words). It is
    /// never taken for an absent one.
    Unreadable(String),
    /// The apache operator's status.
    Apache(ApacheStatus),
    /// The Kubeflow operator's status.
    Kubeflow(KubeflowStatus),
}

/// The apache operator's status: the current state and the state transition history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApacheStatus {
    /// `status.currentState` (else the newest readable history entry).
    pub current: ApacheState,
    /// `status.stateTransitionHistory`, oldest first (ordered by its numeric keys).
    pub history: Vec<ApacheState>,
    /// How many history entries could not be read (they are left out).
    pub unreadable_history: usize,
}

/// One state of the apache operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApacheState {
    /// `currentStateSummary`.
    pub summary: ApacheSummary,
    /// `lastTransitionTime`.
    pub last_transition_time: Option<Timestamp>,
    /// `message`.
    pub message: Option<String>,
    /// `lastObservedDriverStatus`: the driver pod's status the operator saw when it entered
    /// this state (it records it with the states that end an attempt). Boxed: most states
    /// have none.
    pub driver: Option<Box<DriverView>>,
}

/// A `currentStateSummary` of the apache operator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ApacheSummary {
    /// The application was created.
    Submitted,
    /// The application will be restarted.
    ScheduledToRestart,
    /// The driver pod was requested.
    DriverRequested,
    /// The driver pod is running.
    DriverStarted,
    /// The driver is ready.
    DriverReady,
    /// Fewer executors than the minimum became ready while starting.
    InitializedBelowThresholdExecutors,
    /// All required executors are ready.
    RunningHealthy,
    /// Running with an executor count between the minimum and the maximum.
    RunningWithPartialCapacity,
    /// Running after losing executors below the minimum.
    RunningWithBelowThresholdExecutors,
    /// The driver did not start in time.
    DriverStartTimedOut,
    /// The executors did not start in time.
    ExecutorsStartTimedOut,
    /// The driver did not become ready in time.
    DriverReadyTimedOut,
    /// The application succeeded.
    Succeeded,
    /// The application failed.
    Failed,
    /// The operator could not create the driver's resources.
    SchedulingFailure,
    /// The driver pod was evicted.
    DriverEvicted,
    /// The attempt's resources were released: the application has ended.
    ResourceReleased,
    /// The application ended and its resources are kept.
    TerminatedWithoutReleaseResources,
    /// A state this version does not know.
    Other(String),
}

impl ApacheSummary {
    /// The summary of a state name.
    pub fn parse(name: &str) -> Self {
        use ApacheSummary::*;
        match name {
            "Submitted" => Submitted,
            "ScheduledToRestart" => ScheduledToRestart,
            "DriverRequested" => DriverRequested,
            "DriverStarted" => DriverStarted,
            "DriverReady" => DriverReady,
            "InitializedBelowThresholdExecutors" => InitializedBelowThresholdExecutors,
            "RunningHealthy" => RunningHealthy,
            "RunningWithPartialCapacity" => RunningWithPartialCapacity,
            "RunningWithBelowThresholdExecutors" => RunningWithBelowThresholdExecutors,
            "DriverStartTimedOut" => DriverStartTimedOut,
            "ExecutorsStartTimedOut" => ExecutorsStartTimedOut,
            "DriverReadyTimedOut" => DriverReadyTimedOut,
            "Succeeded" => Succeeded,
            "Failed" => Failed,
            "SchedulingFailure" => SchedulingFailure,
            "DriverEvicted" => DriverEvicted,
            "ResourceReleased" => ResourceReleased,
            "TerminatedWithoutReleaseResources" => TerminatedWithoutReleaseResources,
            other => Other(other.to_string()),
        }
    }

    /// The state's name.
    pub fn as_str(&self) -> &str {
        use ApacheSummary::*;
        match self {
            Submitted => "Submitted",
            ScheduledToRestart => "ScheduledToRestart",
            DriverRequested => "DriverRequested",
            DriverStarted => "DriverStarted",
            DriverReady => "DriverReady",
            InitializedBelowThresholdExecutors => "InitializedBelowThresholdExecutors",
            RunningHealthy => "RunningHealthy",
            RunningWithPartialCapacity => "RunningWithPartialCapacity",
            RunningWithBelowThresholdExecutors => "RunningWithBelowThresholdExecutors",
            DriverStartTimedOut => "DriverStartTimedOut",
            ExecutorsStartTimedOut => "ExecutorsStartTimedOut",
            DriverReadyTimedOut => "DriverReadyTimedOut",
            Succeeded => "Succeeded",
            Failed => "Failed",
            SchedulingFailure => "SchedulingFailure",
            DriverEvicted => "DriverEvicted",
            ResourceReleased => "ResourceReleased",
            TerminatedWithoutReleaseResources => "TerminatedWithoutReleaseResources",
            Other(name) => name,
        }
    }
}

/// The Kubeflow operator's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeflowStatus {
    /// `applicationState.state`.
    pub state: KubeflowState,
    /// `applicationState.errorMessage`.
    pub error_message: Option<String>,
    /// `submissionAttempts`.
    pub submission_attempts: i64,
    /// `executionAttempts`.
    pub execution_attempts: i64,
    /// `lastSubmissionAttemptTime`.
    pub last_submission_attempt_time: Option<Timestamp>,
    /// `terminationTime`: when the run ended: the operator sets it when the driver ends
    /// (SUCCEEDING, FAILING), or at FAILED when no driver ran; PENDING_RERUN clears it.
    pub termination_time: Option<Timestamp>,
}

/// An `applicationState.state` of the Kubeflow operator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KubeflowState {
    /// `""`: not submitted yet.
    New,
    /// `SUBMITTED`: submitted, the driver is pending.
    Submitted,
    /// `RUNNING`: the driver runs.
    Running,
    /// `COMPLETED`: succeeded (terminal).
    Completed,
    /// `FAILED`: failed (terminal).
    Failed,
    /// `SUBMISSION_FAILED`: spark-submit failed; the operator may retry.
    SubmissionFailed,
    /// `PENDING_RERUN`: waiting to be submitted again.
    PendingRerun,
    /// `INVALIDATING`: the spec changed; the operator is restarting it.
    Invalidating,
    /// `SUCCEEDING`: the driver completed; the outcome is about to be recorded.
    Succeeding,
    /// `FAILING`: the driver failed; the operator decides on a rerun.
    Failing,
    /// `SUSPENDING`.
    Suspending,
    /// `SUSPENDED`.
    Suspended,
    /// `RESUMING`.
    Resuming,
    /// `UNKNOWN`: the operator cannot tell the driver's state.
    Unknown,
    /// A state this version does not know.
    Other(String),
}

impl KubeflowState {
    /// The state of its name.
    pub fn parse(name: &str) -> Self {
        use KubeflowState::*;
        match name {
            "" => New,
            "SUBMITTED" => Submitted,
            "RUNNING" => Running,
            "COMPLETED" => Completed,
            "FAILED" => Failed,
            "SUBMISSION_FAILED" => SubmissionFailed,
            "PENDING_RERUN" => PendingRerun,
            "INVALIDATING" => Invalidating,
            "SUCCEEDING" => Succeeding,
            "FAILING" => Failing,
            "SUSPENDING" => Suspending,
            "SUSPENDED" => Suspended,
            "RESUMING" => Resuming,
            "UNKNOWN" => Unknown,
            other => Other(other.to_string()),
        }
    }

    /// The state's name.
    pub fn as_str(&self) -> &str {
        use KubeflowState::*;
        match self {
            New => "",
            Submitted => "SUBMITTED",
            Running => "RUNNING",
            Completed => "COMPLETED",
            Failed => "FAILED",
            SubmissionFailed => "SUBMISSION_FAILED",
            PendingRerun => "PENDING_RERUN",
            Invalidating => "INVALIDATING",
            Succeeding => "SUCCEEDING",
            Failing => "FAILING",
            Suspending => "SUSPENDING",
            Suspended => "SUSPENDED",
            Resuming => "RESUMING",
            Unknown => "UNKNOWN",
            Other(name) => name,
        }
    }
}

/// What the Spark status mapping reads from a driver pod (or from a driver status the apache
/// operator recorded, which has no metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverView {
    /// What every pod view reads (none of the metadata for a recorded driver status); its
    /// fields read as the view's own.
    pub pod: PodSummary,
    /// The driver container's status: the container named [`DRIVER_CONTAINER`], else the
    /// first one (in spec order, when the spec is known).
    pub container: Option<ContainerView>,
    /// The driver container's memory limit as written (`896Mi`), when its pod's spec is known:
    /// an OOM kill's message names it.
    pub memory_limit: Option<String>,
}

// Embedded for the reasons given at `JobView`'s.
embeds!(DriverView, pod: PodSummary);

impl From<&Pod> for DriverView {
    fn from(pod: &Pod) -> Self {
        let containers = pod.spec.as_ref().map(|spec| spec.containers.as_slice());
        let first = containers
            .and_then(|containers| containers.first())
            .map(|c| c.name.as_str());
        let driver = containers.and_then(|containers| {
            containers
                .iter()
                .find(|c| c.name == DRIVER_CONTAINER)
                .or_else(|| containers.first())
        });
        let mut view = pod
            .status
            .as_ref()
            .map(|s| DriverView::read_status(s, first))
            .unwrap_or_default();
        view.pod = PodSummary::of(pod);
        view.memory_limit = driver
            .and_then(|c| c.resources.as_ref()?.limits.as_ref()?.get("memory"))
            .map(|quantity| quantity.0.clone());
        view
    }
}

impl DriverView {
    /// A view of a driver pod's status alone (as the apache operator records it).
    pub fn from_pod_status(status: &PodStatus) -> Self {
        Self::read_status(status, None)
    }

    fn read_status(status: &PodStatus, first: Option<&str>) -> Self {
        let statuses = status.container_statuses.as_deref().unwrap_or(&[]);
        let container = statuses
            .iter()
            .find(|s| s.name == DRIVER_CONTAINER)
            .or_else(|| first.and_then(|name| statuses.iter().find(|s| s.name == name)))
            .or_else(|| statuses.first())
            .map(ContainerView::from);
        DriverView {
            pod: PodSummary::of_status(Some(status)),
            container,
            memory_limit: None,
        }
    }
}

fn pointer<'v>(value: Option<&'v Value>, path: &str) -> Option<&'v Value> {
    value.and_then(|v| v.pointer(path))
}

fn string_at(value: Option<&Value>, path: &str) -> Option<String> {
    non_empty(pointer(value, path).and_then(Value::as_str))
}

fn timestamp(value: Option<&Value>) -> Option<Timestamp> {
    value.and_then(Value::as_str).and_then(|t| t.parse().ok())
}

fn read_status(operator: SparkOperator, status: Option<&Value>) -> SparkStatus {
    let status = match status {
        None | Some(Value::Null) => return SparkStatus::Absent,
        Some(status) => status,
    };
    if !status.is_object() {
        return SparkStatus::Unreadable(format!(
            "the status is not an object but {}",
            describe(status)
        ));
    }
    match operator {
        SparkOperator::Apache => read_apache(status),
        SparkOperator::Kubeflow => read_kubeflow(status),
    }
}

fn read_apache(status: &Value) -> SparkStatus {
    let mut history: Vec<(u64, ApacheState)> = Vec::new();
    let mut unreadable_history = 0;
    if let Some(entries) = status.get("stateTransitionHistory") {
        match entries.as_object() {
            Some(entries) => {
                for (key, state) in entries {
                    match (key.parse::<u64>(), read_apache_state(state)) {
                        (Ok(id), Some(state)) => history.push((id, state)),
                        _ => unreadable_history += 1,
                    }
                }
            }
            None => unreadable_history += 1,
        }
    }
    history.sort_by_key(|(id, _)| *id);
    let history: Vec<ApacheState> = history.into_iter().map(|(_, state)| state).collect();
    let current = status
        .get("currentState")
        .and_then(read_apache_state)
        .or_else(|| history.last().cloned());
    match current {
        Some(current) => SparkStatus::Apache(ApacheStatus {
            current,
            history,
            unreadable_history,
        }),
        None => SparkStatus::Unreadable(format!(
            "the status has no currentState.currentStateSummary (it is {})",
            brief(status)
        )),
    }
}

fn read_apache_state(state: &Value) -> Option<ApacheState> {
    let summary = state.get("currentStateSummary").and_then(Value::as_str)?;
    Some(ApacheState {
        summary: ApacheSummary::parse(summary),
        last_transition_time: timestamp(state.get("lastTransitionTime")),
        message: non_empty(state.get("message").and_then(Value::as_str)),
        driver: state
            .get("lastObservedDriverStatus")
            .and_then(|s| PodStatus::deserialize(s).ok())
            .map(|s| Box::new(DriverView::from_pod_status(&s))),
    })
}

fn read_kubeflow(status: &Value) -> SparkStatus {
    let Some(state) = status
        .get("applicationState")
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
    else {
        return SparkStatus::Unreadable(format!(
            "the status has no applicationState.state (it is {})",
            brief(status)
        ));
    };
    let count = |name: &str| status.get(name).and_then(Value::as_i64).unwrap_or(0);
    SparkStatus::Kubeflow(KubeflowStatus {
        state: KubeflowState::parse(state),
        error_message: string_at(Some(status), "/applicationState/errorMessage"),
        submission_attempts: count("submissionAttempts"),
        execution_attempts: count("executionAttempts"),
        last_submission_attempt_time: timestamp(status.get("lastSubmissionAttemptTime")),
        termination_time: timestamp(status.get("terminationTime")),
    })
}

fn kubeflow_driver_pod(name: &str, spec: Option<&Value>, object: &Value) -> String {
    string_at(object.get("status"), "/driverInfo/podName")
        .or_else(|| string_at(spec, "/driver/podName"))
        .or_else(|| {
            spec.and_then(|s| s.get("sparkConf"))
                .and_then(|conf| conf.get("spark.kubernetes.driver.pod.name"))
                .and_then(Value::as_str)
                .and_then(|n| non_empty(Some(n)))
        })
        .unwrap_or_else(|| format!("{name}-driver"))
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A short rendering of a status for messages: its JSON, cut at 200 bytes.
fn brief(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 200 {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}
