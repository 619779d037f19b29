//! Tests of loading Spark job files: every field, the Python/JVM rules, paths the cluster
//! cannot read, Spark properties the operator owns, operator support, templates and the hash.

use std::time::Duration;

use super::*;

fn params(pairs: &[(&str, &str)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn spark(source: &str, text: &str) -> SparkJobSpec {
    spark_with(source, text, &Params::new())
}

fn spark_with(source: &str, text: &str, params: &Params) -> SparkJobSpec {
    match load(source, text, params) {
        Ok(JobSpec::Spark(spec)) => spec,
        Ok(other) => panic!("{source} is not a Spark job: {other:?}"),
        Err(error) => panic!("{source} should load:\n{error}"),
    }
}

fn error(source: &str, text: &str) -> String {
    match load(source, text, &Params::new()) {
        Ok(spec) => panic!("{source} should not load: {spec:?}"),
        Err(error) => error.to_string(),
    }
}

/// The smallest SparkPi job file (the manifest tests of `kubeferry-kube` build on it too).
const MINIMAL: &str = include_str!("../../tests/fixtures/spec/spark-pi.yaml");

#[test]
fn loads_a_minimal_file() {
    let spec = spark("pi.yaml", MINIMAL);
    assert_eq!(spec.name, "pi");
    assert_eq!(spec.operator, None);
    assert_eq!(spec.spark_version, "3.5.3");
    assert_eq!(spec.application_type(), Some(SparkAppType::Jvm));
    assert_eq!(
        spec.main_class.as_deref(),
        Some("org.apache.spark.examples.SparkPi")
    );
    assert!(spec.driver.is_empty() && spec.executor.is_empty());
    assert_eq!(spec.restart_policy, None);
    assert_eq!(
        spec.operator_or(SparkOperator::Kubeflow),
        SparkOperator::Kubeflow
    );
    let spec = JobSpec::Spark(spec);
    assert_eq!(spec.kind(), JobKind::SparkApp);
    assert_eq!(spec.name(), "pi");
}

#[test]
fn loads_every_field() {
    let text = r#"
kind: SparkJob
name: etl
namespace: analytics
operator: apache
sparkVersion: "4.0.0"
image: registry.example.com/data/etl-spark:4.0.0
imagePullPolicy: IfNotPresent
imagePullSecrets: [regcred]
mainApplicationFile: s3a://jobs/etl/etl-assembly-2.3.jar
mainClass: com.example.etl.Main
args: [--date, 2025-06-09, --dry-run, no]
jars: [s3a://jobs/lib/postgresql-42.7.jar, local:///opt/extra/udfs.jar]
files: [hdfs://nn:8020/conf/etl.conf]
archives: ["gs://bucket/resources.zip#resources"]
sparkConf:
  spark.sql.shuffle.partitions: 200
  spark.hadoop.fs.s3a.path.style.access: true
driver: {cores: 1, memory: 2g, env: {LOG_LEVEL: info}}
executor: {cores: 2, memory: 4096m, instances: 5, env: {TZ: UTC}}
serviceAccount: spark
restartPolicy: OnFailure
retries: 2
retryInterval: 1m
driverStartTimeout: 10m
driverReadyTimeout: 5m
executorStartTimeout: 2m
retainResources: OnFailure
retainResourcesFor: 1h
ttlAfterStop: 1d
labels: {team: data, kueue.x-k8s.io/queue-name: spark}
annotations: {note: "nightly: all partitions"}
"#;
    let spec = spark("etl.yaml", text);
    assert_eq!(spec.operator, Some(SparkOperator::Apache));
    assert_eq!(spec.spark_version, "4.0.0");
    assert_eq!(spec.args, ["--date", "2025-06-09", "--dry-run", "no"]);
    assert_eq!(spec.jars.len(), 2);
    assert_eq!(spec.archives, ["gs://bucket/resources.zip#resources"]);
    assert_eq!(
        spec.spark_conf
            .get("spark.sql.shuffle.partitions")
            .map(String::as_str),
        Some("200")
    );
    assert_eq!(spec.driver.cores, Some(1));
    assert_eq!(
        spec.driver.memory.map(|m| m.to_string()).as_deref(),
        Some("2g")
    );
    assert_eq!(
        spec.executor.memory.map(|m| m.to_string()).as_deref(),
        Some("4g")
    );
    assert_eq!(spec.executor.instances, Some(5));
    assert_eq!(spec.executor.env.get("TZ").map(String::as_str), Some("UTC"));
    assert_eq!(spec.restart_policy, Some(SparkRestartPolicy::OnFailure));
    assert_eq!(spec.retries, 2);
    assert_eq!(spec.retry_interval, Some(Duration::from_secs(60)));
    assert_eq!(spec.driver_start_timeout, Some(Duration::from_secs(600)));
    assert_eq!(spec.executor_start_timeout, Some(Duration::from_secs(120)));
    assert_eq!(spec.retain_resources, Some(RetainPolicy::OnFailure));
    assert_eq!(spec.retain_resources_for, Some(Duration::from_secs(3600)));
    assert_eq!(spec.ttl_after_stop, Some(Duration::from_secs(86400)));
    assert_eq!(spec.check_operator(SparkOperator::Apache), Ok(()));
}

#[test]
fn python_applications_have_no_main_class() {
    let text = "\
kind: SparkJob
name: wordcount
sparkVersion: 3.5.3
image: apache/spark-py:3.5.3
mainApplicationFile: local:///opt/app/wordcount.py
pyFiles: [local:///opt/app/helpers.zip]
args: [s3a://data/in, s3a://data/out]
";
    let spec = spark("wc.yaml", text);
    assert_eq!(spec.application_type(), Some(SparkAppType::Python));
    assert_eq!(spec.main_class, None);

    let with_class = format!("{text}mainClass: org.example.Main\n");
    assert_eq!(
        error("wc.yaml", &with_class),
        "wc.yaml:8:12: mainClass: must not be set for a Python application (mainApplicationFile is a .py file, which Spark runs as the main program)"
    );
    let jar_without_class = MINIMAL.replace("mainClass: org.apache.spark.examples.SparkPi\n", "");
    assert_eq!(
        error("pi.yaml", &jar_without_class),
        "pi.yaml:1:1: mainClass: is required for a JVM application (mainApplicationFile is a .jar)"
    );
    let r_app = MINIMAL.replace("spark-examples_2.12-3.5.3.jar", "pi.R");
    assert_eq!(
        error("pi.yaml", &r_app),
        r#"pi.yaml:5:22: mainApplicationFile: "local:///opt/spark/examples/jars/pi.R" must be a .jar (a Java or Scala application) or a .py file (a Python application)"#
    );
    let py_files_for_jar = format!("{MINIMAL}pyFiles: [local:///opt/x.py]\n");
    assert_eq!(
        error("pi.yaml", &py_files_for_jar),
        "pi.yaml:7:10: pyFiles: are for Python applications, and mainApplicationFile is a .jar"
    );
}

#[test]
fn paths_the_cluster_cannot_read_are_refused() {
    let text = "\
kind: SparkJob
name: pi
sparkVersion: 3.5.3
image: apache/spark:3.5.3
mainApplicationFile: /home/me/spark-examples.jar
mainClass: org.apache.spark.examples.SparkPi
jars: [file:///home/me/lib.jar, s3a://bucket/ok.jar, lib/other.jar]
";
    let use_instead = "use local:///… for a file inside the image, or a remote URI (s3a://, gs://, hdfs://, https://, abfss://)";
    assert_eq!(
        error("pi.yaml", text),
        format!(
            "pi.yaml:5:22: mainApplicationFile: \"/home/me/spark-examples.jar\" is a path on this machine, which the cluster cannot read: {use_instead}\n\
             pi.yaml:7:8: jars[0]: \"file:///home/me/lib.jar\" is a file: path, which the operator would read in its own pod, not on this machine: {use_instead}\n\
             pi.yaml:7:54: jars[2]: \"lib/other.jar\" is a path on this machine, which the cluster cannot read: {use_instead}"
        )
    );
}

#[test]
fn spark_conf_the_operator_owns_is_refused() {
    let text = format!(
        "{MINIMAL}sparkConf:\n  spark.master: local[*]\n  spark.submit.deployMode: client\n  spark.executor.instances: 4\n  spark.executorEnv.TZ: UTC\n  hadoop.tmp.dir: /tmp\n  spark.eventLog.enabled: true\n"
    );
    assert_eq!(
        error("pi.yaml", &text),
        "pi.yaml:8:17: sparkConf.\"spark.master\": spark.master cannot be set: the operator sets it: it runs the driver on this cluster\n\
         pi.yaml:9:28: sparkConf.\"spark.submit.deployMode\": spark.submit.deployMode cannot be set: the operator sets it: it always runs the driver in cluster mode\n\
         pi.yaml:10:29: sparkConf.\"spark.executor.instances\": spark.executor.instances is set from executor.instances; use executor.instances instead\n\
         pi.yaml:11:25: sparkConf.\"spark.executorEnv.TZ\": spark.executorEnv.TZ is set from executor.env; use executor.env instead\n\
         pi.yaml:12:19: sparkConf.\"hadoop.tmp.dir\": \"hadoop.tmp.dir\" is not a Spark property (they start with spark.; Hadoop properties are spark.hadoop.*)"
    );
}

#[test]
fn spark_conf_the_kubeflow_webhook_denies_is_refused() {
    let text = format!(
        "{MINIMAL}sparkConf:\n  spark.kubernetes.driver.container.image: other:1\n  spark.kubernetes.executor.container.image: other:1\n  spark.kubernetes.driver.master: https://elsewhere\n  spark.kubernetes.authenticate.oauthToken: secret\n  spark.kubernetes.authenticate.driver.oauthTokenFile: /token\n  spark.kubernetes.authenticate.executor.oauthToken: secret\n"
    );
    let credentials = "the operator manages the credentials the driver and executors use (a service account's, see serviceAccount)";
    assert_eq!(
        error("pi.yaml", &text),
        format!(
            "pi.yaml:8:44: sparkConf.\"spark.kubernetes.driver.container.image\": spark.kubernetes.driver.container.image is set from image; use image instead\n\
             pi.yaml:9:46: sparkConf.\"spark.kubernetes.executor.container.image\": spark.kubernetes.executor.container.image is set from image; use image instead\n\
             pi.yaml:10:35: sparkConf.\"spark.kubernetes.driver.master\": spark.kubernetes.driver.master cannot be set: the operator sets it: the driver talks to this cluster's API server\n\
             pi.yaml:11:45: sparkConf.\"spark.kubernetes.authenticate.oauthToken\": spark.kubernetes.authenticate.oauthToken cannot be set: {credentials}\n\
             pi.yaml:12:56: sparkConf.\"spark.kubernetes.authenticate.driver.oauthTokenFile\": spark.kubernetes.authenticate.driver.oauthTokenFile cannot be set: {credentials}\n\
             pi.yaml:13:54: sparkConf.\"spark.kubernetes.authenticate.executor.oauthToken\": spark.kubernetes.authenticate.executor.oauthToken cannot be set: {credentials}"
        )
    );
}

#[test]
fn fields_the_operator_cannot_honour() {
    let apache_only = "driverStartTimeout: 5m\nretainResources: Always\n";
    let kubeflow = format!("{MINIMAL}operator: kubeflow\n{apache_only}");
    let why = "the kubeflow operator has no such setting (only the apache operator does); remove it or use operator: apache";
    assert_eq!(
        error("pi.yaml", &kubeflow),
        format!("pi.yaml:8:21: driverStartTimeout: {why}\npi.yaml:9:18: retainResources: {why}")
    );
    // Without an operator in the file, the caller checks against the one it resolves.
    let spec = spark("pi.yaml", &format!("{MINIMAL}{apache_only}"));
    assert_eq!(spec.check_operator(SparkOperator::Apache), Ok(()));
    let refused = spec
        .check_operator(SparkOperator::Kubeflow)
        .expect_err("kubeflow has no driver start timeout");
    assert_eq!(
        refused.to_string(),
        format!("driverStartTimeout: {why}\nretainResources: {why}")
    );
}

#[test]
fn structure_and_value_problems() {
    let cases: &[(&str, &str)] = &[
        (
            "className: Main\n",
            "t.yaml:7:1: unknown field `className`; did you mean `mainClass`?",
        ),
        (
            "driverArgs: [10]\n",
            "t.yaml:7:1: unknown field `driverArgs`; did you mean `args`?",
        ),
        (
            "driver: {cores: 0.5}\n",
            "t.yaml:7:17: driver.cores: expected a whole number, found \"0.5\"",
        ),
        (
            "driver: {memory: 512}\n",
            "t.yaml:7:18: driver.memory: \"512\" has no unit; Spark would read it as MiB: write 512m (or 2g, 512m)",
        ),
        (
            "executor: {instances: 0}\n",
            "t.yaml:7:23: executor.instances: 0 is out of range (1 to 2147483647)",
        ),
        (
            "driver: {instances: 2}\n",
            "t.yaml:7:10: driver: unknown field `instances`; did you mean `executor.instances`?",
        ),
        (
            "restartPolicy: Always\n",
            "t.yaml:7:16: restartPolicy: Always is not supported: it restarts the application after it succeeds too, so the job never ends; use OnFailure with retries",
        ),
        (
            "restartPolicy: OnFailure\n",
            "t.yaml:1:1: retries: is required with restartPolicy OnFailure (how many times to restart, at least 1)",
        ),
        (
            "retries: 2\n",
            "t.yaml:7:10: retries: needs restartPolicy: OnFailure (with Never the operator never restarts)",
        ),
        (
            "retainResourcesFor: 10m\n",
            "t.yaml:7:21: retainResourcesFor: needs retainResources: Always or OnFailure (nothing is kept otherwise)",
        ),
        (
            "operator: yarn\n",
            "t.yaml:7:11: operator: \"yarn\" is not one of apache, kubeflow",
        ),
        (
            "labels: {spark-role: driver}\n",
            "t.yaml:7:10: labels.spark-role: \"spark-role\" is reserved: Spark or the operator sets it on the application's pods",
        ),
        (
            "archives: [s3a://b/x.zip#x, s3a://b/x.zip#x]\n",
            "t.yaml:7:29: archives[1]: \"s3a://b/x.zip#x\" is listed twice",
        ),
        (
            "driver: {env: {1BAD: x}}\n",
            "t.yaml:7:16: driver.env.1BAD: \"1BAD\" is not a valid environment variable name (letters, digits and '_', not starting with a digit)",
        ),
    ];
    for (extra, want) in cases {
        let text = format!("{MINIMAL}{extra}");
        assert_eq!(error("t.yaml", &text), *want, "\n{extra}");
    }
}

#[test]
fn a_misspelt_kind_is_the_one_problem_reported() {
    let text = MINIMAL.replace("kind: SparkJob", "kind: SparkJb");
    assert_eq!(
        error("pi.yaml", &text),
        r#"pi.yaml:1:7: kind: "SparkJb" is not one of ContainerJob, SparkJob, JobSet, Pod; did you mean SparkJob?"#
    );
}

#[test]
fn templates_work_as_for_container_jobs() {
    let text = "\
kind: SparkJob
name: {{name:-pi}}
operator: {{operator}}
sparkVersion: 3.5.3
image: apache/spark:{{tag:-3.5.3}}
mainApplicationFile: local:///opt/spark/examples/jars/spark-examples.jar
mainClass: org.apache.spark.examples.SparkPi
args: ['{{partitions:-100}}']
";
    let spec = spark_with("t.yaml", text, &params(&[("operator", "kubeflow")]));
    assert_eq!(spec.name, "pi");
    assert_eq!(spec.operator, Some(SparkOperator::Kubeflow));
    assert_eq!(spec.args, ["100"]);

    let error = load("t.yaml", text, &Params::new()).expect_err("operator is required");
    assert_eq!(
        error.to_string(),
        "t.yaml:3:11: required parameter `operator` is not set"
    );
    let error = load("t.yaml", text, &params(&[("operator", "yarn")])).expect_err("bad value");
    assert_eq!(
        error.to_string(),
        "t.yaml:3:11: operator: \"yarn\" is not one of apache, kubeflow (from parameter `operator`)"
    );
}

#[test]
fn json_files_load_too() {
    let text = r#"{
  "kind": "SparkJob",
  "name": "pi",
  "sparkVersion": "3.5.3",
  "image": "apache/spark:3.5.3",
  "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
  "mainClass": "org.apache.spark.examples.SparkPi",
  "executor": {"instances": 2, "memory": "1g"}
}"#;
    let spec = spark("pi.json", text);
    assert_eq!(spec.executor.instances, Some(2));
}

#[test]
fn hash_ignores_spelling_and_sees_changes() {
    let a = spark(
        "a.yaml",
        &format!("{MINIMAL}executor: {{memory: 2048m}}\nttlAfterStop: 60m\n"),
    );
    let b = spark(
        "b.yaml",
        &format!("{MINIMAL}ttlAfterStop: 1h\nexecutor:\n  memory: 2g\n"),
    );
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 16);
    let c = spark("c.yaml", &format!("{MINIMAL}executor: {{memory: 3g}}\n"));
    assert_ne!(a.hash(), c.hash());
    let container = load(
        "d.yaml",
        "name: pi\nimage: apache/spark:3.5.3\n",
        &Params::new(),
    )
    .expect("a container job");
    assert_ne!(JobSpec::Spark(a).hash(), container.hash());
}

#[test]
fn specs_built_in_code_are_validated() {
    let spec = SparkJob {
        name: "pi".into(),
        spark_version: "3.5.3".into(),
        image: "apache/spark:3.5.3".into(),
        main_application_file: "/tmp/pi.jar".into(),
        ..SparkJob::default()
    };
    let error = SparkJobSpec::new(spec).expect_err("a local path");
    let message = error.to_string();
    assert!(
        message.starts_with("mainApplicationFile: \"/tmp/pi.jar\" is a path on this machine"),
        "{message}"
    );
}

#[test]
fn the_hash_of_every_spark_field_is_fixed() {
    // A fixed value: a change of the canonical form (durations in whole milliseconds among
    // it) would make a newer kubeferry refuse to adopt applications an older one created.
    let rich = "\
kind: SparkJob
name: pi
namespace: analytics
operator: apache
sparkVersion: 3.5.3
image: apache/spark:3.5.3
imagePullPolicy: IfNotPresent
imagePullSecrets: [registry]
mainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar
mainClass: org.apache.spark.examples.SparkPi
args: ['1000']
jars: [local:///opt/extra.jar]
files: [local:///opt/data.txt]
archives: [local:///opt/env.zip#env]
sparkConf: {spark.eventLog.enabled: 'false'}
driver: {cores: 1, memory: 512m, env: {A: x}}
executor: {cores: 2, memory: 1g, instances: 3, env: {B: y}}
serviceAccount: spark
restartPolicy: OnFailure
retries: 2
retryInterval: 1m
driverStartTimeout: 2m
driverReadyTimeout: 3m
executorStartTimeout: 4m
retainResources: OnFailure
retainResourcesFor: 1h
ttlAfterStop: 1d
labels: {team: data}
keepLog: {lines: 10}
annotations: {note: anything}
";
    assert_eq!(spark("r.yaml", rich).hash(), "2d0e82dab2425ad8");
}
