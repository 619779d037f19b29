//! Validation of a decoded container job: every value Kubernetes would refuse, and every
//! combination that contradicts itself, named by field, before anything is created.

use std::collections::BTreeSet;

use super::common::Checks;
use super::error::{Found, Path};
use super::model::{
    ContainerJob, EnvVar, GpuVendor, Process, Qos, Resources, SHARED_MEMORY_PATH, TaintEffect,
    TolerationOperator,
};
use super::names::{
    absolute_path, dns_label, dns_subdomain, env_name, label_value, qualified_name,
};
use super::quantity::Quantity;
use crate::marks::{KUEUE_QUEUE_LABEL, is_label_value};

/// Every problem with `job`; empty when it is valid.
pub(crate) fn container_job(job: &ContainerJob) -> Vec<Found> {
    let root = Path::root();
    let mut c = Checks::default();

    c.identity(&job.name, job.namespace.as_deref());
    c.image(root.field("image"), &job.image);
    c.pod_identity(&job.pod_identity);
    process(&mut c, &root, &job.process);
    let mut sidecar_names = BTreeSet::new();
    for (i, sidecar) in job.sidecars.iter().enumerate() {
        let path = root.field("sidecars").index(i);
        if sidecar.name.is_empty() {
            c.required(path.field("name"));
        } else if sidecar.name == crate::container::MAIN_CONTAINER {
            c.invalid(
                path.field("name"),
                "\"main\" is the job's own container; give the sidecar another name",
            );
        } else if !sidecar_names.insert(sidecar.name.as_str()) {
            c.invalid(path.field("name"), "is given to two sidecars");
        } else {
            c.value(path.field("name"), dns_label(&sidecar.name));
        }
        c.image(path.field("image"), &sidecar.image);
        process(&mut c, &path, &sidecar.process);
    }
    if let Some(timeout) = job.timeout {
        if timeout.subsec_nanos() != 0 {
            c.invalid(root.field("timeout"), "must be whole seconds");
        } else if timeout.as_secs() == 0 {
            c.invalid(root.field("timeout"), "must be at least 1s");
        } else if i64::try_from(timeout.as_secs()).is_err() {
            c.invalid(root.field("timeout"), "is too long");
        }
    }
    c.ttl_after_finished(job.ttl_after_finished);
    if i32::try_from(job.retries).is_err() {
        c.invalid(root.field("retries"), "is too large (at most 2^31-1)");
    }
    let codes_path = root.field("podFailurePolicy").field("failOnExitCodes");
    let mut codes = BTreeSet::new();
    for (i, code) in job.pod_failure_policy.fail_on_exit_codes.iter().enumerate() {
        if !(1..=255).contains(code) {
            c.invalid(
                codes_path.index(i),
                format!("{code} is not an exit code that fails a container (1 to 255)"),
            );
        } else if !codes.insert(*code) {
            c.invalid(codes_path.index(i), format!("{code} is listed twice"));
        }
    }
    let index_codes_path = root.field("podFailurePolicy").field("failIndexOnExitCodes");
    let mut index_codes = BTreeSet::new();
    for (i, code) in job
        .pod_failure_policy
        .fail_index_on_exit_codes
        .iter()
        .enumerate()
    {
        if !(1..=255).contains(code) {
            c.invalid(
                index_codes_path.index(i),
                format!("{code} is not an exit code that fails a container (1 to 255)"),
            );
        } else if !index_codes.insert(*code) {
            c.invalid(index_codes_path.index(i), format!("{code} is listed twice"));
        } else if codes.contains(code) {
            c.conflict(
                index_codes_path.index(i),
                format!("{code} is also in failOnExitCodes, which fails the whole job"),
            );
        }
    }
    indexed(&mut c, job);
    if let Some(queue) = &job.queue {
        let path = root.field("queue");
        match dns_subdomain(queue) {
            Err(message) => c.invalid(path, message),
            Ok(()) if !is_label_value(queue) => c.invalid(
                path,
                format!("{queue:?} is longer than a label value (63 characters)"),
            ),
            Ok(()) => {}
        }
    }
    if let Some(class) = &job.priority_class {
        c.value(root.field("priorityClass"), dns_subdomain(class));
    }
    for (key, value) in &job.node_selector {
        let path = root.field("nodeSelector").key(key);
        c.key(path.clone(), qualified_name(key));
        c.value(path, label_value(value));
    }
    tolerations(&mut c, job);
    c.job_metadata(&job.metadata, job_reserved);
    volumes(&mut c, job);
    security_context(&mut c, job);
    c.found
}

/// Every problem with `job` run as one bare pod (`kind: Pod`): a container job's, and each
/// field only a Job honours, refused where it is written with a pointer to the kind that
/// honours it. A pod runs once: nothing retries it, indexes it or removes it after a TTL.
pub(crate) fn pod_job(job: &ContainerJob) -> Vec<Found> {
    let mut c = Checks {
        found: container_job(job),
    };
    let root = Path::root();
    // Why each field is a Job's: several fields share a reason.
    let runs_once = "a pod runs once";
    let no_indexes = "a pod has no indexes";
    let job_only: [(&'static str, bool, &str); 10] = [
        (
            "retries",
            job.retries > 0,
            "a pod runs once; nothing retries it",
        ),
        (
            "podFailurePolicy",
            job.pod_failure_policy != Default::default(),
            "the Job controller applies it; a pod's first failure is its outcome",
        ),
        (
            "ttlAfterFinished",
            job.ttl_after_finished.is_some(),
            "Kubernetes removes no finished pod after a TTL",
        ),
        (
            "queue",
            job.queue.is_some(),
            "kubeferry queues Jobs in Kueue, not bare pods",
        ),
        ("indexed", job.indexed, no_indexes),
        ("completions", job.completions.is_some(), runs_once),
        ("parallelism", job.parallelism.is_some(), runs_once),
        (
            "backoffLimitPerIndex",
            job.backoff_limit_per_index.is_some(),
            no_indexes,
        ),
        (
            "maxFailedIndexes",
            job.max_failed_indexes.is_some(),
            no_indexes,
        ),
        ("successPolicy", !job.success_policy.is_empty(), no_indexes),
    ];
    for (field, set, why) in job_only {
        if set {
            c.conflict(
                root.field(field),
                format!("is not for kind: Pod ({why}); use kind: ContainerJob, which runs a Job"),
            );
        }
    }
    c.found
}

/// Label keys that Kubernetes, the Job controller or Kueue set (where the format has a field,
/// it says which).
pub(super) fn job_reserved(key: &str) -> Result<(), String> {
    let prefix = key.rsplit_once('/').map(|(prefix, _)| prefix);
    if key == KUEUE_QUEUE_LABEL {
        return Err(format!(
            "{key:?} is set from the queue field; use queue instead"
        ));
    }
    let job_controller = prefix.is_some_and(|p| p == "batch.kubernetes.io")
        || matches!(key, "controller-uid" | "job-name");
    if job_controller {
        return Err(format!(
            "{key:?} is reserved: the Kubernetes Job controller sets it"
        ));
    }
    Ok(())
}

/// A size in bytes must be a whole number: `64m` is 0.064 bytes, almost always meant as `64Mi`.
fn whole_bytes(c: &mut Checks, path: Path, quantity: &Quantity) {
    if quantity.is_negative() {
        c.invalid(path, format!("{quantity} must not be negative"));
    } else if !quantity.is_whole() {
        let text = quantity.to_string();
        let hint = match text.strip_suffix('m') {
            Some(number) => format!("; m means thousandths, did you mean {number}Mi?"),
            None => String::new(),
        };
        c.invalid(path, format!("{text} is not a whole number of bytes{hint}"));
    }
}

fn cpu_amount(c: &mut Checks, path: Path, quantity: &Quantity) {
    if quantity.is_negative() {
        c.invalid(path, format!("{quantity} must not be negative"));
    } else if !quantity.is_whole_milli() {
        c.invalid(path, format!("{quantity} is finer than 1m (a thousandth of a CPU), which Kubernetes does not allow"));
    }
}

/// Environment variables: valid names, each once.
pub(super) fn env(c: &mut Checks, path: &Path, vars: &[EnvVar]) {
    let mut names = BTreeSet::new();
    for var in vars {
        let path = path.key(&var.name);
        c.key(path.clone(), env_name(&var.name));
        if !names.insert(var.name.as_str()) {
            c.invalid(path, "is given twice");
        }
    }
}

/// What a container runs, its fields under `path` (a container job's root, a replicated job,
/// a sidecar).
pub(super) fn process(c: &mut Checks, path: &Path, process: &Process) {
    if let Some(dir) = &process.working_dir {
        c.value(path.field("workingDir"), absolute_path(dir));
    }
    env(c, &path.field("env"), &process.env);
    c.names_list(&path.field("secrets"), &process.secrets);
    resources(c, &process.resources, path.field("resources"));
    if process.port == Some(0) {
        c.invalid(path.field("port"), "must be between 1 and 65535");
    }
}

pub(super) fn resources(c: &mut Checks, r: &Resources, path: Path) {
    let limits_path = path.field("limits");
    if let Some(cpu) = &r.cpu {
        cpu_amount(c, path.field("cpu"), cpu);
    }
    if let Some(cpu) = &r.limits.cpu {
        cpu_amount(c, limits_path.field("cpu"), cpu);
    }
    let sizes = [
        (path.field("memory"), r.memory),
        (path.field("disk"), r.disk),
        (limits_path.field("memory"), r.limits.memory),
        (limits_path.field("disk"), r.limits.disk),
    ];
    for (field, quantity) in sizes {
        if let Some(quantity) = quantity {
            whole_bytes(c, field, &quantity);
        }
    }
    let pairs = [
        ("cpu", r.cpu, r.limits.cpu),
        ("memory", r.memory, r.limits.memory),
        ("disk", r.disk, r.limits.disk),
    ];
    for (name, request, limit) in pairs {
        if let (Some(request), Some(limit)) = (request, limit)
            && limit < request
        {
            c.conflict(
                limits_path.field(name),
                format!("{limit} is below the request {request} (resources.{name})"),
            );
        }
    }
    if r.qos() == Qos::Guaranteed {
        if r.cpu.is_none() || r.memory.is_none() {
            c.conflict(
                path.field("qos"),
                "Guaranteed needs both cpu and memory (its limits are set equal to the requests)",
            );
        }
        if !r.limits.is_empty() {
            c.conflict(
                limits_path,
                "qos Guaranteed sets the limits equal to the requests; remove limits, or use qos Burstable",
            );
        }
    }
    match r.gpu {
        Some(0) => c.invalid(
            path.field("gpu"),
            "must be at least 1 (leave gpu out for none)",
        ),
        None if r.gpu_vendor.is_some() => {
            c.conflict(path.field("gpuVendor"), "is set, but gpu is not")
        }
        _ => {}
    }
    let gpu_resources: Vec<&str> = GpuVendor::NAMES
        .iter()
        .map(|(_, v)| v.resource_name())
        .collect();
    for (name, amount) in &r.extended {
        let entry = path.field("extended").key(name);
        let shape = qualified_name(name).and_then(|()| match name.split_once('/') {
            None => Err(format!(
                "{name:?} is not an extended resource name: it needs a domain, e.g. example.com/fpga (cpu, memory and disk have their own fields)"
            )),
            Some((domain, _)) if domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") => {
                Err(format!("{name:?} is in the kubernetes.io domain, which is not for extended resources"))
            }
            Some(_) if gpu_resources.contains(&name.as_str()) => Err(format!(
                "{name:?} is a GPU: use gpu (and gpuVendor) instead"
            )),
            Some(_) => Ok(()),
        });
        c.key(entry.clone(), shape);
        if amount.is_negative() || !amount.is_whole() {
            c.invalid(
                entry,
                format!("{amount} is not a whole number (extended resources are counted in units)"),
            );
        }
    }
}

fn tolerations(c: &mut Checks, job: &ContainerJob) {
    for (i, t) in job.tolerations.iter().enumerate() {
        let path = Path::root().field("tolerations").index(i);
        let exists = t.operator == Some(TolerationOperator::Exists);
        match t.key.as_deref() {
            Some(key) if !key.is_empty() => c.value(path.field("key"), qualified_name(key)),
            _ if !exists => c.conflict(path.field("key"), "is required unless operator is Exists"),
            _ => {}
        }
        match t.value.as_deref() {
            Some(value) if exists && !value.is_empty() => {
                c.conflict(path.field("value"), "must be empty when operator is Exists")
            }
            Some(value) if !exists => c.value(path.field("value"), label_value(value)),
            _ => {}
        }
        if t.toleration_seconds.is_some() && t.effect != Some(TaintEffect::NoExecute) {
            c.conflict(
                path.field("tolerationSeconds"),
                "only applies with effect NoExecute",
            );
        }
    }
}

fn volumes(c: &mut Checks, job: &ContainerJob) {
    let root = Path::root();
    // Every mount, to find two at one path.
    let mut mounts: Vec<(Path, &str)> = Vec::new();
    if let Some(tmpfs) = &job.tmpfs {
        let path = root.field("tmpfs").field("path");
        c.value(path.clone(), absolute_path(&tmpfs.path));
        if tmpfs.path == SHARED_MEMORY_PATH {
            c.conflict(
                path.clone(),
                "use sharedMemory for a memory-backed /dev/shm",
            );
        }
        mounts.push((path, &tmpfs.path));
        if let Some(size) = &tmpfs.size {
            positive_bytes(c, root.field("tmpfs").field("size"), size);
        }
    }
    if let Some(size) = &job.shared_memory {
        positive_bytes(c, root.field("sharedMemory"), size);
        mounts.push((root.field("sharedMemory"), SHARED_MEMORY_PATH));
    }
    for (claim, mount) in &job.persistent_volume_claims {
        let path = root.field("persistentVolumeClaims").key(claim);
        c.key(path.clone(), dns_subdomain(claim));
        c.value(path.clone(), absolute_path(mount));
        mounts.push((path, mount));
    }
    for (i, (path, mount)) in mounts.iter().enumerate() {
        if let Some((first, _)) = mounts[..i].iter().find(|(_, other)| other == mount) {
            c.conflict(
                path.clone(),
                format!("{mount} is already the mount path of {first}"),
            );
        }
    }
    // Files in memory-backed volumes count against the container's memory limit.
    let Some(limit) = job.process.resources.memory_limit() else {
        return;
    };
    let tmpfs_size = job.tmpfs.as_ref().and_then(|t| t.size);
    if let Some(shm) = job.shared_memory
        && shm > limit
    {
        c.conflict(
            root.field("sharedMemory"),
            format!(
                "{shm} is more than the memory limit {limit}, which files in /dev/shm count against"
            ),
        );
    }
    if let Some(size) = tmpfs_size
        && size > limit
    {
        c.conflict(
            root.field("tmpfs").field("size"),
            format!(
                "{size} is more than the memory limit {limit}, which files in tmpfs count against"
            ),
        );
    }
    if let (Some(size), Some(shm)) = (tmpfs_size, job.shared_memory)
        && size <= limit
        && shm <= limit
        && size.checked_add(&shm).is_none_or(|sum| sum > limit)
    {
        c.conflict(
            root.field("tmpfs").field("size"),
            format!("{size} and sharedMemory {shm} together are more than the memory limit {limit}, which files in both count against"),
        );
    }
}

fn positive_bytes(c: &mut Checks, path: Path, size: &Quantity) {
    if *size == Quantity::from_units(0) {
        c.invalid(path, "must be more than 0");
    } else {
        whole_bytes(c, path, size);
    }
}

fn security_context(c: &mut Checks, job: &ContainerJob) {
    let s = &job.security_context;
    let path = Path::root().field("securityContext");
    let privileged = s.privileged == Some(true);
    let non_root = s.run_as_non_root == Some(true);
    if privileged && s.allow_privilege_escalation == Some(false) {
        c.conflict(
            path.field("allowPrivilegeEscalation"),
            "cannot be false when privileged is true (a privileged container can always escalate)",
        );
    }
    if privileged && non_root {
        c.conflict(
            path.field("privileged"),
            "contradicts runAsNonRoot: a privileged container has the powers of root; choose one",
        );
    }
    if non_root && s.run_as_user == Some(0) {
        c.conflict(
            path.field("runAsUser"),
            "is 0 (root), but runAsNonRoot is true",
        );
    }
    for (name, id) in [("runAsUser", s.run_as_user), ("runAsGroup", s.run_as_group)] {
        if let Some(id) = id
            && !(0..=i64::from(i32::MAX)).contains(&id)
        {
            c.invalid(
                path.field(name),
                format!("{id} is out of range (0 to 2147483647)"),
            );
        }
    }
}

/// The most indexes (and pods at once) Kubernetes allows an Indexed Job with a per-index
/// backoff limit, and the most parallelism it allows any Indexed Job (API validation of
/// `batch/v1` Job).
const MAX_INDEXES: u32 = 100_000;
/// The most rules a success policy may have (Kubernetes API validation).
const MAX_SUCCESS_RULES: usize = 20;

/// The options of an Indexed Job: each needs `indexed` (or what it builds on), and together
/// they must agree with `completions`.
fn indexed(c: &mut Checks, job: &ContainerJob) {
    let root = Path::root();
    if !job.indexed {
        let options = [
            ("completions", job.completions.is_some()),
            ("parallelism", job.parallelism.is_some()),
            (
                "backoffLimitPerIndex",
                job.backoff_limit_per_index.is_some(),
            ),
            ("successPolicy", !job.success_policy.is_empty()),
        ];
        for (name, given) in options {
            if given {
                c.conflict(
                    root.field(name),
                    "applies to indexed jobs only; add indexed: true (kubeferry runs one pod per job otherwise)",
                );
            }
        }
    }
    let completions = match job.completions {
        None if job.indexed => {
            c.conflict(
                root.field("indexed"),
                "needs completions (how many indexes to run)",
            );
            None
        }
        Some(0) => {
            c.invalid(root.field("completions"), "must be at least 1");
            None
        }
        Some(n) if job.indexed && n > MAX_INDEXES => {
            c.invalid(
                root.field("completions"),
                format!("{n} is more than Kubernetes allows an indexed job ({MAX_INDEXES})"),
            );
            None
        }
        other => other,
    };
    match job.parallelism {
        Some(0) => c.invalid(
            root.field("parallelism"),
            "must be at least 1 (0 would never start a pod)",
        ),
        Some(n) if job.indexed && n > MAX_INDEXES => c.invalid(
            root.field("parallelism"),
            format!("{n} is more than Kubernetes allows an indexed job ({MAX_INDEXES})"),
        ),
        _ => {}
    }
    match (job.max_failed_indexes, job.backoff_limit_per_index, completions) {
        (Some(_), None, _) => c.conflict(
            root.field("maxFailedIndexes"),
            "needs backoffLimitPerIndex (indexes fail one by one only with a per-index backoff limit)",
        ),
        (Some(max), Some(_), Some(completions)) if max > completions => c.invalid(
            root.field("maxFailedIndexes"),
            format!("{max} is more than completions ({completions})"),
        ),
        _ => {}
    }
    if !job.pod_failure_policy.fail_index_on_exit_codes.is_empty()
        && job.backoff_limit_per_index.is_none()
    {
        c.conflict(
            root.field("podFailurePolicy").field("failIndexOnExitCodes"),
            "needs backoffLimitPerIndex (the FailIndex action fails one index of an indexed job)",
        );
    }
    let rules_path = root.field("successPolicy");
    if job.indexed && job.success_policy.len() > MAX_SUCCESS_RULES {
        c.invalid(
            rules_path.clone(),
            format!(
                "has {} rules, more than Kubernetes allows ({MAX_SUCCESS_RULES})",
                job.success_policy.len()
            ),
        );
    }
    for (i, rule) in job.success_policy.iter().enumerate() {
        let path = rules_path.index(i);
        if rule.succeeded_indexes.is_none() && rule.succeeded_count.is_none() {
            c.required(path.field("succeededIndexes"));
            continue;
        }
        let mut named = None;
        if let Some(text) = &rule.succeeded_indexes {
            let field = path.field("succeededIndexes");
            match crate::indexes::IndexSet::parse(text) {
                Err(message) => c.invalid(
                    field,
                    format!("{text:?} is not an interval string: {message}"),
                ),
                Ok(set) if set.is_empty() => c.invalid(field, "must name at least one index"),
                Ok(set) => {
                    if let (Some(last), Some(completions)) = (set.max(), completions)
                        && last >= completions
                    {
                        c.invalid(
                            field,
                            format!("index {last} is beyond completions ({completions}: indexes 0 to {})", completions - 1),
                        );
                    }
                    named = Some(set.len());
                }
            }
        }
        if let Some(count) = rule.succeeded_count {
            let field = path.field("succeededCount");
            if count == 0 {
                c.invalid(field, "must be at least 1");
            } else if let Some(named) = named.filter(|named| u64::from(count) > *named) {
                c.conflict(
                    field,
                    format!("{count} is more than the {named} indexes succeededIndexes names"),
                );
            } else if let Some(completions) = completions.filter(|c| count > *c) {
                c.invalid(
                    field,
                    format!("{count} is more than completions ({completions})"),
                );
            }
        }
    }
}
