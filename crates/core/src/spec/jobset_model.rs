//! The JobSet spec as data: what a `kind: JobSet` file says, after decoding, before and after
//! validation (see [`super::JobSetSpec`] for the validated form).

use std::time::Duration;

use serde::Serialize;
use serde_with::skip_serializing_none;

use super::common::{JobMetadata, PodIdentity, is_zero, seconds};
use super::model::{Process, PullPolicy};
use crate::named::names;

/// A JobSet: groups of identical Jobs (replicated jobs, e.g. a leader and its workers) run
/// together by the JobSet controller (`jobset.x-k8s.io/v1alpha2`), restarted together on a
/// failure and finished by a success policy.
///
/// Field names in job files are the camelCase forms of these. Empty collections and `None`
/// mean "not given"; see `docs/job-files.md` for every field.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetJob {
    /// The job's name, a DNS-1123 label (the object name is derived from the job id).
    pub name: String,
    /// The namespace; the caller's (context's) namespace when `None`.
    pub namespace: Option<String>,
    /// The image pull secrets and service account of every pod.
    #[serde(flatten)]
    pub pod_identity: PodIdentity,
    /// The groups of Jobs, in order: with `startupPolicy: InOrder` each starts once the one
    /// before it runs.
    pub replicated_jobs: Vec<ReplicatedJob>,
    /// How many times the whole set is restarted after a child Job fails
    /// (`failurePolicy.maxRestarts`); 0: the first failure fails the job.
    #[serde(skip_serializing_if = "is_zero")]
    pub max_restarts: u32,
    /// When the set has succeeded; every Job of every replicated job when `None`.
    pub success_policy: Option<JobSetSuccessPolicy>,
    /// The order the replicated jobs start in; JobSet's default (`AnyOrder`) when `None`.
    pub startup_policy: Option<StartupOrder>,
    /// Whether pods get DNS names (`<pod hostname>.<subdomain>`) through a headless Service
    /// (`network.enableDNSHostnames`); JobSet's default (true) when `None`.
    pub enable_dns_hostnames: Option<bool>,
    /// How long a finished JobSet is kept before the JobSet controller deletes it
    /// (`ttlSecondsAfterFinished`).
    #[serde(serialize_with = "seconds")]
    pub ttl_after_finished: Option<Duration>,
    /// Labels and annotations for the JobSet, its Jobs and their pods, and how much of the
    /// log is kept.
    #[serde(flatten)]
    pub metadata: JobMetadata,
}

/// A group of identical Jobs of a JobSet, each running one pod of the same container.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// The group's name (`leader`, `workers`), a DNS-1035 label; its Jobs are
    /// `<jobset>-<name>-<index>`.
    pub name: String,
    /// How many Jobs the group has (1 when not given).
    pub replicas: u32,
    /// The container image reference.
    pub image: String,
    /// When the kubelet pulls the image; Kubernetes' default when `None`.
    pub image_pull_policy: Option<PullPolicy>,
    /// What the container of each pod runs, with what.
    #[serde(flatten)]
    pub process: Process,
}

/// When a JobSet has succeeded: `operator` over the Jobs of the target replicated jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSuccessPolicy {
    /// All of the target Jobs must succeed, or any one of them.
    pub operator: SuccessOperator,
    /// The replicated jobs whose Jobs count; every one when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub target_replicated_jobs: Vec<String>,
}

/// How a JobSet's success policy counts its target Jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SuccessOperator {
    /// Every target Job must succeed.
    All,
    /// One target Job succeeding is enough; the others are stopped.
    Any,
}

names!(SuccessOperator: All = "All", Any = "Any");

/// The order in which a JobSet's replicated jobs start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum StartupOrder {
    /// All at once.
    AnyOrder,
    /// Each replicated job once every pod of the one before it is ready (a leader first).
    InOrder,
}

names!(StartupOrder: AnyOrder = "AnyOrder", InOrder = "InOrder");
