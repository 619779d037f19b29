//! The Spark job spec as data: what a `kind: SparkJob` file says, after decoding, before and
//! after validation (see [`super::SparkJobSpec`] for the validated form).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_with::skip_serializing_none;

use super::common::{empty_when_default, is_zero, millis};
use super::model::PullPolicy;
use crate::named::names;
use crate::spark::SparkOperator;

/// A Spark application: a driver and its executors, run by one of the Spark operators.
///
/// Field names in job files are the camelCase forms of these (`mainApplicationFile`). Empty
/// collections and `None` mean "not given"; see `docs/job-files.md` for every field.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SparkJob {
    /// The job's name, a DNS-1123 label (the object name is derived from the job id).
    pub name: String,
    /// The namespace; the caller's (context's) namespace when `None`.
    pub namespace: Option<String>,
    /// Which operator runs it; the cluster's configured operator when `None`.
    pub operator: Option<SparkOperator>,
    /// The Spark version of the image (`3.5.3`).
    pub spark_version: String,
    /// The image of the driver and the executors.
    pub image: String,
    /// When the kubelet pulls the image; Kubernetes' default when `None`.
    pub image_pull_policy: Option<PullPolicy>,
    /// Names of Secrets holding registry credentials.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<String>,
    /// The application: a `.jar` (a JVM application) or a `.py` file (a Python application),
    /// as a URI the cluster can read (`local:///…` inside the image, or a remote scheme).
    pub main_application_file: String,
    /// The main class of a JVM application (required for a jar, refused for Python).
    pub main_class: Option<String>,
    /// Arguments to the application.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// More jars for the driver's and executors' class path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jars: Vec<String>,
    /// More Python files (`.py`, `.zip`, `.egg`) for the Python path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub py_files: Vec<String>,
    /// Files placed in the working directory of the driver and each executor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Archives extracted into the working directory of each executor (`x.zip#alias`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<String>,
    /// Spark configuration properties, as `--conf` takes them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub spark_conf: BTreeMap<String, String>,
    /// The driver's resources and environment.
    #[serde(skip_serializing_if = "SparkPod::is_empty")]
    pub driver: SparkPod,
    /// The executors' resources, count and environment.
    #[serde(skip_serializing_if = "SparkPod::is_empty")]
    pub executor: SparkPod,
    /// The service account of the driver and the executors.
    pub service_account: Option<String>,
    /// Whether the operator restarts the application; Never when `None`.
    pub restart_policy: Option<SparkRestartPolicy>,
    /// How many times the operator restarts a failed application (with `OnFailure`).
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// How long the operator waits before a restart.
    #[serde(serialize_with = "millis")]
    pub retry_interval: Option<Duration>,
    /// How long the driver may take to start running (apache operator).
    #[serde(serialize_with = "millis")]
    pub driver_start_timeout: Option<Duration>,
    /// How long the driver may take to become ready (apache operator).
    #[serde(serialize_with = "millis")]
    pub driver_ready_timeout: Option<Duration>,
    /// How long the application may take to get its executors once the driver is ready
    /// (apache operator).
    #[serde(serialize_with = "millis")]
    pub executor_start_timeout: Option<Duration>,
    /// Whether the driver and its resources are kept after the application ends (apache
    /// operator); Never when `None`.
    pub retain_resources: Option<RetainPolicy>,
    /// How long kept resources stay (apache operator).
    #[serde(serialize_with = "millis")]
    pub retain_resources_for: Option<Duration>,
    /// How long the SparkApplication stays after it ended before the operator deletes it.
    #[serde(serialize_with = "millis")]
    pub ttl_after_stop: Option<Duration>,
    /// Labels for the SparkApplication, its driver and its executors.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// How much of the main container's log the outcome record keeps once the job ended,
    /// beyond the kubelet's last words; the submitting service's default when `None`. Not part
    /// of the spec's hash: it changes what is kept, not what runs.
    #[serde(skip)]
    pub keep_log: Option<crate::marks::KeepLog>,
    /// Annotations for the SparkApplication, its driver and its executors.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl SparkJob {
    /// What kind of application the main application file makes it, if it is one of the two.
    pub fn application_type(&self) -> Option<SparkAppType> {
        SparkAppType::of(&self.main_application_file)
    }
}

/// The resources and environment of the driver or of each executor.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SparkPod {
    /// CPU cores (`spark.driver.cores` / `spark.executor.cores`), a whole number.
    pub cores: Option<u32>,
    /// JVM heap (`spark.driver.memory` / `spark.executor.memory`).
    pub memory: Option<SparkMemory>,
    /// Executors only: how many (`spark.executor.instances`).
    pub instances: Option<u32>,
    /// Environment variables of the container.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

empty_when_default!(SparkPod);

/// An amount of memory in Spark's notation: a whole number and a binary unit, `512m`, `2g`.
/// Kept in bytes; printed with the largest unit that divides it (`1536m`, `2g`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SparkMemory(u64);

impl SparkMemory {
    /// The amount in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Reads `512m`, `2g`, `1536M`, `4096k`, `1t`, `512mb`; also Kubernetes' binary suffixes
    /// (`512Mi`, `2Gi`). Spark units are binary (`m` is MiB). A bare number, a fraction, a
    /// decimal Kubernetes suffix other than Spark's own letters, or zero is refused.
    pub fn parse(text: &str) -> Result<Self, String> {
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = text.split_at(digits);
        let malformed = || {
            format!(
                "{text:?} is not an amount of memory in Spark's notation (a whole number and a unit k, m, g or t, e.g. 512m, 2g)"
            )
        };
        if number.is_empty() {
            return Err(malformed());
        }
        if unit.is_empty() {
            return Err(format!(
                "{text:?} has no unit; Spark would read it as MiB: write {text}m (or 2g, 512m)"
            ));
        }
        let shift = match unit.to_ascii_lowercase().as_str() {
            "k" | "kb" | "ki" => 10,
            "m" | "mb" | "mi" => 20,
            "g" | "gb" | "gi" => 30,
            "t" | "tb" | "ti" => 40,
            _ => return Err(malformed()),
        };
        let number: u64 = number.parse().map_err(|_| malformed())?;
        if number == 0 {
            return Err(format!("{text:?} must be more than 0"));
        }
        number
            .checked_mul(1u64 << shift)
            .map(SparkMemory)
            .ok_or_else(|| format!("{text:?} is too large"))
    }
}

impl fmt::Display for SparkMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')] {
            let size = 1u64 << shift;
            if self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        // Not reachable through `parse` (everything is whole KiB); bytes as a last resort.
        write!(f, "{}b", self.0)
    }
}

impl Serialize for SparkMemory {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Whether the operator restarts an application that ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SparkRestartPolicy {
    /// Never; the caller retries.
    Never,
    /// After a failure, up to `retries` times.
    OnFailure,
}

names!(SparkRestartPolicy: Never = "Never", OnFailure = "OnFailure");

/// Whether the apache operator keeps the driver and its resources after the application ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RetainPolicy {
    /// Always keep them.
    Always,
    /// Keep them when the application failed.
    OnFailure,
    /// Release them at once.
    Never,
}

names!(RetainPolicy: Always = "Always", OnFailure = "OnFailure", Never = "Never");

/// What runs the application, decided by the main application file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SparkAppType {
    /// A `.jar`: a Java or Scala application, which needs a main class.
    Jvm,
    /// A `.py` file: a Python application, which has no main class.
    Python,
}

impl SparkAppType {
    /// The type of an application file, by the extension of its path (query and fragment
    /// ignored, case-insensitive).
    pub fn of(uri: &str) -> Option<Self> {
        let path = uri.split(['?', '#']).next().unwrap_or_default();
        let file = path.rsplit('/').next().unwrap_or_default();
        let (stem, extension) = file.rsplit_once('.')?;
        if stem.is_empty() {
            return None;
        }
        match extension.to_ascii_lowercase().as_str() {
            "jar" => Some(SparkAppType::Jvm),
            "py" => Some(SparkAppType::Python),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_in_sparks_notation() {
        let cases = [
            ("512m", "512m"),
            ("512M", "512m"),
            ("512mb", "512m"),
            ("512Mi", "512m"),
            ("2g", "2g"),
            ("2048m", "2g"),
            ("1536m", "1536m"),
            ("4096k", "4m"),
            ("1t", "1t"),
            ("3Gi", "3g"),
        ];
        for (text, printed) in cases {
            let memory = SparkMemory::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(memory.to_string(), printed, "{text}");
        }
        assert_eq!(SparkMemory::parse("1k").unwrap().bytes(), 1024);
        for bad in [
            "",
            "m",
            "512",
            "0m",
            "1.5g",
            "-1g",
            "512x",
            "2 g",
            "99999999999999t",
        ] {
            assert!(SparkMemory::parse(bad).is_err(), "{bad:?}");
        }
        assert!(SparkMemory::parse("512").unwrap_err().contains("512m"));
    }

    #[test]
    fn application_types() {
        let cases = [
            (
                "local:///opt/spark/examples/jars/spark-examples.jar",
                Some(SparkAppType::Jvm),
            ),
            ("s3a://bucket/app/Job.JAR", Some(SparkAppType::Jvm)),
            ("local:///opt/app/main.py", Some(SparkAppType::Python)),
            (
                "https://example.com/main.py?version=2",
                Some(SparkAppType::Python),
            ),
            ("local:///opt/app/main.R", None),
            ("local:///opt/app/", None),
            ("local:///opt/app/.py", None),
            ("local:///opt/app/main", None),
        ];
        for (uri, expected) in cases {
            assert_eq!(SparkAppType::of(uri), expected, "{uri}");
        }
    }
}
