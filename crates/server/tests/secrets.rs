//! Secrets never reach the service's output: the callers' bearer tokens (accepted, refused or
//! out of scope) and the token it uses with Kubernetes appear nowhere in what a
//! `kubeferry-server` process writes, at the most verbose log level, through submissions,
//! reads, logs, errors and a reload of the tokens file.

mod common;

use common::*;
use hyper::http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn tokens_never_appear_in_the_services_output() {
    let sim = Sim::start().await;
    // The service reaches Kubernetes with a token of its own (a service account's).
    let kubernetes_token = sim.sim.token_for("default", "kubeferry");
    let kubeconfig = sim.dir.path().join("kubeconfig-sa");
    sim.sim
        .write_kubeconfig_as(&kubeconfig, CLUSTER, &kubernetes_token)
        .unwrap();
    let process = Process::start_with(
        &sim,
        "secrets",
        &kubeconfig,
        &[("RUST_LOG", "debug"), ("KUBEFERRY_LOG_FORMAT", "json")],
    )
    .await;
    let addr = process.api.base_addr();
    let admin = Api::new(addr, Some(ADMIN_TOKEN));
    let team_a = Api::new(addr, Some(TEAM_A_TOKEN));
    const WRONG_TOKEN: &str = "wrong-token-0123456789abcdef";
    let wrong = Api::new(addr, Some(WRONG_TOKEN));

    // Accepted: a job submitted, read, its log read, cancelled.
    let id = admin.submit(shell_job("quiet", "echo hello")).await;
    admin.wait_for(&id, "SUCCEEDED").await;
    assert_eq!(
        admin.get(&format!("/v1/jobs/{id}/logs")).await.json()["log"],
        "hello\n"
    );
    let reply = admin
        .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text());
    // Refused: a wrong token, a malformed header, a token outside its namespaces.
    wrong
        .get("/v1/jobs")
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    Api::new(addr, None)
        .custom(
            Method::GET,
            "/v1/jobs",
            None,
            &[("authorization", &format!("Basic {ADMIN_TOKEN}"))],
        )
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    team_a
        .get("/v1/jobs?namespace=default")
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    let mut elsewhere = shell_job("elsewhere", "true");
    elsewhere["namespace"] = json!("default");
    team_a
        .post("/v1/jobs", &elsewhere)
        .await
        .error(StatusCode::FORBIDDEN, "forbidden");
    // A token given where it does not belong is not echoed either.
    wrong
        .get(&format!("/v1/jobs?selector={WRONG_TOKEN}"))
        .await
        .error(StatusCode::UNAUTHORIZED, "unauthorized");
    // The tokens file is re-read (a new token takes effect) without logging it.
    const NEW_TOKEN: &str = "fresh-token-0123456789abcdef";
    std::fs::write(
        sim.tokens_file(),
        format!(
            "tokens:\n  - name: admin\n    token: {ADMIN_TOKEN}\n    namespaces: [\"*\"]\n  - name: fresh\n    token: {NEW_TOKEN}\n    namespaces: [\"*\"]\n"
        ),
    )
    .unwrap();
    let fresh = Api::new(addr, Some(NEW_TOKEN));
    eventually("the new token to work", || async {
        (fresh.get("/v1/jobs").await.status == StatusCode::OK).then_some(())
    })
    .await;

    let status = process.terminate().await;
    assert!(status.success(), "{status}");
    let output = std::fs::read_to_string(sim.dir.path().join("secrets.log")).unwrap();
    // The output is there and says what happened, by the callers' names.
    assert!(output.contains("\"status\":401"), "{output}");
    assert!(output.contains("\"status\":403"), "{output}");
    assert!(
        output.contains("refused an invalid bearer token"),
        "{output}"
    );
    for secret in [
        ADMIN_TOKEN,
        TEAM_A_TOKEN,
        WRONG_TOKEN,
        NEW_TOKEN,
        kubernetes_token.as_str(),
    ] {
        assert!(
            !output.contains(secret),
            "a token appears in the output:\n{output}"
        );
    }
}
