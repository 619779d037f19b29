//! Liveness, readiness (the Kubernetes connection and every namespace's watches synced),
//! metrics and the OpenAPI document.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::model::{ClusterReadiness, Health, NamespaceReadiness, Readiness};
use crate::app::App;

/// Whether the process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    operation_id = "health",
    responses((status = 200, description = "The process is up", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

/// The readiness of this replica, from the watches' health; no Kubernetes requests.
pub fn readiness(app: &App) -> Readiness {
    let mut ready = true;
    let mut reasons = Vec::new();
    if app.is_draining() {
        ready = false;
        reasons.push("shutting down".to_string());
    }
    let mut clusters = Vec::new();
    for cluster in &app.clusters {
        let reachable = cluster.executor.cluster().check_reachable().is_ok();
        if !reachable {
            ready = false;
            reasons.push(format!(
                "cluster {:?}: the API server is unreachable",
                cluster.name
            ));
        }
        let tracker = cluster.executor.container_jobs().tracker();
        let mut namespaces = Vec::new();
        for namespace in &app.namespaces {
            let (jobs, pods) = tracker.namespace(namespace).health();
            let synced =
                jobs.synced && pods.synced && jobs.failing.is_none() && pods.failing.is_none();
            let failing = jobs.failing.clone().or_else(|| pods.failing.clone());
            if !synced {
                ready = false;
                reasons.push(match &failing {
                    Some(error) => format!(
                        "cluster {:?}, namespace {namespace:?}: the watch is failing: {error}",
                        cluster.name
                    ),
                    None => format!(
                        "cluster {:?}, namespace {namespace:?}: the watches have not listed yet",
                        cluster.name
                    ),
                });
            }
            namespaces.push(NamespaceReadiness {
                name: namespace.clone(),
                synced,
                watch_restarts: jobs.restarts + pods.restarts,
                failing,
            });
        }
        clusters.push(ClusterReadiness {
            name: cluster.name.clone(),
            reachable,
            namespaces,
        });
    }
    Readiness {
        ready,
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        clusters,
    }
}

/// Whether this replica can serve: the Kubernetes connection works and every namespace's
/// watches have listed and are current.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    operation_id = "ready",
    responses(
        (status = 200, description = "Ready", body = Readiness),
        (status = 503, description = "Not ready, with the reason", body = Readiness),
    )
)]
pub async fn readyz(State(app): State<Arc<App>>) -> (StatusCode, Json<Readiness>) {
    let readiness = readiness(&app);
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness))
}

/// Prometheus metrics.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    operation_id = "metrics",
    responses((status = 200, description = "Metrics in the Prometheus text format", body = String, content_type = "text/plain"))
)]
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    let executors: Vec<_> = app
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.executor.clone()))
        .collect();
    app.metrics.refresh_jobs(&executors).await;
    let mut response = app.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
