//! Errors of the simulated cluster: [`SimError`] of its Rust API, and [`ApiError`], a Kubernetes
//! API error (code, reason, details) of an operation on its objects, which the HTTP layer
//! answers with a `Status` body.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::resources::GroupResource;

/// An error starting, configuring or driving the simulated cluster.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig {}", path.display())]
    WriteKubeconfig {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is not usable.
    #[error("invalid simulated cluster configuration: {0}")]
    Config(String),
    /// An API operation failed (e.g. the pod to evict does not exist).
    #[error("{}", .0.message)]
    Api(#[from] ApiError),
}

/// One field error of a 422 Invalid answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.template.spec.restartPolicy`.
    pub field: String,
    /// The cause type, e.g. `FieldValueRequired`.
    pub reason: &'static str,
    /// The message without the field, e.g. `Required value`.
    pub message: String,
}

impl FieldError {
    /// A required field is missing.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        FieldError {
            field: field.into(),
            reason: "FieldValueRequired",
            message,
        }
    }

    /// A field has a value that is not allowed.
    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {shown}: {detail}"),
        }
    }

    /// A field has a value outside an enumeration.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.into(),
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    /// A field may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {detail}"),
        }
    }

    /// The error as one line, `field: message`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// An error answered with a Kubernetes `Status` body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The `reason` of the Status (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// The human message.
    pub message: String,
    /// The `details` of the Status, if any.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u32>,
    /// `metadata.continue` of the Status: a token to go on with (an expired continue token's
    /// answer carries one that lists the rest at the current version).
    pub continue_token: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The `details` of a Status about one object: its name, group and kind (the resource).
pub(crate) fn object_details(gr: &GroupResource, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !gr.group.is_empty() {
        d.insert("group".into(), json!(gr.group));
    }
    d.insert("kind".into(), json!(gr.resource));
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404 for a named object.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", gr.qualified()),
        )
        .with_details(object_details(gr, name))
    }

    /// 404 for a path that names no resource.
    pub fn path_not_found() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", gr.qualified()),
        )
        .with_details(object_details(gr, name))
    }

    /// 409 Conflict with a cause (e.g. a stale resourceVersion).
    pub fn conflict(gr: &GroupResource, name: &str, cause: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {cause}",
                gr.qualified()
            ),
        )
        .with_details(object_details(gr, name))
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn stale(gr: &GroupResource, name: &str) -> Self {
        ApiError::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes; `kind` is the object's kind, e.g. `Job`.
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let summary = match errors {
            [one] => one.line(),
            many => format!(
                "[{}]",
                many.iter()
                    .map(FieldError::line)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
            .collect();
        let mut d = serde_json::Map::new();
        d.insert("name".into(), json!(name));
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        d.insert("causes".into(), Value::Array(causes));
        ApiError::new(
            422,
            "Invalid",
            format!("{qualified_kind} {name:?} is invalid: {summary}"),
        )
        .with_details(Value::Object(d))
    }

    /// 403 as the API server answers when a validating admission webhook denies a request
    /// (`admission webhook "<name>" denied the request: <message>`).
    pub fn webhook_denied(webhook: &str, message: &str) -> Self {
        ApiError::new(
            403,
            "Forbidden",
            format!("admission webhook {webhook:?} denied the request: {message}"),
        )
    }

    /// 422 as the server answers a patch that cannot be applied (e.g. a failed JSON patch
    /// `test`).
    pub fn unprocessable(server_message: impl Into<String>) -> Self {
        ApiError::new(422, "Invalid", "the server rejected our request due to an error in our request")
            .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": server_message.into()}]}))
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden with a full message; `gr` and `name` fill the details.
    pub fn forbidden(gr: &GroupResource, name: &str, message: impl Into<String>) -> Self {
        ApiError::new(403, "Forbidden", message).with_details(object_details(gr, name))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        ApiError::new(405, "MethodNotAllowed", message).with_details(json!({}))
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 410 Gone (Expired).
    pub fn gone(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 429 TooManyRequests with a Retry-After.
    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut e = ApiError::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": retry_after}));
        e.retry_after = Some(retry_after);
        e
    }

    /// 500 with no reason, as the API server answers an error that is not a Status
    /// (`ErrorToAPIStatus`): the message as it is.
    pub fn unknown(message: impl Into<String>) -> Self {
        ApiError::new(500, "", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 504 Timeout for a read at a resourceVersion the server has not reached, as the API
    /// server's watch cache answers once it gave up waiting for it: retry after 1 second, cause
    /// `ResourceVersionTooLarge`.
    pub fn resource_version_too_large(requested: u64, current: u64) -> Self {
        let mut e = ApiError::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        e.retry_after = Some(1);
        e
    }

    /// Any code with the reason the real server uses for it.
    pub fn from_code(code: u16, message: Option<String>, retry_after: Option<u32>) -> Self {
        let (reason, default_message): (&'static str, &str) = match code {
            400 => (
                "BadRequest",
                "the server rejected our request for an unknown reason",
            ),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden"),
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            405 => (
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
            409 => ("Conflict", "the server reported a conflict"),
            410 => ("Expired", "the resource requested is no longer available"),
            415 => (
                "UnsupportedMediaType",
                "the body of the request was in an unknown format",
            ),
            422 => (
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            500 => (
                "InternalError",
                "an error on the server has prevented the request from succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted",
            ),
            _ => ("", "the server responded with an error"),
        };
        let mut e = ApiError::new(
            code,
            reason,
            message.unwrap_or_else(|| default_message.to_string()),
        );
        if let Some(seconds) = retry_after {
            e.retry_after = Some(seconds);
            e.details = Some(json!({"retryAfterSeconds": seconds}));
        }
        e
    }
}
