//! Kind-specific strategies, as the real API server's registries have them: defaults on
//! create, validation on create and update, and what an update may change.

mod job;
pub(crate) mod jobset;
mod pod;
pub(crate) mod spark_application;

#[cfg(test)]
mod tests;

use base64::Engine;
use serde_json::{Value, json};

use crate::error::FieldError;
use crate::resources::{Behavior, ResourceType};
use crate::store::meta;

pub use pod::{PodResources, pod_requests, qos_class};

/// Whether a name is a DNS-1123 label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Why `name` is not a DNS-1035 label, in Kubernetes' words (`IsDNS1035Label`).
pub(crate) fn dns1035_problem(name: &str) -> Option<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    let bytes = name.as_bytes();
    let valid = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if !valid {
        problems.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// Whether a name is a DNS-1123 subdomain.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn validate_name(rt: &ResourceType, name: &str, errors: &mut Vec<FieldError>) {
    let ok = match rt.behavior {
        Behavior::Namespace => is_dns_label(name),
        Behavior::Role
        | Behavior::RoleBinding
        | Behavior::ClusterRole
        | Behavior::ClusterRoleBinding => {
            !name.is_empty()
                && !name.contains('/')
                && !name.contains('%')
                && name != "."
                && name != ".."
        }
        _ => is_dns_subdomain(name),
    };
    if !ok {
        let msg = if rt.behavior == Behavior::Namespace {
            LABEL_MSG
        } else {
            SUBDOMAIN_MSG
        };
        errors.push(FieldError::invalid("metadata.name", &json!(name), msg));
    }
    if rt.behavior == Behavior::Job && ok && name.len() > 63 {
        errors.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            "must be no more than 63 characters",
        ));
    }
}

fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(is_dns_subdomain)
}

fn is_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

fn validate_labels(
    map: Option<&serde_json::Map<String, Value>>,
    field: &str,
    errors: &mut Vec<FieldError>,
) {
    for (k, v) in map.into_iter().flatten() {
        if !is_qualified_name(k) {
            errors.push(FieldError::invalid(
                field,
                &json!(k),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        match v.as_str() {
            Some(s) if is_label_value(s) => {}
            _ => errors.push(FieldError::invalid(
                field,
                v,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            )),
        }
    }
}

fn validate_annotations(
    map: Option<&serde_json::Map<String, Value>>,
    errors: &mut Vec<FieldError>,
) {
    let mut total = 0;
    for (k, v) in map.into_iter().flatten() {
        if !is_qualified_name(k) {
            errors.push(FieldError::invalid(
                "metadata.annotations",
                &json!(k),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            ));
        }
        match v.as_str() {
            Some(s) => total += k.len() + s.len(),
            None => errors.push(FieldError::invalid(
                "metadata.annotations",
                v,
                "annotation values must be strings",
            )),
        }
    }
    if total > 256 * 1024 {
        errors.push(FieldError {
            field: "metadata.annotations".into(),
            reason: "FieldValueTooLong",
            message: "Too long: must have at most 262144 bytes".into(),
        });
    }
}

/// Defaults applied when an object is created (after uid and timestamps are set).
pub fn prepare_create(rt: &ResourceType, object: &mut Value) {
    if rt.has_status()
        && rt.behavior != Behavior::Node
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    match rt.behavior {
        Behavior::Pod => pod::default_pod(object),
        Behavior::Job => job::default_job(object),
        Behavior::Namespace => {
            let name = meta::name(object).to_string();
            if let Some(m) = meta::metadata_mut(object) {
                let labels = m.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
            object["spec"] = json!({"finalizers": ["kubernetes"]});
            object["status"] = json!({"phase": "Active"});
        }
        Behavior::Secret => {
            secret_string_data(object);
            if object.get("type").is_none() {
                object["type"] = json!("Opaque");
            }
        }
        Behavior::PersistentVolumeClaim => {
            let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
            if spec.get("volumeMode").is_none() {
                object["spec"]["volumeMode"] = json!("Filesystem");
            }
            if spec.get("storageClassName").is_none() {
                object["spec"]["storageClassName"] = json!("standard");
            }
            // No provisioner runs here: a claim is bound at once to a volume of its size.
            let capacity = spec
                .pointer("/resources/requests")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let modes = spec
                .get("accessModes")
                .cloned()
                .unwrap_or_else(|| json!(["ReadWriteOnce"]));
            let name = meta::uid(object).unwrap_or("").to_string();
            object["spec"]["volumeName"] = json!(format!("pvc-{name}"));
            object["status"] =
                json!({"phase": "Bound", "accessModes": modes, "capacity": capacity});
        }
        Behavior::CustomResourceDefinition => {
            let names = object
                .pointer("/spec/names")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let stored: Vec<Value> = object
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            let now = meta::now();
            object["status"] = json!({
                "acceptedNames": names,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
                ],
                "storedVersions": stored
            });
            if object.pointer("/spec/conversion").is_none() {
                object["spec"]["conversion"] = json!({"strategy": "None"});
            }
        }
        _ => {}
    }
}

/// Moves a Secret's `stringData` into `data` (base64), as the real server does.
fn secret_string_data(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| json!({}));
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let text = v.as_str().unwrap_or("").to_string();
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
}

/// Validation on create (`old` is `None`) and on update.
pub fn validate(rt: &ResourceType, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old.is_none() {
        validate_name(rt, meta::name(object), &mut errors);
    }
    validate_labels(
        meta::string_map(object, "labels"),
        "metadata.labels",
        &mut errors,
    );
    validate_annotations(meta::string_map(object, "annotations"), &mut errors);
    match rt.behavior {
        Behavior::Pod => pod::validate_pod(object, old, &mut errors),
        Behavior::Job => job::validate_job(object, old, &mut errors),
        Behavior::Secret => {
            for (k, v) in object
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let ok = v
                    .as_str()
                    .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
                if !ok {
                    errors.push(FieldError::invalid(
                        format!("data[{k}]"),
                        v,
                        "must be base64 encoded",
                    ));
                }
            }
        }
        Behavior::RoleBinding | Behavior::ClusterRoleBinding => {
            let role_ref = object.get("roleRef");
            if role_ref
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                errors.push(FieldError::required("roleRef.name", ""));
            }
            if let (Some(old), Some(new)) = (old.and_then(|o| o.get("roleRef")), role_ref)
                && old != new
            {
                errors.push(FieldError::invalid("roleRef", new, "cannot change roleRef"));
            }
        }
        Behavior::CustomResourceDefinition => {
            let Some(crd_type) = crate::resources::type_from_crd(object) else {
                errors.push(FieldError::required(
                    "spec",
                    "group, names.plural, names.kind and at least one served version are required",
                ));
                return errors;
            };
            let want = format!("{}.{}", crd_type.resource, crd_type.group);
            if meta::name(object) != want {
                errors.push(FieldError::invalid(
                    "metadata.name",
                    &json!(meta::name(object)),
                    &format!("must be spec.names.plural+\".\"+spec.group ({want:?})"),
                ));
            }
        }
        _ => {}
    }
    errors
}

/// Carries what an update may not change from the old object to the new one.
pub fn prepare_update(rt: &ResourceType, new: &mut Value, old: &Value) {
    match rt.behavior {
        Behavior::Secret => secret_string_data(new),
        Behavior::Namespace => {
            // spec.finalizers changes only through the finalize subresource.
            if let Some(spec) = old.get("spec") {
                new["spec"] = spec.clone();
            }
        }
        _ => {}
    }
}

/// Whether anything outside metadata and status differs (what bumps `generation`).
pub fn spec_changed(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        v
    };
    strip(new) != strip(old)
}
