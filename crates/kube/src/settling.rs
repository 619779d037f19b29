//! What every kind's settler shares: its jobs' timers and the merged notifications of watches.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use jiff::Timestamp;
use kubeferry_core::observation::ManagedMeta;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState};
use tokio::sync::{broadcast, mpsc, oneshot};
use tracing::warn;

use crate::objects::Released;
use crate::records::NameHold;
use crate::tracker::{Recent, lock};

/// How many of a namespace's jobs its settler settles side by side (each at most a few
/// requests: a listing, a record's create, a write on the object, its release).
pub(crate) const SETTLED_AT_ONCE: usize = 8;

/// One notification of the watches: a job changed, or some were missed.
pub(crate) type Change = std::result::Result<String, broadcast::error::RecvError>;

/// The notifications of several watches as one stream; it ends when every watch is gone.
/// What a question that finds an outcome its settler has not recorded yet (`mapped`) answers
/// meanwhile, with no earlier answer to repeat: where the job stood before it ended
/// ([`ManagedMeta::before_its_end`]), saying the outcome is being decided.
pub(crate) fn while_deciding(meta: &ManagedMeta, mapped: &ExecutionInfo) -> ExecutionInfo {
    meta.before_its_end(mapped.started_at)
        .with_message(format!("deciding the outcome: {}", mapped.message))
}

pub(crate) fn merged(changes: Vec<broadcast::Receiver<String>>) -> BoxStream<'static, Change> {
    let streams = changes.into_iter().map(|receiver| {
        futures::stream::unfold(receiver, |mut receiver| async move {
            match receiver.recv().await {
                Err(broadcast::error::RecvError::Closed) => None,
                change => Some((change, receiver)),
            }
        })
        .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

/// How soon a settler tries a failed write again: after `interval`, or ten times that when
/// the server refused it for a reason a retry does not mend (a Role, an admission webhook is
/// seldom changed within seconds, and every try is a request).
pub(crate) fn retry_delay(error: &crate::Error, interval: Duration) -> Duration {
    match error {
        // Refusals that no retry mends by itself (a Role, an admission webhook, a bad request).
        crate::Error::Forbidden { .. } => interval.saturating_mul(10),
        crate::Error::Api { code, .. }
            if (400..500).contains(code) && ![409, 429].contains(code) =>
        {
            interval.saturating_mul(10)
        }
        _ => interval,
    }
}

/// The objects a settler let go of lately, and the deleted ones it holds a while first.
pub(crate) struct Releases {
    /// Let go of: until the watch delivers the released object, the settler may see a copy
    /// that still shows the finalizer (a change of the job's pods, the deletion's own event),
    /// and writes nothing for it.
    released: Recent,
    /// Being let go of now: two settles of the same object at once write once.
    releasing: Recent,
    /// Copies (by resourceVersion) whose release found the object changed since: nothing is
    /// written for them again; the watch delivers the object as it is now.
    outdated: Recent,
    /// Objects whose release failed lately: not tried again before the retry is due, however
    /// many questions hand the job to the settler meanwhile.
    failed: Recent,
    /// Deleted objects whose record is kept, from when this settler first found them so: each
    /// is let go of once the name hold has passed since.
    holding: Recent,
}

impl Releases {
    pub(crate) fn new() -> Self {
        Self {
            released: Recent::new(1_024),
            releasing: Recent::new(1_024),
            outdated: Recent::new(1_024),
            failed: Recent::new(1_024),
            holding: Recent::new(10_000),
        }
    }
}

/// What letting go of a held object came to ([`release_held`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LetGo {
    /// When to look at the job again: after a failed write, or when the name hold is over.
    pub(crate) again_at: Option<Timestamp>,
    /// Whether the job's outcome record may be answered now.
    pub(crate) record: RecordAnswered,
}

/// Whether a job's outcome record may be answered, once its object's release was tried.
/// Readers answer no record of an object their copy shows held, not deleted and carrying no
/// outcome (`kind::record_as_answered`); a settler answers its record no sooner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordAnswered {
    /// Not yet: the release is on its way, failed for a moment, or found the object changed.
    NotYet,
    /// Yes: the object is let go of (or was not held), or deleted, whose record is answered
    /// while the name hold keeps it.
    Now,
    /// Yes, though the object stays held (its release refused for good, or for a while):
    /// readers whose copy shows it held are answered by the settler's process, not by that
    /// copy.
    WhileHeld,
}

impl LetGo {
    fn answerable(again_at: Option<Timestamp>) -> Self {
        Self {
            again_at,
            record: RecordAnswered::Now,
        }
    }

    fn pending(again_at: Option<Timestamp>) -> Self {
        Self {
            again_at,
            record: RecordAnswered::NotYet,
        }
    }

    /// Whether the record may be answered now.
    pub(crate) fn answerable_now(&self) -> bool {
        self.record != RecordAnswered::NotYet
    }
}

/// Takes [`kubeferry_core::marks::RECORD_FINALIZER`] off a held object whose outcome record
/// is kept (the only time a settler calls this: the hold has done its work), with a copy of
/// the record (`kept`). Says when to look at the job again, and whether its record may be
/// answered now.
///
/// `hold` keeps an object kubeferry deleted (by its cancel, by a settler's action) for the
/// name hold after its record was written. A submission of its job id that looked for the
/// record before it was written, and whose create is still on its way, lands on the held name
/// (409, then the record answers) rather than running the job again (I2, docs/INVARIANTS.md).
/// A copy that shows no deletion is let go of only if the object was not deleted since, nor
/// given an outcome the copy does not show (the release tests both).
pub(crate) async fn release_held<K: crate::objects::Object>(
    objects: &crate::objects::Objects<K>,
    cluster: &crate::cluster::Cluster,
    meta: &ManagedMeta,
    retry_interval: Duration,
    releases: &Releases,
    kept: Option<&kubeferry_core::ExecutionInfo>,
    hold: NameHold,
) -> LetGo {
    // By uid: nothing puts kubeferry's finalizer back on an object once it is let go, so any
    // later copy still showing it (the watch has not yet delivered the release) is stale.
    let copy = format!("{}/{}/{}", meta.namespace, meta.name, meta.uid);
    if meta.held.is_none() || releases.released.contains(&copy) {
        return LetGo::answerable(None);
    }
    // A copy older than the deletion this settler saw is held all the same.
    if hold.kubeferry_deleted || releases.holding.contains(&copy) {
        let first_found = releases.holding.age(copy.clone());
        if let Some(over) = hold
            .over_at(first_found)
            .filter(|at| Timestamp::now() < *at)
        {
            return LetGo::answerable(Some(over));
        }
    }
    let version = format!(
        "{copy}@{}",
        meta.resource_version.as_deref().unwrap_or_default()
    );
    if releases.outdated.contains(&version)
        || releases.failed.contains_within(&copy, retry_interval)
    {
        return LetGo::pending(None);
    }
    // Claimed before the write: two settles of the same object at once write once, and the
    // one that writes says when its record may be answered.
    if !releases.releasing.insert(copy.clone()) {
        return LetGo::pending(None);
    }
    let released = objects.release_seen(cluster, meta, kept).await;
    if matches!(released, Ok(Released::Done | Released::Refused)) {
        releases.released.insert(copy.clone());
    }
    releases.releasing.remove(&copy);
    match released {
        Ok(Released::Done) => {
            releases.holding.remove(&copy);
            LetGo::answerable(None)
        }
        // Deleted since `meta` was seen, or given an outcome it does not show: judged again
        // from the copy the watch delivers, which shows the deletion (and so the hold) or the
        // outcome (which this record then gives way to).
        Ok(Released::ChangedMeanwhile) => {
            releases.outdated.insert(version);
            LetGo::pending(None)
        }
        // No retry lets it go: the record is answered as it stands, and the object stays
        // held (`kubeferry sweep --release` lets go of it once the refusal is mended).
        Ok(Released::Refused) => {
            warn!(message = "the server refuses to let go of a job's object; its record is answered as it stands", namespace = %meta.namespace, name = %meta.name);
            LetGo {
                again_at: None,
                record: RecordAnswered::WhileHeld,
            }
        }
        // A refusal no retry mends soon (a Role, a webhook): the record is answered meanwhile,
        // as before there were releases to wait for.
        Err(error) => {
            warn!(message = "could not let go of a job's object; will retry", namespace = %meta.namespace, name = %meta.name, %error);
            releases.failed.remove(&copy);
            releases.failed.insert(copy);
            let lasting = retry_delay(&error, retry_interval) > retry_interval;
            LetGo {
                again_at: retry_at(&error, retry_interval),
                record: if lasting {
                    RecordAnswered::WhileHeld
                } else {
                    RecordAnswered::NotYet
                },
            }
        }
    }
}

/// When a settler finishes the cancel of a marked object still there and not deleted, that
/// the cancel did not finish itself (its process gone between the mark and the delete, its
/// record refused): `None` at once, else when it is due ([`ManagedMeta::cancel_due`]).
pub(crate) fn cancel_finish_due(meta: &ManagedMeta, retry_interval: Duration) -> Option<Timestamp> {
    meta.cancel_due(retry_interval)
        .filter(|due| Timestamp::now() < *due)
}

/// When a failed write is tried again.
pub(crate) fn retry_at(error: &crate::Error, retry_interval: Duration) -> Option<Timestamp> {
    after(retry_delay(error, retry_interval))
}

/// The instant `after` from now, if it can be told.
pub(crate) fn after(after: Duration) -> Option<Timestamp> {
    jiff::SignedDuration::try_from(after)
        .ok()
        .and_then(|after| Timestamp::now().checked_add(after).ok())
}

/// When each job is to be looked at again: the instant its mapping's answer changes by time
/// alone, or a failed write is due again. The mapping's deadlines are wall-clock instants.
/// Jobs settled side by side arm them too.
#[derive(Default)]
pub(crate) struct Timers(Mutex<BTreeMap<Timestamp, BTreeSet<String>>>);

impl Timers {
    /// Looks at `job` again at `at`.
    pub(crate) fn arm(&self, at: Timestamp, job: &str) {
        lock(&self.0).entry(at).or_default().insert(job.to_string());
    }

    /// Looks at `job` again `after` from now.
    pub(crate) fn arm_after(&self, after: Duration, job: &str) {
        let now = Timestamp::now();
        let at = jiff::SignedDuration::try_from(after)
            .ok()
            .and_then(|after| now.checked_add(after).ok())
            .unwrap_or(now);
        self.arm(at, job);
    }

    /// Sleeps until the earliest timer; forever without one.
    pub(crate) async fn next(&self) {
        let earliest = lock(&self.0).first_key_value().map(|(at, _)| *at);
        match earliest {
            Some(at) => {
                let wait = Timestamp::now()
                    .duration_until(at)
                    .try_into()
                    .unwrap_or(Duration::ZERO);
                tokio::time::sleep(wait).await;
            }
            None => std::future::pending().await,
        }
    }

    /// Takes the jobs whose timers ran out by now.
    pub(crate) fn take_due(&self) -> BTreeSet<String> {
        let now = Timestamp::now();
        let mut due = BTreeSet::new();
        let mut timers = lock(&self.0);
        while let Some(entry) = timers.first_entry() {
            if *entry.key() > now {
                break;
            }
            due.extend(entry.remove());
        }
        due
    }
}

/// The state of each job a settler looks after, counted by state as it changes: what a
/// metrics scrape reads, at a cost independent of how many jobs there are.
#[derive(Default)]
pub(crate) struct JobStates(Mutex<StatesInner>);

#[derive(Default)]
struct StatesInner {
    by_job: HashMap<String, JobState>,
    counts: HashMap<JobState, usize>,
}

impl JobStates {
    /// Counts `job` in `state`, or no longer (`None`: gone).
    pub(crate) fn set(&self, job: &str, state: Option<JobState>) {
        let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let StatesInner { by_job, counts } = &mut *inner;
        let before = match state {
            Some(state) => by_job.insert(job.to_string(), state),
            None => by_job.remove(job),
        };
        if before == state {
            return;
        }
        if let Some(before) = before
            && let Some(count) = counts.get_mut(&before)
        {
            *count = count.saturating_sub(1);
        }
        if let Some(state) = state {
            *counts.entry(state).or_default() += 1;
        }
    }

    /// Forgets the jobs `keep` turns down (their removal was not seen).
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let StatesInner { by_job, counts } = &mut *inner;
        by_job.retain(|job, state| {
            let kept = keep(job);
            if !kept && let Some(count) = counts.get_mut(state) {
                *count = count.saturating_sub(1);
            }
            kept
        });
    }

    /// How many jobs are in each state (every state, zeros included).
    pub(crate) fn counts(&self) -> Vec<(JobState, usize)> {
        let inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        JobState::ALL
            .iter()
            .map(|state| (*state, inner.counts.get(state).copied().unwrap_or(0)))
            .collect()
    }
}

/// A status query that found an action due: the settler carries it out on the query's
/// observation (`found`) and answers with what the query is to report.
pub(crate) struct Request<F> {
    pub(crate) id: ExecutionId,
    pub(crate) found: F,
    pub(crate) done: oneshot::Sender<crate::Result<ExecutionInfo>>,
}

/// A watched namespace's settler, and its jobs by state.
pub(crate) struct NamespaceSettler<F> {
    pub(crate) requests: mpsc::UnboundedSender<Request<F>>,
    pub(crate) states: Arc<JobStates>,
}

/// The settlers of a kind's watched namespaces, one each, started on first use; `F`: what a
/// status query hands one.
pub(crate) struct Settlers<F> {
    pub(crate) by_namespace: Mutex<HashMap<String, NamespaceSettler<F>>>,
}

impl<F> Default for Settlers<F> {
    fn default() -> Self {
        Self {
            by_namespace: Mutex::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_hold_counts_from_the_record_else_from_when_it_was_found() {
        let hold = |recorded_at| NameHold {
            length: Duration::from_secs(30),
            kubeferry_deleted: true,
            recorded_at,
        };
        let recorded = Timestamp::now() - jiff::SignedDuration::from_secs(10);
        assert_eq!(
            hold(Some(recorded)).over_at(Duration::ZERO),
            Some(recorded + jiff::SignedDuration::from_secs(30)),
            "the record's time, however late it was found"
        );
        let long_ago = Timestamp::now() - jiff::SignedDuration::from_secs(60);
        assert!(
            hold(Some(long_ago)).over_at(Duration::ZERO).unwrap() < Timestamp::now(),
            "over already: a later process lets it go at once"
        );
        let found = hold(None).over_at(Duration::from_secs(20)).unwrap();
        let expected = Timestamp::now() + jiff::SignedDuration::from_secs(10);
        assert!(
            (found - expected).get_seconds().abs() <= 1,
            "ten seconds left of thirty found twenty ago: {found}"
        );
    }

    #[tokio::test]
    async fn timers_give_their_jobs_once_due_and_not_before() {
        let timers = Timers::default();
        timers.arm_after(Duration::from_secs(3600), "later");
        timers.arm_after(Duration::ZERO, "now");
        timers.arm(
            Timestamp::now() - jiff::SignedDuration::from_secs(1),
            "past",
        );
        // The earliest has run out: waiting returns at once.
        tokio::time::timeout(Duration::from_secs(5), timers.next())
            .await
            .expect("a timer that ran out wakes at once");
        let due: Vec<String> = timers.take_due().into_iter().collect();
        assert_eq!(due, ["now", "past"]);
        assert!(timers.take_due().is_empty());
        // Only the one an hour away is left.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), timers.next())
                .await
                .is_err()
        );
    }

    #[test]
    fn job_states_are_counted_as_they_change() {
        let states = JobStates::default();
        let count = |wanted: JobState| {
            states
                .counts()
                .into_iter()
                .find(|(state, _)| *state == wanted)
                .map(|(_, n)| n)
        };
        states.set("a", Some(JobState::Queued));
        states.set("b", Some(JobState::Queued));
        states.set("a", Some(JobState::Started));
        states.set("a", Some(JobState::Started));
        assert_eq!(count(JobState::Queued), Some(1));
        assert_eq!(count(JobState::Started), Some(1));
        states.set("b", None);
        states.set("gone", None);
        assert_eq!(count(JobState::Queued), Some(0));
        assert_eq!(states.counts().len(), JobState::ALL.len());
        assert_eq!(states.counts().iter().map(|(_, n)| n).sum::<usize>(), 1);
    }

    #[tokio::test]
    async fn merged_notifications_end_when_every_watch_is_gone() {
        let (first, first_rx) = broadcast::channel(4);
        let (second, second_rx) = broadcast::channel(4);
        let mut changes = merged(vec![first_rx, second_rx]);
        first.send("a".to_string()).unwrap();
        second.send("b".to_string()).unwrap();
        let mut seen = vec![
            changes.next().await.unwrap().unwrap(),
            changes.next().await.unwrap().unwrap(),
        ];
        seen.sort();
        assert_eq!(seen, ["a", "b"]);
        drop(first);
        second.send("c".to_string()).unwrap();
        assert_eq!(changes.next().await.unwrap().unwrap(), "c");
        drop(second);
        assert!(changes.next().await.is_none());
    }
}
