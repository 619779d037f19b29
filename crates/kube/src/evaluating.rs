//! The settler of the kinds whose status query evaluates an observation and hands what it asks
//! for to the namespace's settler (SparkApplications, JobSets), written once over [`Evaluates`].

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use kubeferry_core::{ExecutionId, ExecutionInfo};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::kind::{Kind, Watches};
use crate::settling::{Change, JobStates, Timers, merged, retry_delay};
use crate::tracker::lock;

/// Whether a mapping's actions are carried out now (the settler does) or handed to the
/// namespace's settler (a status query, a wait or a list does: they write nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acting {
    Carry,
    Delegate,
}

/// A job's status, and when time alone next changes it.
pub(crate) struct Evaluated {
    pub(crate) info: ExecutionInfo,
    pub(crate) recheck_at: Option<Timestamp>,
}

/// What a kind's settler needs of its kind: the job's observation from the cache, and an
/// evaluation of it that carries out what it asks for.
pub(crate) trait Evaluates: Kind<Watches: EvaluatedWatch, Found: 'static> {
    /// What the namespace's watches know of the job, if they saw it.
    fn observed(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
    ) -> impl Future<Output = Option<Self::Found>> + Send;

    /// Maps the job as observed and carries out what the mapping asks for: its answer, and
    /// when time alone next changes it.
    fn carry_out(
        &self,
        id: &ExecutionId,
        found: Self::Found,
    ) -> impl Future<Output = Result<(ExecutionInfo, Option<Timestamp>)>> + Send;

    /// How soon a job whose settling failed is looked at again.
    fn retry_interval(&self) -> Duration;
}

/// What such a settler needs of a namespace's watches.
pub(crate) trait EvaluatedWatch: Watches {
    /// Whether the watches hold the job's object (its outcome is counted while they do).
    fn holds(&self, name: &str) -> bool;

    /// Every job whose object the watches hold.
    fn names(&self) -> Vec<String>;

    /// How many watches notify of changes now, when that can grow (a Spark operator
    /// discovered later): the settler subscribes again when it does.
    fn watched(&self) -> Option<tokio::sync::watch::Receiver<usize>>;
}

/// A status query that found an action due: the settler carries it out on the query's
/// observation and answers with what the query is to report.
struct Request<F> {
    id: ExecutionId,
    found: F,
    done: oneshot::Sender<Result<ExecutionInfo>>,
}

/// A watched namespace's settler, and its jobs by state.
struct NamespaceSettler<F> {
    requests: mpsc::UnboundedSender<Request<F>>,
    states: Arc<JobStates>,
}

/// The settlers of a kind's watched namespaces, one each, started on first use.
pub(crate) struct Settlers<K: Evaluates> {
    by_namespace: Mutex<HashMap<String, NamespaceSettler<K::Found>>>,
}

impl<K: Evaluates> Default for Settlers<K> {
    fn default() -> Self {
        Self {
            by_namespace: Mutex::default(),
        }
    }
}

impl<K: Evaluates> Settlers<K> {
    /// Starts the settler of `namespace` over `watch`, if it is not running.
    pub(crate) fn start(&self, kind: &Weak<K>, namespace: &str, watch: &Arc<K::Watches>) {
        self.requests(kind, namespace, watch);
    }

    fn requests(
        &self,
        kind: &Weak<K>,
        namespace: &str,
        watch: &Arc<K::Watches>,
    ) -> mpsc::UnboundedSender<Request<K::Found>> {
        lock(&self.by_namespace)
            .entry(namespace.to_string())
            .or_insert_with(|| {
                let states = Arc::new(JobStates::default());
                let (requests, received) = mpsc::unbounded_channel();
                tokio::spawn(run(
                    kind.clone(),
                    namespace.to_string(),
                    Arc::downgrade(watch),
                    received,
                    states.clone(),
                ));
                NamespaceSettler { requests, states }
            })
            .requests
            .clone()
    }

    /// Hands a job whose mapping asks for an action (or whose outcome is still to be
    /// recorded) to its namespace's settler, and answers what the settler decided.
    pub(crate) async fn settle_now(
        &self,
        kind: &Weak<K>,
        watch: &Arc<K::Watches>,
        id: &ExecutionId,
        found: K::Found,
    ) -> Result<ExecutionInfo> {
        let (done, answer) = oneshot::channel();
        let request = Request {
            id: id.clone(),
            found,
            done,
        };
        if let Err(returned) = self.requests(kind, &id.namespace, watch).send(request) {
            // The settler runs as long as the namespace's watches; one that stopped is started
            // again rather than leaving the job undecided.
            warn!(message = "the namespace's settler had stopped; starting it again", id = %id);
            lock(&self.by_namespace).remove(&id.namespace);
            let _ = self.requests(kind, &id.namespace, watch).send(returned.0);
        }
        answer.await.map_err(|_| Error::Contended {
            operation: format!("status {id}"),
            message: "the namespace's settler stopped while deciding the job; ask again".into(),
        })?
    }

    /// How many jobs are in each state, by namespace, as the settlers last mapped them.
    pub(crate) fn jobs_by_state(&self) -> Vec<(String, kubeferry_core::JobState, usize)> {
        lock(&self.by_namespace)
            .iter()
            .flat_map(|(namespace, settler)| {
                settler
                    .states
                    .counts()
                    .into_iter()
                    .map(|(state, count)| (namespace.clone(), state, count))
            })
            .collect()
    }
}

/// The settler of one namespace: on watch events, at the mappings' deadlines and on status
/// queries' requests, until the kind or the namespace's watches are dropped.
async fn run<K: Evaluates>(
    kind: Weak<K>,
    namespace: String,
    watch: Weak<K::Watches>,
    mut requests: mpsc::UnboundedReceiver<Request<K::Found>>,
    states: Arc<JobStates>,
) {
    let timers = Timers::default();
    // What is watched can grow: the notifications are merged again when it does.
    let mut subscribed: Option<usize> = None;
    let mut changes: BoxStream<'static, Change> = futures::stream::pending().boxed();
    let mut watched = match watch.upgrade() {
        Some(watch) => watch.watched(),
        None => return,
    };
    loop {
        let mut due: BTreeSet<String> = BTreeSet::new();
        {
            let Some(watch) = watch.upgrade() else { return };
            let now_watched = watched.as_ref().map_or(0, |w| *w.borrow());
            if subscribed != Some(now_watched) {
                subscribed = Some(now_watched);
                changes = merged(watch.subscribe());
                // What changed before the new subscription is looked at once.
                due.extend(watch.names());
            }
        }
        if due.is_empty() {
            let grown = async {
                match watched.as_mut() {
                    Some(watched) => watched.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    let Some(kind) = kind.upgrade() else { return };
                    let answer = kind
                        .carry_out(&request.id, request.found)
                        .await
                        .map(|(info, recheck_at)| {
                            if let Some(at) = recheck_at {
                                timers.arm(at, &request.id.name);
                            }
                            count(&states, &watch, &request.id.name, &info);
                            info
                        });
                    let _ = request.done.send(answer);
                    continue;
                }
                change = changes.next() => match change {
                    // Every watch is gone.
                    None => return,
                    Some(Ok(name)) => {
                        due.insert(name);
                    }
                    Some(Err(_)) => {
                        let Some(watch) = watch.upgrade() else { return };
                        due.extend(everything(&*watch, &states));
                    }
                },
                () = timers.next() => due.extend(timers.take_due()),
                still = grown => {
                    if !still {
                        return;
                    }
                }
            }
        }
        // A burst of events is settled once per job.
        while let Some(Some(change)) = changes.next().now_or_never() {
            match change {
                Ok(name) => {
                    due.insert(name);
                }
                Err(_) => {
                    let Some(watch) = watch.upgrade() else { return };
                    due.extend(everything(&*watch, &states));
                }
            }
        }
        for name in due {
            let (Some(kind), Some(held)) = (kind.upgrade(), watch.upgrade()) else {
                return;
            };
            let id = kind.id(&namespace, &name);
            let Some(found) = kind.observed(&held, &id).await else {
                states.set(&name, None);
                continue;
            };
            drop(held);
            match kind.carry_out(&id, found).await {
                Ok((info, recheck_at)) => {
                    if let Some(at) = recheck_at {
                        timers.arm(at, &name);
                    }
                    count(&states, &watch, &name, &info);
                }
                // Gone: its deletion is on its way on the watch, and nothing is left to do.
                Err(error) if error.is_no_such_job() => states.set(&name, None),
                Err(error) => {
                    debug!(message = "could not settle a job; will retry", id = %id, %error);
                    timers.arm_after(retry_delay(&error, kind.retry_interval()), &name);
                }
            }
        }
    }
}

/// Counts the job in its state while its object is there (a deleted one's outcome stands, but
/// it is no longer a job the cluster holds).
fn count<W: EvaluatedWatch>(states: &JobStates, watch: &Weak<W>, name: &str, info: &ExecutionInfo) {
    let present = watch.upgrade().is_some_and(|watch| watch.holds(name));
    states.set(name, present.then_some(info.state));
}

/// Every job the watches hold, after notifications were missed; the counts forget the jobs
/// whose removal was among them.
fn everything<W: EvaluatedWatch + ?Sized>(watch: &W, states: &JobStates) -> Vec<String> {
    let present = watch.names();
    states.retain(|name| present.iter().any(|n| n == name));
    present
}
