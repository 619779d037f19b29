//! Patches: JSON patch (RFC 6902, with `test`), JSON merge patch (RFC 7386) and strategic merge
//! patch with the merge keys of the built-in types.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The patch types, by content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type of a content type.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// The 415 for a content type a resource does not take.
pub fn unsupported(strategic_allowed: bool) -> ApiError {
    let types = if strategic_allowed {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    };
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format - accepted media types include: {types}"
    ))
}

/// Applies a JSON patch document, all of it or nothing.
///
/// As Kubernetes' JSON patch (evanphx/json-patch) does, a `test` of `null` passes on a key
/// missing from an object that exists (RFC 6902 and the json-patch crate refuse it): so a
/// client tests that a field is absent.
pub fn apply_json_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let ops: Vec<PatchOperation> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json: cannot unmarshal patch: {e}")))?;
    let before = doc.clone();
    for op in &ops {
        if tests_an_absent_key_for_null(doc, op) {
            continue;
        }
        if let Err(e) = json_patch::patch(doc, std::slice::from_ref(op)) {
            *doc = before;
            return Err(refused(&e, op));
        }
    }
    Ok(())
}

fn tests_an_absent_key_for_null(doc: &Value, op: &PatchOperation) -> bool {
    let PatchOperation::Test(test) = op else {
        return false;
    };
    let path = test.path.to_string();
    test.value.is_null()
        && doc.pointer(&path).is_none()
        && path
            .rsplit_once('/')
            .is_some_and(|(parent, _)| doc.pointer(parent).is_some_and(Value::is_object))
}

/// The API server's words for a patch operation that does not apply.
fn refused(e: &json_patch::PatchError, op: &PatchOperation) -> ApiError {
    let path = e.path.to_string();
    let message = match (&e.kind, op) {
        (PatchErrorKind::TestFailed, _) => format!("testing value {path} failed: test failed"),
        (_, PatchOperation::Remove(_)) => {
            let last = path.rsplit('/').next().unwrap_or("");
            format!("Unable to remove nonexistent key: {last}: missing value")
        }
        (_, PatchOperation::Replace(_)) => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (_, PatchOperation::Add(_)) => {
            format!("add operation does not apply: doc is missing path: {path:?}: missing value")
        }
        _ => e.to_string(),
    };
    ApiError::unprocessable(message)
}

/// Applies a JSON merge patch.
pub fn apply_merge_patch(doc: &mut Value, patch: &Value) {
    json_patch::merge(doc, patch);
}

/// How a list field merges in a strategic merge patch.
enum ListStrategy {
    /// Items merge by this key.
    Key(&'static str),
    /// Primitive values are unioned.
    Union,
    /// The patch replaces the list.
    Replace,
}

/// The merge strategy of a list field of the built-in types (their `patchMergeKey` and
/// `patchStrategy` tags). Tolerations, envFrom, args and command have none: they replace.
fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses" => ListStrategy::Key("name"),
        "volumeMounts" => ListStrategy::Key("mountPath"),
        "volumeDevices" => ListStrategy::Key("devicePath"),
        "ports" => ListStrategy::Key("containerPort"),
        "ownerReferences" => ListStrategy::Key("uid"),
        "conditions" => ListStrategy::Key("type"),
        "hostAliases" => ListStrategy::Key("ip"),
        "topologySpreadConstraints" => ListStrategy::Key("topologyKey"),
        "podIPs" | "hostIPs" => ListStrategy::Key("ip"),
        "finalizers" => ListStrategy::Union,
        _ => ListStrategy::Replace,
    }
}

/// Applies a strategic merge patch to a built-in object.
pub fn apply_strategic(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    match (doc.as_object_mut(), patch.as_object()) {
        (Some(d), Some(p)) => {
            merge_map(d, p)?;
            Ok(())
        }
        _ => Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        )),
    }
}

fn merge_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(directive) = patch.get("$patch").and_then(Value::as_str) {
        match directive {
            "replace" => {
                *doc = patch
                    .iter()
                    .filter(|(k, _)| !k.starts_with('$'))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                return Ok(());
            }
            "delete" => {
                doc.clear();
                return Ok(());
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown patch type: {other}"
                )));
            }
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        doc.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (doc.get_mut(field), value.as_array())
            {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            // $setElementOrder and $retainKeys only order or prune; handled or not needed.
            continue;
        }
        if value.is_null() {
            doc.remove(key);
            continue;
        }
        match (doc.get_mut(key), value) {
            (Some(Value::Object(d)), Value::Object(p)) => merge_map(d, p)?,
            (Some(Value::Array(d)), Value::Array(p)) => merge_list(key, d, p)?,
            (_, Value::Object(p)) => {
                let mut fresh = Map::new();
                merge_map(&mut fresh, p)?;
                if p.get("$patch").and_then(Value::as_str) != Some("delete") {
                    doc.insert(key.clone(), Value::Object(fresh));
                } else {
                    doc.remove(key);
                }
            }
            (_, Value::Array(p)) => {
                let mut fresh = Vec::new();
                merge_list(key, &mut fresh, p)?;
                doc.insert(key.clone(), Value::Array(fresh));
            }
            (_, other) => {
                doc.insert(key.clone(), other.clone());
            }
        }
    }
    Ok(())
}

fn merge_list(field: &str, doc: &mut Vec<Value>, patch: &[Value]) -> Result<(), ApiError> {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *doc = patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .cloned()
            .collect();
        return Ok(());
    }
    match list_strategy(field) {
        ListStrategy::Replace => {
            *doc = patch.to_vec();
        }
        ListStrategy::Union => {
            for p in patch {
                if !doc.contains(p) {
                    doc.push(p.clone());
                }
            }
        }
        ListStrategy::Key(merge_key) => {
            for p in patch {
                let Some(pm) = p.as_object() else {
                    return Err(ApiError::bad_request(format!(
                        "{field}: list items must be objects with the merge key {merge_key:?}"
                    )));
                };
                let Some(key_value) = pm.get(merge_key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {p} does not contain declared merge key: {merge_key}"
                    )));
                };
                let pos = doc.iter().position(|d| d.get(merge_key) == Some(key_value));
                let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        doc.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        if let Some(d) = doc[i].as_object_mut() {
                            merge_map(d, pm)?;
                        }
                    }
                    (None, false) => {
                        let mut fresh = Map::new();
                        merge_map(&mut fresh, pm)?;
                        doc.push(Value::Object(fresh));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_patch_test_failure_is_422() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}});
        let body = br#"[{"op":"test","path":"/metadata/labels/a","value":"2"},{"op":"replace","path":"/metadata/labels/a","value":"3"}]"#;
        let err = apply_json_patch(&mut doc, body).expect_err("test fails");
        assert_eq!(err.code, 422);
        assert_eq!(err.reason, "Invalid");
        assert_eq!(
            err.details
                .as_ref()
                .and_then(|d| d.pointer("/causes/0/message"))
                .and_then(Value::as_str),
            Some("testing value /metadata/labels/a failed: test failed")
        );
        assert_eq!(
            doc["metadata"]["labels"]["a"],
            json!("1"),
            "nothing applied"
        );
        apply_json_patch(&mut doc, br#"[{"op":"test","path":"/metadata/labels/a","value":"1"},{"op":"add","path":"/metadata/labels/b","value":"2"}]"#)
            .expect("applies");
        assert_eq!(doc["metadata"]["labels"]["b"], json!("2"));
        assert_eq!(
            apply_json_patch(&mut doc, b"{").map_err(|e| e.code),
            Err(400)
        );
    }

    #[test]
    fn a_test_of_null_passes_on_an_absent_key_as_kubernetes_does() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}});
        apply_json_patch(&mut doc, br#"[{"op":"test","path":"/metadata/deletionTimestamp","value":null},{"op":"add","path":"/metadata/labels/b","value":"2"}]"#)
            .expect("absent: applies");
        assert_eq!(doc["metadata"]["labels"]["b"], json!("2"));
        let err = apply_json_patch(&mut doc, br#"[{"op":"test","path":"/metadata/labels/a","value":null},{"op":"add","path":"/metadata/labels/c","value":"3"}]"#)
            .expect_err("present: refused");
        assert_eq!(err.code, 422);
        assert!(
            doc["metadata"]["labels"].get("c").is_none(),
            "nothing applied"
        );
        let err = apply_json_patch(&mut doc, br#"[{"op":"add","path":"/metadata/labels/d","value":"4"},{"op":"test","path":"/nowhere/at/all","value":null}]"#)
            .expect_err("no parent: refused");
        assert_eq!(err.code, 422);
        assert!(
            doc["metadata"]["labels"].get("d").is_none(),
            "nothing applied"
        );
    }

    #[test]
    fn strategic_merge_uses_merge_keys() {
        let mut pod = json!({"spec": {
            "containers": [
                {"name": "main", "image": "a:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                {"name": "side", "image": "s:1"}
            ],
            "tolerations": [{"key": "a", "operator": "Exists"}]
        }, "metadata": {"finalizers": ["f1"]}});
        let patch = json!({
            "metadata": {"finalizers": ["f2"]},
            "spec": {
                "containers": [
                    {"name": "main", "image": "a:2", "env": [{"name": "Y", "value": "3"}, {"name": "X", "$patch": "delete"}]},
                    {"name": "side", "$patch": "delete"}
                ],
                "tolerations": [{"key": "b", "operator": "Exists"}]
            }
        });
        apply_strategic(&mut pod, &patch).expect("applies");
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "main", "image": "a:2", "env": [{"name": "Y", "value": "3"}]}])
        );
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([{"key": "b", "operator": "Exists"}])
        );
        assert_eq!(pod["metadata"]["finalizers"], json!(["f1", "f2"]));
    }

    #[test]
    fn merge_patch_removes_nulls() {
        let mut doc = json!({"a": {"b": 1, "c": 2}});
        apply_merge_patch(&mut doc, &json!({"a": {"b": null, "d": 3}}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}}));
    }
}
