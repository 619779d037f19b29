//! The bare pod that runs a `kind: Pod` spec: a pure function of the spec and the job's
//! identity, so the same job id and spec always give the same object.
//!
//! Fixed choices, and why:
//! - The pod is the one a container job of the same fields would start (the Job's pod
//!   template, built by [`super::job_manifest`]): one container description for both kinds.
//!   `restartPolicy: Never`: the pod runs once, and its own outcome (exit code, OOMKilled)
//!   stays readable.
//! - `timeout` becomes the pod's `activeDeadlineSeconds`, which the kubelet counts from the
//!   pod's start on a node: time spent waiting for a node is bounded by the pending timeout
//!   instead.
//! - The pod carries a Job's marks itself (the managed-by and job id labels; the job id, the
//!   spec hash and the log to keep as annotations; kubeferry's finalizer, which holds it until
//!   its outcome is recorded), and the label `kubeferry.dev/kind=pod`, by which bare pods are
//!   told from the pods of kubeferry's Jobs.

use k8s_openapi::api::core::v1::Pod;
use kubeferry_core::pod::{BARE_POD_VALUE, KIND_LABEL};
use kubeferry_core::spec::PodJobSpec;

use super::Marked;

/// Builds the pod that runs `spec` for the caller's `job_id`, named `object_name` in
/// `namespace`.
pub fn pod_manifest(spec: &PodJobSpec, job_id: &str, object_name: &str, namespace: &str) -> Pod {
    let job = super::job_manifest(&spec.as_container_job(), job_id, object_name, namespace);
    let mut pod_spec = job
        .spec
        .and_then(|job| job.template.spec)
        .unwrap_or_default();
    pod_spec.active_deadline_seconds = spec
        .timeout
        .map(|t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX));
    let marks = spec.marks(job_id);
    let mut labels = marks.labels.clone();
    labels.insert(KIND_LABEL.to_string(), BARE_POD_VALUE.to_string());
    Pod {
        metadata: marks.object_meta(object_name, namespace, labels),
        spec: Some(pod_spec),
        status: None,
    }
}
