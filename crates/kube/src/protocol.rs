//! The protocols every kind of job follows, whatever object runs it, written once over
//! [`Kind`]: cancelling (mark, then delete, and finishing a cancel nobody finished), reading the
//! log of the job's pods, listing, and sweeping orphans.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use jiff::Timestamp;
use kubeferry_core::marks::{
    CANCEL_ANNOTATION, CANCELLED_BY_ANNOTATION, held_for_record, job_id_of, spec_hash_of,
};
use kubeferry_core::observation::ManagedMeta;
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tracing::{info, warn};

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::kind::{Answers, Kind, record_as_answered};
use crate::objects::{Attempt, Current, Deletion, Object, Objects};
use crate::pod_logs::{self as logs, FollowOptions, LogTarget, Tail, TailOptions};
use crate::records::Records;
use crate::replies::{CancelOutcome, JobSummary, Orphan};
use crate::settling::retry_at;

/// Cancels a job: returns at once. A job that already ended keeps its outcome. The cancel mark
/// goes on with a resourceVersion precondition (so an outcome reached meanwhile is seen, not
/// overwritten), the job is read once more with its pods as the server lists them (one that
/// ended on its own before the mark keeps that end), then CANCELLED is recorded and the
/// object deleted with its pods ([`stop_cancelled`]). A delete whose response was lost counts
/// once the object is gone or being deleted; the mark is never taken off. What a cancel could
/// not finish (its record refused, its process gone) a settler finishes.
pub(crate) async fn cancel<J: Answers>(
    jobs: &J,
    id: &ExecutionId,
    requester: &str,
) -> Result<CancelOutcome> {
    cancel_from(jobs, id, None, requester).await
}

/// [`cancel`], deciding the first time from `seen`, the object as read earlier, when given. A
/// copy that is stale by the time the mark goes on is what the resourceVersion precondition is
/// for: tests hand one in to play the race of a job that ends between the read and the mark.
pub(crate) async fn cancel_from<J: Answers>(
    jobs: &J,
    id: &ExecutionId,
    mut seen: Option<Current<J::Object>>,
    requester: &str,
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
            // The mark says when the cancel was requested and by whom. Not repeated on a lost
            // response: the precondition makes a repeat answer 409, and the loop re-reads and
            // re-decides anyway.
            let requested_at = Timestamp::now().to_string();
            let mark = [
                (CANCEL_ANNOTATION, requested_at.as_str()),
                (CANCELLED_BY_ANNOTATION, requester),
            ];
            match current
                .objects
                .annotate(
                    cluster,
                    &id.name,
                    current.meta.resource_version.as_deref(),
                    &mark,
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
        // The job as the server shows it now, with its mark: a main container that ended on
        // its own before the mark (its exit code known, the verdict not in yet; a cache or
        // the read before the mark may not have shown it) decides the job, not the cancel.
        // Only a job seen running after its mark, its pods read from the server, is recorded
        // cancelled and stopped here; should that read fail, the one before the mark decides,
        // if its pods were read from the server.
        let reread = jobs.read(id).await;
        // The object's own word that the work ended (a Job counting its attempt succeeded, or
        // out of retries, after a drain took the pod and its exit code away): the cancel has
        // nothing left to stop, and the verdict on its way is the job's outcome.
        let ended = match &reread {
            Ok(Some(now)) => now.ended,
            Ok(None) | Err(_) => current.ended,
        };
        if ended {
            info!(message = "cancel requested after the job's work ended", id = %id);
            let info = accepted(jobs.status(id).await?);
            jobs.remember(id, &info, marked_version.as_deref());
            return Ok(CancelOutcome::Requested(info));
        }
        // The delete carries the version the job was last seen running at: a job that reaches
        // its own outcome meanwhile is not deleted (it keeps that outcome, rule 1, and the
        // cancel's record gives way to it), and one that merely changed is read again. So a
        // deleted job never showed an outcome of its own while undeleted.
        let seen_version = match &reread {
            Ok(Some(now)) => now.meta.resource_version.clone(),
            Ok(None) | Err(_) => marked_version.clone(),
        };
        let reread_meta = match &reread {
            Ok(Some(now)) => Some(now.meta.clone()),
            Ok(None) | Err(_) => None,
        };
        let running_when_marked = match reread {
            Ok(Some(now)) if now.fresh => {
                !now.status.is_terminal() && now.status.exit_code.is_none()
            }
            Ok(None) => false,
            Ok(Some(_)) | Err(_) => current.fresh && current.status.exit_code.is_none(),
        };
        if !running_when_marked {
            // Whether the job ended on its own first is for its settler to tell, from its
            // views once they show that end, a retry interval after the mark: the job's own
            // outcome then, or the cancel finished as below.
            info!(message = "cancel requested; its settler finishes it", id = %id);
            let info = accepted(jobs.status(id).await?);
            jobs.remember(id, &info, marked_version.as_deref());
            return Ok(CancelOutcome::Requested(info));
        }
        let uid = current.meta.uid.clone().unwrap_or_default();
        let record = cancelled_record(
            J::JOB_KIND,
            &id.name,
            job_id_of(&current.meta),
            spec_hash_of(&current.meta),
            current.meta.creation_timestamp.as_ref().map(|t| t.0),
            current.status.started_at,
            requester.to_string(),
        );
        let stopped = stop_cancelled(
            cluster,
            jobs.records(),
            &current.objects,
            record,
            &uid,
            seen_version.as_deref(),
        )
        .await;
        match stopped {
            Ok(Stopped::Cancelled) => info!(message = "cancel requested", id = %id),
            Ok(Stopped::Changed) => continue,
            // Recorded first (by its settler): the job's work ended before the cancel took it.
            // Answered as the object, as last read, lets the record be answered
            // (`kind::record_as_answered`), and this replica's answer from now on, whatever its
            // watch shows yet. An object still held with no outcome on it is let go by its
            // settler first: until then the cancel is accepted, and the job's end follows.
            Ok(Stopped::EndedFirst(recorded)) => {
                let read = reread_meta.as_ref().unwrap_or(&current.meta);
                let read = ManagedMeta::read(read);
                let Some(outcome) = record_as_answered(recorded, Some(&read)) else {
                    return Ok(CancelOutcome::Requested(accepted(jobs.status(id).await?)));
                };
                jobs.remember(id, &outcome, None);
                return Ok(CancelOutcome::AlreadyEnded(outcome));
            }
            Ok(Stopped::NotRecorded(error)) => {
                // Nothing deleted: the job runs on, marked (CANCELLING, never CANCELLED while
                // it runs), and a settler finishes the cancel once its record can be kept.
                warn!(message = "could not record the cancel; its settler finishes it", id = %id, %error);
                let mut info = accepted(jobs.status(id).await?);
                if !info.is_terminal() {
                    info.message = format!("{}; not done yet: {error}", info.message);
                }
                return Ok(CancelOutcome::Requested(info));
            }
            Err(error) => return Err(error),
        }
        let info = match jobs.status(id).await {
            Ok(info) => {
                let info = accepted(info);
                // The answer stands here from now on: a cache that has not yet seen the mark
                // would otherwise answer STARTED again on the next question.
                jobs.remember(id, &info, marked_version.as_deref());
                info
            }
            Err(Error::NoSuchJob { .. }) => {
                let info = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
                    .with_message(format!("cancelled; the {kind} was deleted"));
                // This replica's answer from now on: never "no such job" a moment later.
                jobs.remember(id, &info, None);
                info
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

/// What stopping a cancelled job came to.
pub(crate) enum Stopped {
    /// CANCELLED is on record, and the object deleted (or gone).
    Cancelled,
    /// CANCELLED is on record, and the object changed since the version given, so it was not
    /// deleted: its newer copy is judged again (a job that reached its own outcome meanwhile
    /// keeps it, and the cancel's record gives way to it).
    Changed,
    /// Another outcome was on record first (the job's own end, recorded by a settler): it
    /// stands, and the object is left to end by itself.
    EndedFirst(ExecutionInfo),
    /// The record could not be kept (this error), so nothing was deleted: the job runs on,
    /// marked.
    NotRecorded(Error),
}

/// Stops a cancelled job: its record first, then the delete of its object `uid` (at
/// `resource_version` when given). Recorded before the delete, so that no process, however
/// soon it comes and whatever fails in between, finds the job neither running nor recorded:
/// a job id submitted again answers this run, and no later process answers "no such job".
/// One write beyond the mark and the delete. A record already kept stands (the first written
/// wins); where records cannot be kept at all (a Role without ConfigMaps), the delete goes on.
/// An error: the delete's.
pub(crate) async fn stop_cancelled<K: Object>(
    cluster: &Cluster,
    records: &Arc<Records>,
    objects: &Objects<K>,
    record: OutcomeRecord,
    uid: &str,
    resource_version: Option<&str>,
) -> Result<Stopped> {
    let name = record.object.clone();
    let standing = match records.keep(&objects.namespace, record, false).await {
        Ok(standing) => standing,
        Err(error) => return Ok(Stopped::NotRecorded(error)),
    };
    if standing.state != JobState::Cancelled {
        return Ok(Stopped::EndedFirst(standing));
    }
    match objects
        .delete(cluster, &name, uid, resource_version)
        .await?
    {
        Deletion::Deleted | Deletion::Gone => Ok(Stopped::Cancelled),
        // Changed: by this very delete, whose answer was lost (then the repeat found it
        // being deleted), or by the job itself.
        Deletion::Conflict => match objects.get(cluster, &name).await? {
            Some(object)
                if kube::Resource::meta(&object).uid.as_deref() == Some(uid)
                    && kube::Resource::meta(&object).deletion_timestamp.is_none() =>
            {
                Ok(Stopped::Changed)
            }
            _ => Ok(Stopped::Cancelled),
        },
    }
}

/// The outcome record of a job cancelled now, `by` whom: it ends now, and started when the
/// job's status says.
pub(crate) fn cancelled_record(
    kind: JobKind,
    object: &str,
    job_id: Option<String>,
    spec_hash: Option<String>,
    created_at: Option<Timestamp>,
    started_at: Option<Timestamp>,
    by: String,
) -> OutcomeRecord {
    let now = Timestamp::now();
    // To the second, as every answer shows its times.
    let at = now.strftime("%Y-%m-%dT%H:%M:%SZ");
    let mut outcome = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
        .with_message(format!("cancelled by {by} at {at}"));
    outcome.started_at = started_at;
    outcome.finished_at = Some(now);
    OutcomeRecord {
        kind,
        object: object.to_string(),
        job_id,
        spec_hash,
        outcome,
        recorded_at: Some(now),
        created_at,
        cancelled_by: Some(by),
        // The cancel is recorded before its delete, with no pods at hand: the story of a
        // cancelled job whose pods are gone tells its start, the cancel and the end.
        attempts: Vec::new(),
    }
}

/// The managed objects of `namespace` whose job ids are not in `known` (orphans: a caller
/// that lost track of them, or a create whose answer was lost); each deleted, only if it is
/// still the same object, when `delete`.
pub(crate) async fn sweep<J: Kind>(
    jobs: &J,
    namespace: &str,
    known: &HashSet<String>,
    delete: bool,
) -> Result<Vec<Orphan>> {
    let mut orphans = Vec::new();
    for (objects, listed) in jobs.managed(namespace).await? {
        for object in listed {
            let meta = kube::Resource::meta(&object);
            let job_id = kubeferry_core::marks::job_id_of(meta);
            if job_id.as_ref().is_some_and(|id| known.contains(id)) {
                continue;
            }
            let name = meta.name.clone().unwrap_or_default();
            if delete {
                let uid = meta.uid.as_deref().unwrap_or_default();
                objects.delete(jobs.cluster(), &name, uid, None).await?;
                // An orphan a cancel held for its record goes all the same: nobody asks for it.
                if held_for_record(meta.finalizers.as_deref()) {
                    objects.release(jobs.cluster(), &name, uid).await?;
                }
                info!(message = "deleted an orphan", namespace = %objects.namespace, name = %name, job_id = ?job_id);
            }
            orphans.push(Orphan {
                id: jobs.id(namespace, &name),
                job_id,
                created_at: meta.creation_timestamp.as_ref().map(|t| t.0),
                deleted: delete,
            });
        }
    }
    Ok(orphans)
}

/// Lets go of every object of `namespace` that kubeferry's finalizer holds
/// ([`kubeferry_core::marks::RECORD_FINALIZER`]), whatever its job id: what an operator runs
/// before uninstalling kubeferry, so that nothing waits for a kubeferry that will not come.
/// Answers the execution ids let go. Safe to repeat.
pub(crate) async fn release_all<J: Kind>(
    jobs: &J,
    namespace: &str,
) -> Result<Vec<kubeferry_core::ExecutionId>> {
    let mut released = Vec::new();
    for (objects, listed) in jobs.managed(namespace).await? {
        for object in listed {
            let meta = kube::Resource::meta(&object);
            if !held_for_record(meta.finalizers.as_deref()) {
                continue;
            }
            let name = meta.name.clone().unwrap_or_default();
            let uid = meta.uid.as_deref().unwrap_or_default();
            objects.release(jobs.cluster(), &name, uid).await?;
            info!(message = "released a job's object", namespace = %objects.namespace, name = %name);
            released.push(jobs.id(namespace, &name));
        }
    }
    Ok(released)
}

/// The managed jobs of `namespace`, or of every namespace when it is `None`, optionally
/// filtered by a label selector, oldest first. Writes nothing.
pub(crate) async fn list<J: Answers>(
    jobs: &J,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<JobSummary>> {
    let selector = crate::selector::managed(selector.unwrap_or(""));
    let mut summaries = Vec::new();
    for listed in jobs.listed(namespace, &selector).await? {
        let status = jobs.status_of(&listed.id, listed.found).await?;
        let (pod, node) = listed.newest.unzip();
        summaries.push(JobSummary {
            id: listed.id,
            job_id: listed.job_id,
            created_at: listed.created_at,
            status,
            pod,
            node: node.flatten(),
            attempts: listed.attempts,
        });
    }
    summaries.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(summaries)
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

/// The end of the job's log: the newest attempt's container, or the attempt before it with
/// `previous`. Never silently empty: without a log to read, the answer says why (no container
/// started yet and why, no earlier attempt, the container printed nothing), and once the job's
/// pods are gone it gives the last words kept with its outcome. An index or replicated job the
/// job does not have is an error ([`Error::NoSuchPart`]). `whole_job`: the caller chose no part
/// of the job (no index, no replicated job), so the last words, the job's own, are its log.
pub(crate) async fn tail<J: Answers>(
    jobs: &J,
    id: &ExecutionId,
    options: &TailOptions,
    whole_job: bool,
) -> Result<Tail> {
    let info = jobs.status(id).await?;
    let all = jobs.attempts(id).await?;
    check_part(id, &info, &all, options)?;
    let parts: HashSet<(Option<&String>, Option<u32>)> =
        all.iter().map(|a| (a.replica.as_ref(), a.index)).collect();
    let parts = parts.len();
    // The last words are the newest attempt's: never the answer of `--previous`.
    let whole_job = whole_job && !options.previous;
    // Only an attempt whose container started has a log (the server refuses to read one that
    // is waiting for a node or an image).
    let attempts: Vec<Attempt> = all
        .into_iter()
        .filter(|a| {
            a.started
                && options.index.is_none_or(|index| a.index == Some(index))
                && options
                    .replica
                    .as_ref()
                    .is_none_or(|replica| a.replica.as_ref() == Some(replica))
        })
        .collect();
    let back = usize::from(options.previous);
    let Some(attempt) = attempts.iter().rev().nth(back) else {
        if options.previous && !attempts.is_empty() {
            return Ok(Tail {
                log: String::new(),
                warning: Some(
                    "no earlier attempt to read: --previous shows the attempt before the newest \
                     (drop it for the newest's log)"
                        .to_string(),
                ),
                gone: false,
            });
        }
        return Ok(without_a_pod(&info, options, whole_job));
    };
    let target = LogTarget {
        namespace: id.namespace.clone(),
        pod: attempt.pod.clone(),
        container: attempt.container.clone(),
        uid: None,
    };
    // Asked for no line or no byte: nothing to read, nothing to say about it.
    if options.lines == Some(0) || options.bytes == Some(0) {
        return Ok(Tail::default());
    }
    let read = TailOptions {
        previous: false,
        ..options.clone()
    };
    match logs::tail(jobs.cluster(), &target, &read).await {
        // The pod went between the lookup and the read (deleted, released by an operator).
        Err(error) if error.is_not_found() => Ok(without_a_pod(&info, options, whole_job)),
        Err(error) => Err(error),
        Ok(log) if log.is_empty() => Ok(Tail {
            log,
            warning: Some(if info.is_terminal() {
                "the container printed nothing".to_string()
            } else {
                "the container has printed nothing yet".to_string()
            }),
            gone: false,
        }),
        // A job of several pods whose caller named none: which one this is, and how to read
        // another.
        Ok(log) => Ok(Tail {
            log,
            warning: whole_job.then(|| which_part(attempt, parts)).flatten(),
            gone: false,
        }),
    }
}

/// Which of a job's `parts` (indexes, or a JobSet's replicated jobs' Jobs) `attempt` is, when
/// it has more than one.
fn which_part(attempt: &Attempt, parts: usize) -> Option<String> {
    if parts < 2 {
        return None;
    }
    match (&attempt.replica, attempt.index) {
        (Some(replica), Some(index)) => Some(format!(
            "the log of replicated job {replica:?}, index {index}, one of {parts} pods; \
             --replica NAME --index N reads another"
        )),
        (None, Some(index)) => Some(format!(
            "the log of index {index}, one of {parts} indexes' pods; --index N reads another"
        )),
        _ => None,
    }
}

/// The answer of a log with no container to read: the last words kept with the job's outcome
/// once its pods are gone (for the log of the whole job: they are the words of the container
/// that decided its outcome), else why there is no log.
fn without_a_pod(info: &ExecutionInfo, options: &TailOptions, whole_job: bool) -> Tail {
    let which = match (&options.replica, options.index) {
        (Some(replica), Some(index)) => format!(" of replicated job {replica:?}, index {index}"),
        (None, Some(index)) => format!(" of index {index}"),
        _ => String::new(),
    };
    let state = format!("{} {}", info.state, info.reason);
    let said = if info.message.is_empty() {
        String::new()
    } else {
        format!(": {}", info.message)
    };
    if !info.is_terminal() {
        let warning = if info.started_at.is_some() {
            format!("no container{which} runs now, so there is no log: {state}{said}")
        } else {
            format!("no container{which} has started yet, so there is no log: {state}{said}")
        };
        return Tail {
            log: String::new(),
            warning: Some(warning),
            gone: true,
        };
    }
    match info.last_words.as_ref() {
        Some(_) if !whole_job => Tail {
            log: String::new(),
            warning: Some(format!(
                "the job's pods{which} are gone ({state}{said}); its last words are kept for the \
                 log of the whole job (without --previous, --index or --replica)"
            )),
            gone: true,
        },
        Some(words) => {
            let mut log = words.clone();
            if !log.ends_with('\n') {
                log.push('\n');
            }
            Tail {
                log,
                warning: Some(format!(
                    "the job's pod is gone ({state}); these are its last words, kept with its \
                     outcome"
                )),
                gone: true,
            }
        }
        None if info.started_at.is_none() => Tail {
            log: String::new(),
            warning: Some(format!(
                "no container{which} ever started, so there is no log: {state}{said}"
            )),
            gone: true,
        },
        None => Tail {
            log: String::new(),
            warning: Some(format!(
                "the job's pods{which} are gone ({state}{said}), and no last words were kept with \
                 its outcome (a container keeps them when it fails)"
            )),
            gone: true,
        },
    }
}

/// Checks that the index and replicated job asked for are the job's, as far as its status
/// tells.
fn check_part(
    id: &ExecutionId,
    info: &ExecutionInfo,
    attempts: &[Attempt],
    options: &TailOptions,
) -> Result<()> {
    let no_such = |part: String, has: String| Error::NoSuchPart {
        id: id.clone(),
        part: format!("{part}: {has}"),
    };
    if let Some(replicas) = &info.replicas {
        let names: Vec<&str> = replicas
            .replicated_jobs
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        if let Some(replica) = &options.replica {
            let Some(counts) = replicas.replicated_jobs.iter().find(|r| &r.name == replica) else {
                return Err(no_such(
                    format!("replicated job {replica:?}"),
                    format!("its replicated jobs are {}", names.join(", ")),
                ));
            };
            if let Some(index) = options.index
                && index >= counts.replicas
            {
                return Err(no_such(
                    format!("index {index} of replicated job {replica:?}"),
                    format!("its indexes are 0 to {}", counts.replicas.saturating_sub(1)),
                ));
            }
        }
    } else if let Some(index) = options.index {
        match &info.indexes {
            Some(indexes) if index >= indexes.completions => {
                return Err(no_such(
                    format!("index {index}"),
                    format!(
                        "its indexes are 0 to {}",
                        indexes.completions.saturating_sub(1)
                    ),
                ));
            }
            // Not every answer carries the summary (a cancel's record does not): the pods
            // tell, an indexed job's carrying their index.
            None if id.kind == JobKind::Job
                && !attempts.is_empty()
                && attempts.iter().all(|a| a.index.is_none()) =>
            {
                return Err(no_such(
                    format!("index {index}"),
                    "it is not an indexed job".to_string(),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Follows the job's log, attempt after attempt, until the job ends.
/// `whole_job` as for [`tail`].
pub(crate) fn follow<J: Answers>(
    jobs: Arc<J>,
    id: ExecutionId,
    options: FollowOptions,
    whole_job: bool,
) -> impl Stream<Item = Result<String>> + Send + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move {
        if let Err(error) = follow_into(&*jobs, &id, &options, whole_job, &sender).await {
            let _ = sender.send(Err(error)).await;
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

async fn follow_into<J: Answers>(
    jobs: &J,
    id: &ExecutionId,
    options: &FollowOptions,
    whole_job: bool,
    sender: &tokio::sync::mpsc::Sender<Result<String>>,
) -> Result<()> {
    let mut changes = jobs.changes(id).await?;
    let mut followed: HashSet<String> = HashSet::new();
    let part = TailOptions {
        index: options.index,
        replica: options.replica.clone(),
        ..TailOptions::default()
    };
    // Whether a log was read: once the job ended with its pods gone, its last words are its log.
    let mut read_a_log = false;
    loop {
        let info = jobs.status(id).await?;
        let attempts = jobs.attempts(id).await?;
        // The job's parts stay what they are: the first look refuses one it lacks.
        check_part(id, &info, &attempts, &part)?;
        // Once the job has ended, every attempt has a final log, even one whose start the
        // pod watch has not shown yet.
        let next = attempts.iter().find(|a| {
            !followed.contains(&a.uid)
                && (info.is_terminal() || a.started)
                && options.index.is_none_or(|index| a.index == Some(index))
                && options
                    .replica
                    .as_ref()
                    .is_none_or(|replica| a.replica.as_ref() == Some(replica))
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
            // An attempt whose log opens (even one that printed nothing) is read.
            let mut opened = true;
            while let Some(line) = lines.next().await {
                // The attempt's pod went before its log was opened (an operator releasing a
                // finished driver): it has no log left, as `tail` would find.
                if matches!(line, Err(Error::Api { code: 404, .. })) {
                    opened = false;
                    break;
                }
                // A log that cannot be read ends the follow with the error: going on to wait
                // for the next attempt would hold a reader of this one forever.
                let failed = line.is_err();
                if sender.send(line).await.is_err() || failed {
                    return Ok(());
                }
            }
            read_a_log |= opened;
            continue;
        }
        if info.is_terminal() {
            let kept = without_a_pod(&info, &part, whole_job).log;
            if !read_a_log && !kept.is_empty() {
                let _ = sender.send(Ok(kept)).await;
            }
            return Ok(());
        }
        tokio::select! {
            _ = any_changed(&mut changes, &id.name) => {}
            _ = tokio::time::sleep(jobs.recheck_interval()) => {}
        }
    }
}

/// Waits until a notification of any of `changes` names `name` (or notifications were lost).
pub(crate) async fn any_changed(changes: &mut [broadcast::Receiver<String>], name: &str) {
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

/// Finishes the cancel of the marked object `meta` whose mapping says `cancelling` (the job
/// has not ended on its own): its CANCELLED record, who asked as the mark says, then the
/// delete of the object at the version `meta` shows (a newer copy is judged again). Answers
/// when to look at the job again after a failed write; `None` once done.
pub(crate) async fn finish_cancel<K: Object>(
    objects: &Objects<K>,
    cluster: &Cluster,
    records: &Arc<Records>,
    kind: JobKind,
    meta: &ManagedMeta,
    cancelling: &ExecutionInfo,
    retry_interval: Duration,
) -> Option<Timestamp> {
    let by = meta
        .cancel_mark
        .as_ref()
        .and_then(|mark| mark.requested_by.clone())
        .unwrap_or_else(|| "a cancel whose requester is not known".to_string());
    let record = cancelled_record(
        kind,
        &meta.name,
        meta.job_id.clone(),
        meta.spec_hash.clone(),
        meta.created_at,
        cancelling.started_at,
        by,
    );
    let stopped = stop_cancelled(
        cluster,
        records,
        objects,
        record,
        &meta.uid,
        meta.resource_version.as_deref(),
    )
    .await;
    match stopped {
        Ok(Stopped::NotRecorded(error)) | Err(error) => {
            warn!(message = "could not finish a cancel; will retry", namespace = %meta.namespace, name = %meta.name, %error);
            retry_at(&error, retry_interval)
        }
        Ok(_) => {
            info!(message = "finished a cancel", namespace = %meta.namespace, name = %meta.name);
            None
        }
    }
}
