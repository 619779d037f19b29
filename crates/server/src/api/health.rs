//! Liveness, readiness (the Kubernetes connection and every namespace's watches synced),
//! metrics and the OpenAPI document.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use kubeferry_kube::tracker::WatchHealth;
use kubeferry_kube::{Executor, NamespaceHealth};

use super::model::{ClusterReadiness, Health, NamespaceReadiness, Readiness, WatchReadiness};
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
        let mut namespaces = Vec::new();
        for namespace in &app.namespaces {
            let NamespaceHealth { watches, starting } =
                namespace_watches(&cluster.executor, namespace);
            // A Spark watch refused for lack of permission (a Role for container jobs only, on
            // a cluster with a Spark operator) does not hold the replica back: container jobs
            // are served, and a Spark request is answered with the missing permission. Nor does
            // a refused watch of events (a Role from before kubeferry read them).
            let holding = |(index, (_, health)): &(usize, &(String, WatchHealth))| {
                *index < CONTAINER_WATCHES || health.forbidden.is_none()
            };
            let synced = starting.is_empty()
                && watches
                    .iter()
                    .enumerate()
                    .filter(holding)
                    .all(|(_, (_, health))| health.synced && health.failing.is_none());
            // The failure named is one that holds the replica back, if any, else any other.
            let failure_of = |(resource, health): &(String, WatchHealth)| {
                health
                    .failing
                    .as_ref()
                    .map(|error| format!("{resource}: {error}"))
            };
            let failing = watches
                .iter()
                .enumerate()
                .filter(holding)
                .find_map(|(_, watch)| failure_of(watch))
                .or_else(|| watches.iter().find_map(failure_of));
            if !synced {
                ready = false;
                reasons.push(match &failing {
                    Some(error) => format!(
                        "cluster {:?}, namespace {namespace:?}: the watch is failing: {error}",
                        cluster.name
                    ),
                    None if !starting.is_empty() => format!(
                        "cluster {:?}, namespace {namespace:?}: the watches of {} jobs have not started yet (the cluster's resources of that kind are being discovered)",
                        cluster.name,
                        starting.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ")
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
                watch_restarts: watches.iter().map(|(_, health)| health.restarts).sum(),
                failing,
                watches: watches
                    .into_iter()
                    .map(|(resource, health)| WatchReadiness {
                        resource,
                        synced: health.synced && health.failing.is_none(),
                        restarts: health.restarts,
                    })
                    .collect(),
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

/// How many of a namespace's watches, first in [`namespace_watches`], are the container jobs'
/// that every answer needs (the Jobs and their pods).
const CONTAINER_WATCHES: usize = 2;

/// Every watch of a namespace with its health, by resource: the container jobs' Jobs and pods,
/// the Job controller's refusal events, then each other kind's (the Spark jobs' driver pods
/// and each installed operator's SparkApplications, the JobSets'), then the outcome records';
/// and the kinds whose watches have not started yet (the Spark watches start once the
/// operators are discovered).
pub fn namespace_watches(executor: &Executor, namespace: &str) -> NamespaceHealth {
    // The refusal events, after the Jobs and pods, are optional like the Spark watches:
    // refused, they leave messages without a reason.
    executor.namespace_health(namespace)
}

/// Whether this replica can serve: the Kubernetes connection works and every namespace's
/// watches (of container and Spark jobs) have listed and are current.
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
    app.metrics.refresh_jobs(&executors);
    let mut response = app.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
