//! The `kubeferry` binary as a user runs it: against the embedded cluster, against a simulated
//! cluster it is pointed at with a kubeconfig, and with kubectl looking at the same cluster.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kubeferry_sim::{SimCluster, SimConfig};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> String {
    repo().join("examples").join(name).display().to_string()
}

/// `kubeferry` with no kubeconfig anywhere: a fresh home, no `$KUBECONFIG`.
fn kubeferry_without_cluster(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .kill_on_drop(true);
    command
}

/// `kubeferry` pointed at a kubeconfig.
fn kubeferry(kubeconfig: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command.env("KUBECONFIG", kubeconfig).kill_on_drop(true);
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn run(command: &mut Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("kubeferry finished within a minute")
        .expect("kubeferry started")
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
            vec!["cancel".into(), "test/pod/default/x".into()],
            "error: execution id kind \"pod\" is unknown".into(),
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
    assert_eq!(cluster.sim.count("batch", "jobs"), 0, "the Job is deleted");
}

#[tokio::test]
async fn kubectl_sees_what_kubeferry_submitted_to_sim_serve() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("sim.kubeconfig");
    let mut server = Command::new(env!("CARGO_BIN_EXE_kubeferry"))
        .args(["sim", "serve", "--kubeconfig"])
        .arg(&kubeconfig)
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
async fn sim_serve_help_lists_the_flags_the_readme_documents() {
    let output =
        run(Command::new(env!("CARGO_BIN_EXE_kubeferry")).args(["sim", "serve", "--help"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let help = text(&output.stdout);
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("`kubeferry sim serve` runs until interrupted")
        .expect("the README documents kubeferry sim serve");
    let section = &readme[start..];
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
        assert!(documented.contains(flag), "the README documents {flag}");
    }
    let claimed: Vec<&String> = documented
        .iter()
        // kubectl's flag, named to say it is not needed.
        .filter(|flag| *flag != "--validate" && !offered.contains(*flag))
        .collect();
    assert!(
        claimed.is_empty(),
        "the README claims flags `sim serve` does not have: {claimed:?}"
    );
    assert!(
        help.contains("for tests and local debugging only"),
        "--no-auth and --no-tls say what they are for:\n{help}"
    );
}
