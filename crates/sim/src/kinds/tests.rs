//! Tests of the kind strategies: defaults and validation messages.

use serde_json::json;

use super::*;
use crate::resources::{GroupResource, Registry};

fn rt(group: &str, resource: &str) -> std::sync::Arc<ResourceType> {
    Registry::new()
        .get(&GroupResource::new(group, resource))
        .expect("built-in type")
}

#[test]
fn job_defaults_take_selector_and_labels_from_the_uid() {
    let jobs = rt("batch", "jobs");
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "hello", "namespace": "default", "uid": "u-1"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}},
        "status": {"succeeded": 5}
    });
    prepare_create(&jobs, &mut job);
    assert_eq!(job.get("status"), None, "status is dropped on create");
    assert_eq!(job["spec"]["backoffLimit"], json!(6));
    assert_eq!(job["spec"]["completions"], json!(1));
    assert_eq!(
        job["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
    );
    let labels = &job["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["job-name"], json!("hello"));
    assert_eq!(labels["controller-uid"], json!("u-1"));
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        json!("IfNotPresent")
    );
    assert!(validate(&jobs, &job, None).is_empty());
}

#[test]
fn job_without_a_restart_policy_is_invalid() {
    let jobs = rt("batch", "jobs");
    let job = json!({
        "metadata": {"name": "hello"},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    });
    let errors = validate(&jobs, &job, None);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].line(),
        "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
}

#[test]
fn pod_defaults_and_qos() {
    let pods = rt("", "pods");
    let mut pod = json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}
    });
    prepare_create(&pods, &mut pod);
    assert_eq!(pod["spec"]["restartPolicy"], json!("Always"));
    assert_eq!(pod["spec"]["serviceAccountName"], json!("default"));
    assert_eq!(
        pod["spec"]["containers"][0]["imagePullPolicy"],
        json!("Always")
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        json!("1")
    );
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "Guaranteed"})
    );
    let requests = pod_requests(&pod["spec"]);
    assert_eq!(requests.0.get("cpu"), Some(&1000));
}

#[test]
fn names_are_checked() {
    let pods = rt("", "pods");
    let errors = validate(
        &pods,
        &json!({"metadata": {"name": "Bad_Name"}, "spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}),
        None,
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].line().starts_with(
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"
        )
    );
}

#[test]
fn secrets_fold_string_data_into_data() {
    let secrets = rt("", "secrets");
    let mut secret = json!({"metadata": {"name": "s"}, "stringData": {"token": "abc"}});
    prepare_create(&secrets, &mut secret);
    assert_eq!(secret["data"]["token"], json!("YWJj"));
    assert_eq!(secret["type"], json!("Opaque"));
    assert!(secret.get("stringData").is_none());
}
