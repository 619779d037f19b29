//! The durable outcome records of the watched namespaces (`kubeferry_core::record`): one watch
//! of them per namespace, every kind's together, and the one place they are read, created
//! and expired. A Role without ConfigMaps still runs jobs: the records are then not kept,
//! and that is said once per namespace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use kubeferry_core::marks::{JOB_ID_LABEL, job_id_label_value};
use kubeferry_core::record::{OutcomeRecord, RECORDS_SELECTOR, expired, record_name};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::sync::oneshot;
use tracing::{info, warn};

use crate::cluster::{Cluster, Op};
use crate::error::{ALL_NAMESPACES, Error, Result};
use crate::objects::{Objects, name_taken};
use crate::tracker::{Entry, Recent, Reflector, ReflectorSettings, WatchHealth, lock};

const CONFIGMAPS: &str = "configmaps";

/// How long outcome records are kept, and how often they are looked at.
#[derive(Clone, Debug)]
pub struct RecordSettings {
    /// How long a job's outcome is kept after it ended: within it, a job id submitted again
    /// answers with the first run's outcome and never runs twice. Default 7 days.
    pub retention: Duration,
    /// How often each watched namespace's expired records are deleted.
    pub janitor_interval: Duration,
    /// How much of its main container's log a job's record keeps when its job file does not
    /// say (`keepLog`); off by default: the kubelet's last words only.
    pub keep_log: Option<kubeferry_core::marks::KeepLog>,
    /// How long a job's object kubeferry deleted (a cancel, a job it stopped) keeps its name
    /// after its outcome record before it is let go: a submission of its job id still on its
    /// way then finds the name taken and answers the record, rather than running the job
    /// again. At least the longest a request may take (`ClusterSettings::read_timeout`).
    /// Default 30 s.
    pub name_hold: Duration,
}

impl Default for RecordSettings {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(7 * 24 * 3600),
            janitor_interval: Duration::from_secs(10 * 60),
            keep_log: None,
            name_hold: Duration::from_secs(30),
        }
    }
}

/// A record as the watch holds it: what answers for the job, and what its expiry needs (the
/// job id and spec hash are read from the server when a submission needs them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    outcome: ExecutionInfo,
    recorded_at: Option<Timestamp>,
    /// When the job's object was created: which run of its job id the record is of.
    created_at: Option<Timestamp>,
    /// The ConfigMap's uid, for a delete that must not take a newer record of the same name.
    uid: String,
}

/// How many records seen deleted each namespace's watch remembers (for its tombstones' TTL),
/// to write them again as they were.
const LOST_RECORDS_KEPT: usize = 1_000;

/// The records of one cluster's watched namespaces.
pub(crate) struct Records {
    cluster: Cluster,
    reflector: ReflectorSettings,
    settings: RecordSettings,
    /// How long a question waits for a namespace's first list of records.
    sync_timeout: Duration,
    namespaces: Mutex<HashMap<String, Arc<Reflector<Kept>>>>,
    /// The namespaces whose records cannot be kept, said once each.
    warned: Recent,
    /// The records this process kept lately, by `namespace/name`: its watch delivers them a
    /// moment later, and meanwhile they are answered from here and not written again.
    kept: Mutex<KeptLately>,
    /// Submissions' lookups of records waiting for the next read of their namespace.
    lookups: Mutex<HashMap<String, Waiting>>,
}

/// A namespace's lookups waiting for a read, and whether a reader is running for them.
#[derive(Default)]
struct Waiting {
    lookups: Vec<Lookup>,
    reading: bool,
}

/// A submission waiting to learn whether its job id has a record.
struct Lookup {
    name: String,
    job_id: String,
    answer: oneshot::Sender<Option<OutcomeRecord>>,
}

/// At most this many lookups are answered by one read (its label selector names each job id).
const LOOKUPS_PER_READ: usize = 64;

/// The outcomes this process recorded lately, until the watch delivers them (bounded: the
/// oldest go first, and by then the watch holds them).
#[derive(Default)]
struct KeptLately {
    /// Each answer, with when this process kept or read it.
    records: HashMap<String, (ExecutionInfo, Timestamp)>,
    order: std::collections::VecDeque<String>,
}

impl KeptLately {
    const CAPACITY: usize = 1_024;

    /// The answer kept for `key`, unless the record is past `retention` since (expired, its
    /// job id may have run again).
    fn get(&self, key: &str, retention: Duration) -> Option<ExecutionInfo> {
        let (record, kept_at) = self.records.get(key)?;
        (!expired(Some(*kept_at), Timestamp::now(), retention)).then(|| record.clone())
    }

    fn insert(&mut self, key: String, record: ExecutionInfo) {
        let kept = (record, Timestamp::now());
        if self.records.insert(key.clone(), kept).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > Self::CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.records.remove(&oldest);
            }
        }
    }
}

impl Records {
    /// Records of `cluster`, watched with `reflector`'s settings.
    pub(crate) fn new(
        cluster: Cluster,
        reflector: ReflectorSettings,
        settings: RecordSettings,
        sync_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            cluster,
            reflector: ReflectorSettings {
                // A refused watch (a Role without ConfigMaps) runs jobs all the same.
                optional: true,
                // A record deleted by hand is written again as it was (`keep_with_tail`).
                max_tombstones: LOST_RECORDS_KEPT,
                ..reflector
            },
            settings,
            sync_timeout,
            namespaces: Mutex::default(),
            warned: Recent::new(10_000),
            kept: Mutex::default(),
            lookups: Mutex::default(),
        })
    }

    fn api(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(self.cluster.client().clone(), namespace)
    }

    /// The watch of `namespace`'s records, started (with its janitor) if it is not yet.
    pub(crate) fn watch(self: &Arc<Self>, namespace: &str) -> Arc<Reflector<Kept>> {
        let mut namespaces = lock(&self.namespaces);
        if let Some(watch) = namespaces.get(namespace) {
            return watch.clone();
        }
        let watch = Arc::new(Reflector::spawn(
            self.api(namespace),
            watcher::Config::default().labels(RECORDS_SELECTOR),
            self.reflector.clone(),
            |config_map: &ConfigMap| {
                let record = OutcomeRecord::read(&config_map.metadata, config_map.data.as_ref())?;
                let name = config_map.metadata.name.clone()?;
                // Found by name alone: as its own job, a record costs no entry in the index of
                // the objects by job.
                Some(Entry {
                    job: name.clone(),
                    name,
                    view: Kept {
                        outcome: record.outcome,
                        recorded_at: record.recorded_at,
                        created_at: record.created_at,
                        uid: config_map.metadata.uid.clone().unwrap_or_default(),
                    },
                })
            },
        ));
        namespaces.insert(namespace.to_string(), watch.clone());
        tokio::spawn(expire(
            Arc::downgrade(self),
            Arc::downgrade(&watch),
            namespace.to_string(),
        ));
        watch
    }

    /// The health of `namespace`'s watch of records, started if need be.
    pub(crate) fn namespace_health(self: &Arc<Self>, namespace: &str) -> (String, WatchHealth) {
        (CONFIGMAPS.to_string(), self.watch(namespace).health())
    }

    /// The health of each namespace's watch of records.
    pub(crate) fn health(&self) -> Vec<(String, String, WatchHealth)> {
        lock(&self.namespaces)
            .iter()
            .map(|(namespace, watch)| (namespace.clone(), CONFIGMAPS.to_string(), watch.health()))
            .collect()
    }

    /// The recorded outcome of a job, from the watch (after its first list, at most the sync
    /// timeout); no request.
    pub(crate) async fn recorded(self: &Arc<Self>, id: &ExecutionId) -> Option<ExecutionInfo> {
        let name = record_name(id.kind, &id.name);
        let watch = self.watch(&id.namespace);
        watch.wait_synced(self.sync_timeout).await;
        let kept =
            lock(&self.kept).get(&format!("{}/{name}", id.namespace), self.settings.retention);
        newer(watch.get(&name).map(|entry| entry.view.outcome), kept)
    }

    /// The record of a job, read from the API server (a submission must not trust a watch that
    /// may lag the record of a run that ended a moment ago); `None` when there is none, or
    /// when records cannot be read here (said once).
    pub(crate) async fn fetch(
        &self,
        namespace: &str,
        kind: JobKind,
        object: &str,
    ) -> Result<Option<OutcomeRecord>> {
        let name = record_name(kind, object);
        let api = self.api(namespace);
        let op = Op::named("get", CONFIGMAPS, namespace, &name);
        match self.cluster.call(&op, true, || api.get_opt(&name)).await {
            Ok(found) => {
                Ok(found.and_then(|cm| OutcomeRecord::read(&cm.metadata, cm.data.as_ref())))
            }
            Err(error @ Error::Forbidden { .. }) => {
                self.cannot_keep(namespace, &error);
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// The record of a job about to be submitted, read from the API server (a submission must
    /// not trust a watch that may lag the record of a run that ended a moment ago). The
    /// submissions asking while one read of the namespace is under way are answered together
    /// by the next, one LIST selecting their job ids: each read starts after every question it
    /// answers was asked, so it is as fresh as a GET of each, and a burst of submissions costs
    /// a few reads instead of one each. Should that read fail, each asks on its own.
    pub(crate) async fn lookup(
        self: &Arc<Self>,
        namespace: &str,
        kind: JobKind,
        object: &str,
        job_id: &str,
    ) -> Result<Option<OutcomeRecord>> {
        let (answer, answered) = oneshot::channel();
        let lookup = Lookup {
            name: record_name(kind, object),
            job_id: job_id.to_string(),
            answer,
        };
        let start_reader = {
            let mut lookups = lock(&self.lookups);
            let waiting = lookups.entry(namespace.to_string()).or_default();
            waiting.lookups.push(lookup);
            !std::mem::replace(&mut waiting.reading, true)
        };
        if start_reader {
            tokio::spawn(self.clone().read_lookups(namespace.to_string()));
        }
        match answered.await {
            Ok(record) => Ok(record),
            // The batched read failed: this submission reads its own record.
            Err(_) => self.fetch(namespace, kind, object).await,
        }
    }

    /// Answers `namespace`'s waiting lookups, a LIST at a time, until none are left.
    async fn read_lookups(self: Arc<Self>, namespace: String) {
        // Submissions started together reach their lookups a moment apart: they are let in
        // before the first read.
        tokio::task::yield_now().await;
        loop {
            let batch: Vec<Lookup> = {
                let mut lookups = lock(&self.lookups);
                let Some(waiting) = lookups.get_mut(&namespace) else {
                    return;
                };
                if waiting.lookups.is_empty() {
                    // Under the lock: a lookup asked after this starts a reader of its own.
                    lookups.remove(&namespace);
                    return;
                }
                let take = waiting.lookups.len().min(LOOKUPS_PER_READ);
                waiting.lookups.drain(..take).collect()
            };
            let mut job_ids: Vec<String> = batch
                .iter()
                .map(|lookup| job_id_label_value(&lookup.job_id))
                .collect();
            job_ids.sort();
            job_ids.dedup();
            let selector = format!(
                "{RECORDS_SELECTOR},{JOB_ID_LABEL} in ({})",
                job_ids.join(",")
            );
            let api = self.api(&namespace);
            let op = Op::collection("list", CONFIGMAPS, &namespace);
            let params = ListParams::default().labels(&selector);
            match self.cluster.call(&op, true, || api.list(&params)).await {
                Ok(listed) => {
                    for lookup in batch {
                        let record = listed
                            .items
                            .iter()
                            .find(|cm| cm.metadata.name.as_deref() == Some(&lookup.name))
                            .and_then(|cm| OutcomeRecord::read(&cm.metadata, cm.data.as_ref()));
                        let _ = lookup.answer.send(record);
                    }
                }
                Err(error @ Error::Forbidden { .. }) => {
                    self.cannot_keep(&namespace, &error);
                    for lookup in batch {
                        let _ = lookup.answer.send(None);
                    }
                }
                // Dropping the senders sends each submission to read its own record, and so
                // to its own error (or to the permission it lacks, said once).
                Err(_) => drop(batch),
            }
        }
    }

    /// The records of `namespace`, or of every namespace when it is `None`, within the
    /// retention, that match `selector` (a record carries the job id's label, not the job's
    /// other labels): one LIST. With each, its namespace. Empty where records cannot be read
    /// (said once).
    pub(crate) async fn listed(
        &self,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<(String, OutcomeRecord)>> {
        let selector = match selector.filter(|s| !s.is_empty()) {
            Some(selector) => format!("{RECORDS_SELECTOR},{selector}"),
            None => RECORDS_SELECTOR.to_string(),
        };
        let params = ListParams::default().labels(&selector);
        let api = match namespace {
            Some(namespace) => self.api(namespace),
            None => Api::all(self.cluster.client().clone()),
        };
        let scope = namespace.unwrap_or(ALL_NAMESPACES);
        let op = Op::collection("list", CONFIGMAPS, scope);
        let listed = match self.cluster.call(&op, true, || api.list(&params)).await {
            Ok(listed) => listed,
            Err(error @ Error::Forbidden { .. }) => {
                self.cannot_keep(scope, &error);
                return Ok(Vec::new());
            }
            Err(error) => return Err(error),
        };
        let now = Timestamp::now();
        Ok(listed
            .items
            .iter()
            .filter_map(|cm| {
                let record = OutcomeRecord::read(&cm.metadata, cm.data.as_ref())?;
                let namespace = cm.metadata.namespace.clone()?;
                (!record.expired(now, self.settings.retention)).then_some((namespace, record))
            })
            .collect())
    }

    /// Records `record` unless the job is recorded already (a record another replica wrote
    /// first wins: a create of an existing record answers 409, and the existing one is read),
    /// and answers the outcome that stands: the job's answer from now on, here and on every
    /// replica. Nothing is kept where records cannot be (said once).
    ///
    /// A record that stands is never replaced by another reading of the same end, even one
    /// that tells more (an exit code another replica's views lacked): a replica may have
    /// answered it already, and a terminal answer never changes (I1).
    ///
    /// Only a cancel's record gives way: its CANCELLED, written before its delete, to the job's own
    /// outcome read from a copy of its object that is not being deleted (`undeleted`): the job
    /// ended before the cancel's delete, and an outcome reached before the work was stopped stands
    /// (docs/statuses.md, rule 1). The cancel's delete, made at the version it saw running, is
    /// refused then, and a cancel's record is answered only for an object deleted or gone
    /// (`Kind::final_answer`): no replica answered that CANCELLED meanwhile.
    pub(crate) async fn keep(
        self: &Arc<Self>,
        namespace: &str,
        record: OutcomeRecord,
        undeleted: bool,
    ) -> Result<ExecutionInfo> {
        let reading = Reading {
            undeleted,
            carried: false,
        };
        self.keep_with_tail(namespace, record, reading, std::future::ready(None))
            .await
    }

    /// [`Records::keep`], the record's last words being `tail` when it tells more than the
    /// kubelet's (a longer tail of the log, read only when no record stands yet: at most one
    /// request per ended job).
    ///
    /// Where the outcome is the one the job's object carries (`reading.carried`: the copy of
    /// a record, else the outcome kubeferry recorded on it), a record that says otherwise gives
    /// way to it. The object's outcome was written first and answered first: the record was
    /// deleted by hand and written again from another replica's reading, before its watches
    /// showed the object's (`kind::record_as_answered`).
    pub(crate) async fn keep_with_tail(
        self: &Arc<Self>,
        namespace: &str,
        mut record: OutcomeRecord,
        reading: Reading,
        tail: impl Future<Output = Option<String>>,
    ) -> Result<ExecutionInfo> {
        let Reading { undeleted, carried } = reading;
        let name = record_name(record.kind, &record.object);
        let watch = self.watch(namespace);
        // A watch that has not listed yet (a process just started) cannot tell whether another
        // replica recorded the job already.
        watch.wait_synced(self.sync_timeout).await;
        let key = format!("{namespace}/{name}");
        let kept = lock(&self.kept).get(&key, self.settings.retention);
        // Whether a record that stands gives way, judged by the outcome as mapped.
        let mapped = record.outcome.clone();
        let replaced = |standing: &ExecutionInfo| {
            replaced_by(standing, &mapped, undeleted)
                || (carried && *standing != mapped && !gives_way(&mapped, standing))
        };
        match newer(watch.get(&name).map(|entry| entry.view.outcome), kept) {
            Some(standing) if replaced(&standing) => {
                return self.replace(namespace, &name, record, replaced).await;
            }
            Some(standing) => return Ok(standing),
            None => {}
        }
        // A record of this very run (its object created at the same time) that this process
        // saw deleted, by hand or by a sweep: it was answered, and it is written again as it
        // was, whatever this process maps now (its copy of the object may predate the one
        // that carries the record's copy, and its pods may be gone). A later run of the job
        // id is recorded as mapped.
        let lost = watch
            .tombstone(&name)
            .filter(|lost| {
                lost.last
                    .created_at
                    .is_some_and(|at| Some(at) == record.created_at)
            })
            .map(|lost| lost.last.outcome)
            .filter(|lost| !replaced(lost));
        if let Some(lost) = lost {
            record.outcome = lost;
        } else if let Some(tail) = tail.await {
            let words = &mut record.outcome.last_words;
            if words.as_ref().is_none_or(|words| words.len() < tail.len()) {
                *words = Some(tail);
            }
        }
        let config_map = config_map_of(namespace, &name, &record)?;
        let api = self.api(namespace);
        let op = Op::named("create", CONFIGMAPS, namespace, &name);
        let params = PostParams::default();
        // Tried again when its answer was lost: a create that went through answers 409 then,
        // and the record that stands is read.
        match self
            .cluster
            .call(&op, true, || api.create(&params, &config_map))
            .await
        {
            Ok(_) => {
                info!(message = "recorded an outcome", namespace, record = %name, state = %record.outcome.state, reason = %record.outcome.reason, exit_code = ?record.outcome.exit_code);
                lock(&self.kept).insert(key, record.outcome.clone());
                Ok(record.outcome)
            }
            Err(error) if error.is_conflict() => {
                match self.fetch(namespace, record.kind, &record.object).await? {
                    Some(standing) if replaced(&standing.outcome) => {
                        self.replace(namespace, &name, record, replaced).await
                    }
                    Some(standing) => {
                        lock(&self.kept).insert(key, standing.outcome.clone());
                        Ok(standing.outcome)
                    }
                    // Expired between the create and the read: there was one, and this is
                    // all that is known of it.
                    None => Ok(record.outcome),
                }
            }
            // Refused for good (no permission, or a server that will not take it): said once,
            // and this process answers the outcome it would have recorded.
            Err(
                error @ (Error::Forbidden { .. }
                | Error::Api {
                    code: 400 | 422, ..
                }),
            ) => {
                self.cannot_keep(namespace, &error);
                lock(&self.kept).insert(key, record.outcome.clone());
                Ok(record.outcome)
            }
            Err(error) => Err(error),
        }
    }

    /// Replaces the record of the job with `record` (see [`Records::keep_with_tail`]): the
    /// job's own outcome for a cancel's, the object's outcome for another, unless the record
    /// that stands by then is not `replaced` by it. The replace carries the resourceVersion it
    /// read: a record changed meanwhile is read again.
    async fn replace(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        record: OutcomeRecord,
        replaced: impl Fn(&ExecutionInfo) -> bool,
    ) -> Result<ExecutionInfo> {
        let api = self.api(namespace);
        let key = format!("{namespace}/{name}");
        let mut replacement = config_map_of(namespace, name, &record)?;
        for _ in 0..5 {
            let op = Op::named("get", CONFIGMAPS, namespace, name);
            let Some(current) = self.cluster.call(&op, true, || api.get_opt(name)).await? else {
                // Expired meanwhile: nothing stands in the outcome's way.
                return Box::pin(self.keep(namespace, record, false)).await;
            };
            // An unreadable record answers nothing (every reader ignores it): it is replaced.
            let standing = OutcomeRecord::read(&current.metadata, current.data.as_ref())
                .map(|standing| standing.outcome);
            if let Some(standing) = standing.filter(|s| !replaced(s)) {
                lock(&self.kept).insert(key, standing.clone());
                return Ok(standing);
            }
            replacement.metadata.resource_version = current.metadata.resource_version.clone();
            let op = Op::named("update", CONFIGMAPS, namespace, name);
            let params = PostParams::default();
            // Not repeated on a lost response: the precondition makes a repeat answer 409,
            // and the loop reads again.
            match self
                .cluster
                .call(&op, false, || api.replace(name, &params, &replacement))
                .await
            {
                Ok(_) => {
                    info!(message = "replaced an outcome record: the job's own end for its cancel's, or the outcome its object carries", namespace, record = %name, state = %record.outcome.state, reason = %record.outcome.reason, exit_code = ?record.outcome.exit_code);
                    lock(&self.kept).insert(key, record.outcome.clone());
                    return Ok(record.outcome);
                }
                Err(error) if error.is_conflict() => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Contended {
            operation: format!("update ConfigMap {namespace}/{name}"),
            message: "the outcome record kept changing".to_string(),
        })
    }

    /// How the object of `kind` that `meta` shows holds its name once its record is kept
    /// ([`RecordSettings::name_hold`]): only if kubeferry deleted it (as `meta` shows, or
    /// `deleted_now` by the settle that asks), from the record's time as the watch holds it.
    pub(crate) fn name_hold(
        self: &Arc<Self>,
        meta: &kubeferry_core::observation::ManagedMeta,
        kind: JobKind,
        deleted_now: bool,
    ) -> NameHold {
        let recorded_at = self
            .watch(&meta.namespace)
            .get(&record_name(kind, &meta.name))
            .and_then(|entry| entry.view.recorded_at);
        NameHold {
            length: self.settings.name_hold,
            kubeferry_deleted: deleted_now || meta.deleted_by_kubeferry(),
            recorded_at,
        }
    }

    /// Whether `namespace`'s records can be kept: not when the server refuses them (a Role
    /// without ConfigMaps), as its watch says.
    pub(crate) fn may_keep(self: &Arc<Self>, namespace: &str) -> bool {
        self.watch(namespace).health().refused().is_none()
    }

    /// Says once per namespace that its records cannot be kept.
    fn cannot_keep(&self, namespace: &str, error: &Error) {
        if self.warned.insert(namespace.to_string()) {
            warn!(message = "outcome records cannot be kept here: a job's outcome is then known only while its objects last, and a job id submitted again after they are gone runs again", namespace, %error);
        }
    }

    fn objects(&self, namespace: &str) -> Objects<ConfigMap> {
        Objects {
            api: self.api(namespace),
            resource: CONFIGMAPS,
            kind: "ConfigMap",
            namespace: namespace.to_string(),
            dependents_first: false,
        }
    }
}

/// The ConfigMap `namespace/name` that holds `record`.
fn config_map_of(namespace: &str, name: &str, record: &OutcomeRecord) -> Result<ConfigMap> {
    serde_json::from_value(record.config_map(namespace)).map_err(|source| Error::Manifest {
        operation: format!("build ConfigMap {namespace}/{name}"),
        source,
    })
}

/// How the outcome to record was read ([`Records::keep_with_tail`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Reading {
    /// Mapped from a copy of the object not being deleted, whose own end a cancel's record
    /// gives way to.
    pub(crate) undeleted: bool,
    /// The outcome the object carries, which a record that says otherwise gives way to.
    pub(crate) carried: bool,
}

/// Whether the recorded outcome `standing` gives way to `outcome`: a cancel's CANCELLED to
/// the job's own end (see [`Records::keep`]).
pub(crate) fn gives_way(standing: &ExecutionInfo, outcome: &ExecutionInfo) -> bool {
    standing.state == JobState::Cancelled
        && outcome.is_terminal()
        && outcome.state != JobState::Cancelled
}

/// Whether the record `standing` is replaced by `outcome`: only a cancel's CANCELLED, by the
/// job's own end read from an object not being deleted (`undeleted`). Any other record stands,
/// whatever another reading of the same end tells (two replicas that read it from different
/// views: the one written first is the one answered).
fn replaced_by(standing: &ExecutionInfo, outcome: &ExecutionInfo, undeleted: bool) -> bool {
    undeleted && gives_way(standing, outcome)
}

/// The newer of two answers for the same record, the watch's and the one this process kept
/// lately: a record changes only when a cancel's gives way to the job's own outcome.
fn newer(watched: Option<ExecutionInfo>, kept: Option<ExecutionInfo>) -> Option<ExecutionInfo> {
    match (watched, kept) {
        (Some(watched), Some(kept)) if replaced_by(&watched, &kept, true) => Some(kept),
        (watched, kept) => watched.or(kept),
    }
}

/// Who asks for a cancel, as the cancel's mark and outcome record name them: `caller` (the
/// service's word for whom it acts, e.g. `token ci-bot`) through kubeferry on this host (a
/// replica's pod name), or with no caller the user this process runs as and its host, e.g.
/// `alice on laptop-3`.
pub(crate) fn requester(caller: Option<&str>) -> String {
    let host = hostname::get()
        .ok()
        .and_then(|host| host.into_string().ok())
        .or_else(|| std::env::var("HOSTNAME").ok());
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|user| !user.is_empty()));
    requester_named(caller, user, host.filter(|host| !host.is_empty()))
}

/// [`requester`], from what is known of this process.
fn requester_named(caller: Option<&str>, user: Option<String>, host: Option<String>) -> String {
    match (caller, user, host) {
        (Some(caller), _, Some(host)) => format!("{caller} through kubeferry on {host}"),
        (Some(caller), _, None) => format!("{caller} through kubeferry"),
        (None, Some(user), Some(host)) => format!("{user} on {host}"),
        (None, Some(user), None) => user,
        (None, None, Some(host)) => format!("a process on {host}"),
        (None, None, None) => "a process whose user and host are unknown".to_string(),
    }
}

/// Checks that a job id submitted again names the run whose outcome `record` holds: same job
/// id, same spec. Then the submission answers that run and creates nothing: a job id never
/// runs twice within the retention.
pub(crate) fn check_resubmission(
    record: &OutcomeRecord,
    kind: &'static str,
    namespace: &str,
    name: &str,
    job_id: &str,
    spec_hash: &str,
) -> Result<()> {
    let taken = name_taken(kind, namespace, name);
    match &record.job_id {
        Some(owner) if owner == job_id => {}
        Some(owner) => {
            return Err(taken(format!(
                "that name is job id {owner:?}'s, whose outcome is recorded; use another job id"
            )));
        }
        None => {
            return Err(taken(
                "an outcome record without a job id holds that name; use another job id".into(),
            ));
        }
    }
    if record.spec_hash.as_deref() != Some(spec_hash) {
        return Err(taken(format!(
            "job id {job_id:?} already ran with a different spec (it ended {}), and a job id names one run: submit this spec under another job id, or once that run's outcome record has expired",
            record.outcome.state
        )));
    }
    Ok(())
}

/// Deletes a namespace's records past their retention, every janitor interval, for as long
/// as the records and the namespace's watch last.
async fn expire(records: Weak<Records>, watch: Weak<Reflector<Kept>>, namespace: String) {
    let Some(interval) = records.upgrade().map(|r| r.settings.janitor_interval) else {
        return;
    };
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (Some(records), Some(watch)) = (records.upgrade(), watch.upgrade()) else {
            return;
        };
        let now = Timestamp::now();
        let expired: Vec<(String, String)> = watch
            .all()
            .into_iter()
            .filter(|entry| expired(entry.view.recorded_at, now, records.settings.retention))
            .map(|entry| (entry.name, entry.view.uid))
            .collect();
        drop(watch);
        let objects = records.objects(&namespace);
        for (name, uid) in expired {
            match objects.delete(&records.cluster, &name, &uid, None).await {
                Ok(_) => {
                    info!(message = "deleted an outcome record past its retention", namespace = %namespace, record = %name)
                }
                Err(error) => {
                    warn!(message = "cannot delete an outcome record past its retention", namespace = %namespace, record = %name, %error)
                }
            }
        }
    }
}

/// How long an object kubeferry deleted keeps its name once its record is kept
/// ([`crate::settling::release_held`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameHold {
    /// The name hold ([`RecordSettings::name_hold`]).
    pub(crate) length: Duration,
    /// Whether kubeferry deleted the object (its cancel, a settler's action):
    /// [`kubeferry_core::observation::ManagedMeta::deleted_by_kubeferry`], or this very settle.
    pub(crate) kubeferry_deleted: bool,
    /// When its record was written, where the records' watch shows it: the hold counts from
    /// then (the writer's clock), else from when this settler first found the record kept.
    pub(crate) recorded_at: Option<Timestamp>,
}

impl NameHold {
    /// When the hold is over, counted from `first_found`, how long ago this settler first
    /// found the object deleted with its record kept.
    pub(crate) fn over_at(&self, first_found: Duration) -> Option<Timestamp> {
        let since = match self.recorded_at {
            Some(at) => at,
            None => Timestamp::now()
                .checked_sub(jiff::SignedDuration::try_from(first_found).ok()?)
                .ok()?,
        };
        since
            .checked_add(jiff::SignedDuration::try_from(self.length).ok()?)
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{connect, eventually};
    use kubeferry_core::Reason;
    use kubeferry_sim::{SimCluster, SimConfig};

    /// Another process's records of the simulated cluster.
    async fn process(sim: &SimCluster) -> Arc<Records> {
        Records::new(
            connect(sim).await,
            ReflectorSettings::default(),
            RecordSettings::default(),
            Duration::from_secs(10),
        )
    }

    /// A record of the Job `j-1`, its object created at `created` (seconds).
    fn record(outcome: &ExecutionInfo, created: i64) -> OutcomeRecord {
        OutcomeRecord {
            kind: JobKind::Job,
            object: "j-1".into(),
            job_id: Some("j".into()),
            spec_hash: None,
            outcome: outcome.clone(),
            recorded_at: None,
            created_at: Some(Timestamp::from_second(1_800_000_000 + created).unwrap()),
            cancelled_by: None,
            attempts: Vec::new(),
        }
    }

    /// Deletes the record by hand, and waits until `watcher` saw it go.
    async fn delete_by_hand(watcher: &Arc<Records>) {
        let name = record_name(JobKind::Job, "j-1");
        let api = watcher.api("default");
        api.delete(&name, &Default::default())
            .await
            .expect("deleted");
        let watch = watcher.watch("default");
        eventually("the deletion seen", || watch.tombstone(&name).map(|_| ())).await;
    }

    #[tokio::test]
    async fn a_record_seen_deleted_is_written_again_as_it_was_for_the_same_run_only() {
        let sim = SimCluster::start(SimConfig::for_tests()).await.unwrap();
        let (first, other) = (process(&sim).await, process(&sim).await);
        let watch = other.watch("default");
        let name = record_name(JobKind::Job, "j-1");
        let disrupted = ExecutionInfo::new(JobState::Failed, Reason::Disrupted);
        let mut evicted = ExecutionInfo::new(JobState::Failed, Reason::Evicted);
        evicted.exit_code = Some(143);
        let kept = first.keep("default", record(&disrupted, 0), false).await;
        assert_eq!(kept.unwrap(), disrupted);
        eventually("the record seen", || watch.get(&name).map(|_| ())).await;
        delete_by_hand(&other).await;
        // Another process reads the same run's end otherwise (its copy of the object older,
        // its pods gone): the record is written again as it was, and answered.
        let again = other.keep("default", record(&evicted, 0), false).await;
        assert_eq!(again.unwrap(), disrupted);
        let fetched = other.fetch("default", JobKind::Job, "j-1").await.unwrap();
        assert_eq!(fetched.map(|r| r.outcome), Some(disrupted.clone()));
        // A later run of the job id (its object created later), seen by a third process that
        // saw the record deleted too, is recorded as it ended.
        let third = process(&sim).await;
        let third_watch = third.watch("default");
        eventually("the record seen again", || {
            third_watch.get(&name).map(|_| ())
        })
        .await;
        delete_by_hand(&third).await;
        let later = third.keep("default", record(&evicted, 60), false).await;
        assert_eq!(later.unwrap(), evicted);
    }

    #[test]
    fn a_requester_is_named_in_words_that_mean_something() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            requester_named(Some("token ci-bot"), some("root"), some("kubeferry-7d9f")),
            "token ci-bot through kubeferry on kubeferry-7d9f"
        );
        assert_eq!(
            requester_named(Some("token ci-bot"), None, None),
            "token ci-bot through kubeferry"
        );
        assert_eq!(
            requester_named(None, some("alice"), some("laptop-3")),
            "alice on laptop-3"
        );
        assert_eq!(requester_named(None, some("alice"), None), "alice");
        assert_eq!(
            requester_named(None, None, some("laptop-3")),
            "a process on laptop-3"
        );
        assert_eq!(
            requester_named(None, None, None),
            "a process whose user and host are unknown"
        );
    }
}
