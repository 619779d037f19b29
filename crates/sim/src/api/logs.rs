//! `pods/log`: container, follow (until the container terminates), tailLines, sinceSeconds,
//! sinceTime, limitBytes, timestamps, previous; 400 when a pod with several containers is asked
//! without one, or when the container has not started.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::context::Ctx;
use super::request::flag;
use crate::error::ApiError;
use crate::node::logs::{LogLine, RunLog};
use crate::store::meta;

struct Options {
    tail: Option<usize>,
    since: Option<Timestamp>,
    limit: Option<usize>,
    timestamps: bool,
}

impl Options {
    fn render(&self, line: &LogLine) -> Vec<u8> {
        if self.timestamps {
            let mut out = meta::format_nano_time(line.time).into_bytes();
            out.push(b' ');
            out.extend_from_slice(&line.text);
            out
        } else {
            line.text.to_vec()
        }
    }

    fn keep(&self, line: &LogLine) -> bool {
        self.since.is_none_or(|s| line.time >= s)
    }
}

fn names(pod: &Value, field: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn waiting_message(pod: &Value, container: &str) -> Option<String> {
    for field in ["containerStatuses", "initContainerStatuses"] {
        for s in pod
            .pointer(&format!("/status/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if s.get("name").and_then(Value::as_str) == Some(container) {
                let reason = s.pointer("/state/waiting/reason").and_then(Value::as_str)?;
                return Some(match reason {
                    "ErrImagePull" => "image can't be pulled".to_string(),
                    "ImagePullBackOff" => "trying and failing to pull image".to_string(),
                    other => other.to_string(),
                });
            }
        }
    }
    Some("ContainerCreating".to_string())
}

/// Answers a log request.
pub async fn handle(ctx: &Ctx) -> Result<Response, ApiError> {
    let key =
        crate::store::ObjectKey::new(ctx.rt.group_resource(), &ctx.info.namespace, &ctx.info.name);
    let pod = ctx
        .state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key.resource, &key.name))?;
    let pod_name = meta::name(&pod).to_string();
    let containers = names(&pod, "containers");
    let inits = names(&pod, "initContainers");
    let container = match ctx.info.query.get("container").filter(|c| !c.is_empty()) {
        Some(c) => {
            if !containers.contains(c) && !inits.contains(c) {
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {pod_name}"
                )));
            }
            c.clone()
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !inits.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    inits.join(" ")
                ));
            }
            return Err(ApiError::bad_request(message));
        }
    };
    let uid = meta::uid(&pod).unwrap_or("");
    let runs = ctx.state.logs.runs(uid, &container);
    let previous = flag(&ctx.info.query, "previous");
    let run: Arc<RunLog> = if previous {
        match runs.len().checked_sub(2).and_then(|i| runs.get(i)) {
            Some(r) => r.clone(),
            None => {
                return Err(ApiError::bad_request(format!(
                    "previous terminated container {container:?} in pod {pod_name:?} not found"
                )));
            }
        }
    } else {
        match runs.last() {
            Some(r) => r.clone(),
            None => {
                let why =
                    waiting_message(&pod, &container).unwrap_or_else(|| "ContainerCreating".into());
                return Err(ApiError::bad_request(format!(
                    "container {container:?} in pod {pod_name:?} is waiting to start: {why}"
                )));
            }
        }
    };
    let number = |name: &str| -> Result<Option<i64>, ApiError> {
        match ctx.info.query.get(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("{name}: invalid value {v:?}"))),
        }
    };
    let now = Timestamp::now();
    let since = match (
        number("sinceSeconds")?,
        ctx.info.query.get("sinceTime").filter(|v| !v.is_empty()),
    ) {
        (Some(s), _) => Some(
            now.checked_sub(SignedDuration::from_secs(s.max(1)))
                .unwrap_or(now),
        ),
        (None, Some(t)) => Some(
            meta::parse_time(t)
                .ok_or_else(|| ApiError::bad_request(format!("sinceTime: invalid value {t:?}")))?,
        ),
        (None, None) => None,
    };
    let options = Options {
        tail: number("tailLines")?.map(|t| t.max(0) as usize),
        since,
        limit: number("limitBytes")?.filter(|l| *l > 0).map(|l| l as usize),
        timestamps: flag(&ctx.info.query, "timestamps"),
    };
    let follow = flag(&ctx.info.query, "follow") && !previous;
    let first = run.read_from(0);
    let mut lines: Vec<LogLine> = first
        .lines
        .into_iter()
        .filter(|l| options.keep(l))
        .collect();
    if let Some(tail) = options.tail {
        let skip = lines.len().saturating_sub(tail);
        lines.drain(..skip);
    }
    let mut initial = Vec::new();
    for l in &lines {
        initial.extend_from_slice(&options.render(l));
    }
    let mut budget = options.limit;
    if let Some(b) = budget {
        initial.truncate(b);
        budget = Some(b - initial.len());
    }
    let mut response = if !follow || first.finished || budget == Some(0) {
        Response::new(Body::from(initial))
    } else {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
        let mut cursor = first.next;
        tokio::spawn(async move {
            if !initial.is_empty() && tx.send(Ok(Bytes::from(initial))).await.is_err() {
                return;
            }
            let mut changes = run.subscribe();
            loop {
                let out = run.read_from(cursor);
                cursor = out.next;
                for l in out.lines.iter().filter(|l| options.keep(l)) {
                    let mut chunk = options.render(l);
                    if let Some(b) = budget.as_mut() {
                        chunk.truncate(*b);
                        *b -= chunk.len();
                    }
                    if !chunk.is_empty() && tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                        return;
                    }
                    if budget == Some(0) {
                        return;
                    }
                }
                if out.finished {
                    return;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return; },
                    _ = tx.closed() => return,
                }
            }
        });
        Response::new(Body::from_stream(ReceiverStream::new(rx)))
    };
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}
