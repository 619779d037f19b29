//! Built-in objects checked against the Kubernetes OpenAPI schema the cluster serves, as the API
//! server's decoder checks them when it reads a body into its Go types: unknown fields are
//! dropped (and reported as strict errors, `unknown field "spec.foo"`), a value of the wrong JSON
//! type fails the decoding with the error Go's JSON decoder gives.
//!
//! The field tables ([`super::openapi_schema`]) are generated from k8s-openapi's `v1_33` sources,
//! which that crate generates from the Kubernetes 1.33 OpenAPI schema, the version the cluster
//! reports. k8s-openapi's own types cannot do this at run time: their deserializers skip unknown
//! fields without a word, and the simulated cluster's library takes no k8s-openapi version
//! feature. The protobuf tables ([`super::protobuf_schema`]) cover only what kubectl sends as
//! protobuf and do not tell an `int32` from an `int64`, which the type errors name.

use serde_json::Value;

use super::openapi_schema::{ROOTS, STRUCTS};

/// The struct index of a built-in kind, if the schema knows it.
pub fn root(api_version: &str, kind: &str) -> Option<usize> {
    ROOTS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, i)| *i)
}

/// What decoding found: the unknown fields (strict errors, in the order met) and the first
/// type error, which fails the decoding whatever the field validation.
#[derive(Debug, Default)]
pub struct Findings {
    /// Strict decoding errors, e.g. `unknown field "spec.foo"`.
    pub strict: Vec<String>,
    /// The first type error, e.g. `json: cannot unmarshal string into Go struct field
    /// JobSpec.spec.parallelism of type int32`.
    pub type_error: Option<String>,
}

/// Checks `object` (a whole object of the root struct `root`) and drops its unknown fields.
pub fn check(root: usize, object: &mut Value) -> Findings {
    let mut walk = Walk::default();
    if let Value::Object(map) = object {
        walk.fields(root, map, true);
    }
    walk.findings
}

/// The duplicate fields of a JSON body (`duplicate field "spec.parallelism"`), which strict
/// decoding reports beside unknown ones; the last value is the one kept, as in Go.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let seed = Duplicates {
        path: String::new(),
        found: &mut found,
    };
    // A body that does not parse has been refused before.
    let _ = serde::de::DeserializeSeed::deserialize(seed, &mut deserializer);
    found
}

/// Walks a JSON document noting repeated keys, with the strict path of each.
struct Duplicates<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Duplicates<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let seed = Duplicates {
                path: format!("{}[{index}]", self.path),
                found: &mut *self.found,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.push(format!("duplicate field {path:?}"));
            }
            map.next_value_seed(Duplicates {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

/// The decoder's position: the strict path (with list indices, `spec.containers[0].foo`) and
/// the type-error context (the innermost struct and the field names from the root, without
/// indices, as Go's `UnmarshalTypeError` gives them).
#[derive(Default)]
struct Walk {
    strict_path: String,
    field_stack: Vec<&'static str>,
    structs: Vec<usize>,
    findings: Findings,
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go type of a shape, as `reflect.Type.String()` prints it.
fn go_type(shape: &str) -> String {
    if let Some(inner) = shape.strip_prefix("[]") {
        return format!("[]{}", go_type(inner));
    }
    if let Some(inner) = shape.strip_prefix("map[string]") {
        return format!("map[string]{}", go_type(inner));
    }
    if let Some(index) = shape.strip_prefix('@') {
        return index
            .parse::<usize>()
            .ok()
            .and_then(|i| STRUCTS.get(i))
            .map_or_else(|| shape.to_string(), |s| s.go.to_string());
    }
    match shape {
        "bytes" => "[]uint8",
        "quantity" => "resource.Quantity",
        "intorstring" => "intstr.IntOrString",
        "time" => "v1.Time",
        "any" => "runtime.RawExtension",
        other => other,
    }
    .to_string()
}

/// The message of resource.Quantity's decoding error.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

impl Walk {
    fn type_error(&mut self, value: &str, shape: &str) {
        if self.findings.type_error.is_some() {
            return;
        }
        let go_struct = self
            .structs
            .last()
            .and_then(|i| STRUCTS.get(*i))
            .map(|s| s.go.rsplit('.').next().unwrap_or(s.go))
            .unwrap_or("");
        self.findings.type_error = Some(format!(
            "json: cannot unmarshal {value} into Go struct field {go_struct}.{} of type {}",
            self.field_stack.join("."),
            go_type(shape)
        ));
    }

    /// An error of a type that decodes itself (no struct context in its message).
    fn custom_error(&mut self, message: String) {
        if self.findings.type_error.is_none() {
            self.findings.type_error = Some(message);
        }
    }

    fn with_segment(&mut self, segment: &str, index: bool, f: impl FnOnce(&mut Self)) {
        let saved = self.strict_path.len();
        if index {
            self.strict_path.push_str(segment);
        } else {
            if !self.strict_path.is_empty() {
                self.strict_path.push('.');
            }
            self.strict_path.push_str(segment);
        }
        f(self);
        self.strict_path.truncate(saved);
    }

    fn fields(&mut self, index: usize, map: &mut serde_json::Map<String, Value>, root: bool) {
        let Some(def) = STRUCTS.get(index) else {
            return;
        };
        self.structs.push(index);
        let mut unknown = Vec::new();
        for (key, value) in map.iter_mut() {
            if root && (key == "apiVersion" || key == "kind") {
                if !value.is_string() && !value.is_null() {
                    self.field_stack
                        .push(if key == "kind" { "kind" } else { "apiVersion" });
                    self.type_error(json_kind(value), "string");
                    self.field_stack.pop();
                }
                continue;
            }
            match def.fields.iter().find(|(name, _)| name == key) {
                Some((name, shape)) => {
                    self.field_stack.push(name);
                    self.with_segment(key, false, |w| w.value(shape, value));
                    self.field_stack.pop();
                }
                None => {
                    self.with_segment(key, false, |w| {
                        w.findings
                            .strict
                            .push(format!("unknown field {:?}", w.strict_path));
                    });
                    unknown.push(key.clone());
                }
            }
        }
        for key in unknown {
            map.remove(&key);
        }
        self.structs.pop();
    }

    fn value(&mut self, shape: &'static str, value: &mut Value) {
        if value.is_null() {
            return;
        }
        if let Some(inner) = shape.strip_prefix("[]") {
            match value {
                Value::Array(items) => {
                    for (i, item) in items.iter_mut().enumerate() {
                        self.with_segment(&format!("[{i}]"), true, |w| w.value(inner, item));
                    }
                }
                // Go reads a JSON string into a []byte; nothing else is a list.
                other => self.type_error(json_kind(other), shape),
            }
            return;
        }
        if let Some(inner) = shape.strip_prefix("map[string]") {
            match value {
                Value::Object(map) => {
                    for (key, item) in map.iter_mut() {
                        self.with_segment(key, false, |w| w.value(inner, item));
                    }
                }
                other => self.type_error(json_kind(other), shape),
            }
            return;
        }
        if let Some(index) = shape.strip_prefix('@') {
            match value {
                Value::Object(map) => {
                    if let Ok(i) = index.parse() {
                        self.fields(i, map, false);
                    }
                }
                other => self.type_error(json_kind(other), shape),
            }
            return;
        }
        match shape {
            "string" if !value.is_string() => self.type_error(json_kind(value), shape),
            "bool" if !value.is_boolean() => self.type_error(json_kind(value), shape),
            "bytes" if !value.is_string() => self.type_error(json_kind(value), shape),
            "float64" if !value.is_number() => self.type_error(json_kind(value), shape),
            "int32" | "int64" => {
                if let Some(n) = integer_misfit(value, shape == "int32") {
                    self.type_error(&n, shape);
                }
            }
            "intorstring" if !value.is_string() => {
                // IntOrString decodes a non-string as an int32, without struct context.
                if let Some(n) = integer_misfit(value, true) {
                    self.custom_error(format!(
                        "json: cannot unmarshal {n} into Go value of type int32"
                    ));
                }
            }
            "time" if !value.is_string() => self.custom_error(format!(
                "json: cannot unmarshal {} into Go value of type string",
                json_kind(value)
            )),
            "quantity" => {
                let ok = match value {
                    Value::String(s) => crate::quantity::parse(s).is_some(),
                    Value::Number(n) => crate::quantity::parse(&n.to_string()).is_some(),
                    _ => false,
                };
                if !ok {
                    self.custom_error(QUANTITY_FORMAT.to_string());
                }
            }
            _ => {}
        }
    }
}

/// How Go's decoder names a value that does not fit an integer field: `string`, `number 1.5`
/// (a fraction or out of range), or None when it fits.
fn integer_misfit(value: &Value, int32: bool) -> Option<String> {
    match value {
        Value::Number(n) => {
            let fits = match n.as_i64() {
                Some(i) => !int32 || i32::try_from(i).is_ok(),
                None => false,
            };
            (!fits).then(|| format!("number {n}"))
        }
        other => Some(json_kind(other).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job() -> usize {
        root("batch/v1", "Job").expect("Job is in the schema")
    }

    #[test]
    fn every_stored_built_in_kind_has_a_schema() {
        // A kind added to the cluster without regenerating the tables fails here.
        let registry = crate::resources::Registry::new();
        for rt in registry.all() {
            if rt.create_only || rt.kind == "CustomResourceDefinition" {
                continue;
            }
            let api_version = rt.api_version(rt.preferred_version());
            assert!(
                root(&api_version, &rt.kind).is_some(),
                "{api_version} {} has no schema",
                rt.kind
            );
        }
    }

    #[test]
    fn unknown_fields_are_dropped_and_named_with_their_path() {
        let mut object = json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a", "colour": "red"},
            "spec": {"foo": 1, "template": {"spec": {"containers": [{"name": "c", "imagee": "x"}]}}}
        });
        let findings = check(job(), &mut object);
        assert_eq!(
            findings.strict,
            [
                "unknown field \"metadata.colour\"",
                "unknown field \"spec.foo\"",
                "unknown field \"spec.template.spec.containers[0].imagee\""
            ]
        );
        assert!(findings.type_error.is_none());
        assert_eq!(
            object,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"},
                   "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})
        );
    }

    #[test]
    fn a_wrong_type_names_the_struct_the_path_and_the_go_type() {
        let mut object = json!({"spec": {"parallelism": "two"}});
        assert_eq!(
            check(job(), &mut object).type_error.as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field JobSpec.spec.parallelism of type int32"
            )
        );
        let mut object = json!({"spec": {"template": {"spec": {"containers": [{"env": [{"name": "a", "value": 1}]}]}}}});
        assert_eq!(
            check(job(), &mut object).type_error.as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string"
            )
        );
        let mut object = json!({"spec": {"backoffLimit": 1.5, "template": "x"}});
        assert_eq!(
            check(job(), &mut object).type_error.as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.backoffLimit of type int32"
            )
        );
        let mut object = json!({"spec": {"template": "x"}});
        assert_eq!(
            check(job(), &mut object).type_error.as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field JobSpec.spec.template of type v1.PodTemplateSpec"
            )
        );
    }

    #[test]
    fn duplicate_fields_are_found_with_their_path() {
        let body = br#"{"kind":"Job","spec":{"parallelism":1,"parallelism":2,"template":{"spec":{"containers":[{"name":"a","name":"b"}]}}},"kind":"Job"}"#;
        assert_eq!(
            duplicate_fields(body),
            [
                "duplicate field \"spec.parallelism\"",
                "duplicate field \"spec.template.spec.containers[0].name\"",
                "duplicate field \"kind\""
            ]
        );
        assert!(duplicate_fields(br#"{"a":{"b":1},"c":{"b":1}}"#).is_empty());
    }

    #[test]
    fn quantities_int_or_strings_and_nulls() {
        let pod = root("v1", "Pod").expect("Pod is in the schema");
        let mut object = json!({"metadata": null, "spec": {"containers": [{"resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}]}});
        let findings = check(pod, &mut object);
        assert!(findings.type_error.is_none() && findings.strict.is_empty());
        let mut object =
            json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "lots"}}}]}});
        assert_eq!(
            check(pod, &mut object).type_error.as_deref(),
            Some(QUANTITY_FORMAT)
        );
        let mut object = json!({"spec": {"containers": [{"ports": [{"containerPort": 80}], "livenessProbe": {"httpGet": {"port": true}}}]}});
        assert_eq!(
            check(pod, &mut object).type_error.as_deref(),
            Some("json: cannot unmarshal bool into Go value of type int32")
        );
    }
}
