//! Tests of structural-schema defaulting, pruning and validation, and of the compact notation.

use serde_json::{Map, Value, json};

use super::{apply, expand, version_schema};
use crate::config::CrdBundle;

fn schema(compact: Value) -> Value {
    let mut root = expand(&compact, &Map::new()).expect("a valid compact schema");
    root["properties"]["metadata"] = json!({"type": "object"});
    root
}

fn lines(errors: &[crate::error::FieldError]) -> Vec<String> {
    errors.iter().map(|e| e.line()).collect()
}

fn widget() -> Value {
    schema(json!({
        "spec": {
            "replicas": "integer",
            "mode!": "string enum=Fast|Slow",
            "code": "string pattern=^[A-Z]{3}$",
            "port": "int-or-string",
            "ratio": "number",
            "retries": "int32 min=0 max=10 =3",
            "labels": {"$map": "string"},
            "extra": "any",
            "items": [{"name!": "string", "size": "int64 =-1"}],
            "nested": {"ttl": "int64 =-1", "on": "boolean"},
        },
        "status": {"phase": "string"},
    }))
}

#[test]
fn unknown_fields_are_pruned_where_the_schema_does_not_preserve_them() {
    let mut object = json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {
            "mode": "Fast", "typo": 1,
            "labels": {"a": "b"},
            "extra": {"anything": {"goes": [1, 2]}},
            "items": [{"name": "x", "unknown": true}],
            "nested": {"on": true, "off": false},
        },
        "status": {"phase": "Running", "secret": "dropped"},
        "topLevel": "dropped",
    });
    let errors = apply(&widget(), &mut object, None);
    assert!(errors.is_empty(), "{:?}", lines(&errors));
    assert_eq!(
        object,
        json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {
                "mode": "Fast",
                "retries": 3,
                "labels": {"a": "b"},
                "extra": {"anything": {"goes": [1, 2]}},
                "items": [{"name": "x", "size": -1}],
                "nested": {"on": true, "ttl": -1},
            },
            "status": {"phase": "Running"},
        })
    );
}

#[test]
fn wrong_types_enums_required_bounds_and_patterns_are_refused_with_the_field_path() {
    let mut object = json!({
        "metadata": {"name": "w"},
        "spec": {
            "replicas": "three",
            "mode": "Medium",
            "port": true,
            "ratio": 0.5,
            "retries": 11,
            "code": "abc",
            "labels": {"a": 1},
            "items": [{"size": 1.5}],
        },
    });
    let errors = apply(&widget(), &mut object, None);
    assert_eq!(
        lines(&errors),
        vec![
            r#"spec.code: Invalid value: "abc": spec.code in body should match '^[A-Z]{3}$'"#,
            r#"spec.items[0].size: Invalid value: "number": spec.items[0].size in body must be of type integer: "number""#,
            r#"spec.items[0].name: Required value"#,
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
            r#"spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow""#,
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            r#"spec.retries: Invalid value: 11: spec.retries in body should be less than or equal to 10"#,
        ]
    );
    assert_eq!(errors[1].reason, "FieldValueTypeInvalid");
    assert_eq!(errors[4].reason, "FieldValueNotSupported");
    let mut missing = json!({"metadata": {"name": "w"}, "spec": {}});
    assert_eq!(
        lines(&apply(&widget(), &mut missing, None)),
        vec!["spec.mode: Required value"]
    );
}

#[test]
fn nulls_are_dropped_then_defaulted_unless_nullable() {
    let mut object =
        json!({"metadata": {}, "spec": {"mode": "Slow", "retries": null, "replicas": null}});
    let errors = apply(&widget(), &mut object, None);
    assert!(errors.is_empty(), "{:?}", lines(&errors));
    assert_eq!(object["spec"], json!({"mode": "Slow", "retries": 3}));
    let mut in_map = json!({"metadata": {}, "spec": {"mode": "Slow", "labels": {"a": null}}});
    assert_eq!(
        lines(&apply(&widget(), &mut in_map, None)),
        vec![
            r#"spec.labels.a: Invalid value: "null": spec.labels.a in body must be of type string: "null""#
        ]
    );
}

#[test]
fn unchanged_values_are_not_validated_again() {
    let old = json!({"metadata": {}, "spec": {"mode": "Retired"}});
    let mut new = json!({"metadata": {}, "spec": {"mode": "Retired", "replicas": 2}});
    assert!(apply(&widget(), &mut new, Some(&old)).is_empty());
    let mut changed = json!({"metadata": {}, "spec": {"mode": "Gone", "replicas": 2}});
    assert_eq!(
        lines(&apply(&widget(), &mut changed, Some(&old))),
        vec![r#"spec.mode: Unsupported value: "Gone": supported values: "Fast", "Slow""#]
    );
}

#[test]
fn the_compact_notation_refuses_what_it_does_not_know() {
    let defs = Map::new();
    assert!(expand(&json!("strin"), &defs).is_err());
    assert!(expand(&json!("string colour=red"), &defs).is_err());
    assert!(expand(&json!(["string", "integer"]), &defs).is_err());
    assert!(expand(&json!("ref:missing"), &defs).is_err());
}

fn bundled(bundle: CrdBundle, plural: &str, version: &str) -> Value {
    let crd = crate::crds::bundle(bundle)
        .into_iter()
        .find(|c| c.pointer("/spec/names/plural") == Some(&json!(plural)))
        .expect("the CRD is bundled");
    version_schema(&crd, version).expect("a schema").clone()
}

#[test]
fn every_bundled_crd_has_a_structural_schema_for_each_version() {
    for bundle in [
        CrdBundle::SparkApache,
        CrdBundle::SparkKubeflow,
        CrdBundle::Kueue,
        CrdBundle::JobSet,
    ] {
        for crd in crate::crds::bundle(bundle) {
            for version in crd["spec"]["versions"].as_array().expect("versions") {
                let schema = &version["schema"]["openAPIV3Schema"];
                assert_eq!(schema["type"], "object", "{}", crd["metadata"]["name"]);
                assert!(
                    schema["properties"]["spec"].is_object(),
                    "{}",
                    crd["metadata"]["name"]
                );
            }
        }
    }
}

#[test]
fn the_apache_crd_defaults_its_retention_and_restart_counter() {
    let schema = bundled(CrdBundle::SparkApache, "sparkapplications", "v1");
    let mut app = json!({
        "metadata": {"name": "pi"},
        "spec": {
            "runtimeVersions": {"sparkVersion": "4.0.0"},
            "applicationTolerations": {"restartConfig": {"restartPolicy": "Never"}},
            "misspelt": true,
        },
    });
    assert!(apply(&schema, &mut app, None).is_empty());
    assert_eq!(
        app["spec"]["applicationTolerations"],
        json!({
            "restartConfig": {"restartPolicy": "Never", "restartCounterResetMillis": -1},
            "resourceRetainDurationMillis": -1,
            "ttlAfterStopMillis": -1,
        })
    );
    assert!(app["spec"].get("misspelt").is_none());
    let old = bundled(CrdBundle::SparkApache, "sparkapplications", "v1beta1");
    let mut app = json!({"metadata": {}, "spec": {"runtimeVersions": {"sparkVersion": "3.5.3"}, "applicationTolerations": {}}});
    assert!(apply(&old, &mut app, None).is_empty());
    assert_eq!(app["spec"]["applicationTolerations"], json!({}));
    let mut wrong = json!({"metadata": {}, "spec": {}});
    assert_eq!(
        lines(&apply(&schema, &mut wrong, None)),
        vec!["spec.runtimeVersions: Required value"]
    );
}

#[test]
fn the_kubeflow_crd_requires_its_fields_and_checks_their_types() {
    let schema = bundled(CrdBundle::SparkKubeflow, "sparkapplications", "v1beta2");
    let mut app = json!({
        "metadata": {"name": "pi"},
        "spec": {"type": "Scala", "mode": "cluster", "driver": {"cores": "1"}, "executor": {"instances": 0}},
    });
    assert_eq!(
        lines(&apply(&schema, &mut app, None)),
        vec![
            r#"spec.driver.cores: Invalid value: "string": spec.driver.cores in body must be of type integer: "string""#,
            "spec.executor.instances: Invalid value: 0: spec.executor.instances in body should be greater than or equal to 1",
            "spec.mainApplicationFile: Required value",
            "spec.sparkVersion: Required value",
        ]
    );
}
