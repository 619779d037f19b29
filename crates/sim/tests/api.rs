//! Conformance of the API semantics through kube-rs and raw requests: error bodies, metadata,
//! optimistic concurrency, patches, server-side apply, status separation, list selectors and
//! paging, discovery.

mod common;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::{Value, json};

use common::{raw, shell_job, start, status_of};

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"}
    }))
    .expect("a config map")
}

#[tokio::test]
async fn error_bodies_are_kubernetes_status_objects() {
    let sim = start().await;
    let c = &sim.client;

    let r = raw(c, "GET", "/api/v1/namespaces/default/pods/nope", None, "").await;
    assert_eq!(r.code, 404);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "pods \"nope\" not found", "reason": "NotFound",
               "details": {"name": "nope", "kind": "pods"}, "code": 404})
    );
    let r = raw(
        c,
        "GET",
        "/apis/batch/v1/namespaces/default/jobs/nope",
        None,
        "",
    )
    .await;
    assert_eq!(r.json()["message"], json!("jobs.batch \"nope\" not found"));
    assert_eq!(
        r.json()["details"],
        json!({"name": "nope", "group": "batch", "kind": "jobs"})
    );
    let r = raw(c, "GET", "/apis/nothing.example/v1/things", None, "").await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (404, json!("NotFound"))
    );

    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .expect("created");
    let s = status_of(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, "configmaps \"a\" already exists");

    let r = raw(c, "POST", "/apis/batch/v1/namespaces/default/jobs", Some("application/json"),
        &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
                "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "busybox"}]}}}}).to_string()).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Job.batch \"bad\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
               "reason": "Invalid",
               "details": {"name": "bad", "group": "batch", "kind": "Job", "causes": [
                   {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"", "field": "spec.template.spec.restartPolicy"}]},
               "code": 422})
    );

    let r = raw(
        c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/a",
        Some("application/json"),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}).to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (400, json!("BadRequest"))
    );
    assert_eq!(
        r.json()["message"],
        json!("the name of the object (b) does not match the name on the URL (a)")
    );

    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/missing/configmaps",
        Some("application/json"),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (404, json!("namespaces \"missing\" not found"))
    );

    let r = raw(
        c,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a",
        Some("text/plain"),
        "{}",
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (415, json!("UnsupportedMediaType"))
    );

    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        "{not json",
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (400, json!("BadRequest"))
    );
}

#[tokio::test]
async fn metadata_versions_generation_and_generate_name() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let mut job: Job = serde_json::from_value(shell_job("", "sleep 30")).expect("job");
    job.metadata.name = None;
    job.metadata.generate_name = Some("gen-".into());
    job.spec.as_mut().expect("spec").suspend = Some(true);
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("created");
    let name = created.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default()
        .parse()
        .expect("numeric rv");

    let labelled = jobs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("patched");
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let rv2: u64 = labelled
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default()
        .parse()
        .expect("rv");
    assert!(rv2 > rv1);

    let resumed = jobs
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("patched");
    assert_eq!(
        resumed.metadata.generation,
        Some(2),
        "spec changes bump the generation"
    );

    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let before = cms
        .create(&PostParams::default(), &cm("same", json!({"x": "y"})))
        .await
        .expect("created");
    let same = cms
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("no-op patch");
    assert_eq!(
        same.metadata.resource_version, before.metadata.resource_version,
        "a no-op write changes nothing"
    );
}

#[tokio::test]
async fn stale_resource_version_conflicts() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("c", json!({})))
        .await
        .expect("created");
    let mut newer = first.clone();
    newer.data = Some([("k".to_string(), "v2".to_string())].into());
    cms.replace("c", &PostParams::default(), &newer)
        .await
        .expect("replaced");
    let mut stale = first.clone();
    stale.data = Some([("k".to_string(), "v3".to_string())].into());
    let s = status_of(cms.replace("c", &PostParams::default(), &stale).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let patch = json!({"metadata": {"resourceVersion": first.metadata.resource_version}, "data": {"k": "v4"}});
    let s = status_of(
        cms.patch("c", &PatchParams::default(), &Patch::Merge(patch))
            .await,
    );
    assert_eq!(s.code, 409);
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let s = status_of(cms.delete("c", &dp).await);
    assert_eq!(s.code, 409);
    assert!(
        s.message
            .contains("Precondition failed: UID in precondition: wrong"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn patches_json_merge_strategic() {
    let sim = start().await;
    let c = &sim.client;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"schedulerName": "none", "restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox:1.36", "env": [{"name": "X", "value": "1"}]},
            {"name": "side", "image": "busybox:1.36"}
        ]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");

    let patched = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}),
            ),
        )
        .await
        .expect("strategic");
    let containers = patched.spec.expect("spec").containers;
    assert_eq!(containers.len(), 2, "containers merge by name");
    assert_eq!(containers[0].image.as_deref(), Some("busybox:1.37"));
    assert_eq!(containers[0].env.as_ref().map(Vec::len), Some(1));

    let s = status_of(
        pods.patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "main", "command": ["x"]}]}}),
            ),
        )
        .await,
    );
    assert_eq!(
        s.code, 422,
        "pod spec fields other than images are immutable"
    );

    let test_fails: Patch<Value> = Patch::Json(
        serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/labels/a", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "3"}
        ]))
        .expect("json patch"),
    );
    let s = status_of(pods.patch("p", &PatchParams::default(), &test_fails).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));

    let test_holds: Patch<Value> = Patch::Json(
        serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "3"}
        ]))
        .expect("json patch"),
    );
    let p = pods
        .patch("p", &PatchParams::default(), &test_holds)
        .await
        .expect("applied");
    assert_eq!(
        p.metadata
            .labels
            .expect("labels")
            .get("a")
            .map(String::as_str),
        Some("3")
    );

    let merged = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .expect("merge");
    assert_eq!(
        merged.metadata.labels.expect("labels"),
        [("b".to_string(), "2".to_string())].into()
    );
}

#[tokio::test]
async fn spec_writes_ignore_status_and_status_writes_only_status() {
    let sim = start().await;
    let c = &sim.client;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let mut job: Job = serde_json::from_value(shell_job("s", "true")).expect("job");
    job.spec.as_mut().expect("spec").suspend = Some(true);
    job.status = Some(serde_json::from_value(json!({"succeeded": 7})).expect("status"));
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("created");
    assert_eq!(
        created.status.as_ref().and_then(|s| s.succeeded),
        None,
        "status is dropped on create"
    );

    let r = raw(
        c,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/s",
        Some("application/merge-patch+json"),
        &json!({"status": {"succeeded": 5}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.json()["status"]["succeeded"],
        Value::Null,
        "the main resource ignores status"
    );

    let r = raw(c, "PATCH", "/apis/batch/v1/namespaces/default/jobs/s/status", Some("application/merge-patch+json"),
        &json!({"metadata": {"labels": {"x": "y"}}, "spec": {"parallelism": 9}, "status": {"succeeded": 5}}).to_string()).await;
    assert_eq!(r.code, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["status"]["succeeded"], json!(5));
    assert_eq!(
        body["spec"]["parallelism"],
        json!(1),
        "/status ignores the spec"
    );
    assert_eq!(body["metadata"]["labels"].get("x"), None);
    let r = raw(
        c,
        "GET",
        "/apis/batch/v1/namespaces/default/jobs/s/status",
        None,
        "",
    )
    .await;
    assert_eq!(r.json()["status"]["succeeded"], json!(5));
}

#[tokio::test]
async fn server_side_apply_upserts_and_tracks_managers() {
    let sim = start().await;
    let c = &sim.client;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1", "b": "2"}});
    let r = raw(
        c,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        Some("application/apply-patch+yaml"),
        &applied.to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (400, json!("BadRequest")),
        "fieldManager is required"
    );

    let created = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&applied))
        .await
        .expect("created by apply");
    assert_eq!(created.data.clone().expect("data").len(), 2);
    let managers = created
        .metadata
        .managed_fields
        .clone()
        .expect("managed fields");
    assert_eq!(managers[0].manager.as_deref(), Some("alice"));
    assert_eq!(managers[0].operation.as_deref(), Some("Apply"));

    let fewer = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let updated = cms
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&fewer))
        .await
        .expect("applied");
    assert_eq!(
        updated.data.expect("data"),
        [("a".to_string(), "1".to_string())].into(),
        "a field alice stopped applying is removed"
    );

    let rival = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "other"}});
    let s = status_of(
        cms.patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&rival))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.a"
    );
    let forced = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&rival),
        )
        .await
        .expect("forced");
    assert_eq!(
        forced.data.expect("data").get("a").map(String::as_str),
        Some("other")
    );
}

#[tokio::test]
async fn lists_select_page_and_report_versions() {
    let sim = start().await;
    let c = &sim.client;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    for (name, tier) in [
        ("a", "front"),
        ("b", "back"),
        ("c", "front"),
        ("d", "db"),
        ("e", "front"),
    ] {
        cms.create(
            &PostParams::default(),
            &cm(name, json!({"tier": tier, "app": "shop"})),
        )
        .await
        .expect("created");
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let fronts = cms
        .list(&ListParams::default().labels("tier=front"))
        .await
        .expect("list");
    assert_eq!(names(fronts), vec!["a", "c", "e"]);
    let set = cms
        .list(&ListParams::default().labels("tier in (back,db),app"))
        .await
        .expect("list");
    assert_eq!(names(set), vec!["b", "d"]);
    let not = cms
        .list(&ListParams::default().labels("tier notin (front),!missing"))
        .await
        .expect("list");
    assert_eq!(names(not), vec!["b", "d"]);
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .expect("list");
    assert_eq!(names(by_name), vec!["c"]);
    let s = status_of(cms.list(&ListParams::default().fields("data.k=v")).await);
    assert_eq!(s.code, 400);
    assert!(
        s.message.ends_with("field label not supported: data.k"),
        "{}",
        s.message
    );

    let page1 = cms
        .list(&ListParams::default().labels("app=shop").limit(2))
        .await
        .expect("page 1");
    let token = page1.metadata.continue_.clone().expect("a continue token");
    assert_eq!(page1.metadata.remaining_item_count, Some(3));
    let rv = page1.metadata.resource_version.clone().expect("list rv");
    cms.create(&PostParams::default(), &cm("f", json!({"app": "shop"})))
        .await
        .expect("created between pages");
    let page2 = cms
        .list(
            &ListParams::default()
                .labels("app=shop")
                .limit(2)
                .continue_token(&token),
        )
        .await
        .expect("page 2");
    assert_eq!(
        page2.metadata.resource_version.as_deref(),
        Some(rv.as_str()),
        "pages share the first page's version"
    );
    let page3 = cms
        .list(
            &ListParams::default()
                .labels("app=shop")
                .limit(2)
                .continue_token(page2.metadata.continue_.as_deref().expect("more")),
        )
        .await
        .expect("page 3");
    assert_eq!(names(page2), vec!["c", "d"]);
    assert_eq!(
        names(page3),
        vec!["e"],
        "a consistent snapshot: f is not in it"
    );

    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let by_phase = pods
        .list(&ListParams::default().fields("status.phase=Running,spec.nodeName=sim-node-1"))
        .await
        .expect("list");
    assert!(by_phase.items.is_empty());
}

#[tokio::test]
async fn discovery_finds_core_groups_and_custom_resources() {
    let sim = start().await;
    let c = &sim.client;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}, "subresources": {"status": {}}}]}
    });
    let r = raw(
        c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        &crd.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    let discovery = Discovery::new(c.clone()).run().await.expect("discovery");
    let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
    for want in [
        "",
        "batch",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "example.com",
    ] {
        assert!(groups.iter().any(|g| g == want), "{want} in {groups:?}");
    }
    let (ar, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        ))
        .expect("widgets");
    assert_eq!(ar.plural, "widgets");
    assert!(
        caps.subresources.iter().any(|(s, _)| s.plural == "status"),
        "{:?}",
        caps.subresources
    );
    let r = raw(c, "GET", "/version", None, "").await;
    assert_eq!(r.json()["gitVersion"], json!("v1.33.1"));
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

#[tokio::test]
async fn list_resource_versions_exact_too_large_and_expired_continue() {
    let mut config = kubeferry_sim::SimConfig::for_tests();
    config.watch_history = 4;
    let sim = common::start_with(config).await;
    // Raw answers: kube-rs would retry a 504 by itself.
    let c = &common::client_without_retries(&sim.cluster.kubeconfig_yaml("sim")).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({"app": "rv"})))
        .await
        .expect("a");
    let at_a = a.metadata.resource_version.clone().expect("a version");
    cms.create(&PostParams::default(), &cm("b", json!({"app": "rv"})))
        .await
        .expect("b");

    // Exact: the list as it was at that version.
    let path = format!(
        "/api/v1/namespaces/default/configmaps?labelSelector=app%3Drv&resourceVersion={at_a}&resourceVersionMatch=Exact"
    );
    let r = raw(c, "GET", &path, None, "").await;
    assert_eq!(r.code, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["metadata"]["resourceVersion"], json!(at_a));
    let names: Vec<&str> = body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, vec!["a"]);

    // A version the server has not reached: 504 Timeout, as the API server answers.
    let current = sim.cluster.resource_version();
    let ahead = current + 1000;
    for query in [
        format!("resourceVersion={ahead}"),
        format!("resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={ahead}&resourceVersionMatch=Exact"),
    ] {
        let r = raw(
            c,
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?{query}"),
            None,
            "",
        )
        .await;
        assert_eq!(r.code, 504, "{query}: {}", r.text());
        assert_eq!(
            r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let status = r.json();
        assert_eq!(status["reason"], json!("Timeout"), "{status}");
        let message = status["message"].as_str().unwrap_or("");
        let said_current = message
            .strip_prefix(&format!(
                "Timeout: Too large resource version: {ahead}, current: "
            ))
            .and_then(|rest| rest.parse::<u64>().ok());
        assert!(
            said_current.is_some_and(|said| said >= current && said < ahead),
            "{message}"
        );
        assert_eq!(
            status["details"]["causes"],
            json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
        );
        assert_eq!(status["details"]["retryAfterSeconds"], json!(1));
    }

    // A continue token whose version left the history: 410 Expired, with a token that goes on
    // at the current version.
    let page1 = cms
        .list(&ListParams::default().labels("app=rv").limit(1))
        .await
        .expect("page 1");
    let token = page1.metadata.continue_.clone().expect("a continue token");
    for name in ["c", "d", "e", "f", "g", "h"] {
        cms.create(&PostParams::default(), &cm(name, json!({"app": "rv"})))
            .await
            .expect("created");
    }
    let r = raw(
        c,
        "GET",
        &format!(
            "/api/v1/namespaces/default/configmaps?labelSelector=app%3Drv&limit=1&continue={token}"
        ),
        None,
        "",
    )
    .await;
    assert_eq!(r.code, 410, "{}", r.text());
    let status = r.json();
    assert_eq!(status["reason"], json!("Expired"));
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("The provided continue parameter is too old")),
        "{status}"
    );
    let fresh = status["metadata"]["continue"]
        .as_str()
        .expect("a token to go on with")
        .to_string();
    let rest = cms
        .list(
            &ListParams::default()
                .labels("app=rv")
                .continue_token(&fresh),
        )
        .await
        .expect("the rest at the current version");
    assert_eq!(
        names_of(&rest.items),
        vec!["b", "c", "d", "e", "f", "g", "h"]
    );
    // An exact list at a version no longer kept is 410 too.
    let path = format!(
        "/api/v1/namespaces/default/configmaps?resourceVersion={at_a}&resourceVersionMatch=Exact"
    );
    let r = raw(c, "GET", &path, None, "").await;
    assert_eq!(r.code, 410, "{}", r.text());
    assert_eq!(
        r.json()["message"],
        json!("The resourceVersion for the provided list is too old.")
    );
}

fn names_of(items: &[ConfigMap]) -> Vec<String> {
    items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn field_selectors_match_real_pods() {
    let sim = common::start_with(kubeferry_sim::SimConfig {
        nodes: vec![
            kubeferry_sim::NodeConfig::named("sim-node-1"),
            kubeferry_sim::NodeConfig::named("sim-node-2"),
        ],
        ..kubeferry_sim::SimConfig::for_tests()
    })
    .await;
    let c = &sim.client;
    sim.cluster
        .create(
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
        )
        .expect("namespace");
    let place = |name: &str, node: &str, script: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}})
    };
    for (ns, name, node, script, phase) in [
        ("default", "runs", "sim-node-1", "sleep 30", "Running"),
        ("default", "done", "sim-node-2", "true", "Succeeded"),
        ("other", "elsewhere", "sim-node-2", "sleep 30", "Running"),
    ] {
        sim.cluster
            .create(ns, place(name, node, script))
            .expect("pod");
        common::eventually(
            &format!("{name} to be {phase}"),
            std::time::Duration::from_secs(10),
            || async {
                let p = sim.cluster.object("", "pods", ns, name)?;
                (p["status"]["phase"] == phase).then_some(())
            },
        )
        .await;
    }
    let all: Api<Pod> = Api::all(c.clone());
    let default: Api<Pod> = Api::namespaced(c.clone(), "default");
    let select = |api: &Api<Pod>, fields: &str| {
        let api = api.clone();
        let fields = fields.to_string();
        async move {
            let mut names: Vec<String> = api
                .list(&ListParams::default().fields(&fields))
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(
        select(&all, "status.phase=Running").await,
        vec!["elsewhere", "runs"]
    );
    assert_eq!(select(&default, "status.phase=Running").await, vec!["runs"]);
    assert_eq!(select(&all, "status.phase=Succeeded").await, vec!["done"]);
    assert_eq!(select(&all, "status.phase!=Running").await, vec!["done"]);
    assert_eq!(
        select(&all, "spec.nodeName=sim-node-2").await,
        vec!["done", "elsewhere"]
    );
    assert_eq!(
        select(&all, "spec.nodeName=sim-node-2,status.phase=Running").await,
        vec!["elsewhere"]
    );
    assert_eq!(
        select(&all, "metadata.namespace=other").await,
        vec!["elsewhere"]
    );
    assert_eq!(
        select(&all, "metadata.namespace!=other,spec.nodeName=sim-node-1").await,
        vec!["runs"]
    );
    assert_eq!(select(&default, "metadata.name=done").await, vec!["done"]);
}

#[tokio::test]
async fn strategic_merge_patches_merge_volumes_by_name() {
    let sim = start().await;
    let c = &sim.client;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "containers": [{"name": "main", "image": "busybox:1.36",
                                     "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                     "volumes": [
                         {"name": "scratch", "emptyDir": {}},
                         {"name": "settings", "configMap": {"name": "settings-v1"}},
                         {"name": "old", "emptyDir": {}}
                     ]}}}
    });
    let r = raw(
        c,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some("application/json"),
        &deployment.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    let patch = json!({"spec": {"template": {"spec": {
        "volumes": [
            {"name": "settings", "configMap": {"name": "settings-v2"}},
            {"name": "cache", "emptyDir": {"medium": "Memory"}},
            {"name": "old", "$patch": "delete"}
        ],
        "containers": [{"name": "main", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]
    }}}});
    let r = raw(
        c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        Some("application/strategic-merge-patch+json"),
        &patch.to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    let spec = &r.json()["spec"]["template"]["spec"];
    let mut volumes: Vec<Value> = spec["volumes"].as_array().expect("volumes").clone();
    volumes.sort_by_key(|v| v["name"].as_str().unwrap_or("").to_string());
    assert_eq!(
        volumes,
        vec![
            json!({"name": "cache", "emptyDir": {"medium": "Memory"}}),
            json!({"name": "scratch", "emptyDir": {}}),
            json!({"name": "settings", "configMap": {"name": "settings-v2"}}),
        ],
        "merged by name: one changed, one added, one deleted, one kept"
    );
    let mut mounts: Vec<Value> = spec["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts")
        .clone();
    mounts.sort_by_key(|m| m["mountPath"].as_str().unwrap_or("").to_string());
    assert_eq!(
        mounts,
        vec![
            json!({"name": "cache", "mountPath": "/cache"}),
            json!({"name": "scratch", "mountPath": "/scratch"}),
        ],
        "mounts merge by mountPath"
    );
    assert_eq!(spec["containers"][0]["image"], json!("busybox:1.36"));
    // A merge patch replaces the list whole.
    let r = raw(
        c,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        Some("application/merge-patch+json"),
        &json!({"spec": {"template": {"spec": {"volumes": [{"name": "only", "emptyDir": {}}]}}}})
            .to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert_eq!(
        r.json()["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "only", "emptyDir": {}}])
    );
}
