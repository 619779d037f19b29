//! How a write's body is decoded, as kube-apiserver decodes it: `kind` and `apiVersion` taken
//! from the endpoint when a built-in object leaves them out, refusals when they contradict the
//! URL, and built-in objects read against the OpenAPI schema under `fieldValidation` (Strict,
//! Warn, Ignore) with the server's errors and `Warning` headers.

mod common;

use serde_json::{Value, json};

use common::{Raw, raw, start};

fn warnings(r: &Raw) -> Vec<String> {
    r.headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or("").to_string())
        .collect()
}

fn job(name: &str, spec_extra: Value) -> Value {
    let mut spec = json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}});
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), spec_extra) {
        spec.extend(extra);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const JSON: Option<&str> = Some("application/json");
const MERGE: Option<&str> = Some("application/merge-patch+json");

#[tokio::test]
async fn built_in_objects_without_kind_or_api_version_take_the_endpoints() {
    let sim = start().await;
    let c = &sim.client;
    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces",
        JSON,
        &json!({"metadata": {"name": "typed"}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(
        (r.json()["kind"].clone(), r.json()["apiVersion"].clone()),
        (json!("Namespace"), json!("v1"))
    );

    let r = raw(c, "POST", JOBS, JSON, &job("bare", json!({})).to_string()).await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(
        (r.json()["kind"].clone(), r.json()["apiVersion"].clone()),
        (json!("Job"), json!("batch/v1"))
    );
    assert!(warnings(&r).is_empty());

    // Only the kind given, or only the version: the other comes from the endpoint.
    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        &json!({"kind": "ConfigMap", "metadata": {"name": "k"}, "data": {"a": "1"}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(r.json()["apiVersion"], json!("v1"));
    let r = raw(
        c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/k",
        JSON,
        &json!({"apiVersion": "v1", "metadata": {"name": "k"}, "data": {"a": "2"}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text());
    assert_eq!(
        (r.json()["kind"].clone(), r.json()["data"]["a"].clone()),
        (json!("ConfigMap"), json!("2"))
    );
}

#[tokio::test]
async fn built_in_type_meta_that_contradicts_the_url_is_refused() {
    let sim = start().await;
    let c = &sim.client;
    let cases = [
        (
            JOBS,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            "Pod in version \"v1\" cannot be handled as a Job: converting (v1.Pod) to (batch.Job): unknown conversion",
        ),
        (
            JOBS,
            json!({"apiVersion": "apps/v1", "kind": "Job", "metadata": {"name": "j"}}),
            "Job in version \"v1\" cannot be handled as a Job: no kind \"Job\" is registered for version \"apps/v1\" in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\"",
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"kind": "ConfigMap", "metadata": {"name": "s"}}),
            "ConfigMap in version \"v1\" cannot be handled as a Secret: converting (v1.ConfigMap) to (core.Secret): unknown conversion",
        ),
    ];
    for (path, body, message) in cases {
        let r = raw(c, "POST", path, JSON, &body.to_string()).await;
        assert_eq!(
            (
                r.code,
                r.json()["reason"].clone(),
                r.json()["message"].clone()
            ),
            (400, json!("BadRequest"), json!(message)),
            "{body}"
        );
    }
    let r = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        JSON,
        &json!({"metadata": {"name": "k"}}).to_string(),
    )
    .await;
    assert_eq!(r.code, 201);
    let r = raw(
        c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/k",
        JSON,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}}).to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!(
                "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
            )
        )
    );
}

#[tokio::test]
async fn custom_resources_must_say_their_kind_and_version() {
    let sim = start().await;
    let c = &sim.client;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let r = raw(
        c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        &crd.to_string(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text());
    let path = "/apis/example.com/v1/namespaces/default/gadgets";

    let body = json!({"metadata": {"name": "g"}});
    let r = raw(c, "POST", path, JSON, &body.to_string()).await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!(
                "the object provided is unrecognized (must be of type Gadget): Object 'Kind' is missing in '{\"metadata\":{\"name\":\"g\"}}' ({\"metadata\":{\"name\":\"g\"}})"
            )
        )
    );
    let cases = [
        (json!({"kind": "Gadget", "metadata": {"name": "g"}}), ""),
        (
            json!({"apiVersion": "example.com/v2", "kind": "Gadget", "metadata": {"name": "g"}}),
            "example.com/v2",
        ),
    ];
    for (body, given) in cases {
        let r = raw(c, "POST", path, JSON, &body.to_string()).await;
        assert_eq!(
            (r.code, r.json()["message"].clone()),
            (
                400,
                json!(format!(
                    "the API version in the data ({given}) does not match the expected API version (example.com/v1)"
                ))
            ),
            "{body}"
        );
    }
    let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "g"}});
    let r = raw(c, "POST", path, JSON, &body.to_string()).await;
    assert_eq!(
        (
            r.code,
            r.json()["reason"].clone(),
            r.json()["message"].clone()
        ),
        (
            422,
            json!("Invalid"),
            json!(
                "Gadget.example.com \"g\" is invalid: kind: Invalid value: \"Widget\": must be Gadget"
            )
        )
    );
    // Unknown fields of a custom resource are its schema's business, not the decoder's.
    let body = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"any": 1}});
    let r = raw(c, "POST", path, JSON, &body.to_string()).await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert!(warnings(&r).is_empty());
}

#[tokio::test]
async fn unknown_fields_warn_by_default_fail_under_strict_and_go_quietly_under_ignore() {
    let sim = start().await;
    let c = &sim.client;
    let mut body = job("warned", json!({"foo": 1}));
    body["spec"]["template"]["spec"]["containers"][0]["imagee"] = json!("typo");

    let r = raw(c, "POST", JOBS, JSON, &body.to_string()).await;
    assert_eq!(r.code, 201, "{}", r.text());
    assert_eq!(
        warnings(&r),
        [
            "299 - \"unknown field \\\"spec.foo\\\"\"",
            "299 - \"unknown field \\\"spec.template.spec.containers[0].imagee\\\"\""
        ]
    );
    let stored = raw(c, "GET", &format!("{JOBS}/warned"), None, "")
        .await
        .json();
    assert_eq!(stored["spec"].get("foo"), None);
    assert_eq!(
        stored["spec"]["template"]["spec"]["containers"][0].get("imagee"),
        None
    );
    let r = raw(
        c,
        "POST",
        &format!("{JOBS}?fieldValidation=Warn"),
        JSON,
        &job("warned-too", json!({"foo": 1})).to_string(),
    )
    .await;
    assert_eq!(
        (r.code, warnings(&r)),
        (
            201,
            vec!["299 - \"unknown field \\\"spec.foo\\\"\"".to_string()]
        )
    );

    body["metadata"]["name"] = json!("strict");
    let r = raw(
        c,
        "POST",
        &format!("{JOBS}?fieldValidation=Strict"),
        JSON,
        &body.to_string(),
    )
    .await;
    assert_eq!(
        (
            r.code,
            r.json()["reason"].clone(),
            r.json()["message"].clone()
        ),
        (
            400,
            json!("BadRequest"),
            json!(
                "strict decoding error: unknown field \"spec.foo\", unknown field \"spec.template.spec.containers[0].imagee\""
            )
        )
    );
    let r = raw(c, "GET", &format!("{JOBS}/strict"), None, "").await;
    assert_eq!(r.code, 404, "nothing is created");

    body["metadata"]["name"] = json!("ignored");
    let r = raw(
        c,
        "POST",
        &format!("{JOBS}?fieldValidation=Ignore"),
        JSON,
        &body.to_string(),
    )
    .await;
    assert_eq!((r.code, warnings(&r)), (201, Vec::<String>::new()));
    assert_eq!(r.json()["spec"].get("foo"), None);

    // Updates and patches are read the same way.
    let mut put = r.json();
    put["spec"]["bar"] = json!(true);
    // The Job controller writes its status meanwhile: no precondition.
    put["metadata"]["resourceVersion"] = Value::Null;
    let r = raw(
        c,
        "PUT",
        &format!("{JOBS}/ignored?fieldValidation=Strict"),
        JSON,
        &put.to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!("strict decoding error: unknown field \"spec.bar\"")
        )
    );
    let r = raw(c, "PUT", &format!("{JOBS}/ignored"), JSON, &put.to_string()).await;
    assert_eq!(
        (r.code, warnings(&r)),
        (
            200,
            vec!["299 - \"unknown field \\\"spec.bar\\\"\"".to_string()]
        )
    );
    let patch = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"baz": 1}}).to_string();
    let r = raw(
        c,
        "PATCH",
        &format!("{JOBS}/ignored?fieldValidation=Strict"),
        MERGE,
        &patch,
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!("strict decoding error: unknown field \"spec.baz\"")
        )
    );
    let r = raw(c, "PATCH", &format!("{JOBS}/ignored"), MERGE, &patch).await;
    assert_eq!(
        (r.code, warnings(&r)),
        (
            200,
            vec!["299 - \"unknown field \\\"spec.baz\\\"\"".to_string()]
        )
    );
    assert_eq!(
        (
            r.json()["metadata"]["labels"]["a"].clone(),
            r.json()["spec"].get("baz")
        ),
        (json!("b"), None)
    );

    // Duplicate fields, which a JSON value cannot hold: written by hand.
    let duplicated = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"dup"},"spec":{"backoffLimit":1,"backoffLimit":0,
        "template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox:1.36","command":["true"]}]}}}}"#;
    let r = raw(
        c,
        "POST",
        &format!("{JOBS}?fieldValidation=Strict"),
        JSON,
        duplicated,
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!("strict decoding error: duplicate field \"spec.backoffLimit\"")
        )
    );
    let r = raw(c, "POST", JOBS, JSON, duplicated).await;
    assert_eq!(
        (
            r.code,
            warnings(&r),
            r.json()["spec"]["backoffLimit"].clone()
        ),
        (
            201,
            vec!["299 - \"duplicate field \\\"spec.backoffLimit\\\"\"".to_string()],
            json!(0)
        )
    );

    let r = raw(
        c,
        "POST",
        &format!("{JOBS}?fieldValidation=strict"),
        JSON,
        &body.to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            422,
            json!(
                "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            )
        )
    );
}

#[tokio::test]
async fn wrong_types_fail_the_decoding_whatever_the_field_validation() {
    let sim = start().await;
    let c = &sim.client;
    let expected = "Job in version \"v1\" cannot be handled as a Job: json: cannot unmarshal string into Go struct field JobSpec.spec.parallelism of type int32";
    for query in ["", "?fieldValidation=Ignore", "?fieldValidation=Strict"] {
        let body = job("typed", json!({"parallelism": "two"}));
        let r = raw(
            c,
            "POST",
            &format!("{JOBS}{query}"),
            JSON,
            &body.to_string(),
        )
        .await;
        assert_eq!(
            (
                r.code,
                r.json()["reason"].clone(),
                r.json()["message"].clone()
            ),
            (400, json!("BadRequest"), json!(expected)),
            "{query}"
        );
    }
    let mut body = job("env", json!({}));
    body["spec"]["template"]["spec"]["containers"][0]["env"] = json!([{"name": "N", "value": 3}]);
    let r = raw(c, "POST", JOBS, JSON, &body.to_string()).await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!(
                "Job in version \"v1\" cannot be handled as a Job: json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"
            )
        )
    );

    let r = raw(c, "POST", JOBS, JSON, &job("ok", json!({})).to_string()).await;
    assert_eq!(r.code, 201, "{}", r.text());
    let r = raw(
        c,
        "PATCH",
        &format!("{JOBS}/ok"),
        MERGE,
        &json!({"spec": {"backoffLimit": "six"}}).to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (422, json!("Invalid")),
        "{}",
        r.text()
    );
    let message = r.json()["message"].as_str().unwrap_or("").to_string();
    assert!(
        message.starts_with(" \"\" is invalid: patch: Invalid value: \"{")
            && message.ends_with(
                "\": json: cannot unmarshal string into Go struct field JobSpec.spec.backoffLimit of type int32"
            ),
        "{message}"
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        json!("patch"),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn server_side_apply_requires_type_meta_and_known_fields() {
    let sim = start().await;
    let c = &sim.client;
    let apply = Some("application/apply-patch+yaml");
    let path = format!("{JOBS}/applied?fieldManager=test");
    let mut config = job("applied", json!({}));
    config["apiVersion"] = json!("batch/v1");

    let mut other_version = config.clone();
    other_version["apiVersion"] = json!("batch/v1beta1");
    other_version["kind"] = json!("Job");
    let r = raw(c, "PATCH", &path, apply, &other_version.to_string()).await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            400,
            json!(
                "Incorrect version specified in apply patch. Specified patch version: batch/v1beta1, expected: batch/v1"
            )
        )
    );

    let r = raw(c, "PATCH", &path, apply, &config.to_string()).await;
    assert_eq!(
        (
            r.code,
            r.json()["message"].clone(),
            r.json().get("reason").cloned()
        ),
        (
            500,
            json!(
                "failed to create typed patch object (/applied; batch/v1, Kind=): no corresponding type for batch/v1, Kind="
            ),
            None
        )
    );

    config["kind"] = json!("Job");
    let mut unknown = config.clone();
    unknown["spec"]["foo"] = json!(1);
    let r = raw(
        c,
        "PATCH",
        &format!("{path}&fieldValidation=Ignore"),
        apply,
        &unknown.to_string(),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["message"].clone()),
        (
            500,
            json!(
                "failed to create typed patch object (/applied; batch/v1, Kind=Job): .spec.foo: field not declared in schema"
            )
        )
    );
    let r = raw(c, "GET", &format!("{JOBS}/applied"), None, "").await;
    assert_eq!(r.code, 404, "nothing is created");

    let r = raw(c, "PATCH", &path, apply, &config.to_string()).await;
    assert_eq!(r.code, 201, "{}", r.text());
}
