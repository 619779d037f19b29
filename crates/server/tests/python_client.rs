//! A client in Python's standard library, finding operations in the OpenAPI document, drives
//! one submit-wait-logs cycle.

mod common;

use common::*;

#[tokio::test]
async fn a_python_client_built_on_the_openapi_document_runs_a_job() {
    let sim = Sim::start().await;
    let service = sim.serve().await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/client/kubeferry_client.py"
    );
    let output = tokio::time::timeout(
        DEADLINE,
        tokio::process::Command::new("python3")
            .arg(script)
            .arg(format!("http://{}", service.addr()))
            .arg(ADMIN_TOKEN)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finished in time")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        result["id"]
            .as_str()
            .unwrap()
            .starts_with("sim/job/default/python-client-1-"),
        "{result}"
    );
    assert_eq!(result["final"]["state"], "SUCCEEDED", "{result}");
    assert_eq!(result["final"]["exitCode"], 0);
    assert_eq!(
        result["states"].as_array().unwrap().last().unwrap(),
        "SUCCEEDED"
    );
    assert_eq!(result["log"], "hello from python\nbye\n");
    assert_eq!(result["wrongCluster"], "wrong_cluster");
    service.stop().await;
}
