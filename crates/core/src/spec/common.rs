//! The fields every kind of job file has (name, namespace, image, pull secrets, retries, labels, annotations), decoded, validated and serialized once for all kinds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_with::skip_serializing_none;

use super::decode::{Decoder, Fields};
use super::error::{Found, Path, ProblemKind};
use super::model::PullPolicy;
use super::names::{dns_label, dns_subdomain, image_reference, label_value, qualified_name};
use crate::marks::{KeepLog, MANAGED_BY_LABEL};

/// The total size a spec's annotations may have: Kubernetes' limit (256 KiB) less the room kept
/// for kubeferry's own marks.
pub(super) const MAX_ANNOTATIONS_BYTES: usize =
    256 * 1024 - crate::marks::RESERVED_ANNOTATION_BYTES;

/// What a job file's image fields decode to: the image and its pull policy.
pub(super) type ImageFields = (String, Option<PullPolicy>);

/// What every pod of the job runs as: the Secrets its images are pulled with and its service
/// account. The same two fields in a container job (and a bare pod) and a JobSet.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodIdentity {
    /// Names of Secrets holding registry credentials, for every pod.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// The service account every pod runs as; the namespace's `default` when `None`.
    pub service_account: Option<String>,
}

/// What a job file says about the job beside what it runs: the labels and annotations of its
/// objects and pods, and how much of its log is kept. The same three fields in a container job
/// (and a bare pod) and a JobSet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobMetadata {
    /// Labels for the job's object (the Job, the JobSet), what it creates, and their pods.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the job's object, what it creates, and their pods.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// How much of the main container's log the outcome record keeps once the job ended,
    /// beyond the kubelet's last words; the submitting service's default when `None`. Not part
    /// of the spec's hash: it changes what is kept, not what runs.
    #[serde(skip)]
    pub keep_log: Option<KeepLog>,
}

// Each kind calls these where its own fields sit between them: required fields missing from
// the same object are reported in the order they are read (they share the object's place).
impl Decoder {
    /// `name` (required) and `namespace`.
    pub(super) fn identity(&mut self, f: &Fields<'_>) -> (String, Option<String>) {
        let name = self.required(f, "name", Self::string).unwrap_or_default();
        (name, self.optional(f, "namespace", Self::string))
    }

    /// `image` (required) and `imagePullPolicy`.
    pub(super) fn image_fields(&mut self, f: &Fields<'_>) -> ImageFields {
        let image = self.required(f, "image", Self::string).unwrap_or_default();
        let pull_policy = self.optional(f, "imagePullPolicy", |d, n, p| {
            d.choice(n, p, &PullPolicy::NAMES)
        });
        (image, pull_policy)
    }

    /// `imagePullSecrets` and `serviceAccount`.
    pub(super) fn pod_identity(&mut self, f: &Fields<'_>) -> PodIdentity {
        PodIdentity {
            image_pull_secrets: self
                .optional(f, "imagePullSecrets", Self::strings)
                .unwrap_or_default(),
            service_account: self.optional(f, "serviceAccount", Self::string),
        }
    }

    /// `retries`: how many times a failed run is restarted (0 when not given).
    pub(super) fn retries(&mut self, f: &Fields<'_>) -> u32 {
        self.optional(f, "retries", |d, n, p| {
            d.integer(n, p, 0, i64::from(i32::MAX))
        })
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
    }

    /// `labels`, `annotations` and `keepLog`.
    pub(super) fn metadata(&mut self, f: &Fields<'_>) -> JobMetadata {
        let labels = self
            .optional(f, "labels", Self::string_map)
            .unwrap_or_default();
        let annotations = self
            .optional(f, "annotations", Self::string_map)
            .unwrap_or_default();
        JobMetadata {
            labels,
            annotations,
            keep_log: self.keep_log(f),
        }
    }
}

// How the canonical form (and so the hash) writes what the models hold: `None` is left out
// (`skip_serializing_none` on each model), zero counts like empty collections, durations are
// whole units.

/// Gives each listed type `is_empty`: whether every field has its default, so that the job
/// file left the whole object out (and the canonical form leaves it out too).
macro_rules! empty_when_default {
    ($($type:ty),+ $(,)?) => {$(
        impl $type {
            /// Whether nothing is set: every field has its default.
            pub fn is_empty(&self) -> bool {
                *self == Self::default()
            }
        }
    )+};
}

pub(super) use empty_when_default;

/// Whether a count is 0, which the canonical form leaves out.
pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Durations hash and print as whole seconds (Kubernetes' fields count in them).
pub(super) fn seconds<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(d) => serializer.serialize_u64(d.as_secs()),
        None => serializer.serialize_none(),
    }
}

/// Durations hash and print as whole milliseconds (the Spark operators count in them).
pub(super) fn millis<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(d) => serializer.serialize_u128(d.as_millis()),
        None => serializer.serialize_none(),
    }
}

/// The fields of `keepLog`.
const KEEP_LOG_FIELDS: &[&str] = &["lines", "bytes"];
/// How many bytes `keepLog` keeps when it does not say.
pub(super) const KEEP_LOG_DEFAULT_BYTES: u32 = 16 * 1024;

impl Decoder {
    /// `keepLog: {lines, bytes}`: how much of the main container's log the outcome record keeps
    /// once the job ended ([`KeepLog`]).
    fn keep_log(&mut self, f: &Fields<'_>) -> Option<KeepLog> {
        self.optional(f, "keepLog", |d, node, path| {
            let f = d.fields(node, path, KEEP_LOG_FIELDS)?;
            let lines = d.required(&f, "lines", |d, n, p| {
                d.integer(n, p, 1, i64::from(KeepLog::MAX_LINES))
            });
            let bytes = d.optional(&f, "bytes", |d, n, p| {
                let quantity: super::quantity::Quantity = d.quantity(n, p)?;
                let max = i128::from(KeepLog::MAX_BYTES) * 1_000_000_000;
                if !quantity.is_whole()
                    || quantity.nanos() < 1_000_000_000
                    || quantity.nanos() > max
                {
                    let message =
                        format!("{quantity} is not a whole number of bytes from 1 to 64Ki");
                    d.problem(n.offset, p, ProblemKind::Value, message);
                    return None;
                }
                u32::try_from(quantity.nanos() / 1_000_000_000).ok()
            });
            Some(KeepLog {
                lines: u32::try_from(lines?).ok()?,
                bytes: bytes.unwrap_or(KEEP_LOG_DEFAULT_BYTES),
            })
        })
    }
}

/// The problems validation finds, named by field.
#[derive(Default)]
pub(super) struct Checks {
    pub(super) found: Vec<Found>,
}

impl Checks {
    pub(super) fn value(&mut self, path: Path, result: Result<(), String>) {
        if let Err(message) = result {
            // The check's message starts with the value itself; the field comes from the path.
            self.found
                .push(Found::at(path, ProblemKind::Value, message));
        }
    }

    pub(super) fn key(&mut self, path: Path, result: Result<(), String>) {
        if let Err(message) = result {
            self.found
                .push(Found::at_key(path, ProblemKind::Value, message));
        }
    }

    pub(super) fn invalid(&mut self, path: Path, message: impl Into<String>) {
        self.found
            .push(Found::at(path, ProblemKind::Value, message));
    }

    pub(super) fn conflict(&mut self, path: Path, message: impl Into<String>) {
        self.found
            .push(Found::at(path, ProblemKind::Combination, message));
    }

    pub(super) fn required(&mut self, path: Path) {
        self.found
            .push(Found::at(path, ProblemKind::MissingField, "is required"));
    }

    /// `ttlAfterFinished`: whole seconds that Kubernetes' `ttlSecondsAfterFinished` (an int32)
    /// can hold.
    pub(super) fn ttl_after_finished(&mut self, ttl: Option<Duration>) {
        let Some(ttl) = ttl else {
            return;
        };
        let path = Path::root().field("ttlAfterFinished");
        if ttl.subsec_nanos() != 0 {
            self.invalid(path, "must be whole seconds");
        } else if i32::try_from(ttl.as_secs()).is_err() {
            self.invalid(path, "is too long (at most 2^31-1 seconds)");
        }
    }

    /// `keepLog`: within [`KeepLog`]'s limits (a spec built in code has no decoder to say so).
    pub(super) fn keep_log(&mut self, keep_log: Option<&KeepLog>) {
        let Some(keep_log) = keep_log else {
            return;
        };
        let path = Path::root().field("keepLog");
        if !(1..=KeepLog::MAX_LINES).contains(&keep_log.lines) {
            self.invalid(
                path.field("lines"),
                format!(
                    "{} is out of range (1 to {})",
                    keep_log.lines,
                    KeepLog::MAX_LINES
                ),
            );
        }
        if !(1..=KeepLog::MAX_BYTES).contains(&keep_log.bytes) {
            self.invalid(
                path.field("bytes"),
                format!(
                    "{} is out of range (1 to {})",
                    keep_log.bytes,
                    KeepLog::MAX_BYTES
                ),
            );
        }
    }

    /// `name` (a DNS label, required) and `namespace` (a DNS label).
    pub(super) fn identity(&mut self, name: &str, namespace: Option<&str>) {
        let root = Path::root();
        if name.is_empty() {
            self.required(root.field("name"));
        } else {
            self.value(root.field("name"), dns_label(name));
        }
        if let Some(namespace) = namespace {
            self.value(root.field("namespace"), dns_label(namespace));
        }
    }

    /// `image` at `path`: an image reference, required.
    pub(super) fn image(&mut self, path: Path, image: &str) {
        if image.is_empty() {
            self.required(path);
        } else {
            self.value(path, image_reference(image));
        }
    }

    /// `imagePullSecrets` and `serviceAccount`.
    pub(super) fn pod_identity(&mut self, identity: &PodIdentity) {
        let root = Path::root();
        self.names_list(
            &root.field("imagePullSecrets"),
            &identity.image_pull_secrets,
        );
        self.service_account(identity.service_account.as_deref());
    }

    /// `serviceAccount`: a DNS subdomain.
    pub(super) fn service_account(&mut self, account: Option<&str>) {
        if let Some(account) = account {
            self.value(Path::root().field("serviceAccount"), dns_subdomain(account));
        }
    }

    /// A list of object names (secrets, claims): each a DNS subdomain, each once.
    pub(super) fn names_list(&mut self, path: &Path, names: &[String]) {
        let mut seen = BTreeSet::new();
        for (i, name) in names.iter().enumerate() {
            self.value(path.index(i), dns_subdomain(name));
            if !seen.insert(name) {
                self.invalid(path.index(i), format!("{name:?} is listed twice"));
            }
        }
    }

    /// `labels`, `annotations` ([`Checks::metadata`]) and `keepLog` ([`Checks::keep_log`]).
    pub(super) fn job_metadata(
        &mut self,
        metadata: &JobMetadata,
        reserved_label: fn(&str) -> Result<(), String>,
    ) {
        self.metadata(&metadata.labels, &metadata.annotations, reserved_label);
        self.keep_log(metadata.keep_log.as_ref());
    }

    /// `labels` and `annotations`: valid keys that are not kubeferry's own marks (nor, for
    /// labels, what `reserved_label` refuses), valid label values, and annotations that leave
    /// room for kubeferry's marks.
    pub(super) fn metadata(
        &mut self,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
        reserved_label: fn(&str) -> Result<(), String>,
    ) {
        let root = Path::root();
        for (key, value) in labels {
            let path = root.field("labels").key(key);
            self.key(
                path.clone(),
                qualified_name(key)
                    .and_then(|()| kubeferry_mark(key))
                    .and_then(|()| reserved_label(key)),
            );
            self.value(path, label_value(value));
        }
        let mut annotation_bytes = 0;
        for (key, value) in annotations {
            let path = root.field("annotations").key(key);
            self.key(path, qualified_name(key).and_then(|()| kubeferry_mark(key)));
            annotation_bytes += key.len() + value.len();
        }
        if annotation_bytes > MAX_ANNOTATIONS_BYTES {
            self.invalid(
                root.field("annotations"),
                format!(
                    "total {annotation_bytes} bytes, more than the {} KiB a job may use (Kubernetes allows 256 KiB; kubeferry keeps {} KiB for its own marks)",
                    MAX_ANNOTATIONS_BYTES / 1024,
                    crate::marks::RESERVED_ANNOTATION_BYTES / 1024
                ),
            );
        }
    }
}

/// Keys kubeferry itself sets on every object it creates: its `kubeferry.dev/` marks and
/// [`MANAGED_BY_LABEL`].
fn kubeferry_mark(key: &str) -> Result<(), String> {
    let prefix = key.rsplit_once('/').map(|(prefix, _)| prefix);
    let ours = prefix.is_some_and(|p| p == "kubeferry.dev" || p.ends_with(".kubeferry.dev"));
    if ours {
        return Err(format!(
            "{key:?} is reserved: kubeferry.dev/ keys are kubeferry's own marks"
        ));
    }
    if key == MANAGED_BY_LABEL {
        return Err(format!(
            "{key:?} is reserved: kubeferry sets it to mark the objects it manages"
        ));
    }
    Ok(())
}
