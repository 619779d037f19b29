//! The `kubeferry` binary as a user runs it: against the embedded cluster, against a simulated
//! cluster it is pointed at with a kubeconfig, and with kubectl looking at the same cluster.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use common::*;

/// `kubeferry` with no kubeconfig anywhere: a fresh home, no `$KUBECONFIG`.
fn kubeferry_without_cluster(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .kill_on_drop(true);
    command
}

struct Cluster {
    sim: SimCluster,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

async fn cluster() -> Cluster {
    let sim = SimCluster::start(SimConfig::for_tests()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, "test", sim.admin_token())
        .unwrap();
    Cluster {
        sim,
        kubeconfig,
        _dir: dir,
    }
}

#[tokio::test]
async fn run_streams_hello_on_the_embedded_cluster_and_succeeds() {
    let home = tempfile::tempdir().unwrap();
    let output =
        run(kubeferry_without_cluster(home.path()).args(["run", "-f", &example("hello.yaml")]))
            .await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("running on an embedded simulated cluster"),
        "{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "hello from kubeferry",
            "streaming: this line came a second later",
            "done"
        ],
        "{stdout}"
    );
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("sim/job/default/hello-") && last.contains(" SUCCEEDED (Completed"),
        "{last}"
    );
}

#[tokio::test]
async fn a_failing_job_ends_failed_with_its_exit_code() {
    let home = tempfile::tempdir().unwrap();
    let output =
        run(kubeferry_without_cluster(home.path()).args(["run", "-f", &example("fail.yaml")]))
            .await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(last.contains(" FAILED (Error"), "{last}");
    assert!(last.contains("exit code 3"), "{last}");
    assert!(stdout.contains("about to fail"), "{stdout}");
}

#[tokio::test]
async fn bad_input_is_one_clear_error_and_creates_nothing() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nimage: busybox\nresources:\n  memory: 12XB\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["submit".into(), "-f".into(), bad.display().to_string()],
            format!(
                "error: {}:4:11: resources.memory: \"12XB\" is not a Kubernetes quantity",
                bad.display()
            ),
        ),
        (
            vec!["run".into(), "-f".into(), example("templated.yaml")],
            "required parameter `who` is not set".into(),
        ),
        (
            vec!["status".into(), "not-an-id".into()],
            "error: execution id \"not-an-id\" is malformed".into(),
        ),
        (
            vec!["cancel".into(), "test/cronjob/default/x".into()],
            "error: execution id kind \"cronjob\" is unknown".into(),
        ),
    ];
    for (args, expected) in cases {
        let output = run(kubeferry(&cluster.kubeconfig).args(&args)).await;
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
    }
    assert_eq!(cluster.sim.count("batch", "jobs"), 0);
    assert_eq!(cluster.sim.request_count("create", ""), 0);
}

#[tokio::test]
async fn submit_status_wait_logs_list_and_cancel() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let output = run(kubeferry(kubeconfig).args(["submit", "-f", &example("hello.yaml")])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();
    assert!(id.starts_with("test/job/default/hello-"), "{id}");

    let output = run(kubeferry(kubeconfig).args(["wait", &id, "--timeout", "30s"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("SUCCEEDED"));

    let output = run(kubeferry(kubeconfig).args(["status", &id, "-o", "json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status["id"], id.as_str());
    assert_eq!(status["state"], "SUCCEEDED");
    assert_eq!(status["exitCode"], 0);
    assert!(status["startedAt"].is_string() && status["finishedAt"].is_string());

    let output = run(kubeferry(kubeconfig).args(["logs", &id])).await;
    assert_eq!(
        text(&output.stdout),
        "hello from kubeferry\nstreaming: this line came a second later\ndone\n"
    );
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--tail", "1"])).await;
    assert_eq!(text(&output.stdout), "done\n");

    let output = run(kubeferry(kubeconfig).args(["list", "-o", "yaml"])).await;
    let listed = text(&output.stdout);
    assert!(
        listed.contains(&id) && listed.contains("SUCCEEDED"),
        "{listed}"
    );

    // Cancelling a finished job is a no-op: its outcome stands.
    let output = run(kubeferry(kubeconfig).args(["cancel", &id])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("had already ended"));
    assert!(text(&output.stdout).contains("SUCCEEDED"));
}

#[tokio::test]
async fn the_sidecar_example_runs_on_the_embedded_cluster_and_its_container_decides() {
    let home = tempfile::tempdir().unwrap();
    let output =
        run(kubeferry_without_cluster(home.path()).args(["run", "-f", &example("sidecar.yaml")]))
            .await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The log followed is the job's container's, not the sidecar's.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..2], ["working beside a sidecar", "done"], "{stdout}");
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("sim/job/default/with-sidecar-")
            && last.contains(" SUCCEEDED (Completed, exit code 0"),
        "{last}"
    );
}

#[tokio::test]
async fn an_indexed_job_shows_its_indexes_and_logs_by_index() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    let output = run(kubeferry(kubeconfig).args(["submit", "-f", &example("indexed.yaml")])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();
    let output = run(kubeferry(kubeconfig).args(["wait", &id, "--timeout", "30s"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("SUCCEEDED (Completed"),
        "{}",
        text(&output.stdout)
    );

    let status = status_json(kubeconfig, &id).await;
    assert_eq!(status["message"], "5 of 5 indexes succeeded");
    assert_eq!(
        status["indexes"],
        serde_json::json!({"completions": 5, "succeeded": 5, "failed": 0, "running": 0, "pending": 0, "completedIndexes": "0-4"})
    );
    let output = run(kubeferry(kubeconfig).args(["status", &id])).await;
    let table = text(&output.stdout);
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.contains(" INDEXES ") && header.ends_with("MESSAGE"),
        "{table}"
    );
    assert!(
        lines.next().unwrap_or_default().contains("5/5 succeeded"),
        "{table}"
    );
    // Watched, the rows have the same column.
    let output = run(kubeferry(kubeconfig).args(["status", "-w", "--until-done", &id])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.contains(" INDEXES ") && header.ends_with("MESSAGE"),
        "{table}"
    );
    let rows: Vec<&str> = lines.collect();
    assert!(
        !rows.is_empty() && rows.iter().all(|row| row.contains("5/5 succeeded")),
        "{table}"
    );

    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--index", "3"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "shard 3 of 5 starting\nshard 3 done\n"
    );
    // Without --index: one index's log, and which one it is on stderr.
    let output = run(kubeferry(kubeconfig).args(["logs", &id])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("one of 5 indexes' pods; --index N reads another"),
        "{}",
        text(&output.stderr)
    );
    // run says which logs it streams.
    let output = run(kubeferry(kubeconfig).args([
        "run",
        "-f",
        &example("indexed.yaml"),
        "--job-id",
        "indexed-run",
    ]))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(
            "kubeferry: the log below shows each pod's log in turn, whole and unprefixed; \
             `kubeferry logs ID --index N` reads one index's"
        ),
        "{}",
        text(&output.stderr)
    );
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--index", "1", "-f"])).await;
    assert_eq!(
        text(&output.stdout),
        "shard 1 of 5 starting\nshard 1 done\n"
    );
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--index=-1"])).await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("--index"),
        "{}",
        text(&output.stderr)
    );
    let output =
        run(kubeferry(kubeconfig).args(["logs", "test/sparkapp/default/pi", "--index", "0"])).await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("--index is only for indexed container jobs"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn ctrl_c_during_run_cancels_the_job_when_asked_to() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.yaml");
    std::fs::write(
        &long,
        "name: long\nimage: busybox\ncommand: [sh, -c, 'echo started; sleep 60']\n",
    )
    .unwrap();
    let mut child = kubeferry(&cluster.kubeconfig)
        .args(["run", "-f", &long.display().to_string()])
        .args(["--on-interrupt", "cancel"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    // The job runs once its first log line arrives.
    let first = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("started"));
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut rest = Vec::new();
    while let Ok(Some(line)) = stdout.next_line().await {
        rest.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let last = rest.last().unwrap();
    assert!(last.contains(" CANCELLED (Cancelled"), "{rest:?}");
    // The Job is deleted: gone, or held by kubeferry's finalizer until a settler lets it go
    // (this process may exit first); its pods go first either way.
    let job = cluster
        .sim
        .object("batch", "jobs", "default", &long_job_name(&rest));
    assert!(
        job.is_none_or(|job| job.pointer("/metadata/deletionTimestamp").is_some()),
        "the Job is deleted"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while cluster.sim.count("", "pods") > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the pod is deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The object name in the last line of a `run`: `<cluster>/job/<namespace>/<name> STATE ...`.
fn long_job_name(lines: &[String]) -> String {
    let id = lines.last().and_then(|line| line.split_whitespace().next());
    id.and_then(|id| id.rsplit('/').next())
        .expect("an execution id")
        .to_string()
}

/// Starts `command` as `kubeferry sim serve --kubeconfig <kubeconfig>` and waits until it has
/// written its kubeconfig; returns the process and the rest of its stderr.
async fn sim_serve(
    kubeconfig: &Path,
    command: &mut Command,
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
) {
    let mut server = command
        .args(["sim", "serve", "--kubeconfig"])
        .arg(kubeconfig)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("sim serve printed where its kubeconfig went");
        if line.contains("kubeconfig written") {
            break;
        }
    }
    (server, stderr)
}

#[tokio::test]
async fn kubectl_sees_what_kubeferry_submitted_to_sim_serve() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sim.kubeconfig");
    let (mut server, _stderr) = sim_serve(
        &kubeconfig,
        &mut Command::new(env!("CARGO_BIN_EXE_kubeferry")),
    )
    .await;
    let output = run(kubeferry(&kubeconfig).args(["submit", "-f", &example("hello.yaml")])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();
    let name = id.rsplit('/').next().unwrap().to_string();

    let output = run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "jobs,pods", "-A"]))
    .await;
    let listed = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(listed.contains(&format!("job.batch/{name}")), "{listed}");
    assert!(listed.contains(&format!("pod/{name}-")), "{listed}");
    server.kill().await.unwrap();
}

#[tokio::test]
async fn template_render_fills_parameters() {
    let home = tempfile::tempdir().unwrap();
    let output = run(kubeferry_without_cluster(home.path()).args([
        "template",
        "render",
        "-f",
        &example("templated.yaml"),
        "--set",
        "who=world",
    ]))
    .await;
    let rendered = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(rendered.contains("name: greet"), "{rendered}");
    assert!(rendered.contains("hello, world ($i of 3)"), "{rendered}");
    assert!(rendered.contains("templates write {{name}} for literal braces"));
}

#[tokio::test]
async fn rbac_prints_only_what_the_kinds_asked_for_need() {
    let cluster = cluster().await;
    let pods_rule = |kinds: &[&'static str]| {
        let mut args = vec!["rbac", "-o", "json"];
        for kind in kinds {
            args.extend(["--kind", *kind]);
        }
        let kubeconfig = cluster.kubeconfig.clone();
        async move {
            let output = run(kubeferry(&kubeconfig).args(&args)).await;
            assert!(output.status.success(), "{}", text(&output.stderr));
            let list: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            list["items"][0]["rules"]
                .as_array()
                .unwrap()
                .iter()
                .find(|rule| rule["resources"][0] == "pods")
                .map(|rule| rule["verbs"].clone())
        }
    };
    // Container jobs only read pods; bare pods are the one kind that writes them.
    assert_eq!(
        pods_rule(&["job"]).await,
        Some(serde_json::json!(["list", "watch"]))
    );
    assert_eq!(
        pods_rule(&["pod"]).await,
        Some(serde_json::json!([
            "create", "get", "list", "watch", "patch", "delete"
        ]))
    );
    assert_eq!(
        pods_rule(&[]).await,
        Some(serde_json::json!([
            "list", "watch", "delete", "create", "get", "patch"
        ]))
    );
    let output = run(kubeferry(&cluster.kubeconfig).args(["rbac", "--kind", "cronjob"])).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("expected one of job, sparkapp, jobset, pod"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn rbac_prints_a_role_kubectl_applies() {
    let cluster = cluster().await;
    let output = run(kubeferry(&cluster.kubeconfig).args([
        "rbac",
        "-n",
        "default",
        "--service-account",
        "kubeferry",
    ]))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("rbac.yaml");
    std::fs::write(&manifests, &output.stdout).unwrap();
    let output = run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["apply", "-f"])
        .arg(&manifests))
    .await;
    let applied = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        applied.contains("role.rbac.authorization.k8s.io/kubeferry created"),
        "{applied}"
    );
    assert!(
        applied.contains("serviceaccount/kubeferry created"),
        "{applied}"
    );
    assert!(
        applied.contains("rolebinding.rbac.authorization.k8s.io/kubeferry created"),
        "{applied}"
    );
}

#[tokio::test]
async fn serve_answers_with_the_command_lines_cluster_flags() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.yaml");
    std::fs::write(
        &tokens,
        "tokens:\n  - name: test\n    token: test-token-0123456789abcdef\n    namespaces: [\"*\"]\n",
    )
    .unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut server = Command::new(env!("CARGO_BIN_EXE_kubeferry"))
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--cluster-name", "from-flag", "serve", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--tokens-file")
        .arg(&tokens)
        .args(["--log-format", "text"])
        .env_remove("NO_COLOR")
        .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut answer = String::new();
    for _ in 0..300 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            stream
                .write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            answer.clear();
            stream.read_to_string(&mut answer).await.unwrap();
            if answer.contains("\"ready\":true") {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"name\":\"from-flag\""), "{answer}");
    server.kill().await.unwrap();
    // Text logs written to a file, not a terminal, carry no colour escapes.
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("listening"), "{log}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
}

/// The execution id `run` reports on stderr as submitted.
fn submitted_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("kubeferry: submitted "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no submission in:\n{stderr}"))
        .to_string()
}

/// The status of `id` as `kubeferry status -o json` prints it.
async fn status_json(kubeconfig: &Path, id: &str) -> Value {
    let output = run(kubeferry(kubeconfig).args(["status", id, "-o", "json"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Whether the Job named by `id` carries kubeferry's cancel mark.
fn cancel_marked(sim: &SimCluster, id: &str) -> bool {
    let mut parts = id.rsplit('/');
    let (name, namespace) = (parts.next().unwrap(), parts.next().unwrap());
    let job = sim
        .object("batch", "jobs", namespace, name)
        .expect("the Job exists");
    job.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key("kubeferry.dev/cancel-requested"))
}

/// Checks that a job left running runs on to success.
async fn assert_runs_on_to_success(cluster: &Cluster, id: &str, gate: &Path) {
    assert_eq!(
        status_json(&cluster.kubeconfig, id).await["state"],
        "STARTED"
    );
    assert!(!cancel_marked(&cluster.sim, id), "no cancel was asked");
    std::fs::write(gate, b"").unwrap();
    let output = run(kubeferry(&cluster.kubeconfig).args(["wait", id, "--timeout", "30s"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("SUCCEEDED"));
}

#[tokio::test]
async fn ctrl_c_with_on_interrupt_leave_exits_130_and_the_job_runs_on() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let job = gated_job(dir.path(), "stay", &gate);
    let running = Spawned::start(
        kubeferry(&cluster.kubeconfig)
            .args(["run", "-f"])
            .arg(&job)
            .args(["--on-interrupt", "leave"]),
    );
    running
        .until("the job to start", |out, _| out.contains("started\n"))
        .await;
    running.interrupt();
    let (status, stdout, stderr) = running.finish().await;
    assert_eq!(status.code(), Some(130), "{stdout}\n{stderr}");
    let id = submitted_id(&stderr);
    assert!(
        stderr.contains(&format!("kubeferry: left {id} running")),
        "{stderr}"
    );
    assert!(!stdout.contains("CANCEL"), "{stdout}");
    assert_runs_on_to_success(&cluster, &id, &gate).await;
}

#[tokio::test]
async fn ctrl_c_asks_on_the_terminal_whether_to_cancel() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    // Each answer on the terminal (standard input a pseudo-terminal): what it does.
    for (answer, name) in [("n\n", "kept"), ("\n", "dropped")] {
        let gate = dir.path().join(format!("{name}.gate"));
        let job = gated_job(dir.path(), name, &gate);
        let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
        let running = Spawned::start(
            kubeferry(&cluster.kubeconfig)
                .args(["run", "-f"])
                .arg(&job)
                .stdin(Stdio::from(pty.slave)),
        );
        running
            .until("the job to start", |out, _| out.contains("started\n"))
            .await;
        running.interrupt();
        running
            .until("the question", |_, err| err.contains("? [Y/n] "))
            .await;
        let mut terminal = std::fs::File::from(pty.master);
        std::io::Write::write_all(&mut terminal, answer.as_bytes()).unwrap();
        let (status, stdout, stderr) = running.finish().await;
        let id = submitted_id(&stderr);
        assert!(
            stderr.contains(&format!("kubeferry: cancel {id}? [Y/n] ")),
            "{stderr}"
        );
        if name == "kept" {
            assert_eq!(status.code(), Some(130), "{stdout}\n{stderr}");
            assert!(stderr.contains(&format!("left {id} running")), "{stderr}");
            assert_runs_on_to_success(&cluster, &id, &gate).await;
        } else {
            assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
            let last = stdout.lines().last().unwrap_or_default();
            assert!(last.contains(" CANCELLED (Cancelled"), "{stdout}");
        }
    }
}

#[tokio::test]
async fn ctrl_c_without_a_terminal_to_ask_on_cancels_and_says_why() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let job = gated_job(dir.path(), "scripted", &gate);
    let running = Spawned::start(
        kubeferry(&cluster.kubeconfig)
            .args(["run", "-f"])
            .arg(&job)
            .stdin(Stdio::null()),
    );
    running
        .until("the job to start", |out, _| out.contains("started\n"))
        .await;
    running.interrupt();
    let (status, stdout, stderr) = running.finish().await;
    let id = submitted_id(&stderr);
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "no terminal to ask on (standard input is not one): cancelling {id}; pass \
             --on-interrupt leave"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("[Y/n]"), "nobody to ask: {stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains(" CANCELLED (Cancelled"), "{stdout}");
}

#[tokio::test]
async fn sweep_lists_jobs_with_unknown_ids_and_deletes_only_when_asked() {
    let cluster = cluster().await;
    let kubeconfig = &cluster.kubeconfig;
    for job_id in ["known-1", "leaked-1"] {
        let output = run(kubeferry(kubeconfig).args([
            "submit",
            "-f",
            &example("hello.yaml"),
            "--job-id",
            job_id,
        ]))
        .await;
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("known.txt");
    std::fs::write(&known, "# the ids this caller knows\nknown-1\n\n").unwrap();
    let known = known.display().to_string();

    let output = run(kubeferry(kubeconfig).args(["sweep", "--known", &known, "-o", "json"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let orphans: Value = serde_json::from_slice(&output.stdout).unwrap();
    let orphans = orphans.as_array().expect("a list");
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!(orphans[0]["jobId"], "leaked-1");
    assert_eq!(orphans[0]["deleted"], false);
    assert!(
        orphans[0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("test/job/default/leaked-1")),
        "{orphans:?}"
    );
    let output = run(kubeferry(kubeconfig).args(["sweep", "--known", &known])).await;
    assert!(text(&output.stdout).contains("leaked-1"));
    assert!(
        text(&output.stderr).contains("Nothing was deleted; pass --delete"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(
        cluster.sim.count("batch", "jobs"),
        2,
        "listing deletes nothing"
    );

    let output =
        run(kubeferry(kubeconfig).args(["sweep", "--known", &known, "--delete", "-o", "json"]))
            .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let deleted: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(deleted[0]["jobId"], "leaked-1");
    assert_eq!(deleted[0]["deleted"], true);
    let end = tokio::time::Instant::now() + DEADLINE;
    while cluster.sim.count("batch", "jobs") != 1 {
        assert!(
            tokio::time::Instant::now() < end,
            "the orphan is never deleted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let output = run(kubeferry(kubeconfig).args(["list", "-o", "json"])).await;
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed["items"][0]["jobId"], "known-1", "{listed}");

    // The ids may come on standard input; nothing is left to sweep.
    let mut sweep = kubeferry(kubeconfig)
        .args(["sweep", "--known", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = sweep.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"known-1\n")
        .await
        .unwrap();
    drop(stdin);
    let output = tokio::time::timeout(DEADLINE, sweep.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("No orphans in namespace default."));
    assert_eq!(text(&output.stdout), "");
}

/// Two simulated clusters under two contexts of one kubeconfig (`alpha`, the current one, and
/// `beta`), and a namespace `team` on `beta`.
struct TwoClusters {
    alpha: SimCluster,
    beta: SimCluster,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

async fn two_clusters() -> TwoClusters {
    let alpha = SimCluster::start(SimConfig::for_tests()).await.unwrap();
    let beta = SimCluster::start(SimConfig::for_tests()).await.unwrap();
    let parse = |yaml: String| -> Value { serde_saphyr::from_str(&yaml).unwrap() };
    let mut config = parse(alpha.kubeconfig_yaml("alpha"));
    let other = parse(beta.kubeconfig_yaml("beta"));
    for list in ["clusters", "users", "contexts"] {
        let items = other[list].as_array().unwrap().clone();
        config[list].as_array_mut().unwrap().extend(items);
    }
    config["current-context"] = json!("alpha");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    beta.create(
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
    )
    .unwrap();
    TwoClusters {
        alpha,
        beta,
        kubeconfig,
        _dir: dir,
    }
}

/// The execution id a `kubeferry submit` printed.
async fn submit_hello(kubeconfig: &Path, flags: &[&str]) -> String {
    let output =
        run(kubeferry(kubeconfig)
            .args(flags)
            .args(["submit", "-f", &example("hello.yaml")]))
        .await;
    assert!(
        output.status.success(),
        "{flags:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout).trim().to_string()
}

/// The execution ids `kubeferry list -o json` printed.
async fn listed_ids(kubeconfig: &Path, flags: &[&str]) -> Vec<String> {
    let output = run(kubeferry(kubeconfig)
        .args(flags)
        .args(["list", "-o", "json"]))
    .await;
    assert!(
        output.status.success(),
        "{flags:?}: {}",
        text(&output.stderr)
    );
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["job"]["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn context_and_namespace_choose_where_submit_status_and_list_go() {
    let clusters = two_clusters().await;
    let kubeconfig = &clusters.kubeconfig;
    let on_alpha = submit_hello(kubeconfig, &[]).await;
    assert!(
        on_alpha.starts_with("alpha/job/default/hello-"),
        "{on_alpha}"
    );
    let on_beta = submit_hello(kubeconfig, &["--context", "beta"]).await;
    assert!(on_beta.starts_with("beta/job/default/hello-"), "{on_beta}");
    let in_team = submit_hello(kubeconfig, &["--context", "beta", "-n", "team"]).await;
    assert!(in_team.starts_with("beta/job/team/hello-"), "{in_team}");
    let name = |id: &str| id.rsplit('/').next().unwrap().to_string();
    assert_eq!(clusters.alpha.count("batch", "jobs"), 1);
    assert_eq!(clusters.beta.count("batch", "jobs"), 2);
    assert!(
        clusters
            .beta
            .object("batch", "jobs", "team", &name(&in_team))
            .is_some()
    );

    assert_eq!(listed_ids(kubeconfig, &[]).await, [on_alpha.as_str()]);
    assert_eq!(
        listed_ids(kubeconfig, &["--context", "beta"]).await,
        [on_beta.as_str()]
    );
    assert_eq!(
        listed_ids(kubeconfig, &["--context", "beta", "--namespace", "team"]).await,
        [in_team.as_str()]
    );

    // Status goes to the context's cluster, in the id's namespace; `-n` may repeat it.
    for flags in [
        &["--context", "beta"][..],
        &["--context", "beta", "-n", "team"],
    ] {
        let output = run(kubeferry(kubeconfig)
            .args(flags)
            .args(["status", &in_team, "-o", "json"]))
        .await;
        assert!(
            output.status.success(),
            "{flags:?}: {}",
            text(&output.stderr)
        );
        let status: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(status["id"], in_team.as_str());
    }
    // ... but not contradict it.
    let output =
        run(kubeferry(kubeconfig).args(["--context", "beta", "-n", "default", "status", &in_team]))
            .await;
    assert_eq!(output.status.code(), Some(2), "a usage error");
    assert!(
        text(&output.stderr).contains(&format!(
            "error: execution id {in_team} is in namespace \"team\", but -n says \"default\""
        )),
        "{}",
        text(&output.stderr)
    );
    // A job file that names its namespace, and `-n` another: a usage error, nothing created.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in-team.yaml");
    std::fs::write(&file, "name: hello\nimage: busybox:1.36\nnamespace: team\n").unwrap();
    let output = run(kubeferry(kubeconfig)
        .args(["--context", "beta", "-n", "default", "submit", "-f"])
        .arg(&file))
    .await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(
            "error: namespace: the job says \"team\" but \"default\" was requested; remove one"
        ),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(clusters.beta.count("batch", "jobs"), 2);
    // The id names another cluster than the context's: a configuration error, not "no such job".
    let output = run(kubeferry(kubeconfig).args(["status", &in_team])).await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains(&format!(
            "execution id {in_team} belongs to cluster \"beta\", but this kubeferry is connected \
             to cluster \"alpha\""
        )),
        "{}",
        text(&output.stderr)
    );
    // A context the kubeconfig does not have is named in the error.
    let output = run(kubeferry(kubeconfig).args(["--context", "gamma", "list"])).await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("gamma"),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test]
async fn context_without_any_kubeconfig_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    for args in [
        vec!["--context", "beta", "list"],
        // Not even `run` falls back to the embedded cluster when a context is named.
        vec!["--context", "beta", "run", "-f", &example("hello.yaml")],
    ] {
        let output = run(kubeferry_without_cluster(home.path()).args(&args)).await;
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert_eq!(
            stderr.trim(),
            "error: --context \"beta\": no kubeconfig found (no --kubeconfig, $KUBECONFIG or ~/.kube/config)",
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn logs_follow_streams_lines_as_they_come_and_ends_with_the_job() {
    let cluster = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let gate = |n: u32| dir.path().join(format!("gate-{n}"));
    let script = format!(
        "echo one; while [ ! -e {0} ]; do sleep 0.02; done; echo two; \
         while [ ! -e {1} ]; do sleep 0.02; done; echo three",
        gate(1).display(),
        gate(2).display()
    );
    let job = dir.path().join("steps.yaml");
    std::fs::write(
        &job,
        format!(
            "name: steps\nimage: busybox\ncommand: [sh, -c, {}]\n",
            serde_json::to_string(&script).unwrap()
        ),
    )
    .unwrap();
    let output = run(kubeferry(&cluster.kubeconfig)
        .args(["submit", "-f"])
        .arg(&job))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();

    let following = Spawned::start(kubeferry(&cluster.kubeconfig).args(["logs", "-f", &id]));
    // Each line is printed before the job writes the next: the gates hold it back.
    following
        .until("the first line", |out, _| out == "one\n")
        .await;
    std::fs::write(gate(1), b"").unwrap();
    following
        .until("the second line", |out, _| out == "one\ntwo\n")
        .await;
    std::fs::write(gate(2), b"").unwrap();
    let (status, stdout, stderr) = following.finish().await;
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "one\ntwo\nthree\n");
}

/// The long flags a text names (`--name`).
fn long_flags(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| {
            word.strip_prefix("--")
                .is_some_and(|name| name.starts_with(|c: char| c.is_ascii_lowercase()))
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn sim_serve_help_lists_the_flags_the_guide_documents() {
    let output =
        run(Command::new(env!("CARGO_BIN_EXE_kubeferry")).args(["sim", "serve", "--help"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let help = text(&output.stdout);
    let guide = std::fs::read_to_string(repo().join("docs/simulated-cluster.md")).unwrap();
    let start = guide
        .find("`kubeferry sim serve` runs until interrupted")
        .expect("docs/simulated-cluster.md documents kubeferry sim serve");
    let section = &guide[start..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let documented = long_flags(section);
    let offered = long_flags(&help);
    for flag in [
        "--port",
        "--kubeconfig",
        "--kubeconfig-context",
        "--nodes",
        "--node-cpu",
        "--node-memory",
        "--node-pods",
        "--gpus",
        "--amd-gpus",
        "--node-label",
        "--node-taint",
        "--rbac",
        "--token",
        "--no-auth",
        "--no-tls",
        "--unpullable-registry",
        "--image-entrypoint",
        "--crds",
        "--watch-history",
        "--bookmark-interval-ms",
        "--oom-poll-ms",
        "--image-pull-backoff-ms",
    ] {
        assert!(offered.contains(flag), "--help lists {flag}:\n{help}");
        assert!(
            documented.contains(flag),
            "docs/simulated-cluster.md documents {flag}"
        );
    }
    let claimed: Vec<&String> = documented
        .iter()
        // kubectl's flag, named to say it is not needed.
        .filter(|flag| *flag != "--validate" && !offered.contains(*flag))
        .collect();
    assert!(
        claimed.is_empty(),
        "docs/simulated-cluster.md claims flags `sim serve` does not have: {claimed:?}"
    );
    assert!(
        help.contains("for tests and local debugging only"),
        "--no-auth and --no-tls say what they are for:\n{help}"
    );
}

/// Whether a process is gone (or a zombie nobody reaped yet: it runs no more).
fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn sim_serve_stops_its_containers_and_removes_its_files_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let kubeconfig = dir.path().join("sim.kubeconfig");
    let (mut server, mut stderr) = sim_serve(
        &kubeconfig,
        Command::new(env!("CARGO_BIN_EXE_kubeferry")).env("TMPDIR", &tmp),
    )
    .await;
    let pid_file = dir.path().join("pid");
    // (`$$` would be Kubernetes' escape for `$`.)
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let job = shell_job(dir.path(), "sleeper", &script);
    let output = run(kubeferry(&kubeconfig).args(["submit", "-f"]).arg(&job)).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let pid: i32 = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the container wrote its process id");
    assert!(!process_gone(pid), "the container runs");
    let sim_files = tmp.join("kubeferry-sim");
    assert!(
        std::fs::read_dir(&sim_files).unwrap().count() > 0,
        "the cluster keeps its pods' files under TMPDIR"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server.id().unwrap()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), server.wait())
        .await
        .expect("sim serve stopped on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let mut said = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(10), stderr.next_line()).await
    {
        said.push(line);
    }
    assert!(
        said.iter()
            .any(|line| line.contains("SIGTERM: stopping the simulated cluster")),
        "{said:?}"
    );
    assert!(process_gone(pid), "the container's process was stopped");
    assert_eq!(
        std::fs::read_dir(&sim_files).unwrap().count(),
        0,
        "the pods' files were removed"
    );
}
