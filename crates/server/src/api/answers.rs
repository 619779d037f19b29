//! The error answers that many operations share, each described once for the OpenAPI document.

// Named in `responses(...)` of the handlers' `#[utoipa::path]`; the answers themselves are
// `ApiError`s, so these types only describe them and are never built.
#![allow(dead_code, reason = "describes answers, never builds them")]

use utoipa::IntoResponses;

use crate::error::ErrorBody;

/// The execution id in the path is malformed.
#[derive(IntoResponses)]
#[response(status = 400, description = "A malformed execution id")]
pub(crate) struct MalformedId(ErrorBody);

/// The caller's token may not use the namespace.
#[derive(IntoResponses)]
#[response(status = 403, description = "A namespace the caller may not use")]
pub(crate) struct NamespaceRefused(ErrorBody);

/// The execution id names no job.
#[derive(IntoResponses)]
#[response(status = 404, description = "No such job")]
pub(crate) struct NoSuchJob(ErrorBody);

/// The execution id names a cluster this service does not serve.
#[derive(IntoResponses)]
#[response(status = 421, description = "The id names another cluster")]
pub(crate) struct OtherCluster(ErrorBody);

/// Kubernetes could not be reached.
#[derive(IntoResponses)]
#[response(status = 503, description = "Kubernetes unreachable")]
pub(crate) struct Unreachable(ErrorBody);
