//! Lean views of a JobSet and of its child Jobs: only the fields the JobSet status mapping
//! reads. The child Jobs' pods are read as container jobs' pods ([`PodView`]).
//!
//! JobSets are custom resources, so their view is read from the object's JSON
//! (`serde_json::Value`, or a kube `DynamicObject`'s metadata and data). Reading never fails:
//! a status that cannot be read is kept as such ([`JobSetStatus::Unreadable`]) for the mapping
//! to treat as "cannot tell".

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use crate::container::view::{ConditionStatus, JobView};
use crate::marks::entry;
use crate::observation::{ManagedMeta, embeds};

#[cfg(doc)]
use crate::container::view::PodView;

/// The label naming a child Job's (and its pods') JobSet.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// The label naming a child Job's (and its pods') replicated job.
pub const REPLICATED_JOB_NAME_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// The label with a child Job's (and its pods') index within its replicated job.
pub const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
/// The label with the JobSet restart a child Job (and its pods) belongs to.
pub const RESTART_ATTEMPT_LABEL: &str = "jobset.sigs.k8s.io/restart-attempt";

/// What the JobSet status mapping reads from a JobSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSetView {
    /// The metadata every managed object carries; its fields read as the view's own
    /// (`jobset.name`).
    pub meta: ManagedMeta,
    /// The replicated jobs of the spec, in order: name and replicas.
    pub replicated_jobs: Vec<(String, u32)>,
    /// `spec.failurePolicy.maxRestarts` (0 when not set).
    pub max_restarts: u32,
    /// The JobSet controller's status.
    pub status: JobSetStatus,
}

// Embedded for the reasons given at `JobView`'s.
embeds!(JobSetView, meta: ManagedMeta);

/// A JobSet's status, as far as this version can read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobSetStatus {
    /// The status as read (empty while the controller has written none).
    Read(JobSetStatusView),
    /// A status this version cannot read (what is wrong, in words).
    Unreadable(String),
}

/// The fields of a JobSet's status the mapping reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSetStatusView {
    /// `status.conditions`.
    pub conditions: Vec<JobSetConditionView>,
    /// `status.restarts`.
    pub restarts: u32,
    /// The restarts that count against `failurePolicy.maxRestarts`:
    /// `status.restartsCountTowardsMax`, or `status.restarts` from a controller that does
    /// not write it.
    pub restarts_towards_max: u32,
    /// `status.terminalState` (`Completed`, `Failed`).
    pub terminal_state: Option<String>,
    /// `status.replicatedJobsStatus`.
    pub replicated_jobs: Vec<ReplicatedJobStatusView>,
}

/// One condition of a JobSet (`Completed`, `Failed`, `Suspended`, `StartupPolicyInProgress`,
/// `StartupPolicyCompleted`, `RestartingJobSet`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSetConditionView {
    /// `type`.
    pub kind: String,
    /// `status`.
    pub status: ConditionStatus,
    /// `reason`.
    pub reason: Option<String>,
    /// `message`.
    pub message: Option<String>,
    /// `lastTransitionTime`.
    pub last_transition_time: Option<Timestamp>,
}

/// The counts of one replicated job's Jobs, as the JobSet controller writes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicatedJobStatusView {
    /// `name`.
    pub name: String,
    /// `ready`.
    pub ready: u32,
    /// `succeeded`.
    pub succeeded: u32,
    /// `failed`.
    pub failed: u32,
    /// `active`.
    pub active: u32,
    /// `suspended`.
    pub suspended: u32,
}

/// A child Job of a JobSet: the Job as a container job's view, and where it sits in the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildJobView {
    /// The Job, read as any Job is.
    pub job: JobView,
    /// The JobSet it belongs to ([`JOBSET_NAME_LABEL`]).
    pub jobset: Option<String>,
    /// Its replicated job ([`REPLICATED_JOB_NAME_LABEL`]).
    pub replicated_job: String,
    /// Its index within the replicated job ([`JOB_INDEX_LABEL`]).
    pub index: u32,
    /// The JobSet restart it belongs to ([`RESTART_ATTEMPT_LABEL`]).
    pub restart_attempt: u32,
    /// The uid of its controller (the JobSet).
    pub owner_uid: Option<String>,
}

impl From<&Job> for ChildJobView {
    fn from(job: &Job) -> Self {
        let labels = job.metadata.labels.as_ref();
        let number = |key: &str| entry(labels, key).and_then(|v| v.parse().ok()).unwrap_or(0);
        ChildJobView {
            job: JobView::from(job),
            jobset: entry(labels, JOBSET_NAME_LABEL),
            replicated_job: entry(labels, REPLICATED_JOB_NAME_LABEL).unwrap_or_default(),
            index: number(JOB_INDEX_LABEL),
            restart_attempt: number(RESTART_ATTEMPT_LABEL),
            owner_uid: crate::observation::controller_uid(&job.metadata),
        }
    }
}

impl ChildJobView {
    /// The Job's place in its set, in words: `workers index 1 (Job train-workers-1)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} index {} (Job {})",
            self.replicated_job, self.index, self.job.name
        )
    }
}

impl JobSetView {
    /// Reads a JobSet from its metadata and the rest of its object (`spec`, `status`): the
    /// parts of a kube `DynamicObject`.
    pub fn from_parts(metadata: &ObjectMeta, object: &Value) -> Self {
        let spec = object.get("spec");
        let replicated_jobs = spec
            .and_then(|s| s.get("replicatedJobs"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
                let replicas = r
                    .get("replicas")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(1);
                (name.to_string(), replicas)
            })
            .collect();
        let max_restarts = spec
            .and_then(|s| s.pointer("/failurePolicy/maxRestarts"))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0);
        JobSetView {
            meta: ManagedMeta::read(metadata),
            replicated_jobs,
            max_restarts,
            status: read_status(object.get("status")),
        }
    }

    /// Reads a whole JobSet object.
    pub fn from_object(object: &Value) -> Self {
        let metadata = object
            .get("metadata")
            .and_then(|m| ObjectMeta::deserialize(m).ok())
            .unwrap_or_default();
        Self::from_parts(&metadata, object)
    }

    /// Whether `job` is one of this JobSet's: its controller is this JobSet (a Job of an
    /// earlier JobSet of the same name is not), or either uid is unknown.
    pub fn owns(&self, job: &ChildJobView) -> bool {
        match &job.owner_uid {
            Some(owner) if !self.uid.is_empty() => *owner == self.uid,
            _ => true,
        }
    }
}

/// The status as the JobSet API defines it (`JobSetStatus`); unknown fields are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStatus {
    #[serde(default)]
    conditions: Option<Vec<RawCondition>>,
    #[serde(default)]
    restarts: Option<u32>,
    #[serde(default)]
    restarts_count_towards_max: Option<u32>,
    #[serde(default)]
    terminal_state: Option<String>,
    #[serde(default)]
    replicated_jobs_status: Option<Vec<RawReplicatedJobStatus>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCondition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    last_transition_time: Option<Timestamp>,
}

#[derive(Deserialize)]
struct RawReplicatedJobStatus {
    name: String,
    #[serde(default)]
    ready: u32,
    #[serde(default)]
    succeeded: u32,
    #[serde(default)]
    failed: u32,
    #[serde(default)]
    active: u32,
    #[serde(default)]
    suspended: u32,
}

fn read_status(status: Option<&Value>) -> JobSetStatus {
    let Some(status) = status.filter(|s| !s.is_null()) else {
        return JobSetStatus::Read(JobSetStatusView::default());
    };
    match RawStatus::deserialize(status) {
        Ok(raw) => JobSetStatus::Read(JobSetStatusView {
            conditions: raw
                .conditions
                .unwrap_or_default()
                .into_iter()
                .map(|c| JobSetConditionView {
                    kind: c.kind,
                    status: ConditionStatus::parse(&c.status),
                    reason: c.reason.filter(|r| !r.is_empty()),
                    message: c.message.filter(|m| !m.is_empty()),
                    last_transition_time: c.last_transition_time,
                })
                .collect(),
            restarts: raw.restarts.unwrap_or(0),
            restarts_towards_max: raw.restarts_count_towards_max.or(raw.restarts).unwrap_or(0),
            terminal_state: raw.terminal_state.filter(|s| !s.is_empty()),
            replicated_jobs: raw
                .replicated_jobs_status
                .unwrap_or_default()
                .into_iter()
                .map(|r| ReplicatedJobStatusView {
                    name: r.name,
                    ready: r.ready,
                    succeeded: r.succeeded,
                    failed: r.failed,
                    active: r.active,
                    suspended: r.suspended,
                })
                .collect(),
        }),
        Err(error) => JobSetStatus::Unreadable(error.to_string()),
    }
}
