//! Validation of a decoded Spark job: every value the operators or Spark would refuse, every
//! path the cluster could not read, Spark properties the operator owns (among them every key
//! the Kubeflow operator's admission webhook denies), and every combination that contradicts
//! itself, named by field, before anything is created.

use std::collections::BTreeSet;
use std::time::Duration;

use super::common::Checks;
use super::error::{Found, Path};
use super::names::env_name;
use super::spark_model::{RetainPolicy, SparkAppType, SparkJob, SparkRestartPolicy};
use crate::spark::SparkOperator;

/// Spark properties the operator decides, and why.
const OWNED_BY_OPERATOR: &[(&str, &str)] = &[
    (
        "spark.master",
        "the operator sets it: it runs the driver on this cluster",
    ),
    (
        "spark.submit.deployMode",
        "the operator sets it: it always runs the driver in cluster mode",
    ),
    (
        "spark.kubernetes.namespace",
        "the operator sets it to the SparkApplication's namespace; use namespace",
    ),
    (
        "spark.kubernetes.driver.master",
        "the operator sets it: the driver talks to this cluster's API server",
    ),
    (
        "spark.kubernetes.authenticate.oauthToken",
        CREDENTIALS_OWNED,
    ),
    (
        "spark.kubernetes.authenticate.oauthTokenFile",
        CREDENTIALS_OWNED,
    ),
    (
        "spark.kubernetes.authenticate.driver.oauthToken",
        CREDENTIALS_OWNED,
    ),
    (
        "spark.kubernetes.authenticate.driver.oauthTokenFile",
        CREDENTIALS_OWNED,
    ),
    (
        "spark.kubernetes.authenticate.executor.oauthToken",
        CREDENTIALS_OWNED,
    ),
    (
        "spark.kubernetes.authenticate.executor.oauthTokenFile",
        CREDENTIALS_OWNED,
    ),
];

/// Why the API credentials of the submission, the driver and the executors are not properties
/// of a job file (the Kubeflow operator's webhook denies them too).
const CREDENTIALS_OWNED: &str = "the operator manages the credentials the driver and executors use (a service account's, see serviceAccount)";

/// Spark properties kubeferry sets from a field of the job file: one way to say each thing.
const SET_FROM_FIELDS: &[(&str, &str)] = &[
    ("spark.kubernetes.container.image", "image"),
    ("spark.kubernetes.driver.container.image", "image"),
    ("spark.kubernetes.executor.container.image", "image"),
    (
        "spark.kubernetes.container.image.pullPolicy",
        "imagePullPolicy",
    ),
    (
        "spark.kubernetes.container.image.pullSecrets",
        "imagePullSecrets",
    ),
    ("spark.driver.cores", "driver.cores"),
    ("spark.driver.memory", "driver.memory"),
    ("spark.executor.cores", "executor.cores"),
    ("spark.executor.memory", "executor.memory"),
    ("spark.executor.instances", "executor.instances"),
    ("spark.jars", "jars"),
    ("spark.submit.pyFiles", "pyFiles"),
    ("spark.files", "files"),
    ("spark.archives", "archives"),
    (
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "serviceAccount",
    ),
    (
        "spark.kubernetes.authenticate.executor.serviceAccountName",
        "serviceAccount",
    ),
];

/// Prefixes of Spark properties kubeferry sets from a field.
const PREFIXES_FROM_FIELDS: &[(&str, &str)] = &[
    ("spark.kubernetes.driverEnv.", "driver.env"),
    ("spark.executorEnv.", "executor.env"),
];

/// Fields only the apache operator honours.
const APACHE_ONLY: &[&str] = &[
    "driverStartTimeout",
    "driverReadyTimeout",
    "executorStartTimeout",
    "retainResources",
    "retainResourcesFor",
];

/// Every problem with `job`; empty when it is valid. When the file names its operator, the
/// fields that operator cannot honour are problems too (see [`operator_support`]).
pub(crate) fn spark_job(job: &SparkJob) -> Vec<Found> {
    let root = Path::root();
    let mut c = Checks::default();

    c.identity(&job.name, job.namespace.as_deref());
    if job.spark_version.is_empty() {
        c.required(root.field("sparkVersion"));
    } else {
        c.value(
            root.field("sparkVersion"),
            spark_version(&job.spark_version),
        );
    }
    c.image(root.field("image"), &job.image);
    c.names_list(&root.field("imagePullSecrets"), &job.image_pull_secrets);
    application(&mut c, job);
    let lists = [
        ("jars", &job.jars, false),
        ("pyFiles", &job.py_files, false),
        ("files", &job.files, false),
        ("archives", &job.archives, true),
    ];
    for (field, uris, fragment) in lists {
        let mut seen = BTreeSet::new();
        for (i, uri) in uris.iter().enumerate() {
            let path = root.field(field).index(i);
            c.value(path.clone(), spark_uri(uri, fragment));
            if !seen.insert(uri) {
                c.invalid(path, format!("{uri:?} is listed twice"));
            }
        }
    }
    spark_conf(&mut c, job);
    for (name, pod) in [("driver", &job.driver), ("executor", &job.executor)] {
        for key in pod.env.keys() {
            c.key(root.field(name).field("env").key(key), env_name(key));
        }
    }
    c.service_account(job.service_account.as_deref());
    restarts(&mut c, job);
    for (field, duration) in [
        ("driverStartTimeout", job.driver_start_timeout),
        ("driverReadyTimeout", job.driver_ready_timeout),
        ("executorStartTimeout", job.executor_start_timeout),
    ] {
        if duration == Some(Duration::ZERO) {
            c.invalid(root.field(field), "must be at least 1s");
        }
    }
    let keeps = matches!(
        job.retain_resources,
        Some(RetainPolicy::Always | RetainPolicy::OnFailure)
    );
    if job.retain_resources_for.is_some() && !keeps {
        c.conflict(
            root.field("retainResourcesFor"),
            "needs retainResources: Always or OnFailure (nothing is kept otherwise)",
        );
    }
    c.metadata(&job.labels, &job.annotations, spark_reserved);
    c.keep_log(job.keep_log.as_ref());
    if let Some(operator) = job.operator {
        c.found.extend(operator_support(job, operator));
    }
    c.found
}

/// The fields of `job` that `operator` cannot honour; empty when it honours them all.
pub(crate) fn operator_support(job: &SparkJob, operator: SparkOperator) -> Vec<Found> {
    let mut c = Checks::default();
    if operator == SparkOperator::Kubeflow {
        let given = [
            job.driver_start_timeout.is_some(),
            job.driver_ready_timeout.is_some(),
            job.executor_start_timeout.is_some(),
            job.retain_resources.is_some(),
            job.retain_resources_for.is_some(),
        ];
        for (field, given) in APACHE_ONLY.iter().zip(given) {
            if given {
                c.conflict(
                    Path::root().field(field),
                    "the kubeflow operator has no such setting (only the apache operator does); remove it or use operator: apache",
                );
            }
        }
    }
    c.found
}

/// The main application file and the main class, which the file's type decides.
fn application(c: &mut Checks, job: &SparkJob) {
    let root = Path::root();
    let file = &job.main_application_file;
    let app_type = if file.is_empty() {
        c.required(root.field("mainApplicationFile"));
        None
    } else if let Err(message) = spark_uri(file, false) {
        c.invalid(root.field("mainApplicationFile"), message);
        None
    } else {
        let app_type = job.application_type();
        if app_type.is_none() {
            c.invalid(
                root.field("mainApplicationFile"),
                format!(
                    "{file:?} must be a .jar (a Java or Scala application) or a .py file (a Python application)"
                ),
            );
        }
        app_type
    };
    match (app_type, &job.main_class) {
        (Some(SparkAppType::Jvm), None) => c.conflict(
            root.field("mainClass"),
            "is required for a JVM application (mainApplicationFile is a .jar)",
        ),
        (Some(SparkAppType::Python), Some(_)) => c.conflict(
            root.field("mainClass"),
            "must not be set for a Python application (mainApplicationFile is a .py file, which Spark runs as the main program)",
        ),
        (_, Some(class)) => c.value(root.field("mainClass"), main_class(class)),
        _ => {}
    }
    if app_type == Some(SparkAppType::Jvm) && !job.py_files.is_empty() {
        c.conflict(
            root.field("pyFiles"),
            "are for Python applications, and mainApplicationFile is a .jar",
        );
    }
}

fn spark_conf(c: &mut Checks, job: &SparkJob) {
    let conf = Path::root().field("sparkConf");
    for key in job.spark_conf.keys() {
        let path = conf.key(key);
        if let Some((_, why)) = OWNED_BY_OPERATOR.iter().find(|(k, _)| k == key) {
            c.invalid(path, format!("{key} cannot be set: {why}"));
        } else if let Some((_, field)) = SET_FROM_FIELDS.iter().find(|(k, _)| k == key) {
            c.invalid(
                path,
                format!("{key} is set from {field}; use {field} instead"),
            );
        } else if let Some((_, field)) = PREFIXES_FROM_FIELDS
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix))
        {
            c.invalid(
                path,
                format!("{key} is set from {field}; use {field} instead"),
            );
        } else if !key.starts_with("spark.") || key.len() == "spark.".len() {
            c.invalid(
                path,
                format!(
                    "{key:?} is not a Spark property (they start with spark.; Hadoop properties are spark.hadoop.*)"
                ),
            );
        } else if key.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            c.invalid(path, format!("{key:?} must not contain whitespace"));
        }
    }
}

fn restarts(c: &mut Checks, job: &SparkJob) {
    let root = Path::root();
    let on_failure = job.restart_policy == Some(SparkRestartPolicy::OnFailure);
    if on_failure && job.retries == 0 {
        c.conflict(
            root.field("retries"),
            "is required with restartPolicy OnFailure (how many times to restart, at least 1)",
        );
    }
    if !on_failure && job.retries > 0 {
        c.conflict(
            root.field("retries"),
            "needs restartPolicy: OnFailure (with Never the operator never restarts)",
        );
    }
    if let Some(interval) = job.retry_interval {
        if !on_failure {
            c.conflict(
                root.field("retryInterval"),
                "needs restartPolicy: OnFailure",
            );
        } else if interval < Duration::from_secs(1) {
            c.invalid(root.field("retryInterval"), "must be at least 1s");
        }
    }
}

/// Label keys Spark or the operators set on the application's pods.
fn spark_reserved(key: &str) -> Result<(), String> {
    let prefix = key.rsplit_once('/').map(|(prefix, _)| prefix);
    let operator = prefix.is_some_and(|p| p == "spark.operator" || p == "sparkoperator.k8s.io");
    let spark = matches!(
        key,
        "spark-role" | "spark-app-name" | "spark-app-selector" | "spark-exec-id" | "spark-version"
    );
    if operator || spark {
        return Err(format!(
            "{key:?} is reserved: Spark or the operator sets it on the application's pods"
        ));
    }
    Ok(())
}

/// A Spark version: digits and dots, optionally a suffix (`3.5.3`, `4.0.0-preview2`).
fn spark_version(version: &str) -> Result<(), String> {
    let b = version.as_bytes();
    let (numbers, suffix) = match version.find(['-', '+']) {
        Some(i) => (&version[..i], &version[i + 1..]),
        None => (version, ""),
    };
    let numbers_ok = numbers.contains('.')
        && numbers
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|c| c.is_ascii_digit()));
    let suffix_ok = suffix
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-'));
    if numbers_ok && suffix_ok && b.len() <= 63 && !version.ends_with(['-', '+']) {
        return Ok(());
    }
    Err(format!(
        "{version:?} is not a Spark version (numbers separated by dots, e.g. 3.5.3, with an optional -suffix)"
    ))
}

/// A JVM class name: dot-separated identifiers (`org.apache.spark.examples.SparkPi`).
fn main_class(class: &str) -> Result<(), String> {
    let ok = class.split('.').all(|part| {
        let mut chars = part.chars();
        chars
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
            && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    });
    if ok {
        return Ok(());
    }
    Err(format!(
        "{class:?} is not a class name (identifiers separated by dots, e.g. org.apache.spark.examples.SparkPi)"
    ))
}

/// A URI the cluster can read: `local:///path` inside the image, or a remote scheme. Paths on
/// the submitting machine, with or without `file:`, are refused: the operator submits from its
/// own pod, which cannot see them. `fragment` allows `#name` (archives take one to name the
/// directory they are extracted into).
pub(crate) fn spark_uri(uri: &str, fragment: bool) -> Result<(), String> {
    const USE_INSTEAD: &str = "use local:///… for a file inside the image, or a remote URI (s3a://, gs://, hdfs://, https://, abfss://)";
    if uri.is_empty() {
        return Err("is empty".to_string());
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{uri:?} must not contain whitespace"));
    }
    let scheme = uri.split_once(':').map(|(scheme, _)| scheme).filter(|s| {
        let mut chars = s.chars();
        // One letter is a Windows drive, not a scheme.
        s.len() > 1
            && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
    });
    let Some(scheme) = scheme else {
        return Err(format!(
            "{uri:?} is a path on this machine, which the cluster cannot read: {USE_INSTEAD}"
        ));
    };
    if !fragment && uri.contains('#') {
        return Err(format!(
            "{uri:?} has a fragment (#…), which only archives take (to name their directory)"
        ));
    }
    let rest = &uri[scheme.len() + 1..];
    match scheme.to_ascii_lowercase().as_str() {
        "file" => Err(format!(
            "{uri:?} is a file: path, which the operator would read in its own pod, not on this machine: {USE_INSTEAD}"
        )),
        "local" => {
            let path = rest.strip_prefix("//").unwrap_or("");
            let path = path.split(['#', '?']).next().unwrap_or_default();
            if path.starts_with('/') && path.len() > 1 && !path.ends_with('/') {
                Ok(())
            } else {
                Err(format!(
                    "{uri:?} is not a local URI: write local:///<absolute path inside the image>, e.g. local:///opt/spark/examples/jars/spark-examples.jar"
                ))
            }
        }
        _ => match rest.strip_prefix("//") {
            Some(after) if !after.is_empty() && !after.starts_with('#') => Ok(()),
            _ => Err(format!(
                "{uri:?} is not a URI the cluster can read: expected {scheme}://<location>"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_the_cluster_can_read() {
        for good in [
            "local:///opt/spark/examples/jars/spark-examples.jar",
            "s3a://bucket/jobs/app.jar",
            "gs://bucket/app.py",
            "hdfs://namenode:8020/apps/app.jar",
            "https://repo.example.com/app.jar",
            "abfss://container@account.dfs.core.windows.net/app.jar",
        ] {
            assert_eq!(spark_uri(good, false), Ok(()), "{good}");
        }
        assert_eq!(spark_uri("s3a://bucket/env.tar.gz#env", true), Ok(()));
        let cases = [
            ("/opt/app.jar", "is a path on this machine"),
            ("app.jar", "is a path on this machine"),
            ("./jobs/app.py", "is a path on this machine"),
            ("C:\\jobs\\app.jar", "is a path on this machine"),
            ("file:///opt/app.jar", "is a file: path"),
            ("FILE:/opt/app.jar", "is a file: path"),
            ("local:/opt/app.jar", "is not a local URI"),
            ("local://opt/app.jar", "is not a local URI"),
            ("local:///", "is not a local URI"),
            ("s3a:bucket/app.jar", "expected s3a://<location>"),
            ("s3a://", "expected s3a://<location>"),
            ("s3a://bucket/env.zip#env", "only archives take"),
            ("s3a://bucket/a b.jar", "must not contain whitespace"),
            ("", "is empty"),
        ];
        for (uri, expected) in cases {
            let error = spark_uri(uri, false).expect_err(uri);
            assert!(error.contains(expected), "{uri}: {error}");
        }
    }

    #[test]
    fn versions_and_classes() {
        for good in ["3.5.3", "3.5", "4.0.0-preview2", "3.4.1+build.7"] {
            assert_eq!(spark_version(good), Ok(()), "{good}");
        }
        for bad in ["3", "v3.5.3", "3..5", "3.5.", "3.5-", "latest", "3.5 .1"] {
            assert!(spark_version(bad).is_err(), "{bad:?}");
        }
        for good in [
            "org.apache.spark.examples.SparkPi",
            "Main",
            "a.b$Inner",
            "_x.Y1",
        ] {
            assert_eq!(main_class(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "org..Main",
            ".Main",
            "Main.",
            "1a.Main",
            "org.apache-x.Main",
        ] {
            assert!(main_class(bad).is_err(), "{bad:?}");
        }
    }
}
