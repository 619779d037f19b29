//! The object store: JSON objects keyed by (group resource, namespace, name), one global
//! increasing resourceVersion, a bounded per-resource history of changes for watches, and a
//! broadcast of every change for controllers and watch streams.

pub mod meta;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

/// A resource type independent of its version: the key objects are stored under.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// A group resource.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }

    /// `pods`, `jobs.batch`: the form used in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The key of one object: group resource, namespace (`""` when cluster scoped), name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Group resource.
    pub resource: GroupResource,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key.
    pub fn new(resource: GroupResource, namespace: &str, name: &str) -> Self {
        ObjectKey {
            resource,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// The type of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The watch event type name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of the store.
#[derive(Debug)]
pub struct StoreEvent {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub event_type: EventType,
    /// Which object.
    pub key: ObjectKey,
    /// The object after the change (for a deletion: its last state with the deletion's
    /// resourceVersion).
    pub object: Arc<Value>,
    /// The object before the change (none for an addition).
    pub old: Option<Arc<Value>>,
    json: OnceLock<Bytes>,
}

impl StoreEvent {
    /// The object serialized once, shared by every watcher.
    pub fn object_json(&self) -> Bytes {
        self.json
            .get_or_init(|| Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default()))
            .clone()
    }
}

/// Every change of the store in order, none ever dropped (see [`Store::follow`]).
pub type Follower = mpsc::UnboundedReceiver<Arc<StoreEvent>>;

/// History events to replay and a subscription for what follows.
pub type Replay = (Vec<Arc<StoreEvent>>, broadcast::Receiver<Arc<StoreEvent>>);

/// What an update closure decides.
pub enum Change {
    /// Leave the object as it is (no new resourceVersion, no event).
    Unchanged,
    /// Replace the object.
    Replace(Value),
    /// Remove the object.
    Remove,
}

/// The result of an update.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as stored (or, when removed, its last state).
    pub object: Arc<Value>,
    /// The change made, if any.
    pub event: Option<EventType>,
}

/// Errors of the store itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such object.
    #[error("{} {:?} not found", .0.resource.qualified(), .0.name)]
    NotFound(ObjectKey),
    /// The object exists.
    #[error("{} {:?} already exists", .0.resource.qualified(), .0.name)]
    AlreadyExists(ObjectKey),
    /// The history no longer reaches back to a resourceVersion.
    #[error("too old resource version: {requested} ({oldest})")]
    TooOld {
        /// The version asked for.
        requested: u64,
        /// The oldest version still available.
        oldest: u64,
    },
}

#[derive(Default)]
struct Table {
    objects: BTreeMap<(String, String), Arc<Value>>,
    history: VecDeque<Arc<StoreEvent>>,
    /// Watches may resume from any resourceVersion >= floor.
    floor: u64,
}

struct Inner {
    rv: u64,
    tables: HashMap<GroupResource, Table>,
    by_uid: HashMap<String, ObjectKey>,
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
    history_cap: usize,
    followers: Vec<mpsc::UnboundedSender<Arc<StoreEvent>>>,
}

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<StoreEvent>>,
}

const BROADCAST_CAPACITY: usize = 1 << 14;

fn owner_uids(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Inner {
    fn table(&mut self, gr: &GroupResource) -> &mut Table {
        self.tables.entry(gr.clone()).or_default()
    }

    fn index(&mut self, key: &ObjectKey, old: Option<&Value>, new: Option<&Value>) {
        if let Some(old) = old {
            if new.is_none()
                && let Some(uid) = meta::uid(old)
            {
                self.by_uid.remove(uid);
            }
            for owner in owner_uids(old) {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(key);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
            }
        }
        if let Some(new) = new {
            if let Some(uid) = meta::uid(new) {
                self.by_uid.insert(uid.to_string(), key.clone());
            }
            for owner in owner_uids(new) {
                self.dependents
                    .entry(owner)
                    .or_default()
                    .insert(key.clone());
            }
        }
    }

    fn record(&mut self, event: Arc<StoreEvent>) {
        let cap = self.history_cap;
        let table = self.table(&event.key.resource);
        table.history.push_back(event);
        while table.history.len() > cap {
            if let Some(evicted) = table.history.pop_front() {
                table.floor = evicted.rv;
            }
        }
    }
}

impl Store {
    /// An empty store keeping `history_cap` events per resource type.
    pub fn new(history_cap: usize) -> Self {
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        Store {
            inner: Mutex::new(Inner {
                rv: 0,
                tables: HashMap::new(),
                by_uid: HashMap::new(),
                dependents: HashMap::new(),
                history_cap: history_cap.max(1),
                followers: Vec::new(),
            }),
            events,
        }
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    /// Every change from now on (a reader more than the channel's capacity behind misses
    /// changes and is told so).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoreEvent>> {
        self.events.subscribe()
    }

    /// Every change from now on, in order, none ever missed: changes queue up while the
    /// reader is busy, as in an informer's queue. This is what controllers use: a reader that
    /// misses changes must look at everything again, which under load makes it fall further
    /// behind.
    pub fn follow(&self) -> Follower {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner.lock().followers.push(tx);
        rx
    }

    /// The changes of a resource type after `rv` still in the history, and a subscription for
    /// every later change (events already in the history may arrive again there: skip by rv).
    pub fn subscribe_from(&self, gr: &GroupResource, rv: u64) -> Result<Replay, StoreError> {
        let mut inner = self.inner.lock();
        let table = inner.table(gr);
        if rv < table.floor {
            return Err(StoreError::TooOld {
                requested: rv,
                oldest: table.floor + 1,
            });
        }
        let replay = table
            .history
            .iter()
            .filter(|e| e.rv > rv)
            .cloned()
            .collect();
        Ok((replay, self.events.subscribe()))
    }

    /// The current objects of a type (in one namespace or all), sorted by namespace and name,
    /// with the resourceVersion of the snapshot, and a subscription starting right after it.
    pub fn list_and_subscribe(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
    ) -> (Vec<Arc<Value>>, u64, broadcast::Receiver<Arc<StoreEvent>>) {
        let inner = self.inner.lock();
        let items = Self::collect(&inner, gr, namespace);
        (items, inner.rv, self.events.subscribe())
    }

    fn collect(inner: &Inner, gr: &GroupResource, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let Some(table) = inner.tables.get(gr) else {
            return Vec::new();
        };
        match namespace {
            Some(ns) => table
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
            None => table.objects.values().cloned().collect(),
        }
    }

    /// The current objects of a type and the resourceVersion of the snapshot.
    pub fn list(&self, gr: &GroupResource, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.inner.lock();
        (Self::collect(&inner, gr, namespace), inner.rv)
    }

    /// The objects of a type as they were at `rv`, rebuilt from the history; `TooOld` when the
    /// history no longer reaches back that far.
    pub fn list_at(
        &self,
        gr: &GroupResource,
        namespace: Option<&str>,
        rv: u64,
    ) -> Result<Vec<Arc<Value>>, StoreError> {
        let inner = self.inner.lock();
        if rv >= inner.rv {
            return Ok(Self::collect(&inner, gr, namespace));
        }
        let Some(table) = inner.tables.get(gr) else {
            return Ok(Vec::new());
        };
        if rv < table.floor {
            return Err(StoreError::TooOld {
                requested: rv,
                oldest: table.floor + 1,
            });
        }
        let mut objects: BTreeMap<(String, String), Arc<Value>> = match namespace {
            Some(ns) => table
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            None => table.objects.clone(),
        };
        for event in table.history.iter().rev().take_while(|e| e.rv > rv) {
            if namespace.is_some_and(|ns| ns != event.key.namespace) {
                continue;
            }
            let k = (event.key.namespace.clone(), event.key.name.clone());
            match (&event.event_type, &event.old) {
                (EventType::Added, _) => {
                    objects.remove(&k);
                }
                (_, Some(old)) => {
                    objects.insert(k, old.clone());
                }
                (_, None) => {}
            }
        }
        Ok(objects.into_values().collect())
    }

    /// One object.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        let inner = self.inner.lock();
        inner
            .tables
            .get(&key.resource)?
            .objects
            .get(&(key.namespace.clone(), key.name.clone()))
            .cloned()
    }

    /// The key of the object with a uid.
    pub fn key_of_uid(&self, uid: &str) -> Option<ObjectKey> {
        self.inner.lock().by_uid.get(uid).cloned()
    }

    /// The keys of the objects that name `uid` among their ownerReferences.
    pub fn dependents_of(&self, uid: &str) -> Vec<ObjectKey> {
        self.inner
            .lock()
            .dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Number of objects of a type.
    pub fn count(&self, gr: &GroupResource) -> usize {
        self.inner
            .lock()
            .tables
            .get(gr)
            .map_or(0, |t| t.objects.len())
    }

    fn emit(&self, inner: &mut Inner, event: StoreEvent) {
        let event = Arc::new(event);
        inner.record(event.clone());
        // Sent under the lock, so every follower sees the changes in resourceVersion order.
        inner
            .followers
            .retain(|follower| follower.send(event.clone()).is_ok());
        // No receiver is not an error: controllers may not have started yet.
        let _ = self.events.send(event);
    }

    /// Stores a new object, stamping its resourceVersion.
    pub fn create(&self, key: &ObjectKey, mut object: Value) -> Result<Arc<Value>, StoreError> {
        let mut inner = self.inner.lock();
        let k = (key.namespace.clone(), key.name.clone());
        if inner.table(&key.resource).objects.contains_key(&k) {
            return Err(StoreError::AlreadyExists(key.clone()));
        }
        inner.rv += 1;
        let rv = inner.rv;
        meta::set_resource_version(&mut object, rv);
        let object = Arc::new(object);
        inner.index(key, None, Some(&object));
        inner.table(&key.resource).objects.insert(k, object.clone());
        self.emit(
            &mut inner,
            StoreEvent {
                rv,
                event_type: EventType::Added,
                key: key.clone(),
                object: object.clone(),
                old: None,
                json: OnceLock::new(),
            },
        );
        Ok(object)
    }

    /// Reads, decides and writes one object atomically: `decide` sees the current object and
    /// returns what to do. The store stamps the new resourceVersion.
    pub fn update<E: From<StoreError>>(
        &self,
        key: &ObjectKey,
        decide: impl FnOnce(&Arc<Value>) -> Result<Change, E>,
    ) -> Result<Written, E> {
        let mut inner = self.inner.lock();
        let k = (key.namespace.clone(), key.name.clone());
        let current = inner
            .table(&key.resource)
            .objects
            .get(&k)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        match decide(&current)? {
            Change::Unchanged => Ok(Written {
                object: current,
                event: None,
            }),
            Change::Replace(mut object) => {
                inner.rv += 1;
                let rv = inner.rv;
                meta::set_resource_version(&mut object, rv);
                let object = Arc::new(object);
                inner.index(key, Some(&current), Some(&object));
                inner.table(&key.resource).objects.insert(k, object.clone());
                self.emit(
                    &mut inner,
                    StoreEvent {
                        rv,
                        event_type: EventType::Modified,
                        key: key.clone(),
                        object: object.clone(),
                        old: Some(current),
                        json: OnceLock::new(),
                    },
                );
                Ok(Written {
                    object,
                    event: Some(EventType::Modified),
                })
            }
            Change::Remove => {
                let object = Self::remove_locked(self, &mut inner, key, current);
                Ok(Written {
                    object,
                    event: Some(EventType::Deleted),
                })
            }
        }
    }

    fn remove_locked(&self, inner: &mut Inner, key: &ObjectKey, current: Arc<Value>) -> Arc<Value> {
        inner.rv += 1;
        let rv = inner.rv;
        inner
            .table(&key.resource)
            .objects
            .remove(&(key.namespace.clone(), key.name.clone()));
        inner.index(key, Some(&current), None);
        let mut last = (*current).clone();
        meta::set_resource_version(&mut last, rv);
        let last = Arc::new(last);
        self.emit(
            inner,
            StoreEvent {
                rv,
                event_type: EventType::Deleted,
                key: key.clone(),
                object: last.clone(),
                old: Some(current),
                json: OnceLock::new(),
            },
        );
        last
    }

    /// Removes an object.
    pub fn remove(&self, key: &ObjectKey) -> Result<Arc<Value>, StoreError> {
        let mut inner = self.inner.lock();
        let current = inner
            .table(&key.resource)
            .objects
            .get(&(key.namespace.clone(), key.name.clone()))
            .cloned()
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        Ok(self.remove_locked(&mut inner, key, current))
    }

    /// Forgets every watch history: watches resuming from any earlier resourceVersion get 410.
    pub fn compact(&self) {
        let mut inner = self.inner.lock();
        let rv = inner.rv;
        for table in inner.tables.values_mut() {
            table.history.clear();
            table.floor = rv;
        }
    }

    /// Removes every object of a type (used when a CustomResourceDefinition goes away).
    pub fn drop_resource(&self, gr: &GroupResource) {
        let keys: Vec<ObjectKey> = {
            let inner = self.inner.lock();
            inner
                .tables
                .get(gr)
                .map(|t| {
                    t.objects
                        .keys()
                        .map(|(ns, name)| ObjectKey::new(gr.clone(), ns, name))
                        .collect()
                })
                .unwrap_or_default()
        };
        for key in keys {
            // Already gone is fine: another writer removed it first.
            let _ = self.remove(&key);
        }
    }
}
