//! The one writer of a namespace's JobSets: it carries out what the mapping asks for (record
//! the outcome of a set whose pod can never start, then delete the set) and keeps each ended
//! set's outcome record, on watch events and at the deadlines the mapping names, whether or
//! not anyone asks.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use futures::{FutureExt, StreamExt};
use kubeferry_core::{ExecutionId, ExecutionInfo};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::tracker::JobSetNamespaceWatch;
use super::{Acting, Evaluated, Found, JobSets};
use crate::error::Result;
use crate::kind::{Kind, Watches};
use crate::settling::{JobStates, Timers, merged, retry_delay};

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
    jobs: Weak<JobSets>,
    namespace: &str,
    watch: Weak<JobSetNamespaceWatch>,
    states: Arc<JobStates>,
) -> mpsc::UnboundedSender<Request> {
    let (requests, received) = mpsc::unbounded_channel();
    tokio::spawn(run(jobs, namespace.to_string(), watch, received, states));
    requests
}

async fn run(
    jobs: Weak<JobSets>,
    namespace: String,
    watch: Weak<JobSetNamespaceWatch>,
    mut requests: mpsc::UnboundedReceiver<Request>,
    states: Arc<JobStates>,
) {
    let mut timers = Timers::default();
    let mut changes = match watch.upgrade() {
        Some(watch) => merged(watch.subscribe()),
        None => return,
    };
    // What the watches held before the subscription is looked at once.
    let mut due: BTreeSet<String> = match watch.upgrade() {
        Some(watch) => all_jobsets(&watch).into_iter().collect(),
        None => return,
    };
    loop {
        if due.is_empty() {
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    let Some(jobs) = jobs.upgrade() else { return };
                    let answer = jobs
                        .evaluate(&request.id, request.found, Acting::Carry)
                        .await
                        .map(|evaluated| {
                            arm(&mut timers, &request.id.name, &evaluated);
                            let present = watch
                                .upgrade()
                                .is_some_and(|watch| watch.holds(&request.id.name));
                            states.set(&request.id.name, present.then_some(evaluated.info.state));
                            evaluated.info
                        });
                    let _ = request.done.send(answer);
                    continue;
                }
                change = changes.next() => match change {
                    None => return,
                    Some(Ok(jobset)) => {
                        due.insert(jobset);
                    }
                    Some(Err(_)) => {
                        let Some(watch) = watch.upgrade() else { return };
                        due.extend(everything(&watch, &states));
                    }
                },
                () = timers.next() => due.extend(timers.take_due()),
            }
        }
        // A burst of events is settled once per JobSet.
        while let Some(Some(change)) = changes.next().now_or_never() {
            match change {
                Ok(jobset) => {
                    due.insert(jobset);
                }
                Err(_) => {
                    let Some(watch) = watch.upgrade() else { return };
                    due.extend(everything(&watch, &states));
                }
            }
        }
        for name in std::mem::take(&mut due) {
            let (Some(jobs), Some(held)) = (jobs.upgrade(), watch.upgrade()) else {
                return;
            };
            let id = jobs.id(&namespace, &name);
            let Some(found) = jobs.cached(&held, &id) else {
                states.set(&name, None);
                continue;
            };
            drop(held);
            match jobs.evaluate(&id, found, Acting::Carry).await {
                Ok(evaluated) => {
                    arm(&mut timers, &name, &evaluated);
                    let present = watch.upgrade().is_some_and(|watch| watch.holds(&name));
                    states.set(&name, present.then_some(evaluated.info.state));
                }
                Err(error) if error.is_no_such_job() => states.set(&name, None),
                Err(error) => {
                    debug!(message = "could not settle a job; will retry", id = %id, %error);
                    timers.arm_after(retry_delay(&error, jobs.settings.recheck_interval), &name);
                }
            }
        }
    }
}

/// Arms the JobSet's timer for when its answer next changes by time alone.
fn arm(timers: &mut Timers, name: &str, evaluated: &Evaluated) {
    if let Some(at) = evaluated.recheck_at {
        timers.arm(at, name);
    }
}

/// Every JobSet the namespace's watch holds.
fn all_jobsets(watch: &JobSetNamespaceWatch) -> Vec<String> {
    watch
        .jobsets
        .all()
        .into_iter()
        .map(|entry| entry.name)
        .collect()
}

/// Every JobSet the watch holds, after notifications were missed; the counts forget the
/// JobSets whose removal was among them.
fn everything(watch: &JobSetNamespaceWatch, states: &JobStates) -> Vec<String> {
    let present = all_jobsets(watch);
    states.retain(|name| present.iter().any(|n| n == name));
    present
}
