//! Decoding the document tree into the spec types: types, unknown fields (with a suggestion)
//! and missing fields, all reported at once, each at its place; and a table of where every
//! field was written, so that later validation can point at it too.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::error::{Found, Path, ProblemKind};
use super::jobset_model::JobSetJob;
use super::model::{
    ContainerJob, EnvValue, EnvVar, GpuVendor, Limits, PodFailurePolicy, PodField, Process, Qos,
    Resources, SecurityContext, Sidecar, SuccessPolicyRule, TaintEffect, Tmpfs, Toleration,
    TolerationOperator,
};
use super::quantity::Quantity;
use super::spark_model::SparkJob;
use super::tree::{Node, Value};

/// The `kind` of a container job file.
pub const CONTAINER_JOB_KIND: &str = "ContainerJob";
/// The `kind` of a Spark job file.
pub const SPARK_JOB_KIND: &str = "SparkJob";
/// The `kind` of a JobSet file.
pub const JOBSET_KIND: &str = "JobSet";
/// The `kind` of a bare pod's job file: one pod that runs once.
pub const POD_KIND: &str = "Pod";

const CONTAINER_FIELDS: &[&str] = &join::<36>(&[
    &[
        "kind",
        "name",
        "namespace",
        "image",
        "imagePullPolicy",
        "imagePullSecrets",
        "serviceAccount",
    ],
    &PROCESS_FIELDS,
    &[
        "timeout",
        "retries",
        "podFailurePolicy",
        "ttlAfterFinished",
        "queue",
        "priorityClass",
        "nodeSelector",
        "tolerations",
        "labels",
        "annotations",
        "keepLog",
        "tmpfs",
        "sharedMemory",
        "persistentVolumeClaims",
        "securityContext",
        "sidecars",
        "indexed",
        "completions",
        "parallelism",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "successPolicy",
    ],
]);
const SUCCESS_RULE_FIELDS: &[&str] = &["succeededIndexes", "succeededCount"];
const SIDECAR_FIELDS: &[&str] = &[
    "name",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "resources",
    "ports",
];
const RESOURCE_FIELDS: &[&str] = &[
    "cpu",
    "memory",
    "disk",
    "gpu",
    "gpuVendor",
    "extended",
    "qos",
    "limits",
];
const LIMIT_FIELDS: &[&str] = &["cpu", "memory", "disk"];
const TOLERATION_FIELDS: &[&str] = &["key", "operator", "value", "effect", "tolerationSeconds"];
const TMPFS_FIELDS: &[&str] = &["path", "size"];
const FAILURE_POLICY_FIELDS: &[&str] = &[
    "failOnExitCodes",
    "ignoreDisruptions",
    "failIndexOnExitCodes",
];
const SECURITY_FIELDS: &[&str] = &[
    "privileged",
    "allowPrivilegeEscalation",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
];
const ENV_FIELD_FIELDS: &[&str] = &["field"];

/// Names from Kubernetes manifests (and misplaced fields) that users reach for, and what
/// this format calls them, by where they are written.
const HINTS: Hints = &[
    ("", PROCESS_HINTS),
    (
        "",
        &[
            ("activeDeadlineSeconds", "timeout"),
            ("backoffLimit", "retries"),
            ("completionMode", "indexed"),
            ("ttlSecondsAfterFinished", "ttlAfterFinished"),
            ("serviceAccountName", "serviceAccount"),
            ("priorityClassName", "priorityClass"),
            ("envFrom", "secrets"),
            ("volumes", "persistentVolumeClaims"),
            ("pvcs", "persistentVolumeClaims"),
            ("shm", "sharedMemory"),
            ("disk", "resources.disk"),
            ("qos", "resources.qos"),
            ("limits", "resources.limits"),
            ("requests", "resources (requests go directly under it)"),
        ],
    ),
    (
        "resources",
        &[
            ("requests", "cpu, memory and disk directly under resources"),
            ("ephemeral-storage", "disk"),
            ("ephemeralStorage", "disk"),
        ],
    ),
];

/// The kinds of job file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobFileKind {
    Container,
    Spark,
    JobSet,
    Pod,
}

/// The kinds of job file, by their `kind`.
const KINDS: &[(&str, JobFileKind)] = &[
    (CONTAINER_JOB_KIND, JobFileKind::Container),
    (SPARK_JOB_KIND, JobFileKind::Spark),
    (JOBSET_KIND, JobFileKind::JobSet),
    (POD_KIND, JobFileKind::Pod),
];

/// A decoded job file, of either kind.
// One per loaded file, moved once: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decoded {
    /// `kind: ContainerJob`.
    Container(ContainerJob),
    /// `kind: SparkJob`.
    Spark(SparkJob),
    /// `kind: JobSet`.
    JobSet(JobSetJob),
    /// `kind: Pod`: a container job's fields, run as one bare pod.
    Pod(ContainerJob),
}

/// A suggestion for an unknown field: (name, what to write instead).
pub(super) type Hint = (&'static str, &'static str);

/// A kind's suggestions for unknown fields, by the place they are written at.
pub(super) type Hints = &'static [(&'static str, &'static [Hint])];

/// The fields of a [`Process`] in job files, in the order every object that has one lists them.
pub(super) const PROCESS_FIELDS: [&str; 7] = [
    "command",
    "args",
    "workingDir",
    "env",
    "secrets",
    "resources",
    "port",
];

/// One object's field names from the lists of its parts, in order; `N` is their total (a
/// wrong one does not compile).
pub(super) const fn join<const N: usize>(lists: &[&[&'static str]]) -> [&'static str; N] {
    let mut joined = [""; N];
    let mut at = 0;
    let mut list = 0;
    while list < lists.len() {
        let mut i = 0;
        while i < lists[list].len() {
            joined[at] = lists[list][i];
            at += 1;
            i += 1;
        }
        list += 1;
    }
    assert!(at == N, "N is not the total of the lists");
    joined
}

/// Names users reach for instead of the fields of a [`Process`], wherever one is read.
pub(super) const PROCESS_HINTS: &[Hint] = &[
    ("entrypoint", "command"),
    ("arguments", "args"),
    ("cpu", "resources.cpu"),
    ("memory", "resources.memory"),
    ("gpu", "resources.gpu"),
];

/// Walks the tree, collecting problems and where each field was written.
#[derive(Debug)]
pub(crate) struct Decoder {
    pub(crate) found: Vec<Found>,
    /// Byte offset of each value, by path.
    pub(crate) values: HashMap<Path, usize>,
    /// Byte offset of the key of each map entry, by path.
    pub(crate) keys: HashMap<Path, usize>,
    /// Suggestions for unknown fields of the kind of file being read.
    pub(super) hints: Hints,
    /// The known fields an unknown one was taken for (`comand` for `command`): what
    /// validation would say of them is explained already.
    pub(crate) suggested: Vec<Path>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            found: Vec::new(),
            values: HashMap::new(),
            keys: HashMap::new(),
            hints: HINTS,
            suggested: Vec::new(),
        }
    }
}

/// The known fields of one object, as found.
pub(crate) struct Fields<'n> {
    pub(super) path: Path,
    offset: usize,
    given: HashMap<&'static str, &'n Node>,
    key_offsets: HashMap<&'static str, usize>,
    /// Fields suggested for unknown keys: their absence is already explained.
    suggested: Vec<&'static str>,
}

impl Fields<'_> {
    /// A field's value; `None` when absent or null (null means "not given").
    pub(super) fn get(&self, name: &'static str) -> Option<&Node> {
        self.given.get(name).copied().filter(|node| !is_null(node))
    }
}

pub(super) fn is_null(node: &Node) -> bool {
    matches!(&node.value, Value::Scalar(s) if s.is_null())
}

impl Decoder {
    pub(super) fn problem(
        &mut self,
        offset: usize,
        path: &Path,
        kind: ProblemKind,
        message: impl Into<String>,
    ) {
        self.found.push(Found {
            offset: Some(offset),
            path: path.clone(),
            at_key: false,
            kind,
            message: message.into(),
        });
    }

    pub(super) fn type_error(&mut self, node: &Node, path: &Path, expected: &str) {
        let message = format!("expected {expected}, found {}", node.describe());
        self.problem(node.offset, path, ProblemKind::Type, message);
    }

    /// The known fields of the object at `path`; unknown ones are reported.
    pub(super) fn fields<'n>(
        &mut self,
        node: &'n Node,
        path: &Path,
        known: &'static [&'static str],
    ) -> Option<Fields<'n>> {
        self.values.insert(path.clone(), node.offset);
        let Value::Map(entries) = &node.value else {
            let expected = format!("a mapping with the fields {}", known.join(", "));
            self.type_error(node, path, &expected);
            return None;
        };
        let mut given = HashMap::new();
        let mut key_offsets = HashMap::new();
        let mut suggested = Vec::new();
        for entry in entries {
            match known.iter().find(|k| **k == entry.key) {
                Some(name) => {
                    let field_path = path.field(name);
                    self.keys.insert(field_path.clone(), entry.key_offset);
                    self.values.insert(field_path, entry.value.offset);
                    given.insert(*name, &entry.value);
                    key_offsets.insert(*name, entry.key_offset);
                }
                None => {
                    let (message, suggestion) = unknown_field(self.hints, path, &entry.key, known);
                    suggested.extend(suggestion);
                    self.suggested
                        .extend(suggestion.map(|suggestion| path.field(suggestion)));
                    self.problem(entry.key_offset, path, ProblemKind::UnknownField, message);
                }
            }
        }
        Some(Fields {
            path: path.clone(),
            offset: node.offset,
            given,
            key_offsets,
            suggested,
        })
    }

    pub(super) fn optional<T>(
        &mut self,
        fields: &Fields<'_>,
        name: &'static str,
        decode: impl FnOnce(&mut Self, &Node, &Path) -> Option<T>,
    ) -> Option<T> {
        let node = fields.get(name)?;
        decode(self, node, &fields.path.field(name))
    }

    pub(super) fn required<T>(
        &mut self,
        fields: &Fields<'_>,
        name: &'static str,
        decode: impl FnOnce(&mut Self, &Node, &Path) -> Option<T>,
    ) -> Option<T> {
        if fields.get(name).is_none() {
            if fields.suggested.contains(&name) {
                return None;
            }
            let path = fields.path.field(name);
            // Given as null: point at its key; not given: at the object that lacks it.
            let offset = fields
                .key_offsets
                .get(name)
                .copied()
                .unwrap_or(fields.offset);
            self.problem(offset, &path, ProblemKind::MissingField, "is required");
            return None;
        }
        self.optional(fields, name, decode)
    }

    pub(super) fn scalar<'n>(
        &mut self,
        node: &'n Node,
        path: &Path,
        expected: &str,
    ) -> Option<&'n str> {
        match &node.value {
            Value::Scalar(s) if !s.is_null() => Some(&s.text),
            _ => {
                self.type_error(node, path, expected);
                None
            }
        }
    }

    pub(super) fn string(&mut self, node: &Node, path: &Path) -> Option<String> {
        self.scalar(node, path, "a string").map(str::to_string)
    }

    pub(super) fn strings(&mut self, node: &Node, path: &Path) -> Option<Vec<String>> {
        self.list(node, path, "a list of strings", |d, n, p| {
            d.scalar(n, p, "a string").map(str::to_string)
        })
    }

    /// A list whose items `decode` reads; `None` when any item is wrong (each is reported).
    fn list<T>(
        &mut self,
        node: &Node,
        path: &Path,
        expected: &str,
        mut decode: impl FnMut(&mut Self, &Node, &Path) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Value::Seq(items) = &node.value else {
            self.type_error(node, path, expected);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let item_path = path.index(i);
            self.values.insert(item_path.clone(), item.offset);
            match decode(self, item, &item_path) {
                Some(value) => out.push(value),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A user-keyed map whose values `decode` reads.
    pub(super) fn map<T>(
        &mut self,
        node: &Node,
        path: &Path,
        expected: &str,
        mut decode: impl FnMut(&mut Self, &Node, &Path) -> Option<T>,
    ) -> Option<Vec<(String, T)>> {
        let Value::Map(entries) = &node.value else {
            self.type_error(node, path, expected);
            return None;
        };
        let mut out = Vec::with_capacity(entries.len());
        let mut ok = true;
        for entry in entries {
            let entry_path = path.key(&entry.key);
            self.keys.insert(entry_path.clone(), entry.key_offset);
            self.values.insert(entry_path.clone(), entry.value.offset);
            match decode(self, &entry.value, &entry_path) {
                Some(value) => out.push((entry.key.clone(), value)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A list of objects with the fields `known`, each read by `decode`; an item that is not
    /// such an object is reported and left out, as its field errors are.
    pub(super) fn objects<T>(
        &mut self,
        node: &Node,
        path: &Path,
        expected: &str,
        known: &'static [&'static str],
        mut decode: impl FnMut(&mut Self, &Fields<'_>) -> T,
    ) -> Option<Vec<T>> {
        let Value::Seq(items) = &node.value else {
            self.type_error(node, path, expected);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(f) = self.fields(item, &path.index(i), known) {
                out.push(decode(self, &f));
            }
        }
        Some(out)
    }

    pub(super) fn string_map(
        &mut self,
        node: &Node,
        path: &Path,
    ) -> Option<BTreeMap<String, String>> {
        let entries = self.map(node, path, "a mapping of strings to strings", |d, n, p| {
            d.scalar(n, p, "a string").map(str::to_string)
        })?;
        Some(entries.into_iter().collect())
    }

    pub(super) fn quantity(&mut self, node: &Node, path: &Path) -> Option<Quantity> {
        let text = self.scalar(node, path, "a quantity such as 500m, 2 or 1Gi")?;
        match text.parse() {
            Ok(quantity) => Some(quantity),
            Err(error) => {
                self.problem(node.offset, path, ProblemKind::Value, error.to_string());
                None
            }
        }
    }

    pub(super) fn integer(&mut self, node: &Node, path: &Path, min: i64, max: i64) -> Option<i64> {
        let text = self.scalar(node, path, "a whole number")?;
        match text.parse::<i64>().ok() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(_) => {
                let message = format!("{text} is out of range ({min} to {max})");
                self.problem(node.offset, path, ProblemKind::Value, message);
                None
            }
            None => {
                self.type_error(node, path, "a whole number");
                None
            }
        }
    }

    fn integers(&mut self, node: &Node, path: &Path, min: i64, max: i64) -> Option<Vec<i64>> {
        self.list(node, path, "a list of whole numbers", |d, n, p| {
            d.integer(n, p, min, max)
        })
    }

    pub(super) fn boolean(&mut self, node: &Node, path: &Path) -> Option<bool> {
        match self.scalar(node, path, "true or false")? {
            "true" | "True" | "TRUE" => Some(true),
            "false" | "False" | "FALSE" => Some(false),
            _ => {
                self.type_error(node, path, "true or false");
                None
            }
        }
    }

    pub(super) fn duration(&mut self, node: &Node, path: &Path) -> Option<Duration> {
        let text = self.scalar(node, path, "a duration such as 90s, 10m or 1h30m")?;
        match parse_duration(text) {
            Ok(duration) => Some(duration),
            Err(message) => {
                self.problem(node.offset, path, ProblemKind::Value, message);
                None
            }
        }
    }

    pub(super) fn choice<T: Copy>(
        &mut self,
        node: &Node,
        path: &Path,
        names: &[(&'static str, T)],
    ) -> Option<T> {
        let all: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
        let expected = format!("one of {}", all.join(", "));
        let text = self.scalar(node, path, &expected)?;
        if let Some((_, value)) = names.iter().find(|(name, _)| *name == text) {
            return Some(*value);
        }
        let mut message = format!("{text:?} is not {expected}");
        if let Some(suggestion) = suggest(text, &all) {
            message.push_str(&format!("; did you mean {suggestion}?"));
        }
        self.problem(node.offset, path, ProblemKind::Value, message);
        None
    }

    /// Reads a job file's root object, of the kind its `kind` field names (a container job when
    /// it names none, or one this version does not know). `None` when nothing usable was found
    /// (problems say why).
    pub(crate) fn job(&mut self, root: &Node) -> Option<Decoded> {
        let path = Path::root();
        let Value::Map(entries) = &root.value else {
            let message = format!(
                "a job file is a mapping of fields, found {}",
                root.describe()
            );
            self.problem(root.offset, &path, ProblemKind::Type, message);
            return None;
        };
        let kind = match entries
            .iter()
            .find(|entry| entry.key == "kind")
            .filter(|entry| !is_null(&entry.value))
        {
            // A kind this version does not know: its problem explains the file; the fields of
            // a kind it was not meant to be would only add noise.
            Some(entry) => self.choice(&entry.value, &path.field("kind"), KINDS)?,
            None => JobFileKind::Container,
        };
        match kind {
            JobFileKind::Spark => self.spark_job(root).map(Decoded::Spark),
            JobFileKind::JobSet => self.jobset_job(root).map(Decoded::JobSet),
            JobFileKind::Container => self.container_job(root).map(Decoded::Container),
            JobFileKind::Pod => self.container_job(root).map(Decoded::Pod),
        }
    }

    /// Reads a container job's root object (its `kind` was read by [`Decoder::job`]).
    fn container_job(&mut self, root: &Node) -> Option<ContainerJob> {
        let path = Path::root();
        let f = self.fields(root, &path, CONTAINER_FIELDS)?;
        let (name, namespace) = self.identity(&f);
        let (image, image_pull_policy) = self.image_fields(&f);
        let pod_identity = self.pod_identity(&f);
        let metadata = self.metadata(&f);
        let job = ContainerJob {
            name,
            namespace,
            image,
            image_pull_policy,
            pod_identity,
            process: self.process(&f),
            timeout: self.optional(&f, "timeout", Self::duration),
            retries: self.retries(&f),
            pod_failure_policy: self
                .optional(&f, "podFailurePolicy", Self::pod_failure_policy)
                .unwrap_or_default(),
            ttl_after_finished: self.optional(&f, "ttlAfterFinished", Self::duration),
            queue: self.optional(&f, "queue", Self::string),
            priority_class: self.optional(&f, "priorityClass", Self::string),
            node_selector: self
                .optional(&f, "nodeSelector", Self::string_map)
                .unwrap_or_default(),
            tolerations: self
                .optional(&f, "tolerations", Self::tolerations)
                .unwrap_or_default(),
            metadata,
            tmpfs: self.optional(&f, "tmpfs", Self::tmpfs),
            shared_memory: self.optional(&f, "sharedMemory", Self::quantity),
            persistent_volume_claims: self
                .optional(&f, "persistentVolumeClaims", Self::string_map)
                .unwrap_or_default(),
            security_context: self
                .optional(&f, "securityContext", Self::security_context)
                .unwrap_or_default(),
            sidecars: self
                .optional(&f, "sidecars", Self::sidecars)
                .unwrap_or_default(),
            indexed: self.optional(&f, "indexed", Self::boolean).unwrap_or(false),
            completions: self.optional(&f, "completions", Self::count),
            parallelism: self.optional(&f, "parallelism", Self::count),
            backoff_limit_per_index: self.optional(&f, "backoffLimitPerIndex", Self::count),
            max_failed_indexes: self.optional(&f, "maxFailedIndexes", Self::count),
            success_policy: self
                .optional(&f, "successPolicy", Self::success_policy)
                .unwrap_or_default(),
        };
        Some(job)
    }

    /// What the main container runs: the fields a container job and a replicated job share.
    pub(super) fn process(&mut self, f: &Fields<'_>) -> Process {
        Process {
            command: self
                .optional(f, "command", Self::strings)
                .unwrap_or_default(),
            args: self.optional(f, "args", Self::strings).unwrap_or_default(),
            working_dir: self.optional(f, "workingDir", Self::string),
            env: self.optional(f, "env", Self::env).unwrap_or_default(),
            secrets: self
                .optional(f, "secrets", Self::strings)
                .unwrap_or_default(),
            resources: self
                .optional(f, "resources", Self::resources)
                .unwrap_or_default(),
            port: self
                .optional(f, "port", |d, n, p| d.integer(n, p, 1, 65535))
                .and_then(|n| u16::try_from(n).ok()),
        }
    }

    /// A count Kubernetes keeps in an int32: 0 to 2^31-1.
    pub(super) fn count(&mut self, node: &Node, path: &Path) -> Option<u32> {
        self.integer(node, path, 0, i64::from(i32::MAX))
            .and_then(|n| u32::try_from(n).ok())
    }

    fn success_policy(&mut self, node: &Node, path: &Path) -> Option<Vec<SuccessPolicyRule>> {
        self.objects(
            node,
            path,
            "a list of rules ({succeededIndexes, succeededCount})",
            SUCCESS_RULE_FIELDS,
            |d, f| SuccessPolicyRule {
                succeeded_indexes: d.optional(f, "succeededIndexes", Self::string),
                succeeded_count: d.optional(f, "succeededCount", Self::count),
            },
        )
    }

    fn sidecars(&mut self, node: &Node, path: &Path) -> Option<Vec<Sidecar>> {
        self.objects(
            node,
            path,
            "a list of containers",
            SIDECAR_FIELDS,
            |d, f| {
                let name = d.required(f, "name", Self::string).unwrap_or_default();
                let (image, image_pull_policy) = d.image_fields(f);
                Sidecar {
                    name,
                    image,
                    image_pull_policy,
                    // Of the process fields, a sidecar's file gives only what SIDECAR_FIELDS
                    // lists.
                    process: d.process(f),
                    ports: d
                        .optional(f, "ports", |d, n, p| d.integers(n, p, 1, 65535))
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|port| u16::try_from(port).ok())
                        .collect(),
                }
            },
        )
    }

    pub(super) fn env(&mut self, node: &Node, path: &Path) -> Option<Vec<EnvVar>> {
        let expected = "a mapping of variable names to values";
        let entries = self.map(node, path, expected, |d, n, p| match &n.value {
            Value::Map(_) => {
                let f = d.fields(n, p, ENV_FIELD_FIELDS)?;
                let field = d.required(&f, "field", |d, n, p| d.choice(n, p, &PodField::NAMES))?;
                Some(EnvValue::Field { field })
            }
            _ => d
                .scalar(n, p, "a string or {field: podName|namespace|...}")
                .map(|s| EnvValue::Literal(s.to_string())),
        })?;
        Some(
            entries
                .into_iter()
                .map(|(name, value)| EnvVar { name, value })
                .collect(),
        )
    }

    pub(super) fn resources(&mut self, node: &Node, path: &Path) -> Option<Resources> {
        let f = self.fields(node, path, RESOURCE_FIELDS)?;
        Some(Resources {
            cpu: self.optional(&f, "cpu", Self::quantity),
            memory: self.optional(&f, "memory", Self::quantity),
            disk: self.optional(&f, "disk", Self::quantity),
            gpu: self
                .optional(&f, "gpu", |d, n, p| d.integer(n, p, 0, i64::from(u32::MAX)))
                .and_then(|n| u32::try_from(n).ok()),
            gpu_vendor: self.optional(&f, "gpuVendor", |d, n, p| d.choice(n, p, &GpuVendor::NAMES)),
            extended: self
                .optional(&f, "extended", |d, n, p| {
                    d.map(
                        n,
                        p,
                        "a mapping of resource names to quantities",
                        Self::quantity,
                    )
                })
                .map(|entries| entries.into_iter().collect())
                .unwrap_or_default(),
            qos: self.optional(&f, "qos", |d, n, p| d.choice(n, p, &Qos::NAMES)),
            limits: self
                .optional(&f, "limits", Self::limits)
                .unwrap_or_default(),
        })
    }

    fn limits(&mut self, node: &Node, path: &Path) -> Option<Limits> {
        let f = self.fields(node, path, LIMIT_FIELDS)?;
        Some(Limits {
            cpu: self.optional(&f, "cpu", Self::quantity),
            memory: self.optional(&f, "memory", Self::quantity),
            disk: self.optional(&f, "disk", Self::quantity),
        })
    }

    fn pod_failure_policy(&mut self, node: &Node, path: &Path) -> Option<PodFailurePolicy> {
        let f = self.fields(node, path, FAILURE_POLICY_FIELDS)?;
        let codes = self
            .optional(&f, "failOnExitCodes", |d, n, p| d.integers(n, p, 1, 255))
            .unwrap_or_default();
        Some(PodFailurePolicy {
            fail_on_exit_codes: codes
                .into_iter()
                .filter_map(|c| i32::try_from(c).ok())
                .collect(),
            ignore_disruptions: self
                .optional(&f, "ignoreDisruptions", Self::boolean)
                .unwrap_or(false),
            fail_index_on_exit_codes: self
                .optional(&f, "failIndexOnExitCodes", |d, n, p| {
                    d.integers(n, p, 1, 255)
                })
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| i32::try_from(c).ok())
                .collect(),
        })
    }

    fn tolerations(&mut self, node: &Node, path: &Path) -> Option<Vec<Toleration>> {
        self.objects(
            node,
            path,
            "a list of tolerations",
            TOLERATION_FIELDS,
            |d, f| Toleration {
                key: d.optional(f, "key", Self::string),
                operator: d.optional(f, "operator", |d, n, p| {
                    d.choice(n, p, &TolerationOperator::NAMES)
                }),
                value: d.optional(f, "value", Self::string),
                effect: d.optional(f, "effect", |d, n, p| d.choice(n, p, &TaintEffect::NAMES)),
                toleration_seconds: d.optional(f, "tolerationSeconds", |d, n, p| {
                    d.integer(n, p, i64::MIN, i64::MAX)
                }),
            },
        )
    }

    fn tmpfs(&mut self, node: &Node, path: &Path) -> Option<Tmpfs> {
        let f = self.fields(node, path, TMPFS_FIELDS)?;
        Some(Tmpfs {
            path: self.required(&f, "path", Self::string)?,
            size: self.optional(&f, "size", Self::quantity),
        })
    }

    fn security_context(&mut self, node: &Node, path: &Path) -> Option<SecurityContext> {
        let f = self.fields(node, path, SECURITY_FIELDS)?;
        let id = |d: &mut Self, n: &Node, p: &Path| d.integer(n, p, 0, i64::from(i32::MAX));
        Some(SecurityContext {
            privileged: self.optional(&f, "privileged", Self::boolean),
            allow_privilege_escalation: self.optional(
                &f,
                "allowPrivilegeEscalation",
                Self::boolean,
            ),
            run_as_user: self.optional(&f, "runAsUser", id),
            run_as_group: self.optional(&f, "runAsGroup", id),
            run_as_non_root: self.optional(&f, "runAsNonRoot", Self::boolean),
        })
    }
}

/// The message for an unknown field, and the known field it suggests instead, if any.
fn unknown_field(
    hints: Hints,
    path: &Path,
    key: &str,
    known: &[&'static str],
) -> (String, Option<&'static str>) {
    let place = path.to_string();
    // A hint for the items of a list names the list (`replicatedJobs`, not `replicatedJobs[0]`).
    let place_in_any_item = path.without_indexes().to_string();
    let hint = hints
        .iter()
        .filter(|(at, _)| *at == place || *at == place_in_any_item)
        .flat_map(|(_, hints)| hints.iter())
        .find(|(name, _)| *name == key)
        .map(|(_, suggestion)| *suggestion);
    // A hint that names a field of this object explains that field's absence too.
    let suggestion = hint
        .and_then(|hint| known.iter().find(|k| **k == hint).copied())
        .or_else(|| suggest(key, known));
    let message = match hint.or(suggestion) {
        Some(suggestion) => format!("unknown field `{key}`; did you mean `{suggestion}`?"),
        None if known.len() <= 8 => {
            format!(
                "unknown field `{key}` (expected one of: {})",
                known.join(", ")
            )
        }
        None => format!("unknown field `{key}`"),
    };
    (message, suggestion)
}

/// The candidate closest to `word`, if it is close enough to be what was meant.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    if let Some(same) = candidates.iter().find(|c| c.to_ascii_lowercase() == lower) {
        return Some(same);
    }
    let allowed = match word.chars().count() {
        0..=3 => 1,
        4..=7 => 2,
        _ => 3,
    };
    candidates
        .iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase()),
                *c,
            )
        })
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// Parses a job file's duration in kubeferry's grammar (see [`crate::duration`]), in whole
/// seconds: Kubernetes counts these fields in seconds (and the Spark operators' in milliseconds
/// that kubeferry fills from seconds), so `1500ms` would be cut.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = crate::duration::parse(text).map_err(|error| error.to_string())?;
    if duration.subsec_nanos() != 0 {
        return Err(format!(
            "{text:?} is not a whole number of seconds; job files count durations in seconds"
        ));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("90s", 90),
            ("10m", 600),
            ("1h30m", 5400),
            ("2d", 172_800),
            ("1d2h3m4s", 93_784),
            ("0s", 0),
        ];
        for (text, secs) in cases {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        for bad in [
            "",
            "10",
            "1.5h",
            "-1s",
            "1m1h",
            "1s1s",
            "1w",
            "h",
            "1 h",
            "1h30",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration("600").unwrap_err().contains("600s"));
        assert!(
            parse_duration("1500ms")
                .unwrap_err()
                .contains("whole number of seconds")
        );
        assert_eq!(parse_duration("2000ms"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn suggestions() {
        let fields = ["image", "imagePullPolicy", "name", "namespace", "labels"];
        assert_eq!(suggest("imge", &fields), Some("image"));
        assert_eq!(suggest("Image", &fields), Some("image"));
        assert_eq!(suggest("imagePullPolcy", &fields), Some("imagePullPolicy"));
        assert_eq!(suggest("namespce", &fields), Some("namespace"));
        assert_eq!(suggest("label", &fields), Some("labels"));
        assert_eq!(suggest("zzz", &fields), None);
        assert_eq!(suggest("volumes", &fields), None);
    }
}
