//! Every job file in `examples/` loads and validates: the container, Spark, JobSet and Pod ones.

use std::path::Path;

use kubeferry_core::spec::{JobSpec, load};
use kubeferry_core::template::Params;

#[test]
fn every_example_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut params = Params::new();
    // The one required parameter of templated.yaml.
    params.insert("who".to_string(), "tester".to_string());
    let mut loaded = Vec::new();
    let mut spark = Vec::new();
    let mut jobsets = Vec::new();
    let mut pods = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.expect("a directory entry").path();
        let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
            continue;
        };
        if !matches!(ext, "yaml" | "yml" | "json") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let text = std::fs::read_to_string(&path).expect("readable");
        match load(&name, &text, &params) {
            Ok(JobSpec::Container(spec)) => loaded.push((name, spec)),
            Ok(JobSpec::Spark(spec)) => spark.push((name, spec)),
            Ok(JobSpec::JobSet(spec)) => jobsets.push((name, spec)),
            Ok(JobSpec::Pod(spec)) => pods.push((name, spec)),
            Err(error) => panic!("{name} does not validate:\n{error}"),
        }
    }
    loaded.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
    for expected in ["fail.yaml", "full.yaml", "hello.yaml", "templated.yaml"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    spark.sort_by(|a, b| a.0.cmp(&b.0));
    let spark_names: Vec<&str> = spark.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        spark_names,
        ["spark-pi-apache.yaml", "spark-pi-kubeflow.yaml"],
        "the Spark examples"
    );
    for (name, spec) in &spark {
        let operator = spec
            .operator
            .unwrap_or_else(|| panic!("{name} names its operator"));
        assert!(
            name.contains(operator.as_str()),
            "{name} runs on {operator}"
        );
        assert!(spec.check_operator(operator).is_ok(), "{name}");
        assert!(
            spec.main_application_file.starts_with("local:///"),
            "{name} runs from its image"
        );
    }
    // The examples the simulated cluster runs need nothing but sh, echo and sleep.
    for (name, spec) in &loaded {
        if name != "full.yaml" {
            assert_eq!(spec.process.command, ["sh", "-c"], "{name}");
        }
    }
    let jobset_names: Vec<&str> = jobsets.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(jobset_names, ["jobset.yaml"], "the JobSet examples");
    for (name, spec) in &jobsets {
        for rjob in &spec.replicated_jobs {
            assert_eq!(rjob.process.command, ["sh", "-c"], "{name} {}", rjob.name);
        }
    }
    let pod_names: Vec<&str> = pods.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(pod_names, ["pod.yaml"], "the Pod examples");
    for (name, spec) in &pods {
        assert_eq!(spec.process.command, ["sh", "-c"], "{name}");
    }
}

#[test]
fn templated_example_needs_its_parameter() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/templated.yaml");
    let text = std::fs::read_to_string(path).expect("readable");
    let error = load("templated.yaml", &text, &Params::new()).expect_err("who is required");
    let message = error.to_string();
    assert!(message.starts_with("templated.yaml:13:"), "{message}");
    assert!(
        message.contains("required parameter `who` is not set"),
        "{message}"
    );
}
