//! What a kind of job (a container Job, a SparkApplication) implements once, in the spirit of
//! Kueue's `GenericJob`: everything else (create-or-adopt, cancel, wait, logs, list, sweep, the
//! namespaces' watches and last answers, health) is written once over it (`protocol.rs`,
//! `objects.rs`, `tracker::Namespaces`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kubeferry_core::observation::{ManagedMeta, Observation};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::sync::broadcast;
use tracing::debug;

use futures::stream::BoxStream;

use crate::cluster::Cluster;
use crate::error::Result;
use crate::executor::Placement;
use crate::objects::{Attempt, Current, Object, Objects};
use crate::records::{Records, check_resubmission, gives_way};
use crate::replies::Submission;
use crate::selector::SelectorEvent;
use crate::tracker::{Departure, Namespaces, Reflector, Tombstone, WatchHealth};

/// What a kind watches in one namespace.
pub(crate) trait Watches: Send + Sync + 'static {
    /// Notifications naming the jobs whose objects or pods changed.
    fn subscribe(&self) -> Vec<broadcast::Receiver<String>>;

    /// The health of every watch, by the resource it watches, most needed first.
    fn health(&self) -> Vec<(String, WatchHealth)>;

    /// Whether the watches hold the object `name` (not deleted yet, as far as they know).
    fn holds(&self, name: &str) -> bool;

    /// Whether the watches of the kind's objects are current (their lists complete, their
    /// streams open).
    fn objects_current(&self) -> bool;

    /// Whether the watches saw the object `name` deleted.
    fn deleted(&self, name: &str) -> bool;

    /// The metadata of the object `name` as the watches hold it, if they hold it.
    fn meta(&self, name: &str) -> Option<ManagedMeta>;

    /// Every job whose object the watches hold.
    fn names(&self) -> Vec<String>;

    /// Waits until the watches have listed once; `false` when `timeout` ran out first.
    fn wait_synced(&self, timeout: Duration) -> impl Future<Output = bool> + Send;

    /// How many watches notify of changes now, when that can grow (a Spark operator
    /// discovered later): the settler subscribes again when it does. `None`: it cannot.
    fn watch_count(&self) -> Option<tokio::sync::watch::Receiver<usize>> {
        None
    }

    /// Whether jobs may be settled from the watches now; while they catch up (a first list,
    /// a relist after a failure) the settler waits, where the parts they hold may be stale
    /// and decide nothing. Always, by default.
    fn settling(&self) -> bool {
        true
    }
}

/// What a reader answers of a job's outcome record, `recorded`, given its object as the
/// watches hold it (`meta`; `None`: not held, gone or never seen):
/// - the outcome the object carries (the copy of its record, else the outcome kubeferry
///   recorded on it) where it differs: written before this record, it was answered first (a
///   record deleted by hand and written again from another replica's reading gives way to
///   it; `Records::keep`). A cancel's copy gives way to the job's own end, as its record does;
/// - nothing yet for an object held by kubeferry's finalizer, not deleted and carrying no
///   outcome: the settler lets it go with a copy of the record a moment later, unless the
///   object carries another outcome by then, which the record then gives way to;
/// - else the record.
pub(crate) fn record_as_answered(
    recorded: ExecutionInfo,
    meta: Option<&ManagedMeta>,
) -> Option<ExecutionInfo> {
    let Some(meta) = meta else {
        return Some(recorded);
    };
    match meta.carried_outcome() {
        Some(carried) if carried != recorded && !gives_way(&carried, &recorded) => Some(carried),
        Some(_) => Some(recorded),
        None if meta.held.is_some() && meta.deletion_timestamp.is_none() => None,
        None => Some(recorded),
    }
}

/// One job as a list found it: what its summary shows, and what its status is mapped from.
pub(crate) struct Listed<F> {
    /// The job's execution id.
    pub(crate) id: ExecutionId,
    /// The caller's job id, as the object carries it.
    pub(crate) job_id: Option<String>,
    /// When the object was created.
    pub(crate) created_at: Option<Timestamp>,
    /// The newest attempt's pod and the node it runs on.
    pub(crate) newest: Option<(String, Option<String>)>,
    /// How many attempts' pods exist.
    pub(crate) attempts: usize,
    /// What the kind maps the status from.
    pub(crate) found: F,
}

/// A job's object as last seen, owning its view `V`: present, or gone (the core's
/// `Observation` borrows it for the mapping).
#[derive(Clone, Debug)]
pub(crate) enum Seen<V> {
    Present(V),
    Vanished {
        /// The object as last seen.
        last: V,
        /// Whether that is its final state, as a DELETED event delivers it (not a copy from
        /// before a relist found it gone).
        final_state: bool,
    },
}

impl<V: Clone + Send + Sync + 'static> Seen<V> {
    /// The object `name` as `watch` holds it, else as it last saw it go; `None`: not seen
    /// (or forgotten).
    pub(crate) fn in_watch(watch: &Reflector<V>, name: &str) -> Option<Self> {
        match watch.get(name) {
            Some(entry) => Some(Seen::Present(entry.view)),
            None => watch.tombstone(name).map(Seen::gone),
        }
    }

    /// An object gone, as `tombstone` keeps it.
    pub(crate) fn gone(tombstone: Tombstone<V>) -> Self {
        Seen::Vanished {
            final_state: tombstone.departure == Departure::Deleted,
            last: tombstone.last,
        }
    }
}

impl<V> Seen<V> {
    /// The view, present or last seen.
    pub(crate) fn view(&self) -> &V {
        match self {
            Seen::Present(view) | Seen::Vanished { last: view, .. } => view,
        }
    }

    /// Whether this is a copy of the object that is there and not being deleted.
    pub(crate) fn undeleted(&self) -> bool
    where
        V: std::ops::Deref<Target = kubeferry_core::observation::ManagedMeta>,
    {
        matches!(self, Seen::Present(view) if view.deletion_timestamp.is_none())
    }

    /// The metadata of an object still present; `None` for one gone (its record is answered
    /// as it stands, and its last copy says nothing about how fresh an answer is).
    pub(crate) fn present_meta(&self) -> Option<&ManagedMeta>
    where
        V: std::ops::Deref<Target = ManagedMeta>,
    {
        match self {
            Seen::Present(view) => Some(view),
            Seen::Vanished { .. } => None,
        }
    }

    /// The resourceVersion of an object still present ([`Seen::present_meta`]).
    pub(crate) fn present_version(&self) -> Option<&str>
    where
        V: std::ops::Deref<Target = ManagedMeta>,
    {
        self.present_meta()?.resource_version.as_deref()
    }

    /// The observation the kind's mapping reads.
    pub(crate) fn as_observation(&self) -> Observation<'_, V> {
        match self {
            Seen::Present(view) => Observation::Present(view),
            Seen::Vanished { last, final_state } => Observation::Vanished {
                last_seen: last,
                final_state: *final_state,
            },
        }
    }
}

/// What a status query may answer for a job ([`Kind::standing`]).
pub(crate) enum Standing {
    /// This, as it stands.
    Answer(ExecutionInfo),
    /// An outcome not recorded yet: answered once the settler recorded it (a moment after the
    /// watch shows it), so that every replica and every later process answers the same.
    Unrecorded(ExecutionInfo),
}

impl Standing {
    /// The answer, and whether it is an outcome not recorded yet.
    pub(crate) fn into_parts(self) -> (ExecutionInfo, bool) {
        match self {
            Standing::Answer(info) => (info, false),
            Standing::Unrecorded(info) => (info, true),
        }
    }
}

/// The health of a kind's watches of one namespace.
pub(crate) enum KindHealth {
    /// Its watches, by the resource each watches, most needed first.
    Started(Vec<(String, WatchHealth)>),
    /// Not started yet, and a replica that serves the namespace waits for them (what they
    /// watch is being discovered).
    Starting,
    /// Not started, and nothing waits for them (they start at the kind's first use).
    Unused,
}

/// The managed objects of one resource of a namespace, with where they live.
pub(crate) type ManagedObjects<K> = (Objects<K>, Vec<K>);

/// What every kind keeps alike: its cluster, each watched namespace's watches and last
/// answers, and the outcome records (every kind's).
pub(crate) struct KindBase<W> {
    pub(crate) cluster: Cluster,
    pub(crate) namespaces: Namespaces<W>,
    pub(crate) records: Arc<Records>,
}

impl<W> KindBase<W> {
    pub(crate) fn new(cluster: Cluster, records: Arc<Records>) -> Self {
        Self {
            cluster,
            namespaces: Namespaces::default(),
            records,
        }
    }

    /// The kind's watches of `namespace`, started with `start` if they are not yet, and with
    /// them the namespace's watch of outcome records, which every answer reads.
    pub(crate) fn watches(&self, namespace: &str, start: impl FnOnce() -> Arc<W>) -> Arc<W> {
        self.namespaces.get_or_start(namespace, || {
            self.records.watch(namespace);
            start()
        })
    }
}

/// How a kind answers for its jobs: written once for every kind whose mapping reads its object
/// whole (`evaluating.rs`), and by container Jobs for their own settler.
pub(crate) trait Answers: Kind {
    /// How often a waiter looks again when nothing changes (time-based rules).
    fn recheck_interval(&self) -> Duration;

    /// The job's status (from the watch cache where possible; writes nothing).
    fn status(&self, id: &ExecutionId) -> impl Future<Output = Result<ExecutionInfo>> + Send;

    /// The status of a job a list found (writes nothing: an action due goes to the settler).
    fn status_of(
        &self,
        id: &ExecutionId,
        found: Self::Found,
    ) -> impl Future<Output = Result<ExecutionInfo>> + Send;

    /// The jobs of each watched namespace by state, as its settler last mapped them.
    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)>;
}

/// A kind of job: how its objects are found, watched, read and mapped.
pub(crate) trait Kind: Send + Sync + 'static {
    /// The object a job of this kind runs as.
    type Object: Object;
    /// What the kind watches in one namespace.
    type Watches: Watches;
    /// What a list finds of one job, to map its status from.
    type Found: Send;

    /// The kind, as execution ids name it.
    const JOB_KIND: JobKind;
    /// Its object, as messages name it.
    const NOUN: &'static str;

    /// What it keeps as every kind does.
    fn base(&self) -> &KindBase<Self::Watches>;

    /// The cluster.
    fn cluster(&self) -> &Cluster {
        &self.base().cluster
    }

    /// The watched namespaces and the last answers.
    fn namespaces(&self) -> &Namespaces<Self::Watches> {
        &self.base().namespaces
    }

    /// The outcome records (every kind's).
    fn records(&self) -> &Arc<Records> {
        &self.base().records
    }

    /// The watches of `namespace`, started (with its settler) if they are not yet.
    fn watch(&self, namespace: &str) -> impl Future<Output = Result<Arc<Self::Watches>>> + Send;

    /// The job's object read from the API server now (not from a cache), with the status it
    /// shows; `None` when there is no such object.
    fn read(
        &self,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Option<Current<Self::Object>>>> + Send;

    /// The runs of the job's main container, oldest first.
    fn attempts(&self, id: &ExecutionId) -> impl Future<Output = Result<Vec<Attempt>>> + Send;

    /// The managed objects of `namespace`, or of every namespace when it is `None`, that match
    /// `selector` (already narrowed to managed objects), with their attempts.
    fn listed(
        &self,
        namespace: Option<&str>,
        selector: &str,
    ) -> impl Future<Output = Result<Vec<Listed<Self::Found>>>> + Send;

    /// Every managed object of `namespace`, by where it lives (a kind may keep its objects in
    /// several resources: each Spark operator its own).
    fn managed(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<ManagedObjects<Self::Object>>>> + Send;

    /// The names a job of `job_id` may have here (one, a function of the job id, unless the
    /// kind's objects are named otherwise elsewhere).
    fn object_names(&self, job_id: &str) -> Vec<String>;

    /// Follows which managed jobs of `namespace` match `selector`, for as long as the stream
    /// is read ([`crate::Executor::matching`]).
    fn matching(
        self: &Arc<Self>,
        namespace: &str,
        selector: &str,
    ) -> BoxStream<'static, SelectorEvent>;

    /// Whether the cluster serves the kind: a list of a kind it does not serve asks the
    /// server nothing.
    fn served(&self) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// The watches of `namespace` for a subscriber, started if need be; `None` on a cluster
    /// that does not serve the kind.
    fn subscribed(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Option<Arc<Self::Watches>>>> + Send {
        async move { self.watch(namespace).await.map(Some) }
    }

    /// The health of `namespace`'s watches: those started, else none, and nothing waits for
    /// them.
    fn namespace_health(&self, namespace: &str) -> KindHealth {
        match self.namespaces().existing(namespace) {
            Some(watch) => KindHealth::Started(watch.health()),
            None => KindHealth::Unused,
        }
    }

    /// The replicated job and index whose log is the job's log, given the ones asked for
    /// (`None`: not asked): those asked for, unless the kind has defaults.
    fn log_part(
        &self,
        _id: &ExecutionId,
        replica: Option<String>,
        index: Option<u32>,
    ) -> impl Future<Output = Result<(Option<String>, Option<u32>)>> + Send {
        async move { Ok((replica, index)) }
    }

    /// Where the job's newest attempt runs, from the watch cache (no request), for a kind
    /// whose attempts are pods of its own.
    fn placement(&self, _id: &ExecutionId) -> Option<Placement> {
        None
    }

    /// Whether the watches saw the job's object deleted, and hold no newer one: a watch that
    /// merely does not hold it may not have delivered it yet (created a moment ago through
    /// another replica), and cannot tell that it is gone.
    fn seen_deleted(&self, id: &ExecutionId) -> bool {
        self.namespaces()
            .existing(&id.namespace)
            .is_some_and(|watch| watch.deleted(&id.name) && !watch.holds(&id.name))
    }

    /// The metadata of the job's object as the watches hold it, if they hold it.
    fn seen_meta(&self, id: &ExecutionId) -> Option<ManagedMeta> {
        self.namespaces()
            .existing(&id.namespace)
            .and_then(|watch| watch.meta(&id.name))
    }

    /// The execution id of the job whose object is `name` in `namespace`.
    fn id(&self, namespace: &str, name: &str) -> ExecutionId {
        ExecutionId::new(self.cluster().name(), Self::JOB_KIND, namespace, name)
    }

    /// Notifications naming the jobs of `id`'s namespace whose objects or pods changed.
    fn changes(
        &self,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Vec<broadcast::Receiver<String>>>> + Send {
        async move {
            let mut changes = self.watch(&id.namespace).await?.subscribe();
            // An outcome is answered once recorded: its record is a change too.
            changes.push(self.records().watch(&id.namespace).subscribe());
            Ok(changes)
        }
    }

    /// The run `job_id` already had here, if its outcome is recorded (its object may be gone):
    /// a job id never runs twice, and the same spec submitted again answers with that run. A
    /// different spec under the same job id is refused. `None`: the job id may be created.
    fn ran_before(
        &self,
        namespace: &str,
        name: &str,
        job_id: &str,
        spec_hash: &str,
    ) -> impl Future<Output = Result<Option<ExecutionId>>> + Send {
        async move {
            let Some(record) = self
                .records()
                .lookup(namespace, Self::JOB_KIND, name, job_id)
                .await?
            else {
                // The server may have said a moment ago it has no such object: it will now.
                self.namespaces().forget_absent(namespace, name);
                return Ok(None);
            };
            check_resubmission(&record, Self::NOUN, namespace, name, job_id, spec_hash)?;
            Ok(Some(self.id(namespace, name)))
        }
    }

    /// Submits the job's object `object`, named `name`, unless `job_id`'s run ended already
    /// (its record answers that run: [`Kind::ran_before`]). Else creates it, or adopts the one
    /// a lost response already created ([`Objects::create_or_adopt`]); a create repeated
    /// (after a failure or a lost response) asks the record again first. `existing`: this
    /// call created nothing.
    ///
    /// Once this call created or adopted the object, the namespace is looked after from now on
    /// (its settler keeps the outcome record and ends what a grace period or timeout ends,
    /// whether or not anyone asks). The job exists whatever becomes of that: a watch that did not
    /// start is the next query's to report.
    fn submit_object<K: Object>(
        &self,
        objects: &Objects<K>,
        object: &K,
        name: &str,
        job_id: &str,
        spec_hash: &str,
    ) -> impl Future<Output = Result<Submission>> + Send {
        async move {
            let namespace = objects.namespace.as_str();
            let id = self.id(namespace, name);
            let existing = Submission { id, existing: true };
            if self
                .ran_before(namespace, name, job_id, spec_hash)
                .await?
                .is_some()
            {
                return Ok(existing);
            }
            let recorded = || async {
                let ran = self.ran_before(namespace, name, job_id, spec_hash).await?;
                Ok(ran.is_some())
            };
            let Some(created) = objects
                .create_or_adopt(self.cluster(), object, job_id, spec_hash, recorded)
                .await?
            else {
                return Ok(existing);
            };
            if let Err(error) = self.watch(namespace).await {
                debug!(message = "the namespace's watches did not start", namespace, %error);
            }
            Ok(Submission {
                existing: !created,
                ..existing
            })
        }
    }

    /// The job's final answer, if it has one without mapping anything: the terminal status this
    /// replica already reported (it never changes), else the job's outcome record, as its
    /// object in the watch lets it be answered ([`record_as_answered`]).
    /// `present`: the caller holds the job's object as a list or a read found it.
    fn final_answer(
        &self,
        id: &ExecutionId,
        present: bool,
    ) -> impl Future<Output = Option<ExecutionInfo>> + Send {
        self.final_answer_seeing(id, present, self.seen_meta(id))
    }

    /// [`Kind::final_answer`], the record judged by `meta`, the object as the caller holds it
    /// (a read or a list may be newer than the watch); `None`: gone.
    fn final_answer_seeing(
        &self,
        id: &ExecutionId,
        present: bool,
        meta: Option<ManagedMeta>,
    ) -> impl Future<Output = Option<ExecutionInfo>> + Send {
        async move {
            if let Some(reported) = self
                .namespaces()
                .last_reported(&id.namespace, &id.name)
                .filter(ExecutionInfo::is_terminal)
            {
                return Some(reported);
            }
            let recorded = self.records().recorded(id).await?;
            // A cancel is recorded before its delete: until the job's object is seen deleted
            // (by the watch here, or by the API server when the mapping asks it), it may
            // still run or its pods still be stopping, and the mapping answers (CANCELLING,
            // or CANCELLED once it is deleted); never CANCELLED for a job that still runs.
            if recorded.state == JobState::Cancelled && (present || !self.seen_deleted(id)) {
                return None;
            }
            let answer = record_as_answered(recorded, meta.as_ref())?;
            self.remember(id, &answer, None);
            Some(answer)
        }
    }

    /// The recorded outcome of a job whose object the API server says is gone (a cancel's
    /// record among them, which [`Kind::final_answer`] leaves to the object while a watch not
    /// current cannot tell it gone); `None`: no such job.
    fn recorded_gone(
        &self,
        id: &ExecutionId,
    ) -> impl Future<Output = Option<ExecutionInfo>> + Send {
        async move {
            let recorded = self.records().recorded(id).await?;
            self.remember(id, &recorded, None);
            Some(recorded)
        }
    }

    /// The answer `info` stands as: for an outcome this replica would answer for the first
    /// time, the outcome the job's record holds (the record written first stands: another
    /// replica's, a cancel's), else `info` itself; or such an outcome not recorded yet
    /// ([`Standing::Unrecorded`]). `undeleted`: `info` was mapped from a copy of the object
    /// not being deleted, whose own outcome a cancel's record gives way to
    /// ([`Records::keep`]): the settler's to replace, too. `meta`: the object as `info` was
    /// mapped from it (`None`: gone), which says whether its record may be answered yet
    /// ([`record_as_answered`]).
    fn standing(
        &self,
        id: &ExecutionId,
        info: ExecutionInfo,
        previous: Option<&ExecutionInfo>,
        undeleted: bool,
        meta: Option<&ManagedMeta>,
    ) -> impl Future<Output = Standing> + Send {
        let first = info.is_terminal() && previous.is_none_or(|p| !p.is_terminal());
        async move {
            if !first {
                return Standing::Answer(info);
            }
            match self.records().recorded(id).await {
                Some(recorded) if undeleted && gives_way(&recorded, &info) => {
                    Standing::Unrecorded(info)
                }
                // Not answered yet while the object is held (`record_as_answered`): the
                // settler's to let go of.
                Some(recorded) => match record_as_answered(recorded, meta) {
                    Some(answer) => Standing::Answer(answer),
                    None => Standing::Unrecorded(info),
                },
                None if self.records().may_keep(&id.namespace) => Standing::Unrecorded(info),
                None => Standing::Answer(info),
            }
        }
    }

    /// Remembers an answer given for the job, computed from its object at `version`, as the
    /// one later answers build on (an older copy of the object no longer takes it back).
    fn remember(&self, id: &ExecutionId, info: &ExecutionInfo, version: Option<&str>) {
        self.namespaces()
            .remember(&id.namespace, &id.name, info, None, version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeferry_core::Reason;

    #[test]
    fn a_record_is_answered_once_its_object_is_let_go_and_gives_way_to_what_it_carries() {
        let recorded = ExecutionInfo::new(JobState::Succeeded, Reason::Completed);
        let mut other = recorded.clone();
        other.exit_code = Some(0);
        let held = ManagedMeta {
            held: Some(0),
            ..ManagedMeta::default()
        };
        let answer = |meta: Option<&ManagedMeta>| record_as_answered(recorded.clone(), meta);
        assert_eq!(answer(None), Some(recorded.clone()), "no object seen");
        assert_eq!(
            answer(Some(&held)),
            None,
            "held: its settler lets it go first"
        );
        let deleted = ManagedMeta {
            deletion_timestamp: Some(Timestamp::UNIX_EPOCH),
            ..held.clone()
        };
        assert_eq!(answer(Some(&deleted)), Some(recorded.clone()), "deleted");
        let let_go = ManagedMeta::default();
        assert_eq!(answer(Some(&let_go)), Some(recorded.clone()), "let go");
        let same = ManagedMeta {
            kept_outcome: Some(recorded.clone()),
            ..ManagedMeta::default()
        };
        assert_eq!(answer(Some(&same)), Some(recorded.clone()));
        let carrying = ManagedMeta {
            kept_outcome: Some(other.clone()),
            ..held.clone()
        };
        assert_eq!(answer(Some(&carrying)), Some(other), "the object's, first");
        // A cancel's copy gives way to the job's own end, as its record does.
        let cancelled = ExecutionInfo::new(JobState::Cancelled, Reason::CancelRequested);
        let cancel_copy = ManagedMeta {
            kept_outcome: Some(cancelled.clone()),
            ..ManagedMeta::default()
        };
        assert_eq!(answer(Some(&cancel_copy)), Some(recorded.clone()));
        let decided_on_it = ManagedMeta {
            recorded_outcome: Some(Ok(cancelled.clone())),
            ..held
        };
        assert_eq!(answer(Some(&decided_on_it)), Some(recorded));
    }
}
