//! Watch streams: chunked newline-delimited JSON events, replayed strictly after the requested
//! resourceVersion from the bounded history, ERROR 410 when it is too old, BOOKMARK events,
//! `timeoutSeconds`, `sendInitialEvents`, and selector-aware ADDED/DELETED when an object
//! starts or stops matching. Open streams obey the cluster's commands (stall, cut, abort,
//! expire), stalled ones included.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::output::Output;
use super::selectors::{FieldSelector, LabelSelector};
use crate::error::ApiError;
use crate::faults::WatchControl;
use crate::ops::convert;
use crate::resources::ResourceType;
use crate::state::State;
use crate::store::{EventType, StoreError, StoreEvent, meta};

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// `resourceVersion` unset, `""` or `"0"`: ADDED events for the current objects first.
    Now,
    /// Changes strictly after this resourceVersion.
    After(u64),
}

/// The parameters of a watch.
pub struct WatchParams {
    /// Where to start.
    pub start: Start,
    /// Namespace (None: all).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Send BOOKMARK events.
    pub bookmarks: bool,
    /// End the stream after this long.
    pub timeout: Option<Duration>,
    /// `sendInitialEvents=true`: ADDED for current objects, then a BOOKMARK marking the end.
    pub send_initial_events: bool,
    /// The version the client asked for.
    pub version: String,
    /// Plain objects, Tables or metadata only.
    pub output: Output,
    /// Open the stream but never send anything (fault injection).
    pub stall: bool,
}

type Chunk = Result<Bytes, std::io::Error>;

struct Watcher {
    state: Arc<State>,
    rt: Arc<ResourceType>,
    params: WatchParams,
    tx: mpsc::Sender<Chunk>,
}

enum Flow {
    Continue,
    Stop,
}

impl Watcher {
    fn selected(&self, object: &Value) -> bool {
        if let Some(ns) = &self.params.namespace
            && meta::namespace(object) != ns
        {
            return false;
        }
        self.params.labels.matches(object) && self.params.fields.matches(object)
    }

    fn encode_object(&self, object: &Value, cached: Option<Bytes>) -> Bytes {
        match self.params.output {
            Output::Plain => {
                let needs_conversion = self.rt.versions.len() > 1
                    && self.params.version != self.rt.preferred_version();
                match cached {
                    Some(bytes) if !needs_conversion => bytes,
                    _ => Bytes::from(
                        serde_json::to_vec(&convert(&self.rt, object, &self.params.version))
                            .unwrap_or_default(),
                    ),
                }
            }
            other => Bytes::from(
                serde_json::to_vec(&super::output::render_one(
                    &self.rt,
                    object,
                    &self.params.version,
                    other,
                ))
                .unwrap_or_default(),
            ),
        }
    }

    async fn send_line(&self, kind: &str, object: Bytes) -> Flow {
        let mut line = Vec::with_capacity(object.len() + 32);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(&object);
        line.extend_from_slice(b"}\n");
        match self.tx.send(Ok(Bytes::from(line))).await {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::Stop,
        }
    }

    async fn send_event(&self, event: &StoreEvent) -> Flow {
        if event.key.resource != self.rt.group_resource() {
            return Flow::Continue;
        }
        let new_match = self.selected(&event.object);
        match event.event_type {
            EventType::Added if new_match => {
                self.send_line(
                    "ADDED",
                    self.encode_object(&event.object, Some(event.object_json())),
                )
                .await
            }
            EventType::Deleted if new_match => {
                self.send_line(
                    "DELETED",
                    self.encode_object(&event.object, Some(event.object_json())),
                )
                .await
            }
            EventType::Modified => {
                let old_match = event.old.as_deref().is_some_and(|o| self.selected(o));
                match (old_match, new_match) {
                    (true, true) => {
                        self.send_line(
                            "MODIFIED",
                            self.encode_object(&event.object, Some(event.object_json())),
                        )
                        .await
                    }
                    (false, true) => {
                        self.send_line(
                            "ADDED",
                            self.encode_object(&event.object, Some(event.object_json())),
                        )
                        .await
                    }
                    (true, false) => {
                        // The object left the selection: DELETED with its last matching state
                        // at the event's resourceVersion, as the watch cache does.
                        let mut last = event.old.as_deref().cloned().unwrap_or(Value::Null);
                        meta::set_resource_version(&mut last, event.rv);
                        self.send_line("DELETED", self.encode_object(&last, None))
                            .await
                    }
                    (false, false) => Flow::Continue,
                }
            }
            _ => Flow::Continue,
        }
    }

    async fn send_bookmark(&self, rv: u64, initial_end: bool) -> Flow {
        let mut object = json!({
            "kind": self.rt.kind,
            "apiVersion": self.rt.api_version(&self.params.version),
            "metadata": {"resourceVersion": rv.to_string()}
        });
        if initial_end {
            object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        self.send_line("BOOKMARK", Bytes::from(object.to_string()))
            .await
    }

    async fn send_gone(&self, message: String) {
        let status = super::status::failure_status(&ApiError::gone(message));
        // The stream ends right after; a closed receiver changes nothing.
        let _ = self
            .send_line("ERROR", Bytes::from(status.to_string()))
            .await;
    }

    /// Carries out a command that ends the stream (a cut, an abort, an expiry); false for a
    /// stall. `seen_rv` is the last resourceVersion the stream is at, for an expiry's message.
    async fn ended_by(&self, command: &WatchControl, seen_rv: u64) -> bool {
        match command {
            WatchControl::Stall(_) => false,
            WatchControl::Cut => true,
            WatchControl::Abort => {
                let _ = self
                    .tx
                    .send(Err(std::io::Error::other("watch aborted")))
                    .await;
                true
            }
            WatchControl::Expire => {
                self.send_gone(format!(
                    "too old resource version: {seen_rv} ({})",
                    seen_rv + 1
                ))
                .await;
                true
            }
        }
    }

    async fn run(self) {
        let gr = self.rt.group_resource();
        let mut control = self.state.watch_control.subscribe();
        if self.params.stall {
            // Stalled by a fault rule: nothing is ever sent, but commands still end it.
            let timeout = sleep_opt(self.params.timeout);
            tokio::pin!(timeout);
            loop {
                tokio::select! {
                    _ = self.tx.closed() => return,
                    _ = &mut timeout => return,
                    command = control.recv() => {
                        let seen_rv = match self.params.start {
                            Start::After(rv) => rv,
                            Start::Now => self.state.store.current_rv(),
                        };
                        if let Ok(command) = command
                            && self.ended_by(&command, seen_rv).await
                        {
                            return;
                        }
                    }
                }
            }
        }
        let (mut rx, mut seen_rv) = match self.params.start {
            Start::Now => {
                let (items, rv, rx) = self
                    .state
                    .store
                    .list_and_subscribe(&gr, self.params.namespace.as_deref());
                for item in items {
                    if self.selected(&item)
                        && let Flow::Stop = self
                            .send_line("ADDED", self.encode_object(&item, None))
                            .await
                    {
                        return;
                    }
                }
                if self.params.send_initial_events
                    && self.params.bookmarks
                    && let Flow::Stop = self.send_bookmark(rv, true).await
                {
                    return;
                }
                (rx, rv)
            }
            Start::After(rv) => match self.state.store.subscribe_from(&gr, rv) {
                Ok((replay, rx)) => {
                    let mut last = rv;
                    for event in replay {
                        last = event.rv;
                        if let Flow::Stop = self.send_event(&event).await {
                            return;
                        }
                    }
                    (rx, last.max(rv))
                }
                Err(e) => {
                    self.send_gone(e.to_string()).await;
                    return;
                }
            },
        };
        let deadline = self.params.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut bookmark = tokio::time::interval(self.state.config.timings.bookmark_interval);
        bookmark.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        bookmark.tick().await;
        // While stalled nothing is sent (events queue up), but commands still arrive: a cut,
        // an abort or an expiry ends the stall with the stream, a new stall replaces it.
        let mut stalled_until: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = sleep_until_opt(stalled_until), if stalled_until.is_some() => {
                    stalled_until = None;
                }
                received = rx.recv(), if stalled_until.is_none() => match received {
                    Ok(event) => {
                        if event.rv <= seen_rv {
                            continue;
                        }
                        seen_rv = event.rv;
                        if let Flow::Stop = self.send_event(&event).await {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Catch up from the history; too far behind is a 410 like any stale watch.
                        match self.state.store.subscribe_from(&gr, seen_rv) {
                            Ok((replay, fresh)) => {
                                rx = fresh;
                                for event in replay {
                                    seen_rv = seen_rv.max(event.rv);
                                    if let Flow::Stop = self.send_event(&event).await {
                                        return;
                                    }
                                }
                            }
                            Err(e @ StoreError::TooOld { .. }) => {
                                self.send_gone(e.to_string()).await;
                                return;
                            }
                            Err(_) => return,
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = bookmark.tick(), if self.params.bookmarks && stalled_until.is_none() => {
                    if let Flow::Stop = self.send_bookmark(seen_rv, false).await {
                        return;
                    }
                }
                command = control.recv() => match command {
                    Ok(WatchControl::Stall(d)) => {
                        // A stall too long to count ends only with a command.
                        let now = tokio::time::Instant::now();
                        stalled_until = Some(now.checked_add(d).unwrap_or(now + Duration::from_secs(86_400 * 365)));
                    }
                    Ok(command) => {
                        if self.ended_by(&command, seen_rv).await {
                            return;
                        }
                    }
                    Err(_) => {}
                },
                _ = sleep_until_opt(deadline), if stalled_until.is_none() => return,
                _ = self.tx.closed() => return,
            }
        }
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Starts a watch and answers with its stream.
pub fn respond(state: Arc<State>, rt: Arc<ResourceType>, params: WatchParams) -> Response {
    let content_type = params.output.content_type();
    let (tx, rx) = mpsc::channel::<Chunk>(256);
    let watcher = Watcher {
        state,
        rt,
        params,
        tx,
    };
    tokio::spawn(watcher.run());
    let mut response = Response::new(Body::from_stream(ReceiverStream::new(rx)));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}
