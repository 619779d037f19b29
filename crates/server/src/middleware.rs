//! What wraps every request: its id, one structured log line, metrics, the timeout of
//! non-streaming requests, and authentication of the API routes.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

use crate::app::App;
use crate::auth::Refusal;
use crate::error::ApiError;
use crate::request_id;

/// Routes whose responses stream for as long as the caller listens.
fn is_streaming(route: &str, query: Option<&str>) -> bool {
    route.ends_with("/events")
        || (route.ends_with("/logs")
            && query.is_some_and(|q| {
                q.split('&')
                    .any(|p| p == "follow=true" || p == "follow=1" || p == "follow")
            }))
}

/// Gives the request an id, bounds its time unless it streams, logs it and counts it.
pub async fn observe(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let id = request_id::from_headers(request.headers());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = request.method().as_str().to_string();
    let streaming = is_streaming(&route, request.uri().query());
    let span = info_span!("request", request_id = %id, method = %method, route = %route);
    let started = Instant::now();
    let handled = request_id::scope(id.clone(), next.run(request)).instrument(span.clone());
    let mut response = if streaming {
        handled.await
    } else {
        match tokio::time::timeout(app.timeouts.request, handled).await {
            Ok(response) => response,
            Err(_) => {
                let error = ApiError::new(
                    axum::http::StatusCode::GATEWAY_TIMEOUT,
                    "timeout",
                    format!(
                        "the request took longer than {:?} (timeouts.request)",
                        app.timeouts.request
                    ),
                );
                request_id::scope(id.clone(), async { error.into_response() }).await
            }
        }
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    app.metrics
        .observe_request(&method, &route, status, elapsed);
    span.in_scope(|| {
        let duration_ms = elapsed.as_secs_f64() * 1000.0;
        if status >= 500 {
            warn!(message = "request", status, duration_ms);
        } else {
            info!(message = "request", status, duration_ms);
        }
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(request_id::HEADER, value);
    }
    response
}

/// Lets the request through with its [`crate::auth::Principal`] only with a valid bearer token.
pub async fn authenticate(
    State(app): State<Arc<App>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    match app.auth.authenticate(header) {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(Refusal::Missing) => {
            ApiError::unauthorized("missing bearer token: send Authorization: Bearer <token>")
                .into_response()
        }
        Err(Refusal::Invalid) => {
            warn!(message = "refused an invalid bearer token");
            ApiError::unauthorized("the bearer token is not valid").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_and_followed_logs_stream() {
        let logs = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/logs";
        assert!(is_streaming("/v1/events", None));
        assert!(is_streaming(
            "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/events",
            None
        ));
        assert!(is_streaming(logs, Some("lines=3&follow=true")));
        assert!(!is_streaming(logs, Some("lines=3")));
        assert!(!is_streaming(logs, Some("follow=false")));
        assert!(!is_streaming("/v1/jobs", Some("follow=true")));
    }
}
