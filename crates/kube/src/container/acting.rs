//! What the settler writes for a container job besides the outcome record: an outcome on the
//! Job (kubeferry's own, with the Job stopped; or one read from pods about to go), a Job
//! stopped in a Kueue queue deleted, and stopped Jobs past their TTL deleted; and whether a
//! cancel left unfinished may be finished.

use std::sync::Weak;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kubeferry_core::container::{
    ContainerStateView, JobConditionType, JobObservation, JobView, PodView, container_status,
};
use kubeferry_core::marks::OUTCOME_ANNOTATION;
use kubeferry_core::status::FailureClass;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState};
use tracing::{info, warn};

use super::ContainerJobs;
use super::tracker::{NamespaceWatch, listed_pods};
use crate::cluster::Cluster;
use crate::error::Result;
use crate::kind::{Acted, Outcome};
use crate::kind::{Kind, Seen};
use crate::objects::Objects;
use crate::records::gives_way;
use crate::settling::{after, retry_at};

/// What the settler does before a container job's outcome stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum JobAction {
    /// An outcome kubeferry decided (a grace period or timeout of its own): record it on the
    /// Job and stop the Job, so that every replica reports the same one.
    RecordAndStop(ExecutionInfo),
    /// The same for a Job in a Kueue queue: its outcome recorded on it, then the Job deleted
    /// (Kueue owns `suspend`, and would start an admitted Job again).
    RecordAndLeaveQueue(ExecutionInfo),
    /// An outcome Kubernetes judged that rests on pods about to be removed
    /// ([`ContainerJobs::worth_recording`]): record it on the Job.
    Record(ExecutionInfo),
    /// A Job in a Kueue queue whose outcome is recorded on it but that is still there
    /// ([`stopped_in_a_queue`](stopped_in_a_queue)): delete it.
    DeleteFromQueue(ExecutionInfo),
}

impl Outcome for JobAction {
    fn outcome(&self) -> &ExecutionInfo {
        match self {
            JobAction::RecordAndStop(outcome)
            | JobAction::RecordAndLeaveQueue(outcome)
            | JobAction::Record(outcome)
            | JobAction::DeleteFromQueue(outcome) => outcome,
        }
    }

    /// A Job in a Kueue queue goes once its outcome is on it; any other stays as its record.
    fn deletes_object(&self) -> bool {
        matches!(
            self,
            JobAction::RecordAndLeaveQueue(_) | JobAction::DeleteFromQueue(_)
        )
    }
}

impl ContainerJobs {
    /// Carries out `action` on the Job `job`.
    pub(super) async fn act_on(
        &self,
        id: &ExecutionId,
        job: &JobView,
        action: &JobAction,
    ) -> Acted<JobView> {
        let written = match action {
            JobAction::RecordAndStop(outcome) => self.record_and_stop(job, outcome, false).await,
            JobAction::RecordAndLeaveQueue(outcome) => {
                self.record_and_stop(job, outcome, true).await
            }
            JobAction::Record(outcome) => {
                // An outcome record another replica kept first stands, whatever this
                // replica's views tell: the Job carries the same (a cancel's gives way to the
                // job's own end).
                let answer = match self.records().recorded(id).await {
                    Some(standing) if !gives_way(&standing, outcome) => standing,
                    _ => outcome.clone(),
                };
                self.record(job, &answer).await
            }
            JobAction::DeleteFromQueue(_) => {
                // Recorded, and still there for Kueue to admit again: the delete that follows
                // the record did not go through before.
                return match self
                    .objects(&job.namespace)
                    .delete(self.cluster(), &job.name, &job.uid, None)
                    .await
                {
                    Ok(_) => Acted::Done,
                    Err(error) => Acted::Failed(error),
                };
            }
        };
        match written {
            Ok(patched) => Acted::Written(Box::new(JobView::from(&patched))),
            // Its pods may have changed with it (the reason the Job changed): it is judged
            // again as the watches deliver both.
            Err(error) if error.is_conflict() => Acted::Changed,
            Err(error) if error.is_not_found() => Acted::Remap(Box::new(Seen::Vanished {
                last: job.clone(),
                final_state: false,
            })),
            Err(error) => Acted::Failed(error),
        }
    }

    /// Records an outcome on a Job that Kubernetes already judged, so that every replica
    /// reports it (the mapping's rule 0). Replicas may read the same end from different views
    /// (one saw the pod's final state, another only the Job's verdict): the write carries the
    /// resourceVersion the Job was read at, so a record another replica wrote meanwhile is
    /// read and stands rather than being overwritten, whatever this replica's views tell.
    async fn record(&self, job: &JobView, info: &ExecutionInfo) -> Result<Job> {
        let outcome = kubeferry_core::marks::outcome_record(info);
        let patched = self
            .objects(&job.namespace)
            .annotate(
                self.cluster(),
                &job.name,
                job.resource_version.as_deref(),
                &[(OUTCOME_ANNOTATION, &outcome)],
                true,
            )
            .await?;
        info!(message = "recorded an outcome read from the pods", job = %job.name, state = %info.state, reason = %info.reason);
        Ok(patched)
    }

    /// Records an outcome kubeferry decided on the Job and stops its work, in one write with a
    /// resourceVersion precondition (a Job that changed meanwhile is judged again).
    ///
    /// The work stops by suspension, not deletion: the Job controller deletes the pods and the
    /// Job stays as the record every replica reads the outcome from (a deleted Job would leave
    /// replicas that did not watch it with "no such job"). It stays until it is deleted like
    /// any finished Job without a TTL (`ttlSecondsAfterFinished` applies only to Jobs that
    /// Kubernetes itself saw end). A Job in a Kueue queue (`kueue`) is deleted once its record
    /// is on instead, because Kueue owns `suspend` and would start an admitted Job again.
    async fn record_and_stop(
        &self,
        job: &JobView,
        info: &ExecutionInfo,
        kueue: bool,
    ) -> Result<Job> {
        let outcome = kubeferry_core::marks::outcome_record(info);
        // Safe to repeat: a repeat of a patch that took effect fails its precondition.
        let patched = self
            .objects(&job.namespace)
            .annotate_and_set(
                self.cluster(),
                &job.name,
                job.resource_version.as_deref(),
                &[(OUTCOME_ANNOTATION, &outcome)],
                (!kueue).then(|| serde_json::json!({ "suspend": true })),
                true,
            )
            .await?;
        if kueue {
            // 404: done; 409: another Job of that name now.
            self.objects(&job.namespace)
                .delete(self.cluster(), &job.name, &job.uid, None)
                .await?;
        }
        info!(message = "recorded an outcome kubeferry decided and stopped the job", job = %job.name, state = %info.state, reason = %info.reason);
        Ok(patched)
    }

    /// The status a marked Job that nobody finished is cancelled from, once its pods as the
    /// API server lists them still show it running (a main container that ended on its own
    /// before the mark decides the job, not the cancel). `Err`: not now; when to look again.
    pub(super) async fn cancel_of_running(
        &self,
        job: &JobView,
    ) -> std::result::Result<ExecutionInfo, Option<Timestamp>> {
        let retry = self.recheck_interval();
        let watch = self.existing(&job.namespace);
        let listed = match listed_pods(self.cluster(), &job.namespace, &job.name, watch.as_deref())
            .await
        {
            Ok(listed) => listed,
            Err(error) => {
                warn!(message = "could not list a cancelled job's pods; will retry", namespace = %job.namespace, job = %job.name, %error);
                return Err(retry_at(&error, retry));
            }
        };
        let id = self.id(&job.namespace, &job.name);
        let previous = self.namespaces().last_reported(&id.namespace, &id.name);
        let again = container_status(
            &JobObservation::Present(job),
            &listed,
            Timestamp::now(),
            &self.settings.mapping,
            previous.as_ref(),
        )
        .ok_or(None)?;
        // Its own end shows, or is on its way: the Job counts its work ended, or its main
        // container ended with no attempt after it (the verdict, or the next attempt, comes).
        // Then it is recorded as the job's; the cancel is finished only for a job running.
        let own_end = job.counts_ended() || (listed.iter().any(ended) && listed.iter().all(ended));
        if again.info.state != JobState::Cancelling || own_end {
            return Err(after(retry));
        }
        Ok(again.info)
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
    pub(super) fn worth_recording(
        &self,
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
        let departed = self
            .existing(&job.namespace)
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
            &self.settings.mapping,
            None,
        );
        without.is_none_or(|mapped| mapped.info != *info)
    }
}

/// Whether a pod's main container ended.
fn ended(pod: &PodView) -> bool {
    pod.main
        .as_ref()
        .is_some_and(|main| matches!(main.state, ContainerStateView::Terminated(_)))
}

/// Whether the Job's verdict may have come before its pods' watch showed how they ended: no
/// outcome on the Job names its own cause, and an attempt still shows unfinished. Its pods
/// are then listed once before its outcome is first reported.
pub(super) fn pods_may_lag(job: &JobView, pods: &[PodView]) -> bool {
    job.recorded_outcome.is_none()
        && job.kept_outcome.is_none()
        && pods
            .iter()
            .any(|pod| pod.deletion_timestamp.is_none() && !ended(pod))
}

/// A Job in a Kueue queue whose outcome kubeferry decided and recorded, but that is neither
/// deleted nor judged by Kubernetes (an outcome recorded from the pods of a Job Kubernetes
/// judged stays with its Job): Kueue owns its `suspend` and could start it again, so it
/// goes (see [`ContainerJobs::record_and_stop`]).
pub(super) fn stopped_in_a_queue(job: &JobView) -> bool {
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

/// Every `interval`, while the namespace's watches live, deletes the Jobs that kubeferry
/// stopped after recording their outcome and that have outlived their TTL (see
/// `JobView::record_expired`). Any replica may do it: the delete is conditional on the Job's
/// uid, and a Job already gone is fine.
pub(super) async fn delete_expired_every(
    watch: Weak<NamespaceWatch>,
    objects: Objects<Job>,
    cluster: Cluster,
    interval: Duration,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(held) = watch.upgrade() else {
            return;
        };
        let now = Timestamp::now();
        let expired: Vec<JobView> = held
            .jobs
            .all()
            .into_iter()
            .map(|entry| entry.view)
            .filter(|view| view.record_expired(now))
            .collect();
        drop(held);
        for job in expired {
            match objects.delete(&cluster, &job.name, &job.uid, None).await {
                Ok(_) => {
                    info!(message = "deleted a stopped job past its TTL", namespace = %objects.namespace, job = %job.name);
                }
                Err(error) => {
                    warn!(message = "cannot delete a stopped job past its TTL", namespace = %objects.namespace, job = %job.name, %error);
                }
            }
        }
    }
}
