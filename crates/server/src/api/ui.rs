//! The dashboard: one page and its script and styles, embedded in the binary and served from
//! `/ui` with a strict Content-Security-Policy; it reads everything through the API with the
//! caller's token, and `GET /v1/whoami` tells it which namespaces that token may see.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};

use axum::extract::RawQuery;

use super::answers::NamespaceRefused;
use super::input::QueryParams;
use super::model::{StateSample, Stats, WhoAmI};
use crate::app::App;
use crate::auth::Principal;
use crate::error::ApiResult;

/// The page.
const INDEX: &str = include_str!("../../ui/index.html");
/// Its script.
const SCRIPT: &str = include_str!("../../ui/app.js");
/// Its styles.
const STYLES: &str = include_str!("../../ui/app.css");

/// No inline script or style, nothing from elsewhere, never framed: every string the page
/// shows comes from jobs, so none of it may run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The dashboard's three files, as (path, content type, body): what the page weighs.
pub const FILES: [(&str, &str, &str); 3] = [
    ("/ui", "text/html; charset=utf-8", INDEX),
    ("/ui/app.js", "text/javascript; charset=utf-8", SCRIPT),
    ("/ui/app.css", "text/css; charset=utf-8", STYLES),
];

/// `/`: the dashboard.
pub async fn root() -> Redirect {
    Redirect::to("/ui")
}

/// `/ui`: the page.
pub async fn index() -> Response {
    file(FILES[0].1, INDEX)
}

/// `/ui/app.js`.
pub async fn script() -> Response {
    file(FILES[1].1, SCRIPT)
}

/// `/ui/app.css`.
pub async fn styles() -> Response {
    file(FILES[2].1, STYLES)
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Who the caller is, and the namespaces it may use.
#[utoipa::path(
    get,
    path = "/v1/whoami",
    tag = "operations",
    operation_id = "whoAmI",
    responses(
        (status = 200, description = "The token's name and the namespaces it may use", body = WhoAmI),
        (status = 401, description = "No token, or a wrong one", body = crate::error::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
) -> Json<WhoAmI> {
    let namespaces = app
        .namespaces
        .iter()
        .filter(|namespace| principal.scope.allows(namespace))
        .cloned()
        .collect();
    Json(WhoAmI {
        name: principal.name,
        namespaces,
    })
}

/// How many jobs stood in each state over the last hour.
///
/// This replica's samples of its watch caches, one every `timeouts.stateSample`, summed over
/// the caller's namespaces (or one); no Kubernetes request. A replica started a moment ago
/// remembers only since then.
#[utoipa::path(
    get,
    path = "/v1/stats",
    tag = "jobs",
    operation_id = "jobStats",
    params(("namespace" = Option<String>, Query, description = "Only this namespace (default: every namespace the caller may use)")),
    responses(
        (status = 200, description = "The samples of the last hour", body = Stats),
        NamespaceRefused,
    ),
    security(("bearer" = []))
)]
pub async fn stats(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Stats>> {
    let mut q = QueryParams::parse(query.as_deref());
    let namespace = q.string("namespace")?;
    q.finish(&["namespace"])?;
    let namespaces = app.namespaces_for(&principal, namespace.as_deref(), "namespace")?;
    let minutes = app
        .history
        .samples(&namespaces)
        .into_iter()
        .map(|(at, counts)| StateSample { at, counts })
        .collect();
    Ok(Json(Stats { minutes }))
}
