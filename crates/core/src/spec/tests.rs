//! Tests of loading job files: every error with its position and field, and the hash.

use std::time::Duration;

use super::*;

fn params(pairs: &[(&str, &str)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn container(source: &str, text: &str) -> ContainerJobSpec {
    match load(source, text, &Params::new()) {
        Ok(JobSpec::Container(spec)) => spec,
        Ok(other) => panic!("{source} is not a container job: {other:?}"),
        Err(error) => panic!("{source} should load:\n{error}"),
    }
}

fn error(source: &str, text: &str) -> String {
    match load(source, text, &Params::new()) {
        Ok(spec) => panic!("{source} should not load: {spec:?}"),
        Err(error) => error.to_string(),
    }
}

const MINIMAL: &str = "name: hello\nimage: busybox:1.36\n";

#[test]
fn loads_a_minimal_file() {
    let spec = container("hello.yaml", MINIMAL);
    assert_eq!(spec.name, "hello");
    assert_eq!(spec.image, "busybox:1.36");
    assert_eq!(spec.namespace, None);
    assert_eq!(spec.retries, 0);
    assert!(spec.process.resources.is_empty());
}

#[test]
fn loads_every_field() {
    let text = r#"
kind: ContainerJob
name: train
namespace: ml
image: registry.example.com/ml/train:2.1
imagePullPolicy: IfNotPresent
imagePullSecrets: [regcred]
serviceAccount: trainer
command: [python, -m, train]
args: [--epochs, 3, --verbose, yes]
workingDir: /work
env:
  GREETING: hello
  PORT: 8080
  POD: {field: podName}
  NODE_IP: {field: nodeIP}
secrets: [db-creds]
resources:
  cpu: 1500m
  memory: 4Gi
  disk: 10Gi
  gpu: 2
  gpuVendor: amd
  extended: {example.com/fpga: 1}
  limits: {cpu: 2, memory: 8Gi}
port: 8080
timeout: 1h30m
retries: 2
podFailurePolicy: {failOnExitCodes: [42, 3], ignoreDisruptions: true}
ttlAfterFinished: 1d
queue: team-a
priorityClass: high
nodeSelector: {disktype: ssd}
tolerations:
  - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
  - {operator: Exists, effect: NoExecute, tolerationSeconds: 60}
labels: {team: data, app.kubernetes.io/name: train}
annotations: {note: "anything: at all"}
tmpfs: {path: /scratch, size: 1Gi}
sharedMemory: 512Mi
persistentVolumeClaims: {datasets: /data, checkpoints: /ckpt}
securityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true, allowPrivilegeEscalation: false, privileged: false}
"#;
    let spec = container("train.yaml", text);
    assert_eq!(spec.process.args, ["--epochs", "3", "--verbose", "yes"]);
    assert_eq!(
        spec.process.env,
        [
            EnvVar {
                name: "GREETING".into(),
                value: EnvValue::Literal("hello".into())
            },
            EnvVar {
                name: "PORT".into(),
                value: EnvValue::Literal("8080".into())
            },
            EnvVar {
                name: "POD".into(),
                value: EnvValue::Field {
                    field: PodField::PodName
                }
            },
            EnvVar {
                name: "NODE_IP".into(),
                value: EnvValue::Field {
                    field: PodField::NodeIp
                }
            },
        ]
    );
    assert_eq!(
        spec.process.resources.cpu.map(|q| q.to_string()).as_deref(),
        Some("1500m")
    );
    assert_eq!(spec.process.resources.gpu_vendor(), GpuVendor::Amd);
    assert_eq!(spec.timeout, Some(Duration::from_secs(5400)));
    assert_eq!(spec.ttl_after_finished, Some(Duration::from_secs(86400)));
    assert_eq!(spec.pod_failure_policy.fail_on_exit_codes, [42, 3]);
    assert!(spec.pod_failure_policy.ignore_disruptions);
    assert_eq!(spec.tolerations.len(), 2);
    assert_eq!(spec.persistent_volume_claims.len(), 2);
    assert_eq!(spec.security_context.run_as_user, Some(1000));
    let requirements = spec.process.resources.requirements();
    let show = |m: &std::collections::BTreeMap<String, Quantity>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(
        show(&requirements.requests),
        "amd.com/gpu=2,cpu=1500m,ephemeral-storage=10Gi,example.com/fpga=1,memory=4Gi"
    );
    assert_eq!(
        show(&requirements.limits),
        "amd.com/gpu=2,cpu=2,example.com/fpga=1,memory=8Gi"
    );
}

#[test]
fn json_files_load_the_same_as_yaml() {
    let json = r#"{
	"name": "hello",
	"image": "busybox:1.36",
	"command": ["sh", "-c"],
	"args": ["echo hi"],
	"resources": {"cpu": "100m", "memory": "64Mi"},
	"env": {"A": "1", "POD": {"field": "podName"}}
}"#;
    let yaml = "name: hello\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: [echo hi]\nresources: {memory: 64Mi, cpu: 0.1}\nenv: {A: '1', POD: {field: podName}}\n";
    let from_json = container("hello.json", json);
    let from_yaml = container("hello.yaml", yaml);
    assert_eq!(from_json, from_yaml);
    assert_eq!(from_json.hash(), from_yaml.hash());
}

#[test]
fn reports_errors_with_file_line_column_and_field() {
    let cases: &[(&str, &str, &str)] = &[
        // Values.
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nresources:\n  cpu: 1\n  memory: 12XB\n",
            r#"hello.yaml:5:11: resources.memory: "12XB" is not a Kubernetes quantity (a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as 1e3)"#,
        ),
        (
            "hello.yaml",
            "name: Hello_World\nimage: busybox\n",
            r#"hello.yaml:1:7: name: "Hello_World" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"#,
        ),
        // Types.
        (
            "hello.yaml",
            "name: hello\nimage: busybox\ncommand: sh -c\n",
            r#"hello.yaml:3:10: command: expected a list of strings, found "sh -c""#,
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nargs: [a, [b]]\n",
            "hello.yaml:3:11: args[1]: expected a string, found a list",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nretries: many\n",
            r#"hello.yaml:3:10: retries: expected a whole number, found "many""#,
        ),
        (
            "hello.yaml",
            "- name: hello\n",
            "hello.yaml:1:1: a job file is a mapping of fields, found a list",
        ),
        // Unknown and missing fields.
        (
            "hello.yaml",
            "name: hello\nimge: busybox\n",
            "hello.yaml:2:1: unknown field `imge`; did you mean `image`?",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nbackoffLimit: 3\n",
            "hello.yaml:3:1: unknown field `backoffLimit`; did you mean `retries`?",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nresources:\n  cpus: 1\n",
            "hello.yaml:4:3: resources: unknown field `cpus`; did you mean `cpu`?",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\ntmpfs: {size: 1Gi}\n",
            "hello.yaml:3:8: tmpfs.path: is required",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nkeepLog: {bytes: 1Ki}\n",
            "hello.yaml:3:10: keepLog.lines: is required",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nkeepLog: {lines: 9000}\n",
            "hello.yaml:3:18: keepLog.lines: 9000 is out of range (1 to 5000)",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nkeepLog:\n  lines: 10\n  bytes: 1Mi\n",
            "hello.yaml:5:10: keepLog.bytes: 1Mi is not a whole number of bytes from 1 to 64Ki",
        ),
        (
            "hello.yaml",
            "name: hello\nimage: busybox\nkeepLog: {line: 10}\n",
            "hello.yaml:3:11: keepLog: unknown field `line`; did you mean `lines`?",
        ),
        (
            "hello.yaml",
            "name: hello\nimage:\n",
            "hello.yaml:2:1: image: is required",
        ),
        // Syntax.
        (
            "hello.yaml",
            "name: hello\nimage: [busybox\n",
            "hello.yaml:3:1: invalid YAML: while parsing a flow sequence, expected ',' or ']'",
        ),
        (
            "hello.yaml",
            "name: hello\nname: again\n",
            "hello.yaml:2:1: duplicate key `name` (first at 1:1)",
        ),
        (
            "hello.json",
            "{\n  \"name\": \"hello\",\n  \"image\": \"busybox\",\n}\n",
            "hello.json:3:21: invalid JSON: trailing comma (JSON allows none)",
        ),
        (
            "empty.yaml",
            "# nothing\n",
            "empty.yaml:1:1: the file holds no job spec (it is empty)",
        ),
        // Kinds.
        (
            "spark.yaml",
            "kind: SparkJob\nname: x\n",
            "spark.yaml:1:1: sparkVersion: is required\nspark.yaml:1:1: image: is required\nspark.yaml:1:1: mainApplicationFile: is required",
        ),
        (
            "hello.yaml",
            "kind: ContainerJbo\nname: x\nimage: y\n",
            r#"hello.yaml:1:7: kind: "ContainerJbo" is not one of ContainerJob, SparkJob, JobSet, Pod; did you mean ContainerJob?"#,
        ),
    ];
    for (source, text, want) in cases {
        assert_eq!(error(source, text), *want, "\n{text}");
    }
}

#[test]
fn reports_kubernetes_limits_on_names_and_metadata_with_positions() {
    // Annotations: Kubernetes refuses more than 256 KiB of keys and values in all, and kubeferry
    // keeps 32 KiB of that for its own marks.
    let value = "x".repeat(224 * 1024 - "note".len() + 1);
    let text = format!("name: hello\nimage: busybox\nannotations:\n  note: {value}\n");
    assert_eq!(
        error("big.yaml", &text),
        "big.yaml:4:3: annotations: total 229377 bytes, more than the 224 KiB a job may use (Kubernetes allows 256 KiB; kubeferry keeps 32 KiB for its own marks)"
    );
    // Right at the limit it loads.
    let value = "x".repeat(224 * 1024 - "note".len());
    let text = format!("name: hello\nimage: busybox\nannotations:\n  note: {value}\n");
    assert_eq!(
        container("big.yaml", &text).metadata.annotations["note"],
        value
    );

    // A queue name is a label value (Kueue's queue-name label): 63 characters at most.
    let queue = "q".repeat(64);
    let text = format!("name: hello\nimage: busybox\nqueue: {queue}\n");
    assert_eq!(
        error("queue.yaml", &text),
        format!("queue.yaml:3:8: queue: \"{queue}\" is longer than a label value (63 characters)")
    );
    let text = format!("name: hello\nimage: busybox\nqueue: {}\n", &queue[..63]);
    assert_eq!(
        container("queue.yaml", &text).queue.as_deref(),
        Some(&queue[..63])
    );

    // A namespace is a DNS-1123 label.
    for (namespace, column) in [("Team_A", 12), ("-team", 12), ("\"\"", 12)] {
        let text = format!("name: hello\nimage: busybox\nnamespace: {namespace}\n");
        let got = error("ns.yaml", &text);
        assert!(
            got.starts_with(&format!("ns.yaml:3:{column}: namespace: ")),
            "{namespace}: {got}"
        );
        assert!(
            got.contains("is not a DNS-1123 label"),
            "{namespace}: {got}"
        );
    }
    let long = "n".repeat(64);
    let got = error(
        "ns.yaml",
        &format!("name: hello\nimage: busybox\nnamespace: {long}\n"),
    );
    assert_eq!(
        got,
        format!(
            "ns.yaml:3:12: namespace: \"{long}\" is not a DNS-1123 label (lowercase letters, \
             digits and '-', starting and ending with a letter or digit, at most 63 characters)"
        )
    );
}

#[test]
fn reports_every_problem_at_once() {
    let text = "name: hello\nimage: busybox\nport: 0\nretries: -1\nenv: {1BAD: x}\nlabels: {kubeferry.dev/x: y}\n";
    let got = error("many.yaml", text);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 4, "{got}");
    assert!(
        lines[0].starts_with("many.yaml:3:7: port: 0 is out of range (1 to 65535)"),
        "{got}"
    );
    assert!(
        lines[1].starts_with("many.yaml:4:10: retries: -1 is out of range"),
        "{got}"
    );
    // What validation finds comes with what decoding found, in the file's order.
    assert!(
        lines[2].starts_with("many.yaml:5:7: env.1BAD: \"1BAD\" is not a valid"),
        "{got}"
    );
    assert!(
        lines[3].starts_with(
            "many.yaml:6:10: labels.\"kubeferry.dev/x\": \"kubeferry.dev/x\" is reserved"
        ),
        "{got}"
    );
    // With the structure right, every invalid value is reported together.
    let text = "name: hello\nimage: busybox\nenv: {1BAD: x}\nlabels: {kubeferry.dev/x: y}\nresources: {gpuVendor: amd}\n";
    let got = error("many.yaml", text);
    assert_eq!(
        got,
        "many.yaml:3:7: env.1BAD: \"1BAD\" is not a valid environment variable name (letters, digits and '_', not starting with a digit)\n\
         many.yaml:4:10: labels.\"kubeferry.dev/x\": \"kubeferry.dev/x\" is reserved: kubeferry.dev/ keys are kubeferry's own marks\n\
         many.yaml:5:24: resources.gpuVendor: is set, but gpu is not"
    );
}

#[test]
fn a_bad_name_is_reported_with_the_files_other_problems() {
    // A name that is no DNS-1123 label, a bad quantity, an unknown field, a misspelt enum
    // value: one pass, in the file's order, each with its suggestion.
    let text = "name: Bad_Name\nimage: busybox\nresources: {cpu: 1x, memory: 1Gi, qos: Guarantee}\ncomand: [echo]\n";
    let got = error("bad.yaml", text);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 4, "{got}");
    assert!(lines[0].starts_with("bad.yaml:1:7: name: "), "{got}");
    assert!(lines[0].contains("is not a DNS-1123 label"), "{got}");
    assert!(
        lines[1].starts_with("bad.yaml:3:18: resources.cpu: "),
        "{got}"
    );
    assert_eq!(
        lines[2],
        "bad.yaml:3:40: resources.qos: \"Guarantee\" is not one of Burstable, Guaranteed; did you mean Guaranteed?"
    );
    assert_eq!(
        lines[3],
        "bad.yaml:4:1: unknown field `comand`; did you mean `command`?"
    );
}

#[test]
fn validation_says_nothing_more_of_fields_already_reported() {
    // `image` is missing and `nmae` is taken for `name`: each is said once, by decoding, not
    // again by validation as empty.
    let got = error("thin.yaml", "nmae: hello\n");
    assert_eq!(
        got,
        "thin.yaml:1:1: unknown field `nmae`; did you mean `name`?\n\
         thin.yaml:1:1: image: is required"
    );
    // A field whose value is refused is not validated again (no second message for `port`),
    // while the other fields are.
    let got = error("port.yaml", "name: Bad_Name\nimage: busybox\nport: x\n");
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines.len(), 2, "{got}");
    assert!(lines[0].starts_with("port.yaml:1:7: name: "), "{got}");
    assert!(lines[1].starts_with("port.yaml:3:7: port: "), "{got}");
}

#[test]
fn rejects_invalid_combinations() {
    let cases: &[(&str, &str)] = &[
        (
            "resources: {cpu: 2, limits: {cpu: 1}}",
            "resources.limits.cpu: 1 is below the request 2 (resources.cpu)",
        ),
        (
            "resources: {memory: 2Gi, limits: {memory: 1Gi}}",
            "resources.limits.memory: 1Gi is below the request 2Gi (resources.memory)",
        ),
        (
            "resources: {cpu: 1, qos: Guaranteed}",
            "resources.qos: Guaranteed needs both cpu and memory",
        ),
        (
            "resources: {cpu: 1, memory: 1Gi, qos: Guaranteed, limits: {cpu: 2}}",
            "resources.limits: qos Guaranteed sets the limits equal to the requests",
        ),
        ("resources: {gpu: 0}", "resources.gpu: must be at least 1"),
        (
            "resources: {memory: 64m}",
            "resources.memory: 64m is not a whole number of bytes; m means thousandths, did you mean 64Mi?",
        ),
        (
            "resources: {cpu: 0.0001}",
            "resources.cpu: 100u is finer than 1m",
        ),
        (
            "resources: {cpu: -1}",
            "resources.cpu: -1 must not be negative",
        ),
        (
            "resources: {extended: {fpga: 1}}",
            "resources.extended.fpga: \"fpga\" is not an extended resource name: it needs a domain",
        ),
        (
            "resources: {extended: {nvidia.com/gpu: 1}}",
            "is a GPU: use gpu (and gpuVendor) instead",
        ),
        (
            "resources: {extended: {example.com/x: 0.5}}",
            "500m is not a whole number",
        ),
        ("tmpfs: {path: /dev/shm}", "tmpfs.path: use sharedMemory"),
        (
            "tmpfs: {path: relative}",
            "tmpfs.path: \"relative\" must be an absolute path",
        ),
        (
            "tmpfs: {path: /data}\npersistentVolumeClaims: {claim: /data}",
            "persistentVolumeClaims.claim: /data is already the mount path of tmpfs.path",
        ),
        (
            "sharedMemory: 1Gi\npersistentVolumeClaims: {claim: /dev/shm}",
            "persistentVolumeClaims.claim: /dev/shm is already the mount path of sharedMemory",
        ),
        (
            "persistentVolumeClaims: {a: /x, b: /x}",
            "persistentVolumeClaims.b: /x is already the mount path of persistentVolumeClaims.a",
        ),
        (
            "resources: {memory: 1Gi, limits: {memory: 1Gi}}\nsharedMemory: 2Gi",
            "sharedMemory: 2Gi is more than the memory limit 1Gi",
        ),
        (
            "resources: {cpu: 1, memory: 1Gi, qos: Guaranteed}\ntmpfs: {path: /t, size: 2Gi}",
            "tmpfs.size: 2Gi is more than the memory limit 1Gi",
        ),
        (
            "resources: {memory: 1Gi, limits: {memory: 1Gi}}\ntmpfs: {path: /t, size: 768Mi}\nsharedMemory: 512Mi",
            "tmpfs.size: 768Mi and sharedMemory 512Mi together are more than the memory limit 1Gi",
        ),
        ("sharedMemory: 0", "sharedMemory: must be more than 0"),
        (
            "securityContext: {privileged: true, runAsNonRoot: true}",
            "securityContext.privileged: contradicts runAsNonRoot",
        ),
        (
            "securityContext: {privileged: true, allowPrivilegeEscalation: false}",
            "securityContext.allowPrivilegeEscalation: cannot be false when privileged is true",
        ),
        (
            "securityContext: {runAsNonRoot: true, runAsUser: 0}",
            "securityContext.runAsUser: is 0 (root), but runAsNonRoot is true",
        ),
        (
            "securityContext: {privileged: yes}",
            "securityContext.privileged: expected true or false, found \"yes\"",
        ),
        (
            "tolerations: [{operator: Exists, value: x}]",
            "tolerations[0].value: must be empty when operator is Exists",
        ),
        (
            "tolerations: [{value: x}]",
            "tolerations[0].key: is required unless operator is Exists",
        ),
        (
            "tolerations: [{key: k, tolerationSeconds: 5}]",
            "tolerations[0].tolerationSeconds: only applies with effect NoExecute",
        ),
        (
            "tolerations: [{key: k, effect: NoSchedul}]",
            "tolerations[0].effect: \"NoSchedul\" is not one of NoSchedule, PreferNoSchedule, NoExecute; did you mean NoSchedule?",
        ),
        (
            "labels: {app.kubernetes.io/managed-by: me}",
            "is reserved: kubeferry sets it",
        ),
        (
            "labels: {kueue.x-k8s.io/queue-name: q}",
            "is set from the queue field; use queue instead",
        ),
        (
            "labels: {batch.kubernetes.io/job-name: x}",
            "the Kubernetes Job controller sets it",
        ),
        (
            "annotations: {kubeferry.dev/spec-hash: x}",
            "annotations.\"kubeferry.dev/spec-hash\": \"kubeferry.dev/spec-hash\" is reserved",
        ),
        (
            "labels: {team: a b}",
            "labels.team: \"a b\" is not a valid label value",
        ),
        (
            "labels: {\"bad key\": a}",
            "labels.\"bad key\": \"bad key\" is not a valid key",
        ),
        ("nodeSelector: {disk/type/x: ssd}", "is not a valid key"),
        (
            "image: Busybox",
            "image: \"Busybox\" is not a valid image reference",
        ),
        (
            "timeout: 600",
            "timeout: \"600\" has no unit; write 600s for seconds",
        ),
        ("timeout: 0s", "timeout: must be at least 1s"),
        (
            "ttlAfterFinished: 1.5h",
            "ttlAfterFinished: \"1.5h\" is not a duration",
        ),
        (
            "podFailurePolicy: {failOnExitCodes: [0]}",
            "podFailurePolicy.failOnExitCodes[0]: 0 is out of range (1 to 255)",
        ),
        (
            "podFailurePolicy: {failOnExitCodes: [3, 3]}",
            "podFailurePolicy.failOnExitCodes[1]: 3 is listed twice",
        ),
        (
            "queue: Team_A",
            "queue: \"Team_A\" is not a DNS-1123 subdomain",
        ),
        ("secrets: [a, a]", "secrets[1]: \"a\" is listed twice"),
        (
            "workingDir: work",
            "workingDir: \"work\" must be an absolute path",
        ),
        (
            "imagePullPolicy: always",
            "imagePullPolicy: \"always\" is not one of Always, IfNotPresent, Never; did you mean Always?",
        ),
        (
            "env: {POD: {field: podname}}",
            "env.POD.field: \"podname\" is not one of",
        ),
        (
            "env: {POD: {fieldRef: podName}}",
            "env.POD: unknown field `fieldRef`; did you mean `field`?",
        ),
        (
            "env: {EMPTY: }",
            "env.EMPTY: expected a string or {field: podName|namespace|...}, found nothing (null)",
        ),
    ];
    for (extra, want) in cases {
        let image = if extra.starts_with("image:") {
            ""
        } else {
            "image: busybox:1.36\n"
        };
        let text = format!("name: hello\n{image}{extra}\n");
        let got = error("job.yaml", &text);
        assert!(got.contains(want), "{extra}\n  got: {got}\n want: {want}");
        assert!(got.starts_with("job.yaml:"), "{got}");
        assert_eq!(got.lines().count(), 1, "one problem for {extra}: {got}");
    }
}

#[test]
fn template_errors_and_positions_after_substitution() {
    let text = "name: {{name}}\nimage: {{image}}\nresources:\n  memory: {{memory:-12XB}}\n";
    let got = load("t.yaml", text, &Params::new()).expect_err("missing parameters");
    assert_eq!(
        got.to_string(),
        "t.yaml:1:7: required parameter `name` is not set\nt.yaml:2:8: required parameter `image` is not set"
    );
    assert!(
        got.problems()
            .iter()
            .all(|p| p.kind == ProblemKind::Template)
    );

    // An error inside a parameter's value points at its placeholder in the file as written.
    let got = load(
        "t.yaml",
        text,
        &params(&[("name", "hello"), ("image", "busybox")]),
    )
    .expect_err("bad default");
    assert_eq!(
        got.to_string(),
        r#"t.yaml:4:11: resources.memory: "12XB" is not a Kubernetes quantity (a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as 1e3) (from parameter `memory`)"#
    );
    // A long value shifts the rest of its line; positions after it still match the file.
    let text = "name: {{name}}\nimage: busybox\nargs: [{{arg}}, [nested]]\n";
    let got = load(
        "t.yaml",
        text,
        &params(&[("name", "hello"), ("arg", "a-very-long-argument")]),
    )
    .expect_err("nested list");
    assert_eq!(
        got.to_string(),
        "t.yaml:3:17: args[1]: expected a string, found a list"
    );
    // A value spanning lines keeps the lines after it right.
    let text = "name: hello\nimage: busybox\nargs:\n{{items}}\nport: x\n";
    let got =
        load("t.yaml", text, &params(&[("items", "  - a\n  - b\n  - c")])).expect_err("bad port");
    assert_eq!(
        got.to_string(),
        "t.yaml:5:7: port: expected a whole number, found \"x\""
    );
}

#[test]
fn templated_values_load() {
    let text =
        "name: {{name:-hello}}\nimage: busybox\nargs: ['echo {{who:-kubeferry}} \\{{literal}}']\n";
    let spec = match load("t.yaml", text, &params(&[("who", "world")])) {
        Ok(JobSpec::Container(spec)) => spec,
        Ok(other) => panic!("not a container job: {other:?}"),
        Err(e) => panic!("{e}"),
    };
    assert_eq!(spec.name, "hello");
    assert_eq!(spec.process.args, ["echo world {{literal}}"]);
}

#[test]
fn hash_ignores_order_formatting_and_spelling() {
    let a = container(
        "a.yaml",
        "name: hello\nimage: busybox\nlabels: {a: '1', b: '2'}\nresources: {cpu: 1000m, memory: 1024Mi}\ntimeout: 60m\n",
    );
    let b = container(
        "b.yaml",
        "# same job\nresources:\n  memory: 1Gi\n  cpu: \"1\"\ntimeout: 1h\nlabels:\n  b: \"2\"\n  a: \"1\"\nimage: busybox\nname: hello\n",
    );
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.hash().len(), 16);
    let c = container(
        "c.yaml",
        "name: hello\nimage: busybox\nlabels: {a: '1', b: '3'}\nresources: {cpu: 1, memory: 1Gi}\ntimeout: 1h\n",
    );
    assert_ne!(a.hash(), c.hash());
    // Env order is part of the job ($(VAR) expansion depends on it).
    let d = container("d.yaml", "name: hello\nimage: busybox\nenv: {A: x, B: y}\n");
    let e = container("e.yaml", "name: hello\nimage: busybox\nenv: {B: y, A: x}\n");
    assert_ne!(d.hash(), e.hash());
    // A fixed value, so that a change of the canonical form is noticed: it would make a
    // newer kubeferry refuse to adopt Jobs an older one created.
    assert_eq!(container("m.yaml", MINIMAL).hash(), "ca6f5fc7087f88be");
    assert_eq!(
        JobSpec::Container(container("m.yaml", MINIMAL)).hash(),
        "ca6f5fc7087f88be"
    );
}

#[test]
fn specs_built_in_code_are_validated() {
    let job = ContainerJob {
        name: "hello".into(),
        image: "busybox".into(),
        process: Process {
            port: Some(0),
            ..Process::default()
        },
        ..ContainerJob::default()
    };
    let error = ContainerJobSpec::new(job).expect_err("port 0");
    assert_eq!(error.to_string(), "port: must be between 1 and 65535");
    let error = ContainerJobSpec::new(ContainerJob::default()).expect_err("empty");
    assert_eq!(error.to_string(), "name: is required\nimage: is required");
    let spec = ContainerJobSpec::new(ContainerJob {
        name: "hello".into(),
        image: "busybox:1.36".into(),
        ..ContainerJob::default()
    })
    .expect("valid");
    assert_eq!(spec.hash(), container("m.yaml", MINIMAL).hash());
}

#[test]
fn positions_count_characters_after_multibyte_text() {
    let text = "name: hello # ünïcödé\nimage: busybox\nargs: ['ä', [x]]\n";
    assert_eq!(
        error("u.yaml", text),
        "u.yaml:3:13: args[1]: expected a string, found a list"
    );
}

proptest::proptest! {
    /// Whatever the input, loading answers with a spec or with problems, never a panic, and
    /// every problem's position lies inside the file.
    #[test]
    fn loading_never_panics(
        text in "[a-zé:{}\\[\\],. \n\t\"'#&*!|>\\\\0-9-]{0,80}",
        json in proptest::bool::ANY,
    ) {
        let source = if json { "x.json" } else { "x.yaml" };
        if let Err(error) = load(source, &text, &Params::new()) {
            let lines = text.split('\n').count();
            for problem in error.problems() {
                if let Some(position) = problem.position {
                    proptest::prop_assert!(position.line >= 1 && position.line <= lines, "{problem:?}");
                }
            }
        }
    }
}

#[test]
fn namespaces_resolve_like_kubectl() {
    let without = JobSpec::Container(container("a.yaml", MINIMAL));
    let with = JobSpec::Container(container(
        "b.yaml",
        "name: hello\nimage: busybox:1.36\nnamespace: b\n",
    ));
    assert_eq!(without.resolve_namespace(None, "ctx").unwrap(), "ctx");
    assert_eq!(without.resolve_namespace(Some("a"), "ctx").unwrap(), "a");
    assert_eq!(with.resolve_namespace(None, "ctx").unwrap(), "b");
    assert_eq!(with.resolve_namespace(Some("b"), "ctx").unwrap(), "b");
    let clash = with.resolve_namespace(Some("a"), "ctx").unwrap_err();
    assert_eq!(
        clash,
        NamespaceClash {
            requested: "a".into(),
            in_spec: "b".into()
        }
    );
    assert_eq!(
        clash.to_string(),
        r#"the job says "b" but "a" was requested; remove one"#
    );
}

#[test]
fn sidecars_load_and_are_checked_where_they_are_written() {
    let spec = container(
        "side.yaml",
        "name: hello\nimage: busybox:1.36\nsidecars:\n  - name: shipper\n    image: fluent/fluent-bit:3.1\n    command: [fluent-bit]\n    args: [-c, /etc/fb.conf]\n    env: {LEVEL: info}\n    resources: {cpu: 100m, memory: 64Mi}\n    ports: [2020]\n    imagePullPolicy: IfNotPresent\n",
    );
    assert_eq!(spec.sidecars.len(), 1);
    let sidecar = &spec.sidecars[0];
    assert_eq!(sidecar.name, "shipper");
    assert_eq!(sidecar.image, "fluent/fluent-bit:3.1");
    assert_eq!(sidecar.process.command, ["fluent-bit"]);
    assert_eq!(sidecar.process.args, ["-c", "/etc/fb.conf"]);
    assert_eq!(sidecar.process.env[0].name, "LEVEL");
    assert_eq!(sidecar.ports, [2020]);
    assert_eq!(sidecar.image_pull_policy, Some(PullPolicy::IfNotPresent));
    // A job without sidecars hashes as before they existed.
    assert_eq!(
        container("m.yaml", MINIMAL).hash(),
        container("m.yaml", &format!("{MINIMAL}sidecars: []\n")).hash()
    );

    let base = "name: hello\nimage: busybox\nsidecars:\n";
    let cases: &[(&str, &str)] = &[
        (
            "  - name: main\n    image: busybox\n",
            "side.yaml:4:11: sidecars[0].name: \"main\" is the job's own container; give the sidecar another name",
        ),
        (
            "  - name: a\n    image: busybox\n  - name: a\n    image: busybox\n",
            "side.yaml:6:11: sidecars[1].name: is given to two sidecars",
        ),
        (
            "  - name: Shipper\n    image: busybox\n",
            r#"side.yaml:4:11: sidecars[0].name: "Shipper" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"#,
        ),
        (
            "  - image: busybox\n",
            "side.yaml:4:5: sidecars[0].name: is required",
        ),
        (
            "  - name: a\n    image: busybox\n    port: 80\n",
            "side.yaml:6:5: sidecars[0]: unknown field `port`; did you mean `ports`?",
        ),
        (
            "  - name: a\n    image: busybox\n    ports: [0]\n",
            "side.yaml:6:13: sidecars[0].ports[0]: 0 is out of range (1 to 65535)",
        ),
        (
            "  - name: a\n    image: busybox\n    resources: {memory: 1XB}\n",
            r#"side.yaml:6:25: sidecars[0].resources.memory: "1XB" is not a Kubernetes quantity (a number with an optional suffix: n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as 1e3)"#,
        ),
        (
            "  name: a\n",
            "side.yaml:4:3: sidecars: expected a list of containers, found a mapping",
        ),
    ];
    for (sidecars, expected) in cases {
        assert_eq!(
            error("side.yaml", &format!("{base}{sidecars}")),
            *expected,
            "{sidecars}"
        );
    }
}

#[test]
fn indexed_jobs_load_and_are_checked_where_they_are_written() {
    let spec = container(
        "array.yaml",
        "name: shards\nimage: busybox:1.36\nindexed: true\ncompletions: 5\nparallelism: 8\nbackoffLimitPerIndex: 1\nmaxFailedIndexes: 2\nsuccessPolicy:\n  - {succeededIndexes: \"0,2-4\", succeededCount: 2}\n  - succeededCount: 5\npodFailurePolicy: {failIndexOnExitCodes: [42]}\n",
    );
    assert!(spec.indexed);
    assert_eq!(spec.completions, Some(5));
    // More pods at once than indexes is fine: Kubernetes runs one per index.
    assert_eq!(spec.parallelism, Some(8));
    assert_eq!(spec.backoff_limit_per_index, Some(1));
    assert_eq!(spec.max_failed_indexes, Some(2));
    assert_eq!(
        spec.success_policy,
        [
            SuccessPolicyRule {
                succeeded_indexes: Some("0,2-4".to_string()),
                succeeded_count: Some(2),
            },
            SuccessPolicyRule {
                succeeded_indexes: None,
                succeeded_count: Some(5),
            },
        ]
    );
    assert_eq!(spec.pod_failure_policy.fail_index_on_exit_codes, [42]);
    // A job without the indexed fields hashes as before they existed.
    assert_eq!(
        container("m.yaml", MINIMAL).hash(),
        container(
            "m.yaml",
            &format!("{MINIMAL}indexed: false\nsuccessPolicy: []\n")
        )
        .hash()
    );
    assert_ne!(
        spec.hash(),
        container(
            "array.yaml",
            "name: shards\nimage: busybox:1.36\nindexed: true\ncompletions: 5\n"
        )
        .hash()
    );

    let base = "name: shards\nimage: busybox\n";
    let indexed = "name: shards\nimage: busybox\nindexed: true\ncompletions: 4\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            base,
            "completions: 3\n",
            "a.yaml:3:14: completions: applies to indexed jobs only; add indexed: true (kubeferry runs one pod per job otherwise)",
        ),
        (
            base,
            "parallelism: 3\n",
            "a.yaml:3:14: parallelism: applies to indexed jobs only; add indexed: true",
        ),
        (
            base,
            "indexed: true\n",
            "a.yaml:3:10: indexed: needs completions (how many indexes to run)",
        ),
        (
            base,
            "indexed: yes\n",
            "a.yaml:3:10: indexed: expected true or false, found",
        ),
        (
            indexed,
            "completionMode: Indexed\n",
            "a.yaml:5:1: unknown field `completionMode`; did you mean `indexed`?",
        ),
        (
            base,
            "indexed: true\ncompletions: 0\n",
            "a.yaml:4:14: completions: must be at least 1",
        ),
        (
            base,
            "indexed: true\ncompletions: 100001\n",
            "a.yaml:4:14: completions: 100001 is more than Kubernetes allows an indexed job (100000)",
        ),
        (
            indexed,
            "parallelism: -1\n",
            "a.yaml:5:14: parallelism: -1 is out of range (0 to 2147483647)",
        ),
        (
            indexed,
            "parallelism: 0\n",
            "a.yaml:5:14: parallelism: must be at least 1 (0 would never start a pod)",
        ),
        (
            indexed,
            "backoffLimitPerIndex: -2\n",
            "a.yaml:5:23: backoffLimitPerIndex: -2 is out of range (0 to 2147483647)",
        ),
        (
            indexed,
            "maxFailedIndexes: 1\n",
            "a.yaml:5:19: maxFailedIndexes: needs backoffLimitPerIndex",
        ),
        (
            indexed,
            "backoffLimitPerIndex: 1\nmaxFailedIndexes: 5\n",
            "a.yaml:6:19: maxFailedIndexes: 5 is more than completions (4)",
        ),
        (
            indexed,
            "podFailurePolicy: {failIndexOnExitCodes: [3]}\n",
            "a.yaml:5:42: podFailurePolicy.failIndexOnExitCodes: needs backoffLimitPerIndex",
        ),
        (
            indexed,
            "backoffLimitPerIndex: 0\npodFailurePolicy: {failOnExitCodes: [3], failIndexOnExitCodes: [0, 3]}\n",
            "a.yaml:6:65: podFailurePolicy.failIndexOnExitCodes[0]: 0 is out of range (1 to 255)",
        ),
        (
            indexed,
            "backoffLimitPerIndex: 0\npodFailurePolicy: {failOnExitCodes: [3], failIndexOnExitCodes: [3]}\n",
            "a.yaml:6:65: podFailurePolicy.failIndexOnExitCodes[0]: 3 is also in failOnExitCodes, which fails the whole job",
        ),
        (
            base,
            "successPolicy: [{succeededCount: 1}]\n",
            "a.yaml:3:16: successPolicy: applies to indexed jobs only",
        ),
        (
            indexed,
            "successPolicy: [{}]\n",
            "a.yaml:5:17: successPolicy[0].succeededIndexes: is required",
        ),
        (
            indexed,
            "successPolicy: [{succeededIndexes: \"2,1\"}]\n",
            r#"a.yaml:5:36: successPolicy[0].succeededIndexes: "2,1" is not an interval string: "1" overlaps or comes before the index 2 listed earlier; list indexes in ascending order"#,
        ),
        (
            indexed,
            "successPolicy: [{succeededIndexes: \"0-x\"}]\n",
            r#"a.yaml:5:36: successPolicy[0].succeededIndexes: "0-x" is not an interval string: "0-x" is not an index or a range of indexes such as 3 or 3-5"#,
        ),
        (
            indexed,
            "successPolicy: [{succeededIndexes: 1-4}]\n",
            "a.yaml:5:36: successPolicy[0].succeededIndexes: index 4 is beyond completions (4: indexes 0 to 3)",
        ),
        (
            indexed,
            "successPolicy: [{succeededIndexes: 0-1, succeededCount: 3}]\n",
            "a.yaml:5:57: successPolicy[0].succeededCount: 3 is more than the 2 indexes succeededIndexes names",
        ),
        (
            indexed,
            "successPolicy: [{succeededCount: 5}]\n",
            "a.yaml:5:34: successPolicy[0].succeededCount: 5 is more than completions (4)",
        ),
        (
            indexed,
            "successPolicy: [{succeededCount: 0}]\n",
            "a.yaml:5:34: successPolicy[0].succeededCount: must be at least 1",
        ),
        (
            indexed,
            "successPolicy: {succeededCount: 1}\n",
            "a.yaml:5:16: successPolicy: expected a list of rules ({succeededIndexes, succeededCount}), found a mapping",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(base, extra, expected)| {
            let got = error("a.yaml", &format!("{base}{extra}"));
            (!got.starts_with(expected)).then(|| format!("{extra} got: {got}\nwant: {expected}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_pod_takes_a_container_jobs_fields_and_refuses_a_jobs_where_they_are_written() {
    let text = "kind: Pod\nname: hello\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: [echo hi]\n";
    let JobSpec::Pod(pod) = load("pod.yaml", text, &Params::new()).expect("a pod") else {
        panic!("kind: Pod loads as a pod");
    };
    assert_eq!(pod.process.command, ["sh", "-c"]);
    // The same fields as a container job hash apart: the kind is part of what runs.
    let job = container("job.yaml", &text.replace("kind: Pod\n", ""));
    assert_ne!(pod.hash(), job.hash());
    assert_eq!(JobSpec::Pod(pod).kind(), crate::id::JobKind::Pod);

    let message = error(
        "pod.yaml",
        "kind: Pod\nname: hello\nimage: busybox\nretries: 2\nindexed: true\ncompletions: 3\nqueue: q\nttlAfterFinished: 1h\n",
    );
    for expected in [
        "pod.yaml:4:10: retries: is not for kind: Pod (a pod runs once; nothing retries it); use kind: ContainerJob, which runs a Job",
        "pod.yaml:5:10: indexed: is not for kind: Pod (a pod has no indexes)",
        "pod.yaml:6:14: completions: is not for kind: Pod (a pod runs once)",
        "pod.yaml:7:8: queue: is not for kind: Pod (kubeferry queues Jobs in Kueue, not bare pods)",
        "pod.yaml:8:19: ttlAfterFinished: is not for kind: Pod (Kubernetes removes no finished pod after a TTL)",
    ] {
        assert!(message.contains(expected), "{expected}\nin\n{message}");
    }
    // A container job's own problems are a pod's too.
    let message = error("pod.yaml", "kind: Pod\nname: Hello\nimage: busybox\n");
    assert!(message.starts_with("pod.yaml:2:7: name: "), "{message}");
}

#[test]
fn the_hash_of_every_container_field_is_fixed() {
    // Fixed values, as for the minimal job: a change of the canonical form would make a newer
    // kubeferry refuse to adopt Jobs an older one created.
    let rich = "\
name: rich
image: busybox:1.36
imagePullPolicy: IfNotPresent
imagePullSecrets: [registry]
serviceAccount: runner
command: [sh, -c]
args: ['echo $(A)']
workingDir: /work
env: {A: x, B: y}
secrets: [creds]
resources: {cpu: 500m, memory: 256Mi}
port: 8080
timeout: 10m
retries: 2
";
    assert_eq!(container("r.yaml", rich).hash(), "a4f8b96d9973d04b");
}

#[test]
fn the_hash_of_every_optional_container_field_is_fixed() {
    // Fixed values: the canonical form of the fields a job file may leave out, durations
    // in whole seconds among them, is part of what makes a submission idempotent.
    let rich = "\
name: rich
namespace: ml
image: busybox:1.36
resources: {cpu: 500m, memory: 256Mi, disk: 1Gi, gpu: 1, gpuVendor: amd, extended: {example.com/fpga: 1}, limits: {cpu: 1, memory: 512Mi, disk: 2Gi}}
timeout: 1h30m
retries: 2
podFailurePolicy: {failOnExitCodes: [42, 3], ignoreDisruptions: true}
ttlAfterFinished: 1d
queue: team-a
priorityClass: high
nodeSelector: {disktype: ssd}
tolerations:
  - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
  - {operator: Exists, effect: NoExecute, tolerationSeconds: 60}
labels: {team: data}
keepLog: {lines: 10}
annotations: {note: anything}
tmpfs: {path: /scratch, size: 128Mi}
sharedMemory: 64Mi
persistentVolumeClaims: {datasets: /data}
securityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true, allowPrivilegeEscalation: false, privileged: false}
sidecars:
  - {name: shipper, image: fluent/fluent-bit:3.1, imagePullPolicy: Always, command: [fluent-bit], args: [-v], env: {LEVEL: info}, resources: {cpu: 100m}, ports: [2020]}
";
    assert_eq!(container("r.yaml", rich).hash(), "411e95e5e9460f83");
    let indexed = "\
name: rich
image: busybox:1.36
indexed: true
completions: 4
parallelism: 2
backoffLimitPerIndex: 1
maxFailedIndexes: 2
podFailurePolicy: {failIndexOnExitCodes: [7]}
successPolicy:
  - {succeededIndexes: 0-1, succeededCount: 1}
";
    assert_eq!(container("i.yaml", indexed).hash(), "5a6dd00e7c5f6ae2");
}
