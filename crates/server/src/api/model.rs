//! The request and response bodies of the API, with their OpenAPI schemas.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kubeferry_core::status::{FailureClass, IndexSummary, ReplicaSummary};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use kubeferry_kube::{JobSummary, Orphan};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_with::skip_serializing_none;
use utoipa::ToSchema;

/// A job to run: a spec or a named template, and the caller's own job id.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmitRequest<'a> {
    /// The caller's id for this job. Submitting the same job id again returns the same
    /// execution id and runs nothing new; a different spec under a used job id is refused.
    #[schema(example = "gravitino-job-42")]
    pub job_id: String,
    /// The job spec (docs/job-files.md): a JSON object, or the text of a job file (YAML or JSON).
    /// It is rendered as a template with `params` first. Give either `spec` or `template`.
    #[serde(default, borrow)]
    #[schema(value_type = Option<Object>)]
    pub spec: Option<&'a RawValue>,
    /// The name of a template in the service's templates directory (e.g. `etl` for `etl.yaml`).
    pub template: Option<String>,
    /// Template parameters: `{{name}}` and `{{name:-default}}` placeholders are filled from
    /// these. Values may be strings, numbers or booleans.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub params: BTreeMap<String, serde_json::Value>,
    /// The namespace (default: the job file's, else the service's first namespace).
    pub namespace: Option<String>,
    /// The cluster (default: the service's first cluster).
    pub cluster: Option<String>,
    /// Create nothing: `client` answers the objects as kubeferry builds them; `server` sends
    /// them with `dryRun=All`, so that the API server's validation, defaulting, admission
    /// webhooks and quotas judge them, and answers them as it would store them.
    #[serde(default)]
    pub dry_run: Option<DryRunMode>,
}

/// How a dry run tries a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum DryRunMode {
    /// As kubeferry builds the objects; Kubernetes is not asked.
    Client,
    /// As the API server would store them, nothing stored.
    Server,
}

impl From<DryRunMode> for kubeferry_kube::DryRun {
    fn from(mode: DryRunMode) -> Self {
        match mode {
            DryRunMode::Client => kubeferry_kube::DryRun::Client,
            DryRunMode::Server => kubeferry_kube::DryRun::Server,
        }
    }
}

/// A job's story: its status, what happened to it in time order, where its time went and
/// what to do about how it ended (`kubeferry describe`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// The job's status.
    pub job: JobInfo,
    /// What happened, oldest first (steps whose time is not known last).
    pub steps: Vec<TimelineStep>,
    /// Where the time went.
    pub spent: TimeSpent,
    /// What to do about how the job ended, where kubeferry knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_to_do: Option<String>,
}

/// One thing that happened to a job.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimelineStep {
    /// When (to the second).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_seconds"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub at: Option<Timestamp>,
    /// What: `Submitted`, an event's reason (`Scheduled`, `FailedScheduling`, `Pulling`,
    /// `Failed`, ...), `Started`, `Ended`, `CancelRequested`, or the final state.
    pub what: String,
    /// The object it happened to, when not the job's own: a pod, a JobSet's Job, a driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The details: an event's message, an attempt's exit code, who cancelled.
    pub detail: String,
    /// Whether it went wrong.
    #[serde(default)]
    pub warning: bool,
}

/// Where a job's time went, in seconds: waiting for a node, starting (image pulls, container
/// creation), running; a part not reached is absent, one under way counts until now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeSpent {
    /// From the submission until a node was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<i64>,
    /// From then until the main container started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting: Option<i64>,
    /// From then until the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i64>,
}

impl From<kubeferry_kube::Description> for Timeline {
    fn from(description: kubeferry_kube::Description) -> Self {
        let story = description.story;
        let mut job = JobInfo::new(&description.id, description.status);
        job.job_id = description.job_id;
        Timeline {
            job,
            steps: story
                .steps
                .into_iter()
                .map(|step| TimelineStep {
                    at: step.at,
                    what: step.what,
                    object: step.object,
                    detail: step.detail,
                    warning: step.warning,
                })
                .collect(),
            spent: TimeSpent {
                waiting: story.spent.waiting,
                starting: story.spent.starting,
                running: story.spent.running,
            },
            what_to_do: story.what_to_do,
        }
    }
}

/// A submitted job.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Submitted {
    /// The execution id: `<cluster>/<kind>/<namespace>/<name>`.
    #[schema(example = "prod/job/etl/gravitino-job-42-1a2b3c4d")]
    pub id: String,
    /// The caller's job id.
    pub job_id: String,
    /// The cluster.
    pub cluster: String,
    /// The namespace.
    pub namespace: String,
    /// `true` when the job id already named a job (running, or ended with its outcome kept):
    /// nothing was created, and the answer is 200; `false` when this submission created the
    /// job (201).
    #[serde(default)]
    pub existing: bool,
    /// Things worth knowing that did not stop the submission (e.g. unused parameters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// A dry run's mode: then nothing was created, and `objects` are what would have been.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRunMode>,
    /// A dry run's objects (Kubernetes objects, ready for `kubectl apply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub objects: Option<Vec<serde_json::Value>>,
}

/// A job's execution info.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobInfo {
    /// The execution id.
    #[schema(example = "prod/job/etl/gravitino-job-42-1a2b3c4d")]
    pub id: String,
    /// The caller's job id, when the answer knows it (a list, a lookup by job id).
    pub job_id: Option<String>,
    /// Where the job stands.
    pub state: JobState,
    /// Why.
    pub reason: Reason,
    /// Why, for humans (the scheduler's message, the container's termination message, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The main container's exit code, once it has one.
    pub exit_code: Option<i32>,
    /// The main container's last words, kept with its outcome once its pod is gone: its
    /// termination message as the kubelet kept it (for a failed container, the last lines of
    /// its log: at most 80 lines, 2,048 bytes).
    pub last_words: Option<String>,
    /// When the main container started; once set, every later answer keeps it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_seconds"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// When the job reached its final state.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_seconds"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
    /// For a failure, whose fault it was.
    pub failure_class: Option<FailureClass>,
    /// For an indexed job: where its indexes stand (absent for every other job).
    pub indexes: Option<IndexSummary>,
    /// For a JobSet: its restarts and where each replicated job's Jobs stand (absent for every
    /// other job).
    pub replicas: Option<ReplicaSummary>,
}

impl JobInfo {
    /// The info of `id` in `info`.
    pub fn new(id: &ExecutionId, info: ExecutionInfo) -> Self {
        let failure_class = if info.state == JobState::Failed {
            info.reason.failure_class()
        } else {
            None
        };
        Self {
            id: id.to_string(),
            job_id: None,
            state: info.state,
            reason: info.reason,
            message: info.message,
            exit_code: info.exit_code,
            last_words: info.last_words,
            started_at: info.started_at,
            finished_at: info.finished_at,
            failure_class,
            indexes: info.indexes,
            replicas: info.replicas.map(|r| *r),
        }
    }

    /// The same, saying the caller's job id.
    pub fn with_job_id(mut self, job_id: Option<String>) -> Self {
        self.job_id = job_id;
        self
    }
}

/// A time as every answer gives it: RFC 3339 in UTC, to the second (as Kubernetes keeps
/// times), e.g. `2026-01-02T03:04:05Z`; the CLI's tables print the same.
pub fn format_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn whole_seconds<S: serde::Serializer>(
    time: &Option<Timestamp>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => serializer.serialize_str(&format_time(*time)),
        None => serializer.serialize_none(),
    }
}

/// What a cancel did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    /// The job had already ended; its outcome stands and nothing was changed.
    pub already_ended: bool,
    /// The job's status after the cancel (CANCELLING or CANCELLED, or its final state).
    pub job: JobInfo,
}

/// The end of a job's log.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogTail {
    /// The text: the end of the log; once the job's pods are gone, the last words kept with its
    /// outcome. Empty when there is no log (the warning says why).
    pub log: String,
    /// Why the log is empty, or where it comes from when not from a container (the last words
    /// of a job whose pods are gone); or why it could not be read: a tail never fails the
    /// caller for that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// One job in a list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobListItem {
    /// The caller's job id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When the job was created.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_seconds"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub created_at: Option<Timestamp>,
    /// The job's status.
    pub job: JobInfo,
    /// The newest attempt's pod (the Spark driver's, a JobSet's first), if one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The node that pod was scheduled to, once it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How many attempts' pods still exist.
    #[serde(default)]
    pub attempts: usize,
}

impl From<JobSummary> for JobListItem {
    fn from(summary: JobSummary) -> Self {
        Self {
            job_id: summary.job_id.clone(),
            created_at: summary.created_at,
            job: JobInfo::new(&summary.id, summary.status).with_job_id(summary.job_id),
            pod: summary.pod,
            node: summary.node,
            attempts: summary.attempts,
        }
    }
}

/// A page of jobs, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    /// The jobs.
    pub items: Vec<JobListItem>,
    /// Pass as `continue` for the next page; absent on the last page.
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// What to sweep.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SweepRequest {
    /// Every job id the caller still knows; managed jobs with other ids are orphans.
    pub known_job_ids: Vec<String>,
    /// Delete the orphans found (default: only report them).
    #[serde(default)]
    pub delete: bool,
    /// Only this namespace (default: every namespace the caller may use).
    pub namespace: Option<String>,
    /// Only this cluster (default: every cluster).
    pub cluster: Option<String>,
}

/// A managed job whose job id the caller does not know.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrphanItem {
    /// The execution id.
    pub id: String,
    /// The job id it carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// When it was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub created_at: Option<Timestamp>,
    /// Whether it was deleted.
    pub deleted: bool,
}

impl From<Orphan> for OrphanItem {
    fn from(orphan: Orphan) -> Self {
        Self {
            id: orphan.id.to_string(),
            job_id: orphan.job_id,
            created_at: orphan.created_at,
            deleted: orphan.deleted,
        }
    }
}

/// The result of a sweep.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    /// The orphans found.
    pub orphans: Vec<OrphanItem>,
}

/// The templates there are.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateList {
    /// Their names, for `template` in a submission.
    pub templates: Vec<String>,
}

/// How many jobs stood in each state over the last hour, as this replica sampled them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    /// The samples, oldest first (one every `timeouts.stateSample`).
    pub minutes: Vec<StateSample>,
}

/// One sample of [`Stats`].
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StateSample {
    /// When it was taken.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// Jobs by state (states with none are left out).
    pub counts: BTreeMap<String, usize>,
}

/// Who a token names, and where it may act.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    /// The token's name (`anonymous` without authentication).
    pub name: String,
    /// The served namespaces it may use, the default first.
    pub namespaces: Vec<String>,
}

/// The process is up.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
}

/// Whether this replica can answer from synced caches.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// Ready to serve.
    pub ready: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Each cluster's state.
    pub clusters: Vec<ClusterReadiness>,
}

/// One cluster's readiness.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReadiness {
    /// The cluster's name.
    pub name: String,
    /// Whether the API server answered lately (no connection failure in the unreachable window).
    pub reachable: bool,
    /// Each namespace's watches.
    pub namespaces: Vec<NamespaceReadiness>,
}

/// One namespace's watches.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceReadiness {
    /// The namespace.
    pub name: String,
    /// Every watch (of container and Spark jobs) has started, listed and is current.
    pub synced: bool,
    /// How often the watches failed and were re-established.
    pub watch_restarts: u64,
    /// The last watch failure (naming the resource), while a watch is failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<String>,
    /// Each watch: `jobs.batch` and `pods` (container jobs), `pods (spark drivers)` and one
    /// per installed Spark operator, e.g. `sparkapplications.spark.apache.org`.
    #[serde(default)]
    pub watches: Vec<WatchReadiness>,
}

/// One watch.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchReadiness {
    /// The resource watched.
    pub resource: String,
    /// It has listed and is current.
    pub synced: bool,
    /// How often it failed and was re-established.
    pub restarts: u64,
}

/// A status change, as sent on event streams (`event: status`).
pub type StatusEvent = JobInfo;

/// A job that is gone and whose end is unknown (`event: gone`): deleted by someone else, or
/// removed after it ended (ttlAfterFinished). A caller that was cancelling it may settle it as
/// cancelled.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoneEvent {
    /// The execution id.
    pub id: String,
    /// What is known.
    pub message: String,
}
