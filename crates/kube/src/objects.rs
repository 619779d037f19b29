//! The objects a job runs as, whatever their kind: creating or adopting one, recording on it
//! what kubeferry decided, deleting it only if it is still the same object; and what a read of
//! one tells.

use std::fmt::Debug;
use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kubeferry_core::ExecutionInfo;
use kubeferry_core::marks::{
    JOB_ID_ANNOTATION, KEPT_OUTCOME_ANNOTATION, OUTCOME_ANNOTATION, RECORD_FINALIZER,
    SPEC_HASH_ANNOTATION, held_for_record,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

use crate::cluster::{Cluster, Op};
use crate::error::{Error, Result};
use crate::replies::DryRun;

/// What the protocols need of a resource's objects.
pub(crate) trait Object:
    kube::Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Object for K where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// What a release ([`Objects::release_seen`]) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// Let go of, or nothing left to let go of (gone, replaced, let go of already).
    Done,
    /// Nothing: the object changed since the copy (deleted, let go of already, or given an
    /// outcome the copy did not show); the watch delivers it as it is now.
    ChangedMeanwhile,
    /// Nothing: the server refuses the patch of an object unchanged since the copy (a
    /// validation or an admission policy), so no retry lets it go.
    Refused,
}

/// The objects of one resource in one namespace, and how operations on them are named.
pub(crate) struct Objects<K> {
    /// The API of the objects.
    pub(crate) api: Api<K>,
    /// The resource as errors name it (`jobs.batch`, `sparkapplications.spark.apache.org`).
    pub(crate) resource: &'static str,
    /// The kind as users know it (`Job`, `SparkApplication`).
    pub(crate) kind: &'static str,
    /// The namespace.
    pub(crate) namespace: String,
    /// Whether a delete removes the object's dependents first (foreground propagation): for
    /// Jobs and JobSets, whose pods the garbage collector would stop only once the object is
    /// gone, which kubeferry's finalizer delays until a settler records it. A SparkApplication's
    /// operator stops its driver itself when the application is deleted.
    pub(crate) dependents_first: bool,
}

/// What a delete found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deletion {
    /// The object is deleted, or being deleted.
    Deleted,
    /// There was no such object.
    Gone,
    /// A precondition failed: the object was replaced or changed.
    Conflict,
}

impl<K: Object> Objects<K> {
    fn op(&self, verb: &'static str, name: &str) -> Op {
        Op::named(verb, self.resource, &self.namespace, name)
    }

    /// The object, if it exists.
    pub(crate) async fn get(&self, cluster: &Cluster, name: &str) -> Result<Option<K>> {
        cluster
            .call(&self.op("get", name), true, || self.api.get_opt(name))
            .await
    }

    /// Creates `object` for `job_id`, or adopts the one an earlier attempt already created (a
    /// create whose response was lost): only if it carries the same job id and spec hash and
    /// is not being deleted. The name is deterministic, so a repeated create answers 409.
    /// Returns whether this call created it (`false`: it was there already), or `None` when
    /// `recorded` says the job's outcome is recorded by the time a create is repeated.
    ///
    /// A repeated create asks `recorded` first: while it was failing or its response was lost,
    /// the object an earlier attempt (or another submission) created may have run, been
    /// recorded and gone, freeing its name; a create then would run the job id twice. A record
    /// that cannot be read leaves the create to be repeated, as without the question.
    pub(crate) async fn create_or_adopt<R, Recorded>(
        &self,
        cluster: &Cluster,
        object: &K,
        job_id: &str,
        spec_hash: &str,
        recorded: R,
    ) -> Result<Option<bool>>
    where
        R: Fn() -> Recorded,
        Recorded: Future<Output = Result<bool>>,
    {
        /// What the create came to: the object, or its run found recorded before a repeat.
        enum Created<K> {
            Made(K),
            Recorded,
        }
        let name = object.meta().name.clone().unwrap_or_default();
        let params = PostParams::default();
        let recorded = &recorded;
        let created = cluster
            .call_checked(
                &self.op("create", &name),
                true,
                || async { self.api.create(&params, object).await.map(Created::Made) },
                || async move {
                    match recorded().await {
                        Ok(true) => Some(Created::Recorded),
                        Ok(false) => None,
                        Err(error) => {
                            debug!(message = "cannot read the record before repeating a create", job_id, %error);
                            None
                        }
                    }
                },
            )
            .await;
        match created {
            Ok(Created::Made(_)) => {
                info!(message = "job submitted", job_id, namespace = %self.namespace, %name, kind = self.kind);
                Ok(Some(true))
            }
            Ok(Created::Recorded) => Ok(None),
            Err(error) if error.is_conflict() => {
                let existing = self.get(cluster, &name).await?;
                // Gone between the 409 and the read: its run may be recorded by now.
                if existing.is_none() && matches!(recorded().await, Ok(true)) {
                    return Ok(None);
                }
                check_adoptable(
                    self.kind,
                    &self.namespace,
                    &name,
                    job_id,
                    spec_hash,
                    existing.as_ref().map(|o| o.meta()),
                )?;
                info!(message = "adopted an existing job", job_id, namespace = %self.namespace, %name, kind = self.kind);
                Ok(Some(false))
            }
            Err(error) => Err(error),
        }
    }

    /// `object` as the dry run `mode` shows it, as JSON: as kubeferry built it, or as the API
    /// server would store it ([`Objects::dry_create`]).
    pub(crate) async fn dry_run(
        &self,
        cluster: &Cluster,
        object: K,
        mode: DryRun,
    ) -> Result<serde_json::Value> {
        let name = object.meta().name.clone().unwrap_or_default();
        let object = match mode {
            DryRun::Client => object,
            DryRun::Server => self.dry_create(cluster, &object).await?,
        };
        crate::manifest::to_json(&object, &format!("{} {}/{name}", self.kind, self.namespace))
    }

    /// `object` as the API server would create it, judged by its validation, defaulting,
    /// admission webhooks and quotas, with nothing stored (`dryRun=All`).
    pub(crate) async fn dry_create(&self, cluster: &Cluster, object: &K) -> Result<K> {
        let name = object.meta().name.clone().unwrap_or_default();
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        cluster
            .call(&self.op("create", &name), true, || {
                self.api.create(&params, object)
            })
            .await
    }

    /// Sets `annotations`, only on the version `resource_version` of the object (a merge
    /// patch carrying the resourceVersion: the server answers 409 if the object changed
    /// since), in one write. Returns the object as patched.
    pub(crate) async fn annotate(
        &self,
        cluster: &Cluster,
        name: &str,
        resource_version: Option<&str>,
        annotations: &[(&str, &str)],
        retry_no_response: bool,
    ) -> Result<K> {
        self.annotate_and_set(
            cluster,
            name,
            resource_version,
            annotations,
            None,
            retry_no_response,
        )
        .await
    }

    /// Sets `annotations` as [`Objects::annotate`] does and, in the same write, merges `spec`
    /// into the object's spec.
    pub(crate) async fn annotate_and_set(
        &self,
        cluster: &Cluster,
        name: &str,
        resource_version: Option<&str>,
        annotations: &[(&str, &str)],
        spec: Option<serde_json::Value>,
        retry_no_response: bool,
    ) -> Result<K> {
        let annotations: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(key, value)| ((*key).to_string(), serde_json::json!(value)))
            .collect();
        let mut patch = serde_json::json!({
            "metadata": { "annotations": annotations, "resourceVersion": resource_version },
        });
        if let Some(spec) = spec {
            patch["spec"] = spec;
        }
        self.merge_patch(cluster, name, &patch, retry_no_response)
            .await
    }

    async fn patch_metadata(
        &self,
        cluster: &Cluster,
        name: &str,
        resource_version: Option<&str>,
        mut fields: serde_json::Value,
        retry_no_response: bool,
    ) -> Result<K> {
        fields["resourceVersion"] = serde_json::json!(resource_version);
        let patch = serde_json::json!({ "metadata": fields });
        self.merge_patch(cluster, name, &patch, retry_no_response)
            .await
    }

    async fn merge_patch(
        &self,
        cluster: &Cluster,
        name: &str,
        patch: &serde_json::Value,
        retry_no_response: bool,
    ) -> Result<K> {
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        cluster
            .call(&self.op("patch", name), retry_no_response, || {
                self.api.patch(name, &params, &patch)
            })
            .await
    }

    /// Takes [`RECORD_FINALIZER`] off the object `seen` (as a watch holds it) once its outcome
    /// record is kept, in one write with no read before it: a JSON patch that removes the
    /// finalizer where `seen` shows it after testing that it is still there (and the object the
    /// same). Neither a status change meanwhile nor a repeat can make it take another's
    /// finalizer: the test fails then (422), and nothing is done; the watch delivers the object
    /// as it is now, and a settler judges it again.
    ///
    /// `kept`, the outcome its record holds, is written on the object in the same patch as
    /// [`kubeferry_core::marks::KEPT_OUTCOME_ANNOTATION`], unless `seen` carries the same
    /// outcome recorded on it, and only where `seen` shows annotations (its spec hash is one).
    /// The kept copy is what the object answers once its record is gone.
    pub(crate) async fn release_seen(
        &self,
        cluster: &Cluster,
        seen: &kubeferry_core::observation::ManagedMeta,
        kept: Option<&kubeferry_core::ExecutionInfo>,
    ) -> Result<Released> {
        let Some(at) = seen.held else {
            return Ok(Released::Done);
        };
        let path = format!("/metadata/finalizers/{at}");
        let mut ops = vec![
            serde_json::json!({ "op": "test", "path": "/metadata/uid", "value": seen.uid }),
            serde_json::json!({ "op": "test", "path": path, "value": RECORD_FINALIZER }),
            serde_json::json!({ "op": "remove", "path": path }),
        ];
        // A copy that shows no deletion lets go only of an object not deleted since: one
        // deleted meanwhile is held for the name hold (`settling::release_held`). A test of
        // `null` passes on an absent key in Kubernetes' JSON patch.
        let undeleted = seen.deletion_timestamp.is_none();
        if undeleted {
            ops.insert(
                0,
                serde_json::json!({ "op": "test", "path": "/metadata/deletionTimestamp", "value": null }),
            );
        }
        // A JSON pointer spells `/` in a key as `~1`.
        let annotation = |key: &str| format!("/metadata/annotations/{}", key.replace('/', "~1"));
        // Where `seen` shows annotations, an outcome it does not carry is still not carried:
        // one another replica put on meanwhile (its record, kept before this replica's watch
        // showed it, then deleted by hand) is what readers answer, and this record gives way
        // to it (`Records::keep`).
        if seen.spec_hash.is_some() {
            let absent = [
                (OUTCOME_ANNOTATION, seen.recorded_outcome.is_none()),
                (KEPT_OUTCOME_ANNOTATION, !seen.kept_annotated),
            ];
            for (key, _) in absent.into_iter().filter(|(_, absent)| *absent) {
                ops.insert(
                    0,
                    serde_json::json!({ "op": "test", "path": annotation(key), "value": null }),
                );
            }
        }
        // The outcome kubeferry recorded on the object says the same, unless another
        // replica's record stood first (written before this replica's watch showed it).
        let said = matches!(&seen.recorded_outcome, Some(Ok(recorded)) if Some(recorded) == kept);
        if let Some(kept) = kept
            && !said
            && seen.spec_hash.is_some()
        {
            ops.push(serde_json::json!({
                "op": "add",
                "path": annotation(KEPT_OUTCOME_ANNOTATION),
                "value": kubeferry_core::marks::outcome_record(kept),
            }));
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
            .map_err(|source| Error::Manifest {
                operation: format!("release {}/{}", self.namespace, seen.name),
                source,
            })?;
        let (params, patch) = (PatchParams::default(), Patch::<()>::Json(patch));
        match cluster
            .call(&self.op("patch", &seen.name), true, || {
                self.api.patch(&seen.name, &params, &patch)
            })
            .await
        {
            Ok(_) => Ok(Released::Done),
            Err(error) if error.is_not_found() => Ok(Released::Done),
            // A test failed, or the server refused the patch: the object as it is now says
            // which (one read, only then).
            Err(Error::Api { code: 422, .. }) => {
                let Some(now) = self.get(cluster, &seen.name).await? else {
                    return Ok(Released::Done);
                };
                let meta = now.meta();
                if meta.uid.as_deref() != Some(seen.uid.as_str()) {
                    return Ok(Released::Done);
                }
                if meta.resource_version == seen.resource_version {
                    return Ok(Released::Refused);
                }
                // Let go of already, deleted since, or given an outcome: the watch delivers
                // it. A deleted one let go of needs nothing more.
                let held = held_for_record(meta.finalizers.as_deref());
                if !held && (!undeleted || meta.deletion_timestamp.is_some()) {
                    return Ok(Released::Done);
                }
                Ok(Released::ChangedMeanwhile)
            }
            Err(error) => Err(error),
        }
    }

    /// Takes [`RECORD_FINALIZER`] off the object `uid` once its outcome record is kept: the
    /// object's finalizers without it, with the resourceVersion they were read at as the
    /// precondition, so that a list changed meanwhile is read again rather than overwritten.
    /// An object gone, replaced or no longer held counts as released. Safe to repeat.
    pub(crate) async fn release(&self, cluster: &Cluster, name: &str, uid: &str) -> Result<()> {
        for _ in 0..5 {
            let Some(object) = self.get(cluster, name).await? else {
                return Ok(());
            };
            let meta = object.meta();
            let finalizers = meta.finalizers.as_deref();
            if meta.uid.as_deref() != Some(uid) || !held_for_record(finalizers) {
                return Ok(());
            }
            let rest: Vec<&String> = finalizers
                .unwrap_or_default()
                .iter()
                .filter(|f| *f != RECORD_FINALIZER)
                .collect();
            let fields = serde_json::json!({ "finalizers": rest });
            match self
                .patch_metadata(
                    cluster,
                    name,
                    meta.resource_version.as_deref(),
                    fields,
                    true,
                )
                .await
            {
                Ok(_) => return Ok(()),
                Err(error) if error.is_not_found() => return Ok(()),
                // Changed meanwhile (a repeat that finds it released, too): read again.
                Err(error) if error.is_conflict() => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Contended {
            operation: format!("release {}/{name}", self.namespace),
            message: format!("the finalizers of the {} kept changing", self.kind),
        })
    }

    /// Deletes the object, only if it is still the object `uid` (and, when given, still at
    /// `resource_version`). Safe to repeat: a repeat cannot touch a new object of the same name.
    /// When the delete fails, looks again: an object that is gone or being deleted counts as
    /// deleted (the delete took effect and its response was lost), and one replaced meanwhile
    /// as gone.
    ///
    /// Dependents first where [`Objects::dependents_first`] says so: kubeferry's finalizer holds
    /// the object until a settler lets it go, and a cancel whose process exits at once must
    /// still stop the work now.
    pub(crate) async fn delete(
        &self,
        cluster: &Cluster,
        name: &str,
        uid: &str,
        resource_version: Option<&str>,
    ) -> Result<Deletion> {
        let params = DeleteParams {
            propagation_policy: Some(if self.dependents_first {
                PropagationPolicy::Foreground
            } else {
                PropagationPolicy::Background
            }),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: resource_version.map(str::to_string),
            }),
            ..DeleteParams::default()
        };
        let deleted = cluster
            .call(&self.op("delete", name), true, || {
                self.api.delete(name, &params)
            })
            .await;
        let error = match deleted {
            Ok(_) => return Ok(Deletion::Deleted),
            Err(error) if error.is_not_found() => return Ok(Deletion::Gone),
            Err(error) if error.is_conflict() => return Ok(Deletion::Conflict),
            Err(error) => error,
        };
        match self.get(cluster, name).await {
            Ok(None) => Ok(Deletion::Gone),
            Ok(Some(object)) if object.meta().uid.as_deref() != Some(uid) => Ok(Deletion::Gone),
            Ok(Some(object)) if object.meta().deletion_timestamp.is_some() => Ok(Deletion::Deleted),
            _ => Err(error),
        }
    }
}

/// The error of a submission whose object name is taken, and why.
pub(crate) fn name_taken<'a>(
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
) -> impl Fn(String) -> Error + 'a {
    move |why| Error::NameTaken {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        why,
    }
}

/// Whether an existing object of a job's name may be adopted as the job's: only if it carries
/// the same job id and spec hash and is not being deleted (unless by its cancel).
pub(crate) fn check_adoptable(
    kind: &'static str,
    namespace: &str,
    name: &str,
    job_id: &str,
    spec_hash: &str,
    existing: Option<&ObjectMeta>,
) -> Result<()> {
    let taken = name_taken(kind, namespace, name);
    let Some(existing) = existing else {
        return Err(taken(
            "an object of that name was deleted while kubeferry looked at it; submit again".into(),
        ));
    };
    let annotations = existing.annotations.clone().unwrap_or_default();
    match annotations.get(JOB_ID_ANNOTATION) {
        Some(owner) if owner == job_id => {}
        Some(owner) => {
            return Err(taken(format!(
                "an object of that name belongs to job id {owner:?}; use another job id"
            )));
        }
        None => {
            return Err(taken(
                "an object of that name exists and is not managed by kubeferry; use another job id or delete that object".into(),
            ));
        }
    }
    if annotations.get(SPEC_HASH_ANNOTATION).map(String::as_str) != Some(spec_hash) {
        return Err(taken(format!(
            "job id {job_id:?} was submitted before from a different spec, and a job id names one spec: submit this spec under another job id"
        )));
    }
    // An object on its way out (cancelled, or deleted by someone else) is the job's run: the
    // submission answers that run (a job id never runs twice), as it does once the run's
    // outcome record stands alone, which a namespace's settler may already have written.
    Ok(())
}

/// A job's object as read from the API server just now, and the job's status from it.
pub(crate) struct Current<K> {
    /// Where the object lives.
    pub(crate) objects: Objects<K>,
    /// The object's metadata.
    pub(crate) meta: ObjectMeta,
    /// The job's status, from this very object.
    pub(crate) status: ExecutionInfo,
    /// Whether the status was mapped from the job's pods as the API server lists them now
    /// (`false`: they could not be listed, and a cache stood in for them).
    pub(crate) fresh: bool,
    /// Whether the object itself says its work ended, its verdict perhaps not in yet (a Job's
    /// counts: its pods, and their exit codes, may be gone).
    pub(crate) ended: bool,
}

/// One run of a job's main container: a pod, oldest first in [`Jobs::attempts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Attempt {
    /// The pod's name.
    pub(crate) pod: String,
    /// The pod's uid (a rerun may reuse the name).
    pub(crate) uid: String,
    /// The container whose log is the job's log.
    pub(crate) container: String,
    /// Whether the container has started (so it has a log).
    pub(crate) started: bool,
    /// The pod's index in an indexed job; its Job's index within its replicated job in a
    /// JobSet.
    pub(crate) index: Option<u32>,
    /// The pod's replicated job in a JobSet.
    pub(crate) replica: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(job_id: &str, hash: &str, deleting: bool) -> ObjectMeta {
        serde_json::from_value(serde_json::json!({
            "name": "n",
            "annotations": {JOB_ID_ANNOTATION: job_id, SPEC_HASH_ANNOTATION: hash},
            "deletionTimestamp": deleting.then_some("2026-01-01T00:00:00Z"),
        }))
        .expect("metadata")
    }

    #[test]
    fn only_the_same_job_is_adopted() {
        let check = |existing: Option<&ObjectMeta>| {
            check_adoptable("Job", "ns", "n", "a", "h", existing).map_err(|e| e.to_string())
        };
        assert!(check(Some(&meta("a", "h", false))).is_ok());
        // Being deleted, it is still that job's run, on its way out: answered, not refused.
        assert!(check(Some(&meta("a", "h", true))).is_ok());
        for (existing, why) in [
            (Some(meta("b", "h", false)), "belongs to job id \"b\""),
            (Some(meta("a", "x", false)), "from a different spec"),
            (Some(meta("b", "h", true)), "belongs to job id \"b\""),
            (None, "deleted while kubeferry looked at it"),
        ] {
            let error = check(existing.as_ref()).expect_err("refused");
            assert!(error.contains(why), "{error}");
            assert!(error.contains("cannot create Job ns/n"), "{error}");
        }
        let unmanaged = ObjectMeta::default();
        assert!(
            check(Some(&unmanaged))
                .expect_err("refused")
                .contains("not managed by kubeferry")
        );
    }
}
