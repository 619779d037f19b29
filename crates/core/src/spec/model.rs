//! The container job spec as data: what a job file says, after decoding, before and after
//! validation (see [`super::ContainerJobSpec`] for the validated form).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_with::skip_serializing_none;

use super::common::{JobMetadata, PodIdentity, empty_when_default, is_zero, seconds};
use super::quantity::Quantity;
use crate::named::names;

/// A container job: one container run once to completion by a `batch/v1` Job.
///
/// Field names in job files are the camelCase forms of these (`imagePullPolicy`). Empty
/// collections and `None` mean "not given"; see `docs/job-files.md` for every field.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerJob {
    /// The job's name, a DNS-1123 label (the object name is derived from the job id).
    pub name: String,
    /// The namespace; the caller's (context's) namespace when `None`.
    pub namespace: Option<String>,
    /// The container image reference.
    pub image: String,
    /// When the kubelet pulls the image; Kubernetes' default when `None`.
    pub image_pull_policy: Option<PullPolicy>,
    /// The pod's image pull secrets and service account.
    #[serde(flatten)]
    pub pod_identity: PodIdentity,
    /// What the container runs, with what.
    #[serde(flatten)]
    pub process: Process,
    /// The longest the job may run, counted by the Job from its start (or Kueue's admission).
    #[serde(serialize_with = "seconds")]
    pub timeout: Option<Duration>,
    /// How many times Kubernetes retries a failed pod (`backoffLimit`); 0: the caller retries.
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Which pod failures end the job at once, and which are not counted against `retries`.
    #[serde(skip_serializing_if = "PodFailurePolicy::is_empty")]
    pub pod_failure_policy: PodFailurePolicy,
    /// How long a finished Job is kept before Kubernetes deletes it (`ttlSecondsAfterFinished`).
    #[serde(serialize_with = "seconds")]
    pub ttl_after_finished: Option<Duration>,
    /// A Kueue LocalQueue: the Job is labelled for it and created suspended for Kueue to admit.
    pub queue: Option<String>,
    /// The pod's PriorityClass.
    pub priority_class: Option<String>,
    /// Node labels the pod's node must have.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pod tolerates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Labels and annotations for the Job and its pod, and how much of its log is kept.
    #[serde(flatten)]
    pub metadata: JobMetadata,
    /// A memory-backed scratch directory.
    pub tmpfs: Option<Tmpfs>,
    /// The size of a memory-backed `/dev/shm`.
    pub shared_memory: Option<Quantity>,
    /// PersistentVolumeClaims to mount: claim name to absolute mount path.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub persistent_volume_claims: BTreeMap<String, String>,
    /// The container's security context.
    #[serde(skip_serializing_if = "SecurityContext::is_empty")]
    pub security_context: SecurityContext,
    /// Containers that run beside the main one for the whole job (native sidecars).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sidecars: Vec<Sidecar>,
    /// Run as an Indexed Job (`completionMode: Indexed`): `completions` pods, each with its
    /// own index in `JOB_COMPLETION_INDEX`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub indexed: bool,
    /// How many indexes (`completions`); required with `indexed`.
    pub completions: Option<u32>,
    /// How many pods run at once; Kubernetes' default (1) when `None`.
    pub parallelism: Option<u32>,
    /// How many times each index is retried on its own before it counts as failed.
    pub backoff_limit_per_index: Option<u32>,
    /// How many indexes may fail before the job fails at once (needs
    /// `backoffLimitPerIndex`); without it the job runs every index and fails at the end if
    /// any failed.
    pub max_failed_indexes: Option<u32>,
    /// When the job counts as succeeded before every index has (any rule met is enough).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub success_policy: Vec<SuccessPolicyRule>,
}

/// One rule of a success policy: the job succeeds once the indexes it names (or, with only a
/// count, any indexes) have succeeded, `succeededCount` of them when a count is given.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicyRule {
    /// The indexes the rule looks at, as an interval string (`"0,2-4"`); all when `None`.
    pub succeeded_indexes: Option<String>,
    /// How many of them must succeed; all of `succeededIndexes` when `None`.
    pub succeeded_count: Option<u32>,
}

/// A native sidecar: a container that runs beside the main one for the whole job (a log
/// shipper, a proxy), started before it and stopped after it ends. It runs as an init
/// container with `restartPolicy: Always` (Kubernetes 1.29+): the kubelet restarts it if it
/// exits, and the job's outcome is the main container's alone.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    /// The container's name, a DNS-1123 label other than `main`.
    pub name: String,
    /// The container image reference.
    pub image: String,
    /// When the kubelet pulls the image; Kubernetes' default when `None`.
    pub image_pull_policy: Option<PullPolicy>,
    /// What the container runs, with what (its resources are added to the main container's
    /// when the pod is scheduled).
    #[serde(flatten)]
    pub process: Process,
    /// Ports the container listens on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
}

/// What a container runs and with what, after its image: the same fields in a container job
/// (and a bare pod), in each replicated job of a JobSet and in a sidecar (whose job file gives
/// no `workingDir`, `secrets` or `port`), decoded, validated and built into a container once.
/// Field names in job files are the camelCase forms.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// The entrypoint; the image's own when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments to the entrypoint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory (absolute); the image's own when `None`.
    pub working_dir: Option<String>,
    /// Environment variables, in order (Kubernetes expands `$(NAME)` only from earlier ones).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Secrets whose keys all become environment variables (`envFrom.secretRef`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Compute resources.
    #[serde(skip_serializing_if = "Resources::is_empty")]
    pub resources: Resources,
    /// A port the container listens on (informational for Kubernetes, useful for tooling).
    pub port: Option<u16>,
}

/// When the kubelet pulls the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PullPolicy {
    /// Pull on every start.
    Always,
    /// Pull only when the node does not have the image.
    IfNotPresent,
    /// Never pull; the image must be on the node.
    Never,
}

names!(PullPolicy: Always = "Always", IfNotPresent = "IfNotPresent", Never = "Never");

/// One environment variable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    /// The variable's name (a C identifier).
    pub name: String,
    /// Its value.
    pub value: EnvValue,
}

/// Where an environment variable's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EnvValue {
    /// A literal value.
    Literal(String),
    /// A field of the running pod, through the downward API.
    Field {
        /// The field.
        field: PodField,
    },
}

/// A pod field the downward API provides as an environment variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PodField {
    /// The pod's name.
    #[serde(rename = "podName")]
    PodName,
    /// The pod's namespace.
    #[serde(rename = "namespace")]
    Namespace,
    /// The pod's UID.
    #[serde(rename = "podUID")]
    PodUid,
    /// The pod's IP address.
    #[serde(rename = "podIP")]
    PodIp,
    /// The name of the node the pod runs on.
    #[serde(rename = "nodeName")]
    NodeName,
    /// The IP address of the node the pod runs on.
    #[serde(rename = "nodeIP")]
    NodeIp,
    /// The pod's service account.
    #[serde(rename = "serviceAccount")]
    ServiceAccount,
}

names!(
    PodField:
    PodName = "podName",
    Namespace = "namespace",
    PodUid = "podUID",
    PodIp = "podIP",
    NodeName = "nodeName",
    NodeIp = "nodeIP",
    ServiceAccount = "serviceAccount",
);

impl PodField {
    /// The downward API `fieldPath`.
    pub fn field_path(self) -> &'static str {
        match self {
            PodField::PodName => "metadata.name",
            PodField::Namespace => "metadata.namespace",
            PodField::PodUid => "metadata.uid",
            PodField::PodIp => "status.podIP",
            PodField::NodeName => "spec.nodeName",
            PodField::NodeIp => "status.hostIP",
            PodField::ServiceAccount => "spec.serviceAccountName",
        }
    }
}

/// Compute resources: requests, and limits derived from the QoS class or given explicitly.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// CPU request.
    pub cpu: Option<Quantity>,
    /// Memory request.
    pub memory: Option<Quantity>,
    /// Ephemeral storage request (`ephemeral-storage`).
    pub disk: Option<Quantity>,
    /// Number of GPUs.
    pub gpu: Option<u32>,
    /// Which GPUs; NVIDIA when `None`.
    pub gpu_vendor: Option<GpuVendor>,
    /// Other extended resources by name (e.g. `example.com/fpga`), whole numbers.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, Quantity>,
    /// The QoS class to ask for; Burstable when `None`.
    pub qos: Option<Qos>,
    /// Explicit limits (Burstable only).
    #[serde(skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
}

empty_when_default!(Resources, Limits, PodFailurePolicy, SecurityContext);

impl Resources {
    /// The QoS class asked for.
    pub fn qos(&self) -> Qos {
        self.qos.unwrap_or(Qos::Burstable)
    }

    /// The GPU vendor, NVIDIA by default.
    pub fn gpu_vendor(&self) -> GpuVendor {
        self.gpu_vendor.unwrap_or(GpuVendor::Nvidia)
    }

    /// The memory limit the container will have, if any (explicit, or Guaranteed's request).
    pub fn memory_limit(&self) -> Option<Quantity> {
        match self.qos() {
            Qos::Guaranteed => self.memory,
            Qos::Burstable => self.limits.memory,
        }
    }

    /// The container's resource requests and limits by Kubernetes resource name.
    ///
    /// GPUs and extended resources cannot be overcommitted, so they are both requested and
    /// limited. Guaranteed sets the limits of cpu, memory and disk to their requests.
    pub fn requirements(&self) -> ResourceRequirements {
        let mut requests = BTreeMap::new();
        let mut limits = BTreeMap::new();
        let basic = [
            (CPU, self.cpu, self.limits.cpu),
            (MEMORY, self.memory, self.limits.memory),
            (EPHEMERAL_STORAGE, self.disk, self.limits.disk),
        ];
        for (name, request, limit) in basic {
            if let Some(request) = request {
                requests.insert(name.to_string(), request);
            }
            let limit = match self.qos() {
                Qos::Guaranteed => request,
                Qos::Burstable => limit,
            };
            if let Some(limit) = limit {
                limits.insert(name.to_string(), limit);
            }
        }
        let countable = self
            .gpu
            .map(|n| {
                (
                    self.gpu_vendor().resource_name().to_string(),
                    Quantity::from_units(n.into()),
                )
            })
            .into_iter()
            .chain(self.extended.iter().map(|(k, v)| (k.clone(), *v)));
        for (name, amount) in countable {
            requests.insert(name.clone(), amount);
            limits.insert(name, amount);
        }
        ResourceRequirements { requests, limits }
    }
}

/// The Kubernetes resource name of CPU.
pub const CPU: &str = "cpu";
/// The Kubernetes resource name of memory.
pub const MEMORY: &str = "memory";
/// The Kubernetes resource name of ephemeral storage (`disk` in job files).
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Requests and limits by Kubernetes resource name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceRequirements {
    /// Requests.
    pub requests: BTreeMap<String, Quantity>,
    /// Limits.
    pub limits: BTreeMap<String, Quantity>,
}

/// Explicit resource limits.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// CPU limit.
    pub cpu: Option<Quantity>,
    /// Memory limit.
    pub memory: Option<Quantity>,
    /// Ephemeral storage limit.
    pub disk: Option<Quantity>,
}

/// A GPU vendor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    /// `nvidia.com/gpu`.
    Nvidia,
    /// `amd.com/gpu`.
    Amd,
}

names!(GpuVendor: Nvidia = "nvidia", Amd = "amd");

impl GpuVendor {
    /// The extended resource the vendor's device plugin advertises.
    pub fn resource_name(self) -> &'static str {
        match self {
            GpuVendor::Nvidia => "nvidia.com/gpu",
            GpuVendor::Amd => "amd.com/gpu",
        }
    }
}

/// The QoS class a job asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Qos {
    /// Requests, with limits only where given explicitly.
    Burstable,
    /// Limits equal to requests (cpu and memory required).
    Guaranteed,
}

names!(Qos: Burstable = "Burstable", Guaranteed = "Guaranteed");

/// Which pod failures end the job at once, and which do not count against `retries`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFailurePolicy {
    /// Exit codes of the main container that fail the job without further retries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_on_exit_codes: Vec<i32>,
    /// Whether pods lost to disruptions (eviction, preemption, node drain) are replaced
    /// without counting against `retries`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignore_disruptions: bool,
    /// Exit codes of the main container that fail its index at once, without the retries
    /// `backoffLimitPerIndex` allows (the `FailIndex` action); the other indexes go on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_index_on_exit_codes: Vec<i32>,
}

/// A toleration of node taints.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// The taint key; with operator Exists and no key, every taint is tolerated.
    pub key: Option<String>,
    /// How the value is matched; Equal when `None`.
    pub operator: Option<TolerationOperator>,
    /// The taint value (operator Equal).
    pub value: Option<String>,
    /// The taint effect; every effect when `None`.
    pub effect: Option<TaintEffect>,
    /// For NoExecute: how long the pod stays on a node after the taint appears.
    pub toleration_seconds: Option<i64>,
}

/// How a toleration matches a taint's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TolerationOperator {
    /// The values are equal.
    Equal,
    /// Any value.
    Exists,
}

names!(TolerationOperator: Equal = "Equal", Exists = "Exists");

/// A taint effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TaintEffect {
    /// Pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node.
    PreferNoSchedule,
    /// Running pods that do not tolerate it are evicted.
    NoExecute,
}

names!(
    TaintEffect:
    NoSchedule = "NoSchedule",
    PreferNoSchedule = "PreferNoSchedule",
    NoExecute = "NoExecute",
);

/// A memory-backed scratch directory (an `emptyDir` with medium Memory).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tmpfs {
    /// Where it is mounted (absolute).
    pub path: String,
    /// Its size limit; without one it is bounded by the memory limit.
    pub size: Option<Quantity>,
}

/// The path where `sharedMemory` is mounted.
pub const SHARED_MEMORY_PATH: &str = "/dev/shm";

/// The container's security context.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    /// Run privileged.
    pub privileged: Option<bool>,
    /// Whether a process may gain more privileges than its parent.
    pub allow_privilege_escalation: Option<bool>,
    /// The user id the container runs as.
    pub run_as_user: Option<i64>,
    /// The group id the container runs as.
    pub run_as_group: Option<i64>,
    /// Refuse to start if the image would run as root.
    pub run_as_non_root: Option<bool>,
}
