//! Decoding a `kind: SparkJob` file's tree into a [`SparkJob`], with the same reporting as
//! container jobs: types, unknown fields (with a suggestion) and missing fields, each at its
//! place.

use super::common::{JobMetadata, PodIdentity};
use super::decode::{Decoder, Hints};
use super::error::{Path, ProblemKind};
use super::spark_model::{RetainPolicy, SparkJob, SparkMemory, SparkPod, SparkRestartPolicy};
use super::tree::Node;
use crate::spark::SparkOperator;

const SPARK_FIELDS: &[&str] = &[
    "kind",
    "name",
    "namespace",
    "operator",
    "sparkVersion",
    "image",
    "imagePullPolicy",
    "imagePullSecrets",
    "mainApplicationFile",
    "mainClass",
    "args",
    "jars",
    "pyFiles",
    "files",
    "archives",
    "sparkConf",
    "driver",
    "executor",
    "serviceAccount",
    "restartPolicy",
    "retries",
    "retryInterval",
    "driverStartTimeout",
    "driverReadyTimeout",
    "executorStartTimeout",
    "retainResources",
    "retainResourcesFor",
    "ttlAfterStop",
    "labels",
    "annotations",
    "keepLog",
];
const DRIVER_FIELDS: &[&str] = &["cores", "memory", "env"];
const EXECUTOR_FIELDS: &[&str] = &["cores", "memory", "instances", "env"];

/// Names from the operators' SparkApplications, spark-submit and Gravitino's Spark templates
/// that users reach for, and what this format calls them.
const SPARK_HINTS: Hints = &[
    (
        "",
        &[
            ("mainApplicationResource", "mainApplicationFile"),
            ("mainResource", "mainApplicationFile"),
            ("mainFile", "mainApplicationFile"),
            ("className", "mainClass"),
            ("class", "mainClass"),
            ("arguments", "args"),
            ("driverArgs", "args"),
            ("conf", "sparkConf"),
            ("configs", "sparkConf"),
            ("runtimeVersions", "sparkVersion"),
            ("deps", "jars, pyFiles, files and archives"),
            ("serviceAccountName", "serviceAccount"),
            ("timeToLiveSeconds", "ttlAfterStop"),
            ("ttlAfterStopMillis", "ttlAfterStop"),
            ("resourceRetainPolicy", "retainResources"),
            ("resourceRetainDurationMillis", "retainResourcesFor"),
            ("executors", "executor"),
            ("env", "driver.env and executor.env"),
            ("environments", "driver.env and executor.env"),
            ("cores", "driver.cores and executor.cores"),
            ("memory", "driver.memory and executor.memory"),
            ("instances", "executor.instances"),
        ],
    ),
    (
        "driver",
        &[("instances", "executor.instances"), ("envVars", "env")],
    ),
    ("executor", &[("envVars", "env"), ("count", "instances")]),
];

impl Decoder {
    /// Reads a Spark job's root object (its `kind` was read by [`Decoder::job`]).
    pub(super) fn spark_job(&mut self, root: &Node) -> Option<SparkJob> {
        self.hints = SPARK_HINTS;
        let path = Path::root();
        let f = self.fields(root, &path, SPARK_FIELDS)?;
        let duration = Self::duration;
        let (name, namespace) = self.identity(&f);
        let spark_version = self
            .required(&f, "sparkVersion", Self::string)
            .unwrap_or_default();
        let (image, image_pull_policy) = self.image_fields(&f);
        let PodIdentity {
            image_pull_secrets,
            service_account,
        } = self.pod_identity(&f);
        let JobMetadata {
            labels,
            annotations,
            keep_log,
        } = self.metadata(&f);
        let job = SparkJob {
            name,
            namespace,
            operator: self.optional(&f, "operator", |d, n, p| {
                d.choice(n, p, &SparkOperator::NAMES)
            }),
            spark_version,
            image,
            image_pull_policy,
            image_pull_secrets,
            main_application_file: self
                .required(&f, "mainApplicationFile", Self::string)
                .unwrap_or_default(),
            main_class: self.optional(&f, "mainClass", Self::string),
            args: self.optional(&f, "args", Self::strings).unwrap_or_default(),
            jars: self.optional(&f, "jars", Self::strings).unwrap_or_default(),
            py_files: self
                .optional(&f, "pyFiles", Self::strings)
                .unwrap_or_default(),
            files: self
                .optional(&f, "files", Self::strings)
                .unwrap_or_default(),
            archives: self
                .optional(&f, "archives", Self::strings)
                .unwrap_or_default(),
            spark_conf: self
                .optional(&f, "sparkConf", Self::string_map)
                .unwrap_or_default(),
            driver: self
                .optional(&f, "driver", |d, n, p| d.spark_pod(n, p, DRIVER_FIELDS))
                .unwrap_or_default(),
            executor: self
                .optional(&f, "executor", |d, n, p| d.spark_pod(n, p, EXECUTOR_FIELDS))
                .unwrap_or_default(),
            service_account,
            restart_policy: self.optional(&f, "restartPolicy", |d, n, p| d.restart_policy(n, p)),
            retries: self.retries(&f),
            retry_interval: self.optional(&f, "retryInterval", duration),
            driver_start_timeout: self.optional(&f, "driverStartTimeout", duration),
            driver_ready_timeout: self.optional(&f, "driverReadyTimeout", duration),
            executor_start_timeout: self.optional(&f, "executorStartTimeout", duration),
            retain_resources: self.optional(&f, "retainResources", |d, n, p| {
                d.choice(n, p, &RetainPolicy::NAMES)
            }),
            retain_resources_for: self.optional(&f, "retainResourcesFor", duration),
            ttl_after_stop: self.optional(&f, "ttlAfterStop", duration),
            labels,
            annotations,
            keep_log,
        };
        Some(job)
    }

    fn spark_pod(
        &mut self,
        node: &Node,
        path: &Path,
        known: &'static [&'static str],
    ) -> Option<SparkPod> {
        let f = self.fields(node, path, known)?;
        let count = |d: &mut Self, n: &Node, p: &Path| {
            d.integer(n, p, 1, i64::from(i32::MAX))
                .and_then(|n| u32::try_from(n).ok())
        };
        Some(SparkPod {
            cores: self.optional(&f, "cores", count),
            memory: self.optional(&f, "memory", Self::spark_memory),
            instances: self.optional(&f, "instances", count),
            env: self
                .optional(&f, "env", Self::string_map)
                .unwrap_or_default(),
        })
    }

    fn spark_memory(&mut self, node: &Node, path: &Path) -> Option<SparkMemory> {
        let text = self.scalar(node, path, "an amount of memory such as 512m or 2g")?;
        match SparkMemory::parse(text) {
            Ok(memory) => Some(memory),
            Err(message) => {
                self.problem(node.offset, path, ProblemKind::Value, message);
                None
            }
        }
    }

    fn restart_policy(&mut self, node: &Node, path: &Path) -> Option<SparkRestartPolicy> {
        // Named explicitly: both operators know them, and a job must end.
        if let Some(text) = self.peek_scalar(node)
            && matches!(text, "Always" | "OnInfrastructureFailure")
        {
            let message = format!(
                "{text} is not supported: {}; use OnFailure with retries",
                if text == "Always" {
                    "it restarts the application after it succeeds too, so the job never ends"
                } else {
                    "only the apache operator knows it"
                }
            );
            self.problem(node.offset, path, ProblemKind::Value, message);
            return None;
        }
        self.choice(node, path, &SparkRestartPolicy::NAMES)
    }

    /// A scalar's text without reporting anything when the node is not one.
    fn peek_scalar<'n>(&self, node: &'n Node) -> Option<&'n str> {
        match &node.value {
            super::tree::Value::Scalar(s) if !s.is_null() => Some(&s.text),
            _ => None,
        }
    }
}
