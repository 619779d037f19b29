//! The HTTP API: routing of discovery, OpenAPI, health, admin and resource requests.

pub mod admin;
pub mod apply;
pub mod builtin_schema;
pub mod context;
pub mod decode;
pub mod discovery;
pub mod handlers;
pub mod logs;
pub mod openapi_schema;
pub mod openapi_types;
pub mod output;
pub mod patch;
pub mod protobuf;
pub mod protobuf_schema;
pub mod protobuf_types;
pub mod request;
pub mod reviews;
pub mod selectors;
pub mod status;
pub mod table;
pub mod watch;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::Value;

use self::context::{Ctx, json_response};
use self::request::RequestInfo;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::state::State;

/// Set on a watch request that a fault rule stalls.
#[derive(Clone, Copy, Debug, Default)]
pub struct StallWatch(pub bool);

fn json(value: &Value) -> Response {
    json_response(
        StatusCode::OK,
        serde_json::to_vec(value).unwrap_or_default(),
        "application/json",
    )
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

fn aggregated_or(state: &State, headers: &HeaderMap, core: bool, legacy: Value) -> Response {
    match discovery::wants_aggregated(accept(headers)) {
        Some(v) => {
            let content_type = if v == "v2" {
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            } else {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            };
            json_response(
                StatusCode::OK,
                serde_json::to_vec(&discovery::aggregated(state, core, v)).unwrap_or_default(),
                content_type,
            )
        }
        None => json(&legacy),
    }
}

async fn version() -> Response {
    json(&discovery::version())
}

async fn health() -> &'static str {
    "ok"
}

async fn api_root(AxumState(state): AxumState<Arc<State>>, headers: HeaderMap) -> Response {
    let legacy = discovery::api_versions(&state);
    aggregated_or(&state, &headers, true, legacy)
}

async fn apis_root(AxumState(state): AxumState<Arc<State>>, headers: HeaderMap) -> Response {
    let legacy = discovery::api_groups(&state);
    aggregated_or(&state, &headers, false, legacy)
}

async fn core_v1(AxumState(state): AxumState<Arc<State>>) -> Response {
    match discovery::resource_list(&state, "", "v1") {
        Some(v) => json(&v),
        None => ApiError::path_not_found().into_response(),
    }
}

async fn group(AxumState(state): AxumState<Arc<State>>, Path(group): Path<String>) -> Response {
    match discovery::api_group(&state, &group) {
        Some(v) => json(&v),
        None => ApiError::path_not_found().into_response(),
    }
}

async fn group_version(
    AxumState(state): AxumState<Arc<State>>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    match discovery::resource_list(&state, &group, &version) {
        Some(v) => json(&v),
        None => ApiError::path_not_found().into_response(),
    }
}

async fn openapi_index(AxumState(state): AxumState<Arc<State>>) -> Response {
    json(&discovery::openapi_index(&state))
}

async fn openapi_group_version(
    AxumState(state): AxumState<Arc<State>>,
    Path(path): Path<String>,
) -> Response {
    match discovery::openapi_group_version(&state, &path) {
        Some(v) => json(&v),
        None => ApiError::path_not_found().into_response(),
    }
}

async fn resources(
    AxumState(state): AxumState<Arc<State>>,
    Extension(info): Extension<RequestInfo>,
    Extension(identity): Extension<Arc<Identity>>,
    stall: Option<Extension<StallWatch>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !info.is_resource {
        return ApiError::path_not_found().into_response();
    }
    let Some(rt) = state
        .registry
        .lookup(&info.group, &info.version, &info.resource)
    else {
        return ApiError::path_not_found().into_response();
    };
    let ctx = Ctx {
        state,
        rt,
        info,
        identity,
        headers,
    };
    if stall.is_some_and(|s| s.0.0) && ctx.info.verb == "watch" {
        return handlers::stalled_watch(&ctx);
    }
    handlers::handle(ctx, body).await
}

/// The router of every endpoint.
pub fn router(state: Arc<State>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(health))
        .route("/livez", get(health))
        .route("/readyz", get(health))
        .route("/api", get(api_root))
        .route("/api/", get(api_root))
        .route("/api/v1", get(core_v1))
        .route("/api/v1/", get(core_v1))
        .route("/apis", get(apis_root))
        .route("/apis/", get(apis_root))
        .route("/apis/{group}", get(group))
        .route("/apis/{group}/{version}", get(group_version))
        .route("/openapi/v3", get(openapi_index))
        .route("/openapi/v3/{*path}", get(openapi_group_version))
        .nest("/sim", admin::router())
        .fallback(resources)
        .with_state(state)
}
