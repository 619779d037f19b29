//! The `batch/v1` Job that runs a container job spec: a pure function of the spec and the
//! job's identity, so the same job id and spec always give the same object.
//!
//! Fixed choices, and why:
//! - `restartPolicy: Never`, `completions: 1`, `parallelism: 1`: one pod per attempt, whose
//!   own outcome (exit code, OOMKilled) stays readable instead of being restarted in place.
//!   An indexed job (`indexed: true`) is an Indexed Job instead (`completionMode: Indexed`)
//!   with the spec's `completions` and `parallelism`: one pod per attempt of each index, each
//!   seeing its index in `JOB_COMPLETION_INDEX`.
//! - `backoffLimit` is `retries` (default 0): the caller usually retries, with its own ids.
//!   With `backoffLimitPerIndex` and no `retries` it is left out, so that Kubernetes defaults it
//!   to the most it allows and only the per-index limit counts.
//! - `podReplacementPolicy: Failed`: a replacement pod starts only after the previous one has
//!   fully terminated, so one job never runs two pods at once (I2, docs/INVARIANTS.md).
//! - `timeout` becomes the Job's `activeDeadlineSeconds`, not the pod's: the Job then ends
//!   with the condition `Failed`/`DeadlineExceeded`, a recorded outcome the status mapping
//!   reads; it bounds a pod stuck Pending (a pod's own deadline only counts once it has
//!   started); it covers every retry; and Kubernetes restarts its clock when a suspended Job
//!   is resumed, so time waiting in a Kueue queue is not counted.
//! - `terminationMessagePolicy: FallbackToLogsOnError`: a failed container's last log lines
//!   become its termination message, which the status keeps after the pod is gone.
//! - With a Kueue `queue`, the Job carries `kueue.x-k8s.io/queue-name` and is created with
//!   `suspend: true`, as Kueue expects; Kueue unsuspends it on admission.
//! - Labels `app.kubernetes.io/managed-by=kubeferry` and `kubeferry.dev/job-id` go on the Job
//!   and on the pod template, so both are found by label; the full job id is an annotation on
//!   both, the spec hash on the Job (what a 409 adoption compares).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec as K8sJobSpec, PodFailurePolicy as K8sPodFailurePolicy,
    PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule, SuccessPolicy as K8sSuccessPolicy, SuccessPolicyRule,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvFromSource, EnvVar as K8sEnvVar,
    EnvVarSource, LocalObjectReference, ObjectFieldSelector, PersistentVolumeClaimVolumeSource,
    PodSpec, PodTemplateSpec, ResourceRequirements as K8sResourceRequirements, SecretEnvSource,
    SecurityContext as K8sSecurityContext, Toleration as K8sToleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeferry_core::marks::{
    JOB_ID_ANNOTATION, JOB_ID_LABEL, KEEP_LOG_ANNOTATION, KUEUE_QUEUE_LABEL, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, RECORD_FINALIZER, SPEC_HASH_ANNOTATION, job_id_label_value,
};
use kubeferry_core::spec::{
    ContainerJobSpec, EnvValue, EnvVar, JobMetadata, JobSetSpec, PodIdentity, PodJobSpec, Process,
    PullPolicy, Quantity, Resources, SHARED_MEMORY_PATH, Sidecar, SparkJobSpec, Toleration,
};

pub use kubeferry_core::container::MAIN_CONTAINER;

pub mod jobset;
pub mod pod;
pub mod spark;

/// The name of the pod volume behind `tmpfs`.
pub(crate) const TMPFS_VOLUME: &str = "tmpfs";
/// The name of the pod volume behind `sharedMemory`.
pub(crate) const SHARED_MEMORY_VOLUME: &str = "shm";
/// The prefix of the pod volumes behind `persistentVolumeClaims` (`pvc-0`, `pvc-1`, ... in
/// claim name order; claim names may hold dots, which volume names may not).
pub(crate) const PVC_VOLUME_PREFIX: &str = "pvc-";

/// The Pod condition Kubernetes sets on pods lost to a disruption (eviction, preemption,
/// node drain or shutdown).
const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// The labels and annotations a managed object and its pods carry: the job file's, with
/// kubeferry's marks (the managed-by and job id labels, the job id annotation); the object's
/// own annotations add the spec's hash.
pub(crate) struct Marks {
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) object_annotations: BTreeMap<String, String>,
}

/// A job file's spec, whose labels, annotations, hash and log keeping mark its objects.
pub(crate) trait Marked {
    /// The marks of the objects that run the spec for the caller's `job_id`.
    fn marks(&self, job_id: &str) -> Marks;
}

// Every spec type but Spark's holds its labels, annotations and log keeping in one `metadata`.
macro_rules! marked {
    ($($spec:ty),+) => {$(
        impl Marked for $spec {
            fn marks(&self, job_id: &str) -> Marks {
                Marks::new(self.metadata.clone(), job_id, self.hash())
            }
        }
    )+};
}
marked!(ContainerJobSpec, PodJobSpec, JobSetSpec);

impl Marked for SparkJobSpec {
    fn marks(&self, job_id: &str) -> Marks {
        let metadata = JobMetadata {
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            keep_log: self.keep_log,
        };
        Marks::new(metadata, job_id, self.hash())
    }
}

impl Marks {
    fn new(metadata: JobMetadata, job_id: &str, spec_hash: String) -> Self {
        let JobMetadata {
            mut labels,
            mut annotations,
            keep_log,
        } = metadata;
        labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string());
        labels.insert(JOB_ID_LABEL.to_string(), job_id_label_value(job_id));
        annotations.insert(JOB_ID_ANNOTATION.to_string(), job_id.to_string());
        let mut object_annotations = annotations.clone();
        object_annotations.insert(SPEC_HASH_ANNOTATION.to_string(), spec_hash);
        if let Some(keep_log) = keep_log {
            object_annotations.insert(KEEP_LOG_ANNOTATION.to_string(), keep_log.annotation());
        }
        Marks {
            labels,
            annotations,
            object_annotations,
        }
    }

    /// The metadata of the job's own object, labelled `labels`: its marks and the spec's
    /// hash, and kubeferry's finalizer, which holds it until its outcome is recorded.
    pub(crate) fn object_meta(
        &self,
        name: &str,
        namespace: &str,
        labels: BTreeMap<String, String>,
    ) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: Some(self.object_annotations.clone()),
            finalizers: Some(vec![RECORD_FINALIZER.to_string()]),
            ..ObjectMeta::default()
        }
    }
}

/// Builds the Job that runs `spec` for the caller's `job_id`, named `object_name` (see
/// [`kubeferry_core::marks::object_name`]) in `namespace` (the spec's, or the caller's default).
pub fn job_manifest(
    spec: &ContainerJobSpec,
    job_id: &str,
    object_name: &str,
    namespace: &str,
) -> Job {
    let marks = spec.marks(job_id);
    let mut job_labels = marks.labels.clone();
    if let Some(queue) = &spec.queue {
        job_labels.insert(KUEUE_QUEUE_LABEL.to_string(), queue.clone());
    }
    let metadata = marks.object_meta(object_name, namespace, job_labels);
    let Marks {
        labels: pod_labels,
        annotations: pod_annotations,
        ..
    } = marks;

    Job {
        metadata,
        spec: Some(K8sJobSpec {
            backoff_limit: (spec.retries > 0 || spec.backoff_limit_per_index.is_none())
                .then(|| i32::try_from(spec.retries).unwrap_or(i32::MAX)),
            completions: Some(spec.completions.map_or(1, int32)),
            parallelism: Some(spec.parallelism.map_or(1, int32)),
            completion_mode: spec.indexed.then(|| "Indexed".to_string()),
            backoff_limit_per_index: spec.backoff_limit_per_index.map(int32),
            max_failed_indexes: spec.max_failed_indexes.map(int32),
            success_policy: success_policy(spec),
            active_deadline_seconds: spec
                .timeout
                .map(|t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX)),
            ttl_seconds_after_finished: spec
                .ttl_after_finished
                .map(|t| i32::try_from(t.as_secs()).unwrap_or(i32::MAX)),
            suspend: spec.queue.as_ref().map(|_| true),
            pod_failure_policy: pod_failure_policy(spec),
            pod_replacement_policy: Some("Failed".to_string()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(pod_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(spec)),
            },
            ..K8sJobSpec::default()
        }),
        status: None,
    }
}

fn pod_failure_policy(spec: &ContainerJobSpec) -> Option<K8sPodFailurePolicy> {
    let policy = &spec.pod_failure_policy;
    let mut rules = Vec::new();
    // Without retries, an exit code of the container's own fails the job before anything else
    // is asked (a drain can reach a pod that had already failed).
    let without_retries = spec.retries == 0 && !spec.indexed;
    if without_retries {
        rules.push(kubeferry_core::container::own_failure_rule(
            &policy.fail_on_exit_codes,
        ));
    }
    // Before the listed codes, so that a disrupted pod is never taken for a listed exit code
    // (an evicted container is killed and may exit 137 or 143).
    // Without retries a disrupted pod fails the job either way; a rule that says so puts the
    // disruption in the Job's own verdict (`Pod <ns>/<pod> has condition DisruptionTarget
    // matching FailJob rule ...`), which outlives the pod: a replica that never saw the pod
    // still knows the job was disrupted, not failed by its own work.
    let on_disruption = if policy.ignore_disruptions {
        Some("Ignore")
    } else if without_retries {
        Some("FailJob")
    } else {
        None
    };
    if let Some(action) = on_disruption {
        rules.push(PodFailurePolicyRule {
            action: action.to_string(),
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: DISRUPTION_TARGET.to_string(),
                status: "True".to_string(),
            }]),
            on_exit_codes: None,
        });
    }
    let on_exit_codes = [
        ("FailJob", &policy.fail_on_exit_codes),
        ("FailIndex", &policy.fail_index_on_exit_codes),
    ];
    for (action, codes) in on_exit_codes {
        if codes.is_empty() {
            continue;
        }
        // Kubernetes requires the values sorted and unique.
        let mut values = codes.clone();
        values.sort_unstable();
        values.dedup();
        rules.push(PodFailurePolicyRule {
            action: action.to_string(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: Some(MAIN_CONTAINER.to_string()),
                operator: "In".to_string(),
                values,
            }),
            on_pod_conditions: None,
        });
    }
    // Last, so that a disruption or a code the job file lists is read as such first.
    if without_retries {
        rules.push(kubeferry_core::container::exit_code_rule());
    }
    (!rules.is_empty()).then_some(K8sPodFailurePolicy { rules })
}

/// An indexed job's success policy: its rules as written.
fn success_policy(spec: &ContainerJobSpec) -> Option<K8sSuccessPolicy> {
    (!spec.success_policy.is_empty()).then(|| K8sSuccessPolicy {
        rules: spec
            .success_policy
            .iter()
            .map(|rule| SuccessPolicyRule {
                succeeded_indexes: rule.succeeded_indexes.clone(),
                succeeded_count: rule.succeeded_count.map(int32),
            })
            .collect(),
    })
}

/// A count validation kept within Kubernetes' int32.
fn int32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn pod_spec(spec: &ContainerJobSpec) -> PodSpec {
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if let Some(tmpfs) = &spec.tmpfs {
        volumes.push(memory_volume(TMPFS_VOLUME, tmpfs.size));
        mounts.push(mount(TMPFS_VOLUME, &tmpfs.path));
    }
    if let Some(size) = spec.shared_memory {
        volumes.push(memory_volume(SHARED_MEMORY_VOLUME, Some(size)));
        mounts.push(mount(SHARED_MEMORY_VOLUME, SHARED_MEMORY_PATH));
    }
    for (i, (claim, path)) in spec.persistent_volume_claims.iter().enumerate() {
        let name = format!("{PVC_VOLUME_PREFIX}{i}");
        volumes.push(Volume {
            name: name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Volume::default()
        });
        mounts.push(mount(&name, path));
    }

    PodSpec {
        restart_policy: Some("Never".to_string()),
        containers: vec![container(spec, mounts)],
        init_containers: non_empty(spec.sidecars.iter().map(sidecar).collect()),
        volumes: non_empty(volumes),
        node_selector: (!spec.node_selector.is_empty()).then(|| spec.node_selector.clone()),
        tolerations: non_empty(spec.tolerations.iter().map(toleration).collect()),
        priority_class_name: spec.priority_class.clone(),
        ..run_as(&spec.pod_identity)
    }
}

fn container(spec: &ContainerJobSpec, volume_mounts: Vec<VolumeMount>) -> Container {
    let security = &spec.security_context;
    let security_context = (!security.is_empty()).then(|| K8sSecurityContext {
        privileged: security.privileged,
        allow_privilege_escalation: security.allow_privilege_escalation,
        run_as_user: security.run_as_user,
        run_as_group: security.run_as_group,
        run_as_non_root: security.run_as_non_root,
        ..K8sSecurityContext::default()
    });
    Container {
        volume_mounts: non_empty(volume_mounts),
        security_context,
        ..main_container(&spec.image, spec.image_pull_policy, &spec.process)
    }
}

/// A pod that runs as `identity`: its service account, and the Secrets of registry credentials
/// its images are pulled with.
pub(crate) fn run_as(identity: &PodIdentity) -> PodSpec {
    PodSpec {
        service_account_name: identity.service_account.clone(),
        image_pull_secrets: non_empty(
            identity
                .image_pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect(),
        ),
        ..PodSpec::default()
    }
}

/// The job's main container: `image`, pulled by `pull_policy`, running `process`. Its
/// termination message falls back to the end of its log, so that a failed container's last
/// words outlive its pod.
pub(crate) fn main_container(
    image: &str,
    pull_policy: Option<PullPolicy>,
    process: &Process,
) -> Container {
    Container {
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..process_container(MAIN_CONTAINER, image, pull_policy, process, &[])
    }
}

/// A native sidecar: an init container the kubelet keeps running (restarting it if it
/// exits) beside the main container, and stops after it.
fn sidecar(sidecar: &Sidecar) -> Container {
    Container {
        restart_policy: Some("Always".to_string()),
        ..process_container(
            &sidecar.name,
            &sidecar.image,
            sidecar.image_pull_policy,
            &sidecar.process,
            &sidecar.ports,
        )
    }
}

/// The container `name`: `image`, pulled by `pull_policy`, running `process` and listening on
/// its port and `more_ports`.
fn process_container(
    name: &str,
    image: &str,
    pull_policy: Option<PullPolicy>,
    process: &Process,
    more_ports: &[u16],
) -> Container {
    let ports: Vec<u16> = process.port.iter().chain(more_ports).copied().collect();
    Container {
        name: name.to_string(),
        image: Some(image.to_string()),
        image_pull_policy: pull_policy.map(|p| p.as_str().to_string()),
        command: non_empty(process.command.clone()),
        args: non_empty(process.args.clone()),
        working_dir: process.working_dir.clone(),
        env: non_empty(env_vars(&process.env)),
        env_from: non_empty(secret_env(&process.secrets)),
        resources: resource_requirements(&process.resources),
        ports: container_ports(&ports),
        ..Container::default()
    }
}

/// A container's resource requests and limits, when it has any.
fn resource_requirements(resources: &Resources) -> Option<K8sResourceRequirements> {
    let requirements = resources.requirements();
    (!requirements.requests.is_empty() || !requirements.limits.is_empty()).then(|| {
        K8sResourceRequirements {
            requests: quantities(&requirements.requests),
            limits: quantities(&requirements.limits),
            ..K8sResourceRequirements::default()
        }
    })
}

/// Every key of each Secret as an environment variable of the container.
fn secret_env(secrets: &[String]) -> Vec<EnvFromSource> {
    secrets
        .iter()
        .map(|name| EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: name.clone(),
                optional: None,
            }),
            ..EnvFromSource::default()
        })
        .collect()
}

/// Environment variables: literal values, and pod fields through the downward API.
fn env_vars(env: &[EnvVar]) -> Vec<K8sEnvVar> {
    env.iter()
        .map(|var| match &var.value {
            EnvValue::Literal(value) => K8sEnvVar {
                name: var.name.clone(),
                value: Some(value.clone()),
                value_from: None,
            },
            EnvValue::Field { field } => K8sEnvVar {
                name: var.name.clone(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: field.field_path().to_string(),
                    }),
                    ..EnvVarSource::default()
                }),
            },
        })
        .collect()
}

/// TCP ports a container listens on.
fn container_ports(ports: &[u16]) -> Option<Vec<ContainerPort>> {
    non_empty(
        ports
            .iter()
            .map(|port| ContainerPort {
                container_port: i32::from(*port),
                protocol: Some("TCP".to_string()),
                ..ContainerPort::default()
            })
            .collect(),
    )
}

fn memory_volume(name: &str, size: Option<Quantity>) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".to_string()),
            size_limit: size.map(|s| s.to_k8s()),
        }),
        ..Volume::default()
    }
}

fn mount(volume: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        ..VolumeMount::default()
    }
}

fn toleration(t: &Toleration) -> K8sToleration {
    K8sToleration {
        key: t.key.clone(),
        operator: t.operator.map(|op| op.as_str().to_string()),
        value: t.value.clone(),
        effect: t.effect.map(|effect| effect.as_str().to_string()),
        toleration_seconds: t.toleration_seconds,
    }
}

fn quantities(map: &BTreeMap<String, Quantity>) -> Option<BTreeMap<String, K8sQuantity>> {
    (!map.is_empty()).then(|| {
        map.iter()
            .map(|(name, q)| (name.clone(), q.to_k8s()))
            .collect()
    })
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

#[cfg(test)]
mod tests;

/// An object kubeferry built or the server answered, as JSON (`what` names it for the error).
pub(crate) fn to_json<T: serde::Serialize>(
    object: &T,
    what: &str,
) -> crate::error::Result<serde_json::Value> {
    serde_json::to_value(object).map_err(|source| crate::error::Error::Manifest {
        operation: format!("show {what}"),
        source,
    })
}
