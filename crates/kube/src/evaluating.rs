//! The one status path and settler of every kind, written once over [`Kind`] (as
//! [`Evaluates`], which every kind gets): the status query, the lookup on a cache miss, the
//! evaluation loop, the outcome record, and the settler of each namespace.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Weak};

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubeferry_core::observation::ManagedMeta;
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::timeline::telling_attempt;

use crate::pod_logs::{LogTarget, kept_tail};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::kind::{
    Acted, Acting, Answers, Common, Found, FoundOf, Kind, KindBase, Outcome, Relisted, Seen,
    Shared, Watches,
};
use crate::objects::{Current, Objects};
use crate::protocol::finish_cancel;
use crate::records::Reading;
use crate::settling::{
    Change, JobStates, NamespaceSettler, Releases, Request, SETTLED_AT_ONCE, Settlers, Timers,
    after, cancel_finish_due, merged, release_held, retry_at, retry_delay, while_deciding,
};
use crate::tracker::{Recent, Watching, lock};

/// A job's status, and when time alone next changes it.
pub(crate) struct Evaluated {
    pub(crate) info: ExecutionInfo,
    pub(crate) recheck_at: Option<Timestamp>,
}

impl<K: Evaluates> Common<K> {
    /// A kind over `shared`, watching as `watching` says: `build` makes it of what it keeps in common with
    /// every kind.
    pub(crate) fn build(
        shared: &Shared,
        watching: Watching,
        build: impl FnOnce(Self) -> K,
    ) -> Arc<K> {
        Arc::new_cyclic(|me| {
            build(Self {
                base: KindBase::new(shared.cluster.clone(), shared.records.clone()),
                me: me.clone(),
                settlers: Settlers::default(),
                warned: Recent::new(10_000),
                found_gone: Recent::new(10_000),
                releases: Releases::new(),
                watching,
            })
        })
    }

    /// Starts the settler of `namespace` over `watch`, if it is not running.
    pub(crate) fn start(&self, namespace: &str, watch: &Arc<K::Watches>) {
        self.requests(namespace, watch);
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
        lock(&self.settlers.by_namespace)
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

    /// Logs `what` about the job once.
    pub(crate) fn warn_once(&self, id: &ExecutionId, what: &str, detail: &str) {
        if self.warned.insert(format!("{id} {what} {detail}")) {
            warn!(message = what, id = %id, detail);
        }
    }
}

/// One copy of an object: its namespace, name and resourceVersion.
pub(crate) fn copy_key(meta: &ManagedMeta) -> String {
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
    /// From the watch cache (one GET on a miss); writes nothing.
    async fn status(&self, id: &ExecutionId) -> Result<ExecutionInfo> {
        let watch = self.watch(&id.namespace).await?;
        let synced = watch.wait_synced(self.common().watching.sync_timeout).await;
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

    async fn status_of(&self, id: &ExecutionId, found: FoundOf<K>) -> Result<ExecutionInfo> {
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

/// The status path and the settling of a kind, written once over what the kind brings
/// ([`Kind`]); every kind has it.
pub(crate) trait Evaluates: Kind {
    /// The job as a read of its object found it ([`Kind::read`]): where the object lives, its
    /// metadata, and the status the mapping gives over the view and parts read (`fresh`:
    /// the parts as the API server lists them now); a cancel acts on that. An action found
    /// due is handed to the namespace's settler.
    fn read_now(
        &self,
        id: &ExecutionId,
        (objects, meta): (Objects<Self::Object>, ObjectMeta),
        found: FoundOf<Self>,
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
    ) -> impl Future<Output = Result<Option<FoundOf<Self>>>> + Send {
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
                    self.common().watching.reflector.absent_ttl,
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
        found: FoundOf<Self>,
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
        found: FoundOf<Self>,
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
                let before_and_now = (previous.as_ref(), Timestamp::now());
                let Some(mapped) = self.map(id, &observed, &parts, before_and_now) else {
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
                    let looked = (observed.view(), &parts, &mapped);
                    match self.relisted(id, looked, acting).await {
                        Relisted::Fresh(fresh) => {
                            (parts, listed) = (fresh, true);
                            continue;
                        }
                        Relisted::Same => listed = true,
                        // Nothing is decided from parts that may lag: the settler looks again
                        // at the retry interval (or as their watch delivers them), and a query
                        // hands the job to it.
                        Relisted::Later(error) if acting == Acting::Carry => {
                            if let Some(error) = &error {
                                debug!(message = "could not list the job's parts; will retry", id = %id, %error);
                            }
                            let retry = self.recheck_interval();
                            return Ok(Evaluated {
                                info: previous.clone().unwrap_or_else(|| {
                                    while_deciding(observed.view(), &mapped.info)
                                }),
                                recheck_at: error
                                    .map_or_else(|| after(retry), |error| retry_at(&error, retry)),
                            });
                        }
                        Relisted::Later(_) => {}
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
                        state.watching.sync_timeout,
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
                        // Changed since it was read: judged again when the watches deliver the
                        // new copy, with its parts as they are then.
                        Acted::Changed => {
                            return Ok(Evaluated {
                                info: previous.clone().unwrap_or(info),
                                recheck_at: after(self.recheck_interval()),
                            });
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
                                recheck_at: retry_at(&error, self.recheck_interval()),
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
                // An outcome the object carries (its record's copy, one recorded on it) is
                // recorded as it is, whatever this replica answered before it: every replica
                // reads the same.
                if acting == Acting::Carry
                    && info.is_terminal()
                    && !answered
                    && let Some(carried) = observed.view().carried_outcome()
                {
                    info = carried;
                }
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
                                    self.recheck_interval(),
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
                    let due = match cancel_finish_due(view, self.recheck_interval()) {
                        Some(due) => Some(due),
                        None => match self.abandoned_cancel(view, &info).await {
                            Ok(status) => {
                                finish_cancel(
                                    &self.objects_of(view),
                                    self.cluster(),
                                    self.records(),
                                    Self::JOB_KIND,
                                    view,
                                    &status,
                                    self.recheck_interval(),
                                )
                                .await
                            }
                            Err(again_at) => again_at,
                        },
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
        found: FoundOf<Self>,
    ) -> impl Future<Output = Result<ExecutionInfo>> + Send {
        async move {
            let watch = self.watch(&id.namespace).await?;
            let state = self.common();
            state.hand_over(&watch, id, found).await
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
}

/// Every kind gets the machinery.
impl<K: Kind> Evaluates for K {}

/// The settlers of a kind's watched namespaces, one each, started on first use.
impl<K: Evaluates> Common<K> {
    /// The requests of `namespace`'s settler, started over `watch` if it is not running.
    fn requests(
        &self,
        namespace: &str,
        watch: &Arc<K::Watches>,
    ) -> mpsc::UnboundedSender<Request<FoundOf<K>>> {
        lock(&self.settlers.by_namespace)
            .entry(namespace.to_string())
            .or_insert_with(|| {
                let states = Arc::new(JobStates::default());
                let (requests, received) = mpsc::unbounded_channel();
                tokio::spawn(run(
                    self.me.clone(),
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
    async fn hand_over(
        &self,
        watch: &Arc<K::Watches>,
        id: &ExecutionId,
        found: FoundOf<K>,
    ) -> Result<ExecutionInfo> {
        let (done, answer) = oneshot::channel();
        let request = Request {
            id: id.clone(),
            found,
            done,
        };
        if let Err(returned) = self.requests(&id.namespace, watch).send(request) {
            // The settler runs as long as the namespace's watches; one that stopped is started
            // again rather than leaving the job undecided.
            warn!(message = "the namespace's settler had stopped; starting it again", id = %id);
            lock(&self.settlers.by_namespace).remove(&id.namespace);
            let _ = self.requests(&id.namespace, watch).send(returned.0);
        }
        answer.await.map_err(|_| Error::Contended {
            operation: format!("status {id}"),
            message: "the namespace's settler stopped while deciding the job; ask again".into(),
        })?
    }
}

/// The settler of one namespace: on watch events, at the mappings' deadlines and on status
/// queries' requests, until the kind or the namespace's watches are dropped.
async fn run<K: Evaluates>(
    kind: Weak<K>,
    namespace: String,
    watch: Weak<K::Watches>,
    mut requests: mpsc::UnboundedReceiver<Request<FoundOf<K>>>,
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
        Some(kind) => kind.recheck_interval(),
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
                        timers.arm_after(retry_delay(&error, kind.recheck_interval()), &name);
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
