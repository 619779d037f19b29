//! The JobSet (`jobset.x-k8s.io/v1alpha2`) that runs a JobSet spec: a pure function of the spec
//! and the job's identity, so the same job id and spec always give the same object.
//!
//! Fixed choices, and why:
//! - Each replicated job's Job runs one pod (`completions: 1`, `parallelism: 1`,
//!   `restartPolicy: Never`, `backoffLimit: 0`) whose container is `main`: a failed pod fails
//!   its Job at once, and the JobSet's failure policy (`maxRestarts`) decides what follows, as
//!   the JobSet documentation intends; the pod's own outcome (exit code, OOMKilled) stays
//!   readable for the status mapping.
//! - `podReplacementPolicy: Failed`: no Job ever runs two pods at once.
//! - `terminationMessagePolicy: FallbackToLogsOnError`, as for container jobs.
//! - `failurePolicy.maxRestarts`, `successPolicy`, `startupPolicy.startupPolicyOrder` and
//!   `network.enableDNSHostnames` are always written (with JobSet's defaults where the spec is
//!   silent), so the object says what runs without the webhook's defaults.
//! - The JobSet carries the same marks as a container job's Job: the labels
//!   `app.kubernetes.io/managed-by=kubeferry` and `kubeferry.dev/job-id`, the full job id and
//!   the spec hash as annotations. Its Jobs and their pods carry the job id (label and
//!   annotation; the JobSet controller adds its own `jobset.sigs.k8s.io/` labels to both) but
//!   not the managed-by label: kubeferry selects its container jobs' Jobs and pods by that
//!   label, and a child Job carrying it would be listed, settled and swept as a container job
//!   of its own.

use k8s_openapi::api::batch::v1::JobSpec as K8sJobSpec;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kubeferry_core::jobset::{JOBSET_GROUP, JOBSET_KIND, JOBSET_VERSION, JOBSETS};
use kubeferry_core::marks::{MANAGED_BY_LABEL, RECORD_FINALIZER};
use kubeferry_core::spec::{JobSetSpec, ReplicatedJob, StartupOrder, SuccessOperator};
use serde_json::{Value, json};

use super::{Marked, Marks, main_container, run_as};

/// The Kubernetes API resource of JobSets, for a kube `Api<DynamicObject>`.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: JOBSET_GROUP.to_string(),
        version: JOBSET_VERSION.to_string(),
        api_version: format!("{JOBSET_GROUP}/{JOBSET_VERSION}"),
        kind: JOBSET_KIND.to_string(),
        plural: JOBSETS.to_string(),
    }
}

/// Builds the JobSet that runs `spec` for the caller's `job_id`, named `object_name` (see
/// [`kubeferry_core::marks::jobset_object_name`]) in `namespace` (the spec's, or the caller's
/// default).
pub fn jobset_manifest(
    spec: &JobSetSpec,
    job_id: &str,
    object_name: &str,
    namespace: &str,
) -> Value {
    let Marks {
        labels,
        annotations,
        object_annotations: jobset_annotations,
    } = spec.marks(job_id);

    let mut child_labels = labels.clone();
    child_labels.remove(MANAGED_BY_LABEL);
    let template_meta = ObjectMeta {
        labels: Some(child_labels),
        annotations: Some(annotations.clone()),
        ..ObjectMeta::default()
    };
    let replicated_jobs: Vec<Value> = spec
        .replicated_jobs
        .iter()
        .map(|rjob| {
            json!({
                "name": rjob.name,
                "replicas": rjob.replicas,
                "template": {
                    "metadata": template_meta,
                    "spec": job_spec(spec, rjob, &template_meta),
                },
            })
        })
        .collect();
    let (operator, targets) = match &spec.success_policy {
        Some(policy) => (policy.operator, policy.target_replicated_jobs.clone()),
        None => (SuccessOperator::All, Vec::new()),
    };
    let mut body = json!({
        "replicatedJobs": replicated_jobs,
        "failurePolicy": {"maxRestarts": spec.max_restarts},
        "successPolicy": {
            "operator": operator.as_str(),
            "targetReplicatedJobs": targets,
        },
        "startupPolicy": {
            "startupPolicyOrder": spec.startup_policy.unwrap_or(StartupOrder::AnyOrder).as_str(),
        },
        "network": {"enableDNSHostnames": spec.enable_dns_hostnames.unwrap_or(true)},
    });
    if let Some(ttl) = spec.ttl_after_finished {
        body["ttlSecondsAfterFinished"] = json!(i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX));
    }
    json!({
        "apiVersion": format!("{JOBSET_GROUP}/{JOBSET_VERSION}"),
        "kind": JOBSET_KIND,
        "metadata": {
            "name": object_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": jobset_annotations,
            "finalizers": [RECORD_FINALIZER],
        },
        "spec": body,
    })
}

/// The Job of each replica of `rjob`: one pod, failed at its first failure.
fn job_spec(spec: &JobSetSpec, rjob: &ReplicatedJob, template_meta: &ObjectMeta) -> K8sJobSpec {
    K8sJobSpec {
        backoff_limit: Some(0),
        completions: Some(1),
        parallelism: Some(1),
        pod_replacement_policy: Some("Failed".to_string()),
        template: PodTemplateSpec {
            metadata: Some(template_meta.clone()),
            spec: Some(PodSpec {
                restart_policy: Some("Never".to_string()),
                containers: vec![main_container(
                    &rjob.image,
                    rjob.image_pull_policy,
                    &rjob.process,
                )],
                ..run_as(&spec.pod_identity)
            }),
        },
        ..K8sJobSpec::default()
    }
}

#[cfg(test)]
mod tests;
