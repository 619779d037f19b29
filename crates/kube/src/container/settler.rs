//! The one writer of a namespace's container jobs: it carries out what the mapping asks for
//! (record an outcome, stop a job kubeferry failed) and deletes stopped jobs past their TTL, on
//! watch events and at the mapping's own deadlines, whether or not anyone asks for a status.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, Weak};

use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};
use kubeferry_core::container::{
    ContainerStateView, JobConditionType, JobObservation, JobView, PodView, container_status,
};
use kubeferry_core::marks::OUTCOME_ANNOTATION;
use kubeferry_core::record::OutcomeRecord;
use kubeferry_core::status::FailureClass;
use kubeferry_core::timeline::{attempts_of, telling_attempt};

use crate::manifest::MAIN_CONTAINER;
use crate::pod_logs::{LogTarget, kept_tail};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState};
use tokio::sync::{broadcast, mpsc};
use tracing::{debug, info, warn};

use super::inbox::{Inbox, Request, SettlerContext};
use super::tracker::{NamespaceWatch, listed_pods};
use crate::cluster::{Cluster, Op};
use crate::error::Result;
use crate::kind::Seen;
use crate::objects::Objects;
use crate::records::{Reading, gives_way};
use crate::settling::{
    JobStates, RecordAnswered, Releases, SETTLED_AT_ONCE, Timers, after, cancel_finish_due,
    finish_cancel, merged, release_held, retry_at, retry_delay,
};
use crate::tracker::{Departure, lock, reported_key};

const JOBS: &str = "jobs.batch";

/// Starts the settler of `namespace` over its watches and their notifications.
pub(crate) fn start(
    inbox: Inbox,
    namespace: &str,
    context: SettlerContext,
    watch: Weak<NamespaceWatch>,
    changes: Vec<broadcast::Receiver<String>>,
) {
    let task = Task {
        namespace: namespace.to_string(),
        context,
        watch,
        states: inbox.states,
        awaiting_pods: Mutex::default(),
        releases: Releases::new(),
    };
    tokio::spawn(task.run(changes, inbox.requests));
}

struct Task {
    namespace: String,
    context: SettlerContext,
    watch: Weak<NamespaceWatch>,
    states: Arc<JobStates>,
    /// Jobs whose outcome came without an exit code, given a moment for their pods' watch.
    awaiting_pods: Mutex<HashSet<String>>,
    /// The Jobs this settler let go of lately, or holds a while first ([`release_held`]).
    releases: Releases,
}

impl Task {
    async fn run(
        self,
        changes: Vec<broadcast::Receiver<String>>,
        mut requests: mpsc::UnboundedReceiver<Request>,
    ) {
        let mut changes = merged(changes);
        let timers = Timers::default();
        let mut janitor = tokio::time::interval_at(
            tokio::time::Instant::now() + self.context.janitor_interval,
            self.context.janitor_interval,
        );
        janitor.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut expiring: Option<tokio::task::JoinHandle<()>> = None;
        // Jobs that changed while the watches were catching up (a first list, a relist after
        // a failure): their cache may lack pods or hold stale ones, and nothing is decided
        // from it. They are settled once the watches are current again. At the start, every
        // job the watches already hold: their first list may have been delivered before the
        // changes were subscribed to, and a job that changes no more (deleted, held by
        // kubeferry's finalizer until its record is kept) would never be settled.
        let mut deferred: BTreeSet<String> = match self.watch.upgrade() {
            Some(watch) => self.everything(&watch).into_iter().collect(),
            None => return,
        };
        loop {
            let mut due: BTreeSet<String> = BTreeSet::new();
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    let settled = match &request.observed {
                        Seen::Present(job) => self.settle(job, &request.pods, &timers).await,
                        Seen::Vanished {
                            last: job,
                            final_state,
                        } => {
                            self.settle_deleted(job, &request.pods, *final_state, &timers)
                                .await;
                            Ok(())
                        }
                    };
                    let _ = request.done.send(settled);
                    continue;
                }
                change = changes.next() => match change {
                    None => return,
                    Some(Ok(job)) => {
                        due.insert(job);
                    }
                    Some(Err(broadcast::error::RecvError::Lagged(_))) => {
                        let Some(watch) = self.watch.upgrade() else { return };
                        due.extend(self.everything(&watch));
                    }
                    Some(Err(broadcast::error::RecvError::Closed)) => return,
                },
                () = timers.next() => due.extend(timers.take_due()),
                () = tokio::time::sleep(self.context.retry_interval), if !deferred.is_empty() => {}
                _ = janitor.tick() => {
                    // Its deletes must not hold up the settling: one sweep at a time, aside.
                    if expiring.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
                        expiring = Some(tokio::spawn(delete_expired(
                            self.watch.clone(),
                            self.context.cluster.clone(),
                            self.namespace.clone(),
                        )));
                    }
                    continue;
                }
            }
            // A burst of events (a list, many pods at once) is settled once per job.
            while let Some(Some(change)) = changes.next().now_or_never() {
                match change {
                    Ok(job) => {
                        due.insert(job);
                    }
                    Err(_) => {
                        let Some(watch) = self.watch.upgrade() else {
                            return;
                        };
                        due.extend(self.everything(&watch));
                    }
                }
            }
            {
                let Some(watch) = self.watch.upgrade() else {
                    return;
                };
                if !watch.is_current() {
                    deferred.append(&mut due);
                    continue;
                }
                due.append(&mut deferred);
            }
            if self.watch.strong_count() == 0 {
                return;
            }
            // Jobs are settled side by side: many ending at once (a burst of outcomes to
            // record) wait for a few round trips, not for one each in turn.
            futures::stream::iter(due)
                .for_each_concurrent(SETTLED_AT_ONCE, |name| self.settle_named(name, &timers))
                .await;
        }
    }

    /// Settles the job named `name` as the watches hold it, or as it was when it was deleted.
    async fn settle_named(&self, name: String, timers: &Timers) {
        let Some(watch) = self.watch.upgrade() else {
            return;
        };
        let Some(entry) = watch.jobs.get(&name) else {
            self.states.set(&name, None);
            // A Job deleted (cancelled, expired, removed by someone): its final state tells
            // its outcome, which is recorded if it was not yet. One found missing by a relist
            // (deleted while the watch was down) tells it only where its last state does (a
            // cancel mark, a verdict).
            if let Some(tombstone) = watch.jobs.tombstone(&name) {
                let pods = watch.pods_of(&name);
                drop(watch);
                let final_state = tombstone.departure == Departure::Deleted;
                self.settle_deleted(&tombstone.last, &pods, final_state, timers)
                    .await;
            }
            return;
        };
        let pods = watch.pods_of(&name);
        drop(watch);
        if let Err(error) = self.settle(&entry.view, &pods, timers).await {
            debug!(message = "could not settle a job; will retry", namespace = %self.namespace, job = %name, %error);
        }
    }

    /// Every job the watches hold, after notifications were missed; the counts forget the jobs
    /// whose removal was among them.
    fn everything(&self, watch: &NamespaceWatch) -> Vec<String> {
        let present: Vec<String> = watch
            .jobs
            .all()
            .into_iter()
            .map(|entry| entry.name)
            .collect();
        self.states
            .retain(|job| present.iter().any(|name| name == job));
        present
    }

    /// Maps one job as observed and carries out what the mapping asks for; arms the job's
    /// timer for when its answer next changes by time alone, or for a retry.
    async fn settle(&self, job: &JobView, pods: &[PodView], timers: &Timers) -> Result<()> {
        let key = reported_key(&job.namespace, &job.name);
        let version = job.resource_version.as_deref();
        let previous = {
            let reported = lock(&self.context.reported);
            if reported.is_older(&key, version) {
                // A fresher copy was answered from already; this one tells nothing new.
                return Ok(());
            }
            reported.get(&key)
        };
        // An outcome already answered (by a status query, from the same views) may still be
        // one to record: the mapping returns it unchanged, and the record follows below.
        let now = Timestamp::now();
        let watch = self.watch.upgrade();
        let enriched = watch
            .as_ref()
            .and_then(|watch| watch.with_refusal(job, pods, now, self.context.refusal_freshness));
        let job = enriched.as_ref().unwrap_or(job);
        let observation = JobObservation::Present(job);
        let Some(mapped) = container_status(
            &observation,
            pods,
            now,
            &self.context.mapping,
            previous.as_ref(),
        ) else {
            self.states.set(&job.name, None);
            return Ok(());
        };
        // Counted as a status query would answer: an outcome kubeferry decides only once it
        // is recorded.
        let held = previous.as_ref().map_or(JobState::Queued, |p| p.state);
        self.states.set(
            &job.name,
            Some(if mapped.must_record() {
                held
            } else {
                mapped.info.state
            }),
        );
        // Whether what follows deletes the Job: a Job in a Kueue queue goes once recorded.
        let deletes = (mapped.must_record() && job.queue_name.is_some()) || stopped_in_a_queue(job);
        // The outcome this settle writes on the Job, if it writes one.
        let mut on_job: Option<ExecutionInfo> = None;
        let written = if mapped.must_record() {
            on_job = Some(mapped.info.clone());
            self.record_and_stop(job, &mapped.info).await.map(|()| true)
        } else if stopped_in_a_queue(job) {
            // Recorded, and still there for Kueue to admit again: the delete that follows the
            // record did not go through before.
            self.objects()
                .delete(&self.context.cluster, &job.name, &job.uid, None)
                .await
                .map(|_| false)
        } else if mapped.info.is_terminal()
            && self.worth_recording(watch.as_deref(), job, pods, &mapped.info, now)
        {
            // What is recorded is this replica's answer, should a status query have answered
            // from other views a moment ago. It is this replica's answer from now on once its
            // outcome record is kept (below), as that record has it: another replica may have
            // recorded it first, from other views.
            if lock(&self.context.reported).is_older(&key, version) {
                // A newer copy was answered from meanwhile: it is judged when it comes.
                return Ok(());
            }
            let Some(answer) = self.answer(&key, job, &mapped.info) else {
                return Ok(());
            };
            // An outcome record another replica kept first stands, whatever this replica's
            // views tell: the Job carries the same (a cancel's gives way to the job's own end).
            // One this replica's watch does not show yet is copied onto the Job as it is let go.
            let id = ExecutionId::new(
                self.context.cluster.name(),
                JobKind::Job,
                &self.namespace,
                &job.name,
            );
            let answer = match self.context.records.recorded(&id).await {
                Some(standing) if !gives_way(&standing, &answer) => standing,
                _ => answer,
            };
            on_job = Some(answer.clone());
            self.record(job, &answer).await.map(|()| false)
        } else {
            if mapped.info.is_terminal() {
                let mut outcome = mapped.info.clone();
                // Only a verdict the pods' watch may lag behind: an attempt still shown
                // unfinished (an outcome kubeferry recorded on the Job names its own cause).
                let lagging = job.recorded_outcome.is_none()
                    && job.kept_outcome.is_none()
                    && pods.iter().any(|pod| {
                        pod.deletion_timestamp.is_none()
                            && pod.main.as_ref().is_none_or(|main| {
                                !matches!(main.state, ContainerStateView::Terminated(_))
                            })
                    });
                if outcome.exit_code.is_none() && lagging {
                    // The pod watch may lag the Job's verdict by a moment: look again shortly,
                    // then (no exit code still) at the pods as the API server lists them, which
                    // tell the container's end if it had one, before the outcome is recorded.
                    if lock(&self.awaiting_pods).insert(job.name.clone()) {
                        timers.arm_after(self.context.retry_interval, &job.name);
                        return Ok(());
                    }
                    match listed_pods(
                        &self.context.cluster,
                        &self.namespace,
                        &job.name,
                        watch.as_deref(),
                    )
                    .await
                    {
                        Ok(listed) => {
                            if let Some(again) = container_status(
                                &observation,
                                &listed,
                                now,
                                &self.context.mapping,
                                previous.as_ref(),
                            )
                            .filter(|again| again.info.is_terminal())
                            {
                                outcome = again.info;
                            }
                        }
                        Err(error) => {
                            timers.arm_after(
                                retry_delay(&error, self.context.retry_interval),
                                &job.name,
                            );
                            return Err(error);
                        }
                    }
                }
                if let Some(answer) = self.answer(&key, job, &outcome) {
                    self.keep(job, pods, &answer, (true, false), timers).await;
                }
                lock(&self.awaiting_pods).remove(&job.name);
            } else if mapped.info.state == JobState::Cancelling
                && job.deletion_timestamp.is_none()
                && job.cancel_mark.is_some()
            {
                let due = match cancel_finish_due(job, self.context.retry_interval) {
                    Some(due) => Some(due),
                    None => {
                        self.finish_cancel(
                            job,
                            &observation,
                            watch.as_deref(),
                            now,
                            previous.as_ref(),
                        )
                        .await
                    }
                };
                if let Some(at) = due {
                    timers.arm(at, &job.name);
                }
            }
            if let Some(at) = mapped.recheck_at {
                timers.arm(at, &job.name);
            }
            return Ok(());
        };
        // The Job as this settle left it: with the outcome it wrote, which its release then
        // does not test absent.
        let written_on = on_job.filter(|_| written.is_ok()).map(|outcome| {
            let mut job = job.clone();
            job.meta.recorded_outcome = Some(Ok(outcome));
            job
        });
        let job = written_on.as_ref().unwrap_or(job);
        match written {
            Ok(true) => {
                self.states.set(&job.name, Some(mapped.info.state));
                // An outcome kubeferry decided stands as soon as it is recorded on the Job (any
                // replica that reads the Job answers it): this replica's answer from now on,
                // before its outcome record is kept.
                lock(&self.context.reported).put(key, mapped.info.clone(), None, version);
                self.keep(job, pods, &mapped.info, (true, deletes), timers)
                    .await;
                Ok(())
            }
            Ok(false) => {
                if let Some(answer) = self.answer(&key, job, &mapped.info)
                    && let Some(standing) =
                        self.keep(job, pods, &answer, (true, deletes), timers).await
                {
                    lock(&self.context.reported).put(key, standing, None, version);
                }
                Ok(())
            }
            // The Job changed meanwhile: its new copy is on its way and is judged again.
            Err(error) if error.is_conflict() => Ok(()),
            Err(error) => {
                timers.arm_after(retry_delay(&error, self.context.retry_interval), &job.name);
                warn!(message = "could not record an outcome; will retry", namespace = %self.namespace, job = %job.name, %error);
                Err(error)
            }
        }
    }

    /// The terminal answer to record for a job whose mapping says `mapped`: a terminal answer
    /// this replica gave before (from other views) wins, as it does for a status query;
    /// `None` when it is not terminal. The settler only reads the answers here: it records,
    /// and the record is what every later question is answered from.
    ///
    /// An outcome the Job carries (the copy of its record, an outcome recorded on it) is kept
    /// as it is: every replica answers it (rule 0), and the durable record must say the same
    /// once the Job is gone.
    fn answer(&self, key: &str, job: &JobView, mapped: &ExecutionInfo) -> Option<ExecutionInfo> {
        if !mapped.is_terminal() {
            return None;
        }
        if let Some(carried) = job.carried_outcome() {
            return Some(carried);
        }
        let reported = lock(&self.context.reported).get(key);
        Some(
            reported
                .filter(ExecutionInfo::is_terminal)
                .unwrap_or_else(|| mapped.clone()),
        )
    }

    /// Keeps the outcome record of a job that ended (nothing when it is kept already), and
    /// answers the outcome that stands once it may be answered (the Job let go of, deleted or
    /// gone: [`release_held`]); a failed write is tried again at the retry interval.
    /// `present`: mapped from the Job as the watch holds it, which, not being deleted, shows
    /// an outcome reached before any cancel's delete ([`crate::records::Records::keep`]);
    /// `deleted_now`: this settle deleted the Job (the copy `job` predates the deletion).
    /// The record keeps the attempts `pods` show.
    async fn keep(
        &self,
        job: &JobView,
        pods: &[PodView],
        outcome: &ExecutionInfo,
        (present, deleted_now): (bool, bool),
        timers: &Timers,
    ) -> Option<ExecutionInfo> {
        let record = OutcomeRecord {
            kind: JobKind::Job,
            object: job.name.clone(),
            job_id: job.job_id.clone(),
            spec_hash: job.spec_hash.clone(),
            outcome: outcome.clone(),
            recorded_at: Some(Timestamp::now()),
            created_at: job.created_at,
            cancelled_by: None,
            attempts: attempts_of(pods),
        };
        let reading = Reading {
            undeleted: present && job.deletion_timestamp.is_none(),
            carried: job.carried_outcome().as_ref() == Some(outcome),
        };
        // A longer tail of the log, when the job asks for one: read only if no record stands.
        let told = job
            .keep_log
            .and_then(|keep| Some((keep, telling_attempt(&record.attempts)?.pod.clone())));
        let tail = async {
            let (keep, pod) = told?;
            let target = LogTarget {
                namespace: self.namespace.clone(),
                pod,
                container: MAIN_CONTAINER.to_string(),
                uid: None,
            };
            kept_tail(&self.context.cluster, &target, keep).await
        };
        match self
            .context
            .records
            .keep_with_tail(&self.namespace, record, reading, tail)
            .await
        {
            Ok(standing) => {
                // The record is kept: the Job, held until then, is let go with a copy of it (a
                // Job gone needs nothing more). Its record is answered once it is let go.
                if !present {
                    return Some(standing);
                }
                let let_go = release_held(
                    &self.objects(),
                    &self.context.cluster,
                    job,
                    self.context.retry_interval,
                    &self.releases,
                    Some(&standing),
                    self.context
                        .records
                        .name_hold(job, JobKind::Job, deleted_now),
                )
                .await;
                if let Some(at) = let_go.again_at {
                    timers.arm(at, &job.name);
                }
                // A Job that stays held (its release refused) is answered from here: no
                // reader's copy of it will show it let go.
                if let_go.record == RecordAnswered::WhileHeld {
                    let key = reported_key(&job.namespace, &job.name);
                    let version = job.resource_version.as_deref();
                    lock(&self.context.reported).put(key, standing.clone(), None, version);
                }
                let_go.answerable_now().then_some(standing)
            }
            Err(error) => {
                timers.arm_after(retry_delay(&error, self.context.retry_interval), &job.name);
                warn!(message = "could not keep an outcome record; will retry", namespace = %self.namespace, job = %job.name, %error);
                None
            }
        }
    }

    /// Finishes the cancel of a marked Job that nobody finished, once its pods as the API
    /// server lists them still show it running (a main container that ended on its own before
    /// the mark decides the job, not the cancel): CANCELLED recorded, then the Job deleted.
    /// Answers when to look at it again.
    async fn finish_cancel(
        &self,
        job: &JobView,
        observation: &JobObservation<'_>,
        watch: Option<&NamespaceWatch>,
        now: Timestamp,
        previous: Option<&ExecutionInfo>,
    ) -> Option<Timestamp> {
        let retry = self.context.retry_interval;
        let listed = match listed_pods(&self.context.cluster, &self.namespace, &job.name, watch)
            .await
        {
            Ok(listed) => listed,
            Err(error) => {
                warn!(message = "could not list a cancelled job's pods; will retry", namespace = %self.namespace, job = %job.name, %error);
                return retry_at(&error, retry);
            }
        };
        let again = container_status(observation, &listed, now, &self.context.mapping, previous)?;
        // Its own end shows, or is on its way: the Job counts its work ended, or its main
        // container ended with no attempt after it (the verdict, or the next attempt, comes).
        // Then it is recorded as the job's; the cancel is finished only for a job running.
        let ended = |pod: &PodView| {
            pod.main
                .as_ref()
                .is_some_and(|main| matches!(main.state, ContainerStateView::Terminated(_)))
        };
        let own_end = job.counts_ended() || (listed.iter().any(ended) && listed.iter().all(ended));
        if again.info.state != JobState::Cancelling || own_end {
            return after(retry);
        }
        finish_cancel(
            &self.objects(),
            &self.context.cluster,
            &self.context.records,
            JobKind::Job,
            job,
            &again.info,
            retry,
        )
        .await
    }

    /// Keeps the outcome of a deleted Job, from its final state and its pods' (a cancel, an
    /// expiry, a removal by someone), if it has one and it is not recorded yet.
    async fn settle_deleted(
        &self,
        job: &JobView,
        pods: &[PodView],
        final_state: bool,
        timers: &Timers,
    ) {
        let key = reported_key(&job.namespace, &job.name);
        let previous = lock(&self.context.reported).get(&key);
        let observation = JobObservation::Vanished {
            last_seen: job,
            final_state,
        };
        let Some(mapped) = container_status(
            &observation,
            pods,
            Timestamp::now(),
            &self.context.mapping,
            previous.as_ref(),
        ) else {
            return;
        };
        if let Some(answer) = self.answer(&key, job, &mapped.info) {
            self.keep(job, pods, &answer, (false, false), timers).await;
        }
    }

    /// Whether an outcome rests on pods that are, or will soon be, deleted and removed: a
    /// replica that looks once they are gone would see only the Job's verdict and report
    /// another outcome (a lost node as BackoffLimitExceeded). That is every infrastructure
    /// failure (the pods of a lost node, a drain or a preemption are deleted, often only just
    /// after the verdict is seen), and any outcome that mapped without the pods being deleted
    /// would differ in any detail. Disruptions and deletions are rare, so the outcomes
    /// recorded are few.
    /// So is the one outcome that contradicts Kubernetes' own verdict, which the pods' removal
    /// (by anyone, or the pod GC, at any later time) would turn around: a Job Kubernetes
    /// completed whose main container was OOMKilled with exit code 0.
    fn worth_recording(
        &self,
        watch: Option<&NamespaceWatch>,
        job: &JobView,
        pods: &[PodView],
        info: &ExecutionInfo,
        now: Timestamp,
    ) -> bool {
        // An outcome on the Job already (recorded, or kept with its record) says it all.
        if job.recorded_outcome.is_some()
            || job.kept_outcome.is_some()
            || job.deletion_timestamp.is_some()
        {
            return false;
        }
        if info.reason.failure_class() == Some(FailureClass::Infrastructure) {
            return true;
        }
        let completed = job
            .conditions
            .iter()
            .any(|c| c.kind == JobConditionType::Complete && c.status.is_true());
        if completed && info.state != JobState::Succeeded {
            return true;
        }
        // Pods the watch saw deleted (their final state may not show a deletion: a pod that
        // had ended is removed at once) and pods being deleted will not be there for long.
        let departed = watch
            .map(|watch| watch.departed_pods_of(&job.name))
            .unwrap_or_default();
        let lasting: Vec<PodView> = pods
            .iter()
            .filter(|pod| pod.deletion_timestamp.is_none())
            .filter(|pod| !departed.iter().any(|gone| gone.uid == pod.uid))
            .cloned()
            .collect();
        if lasting.len() == pods.len() {
            return false;
        }
        // The whole answer: the Job's verdict may name the exit code (a job without retries),
        // but the container's times and words are the pods' alone.
        let without = container_status(
            &JobObservation::Present(job),
            &lasting,
            now,
            &self.context.mapping,
            None,
        );
        without.is_none_or(|mapped| mapped.info != *info)
    }

    fn jobs(&self) -> Api<Job> {
        Api::namespaced(self.context.cluster.client().clone(), &self.namespace)
    }

    fn objects(&self) -> Objects<Job> {
        job_objects(&self.context.cluster, &self.namespace)
    }

    /// Merge-patches a Job (retried as any safe request: the record patches are the same
    /// whoever repeats them, and the stop carries a precondition).
    async fn patch(&self, job: &JobView, patch: &serde_json::Value) -> Result<()> {
        let api = self.jobs();
        let op = Op::named("patch", JOBS, &job.namespace, &job.name);
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        self.context
            .cluster
            .call(&op, true, || api.patch(&job.name, &params, &patch))
            .await?;
        Ok(())
    }

    /// Records an outcome on a Job that Kubernetes already judged, so that every replica reports
    /// it (the mapping's rule 0). Replicas may read the same end from different views (one saw
    /// the pod's final state, another only the Job's verdict): the write carries the
    /// resourceVersion the Job was read at, so a record another replica wrote meanwhile is read
    /// and stands rather than being overwritten, whatever this replica's views tell.
    async fn record(&self, job: &JobView, info: &ExecutionInfo) -> Result<()> {
        let outcome = kubeferry_core::marks::outcome_record(info);
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": job.resource_version,
                "annotations": { OUTCOME_ANNOTATION: outcome },
            },
        });
        self.patch(job, &patch).await?;
        info!(message = "recorded an outcome read from the pods", job = %job.name, state = %info.state, reason = %info.reason);
        Ok(())
    }

    /// Records an outcome kubeferry decided on the Job and stops its work, in one write with a
    /// resourceVersion precondition (a Job that changed meanwhile is judged again).
    ///
    /// The work stops by suspension, not deletion: the Job controller deletes the pods and the
    /// Job stays as the record every replica reads the outcome from (a deleted Job would leave
    /// replicas that did not watch it with "no such job"). It stays until it is deleted like
    /// any finished Job without a TTL (`ttlSecondsAfterFinished` applies only to Jobs that
    /// Kubernetes itself saw end). A Job held by a Kueue queue may be resumed by Kueue; the
    /// recorded outcome stands regardless.
    async fn record_and_stop(&self, job: &JobView, info: &ExecutionInfo) -> Result<()> {
        let outcome = kubeferry_core::marks::outcome_record(info);
        // The record and the stop go on in one patch, so that no replica sees one without the
        // other. Suspending keeps the Job as the record (the Job controller removes its pods);
        // a Job in a Kueue queue is deleted instead once its record is on, because Kueue owns
        // `suspend` and would start an admitted Job again.
        let kueue = job.queue_name.is_some();
        let metadata = serde_json::json!({
            "resourceVersion": job.resource_version,
            "annotations": { OUTCOME_ANNOTATION: outcome },
        });
        let patch = if kueue {
            serde_json::json!({ "metadata": metadata })
        } else {
            serde_json::json!({ "metadata": metadata, "spec": { "suspend": true } })
        };
        // Safe to repeat: a repeat of a patch that took effect fails its precondition.
        self.patch(job, &patch).await?;
        if kueue {
            // 404: done; 409: another Job of that name now.
            self.objects()
                .delete(&self.context.cluster, &job.name, &job.uid, None)
                .await?;
        }
        info!(message = "recorded an outcome kubeferry decided and stopped the job", job = %job.name, state = %info.state, reason = %info.reason);
        Ok(())
    }
}

/// A Job in a Kueue queue whose outcome kubeferry decided and recorded, but that is neither
/// deleted nor judged by Kubernetes (an outcome recorded from the pods of a Job Kubernetes
/// judged stays with its Job): Kueue owns its `suspend` and could start it again, so it
/// goes (see `Task::record_and_stop`).
fn stopped_in_a_queue(job: &JobView) -> bool {
    let judged = job.conditions.iter().any(|c| {
        matches!(
            c.kind,
            JobConditionType::Complete
                | JobConditionType::Failed
                | JobConditionType::SuccessCriteriaMet
                | JobConditionType::FailureTarget
        ) && c.status.is_true()
    });
    job.queue_name.is_some()
        && job.deletion_timestamp.is_none()
        && matches!(job.recorded_outcome, Some(Ok(_)))
        && !judged
}

/// The Jobs of a namespace, as the shared protocols handle them.
fn job_objects(cluster: &Cluster, namespace: &str) -> Objects<Job> {
    Objects {
        api: Api::namespaced(cluster.client().clone(), namespace),
        resource: JOBS,
        kind: "Job",
        namespace: namespace.to_string(),
        dependents_first: true,
    }
}

/// Deletes the Jobs of a namespace that kubeferry stopped after recording their outcome and
/// that have outlived their TTL (see `JobView::record_expired`). Any replica may do it: the
/// delete is conditional on the Job's uid, and a Job already gone is fine.
async fn delete_expired(watch: Weak<NamespaceWatch>, cluster: Cluster, namespace: String) {
    let Some(watch) = watch.upgrade() else {
        return;
    };
    let now = Timestamp::now();
    let expired: Vec<JobView> = watch
        .jobs
        .all()
        .into_iter()
        .map(|entry| entry.view)
        .filter(|view| view.record_expired(now))
        .collect();
    drop(watch);
    let jobs = job_objects(&cluster, &namespace);
    for job in expired {
        match jobs.delete(&cluster, &job.name, &job.uid, None).await {
            Ok(_) => {
                info!(message = "deleted a stopped job past its TTL", namespace = %namespace, job = %job.name);
            }
            Err(error) => {
                warn!(message = "cannot delete a stopped job past its TTL", namespace = %namespace, job = %job.name, %error);
            }
        }
    }
}
