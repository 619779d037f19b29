//! The HTTP API: routes, their OpenAPI document (generated from the handlers), and the
//! answers to what matches no route.

mod answers;
pub mod events;
pub mod health;
pub mod input;
pub mod jobs;
pub mod logs;
pub mod model;
pub mod sweep;
pub mod ui;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::error::ApiError;
use crate::middleware;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kubeferry",
        description = "Run batch jobs on Kubernetes and know exactly how they ended. Every replica answers for every job: all job state lives in Kubernetes.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    tags(
        (name = "jobs", description = "Submit, read, cancel, list and sweep jobs"),
        (name = "events", description = "Status changes as Server-Sent Events"),
        (name = "operations", description = "Health, readiness and metrics"),
    ),
    components(schemas(events::ListedEvent, model::GoneEvent)),
    modifiers(&BearerAuth),
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token from the service's tokens file; each token may use only its namespaces.",
                    ))
                    .build(),
            ),
        );
    }
}

fn routers() -> (OpenApiRouter<Arc<App>>, OpenApiRouter<Arc<App>>) {
    let api = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::submit, jobs::list))
        .routes(routes!(jobs::get))
        .routes(routes!(jobs::timeline))
        .routes(routes!(jobs::cancel))
        .routes(routes!(logs::logs))
        .routes(routes!(events::job_events))
        .routes(routes!(events::events))
        .routes(routes!(sweep::sweep))
        .routes(routes!(jobs::templates))
        .routes(routes!(ui::whoami))
        .routes(routes!(ui::stats));
    let operations = OpenApiRouter::new()
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics));
    (api, operations)
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (api, operations) = routers();
    let mut document = api.merge(operations).into_openapi();
    document.info.version = env!("CARGO_PKG_VERSION").to_string();
    document
}

/// The service's routes, with authentication on `/v1`, request ids, logging, metrics and
/// timeouts on everything.
pub fn router(app: Arc<App>) -> Router {
    let (api, operations) = routers();
    let (api, _) = api.split_for_parts();
    let (operations, _) = operations.split_for_parts();
    let document = openapi();
    let api = api.layer(axum::middleware::from_fn_with_state(
        app.clone(),
        middleware::authenticate,
    ));
    Router::new()
        .merge(api)
        .merge(operations)
        .route("/", get(ui::root))
        .route("/ui", get(ui::index))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::styles))
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move { axum::Json(document) }
            }),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(app.limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            middleware::observe,
        ))
        .with_state(app)
}

async fn not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint; see /openapi.json",
    )
    .into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method; see /openapi.json",
    )
    .into_response()
}
