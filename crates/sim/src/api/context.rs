//! What every resource handler shares: the request's context ([`Ctx`]), its body read as an
//! object, and JSON responses.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::output::Output;
use super::protobuf;
use super::request::RequestInfo;
use super::selectors::{FieldSelector, LabelSelector};
use crate::auth::Identity;
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::state::State;
use crate::store::ObjectKey;

/// A JSON response.
pub fn json_response(code: StatusCode, body: Vec<u8>, content_type: &'static str) -> Response {
    let mut response = (code, Body::from(body)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Parses a request body as JSON (or YAML when the content type says so).
pub fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if content_type.starts_with(protobuf::MEDIA_TYPE) {
        return protobuf::decode(body).ok_or_else(|| {
            ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
            )
        });
    }
    if content_type.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
        return serde_saphyr::from_str::<Value>(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "json: cannot unmarshal the request body: {e} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

/// Everything a resource handler needs.
pub struct Ctx {
    /// Shared state.
    pub state: Arc<State>,
    /// The resource type.
    pub rt: Arc<ResourceType>,
    /// The parsed request.
    pub info: RequestInfo,
    /// Who asks.
    pub identity: Arc<Identity>,
    /// Request headers.
    pub headers: HeaderMap,
}

impl Ctx {
    pub(super) fn key(&self) -> ObjectKey {
        let ns = if self.rt.namespaced {
            self.info.namespace.as_str()
        } else {
            ""
        };
        ObjectKey::new(self.rt.group_resource(), ns, &self.info.name)
    }

    pub(super) fn query(&self, name: &str) -> Option<&str> {
        self.info
            .query
            .get(name)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    pub(super) fn output(&self) -> Result<Output, ApiError> {
        Output::negotiate(
            self.headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
            self.query("includeObject"),
        )
    }

    pub(super) fn dry_run(&self) -> bool {
        self.query("dryRun") == Some("All")
    }

    pub(super) fn selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let labels = LabelSelector::parse(self.query("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(self.query("fieldSelector").unwrap_or(""), self.rt.behavior).map_err(|e| {
            ApiError::bad_request(format!(
                "Unable to find {{\"{}\" \"{}\" \"{}\"}} that match label selector \"{}\", field selector \"{}\": {e}",
                self.rt.group,
                self.info.version,
                self.rt.resource,
                self.query("labelSelector").unwrap_or(""),
                self.query("fieldSelector").unwrap_or("")
            ))
        })?;
        Ok((labels, fields))
    }
}
