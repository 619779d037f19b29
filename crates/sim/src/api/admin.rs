//! The admin endpoints under `/sim` (admin token only): fault rules, request counters, watch
//! controls, unreachability and restart, disruptions, service-account tokens.
//!
//! | method | path | body / query | effect |
//! |---|---|---|---|
//! | GET | /sim/counters | | every counter `[{verb, resource, user, count}]` |
//! | DELETE | /sim/counters | | reset |
//! | GET, POST, DELETE | /sim/faults | POST: a FaultRule | list, add (answers `{"id": N}`), clear |
//! | DELETE | /sim/faults/{id} | | remove one rule |
//! | POST | /sim/watches/{stall,cut,abort,expire} | stall: `?millis=N` | act on every open watch |
//! | POST | /sim/unreachable | `?millis=N` | refuse connections for a while |
//! | POST | /sim/restart | | drop every connection, forget the watch history, serve again |
//! | POST | /sim/pods/{ns}/{name}/evict | | evict as the kubelet does under pressure |
//! | POST | /sim/pods/{ns}/{name}/preempt | | preempt as kube-scheduler does for a higher-priority pod |
//! | POST | /sim/nodes/{name}/{lose,drain,restore} | | node disruptions |
//! | POST | /sim/tokens/{ns}/{sa} | | a bearer token for a service account |

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use serde_json::json;

use crate::auth::Identity;
use crate::disruption;
use crate::error::ApiError;
use crate::faults::{FaultRule, WatchControl};
use crate::state::State;

type S = AxumState<Arc<State>>;

fn admin_only(identity: &Identity) -> Result<(), ApiError> {
    if identity.is_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            &crate::resources::GroupResource::new("", ""),
            "",
            format!(
                "forbidden: User {:?} cannot use the simulation admin endpoints",
                identity.user
            ),
        ))
    }
}

fn reply(result: Result<serde_json::Value, ApiError>) -> Response {
    match result {
        Ok(v) => (StatusCode::OK, Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn counters(AxumState(state): S, Extension(id): Extension<Arc<Identity>>) -> Response {
    reply(admin_only(&id).map(|_| {
        let list: Vec<_> = state
            .counters
            .snapshot()
            .into_iter()
            .map(|(k, n)| json!({"verb": k.verb, "resource": k.resource, "user": k.user, "count": n}))
            .collect();
        json!(list)
    }))
}

async fn reset_counters(AxumState(state): S, Extension(id): Extension<Arc<Identity>>) -> Response {
    reply(admin_only(&id).map(|_| {
        state.counters.reset();
        json!({})
    }))
}

async fn list_faults(AxumState(state): S, Extension(id): Extension<Arc<Identity>>) -> Response {
    reply(admin_only(&id).map(|_| {
        let list: Vec<_> = state
            .faults
            .list()
            .into_iter()
            .map(|(i, r)| json!({"id": i, "rule": r}))
            .collect();
        json!(list)
    }))
}

async fn add_fault(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Json(rule): Json<FaultRule>,
) -> Response {
    reply(admin_only(&id).map(|_| json!({"id": state.faults.add(rule)})))
}

async fn clear_faults(AxumState(state): S, Extension(id): Extension<Arc<Identity>>) -> Response {
    reply(admin_only(&id).map(|_| {
        state.faults.clear();
        json!({})
    }))
}

async fn remove_fault(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path(rule): Path<u64>,
) -> Response {
    reply(admin_only(&id).map(|_| json!({"removed": state.faults.remove(rule)})))
}

fn millis(query: &HashMap<String, String>) -> Duration {
    Duration::from_millis(
        query
            .get("millis")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1000),
    )
}

async fn watches(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path(action): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    reply(admin_only(&id).and_then(|_| {
        let control = match action.as_str() {
            "stall" => WatchControl::Stall(millis(&query)),
            "cut" => WatchControl::Cut,
            "abort" => WatchControl::Abort,
            "expire" => {
                state.store.compact();
                WatchControl::Expire
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown watch action {other:?}"
                )));
            }
        };
        let reached = state.watch_control.send(control).unwrap_or(0);
        Ok(json!({"watches": reached}))
    }))
}

async fn unreachable(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    reply(admin_only(&id).map(|_| {
        state.control.go_down(millis(&query), false);
        json!({})
    }))
}

async fn restart(AxumState(state): S, Extension(id): Extension<Arc<Identity>>) -> Response {
    reply(admin_only(&id).map(|_| {
        state.control.go_down(Duration::ZERO, true);
        json!({})
    }))
}

async fn evict(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    reply(
        admin_only(&id).and_then(|_| disruption::evict_pod(&state, &ns, &name).map(|_| json!({}))),
    )
}

async fn preempt(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    reply(
        admin_only(&id)
            .and_then(|_| disruption::preempt_pod(&state, &ns, &name).map(|_| json!({}))),
    )
}

async fn node(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path((name, action)): Path<(String, String)>,
) -> Response {
    reply(admin_only(&id).and_then(|_| {
        match action.as_str() {
            "lose" => disruption::lose_node(&state, &name)?,
            "drain" => disruption::drain_node(&state, &name)?,
            "restore" => disruption::restore_node(&state, &name)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown node action {other:?}"
                )));
            }
        }
        Ok(json!({}))
    }))
}

async fn token(
    AxumState(state): S,
    Extension(id): Extension<Arc<Identity>>,
    Path((ns, sa)): Path<(String, String)>,
) -> Response {
    reply(admin_only(&id).map(|_| json!({"token": state.auth.token_for(&ns, &sa)})))
}

/// The `/sim` router.
pub fn router() -> Router<Arc<State>> {
    Router::new()
        .route("/counters", get(counters).delete(reset_counters))
        .route(
            "/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/faults/{id}", delete(remove_fault))
        .route("/watches/{action}", post(watches))
        .route("/unreachable", post(unreachable))
        .route("/restart", post(restart))
        .route("/pods/{ns}/{name}/evict", post(evict))
        .route("/pods/{ns}/{name}/preempt", post(preempt))
        .route("/nodes/{name}/{action}", post(node))
        .route("/tokens/{ns}/{sa}", post(token))
}
