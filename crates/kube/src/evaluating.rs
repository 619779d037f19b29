//! The one status path and settler of every kind, written once over [`Evaluates`]: the status
//! query, the lookup on a cache miss, the evaluation loop, the actions an outcome kubeferry
//! decided asks for (by default its record on the object, then the object deleted), the
//! outcome record, and the settler of each namespace. A kind brings its views, what its
//! mapping reads besides its object, its mapping and its actions.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeferry_core::marks::OUTCOME_ANNOTATION;
use kubeferry_core::observation::{ManagedMeta, Mapped, RecordOutcomeAndDelete};
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::timeline::{Attempt, telling_attempt};

use crate::pod_logs::{LogTarget, kept_tail};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::kind::{Answers, Kind, KindBase, Seen, Watches};
use crate::objects::{Current, Deletion, Objects};
use crate::records::Reading;
use crate::records::Records;
use crate::settling::{
    Change, JobStates, Releases, SETTLED_AT_ONCE, Timers, after, cancel_finish_due, finish_cancel,
    merged, release_held, retry_at, retry_delay, while_deciding,
};
use crate::tracker::{Recent, Watching, lock};

/// An action a mapping asks for, with the outcome it reports once carried out.
pub(crate) trait Outcome: Send + Sync {
    /// The outcome to report once the action is done.
    fn outcome(&self) -> &ExecutionInfo;

    /// Whether the action, done, deleted the job's object (most kinds' actions do).
    fn deletes_object(&self) -> bool {
        true
    }
}

impl Outcome for RecordOutcomeAndDelete {
    fn outcome(&self) -> &ExecutionInfo {
        &self.outcome
    }
}

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

/// What is known of a job: its object as observed (`V`, the kind's view), and what else its
/// mapping reads (`P`: a JobSet's Jobs and pods, an application's driver pods).
pub(crate) struct Found<V, P> {
    pub(crate) observed: Seen<V>,
    pub(crate) parts: P,
    /// Whether the parts were listed from the API server just now (not from a cache).
    pub(crate) listed: bool,
}

/// What carrying out an action came to.
pub(crate) enum Acted<V> {
    /// Done: the action's outcome may be reported.
    Done,
    /// Done, and the object stays, as this copy: the one the action wrote (its outcome, which
    /// it carries, is the one reported; its release tests what this copy shows).
    Written(Box<V>),
    /// The object changed or went: map this instead.
    Remap(Box<Seen<V>>),
    /// It failed; the job is not decided yet.
    Failed(Error),
}

/// What every kind keeps besides its settings: its base (the cluster, its watched namespaces
/// and their last answers, the outcome records), its settlers, and what it saw.
pub(crate) struct Common<K: Evaluates> {
    /// The cluster, each watched namespace's watches and last answers, and the outcome records.
    pub(crate) base: KindBase<K::Watches>,
    /// The kind, for the settlers it starts.
    me: Weak<K>,
    /// Each watched namespace's settler, the one writer of its jobs.
    settlers: Settlers<K>,
    /// The warnings logged, each once.
    warned: Recent,
    /// Copies of objects (namespace, name and resourceVersion) an action found gone.
    found_gone: Recent,
    /// The objects a settler let go of lately, or holds a while first (`settling::release_held`).
    releases: Releases,
    /// How its waits are paced.
    pace: Pace,
}

/// How a kind's waits are paced, as its settings say.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// How long a status query waits for a namespace's first list.
    sync_timeout: Duration,
    /// How often a waiter looks again when nothing changes, and a failed action is retried.
    recheck_interval: Duration,
    /// How long the server's "no such object" stands while the watch is current.
    absent_ttl: Duration,
}

impl From<&Watching> for Pace {
    fn from(watching: &Watching) -> Pace {
        Pace {
            sync_timeout: watching.sync_timeout,
            recheck_interval: watching.recheck_interval,
            absent_ttl: watching.reflector.absent_ttl,
        }
    }
}

/// What every kind of one cluster is built over: the cluster, and the outcome records.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) cluster: Cluster,
    pub(crate) records: Arc<Records>,
}

impl<K: Evaluates> Common<K> {
    /// A kind over `shared`, paced by `pace`: `build` makes it of what it keeps in common with
    /// every kind.
    pub(crate) fn build(shared: &Shared, pace: Pace, build: impl FnOnce(Self) -> K) -> Arc<K> {
        Arc::new_cyclic(|me| {
            build(Self {
                base: KindBase::new(shared.cluster.clone(), shared.records.clone()),
                me: me.clone(),
                settlers: Settlers::default(),
                warned: Recent::new(10_000),
                found_gone: Recent::new(10_000),
                releases: Releases::new(),
                pace,
            })
        })
    }

    /// Starts the settler of `namespace` over `watch`, if it is not running.
    pub(crate) fn start(&self, namespace: &str, watch: &Arc<K::Watches>) {
        self.settlers.start(&self.me, namespace, watch);
    }

    /// The watches of `namespace`, and its settler, each started if it is not yet (the watches
    /// by `start`).
    pub(crate) fn watches(
        &self,
        namespace: &str,
        start: impl FnOnce() -> Arc<K::Watches>,
    ) -> Arc<K::Watches> {
        let watch = self.base.watches(namespace, start);
        self.start(namespace, &watch);
        watch
    }

    /// How many jobs are in each state, by namespace, as the settlers last mapped them.
    pub(crate) fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        self.settlers.jobs_by_state()
    }

    /// Logs `what` about the job once.
    pub(crate) fn warn_once(&self, id: &ExecutionId, what: &str, detail: &str) {
        if self.warned.insert(format!("{id} {what} {detail}")) {
            warn!(message = what, id = %id, detail);
        }
    }
}

/// One copy of an object: its namespace, name and resourceVersion.
fn copy_key(meta: &ManagedMeta) -> String {
    format!(
        "{}/{}@{}",
        meta.namespace,
        meta.name,
        meta.resource_version.as_deref().unwrap_or("")
    )
}

/// Every evaluating kind answers alike: from its evaluation, its settlers' counts and its
/// settings.
impl<K: Evaluates> Answers for K {
    fn recheck_interval(&self) -> Duration {
        self.common().pace.recheck_interval
    }

    /// From the watch cache (one GET on a miss); writes nothing.
    async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        let watch = self.watch(&id.namespace).await?;
        let synced = watch.wait_synced(self.common().pace.sync_timeout).await;
        if let Some(answer) = self.final_answer(id, false).await {
            return Ok(answer);
        }
        let Some(found) = self.observe(&watch, id, synced).await? else {
            return match self.recorded_gone(id).await {
                Some(recorded) => Ok(recorded),
                None => Err(self.no_such_job(id, &watch)),
            };
        };
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
    }

    async fn status_of(&self, id: &ExecutionId, found: K::Found) -> Result<ExecutionInfo> {
        // The record judged by the copy the list found, newer than a watch's, if there is one.
        let meta = found.observed.present_meta().cloned();
        if let Some(answer) = self.final_answer_seeing(id, true, meta).await {
            return Ok(answer);
        }
        Ok(self.evaluate(id, found, Acting::Delegate).await?.info)
    }

    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)> {
        self.common().jobs_by_state()
    }
}

/// A kind whose status query evaluates an observation: what it brings, and everything written
/// once over it.
pub(crate) trait Evaluates:
    Sized + Kind<Found = Found<<Self as Evaluates>::View, <Self as Evaluates>::Parts>>
{
    /// The lean view of the kind's object.
    type View: Deref<Target = ManagedMeta> + Clone + Send + Sync + 'static;
    /// What the mapping reads besides the object.
    type Parts: Send + 'static;
    /// What the mapping asks to be done before an outcome stands.
    type Action: Outcome;

    /// What it keeps in common with every kind.
    fn common(&self) -> &Common<Self>;

    /// What the namespace's watches know of the job, if they saw it.
    fn observed(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
    ) -> impl Future<Output = Option<Self::Found>> + Send;

    /// What a status query needs besides what the watches know: the parts listed when their
    /// watches are not current. Nothing by default.
    fn complete(
        &self,
        _watch: &Self::Watches,
        _id: &ExecutionId,
        found: Self::Found,
    ) -> impl Future<Output = Result<Self::Found>> + Send {
        async move { Ok(found) }
    }

    /// The job's object and parts read from the API server; `None` when there is no object.
    fn fetched(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Option<Self::Found>>> + Send;

    /// The kind's mapping of the job as observed.
    fn map(
        &self,
        id: &ExecutionId,
        observed: &Seen<Self::View>,
        parts: &Self::Parts,
        previous: Option<&ExecutionInfo>,
    ) -> Option<Mapped<Self::Action>>;

    /// The parts as the API server lists them now, when that tells something the cache did
    /// not (their watches may lag the object's); `None` when the listing failed, is the same,
    /// or is not worth a request. `mapped`: what the cache's parts decide.
    fn relisted(
        &self,
        id: &ExecutionId,
        view: &Self::View,
        parts: &Self::Parts,
        mapped: &Mapped<Self::Action>,
    ) -> impl Future<Output = Option<Self::Parts>> + Send;

    /// Carries out what the mapping asks for before it may report an outcome: by default, what
    /// the action of most kinds asks ([`RecordOutcomeAndDelete`]), the outcome recorded on the
    /// object, then the object deleted.
    fn act(
        &self,
        id: &ExecutionId,
        view: &Self::View,
        action: &Self::Action,
    ) -> impl Future<Output = Acted<Self::View>> + Send {
        self.record_and_delete(id, view, action.outcome())
    }

    /// Where the object of `view` lives.
    fn objects_of(&self, view: &Self::View) -> Objects<Self::Object>;

    /// The view of `object`, another copy of the object `like` shows.
    fn view_of(&self, like: &Self::View, object: &Self::Object) -> Self::View;

    /// The attempts (pods) the parts show, oldest first: the outcome record keeps them.
    fn attempts_in(&self, view: &Self::View, parts: &Self::Parts) -> Vec<Attempt>;

    /// The container whose log is the job's in the pod `pod` of the parts.
    fn log_container(&self, parts: &Self::Parts, pod: &str) -> Option<String>;

    /// Adds to a status what the parts could not tell (nothing by default).
    fn note(&self, _parts: &Self::Parts, _info: &mut ExecutionInfo) {}

    /// Whether the parts say the job's work ended, its object's verdict perhaps not in yet:
    /// then a cancel has nothing left to stop, and the verdict on its way is the outcome
    /// (nothing by default).
    fn work_ended(&self, _view: &Self::View, _parts: &Self::Parts) -> bool {
        false
    }

    /// Finishes the cancel of a job marked cancelled that nobody finished (its process gone
    /// between the mark and the delete): by default CANCELLED recorded, then the object deleted
    /// ([`finish_cancel`]). `info`: the job's status. Answers when to look at it again.
    fn finish_abandoned_cancel(
        &self,
        _id: &ExecutionId,
        view: &Self::View,
        _parts: &Self::Parts,
        info: &ExecutionInfo,
    ) -> impl Future<Output = Option<Timestamp>> + Send {
        async move {
            finish_cancel(
                &self.objects_of(view),
                self.cluster(),
                self.records(),
                Self::JOB_KIND,
                view,
                info,
                self.retry_interval(),
            )
            .await
        }
    }

    /// How soon a job whose settling failed is looked at again.
    fn retry_interval(&self) -> Duration {
        self.recheck_interval()
    }

    /// The job as a read of its object found it ([`Kind::read`]): where the object lives, its
    /// metadata, and the status the mapping gives over the view and parts read (`fresh`:
    /// the parts as the API server lists them now); a cancel acts on that. An action found
    /// due is handed to the namespace's settler.
    fn read_now(
        &self,
        id: &ExecutionId,
        (objects, meta): (Objects<Self::Object>, ObjectMeta),
        found: Self::Found,
        fresh: bool,
    ) -> impl Future<Output = Result<Current<Self::Object>>> + Send {
        async move {
            let ended = match &found.observed {
                Seen::Present(view) => self.work_ended(view, &found.parts),
                Seen::Vanished { .. } => false,
            };
            let status = self.evaluate(id, found, Acting::Delegate).await?.info;
            Ok(Current {
                objects,
                meta,
                status,
                fresh,
                ended,
            })
        }
    }

    /// What is known of a job: from the cache, else (an object created a moment ago by another
    /// replica, or a cache not synced yet) straight from the API server.
    fn observe(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
        synced: bool,
    ) -> impl Future<Output = Result<Option<Self::Found>>> + Send {
        async move {
            if let Some(found) = self.observed(watch, id).await {
                return self.complete(watch, id, found).await.map(Some);
            }
            // The watches, current, would have delivered an object created since the server
            // last said it has none.
            let current = watch.objects_current();
            if current
                && self.namespaces().absent_lately(
                    &id.namespace,
                    &id.name,
                    self.common().pace.absent_ttl,
                )
            {
                return Ok(None);
            }
            debug!(message = "cache miss", id = %id, synced);
            self.cluster().check_reachable()?;
            let found = self.fetched(watch, id).await?;
            if found.is_none() && current {
                self.namespaces().note_absent(&id.namespace, &id.name);
            }
            Ok(found)
        }
    }

    /// "No such job", saying whether the watches saw the object deleted.
    fn no_such_job(&self, id: &ExecutionId, watch: &Self::Watches) -> Error {
        let hint = if watch.deleted(&id.name) {
            format!(
                " (its {} was deleted: cancelled through another replica, expired after its TTL, or removed by someone else)",
                Self::NOUN
            )
        } else {
            " (never created on this cluster, or already removed: cancelled, deleted, or expired after its TTL)".to_string()
        };
        Error::NoSuchJob {
            id: id.clone(),
            hint,
        }
    }

    /// Maps the job as observed and carries out what the mapping asks for (the settler):
    /// its answer, and when time alone next changes it.
    fn carry_out(
        &self,
        id: &ExecutionId,
        found: Self::Found,
    ) -> impl Future<Output = Result<(ExecutionInfo, Option<Timestamp>)>> + Send {
        async move {
            let evaluated = self.evaluate(id, found, Acting::Carry).await?;
            Ok((evaluated.info, evaluated.recheck_at))
        }
    }

    /// Maps an observation and remembers the answer. The action the mapping asks for, and the
    /// first record of an outcome, are the namespace's settler's: with [`Acting::Delegate`] (a
    /// status query, a wait, a list) such a job is handed to it and the answer is the
    /// settler's.
    fn evaluate(
        &self,
        id: &ExecutionId,
        found: Self::Found,
        acting: Acting,
    ) -> impl Future<Output = Result<Evaluated>> + Send {
        async move {
            let state = self.common();
            let previous = self.namespaces().last_reported(&id.namespace, &id.name);
            let Found {
                mut observed,
                mut parts,
                mut listed,
            } = found;
            // A watch cache lagging a fresh read: its older copy tells nothing new. What was
            // reported from the newer one is read now, not taken from `previous`: another
            // answer may have been given from a newer copy since, and may be terminal.
            if let Seen::Present(view) = &observed
                && let Some(current) = self.namespaces().reported_from_newer(
                    &id.namespace,
                    &id.name,
                    view.resource_version.as_deref(),
                )
            {
                return Ok(Evaluated {
                    info: current,
                    recheck_at: None,
                });
            }
            // A copy an action already found gone (a stalled watch still holds it) is gone.
            if let Seen::Present(view) = &observed
                && state.found_gone.contains(&copy_key(view))
            {
                observed = Seen::Vanished {
                    last: view.clone(),
                    final_state: false,
                };
            }
            // A changed or vanished object is mapped again; a few rounds settle it.
            for _ in 0..4 {
                let Some(mapped) = self.map(id, &observed, &parts, previous.as_ref()) else {
                    return Err(Error::NoSuchJob {
                        id: id.clone(),
                        hint: format!(
                            " (its {} is gone and what became of it is unknown: if it was being cancelled, it was cancelled)",
                            Self::NOUN
                        ),
                    });
                };
                // The outcome's details (exit codes, times, the culprit) come from the parts as
                // of the outcome; their watches may lag the object's, so they are listed once
                // before an outcome is first reported, and every replica reports the same.
                let deciding = mapped.info.is_terminal() || mapped.action.is_some();
                if deciding && !listed && previous.as_ref().is_none_or(|p| !p.is_terminal()) {
                    listed = true;
                    if let Some(fresh) = self.relisted(id, observed.view(), &parts, &mapped).await {
                        parts = fresh;
                        continue;
                    }
                }
                // A query answers an outcome as recorded (the record written first stands); one
                // not recorded yet is the settler's to record first.
                let (mut info, unrecorded) = match acting {
                    Acting::Delegate => {
                        let undeleted = observed.undeleted();
                        let meta = observed.present_meta();
                        self.standing(id, mapped.info, previous.as_ref(), undeleted, meta)
                            .await
                            .into_parts()
                    }
                    Acting::Carry => (mapped.info, false),
                };
                if acting == Acting::Delegate && (mapped.action.is_some() || unrecorded) {
                    // What stands until the settler is done: never an outcome it has not
                    // recorded. The copy of the record the object carries was recorded (its
                    // record deleted by hand since, which the settler writes again).
                    let kept = observed.view().kept_outcome.clone();
                    let kept_stands = kept.is_some() && info.is_terminal();
                    let holding = if info.is_terminal() {
                        kept.or_else(|| self.namespaces().last_reported(&id.namespace, &id.name))
                            .unwrap_or_else(|| while_deciding(observed.view(), &info))
                    } else {
                        info
                    };
                    let found = Found {
                        observed,
                        parts,
                        listed,
                    };
                    // Bounded: a settler held up by a slow API server must not hold the question.
                    let info = match tokio::time::timeout(
                        state.pace.sync_timeout,
                        self.settle_now(id, found),
                    )
                    .await
                    {
                        Ok(settled) => settled?,
                        Err(_) if kept_stands => holding,
                        Err(_) => ExecutionInfo {
                            message: format!(
                                "{}; not done yet: the namespace's settler is still busy",
                                holding.message
                            ),
                            ..holding
                        },
                    };
                    // A terminal answer given meanwhile (the settler's) stands.
                    let info = self
                        .namespaces()
                        .last_reported(&id.namespace, &id.name)
                        .filter(ExecutionInfo::is_terminal)
                        .unwrap_or(info);
                    return Ok(Evaluated {
                        info,
                        recheck_at: None,
                    });
                }
                if let Some(warning) = &mapped.warning {
                    state.warn_once(id, "unreadable status", warning);
                }
                let recheck_at = mapped.recheck_at;
                // Whether this settle deleted the object (its action's record and delete).
                let mut deleted_now = false;
                if let Some(action) = &mapped.action {
                    match self.act(id, observed.view(), action).await {
                        Acted::Done => {
                            info = action.outcome().clone();
                            deleted_now = action.deletes_object();
                        }
                        Acted::Written(written) => {
                            info = written
                                .carried_outcome()
                                .unwrap_or_else(|| action.outcome().clone());
                            deleted_now = action.deletes_object();
                            observed = Seen::Present(*written);
                        }
                        Acted::Remap(next) => {
                            if matches!(
                                *next,
                                Seen::Vanished {
                                    final_state: false,
                                    ..
                                }
                            ) {
                                state.found_gone.insert(copy_key(observed.view()));
                            }
                            observed = *next;
                            continue;
                        }
                        Acted::Failed(error) => {
                            warn!(message = "could not act on the job's status; will retry", id = %id, %error);
                            let forbidden = matches!(error, Error::Forbidden { .. });
                            if !forbidden {
                                // Remembered with why, for whoever is answered from it before
                                // the next try.
                                info.message = format!("{}; not done yet: {error}", info.message);
                            }
                            self.remember(id, &info, observed.present_version());
                            if forbidden {
                                // A missing permission does not go away by itself: say so.
                                return Err(error);
                            }
                            return Ok(Evaluated {
                                info,
                                recheck_at: after(self.recheck_interval()),
                            });
                        }
                    }
                }
                if !info.is_terminal() {
                    self.note(&parts, &mut info);
                }
                // The settler's outcome stands once recorded, as the record has it (a record
                // another replica wrote first, a cancel's, wins): it is remembered only then,
                // and until then what was known before is the answer.
                let answered = previous.as_ref().is_some_and(ExecutionInfo::is_terminal);
                let mut recheck_at = recheck_at.filter(|_| !info.is_terminal());
                if acting == Acting::Carry && info.is_terminal() {
                    let undeleted = observed.undeleted();
                    // A replica that answered already keeps its answer: it replaces no
                    // record with another.
                    match self
                        .keep(id, observed.view(), &parts, &info, undeleted && !answered)
                        .await
                    {
                        Ok(standing) => {
                            // The object, held until its record was kept, is let go with a
                            // copy of it; its record is answered once it is let go.
                            let view = observed.view();
                            let answerable = !matches!(observed, Seen::Present(_)) || {
                                let let_go = release_held(
                                    &self.objects_of(view),
                                    self.cluster(),
                                    view,
                                    self.retry_interval(),
                                    &state.releases,
                                    Some(&standing),
                                    self.records().name_hold(view, Self::JOB_KIND, deleted_now),
                                )
                                .await;
                                recheck_at = let_go.again_at;
                                let_go.answerable_now()
                            };
                            if !answered {
                                info = if answerable {
                                    standing
                                } else {
                                    recheck_at = recheck_at.or(after(self.recheck_interval()));
                                    previous
                                        .clone()
                                        .unwrap_or_else(|| while_deciding(view, &standing))
                                };
                            }
                        }
                        Err(error) if answered => {
                            warn!(message = "could not keep an outcome record; will retry", id = %id, %error);
                            recheck_at = retry_at(&error, self.recheck_interval());
                        }
                        Err(error) => {
                            warn!(message = "could not keep an outcome record; will retry", id = %id, %error);
                            let known = self
                                .namespaces()
                                .last_reported(&id.namespace, &id.name)
                                .unwrap_or_else(|| {
                                    ExecutionInfo::new(JobState::Queued, Reason::Pending)
                                });
                            return Ok(Evaluated {
                                info: ExecutionInfo {
                                    message: format!(
                                        "{}; {} {}: not recorded yet: {error}",
                                        known.message, info.state, info.reason
                                    ),
                                    ..known
                                },
                                recheck_at: retry_at(&error, self.recheck_interval()),
                            });
                        }
                    }
                }
                // A cancel nobody finished (its process gone between the mark and the delete,
                // its record refused meanwhile): the settler finishes it once due.
                if acting == Acting::Carry
                    && info.state == JobState::Cancelling
                    && let Seen::Present(view) = &observed
                    && view.deletion_timestamp.is_none()
                    && view.cancel_mark.is_some()
                    && !self.work_ended(view, &parts)
                {
                    let due = match cancel_finish_due(view, self.retry_interval()) {
                        Some(due) => Some(due),
                        None => self.finish_abandoned_cancel(id, view, &parts, &info).await,
                    };
                    recheck_at = match (recheck_at, due) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                self.remember(id, &info, observed.present_version());
                // What stands: an answer computed at the same time from a newer copy wins.
                let info = self
                    .namespaces()
                    .last_reported(&id.namespace, &id.name)
                    .unwrap_or(info);
                return Ok(Evaluated { info, recheck_at });
            }
            Err(Error::Contended {
                operation: format!("status {id}"),
                message: format!(
                    "the {} kept changing while kubeferry acted on it; ask again",
                    Self::NOUN
                ),
            })
        }
    }

    /// Hands a job whose mapping asks for an action (or whose outcome is still to be recorded)
    /// to its namespace's settler, and answers what the settler decided.
    fn settle_now(
        &self,
        id: &ExecutionId,
        found: Self::Found,
    ) -> impl Future<Output = Result<ExecutionInfo>> + Send {
        async move {
            let watch = self.watch(&id.namespace).await?;
            let state = self.common();
            state
                .settlers
                .settle_now(&state.me, &watch, id, found)
                .await
        }
    }

    /// Keeps the outcome record of a job that ended (nothing when it is kept already), and
    /// answers the outcome that stands; `undeleted`: mapped from a copy of the object not
    /// being deleted ([`crate::records::Records::keep`]).
    fn keep(
        &self,
        id: &ExecutionId,
        view: &Self::View,
        parts: &Self::Parts,
        outcome: &ExecutionInfo,
        undeleted: bool,
    ) -> impl Future<Output = Result<ExecutionInfo>> + Send {
        let record = OutcomeRecord {
            kind: Self::JOB_KIND,
            object: view.name.clone(),
            job_id: view.job_id.clone(),
            spec_hash: view.spec_hash.clone(),
            outcome: outcome.clone(),
            recorded_at: Some(Timestamp::now()),
            created_at: view.created_at,
            cancelled_by: None,
            attempts: self.attempts_in(view, parts),
        };
        let reading = Reading {
            undeleted,
            carried: view.carried_outcome().as_ref() == Some(outcome),
        };
        // A longer tail of the log, when the job asks for one: read only if no record stands.
        let told = view.keep_log.and_then(|keep| {
            let pod = telling_attempt(&record.attempts)?.pod.clone();
            let container = self.log_container(parts, &pod)?;
            Some((keep, pod, container))
        });
        async move {
            let tail = async {
                let (keep, pod, container) = told?;
                let target = LogTarget {
                    namespace: id.namespace.clone(),
                    pod,
                    container,
                    uid: None,
                };
                kept_tail(self.cluster(), &target, keep).await
            };
            self.records()
                .keep_with_tail(&id.namespace, record, reading, tail)
                .await
        }
    }

    /// Records an outcome kubeferry decided on the object, then deletes it; only then may the
    /// outcome be reported.
    fn record_and_delete(
        &self,
        id: &ExecutionId,
        view: &Self::View,
        outcome: &ExecutionInfo,
    ) -> impl Future<Output = Acted<Self::View>> + Send {
        async move {
            let objects = self.objects_of(view);
            let cluster = self.cluster();
            let mut last = view.clone();
            if !matches!(view.recorded_outcome, Some(Ok(_))) {
                let record = kubeferry_core::marks::outcome_record(outcome);
                match objects
                    .annotate(
                        cluster,
                        &id.name,
                        view.resource_version.as_deref(),
                        &[(OUTCOME_ANNOTATION, &record)],
                        true,
                    )
                    .await
                {
                    Ok(patched) => last = self.view_of(view, &patched),
                    Err(error) if error.is_conflict() => return self.reread(id, view).await,
                    Err(error) if error.is_not_found() => {
                        return Acted::Remap(Box::new(Seen::Vanished {
                            last: view.clone(),
                            final_state: false,
                        }));
                    }
                    Err(error) => return Acted::Failed(error),
                }
                info!(message = "recorded an outcome kubeferry decided", id = %id, state = %outcome.state, reason = %outcome.reason);
            }
            match objects
                .delete(
                    cluster,
                    &id.name,
                    &last.uid,
                    last.resource_version.as_deref(),
                )
                .await
            {
                Ok(Deletion::Deleted) => {
                    info!(message = "deleted the object after recording its outcome", id = %id, kind = Self::NOUN);
                    Acted::Done
                }
                Ok(Deletion::Gone) => Acted::Remap(Box::new(Seen::Vanished {
                    last,
                    final_state: false,
                })),
                Ok(Deletion::Conflict) => self.reread(id, &last).await,
                Err(error) => Acted::Failed(error),
            }
        }
    }

    /// The object as it is now, to be mapped again.
    fn reread(
        &self,
        id: &ExecutionId,
        last: &Self::View,
    ) -> impl Future<Output = Acted<Self::View>> + Send {
        async move {
            match self.objects_of(last).get(self.cluster(), &id.name).await {
                Ok(Some(object)) => {
                    Acted::Remap(Box::new(Seen::Present(self.view_of(last, &object))))
                }
                Ok(None) => Acted::Remap(Box::new(Seen::Vanished {
                    last: last.clone(),
                    final_state: false,
                })),
                Err(error) => Acted::Failed(error),
            }
        }
    }
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
        Some(watch) => watch.watch_count(),
        None => return,
    };
    // Jobs that changed while the watches could not be settled from (`settling`): settled once
    // they can, looked at again every retry interval meanwhile.
    let mut deferred: BTreeSet<String> = BTreeSet::new();
    let retry = match kind.upgrade() {
        Some(kind) => kind.retry_interval(),
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
                () = tokio::time::sleep(retry), if !deferred.is_empty() => {}
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
        {
            let Some(watch) = watch.upgrade() else { return };
            if !watch.settling() {
                deferred.append(&mut due);
                continue;
            }
            due.append(&mut deferred);
        }
        // Jobs are settled side by side: many ending at once (a burst of outcomes to record)
        // wait for a few round trips, not for one each in turn.
        let settle = |name: String| {
            let (kind, watch, timers, states) = (&kind, &watch, &timers, &states);
            let namespace = &namespace;
            async move {
                let (Some(kind), Some(held)) = (kind.upgrade(), watch.upgrade()) else {
                    return;
                };
                let id = kind.id(namespace, &name);
                let Some(found) = kind.observed(&held, &id).await else {
                    states.set(&name, None);
                    return;
                };
                drop(held);
                match kind.carry_out(&id, found).await {
                    Ok((info, recheck_at)) => {
                        if let Some(at) = recheck_at {
                            timers.arm(at, &name);
                        }
                        count(states, watch, &name, &info);
                    }
                    // Gone: its deletion is on its way on the watch, and nothing is left to do.
                    Err(error) if error.is_no_such_job() => states.set(&name, None),
                    Err(error) => {
                        debug!(message = "could not settle a job; will retry", id = %id, %error);
                        timers.arm_after(retry_delay(&error, kind.retry_interval()), &name);
                    }
                }
            }
        };
        futures::stream::iter(due)
            .for_each_concurrent(SETTLED_AT_ONCE, settle)
            .await;
    }
}

/// Counts the job in its state while its object is there (a deleted one's outcome stands, but
/// it is no longer a job the cluster holds).
fn count<W: Watches>(states: &JobStates, watch: &Weak<W>, name: &str, info: &ExecutionInfo) {
    let present = watch.upgrade().is_some_and(|watch| watch.holds(name));
    states.set(name, present.then_some(info.state));
}

/// Every job the watches hold, after notifications were missed; the counts forget the jobs
/// whose removal was among them.
fn everything<W: Watches + ?Sized>(watch: &W, states: &JobStates) -> Vec<String> {
    let present = watch.names();
    states.retain(|name| present.iter().any(|n| n == name));
    present
}
