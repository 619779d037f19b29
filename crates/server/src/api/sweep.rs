//! The orphan sweep: managed jobs whose job ids the caller no longer knows (a create whose
//! response was lost and never retried, a caller that forgot a job), reported and on request
//! deleted.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use tracing::info;

use super::answers::{NamespaceRefused, Unreachable};
use super::input;
use super::model::{OrphanItem, SweepRequest, SweepResult};
use crate::app::App;
use crate::auth::Principal;
use crate::error::{ApiResult, ErrorBody};

/// Find (and delete) orphans.
///
/// Lists the managed jobs of the caller's namespaces (or one) and reports those whose job ids
/// are not in `knownJobIds`; deletes them (with their pods) when `delete` is true. Costs one
/// list of Jobs per namespace.
#[utoipa::path(
    post,
    path = "/v1/sweep",
    tag = "jobs",
    operation_id = "sweepOrphans",
    request_body = SweepRequest,
    responses(
        (status = 200, description = "The orphans found (and whether each was deleted)", body = SweepResult),
        (status = 400, description = "Malformed JSON or a wrong field", body = ErrorBody),
        NamespaceRefused,
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn sweep(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<SweepResult>> {
    let body = input::body(&headers, body)?;
    let request: SweepRequest = input::json(input::text(&body)?)?;
    let namespaces = app.namespaces_for(&principal, request.namespace.as_deref(), "namespace")?;
    let clusters = app.clusters_for(request.cluster.as_deref(), "cluster")?;
    let known: HashSet<String> = request.known_job_ids.into_iter().collect();
    let mut orphans = Vec::new();
    for cluster in &clusters {
        for namespace in &namespaces {
            let found = cluster
                .executor
                .sweep(namespace, &known, request.delete)
                .await?;
            orphans.extend(found.into_iter().map(OrphanItem::from));
        }
    }
    info!(message = "sweep", caller = %principal.name, orphans = orphans.len(), delete = request.delete);
    Ok(Json(SweepResult { orphans }))
}
