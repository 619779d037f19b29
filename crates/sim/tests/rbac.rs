//! Authentication and RBAC: tokens, 401s, 403s with the real message shape, Roles and
//! ClusterRoles through their bindings, SelfSubjectAccessReview.

mod common;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kubeferry_sim::{SimCluster, SimConfig};
use serde_json::json;

use common::{client_for, raw, start_with, status_of};

fn rbac_config() -> SimConfig {
    SimConfig {
        rbac: true,
        ..SimConfig::for_tests()
    }
}

/// The status code of a request without a body.
async fn code_of(client: &kube::Client, method: &str, path: &str) -> u16 {
    raw(client, method, path, None, "").await.code
}

async fn runner(cluster: &SimCluster) -> kube::Client {
    let token = cluster.token_for("team", "runner");
    client_for(&cluster.kubeconfig_yaml_with_token("runner", &token)).await
}

#[tokio::test]
async fn tokens_are_required_and_checked() {
    let sim = start_with(rbac_config()).await;
    let url = sim.cluster.http_url();
    let plain = client_for(&format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    ))
    .await;
    let r = raw(&plain, "GET", "/api/v1/namespaces/default/pods", None, "").await;
    assert_eq!(r.code, 401);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    let r = raw(&plain, "GET", "/version", None, "").await;
    assert_eq!(r.code, 200, "/version is public");
    let wrong = client_for(&sim.cluster.kubeconfig_yaml_with_token("x", "not-a-token")).await;
    assert_eq!(code_of(&wrong, "GET", "/api").await, 401);
}

#[tokio::test]
async fn forbidden_messages_have_the_real_shape() {
    let sim = start_with(rbac_config()).await;
    sim.cluster
        .create(
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        )
        .expect("namespace");
    let client = runner(&sim.cluster).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    let s = status_of(pods.list(&ListParams::default()).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "pods is forbidden: User \"system:serviceaccount:team:runner\" cannot list resource \"pods\" in API group \"\" in the namespace \"team\""
    );
    let r = raw(
        &client,
        "GET",
        "/api/v1/namespaces/team/pods/p/log",
        None,
        "",
    )
    .await;
    assert_eq!(
        r.json()["message"],
        json!(
            "pods \"p\" is forbidden: User \"system:serviceaccount:team:runner\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"team\""
        )
    );
    assert_eq!(r.json()["details"], json!({"name": "p", "kind": "pods"}));
    let r = raw(&client, "GET", "/apis/batch/v1/jobs", None, "").await;
    assert_eq!(
        r.json()["message"],
        json!(
            "jobs.batch is forbidden: User \"system:serviceaccount:team:runner\" cannot list resource \"jobs\" in API group \"batch\" at the cluster scope"
        )
    );
    assert_eq!(
        code_of(&client, "GET", "/apis").await,
        200,
        "discovery is open to the authenticated"
    );
}

#[tokio::test]
async fn roles_and_bindings_grant_exactly_what_they_say() {
    let sim = start_with(rbac_config()).await;
    let admin = &sim.cluster;
    admin
        .create(
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        )
        .expect("ns");
    admin
        .create("team", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "runner"},
            "rules": [
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "patch", "delete"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}
            ]}))
        .expect("role");
    admin
        .create("team", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "runner"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "runner"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]}))
        .expect("binding");
    let client = runner(admin).await;
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/team/pods").await,
        200
    );
    assert_eq!(
        code_of(&client, "GET", "/apis/batch/v1/namespaces/team/jobs").await,
        200
    );
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/team/pods/p").await,
        403,
        "get was not granted"
    );
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/default/pods").await,
        403,
        "another namespace"
    );
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/team/pods/p/log").await,
        404,
        "allowed, but no such pod"
    );

    let review = |verb: &str, resource: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": ns, "verb": verb, "group": if resource == "jobs" { "batch" } else { "" }, "resource": resource}}})
        .to_string()
    };
    let r = raw(
        &client,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some("application/json"),
        &review("create", "jobs", "team"),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(r.json()["status"]["allowed"], json!(true));
    let r = raw(
        &client,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some("application/json"),
        &review("get", "pods", "team"),
    )
    .await;
    assert_eq!(r.json()["status"]["allowed"], json!(false));

    admin
        .create("", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "runner-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}]}))
        .expect("cluster binding");
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/default/pods").await,
        200,
        "view everywhere now"
    );
    assert_eq!(
        code_of(&client, "DELETE", "/api/v1/namespaces/default/pods/p").await,
        403
    );
}

#[tokio::test]
async fn a_role_binding_to_a_cluster_role_grants_it_in_its_namespace_only() {
    let sim = start_with(rbac_config()).await;
    let admin = &sim.cluster;
    for ns in ["team", "elsewhere"] {
        admin
            .create(
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .expect("ns");
    }
    admin
        .create("", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}))
        .expect("cluster role");
    let client = runner(admin).await;
    let list = |ns: &str| format!("/api/v1/namespaces/{ns}/pods");
    assert_eq!(
        code_of(&client, "GET", &list("team")).await,
        403,
        "nothing granted yet"
    );
    admin
        .create("team", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]}))
        .expect("binding");
    assert_eq!(code_of(&client, "GET", &list("team")).await, 200);
    assert_eq!(
        code_of(&client, "GET", "/api/v1/namespaces/team/pods/p/log").await,
        404,
        "allowed, but no such pod"
    );
    let r = raw(&client, "GET", &list("elsewhere"), None, "").await;
    assert_eq!(r.code, 403, "only in the binding's namespace");
    assert_eq!(
        r.json()["message"],
        json!(
            "pods is forbidden: User \"system:serviceaccount:team:runner\" cannot list resource \"pods\" in API group \"\" in the namespace \"elsewhere\""
        )
    );
    assert_eq!(
        code_of(&client, "GET", "/api/v1/pods").await,
        403,
        "not at the cluster scope"
    );
    assert_eq!(
        code_of(&client, "DELETE", "/api/v1/namespaces/team/pods/p").await,
        403,
        "only the cluster role's verbs"
    );
    // A binding to a built-in ClusterRole works the same way.
    admin
        .create("elsewhere", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}]}))
        .expect("binding");
    assert_eq!(
        code_of(&client, "GET", "/apis/batch/v1/namespaces/elsewhere/jobs").await,
        200
    );
    assert_eq!(
        code_of(&client, "GET", "/apis/batch/v1/namespaces/team/jobs").await,
        403
    );
}
