//! What every kind's mapping observes and answers alike: the metadata each managed object carries, whether the object is present or gone, and the status with the actions it asks for.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::clock::Clock;
use crate::marks::{
    CANCEL_ANNOTATION, KEPT_OUTCOME_ANNOTATION, OUTCOME_ANNOTATION, job_id_of, spec_hash_of,
};
use crate::status::{ExecutionInfo, JobState, Reason, Started};

/// What is known of a job's object (a Job, a SparkApplication), as the lean view `V` of its
/// kind shows it.
///
/// An object that was never seen is not mapped at all: the caller answers "no such job".
#[derive(Debug)]
pub enum Observation<'a, V> {
    /// The object exists; this is its latest view.
    Present(&'a V),
    /// The object was seen and is gone now (deleted, or removed by a TTL after it finished).
    Vanished {
        /// The last view of the object that was seen.
        last_seen: &'a V,
        /// Whether `last_seen` is the object's final state, as a watch's DELETED event
        /// delivers it. `false` when the object was found missing (a relist, a 404) and the
        /// view may be stale.
        final_state: bool,
    },
}

// Written out: a derive would ask `V: Clone`/`V: Copy`, and an observation only borrows its view.
impl<V> Clone for Observation<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Observation<'_, V> {}

impl<'a, V> Observation<'a, V> {
    /// The object's latest known view.
    pub fn view(&self) -> &'a V {
        match *self {
            Observation::Present(view) => view,
            Observation::Vanished { last_seen, .. } => last_seen,
        }
    }

    /// `None` while the object is present; once it vanished, whether its last view is its
    /// final state.
    pub fn vanished(&self) -> Option<bool> {
        match *self {
            Observation::Present(_) => None,
            Observation::Vanished { final_state, .. } => Some(final_state),
        }
    }
}

/// What a kind's mapping answers for one observation: the status, and what must be done
/// (the kind's actions, `A`, as data) before its outcome stands. The settler carries actions
/// out; a status query only reads.
///
/// Its status is never terminal while an action is set: until the action has succeeded the
/// caller reports [`Mapped::info`], and once it has, the outcome the action carries. A failed
/// action is simply repeated on the next observation, since the mapping asks for it again.
///
/// # Record, then delete
///
/// An outcome kubeferry decides for an object whose controller will never judge it (a
/// SparkApplication without status, a JobSet whose pod can never start) is made to stand the
/// same way for every kind:
/// 1. the outcome is recorded as the object's `kubeferry.dev/outcome` annotation (JSON of the
///    status), patched with the view's resourceVersion as precondition (already recorded:
///    skipped);
/// 2. the object is deleted with uid and resourceVersion preconditions (the version after the
///    patch); its pods go with it;
/// 3. the outcome is reported only once the delete succeeded (or the object was already being
///    deleted). A 409 means the object changed (its controller may have written a status): it
///    is read and mapped again. A 404 means it is gone: its last view is mapped as vanished and
///    stale, which answers "no such job" unless it showed the record. On any other failure the
///    job is not decided yet: [`Mapped::info`] is reported and the action tried again on the
///    next observation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped<A> {
    /// The status to report now (see each kind's action for what it is while one is set).
    pub info: ExecutionInfo,
    /// Set when part of the observation has a shape this version cannot read; the status then
    /// stays non-terminal. The caller logs it (once per job and message).
    pub warning: Option<String>,
    /// What the settler must do before the outcome stands.
    pub action: Option<A>,
    /// When the answer changes by time alone, if nothing else is observed meanwhile: the
    /// earliest grace period or timeout still running. `None` for an outcome, an action to
    /// carry out, or a status only a change can change.
    pub recheck_at: Option<Timestamp>,
}

impl<A> Mapped<A> {
    /// `info`, asking for nothing.
    pub(crate) fn of(info: ExecutionInfo) -> Self {
        Mapped {
            info,
            warning: None,
            action: None,
            recheck_at: None,
        }
    }

    /// `info`, once `action` is carried out.
    pub(crate) fn acting(info: ExecutionInfo, action: A) -> Self {
        Mapped {
            action: Some(action),
            ..Mapped::of(info)
        }
    }
}

/// The action of a kind whose object kubeferry ends itself when a grace period or timeout of
/// its own runs out (a JobSet, a bare pod): record `outcome` on the object, then delete it
/// ([`Mapped`], "Record, then delete"), so that every replica reports the same outcome. Until
/// the deletion succeeded the status is [`Mapped::info`], not terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordOutcomeAndDelete {
    /// The outcome to record and then report.
    pub outcome: ExecutionInfo,
}

impl Action for RecordOutcomeAndDelete {
    fn outcome_mut(&mut self) -> Option<&mut ExecutionInfo> {
        Some(&mut self.outcome)
    }
}

/// An action a mapping asks for, as data.
pub(crate) trait Action {
    /// The outcome the action carries, to report once it is carried out; `None` when that
    /// outcome is [`Mapped::info`] itself.
    fn outcome_mut(&mut self) -> Option<&mut ExecutionInfo>;
}

/// The answer a kind's mapping gives at `now`: `previous` itself when it is terminal (an
/// outcome stands), else the outcome `kept` on the object with its record (what some replica
/// answered, whatever its pods and record show now); else what `map` finds with the clock of
/// `now`, as reported after `previous` (whose start time a later status keeps, the outcome an
/// action carries too), with when to look again: the earliest deadline the clock saw still
/// running, unless the answer is an outcome or asks for an action.
pub(crate) fn answer<A: Action>(
    previous: Option<&ExecutionInfo>,
    kept: Option<&ExecutionInfo>,
    now: Timestamp,
    map: impl FnOnce(&Clock) -> Option<Mapped<A>>,
) -> Option<Mapped<A>> {
    if let Some(stands) = previous.filter(|p| p.is_terminal()).or(kept) {
        return Some(Mapped::of(stands.clone()));
    }
    let clock = Clock::at(now);
    let mut mapped = map(&clock)?;
    if let Some(previous) = previous {
        mapped.info = previous.advance(mapped.info);
        if let Some(outcome) = mapped.action.as_mut().and_then(Action::outcome_mut) {
            *outcome = previous.advance(outcome.clone());
        }
    }
    if !mapped.info.is_terminal() && mapped.action.is_none() {
        mapped.recheck_at = clock.next_change();
    }
    Some(mapped)
}

/// Lets a view read the fields of a part it embeds as its own (`view.name`, `pod.phase`).
macro_rules! embeds {
    ($view:ty, $field:ident: $part:ty) => {
        impl std::ops::Deref for $view {
            type Target = $part;

            fn deref(&self) -> &$part {
                &self.$field
            }
        }

        impl std::ops::DerefMut for $view {
            fn deref_mut(&mut self) -> &mut $part {
                &mut self.$field
            }
        }
    };
}
pub(crate) use embeds;

/// The previous non-terminal state and reason with a new message (nothing new is known); with
/// none, started (running) once the job has a `first_start`, else queued (pending).
pub(crate) fn hold_previous(
    previous: Option<&ExecutionInfo>,
    first_start: Option<Timestamp>,
    message: impl Into<String>,
) -> ExecutionInfo {
    let (state, reason) = match previous {
        Some(previous) if !previous.is_terminal() => (previous.state, previous.reason),
        _ if first_start.is_some() => (JobState::Started, Reason::Running),
        _ => (JobState::Queued, Reason::Pending),
    };
    ExecutionInfo::new(state, reason)
        .with_message(message)
        .started(first_start)
}

/// A shape this version cannot read: the last non-terminal state (as [`hold_previous`]
/// finds it), and a warning.
pub(crate) fn keep_previous<A>(
    previous: Option<&ExecutionInfo>,
    first_start: Option<Timestamp>,
    warning: String,
) -> Mapped<A> {
    let state = hold_previous(previous, first_start, "").state;
    Mapped {
        info: ExecutionInfo::new(state, Reason::UnrecognizedStatus)
            .with_message(warning.clone())
            .started(first_start),
        warning: Some(warning),
        action: None,
        recheck_at: None,
    }
}

/// The cancel mark kubeferry puts on a job's object ([`CANCEL_ANNOTATION`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelMark {
    /// When the cancel was requested, by kubeferry's clock; `None` when the annotation's value is
    /// not an RFC 3339 time (the mark still counts).
    pub requested_at: Option<Timestamp>,
    /// Who asked ([`crate::marks::CANCELLED_BY_ANNOTATION`]), when the mark says.
    pub requested_by: Option<String>,
}

/// The metadata every object kubeferry manages carries, whatever its kind, as the mappings
/// read it. Every kind's view embeds one, read by [`ManagedMeta::read`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedMeta {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`: pods are matched to their object by their controller owner reference.
    pub uid: String,
    /// The caller's job id: the job id annotation, else the job id label
    /// ([`crate::marks::job_id_of`]).
    pub job_id: Option<String>,
    /// The hash of the spec it was created from ([`crate::marks::spec_hash_of`]), for its
    /// outcome record.
    pub spec_hash: Option<String>,
    /// How much of its log the outcome record keeps beyond the kubelet's last words
    /// ([`crate::marks::KEEP_LOG_ANNOTATION`]).
    pub keep_log: Option<crate::marks::KeepLog>,
    /// `metadata.resourceVersion`, for writes with a precondition.
    pub resource_version: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created_at: Option<Timestamp>,
    /// `metadata.deletionTimestamp`: when the deletion was requested.
    pub deletion_timestamp: Option<Timestamp>,
    /// The cancel mark, if a cancel was requested.
    pub cancel_mark: Option<CancelMark>,
    /// Where [`crate::marks::RECORD_FINALIZER`] stands among the object's finalizers, when it
    /// holds the object until its outcome record is kept (first: its create put it there).
    pub held: Option<usize>,

    /// An outcome kubeferry recorded on the object ([`OUTCOME_ANNOTATION`]) before stopping
    /// it; `Err` holds an annotation value this version cannot read.
    pub recorded_outcome: Option<Result<ExecutionInfo, String>>,
    /// The copy of its outcome record written on the object as it was let go
    /// ([`KEPT_OUTCOME_ANNOTATION`]); a value this version cannot read counts as none (the
    /// record itself still answers).
    pub kept_outcome: Option<ExecutionInfo>,
    /// Whether the object has a [`KEPT_OUTCOME_ANNOTATION`] at all, readable or not: a release
    /// tests that one it did not see is still absent, and must not test one it cannot read.
    pub kept_annotated: bool,
}

impl ManagedMeta {
    /// Where the job stood before an end no answer gives yet (a verdict waiting for its pod's
    /// final status, an outcome its settler has not recorded): being cancelled, started at
    /// `started_at`, or queued; never a step back from an answer given before that end.
    pub fn before_its_end(&self, started_at: Option<Timestamp>) -> ExecutionInfo {
        let info = if self.cancel_mark.is_some() {
            ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested)
        } else if started_at.is_some() {
            ExecutionInfo::new(JobState::Started, Reason::Running)
        } else {
            ExecutionInfo::new(JobState::Queued, Reason::Pending)
        };
        info.started(started_at)
    }

    /// Reads what kubeferry reads of any managed object's metadata.
    pub fn read(meta: &ObjectMeta) -> Self {
        let annotations = meta.annotations.as_ref();
        ManagedMeta {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            job_id: job_id_of(meta),
            spec_hash: spec_hash_of(meta),
            keep_log: crate::marks::keep_log_of(meta),
            resource_version: meta.resource_version.clone(),
            created_at: time(meta.creation_timestamp.as_ref()),
            deletion_timestamp: time(meta.deletion_timestamp.as_ref()),
            cancel_mark: cancel_mark(annotations),
            held: meta
                .finalizers
                .iter()
                .flatten()
                .position(|f| f == crate::marks::RECORD_FINALIZER),

            recorded_outcome: recorded_outcome(annotations),
            kept_outcome: annotations
                .and_then(|a| a.get(KEPT_OUTCOME_ANNOTATION))
                .and_then(|value| serde_json::from_str::<ExecutionInfo>(value).ok())
                .filter(ExecutionInfo::is_terminal),
            kept_annotated: annotations.is_some_and(|a| a.contains_key(KEPT_OUTCOME_ANNOTATION)),
        }
    }

    /// The outcome the object carries, as readers answer it: the copy of its record, else a
    /// terminal outcome kubeferry recorded on it.
    pub fn carried_outcome(&self) -> Option<ExecutionInfo> {
        self.kept_outcome
            .clone()
            .or_else(|| match &self.recorded_outcome {
                Some(Ok(outcome)) if outcome.is_terminal() => Some(outcome.clone()),
                _ => None,
            })
    }

    /// Whether kubeferry deleted the object: it is being deleted, and carries a cancel's mark or
    /// an outcome kubeferry recorded on it before its delete. Someone else's delete carries
    /// neither.
    pub fn deleted_by_kubeferry(&self) -> bool {
        self.deletion_timestamp.is_some()
            && (self.cancel_mark.is_some() || self.recorded_outcome.is_some())
    }

    /// When a settler may act on this object's cancel mark in the cancel's stead: `grace` after
    /// the cancel was requested (both times are kubeferry's clocks), so as not to race the
    /// cancel itself, which records and deletes at once; `None`, at once, when the mark's time
    /// is unknown. A settler finishes a cancel nobody finished (its process gone between the
    /// mark and the delete, its record refused meanwhile).
    pub fn cancel_due(&self, grace: std::time::Duration) -> Option<Timestamp> {
        let requested = self.cancel_mark.as_ref()?.requested_at?;
        let grace = jiff::SignedDuration::try_from(grace).ok()?;
        requested.checked_add(grace).ok()
    }
}

/// How an object's work was stopped, if it was.
#[derive(Clone, Copy)]
pub(crate) enum Stop {
    /// The object's deletion was requested at this time.
    Deleted(Timestamp),
    /// The object is gone and no view showed its deletion.
    Vanished,
}

/// What a cancel `mark` comes to: `CANCELLED` once the object (`noun`: "the JobSet") is
/// stopped, ended when its deletion was requested (when the cancel was, for an object that
/// vanished unseen); `CANCELLING` until then, `waiting` saying for what.
pub(crate) fn cancel_progress(
    mark: &CancelMark,
    stop: Option<Stop>,
    noun: &str,
    waiting: &str,
) -> ExecutionInfo {
    let requested = mark
        .requested_at
        .map(|at| format!(" at {at}"))
        .unwrap_or_default();
    let Some(stop) = stop else {
        return ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested)
            .with_message(format!("cancel requested{requested}; {waiting}"));
    };
    let (finished_at, how) = match stop {
        Stop::Deleted(at) => (Some(at), format!("{noun} was deleted at {at}")),
        Stop::Vanished => (mark.requested_at, format!("{noun} is gone")),
    };
    let mut info = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
        .with_message(format!("cancel requested{requested}; {how}"));
    info.finished_at = finished_at;
    info
}

/// The cancel mark among an object's annotations ([`CANCEL_ANNOTATION`]).
fn cancel_mark(annotations: Option<&BTreeMap<String, String>>) -> Option<CancelMark> {
    annotations
        .and_then(|a| a.get(CANCEL_ANNOTATION))
        .map(|value| CancelMark {
            requested_at: value.trim().parse().ok(),
            requested_by: annotations
                .and_then(|a| a.get(crate::marks::CANCELLED_BY_ANNOTATION))
                .cloned(),
        })
}

/// The outcome kubeferry recorded among an object's annotations ([`OUTCOME_ANNOTATION`]);
/// `Err` holds a value this version cannot read as a terminal status.
fn recorded_outcome(
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<Result<ExecutionInfo, String>> {
    annotations
        .and_then(|a| a.get(OUTCOME_ANNOTATION))
        .map(|value| {
            serde_json::from_str::<ExecutionInfo>(value)
                .ok()
                .filter(ExecutionInfo::is_terminal)
                .ok_or_else(|| value.clone())
        })
}

/// The uid of an object's controller (a pod's Job or SparkApplication), from its
/// `metadata.ownerReferences`.
pub(crate) fn controller_uid(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references.as_ref().and_then(|owners| {
        owners
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
    })
}

/// A Kubernetes time as a timestamp.
pub(crate) fn time(time: Option<&Time>) -> Option<Timestamp> {
    time.map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeferrys_deletes_carry_its_mark_or_its_recorded_outcome() {
        let deleted = ManagedMeta {
            deletion_timestamp: Some(Timestamp::UNIX_EPOCH),
            ..ManagedMeta::default()
        };
        assert!(!deleted.deleted_by_kubeferry(), "someone else's delete");
        let cancelled = ManagedMeta {
            cancel_mark: Some(CancelMark {
                requested_at: None,
                requested_by: None,
            }),
            ..deleted.clone()
        };
        assert!(cancelled.deleted_by_kubeferry(), "a cancel's");
        let stopped = ManagedMeta {
            recorded_outcome: Some(Err("unreadable".into())),
            ..deleted.clone()
        };
        assert!(stopped.deleted_by_kubeferry(), "a job kubeferry stopped");
        let running = ManagedMeta {
            deletion_timestamp: None,
            ..cancelled
        };
        assert!(!running.deleted_by_kubeferry(), "not deleted yet");
    }

    #[test]
    fn an_object_carries_its_records_copy_before_an_outcome_recorded_on_it() {
        let copy = ExecutionInfo::new(JobState::Succeeded, Reason::Completed);
        let decided = ExecutionInfo::new(JobState::Failed, Reason::ImagePullFailed);
        let none = ManagedMeta::default();
        assert_eq!(none.carried_outcome(), None);
        let recorded = ManagedMeta {
            recorded_outcome: Some(Ok(decided.clone())),
            ..ManagedMeta::default()
        };
        assert_eq!(recorded.carried_outcome(), Some(decided.clone()));
        let both = ManagedMeta {
            kept_outcome: Some(copy.clone()),
            ..recorded
        };
        assert_eq!(both.carried_outcome(), Some(copy));
        let unreadable = ManagedMeta {
            recorded_outcome: Some(Err("unreadable".into())),
            ..ManagedMeta::default()
        };
        assert_eq!(unreadable.carried_outcome(), None);
        let unended = ManagedMeta {
            recorded_outcome: Some(Ok(ExecutionInfo::new(JobState::Started, Reason::Running))),
            ..ManagedMeta::default()
        };
        assert_eq!(
            unended.carried_outcome(),
            None,
            "only an outcome is carried"
        );
    }

    #[test]
    fn a_copy_it_cannot_read_is_no_outcome_but_is_there() {
        let mut meta = ObjectMeta::default();
        let read = ManagedMeta::read(&meta);
        assert!(!read.kept_annotated);
        meta.annotations = Some(
            [(KEPT_OUTCOME_ANNOTATION.to_string(), "{not json".to_string())]
                .into_iter()
                .collect(),
        );
        let read = ManagedMeta::read(&meta);
        assert_eq!(read.kept_outcome, None);
        assert!(read.kept_annotated, "a release must not test it absent");
    }
}
