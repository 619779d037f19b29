//! core/v1 Events the controllers record (Scheduled, Pulling, Started, SuccessfulCreate, ...),
//! aggregated by object, reason and message the way the real event recorder counts repeats.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{Change, ObjectKey, StoreError, meta};

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// Who records an event.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// Component (`kubelet`, `default-scheduler`, `job-controller`).
    pub component: &'a str,
    /// Host (node name for the kubelet).
    pub host: Option<&'a str>,
}

/// Records an event about `involved`.
pub fn record(
    state: &State,
    involved: &Value,
    kind: EventKind,
    reason: &str,
    message: &str,
    source: Source<'_>,
    field_path: Option<&str>,
) {
    let namespace = match meta::namespace(involved) {
        "" => "default",
        ns => ns,
    };
    let involved_name = meta::name(involved);
    let uid = meta::uid(involved).unwrap_or("");
    let mut h = DefaultHasher::new();
    (namespace, uid, reason, message, field_path).hash(&mut h);
    let fingerprint = h.finish();
    let now = meta::now();
    let known = state.event_names.lock().get(&fingerprint).cloned();
    if let Some(existing) = known {
        let key = ObjectKey::new(GroupResource::new("", "events"), namespace, &existing);
        let updated = state.store.update::<StoreError>(&key, |current| {
            let mut next = (**current).clone();
            let count = current.get("count").and_then(Value::as_i64).unwrap_or(1);
            next["count"] = json!(count + 1);
            next["lastTimestamp"] = json!(now);
            Ok(Change::Replace(next))
        });
        if updated.is_ok() {
            return;
        }
    }
    // Named like the real recorder's events: the object's name and a timestamp in hex.
    let nanos = jiff::Timestamp::now().as_nanosecond();
    let name = format!("{involved_name}.{nanos:x}");
    let key = ObjectKey::new(GroupResource::new("", "events"), namespace, &name);
    {
        let mut names = state.event_names.lock();
        if names.len() > 100_000 {
            names.clear();
        }
        names.insert(fingerprint, name.clone());
    }
    let mut involved_ref = json!({
        "kind": involved.get("kind").cloned().unwrap_or(Value::Null),
        "name": involved_name,
        "uid": uid,
        "apiVersion": involved.get("apiVersion").cloned().unwrap_or(Value::Null),
        "resourceVersion": involved.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null),
    });
    if !meta::namespace(involved).is_empty() {
        involved_ref["namespace"] = json!(meta::namespace(involved));
    }
    if let Some(path) = field_path {
        involved_ref["fieldPath"] = json!(path);
    }
    let mut source_json = json!({"component": source.component});
    if let Some(host) = source.host {
        source_json["host"] = json!(host);
    }
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "uid": meta::new_uid(), "creationTimestamp": now},
        "involvedObject": involved_ref,
        "reason": reason,
        "message": message,
        "source": source_json,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": match kind { EventKind::Normal => "Normal", EventKind::Warning => "Warning" },
        "eventTime": null,
        "reportingComponent": source.component,
        "reportingInstance": source.host.unwrap_or(""),
    });
    // A concurrent recorder creating the same event first only loses one count.
    let _ = state.store.create(&key, event);
}
