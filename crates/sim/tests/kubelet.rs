//! Kubelet conformance: environment (values, expansion, downward API, envFrom, secret keys),
//! CreateContainerConfigError, CreateContainerError, image pull failures, InvalidImageName, OOMKilled, StartError,
//! missing claims, init containers, restarts with previous logs, and pods/log options.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, LogParams, PostParams};
use kubeferry_sim::SimConfig;
use serde_json::{Value, json};

use common::{Sim, eventually, raw, start, start_with, status_of};

const WAIT: Duration = Duration::from_secs(10);

async fn create_pod(sim: &Sim, pod: Value) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod: Pod = serde_json::from_value(pod).expect("a pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    pods
}

fn pod(name: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "t"}},
           "spec": {"restartPolicy": "Never", "containers": containers}})
}

async fn phase(pods: &Api<Pod>, name: &str, want: &str) -> Pod {
    eventually(&format!("{name} to be {want}"), WAIT, || {
        let pods = pods.clone();
        let name = name.to_string();
        let want = want.to_string();
        async move {
            let p = pods.get(&name).await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some(want.as_str())).then_some(p)
        }
    })
    .await
}

fn container_status(pod: &Pod, index: usize) -> ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.get(index).cloned())
        .expect("a container status")
}

async fn waiting_reasons(pods: &Api<Pod>, name: &str, until: &str) -> (BTreeSet<String>, String) {
    let mut seen = BTreeSet::new();
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(p) = pods.get(name).await
            && let Some(w) = p
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|c| c.into_iter().next())
                .and_then(|c| c.state)
                .and_then(|s| s.waiting)
        {
            let reason = w.reason.unwrap_or_default();
            seen.insert(reason.clone());
            if reason == until {
                return (seen, w.message.unwrap_or_default());
            }
        }
        assert!(
            tokio::time::Instant::now() < end,
            "waiting for {until}, saw {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn environment_is_built_like_the_kubelet_does() {
    let sim = start().await;
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"MODE": "fast"}}))
        .expect("config map");
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}))
        .expect("secret");
    let pods = create_pod(&sim, pod("env", json!([{
        "name": "main", "image": "busybox",
        "command": ["sh", "-c", "env | sort"],
        "resources": {"limits": {"memory": "64Mi"}},
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
        "env": [
            {"name": "GREETING", "value": "hello"},
            {"name": "MESSAGE", "value": "$(GREETING) world $$(LITERAL)"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
        ]
    }]))).await;
    let done = phase(&pods, "env", "Succeeded").await;
    let log = pods.logs("env", &LogParams::default()).await.expect("log");
    let uid = done.metadata.uid.clone().unwrap_or_default();
    let ip = done
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    for line in [
        "CFG_MODE=fast".to_string(),
        "GREETING=hello".to_string(),
        "MESSAGE=hello world $(LITERAL)".to_string(),
        "POD_NAME=env".to_string(),
        "POD_NAMESPACE=default".to_string(),
        format!("POD_UID={uid}"),
        "NODE=sim-node-1".to_string(),
        format!("POD_IP={ip}"),
        "SA=default".to_string(),
        "APP=t".to_string(),
        "TOKEN=s3cret".to_string(),
        "MEM_MI=64".to_string(),
        "HOSTNAME=env".to_string(),
    ] {
        assert!(log.lines().any(|l| l == line), "{line} in\n{log}");
    }
    let status = done.status.expect("status");
    assert!(status.host_ip.is_some() && status.start_time.is_some());
    let conditions: Vec<(String, String)> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    for kind in ["PodScheduled", "Initialized", "Ready", "ContainersReady"] {
        assert!(
            conditions.iter().any(|(t, _)| t == kind),
            "{kind} in {conditions:?}"
        );
    }
}

#[tokio::test]
async fn missing_secret_is_a_config_error_until_it_appears() {
    let sim = start().await;
    let pods = create_pod(
        &sim,
        pod(
            "needs-secret",
            json!([{
                "name": "main", "image": "busybox", "command": ["sh", "-c", "echo $TOKEN"],
                "envFrom": [{"secretRef": {"name": "late"}}]
            }]),
        ),
    )
    .await;
    let (_, message) = waiting_reasons(&pods, "needs-secret", "CreateContainerConfigError").await;
    assert_eq!(message, "secret \"late\" not found");
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"}, "stringData": {"TOKEN": "now"}}))
        .expect("secret");
    phase(&pods, "needs-secret", "Succeeded").await;
    assert_eq!(
        pods.logs("needs-secret", &LogParams::default())
            .await
            .expect("log"),
        "now\n"
    );
}

#[tokio::test]
async fn missing_config_maps_and_keys_are_config_errors() {
    let sim = start().await;
    let pods = create_pod(
        &sim,
        pod(
            "needs-settings",
            json!([{
                "name": "main", "image": "busybox", "command": ["sh", "-c", "echo $MODE"],
                "envFrom": [{"configMapRef": {"name": "settings"}}]
            }]),
        ),
    )
    .await;
    let (_, message) = waiting_reasons(&pods, "needs-settings", "CreateContainerConfigError").await;
    assert_eq!(message, "configmap \"settings\" not found");

    create_pod(
        &sim,
        pod(
            "needs-level",
            json!([{
                "name": "main", "image": "busybox", "command": ["sh", "-c", "echo $LEVEL"],
                "env": [{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "levels", "key": "level"}}}]
            }]),
        ),
    )
    .await;
    let (_, message) = waiting_reasons(&pods, "needs-level", "CreateContainerConfigError").await;
    assert_eq!(message, "configmap \"levels\" not found");
    // The config map without the key: still an error, naming the key.
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "levels"}, "data": {"other": "x"}}))
        .expect("config map");
    eventually("the missing key to be named", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("needs-level").await.ok()?;
            let waiting = p
                .status?
                .container_statuses?
                .into_iter()
                .next()?
                .state?
                .waiting?;
            (waiting.reason.as_deref() == Some("CreateContainerConfigError")
                && waiting.message.as_deref()
                    == Some("couldn't find key level in ConfigMap default/levels"))
            .then_some(())
        }
    })
    .await;

    // Once what they need exists, both run.
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"MODE": "fast"}}))
        .expect("config map");
    let levels: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(sim.client.clone(), "default");
    levels
        .patch(
            "levels",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"data": {"level": "debug"}})),
        )
        .await
        .expect("the key is added");
    for (name, printed) in [("needs-settings", "fast\n"), ("needs-level", "debug\n")] {
        phase(&pods, name, "Succeeded").await;
        assert_eq!(
            pods.logs(name, &LogParams::default()).await.expect("log"),
            printed
        );
    }
}

#[tokio::test]
async fn image_problems_are_reported_as_waiting_reasons() {
    let sim = start().await;
    let pods = create_pod(&sim, pod("unpullable", json!([{"name": "main", "image": "registry.invalid/team/app:1.0", "command": ["true"]}]))).await;
    let (seen, message) = waiting_reasons(&pods, "unpullable", "ImagePullBackOff").await;
    assert!(seen.contains("ErrImagePull"), "{seen:?}");
    assert_eq!(
        message,
        "Back-off pulling image \"registry.invalid/team/app:1.0\""
    );
    let p = pods.get("unpullable").await.expect("pod");
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Pending"));

    let pods = create_pod(
        &sim,
        pod(
            "bad-name",
            json!([{"name": "main", "image": "Bad:Image", "command": ["true"]}]),
        ),
    )
    .await;
    let (_, message) = waiting_reasons(&pods, "bad-name", "InvalidImageName").await;
    assert_eq!(
        message,
        "Failed to apply default image tag \"Bad:Image\": couldn't parse image name \"Bad:Image\": invalid reference format: repository name (Bad) must be lowercase"
    );
    let err = status_of(pods.logs("bad-name", &LogParams::default()).await);
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "container \"main\" in pod \"bad-name\" is waiting to start: InvalidImageName"
    );
}

#[tokio::test]
async fn an_image_without_a_command_and_a_container_without_one_cannot_be_created() {
    let mut config = SimConfig::for_tests();
    config.images_without_command = vec!["ghcr.io/acme/static-tool".to_string()];
    let sim = start_with(config).await;
    let image = "ghcr.io/acme/static-tool:1.0";
    let pods = create_pod(
        &sim,
        pod("nothing", json!([{"name": "main", "image": image}])),
    )
    .await;
    let (_, message) = waiting_reasons(&pods, "nothing", "CreateContainerError").await;
    assert!(
        message.ends_with("spec: failed to generate spec: no command specified"),
        "{message}"
    );
    let p = pods.get("nothing").await.expect("pod");
    assert_eq!(p.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let err = status_of(pods.logs("nothing", &LogParams::default()).await);
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            400,
            "container \"main\" in pod \"nothing\" is waiting to start: CreateContainerError"
        )
    );
    // Its args alone are a command to run.
    let pods = create_pod(
        &sim,
        pod(
            "args-only",
            json!([{"name": "main", "image": image, "args": ["echo", "from args"]}]),
        ),
    )
    .await;
    phase(&pods, "args-only", "Succeeded").await;
    let log = pods
        .logs("args-only", &LogParams::default())
        .await
        .expect("a log");
    assert_eq!(log, "from args\n");
}

#[tokio::test]
async fn memory_over_the_limit_is_oom_killed() {
    let sim = start().await;
    let pods = create_pod(
        &sim,
        pod(
            "hog",
            json!([{
                "name": "main", "image": "busybox",
                "command": ["sh", "-c", "head -c 2000000000 /dev/zero | tail"],
                "resources": {"limits": {"memory": "20Mi"}}
            }]),
        ),
    )
    .await;
    let failed = phase(&pods, "hog", "Failed").await;
    let terminated = container_status(&failed, 0)
        .state
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (137, Some("OOMKilled"))
    );
}

#[tokio::test]
async fn an_oom_kill_of_a_child_reports_oom_killed_with_the_main_process_exit_code() {
    // The OOM killer takes the biggest process of the container (the child); the shell goes
    // on and exits 0. The runtime reports OOMKilled with exit code 0 and the kubelet, judging
    // by the exit code, calls the pod Succeeded (kubernetes#131530).
    let sim = start().await;
    let pods = create_pod(
        &sim,
        pod(
            "childhog",
            json!([{
                "name": "main", "image": "busybox",
                "command": ["sh", "-c", "head -c 2000000000 /dev/zero | tail; echo the shell goes on"],
                "resources": {"limits": {"memory": "20Mi"}}
            }]),
        ),
    )
    .await;
    let ended = phase(&pods, "childhog", "Succeeded").await;
    let terminated = container_status(&ended, 0)
        .state
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("OOMKilled"))
    );
    let log = pods
        .logs("childhog", &LogParams::default())
        .await
        .expect("the log");
    // The shell says its child was killed, then goes on.
    assert_eq!(log, "Killed\nthe shell goes on\n");
}

#[tokio::test]
async fn missing_executables_fail_to_start() {
    let sim = start().await;
    for (name, command, detail) in [
        (
            "nocmd",
            "no-such-command",
            "exec: \"no-such-command\": executable file not found in $PATH",
        ),
        (
            "nopath",
            "/no/such/binary",
            "exec: \"/no/such/binary\": stat /no/such/binary: no such file or directory",
        ),
    ] {
        let pods = create_pod(
            &sim,
            pod(
                name,
                json!([{"name": "main", "image": "busybox", "command": [command]}]),
            ),
        )
        .await;
        let failed = phase(&pods, name, "Failed").await;
        let terminated = container_status(&failed, 0)
            .state
            .and_then(|s| s.terminated)
            .expect("terminated");
        assert_eq!(
            (terminated.exit_code, terminated.reason.as_deref()),
            (128, Some("StartError"))
        );
        assert_eq!(
            terminated.message.unwrap_or_default(),
            format!(
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: {detail}: unknown"
            )
        );
    }
}

#[tokio::test]
async fn commands_are_found_in_the_containers_path() {
    let sim = start().await;
    let bin = std::env::temp_dir().join(format!("kubeferry-sim-path-{}", std::process::id()));
    std::fs::create_dir_all(&bin).expect("a directory");
    let tool = bin.join("greet");
    std::fs::write(&tool, "#!/bin/sh\necho \"hello from $0\"\n").expect("a script");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let pods = create_pod(
        &sim,
        pod(
            "own-path",
            json!([{"name": "main", "image": "busybox", "command": ["greet"],
                    "env": [{"name": "PATH", "value": format!("/usr/bin:/bin:{}", bin.display())}]}]),
        ),
    )
    .await;
    phase(&pods, "own-path", "Succeeded").await;
    let log = pods.logs("own-path", &LogParams::default()).await;
    let _ = std::fs::remove_dir_all(&bin);
    assert_eq!(
        log.expect("log"),
        format!("hello from {}\n", tool.display())
    );
}

#[tokio::test]
async fn the_log_keeps_the_order_of_stdout_and_stderr_writes() {
    let sim = start().await;
    let script = "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done";
    let pods = create_pod(
        &sim,
        pod(
            "interleaved",
            json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]),
        ),
    )
    .await;
    phase(&pods, "interleaved", "Succeeded").await;
    let log = pods
        .logs("interleaved", &LogParams::default())
        .await
        .expect("log");
    let expected: String = (0..200).map(|i| format!("out{i}\nerr{i}\n")).collect();
    assert_eq!(log, expected);
}

fn terminated(pod: &Pod, index: usize) -> k8s_openapi::api::core::v1::ContainerStateTerminated {
    container_status(pod, index)
        .state
        .and_then(|s| s.terminated)
        .expect("terminated")
}

#[tokio::test]
async fn termination_messages_come_from_the_file_or_the_log() {
    let sim = start().await;
    let write = "printf 'all good' > \"$TERMINATION_MESSAGE_PATH\"";
    let hundred_lines = "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done";
    // (pod, policy, script, phase, message)
    let big = "head -c 5000 /dev/zero | tr '\\0' a > \"$TERMINATION_MESSAGE_PATH\"; printf END >> \"$TERMINATION_MESSAGE_PATH\"";
    let last_80: String = (20..100).map(|i| format!("line{i}\n")).collect();
    let table = [
        (
            "file",
            "File",
            write.to_string(),
            "Succeeded",
            Some("all good".to_string()),
        ),
        (
            "file-on-failure",
            "File",
            format!("{write}; exit 3"),
            "Failed",
            Some("all good".to_string()),
        ),
        (
            "file-wins",
            "FallbackToLogsOnError",
            format!("echo noise; {write}; exit 1"),
            "Failed",
            Some("all good".to_string()),
        ),
        (
            "fallback",
            "FallbackToLogsOnError",
            format!("{hundred_lines}; exit 1"),
            "Failed",
            Some(last_80),
        ),
        (
            "no-fallback-on-success",
            "FallbackToLogsOnError",
            hundred_lines.to_string(),
            "Succeeded",
            None,
        ),
        (
            "no-fallback-with-file",
            "File",
            format!("{hundred_lines}; exit 1"),
            "Failed",
            None,
        ),
        (
            "tail-of-big-file",
            "File",
            big.to_string(),
            "Succeeded",
            Some(format!("{}END", "a".repeat(4093))),
        ),
    ];
    for (name, policy, script, _, _) in &table {
        create_pod(
            &sim,
            pod(
                name,
                json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                        "terminationMessagePolicy": policy}]),
            ),
        )
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    for (name, _, _, want_phase, want_message) in table {
        let done = phase(&pods, name, want_phase).await;
        assert_eq!(terminated(&done, 0).message, want_message, "{name}");
    }
}

#[tokio::test]
async fn each_run_starts_with_an_empty_termination_message_file() {
    let sim = start().await;
    let script = "if [ -f marker ]; then exit 0; else touch marker; echo first run > \"$TERMINATION_MESSAGE_PATH\"; exit 1; fi";
    let mut p = pod(
        "restarted",
        json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", script]},
               {"name": "other", "image": "busybox", "command": ["sh", "-c", "echo other > \"$TERMINATION_MESSAGE_PATH\""]}]),
    );
    p["spec"]["restartPolicy"] = json!("OnFailure");
    let pods = create_pod(&sim, p).await;
    let done = phase(&pods, "restarted", "Succeeded").await;
    let main = container_status(&done, 0);
    let last = main
        .last_state
        .and_then(|s| s.terminated)
        .expect("the first run");
    assert_eq!(last.message.as_deref(), Some("first run\n"));
    assert_eq!(terminated(&done, 0).message, None);
    assert_eq!(terminated(&done, 1).message.as_deref(), Some("other\n"));
}

#[tokio::test]
async fn missing_claims_keep_pods_pending_until_created() {
    let sim = start().await;
    let mut p = pod(
        "claims",
        json!([{"name": "main", "image": "busybox", "command": ["true"]}]),
    );
    p["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    let pods = create_pod(&sim, p).await;
    let pending = eventually("the pod to be unschedulable", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("claims").await.ok()?;
            let c = p
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled")?;
            (c.status == "False").then_some(c)
        }
    })
    .await;
    assert_eq!(pending.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        pending.message.as_deref(),
        Some(
            "0/1 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
    );
    sim.cluster
        .create("default", json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .expect("claim");
    phase(&pods, "claims", "Succeeded").await;
}

#[tokio::test]
async fn init_containers_run_first_and_entrypoints_come_from_config() {
    let mut config = SimConfig::for_tests();
    config.image_entrypoints.insert(
        "tools/echo".into(),
        vec!["echo".into(), "from-entrypoint".into()],
    );
    let sim = start_with(config).await;
    let mut p = pod(
        "init",
        json!([
            {"name": "main", "image": "busybox", "command": ["cat", "ready"]},
            {"name": "entry", "image": "tools/echo:1", "args": ["arg"]},
            {"name": "args-only", "image": "busybox", "args": ["echo", "only-args"]},
            {"name": "nothing", "image": "busybox"}
        ]),
    );
    p["spec"]["initContainers"] = json!([{"name": "prepare", "image": "busybox", "command": ["sh", "-c", "echo ok > ready"]}]);
    let pods = create_pod(&sim, p).await;
    let done = phase(&pods, "init", "Succeeded").await;
    let log = |c: &str| {
        let pods = pods.clone();
        let c = c.to_string();
        async move {
            pods.logs(
                "init",
                &LogParams {
                    container: Some(c),
                    ..LogParams::default()
                },
            )
            .await
            .expect("log")
        }
    };
    assert_eq!(log("main").await, "ok\n");
    assert_eq!(log("entry").await, "from-entrypoint arg\n");
    assert_eq!(log("args-only").await, "only-args\n");
    assert_eq!(log("nothing").await, "");
    let init = done
        .status
        .and_then(|s| s.init_container_statuses)
        .expect("init statuses");
    assert_eq!(
        init[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        Some(0)
    );
    let err = status_of(pods.logs("init", &LogParams::default()).await);
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "a container name must be specified for pod init, choose one of: [main entry args-only nothing] or one of the init containers: [prepare]"
    );
}

#[tokio::test]
async fn restarts_keep_previous_logs_and_log_options_apply() {
    let sim = start().await;
    let mut p = pod(
        "flaky",
        json!([{"name": "main", "image": "busybox", "command": ["sh", "-c",
        "if [ -f marker ]; then echo second; echo third; echo fourth; else touch marker; echo first; exit 1; fi"]}]),
    );
    p["spec"]["restartPolicy"] = json!("OnFailure");
    let pods = create_pod(&sim, p).await;
    let done = phase(&pods, "flaky", "Succeeded").await;
    let status = container_status(&done, 0);
    assert_eq!(status.restart_count, 1);
    let last = status
        .last_state
        .and_then(|s| s.terminated)
        .expect("last state");
    assert_eq!(last.exit_code, 1);
    let logs = |params: LogParams| {
        let pods = pods.clone();
        async move { pods.logs("flaky", &params).await.expect("log") }
    };
    assert_eq!(
        logs(LogParams {
            previous: true,
            ..LogParams::default()
        })
        .await,
        "first\n"
    );
    assert_eq!(logs(LogParams::default()).await, "second\nthird\nfourth\n");
    assert_eq!(
        logs(LogParams {
            tail_lines: Some(2),
            ..LogParams::default()
        })
        .await,
        "third\nfourth\n"
    );
    assert_eq!(
        logs(LogParams {
            limit_bytes: Some(9),
            ..LogParams::default()
        })
        .await,
        "second\nth"
    );
    assert_eq!(
        logs(LogParams {
            since_seconds: Some(3600),
            ..LogParams::default()
        })
        .await,
        "second\nthird\nfourth\n"
    );
    let stamped = logs(LogParams {
        timestamps: true,
        tail_lines: Some(1),
        ..LogParams::default()
    })
    .await;
    let (stamp, text) = stamped.split_once(' ').expect("a timestamp");
    assert!(stamp.ends_with('Z') && stamp.contains('T'), "{stamp}");
    assert_eq!(text, "fourth\n");
    let future = raw(
        &sim.client,
        "GET",
        "/api/v1/namespaces/default/pods/flaky/log?sinceTime=2999-01-01T00:00:00Z",
        None,
        "",
    )
    .await;
    assert_eq!((future.code, future.text()), (200, String::new()));
}

#[tokio::test]
async fn since_seconds_drops_lines_older_than_asked() {
    let sim = start().await;
    let gate = std::env::temp_dir().join(format!("kubeferry-sim-since-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let script = format!(
        "echo old; while [ ! -f {gate} ]; do sleep 0.01; done; echo new",
        gate = gate.display()
    );
    let pods = create_pod(
        &sim,
        pod(
            "aging",
            json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]),
        ),
    )
    .await;
    let log = |since: Option<i64>| {
        let pods = pods.clone();
        async move {
            let params = LogParams {
                since_seconds: since,
                ..LogParams::default()
            };
            pods.logs("aging", &params).await.ok()
        }
    };
    // The first line ages past one second: asked for the last second, the log is empty while
    // the whole log still holds it.
    eventually("the first line to be older than a second", WAIT, || async {
        let whole = log(None).await?;
        let recent = log(Some(1)).await?;
        (whole == "old\n" && recent.is_empty()).then_some(())
    })
    .await;
    std::fs::write(&gate, b"").expect("the gate opens");
    let recent = eventually("the second line", WAIT, || async {
        log(Some(1)).await.filter(|l| !l.is_empty())
    })
    .await;
    let _ = std::fs::remove_file(&gate);
    assert_eq!(recent, "new\n", "only the line of the last second");
    assert_eq!(log(Some(3600)).await.as_deref(), Some("old\nnew\n"));
}

#[tokio::test]
async fn follow_streams_until_the_container_ends() {
    use futures::AsyncBufReadExt;
    let sim = start().await;
    let pods = create_pod(&sim, pod("slow", json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo a; sleep 0.3; echo b"]}]))).await;
    phase(&pods, "slow", "Running").await;
    let stream = pods
        .log_stream(
            "slow",
            &LogParams {
                follow: true,
                ..LogParams::default()
            },
        )
        .await
        .expect("stream");
    let lines: Vec<String> = futures::TryStreamExt::try_collect(stream.lines())
        .await
        .expect("lines");
    assert_eq!(lines, vec!["a", "b"]);
}

#[tokio::test]
async fn crashing_containers_back_off_and_deadlines_end_pods() {
    let sim = start().await;
    let mut p = pod(
        "crasher",
        json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo boom; exit 1"]}]),
    );
    p["spec"]["restartPolicy"] = json!("Always");
    let pods = create_pod(&sim, p).await;
    let (_, message) = waiting_reasons(&pods, "crasher", "CrashLoopBackOff").await;
    assert!(
        message.starts_with("back-off ")
            && message.contains("restarting failed container=main pod=crasher_default("),
        "{message}"
    );
    eventually("restarts to be counted", WAIT, || {
        let pods = pods.clone();
        async move {
            let p = pods.get("crasher").await.ok()?;
            let s = container_status(&p, 0);
            (s.restart_count >= 2 && p.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;

    let mut p = pod(
        "deadline",
        json!([{"name": "main", "image": "busybox", "command": ["sleep", "30"]}]),
    );
    p["spec"]["activeDeadlineSeconds"] = json!(1);
    let pods = create_pod(&sim, p).await;
    let failed = phase(&pods, "deadline", "Failed").await;
    let status = failed.status.expect("status");
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
}

/// A pod the control plane failed while its container ran stays failed when the container then
/// exits 0: the kubelet never moves a pod from one terminal phase to the other.
#[tokio::test]
async fn a_pod_failed_by_the_control_plane_is_not_reported_succeeded_later() {
    let sim = start().await;
    let pods = create_pod(
        &sim,
        pod(
            "failed-first",
            json!([{"name": "main", "image": "busybox", "command": ["sh", "-c", "sleep 0.5; echo done; exit 0"]}]),
        ),
    )
    .await;
    phase(&pods, "failed-first", "Running").await;
    // As the node lifecycle controller or the pod GC would.
    let failed = json!({"status": {"phase": "Failed", "reason": "NodeLost"}});
    pods.patch_status(
        "failed-first",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&failed),
    )
    .await
    .expect("failed");
    eventually("the container to finish", WAIT, || {
        let pods = pods.clone();
        async move {
            let log = pods
                .logs("failed-first", &LogParams::default())
                .await
                .ok()?;
            log.contains("done").then_some(())
        }
    })
    .await;
    // An absence: the kubelet's report of the exit follows the last line at once, and is
    // looked for a while (a slow machine can only make this pass, never fail, wrongly).
    for _ in 0..20 {
        let pod = pods.get("failed-first").await.expect("the pod");
        assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Failed"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
