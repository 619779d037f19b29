//! Job spec files: the container job and Spark job formats in YAML or JSON, rendered from a
//! template, decoded, validated and hashed. `docs/job-files.md` documents the formats.
//!
//! [`load`] is the one way in: it renders the template, parses the text, decodes it and
//! validates it, and returns every problem at once, each as `file:line:col: field: message`
//! at the place in the file as written (positions inside a parameter's value point at its
//! placeholder). A [`ContainerJobSpec`] or [`SparkJobSpec`] exists only validated, so anything
//! holding one may turn it into Kubernetes objects without further checks (I6 of
//! docs/INVARIANTS.md: bad input creates nothing); a Spark job that names no operator is checked
//! once more against the operator the caller resolves ([`SparkJobSpec::check_operator`]).

mod common;
mod decode;
mod error;
mod jobset_decode;
mod jobset_model;
mod jobset_validate;
mod model;
mod names;
pub mod quantity;
mod spark_decode;
mod spark_model;
mod spark_validate;
mod tree;
mod validate;

use std::ops::Deref;

use serde::Serialize;

pub use common::{JobMetadata, PodIdentity};
pub use decode::{CONTAINER_JOB_KIND, JOBSET_KIND, POD_KIND, SPARK_JOB_KIND};
pub use error::{Problem, ProblemKind, SpecError};
pub use jobset_model::{
    JobSetJob, JobSetSuccessPolicy, ReplicatedJob, StartupOrder, SuccessOperator,
};
pub use model::{
    CPU, ContainerJob, EPHEMERAL_STORAGE, EnvValue, EnvVar, GpuVendor, Limits, MEMORY,
    PodFailurePolicy, PodField, Process, PullPolicy, Qos, ResourceRequirements, Resources,
    SHARED_MEMORY_PATH, SecurityContext, Sidecar, SuccessPolicyRule, TaintEffect, Tmpfs,
    Toleration, TolerationOperator,
};
pub use quantity::{Quantity, QuantityError, QuantityFormat};
pub use spark_model::{
    RetainPolicy, SparkAppType, SparkJob, SparkMemory, SparkPod, SparkRestartPolicy,
};

pub use crate::template::Params;

use crate::id::JobKind;
use crate::marks::short_hash;
use crate::spark::SparkOperator;
use crate::template::{self, Rendered};
use error::{Found, Path};

/// A namespace requested for a job that names another one itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the job says {in_spec:?} but {requested:?} was requested; remove one")]
pub struct NamespaceClash {
    /// The namespace requested.
    pub requested: String,
    /// The job's own.
    pub in_spec: String,
}

/// A validated job spec, of one of the kinds kubeferry runs.
// A handful live at a time (one per submission): boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobSpec {
    /// A container job (`kind: ContainerJob`, the default).
    Container(ContainerJobSpec),
    /// A Spark application (`kind: SparkJob`).
    Spark(SparkJobSpec),
    /// A JobSet (`kind: JobSet`).
    JobSet(JobSetSpec),
    /// One bare pod (`kind: Pod`).
    Pod(PodJobSpec),
}

impl JobSpec {
    /// The job's name.
    pub fn name(&self) -> &str {
        match self {
            JobSpec::Container(spec) => &spec.name,
            JobSpec::Spark(spec) => &spec.name,
            JobSpec::JobSet(spec) => &spec.name,
            JobSpec::Pod(spec) => &spec.name,
        }
    }

    /// The namespace the file asks for, if any.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            JobSpec::Container(spec) => spec.namespace.as_deref(),
            JobSpec::Spark(spec) => spec.namespace.as_deref(),
            JobSpec::JobSet(spec) => spec.namespace.as_deref(),
            JobSpec::Pod(spec) => spec.namespace.as_deref(),
        }
    }

    /// The namespace the job goes to: the one `requested` (the command line's `-n`, a service
    /// request's `namespace`), else the job's own, else `default` (the context's, the
    /// service's first). Named both ways and differently, it is the caller's mistake to fix, as
    /// kubectl treats `-n` against a file's namespace.
    pub fn resolve_namespace(
        &self,
        requested: Option<&str>,
        default: &str,
    ) -> Result<String, NamespaceClash> {
        match (requested, self.namespace()) {
            (Some(requested), Some(in_spec)) if requested != in_spec => Err(NamespaceClash {
                requested: requested.to_string(),
                in_spec: in_spec.to_string(),
            }),
            (Some(namespace), _) | (None, Some(namespace)) => Ok(namespace.to_string()),
            (None, None) => Ok(default.to_string()),
        }
    }

    /// The kind of Kubernetes object that runs it.
    pub fn kind(&self) -> JobKind {
        match self {
            JobSpec::Container(_) => JobKind::Job,
            JobSpec::Spark(_) => JobKind::SparkApp,
            JobSpec::JobSet(_) => JobKind::JobSet,
            JobSpec::Pod(_) => JobKind::Pod,
        }
    }

    /// How much of its log the outcome record keeps ([`crate::marks::KeepLog`]).
    pub fn keep_log(&self) -> Option<crate::marks::KeepLog> {
        match self {
            JobSpec::Container(spec) => spec.metadata.keep_log,
            JobSpec::Spark(spec) => spec.keep_log,
            JobSpec::JobSet(spec) => spec.metadata.keep_log,
            JobSpec::Pod(spec) => spec.metadata.keep_log,
        }
    }

    /// The spec, keeping `default` of its log when it does not say (a service's setting). The
    /// hash stays the same: what is kept is not what runs.
    pub fn or_keep_log(&self, default: Option<crate::marks::KeepLog>) -> JobSpec {
        let mut spec = self.clone();
        let keep_log = match &mut spec {
            JobSpec::Container(spec) => &mut spec.0.metadata.keep_log,
            JobSpec::Spark(spec) => &mut spec.0.keep_log,
            JobSpec::JobSet(spec) => &mut spec.0.metadata.keep_log,
            JobSpec::Pod(spec) => &mut spec.0.metadata.keep_log,
        };
        if keep_log.is_none() {
            *keep_log = default;
        }
        spec
    }

    /// The spec hash (see [`ContainerJobSpec::hash`] and [`SparkJobSpec::hash`]).
    pub fn hash(&self) -> String {
        match self {
            JobSpec::Container(spec) => spec.hash(),
            JobSpec::Spark(spec) => spec.hash(),
            JobSpec::JobSet(spec) => spec.hash(),
            JobSpec::Pod(spec) => spec.hash(),
        }
    }
}

/// Problems found in a spec built in code: named by field, without positions.
fn unplaced(found: Vec<Found>) -> SpecError {
    let problems = found
        .into_iter()
        .map(|f| Problem {
            position: None,
            path: f.path.to_string(),
            kind: f.kind,
            message: f.message,
        })
        .collect();
    SpecError::new("", problems)
}

/// A hash of a spec's canonical JSON: 16 hex digits of SHA-256.
fn canonical_hash<T: Serialize>(kind: &'static str, spec: &T) -> String {
    #[derive(Serialize)]
    struct Canonical<'a, T> {
        kind: &'static str,
        spec: &'a T,
    }
    // Serialising plain data with string keys cannot fail.
    let json = serde_json::to_string(&Canonical { kind, spec }).unwrap_or_default();
    short_hash(&json, 16)
}

/// A container job that passed validation. Read its fields through [`Deref`] to
/// [`ContainerJob`]; it cannot be changed, only rebuilt through [`ContainerJobSpec::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerJobSpec(ContainerJob);

impl ContainerJobSpec {
    /// Validates a job built in code. Problems name fields but have no position.
    pub fn new(job: ContainerJob) -> Result<Self, SpecError> {
        let found = validate::container_job(&job);
        if found.is_empty() {
            return Ok(Self(job));
        }
        Err(unplaced(found))
    }

    /// The spec's data.
    pub fn into_inner(self) -> ContainerJob {
        self.0
    }

    /// A hash of what the spec asks for, for the `kubeferry.dev/spec-hash` annotation: the
    /// same whatever the key order, formatting, comments, quantity spelling (`1000m` is `1`)
    /// or template that produced it. Env order counts: Kubernetes expands `$(NAME)` only from
    /// earlier entries. 16 hex digits of SHA-256 of the canonical JSON.
    pub fn hash(&self) -> String {
        canonical_hash(CONTAINER_JOB_KIND, &self.0)
    }
}

impl Deref for ContainerJobSpec {
    type Target = ContainerJob;

    fn deref(&self) -> &ContainerJob {
        &self.0
    }
}

/// A Spark job that passed validation. Read its fields through [`Deref`] to [`SparkJob`]; it
/// cannot be changed, only rebuilt through [`SparkJobSpec::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparkJobSpec(SparkJob);

impl SparkJobSpec {
    /// Validates a job built in code. Problems name fields but have no position.
    pub fn new(job: SparkJob) -> Result<Self, SpecError> {
        let found = spark_validate::spark_job(&job);
        if found.is_empty() {
            return Ok(Self(job));
        }
        Err(unplaced(found))
    }

    /// The spec's data.
    pub fn into_inner(self) -> SparkJob {
        self.0
    }

    /// The operator that runs the job: the one the file names, else `default` (the cluster's
    /// configured operator).
    pub fn operator_or(&self, default: SparkOperator) -> SparkOperator {
        self.0.operator.unwrap_or(default)
    }

    /// Checks that `operator` can honour every field the job sets. Call it with the resolved
    /// operator before creating anything: a file that names no operator was validated without
    /// one (a file that names one was checked against it when loaded).
    pub fn check_operator(&self, operator: SparkOperator) -> Result<(), SpecError> {
        let found = spark_validate::operator_support(&self.0, operator);
        if found.is_empty() {
            return Ok(());
        }
        Err(unplaced(found))
    }

    /// A hash of what the spec asks for, for the `kubeferry.dev/spec-hash` annotation, with
    /// the same guarantees as [`ContainerJobSpec::hash`] (memory spelling, `2048m` is `2g`,
    /// and duration spelling do not count; list order does).
    pub fn hash(&self) -> String {
        canonical_hash(SPARK_JOB_KIND, &self.0)
    }
}

impl Deref for SparkJobSpec {
    type Target = SparkJob;

    fn deref(&self) -> &SparkJob {
        &self.0
    }
}

/// A JobSet that passed validation. Read its fields through [`Deref`] to [`JobSetJob`]; it
/// cannot be changed, only rebuilt through [`JobSetSpec::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSetSpec(JobSetJob);

impl JobSetSpec {
    /// Validates a JobSet built in code. Problems name fields but have no position.
    pub fn new(job: JobSetJob) -> Result<Self, SpecError> {
        let found = jobset_validate::jobset_job(&job);
        if found.is_empty() {
            return Ok(Self(job));
        }
        Err(unplaced(found))
    }

    /// The spec's data.
    pub fn into_inner(self) -> JobSetJob {
        self.0
    }

    /// A hash of what the spec asks for, for the `kubeferry.dev/spec-hash` annotation, with
    /// the same guarantees as [`ContainerJobSpec::hash`] (the order of the replicated jobs
    /// counts: it is their startup order).
    pub fn hash(&self) -> String {
        canonical_hash(JOBSET_KIND, &self.0)
    }
}

impl Deref for JobSetSpec {
    type Target = JobSetJob;

    fn deref(&self) -> &JobSetJob {
        &self.0
    }
}

/// A bare pod's job (`kind: Pod`) that passed validation: a container job's fields, none of
/// those only a Job honours. Read its fields through [`Deref`] to [`ContainerJob`]; it cannot
/// be changed, only rebuilt through [`PodJobSpec::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodJobSpec(ContainerJob);

impl PodJobSpec {
    /// Validates a pod's job built in code. Problems name fields but have no position.
    pub fn new(job: ContainerJob) -> Result<Self, SpecError> {
        let found = validate::pod_job(&job);
        if found.is_empty() {
            return Ok(Self(job));
        }
        Err(unplaced(found))
    }

    /// The spec's data.
    pub fn into_inner(self) -> ContainerJob {
        self.0
    }

    /// The container job of the same fields (valid: a pod's checks include a container
    /// job's), whose pod template is the pod's.
    pub fn as_container_job(&self) -> ContainerJobSpec {
        ContainerJobSpec(self.0.clone())
    }

    /// A hash of what the spec asks for, with the same guarantees as
    /// [`ContainerJobSpec::hash`]; never a container job's hash of the same fields.
    pub fn hash(&self) -> String {
        canonical_hash(POD_KIND, &self.0)
    }
}

impl Deref for PodJobSpec {
    type Target = ContainerJob;

    fn deref(&self) -> &ContainerJob {
        &self.0
    }
}

/// Loads a job file: renders `text` as a template with `params`, parses it (as strict JSON
/// first when `source_name` ends in `.json`, then as YAML), decodes and validates it.
///
/// `source_name` names the file in errors (e.g. `hello.yaml`, or `<stdin>`).
pub fn load(source_name: &str, text: &str, params: &Params) -> Result<JobSpec, SpecError> {
    let rendered = template::render(text, params)
        .map_err(|error| SpecError::from_template(source_name, error))?;
    let locator = Locator {
        source_name,
        rendered: &rendered,
    };
    let json = source_name.to_ascii_lowercase().ends_with(".json");
    let root = match tree::parse(rendered.text(), json) {
        Ok(Some(root)) => root,
        Ok(None) => {
            let problem = Problem {
                position: Some(rendered.position(0)),
                path: String::new(),
                kind: ProblemKind::Syntax,
                message: "the file holds no job spec (it is empty)".into(),
            };
            return Err(SpecError::new(source_name, vec![problem]));
        }
        Err(error) => {
            let mut message = error.message;
            if let Some(earlier) = error.earlier {
                message.push_str(&format!(" (first at {})", rendered.position(earlier)));
            }
            let found = Found {
                offset: Some(error.offset),
                path: Path::root(),
                at_key: false,
                kind: ProblemKind::Syntax,
                message,
            };
            return Err(locator.error(vec![found], &decode::Decoder::default()));
        }
    };
    let mut decoder = decode::Decoder::default();
    let job = decoder.job(&root);
    let mut found = std::mem::take(&mut decoder.found);
    let Some(job) = job else {
        if found.is_empty() {
            // The decoder reports a problem whenever it returns nothing; this is a safety net.
            found.push(Found::at(
                Path::root(),
                ProblemKind::Type,
                "the file is not a job spec",
            ));
        }
        return Err(locator.error(found, &decoder));
    };
    if !found.is_empty() {
        // Every problem at once: what validation finds in the fields that did decode (a name
        // that is no DNS label next to a bad quantity), not what it would say of the fields
        // already reported, which were left out or empty.
        let validated = match &job {
            decode::Decoded::Container(job) => validate::container_job(job),
            decode::Decoded::Spark(job) => spark_validate::spark_job(job),
            decode::Decoded::JobSet(job) => jobset_validate::jobset_job(job),
            decode::Decoded::Pod(job) => validate::pod_job(job),
        };
        let explained: Vec<&Path> = found
            .iter()
            .filter(|f| f.kind != ProblemKind::UnknownField)
            .map(|f| &f.path)
            .chain(&decoder.suggested)
            .collect();
        let more: Vec<Found> = validated
            .into_iter()
            .filter(|v| {
                !explained
                    .iter()
                    .any(|path| v.path.is_within(path) || path.is_within(&v.path))
            })
            .collect();
        found.extend(more);
        return Err(locator.error(found, &decoder));
    }
    let (found, spec) = match job {
        decode::Decoded::Container(job) => (
            validate::container_job(&job),
            JobSpec::Container(ContainerJobSpec(job)),
        ),
        decode::Decoded::Spark(job) => (
            spark_validate::spark_job(&job),
            JobSpec::Spark(SparkJobSpec(job)),
        ),
        decode::Decoded::JobSet(job) => (
            jobset_validate::jobset_job(&job),
            JobSpec::JobSet(JobSetSpec(job)),
        ),
        decode::Decoded::Pod(job) => (validate::pod_job(&job), JobSpec::Pod(PodJobSpec(job))),
    };
    if !found.is_empty() {
        return Err(locator.error(found, &decoder));
    }
    Ok(spec)
}

/// Gives problems their position in the file as written.
struct Locator<'a> {
    source_name: &'a str,
    rendered: &'a Rendered,
}

impl Locator<'_> {
    fn error(&self, found: Vec<Found>, decoder: &decode::Decoder) -> SpecError {
        let problems = found
            .into_iter()
            .map(|f| {
                let offset = f.offset.or_else(|| offset_of(decoder, &f.path, f.at_key));
                let mut message = f.message;
                if let Some(parameter) = offset.and_then(|o| self.rendered.origin(o).parameter) {
                    message.push_str(&format!(" (from parameter `{parameter}`)"));
                }
                Problem {
                    position: offset.map(|o| self.rendered.position(o)),
                    path: f.path.to_string(),
                    kind: f.kind,
                    message,
                }
            })
            .collect();
        SpecError::new(self.source_name, problems)
    }
}

/// Where the field at `path` was written; for a field that was not (a missing one), where
/// the nearest enclosing field was.
fn offset_of(decoder: &decode::Decoder, path: &Path, at_key: bool) -> Option<usize> {
    let table = if at_key {
        &decoder.keys
    } else {
        &decoder.values
    };
    if let Some(offset) = table.get(path) {
        return Some(*offset);
    }
    let mut current = path.parent();
    while let Some(path) = current {
        if let Some(offset) = decoder.values.get(&path) {
            return Some(*offset);
        }
        current = path.parent();
    }
    None
}

#[cfg(test)]
mod jobset_tests;
#[cfg(test)]
mod spark_tests;
#[cfg(test)]
mod tests;
