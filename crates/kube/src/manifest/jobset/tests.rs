//! Tests of the JobSets built from JobSet specs: where each field goes, the marks that make the
//! JobSet and its pods findable, and snapshots of whole objects (the function is deterministic,
//! so nothing is redacted).

use kubeferry_core::marks::{
    self, JOB_ID_ANNOTATION, JOB_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, SPEC_HASH_ANNOTATION,
};
use kubeferry_core::spec::{JobSpec, load};
use kubeferry_core::template::Params;

use super::*;

const JOB_ID: &str = "metaflow-run-7";

fn spec(text: &str) -> JobSetSpec {
    match load("test.yaml", text, &Params::new()) {
        Ok(JobSpec::JobSet(spec)) => spec,
        Ok(other) => panic!("not a JobSet: {other:?}"),
        Err(error) => panic!("{error}"),
    }
}

fn build(text: &str) -> Value {
    jobset_manifest(
        &spec(text),
        JOB_ID,
        &marks::jobset_object_name(JOB_ID),
        "ml",
    )
}

const EXAMPLE: &str = include_str!("../../../../../examples/jobset.yaml");

const MINIMAL: &str = "\
kind: JobSet
name: pair
replicatedJobs:
  - {name: workers, replicas: 2, image: busybox:1.36}
";

#[test]
fn the_example_builds_the_jobset_it_documents() {
    let jobset = build(EXAMPLE);
    insta::assert_yaml_snapshot!("example", jobset);
}

#[test]
fn defaults_are_written_out() {
    let jobset = build(MINIMAL);
    let spec = &jobset["spec"];
    assert_eq!(spec["failurePolicy"], json!({"maxRestarts": 0}));
    assert_eq!(
        spec["successPolicy"],
        json!({"operator": "All", "targetReplicatedJobs": []})
    );
    assert_eq!(
        spec["startupPolicy"],
        json!({"startupPolicyOrder": "AnyOrder"})
    );
    assert_eq!(spec["network"], json!({"enableDNSHostnames": true}));
    assert_eq!(spec.get("ttlSecondsAfterFinished"), None);
    let job = &spec["replicatedJobs"][0]["template"]["spec"];
    assert_eq!(job["backoffLimit"], json!(0));
    assert_eq!(job["completions"], json!(1));
    assert_eq!(job["parallelism"], json!(1));
    assert_eq!(job["podReplacementPolicy"], json!("Failed"));
    let pod = &job["template"]["spec"];
    assert_eq!(pod["restartPolicy"], json!("Never"));
    assert_eq!(pod["containers"][0]["name"], json!("main"));
    assert_eq!(pod["containers"][0]["image"], json!("busybox:1.36"));
}

#[test]
fn the_jobset_and_its_pods_carry_kubeferrys_marks() {
    let jobset = build(MINIMAL);
    let name = marks::jobset_object_name(JOB_ID);
    assert_eq!(jobset["metadata"]["name"], json!(name));
    assert_eq!(jobset["metadata"]["namespace"], json!("ml"));
    assert_eq!(
        jobset["metadata"]["labels"][MANAGED_BY_LABEL],
        json!(MANAGED_BY_VALUE)
    );
    for meta in [
        &jobset["metadata"],
        &jobset["spec"]["replicatedJobs"][0]["template"]["metadata"],
        &jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"],
    ] {
        assert_eq!(meta["labels"][JOB_ID_LABEL], json!(JOB_ID));
        assert_eq!(meta["annotations"][JOB_ID_ANNOTATION], json!(JOB_ID));
    }
    // The Jobs and pods are not container jobs': they lack the label those are selected by.
    for meta in [
        &jobset["spec"]["replicatedJobs"][0]["template"]["metadata"],
        &jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"],
    ] {
        assert_eq!(meta["labels"].get(MANAGED_BY_LABEL), None, "{meta}");
    }
    assert_eq!(
        jobset["metadata"]["annotations"][SPEC_HASH_ANNOTATION],
        json!(spec(MINIMAL).hash())
    );
    // The longest pod hostname of the set fits in a DNS label.
    assert!(format!("{name}-workers-1-0").len() <= 63);
}

#[test]
fn every_field_goes_where_the_jobset_controller_reads_it() {
    let text = "\
kind: JobSet
name: train
serviceAccount: trainer
imagePullSecrets: [regcred]
replicatedJobs:
  - name: leader
    image: registry.example.com/train:1
    imagePullPolicy: Always
    command: [python]
    args: [-m, train]
    workingDir: /work
    env: {ROLE: leader, POD: {field: podName}}
    secrets: [s3]
    resources: {cpu: 2, memory: 4Gi, gpu: 1}
    port: 29500
failurePolicy: {maxRestarts: 3}
successPolicy: {operator: Any, targetReplicatedJobs: [leader]}
startupPolicy: InOrder
network: {enableDNSHostnames: false}
ttlAfterFinished: 10m
labels: {team: ml}
annotations: {note: x}
";
    let jobset = build(text);
    let spec = &jobset["spec"];
    assert_eq!(spec["failurePolicy"]["maxRestarts"], json!(3));
    assert_eq!(
        spec["successPolicy"],
        json!({"operator": "Any", "targetReplicatedJobs": ["leader"]})
    );
    assert_eq!(
        spec["startupPolicy"]["startupPolicyOrder"],
        json!("InOrder")
    );
    assert_eq!(spec["network"]["enableDNSHostnames"], json!(false));
    assert_eq!(spec["ttlSecondsAfterFinished"], json!(600));
    assert_eq!(jobset["metadata"]["labels"]["team"], json!("ml"));
    assert_eq!(jobset["metadata"]["annotations"]["note"], json!("x"));
    let rjob = &spec["replicatedJobs"][0];
    assert_eq!(rjob["replicas"], json!(1));
    let pod = &rjob["template"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], json!("trainer"));
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
    let main = &pod["containers"][0];
    assert_eq!(main["imagePullPolicy"], json!("Always"));
    assert_eq!(main["command"], json!(["python"]));
    assert_eq!(main["args"], json!(["-m", "train"]));
    assert_eq!(main["workingDir"], json!("/work"));
    assert_eq!(
        main["env"],
        json!([
            {"name": "ROLE", "value": "leader"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        ])
    );
    assert_eq!(main["envFrom"], json!([{"secretRef": {"name": "s3"}}]));
    assert_eq!(main["resources"]["requests"]["memory"], json!("4Gi"));
    assert_eq!(main["resources"]["limits"]["nvidia.com/gpu"], json!("1"));
    assert_eq!(
        main["ports"],
        json!([{"containerPort": 29500, "protocol": "TCP"}])
    );
    assert_eq!(
        main["terminationMessagePolicy"],
        json!("FallbackToLogsOnError")
    );
}

#[test]
fn the_same_job_id_and_spec_build_the_same_object() {
    assert_eq!(build(EXAMPLE), build(EXAMPLE));
    assert_ne!(build(EXAMPLE), build(MINIMAL));
}
