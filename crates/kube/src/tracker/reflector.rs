//! A label- or field-scoped watch of one resource in one namespace, kept as small views in
//! memory.
//!
//! kube-runtime's watcher does the hard parts: it lists, watches from the list's
//! resourceVersion, relists on 410 Gone, reconnects with jittered backoff, and restarts a watch
//! that stays silent past its timeout (a stalled connection). This module keeps only what the
//! status mappings read (a view per object, never the whole object) and remembers how each
//! object went away: a DELETED event carries the object's final state, an object that is merely
//! missing from a relist does not.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::retry::RetryPolicy;

/// What the reflector keeps of one object: its name, the key of the job it belongs to, and its
/// view.
#[derive(Clone, Debug)]
pub struct Entry<V> {
    /// The object's name.
    pub name: String,
    /// The job the object belongs to (a Job's own name; a pod's `job-name` label).
    pub job: String,
    /// What the mappings read.
    pub view: V,
}

/// How an object left the watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Departure {
    /// A DELETED event arrived; the view is the object's final state.
    Deleted,
    /// The object was missing from a relist; the view is the last state seen, which may be stale.
    Vanished,
}

/// An object that was watched and is gone.
#[derive(Clone, Debug)]
pub struct Tombstone<V> {
    /// The job the object belonged to.
    pub job: String,
    /// The last view seen.
    pub last: V,
    /// How it left.
    pub departure: Departure,
    /// When it left.
    pub at: Instant,
}

/// How long and how many tombstones are kept.
#[derive(Clone, Debug)]
pub struct ReflectorSettings {
    /// Server-side watch timeout; a watch silent for this plus a margin is restarted.
    pub watch_timeout: Duration,
    /// How long tombstones are kept.
    pub tombstone_ttl: Duration,
    /// At most this many tombstones are kept (the oldest go first).
    pub max_tombstones: usize,
    /// Whether the watch only adds to answers: its failures are logged at debug level, not
    /// as warnings (a Role without its permission is fine).
    pub optional: bool,
    /// How a failed watch is started again: a list and a new watch after a backoff that grows
    /// from `restart.base` to `restart.cap` with full jitter (the deadline is not used: a
    /// watch is retried for as long as it is needed). client-go's reflector backs off from
    /// 800 ms to 30 s.
    pub restart: RetryPolicy,
    /// How long a job the API server said it does not have is answered "no such job" without
    /// asking the server again, while the namespace's watches are current (they deliver a job
    /// created since within moments): a caller polling unknown ids costs one request per id
    /// and period, not one per question.
    pub absent_ttl: Duration,
}

impl Default for ReflectorSettings {
    fn default() -> Self {
        Self {
            watch_timeout: Duration::from_secs(60),
            tombstone_ttl: Duration::from_secs(15 * 60),
            max_tombstones: 10_000,
            optional: false,
            restart: RetryPolicy {
                base: Duration::from_millis(800),
                cap: Duration::from_secs(30),
                deadline: Duration::MAX,
            },
            absent_ttl: Duration::from_secs(10),
        }
    }
}

/// The health of a reflector's watch.
#[derive(Clone, Debug, Default)]
pub struct WatchHealth {
    /// Whether the first list has completed.
    pub synced: bool,
    /// How many times the watch failed and was re-established.
    pub restarts: u64,
    /// The last watch failure, if the watch is failing now.
    pub failing: Option<String>,
    /// The server's refusal to list or watch for lack of permission, if that is why it fails.
    pub forbidden: Option<Refusal>,
}

/// The API server refused a list or a watch for lack of permission (403).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The verb refused: `list` or `watch`.
    pub verb: &'static str,
    /// The server's message.
    pub message: String,
    /// When it was last refused.
    pub at: Instant,
}

/// How long a watch must go without failing for its restart backoff to start afresh.
const BACKOFF_RESET: Duration = Duration::from_secs(120);

/// How long a refusal counts as current. While the server keeps refusing, the watcher retries
/// at least every 30 s (its longest backoff) and each retry renews the refusal; once the
/// permission is granted the watch resumes without an event to say so, and the refusal lapses.
pub const REFUSAL_LIFETIME: Duration = Duration::from_secs(60);

impl WatchHealth {
    /// The refusal that stops the watch now, if any.
    pub fn refused(&self) -> Option<&Refusal> {
        self.forbidden
            .as_ref()
            .filter(|refusal| refusal.at.elapsed() < REFUSAL_LIFETIME)
    }
}

/// A list or watch failure that is a 403: the verb refused and the server's message.
pub(crate) fn refusal_of(error: &watcher::Error) -> Option<(&'static str, String)> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 403 => {
            Some(("list", status.message.clone()))
        }
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
            if status.code == 403 =>
        {
            Some(("watch", status.message.clone()))
        }
        watcher::Error::WatchError(status) if status.code == 403 => {
            Some(("watch", status.message.clone()))
        }
        _ => None,
    }
}

struct State<V> {
    /// Boxed: a map keeps room for up to twice the entries it holds, and an entry (a Job's
    /// view: 624 bytes, a pod's: 768) is far larger than a pointer. The memory benchmark's
    /// 10,000 Jobs, pods and outcome records took 94.7 MB unboxed, 74-75 MB boxed.
    objects: HashMap<String, Box<Entry<V>>>,
    by_job: JobIndex,
    tombstones: HashMap<String, Tombstone<V>>,
    /// Tombstone names by the job they belonged to.
    tombstones_by_job: JobIndex,
    /// Tombstone names in the order they were made, for pruning the oldest first.
    tombstone_order: VecDeque<(Instant, String)>,
    relisting: Option<HashSet<String>>,
    health: WatchHealth,
    /// Whether the current run of failures was logged as a warning.
    warned: bool,
}

impl<V> Default for State<V> {
    fn default() -> Self {
        Self {
            objects: HashMap::new(),
            by_job: JobIndex::default(),
            tombstones: HashMap::new(),
            tombstones_by_job: JobIndex::default(),
            tombstone_order: VecDeque::new(),
            relisting: None,
            health: WatchHealth::default(),
            warned: false,
        }
    }
}

/// The views of one resource in one namespace, kept current by a watch.
pub struct Reflector<V> {
    state: Arc<RwLock<State<V>>>,
    changes: broadcast::Sender<String>,
    /// Turns true once the first list completed or the server refused the watch.
    settled: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl<V> Drop for Reflector<V> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<V: Clone + Send + Sync + 'static> Reflector<V> {
    /// Starts watching `api` with `config`; `view` turns an object into its entry (or `None` to
    /// ignore it).
    pub fn spawn<K, F>(
        api: Api<K>,
        config: watcher::Config,
        settings: ReflectorSettings,
        view: F,
    ) -> Reflector<V>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        F: Fn(&K) -> Option<Entry<V>> + Send + Sync + 'static,
    {
        let state: Arc<RwLock<State<V>>> = Arc::default();
        let (changes, _) = broadcast::channel(4096);
        let (settled_tx, settled) = tokio::sync::watch::channel(false);
        let config = config.timeout(
            u32::try_from(settings.watch_timeout.as_secs())
                .unwrap_or(290)
                .max(1),
        );
        let task = {
            let state = state.clone();
            let changes = changes.clone();
            tokio::spawn(async move {
                // A watch that fails is started again from a fresh list, not resumed: the list
                // (Init ... InitDone) proves the cache whole and current again the moment it
                // completes, even for a watch whose objects seldom change (refusal events, a
                // Spark driver), where a resumed watch would stay "failing" until an event.
                let mut failures = 0u32;
                let mut last_failure: Option<Instant> = None;
                loop {
                    let mut events = watcher(api.clone(), config.clone()).boxed();
                    while let Some(event) = events.next().await {
                        let changed = match event {
                            Ok(event) => apply(&state, event, &view, &settings),
                            Err(error) => {
                                failed(&state, &error, &settings);
                                settle(&state, &settled_tx);
                                break;
                            }
                        };
                        settle(&state, &settled_tx);
                        for job in changed {
                            let _ = changes.send(job);
                        }
                    }
                    // The backoff grows while failures keep coming (a list that works and a
                    // watch that is refused must not cost a list every second), and starts
                    // afresh after a quiet while, as client-go's reflector does.
                    if last_failure.is_some_and(|at| at.elapsed() >= BACKOFF_RESET) {
                        failures = 0;
                    }
                    last_failure = Some(Instant::now());
                    let delay = settings.restart.backoff(failures);
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(delay).await;
                }
            })
        };
        Reflector {
            state,
            changes,
            settled,
            task,
        }
    }

    /// Waits until the first list has completed, at most `timeout`; false if it did not. A
    /// watch the server refuses ends the wait at once (see [`WatchHealth::refused`]).
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let mut settled = self.settled.clone();
        let _ = tokio::time::timeout(timeout, settled.wait_for(|s| *s)).await;
        read(&self.state).health.synced
    }

    /// Whether the views are current: listed, watched since, and not relisting or recovering
    /// from a failed watch (after which objects may be missing or stale until the relist ends).
    pub fn is_current(&self) -> bool {
        let state = read(&self.state);
        state.health.synced && state.health.failing.is_none() && state.relisting.is_none()
    }

    /// The health of the watch.
    pub fn health(&self) -> WatchHealth {
        read(&self.state).health.clone()
    }

    /// The entries of one job.
    pub fn of_job(&self, job: &str) -> Vec<Entry<V>> {
        let state = read(&self.state);
        entries_of(&state, job).cloned().collect()
    }

    /// One object's entry.
    pub fn get(&self, name: &str) -> Option<Entry<V>> {
        read(&self.state)
            .objects
            .get(name)
            .map(|entry| Entry::clone(entry))
    }

    /// How one object went away, if it was watched and is gone.
    pub fn tombstone(&self, name: &str) -> Option<Tombstone<V>> {
        read(&self.state).tombstones.get(name).cloned()
    }

    /// The objects of one job that were watched and are gone.
    pub fn tombstones_of_job(&self, job: &str) -> Vec<Tombstone<V>> {
        let state = read(&self.state);
        tombstones_of(&state, job).cloned().collect()
    }

    /// The views of one job's objects, and those of its objects that went away and are
    /// accepted by `departed`, read at one instant (an object is never both, or neither).
    pub fn of_job_and_departed(
        &self,
        job: &str,
        departed: impl Fn(&Tombstone<V>) -> bool,
    ) -> Vec<V> {
        let state = read(&self.state);
        let present = entries_of(&state, job).map(|entry| entry.view.clone());
        let gone = tombstones_of(&state, job)
            .filter(|tombstone| departed(tombstone))
            .map(|tombstone| tombstone.last.clone());
        present.chain(gone).collect()
    }

    /// The names of every entry.
    pub(crate) fn names(&self) -> Vec<String> {
        read(&self.state).objects.keys().cloned().collect()
    }

    /// Every entry (for listing).
    pub fn all(&self) -> Vec<Entry<V>> {
        read(&self.state)
            .objects
            .values()
            .map(|entry| Entry::clone(entry))
            .collect()
    }

    /// How many objects are kept (for this crate's tests).
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        read(&self.state).objects.len()
    }

    /// Whether no objects are kept.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The jobs whose objects change, as they change.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }
}

/// The names of each job's objects. Most jobs have one object or a few (a Job, its pod), so
/// each job's names are a short list: a set per job would cost several times the memory. An
/// object named as its job (a Job, a SparkApplication) is not listed: it is found by name.
#[derive(Default)]
struct JobIndex(HashMap<String, Vec<String>>);

impl JobIndex {
    fn insert(&mut self, job: &str, name: &str) {
        if name == job {
            return;
        }
        match self.0.get_mut(job) {
            Some(names) if names.iter().any(|n| n == name) => {}
            Some(names) => names.push(name.to_string()),
            None => {
                self.0.insert(job.to_string(), vec![name.to_string()]);
            }
        }
    }

    fn remove(&mut self, job: &str, name: &str) {
        if let Some(names) = self.0.get_mut(job) {
            names.retain(|n| n != name);
            if names.is_empty() {
                self.0.remove(job);
            }
        }
    }

    /// The names of `job`'s objects; `own`: whether an object named as the job belongs to it.
    fn names<'a>(&'a self, job: &'a str, own: bool) -> impl Iterator<Item = &'a str> {
        own.then_some(job)
            .into_iter()
            .chain(self.0.get(job).into_iter().flatten().map(String::as_str))
    }
}

fn entries_of<'a, V>(state: &'a State<V>, job: &'a str) -> impl Iterator<Item = &'a Entry<V>> {
    let own = state.objects.get(job).is_some_and(|entry| entry.job == job);
    state
        .by_job
        .names(job, own)
        .filter_map(|name| state.objects.get(name).map(Box::as_ref))
}

fn tombstones_of<'a, V>(
    state: &'a State<V>,
    job: &'a str,
) -> impl Iterator<Item = &'a Tombstone<V>> {
    let own = state.tombstones.get(job).is_some_and(|t| t.job == job);
    state
        .tombstones_by_job
        .names(job, own)
        .filter_map(|name| state.tombstones.get(name))
}

fn read<V>(state: &RwLock<State<V>>) -> std::sync::RwLockReadGuard<'_, State<V>> {
    // The state is plain data updated in single steps; a poisoned lock still holds a usable value.
    state.read().unwrap_or_else(|p| p.into_inner())
}

fn write<V>(state: &RwLock<State<V>>) -> std::sync::RwLockWriteGuard<'_, State<V>> {
    state.write().unwrap_or_else(|p| p.into_inner())
}

/// Records a failed list or watch in the health.
fn failed<V>(state: &RwLock<State<V>>, error: &watcher::Error, settings: &ReflectorSettings) {
    let mut state = write(state);
    state.health.restarts += 1;
    // One failure that the next list mends is routine (a server closing a connection, a watch
    // cut by a proxy): logged at debug level. One that persists, or a refusal, is news once.
    let refused = refusal_of(error).is_some();
    if state.health.failing.is_none() && !refused {
        debug!(message = "watch failed; restarting", %error);
    } else if !state.warned {
        state.warned = true;
        if settings.optional {
            debug!(message = "optional watch keeps failing; restarting", %error);
        } else {
            warn!(message = "watch keeps failing; restarting", %error);
        }
    }
    state.health.failing = Some(error.to_string());
    state.health.forbidden = refusal_of(error).map(|(verb, message)| Refusal {
        verb,
        message,
        at: Instant::now(),
    });
}

/// Tells those waiting for the first list once it completed or the server refused the watch.
fn settle<V>(state: &RwLock<State<V>>, settled: &tokio::sync::watch::Sender<bool>) {
    let health = &read(state).health;
    if health.synced || health.forbidden.is_some() {
        let _ = settled.send(true);
    }
}

/// Applies one watcher event; returns the jobs that changed.
fn apply<K, V: Clone, F>(
    state: &RwLock<State<V>>,
    event: watcher::Event<K>,
    view: &F,
    settings: &ReflectorSettings,
) -> Vec<String>
where
    F: Fn(&K) -> Option<Entry<V>>,
{
    let mut state = write(state);
    // A failure is over once the server has answered: a list that completed, or an event of
    // the watch. `Init` comes before the list is even asked for, and the objects of a list
    // come before it completes.
    if matches!(
        event,
        watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)
    ) {
        state.health.failing = None;
        state.health.forbidden = None;
        state.warned = false;
    }
    match event {
        watcher::Event::Init => {
            state.relisting = Some(HashSet::new());
            Vec::new()
        }
        watcher::Event::InitApply(object) => {
            let Some(entry) = view(&object) else {
                return Vec::new();
            };
            if let Some(seen) = state.relisting.as_mut() {
                seen.insert(entry.name.clone());
            }
            let job = entry.job.clone();
            upsert(&mut state, entry);
            vec![job]
        }
        watcher::Event::InitDone => {
            let seen = state.relisting.take().unwrap_or_default();
            let missing: Vec<String> = state
                .objects
                .keys()
                .filter(|name| !seen.contains(*name))
                .cloned()
                .collect();
            let mut changed = Vec::new();
            for name in missing {
                if let Some(job) = remove(&mut state, &name, None, settings) {
                    changed.push(job);
                }
            }
            if !state.health.synced {
                debug!(message = "watch synced", objects = state.objects.len());
            }
            state.health.synced = true;
            changed
        }
        watcher::Event::Apply(object) => match view(&object) {
            Some(entry) => {
                let job = entry.job.clone();
                upsert(&mut state, entry);
                vec![job]
            }
            None => Vec::new(),
        },
        watcher::Event::Delete(object) => match view(&object) {
            Some(entry) => {
                let name = entry.name.clone();
                remove(&mut state, &name, Some(entry), settings)
                    .into_iter()
                    .collect()
            }
            None => Vec::new(),
        },
    }
}

fn upsert<V>(state: &mut State<V>, entry: Entry<V>) {
    drop_tombstone(state, &entry.name);
    match state.objects.get(&entry.name) {
        Some(previous) if previous.job == entry.job => {}
        Some(previous) => {
            let job = previous.job.clone();
            state.by_job.remove(&job, &entry.name);
            state.by_job.insert(&entry.job, &entry.name);
        }
        None => state.by_job.insert(&entry.job, &entry.name),
    }
    state.objects.insert(entry.name.clone(), Box::new(entry));
}

/// Removes an object, leaving a tombstone; `final_state` is the DELETED event's object.
fn remove<V: Clone>(
    state: &mut State<V>,
    name: &str,
    final_state: Option<Entry<V>>,
    settings: &ReflectorSettings,
) -> Option<String> {
    let previous = state.objects.remove(name).map(|entry| *entry);
    let (departure, entry) = match (final_state, previous) {
        (Some(entry), _) => (Departure::Deleted, entry),
        (None, Some(entry)) => (Departure::Vanished, entry),
        (None, None) => return None,
    };
    state.by_job.remove(&entry.job, name);
    let now = Instant::now();
    prune_tombstones(state, now, settings);
    let job = entry.job.clone();
    drop_tombstone(state, name);
    if settings.max_tombstones == 0 {
        return Some(job);
    }
    state.tombstones_by_job.insert(&job, name);
    state.tombstones.insert(
        name.to_string(),
        Tombstone {
            job: job.clone(),
            last: entry.view,
            departure,
            at: now,
        },
    );
    state.tombstone_order.push_back((now, name.to_string()));
    Some(job)
}

/// Forgets an object's tombstone, if it has one.
fn drop_tombstone<V>(state: &mut State<V>, name: &str) {
    let Some(tombstone) = state.tombstones.remove(name) else {
        return;
    };
    state.tombstones_by_job.remove(&tombstone.job, name);
}

/// Drops tombstones past their time, and the oldest while there are too many.
fn prune_tombstones<V>(state: &mut State<V>, now: Instant, settings: &ReflectorSettings) {
    while let Some((at, _)) = state.tombstone_order.front() {
        let expired = now.duration_since(*at) >= settings.tombstone_ttl;
        let over = state.tombstones.len() >= settings.max_tombstones;
        if !expired && !over {
            break;
        }
        let Some((at, name)) = state.tombstone_order.pop_front() else {
            break;
        };
        // A name re-tombstoned later has a newer entry in the order; only the entry that made
        // the current tombstone removes it.
        if state.tombstones.get(&name).is_some_and(|t| t.at == at) {
            drop_tombstone(state, &name);
        }
    }
}

#[cfg(test)]
mod tests;
