//! The `deploy/` manifests: their RBAC is exactly kubeferry's permission table.

use kubeferry_core::JobKind;
use kubeferry_kube::rbac;

fn deploy_file(name: &str) -> String {
    let path = format!("{}/../../deploy/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_rbac_manifest_is_what_kubeferry_rbac_prints() {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&deploy_file("10-rbac.yaml")).unwrap();
    let role = rbac::role(
        "kubeferry",
        Some("kubeferry"),
        &rbac::permissions(&JobKind::ALL),
    );
    let (account, binding) = rbac::binding("kubeferry", "kubeferry", Some("kubeferry"));
    let expected = [
        serde_json::to_value(&account).unwrap(),
        serde_json::to_value(&role).unwrap(),
        serde_json::to_value(&binding).unwrap(),
    ];
    assert_eq!(documents.len(), expected.len());
    for (written, expected) in documents.iter().zip(&expected) {
        assert_eq!(written, expected);
    }
}

#[tokio::test]
async fn kubectl_applies_the_manifests_to_the_simulated_cluster() {
    let sim = kubeferry_sim::SimCluster::start(kubeferry_sim::SimConfig::for_tests())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig_as(&kubeconfig, "sim", sim.admin_token())
        .unwrap();
    let deploy = format!("{}/../../deploy", env!("CARGO_MANIFEST_DIR"));
    let apply = || {
        let kubeconfig = kubeconfig.clone();
        let deploy = deploy.clone();
        async move {
            tokio::process::Command::new("/usr/bin/kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["apply", "-f", &deploy])
                .kill_on_drop(true)
                .output()
                .await
                .expect("kubectl runs")
        }
    };
    let output = apply().await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for (group, resource, namespace, name) in [
        ("", "namespaces", "", "kubeferry"),
        ("", "serviceaccounts", "kubeferry", "kubeferry"),
        (
            "rbac.authorization.k8s.io",
            "roles",
            "kubeferry",
            "kubeferry",
        ),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            "kubeferry",
            "kubeferry",
        ),
        ("", "configmaps", "kubeferry", "kubeferry"),
        ("", "configmaps", "kubeferry", "kubeferry-templates"),
        ("apps", "deployments", "kubeferry", "kubeferry"),
        ("", "services", "kubeferry", "kubeferry"),
    ] {
        assert!(
            sim.object(group, resource, namespace, name).is_some(),
            "{resource} {namespace}/{name} was not created:\n{stdout}"
        );
    }
    let deployment = sim
        .object("apps", "deployments", "kubeferry", "kubeferry")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);

    // Applying again changes nothing.
    let again = apply().await;
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(
        stdout.lines().all(|line| line.ends_with(" unchanged")),
        "{stdout}"
    );
}
