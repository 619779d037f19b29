//! The official Kubernetes Python client (PyPI `kubernetes`) drives the cluster with its typed
//! models, which send no `kind` or `apiVersion`: namespaces, Jobs and pods created, read,
//! listed, patched, watched and deleted as on a real cluster. Where `python3` lacks the pinned
//! client, the test installs it once into a virtual environment under the target directory.

mod common;

use std::time::Duration;

use serde_json::json;

use common::start;

/// The client's version: the one for the Kubernetes version the cluster serves (1.33).
const CLIENT_VERSION: &str = "33.1.0";

/// A Python interpreter that imports the pinned client: `python3` itself when it has it, else
/// a virtual environment made (once) under the target directory with the client installed.
async fn python_with_client() -> std::path::PathBuf {
    let has_client = |python: &std::path::Path| {
        std::process::Command::new(python)
            .args([
                "-c",
                &format!(
                    "import kubernetes, sys; sys.exit(kubernetes.__version__ != '{CLIENT_VERSION}')"
                ),
            ])
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let system = std::path::PathBuf::from("python3");
    if has_client(&system) {
        return system;
    }
    let venv = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("python-kubernetes-{CLIENT_VERSION}"));
    let python = venv.join("bin").join("python");
    if has_client(&python) {
        return python;
    }
    let run = |program: &std::path::Path, args: &[&str]| {
        let output = std::process::Command::new(program)
            .args(args)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
        assert!(
            output.status.success(),
            "{} {args:?} failed:\n{}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let venv_text = venv.to_str().expect("a UTF-8 target directory").to_string();
    tokio::task::spawn_blocking(move || {
        run(&system, &["-m", "venv", &venv_text]);
        run(
            &python,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                &format!("kubernetes=={CLIENT_VERSION}"),
            ],
        );
        python
    })
    .await
    .expect("the client is installed")
}

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
    let python = python_with_client().await;
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(&python)
            .arg(script)
            .arg(&kubeconfig)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client finished in time")
    .expect("the Python interpreter runs");
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
