//! Tests of loading JobSet files: every field, defaults, errors at their place for every bad
//! input, names that would not fit the JobSet controller's, and the hash.

use std::time::Duration;

use super::*;

fn jobset(source: &str, text: &str) -> JobSetSpec {
    match load(source, text, &Params::new()) {
        Ok(JobSpec::JobSet(spec)) => spec,
        Ok(other) => panic!("{source} is not a JobSet: {other:?}"),
        Err(error) => panic!("{source} should load:\n{error}"),
    }
}

fn error(source: &str, text: &str) -> String {
    match load(source, text, &Params::new()) {
        Ok(spec) => panic!("{source} should not load: {spec:?}"),
        Err(error) => error.to_string(),
    }
}

/// A leader and two workers, as Metaflow's `@parallel` runs them.
const LEADER_WORKERS: &str = "\
kind: JobSet
name: train
replicatedJobs:
  - name: leader
    image: busybox:1.36
    command: [sh, -c, 'echo leading']
  - name: workers
    replicas: 2
    image: busybox:1.36
    command: [sh, -c, 'echo working']
    resources: {cpu: 500m, memory: 256Mi}
";

#[test]
fn loads_a_minimal_file_with_defaults() {
    let spec = jobset("train.yaml", LEADER_WORKERS);
    assert_eq!(spec.name, "train");
    assert_eq!(spec.namespace, None);
    let names: Vec<(&str, u32)> = spec
        .replicated_jobs
        .iter()
        .map(|r| (r.name.as_str(), r.replicas))
        .collect();
    assert_eq!(names, [("leader", 1), ("workers", 2)]);
    assert_eq!(
        spec.replicated_jobs[0].process.command,
        ["sh", "-c", "echo leading"]
    );
    assert_eq!(
        spec.replicated_jobs[1]
            .process
            .resources
            .memory
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("256Mi")
    );
    assert_eq!(spec.max_restarts, 0);
    assert_eq!(spec.success_policy, None);
    assert_eq!(spec.startup_policy, None);
    assert_eq!(spec.enable_dns_hostnames, None);
}

#[test]
fn loads_every_field() {
    let text = r#"
kind: JobSet
name: train
namespace: ml
serviceAccount: trainer
imagePullSecrets: [regcred]
replicatedJobs:
  - name: leader
    replicas: 1
    image: registry.example.com/ml/train:1.2
    imagePullPolicy: IfNotPresent
    command: [python, -m, train]
    args: [--role, leader]
    workingDir: /work
    env: {ROLE: leader, POD: {field: podName}}
    secrets: [s3-credentials]
    resources: {cpu: 2, memory: 4Gi, gpu: 1}
    port: 29500
  - name: workers
    replicas: 4
    image: registry.example.com/ml/train:1.2
    args: [--role, worker]
failurePolicy: {maxRestarts: 3}
successPolicy: {operator: Any, targetReplicatedJobs: [leader]}
startupPolicy: InOrder
network: {enableDNSHostnames: true}
ttlAfterFinished: 1h
labels: {team: ml}
annotations: {note: "nightly"}
"#;
    let spec = jobset("train.yaml", text);
    assert_eq!(spec.namespace.as_deref(), Some("ml"));
    assert_eq!(
        spec.pod_identity.service_account.as_deref(),
        Some("trainer")
    );
    assert_eq!(spec.pod_identity.image_pull_secrets, ["regcred"]);
    let leader = &spec.replicated_jobs[0];
    assert_eq!(leader.image_pull_policy, Some(PullPolicy::IfNotPresent));
    assert_eq!(leader.process.args, ["--role", "leader"]);
    assert_eq!(leader.process.working_dir.as_deref(), Some("/work"));
    assert_eq!(
        leader.process.env,
        [
            EnvVar {
                name: "ROLE".into(),
                value: EnvValue::Literal("leader".into())
            },
            EnvVar {
                name: "POD".into(),
                value: EnvValue::Field {
                    field: PodField::PodName
                }
            }
        ]
    );
    assert_eq!(leader.process.secrets, ["s3-credentials"]);
    assert_eq!(leader.process.resources.gpu, Some(1));
    assert_eq!(leader.process.port, Some(29500));
    assert_eq!(spec.replicated_jobs[1].replicas, 4);
    assert_eq!(spec.max_restarts, 3);
    assert_eq!(
        spec.success_policy,
        Some(JobSetSuccessPolicy {
            operator: SuccessOperator::Any,
            target_replicated_jobs: vec!["leader".into()],
        })
    );
    assert_eq!(spec.startup_policy, Some(StartupOrder::InOrder));
    assert_eq!(spec.enable_dns_hostnames, Some(true));
    assert_eq!(spec.ttl_after_finished, Some(Duration::from_secs(3600)));
    assert_eq!(
        spec.metadata.labels.get("team").map(String::as_str),
        Some("ml")
    );
}

#[test]
fn bad_values_are_reported_at_their_place() {
    let text = "\
kind: JobSet
name: Train
replicatedJobs:
  - name: leader
    replicas: 0
    image: ''
  - name: leader
    image: busybox:1.36
    resources: {memory: 64m}
    env: {1BAD: x}
failurePolicy: {maxRestarts: -1}
successPolicy: {operator: Some, targetReplicatedJobs: [chief]}
startupPolicy: LeaderFirst
network: {enableDNSHostnames: maybe}
";
    assert_eq!(
        error("t.yaml", text),
        "\
t.yaml:2:7: name: \"Train\" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)
t.yaml:5:15: replicatedJobs[0].replicas: 0 is out of range (1 to 2147483647)
t.yaml:6:12: replicatedJobs[0].image: is required
t.yaml:7:11: replicatedJobs[1].name: is given to two replicated jobs
t.yaml:9:25: replicatedJobs[1].resources.memory: 64m is not a whole number of bytes; m means thousandths, did you mean 64Mi?
t.yaml:10:11: replicatedJobs[1].env.1BAD: \"1BAD\" is not a valid environment variable name (letters, digits and '_', not starting with a digit)
t.yaml:11:30: failurePolicy.maxRestarts: -1 is out of range (0 to 2147483647)
t.yaml:12:27: successPolicy.operator: \"Some\" is not one of All, Any
t.yaml:13:16: startupPolicy: \"LeaderFirst\" is not one of AnyOrder, InOrder
t.yaml:14:31: network.enableDNSHostnames: expected true or false, found \"maybe\""
    );
}

#[test]
fn missing_and_unknown_fields_are_named_with_a_suggestion() {
    let text = "\
kind: JobSet
name: train
replicas: 3
replicatedJobs:
  - name: workers
    replica: 2
    image: busybox:1.36
    template: {}
failurePolicy: {backoffLimit: 2}
";
    assert_eq!(
        error("t.yaml", text),
        "\
t.yaml:3:1: unknown field `replicas`; did you mean `replicatedJobs[].replicas`?
t.yaml:6:5: replicatedJobs[0]: unknown field `replica`; did you mean `replicas`?
t.yaml:8:5: replicatedJobs[0]: unknown field `template`; did you mean `the container fields directly in the replicated job`?
t.yaml:9:17: failurePolicy: unknown field `backoffLimit`; did you mean `maxRestarts`?"
    );
    assert_eq!(
        error("t.yaml", "kind: JobSet\nname: train\n"),
        "t.yaml:1:1: replicatedJobs: is required"
    );
    assert_eq!(
        error("t.yaml", "kind: JobSet\nname: train\nreplicatedJobs: []\n"),
        "t.yaml:3:17: replicatedJobs: must list at least one replicated job (e.g. {name: workers, replicas: 2, image: ...})"
    );
    assert_eq!(
        error(
            "t.yaml",
            "kind: JobSet\nname: train\nreplicatedJobs:\n  - {replicas: 2}\n"
        ),
        "t.yaml:4:5: replicatedJobs[0].name: is required\nt.yaml:4:5: replicatedJobs[0].image: is required"
    );
    assert_eq!(
        error(
            "t.yaml",
            "kind: JobSet\nname: train\nreplicatedJobs:\n  - {name: w, image: busybox}\nsuccessPolicy: {targetReplicatedJobs: [w]}\n"
        ),
        "t.yaml:5:16: successPolicy.operator: is required"
    );
}

#[test]
fn success_policy_targets_must_be_replicated_jobs() {
    let text = "\
kind: JobSet
name: train
replicatedJobs:
  - {name: leader, image: busybox}
successPolicy: {operator: All, targetReplicatedJobs: [leader, chief, leader]}
";
    assert_eq!(
        error("t.yaml", text),
        "\
t.yaml:5:63: successPolicy.targetReplicatedJobs[1]: \"chief\" is not the name of one of replicatedJobs
t.yaml:5:70: successPolicy.targetReplicatedJobs[2]: \"leader\" is listed twice"
    );
}

#[test]
fn names_that_would_not_fit_the_pods_hostnames_are_refused() {
    let long = "w".repeat(28);
    let text = format!(
        "kind: JobSet\nname: train\nreplicatedJobs:\n  - {{name: {long}, replicas: 11, image: busybox}}\n"
    );
    assert_eq!(
        error("t.yaml", &text),
        format!(
            "t.yaml:4:12: replicatedJobs[0].name: \"{long}\" is too long for its 11 replicas: the pods' hostnames `<jobset>-{long}-<index>-0` must fit in 63 characters with a JobSet name of up to 30, which leaves 27 characters for the name"
        )
    );
    // One replica less needs one digit less.
    let fits = text.replace("replicas: 11", "replicas: 10");
    assert_eq!(jobset("t.yaml", &fits).replicated_jobs[0].name, long);
}

#[test]
fn reserved_labels_are_refused() {
    let text = "\
kind: JobSet
name: train
replicatedJobs:
  - {name: leader, image: busybox}
labels: {jobset.sigs.k8s.io/jobset-name: x, kueue.x-k8s.io/queue-name: q, kubeferry.dev/job-id: y}
";
    let message = error("t.yaml", text);
    assert!(
        message.contains("labels.\"jobset.sigs.k8s.io/jobset-name\": \"jobset.sigs.k8s.io/jobset-name\" is reserved: the JobSet controller sets it"),
        "{message}"
    );
    assert!(
        message.contains("labels.\"kueue.x-k8s.io/queue-name\": \"kueue.x-k8s.io/queue-name\" would put the JobSet in a Kueue queue"),
        "{message}"
    );
    assert!(
        message.contains("labels.\"kubeferry.dev/job-id\": \"kubeferry.dev/job-id\" is reserved: kubeferry.dev/ keys are kubeferry's own marks"),
        "{message}"
    );
}

#[test]
fn a_jobset_file_is_a_job_of_the_jobset_kind() {
    let spec = JobSpec::JobSet(jobset("t.yaml", LEADER_WORKERS));
    assert_eq!(spec.kind(), JobKind::JobSet);
    assert_eq!(spec.name(), "train");
    assert_eq!(spec.namespace(), None);
    let error = load("t.yaml", "kind: JobSets\nname: x\n", &Params::new()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "t.yaml:1:7: kind: \"JobSets\" is not one of ContainerJob, SparkJob, JobSet, Pod; did you mean JobSet?"
    );
}

#[test]
fn the_hash_ignores_formatting_and_counts_the_order_of_replicated_jobs() {
    let a = jobset("a.yaml", LEADER_WORKERS);
    let reformatted = LEADER_WORKERS.replace("cpu: 500m", "cpu: 0.5");
    let b = jobset("b.yaml", &format!("# a comment\n{reformatted}"));
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 16);
    let swapped = "\
kind: JobSet
name: train
replicatedJobs:
  - name: workers
    replicas: 2
    image: busybox:1.36
    command: [sh, -c, 'echo working']
    resources: {cpu: 500m, memory: 256Mi}
  - name: leader
    image: busybox:1.36
    command: [sh, -c, 'echo leading']
";
    assert_ne!(a.hash(), jobset("c.yaml", swapped).hash());
}

#[test]
fn a_spec_built_in_code_is_validated() {
    let job = JobSetJob {
        name: "train".into(),
        replicated_jobs: vec![ReplicatedJob {
            name: "Workers".into(),
            replicas: 1,
            image: "busybox".into(),
            ..ReplicatedJob::default()
        }],
        ..JobSetJob::default()
    };
    let error = JobSetSpec::new(job.clone()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("replicatedJobs[0].name: \"Workers\" is not a DNS-1123 label"),
        "{error}"
    );
    let mut fixed = job;
    fixed.replicated_jobs[0].name = "workers".into();
    assert_eq!(JobSetSpec::new(fixed).unwrap().replicated_jobs.len(), 1);
}

#[test]
fn the_hash_of_every_replicated_job_field_is_fixed() {
    // A fixed value: a change of the canonical form would make a newer kubeferry refuse to
    // adopt JobSets an older one created.
    let rich = "\
kind: JobSet
name: train
imagePullSecrets: [registry]
serviceAccount: runner
replicatedJobs:
  - name: workers
    replicas: 2
    image: busybox:1.36
    imagePullPolicy: IfNotPresent
    command: [sh, -c]
    args: ['echo $(A)']
    workingDir: /work
    env: {A: x, B: y}
    secrets: [creds]
    resources: {cpu: 500m, memory: 256Mi}
    port: 8080
";
    assert_eq!(jobset("r.yaml", rich).hash(), "c5841aaa856ce0e3");
}

#[test]
fn the_hash_of_every_jobset_field_is_fixed() {
    // A fixed value: the canonical form of the set's own fields, `ttlAfterFinished` in whole
    // seconds among them, is part of what makes a submission idempotent.
    let rich = "\
kind: JobSet
name: train
namespace: ml
replicatedJobs:
  - {name: leader, image: busybox:1.36}
  - {name: workers, replicas: 2, image: busybox:1.36}
failurePolicy: {maxRestarts: 3}
successPolicy: {operator: Any, targetReplicatedJobs: [leader]}
startupPolicy: InOrder
network: {enableDNSHostnames: false}
ttlAfterFinished: 1h
labels: {team: data}
keepLog: {lines: 10}
annotations: {note: anything}
";
    assert_eq!(jobset("r.yaml", rich).hash(), "943ae133d8710e32");
}
