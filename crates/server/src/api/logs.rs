//! Logs: the end of a job's log (which never fails the caller for an unreadable log), or the
//! log followed until the job's container ends.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kubeferry_kube::Error as KubeError;
use kubeferry_kube::logs::{FollowOptions, TailOptions};
use tracing::warn;

use super::answers::{NamespaceRefused, NoSuchJob, OtherCluster};
use super::input::{IdPath, QueryParams};
use super::jobs::resolve;
use super::model::LogTail;
use crate::app::{App, stopped};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody};

/// Whether a failure to read a log is about the job itself (and so an error for the caller)
/// rather than about reading it (an empty tail with a warning).
fn concerns_the_job(error: &KubeError) -> bool {
    matches!(
        error,
        KubeError::NoSuchJob { .. }
            | KubeError::WrongCluster { .. }
            | KubeError::SparkUnavailable { .. }
            | KubeError::JobSetUnavailable { .. }
            | KubeError::NoSuchPart { .. }
            | KubeError::Id(_)
    )
}

/// Read a job's log.
///
/// Without `follow`: the end of the newest attempt's log as JSON, at most `lines` lines and
/// `bytes` bytes (cut on a character boundary). Never silently empty: without a log, a
/// `warning` says why (no container started yet, and why; no earlier attempt; nothing
/// printed), and once the job's pods are gone `log` holds the last words kept with its outcome,
/// with a `warning` that says so. A log that cannot be read gives an empty `log` and a
/// `warning`, never an error; an `index` or `replica` the job does not have is a 400. With `follow=true`: the log as `text/plain`, streamed until
/// the job's container ends (starting with the last `lines` lines if given).
#[utoipa::path(
    get,
    path = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/logs",
    tag = "jobs",
    operation_id = "getJobLogs",
    params(
        IdPath,
        ("lines" = Option<u64>, Query, description = "At most this many lines from the end"),
        ("bytes" = Option<u64>, Query, description = "At most this many bytes from the end (default and maximum: limits.maxLogBytes); not with follow"),
        ("previous" = Option<bool>, Query, description = "The attempt before the newest (after a retry)"),
        ("follow" = Option<bool>, Query, description = "Stream the log as text/plain until the container ends"),
        ("index" = Option<u32>, Query, description = "For an indexed job: the log of this index's pods (its newest attempt, or with previous the one before). For a JobSet: the Job of this index of the replicated job (default 0)"),
        ("replica" = Option<String>, Query, description = "For a JobSet: the log of this replicated job's pods (default: the first replicated job)"),
    ),
    responses(
        (status = 200, description = "The end of the log (JSON), or the followed log (text/plain)",
            content((LogTail = "application/json"), (String = "text/plain"))),
        (status = 400, description = "A wrong parameter or execution id", body = ErrorBody),
        NamespaceRefused,
        NoSuchJob,
        OtherCluster,
    ),
    security(("bearer" = []))
)]
pub async fn logs(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<IdPath>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let mut q = QueryParams::parse(query.as_deref());
    let lines = q.number("lines")?;
    let bytes = q.number("bytes")?;
    let previous = q.flag("previous")?;
    let follow = q.flag("follow")?;
    let index = q
        .number("index")?
        .map(|index| {
            u32::try_from(index)
                .map_err(|_| ApiError::bad_parameter("index", format!("{index} is too large")))
        })
        .transpose()?;
    let replica = q.string("replica")?;
    q.finish(&["lines", "bytes", "previous", "follow", "index", "replica"])?;
    let (id, executor) = resolve(&app, &principal, &path)?;
    if index.is_some()
        && !matches!(
            id.kind,
            kubeferry_core::JobKind::Job | kubeferry_core::JobKind::JobSet
        )
    {
        return Err(ApiError::bad_parameter(
            "index",
            "only for container jobs and JobSets (an indexed job's pods have indexes, a JobSet's Jobs too)",
        ));
    }
    if replica.is_some() && id.kind != kubeferry_core::JobKind::JobSet {
        return Err(ApiError::bad_parameter("replica", "only for JobSets"));
    }

    if follow {
        if bytes.is_some() || previous {
            return Err(ApiError::bad_parameter(
                if previous { "previous" } else { "bytes" },
                "only for a tail, not with follow (use lines to start with the end of the log)",
            ));
        }
        // Errors about the job come before the stream starts, as error responses: an index or
        // replicated job it does not have too (a tail of no line checks them, and reads no log).
        if index.is_some() || replica.is_some() {
            let part = TailOptions {
                lines: Some(0),
                index,
                replica: replica.clone(),
                ..TailOptions::default()
            };
            executor.tail(&id, &part).await?;
        } else {
            executor.status(&id).await?;
        }
        let options = FollowOptions {
            tail_lines: lines,
            reopen_delay: app.timeouts.follow_reopen,
            idle_recheck: app.timeouts.follow_idle,
            index,
            replica,
        };
        let stream = executor.follow(&id, options)?;
        let log_id = id.clone();
        let chunks = stream
            .take_until(stopped(app.shutdown()))
            .scan((), move |_, item| {
                futures::future::ready(match item {
                    Ok(line) => Some(Ok::<_, Infallible>(Bytes::from(line))),
                    Err(error) => {
                        warn!(message = "log follow ended early", id = %log_id, %error);
                        None
                    }
                })
            });
        let mut response = Body::from_stream(chunks).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        return Ok(response);
    }

    let max = app.limits.max_log_bytes;
    let options = TailOptions {
        lines,
        bytes: Some(bytes.map_or(max, |b| b.min(max))),
        previous,
        index,
        replica,
    };
    let tail = match executor.tail(&id, &options).await {
        Ok(tail) => LogTail {
            log: tail.log,
            warning: tail.warning,
        },
        Err(error) if concerns_the_job(&error) => return Err(error.into()),
        Err(error) => {
            warn!(message = "cannot read a log; answering with an empty tail", id = %id, %error);
            LogTail {
                log: String::new(),
                warning: Some(format!("the log could not be read: {error}")),
            }
        }
    };
    Ok(Json(tail).into_response())
}
