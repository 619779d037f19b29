//! The garbage collector and the namespace lifecycle: dependents whose owners are all gone are
//! deleted; `orphan` and `foregroundDeletion` finalizers are processed; a terminating
//! namespace is emptied and then removed.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::ops::{self, DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, ObjectKey, StoreEvent, meta};

struct Collector {
    state: Arc<State>,
}

impl Collector {
    fn delete(&self, key: &ObjectKey, propagation: Propagation) {
        let Some(rt) = self.state.registry.get(&key.resource) else {
            return;
        };
        let opts = DeleteOptions {
            propagation: Some(propagation),
            ..DeleteOptions::default()
        };
        if let Err(error) = ops::delete(&self.state, &rt, key, &opts)
            && error.code != 404
        {
            tracing::warn!(message = "garbage collection cannot delete a dependent", name = %key.name, %error);
        }
    }

    fn owners_alive(&self, object: &Value) -> bool {
        let refs = meta::owner_references(object);
        refs.is_empty()
            || refs.iter().any(|r| {
                r.get("uid")
                    .and_then(Value::as_str)
                    .is_some_and(|uid| self.state.store.key_of_uid(uid).is_some())
            })
    }

    /// Deletes dependents of a removed owner that have no other live owner.
    fn owner_gone(&self, uid: &str) {
        for key in self.state.store.dependents_of(uid) {
            if let Some(dependent) = self.state.store.get(&key)
                && !meta::is_deleting(&dependent)
                && !self.owners_alive(&dependent)
            {
                self.delete(&key, Propagation::Background);
            }
        }
    }

    fn process_finalizers(&self, key: &ObjectKey, object: &Value) {
        if !meta::is_deleting(object) {
            return;
        }
        let Some(uid) = meta::uid(object).map(str::to_string) else {
            return;
        };
        let finalizers = meta::finalizers(object);
        if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dep in self.state.store.dependents_of(&uid) {
                // A dependent removed meanwhile needs no orphaning.
                let _ = ops::mutate(&self.state, &dep, |d| {
                    let refs: Vec<Value> = meta::owner_references(d)
                        .iter()
                        .filter(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()))
                        .cloned()
                        .collect();
                    if let Some(m) = meta::metadata_mut(d) {
                        if refs.is_empty() {
                            m.remove("ownerReferences");
                        } else {
                            m.insert("ownerReferences".into(), json!(refs));
                        }
                    }
                    true
                });
            }
            let _ = ops::remove_finalizer(&self.state, key, ORPHAN_FINALIZER);
        } else if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            let dependents = self.state.store.dependents_of(&uid);
            if dependents.is_empty() {
                let _ = ops::remove_finalizer(&self.state, key, FOREGROUND_FINALIZER);
            } else {
                for dep in dependents {
                    if self
                        .state
                        .store
                        .get(&dep)
                        .is_some_and(|d| !meta::is_deleting(&d))
                    {
                        self.delete(&dep, Propagation::Foreground);
                    }
                }
            }
        }
    }

    /// After a dependent went away: an owner waiting in foreground deletion may be done.
    fn dependent_gone(&self, object: &Value) {
        for r in meta::owner_references(object) {
            let Some(uid) = r.get("uid").and_then(Value::as_str) else {
                continue;
            };
            let Some(owner_key) = self.state.store.key_of_uid(uid) else {
                continue;
            };
            if let Some(owner) = self.state.store.get(&owner_key)
                && meta::is_deleting(&owner)
                && meta::finalizers(&owner)
                    .iter()
                    .any(|f| f == FOREGROUND_FINALIZER)
            {
                self.process_finalizers(&owner_key, &owner);
            }
        }
    }

    fn namespace_step(&self, namespace: &str) {
        let ns_key = ObjectKey::new(GroupResource::new("", "namespaces"), "", namespace);
        let Some(ns) = self.state.store.get(&ns_key) else {
            return;
        };
        if !meta::is_deleting(&ns) {
            return;
        }
        let mut remaining = 0;
        for rt in self.state.registry.all() {
            if !rt.namespaced || rt.create_only {
                continue;
            }
            let gr = rt.group_resource();
            for object in self.state.store.list(&gr, Some(namespace)).0 {
                remaining += 1;
                if !meta::is_deleting(&object) {
                    self.delete(
                        &ObjectKey::new(gr.clone(), namespace, meta::name(&object)),
                        Propagation::Background,
                    );
                }
            }
        }
        if remaining == 0 {
            // Empty: the namespace's own finalizer is done.
            let _ = self.state.store.remove(&ns_key);
        }
    }

    fn handle(&self, event: &StoreEvent) {
        let object = &event.object;
        match event.event_type {
            EventType::Deleted => {
                if let Some(uid) = meta::uid(object) {
                    self.owner_gone(uid);
                }
                self.dependent_gone(object);
                if !event.key.namespace.is_empty() {
                    self.namespace_step(&event.key.namespace);
                }
            }
            EventType::Added | EventType::Modified => {
                if event.key.resource.resource == "namespaces"
                    && event.key.resource.group.is_empty()
                {
                    self.namespace_step(meta::name(object));
                    return;
                }
                self.process_finalizers(&event.key, object);
                if event.event_type == EventType::Added
                    && !self.owners_alive(object)
                    && !meta::is_deleting(object)
                {
                    self.delete(&event.key, Propagation::Background);
                }
            }
        }
    }

    fn resync(&self) {
        for rt in self.state.registry.all() {
            if rt.create_only {
                continue;
            }
            let gr = rt.group_resource();
            for object in self.state.store.list(&gr, None).0 {
                let key = ObjectKey::new(gr.clone(), meta::namespace(&object), meta::name(&object));
                self.process_finalizers(&key, &object);
                if !meta::is_deleting(&object) && !self.owners_alive(&object) {
                    self.delete(&key, Propagation::Background);
                }
            }
        }
        for ns in self
            .state
            .store
            .list(&GroupResource::new("", "namespaces"), None)
            .0
        {
            self.namespace_step(meta::name(&ns));
        }
    }
}

/// Runs the garbage collector until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let collector = Collector {
        state: state.clone(),
    };
    let mut rx = state.store.follow();
    collector.resync();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            received = rx.recv() => match received {
                Some(event) => collector.handle(&event),
                None => return,
            }
        }
    }
}
