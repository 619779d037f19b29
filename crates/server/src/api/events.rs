//! Status changes as Server-Sent Events, for one job or for every job matching a label
//! selector, so that callers need not poll. Both come from the namespace watches: a stream
//! costs no Kubernetes requests per job.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use kubeferry_core::{ExecutionId, JobKind};
use kubeferry_kube::{Error as KubeError, Executor, SelectorEvent};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::warn;

use super::answers::{MalformedId, NamespaceRefused, NoSuchJob, OtherCluster};
use super::input::{IdPath, QueryParams};
use super::jobs::resolve;
use super::model::{GoneEvent, JobInfo};
use crate::app::{App, stopped};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody};

fn event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().event(name))
}

fn error_event(error: KubeError) -> Event {
    let error = ApiError::from(error);
    let body = ErrorBody {
        code: error.code().to_string(),
        message: error.message().to_string(),
        field: None,
        line: None,
        column: None,
        problems: Vec::new(),
        request_id: crate::request_id::current(),
    };
    event("error", &body)
}

/// Aborts a task when the stream that owns it is dropped (the caller went away).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn sse(app: &App, events: impl Stream<Item = Event> + Send + 'static) -> Response {
    let stream = events
        .map(Ok::<_, Infallible>)
        .take_until(stopped(app.shutdown()))
        .boxed();
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(app.timeouts.keep_alive))
        .into_response()
}

/// Watch one job's status.
///
/// `event: status` with the job's info now and at each change, ending after the final state.
/// `event: gone` if the job disappears with its end unknown, `event: error` if it cannot be
/// followed any more; the stream ends after either.
#[utoipa::path(
    get,
    path = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/events",
    tag = "events",
    operation_id = "watchJob",
    params(IdPath),
    responses(
        (status = 200, description = "Server-Sent Events: `status` (a JobInfo), then the stream ends at the final state",
            body = JobInfo, content_type = "text/event-stream"),
        MalformedId,
        NamespaceRefused,
        NoSuchJob,
        OtherCluster,
    ),
    security(("bearer" = []))
)]
pub async fn job_events(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<IdPath>,
) -> ApiResult<Response> {
    let (id, executor) = resolve(&app, &principal, &path)?;
    // Errors about the job come before the stream starts, as error responses.
    executor.status(&id).await?;
    let executor = executor.clone();
    let (sender, receiver) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let result = executor
            .wait(&id, None, |info| {
                let _ = sender.send(event("status", &JobInfo::new(&id, info.clone())));
            })
            .await;
        match result {
            Ok(_) => {}
            Err(KubeError::NoSuchJob { id: gone, hint }) => {
                let _ = sender.send(event(
                    "gone",
                    &GoneEvent {
                        id: gone.to_string(),
                        message: format!("no such job{hint}"),
                    },
                ));
            }
            Err(error) => {
                let _ = sender.send(error_event(error));
            }
        }
    });
    let events = futures::stream::unfold(
        (receiver, AbortOnDrop(task)),
        |(mut receiver, task)| async move { receiver.recv().await.map(|e| (e, (receiver, task))) },
    );
    Ok(sse(&app, events))
}

/// Which namespace's initial list is complete (`event: listed`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ListedEvent {
    /// The cluster.
    pub cluster: String,
    /// The namespace.
    pub namespace: String,
}

/// Watch every job matching a selector.
///
/// `event: status` with a job's info for every matching job at first, then at each change of
/// any matching job (new ones included); `event: listed` once a namespace's matching jobs have
/// all been sent; `event: gone` for a job that disappears with its end unknown. Runs until the
/// caller disconnects.
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "events",
    operation_id = "watchJobs",
    params(
        ("namespace" = Option<String>, Query, description = "Only this namespace (default: every namespace the caller may use)"),
        ("cluster" = Option<String>, Query, description = "Only this cluster (default: all)"),
        ("selector" = Option<String>, Query, description = "A Kubernetes label selector (default: every managed job)"),
    ),
    responses(
        (status = 200, description = "Server-Sent Events: `status` (a JobInfo), `listed`, `gone`",
            body = JobInfo, content_type = "text/event-stream"),
        (status = 400, description = "A wrong parameter (e.g. a malformed selector)", body = ErrorBody),
        NamespaceRefused,
    ),
    security(("bearer" = []))
)]
pub async fn events(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let mut q = QueryParams::parse(query.as_deref());
    let namespace = q.string("namespace")?;
    let cluster = q.string("cluster")?;
    let selector = q.string("selector")?.unwrap_or_default();
    q.finish(&["namespace", "cluster", "selector"])?;
    let namespaces = app.namespaces_for(&principal, namespace.as_deref(), "namespace")?;
    let clusters = app.clusters_for(cluster.as_deref(), "cluster")?;
    // A selector is checked by the API server before the stream starts: a watch with a
    // malformed selector would only retry. No selector needs no check (and no list of every job).
    if !selector.is_empty()
        && let (Some(cluster), Some(namespace)) = (clusters.first(), namespaces.first())
    {
        cluster
            .executor
            .list(namespace, Some(&selector))
            .await
            .map_err(|error| match error {
                KubeError::Api {
                    code: 400, message, ..
                } => ApiError::bad_parameter("selector", message),
                other => other.into(),
            })?;
    }
    let (sender, receiver) = mpsc::channel(1024);
    let mut tasks = JoinSet::new();
    for cluster in &clusters {
        for namespace in &namespaces {
            tasks.spawn(follow_namespace(
                cluster.executor.clone(),
                cluster.name.clone(),
                namespace.clone(),
                selector.clone(),
                sender.clone(),
                app.timeouts.recheck,
                app.timeouts.sync,
            ));
        }
    }
    drop(sender);
    let events = futures::stream::unfold((receiver, tasks), |(mut receiver, tasks)| async move {
        receiver.recv().await.map(|e| (e, (receiver, tasks)))
    });
    Ok(sse(&app, events))
}

/// Sends the status changes of one namespace's matching jobs (container and Spark) until the
/// receiver goes away.
async fn follow_namespace(
    executor: Executor,
    cluster: String,
    namespace: String,
    selector: String,
    sender: mpsc::Sender<Event>,
    recheck: Duration,
    leave_grace: Duration,
) {
    let subscription = executor.subscribe(&namespace).await;
    for (kind, error) in subscription.refused {
        warn!(message = "cannot follow a kind's jobs of a namespace for an event stream", namespace = %namespace, kind = %kind, %error);
    }
    let mut changes = notifications(subscription.changes);
    let mut matching = Box::pin(executor.matching(&namespace, &selector));
    let mut follower = Follower {
        executor: &executor,
        cluster: &cluster,
        namespace: &namespace,
        members: HashMap::new(),
        leaving: HashMap::new(),
        leave_grace,
        last: HashMap::new(),
        sender: &sender,
    };
    let mut tick = tokio::time::interval(recheck);
    loop {
        let jobs: Vec<(JobKind, String)> = tokio::select! {
            selected = matching.next() => match selected {
                Some(SelectorEvent::Matches { kind, name, job_id }) => {
                    let job = (kind, name);
                    follower.leaving.remove(&job);
                    follower.members.insert(job.clone(), job_id);
                    vec![job]
                }
                Some(SelectorEvent::Left(kind, name)) => {
                    // Followed until its end is known: the namespace watch may not have seen
                    // the deletion yet (a cancelled job reads CANCELLED from its tombstone
                    // once it has).
                    let job = (kind, name);
                    let until = tokio::time::Instant::now() + follower.leave_grace;
                    follower.leaving.entry(job.clone()).or_insert(until);
                    vec![job]
                }
                Some(SelectorEvent::Listed) => {
                    let listed = ListedEvent { cluster: cluster.clone(), namespace: namespace.clone() };
                    if sender.send(event("listed", &listed)).await.is_err() {
                        return;
                    }
                    continue;
                }
                None => return,
            },
            Some((kind, changed)) = changes.next() => follower.changed(kind, changed),
            _ = tick.tick() => follower.unfinished(),
        };
        for job in jobs {
            if !follower.report(&job).await {
                return;
            }
        }
    }
}

/// The change notifications of several watches as one stream, each with the kind of job it
/// names; a closed channel drops out.
fn notifications(
    receivers: Vec<(JobKind, broadcast::Receiver<String>)>,
) -> impl Stream<Item = (JobKind, Result<String, RecvError>)> + Unpin {
    futures::stream::select_all(receivers.into_iter().map(|(kind, receiver)| {
        futures::stream::unfold(receiver, move |mut receiver| async move {
            match receiver.recv().await {
                Err(RecvError::Closed) => None,
                other => Some(((kind, other), receiver)),
            }
        })
        .boxed()
    }))
}

/// A job of a namespace: its kind and object name.
type Member = (JobKind, String);

struct Follower<'a> {
    executor: &'a Executor,
    cluster: &'a str,
    namespace: &'a str,
    /// The jobs matching the selector, with the caller's job id each object carries.
    members: HashMap<Member, Option<String>>,
    /// Jobs that left the selection (deleted or relabelled), each followed until its end is
    /// known, for at most `leave_grace`.
    leaving: HashMap<Member, tokio::time::Instant>,
    /// How long a job that left the selection is followed for its end.
    leave_grace: Duration,
    /// What was last sent for each.
    last: HashMap<Member, JobInfo>,
    sender: &'a mpsc::Sender<Event>,
}

impl Follower<'_> {
    /// The matching jobs a change notification (from a watch of `kind`) concerns.
    fn changed(&self, kind: JobKind, changed: Result<String, RecvError>) -> Vec<Member> {
        match changed {
            Ok(name) => {
                let job = (kind, name);
                if self.members.contains_key(&job) {
                    vec![job]
                } else {
                    Vec::new()
                }
            }
            // Notifications were lost: look at every job.
            Err(RecvError::Lagged(_)) => self.members.keys().cloned().collect(),
            Err(RecvError::Closed) => Vec::new(),
        }
    }

    /// The matching jobs not known to have ended (time-based rules may move them).
    fn unfinished(&self) -> Vec<Member> {
        self.members
            .keys()
            .filter(|job| {
                self.last
                    .get(*job)
                    .is_none_or(|info| !info.state.is_terminal())
            })
            .cloned()
            .collect()
    }

    /// Sends the job's status if it changed; false when the receiver is gone. A job that left
    /// the selection is forgotten once its end is known or its time is up (then nothing is
    /// sent).
    async fn report(&mut self, job: &Member) -> bool {
        let expired = self
            .leaving
            .get(job)
            .is_some_and(|until| tokio::time::Instant::now() >= *until);
        if expired {
            self.forget(job);
            return true;
        }
        let (kind, name) = job;
        let id = ExecutionId::new(self.cluster, *kind, self.namespace, name);
        let status = self.executor.status(&id).await;
        let ended = match &status {
            Ok(info) => info.is_terminal(),
            Err(error) => matches!(error, KubeError::NoSuchJob { .. }),
        };
        let sent = self.send(job, &id, status).await;
        if ended && self.leaving.contains_key(job) {
            self.forget(job);
        }
        sent
    }

    /// Stops following a job that left the selection.
    fn forget(&mut self, job: &Member) {
        self.leaving.remove(job);
        self.members.remove(job);
        self.last.remove(job);
    }

    /// Sends what `status` says of a job, unless it was sent already.
    async fn send(
        &mut self,
        job: &Member,
        id: &ExecutionId,
        status: Result<kubeferry_core::ExecutionInfo, KubeError>,
    ) -> bool {
        let event = match status {
            Ok(info) => {
                let info =
                    JobInfo::new(id, info).with_job_id(self.members.get(job).cloned().flatten());
                if self.last.get(job) == Some(&info) {
                    return true;
                }
                self.last.insert(job.clone(), info.clone());
                event("status", &info)
            }
            Err(KubeError::NoSuchJob { hint, .. }) => {
                if self.last.remove(job).is_none() {
                    return true;
                }
                event(
                    "gone",
                    &GoneEvent {
                        id: id.to_string(),
                        message: format!("no such job{hint}"),
                    },
                )
            }
            Err(error) => {
                warn!(message = "cannot read a job's status for an event stream", id = %id, %error);
                return true;
            }
        };
        self.sender.send(event).await.is_ok()
    }
}
