//! Execution ids: `<cluster>/<kind>/<namespace>/<name>`, parsed and printed here and nowhere else.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What kind of Kubernetes object runs a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    /// A container job: a `batch/v1` Job.
    Job,
    /// A Spark application: a `SparkApplication` of one of the Spark operators.
    SparkApp,
    /// A JobSet (`jobset.x-k8s.io/v1alpha2`): replicated Jobs run together.
    JobSet,
    /// A bare pod: one pod that runs once, no controller in between.
    Pod,
}

impl JobKind {
    /// All kinds, in the order they are documented.
    pub const ALL: [JobKind; 4] = [
        JobKind::Job,
        JobKind::SparkApp,
        JobKind::JobSet,
        JobKind::Pod,
    ];

    /// Every kind's name, in [`JobKind::ALL`]'s order, comma-separated (`job, sparkapp,
    /// jobset, pod`): what an error that expects a kind lists.
    pub fn names() -> String {
        JobKind::ALL.map(JobKind::as_str).join(", ")
    }

    /// The Kubernetes kind of the object a job of this kind runs as (`Job`,
    /// `SparkApplication`, `JobSet`, `Pod`): its manifests' `kind`, and the word messages use.
    pub const fn object_kind(self) -> &'static str {
        match self {
            JobKind::Job => "Job",
            JobKind::SparkApp => "SparkApplication",
            JobKind::JobSet => "JobSet",
            JobKind::Pod => "Pod",
        }
    }

    /// The kind as it appears in an execution id.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Job => "job",
            JobKind::SparkApp => "sparkapp",
            JobKind::JobSet => "jobset",
            JobKind::Pod => "pod",
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobKind {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| IdError::UnknownKind(s.to_string()))
    }
}

/// Identifies one execution on one cluster: `<cluster>/<kind>/<namespace>/<name>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId {
    /// The configured name of the cluster the job runs on.
    pub cluster: String,
    /// What kind of object runs the job.
    pub kind: JobKind,
    /// The Kubernetes namespace of the object.
    pub namespace: String,
    /// The Kubernetes name of the object.
    pub name: String,
}

/// Why a string is not an execution id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id does not have exactly four `/`-separated parts.
    #[error(
        "execution id {0:?} is malformed: expected <cluster>/<kind>/<namespace>/<name>, e.g. sim/job/default/hello-1a2b3c"
    )]
    Shape(String),
    /// One part of the id is empty.
    #[error("execution id {id:?} is malformed: the {part} is empty")]
    EmptyPart {
        /// The whole id.
        id: String,
        /// Which part is empty.
        part: &'static str,
    },
    /// The kind part names no known kind.
    #[error("execution id kind {0:?} is unknown: expected one of {kinds}", kinds = JobKind::names())]
    UnknownKind(String),
    /// The namespace or name is not a DNS-1123 label.
    #[error("execution id {id:?} is malformed: the {part} {value:?} is not a DNS-1123 label")]
    NotDnsLabel {
        /// The whole id.
        id: String,
        /// Which part is wrong.
        part: &'static str,
        /// The offending value.
        value: String,
    },
}

impl ExecutionId {
    /// Builds an id from its parts.
    pub fn new(
        cluster: impl Into<String>,
        kind: JobKind,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            cluster: cluster.into(),
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.cluster, self.kind, self.namespace, self.name
        )
    }
}

impl FromStr for ExecutionId {
    type Err = IdError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = id.split('/').collect();
        let [cluster, kind, namespace, name] = parts[..] else {
            return Err(IdError::Shape(id.to_string()));
        };
        for (part, value) in [
            ("cluster", cluster),
            ("kind", kind),
            ("namespace", namespace),
            ("name", name),
        ] {
            if value.is_empty() {
                return Err(IdError::EmptyPart {
                    id: id.to_string(),
                    part,
                });
            }
        }
        let kind = kind.parse()?;
        for (part, value) in [("namespace", namespace), ("name", name)] {
            if !is_dns_label(value) {
                return Err(IdError::NotDnsLabel {
                    id: id.to_string(),
                    part,
                    value: value.to_string(),
                });
            }
        }
        Ok(ExecutionId::new(cluster, kind, namespace, name))
    }
}

impl Serialize for ExecutionId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ExecutionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether `s` is a DNS-1123 label: at most 63 lowercase alphanumerics or '-', starting and
/// ending with an alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(
            "c/cronjob/ns/x"
                .parse::<ExecutionId>()
                .unwrap_err()
                .to_string(),
            "execution id kind \"cronjob\" is unknown: expected one of job, sparkapp, jobset, pod"
        );
        for text in [
            "sim/job/default/hello-1a2b",
            "prod-eu/sparkapp/etl/daily-x",
            "sim/pod/default/hello-pod-1a2b",
        ] {
            let id: ExecutionId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
        }
        let id: ExecutionId = "c/job/ns/n".parse().unwrap();
        assert_eq!(id, ExecutionId::new("c", JobKind::Job, "ns", "n"));
    }

    #[test]
    fn rejects_malformed_ids_with_the_part_named() {
        let cases = [
            ("hello", "expected <cluster>/<kind>/<namespace>/<name>"),
            (
                "a/job/ns/n/extra",
                "expected <cluster>/<kind>/<namespace>/<name>",
            ),
            ("/job/ns/n", "the cluster is empty"),
            ("c/job//n", "the namespace is empty"),
            ("c/cronjob/ns/n", "kind \"cronjob\" is unknown"),
            ("c/job/NS/n", "the namespace \"NS\" is not a DNS-1123 label"),
            ("c/job/ns/-n", "the name \"-n\" is not a DNS-1123 label"),
        ];
        for (text, expected) in cases {
            let error = text.parse::<ExecutionId>().unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("a"));
        assert!(is_dns_label("a-1"));
        assert!(is_dns_label(&"a".repeat(63)));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("a_b"));
        assert!(!is_dns_label("a."));
        assert!(!is_dns_label("A"));
    }

    #[test]
    fn serde_uses_the_string_form() {
        let id: ExecutionId = "c/sparkapp/ns/n".parse().unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"c/sparkapp/ns/n\"");
        assert_eq!(serde_json::from_str::<ExecutionId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ExecutionId>("\"nope\"").is_err());
    }
}
