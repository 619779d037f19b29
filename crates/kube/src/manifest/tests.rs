//! Tests of the Job manifests built from specs: what each option becomes, and snapshots of
//! whole manifests (the function is deterministic, so nothing is redacted).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use kubeferry_core::marks::{self, KEEP_LOG_ANNOTATION, SPEC_HASH_ANNOTATION};
use kubeferry_core::spec::{ContainerJobSpec, JobSpec, load};
use kubeferry_core::template::Params;

use super::*;

const JOB_ID: &str = "gravitino-job-42";

fn spec(text: &str) -> ContainerJobSpec {
    match load("test.yaml", text, &Params::new()) {
        Ok(JobSpec::Container(spec)) => spec,
        Ok(other) => panic!("not a container job: {other:?}"),
        Err(error) => panic!("{error}"),
    }
}

fn manifest(text: &str) -> Job {
    let spec = spec(text);
    job_manifest(&spec, JOB_ID, &marks::object_name("", JOB_ID), "default")
}

fn pod(job: &Job) -> &PodSpec {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec")
}

fn main_container(job: &Job) -> &Container {
    let containers = &pod(job).containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].name, MAIN_CONTAINER);
    &containers[0]
}

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(path).expect("example exists")
}

const MINIMAL: &str = "name: hello\nimage: busybox:1.36\n";

#[test]
fn fixed_choices_and_marks() {
    let job = manifest(MINIMAL);
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.backoff_limit, Some(0));
    assert_eq!(spec.completions, Some(1));
    assert_eq!(spec.parallelism, Some(1));
    assert_eq!(spec.suspend, None);
    assert_eq!(spec.active_deadline_seconds, None);
    assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
    assert_eq!(pod(&job).restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(marks::object_name("", JOB_ID).as_str())
    );
    assert_eq!(job.metadata.namespace.as_deref(), Some("default"));

    let template_meta = spec.template.metadata.as_ref().expect("pod metadata");
    for labels in [job.metadata.labels.as_ref(), template_meta.labels.as_ref()] {
        let labels = labels.expect("labels");
        assert_eq!(
            labels.get(MANAGED_BY_LABEL).map(String::as_str),
            Some(MANAGED_BY_VALUE)
        );
        assert_eq!(labels.get(JOB_ID_LABEL).map(String::as_str), Some(JOB_ID));
    }
    for annotations in [
        job.metadata.annotations.as_ref(),
        template_meta.annotations.as_ref(),
    ] {
        let annotations = annotations.expect("annotations");
        assert_eq!(
            annotations.get(JOB_ID_ANNOTATION).map(String::as_str),
            Some(JOB_ID)
        );
    }
    let hash = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SPEC_HASH_ANNOTATION));
    assert_eq!(hash, Some(&self::spec(MINIMAL).hash()));
    assert_eq!(
        main_container(&job).termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
}

#[test]
fn long_job_ids_are_hashed_in_the_label_and_kept_whole_in_the_annotation() {
    let id = format!("workflow/{}/step", "x".repeat(80));
    let job = job_manifest(&spec(MINIMAL), &id, &marks::object_name("", &id), "ns");
    let labels = job.metadata.labels.as_ref().expect("labels");
    assert_eq!(
        labels.get(JOB_ID_LABEL),
        Some(&marks::job_id_label_value(&id))
    );
    assert!(labels[JOB_ID_LABEL].starts_with("h-"));
    let annotations = job.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.get(JOB_ID_ANNOTATION), Some(&id));
}

#[test]
fn resources_follow_the_qos_class() {
    // (resources in the file, requests, limits) as name=value lists.
    let cases = [
        ("{cpu: 100m, memory: 64Mi}", "cpu=100m,memory=64Mi", ""),
        (
            "{cpu: 1, memory: 1Gi, disk: 5Gi, qos: Guaranteed}",
            "cpu=1,ephemeral-storage=5Gi,memory=1Gi",
            "cpu=1,ephemeral-storage=5Gi,memory=1Gi",
        ),
        (
            "{cpu: 500m, memory: 1Gi, limits: {memory: 2Gi}}",
            "cpu=500m,memory=1Gi",
            "memory=2Gi",
        ),
        ("{gpu: 2}", "nvidia.com/gpu=2", "nvidia.com/gpu=2"),
        (
            "{gpu: 1, gpuVendor: amd, cpu: 1}",
            "amd.com/gpu=1,cpu=1",
            "amd.com/gpu=1",
        ),
        (
            "{extended: {example.com/fpga: 2}}",
            "example.com/fpga=2",
            "example.com/fpga=2",
        ),
        ("{cpu: 1000m, memory: 1024Mi}", "cpu=1,memory=1Gi", ""),
    ];
    for (resources, requests, limits) in cases {
        let job = manifest(&format!("{MINIMAL}resources: {resources}\n"));
        let r = main_container(&job).resources.as_ref().expect("resources");
        let show = |m: &Option<BTreeMap<String, K8sQuantity>>| {
            m.iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.0))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(show(&r.requests), requests, "{resources}");
        assert_eq!(show(&r.limits), limits, "{resources}");
    }
    assert_eq!(main_container(&manifest(MINIMAL)).resources, None);
}

#[test]
fn kueue_jobs_are_labelled_and_suspended() {
    let job = manifest(&format!("{MINIMAL}queue: team-a\n"));
    assert_eq!(job.spec.as_ref().and_then(|s| s.suspend), Some(true));
    let labels = job.metadata.labels.as_ref().expect("labels");
    assert_eq!(
        labels.get(KUEUE_QUEUE_LABEL).map(String::as_str),
        Some("team-a")
    );
}

#[test]
fn pod_failure_policy_ignores_disruptions_first() {
    let job = manifest(&format!(
        "{MINIMAL}retries: 3\npodFailurePolicy: {{failOnExitCodes: [42, 3], ignoreDisruptions: true}}\n"
    ));
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.backoff_limit, Some(3));
    let rules = &spec.pod_failure_policy.as_ref().expect("a policy").rules;
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].action, "Ignore");
    let conditions = rules[0].on_pod_conditions.as_ref().expect("conditions");
    assert_eq!(conditions[0].type_, "DisruptionTarget");
    assert_eq!(rules[1].action, "FailJob");
    let codes = rules[1].on_exit_codes.as_ref().expect("exit codes");
    assert_eq!(codes.values, [3, 42]);
    assert_eq!(codes.container_name.as_deref(), Some(MAIN_CONTAINER));
    assert_eq!(codes.operator, "In");
}

#[test]
fn without_retries_the_containers_own_exit_code_decides_before_a_disruption() {
    let job = manifest(&format!(
        "{MINIMAL}podFailurePolicy: {{failOnExitCodes: [42]}}\n"
    ));
    let rules = &job
        .spec
        .as_ref()
        .expect("spec")
        .pod_failure_policy
        .as_ref()
        .expect("a policy")
        .rules;
    let shapes: Vec<(&str, Option<&str>, Vec<i32>)> = rules
        .iter()
        .map(|rule| {
            let codes = rule.on_exit_codes.as_ref();
            (
                rule.action.as_str(),
                codes.map(|c| c.operator.as_str()),
                codes.map(|c| c.values.clone()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            // The container's own codes: not a stopping signal's, not the job file's.
            ("FailJob", Some("NotIn"), vec![0, 42, 137, 143]),
            // A disruption (the pod's DisruptionTarget condition).
            ("FailJob", None, vec![]),
            // The job file's codes.
            ("FailJob", Some("In"), vec![42]),
            // Any other failure: a signal no disruption sent (an OOM kill).
            ("FailJob", Some("NotIn"), vec![0]),
        ]
    );
    assert_eq!(
        rules[1].on_pod_conditions.as_ref().expect("conditions")[0].type_,
        "DisruptionTarget"
    );
}

#[test]
fn deadlines_and_ttl_are_seconds_on_the_job() {
    let job = manifest(&format!("{MINIMAL}timeout: 1h30m\nttlAfterFinished: 10m\n"));
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.active_deadline_seconds, Some(5400));
    assert_eq!(spec.ttl_seconds_after_finished, Some(600));
    assert_eq!(pod(&job).active_deadline_seconds, None);
}

#[test]
fn volumes_and_mounts() {
    let job = manifest(&format!(
        "{MINIMAL}tmpfs: {{path: /scratch, size: 1Gi}}\nsharedMemory: 256Mi\npersistentVolumeClaims: {{b.claim: /b, a-claim: /a}}\n"
    ));
    let volumes = pod(&job).volumes.as_ref().expect("volumes");
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["tmpfs", "shm", "pvc-0", "pvc-1"]);
    let claims: Vec<&str> = volumes
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    assert_eq!(claims, ["a-claim", "b.claim"]);
    let shm = volumes[1].empty_dir.as_ref().expect("an emptyDir");
    assert_eq!(shm.medium.as_deref(), Some("Memory"));
    assert_eq!(shm.size_limit.as_ref().map(|q| q.0.as_str()), Some("256Mi"));
    let mounts: Vec<(&str, &str)> = main_container(&job)
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert_eq!(
        mounts,
        [
            ("tmpfs", "/scratch"),
            ("shm", "/dev/shm"),
            ("pvc-0", "/a"),
            ("pvc-1", "/b")
        ]
    );
}

#[test]
fn same_input_same_manifest() {
    let text = example("full.yaml");
    let a = job_manifest(&spec(&text), JOB_ID, "train-1", "ml");
    let b = job_manifest(&spec(&text), JOB_ID, "train-1", "ml");
    assert_eq!(a, b);
}

#[test]
fn snapshots() {
    let cases = [
        ("hello", example("hello.yaml")),
        ("fail", example("fail.yaml")),
        ("full", example("full.yaml")),
        ("indexed", example("indexed.yaml")),
        (
            "guaranteed_gpu_kueue",
            format!(
                "{MINIMAL}resources: {{cpu: 2, memory: 4Gi, gpu: 1, qos: Guaranteed}}\nqueue: gpu-queue\ntimeout: 10m\n"
            ),
        ),
    ];
    for (name, text) in cases {
        let spec = spec(&text);
        let job = job_manifest(&spec, JOB_ID, &marks::object_name("", JOB_ID), "default");
        insta::assert_yaml_snapshot!(name, job);
    }
}

#[test]
fn sidecars_are_init_containers_the_kubelet_keeps_running() {
    let job = manifest(
        "name: hello\nimage: busybox\nsidecars:\n  - name: shipper\n    image: fluent/fluent-bit:3.1\n    imagePullPolicy: Always\n    command: [fluent-bit]\n    args: [-q]\n    env: {LEVEL: info}\n    resources: {cpu: 100m, memory: 64Mi}\n    ports: [2020, 2021]\n  - name: proxy\n    image: envoyproxy/envoy:v1.31\n",
    );
    let pod = pod(&job);
    let init = pod.init_containers.as_ref().expect("init containers");
    assert_eq!(
        init.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["shipper", "proxy"],
        "in the order written: the kubelet starts them in turn"
    );
    let shipper = &init[0];
    assert_eq!(shipper.restart_policy.as_deref(), Some("Always"));
    assert_eq!(shipper.image.as_deref(), Some("fluent/fluent-bit:3.1"));
    assert_eq!(shipper.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        shipper.command.as_deref(),
        Some(&["fluent-bit".to_string()][..])
    );
    assert_eq!(shipper.args.as_deref(), Some(&["-q".to_string()][..]));
    let env = shipper.env.as_ref().expect("env");
    assert_eq!(
        (env[0].name.as_str(), env[0].value.as_deref()),
        ("LEVEL", Some("info"))
    );
    let resources = shipper.resources.as_ref().expect("resources");
    let requests = resources.requests.as_ref().expect("requests");
    assert_eq!(requests["cpu"].0, "100m");
    assert_eq!(requests["memory"].0, "64Mi");
    let ports: Vec<i32> = shipper
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(ports, [2020, 2021]);
    assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
    assert_eq!(init[1].resources, None);
    // The job's own container is still the only regular one, and still `main`.
    main_container(&job);
    // Without sidecars, no init containers at all.
    assert_eq!(pod_of_minimal().init_containers, None);
}

fn pod_of_minimal() -> PodSpec {
    pod(&manifest("name: hello\nimage: busybox\n")).clone()
}

#[test]
fn indexed_jobs_are_indexed_jobs_with_their_options() {
    let job = manifest(&format!(
        "{MINIMAL}indexed: true\ncompletions: 10\nparallelism: 3\nbackoffLimitPerIndex: 2\nmaxFailedIndexes: 4\nsuccessPolicy: [{{succeededIndexes: \"0,2-4\", succeededCount: 2}}, {{succeededCount: 9}}]\npodFailurePolicy: {{failOnExitCodes: [1], failIndexOnExitCodes: [42, 3], ignoreDisruptions: true}}\n"
    ));
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(spec.completions, Some(10));
    assert_eq!(spec.parallelism, Some(3));
    assert_eq!(spec.backoff_limit_per_index, Some(2));
    assert_eq!(spec.max_failed_indexes, Some(4));
    // No retries: Kubernetes defaults backoffLimit to its maximum, so only the per-index
    // limit counts.
    assert_eq!(spec.backoff_limit, None);
    let rules = &spec
        .success_policy
        .as_ref()
        .expect("a success policy")
        .rules;
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].succeeded_indexes.as_deref(), Some("0,2-4"));
    assert_eq!(rules[0].succeeded_count, Some(2));
    assert_eq!(rules[1].succeeded_indexes, None);
    assert_eq!(rules[1].succeeded_count, Some(9));
    let rules = &spec.pod_failure_policy.as_ref().expect("a policy").rules;
    let actions: Vec<&str> = rules.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["Ignore", "FailJob", "FailIndex"]);
    let codes = rules[2].on_exit_codes.as_ref().expect("exit codes");
    assert_eq!(codes.values, [3, 42]);
    assert_eq!(codes.container_name.as_deref(), Some(MAIN_CONTAINER));
    assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));

    // retries still caps the failures of all indexes together when given.
    let job = manifest(&format!(
        "{MINIMAL}indexed: true\ncompletions: 2\nbackoffLimitPerIndex: 1\nretries: 5\n"
    ));
    assert_eq!(job.spec.as_ref().and_then(|s| s.backoff_limit), Some(5));
    // Without backoffLimitPerIndex, retries count over all indexes, as in Kubernetes.
    let job = manifest(&format!("{MINIMAL}indexed: true\ncompletions: 2\n"));
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.backoff_limit, Some(0));
    assert_eq!(spec.parallelism, Some(1));
    assert_eq!(spec.success_policy, None);
}

#[test]
fn jobs_without_indexed_fields_are_unchanged() {
    let job = manifest(MINIMAL);
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.completion_mode, None);
    assert_eq!(spec.backoff_limit_per_index, None);
    assert_eq!(spec.max_failed_indexes, None);
    assert_eq!(spec.success_policy, None);
}

#[test]
fn a_job_that_keeps_more_of_its_log_says_so_on_its_object_alone() {
    let keeping = format!("{MINIMAL}keepLog: {{lines: 300, bytes: 8Ki}}\n");
    let job = manifest(&keeping);
    let annotations = job.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations.get(KEEP_LOG_ANNOTATION).map(String::as_str),
        Some("lines=300,bytes=8192")
    );
    let pod_annotations = pod_template_annotations(&job);
    assert!(!pod_annotations.contains_key(KEEP_LOG_ANNOTATION));
    // What is kept is not what runs: the spec's hash does not change.
    assert_eq!(spec(&keeping).hash(), spec(MINIMAL).hash());
    assert!(
        !manifest(MINIMAL)
            .metadata
            .annotations
            .unwrap()
            .contains_key(KEEP_LOG_ANNOTATION)
    );
    // Without bytes, 16 KiB.
    let default_bytes = manifest(&format!("{MINIMAL}keepLog: {{lines: 10}}\n"));
    assert_eq!(
        default_bytes.metadata.annotations.unwrap()[KEEP_LOG_ANNOTATION],
        "lines=10,bytes=16384"
    );
}

fn pod_template_annotations(job: &Job) -> std::collections::BTreeMap<String, String> {
    job.spec
        .as_ref()
        .and_then(|spec| spec.template.metadata.as_ref())
        .and_then(|meta| meta.annotations.clone())
        .unwrap_or_default()
}
