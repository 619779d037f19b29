//! What the API server's decoding does to the object of a create, update or patch before
//! anything else sees it: `kind` and `apiVersion` filled in from the endpoint (built-in types)
//! or checked against it, and a built-in object read against the OpenAPI schema under the
//! request's `fieldValidation` (Strict, Warn, Ignore), with the answers and `Warning` headers of
//! kube-apiserver (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go`, `update.go`,
//! `patch.go`).

use axum::http::{HeaderMap, HeaderValue, header, header::HeaderName};
use axum::response::Response;
use serde_json::Value;

use super::builtin_schema;
use crate::error::{ApiError, FieldError};
use crate::resources::{Behavior, ResourceType};
use crate::state::State;

/// The `fieldValidation` directive of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Unknown or duplicate fields fail the request.
    Strict,
    /// Unknown fields are dropped and reported in `Warning` headers (the default).
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

impl FieldValidation {
    /// The directive of a request; `options_kind` (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`) names the options in the refusal of an unknown value.
    pub fn parse(query: Option<&str>, options_kind: &str) -> Result<Self, ApiError> {
        match query.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(ApiError::invalid(
                options_kind,
                "meta.k8s.io",
                "",
                &[FieldError::not_supported(
                    "fieldValidation",
                    other,
                    &["", "Ignore", "Strict", "Warn"],
                )],
            )),
        }
    }
}

/// The kind of write, which decides how the API server words a type error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// A JSON, merge or strategic merge patch (the patched object is decoded).
    Patch,
}

/// Decodes the object of a write to `rt` at `version`: fills in or checks its type meta, then
/// reads a built-in object against the schema. `json_body` is the request's body when it is
/// JSON, for its duplicate fields. Returns the object as the server keeps it and the warnings
/// to answer with.
pub fn decode_write(
    state: &State,
    rt: &ResourceType,
    version: &str,
    mut object: Value,
    json_body: Option<&[u8]>,
    validation: FieldValidation,
    write: Write,
) -> Result<(Value, Vec<String>), ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    }
    let expected = rt.api_version(version);
    if rt.behavior == Behavior::Custom {
        custom_type_meta(rt, &expected, &object)?;
        return Ok((object, Vec::new()));
    }
    let (kind, api_version) = builtin_type_meta(state, rt, &expected, &mut object)?;
    let Some(root) = builtin_schema::root(&api_version, &kind) else {
        return Ok((object, Vec::new()));
    };
    let original = (write == Write::Patch).then(|| object.to_string());
    let mut findings = builtin_schema::check(root, &mut object);
    if let Some(body) = json_body {
        let mut strict = builtin_schema::duplicate_fields(body);
        strict.append(&mut findings.strict);
        findings.strict = strict;
    }
    if let Some(error) = findings.type_error {
        // A type error fails the decoding whatever the field validation.
        return Err(match original {
            // patch.go: the patched object does not decode.
            Some(patched) => ApiError::invalid(
                "",
                "",
                "",
                &[FieldError::invalid(
                    "patch",
                    &Value::String(patched),
                    &error,
                )],
            ),
            // create.go, update.go: transformDecodeError.
            None => ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {}: {error}",
                version_of(&api_version),
                rt.kind
            )),
        });
    }
    match validation {
        FieldValidation::Strict if !findings.strict.is_empty() => Err(ApiError::bad_request(
            format!("strict decoding error: {}", findings.strict.join(", ")),
        )),
        FieldValidation::Warn => Ok((object, findings.strict)),
        _ => Ok((object, Vec::new())),
    }
}

fn version_of(api_version: &str) -> &str {
    api_version.rsplit('/').next().unwrap_or(api_version)
}

/// A built-in type: a missing `kind` or `apiVersion` is the endpoint's (the JSON serializer's
/// defaulting from the request's group, version and kind); one that names another type fails
/// as the decoder and the create handler fail it.
fn builtin_type_meta(
    state: &State,
    rt: &ResourceType,
    expected: &str,
    object: &mut Value,
) -> Result<(String, String), ApiError> {
    let text = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let kind = text("kind").unwrap_or_else(|| rt.kind.clone());
    let api_version = text("apiVersion").unwrap_or_else(|| expected.to_string());
    object["kind"] = Value::String(kind.clone());
    object["apiVersion"] = Value::String(api_version.clone());
    if kind == rt.kind && api_version == expected {
        return Ok((kind, api_version));
    }
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version.as_str()),
    };
    let registered = state
        .registry
        .by_kind(group, &kind)
        .filter(|t| t.behavior != Behavior::Custom && t.versions.iter().any(|v| v == version));
    let internal_package = if rt.group.is_empty() {
        "core"
    } else {
        rt.group.split('.').next().unwrap_or(&rt.group)
    };
    let message = match registered {
        Some(_) if kind == rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )));
        }
        Some(_) => format!(
            "converting ({version}.{kind}) to ({internal_package}.{}): unknown conversion",
            rt.kind
        ),
        None => format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme \"k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30\""
        ),
    };
    Err(ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {}: {message}",
        rt.kind
    )))
}

/// A custom resource: decoded as unstructured, which takes `kind` only from the body (the
/// server fills in nothing: an unstructured object must say what it is), and whose
/// `apiVersion` must be the endpoint's; a kind that differs fails the custom resource's
/// validation (`apiextensions-apiserver/pkg/registry/customresource/validator.go`).
fn custom_type_meta(rt: &ResourceType, expected: &str, object: &Value) -> Result<(), ApiError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        let body = object.to_string();
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{body}' ({})",
            rt.kind,
            summarize(&body)
        )));
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({expected})"
        )));
    }
    if kind != rt.kind {
        return Err(ApiError::invalid(
            &rt.kind,
            &rt.group,
            crate::store::meta::name(object),
            &[FieldError::invalid(
                "kind",
                &Value::String(kind.to_string()),
                &format!("must be {}", rt.kind),
            )],
        ));
    }
    Ok(())
}

/// What server-side apply checks of an applied configuration before merging it
/// (`structuredMergeManager.Apply` of the API server's field manager): its `apiVersion` must
/// be the endpoint's (400), its kind must be the endpoint's and, for a built-in type, every
/// field must be in the schema, whatever the `fieldValidation` (the field manager answers
/// these with a plain error, a 500).
pub fn check_apply(rt: &ResourceType, version: &str, applied: &Value) -> Result<(), ApiError> {
    let expected = rt.api_version(version);
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != expected {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {expected}"
        )));
    }
    let kind = applied.get("kind").and_then(Value::as_str).unwrap_or("");
    let gvknn = format!(
        "{}/{}; {}/{version}, Kind={kind}",
        crate::store::meta::namespace(applied),
        crate::store::meta::name(applied),
        rt.group
    );
    if kind != rt.kind {
        return Err(ApiError::unknown(format!(
            "failed to create typed patch object ({gvknn}): no corresponding type for {}/{version}, Kind={kind}",
            rt.group
        )));
    }
    if rt.behavior == Behavior::Custom {
        return Ok(());
    }
    let Some(root) = builtin_schema::root(&expected, kind) else {
        return Ok(());
    };
    let findings = builtin_schema::check(root, &mut applied.clone());
    let errors: Vec<String> = findings
        .strict
        .iter()
        .filter_map(|e| e.strip_prefix("unknown field "))
        .map(|path| format!(".{}: field not declared in schema", path.trim_matches('"')))
        .collect();
    let message = match errors.as_slice() {
        [] => return Ok(()),
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    Err(ApiError::unknown(format!(
        "failed to create typed patch object ({gvknn}): {message}"
    )))
}

/// The first 30 bytes of a body, as the API server quotes it in a decoding error.
fn summarize(body: &str) -> String {
    if body.len() <= 30 {
        return body.to_string();
    }
    let mut end = 30;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} ...", &body[..end])
}

/// The body of a request when it is JSON (not YAML or protobuf).
pub fn json_body<'a>(headers: &HeaderMap, body: &'a [u8]) -> Option<&'a [u8]> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    content_type.contains("json").then_some(body)
}

/// Adds the warnings to a response, one `Warning: 299 - "text"` header each, quoted as the API
/// server quotes them (`k8s.io/apimachinery/pkg/util/net.NewWarningHeader`).
pub fn add_warnings(response: &mut Response, warnings: &[String]) {
    for warning in warnings {
        let quoted = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            response
                .headers_mut()
                .append(HeaderName::from_static("warning"), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_body_is_summarized_at_thirty_bytes() {
        assert_eq!(summarize("{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            summarize("{\"metadata\":{\"name\":\"a-rather-long-name\"}}"),
            "{\"metadata\":{\"name\":\"a-rather- ..."
        );
    }

    #[test]
    fn field_validation_values() {
        assert_eq!(
            FieldValidation::parse(None, "CreateOptions").ok(),
            Some(FieldValidation::Warn)
        );
        assert_eq!(
            FieldValidation::parse(Some("Strict"), "CreateOptions").ok(),
            Some(FieldValidation::Strict)
        );
        let refused = FieldValidation::parse(Some("strict"), "CreateOptions").err();
        assert_eq!(
            refused.map(|e| (e.code, e.message)),
            Some((
                422,
                "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"".to_string()
            ))
        );
    }
}
