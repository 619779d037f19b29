//! The SparkApplication that runs a Spark job spec, for either operator: a pure function of the
//! spec, the operator and the job's identity, so the same job id and spec always give the same
//! object.
//!
//! Both operators get the same marks as a container job's Job: labels
//! `app.kubernetes.io/managed-by=kubeferry` and `kubeferry.dev/job-id` on the application and on
//! its driver and executor pods (so they are found by label), the full job id as an annotation
//! on all of them and the spec hash on the application.
//!
//! apache/spark-kubernetes-operator (`spark.apache.org/v1`) reads the application resource and
//! the main class from the spec (`jars` for a JVM application, `pyFiles` for a Python one; its
//! submission worker takes the first one it finds as the primary resource), and everything else
//! from Spark properties, so:
//! - image, pull policy and secrets, cores, memory, executor count, service account and
//!   environment become the `spark.*` properties Spark reads them from;
//! - more jars go to `spark.jars` (after the main jar, as spark-submit does), more Python files
//!   to `spark.submit.pyFiles`, files to `spark.files` and archives to `spark.archives` (the
//!   operator does not read `spec.files`);
//! - the pod labels and annotations go into the driver's and executors' pod templates
//!   (`driverSpec`/`executorSpec.podTemplateSpec.metadata`);
//! - restarts, timeouts, retention and the TTL go into `applicationTolerations`, in
//!   milliseconds; the restart policy is always written (`Never` by default), since the status
//!   mapping reads it.
//!
//! The Kubeflow spark-operator (`sparkoperator.k8s.io/v1beta2`) has a field for nearly each of
//! them: `type` (`Scala` for a jar, the operator treats Java and Scala alike; `Python` with
//! `pythonVersion: "3"` for a `.py` file), `mode: cluster`, `deps`, `driver`/`executor` with
//! `cores`, `memory`, `instances`, `env`, `serviceAccount`, `labels`, `annotations`,
//! `restartPolicy` (retries and intervals for runs and for submissions alike) and
//! `timeToLiveSeconds`. It has no driver timeouts and no retention: a spec that sets them is
//! refused before anything is built ([`SparkJobSpec::check_operator`]).

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::ApiResource;
use kubeferry_core::SpecError;
use kubeferry_core::marks::RECORD_FINALIZER;
use kubeferry_core::spark::{SPARK_APPLICATION_KIND, SPARK_APPLICATIONS, SparkOperator};
use kubeferry_core::spec::{SparkAppType, SparkJobSpec, SparkRestartPolicy};
use serde_json::{Map, Value, json};

use super::{Marked, Marks};

/// The wait before a restart when the spec gives none (the apache operator's own default).
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// The Kubernetes API resource of `operator`'s SparkApplications, for a kube `Api<DynamicObject>`.
pub fn api_resource(operator: SparkOperator) -> ApiResource {
    ApiResource {
        group: operator.group().to_string(),
        version: operator.version().to_string(),
        api_version: operator.api_version(),
        kind: SPARK_APPLICATION_KIND.to_string(),
        plural: SPARK_APPLICATIONS.to_string(),
    }
}

/// Builds the SparkApplication that runs `spec` on `operator` for the caller's `job_id`, named
/// `object_name` (see [`kubeferry_core::marks::object_name`]) in `namespace` (the spec's, or
/// the caller's default). Refuses (naming each field) a spec that sets what `operator` cannot
/// honour.
pub fn spark_application(
    spec: &SparkJobSpec,
    operator: SparkOperator,
    job_id: &str,
    object_name: &str,
    namespace: &str,
) -> Result<Value, SpecError> {
    spec.check_operator(operator)?;
    // The application carries its pods' labels, and its own annotations.
    let marks = spec.marks(job_id);
    let body = match operator {
        SparkOperator::Apache => apache_spec(spec, &marks),
        SparkOperator::Kubeflow => kubeflow_spec(spec, &marks),
    };
    Ok(json!({
        "apiVersion": operator.api_version(),
        "kind": SPARK_APPLICATION_KIND,
        "metadata": {
            "name": object_name,
            "namespace": namespace,
            "labels": marks.labels,
            "annotations": marks.object_annotations,
            "finalizers": [RECORD_FINALIZER],
        },
        "spec": body,
    }))
}

/// The labels and annotations of a driver's or an executor's pod.
fn pod_metadata(marks: &Marks) -> Value {
    json!({"labels": marks.labels, "annotations": marks.annotations})
}

fn apache_spec(spec: &SparkJobSpec, marks: &Marks) -> Value {
    let python = spec.application_type() == Some(SparkAppType::Python);
    let mut conf: BTreeMap<String, String> = BTreeMap::new();
    let mut set = |key: &str, value: String| {
        conf.insert(key.to_string(), value);
    };
    set("spark.kubernetes.container.image", spec.image.clone());
    if let Some(policy) = spec.image_pull_policy {
        set(
            "spark.kubernetes.container.image.pullPolicy",
            policy.as_str().to_string(),
        );
    }
    if !spec.image_pull_secrets.is_empty() {
        set(
            "spark.kubernetes.container.image.pullSecrets",
            spec.image_pull_secrets.join(","),
        );
    }
    for (side, pod) in [("driver", &spec.driver), ("executor", &spec.executor)] {
        if let Some(cores) = pod.cores {
            set(&format!("spark.{side}.cores"), cores.to_string());
        }
        if let Some(memory) = pod.memory {
            set(&format!("spark.{side}.memory"), memory.to_string());
        }
    }
    if let Some(instances) = spec.executor.instances {
        set("spark.executor.instances", instances.to_string());
    }
    if let Some(account) = &spec.service_account {
        for side in ["driver", "executor"] {
            set(
                &format!("spark.kubernetes.authenticate.{side}.serviceAccountName"),
                account.clone(),
            );
        }
    }
    for (name, value) in &spec.driver.env {
        set(&format!("spark.kubernetes.driverEnv.{name}"), value.clone());
    }
    for (name, value) in &spec.executor.env {
        set(&format!("spark.executorEnv.{name}"), value.clone());
    }
    if !spec.jars.is_empty() {
        // The main jar stays on the class path, as spark-submit keeps it.
        let jars: Vec<&str> = (!python)
            .then_some(spec.main_application_file.as_str())
            .into_iter()
            .chain(spec.jars.iter().map(String::as_str))
            .collect();
        set("spark.jars", jars.join(","));
    }
    let lists = [
        ("spark.submit.pyFiles", &spec.py_files),
        ("spark.files", &spec.files),
        ("spark.archives", &spec.archives),
    ];
    for (key, uris) in lists {
        if !uris.is_empty() {
            set(key, uris.join(","));
        }
    }
    // Validation refused every key set above, so the user's properties only add to them.
    for (key, value) in &spec.spark_conf {
        set(key, value.clone());
    }

    let mut body = Map::new();
    if python {
        body.insert("pyFiles".into(), json!(spec.main_application_file));
    } else {
        body.insert("jars".into(), json!(spec.main_application_file));
    }
    if let Some(class) = &spec.main_class {
        body.insert("mainClass".into(), json!(class));
    }
    if !spec.args.is_empty() {
        body.insert("driverArgs".into(), json!(spec.args));
    }
    body.insert(
        "runtimeVersions".into(),
        json!({"sparkVersion": spec.spark_version}),
    );
    body.insert("sparkConf".into(), json!(conf));
    for side in ["driverSpec", "executorSpec"] {
        body.insert(
            side.into(),
            json!({"podTemplateSpec": {"metadata": pod_metadata(marks)}}),
        );
    }
    body.insert("applicationTolerations".into(), apache_tolerations(spec));
    Value::Object(body)
}

fn apache_tolerations(spec: &SparkJobSpec) -> Value {
    let mut restart = Map::new();
    let policy = spec.restart_policy.unwrap_or(SparkRestartPolicy::Never);
    restart.insert("restartPolicy".into(), json!(policy.as_str()));
    if policy == SparkRestartPolicy::OnFailure {
        restart.insert("maxRestartAttempts".into(), json!(spec.retries));
        restart.insert(
            "restartBackoffMillis".into(),
            json!(millis(retry_interval(spec))),
        );
    }
    let mut tolerations = Map::new();
    tolerations.insert("restartConfig".into(), Value::Object(restart));
    let mut timeouts = Map::new();
    if let Some(timeout) = spec.driver_start_timeout {
        timeouts.insert("driverStartTimeoutMillis".into(), json!(millis(timeout)));
    }
    if let Some(timeout) = spec.driver_ready_timeout {
        timeouts.insert("driverReadyTimeoutMillis".into(), json!(millis(timeout)));
    }
    if let Some(timeout) = spec.executor_start_timeout {
        timeouts.insert("executorStartTimeoutMillis".into(), json!(millis(timeout)));
    }
    if !timeouts.is_empty() {
        tolerations.insert("applicationTimeoutConfig".into(), Value::Object(timeouts));
    }
    if let Some(policy) = spec.retain_resources {
        tolerations.insert("resourceRetainPolicy".into(), json!(policy.as_str()));
    }
    if let Some(duration) = spec.retain_resources_for {
        tolerations.insert(
            "resourceRetainDurationMillis".into(),
            json!(millis(duration)),
        );
    }
    if let Some(ttl) = spec.ttl_after_stop {
        tolerations.insert("ttlAfterStopMillis".into(), json!(millis(ttl)));
    }
    Value::Object(tolerations)
}

fn kubeflow_spec(spec: &SparkJobSpec, marks: &Marks) -> Value {
    let python = spec.application_type() == Some(SparkAppType::Python);
    let mut body = Map::new();
    if python {
        body.insert("type".into(), json!("Python"));
        body.insert("pythonVersion".into(), json!("3"));
    } else {
        body.insert("type".into(), json!("Scala"));
    }
    body.insert("sparkVersion".into(), json!(spec.spark_version));
    body.insert("mode".into(), json!("cluster"));
    body.insert("image".into(), json!(spec.image));
    if let Some(policy) = spec.image_pull_policy {
        body.insert("imagePullPolicy".into(), json!(policy.as_str()));
    }
    if !spec.image_pull_secrets.is_empty() {
        body.insert("imagePullSecrets".into(), json!(spec.image_pull_secrets));
    }
    if let Some(class) = &spec.main_class {
        body.insert("mainClass".into(), json!(class));
    }
    body.insert(
        "mainApplicationFile".into(),
        json!(spec.main_application_file),
    );
    if !spec.args.is_empty() {
        body.insert("arguments".into(), json!(spec.args));
    }
    if !spec.spark_conf.is_empty() {
        body.insert("sparkConf".into(), json!(spec.spark_conf));
    }
    let mut deps = Map::new();
    let lists = [
        ("jars", &spec.jars),
        ("pyFiles", &spec.py_files),
        ("files", &spec.files),
        ("archives", &spec.archives),
    ];
    for (name, uris) in lists {
        if !uris.is_empty() {
            deps.insert(name.into(), json!(uris));
        }
    }
    if !deps.is_empty() {
        body.insert("deps".into(), Value::Object(deps));
    }
    for (side, pod) in [("driver", &spec.driver), ("executor", &spec.executor)] {
        let mut fields = Map::new();
        if let Some(cores) = pod.cores {
            fields.insert("cores".into(), json!(cores));
        }
        if let Some(memory) = pod.memory {
            fields.insert("memory".into(), json!(memory.to_string()));
        }
        if side == "executor"
            && let Some(instances) = pod.instances
        {
            fields.insert("instances".into(), json!(instances));
        }
        if let Some(account) = &spec.service_account {
            fields.insert("serviceAccount".into(), json!(account));
        }
        if !pod.env.is_empty() {
            let env: Vec<Value> = pod
                .env
                .iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            fields.insert("env".into(), Value::Array(env));
        }
        fields.insert("labels".into(), json!(marks.labels));
        fields.insert("annotations".into(), json!(marks.annotations));
        body.insert(side.into(), Value::Object(fields));
    }
    let policy = spec.restart_policy.unwrap_or(SparkRestartPolicy::Never);
    let restart = match policy {
        SparkRestartPolicy::Never => json!({"type": "Never"}),
        SparkRestartPolicy::OnFailure => {
            let interval = retry_interval(spec).as_secs().max(1);
            json!({
                "type": "OnFailure",
                "onFailureRetries": spec.retries,
                "onFailureRetryInterval": interval,
                "onSubmissionFailureRetries": spec.retries,
                "onSubmissionFailureRetryInterval": interval,
            })
        }
    };
    body.insert("restartPolicy".into(), restart);
    if let Some(ttl) = spec.ttl_after_stop {
        body.insert("timeToLiveSeconds".into(), json!(ttl.as_secs()));
    }
    Value::Object(body)
}

fn retry_interval(spec: &SparkJobSpec) -> Duration {
    spec.retry_interval.unwrap_or(DEFAULT_RETRY_INTERVAL)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
