//! The protocols every kind of job follows, whatever object runs it (a `batch/v1` Job, a
//! SparkApplication): creating or adopting the object, recording what kubeferry decided,
//! deleting it only if it is still the same object, cancelling (mark, then delete), waiting for
//! the end, and reading the log of the job's pods. Each is written once, here; a kind of job
//! provides what differs through [`Jobs`].

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kubeferry_core::marks::{CANCEL_ANNOTATION, JOB_ID_ANNOTATION, SPEC_HASH_ANNOTATION};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tracing::info;

use crate::answers::CancelOutcome;
use crate::cluster::{Cluster, Op};
use crate::error::{Error, Result};
use crate::logs::{self, FollowOptions, LogTarget, TailOptions};

/// What the protocols need of a resource's objects.
pub(crate) trait Object:
    kube::Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Object for K where
    K: kube::Resource + Clone + Serialize + DeserializeOwned + Debug + Send + Sync + 'static
{
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
    pub(crate) async fn create_or_adopt(
        &self,
        cluster: &Cluster,
        object: &K,
        job_id: &str,
        spec_hash: &str,
    ) -> Result<()> {
        let name = object.meta().name.clone().unwrap_or_default();
        let params = PostParams::default();
        let created = cluster
            .call(&self.op("create", &name), true, || {
                self.api.create(&params, object)
            })
            .await;
        match created {
            Ok(_) => {
                info!(message = "job submitted", job_id, namespace = %self.namespace, %name, kind = self.kind);
                Ok(())
            }
            Err(error) if error.is_conflict() => {
                let existing = self.get(cluster, &name).await?;
                check_adoptable(
                    self.kind,
                    &self.namespace,
                    &name,
                    job_id,
                    spec_hash,
                    existing.as_ref().map(|o| o.meta()),
                )?;
                info!(message = "adopted an existing job", job_id, namespace = %self.namespace, %name, kind = self.kind);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Sets an annotation, only on the version `resource_version` of the object (a merge patch
    /// carrying the resourceVersion: the server answers 409 if the object changed since).
    /// Returns the object as patched.
    pub(crate) async fn annotate(
        &self,
        cluster: &Cluster,
        name: &str,
        resource_version: Option<&str>,
        key: &str,
        value: &str,
        retry_no_response: bool,
    ) -> Result<K> {
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": resource_version,
                "annotations": { key: value },
            }
        });
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        cluster
            .call(&self.op("patch", name), retry_no_response, || {
                self.api.patch(name, &params, &patch)
            })
            .await
    }

    /// Deletes the object with background propagation, only if it is still the object `uid`
    /// (and, when given, still at `resource_version`). Safe to repeat: a repeat cannot touch a
    /// new object of the same name.
    pub(crate) async fn delete(
        &self,
        cluster: &Cluster,
        name: &str,
        uid: &str,
        resource_version: Option<&str>,
    ) -> Result<Deletion> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: resource_version.map(str::to_string),
            }),
            ..DeleteParams::default()
        };
        match cluster
            .call(&self.op("delete", name), true, || {
                self.api.delete(name, &params)
            })
            .await
        {
            Ok(_) => Ok(Deletion::Deleted),
            Err(error) if error.is_not_found() => Ok(Deletion::Gone),
            Err(error) if error.is_conflict() => Ok(Deletion::Conflict),
            Err(error) => Err(error),
        }
    }

    /// Deletes the object; when the delete fails, looks again: an object that is gone or being
    /// deleted counts as deleted (the delete took effect and its response was lost).
    pub(crate) async fn delete_confirmed(
        &self,
        cluster: &Cluster,
        name: &str,
        uid: &str,
    ) -> Result<()> {
        match self.delete(cluster, name, uid, None).await {
            Ok(_) => Ok(()),
            Err(error) => match self.get(cluster, name).await {
                Ok(None) => Ok(()),
                Ok(Some(object)) if object.meta().deletion_timestamp.is_some() => Ok(()),
                Ok(Some(object)) if object.meta().uid.as_deref() != Some(uid) => Ok(()),
                _ => Err(error),
            },
        }
    }
}

/// Whether an existing object of a job's name may be adopted as the job's: only if it carries
/// the same job id and spec hash and is not being deleted.
pub(crate) fn check_adoptable(
    kind: &'static str,
    namespace: &str,
    name: &str,
    job_id: &str,
    spec_hash: &str,
    existing: Option<&ObjectMeta>,
) -> Result<()> {
    let taken = |why: String| Error::NameTaken {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        why,
    };
    let Some(existing) = existing else {
        return Err(taken(
            "it was deleted while kubeferry looked at it; submit again".into(),
        ));
    };
    let annotations = existing.annotations.clone().unwrap_or_default();
    match annotations.get(JOB_ID_ANNOTATION) {
        Some(owner) if owner == job_id => {}
        Some(owner) => return Err(taken(format!("belongs to job id {owner:?}"))),
        None => return Err(taken("is not managed by kubeferry".into())),
    }
    if annotations.get(SPEC_HASH_ANNOTATION).map(String::as_str) != Some(spec_hash) {
        return Err(taken(format!(
            "was created for job id {job_id:?} from a different spec; a job id names one spec"
        )));
    }
    if existing.deletion_timestamp.is_some() {
        return Err(taken(
            "is being deleted; wait for it to go, or use a new job id".into(),
        ));
    }
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
    /// The pod's index in an indexed job.
    pub(crate) index: Option<u32>,
}

/// What differs between the kinds of jobs, for the shared protocols.
pub(crate) trait Jobs: Send + Sync {
    /// The object a job of this kind runs as.
    type Object: Object;

    /// The cluster.
    fn cluster(&self) -> &Cluster;

    /// How often a waiter looks again when nothing changes (time-based rules).
    fn recheck_interval(&self) -> Duration;

    /// The job's status (from the watch cache where possible).
    fn status(&self, id: &ExecutionId) -> impl Future<Output = Result<ExecutionInfo>> + Send;

    /// The job's object read from the API server now (not from a cache), with the status it
    /// shows; `None` when there is no such object.
    fn read(
        &self,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Option<Current<Self::Object>>>> + Send;

    /// Notifications naming the jobs of `id`'s namespace whose objects or pods changed.
    fn changes(
        &self,
        id: &ExecutionId,
    ) -> impl Future<Output = Result<Vec<broadcast::Receiver<String>>>> + Send;

    /// The runs of the job's main container, oldest first.
    fn attempts(&self, id: &ExecutionId) -> impl Future<Output = Result<Vec<Attempt>>> + Send;

    /// Remembers an answer given for the job, computed from its object at `version`, as the
    /// one later answers build on (an older copy of the object no longer takes it back).
    fn remember(&self, id: &ExecutionId, info: &ExecutionInfo, version: Option<&str>);
}

/// Cancels a job: returns at once. A job that already ended keeps its outcome. The cancel mark
/// goes on with a resourceVersion precondition (so an outcome reached meanwhile is seen, not
/// overwritten), then the object is deleted with its pods. A delete whose response was lost
/// counts once the object is gone or being deleted; the mark is never taken off.
pub(crate) async fn cancel<J: Jobs>(jobs: &J, id: &ExecutionId) -> Result<CancelOutcome> {
    cancel_from(jobs, id, None).await
}

/// [`cancel`], deciding the first time from `seen`, the object as read earlier, when given. A
/// copy that is stale by the time the mark goes on is what the resourceVersion precondition is
/// for: tests hand one in to play the race of a job that ends between the read and the mark.
pub(crate) async fn cancel_from<J: Jobs>(
    jobs: &J,
    id: &ExecutionId,
    mut seen: Option<Current<J::Object>>,
) -> Result<CancelOutcome> {
    let cluster = jobs.cluster();
    let mut kind = "object";
    for _ in 0..5 {
        let read = match seen.take() {
            Some(current) => Some(current),
            None => jobs.read(id).await?,
        };
        let Some(current) = read else {
            // Gone: cancelled before (here or through another replica, perhaps at this very
            // moment), or never there. A job the cache still shows running is going: the
            // cancel is done.
            return match jobs.status(id).await {
                Ok(info) if info.is_terminal() => Ok(CancelOutcome::AlreadyEnded(info)),
                Ok(info) => Ok(CancelOutcome::Requested(accepted(info))),
                Err(error) => Err(error),
            };
        };
        kind = current.objects.kind;
        if current.status.is_terminal() {
            return Ok(CancelOutcome::AlreadyEnded(current.status));
        }
        let marked = current
            .meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CANCEL_ANNOTATION));
        let mut marked_version = current.meta.resource_version.clone();
        if !marked {
            // Not repeated on a lost response: the precondition makes a repeat answer 409,
            // and the loop re-reads and re-decides anyway.
            match current
                .objects
                .annotate(
                    cluster,
                    &id.name,
                    current.meta.resource_version.as_deref(),
                    CANCEL_ANNOTATION,
                    &Timestamp::now().to_string(),
                    false,
                )
                .await
            {
                Ok(patched) => {
                    marked_version = kube::Resource::meta(&patched).resource_version.clone()
                }
                // 409: the object changed; 404: it went (another replica's cancel deleting
                // it at the same moment); a lost connection: it may have either way. Read
                // again and decide again.
                Err(Error::Api {
                    code: 404 | 409, ..
                })
                | Err(Error::Unreachable { .. }) => {
                    continue;
                }
                Err(error) => return Err(error),
            }
        }
        let uid = current.meta.uid.clone().unwrap_or_default();
        current
            .objects
            .delete_confirmed(cluster, &id.name, &uid)
            .await?;
        info!(message = "cancel requested", id = %id);
        let info = match jobs.status(id).await {
            Ok(info) => {
                let info = accepted(info);
                // The answer stands here from now on: a cache that has not yet seen the mark
                // would otherwise answer STARTED again on the next question.
                jobs.remember(id, &info, marked_version.as_deref());
                info
            }
            Err(Error::NoSuchJob { .. }) => {
                ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
                    .with_message(format!("cancelled; the {kind} was deleted"))
            }
            Err(error) => return Err(error),
        };
        return Ok(CancelOutcome::Requested(info));
    }
    Err(Error::Contended {
        operation: format!("cancel {id}"),
        message: format!("the {kind} kept changing while kubeferry tried to mark it; try again"),
    })
}

/// The managed objects among `listed` whose job ids are not in `known` (orphans: a caller
/// that lost track of them, or a create whose answer was lost); each deleted, only if it is
/// still the same object, when `delete`. `id` names an object's execution.
pub(crate) async fn sweep<K: Object>(
    cluster: &Cluster,
    objects: &Objects<K>,
    listed: Vec<K>,
    known: &HashSet<String>,
    delete: bool,
    id: impl Fn(&str) -> ExecutionId,
) -> Result<Vec<crate::Orphan>> {
    let mut orphans = Vec::new();
    for object in listed {
        let meta = kube::Resource::meta(&object);
        let job_id = kubeferry_core::marks::job_id_of(meta);
        if job_id.as_ref().is_some_and(|id| known.contains(id)) {
            continue;
        }
        let name = meta.name.clone().unwrap_or_default();
        if delete {
            let uid = meta.uid.as_deref().unwrap_or_default();
            objects.delete(cluster, &name, uid, None).await?;
            info!(message = "deleted an orphan", namespace = %objects.namespace, name = %name, job_id = ?job_id);
        }
        orphans.push(crate::Orphan {
            id: id(&name),
            job_id,
            created_at: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleted: delete,
        });
    }
    Ok(orphans)
}

/// What an accepted cancel answers: the job's status once it is final, and CANCELLING
/// otherwise, whatever a cache that has not yet seen the mark or the deletion still says.
fn accepted(info: ExecutionInfo) -> ExecutionInfo {
    if info.is_terminal() || info.state == JobState::Cancelling {
        return info;
    }
    let mut cancelling = ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested)
        .with_message("cancel requested; waiting for the job to stop");
    cancelling.started_at = info.started_at;
    cancelling
}

/// Waits for the job to end, calling `on_change` with each new status. Costs no API requests
/// while the watches are healthy: changes come from them.
pub(crate) async fn wait<J: Jobs>(
    jobs: &J,
    id: &ExecutionId,
    timeout: Option<Duration>,
    mut on_change: impl FnMut(&ExecutionInfo),
) -> Result<ExecutionInfo> {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut changes = jobs.changes(id).await?;
    let mut last: Option<ExecutionInfo> = None;
    loop {
        let info = jobs.status(id).await?;
        if last.as_ref() != Some(&info) {
            on_change(&info);
            last = Some(info.clone());
        }
        if info.is_terminal() {
            return Ok(info);
        }
        let until_deadline = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = any_changed(&mut changes, &id.name) => {}
            _ = tokio::time::sleep(jobs.recheck_interval()) => {}
            _ = until_deadline => {
                return Err(Error::WaitTimeout {
                    id: id.clone(),
                    after: timeout.unwrap_or_default(),
                    state: info.state,
                });
            }
        }
    }
}

/// The end of the job's log: the newest attempt's container, or the attempt before it with
/// `previous`. Empty when no attempt has started yet, or when its pod is gone.
pub(crate) async fn tail<J: Jobs>(
    jobs: &J,
    id: &ExecutionId,
    options: &TailOptions,
) -> Result<String> {
    // Only an attempt whose container started has a log (the server refuses to read one that
    // is waiting for a node or an image).
    let attempts: Vec<Attempt> = jobs
        .attempts(id)
        .await?
        .into_iter()
        .filter(|a| a.started && options.index.is_none_or(|index| a.index == Some(index)))
        .collect();
    let back = usize::from(options.previous);
    let Some(attempt) = attempts.iter().rev().nth(back) else {
        if attempts.is_empty() {
            // Distinguish "no log yet" from "no such job".
            jobs.status(id).await?;
        }
        return Ok(String::new());
    };
    let target = LogTarget {
        namespace: id.namespace.clone(),
        pod: attempt.pod.clone(),
        container: attempt.container.clone(),
        uid: None,
    };
    let options = TailOptions {
        previous: false,
        ..options.clone()
    };
    match logs::tail(jobs.cluster(), &target, &options).await {
        // The pod went between the lookup and the read (deleted, released by an operator):
        // there is no log any more, as there would be none a moment later.
        Err(error) if error.is_not_found() => Ok(String::new()),
        other => other,
    }
}

/// Follows the job's log, attempt after attempt, until the job ends.
pub(crate) fn follow<J: Jobs + 'static>(
    jobs: Arc<J>,
    id: ExecutionId,
    options: FollowOptions,
) -> impl Stream<Item = Result<String>> + Send + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move {
        if let Err(error) = follow_into(&*jobs, &id, &options, &sender).await {
            let _ = sender.send(Err(error)).await;
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

async fn follow_into<J: Jobs>(
    jobs: &J,
    id: &ExecutionId,
    options: &FollowOptions,
    sender: &tokio::sync::mpsc::Sender<Result<String>>,
) -> Result<()> {
    let mut changes = jobs.changes(id).await?;
    let mut followed: HashSet<String> = HashSet::new();
    loop {
        let info = jobs.status(id).await?;
        let attempts = jobs.attempts(id).await?;
        // Once the job has ended, every attempt has a final log, even one whose start the
        // pod watch has not shown yet.
        let next = attempts.iter().find(|a| {
            !followed.contains(&a.uid)
                && (info.is_terminal() || a.started)
                && options.index.is_none_or(|index| a.index == Some(index))
        });
        if let Some(attempt) = next {
            followed.insert(attempt.uid.clone());
            let target = LogTarget {
                namespace: id.namespace.clone(),
                pod: attempt.pod.clone(),
                container: attempt.container.clone(),
                uid: Some(attempt.uid.clone()),
            };
            let mut lines = Box::pin(logs::follow(
                jobs.cluster().clone(),
                target,
                options.clone(),
            ));
            while let Some(line) = lines.next().await {
                // The attempt's pod went before its log was opened (an operator releasing a
                // finished driver): it has no log left, as `tail` would find.
                if matches!(line, Err(Error::Api { code: 404, .. })) {
                    break;
                }
                // A log that cannot be read ends the follow with the error: going on to wait
                // for the next attempt would hold a reader of this one forever.
                let failed = line.is_err();
                if sender.send(line).await.is_err() || failed {
                    return Ok(());
                }
            }
            continue;
        }
        if info.is_terminal() {
            return Ok(());
        }
        tokio::select! {
            _ = any_changed(&mut changes, &id.name) => {}
            _ = tokio::time::sleep(jobs.recheck_interval()) => {}
        }
    }
}

/// Waits until a notification of any of `changes` names `name` (or notifications were lost).
async fn any_changed(changes: &mut [broadcast::Receiver<String>], name: &str) {
    if changes.is_empty() {
        return std::future::pending().await;
    }
    let waits = changes.iter_mut().map(|c| Box::pin(changed(c, name)));
    futures::future::select_all(waits).await;
}

/// Waits until a change notification names `name` (or notifications were lost).
async fn changed(changes: &mut broadcast::Receiver<String>, name: &str) {
    loop {
        match changes.recv().await {
            Ok(job) if job == name => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
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
        for (existing, why) in [
            (Some(meta("b", "h", false)), "belongs to job id \"b\""),
            (Some(meta("a", "x", false)), "from a different spec"),
            (Some(meta("a", "h", true)), "is being deleted"),
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
