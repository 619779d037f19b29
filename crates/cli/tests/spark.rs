//! Spark jobs through the `kubeferry` binary: the examples on the embedded cluster, a failing
//! driver's exit code, `submit`/`status`/`wait`/`logs`/`cancel`/`list` with `sparkapp` ids, the
//! default operator, a run under the Role `kubeferry rbac` prints, and a reserved Spark property
//! refused before anything is created.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use kubeferry_sim::controllers::spark::with_spark_operators;
use kubeferry_sim::{SimCluster, SimConfig};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}

/// `kubeferry` with no kubeconfig anywhere: a fresh home, no `$KUBECONFIG`.
fn kubeferry_without_cluster(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command
        .env_remove("KUBECONFIG")
        .env_remove("KUBEFERRY_SPARK_OPERATOR")
        .env("HOME", home)
        .kill_on_drop(true);
    command
}

/// `kubeferry` pointed at a kubeconfig.
fn kubeferry(kubeconfig: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubeferry"));
    command
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBEFERRY_SPARK_OPERATOR")
        .kill_on_drop(true);
    command
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

struct Cluster {
    sim: SimCluster,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

async fn cluster(config: SimConfig) -> Cluster {
    let sim = SimCluster::start(with_spark_operators(config))
        .await
        .expect("the cluster starts");
    let dir = tempfile::tempdir().expect("a directory");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, "test", sim.admin_token())
        .expect("written");
    Cluster {
        sim,
        kubeconfig,
        dir,
    }
}

#[tokio::test]
async fn spark_examples_run_through_their_states_on_the_embedded_cluster() {
    for example_file in ["spark-pi-apache.yaml", "spark-pi-kubeflow.yaml"] {
        let home = tempfile::tempdir().expect("a home");
        let gate = home.path().join("gate");
        let mut child = kubeferry_without_cluster(home.path())
            .args(["run", "-f", &example(example_file), "--set"])
            .arg(format!("partitions=until={}", gate.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("started");
        let stdout = child.stdout.take().expect("stdout");
        let collect = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut all = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                all.push(line);
            }
            all
        });
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut progress = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), stderr.next_line())
                .await
                .expect("progress within 30s")
                .expect("readable")
                .expect("the job starts before kubeferry ends");
            let started = line.contains(" STARTED (Running)");
            progress.push(line);
            if started {
                break;
            }
        }
        std::fs::write(&gate, "").expect("the driver is released");
        while let Ok(Some(line)) = stderr.next_line().await {
            progress.push(line);
        }
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("ends")
            .expect("waited");
        let stdout = collect.await.expect("joined");
        assert!(status.success(), "{example_file}: {progress:?} {stdout:?}");
        assert!(
            progress[0].contains("running on an embedded simulated cluster"),
            "{progress:?}"
        );
        let started = progress
            .iter()
            .position(|l| l.contains(" STARTED (Running)"));
        let succeeded = progress
            .iter()
            .position(|l| l.contains(" SUCCEEDED (Completed)"));
        assert!(
            matches!((started, succeeded), (Some(a), Some(b)) if a < b),
            "{example_file}: {progress:?}"
        );
        // The apache operator's own state is on the line: the driver is held, so the job is
        // seen running in one of the operator's running states.
        if example_file == "spark-pi-apache.yaml" {
            let line = &progress[started.unwrap_or_default()];
            assert!(
                [
                    "DriverReady:",
                    "InitializedBelowThresholdExecutors:",
                    "RunningHealthy:"
                ]
                .iter()
                .any(|state| line.contains(state)),
                "{line}"
            );
        }
        assert!(
            stdout
                .iter()
                .any(|l| l.contains("INFO SparkContext: Submitted application: SparkPi")),
            "{stdout:?}"
        );
        assert!(
            stdout.iter().any(|l| l.starts_with("Pi is roughly 3.14")),
            "{stdout:?}"
        );
        let last = stdout.last().expect("a final line");
        assert!(
            last.starts_with("sim/sparkapp/default/spark-pi-")
                && last.contains(" SUCCEEDED (Completed, exit code 0"),
            "{last}"
        );
    }
}

#[tokio::test]
async fn a_failing_spark_driver_fails_the_run_with_its_exit_code() {
    for example_file in ["spark-pi-apache.yaml", "spark-pi-kubeflow.yaml"] {
        let home = tempfile::tempdir().expect("a home");
        let output = run(kubeferry_without_cluster(home.path()).args([
            "run",
            "-f",
            &example(example_file),
            "--set",
            "partitions=exit=3",
        ]))
        .await;
        let stdout = text(&output.stdout);
        let stderr = text(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{example_file}: {stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("asked to exit with code 3"),
            "{example_file}: the driver's log: {stdout}"
        );
        let last = stdout.lines().last().expect("a final line");
        assert!(
            last.contains(" FAILED (SparkFailed") && last.contains("exit code 3"),
            "{example_file}: {last}"
        );
        assert!(
            !stderr.contains(" SUCCEEDED"),
            "{example_file}: never reported otherwise: {stderr}"
        );
    }
}

#[tokio::test]
async fn spark_jobs_have_status_wait_logs_list_and_cancel() {
    let cluster = cluster(SimConfig::for_tests()).await;
    let kubeconfig = &cluster.kubeconfig;
    let output =
        run(kubeferry(kubeconfig).args(["submit", "-f", &example("spark-pi-kubeflow.yaml")])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();
    assert!(id.starts_with("test/sparkapp/default/spark-pi-"), "{id}");

    let output = run(kubeferry(kubeconfig).args(["wait", &id, "--timeout", "30s"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("SUCCEEDED"));

    let output = run(kubeferry(kubeconfig).args(["status", &id, "-o", "json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(status["state"], "SUCCEEDED");
    assert_eq!(status["exitCode"], 0);
    assert!(status["startedAt"].is_string() && status["finishedAt"].is_string());

    // The Kubeflow operator keeps the driver: its log is there after the end.
    let output = run(kubeferry(kubeconfig).args(["logs", &id])).await;
    let log = text(&output.stdout);
    assert!(log.contains("Pi is roughly 3.14"), "{log}");
    let output = run(kubeferry(kubeconfig).args(["logs", &id, "--tail", "1"])).await;
    assert_eq!(
        text(&output.stdout).lines().count(),
        1,
        "{}",
        text(&output.stdout)
    );

    // A running one is cancelled.
    let output = run(kubeferry(kubeconfig).args([
        "submit",
        "-f",
        &example("spark-pi-apache.yaml"),
        "--set",
        "partitions=sleep=30",
    ]))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let long = text(&output.stdout).trim().to_string();
    let output = run(kubeferry(kubeconfig).args(["cancel", &long, "--wait"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("CANCELLED"),
        "{}",
        text(&output.stdout)
    );
    let output = run(kubeferry(kubeconfig).args(["wait", &long])).await;
    assert!(!output.status.success());

    let output = run(kubeferry(kubeconfig).args(["list", "-o", "yaml"])).await;
    let listed = text(&output.stdout);
    assert!(
        listed.contains(&id) && listed.contains("SUCCEEDED"),
        "{listed}"
    );

    // A job file that names no operator goes to the one asked for.
    let plain = cluster.dir.path().join("plain.yaml");
    std::fs::write(
        &plain,
        "kind: SparkJob\nname: plain\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/app.jar\nmainClass: App\n",
    )
    .expect("written");
    let output = run(kubeferry(kubeconfig)
        .args(["submit", "--spark-operator", "kubeflow", "-f"])
        .arg(&plain))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let plain_id = text(&output.stdout).trim().to_string();
    let name = plain_id.rsplit('/').next().expect("a name");
    assert!(
        cluster
            .sim
            .object("sparkoperator.k8s.io", "sparkapplications", "default", name)
            .is_some()
    );
}

#[tokio::test]
async fn a_spark_job_runs_under_the_role_kubeferry_rbac_prints() {
    let mut config = SimConfig::for_tests();
    config.rbac = true;
    let cluster = cluster(config).await;
    let output = run(kubeferry(&cluster.kubeconfig).args([
        "rbac",
        "-n",
        "default",
        "--service-account",
        "sparky",
        "-o",
        "json",
    ]))
    .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    for item in list["items"].as_array().expect("items") {
        cluster
            .sim
            .create("default", item.clone())
            .expect("created");
    }
    let limited = cluster.dir.path().join("sparky.kubeconfig");
    cluster
        .sim
        .write_kubeconfig_as(
            &limited,
            "test",
            &cluster.sim.token_for("default", "sparky"),
        )
        .expect("written");
    for example_file in ["spark-pi-apache.yaml", "spark-pi-kubeflow.yaml"] {
        let output = run(kubeferry(&limited).args(["run", "-f", &example(example_file)])).await;
        let stdout = text(&output.stdout);
        assert!(
            output.status.success(),
            "{example_file}: {stdout}\n{}",
            text(&output.stderr)
        );
        assert!(stdout.contains("Pi is roughly"), "{stdout}");
        assert!(
            stdout
                .lines()
                .last()
                .is_some_and(|l| l.contains(" SUCCEEDED (")),
            "{stdout}"
        );
    }
}

/// A Spark property the Kubeflow operator's webhook would deny is refused when the file is read,
/// at its line and column with the field named, and nothing reaches the cluster.
#[tokio::test]
async fn a_reserved_spark_property_is_refused_before_anything_is_created() {
    let cluster = cluster(SimConfig::for_tests()).await;
    let file = cluster.dir.path().join("pi.yaml");
    std::fs::write(
        &file,
        "kind: SparkJob\nname: pi\noperator: kubeflow\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\nsparkConf:\n  spark.kubernetes.executor.container.image: other/spark:3.5.3\n",
    )
    .expect("written");
    let output =
        run(kubeferry(&cluster.kubeconfig).args(["submit", "-f", &file.display().to_string()]))
            .await;
    let stderr = text(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:8:46: sparkConf.\"spark.kubernetes.executor.container.image\": spark.kubernetes.executor.container.image is set from image; use image instead",
            file.display()
        )),
        "{stderr}"
    );
    for group in ["sparkoperator.k8s.io", "spark.apache.org"] {
        assert_eq!(cluster.sim.count(group, "sparkapplications"), 0, "{group}");
    }
}
