//! JobSets through the `kubeferry` binary: the example on the embedded cluster, the replicated
//! jobs' summary in `status` (table and JSON), and the replicas' logs.

mod common;

use std::path::Path;

use kubeferry_sim::{CrdBundle, SimCluster, SimConfig};
use serde_json::Value;
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

#[tokio::test]
async fn the_example_runs_on_the_embedded_cluster() {
    let home = tempfile::tempdir().unwrap();
    let output =
        run(kubeferry_without_cluster(home.path()).args(["run", "-f", &example("jobset.yaml")]))
            .await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // The log followed is the leader's (the first pod of the first replicated job).
    assert!(stdout.contains("leader done\n"), "{stdout}");
    assert!(!stdout.contains("worker done"), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sim/jobset/default/train-") && last.contains(" SUCCEEDED (Completed"),
        "{last}"
    );
}

#[tokio::test]
async fn status_shows_the_replicated_jobs_and_logs_name_a_replica() {
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    let sim = SimCluster::start(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, "test", sim.admin_token())
        .unwrap();

    let output = run(kubeferry(&kubeconfig).args(["submit", "-f", &example("jobset.yaml")])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id = text(&output.stdout).trim().to_string();
    assert!(id.starts_with("test/jobset/default/train-"), "{id}");
    let output = run(kubeferry(&kubeconfig).args(["wait", &id, "--timeout", "30s"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));

    let output = run(kubeferry(&kubeconfig).args(["status", &id, "-o", "json"])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status["state"], "SUCCEEDED");
    assert_eq!(status["replicas"]["restarts"], 0);
    assert_eq!(status["replicas"]["terminalState"], "Completed");
    assert_eq!(status["replicas"]["replicatedJobs"][1]["name"], "workers");
    assert_eq!(status["replicas"]["replicatedJobs"][1]["succeeded"], 2);
    assert_eq!(status["replicas"]["replicatedJobs"][1]["replicas"], 2);

    let output = run(kubeferry(&kubeconfig).args(["status", &id])).await;
    let table = text(&output.stdout);
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.contains(" REPLICAS ") && header.ends_with("MESSAGE"),
        "{table}"
    );
    assert!(
        lines
            .next()
            .unwrap_or_default()
            .contains("leader 1/1 succeeded; workers 2/2 succeeded"),
        "{table}"
    );

    let output = run(kubeferry(&kubeconfig).args(["logs", &id])).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).ends_with("leader done\n"),
        "{}",
        text(&output.stdout)
    );
    let output =
        run(kubeferry(&kubeconfig).args(["logs", &id, "--replica", "workers", "--index", "1"]))
            .await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).ends_with("worker done\n"),
        "{}",
        text(&output.stdout)
    );

    let output = run(kubeferry(&kubeconfig).args([
        "logs",
        "test/job/default/hello",
        "--replica",
        "workers",
    ]))
    .await;
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("--replica is only for JobSets"),
        "{}",
        text(&output.stderr)
    );
}
