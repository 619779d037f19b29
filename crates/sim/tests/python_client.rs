//! The official Kubernetes Python client (PyPI `kubernetes`, installed by `.ci/run`) drives the
//! cluster with its typed models, which send no `kind` or `apiVersion`: namespaces, Jobs and
//! pods created, read, listed, patched, watched and deleted as on a real cluster.

mod common;

use std::time::Duration;

use serde_json::json;

use common::start;

#[tokio::test]
async fn the_official_python_client_runs_namespaces_jobs_and_pods() {
    let sim = start().await;
    let dir = std::env::temp_dir().join(format!("kubeferry-sim-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let kubeconfig = dir.join("kubeconfig");
    sim.cluster
        .write_kubeconfig(&kubeconfig)
        .expect("the kubeconfig is written");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/official_client.py"
    );
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(&kubeconfig)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished in time")
    .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed (exit {:?}):\n{stdout}\n{stderr}",
        output.status.code()
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("the client prints its summary as JSON");
    assert_eq!(
        summary,
        json!({
            "namespace": {"kind": "Namespace", "phase": "Active"},
            "namespaceAgain": {"status": 409, "reason": "AlreadyExists"},
            "namespacesListed": ["python-typed"],
            "namespaceLabels": {"by": "python", "kubernetes.io/metadata.name": "python-typed", "patched": "yes"},
            "job": {"kind": "Job", "apiVersion": "batch/v1"},
            "jobsListed": ["hello"],
            "jobLabels": {"app": "typed", "patched": "yes"},
            "jobFinished": {"succeeded": 1},
            "jobStatusSucceeded": 1,
            "jobLog": "hello from the typed client\n",
            "strict": {"status": 400, "message": "strict decoding error: unknown field \"spec.colour\""},
            "pod": {"phase": "Succeeded", "annotation": "patched", "log": "single\n"},
            "podDeleted": true,
            "jobDeleted": true,
            "podsLeft": 0,
            "namespaceDeleted": true,
        })
    );
}
