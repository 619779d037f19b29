//! The Kubernetes `Status` bodies the API answers with: a failure for an [`ApiError`], a success
//! for deletes that return no object, and the HTTP response of an error.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::object_details;
pub use crate::error::{ApiError, FieldError};
use crate::resources::GroupResource;

/// The `Status` body of a failure, as the API server answers `error`.
pub fn failure_status(error: &ApiError) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "code": error.code,
    });
    if !error.reason.is_empty() {
        status["reason"] = json!(error.reason);
    }
    if let Some(d) = &error.details {
        status["details"] = d.clone();
    }
    if let Some(token) = &error.continue_token {
        status["metadata"] = json!({"continue": token});
    }
    status
}

/// A Status of success, as answered by deletes of resources that do not return the object.
pub fn success_status(gr: &GroupResource, name: &str, uid: &str) -> Value {
    let mut d = object_details(gr, name);
    if let Some(map) = d.as_object_mut() {
        map.insert("uid".into(), json!(uid));
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = failure_status(&self).to_string();
        let mut response = (code, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
