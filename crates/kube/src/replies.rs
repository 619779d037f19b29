//! What the executor's operations reply, whatever the kind of job: what a cancel did, a job
//! as listed, a job the sweep found, and where a job's newest attempt runs.

use jiff::Timestamp;
use kubeferry_core::{ExecutionId, ExecutionInfo};

/// What a cancel did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job had already ended; its outcome stands.
    AlreadyEnded(ExecutionInfo),
    /// The cancel was requested (now or earlier) and the work is being stopped.
    Requested(ExecutionInfo),
}

impl CancelOutcome {
    /// The job's status after the cancel.
    pub fn info(&self) -> &ExecutionInfo {
        match self {
            CancelOutcome::AlreadyEnded(info) | CancelOutcome::Requested(info) => info,
        }
    }
}

/// What a submission did: the job's execution id, and whether the job id named a job that was
/// already there (created or run before: nothing was created this time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The execution id.
    pub id: ExecutionId,
    /// `true` when the job id already named a job (running, or ended with its outcome
    /// recorded) and nothing was created; `false` when this submission created it.
    pub existing: bool,
}

/// A job's whole story (`kubeferry describe`, the service's timeline): its status, and what
/// happened to it in time order, where its time went and what to do about how it ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// The execution id.
    pub id: ExecutionId,
    /// The caller's job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The job's status, as `status` answers it.
    pub status: ExecutionInfo,
    /// Its story.
    #[serde(flatten)]
    pub story: kubeferry_core::timeline::Story,
}

/// How a dry run tries a submission. Nothing is created either way, no outcome record is read
/// and no watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DryRun {
    /// The objects as kubeferry builds them; the API server is not asked (a Spark job that
    /// names no operator still asks which ones the cluster serves).
    Client,
    /// The objects as the API server would store them: sent with `dryRun=All`, so its
    /// validation, defaulting, admission webhooks and quotas judge them, and it stores nothing.
    Server,
}

/// One managed job as listed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The execution id.
    pub id: ExecutionId,
    /// The caller's job id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When the object was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// The job's status.
    pub status: ExecutionInfo,
    /// The newest attempt's pod (the Spark driver's), if one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The node that pod was scheduled to, once it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How many attempts' pods (driver pods) still exist.
    pub attempts: usize,
}

/// A managed Job whose job id the caller does not know.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    /// The execution id.
    pub id: ExecutionId,
    /// The job id it carries (`None` when it carries none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When it was created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// Whether it was deleted.
    pub deleted: bool,
}

/// Where a container job's newest attempt runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The newest attempt's pod.
    pub pod: String,
    /// The node it was scheduled to, once it was.
    pub node: Option<String>,
    /// How many attempts' pods exist.
    pub attempts: usize,
}
