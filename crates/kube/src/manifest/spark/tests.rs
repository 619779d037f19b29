//! Tests of the SparkApplications built from Spark job specs: where each field goes for each
//! operator, the marks that make the application and its pods findable, and snapshots of
//! whole objects (the function is deterministic, so nothing is redacted).

use kubeferry_core::marks::{
    self, JOB_ID_ANNOTATION, JOB_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, SPEC_HASH_ANNOTATION,
};
use kubeferry_core::spec::{JobSpec, load};
use kubeferry_core::template::Params;
use serde_json::json;

use super::*;

const JOB_ID: &str = "gravitino-job-42";

fn spec(text: &str) -> SparkJobSpec {
    match load("test.yaml", text, &Params::new()) {
        Ok(JobSpec::Spark(spec)) => spec,
        Ok(other) => panic!("not a Spark job: {other:?}"),
        Err(error) => panic!("{error}"),
    }
}

fn build(text: &str, operator: SparkOperator) -> Value {
    spark_application(
        &spec(text),
        operator,
        JOB_ID,
        &marks::object_name("", JOB_ID),
        "analytics",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The smallest SparkPi job file of `kubeferry-core`'s spec tests, with its argument.
const PI: &str = concat!(
    include_str!("../../../../core/tests/fixtures/spec/spark-pi.yaml"),
    "args: ['100']\n"
);

const PYTHON: &str = "\
kind: SparkJob
name: wordcount
sparkVersion: 3.5.3
image: apache/spark-py:3.5.3
mainApplicationFile: local:///opt/app/wordcount.py
pyFiles: [local:///opt/app/helpers.zip, s3a://lib/more.py]
jars: [s3a://lib/postgresql.jar]
";

const FULL: &str = r#"
kind: SparkJob
name: etl
sparkVersion: "4.0.0"
image: registry.example.com/data/etl-spark:4.0.0
imagePullPolicy: IfNotPresent
imagePullSecrets: [regcred, mirror]
mainApplicationFile: s3a://jobs/etl/etl-assembly-2.3.jar
mainClass: com.example.etl.Main
args: [--date, 2025-06-09]
jars: [s3a://jobs/lib/postgresql-42.7.jar]
files: [hdfs://nn:8020/conf/etl.conf]
archives: ["gs://bucket/resources.zip#resources"]
sparkConf: {spark.sql.shuffle.partitions: 200}
driver: {cores: 1, memory: 2g, env: {LOG_LEVEL: info}}
executor: {cores: 2, memory: 4096m, instances: 5, env: {TZ: UTC}}
serviceAccount: spark
restartPolicy: OnFailure
retries: 2
retryInterval: 1m
ttlAfterStop: 1d
labels: {team: data}
annotations: {note: nightly}
"#;

fn apache_only(text: &str) -> String {
    format!(
        "{text}driverStartTimeout: 10m\ndriverReadyTimeout: 5m\nexecutorStartTimeout: 2m\nretainResources: OnFailure\nretainResourcesFor: 1h\n"
    )
}

/// Both operators: the marks on the application and on its driver and executor pods.
#[test]
fn marks_on_the_application_and_its_pods() {
    let hash = spec(PI).hash();
    for operator in SparkOperator::ALL {
        let app = build(PI, operator);
        assert_eq!(app["apiVersion"], json!(operator.api_version()));
        assert_eq!(app["kind"], json!("SparkApplication"));
        let meta = &app["metadata"];
        assert_eq!(meta["name"], json!(marks::object_name("", JOB_ID)));
        assert_eq!(meta["namespace"], json!("analytics"));
        assert_eq!(meta["labels"][MANAGED_BY_LABEL], json!(MANAGED_BY_VALUE));
        assert_eq!(meta["labels"][JOB_ID_LABEL], json!(JOB_ID));
        assert_eq!(meta["annotations"][JOB_ID_ANNOTATION], json!(JOB_ID));
        assert_eq!(meta["annotations"][SPEC_HASH_ANNOTATION], json!(hash));
        let pods = match operator {
            SparkOperator::Apache => [
                &app["spec"]["driverSpec"]["podTemplateSpec"]["metadata"],
                &app["spec"]["executorSpec"]["podTemplateSpec"]["metadata"],
            ],
            SparkOperator::Kubeflow => [&app["spec"]["driver"], &app["spec"]["executor"]],
        };
        for pod in pods {
            assert_eq!(
                pod["labels"][MANAGED_BY_LABEL],
                json!(MANAGED_BY_VALUE),
                "{operator}"
            );
            assert_eq!(pod["labels"][JOB_ID_LABEL], json!(JOB_ID));
            assert_eq!(pod["annotations"][JOB_ID_ANNOTATION], json!(JOB_ID));
            assert_eq!(pod["annotations"].get(SPEC_HASH_ANNOTATION), None);
        }
        // Deterministic: the same job id and spec give the same object.
        assert_eq!(app, build(PI, operator));
    }
    // A job id that is not a label value is hashed in the label, kept whole in the annotation.
    let long_id = "x".repeat(80);
    let app =
        spark_application(&spec(PI), SparkOperator::Apache, &long_id, "n", "ns").expect("builds");
    let label = app["metadata"]["labels"][JOB_ID_LABEL]
        .as_str()
        .expect("a label");
    assert!(label.starts_with("h-"), "{label}");
    assert_eq!(
        app["metadata"]["annotations"][JOB_ID_ANNOTATION],
        json!(long_id)
    );
}

#[test]
fn apache_jvm_application() {
    let app = build(PI, SparkOperator::Apache);
    let spec = &app["spec"];
    assert_eq!(
        spec["jars"],
        json!("local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar")
    );
    assert_eq!(
        spec["mainClass"],
        json!("org.apache.spark.examples.SparkPi")
    );
    assert_eq!(spec["driverArgs"], json!(["100"]));
    assert_eq!(spec["runtimeVersions"], json!({"sparkVersion": "3.5.3"}));
    assert_eq!(spec.get("pyFiles"), None);
    assert_eq!(spec.get("files"), None);
    assert_eq!(
        spec["sparkConf"],
        json!({"spark.kubernetes.container.image": "apache/spark:3.5.3"})
    );
    assert_eq!(
        spec["applicationTolerations"],
        json!({"restartConfig": {"restartPolicy": "Never"}})
    );
}

#[test]
fn apache_python_application() {
    let app = build(PYTHON, SparkOperator::Apache);
    let spec = &app["spec"];
    assert_eq!(spec["pyFiles"], json!("local:///opt/app/wordcount.py"));
    assert_eq!(
        spec.get("jars"),
        None,
        "jars would make it a JVM application"
    );
    assert_eq!(spec.get("mainClass"), None);
    let conf = &spec["sparkConf"];
    assert_eq!(
        conf["spark.submit.pyFiles"],
        json!("local:///opt/app/helpers.zip,s3a://lib/more.py")
    );
    assert_eq!(conf["spark.jars"], json!("s3a://lib/postgresql.jar"));
}

#[test]
fn apache_properties_and_tolerations() {
    let app = build(&apache_only(FULL), SparkOperator::Apache);
    let spec = &app["spec"];
    let conf = &spec["sparkConf"];
    let expected = [
        (
            "spark.kubernetes.container.image",
            "registry.example.com/data/etl-spark:4.0.0",
        ),
        (
            "spark.kubernetes.container.image.pullPolicy",
            "IfNotPresent",
        ),
        (
            "spark.kubernetes.container.image.pullSecrets",
            "regcred,mirror",
        ),
        ("spark.driver.cores", "1"),
        ("spark.driver.memory", "2g"),
        ("spark.executor.cores", "2"),
        ("spark.executor.memory", "4g"),
        ("spark.executor.instances", "5"),
        (
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            "spark",
        ),
        (
            "spark.kubernetes.authenticate.executor.serviceAccountName",
            "spark",
        ),
        ("spark.kubernetes.driverEnv.LOG_LEVEL", "info"),
        ("spark.executorEnv.TZ", "UTC"),
        (
            "spark.jars",
            "s3a://jobs/etl/etl-assembly-2.3.jar,s3a://jobs/lib/postgresql-42.7.jar",
        ),
        ("spark.files", "hdfs://nn:8020/conf/etl.conf"),
        ("spark.archives", "gs://bucket/resources.zip#resources"),
        ("spark.sql.shuffle.partitions", "200"),
    ];
    for (key, value) in expected {
        assert_eq!(conf[key], json!(value), "{key}");
    }
    assert_eq!(conf.as_object().map(|c| c.len()), Some(expected.len()));
    assert_eq!(
        spec["applicationTolerations"],
        json!({
            "restartConfig": {"restartPolicy": "OnFailure", "maxRestartAttempts": 2,
                              "restartBackoffMillis": 60000},
            "applicationTimeoutConfig": {"driverStartTimeoutMillis": 600000,
                                         "driverReadyTimeoutMillis": 300000,
                                         "executorStartTimeoutMillis": 120000},
            "resourceRetainPolicy": "OnFailure",
            "resourceRetainDurationMillis": 3600000,
            "ttlAfterStopMillis": 86400000,
        })
    );
    assert_eq!(
        spec["driverSpec"]["podTemplateSpec"]["metadata"]["labels"]["team"],
        json!("data")
    );
    assert_eq!(
        spec["executorSpec"]["podTemplateSpec"]["metadata"]["annotations"]["note"],
        json!("nightly")
    );
}

#[test]
fn kubeflow_fields() {
    let app = build(FULL, SparkOperator::Kubeflow);
    let spec = &app["spec"];
    assert_eq!(spec["type"], json!("Scala"));
    assert_eq!(spec["mode"], json!("cluster"));
    assert_eq!(spec["sparkVersion"], json!("4.0.0"));
    assert_eq!(
        spec["image"],
        json!("registry.example.com/data/etl-spark:4.0.0")
    );
    assert_eq!(spec["imagePullPolicy"], json!("IfNotPresent"));
    assert_eq!(spec["imagePullSecrets"], json!(["regcred", "mirror"]));
    assert_eq!(spec["mainClass"], json!("com.example.etl.Main"));
    assert_eq!(
        spec["mainApplicationFile"],
        json!("s3a://jobs/etl/etl-assembly-2.3.jar")
    );
    assert_eq!(spec["arguments"], json!(["--date", "2025-06-09"]));
    assert_eq!(
        spec["sparkConf"],
        json!({"spark.sql.shuffle.partitions": "200"})
    );
    assert_eq!(
        spec["deps"],
        json!({
            "jars": ["s3a://jobs/lib/postgresql-42.7.jar"],
            "files": ["hdfs://nn:8020/conf/etl.conf"],
            "archives": ["gs://bucket/resources.zip#resources"],
        })
    );
    let driver = &spec["driver"];
    assert_eq!(driver["cores"], json!(1));
    assert_eq!(driver["memory"], json!("2g"));
    assert_eq!(driver["serviceAccount"], json!("spark"));
    assert_eq!(
        driver["env"],
        json!([{"name": "LOG_LEVEL", "value": "info"}])
    );
    assert_eq!(driver.get("instances"), None);
    let executor = &spec["executor"];
    assert_eq!(executor["cores"], json!(2));
    assert_eq!(executor["memory"], json!("4g"));
    assert_eq!(executor["instances"], json!(5));
    assert_eq!(executor["env"], json!([{"name": "TZ", "value": "UTC"}]));
    assert_eq!(
        spec["restartPolicy"],
        json!({"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 60,
               "onSubmissionFailureRetries": 2, "onSubmissionFailureRetryInterval": 60})
    );
    assert_eq!(spec["timeToLiveSeconds"], json!(86400));

    let python = build(PYTHON, SparkOperator::Kubeflow);
    assert_eq!(python["spec"]["type"], json!("Python"));
    assert_eq!(python["spec"]["pythonVersion"], json!("3"));
    assert_eq!(python["spec"].get("mainClass"), None);
    assert_eq!(
        python["spec"]["deps"],
        json!({"jars": ["s3a://lib/postgresql.jar"],
               "pyFiles": ["local:///opt/app/helpers.zip", "s3a://lib/more.py"]})
    );
    assert_eq!(python["spec"]["restartPolicy"], json!({"type": "Never"}));
}

/// A file without `operator` is checked against the resolved one before anything is built.
#[test]
fn kubeflow_refuses_what_it_cannot_honour() {
    let spec = spec(&apache_only(PI));
    let error = spark_application(&spec, SparkOperator::Kubeflow, JOB_ID, "n", "ns")
        .expect_err("kubeflow has no driver timeouts or retention");
    let message = error.to_string();
    for field in APACHE_FIELDS {
        assert!(
            message.contains(&format!(
                "{field}: the kubeflow operator has no such setting"
            )),
            "{message}"
        );
    }
    assert!(spark_application(&spec, SparkOperator::Apache, JOB_ID, "n", "ns").is_ok());
}

const APACHE_FIELDS: [&str; 5] = [
    "driverStartTimeout",
    "driverReadyTimeout",
    "executorStartTimeout",
    "retainResources",
    "retainResourcesFor",
];

#[test]
fn api_resources() {
    let apache = api_resource(SparkOperator::Apache);
    assert_eq!(
        (
            apache.group.as_str(),
            apache.version.as_str(),
            apache.api_version.as_str()
        ),
        ("spark.apache.org", "v1", "spark.apache.org/v1")
    );
    let kubeflow = api_resource(SparkOperator::Kubeflow);
    assert_eq!(kubeflow.api_version, "sparkoperator.k8s.io/v1beta2");
    for resource in [apache, kubeflow] {
        assert_eq!(resource.kind, "SparkApplication");
        assert_eq!(resource.plural, "sparkapplications");
    }
}

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(path).expect("example exists")
}

#[test]
fn snapshots() {
    let cases = [
        (
            "example_apache",
            example("spark-pi-apache.yaml"),
            SparkOperator::Apache,
        ),
        (
            "example_kubeflow",
            example("spark-pi-kubeflow.yaml"),
            SparkOperator::Kubeflow,
        ),
        ("full_apache", apache_only(FULL), SparkOperator::Apache),
        ("full_kubeflow", FULL.to_string(), SparkOperator::Kubeflow),
        ("python_apache", PYTHON.to_string(), SparkOperator::Apache),
        (
            "python_kubeflow",
            PYTHON.to_string(),
            SparkOperator::Kubeflow,
        ),
    ];
    for (name, text, operator) in cases {
        let app = build(&text, operator);
        insta::assert_yaml_snapshot!(name, app);
    }
}
