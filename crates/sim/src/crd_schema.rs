//! Structural-schema handling of custom resources, as the API server does with a CRD's
//! `openAPIV3Schema`: defaulting, pruning of unknown fields and validation of types, enums,
//! required fields, bounds and patterns. See "Specifying a structural schema", "Field pruning",
//! "Defaulting" and "Validation ratcheting" in the Kubernetes documentation on
//! CustomResourceDefinitions.
//!
//! Order on every create and update of a custom resource (main resource and `/status`): defaults
//! (a `null` where the schema does not allow one is dropped first, then defaulted), then pruning,
//! then validation, all with the schema of the version the request used; then the storage
//! version's defaults, which a real server applies when it reads the object back. On update, a
//! value that did not change is not validated again (ratcheting), so an object stored before a
//! schema tightened can still be updated elsewhere.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::error::{ApiError, FieldError};
use crate::resources::{Behavior, GroupResource, ResourceType};
use crate::state::State;
use crate::store::ObjectKey;

/// The fields every object keeps whatever its schema says.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The CRD behind a custom resource type, looked up once per write (before the store is
/// locked for the write itself).
pub(crate) struct CrdSchema {
    crd: Option<Arc<Value>>,
    version: String,
}

impl CrdSchema {
    /// The CRD of `rt` when it is a custom resource written through `version`.
    pub(crate) fn lookup(state: &State, rt: &ResourceType, version: &str) -> CrdSchema {
        let crd = (rt.behavior == Behavior::Custom)
            .then(|| {
                state.store.get(&ObjectKey::new(
                    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions"),
                    "",
                    &format!("{}.{}", rt.resource, rt.group),
                ))
            })
            .flatten();
        CrdSchema {
            crd,
            version: version.to_string(),
        }
    }

    /// Defaults, prunes and validates `object` against the schema of the version it was
    /// written through; `old` is the stored object on update. Other types and CRDs without a
    /// schema pass unchanged.
    pub(crate) fn admit(
        &self,
        rt: &ResourceType,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(schema) = self
            .crd
            .as_deref()
            .and_then(|crd| version_schema(crd, &self.version))
        else {
            return Ok(());
        };
        let errors = apply(schema, object, old);
        if errors.is_empty() {
            // A real server applies the storage version's defaults whenever it reads the
            // object back; applying them once here gives every read the same object.
            if let Some(storage) = self.crd.as_deref().and_then(storage_schema)
                && !std::ptr::eq(storage, schema)
            {
                default(storage, object);
            }
            return Ok(());
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        Err(ApiError::invalid(&rt.kind, &rt.group, name, &errors))
    }
}

/// The `openAPIV3Schema` a CRD gives `version`.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
}

impl CrdSchema {
    /// [`CrdSchema::admit`] for an update. A main-resource write of a type with a status
    /// subresource carries the stored status over unchecked and unchanged, as it was not this
    /// request's to write (the simulated operators write status without the API, so a status
    /// of theirs is neither pruned nor refused here).
    pub(crate) fn admit_update(
        &self,
        rt: &ResourceType,
        object: &mut Value,
        old: &Value,
        main_resource: bool,
    ) -> Result<(), ApiError> {
        let carried = main_resource && rt.has_status();
        if carried && let Some(map) = object.as_object_mut() {
            map.remove("status");
        }
        self.admit(rt, object, Some(old))?;
        if carried && let Some(map) = object.as_object_mut() {
            match old.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.remove("status");
                }
            }
        }
        Ok(())
    }
}

/// The `openAPIV3Schema` of a CRD's storage version.
fn storage_schema(crd: &Value) -> Option<&Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .pointer("/schema/openAPIV3Schema")
}

/// Defaults, prunes and validates `object` against `schema` (the root `openAPIV3Schema`);
/// returns the validation errors, each with its field path and the API server's wording.
pub fn apply(schema: &Value, object: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
    default(schema, object);
    prune_root(schema, object);
    let mut errors = Vec::new();
    if let Some(map) = object.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for (name, value) in map {
            if ROOT_FIELDS.contains(&name.as_str()) {
                continue;
            }
            if let Some(sub) = props.and_then(|p| p.get(name)) {
                let old_value = old.and_then(|o| o.get(name));
                validate(sub, value, old_value, name, &mut errors);
            }
        }
        for name in required(schema) {
            if !ROOT_FIELDS.contains(&name) && !map.contains_key(name) {
                errors.push(FieldError::required(name, ""));
            }
        }
    }
    errors
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn nullable(schema: &Value) -> bool {
    schema
        .get("nullable")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Applies `default`s to absent properties (and to `null`s the schema does not allow), then to
/// what lies below them.
fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    let is_null = map.get(name).is_some_and(Value::is_null);
                    if is_null && !nullable(sub) {
                        map.remove(name);
                    }
                    if !map.contains_key(name)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(name.clone(), d.clone());
                    }
                }
                for (name, sub) in props {
                    if let Some(child) = map.get_mut(name) {
                        default(sub, child);
                    }
                }
            }
            if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for child in map.values_mut() {
                    default(sub, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for child in items {
                    default(sub, child);
                }
            }
        }
        _ => {}
    }
}

fn prune_root(schema: &Value, object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    if !preserves_unknown(schema) {
        map.retain(|k, _| {
            ROOT_FIELDS.contains(&k.as_str()) || props.is_some_and(|p| p.contains_key(k))
        });
    }
    if let Some(props) = props {
        for (name, child) in map.iter_mut() {
            if ROOT_FIELDS.contains(&name.as_str()) {
                continue;
            }
            if let Some(sub) = props.get(name) {
                prune(sub, child);
            }
        }
    }
}

/// Drops the fields `schema` does not specify, unless it preserves unknown fields.
fn prune(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            if let Some(sub) = additional.filter(|s| s.is_object()) {
                for child in map.values_mut() {
                    prune(sub, child);
                }
                return;
            }
            let keep_all = preserves_unknown(schema) || additional == Some(&Value::Bool(true));
            if !keep_all {
                map.retain(|k, _| props.is_some_and(|p| p.contains_key(k)));
            }
            if let Some(props) = props {
                for (name, child) in map.iter_mut() {
                    if let Some(sub) = props.get(name) {
                        prune(sub, child);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for child in items {
                    prune(sub, child);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name the API server reports for a value.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn type_matches(want: &str, value: &Value) -> bool {
    match (want, value) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => is_integer(n),
        _ => false,
    }
}

fn type_invalid(path: &str, value: &Value, want: &str) -> FieldError {
    let actual = type_name(value);
    FieldError {
        field: path.to_string(),
        reason: "FieldValueTypeInvalid",
        message: format!(
            "Invalid value: {actual:?}: {path} in body must be of type {want}: {actual:?}"
        ),
    }
}

/// Validates `value` at `path` against `schema`; values equal to the old object's at the same
/// place are not checked again (validation ratcheting).
fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if old == Some(value) {
        return;
    }
    if value.is_null() {
        if !nullable(schema) && (schema.get("type").is_some() || int_or_string(schema)) {
            let want = schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("integer,string");
            errors.push(type_invalid(path, value, want));
        }
        return;
    }
    if int_or_string(schema) {
        if !matches!(value, Value::String(_)) && !type_matches("integer", value) {
            errors.push(FieldError {
                field: path.to_string(),
                reason: "FieldValueTypeInvalid",
                message: format!(
                    "Invalid value: {:?}: {path} in body must be of type integer,string: {:?}",
                    type_name(value),
                    type_name(value)
                ),
            });
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !type_matches(want, value)
    {
        errors.push(type_invalid(path, value, want));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let refs: Vec<&str> = shown.iter().map(String::as_str).collect();
        let given = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        errors.push(FieldError::not_supported(path, &given, &refs));
    }
    if let Value::Number(n) = value {
        bounds(schema, n, value, path, errors);
    }
    if let (Value::String(text), Some(pattern)) =
        (value, schema.get("pattern").and_then(Value::as_str))
        // A pattern that does not compile was refused with its CRD on a real server.
        && let Ok(re) = regex::Regex::new(pattern)
        // Unanchored, as Go's regexp.MatchString that the server uses.
        && !re.is_match(text)
    {
        errors.push(FieldError::invalid(
            path,
            value,
            &format!("{path} in body should match '{pattern}'"),
        ));
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (name, child) in map {
                    if let Some(sub) = props.get(name) {
                        let old_child = old.and_then(|o| o.get(name));
                        validate(sub, child, old_child, &format!("{path}.{name}"), errors);
                    }
                }
            }
            if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for (name, child) in map {
                    let old_child = old.and_then(|o| o.get(name));
                    validate(sub, child, old_child, &format!("{path}.{name}"), errors);
                }
            }
            for name in required(schema) {
                if !map.contains_key(name) {
                    errors.push(FieldError::required(format!("{path}.{name}"), ""));
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, child) in items.iter().enumerate() {
                    let old_child = old.and_then(|o| o.get(i));
                    validate(sub, child, old_child, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

fn int_or_string(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn bounds(
    schema: &Value,
    n: &serde_json::Number,
    value: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(x) = n.as_f64() else {
        return;
    };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && x < min
    {
        errors.push(FieldError::invalid(
            path,
            value,
            &format!(
                "{path} in body should be greater than or equal to {}",
                json!(min_display(min))
            ),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && x > max
    {
        errors.push(FieldError::invalid(
            path,
            value,
            &format!(
                "{path} in body should be less than or equal to {}",
                json!(min_display(max))
            ),
        ));
    }
}

/// A bound as the server prints it: whole numbers without a fraction.
fn min_display(bound: f64) -> Value {
    if bound.fract() == 0.0 && bound.abs() < 1e15 {
        json!(bound as i64)
    } else {
        json!(bound)
    }
}

/// Builds a schema node from the compact notation the bundled CRDs are written in (see
/// `crds.rs`): a string names a type with options, a one-element list is
/// an array of it, a mapping is an object whose keys are its properties (`name!` marks a
/// required one, `$map` gives the schema of a map's values, `$preserve` keeps unknown fields,
/// `$default` the object's default), and `ref:name` uses a definition from `defs`.
pub(crate) fn expand(compact: &Value, defs: &Map<String, Value>) -> Result<Value, String> {
    match compact {
        Value::String(text) => expand_scalar(text, defs),
        Value::Array(items) => match items.as_slice() {
            [item] => Ok(json!({"type": "array", "items": expand(item, defs)?})),
            _ => Err(format!(
                "a list must hold exactly one item schema: {compact}"
            )),
        },
        Value::Object(map) => {
            let mut props = Map::new();
            let mut required = Vec::new();
            let mut node = Map::new();
            node.insert("type".into(), json!("object"));
            for (key, sub) in map {
                match key.as_str() {
                    "$map" => {
                        node.insert("additionalProperties".into(), expand(sub, defs)?);
                    }
                    "$preserve" => {
                        node.insert("x-kubernetes-preserve-unknown-fields".into(), sub.clone());
                    }
                    "$default" => {
                        node.insert("default".into(), sub.clone());
                    }
                    _ => {
                        let name = match key.strip_suffix('!') {
                            Some(name) => {
                                required.push(json!(name));
                                name
                            }
                            None => key.as_str(),
                        };
                        props.insert(name.to_string(), expand(sub, defs)?);
                    }
                }
            }
            if !props.is_empty() {
                node.insert("properties".into(), Value::Object(props));
            }
            if !required.is_empty() {
                node.insert("required".into(), Value::Array(required));
            }
            Ok(Value::Object(node))
        }
        other => Err(format!("not a schema: {other}")),
    }
}

fn expand_scalar(text: &str, defs: &Map<String, Value>) -> Result<Value, String> {
    let mut words = text.split_whitespace();
    let head = words.next().ok_or("an empty schema")?;
    let mut node = Map::new();
    if let Some(name) = head.strip_prefix("ref:") {
        let def = defs
            .get(name)
            .ok_or_else(|| format!("no definition {name:?}"))?;
        return expand(def, defs);
    }
    match head {
        "string" | "boolean" | "number" | "integer" => {
            node.insert("type".into(), json!(head));
        }
        "int32" | "int64" => {
            node.insert("type".into(), json!("integer"));
            node.insert("format".into(), json!(head));
        }
        "date-time" => {
            node.insert("type".into(), json!("string"));
            node.insert("format".into(), json!("date-time"));
        }
        "int-or-string" => {
            node.insert("x-kubernetes-int-or-string".into(), json!(true));
            node.insert(
                "anyOf".into(),
                json!([{"type": "integer"}, {"type": "string"}]),
            );
        }
        "any" => {
            node.insert("type".into(), json!("object"));
            node.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
        "object" => {
            node.insert("type".into(), json!("object"));
        }
        other => return Err(format!("unknown type {other:?}")),
    }
    for word in words {
        let (option, arg) = word.split_once('=').ok_or_else(|| format!("{word:?}"))?;
        let parsed = || serde_json::from_str::<Value>(arg).unwrap_or_else(|_| json!(arg));
        match option {
            "" | "default" => {
                node.insert("default".into(), parsed());
            }
            "min" => {
                node.insert("minimum".into(), parsed());
            }
            "max" => {
                node.insert("maximum".into(), parsed());
            }
            "enum" => {
                let values: Vec<Value> = arg.split('|').map(|v| json!(v)).collect();
                node.insert("enum".into(), Value::Array(values));
            }
            "nullable" => {
                node.insert("nullable".into(), parsed());
            }
            "pattern" => {
                node.insert("pattern".into(), json!(arg));
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Value::Object(node))
}

#[cfg(test)]
mod tests;
