//! Object operations with the API server's semantics (its "registry" layer): create, update
//! (main resource or status), delete with graceful deletion, finalizers and propagation. The
//! HTTP handlers and the Rust API call these; controllers mostly write the store directly.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::config::SimConfig;
use crate::crd_schema::CrdSchema;
use crate::error::ApiError;
use crate::kinds;
use crate::kinds::spark_application;
use crate::resources::{Behavior, GroupResource, ResourceType, type_from_crd};
use crate::state::State;
use crate::store::{Change, ObjectKey, StoreError, meta};

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(key) => ApiError::not_found(&key.resource, &key.name),
            StoreError::AlreadyExists(key) => ApiError::already_exists(&key.resource, &key.name),
            StoreError::TooOld { requested, oldest } => {
                ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
            }
        }
    }
}

/// The finalizer the garbage collector removes after orphaning dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer the garbage collector removes after deleting dependents.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// Which part of an object a write is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The object (status changes are ignored when the type has a status subresource).
    Main,
    /// `/status` (only status changes are kept).
    Status,
}

/// Deletion propagation policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents lose their ownerReference and stay.
    Orphan,
    /// The object goes at once; the garbage collector deletes dependents afterwards.
    Background,
    /// The object stays (finalizer `foregroundDeletion`) until its dependents are gone.
    Foreground,
}

impl Propagation {
    /// Parses `Orphan`, `Background`, `Foreground`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }
}

/// Options of a delete.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// Propagation policy; `None` takes the type's default (Orphan for batch/v1 Jobs).
    pub propagation: Option<Propagation>,
    /// Grace period in seconds (pods).
    pub grace_period: Option<i64>,
    /// Precondition on the uid.
    pub uid: Option<String>,
    /// Precondition on the resourceVersion.
    pub resource_version: Option<String>,
    /// Compute without writing.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Clone, Debug)]
pub struct Deleted {
    /// The object: its last state when removed, else as it now stands (being deleted).
    pub object: Arc<Value>,
    /// Whether the object is gone.
    pub removed: bool,
}

/// The object as seen through `version` (custom resources serve several versions from one
/// storage without conversion).
pub fn convert(rt: &ResourceType, object: &Value, version: &str) -> Value {
    let mut out = object.clone();
    if rt.versions.len() > 1 {
        out["apiVersion"] = json!(rt.api_version(version));
    }
    out
}

fn body_kind_check(rt: &ResourceType, version: &str, object: &Value) -> Result<(), ApiError> {
    let kind = object.get("kind").and_then(Value::as_str);
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    match (kind, api_version) {
        (None, _) | (Some(""), _) => Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{}'",
            object
        ))),
        (_, None) | (_, Some("")) => Err(ApiError::bad_request(format!(
            "Object 'apiVersion' is missing in '{}'",
            object
        ))),
        (Some(k), Some(av)) => {
            let served = rt.versions.iter().any(|v| rt.api_version(v) == av);
            if k != rt.kind || !served {
                Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({})",
                    rt.api_version(version)
                )))
            } else {
                Ok(())
            }
        }
    }
}

fn namespace_admission(
    state: &State,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    if !rt.namespaced {
        return Ok(());
    }
    let ns_key = ObjectKey::new(GroupResource::new("", "namespaces"), "", namespace);
    let ns = state
        .store
        .get(&ns_key)
        .ok_or_else(|| ApiError::not_found(&ns_key.resource, namespace))?;
    if meta::is_deleting(&ns) {
        return Err(ApiError::forbidden(
            &rt.group_resource(),
            name,
            format!(
                "{} {name:?} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                rt.group_resource().qualified()
            ),
        ));
    }
    Ok(())
}

fn service_account_admission(
    state: &State,
    rt: &ResourceType,
    namespace: &str,
    object: &Value,
    name: &str,
) -> Result<(), ApiError> {
    if rt.behavior != Behavior::Pod {
        return Ok(());
    }
    let sa = object
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let key = ObjectKey::new(GroupResource::new("", "serviceaccounts"), namespace, sa);
    if state.store.get(&key).is_none() {
        return Err(ApiError::forbidden(
            &rt.group_resource(),
            name,
            format!(
                "pods {name:?} is forbidden: error looking up service account {namespace}/{sa}: serviceaccount {sa:?} not found"
            ),
        ));
    }
    Ok(())
}

/// The image policy's webhook ([`crate::config::SimConfig::allowed_image_repos`]) on the create
/// of a Pod or a Job, in Gatekeeper's words.
fn image_policy_webhook(
    config: &SimConfig,
    rt: &ResourceType,
    object: &Value,
) -> Result<(), ApiError> {
    let allowed = &config.allowed_image_repos;
    let spec = match rt.behavior {
        Behavior::Pod => object.get("spec"),
        Behavior::Job => object.pointer("/spec/template/spec"),
        _ => None,
    };
    let Some(spec) = spec.filter(|_| !allowed.is_empty()) else {
        return Ok(());
    };
    for field in ["initContainers", "containers"] {
        for container in spec
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let image = container["image"].as_str().unwrap_or_default();
            if !allowed
                .iter()
                .any(|prefix| image.starts_with(prefix.as_str()))
            {
                let name = container["name"].as_str().unwrap_or_default();
                return Err(ApiError::webhook_denied(
                    "validation.gatekeeper.sh",
                    &format!(
                        "[allowed-repos] container <{name}> has an invalid image repo <{image}>, allowed repos are {allowed:?}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Creates an object in `namespace` (ignored for cluster-scoped types), with defaults,
/// validation and admission. `version` is the version the request used.
pub fn create(
    state: &State,
    rt: &ResourceType,
    version: &str,
    namespace: &str,
    mut object: Value,
    dry_run: bool,
) -> Result<Arc<Value>, ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    }
    body_kind_check(rt, version, &object)?;
    let body_ns = meta::namespace(&object).to_string();
    if rt.namespaced && !body_ns.is_empty() && body_ns != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if meta::resource_version(&object).is_some() {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta::name(&object).to_string();
    // Admission runs before a name is generated: its refusals name the generateName prefix, as
    // in `pods "job-" is forbidden: ...`.
    let mut admitted_name = name.clone();
    if name.is_empty() {
        let prefix = object
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &rt.kind,
                &rt.group,
                "",
                &[crate::error::FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        name = meta::generate_name(&prefix);
        admitted_name = prefix;
    }
    let storage_version = rt.preferred_version().to_string();
    object["apiVersion"] = json!(rt.api_version(&storage_version));
    let Some(m) = meta::metadata_mut(&mut object) else {
        return Err(ApiError::bad_request("metadata is not an object"));
    };
    m.insert("name".into(), json!(name));
    if rt.namespaced {
        m.insert("namespace".into(), json!(namespace));
    } else {
        m.remove("namespace");
    }
    m.insert("uid".into(), json!(meta::new_uid()));
    m.insert("creationTimestamp".into(), json!(meta::now()));
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("selfLink");
    if rt.has_generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    kinds::prepare_create(rt, &mut object);
    kinds::jobset::mutating_webhook(&state.config, rt, &mut object);
    CrdSchema::lookup(state, rt, version).admit(rt, &mut object, None)?;
    let errors = kinds::validate(rt, &object, None);
    if !errors.is_empty() {
        return Err(ApiError::invalid(&rt.kind, &rt.group, &name, &errors));
    }
    namespace_admission(state, rt, namespace, &admitted_name)?;
    service_account_admission(state, rt, namespace, &object, &admitted_name)?;
    spark_application::validating_webhook(&state.config, rt, &object, None)?;
    kinds::jobset::validating_webhook(&state.config, rt, &object)?;
    image_policy_webhook(&state.config, rt, &object)?;
    // The quota plugin runs last, as the API server orders its admission plugins.
    crate::quota::admit(state, rt, namespace, &object, &admitted_name)?;
    let key = ObjectKey::new(
        rt.group_resource(),
        if rt.namespaced { namespace } else { "" },
        &name,
    );
    if dry_run {
        if state.store.get(&key).is_some() {
            return Err(ApiError::already_exists(&key.resource, &name));
        }
        return Ok(Arc::new(convert(rt, &object, version)));
    }
    let stored = state.store.create(&key, object)?;
    after_write(state, rt, &stored, false);
    Ok(Arc::new(convert(rt, &stored, version)))
}

/// Side effects of a write that the real server's other components perform at once.
fn after_write(state: &State, rt: &ResourceType, object: &Value, removed: bool) {
    match rt.behavior {
        Behavior::Namespace if !removed => {
            let ns = meta::name(object);
            let key = ObjectKey::new(GroupResource::new("", "serviceaccounts"), ns, "default");
            if state.store.get(&key).is_none() && !meta::is_deleting(object) {
                let sa = json!({
                    "apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": ns, "uid": meta::new_uid(), "creationTimestamp": meta::now()}
                });
                // Someone else creating it first is fine.
                let _ = state.store.create(&key, sa);
            }
        }
        Behavior::CustomResourceDefinition => {
            if let Some(crd_type) = type_from_crd(object) {
                if removed {
                    let gr = crd_type.group_resource();
                    state.registry.remove(&gr);
                    state.store.drop_resource(&gr);
                } else {
                    state.registry.insert(crd_type);
                }
            }
        }
        _ => {}
    }
}

/// Updates an object: `make` gets the current object (as seen through `version`) and returns
/// the desired one. Enforces resourceVersion preconditions, status/spec separation, immutable
/// metadata, validation and generation; a no-op write changes nothing.
pub fn update(
    state: &State,
    rt: &ResourceType,
    version: &str,
    key: &ObjectKey,
    subresource: Subresource,
    dry_run: bool,
    make: impl FnOnce(&Value) -> Result<Value, ApiError>,
) -> Result<Arc<Value>, ApiError> {
    let mut dry_result: Option<Value> = None;
    let crd_schema = CrdSchema::lookup(state, rt, version);
    let written = state.store.update(key, |current| {
        let old: &Value = current;
        let seen = convert(rt, old, version);
        let mut new = make(&seen)?;
        if !new.is_object() {
            return Err(ApiError::bad_request("the body of the request is not a JSON object"));
        }
        if meta::name(&new) != key.name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                meta::name(&new),
                key.name
            )));
        }
        if rt.namespaced {
            let ns = meta::namespace(&new);
            if !ns.is_empty() && ns != key.namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        if let Some(rv) = new.pointer("/metadata/resourceVersion").and_then(Value::as_str)
            && !rv.is_empty() && Some(rv) != old.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                return Err(ApiError::stale(&key.resource, &key.name));
            }
        match subresource {
            Subresource::Status => {
                let status = new.get("status").cloned();
                new = old.clone();
                match status {
                    Some(s) if !s.is_null() => new["status"] = s,
                    _ => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            Subresource::Main => {
                if rt.has_status() {
                    match old.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            if let Some(m) = new.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
            }
        }
        new["apiVersion"] = json!(rt.api_version(rt.preferred_version()));
        new["kind"] = json!(rt.kind);
        if let (Some(new_meta), Some(old_meta)) = (
            new.get_mut("metadata").and_then(Value::as_object_mut),
            old.get("metadata").and_then(Value::as_object),
        ) {
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "resourceVersion",
            ] {
                match old_meta.get(field) {
                    Some(v) => {
                        new_meta.insert(field.into(), v.clone());
                    }
                    None => {
                        new_meta.remove(field);
                    }
                }
            }
            new_meta.remove("selfLink");
            if new_meta.get("generateName").is_none()
                && let Some(g) = old_meta.get("generateName") {
                    new_meta.insert("generateName".into(), g.clone());
                }
        }
        kinds::prepare_update(rt, &mut new, old);
        if meta::is_deleting(old) {
            let old_f = meta::finalizers(old);
            let added: Vec<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !old_f.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &rt.kind,
                    &rt.group,
                    &key.name,
                    &[crate::error::FieldError::forbidden(
                        "metadata.finalizers",
                        &format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
                    )],
                ));
            }
        }
        crd_schema.admit_update(rt, &mut new, old, subresource == Subresource::Main)?;
        if subresource == Subresource::Main {
            let errors = kinds::validate(rt, &new, Some(old));
            if !errors.is_empty() {
                return Err(ApiError::invalid(&rt.kind, &rt.group, &key.name, &errors));
            }
            spark_application::validating_webhook(&state.config, rt, &new, Some(old))?;
        }
        if rt.has_generation && kinds::spec_changed(&new, old) {
            let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        if new == *old {
            return Ok(Change::Unchanged);
        }
        let remove = meta::is_deleting(&new) && meta::finalizers(&new).is_empty() && rt.behavior != Behavior::Namespace;
        if dry_run {
            dry_result = Some(new);
            return Ok(Change::Unchanged);
        }
        Ok(if remove { Change::Remove } else { Change::Replace(new) })
    })?;
    if let Some(result) = dry_result {
        return Ok(Arc::new(convert(rt, &result, version)));
    }
    if written.event.is_some() {
        after_write(
            state,
            rt,
            &written.object,
            written.event == Some(crate::store::EventType::Deleted),
        );
    }
    Ok(Arc::new(convert(rt, &written.object, version)))
}

/// Where the deadline of a deletion already under way moves when it is asked again with a
/// shorter grace period: back by the difference, so that deletionTimestamp less
/// deletionGracePeriodSeconds stays the time the deletion was first requested (the API server's
/// `rest.BeforeDelete`). None when the object is not being deleted with a longer grace.
fn shortened_deletion(old: &Value, grace: i64) -> Option<Timestamp> {
    let at = meta::parse_time(old.pointer("/metadata/deletionTimestamp")?.as_str()?)?;
    let current = old
        .pointer("/metadata/deletionGracePeriodSeconds")?
        .as_i64()?;
    (current > grace).then(|| {
        at.checked_sub(SignedDuration::from_secs(current - grace))
            .unwrap_or(at)
    })
}

fn default_propagation(rt: &ResourceType) -> Propagation {
    // batch/v1 Jobs keep the legacy default of orphaning their pods.
    if rt.behavior == Behavior::Job {
        Propagation::Orphan
    } else {
        Propagation::Background
    }
}

/// Deletes an object: graceful deletion for pods on a node, finalizers, propagation.
pub fn delete(
    state: &State,
    rt: &ResourceType,
    key: &ObjectKey,
    opts: &DeleteOptions,
) -> Result<Deleted, ApiError> {
    let mut dry_result: Option<(Value, bool)> = None;
    let written = state.store.update(key, |current| {
        let old: &Value = current;
        if let Some(uid) = &opts.uid {
            let have = meta::uid(old).unwrap_or("");
            if uid != have {
                return Err(ApiError::conflict(
                    &key.resource,
                    &key.name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            let have = old.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
            if rv != have {
                return Err(ApiError::conflict(
                    &key.resource,
                    &key.name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
                ));
            }
        }
        let mut new = old.clone();
        let now = Timestamp::now();
        if rt.behavior == Behavior::Namespace {
            if meta::is_deleting(old) {
                return Ok(Change::Unchanged);
            }
            new["metadata"]["deletionTimestamp"] = json!(meta::format_time(now));
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            new["status"]["phase"] = json!("Terminating");
            if opts.dry_run {
                dry_result = Some((new, false));
                return Ok(Change::Unchanged);
            }
            return Ok(Change::Replace(new));
        }
        let mut finalizers = meta::finalizers(old);
        let policy = opts.propagation.unwrap_or_else(|| default_propagation(rt));
        let gc_finalizer = match policy {
            Propagation::Orphan => Some(ORPHAN_FINALIZER),
            Propagation::Foreground => Some(FOREGROUND_FINALIZER),
            Propagation::Background => None,
        };
        if let Some(f) = gc_finalizer
            && !finalizers.iter().any(|x| x == f) {
                finalizers.push(f.to_string());
            }
        let mut grace = 0;
        if rt.behavior == Behavior::Pod {
            let bound = old.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
            let phase = old.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
            let terminal = matches!(phase, "Succeeded" | "Failed");
            grace = opts
                .grace_period
                .or_else(|| old.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
                .unwrap_or(30)
                .max(0);
            if !bound || terminal {
                grace = 0;
            }
            if grace > 0 {
                let current = old.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
                if meta::is_deleting(old) && current.is_some_and(|c| c <= grace) {
                    // Already terminating with a grace no longer than asked.
                    meta::set_finalizers(&mut new, &finalizers);
                } else {
                    let at = shortened_deletion(old, grace)
                        .unwrap_or_else(|| now.checked_add(SignedDuration::from_secs(grace)).unwrap_or(now));
                    new["metadata"]["deletionTimestamp"] = json!(meta::format_time(at));
                    new["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                    meta::set_finalizers(&mut new, &finalizers);
                }
                if opts.dry_run {
                    dry_result = Some((new, false));
                    return Ok(Change::Unchanged);
                }
                return Ok(if new == *old { Change::Unchanged } else { Change::Replace(new) });
            }
        }
        if finalizers.is_empty() {
            if opts.dry_run {
                dry_result = Some((old.clone(), true));
                return Ok(Change::Unchanged);
            }
            return Ok(Change::Remove);
        }
        if !meta::is_deleting(old) {
            new["metadata"]["deletionTimestamp"] = json!(meta::format_time(now));
            // The API server bumps the generation of an object it marks as being deleted.
            if let Some(generation) = old.pointer("/metadata/generation").and_then(Value::as_i64)
                && generation > 0
            {
                new["metadata"]["generation"] = json!(generation + 1);
            }
        } else if let Some(at) = shortened_deletion(old, 0) {
            new["metadata"]["deletionTimestamp"] = json!(meta::format_time(at));
        }
        if !meta::is_deleting(old) || grace == 0 {
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        meta::set_finalizers(&mut new, &finalizers);
        if opts.dry_run {
            dry_result = Some((new, false));
            return Ok(Change::Unchanged);
        }
        Ok(if new == *old { Change::Unchanged } else { Change::Replace(new) })
    })?;
    if let Some((object, removed)) = dry_result {
        return Ok(Deleted {
            object: Arc::new(object),
            removed,
        });
    }
    let removed = written.event == Some(crate::store::EventType::Deleted);
    if written.event.is_some() {
        after_write(state, rt, &written.object, removed);
    }
    Ok(Deleted {
        object: written.object,
        removed,
    })
}

/// Removes one finalizer (controllers); the object goes when it was the last one and the object
/// is being deleted.
pub fn remove_finalizer(state: &State, key: &ObjectKey, finalizer: &str) -> Result<(), StoreError> {
    let rt = state.registry.get(&key.resource);
    let written = state.store.update::<StoreError>(key, |current| {
        let mut finalizers = meta::finalizers(current);
        if !finalizers.iter().any(|f| f == finalizer) {
            return Ok(Change::Unchanged);
        }
        finalizers.retain(|f| f != finalizer);
        if finalizers.is_empty() && meta::is_deleting(current) {
            return Ok(Change::Remove);
        }
        let mut new = (**current).clone();
        meta::set_finalizers(&mut new, &finalizers);
        Ok(Change::Replace(new))
    })?;
    if let (Some(rt), Some(crate::store::EventType::Deleted)) = (rt, written.event) {
        after_write(state, &rt, &written.object, true);
    }
    Ok(())
}

/// Changes an object in place without API semantics (controllers writing what they own:
/// status, bindings, finalizers). `f` returns false to leave the object unchanged.
pub fn mutate(
    state: &State,
    key: &ObjectKey,
    f: impl FnOnce(&mut Value) -> bool,
) -> Result<Arc<Value>, StoreError> {
    let written = state.store.update::<StoreError>(key, |current| {
        let mut new = (**current).clone();
        if f(&mut new) && new != **current {
            Ok(Change::Replace(new))
        } else {
            Ok(Change::Unchanged)
        }
    })?;
    Ok(written.object)
}
