//! Custom resources: preloaded Spark and Kueue definitions, CRDs added and removed at runtime,
//! several served versions, the status subresource, printer columns, and 415 for strategic
//! merge patches.

mod common;

use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use kubeferry_sim::controllers::spark::SparkFault;
use kubeferry_sim::{CrdBundle, SimConfig};
use serde_json::json;

use common::{eventually, raw, start, start_with, status_of};

/// The Spark and Kueue definitions, with the simulated Spark operators idle: these tests are
/// about serving custom resources generically, so nothing else may write their status.
fn spark_config() -> SimConfig {
    let config = SimConfig {
        crd_bundles: vec![
            CrdBundle::SparkApache,
            CrdBundle::SparkKubeflow,
            CrdBundle::Kueue,
        ],
        ..SimConfig::for_tests()
    };
    config.spark.faults.set(Some(SparkFault::NoStatus));
    config
}

#[tokio::test]
async fn preloaded_spark_applications_are_served_generically() {
    let sim = start_with(spark_config()).await;
    let c = &sim.client;
    let discovery = Discovery::new(c.clone()).run().await.expect("discovery");
    let (apache, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "spark.apache.org",
            "v1",
            "SparkApplication",
        ))
        .expect("spark.apache.org/v1");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "spark.apache.org",
                "v1beta1",
                "SparkApplication"
            ))
            .is_some()
    );
    let (kubeflow, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "sparkoperator.k8s.io",
            "v1beta2",
            "SparkApplication",
        ))
        .expect("sparkoperator.k8s.io/v1beta2");
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "kueue.x-k8s.io",
                "v1beta1",
                "Workload"
            ))
            .is_some()
    );

    let apps: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &apache);
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "spark.apache.org/v1", "kind": "SparkApplication",
        "metadata": {"name": "pi", "labels": {"app.kubernetes.io/managed-by": "kubeferry"}},
        "spec": {"mainClass": "org.apache.spark.examples.SparkPi", "runtimeVersions": {"sparkVersion": "3.5.3"}},
        "status": {"currentState": {"currentStateSummary": "ignored on create"}}
    }))
    .expect("app");
    let created = apps
        .create(&PostParams::default(), &app)
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    let patched = apps
        .patch_status(
            "pi",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"currentState": {"currentStateSummary": "RunningHealthy"}, "stateTransitionHistory": {"0": {"currentStateSummary": "Submitted"}}}})),
        )
        .await
        .expect("status patched");
    assert_eq!(
        patched.data["status"]["currentState"]["currentStateSummary"],
        json!("RunningHealthy")
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "status writes keep the generation"
    );

    let s = status_of(
        apps.patch(
            "pi",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"mainClass": "x"}})),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
    assert_eq!(
        s.message,
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );

    let r = raw(
        c,
        "GET",
        "/apis/spark.apache.org/v1beta1/namespaces/default/sparkapplications/pi",
        None,
        "",
    )
    .await;
    assert_eq!(
        r.json()["apiVersion"],
        json!("spark.apache.org/v1beta1"),
        "served through every version"
    );

    let mut table =
        kube::api::Request::new("/apis/spark.apache.org/v1/namespaces/default/sparkapplications")
            .list(&Default::default())
            .expect("a request");
    table.headers_mut().insert(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io"
            .parse()
            .expect("header"),
    );
    let table: serde_json::Value = c.request(table.map(|b| b)).await.expect("a table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // The v1 CRD of the operator's chart lists Age before Current State.
    assert_eq!(columns, vec!["Name", "Age", "Current State"]);
    assert_eq!(table["rows"][0]["cells"][2], json!("RunningHealthy"));

    let kf: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &kubeflow);
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "metadata": {"name": "pi"},
        "spec": {"type": "Scala", "sparkVersion": "3.5.3", "mainApplicationFile": "local:///x.jar", "driver": {}, "executor": {}}
    }))
    .expect("app");
    kf.create(&PostParams::default(), &app)
        .await
        .expect("the same name in another group is another object");
}

#[tokio::test]
async fn crds_added_and_removed_at_runtime() {
    let sim = start().await;
    let c = &sim.client;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let r = raw(
        c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        &crd.to_string(),
    )
    .await;
    assert_eq!(r.code, 201);
    let established = r.json()["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        established
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 3}});
    let r = raw(
        c,
        "POST",
        "/apis/example.com/v1/gadgets",
        Some("application/json"),
        &gadget.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    let r = raw(c, "GET", "/apis/example.com/v1/gadgets", None, "").await;
    assert_eq!(r.json()["kind"], json!("GadgetList"));
    assert_eq!(
        r.json()["items"][0]["kind"],
        json!("Gadget"),
        "custom resource list items keep their type"
    );
    let r = raw(
        c,
        "PUT",
        "/apis/example.com/v1/gadgets/g1/status",
        Some("application/json"),
        &gadget.to_string(),
    )
    .await;
    assert_eq!(r.code, 404, "no status subresource was declared");
    let bad = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "wrong.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]}});
    let r = raw(
        c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some("application/json"),
        &bad.to_string(),
    )
    .await;
    assert_eq!(r.code, 422);
    let r = raw(
        c,
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com",
        None,
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    eventually(
        "the gadgets to stop being served",
        std::time::Duration::from_secs(5),
        || async {
            (raw(c, "GET", "/apis/example.com/v1/gadgets", None, "")
                .await
                .code
                == 404)
                .then_some(())
        },
    )
    .await;
    assert!(
        sim.cluster
            .object("example.com", "gadgets", "", "g1")
            .is_none()
    );
}

/// A CRD installed through the API with a structural schema: its objects are defaulted, pruned
/// and validated on create, update, patch and status writes, as a real API server does.
#[tokio::test]
async fn custom_resources_follow_their_structural_schema() {
    let sim = start().await;
    let c = &sim.client;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "integer", "minimum": 1},
                            "colour": {"type": "string", "enum": ["red", "blue"]},
                            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                            "ttl": {"type": "integer", "default": -1},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]}
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
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 2, "port": "http", "typo": true, "labels": {"a": "b"}, "free": {"x": {"y": 1}}},
        "extra": "dropped"});
    let r = raw(
        c,
        "POST",
        path,
        Some("application/json"),
        &widget.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(
        r.json()["spec"],
        json!({"size": 2, "port": "http", "ttl": -1, "labels": {"a": "b"}, "free": {"x": {"y": 1}}}),
        "unknown fields pruned silently, defaults applied"
    );
    assert!(r.json().get("extra").is_none());
    let stored = sim
        .cluster
        .object("example.com", "widgets", "default", "w")
        .expect("stored");
    assert_eq!(stored["spec"]["ttl"], json!(-1), "the default is stored");

    let wrong = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "bad"},
        "spec": {"size": "big", "colour": "green", "port": 1.5}});
    let r = raw(
        c,
        "POST",
        path,
        Some("application/json"),
        &wrong.to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text());
    assert_eq!(r.json()["reason"], "Invalid");
    assert_eq!(
        r.json()["message"],
        r#"Widget.example.com "bad" is invalid: [spec.colour: Unsupported value: "green": supported values: "red", "blue", spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number", spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"]"#
    );
    let causes: Vec<(String, String)> = r.json()["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").to_string(),
                c["field"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        causes,
        vec![
            (
                "FieldValueNotSupported".to_string(),
                "spec.colour".to_string()
            ),
            ("FieldValueTypeInvalid".to_string(), "spec.port".to_string()),
            ("FieldValueTypeInvalid".to_string(), "spec.size".to_string()),
        ]
    );
    let missing = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "none"}, "spec": {}});
    let r = raw(
        c,
        "POST",
        path,
        Some("application/json"),
        &missing.to_string(),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.json()["message"],
        r#"Widget.example.com "none" is invalid: spec.size: Required value"#
    );

    let r = raw(
        c,
        "PATCH",
        &format!("{path}/w"),
        Some("application/merge-patch+json"),
        r#"{"spec": {"size": 0, "misspelt": 1}}"#,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text());
    assert_eq!(
        r.json()["message"],
        r#"Widget.example.com "w" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"#
    );
    let r = raw(
        c,
        "PATCH",
        &format!("{path}/w"),
        Some("application/merge-patch+json"),
        r#"{"spec": {"size": 3, "ttl": null, "misspelt": 1}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert_eq!(r.json()["spec"]["size"], 3);
    assert_eq!(r.json()["spec"]["ttl"], -1, "a removed default comes back");
    assert!(r.json()["spec"].get("misspelt").is_none());

    let r = raw(
        c,
        "PATCH",
        &format!("{path}/w/status"),
        Some("application/merge-patch+json"),
        r#"{"status": {"phase": 7}}"#,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text());
    assert_eq!(
        r.json()["message"],
        r#"Widget.example.com "w" is invalid: status.phase: Invalid value: "integer": status.phase in body must be of type string: "integer""#
    );
    let r = raw(
        c,
        "PATCH",
        &format!("{path}/w/status"),
        Some("application/merge-patch+json"),
        r#"{"status": {"phase": "Ready", "unknown": 1}}"#,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert_eq!(r.json()["status"], json!({"phase": "Ready"}));
}

/// The bundled apache CRD's defaults: an application written through v1 gets -1 for its
/// retention, TTL and restart-counter reset; one written through v1beta1 (whose schema has none
/// of them) reads back with the storage version's (v1) defaults, as a real server applies them
/// when it reads the object.
#[tokio::test]
async fn the_apache_crd_defaults_appear_on_stored_applications() {
    let sim = start_with(spark_config()).await;
    let c = &sim.client;
    for (version, name) in [("v1", "via-v1"), ("v1beta1", "via-v1beta1")] {
        let app = json!({
            "apiVersion": format!("spark.apache.org/{version}"), "kind": "SparkApplication",
            "metadata": {"name": name},
            "spec": {"runtimeVersions": {"sparkVersion": "3.5.3"}, "jars": "local:///x.jar",
                     "applicationTolerations": {"restartConfig": {"restartPolicy": "Never"}},
                     "sparkConfig": {"misspelt": "pruned"}}
        });
        let r = raw(
            c,
            "POST",
            &format!("/apis/spark.apache.org/{version}/namespaces/default/sparkapplications"),
            Some("application/json"),
            &app.to_string(),
        )
        .await;
        assert_eq!(r.code, 201, "{}", r.text());
        let r = raw(
            c,
            "GET",
            &format!("/apis/spark.apache.org/v1/namespaces/default/sparkapplications/{name}"),
            None,
            "",
        )
        .await;
        assert_eq!(
            r.json()["spec"],
            json!({
                "runtimeVersions": {"sparkVersion": "3.5.3"}, "jars": "local:///x.jar",
                "applicationTolerations": {
                    "restartConfig": {"restartPolicy": "Never", "restartCounterResetMillis": -1},
                    "resourceRetainDurationMillis": -1,
                    "ttlAfterStopMillis": -1,
                },
            }),
            "{version}"
        );
    }
    let wrong = json!({
        "apiVersion": "spark.apache.org/v1", "kind": "SparkApplication", "metadata": {"name": "wrong"},
        "spec": {"runtimeVersions": {"sparkVersion": "3.5.3"},
                 "applicationTolerations": {"restartConfig": {"restartPolicy": "Sometimes", "maxRestartAttempts": "3"}}}
    });
    let r = raw(
        c,
        "POST",
        "/apis/spark.apache.org/v1/namespaces/default/sparkapplications",
        Some("application/json"),
        &wrong.to_string(),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text());
    assert_eq!(
        r.json()["message"],
        r#"SparkApplication.spark.apache.org "wrong" is invalid: [spec.applicationTolerations.restartConfig.maxRestartAttempts: Invalid value: "string": spec.applicationTolerations.restartConfig.maxRestartAttempts in body must be of type integer: "string", spec.applicationTolerations.restartConfig.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure", "OnInfrastructureFailure"]"#
    );
}
