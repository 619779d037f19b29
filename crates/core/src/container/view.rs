//! Lean views of a Job and its pods: only the fields the container status mapping reads.
//!
//! The tracker keeps one [`JobView`] and a few [`PodView`]s per job in memory instead of whole
//! objects, so every field here earns its place by being read in [`super::container_status`].

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodStatus,
};

use super::MAIN_CONTAINER;
use crate::clock::Resolution;
use crate::marks::{KUEUE_QUEUE_LABEL, entry, non_empty};
pub use crate::observation::CancelMark;
use crate::observation::{ManagedMeta, controller_uid, embeds, time};

/// The status of a Kubernetes condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
    /// Any other value: a shape this version cannot read.
    Other(String),
}

impl ConditionStatus {
    pub(crate) fn parse(status: &str) -> Self {
        match status {
            "True" => ConditionStatus::True,
            "False" => ConditionStatus::False,
            "Unknown" => ConditionStatus::Unknown,
            other => ConditionStatus::Other(other.to_string()),
        }
    }

    /// Whether the condition holds.
    pub fn is_true(&self) -> bool {
        *self == ConditionStatus::True
    }
}

/// The type of a Job condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobConditionType {
    /// The Job finished successfully (after all its pods terminated, since Kubernetes 1.31).
    Complete,
    /// The Job failed (after all its pods terminated, since Kubernetes 1.31).
    Failed,
    /// Since Kubernetes 1.31: the Job will complete; its pods may still be terminating.
    SuccessCriteriaMet,
    /// Since Kubernetes 1.31: the Job will fail; its pods may still be terminating.
    FailureTarget,
    /// The Job is suspended (by `spec.suspend`, e.g. held by Kueue) or was resumed (`False`).
    Suspended,
    /// A type this version does not know.
    Other(String),
}

impl JobConditionType {
    /// The type as Kubernetes writes it.
    pub fn as_str(&self) -> &str {
        match self {
            JobConditionType::Complete => "Complete",
            JobConditionType::Failed => "Failed",
            JobConditionType::SuccessCriteriaMet => "SuccessCriteriaMet",
            JobConditionType::FailureTarget => "FailureTarget",
            JobConditionType::Suspended => "Suspended",
            JobConditionType::Other(kind) => kind,
        }
    }

    fn parse(kind: &str) -> Self {
        match kind {
            "Complete" => JobConditionType::Complete,
            "Failed" => JobConditionType::Failed,
            "SuccessCriteriaMet" => JobConditionType::SuccessCriteriaMet,
            "FailureTarget" => JobConditionType::FailureTarget,
            "Suspended" => JobConditionType::Suspended,
            other => JobConditionType::Other(other.to_string()),
        }
    }
}

/// One condition of a Job's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobConditionView {
    /// The condition type.
    pub kind: JobConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// The machine-readable reason (`BackoffLimitExceeded`, `DeadlineExceeded`, ...).
    pub reason: Option<String>,
    /// The human message.
    pub message: Option<String>,
    /// When the status last changed.
    pub last_transition_time: Option<Timestamp>,
}

impl From<&JobCondition> for JobConditionView {
    fn from(condition: &JobCondition) -> Self {
        JobConditionView {
            kind: JobConditionType::parse(&condition.type_),
            status: ConditionStatus::parse(&condition.status),
            reason: non_empty(condition.reason.as_deref()),
            message: non_empty(condition.message.as_deref()),
            last_transition_time: time(condition.last_transition_time.as_ref()),
        }
    }
}

/// What the container status mapping reads from a `batch/v1` Job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobView {
    /// The metadata every managed object carries (name, uid, job id, times, marks), read as
    /// for every kind; its fields read as the view's own (`job.name`).
    pub meta: ManagedMeta,
    /// The Kueue queue the Job waits in ([`KUEUE_QUEUE_LABEL`]).
    pub queue_name: Option<String>,
    /// `spec.suspend`.
    pub suspend: bool,
    /// `status.conditions`.
    pub conditions: Vec<JobConditionView>,
    /// `status.active`: pods pending or running and not being deleted.
    pub active: i32,
    /// `status.succeeded`.
    pub succeeded: i32,
    /// `status.failed`: failed attempts.
    pub failed: i32,
    /// `spec.backoffLimit`: how many failed attempts the Job tolerates (the API server fills
    /// it in); `None` when not set.
    pub backoff_limit: Option<i32>,
    /// `status.startTime`: when the Job controller started (or last resumed) the Job.
    pub start_time: Option<Timestamp>,
    /// `status.completionTime` (set only on success).
    pub completion_time: Option<Timestamp>,
    /// `spec.ttlSecondsAfterFinished`.
    pub ttl_seconds_after_finished: Option<i64>,
    /// `spec.activeDeadlineSeconds`: the job file's `timeout`, which a deadline's message names.
    pub active_deadline_seconds: Option<i64>,
    /// The Job controller's latest refusal to create a pod for the Job (the message of its
    /// `FailedCreate` event: admission, quota), which the Job's status does not show. Filled
    /// from events by the tracker, never from the Job itself.
    pub creation_refused: Option<String>,
    /// For an Indexed Job (`completionMode: Indexed`): its indexes. Boxed: most Jobs have none.
    pub indexed: Option<Box<IndexedView>>,
    /// Where [`super::own_failure_rule`] and [`super::exit_code_rule`] stand in
    /// `spec.podFailurePolicy.rules`: a verdict that names one of these indexes names the main
    /// container's exit code.
    pub exit_code_rules: RuleIndexes,
    /// Whether the view stands for a bare pod (`kind: Pod`, read by [`crate::pod`] as a Job of
    /// one pod that runs once): answers name the pod, not a Job.
    pub bare_pod: bool,
}

/// A set of indexes into a Job's `spec.podFailurePolicy.rules` (Kubernetes allows at most 20
/// rules; an index past 31 is never in the set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleIndexes(u32);

impl RuleIndexes {
    /// Whether `index` is in the set.
    pub fn contains(self, index: u32) -> bool {
        index < u32::BITS && self.0 & (1 << index) != 0
    }
}

impl FromIterator<u32> for RuleIndexes {
    fn from_iter<I: IntoIterator<Item = u32>>(indexes: I) -> Self {
        RuleIndexes(
            indexes
                .into_iter()
                .filter(|index| *index < u32::BITS)
                .fold(0, |set, index| set | (1 << index)),
        )
    }
}

/// What the mapping reads of an Indexed Job's indexes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexedView {
    /// `spec.completions`: how many indexes.
    pub completions: u32,
    /// `status.completedIndexes`: the succeeded indexes as an interval string.
    pub completed_indexes: String,
    /// `status.failedIndexes`: the failed indexes (with `backoffLimitPerIndex` only).
    pub failed_indexes: String,
}

/// The label and annotation the Job controller puts on each pod of an Indexed Job: its index.
pub const COMPLETION_INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        let meta = &job.metadata;
        let labels = meta.labels.as_ref();
        let status = job.status.as_ref();
        JobView {
            meta: ManagedMeta::read(meta),
            queue_name: entry(labels, KUEUE_QUEUE_LABEL),
            suspend: job
                .spec
                .as_ref()
                .and_then(|spec| spec.suspend)
                .unwrap_or(false),
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .map(|c| c.iter().map(JobConditionView::from).collect())
                .unwrap_or_default(),
            active: status.and_then(|s| s.active).unwrap_or(0),
            succeeded: status.and_then(|s| s.succeeded).unwrap_or(0),
            failed: status.and_then(|s| s.failed).unwrap_or(0),
            backoff_limit: job.spec.as_ref().and_then(|spec| spec.backoff_limit),
            start_time: time(status.and_then(|s| s.start_time.as_ref())),
            completion_time: time(status.and_then(|s| s.completion_time.as_ref())),
            ttl_seconds_after_finished: job
                .spec
                .as_ref()
                .and_then(|spec| spec.ttl_seconds_after_finished)
                .map(i64::from),
            active_deadline_seconds: job
                .spec
                .as_ref()
                .and_then(|spec| spec.active_deadline_seconds),
            creation_refused: None,
            bare_pod: false,
            indexed: indexed(job),
            exit_code_rules: job
                .spec
                .as_ref()
                .and_then(|spec| spec.pod_failure_policy.as_ref())
                .map(|policy| {
                    (0u32..)
                        .zip(&policy.rules)
                        .filter(|(_, rule)| super::is_exit_code_rule(rule))
                        .map(|(index, _)| index)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

// The metadata is embedded rather than copied into fields of the view's own: it is declared
// and read once for every kind, and a kind's fields (this view's, and those later kinds add)
// stay apart from it. Deref keeps `job.name` reading as before.
embeds!(JobView, meta: ManagedMeta);

fn indexed(job: &Job) -> Option<Box<IndexedView>> {
    let spec = job.spec.as_ref()?;
    if spec.completion_mode.as_deref() != Some("Indexed") {
        return None;
    }
    let status = job.status.as_ref();
    Some(Box::new(IndexedView {
        completions: spec
            .completions
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        completed_indexes: status
            .and_then(|s| s.completed_indexes.clone())
            .unwrap_or_default(),
        failed_indexes: status
            .and_then(|s| s.failed_indexes.clone())
            .unwrap_or_default(),
    }))
}

impl JobView {
    /// What answers call the object: a Job, or the pod a bare pod's view stands for.
    pub(crate) fn noun(&self) -> &'static str {
        if self.bare_pod { "pod" } else { "Job" }
    }

    /// Whether the Job's own counts say its work ended, its verdict perhaps not in yet: every
    /// completion succeeded, or a failed attempt used up its retries. Its pods may be gone by
    /// then (a drain, the pod GC), their exit codes with them; a cancel marked now stops
    /// nothing.
    pub fn counts_ended(&self) -> bool {
        let completions = self.indexed.as_ref().map_or(1, |indexed| {
            i32::try_from(indexed.completions).unwrap_or(i32::MAX)
        });
        self.succeeded >= completions || self.retries_used_up()
    }

    /// Whether its failed attempts used up every retry `spec.backoffLimit` allows: no next
    /// attempt comes, the Job controller's verdict does.
    pub fn retries_used_up(&self) -> bool {
        self.backoff_limit.is_some_and(|limit| self.failed > limit)
    }

    /// Whether `pod` is one of this Job's attempts: its controller is this Job (a pod of an
    /// earlier Job of the same name is not), or either uid is unknown.
    pub fn owns(&self, pod: &PodView) -> bool {
        match &pod.owner_uid {
            Some(owner) if !self.uid.is_empty() => *owner == self.uid,
            _ => true,
        }
    }

    /// Whether kubeferry stopped this Job by suspending it after recording an outcome, and the
    /// Job has since outlived its `ttlSecondsAfterFinished`. Kubernetes' TTL controller never
    /// removes a suspended Job, so kubeferry removes it, as the TTL would have removed the Job
    /// had it finished by itself; without a TTL it stays, as a finished Job would.
    pub fn record_expired(&self, now: Timestamp) -> bool {
        let (Some(Ok(recorded)), Some(ttl)) =
            (&self.recorded_outcome, self.ttl_seconds_after_finished)
        else {
            return false;
        };
        let Some(finished) = recorded.finished_at.or(self.created_at) else {
            return false;
        };
        self.suspend
            && self.deletion_timestamp.is_none()
            && finished
                .checked_add(jiff::SignedDuration::from_secs(ttl.max(0)))
                .is_ok_and(|expiry| expiry <= now)
    }
}

/// A pod's phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodPhase {
    /// Accepted; not all containers have started.
    Pending,
    /// Bound to a node; a container runs or is starting.
    Running,
    /// Every container terminated successfully.
    Succeeded,
    /// Every container terminated and at least one failed (or the pod was evicted or rejected).
    Failed,
    /// The pod's node stopped reporting.
    Unknown,
    /// A phase this version does not know.
    Other(String),
}

impl PodPhase {
    pub(crate) fn parse(phase: &str) -> Self {
        match phase {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            other => PodPhase::Other(other.to_string()),
        }
    }
}

/// One pod condition the mapping reads (`PodScheduled`, `DisruptionTarget`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodConditionView {
    /// Whether it holds.
    pub status: ConditionStatus,
    /// The machine-readable reason (`Unschedulable`, `PreemptionByScheduler`, ...).
    pub reason: Option<String>,
    /// The human message (the scheduler's explanation, the eviction message, ...).
    pub message: Option<String>,
    /// When the status last changed.
    pub last_transition_time: Option<Timestamp>,
}

impl From<&PodCondition> for PodConditionView {
    fn from(condition: &PodCondition) -> Self {
        PodConditionView {
            status: ConditionStatus::parse(&condition.status),
            reason: non_empty(condition.reason.as_deref()),
            message: non_empty(condition.message.as_deref()),
            last_transition_time: time(condition.last_transition_time.as_ref()),
        }
    }
}

/// A terminated container: its current state or its previous run (`lastState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminatedView {
    /// The exit code.
    pub exit_code: i32,
    /// The signal that ended it, when the runtime reports one.
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `OOMKilled`, `ContainerStatusUnknown`, `StartError`, ...
    pub reason: Option<String>,
    /// The termination message (the container's termination-log or, with
    /// `FallbackToLogsOnError`, the tail of its log).
    pub message: Option<String>,
    /// When the container started; Kubernetes writes the Unix epoch for one that never started.
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
}

impl TerminatedView {
    /// Whether the container had ended by `at` (always, when either time is unknown),
    /// comparing the times at `resolution`.
    pub(crate) fn ended_by(&self, at: Option<Timestamp>, resolution: Resolution) -> bool {
        match (self.finished_at, at) {
            (Some(finished), Some(at)) => resolution.at_or_before(finished, at),
            _ => true,
        }
    }
}

impl From<&ContainerStateTerminated> for TerminatedView {
    fn from(terminated: &ContainerStateTerminated) -> Self {
        TerminatedView {
            exit_code: terminated.exit_code,
            signal: terminated.signal,
            reason: non_empty(terminated.reason.as_deref()),
            message: non_empty(terminated.message.as_deref()),
            started_at: time(terminated.started_at.as_ref()),
            finished_at: time(terminated.finished_at.as_ref()),
        }
    }
}

/// The current state of a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerStateView {
    /// Not running yet (or between restarts).
    Waiting {
        /// `ContainerCreating`, `ImagePullBackOff`, `CreateContainerConfigError`, ...
        reason: Option<String>,
        /// The kubelet's explanation.
        message: Option<String>,
    },
    /// Running.
    Running {
        /// When it started.
        started_at: Option<Timestamp>,
    },
    /// Ended.
    Terminated(TerminatedView),
    /// The status carries no state at all.
    Unreported,
}

impl From<Option<&ContainerState>> for ContainerStateView {
    fn from(state: Option<&ContainerState>) -> Self {
        // A state has at most one member set; should several be, the most advanced one wins.
        let Some(state) = state else {
            return ContainerStateView::Unreported;
        };
        if let Some(terminated) = &state.terminated {
            ContainerStateView::Terminated(terminated.into())
        } else if let Some(running) = &state.running {
            ContainerStateView::Running {
                started_at: time(running.started_at.as_ref()),
            }
        } else if let Some(waiting) = &state.waiting {
            ContainerStateView::Waiting {
                reason: non_empty(waiting.reason.as_deref()),
                message: non_empty(waiting.message.as_deref()),
            }
        } else {
            ContainerStateView::Unreported
        }
    }
}

/// What the mapping reads from one container's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerView {
    /// The container's name.
    pub name: String,
    /// Its current state.
    pub state: ContainerStateView,
    /// How its previous run ended (`lastState.terminated`), if it ran before.
    pub last_terminated: Option<TerminatedView>,
    /// How often the kubelet restarted it.
    pub restart_count: i32,
    /// Whether it is a native sidecar (an init container the kubelet keeps running beside the
    /// main one).
    pub sidecar: bool,
}

impl ContainerView {
    /// Whether it has started, now or in an earlier run (so it has a log to read).
    pub fn has_started(&self) -> bool {
        matches!(
            self.state,
            ContainerStateView::Running { .. } | ContainerStateView::Terminated(_)
        ) || self.last_terminated.is_some()
    }

    /// When its current run and its previous one started, where known (a container that never
    /// started reports the Unix epoch, which is left out).
    pub(crate) fn run_starts(&self) -> impl Iterator<Item = Timestamp> {
        let current = match &self.state {
            ContainerStateView::Running { started_at } => *started_at,
            ContainerStateView::Terminated(t) => t.started_at,
            _ => None,
        };
        let previous = self.last_terminated.as_ref().and_then(|t| t.started_at);
        [current, previous]
            .into_iter()
            .flatten()
            .filter(|at| *at > Timestamp::UNIX_EPOCH)
    }
}

impl From<&ContainerStatus> for ContainerView {
    fn from(status: &ContainerStatus) -> Self {
        ContainerView {
            name: status.name.clone(),
            state: ContainerStateView::from(status.state.as_ref()),
            last_terminated: status
                .last_state
                .as_ref()
                .and_then(|last| last.terminated.as_ref())
                .map(TerminatedView::from),
            restart_count: status.restart_count,
            sidecar: false,
        }
    }
}

/// What every kind's mapping reads alike from a pod (a Job's, a driver): its metadata and the
/// summary of its status. Embedded in [`PodView`] and the Spark `DriverView`, whose fields it
/// reads as their own (`pod.name`), as [`crate::observation::ManagedMeta`] is in the objects'
/// views.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSummary {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The uid of the pod's controller (its Job or SparkApplication), from
    /// `metadata.ownerReferences`.
    pub owner_uid: Option<String>,
    /// `metadata.creationTimestamp`: a Job's attempts are ordered by it.
    pub created_at: Option<Timestamp>,
    /// `metadata.deletionTimestamp`: the time the pod will be removed, which is the deletion
    /// request plus its grace period.
    pub deletion_timestamp: Option<Timestamp>,
    /// `status.phase`; `None` before the API server wrote any status.
    pub phase: Option<PodPhase>,
    /// `status.reason` (`Evicted`, `DeadlineExceeded`, `NodeLost`, `Terminated`, ...).
    pub reason: Option<String>,
    /// `status.message`.
    pub message: Option<String>,
    /// The `PodScheduled` condition.
    pub scheduled: Option<PodConditionView>,
    /// The `DisruptionTarget` condition: the pod is being evicted, preempted, or deleted with
    /// its node.
    pub disruption: Option<PodConditionView>,
}

impl PodSummary {
    /// Whether the pod's phase is a terminal one (`Succeeded` or `Failed`).
    pub fn phase_ended(&self) -> bool {
        matches!(self.phase, Some(PodPhase::Succeeded | PodPhase::Failed))
    }

    /// The summary of a pod's status alone (none of its metadata).
    pub(crate) fn of_status(status: Option<&PodStatus>) -> Self {
        let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or(&[]);
        let condition = |kind: &str| {
            conditions
                .iter()
                .find(|c| c.type_ == kind)
                .map(PodConditionView::from)
        };
        PodSummary {
            phase: status.and_then(|s| s.phase.as_deref()).map(PodPhase::parse),
            reason: non_empty(status.and_then(|s| s.reason.as_deref())),
            message: non_empty(status.and_then(|s| s.message.as_deref())),
            scheduled: condition("PodScheduled"),
            disruption: condition("DisruptionTarget"),
            ..PodSummary::default()
        }
    }

    /// The summary of a pod: its metadata and its status.
    pub(crate) fn of(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        PodSummary {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            owner_uid: controller_uid(meta),
            created_at: time(meta.creation_timestamp.as_ref()),
            deletion_timestamp: time(meta.deletion_timestamp.as_ref()),
            ..PodSummary::of_status(pod.status.as_ref())
        }
    }
}

/// What the container status mapping reads from a pod of a Job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// What every pod view reads; its fields read as the view's own.
    pub pod: PodSummary,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `status.startTime`: when the kubelet accepted the pod.
    pub start_time: Option<Timestamp>,
    /// The main container's status (see [`MAIN_CONTAINER`]).
    pub main: Option<ContainerView>,
    /// The main container's memory limit as written (`64Mi`), which an OOM kill's message
    /// names.
    pub memory_limit: Option<String>,
    /// While the main container has not started: the first init container that holds it back
    /// (still waiting, running, or failed). Boxed: most pods have none.
    pub blocking_init: Option<Box<ContainerView>>,
    /// The pod's index in an Indexed Job ([`COMPLETION_INDEX_KEY`], the label, else the
    /// annotation).
    pub completion_index: Option<u32>,
}

impl PodView {
    /// When the pod's deletion was requested: its `deletionTimestamp` less the grace period.
    pub fn deletion_requested_at(&self) -> Option<Timestamp> {
        let at = self.deletion_timestamp?;
        let grace = self.deletion_grace_period_seconds.unwrap_or(0).max(0);
        Some(
            at.checked_sub(jiff::SignedDuration::from_secs(grace))
                .unwrap_or(at),
        )
    }
}

// Embedded for the reasons given at `JobView`'s.
embeds!(PodView, pod: PodSummary);

impl From<&Pod> for PodView {
    fn from(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let statuses = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or(&[]);
        let main_spec = spec.and_then(|spec| {
            let containers = &spec.containers;
            containers
                .iter()
                .find(|c| c.name == MAIN_CONTAINER)
                .or_else(|| containers.first())
        });
        let main_name = main_spec.map(|c| c.name.as_str());
        let memory_limit = main_spec
            .and_then(|c| c.resources.as_ref()?.limits.as_ref()?.get("memory"))
            .map(|quantity| quantity.0.clone());
        let main = match main_name {
            Some(name) => statuses.iter().find(|s| s.name == name),
            // No spec to read the container order from: the named main container, else the
            // first status.
            None => statuses
                .iter()
                .find(|s| s.name == MAIN_CONTAINER)
                .or_else(|| statuses.first()),
        }
        .map(ContainerView::from);
        let blocking_init = match main.as_ref().map(|m| &m.state) {
            Some(ContainerStateView::Running { .. } | ContainerStateView::Terminated(_)) => None,
            _ => blocking_init_container(pod).map(Box::new),
        };
        PodView {
            pod: PodSummary::of(pod),
            deletion_grace_period_seconds: meta.deletion_grace_period_seconds,
            node_name: non_empty(spec.and_then(|s| s.node_name.as_deref())),
            start_time: time(status.and_then(|s| s.start_time.as_ref())),
            main,
            memory_limit,
            blocking_init,
            completion_index: entry(meta.labels.as_ref(), COMPLETION_INDEX_KEY)
                .or_else(|| entry(meta.annotations.as_ref(), COMPLETION_INDEX_KEY))
                .and_then(|index| index.parse().ok()),
        }
    }
}

/// The first init container, in spec order, that keeps the main container from starting:
/// one not yet terminated successfully, other than a running sidecar.
fn blocking_init_container(pod: &Pod) -> Option<ContainerView> {
    let init_specs = pod.spec.as_ref()?.init_containers.as_deref()?;
    let statuses = pod.status.as_ref()?.init_container_statuses.as_deref()?;
    for init in init_specs {
        let is_sidecar = init.restart_policy.as_deref() == Some("Always");
        let status = statuses.iter().find(|s| s.name == init.name)?;
        let view = ContainerView {
            sidecar: is_sidecar,
            ..ContainerView::from(status)
        };
        match &view.state {
            ContainerStateView::Terminated(t) if t.exit_code == 0 => continue,
            ContainerStateView::Running { .. } if is_sidecar => continue,
            _ => return Some(view),
        }
    }
    None
}
