//! Validation of a decoded JobSet: every value Kubernetes or the JobSet webhook would refuse,
//! and every combination that contradicts itself, named by field, before anything is created.

use std::collections::BTreeSet;

use super::common::Checks;
use super::error::{Found, Path};
use super::jobset_model::JobSetJob;
use super::names::dns_label;
use super::validate::{job_reserved, process};
use crate::marks::{KUEUE_QUEUE_LABEL, MAX_JOBSET_NAME_LEN, MAX_NAME_LEN};

/// The label and annotation prefix of the JobSet controller's own marks.
const JOBSET_PREFIX: &str = "jobset.sigs.k8s.io";

/// Every problem with `job`; empty when it is valid.
pub(crate) fn jobset_job(job: &JobSetJob) -> Vec<Found> {
    let root = Path::root();
    let mut c = Checks::default();

    c.identity(&job.name, job.namespace.as_deref());
    c.pod_identity(&job.pod_identity);
    replicated_jobs(&mut c, job);
    if let Some(policy) = &job.success_policy {
        let path = root.field("successPolicy").field("targetReplicatedJobs");
        let mut seen = BTreeSet::new();
        for (i, target) in policy.target_replicated_jobs.iter().enumerate() {
            if !job.replicated_jobs.iter().any(|r| r.name == *target) {
                c.invalid(
                    path.index(i),
                    format!("{target:?} is not the name of one of replicatedJobs"),
                );
            } else if !seen.insert(target) {
                c.invalid(path.index(i), format!("{target:?} is listed twice"));
            }
        }
    }
    c.ttl_after_finished(job.ttl_after_finished);
    if i32::try_from(job.max_restarts).is_err() {
        c.invalid(
            root.field("failurePolicy").field("maxRestarts"),
            "is too large (at most 2^31-1)",
        );
    }
    c.job_metadata(&job.metadata, jobset_reserved);
    c.found
}

fn replicated_jobs(c: &mut Checks, job: &JobSetJob) {
    let root = Path::root().field("replicatedJobs");
    if job.replicated_jobs.is_empty() {
        c.invalid(
            root.clone(),
            "must list at least one replicated job (e.g. {name: workers, replicas: 2, image: ...})",
        );
    }
    let mut names = BTreeSet::new();
    for (i, rjob) in job.replicated_jobs.iter().enumerate() {
        let path = root.index(i);
        if rjob.name.is_empty() {
            c.required(path.field("name"));
        } else if !names.insert(rjob.name.as_str()) {
            c.invalid(path.field("name"), "is given to two replicated jobs");
        } else if let Err(message) = dns_label(&rjob.name) {
            c.invalid(path.field("name"), message);
        } else {
            // The longest pod hostname: `<jobset>-<name>-<job index>-<pod index>`.
            let suffix = format!("-{}-{}-0", rjob.name, rjob.replicas.saturating_sub(1));
            let room = MAX_NAME_LEN - MAX_JOBSET_NAME_LEN;
            if suffix.len() > room {
                c.invalid(
                    path.field("name"),
                    format!(
                        "{:?} is too long for its {} replicas: the pods' hostnames `<jobset>-{}-<index>-0` must fit in 63 characters with a JobSet name of up to {MAX_JOBSET_NAME_LEN}, which leaves {} characters for the name",
                        rjob.name,
                        rjob.replicas,
                        rjob.name,
                        room - (suffix.len() - rjob.name.len())
                    ),
                );
            }
        }
        if rjob.replicas == 0 {
            c.invalid(path.field("replicas"), "must be at least 1");
        }
        c.image(path.field("image"), &rjob.image);
        process(c, &path, &rjob.process);
    }
}

/// Label keys the JobSet controller, the Job controller or Kueue read or set.
fn jobset_reserved(key: &str) -> Result<(), String> {
    let prefix = key.rsplit_once('/').map(|(prefix, _)| prefix);
    if key == KUEUE_QUEUE_LABEL {
        return Err(format!(
            "{key:?} would put the JobSet in a Kueue queue, which kubeferry does not do for JobSets"
        ));
    }
    if prefix == Some(JOBSET_PREFIX) {
        return Err(format!(
            "{key:?} is reserved: the JobSet controller sets it"
        ));
    }
    job_reserved(key)
}
