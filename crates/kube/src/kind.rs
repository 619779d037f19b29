//! What a kind of job (a container Job, a SparkApplication, a JobSet, a bare pod) implements
//! once, [`Kind`], in the spirit of Kueue's `GenericJob`, and what every kind keeps
//! ([`Common`]): everything else (the status path and the settlers, create-or-adopt, cancel,
//! wait, logs, list, sweep, health) is written once over it (`evaluating.rs`, `protocol.rs`,
//! `objects.rs`, `tracker::Namespaces`).

use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Weak};
use std::time::Duration;

use jiff::Timestamp;
use kube::api::Api;
use kubeferry_core::marks::OUTCOME_ANNOTATION;
use kubeferry_core::observation::{ManagedMeta, Mapped, Observation, RecordOutcomeAndDelete};
use kubeferry_core::timeline::Attempt as RecordedAttempt;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::sync::broadcast;
use tracing::{debug, info};

use futures::stream::BoxStream;

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::objects::{Attempt, Current, Deletion, Object, Objects};
use crate::records::{Records, check_resubmission, gives_way};
use crate::replies::Placement;
use crate::replies::Submission;
use crate::selector::SelectorEvent;
use crate::settling::{Releases, Settlers};
use crate::tracker::{Departure, Namespaces, Recent, Reflector, Tombstone, WatchHealth, Watching};

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

/// What is known of a job: its object as observed (`V`, the kind's view), and what else its
/// mapping reads (`P`: a JobSet's Jobs and pods, an application's driver pods).
pub(crate) struct Found<V, P> {
    pub(crate) observed: Seen<V>,
    pub(crate) parts: P,
    /// Whether the parts were listed from the API server just now (not from a cache).
    pub(crate) listed: bool,
}

/// Whether a mapping's actions are carried out now (the settler does) or handed to the
/// namespace's settler (a status query, a wait or a list does: they write nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acting {
    Carry,
    Delegate,
}

/// A job's object and parts as looked at, and what they decide.
pub(crate) type Looked<'a, K> = (
    &'a <K as Kind>::View,
    &'a <K as Kind>::Parts,
    &'a Mapped<<K as Kind>::Action>,
);

/// What the parts as the API server lists them tell ([`Kind::relisted`]).
pub(crate) enum Relisted<P> {
    /// Nothing the cache does not: decide from it.
    Same,
    /// These, newer than the cache's: decide from them.
    Fresh(P),
    /// Not yet: their watch may deliver what lags in a moment, or they could not be listed
    /// (why): look again at the retry interval, deciding nothing meanwhile.
    Later(Option<Error>),
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
    /// The object changed since it was read (what its parts show may have changed too): the
    /// job is judged again when the watches deliver the new copy.
    Changed,
    /// It failed; the job is not decided yet.
    Failed(Error),
}

/// What a list, a read or the watches found of a kind's job.
pub(crate) type FoundOf<K> = Found<<K as Kind>::View, <K as Kind>::Parts>;

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

/// What every kind keeps besides its settings: its base (the cluster, its watched namespaces
/// and their last answers, the outcome records), its settlers, and what it saw.
pub(crate) struct Common<K: Kind> {
    /// The cluster, each watched namespace's watches and last answers, and the outcome records.
    pub(crate) base: KindBase<K::Watches>,
    /// The kind, for the settlers it starts.
    pub(crate) me: Weak<K>,
    /// Each watched namespace's settler, the one writer of its jobs.
    pub(crate) settlers: Settlers<FoundOf<K>>,
    /// The warnings logged, each once.
    pub(crate) warned: Recent,
    /// Copies of objects (namespace, name and resourceVersion) an action found gone.
    pub(crate) found_gone: Recent,
    /// The objects a settler let go of lately, or holds a while first (`settling::release_held`).
    pub(crate) releases: Releases,
    /// How its watches run and its readers wait, as its settings say.
    pub(crate) watching: Watching,
}

/// What every kind of one cluster is built over: the cluster, and the outcome records.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) cluster: Cluster,
    pub(crate) records: Arc<Records>,
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

/// How a kind answers for its jobs: written once for every kind (`evaluating.rs`).
pub(crate) trait Answers: Kind {
    /// The job's status (from the watch cache where possible; writes nothing).
    fn status(&self, id: &ExecutionId) -> impl Future<Output = Result<ExecutionInfo>> + Send;

    /// The status of a job a list found (writes nothing: an action due goes to the settler).
    fn status_of(
        &self,
        id: &ExecutionId,
        found: FoundOf<Self>,
    ) -> impl Future<Output = Result<ExecutionInfo>> + Send;

    /// The jobs of each watched namespace by state, as its settler last mapped them.
    fn jobs_by_state(&self) -> Vec<(String, JobState, usize)>;
}

/// A kind of job, the one trait each kind implements: how its objects are found, watched,
/// read and mapped, and how the actions its mapping asks for are carried out. The status
/// query, the settlers and everything else are written once over it (`evaluating.rs`,
/// `protocol.rs`).
pub(crate) trait Kind: Sized + Send + Sync + 'static {
    /// The object a job of this kind runs as.
    type Object: Object;
    /// What the kind watches in one namespace.
    type Watches: Watches;
    /// The lean view of the kind's object.
    type View: Deref<Target = ManagedMeta> + Clone + Send + Sync + 'static;
    /// What the mapping reads besides the object.
    type Parts: Send + 'static;
    /// What the mapping asks to be done before an outcome stands.
    type Action: Outcome;

    /// The kind, as execution ids name it.
    const JOB_KIND: JobKind;
    /// Its object, as messages name it.
    const NOUN: &'static str = Self::JOB_KIND.object_kind();

    /// What it keeps in common with every kind.
    fn common(&self) -> &Common<Self>;

    /// What it keeps as every kind does: the cluster, its namespaces, the records.
    fn base(&self) -> &KindBase<Self::Watches> {
        &self.common().base
    }

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
    ) -> impl Future<Output = Result<Vec<Listed<FoundOf<Self>>>>> + Send;

    /// Every managed object of `namespace`, by where it lives (a kind may keep its objects in
    /// several resources: each Spark operator its own).
    fn managed(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<ManagedObjects<Self::Object>>>> + Send;

    /// The names a job of `job_id` may have here (one, a function of the job id, unless the
    /// kind's objects are named otherwise elsewhere).
    fn object_names(&self, job_id: &str) -> Vec<String>;

    /// The APIs of the kind's objects in `namespace` that the cluster serves (none when it
    /// serves none; each Spark operator's its own): what [`Kind::matching`] watches.
    fn served_apis(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Api<Self::Object>>>> + Send;

    /// `selector`, already narrowed to managed objects, narrowed to the kind's objects where
    /// its APIs hold others too.
    fn narrowed(&self, selector: &str) -> String {
        selector.to_string()
    }

    /// Follows which managed jobs of `namespace` match `selector` (a Kubernetes label
    /// selector, evaluated by the API server), for as long as the stream is read
    /// ([`crate::Executor::matching`]): one watch per API it is served from, relisting on 410
    /// and reconnecting with backoff like the tracker's. Statuses come from the status path,
    /// changes of status from the watches' notifications; this stream only says which jobs
    /// to look at. A failing watch is retried and logged, not yielded: check the selector
    /// first (e.g. with [`crate::Executor::list`]).
    fn matching(
        self: &Arc<Self>,
        namespace: &str,
        selector: &str,
    ) -> BoxStream<'static, SelectorEvent> {
        let (kind, ns) = (self.clone(), namespace.to_string());
        let served = move || {
            let (kind, ns) = (kind.clone(), ns.clone());
            async move { kind.served_apis(&ns).await }
        };
        crate::selector::after_discovery(
            (self.cluster().clone(), Self::JOB_KIND),
            namespace,
            &self.narrowed(&crate::selector::managed(selector)),
            self.common().watching.reflector.watch_timeout,
            served,
        )
    }

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
                self.namespaces().note_creating(namespace, name);
                return Ok(None);
            };
            check_resubmission(&record, Self::NOUN, namespace, name, job_id, spec_hash)?;
            Ok(Some(self.id(namespace, name)))
        }
    }

    /// Submits the job's object `object` (named as it says), unless `job_id`'s run ended already
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
        job_id: &str,
        spec_hash: &str,
    ) -> impl Future<Output = Result<Submission>> + Send {
        async move {
            let name = object.meta().name.as_deref().unwrap_or_default();
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
            let created = objects
                .create_or_adopt(self.cluster(), object, job_id, spec_hash, recorded)
                .await;
            if !matches!(created, Ok(Some(true))) {
                self.namespaces().forget_creating(namespace, name);
            }
            let Some(created) = created? else {
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
            .remember(&id.namespace, &id.name, info, version);
    }

    /// What the namespace's watches know of the job, if they saw it.
    fn observed(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
    ) -> impl Future<Output = Option<FoundOf<Self>>> + Send;

    /// What a status query needs besides what the watches know: the parts listed when their
    /// watches are not current. Nothing by default.
    fn complete(
        &self,
        _watch: &Self::Watches,
        _id: &ExecutionId,
        found: FoundOf<Self>,
    ) -> impl Future<Output = Result<FoundOf<Self>>> + Send {
        async move { Ok(found) }
    }

    /// The job's object and parts read from the API server; `None` when there is no object.
    fn fetched(
        &self,
        watch: &Self::Watches,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Option<FoundOf<Self>>>> + Send;

    /// The kind's mapping of the job as observed, at `now`, given what was answered before
    /// (`previous`): pure, as the core's mappings are.
    fn map(
        &self,
        id: &ExecutionId,
        observed: &Seen<Self::View>,
        parts: &Self::Parts,
        previous_and_now: (Option<&ExecutionInfo>, Timestamp),
    ) -> Option<Mapped<Self::Action>>;

    /// Before an outcome is first reported: the parts as the API server lists them now, when
    /// that tells something the cache did not (their watches may lag the object's), given the
    /// object and parts `looked` at and what they decide (`mapped`). `acting`: whether the
    /// settler asks, or a query that hands the job to it.
    fn relisted(
        &self,
        id: &ExecutionId,
        looked: Looked<'_, Self>,
        acting: Acting,
    ) -> impl Future<Output = Relisted<Self::Parts>> + Send;

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
    fn attempts_in(&self, view: &Self::View, parts: &Self::Parts) -> Vec<RecordedAttempt>;

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

    /// Whether the cancel of a job marked cancelled that nobody finished (its process gone
    /// between the mark and the delete) may be finished now, and from what status: by default
    /// now, from `info`, the job's status. `Err`: not now; when to look at it again.
    fn abandoned_cancel(
        &self,
        _view: &Self::View,
        info: &ExecutionInfo,
    ) -> impl Future<Output = std::result::Result<ExecutionInfo, Option<Timestamp>>> + Send {
        async move { Ok(info.clone()) }
    }

    /// How often a waiter looks again when nothing changes (time-based rules), and how soon a
    /// job whose settling failed is looked at again.
    fn recheck_interval(&self) -> Duration {
        self.common().watching.recheck_interval
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
