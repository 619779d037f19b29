use std::time::Duration;

use super::*;

#[test]
fn requests_are_named_by_verb_and_resource() {
    let cases = [
        ("GET", "/api/v1/namespaces/ns/pods", None, "list", "pods"),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            Some("watch=true&labelSelector=a"),
            "watch",
            "pods",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p1/log",
            Some("tailLines=5"),
            "get",
            "pods/log",
        ),
        (
            "GET",
            "/apis/batch/v1/namespaces/ns/jobs/j1",
            None,
            "get",
            "jobs.batch",
        ),
        (
            "POST",
            "/apis/batch/v1/namespaces/ns/jobs",
            None,
            "create",
            "jobs.batch",
        ),
        (
            "PATCH",
            "/apis/batch/v1/namespaces/ns/jobs/j1",
            None,
            "patch",
            "jobs.batch",
        ),
        (
            "DELETE",
            "/apis/batch/v1/namespaces/ns/jobs/j1",
            None,
            "delete",
            "jobs.batch",
        ),
        (
            "DELETE",
            "/apis/batch/v1/namespaces/ns/jobs",
            None,
            "deletecollection",
            "jobs.batch",
        ),
        (
            "PUT",
            "/apis/batch/v1/namespaces/ns/jobs/j1/status",
            None,
            "update",
            "jobs/status.batch",
        ),
        ("GET", "/api/v1/namespaces", None, "list", "namespaces"),
        ("GET", "/api/v1/namespaces/ns", None, "get", "namespaces"),
        ("GET", "/version", None, "discovery", ""),
        ("GET", "/apis/batch/v1", None, "discovery", ""),
    ];
    for (method, path, query, verb, resource) in cases {
        let kind = classify(&method.parse().unwrap(), path, query);
        assert_eq!(
            (kind.verb, kind.resource.as_str()),
            (verb, resource),
            "{method} {path}"
        );
    }
}

#[test]
fn a_token_file_is_reread_when_it_changes() {
    let path = std::env::temp_dir().join(format!("kf-token-{}", std::process::id()));
    std::fs::write(&path, "first-token\n").unwrap();
    let file = TokenFile::new(&path);
    let first = file.header().unwrap();
    assert!(first.is_sensitive());
    assert_eq!(first, "Bearer first-token");
    assert_eq!(file.header().unwrap(), "Bearer first-token");

    // A different size is noticed even within the file system's timestamp granularity.
    std::fs::write(&path, "the-second-token\n").unwrap();
    assert_eq!(file.header().unwrap(), "Bearer the-second-token");

    // Gone for a moment (a rotation): the last token stays in use.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(file.header().unwrap(), "Bearer the-second-token");
    let missing = TokenFile::new(&path);
    assert!(missing.header().is_err());
}

#[test]
fn an_api_url_makes_a_kubeconfig_without_credentials() {
    let kubeconfig =
        api_url_kubeconfig("prod", "https://10.0.0.1:6443", Some(Path::new("/ca.crt"))).unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("prod"));
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
    assert_eq!(cluster.certificate_authority.as_deref(), Some("/ca.crt"));
    let user = kubeconfig.auth_infos[0].auth_info.as_ref();
    assert!(user.is_none_or(|u| u.token.is_none() && u.token_file.is_none()));
}

#[tokio::test]
async fn requests_are_counted_even_when_no_answer_comes() {
    // A port nothing listens on: the request fails without a response.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = ClusterConfig {
        name: Some("nowhere".into()),
        source: ClusterSource::ApiUrl {
            url: format!("http://127.0.0.1:{port}"),
            ca_file: None,
            token_file: None,
        },
        spark_operator: None,
    };
    let settings = ClusterSettings {
        retry: kubeferry_kube::RetryPolicy {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(1),
            deadline: Duration::from_millis(1),
        },
        ..ClusterSettings::default()
    };
    let connected = connect(0, &config, settings).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(connected.cluster.client().clone(), "ns");
    assert!(api.get("p").await.is_err());
    let counts = connected.stats.snapshot();
    let key = (
        RequestKind {
            verb: "get",
            resource: "pods".into(),
        },
        None,
    );
    assert_eq!(counts.get(&key), Some(&1), "{counts:?}");
}
