//! What kubeferry writes into a SparkApplication is what a real cluster keeps: every field the
//! manifest builder can write, for both operators, survives the bundled CRDs' structural
//! schemas (a field the real CRD does not have would be pruned silently, and the operator would
//! never see it). And the Kubeflow operator's admission webhook admits every job: names that
//! start with a digit run.

use std::collections::BTreeMap;
use std::time::Duration;

use kubeferry_core::JobState;
use kubeferry_core::marks::dns1035_object_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::spec::{
    PullPolicy, RetainPolicy, SparkJob, SparkJobSpec, SparkMemory, SparkPod, SparkRestartPolicy,
};
use kubeferry_kube::manifest::spark::spark_application;
use kubeferry_sim::controllers::spark::SparkFault;
use serde_json::Value;

use crate::support::{Env, NS, job_id, run_to_end, spec};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A job that sets every option `operator` honours. The struct is written out field by field
/// (no `..Default::default()`), so a new option does not compile until it is set here, and so
/// until what the builder writes for it has been checked against the schemas.
fn every_option(operator: SparkOperator, python: bool) -> SparkJobSpec {
    let apache = operator == SparkOperator::Apache;
    let pod = |instances: Option<u32>| SparkPod {
        cores: Some(2),
        memory: Some(SparkMemory::parse("2g").expect("memory")),
        instances,
        env: map(&[("LOG_LEVEL", "info")]),
    };
    let job = SparkJob {
        name: "every-option".into(),
        namespace: Some(NS.into()),
        operator: Some(operator),
        spark_version: "4.0.0".into(),
        image: "registry.example.com/etl:4.0.0".into(),
        image_pull_policy: Some(PullPolicy::IfNotPresent),
        image_pull_secrets: vec!["regcred".into(), "mirror".into()],
        main_application_file: if python {
            "s3a://jobs/etl/main.py".into()
        } else {
            "s3a://jobs/etl/etl.jar".into()
        },
        main_class: (!python).then(|| "com.example.etl.Main".into()),
        args: vec!["--date".into(), "2025-06-09".into()],
        jars: vec!["s3a://jobs/lib/postgresql.jar".into()],
        py_files: if python {
            vec!["s3a://jobs/lib/helpers.zip".into()]
        } else {
            Vec::new()
        },
        files: vec!["hdfs://nn:8020/conf/etl.conf".into()],
        archives: vec!["gs://bucket/resources.zip#resources".into()],
        spark_conf: map(&[("spark.sql.shuffle.partitions", "200")]),
        driver: pod(None),
        executor: pod(Some(3)),
        service_account: Some("spark".into()),
        restart_policy: Some(SparkRestartPolicy::OnFailure),
        retries: 2,
        retry_interval: Some(Duration::from_secs(60)),
        driver_start_timeout: apache.then_some(Duration::from_secs(600)),
        driver_ready_timeout: apache.then_some(Duration::from_secs(300)),
        executor_start_timeout: apache.then_some(Duration::from_secs(120)),
        retain_resources: apache.then_some(RetainPolicy::OnFailure),
        retain_resources_for: apache.then_some(Duration::from_secs(3600)),
        ttl_after_stop: Some(Duration::from_secs(86400)),
        labels: map(&[("team", "data")]),
        annotations: map(&[("note", "nightly")]),
        keep_log: None,
    };
    SparkJobSpec::new(job).unwrap_or_else(|e| panic!("{e}"))
}

/// Every leaf of `value` (a scalar, an empty list or an empty map) with its JSON pointer.
fn leaves(value: &Value, at: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                leaves(child, format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                leaves(child, format!("{at}/{i}"), out);
            }
        }
        leaf => out.push((at, leaf.clone())),
    }
}

#[tokio::test]
async fn every_field_the_builder_writes_survives_the_crd_schemas() {
    let env = Env::start().await;
    // The operators stay idle: this is about what the API server keeps.
    env.faults.set(Some(SparkFault::NoStatus));
    for operator in [SparkOperator::Apache, SparkOperator::Kubeflow] {
        for python in [false, true] {
            let spec = every_option(operator, python);
            let job = job_id("schema");
            let name = dns1035_object_name("", &job);
            let built = spark_application(&spec, operator, &job, &name, NS)
                .unwrap_or_else(|e| panic!("{e}"));
            let mut written = Vec::new();
            leaves(&built, String::new(), &mut written);
            assert!(written.len() > 40, "{operator}: {written:?}");
            env.sim
                .create(NS, built.clone())
                .unwrap_or_else(|e| panic!("{operator} python={python}: {e}"));
            let stored = env.app(operator, &name).expect("stored");
            let lost: Vec<&(String, Value)> = written
                .iter()
                .filter(|(path, value)| stored.pointer(path) != Some(value))
                .collect();
            assert!(
                lost.is_empty(),
                "{operator} (python={python}): the CRD schema drops or changes {lost:?}"
            );
            // What the server adds is the schema's defaults and the object's metadata.
            let mut kept = Vec::new();
            leaves(&stored["spec"], "/spec".into(), &mut kept);
            let added: Vec<&str> = kept
                .iter()
                .filter(|(path, _)| built.pointer(path).is_none())
                .map(|(path, _)| path.as_str())
                .collect();
            let expected: &[&str] = match operator {
                SparkOperator::Apache => {
                    &["/spec/applicationTolerations/restartConfig/restartCounterResetMillis"]
                }
                SparkOperator::Kubeflow => &[],
            };
            assert_eq!(added, expected, "{operator} (python={python})");
        }
    }
}

#[tokio::test]
async fn kubeflow_runs_jobs_whose_name_or_id_starts_with_a_digit() {
    let env = Env::start().await;
    let spec = spec(
        "kind: SparkJob\nname: 9lives\noperator: kubeflow\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\nmainClass: org.apache.spark.examples.SparkPi\nargs: ['10']\nserviceAccount: spark-operator-spark\n",
    );
    for job in [job_id("9lives"), format!("42-nightly-{}", job_id("n"))] {
        let id = env
            .executor
            .submit(&spec, &job, NS)
            .await
            .unwrap_or_else(|e| panic!("{job}: {e}"));
        assert!(
            id.name.starts_with(|c: char| c.is_ascii_lowercase()),
            "{}",
            id.name
        );
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(end.state, JobState::Succeeded, "{job}: {end:?}");
    }
}
