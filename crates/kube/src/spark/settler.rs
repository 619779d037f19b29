//! The one writer of a namespace's Spark jobs: it carries out the actions the mapping asks for
//! (record and delete an application the operator never took up, delete a driver that outlived
//! its application) on watch events and at the no-status deadline, whether or not anyone asks.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kubeferry_core::{ExecutionId, ExecutionInfo};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::tracker::SparkNamespaceWatch;
use super::{Acting, Found, SparkJobs};
use crate::error::Result;
use crate::kind::{Kind, Watches};
use crate::settling::{Change, JobStates, Timers, merged, retry_delay};

/// A status query that found an action due: the settler carries it out on the query's
/// observation and answers with what the query is to report.
pub(super) struct Request {
    pub(super) id: ExecutionId,
    pub(super) found: Found,
    pub(super) done: oneshot::Sender<Result<ExecutionInfo>>,
}

/// Starts the settler of `namespace`; it ends once the backend or the namespace's watches are
/// dropped.
pub(super) fn start(
    jobs: Weak<SparkJobs>,
    namespace: &str,
    watch: Weak<SparkNamespaceWatch>,
    states: Arc<JobStates>,
) -> mpsc::UnboundedSender<Request> {
    let (requests, received) = mpsc::unbounded_channel();
    tokio::spawn(run(jobs, namespace.to_string(), watch, received, states));
    requests
}

async fn run(
    jobs: Weak<SparkJobs>,
    namespace: String,
    watch: Weak<SparkNamespaceWatch>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    states: Arc<JobStates>,
) {
    let timers = Timers::default();
    // The operators whose applications are watched can grow (a job of an operator discovered
    // later): the notifications are merged again when they do.
    let mut subscribed: Option<usize> = None;
    let mut changes: BoxStream<'static, Change> = futures::stream::pending().boxed();
    // Another operator's applications being watched wakes the loop, which subscribes to them.
    let mut operators = match watch.upgrade() {
        Some(watch) => watch.operators_changed(),
        None => return,
    };
    loop {
        let mut due: BTreeSet<String> = BTreeSet::new();
        {
            let Some(watch) = watch.upgrade() else { return };
            let operators = watch.watched().len();
            if subscribed != Some(operators) {
                subscribed = Some(operators);
                // The driver pods' notifications and each operator's applications'.
                changes = merged(watch.subscribe());
                // What changed before the new subscription is looked at once.
                due.extend(all_apps(&watch));
            }
        }
        if due.is_empty() {
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    let Some(jobs) = jobs.upgrade() else { return };
                    let answer = jobs
                        .evaluate(&request.id, request.found, Acting::Carry)
                        .await
                        .map(|evaluated| {
                            arm(&timers, &request.id.name, &evaluated);
                            let present = watch
                                .upgrade()
                                .is_some_and(|watch| watch.holds(&request.id.name));
                            states.set(
                                &request.id.name,
                                present.then_some(evaluated.info.state),
                            );
                            evaluated.info
                        });
                    let _ = request.done.send(answer);
                    continue;
                }
                change = changes.next() => match change {
                    // Every watch is gone.
                    None => return,
                    Some(Ok(app)) => {
                        due.insert(app);
                    }
                    Some(Err(_)) => {
                        let Some(watch) = watch.upgrade() else { return };
                        due.extend(everything(&watch, &states));
                    }
                },
                () = timers.next() => due.extend(timers.take_due()),
                changed = operators.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
        // A burst of events is settled once per application.
        while let Some(Some(change)) = changes.next().now_or_never() {
            match change {
                Ok(app) => {
                    due.insert(app);
                }
                Err(_) => {
                    let Some(watch) = watch.upgrade() else { return };
                    due.extend(everything(&watch, &states));
                }
            }
        }
        for app in due {
            let (Some(jobs), Some(held)) = (jobs.upgrade(), watch.upgrade()) else {
                return;
            };
            let id = jobs.id(&namespace, &app);
            let Some(found) = jobs.cached(&held, &id).await else {
                states.set(&app, None);
                continue;
            };
            drop(held);
            match jobs.evaluate(&id, found, Acting::Carry).await {
                Ok(evaluated) => {
                    arm(&timers, &app, &evaluated);
                    // Counted while its application is there (a deleted one's outcome stands,
                    // but it is no longer a job the cluster holds).
                    let present = watch.upgrade().is_some_and(|watch| watch.holds(&app));
                    states.set(&app, present.then_some(evaluated.info.state));
                }
                // Gone: its deletion is on its way on the watch, and nothing is left to do.
                Err(error) if error.is_no_such_job() => states.set(&app, None),
                Err(error) => {
                    debug!(message = "could not settle a job; will retry", id = %id, %error);
                    timers.arm_after(retry_delay(&error, jobs.settings.recheck_interval), &app);
                }
            }
        }
    }
}

/// Arms the application's timer for when its answer next changes by time alone.
fn arm(timers: &Timers, app: &str, evaluated: &super::Evaluated) {
    if let Some(at) = evaluated.recheck_at {
        timers.arm(at, app);
    }
}

/// Every application the namespace's watches hold.
fn all_apps(watch: &SparkNamespaceWatch) -> Vec<String> {
    watch
        .watched()
        .iter()
        .flat_map(|(_, apps)| apps.all().into_iter().map(|entry| entry.name))
        .collect()
}

/// Every application the watches hold, after notifications were missed; the counts forget the
/// applications whose removal was among them.
fn everything(watch: &SparkNamespaceWatch, states: &JobStates) -> Vec<String> {
    let present = all_apps(watch);
    states.retain(|app| present.iter().any(|name| name == app));
    present
}
