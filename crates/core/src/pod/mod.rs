//! Bare pods (`kind: Pod`): the lean view of a pod kubeferry runs with no controller in
//! between, and its status mapping.
//!
//! A bare pod runs once (`restartPolicy: Never`), so its rules are a container job's for a
//! Job of one pod that retries nothing: [`pod_status`] reads the pod as such a Job, with the
//! pod playing its own Job controller (its phase is the verdict, its `DisruptionTarget`
//! condition the FailJob rule kubeferry gives jobs without retries), and maps it with
//! [`crate::container::container_status`]. Every reason a container job gives, a pod gives
//! alike: OOM kills (exit 0 too), image pull and container creation graces, unschedulable,
//! eviction, preemption, node loss, a deadline (`activeDeadlineSeconds`), cancel and deletion.
//! An outcome kubeferry decides is recorded and the pod deleted, as a JobSet's is.

#[cfg(test)]
mod tests;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use crate::container::view::{ConditionStatus, JobConditionType, JobConditionView};
use crate::container::{JobView, MappingConfig, PodPhase, PodView, main_terminated, stopped_exit};
use crate::observation::{self, ManagedMeta, Observation, RecordOutcomeAndDelete, embeds};
use crate::status::ExecutionInfo;

/// The label that tells a bare pod from the pods of kubeferry's other kinds (a Job's pods
/// carry the managed-by label too), with [`BARE_POD_VALUE`].
pub const KIND_LABEL: &str = "kubeferry.dev/kind";
/// The value of [`KIND_LABEL`] on a bare pod.
pub const BARE_POD_VALUE: &str = "pod";
/// The label selector of kubeferry's bare pods.
pub const BARE_POD_SELECTOR: &str = "app.kubernetes.io/managed-by=kubeferry,kubeferry.dev/kind=pod";

/// What the mapping reads from a bare pod: the metadata every managed object carries, the pod
/// as a Job's pod is read, and its deadline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BarePodView {
    /// The metadata every managed object carries; its fields read as the view's own.
    pub meta: ManagedMeta,
    /// The pod, read as any Job's pod is.
    pub pod: PodView,
    /// `spec.activeDeadlineSeconds`: the job file's `timeout`, which a deadline's message names.
    pub active_deadline_seconds: Option<i64>,
}

embeds!(BarePodView, meta: ManagedMeta);

impl From<&Pod> for BarePodView {
    fn from(pod: &Pod) -> Self {
        BarePodView {
            meta: ManagedMeta::read(&pod.metadata),
            pod: PodView::from(pod),
            active_deadline_seconds: pod.spec.as_ref().and_then(|s| s.active_deadline_seconds),
        }
    }
}

/// What a bare pod is observed as.
pub type PodObservation<'a> = Observation<'a, BarePodView>;

/// The result of mapping a bare pod.
pub type PodMapped = observation::Mapped<PodAction>;

/// What the settler must do before a bare pod's outcome stands, when kubeferry decided it (a
/// grace period or timeout of its own ran out): record it on the pod, then delete the pod.
pub type PodAction = RecordOutcomeAndDelete;

/// What the Job controller's verdict says when a pod's `DisruptionTarget` condition matched
/// the FailJob rule at index 0 (pkg/controller/job/pod_failure_policy.go), which the container
/// mapping reads as a disruption.
fn disruption_verdict(view: &BarePodView) -> String {
    format!(
        "Pod {}/{} has condition DisruptionTarget matching FailJob rule at index 0",
        view.namespace, view.pod.name
    )
}

/// Maps a bare pod to its status: `now` drives the grace periods of `config`; `previous` is
/// the status reported before, if any (a terminal one is returned unchanged).
///
/// Returns `None` when the pod is gone and nothing that was seen tells what became of it: the
/// caller then answers "no such job".
pub fn pod_status(
    observed: &PodObservation<'_>,
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<PodMapped> {
    let view = observed.view();
    let started = view
        .pod
        .main
        .as_ref()
        .and_then(|main| main.run_starts().min());
    // 0. An outcome kubeferry recorded counts once the pod is being deleted or gone; before
    //    that, the deletion is still to be done.
    if let Some(Ok(outcome)) = &view.recorded_outcome {
        let stopped = observed.vanished().is_some() || view.deletion_timestamp.is_some();
        return observation::answer(previous, view.kept_outcome.as_ref(), now, |_clock| {
            Some(if stopped {
                PodMapped::of(outcome.clone())
            } else {
                deleting(view, started, outcome.clone())
            })
        });
    }
    let (job, pod) = as_job(view);
    let as_job_observed = match *observed {
        Observation::Present(_) => Observation::Present(&job),
        Observation::Vanished { final_state, .. } => Observation::Vanished {
            last_seen: &job,
            final_state,
        },
    };
    let mapped = crate::container::container_status(
        &as_job_observed,
        std::slice::from_ref(&pod),
        now,
        config,
        previous,
    )?;
    if mapped.must_record() {
        return Some(deleting(view, started, mapped.info));
    }
    Some(PodMapped {
        info: mapped.info,
        warning: mapped.warning,
        action: None,
        recheck_at: mapped.recheck_at,
    })
}

/// The answer while kubeferry records `outcome` and deletes the pod.
fn deleting(view: &BarePodView, started: Option<Timestamp>, outcome: ExecutionInfo) -> PodMapped {
    let info = view
        .before_its_end(started)
        .with_message("kubeferry decided the outcome; deleting the pod before reporting it");
    PodMapped::acting(info, PodAction { outcome })
}

/// The pod read as a Job of one pod that retries nothing, whose verdict the pod itself gives,
/// and the pod as that Job's one attempt.
fn as_job(view: &BarePodView) -> (JobView, PodView) {
    let mut pod = view.pod.clone();
    let mut meta = view.meta.clone();
    // Handled before (a recorded outcome that cannot be read stays, for its warning).
    if matches!(meta.recorded_outcome, Some(Ok(_))) {
        meta.recorded_outcome = None;
    }
    let verdict = verdict(view);
    // A deletion that follows the pod's disruption is the disruption's doing (the Eviction
    // API, preemption, the taint manager and the pod GC mark the pod, then delete it): not a
    // stop, and not what ended the container. The verdict tells it, its time the
    // disruption's, so every replica reads the same whichever copy it saw first. Any other
    // deletion stops the work when it was requested (`deletionTimestamp` adds the grace
    // period).
    let requested = pod.deletion_requested_at();
    let by_disruption = match (disrupted_at(&pod), requested) {
        (Some(disrupted), Some(requested)) => disrupted.is_none_or(|at| at <= requested),
        _ => false,
    };
    if by_disruption {
        meta.deletion_timestamp = None;
    } else {
        meta.deletion_timestamp = requested;
    }
    // Nor did a deletion end a container that had ended on its own before it.
    if by_disruption || ended_before_deletion(&pod) {
        pod.deletion_timestamp = None;
    }
    let phase = pod.phase.as_ref();
    let main_finished = main_terminated(&pod).and_then(|t| t.finished_at);
    let job = JobView {
        meta,
        conditions: verdict.into_iter().collect(),
        active: i32::from(!pod.phase_ended() && pod.deletion_timestamp.is_none()),
        succeeded: i32::from(phase == Some(&PodPhase::Succeeded)),
        failed: i32::from(phase == Some(&PodPhase::Failed)),
        backoff_limit: Some(0),
        start_time: pod.start_time,
        completion_time: (phase == Some(&PodPhase::Succeeded))
            .then_some(main_finished)
            .flatten(),
        active_deadline_seconds: view.active_deadline_seconds,
        bare_pod: true,
        ..JobView::default()
    };
    (job, pod)
}

/// When the pod's `DisruptionTarget` condition came (`Some(None)`: at a time it does not show),
/// if it holds.
fn disrupted_at(pod: &PodView) -> Option<Option<Timestamp>> {
    pod.disruption
        .as_ref()
        .filter(|c| c.status.is_true())
        .map(|c| c.last_transition_time)
}

/// The verdict a Job controller would give its one pod without retries: success once the pod
/// succeeded; failure once it failed, at its deadline (`DeadlineExceeded`), by a disruption
/// (the FailJob rule on `DisruptionTarget`, also for a disrupted pod being deleted or gone
/// before its phase showed it), or on its own; none while it runs, or when only a deletion
/// ended it (the deletion is the news: a cancel, or someone else's).
fn verdict(view: &BarePodView) -> Option<JobConditionView> {
    let pod = &view.pod;
    let condition = |kind, reason: Option<&str>, message: Option<String>, at| JobConditionView {
        kind,
        status: ConditionStatus::True,
        reason: reason.map(str::to_string),
        message,
        last_transition_time: at,
    };
    let finished = main_terminated(pod).and_then(|t| t.finished_at);
    let disrupted = disrupted_at(pod);
    let stopping = pod.deletion_timestamp.is_some();
    match pod.phase.as_ref() {
        Some(PodPhase::Succeeded) => {
            Some(condition(JobConditionType::Complete, None, None, finished))
        }
        Some(PodPhase::Failed) if pod.reason.as_deref() == Some("DeadlineExceeded") => {
            let at = deadline_at(pod.start_time, view.active_deadline_seconds).or(finished);
            Some(condition(
                JobConditionType::Failed,
                Some("DeadlineExceeded"),
                pod.message.clone(),
                at,
            ))
        }
        _ if let Some(at) = disrupted
            && (pod.phase == Some(PodPhase::Failed) || stopping) =>
        {
            Some(condition(
                JobConditionType::Failed,
                Some("PodFailurePolicy"),
                Some(disruption_verdict(view)),
                at,
            ))
        }
        // Ended while being deleted, not on its own before: the deletion decides.
        Some(PodPhase::Failed) if stopping && !ended_before_deletion(pod) => None,
        Some(PodPhase::Failed) => Some(condition(JobConditionType::Failed, None, None, finished)),
        _ => None,
    }
}

/// Whether the pod's main container ended on its own before its deletion was requested: by
/// then, the same second included (timestamps have whole seconds), with an exit no stop gives
/// (137, 143, a container the kubelet lost). The container mapping reads a disruption's tie
/// so too.
fn ended_before_deletion(pod: &PodView) -> bool {
    let Some(requested) = pod.deletion_requested_at() else {
        return false;
    };
    main_terminated(pod).is_some_and(|t| {
        !stopped_exit(t.exit_code, t.reason.as_deref())
            && t.finished_at.is_some_and(|end| end <= requested)
    })
}

/// When a deadline of `seconds` from `start` passed.
fn deadline_at(start: Option<Timestamp>, seconds: Option<i64>) -> Option<Timestamp> {
    start?
        .checked_add(jiff::SignedDuration::from_secs(seconds?))
        .ok()
}
