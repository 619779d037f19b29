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
        &rbac::permissions(&[JobKind::Job]),
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
