//! The status model: one state machine and one closed set of reasons for every kind of job.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// Where a job stands. `Succeeded`, `Failed` and `Cancelled` are terminal and never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// Accepted by Kubernetes, not running yet (no pod, pod pending, image pulling, unschedulable).
    Queued,
    /// Its main container (or Spark driver) has started.
    Started,
    /// Ended successfully.
    Succeeded,
    /// Ended unsuccessfully; the reason tells whose fault and whether a retry may help.
    Failed,
    /// A cancel was requested and the work may still be running.
    Cancelling,
    /// Cancelled; the work has stopped or is being torn down by Kubernetes.
    Cancelled,
}

impl JobState {
    /// All states, in lifecycle order.
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Started,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelling,
        JobState::Cancelled,
    ];

    /// Whether this state is final.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// The state as printed and serialized, e.g. `SUCCEEDED`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "QUEUED",
            JobState::Started => "STARTED",
            JobState::Succeeded => "SUCCEEDED",
            JobState::Failed => "FAILED",
            JobState::Cancelling => "CANCELLING",
            JobState::Cancelled => "CANCELLED",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for JobState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a job state: expected one of QUEUED, STARTED, SUCCEEDED, FAILED, CANCELLING, CANCELLED"
                )
            })
    }
}

/// Why a job is in its state: a closed set, documented with the rules that pick it in
/// `docs/statuses.md`.
///
/// Failure reasons fall into three classes (see [`Reason::failure_class`]): the job's own fault,
/// the infrastructure's fault (a retry on another node may well succeed), and configuration
/// problems that no retry will fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reason {
    // Queued.
    /// Accepted; no pod exists yet, the pod waits for the scheduler, or an attempt ended and
    /// the Job controller has not judged it (or the Spark operator has not started the driver).
    Pending,
    /// Admission is held by a queue (Kueue) or the job is suspended.
    Suspended,
    /// The scheduler found no node for the pod; the message carries the scheduler's words.
    Unschedulable,
    /// The pod waits for its image, a volume, an init container or container creation (also
    /// while a container creation error is within its grace period).
    ContainerCreating,
    /// The image cannot be pulled yet (`ErrImagePull`, `ImagePullBackOff`, ...); the job fails
    /// with `ImagePullFailed` once the pull grace period expires.
    ImagePullBackOff,
    // Started.
    /// The main container (or Spark driver) runs.
    Running,
    // Succeeded.
    /// The job ended successfully.
    Completed,
    // Failed: the job's own fault.
    /// The main container (or an init container) exited with a non-zero code, or the Job
    /// failed for a reason this version does not know.
    Error,
    /// The main container was killed for exceeding its memory limit (even when its exit code was 0).
    OomKilled,
    /// The job ran out of its time (`timeout`, activeDeadlineSeconds of the Job or the pod).
    DeadlineExceeded,
    /// Every allowed attempt failed (several attempts; a single failed attempt reports its
    /// own cause).
    BackoffLimitExceeded,
    /// The pod failure policy failed the job.
    PodFailurePolicy,
    /// The Spark application failed.
    SparkFailed,
    // Failed: configuration.
    /// The image cannot be pulled (after the grace period).
    ImagePullFailed,
    /// The image reference is malformed.
    InvalidImageName,
    /// A secret or configmap the container needs is missing.
    CreateContainerConfigError,
    /// The container runtime could not create or run the container (`CreateContainerError`,
    /// `RunContainerError`, after the grace period).
    CreateContainerError,
    /// The job stayed pending past the pending timeout: its pod found no node, or no pod was
    /// created at all.
    UnschedulableTimeout,
    /// The Spark operator never wrote a status within the no-status timeout.
    NoStatusTimeout,
    /// The Spark driver did not start, or did not become ready, in time.
    DriverStartTimedOut,
    /// The Spark executors did not start in time (the apache operator's
    /// `ExecutorsStartTimedOut`).
    ExecutorsStartTimedOut,
    /// The Spark operator could not create the application's resources: its pod template was
    /// refused, a quota was exceeded, or the operator lacks permissions (the apache operator's
    /// `SchedulingFailure`).
    SchedulingFailure,
    // Failed: infrastructure (retryable).
    /// The pod was evicted from its node (resource pressure, API eviction).
    Evicted,
    /// The pod was preempted by a higher-priority pod.
    Preempted,
    /// The node running the pod was lost, removed (the pod GC deleted the pod) or shut down.
    NodeLost,
    /// The pod was disrupted for another reason (the taint manager, a kubelet admission
    /// rejection, a `DisruptionTarget` reason this version does not know).
    Disrupted,
    /// The Job or its pod was deleted by someone other than kubeferry (no cancel request).
    DeletedExternally,
    // Cancel.
    /// A cancel was requested; the work may still run.
    CancelRequested,
    /// The job was cancelled.
    Cancelled,
    // Not a terminal outcome.
    /// The object's status has a shape this version cannot read; the state is the last known one.
    UnrecognizedStatus,
}

/// Whose fault a failure was, which decides whether retrying can help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureClass {
    /// The job's own code or resources: retrying the same spec is likely to fail again.
    User,
    /// The cluster: a retry may well succeed.
    Infrastructure,
    /// The spec or the cluster's configuration: retrying will not help until it is fixed.
    Configuration,
}

impl Reason {
    /// Every reason, in documentation order.
    pub const ALL: [Reason; 30] = [
        Reason::Pending,
        Reason::Suspended,
        Reason::Unschedulable,
        Reason::ContainerCreating,
        Reason::ImagePullBackOff,
        Reason::Running,
        Reason::Completed,
        Reason::Error,
        Reason::OomKilled,
        Reason::DeadlineExceeded,
        Reason::BackoffLimitExceeded,
        Reason::PodFailurePolicy,
        Reason::SparkFailed,
        Reason::ImagePullFailed,
        Reason::InvalidImageName,
        Reason::CreateContainerConfigError,
        Reason::CreateContainerError,
        Reason::UnschedulableTimeout,
        Reason::NoStatusTimeout,
        Reason::DriverStartTimedOut,
        Reason::ExecutorsStartTimedOut,
        Reason::SchedulingFailure,
        Reason::Evicted,
        Reason::Preempted,
        Reason::NodeLost,
        Reason::Disrupted,
        Reason::DeletedExternally,
        Reason::CancelRequested,
        Reason::Cancelled,
        Reason::UnrecognizedStatus,
    ];

    /// For a failure reason, whose fault it was; `None` for reasons that are not failures.
    pub fn failure_class(self) -> Option<FailureClass> {
        use Reason::*;
        match self {
            Error | OomKilled | DeadlineExceeded | BackoffLimitExceeded | PodFailurePolicy
            | SparkFailed => Some(FailureClass::User),
            ImagePullFailed
            | InvalidImageName
            | CreateContainerConfigError
            | CreateContainerError
            | UnschedulableTimeout
            | NoStatusTimeout
            | DriverStartTimedOut
            | ExecutorsStartTimedOut
            | SchedulingFailure => Some(FailureClass::Configuration),
            Evicted | Preempted | NodeLost | Disrupted | DeletedExternally => {
                Some(FailureClass::Infrastructure)
            }
            Pending | Suspended | Unschedulable | ContainerCreating | ImagePullBackOff
            | Running | Completed | CancelRequested | Cancelled | UnrecognizedStatus => None,
        }
    }

    /// Whether a caller may retry the job after a failure with this reason and expect a
    /// different outcome.
    pub fn is_retryable(self) -> bool {
        self.failure_class() == Some(FailureClass::Infrastructure)
    }

    /// The reason as serialized, e.g. `OomKilled`.
    pub fn as_str(self) -> &'static str {
        use Reason::*;
        match self {
            Pending => "Pending",
            Suspended => "Suspended",
            Unschedulable => "Unschedulable",
            ContainerCreating => "ContainerCreating",
            ImagePullBackOff => "ImagePullBackOff",
            Running => "Running",
            Completed => "Completed",
            Error => "Error",
            OomKilled => "OomKilled",
            DeadlineExceeded => "DeadlineExceeded",
            BackoffLimitExceeded => "BackoffLimitExceeded",
            PodFailurePolicy => "PodFailurePolicy",
            SparkFailed => "SparkFailed",
            ImagePullFailed => "ImagePullFailed",
            InvalidImageName => "InvalidImageName",
            CreateContainerConfigError => "CreateContainerConfigError",
            CreateContainerError => "CreateContainerError",
            UnschedulableTimeout => "UnschedulableTimeout",
            NoStatusTimeout => "NoStatusTimeout",
            DriverStartTimedOut => "DriverStartTimedOut",
            ExecutorsStartTimedOut => "ExecutorsStartTimedOut",
            SchedulingFailure => "SchedulingFailure",
            Evicted => "Evicted",
            Preempted => "Preempted",
            NodeLost => "NodeLost",
            Disrupted => "Disrupted",
            DeletedExternally => "DeletedExternally",
            CancelRequested => "CancelRequested",
            Cancelled => "Cancelled",
            UnrecognizedStatus => "UnrecognizedStatus",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything kubeferry knows about one execution at one moment.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionInfo {
    /// Where the job stands.
    pub state: JobState,
    /// Why, machine-readable.
    pub reason: Reason,
    /// Why, for humans (the scheduler's message, the container's termination message, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The main container's exit code, once it has one.
    pub exit_code: Option<i32>,
    /// When the main container (or Spark driver) started.
    pub started_at: Option<Timestamp>,
    /// When the job reached its terminal state.
    pub finished_at: Option<Timestamp>,
    /// The main container's last words, kept with its outcome once its pod is gone: the
    /// termination message as the kubelet kept it in the pod's status (what the container
    /// wrote to its termination log, or for a failed container the last lines of its log:
    /// kubeferry sets `terminationMessagePolicy: FallbackToLogsOnError`, and the kubelet
    /// keeps at most 80 lines or 2,048 bytes of them). Read from the pod's status the watch
    /// already delivers: no request more.
    pub last_words: Option<String>,
    /// For an indexed job: where its indexes stand. Absent for every other job.
    pub indexes: Option<IndexSummary>,
    /// For a JobSet: its restarts and where the Jobs of each replicated job stand. Absent for
    /// every other job (boxed: every other job's status stays as small as it was).
    pub replicas: Option<Box<ReplicaSummary>>,
}

/// Where a JobSet stands: how often it was restarted, its terminal state as the JobSet
/// reports it, and the counts of each replicated job's Jobs (the JobSet's
/// `status.replicatedJobsStatus`, of the current restart).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Replicas))]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSummary {
    /// How many times the whole set was restarted (`status.restarts`).
    pub restarts: u32,
    /// `status.terminalState` (`Completed`, `Failed`) once the JobSet has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_state: Option<String>,
    /// Each replicated job, in the spec's order.
    pub replicated_jobs: Vec<ReplicatedJobCounts>,
}

/// How the Jobs of one replicated job of a JobSet stand.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobCounts {
    /// The replicated job's name.
    pub name: String,
    /// How many Jobs it has (`replicas`).
    pub replicas: u32,
    /// Jobs whose pods are all ready (or succeeded).
    pub ready: u32,
    /// Jobs that succeeded.
    pub succeeded: u32,
    /// Jobs that failed.
    pub failed: u32,
    /// Jobs with a pod still running or pending.
    pub active: u32,
    /// Jobs that are suspended.
    pub suspended: u32,
}

impl ReplicaSummary {
    /// The counts in a few words: `leader 1/1 succeeded; workers 1/2 succeeded, 1 failed;
    /// restarted 1 time`.
    pub fn counts(&self) -> String {
        let mut parts: Vec<String> = self
            .replicated_jobs
            .iter()
            .map(|r| {
                let mut text = format!("{} {}/{} succeeded", r.name, r.succeeded, r.replicas);
                for (n, what) in [
                    (r.failed, "failed"),
                    (r.active, "active"),
                    (r.ready, "ready"),
                    (r.suspended, "suspended"),
                ] {
                    if n > 0 {
                        text.push_str(&format!(", {n} {what}"));
                    }
                }
                text
            })
            .collect();
        match self.restarts {
            0 => {}
            1 => parts.push("restarted 1 time".to_string()),
            n => parts.push(format!("restarted {n} times")),
        }
        parts.join("; ")
    }
}

/// Where the indexes of an indexed job stand: counts that add up to `completions`, the Job's
/// own interval strings, and why each failed index failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Indexes))]
#[serde(rename_all = "camelCase")]
pub struct IndexSummary {
    /// How many indexes the job has.
    pub completions: u32,
    /// Indexes that succeeded.
    pub succeeded: u32,
    /// Indexes that failed for good (out of per-index retries, or failed by a `FailIndex`
    /// rule).
    pub failed: u32,
    /// Indexes whose pod runs.
    pub running: u32,
    /// Indexes not yet running, succeeded or failed (waiting for a pod, a node or a retry;
    /// or never run because the job ended first).
    pub pending: u32,
    /// The succeeded indexes as the Job reports them (`status.completedIndexes`, e.g. `0-2,4`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completed_indexes: String,
    /// The failed indexes as the Job reports them (`status.failedIndexes`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed_indexes: String,
    /// Why failed indexes failed, lowest index first, as far as their pods still show it (at
    /// most 20: `IndexSummary::MAX_FAILURES`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<IndexFailure>,
}

impl IndexSummary {
    /// The most failed indexes whose cause a summary lists: enough to see a pattern, small
    /// enough that a status with thousands of failed indexes stays small.
    pub const MAX_FAILURES: usize = 20;

    /// The counts in a few words: `3 of 5 indexes succeeded, 1 failed, 1 running`.
    pub fn counts(&self) -> String {
        let mut text = format!(
            "{} of {} indexes succeeded",
            self.succeeded, self.completions
        );
        for (n, what) in [
            (self.failed, "failed"),
            (self.running, "running"),
            (self.pending, "pending"),
        ] {
            if n > 0 {
                text.push_str(&format!(", {n} {what}"));
            }
        }
        text
    }
}

/// Why one index of an indexed job failed: its last attempt's end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = IndexFailureInfo))]
#[serde(rename_all = "camelCase")]
pub struct IndexFailure {
    /// The index.
    pub index: u32,
    /// Why its last attempt failed (`OomKilled`, `Evicted`, `Error`, ...); `Error` with no
    /// exit code when no pod of the index is left to tell.
    pub reason: Reason,
    /// Its last attempt's exit code, when the main container ended with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why, for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ExecutionInfo {
    /// A status with only a state and a reason.
    pub fn new(state: JobState, reason: Reason) -> Self {
        Self {
            state,
            reason,
            message: String::new(),
            exit_code: None,
            started_at: None,
            finished_at: None,
            last_words: None,
            indexes: None,
            replicas: None,
        }
    }

    /// Sets the human message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Whether the state is final.
    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }

    /// The status a caller should hold after observing `next` while holding `self`.
    ///
    /// A terminal status never changes, and once a job has started every later answer keeps its
    /// start time, even one computed from objects that no longer show it.
    pub fn advance(&self, next: ExecutionInfo) -> ExecutionInfo {
        if self.is_terminal() {
            return self.clone();
        }
        let mut next = next;
        if next.started_at.is_none() {
            next.started_at = self.started_at;
        }
        next
    }
}

/// Sets the start time, keeping it unset when unknown (the mappings' status builder).
pub(crate) trait Started {
    fn started(self, at: Option<Timestamp>) -> Self;
}

impl Started for ExecutionInfo {
    fn started(mut self, at: Option<Timestamp>) -> Self {
        self.started_at = at;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states() {
        let terminal: Vec<_> = JobState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [JobState::Succeeded, JobState::Failed, JobState::Cancelled]
        );
    }

    #[test]
    fn states_parse_and_print() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>().unwrap(), state);
            assert_eq!(
                serde_json::to_string(&state).unwrap(),
                format!("\"{}\"", state.as_str())
            );
        }
        assert!("DONE".parse::<JobState>().is_err());
    }

    #[test]
    fn reasons_serialize_as_their_names() {
        for reason in Reason::ALL {
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{}\"", reason.as_str())
            );
        }
    }

    #[test]
    fn only_infrastructure_failures_are_retryable() {
        let retryable: Vec<_> = Reason::ALL
            .into_iter()
            .filter(|r| r.is_retryable())
            .collect();
        assert_eq!(
            retryable,
            [
                Reason::Evicted,
                Reason::Preempted,
                Reason::NodeLost,
                Reason::Disrupted,
                Reason::DeletedExternally
            ]
        );
    }

    #[test]
    fn terminal_status_never_changes_and_start_time_is_kept() {
        let start: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let mut started = ExecutionInfo::new(JobState::Started, Reason::Running);
        started.started_at = Some(start);

        let queued_again = ExecutionInfo::new(JobState::Queued, Reason::Pending);
        assert_eq!(started.advance(queued_again).started_at, Some(start));

        let done = ExecutionInfo::new(JobState::Succeeded, Reason::Completed);
        let held = started.advance(done);
        assert_eq!(held.state, JobState::Succeeded);
        assert_eq!(held.started_at, Some(start));

        let failed = ExecutionInfo::new(JobState::Failed, Reason::Error);
        assert_eq!(held.advance(failed), held);
    }
}
