//! The pure mapping from a Job and its pods to kubeferry's status model.
//!
//! The rules and their order are documented in `docs/statuses.md`; the comments here say
//! why each one is where it is.

use std::time::Duration;

use jiff::Timestamp;

use super::view::{
    ContainerStateView, ContainerView, JobConditionType, JobConditionView, JobView,
    PodConditionView, PodPhase, PodSummary, PodView, TerminatedView,
};
use crate::clock::{Clock, Resolution, deadline};
use crate::observation::{self, Action, Observation};
use crate::status::{ExecutionInfo, JobState, Reason, Started};

mod indexed;

/// Every grace period and timeout the mapping applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingConfig {
    /// How long an image may fail to pull (`ErrImagePull`, `ImagePullBackOff`, ...) before the
    /// job fails with `ImagePullFailed`, counted from when the kubelet took the pod.
    pub image_pull_grace: Duration,
    /// How long the runtime may fail to create the container (`CreateContainerError`,
    /// `RunContainerError`) before the job fails, counted like the pull grace.
    pub create_container_error_grace: Duration,
    /// How long a job may wait for a node (or, with no pod at all, for the Job controller to
    /// create one) before it fails with `UnschedulableTimeout`; `None` waits forever.
    pub pending_timeout: Option<Duration>,
    /// How long a Job's verdict waits for its pod's final status to be observed (the Job and its
    /// pods arrive on separate watches) before the outcome is reported without the pod's details.
    pub pod_status_wait: Duration,
}

impl Default for MappingConfig {
    fn default() -> Self {
        MappingConfig {
            image_pull_grace: Duration::from_secs(180),
            create_container_error_grace: Duration::from_secs(180),
            pending_timeout: None,
            pod_status_wait: Duration::from_secs(10),
        }
    }
}

/// What is known of the Job itself.
pub type JobObservation<'a> = Observation<'a, JobView>;

/// The result of mapping a container job's observation.
pub type Mapped = observation::Mapped<ContainerAction>;

/// What the settler must do before a container job's outcome stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerAction {
    /// The outcome ([`Mapped::info`]) comes from one of kubeferry's own timeouts or from a
    /// container error the kubelet keeps retrying, not from a Kubernetes verdict: the Job is
    /// still there. Record the outcome on the Job and stop the Job, so that every replica
    /// reports the same one.
    RecordOutcomeAndStop,
}

impl Action for ContainerAction {
    fn outcome_mut(&mut self) -> Option<&mut ExecutionInfo> {
        None
    }
}

impl Mapped {
    /// Whether the outcome must be recorded (and the Job stopped) before it stands.
    pub fn must_record(&self) -> bool {
        self.action == Some(ContainerAction::RecordOutcomeAndStop)
    }

    fn recorded_by_kubeferry(info: ExecutionInfo) -> Self {
        Mapped::acting(info, ContainerAction::RecordOutcomeAndStop)
    }
}

/// The kubelet's waiting reasons for an image it cannot pull (yet), which it keeps retrying.
/// `InvalidImageName` is not among them: the kubelet never retries it.
pub(crate) const IMAGE_PULL_REASONS: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "RegistryUnavailable",
    "ImageInspectError",
    "SignatureValidationFailed",
];

/// Maps a container job (a Job and its pods) to its status.
///
/// `pods` are the Job's pods as last observed, in any order (pods owned by another Job are
/// ignored); `now` drives the grace periods of `config`; `previous` is the status reported
/// before, if any: a terminal one is returned unchanged, and a later status keeps its start time.
///
/// Returns `None` when the Job is gone and nothing that was seen tells what became of it (no
/// outcome, no cancel mark, no deletion in a view that may be stale): the caller then answers
/// "no such job", which a caller that was cancelling settles as cancelled.
pub fn container_status(
    observed: &JobObservation<'_>,
    pods: &[PodView],
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<Mapped> {
    let job = observed.view();
    observation::answer(previous, job.kept_outcome.as_ref(), now, |clock| {
        let mut attempts: Vec<&PodView> = pods.iter().filter(|pod| job.owns(pod)).collect();
        attempts.sort_by(|a, b| oldest_attempt_first(a, b));
        let mapper = Mapper {
            job,
            vanished: observed.vanished(),
            attempts,
            clock,
            config,
            previous,
        };
        let mut mapped = mapper.map()?;
        if let Some(indexed) = mapper.indexed()
            && mapped.info.indexes.is_none()
        {
            mapped.info.indexes = Some(mapper.index_summary(indexed, None));
        }
        Some(mapped)
    })
}

/// Orders a Job's pods oldest attempt first: by creation time, and of two created in the same
/// second (timestamps have whole seconds) by what can follow what. With
/// `podReplacementPolicy: Failed` a Job starts an attempt only once the previous one ended,
/// and none after a success: so an attempt that ended without success is older than one that
/// succeeded, and both are older than one still going; then the earlier end, then the name.
pub fn oldest_attempt_first(a: &PodView, b: &PodView) -> std::cmp::Ordering {
    let key = |pod: &PodView| {
        let place = match (has_ended(pod), has_succeeded(pod)) {
            (true, false) => 0,
            (true, true) => 1,
            (false, _) => 2,
        };
        let end = main_terminated(pod).and_then(|t| t.finished_at);
        (pod.created_at, place, end)
    };
    key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
}

/// The Job controller's verdict, read from the Job's conditions.
struct Verdict<'a> {
    succeeded: bool,
    /// When the outcome was decided: the earliest transition among the conditions that say it
    /// (`SuccessCriteriaMet`/`FailureTarget` come before `Complete`/`Failed`).
    at: Option<Timestamp>,
    reason: Option<&'a str>,
    message: Option<&'a str>,
    /// Whether the final condition (`Complete`/`Failed`) is there, not only its target.
    final_seen: bool,
}

/// How the work was stopped, if it was.
#[derive(Clone, Copy)]
enum Stop {
    /// The Job's deletion was requested at this time.
    Deleted(Timestamp),
    /// The Job is gone and no view showed its deletion.
    Vanished,
    /// Cancelled by suspension: the Job is suspended (since this time, when known) and no pod
    /// of it runs any more.
    Suspended(Option<Timestamp>),
}

struct Mapper<'a> {
    job: &'a JobView,
    /// `Some(final_state)` when the Job is gone.
    vanished: Option<bool>,
    /// The Job's pods, oldest first.
    attempts: Vec<&'a PodView>,
    clock: &'a Clock,
    config: &'a MappingConfig,
    previous: Option<&'a ExecutionInfo>,
}

/// Why an attempt failed.
/// What the Job controller's verdict says when a pod's `DisruptionTarget` condition matched a
/// FailJob rule (pkg/controller/job/pod_failure_policy.go: "Pod %s/%s has condition %v
/// matching %v rule at index %d").
const DISRUPTION_RULE_MATCH: &str = "has condition DisruptionTarget matching FailJob rule";

struct Cause {
    reason: Reason,
    message: String,
    /// An exit code the cause itself shows (an OOM kill seen only in `lastState`).
    exit_code: Option<i32>,
}

impl<'a> Mapper<'a> {
    fn map(&self) -> Option<Mapped> {
        let mut warnings = Vec::new();
        // 0. An outcome kubeferry decided and recorded on the Job before stopping it: every
        //    replica reports it, whatever the stopping did to the Job and its pods afterwards.
        match &self.job.recorded_outcome {
            Some(Ok(recorded)) => return Some(Mapped::of(recorded.clone())),
            Some(Err(value)) => warnings.push(format!(
                "the Job's recorded outcome {value:?} is unreadable; ignoring it"
            )),
            None => {}
        }
        let verdict = match self.verdict(&mut warnings) {
            Ok(verdict) => verdict,
            Err(warning) => return Some(self.keep_previous(warning)),
        };
        let stop = self.stop();
        let mut mapped = self.decide(verdict, stop)?;
        if !warnings.is_empty() && mapped.warning.is_none() {
            mapped.warning = Some(warnings.join("; "));
        }
        Some(mapped)
    }

    /// The precedence rules, first match wins.
    fn decide(&self, verdict: Option<Verdict<'_>>, stop: Option<Stop>) -> Option<Mapped> {
        // 1. An outcome Kubernetes recorded before the work was stopped stands, whoever stopped
        //    it and whether or not a cancel was requested.
        if let Some(verdict) = &verdict
            && !decided_after(verdict, stop)
        {
            return Some(self.outcome(verdict));
        }
        // 1b. A Job being deleted or gone can no longer judge: an attempt that succeeded on its
        //     own before that is the outcome.
        if !self.job_can_judge()
            && let Some(mapped) = self.success_before_deletion()
        {
            return Some(mapped);
        }
        // 2. A cancel request: done once the work stopped, in progress until then.
        if let Some(mark) = &self.job.cancel_mark {
            let requested = mark
                .requested_at
                .map(|at| format!(" at {at}"))
                .unwrap_or_default();
            return Some(match stop {
                Some(stop) => self.cancelled(stop, mark.requested_at, &requested),
                None => Mapped::of(
                    ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested)
                        .with_message(format!(
                            "cancel requested{requested}; waiting for the job to stop"
                        ))
                        .started(self.first_start()),
                ),
            });
        }
        // 3. Stopped without a cancel request: someone else deleted the Job.
        match stop {
            Some(Stop::Deleted(at)) => {
                return Some(self.deleted_externally(
                    Some(at),
                    format!(
                        "the {} was deleted at {at} without a cancel request",
                        self.job.noun()
                    ),
                ));
            }
            Some(Stop::Vanished) => {
                // Only a final state proves there was no cancel mark: a stale view may predate
                // a cancel requested through another replica.
                return if self.vanished == Some(true) {
                    Some(self.deleted_externally(
                        None,
                        format!(
                            "the {} was deleted without a cancel request",
                            self.job.noun()
                        ),
                    ))
                } else {
                    None
                };
            }
            Some(Stop::Suspended(_)) | None => {}
        }
        // 4. Suspended (by the caller or held by a queue such as Kueue).
        if self.is_suspended() {
            let message = match &self.job.queue_name {
                Some(queue) => format!("waiting for admission by queue {queue}"),
                None => "the Job is suspended".to_string(),
            };
            return Some(Mapped::of(
                ExecutionInfo::new(JobState::Queued, Reason::Suspended)
                    .with_message(message)
                    .started(self.first_start()),
            ));
        }
        // 5. The newest attempt's progress.
        Some(self.progress())
    }

    /// Reads the Job's verdict. `Err` when the conditions cannot be read as one.
    fn verdict(&self, warnings: &mut Vec<String>) -> Result<Option<Verdict<'a>>, String> {
        let mut success: Vec<&JobConditionView> = Vec::new();
        let mut failure: Vec<&JobConditionView> = Vec::new();
        for condition in &self.job.conditions {
            if let super::view::ConditionStatus::Other(status) = &condition.status {
                warnings.push(format!(
                    "Job condition {} has status {status:?}, which this version does not know",
                    condition.kind.as_str()
                ));
                continue;
            }
            if !condition.status.is_true() {
                continue;
            }
            match &condition.kind {
                JobConditionType::Complete | JobConditionType::SuccessCriteriaMet => {
                    success.push(condition)
                }
                JobConditionType::Failed | JobConditionType::FailureTarget => {
                    failure.push(condition)
                }
                JobConditionType::Suspended => {}
                JobConditionType::Other(kind) => warnings.push(format!(
                    "Job condition {kind}=True is not one this version knows; ignored"
                )),
            }
        }
        let (succeeded, conditions) = match (success.is_empty(), failure.is_empty()) {
            (true, true) => return Ok(None),
            (false, true) => (true, success),
            (true, false) => (false, failure),
            (false, false) => {
                return Err(format!(
                    "Job {} reports both success and failure conditions; keeping the last status",
                    self.job.name
                ));
            }
        };
        // The final condition (Complete/Failed) carries the same reason as its target; prefer
        // it, else the target's.
        let is_final = |c: &&&JobConditionView| {
            matches!(
                c.kind,
                JobConditionType::Complete | JobConditionType::Failed
            )
        };
        let named = conditions
            .iter()
            .find(is_final)
            .or_else(|| conditions.first())
            .copied();
        Ok(Some(Verdict {
            succeeded,
            at: conditions
                .iter()
                .filter_map(|c| c.last_transition_time)
                .min(),
            reason: named.and_then(|c| c.reason.as_deref()),
            message: named.and_then(|c| c.message.as_deref()),
            final_seen: conditions.iter().any(|c| is_final(&c)),
        }))
    }

    /// How the work was stopped, if it was (see [`Stop`]).
    ///
    /// Of a cancel by suspension and a later deletion (kubeferry's retention removing the
    /// record), the suspension is what stopped the work.
    fn stop(&self) -> Option<Stop> {
        // Suspension stops the work only as the means of a cancel; otherwise it is a queue.
        let suspended = (self.job.cancel_mark.is_some()
            && self.job.suspend
            && !self.has_live_work())
        .then(|| {
            self.job
                .conditions
                .iter()
                .find(|c| c.kind == JobConditionType::Suspended && c.status.is_true())
                .and_then(|c| c.last_transition_time)
        });
        match (self.job.deletion_timestamp, suspended) {
            (Some(deleted), Some(Some(since))) if since <= deleted => {
                Some(Stop::Suspended(Some(since)))
            }
            (Some(deleted), _) => Some(Stop::Deleted(deleted)),
            (None, Some(since)) => Some(Stop::Suspended(since)),
            (None, None) if self.vanished.is_some() => Some(Stop::Vanished),
            (None, None) => None,
        }
    }

    /// Whether the Job controller may still write a verdict: the Job exists and is not being
    /// deleted.
    fn job_can_judge(&self) -> bool {
        self.vanished.is_none() && self.job.deletion_timestamp.is_none()
    }

    fn has_live_work(&self) -> bool {
        self.job.active > 0
            || self
                .attempts
                .iter()
                .any(|pod| !has_ended(pod) && pod.deletion_timestamp.is_none())
    }

    fn is_suspended(&self) -> bool {
        self.job.suspend
            || self
                .job
                .conditions
                .iter()
                .any(|c| c.kind == JobConditionType::Suspended && c.status.is_true())
    }

    /// The reported outcome of a verdict, with the details its pods show.
    fn outcome(&self, verdict: &Verdict<'_>) -> Mapped {
        if self.awaits_pod_status(verdict) {
            // Started as its pods, an earlier answer or the Job show.
            let info = self.job.before_its_end(self.ended_start());
            return Mapped::of(info.with_message(if self.job.bare_pod {
                "the pod's outcome is known; waiting for its final status"
            } else {
                "the Job controller reported the outcome; waiting for the pod's final status"
            }));
        }
        if let Some(info) = self.awaits_final_condition(verdict) {
            return Mapped::of(info);
        }
        if verdict.succeeded {
            self.succeeded(verdict)
        } else {
            self.failed(verdict)
        }
    }

    /// Whether to hold a verdict back until the pod that decided it is seen ended, so that
    /// every replica reports the same details (an OOM kill with exit code 0 even turns a
    /// success into a failure). Bounded by [`MappingConfig::pod_status_wait`].
    fn awaits_pod_status(&self, verdict: &Verdict<'_>) -> bool {
        if !self.job_can_judge() {
            return false;
        }
        // Condition times are whole seconds (`metav1.Time`): the verdict came up to a second
        // after the time it shows, and the wait counts from the latest it can have come.
        let Some(at) = verdict
            .at
            .and_then(|at| at.checked_add(jiff::SignedDuration::from_secs(1)).ok())
        else {
            return false;
        };
        if !self.clock.before_deadline(at, self.config.pod_status_wait) {
            return false;
        }
        if verdict.succeeded {
            !self.attempts.iter().any(|pod| has_succeeded(pod))
        } else if matches!(
            verdict.reason,
            Some("DeadlineExceeded" | "PodFailurePolicy")
        ) && !self.disruption_verdict(verdict)
            && self.exit_code_verdict(verdict).is_none()
        {
            // The Job's own reason names the cause; its pods may legitimately still run.
            false
        } else {
            // A pod being deleted holds nothing back: the deletion is the news. No pod at all
            // is different: the attempts may be gone (deleted, and removed once the Job
            // controller counted them), and a replica that saw them records the outcome it
            // read from them (rule 0); wait for that rather than report a bare verdict.
            self.attempts
                .last()
                .is_none_or(|pod| !has_ended(pod) && pod.deletion_timestamp.is_none())
        }
    }

    /// Whether the verdict is the disruption rule's (a pod's `DisruptionTarget` condition
    /// matched the FailJob rule kubeferry gives jobs without retries): the pod tells how.
    fn disruption_verdict(&self, verdict: &Verdict<'_>) -> bool {
        verdict.reason == Some("PodFailurePolicy")
            && verdict
                .message
                .is_some_and(|message| message.contains(DISRUPTION_RULE_MATCH))
    }

    /// The exit code a verdict of [`super::own_failure_rule`] or [`super::exit_code_rule`]
    /// names ("Container main for pod <ns>/<pod> failed with exit code 3 matching FailJob rule
    /// at index 0"), when the verdict is one of those rules'.
    fn exit_code_verdict(&self, verdict: &Verdict<'_>) -> Option<i32> {
        let (head, index) = verdict
            .message?
            .rsplit_once(" matching FailJob rule at index ")?;
        if !self.job.exit_code_rules.contains(index.parse().ok()?) {
            return None;
        }
        let (_, code) = head.rsplit_once(" failed with exit code ")?;
        code.parse().ok()
    }

    fn succeeded(&self, verdict: &Verdict<'_>) -> Mapped {
        if let Some(indexed) = self.indexed() {
            return Mapped::of(self.indexed_succeeded(indexed, verdict));
        }
        // The succeeded attempt ended before the verdict by cause, whatever the node's clock
        // says.
        let succeeded = self.attempts.iter().rev().find(|pod| has_succeeded(pod));
        let terminated = succeeded.and_then(|pod| main_terminated(pod));
        let finished_at = terminated
            .and_then(|t| t.finished_at)
            .or(self.job.completion_time)
            .or(verdict.at);
        let mut info = match terminated {
            // The kernel killed a process of the container for memory even though it exited
            // with 0: the work did not succeed.
            Some(t) if is_oom(t) => ExecutionInfo::new(JobState::Failed, Reason::OomKilled)
                .with_message(format!(
                    "the main container was OOMKilled ({}) although it exited with code {}",
                    oom_words(succeeded.and_then(|pod| pod.memory_limit.as_deref())),
                    t.exit_code
                )),
            _ => ExecutionInfo::new(JobState::Succeeded, Reason::Completed),
        };
        info.exit_code = terminated.map(|t| t.exit_code);
        info.finished_at = finished_at;
        Mapped::of(info.started(self.ended_start()))
    }

    fn failed(&self, verdict: &Verdict<'_>) -> Mapped {
        let newest = self.attempts.last().copied();
        let terminated = newest.and_then(|pod| {
            main_terminated(pod).filter(|t| {
                t.ended_by(verdict.at, Resolution::Exact) && !killed_by_deletion(pod, t, verdict.at)
            })
        });
        let job_message = verdict.message.unwrap_or_default();
        let cause = match verdict.reason {
            // The Job's own reason names the cause.
            Some("DeadlineExceeded") => Cause {
                reason: Reason::DeadlineExceeded,
                message: deadline_message(self.job.active_deadline_seconds, job_message),
                exit_code: None,
            },
            // The rule kubeferry adds for jobs without retries: a disrupted pod failed the
            // job. The pod, while it is seen, tells how (and whether its container had failed
            // on its own first); the verdict alone still tells it was a disruption.
            Some("PodFailurePolicy") if self.disruption_verdict(verdict) => newest
                .and_then(|pod| self.attempt_cause(pod, verdict.at))
                .unwrap_or_else(|| Cause {
                    reason: Reason::Disrupted,
                    message: job_message.to_string(),
                    exit_code: None,
                }),
            // The rule kubeferry adds last for jobs without retries: the main container
            // failed on its own. The pod, while it is seen, tells how; the verdict alone still
            // names the exit code once the pod is gone.
            Some("PodFailurePolicy") if let Some(code) = self.exit_code_verdict(verdict) => newest
                .and_then(|pod| self.attempt_cause(pod, verdict.at))
                .unwrap_or_else(|| Cause {
                    reason: Reason::Error,
                    message: format!("exit code {code}"),
                    exit_code: Some(code),
                }),
            Some("PodFailurePolicy") => Cause {
                reason: Reason::PodFailurePolicy,
                message: or_default(job_message, "the pod failure policy failed the job"),
                exit_code: None,
            },
            // An indexed job: its failed indexes tell why.
            _ if let Some(indexed) = self.indexed() => self.indexed_failed(indexed, verdict),
            // Otherwise (BackoffLimitExceeded, or a reason this version does not know) the
            // newest attempt tells why; several failed attempts make it BackoffLimitExceeded.
            reason => match newest.and_then(|pod| self.attempt_cause(pod, verdict.at)) {
                Some(cause) if cause.reason == Reason::Error && self.failed_attempts() > 1 => {
                    Cause {
                        reason: Reason::BackoffLimitExceeded,
                        message: format!(
                            "{} after {} attempts; the last one: {}",
                            or_default(job_message, "the job reached its backoff limit"),
                            self.failed_attempts(),
                            cause.message
                        ),
                        exit_code: cause.exit_code,
                    }
                }
                Some(cause) => cause,
                None if reason == Some("BackoffLimitExceeded") => Cause {
                    reason: Reason::BackoffLimitExceeded,
                    message: or_default(job_message, "the job reached its backoff limit"),
                    exit_code: None,
                },
                None => Cause {
                    reason: Reason::Error,
                    message: match (reason, job_message) {
                        (_, message) if !message.is_empty() => message.to_string(),
                        (Some(reason), _) => format!("the {} failed: {reason}", self.job.noun()),
                        (None, _) => format!("the {} failed", self.job.noun()),
                    },
                    exit_code: None,
                },
            },
        };
        let mut info =
            ExecutionInfo::new(JobState::Failed, cause.reason).with_message(cause.message);
        info.exit_code = terminated.map(|t| t.exit_code).or(cause.exit_code);
        info.finished_at = terminated.and_then(|t| t.finished_at).or(verdict.at);
        info.last_words = terminated.and_then(last_words);
        if let Some(indexed) = self.indexed() {
            // The newest pod may be any index's: the first failed index's exit code stands,
            // and the job ended when the Job controller decided; its last words are that
            // index's pod's, if the newest pod is that one.
            info.exit_code = cause.exit_code;
            info.finished_at = verdict.at;
            let summary = self.final_index_summary(indexed, verdict.at);
            let named = summary.failures.first().map(|f| f.index);
            if named.is_none() || newest.and_then(|pod| pod.completion_index) != named {
                info.last_words = None;
            }
            info.indexes = Some(summary);
        }
        Mapped::of(info.started(self.ended_start()))
    }

    /// Why one attempt failed, as far as its pod shows it by `as_of` (when the outcome was
    /// decided). `None` when the pod shows no failure.
    fn attempt_cause(&self, pod: &PodView, as_of: Option<Timestamp>) -> Option<Cause> {
        let main = pod.main.as_ref();
        let terminated = main_terminated(pod).filter(|t| t.ended_by(as_of, Resolution::Exact));
        // The container's own end comes first: an OOM kill is the job's fault even if the node
        // was disrupted afterwards (or at a time the pod does not show). One that ended after
        // a disruption known to have begun first was stopped by it; so was one that ended
        // after a deletion requested once the outcome was decided (the outcome's consequence,
        // as `failed` reads it too).
        if let Some(t) = terminated.filter(|t| {
            is_oom(t)
                && !stopped_by_disruption(pod.disruption.as_ref(), t)
                && !killed_while_stopping(pod, t, as_of)
                && !killed_by_deletion(pod, t, as_of)
        }) {
            return Some(oom_cause(pod, t));
        }
        if let Some(cause) = disruption(pod, as_of) {
            // A container that failed on its own before the disruption decides the outcome:
            // the disruption only found a pod whose work had already ended. The message is
            // the container's alone, so that a replica that looked before the disruption and
            // one that looked after report the same outcome.
            if let Some(t) = terminated.filter(|t| {
                t.exit_code != 0
                    && ended_before_disruption(pod.disruption.as_ref(), t)
                    && !killed_while_stopping(pod, t, as_of)
            }) {
                // An OOM kill says so, whichever replica looked first: one that looked before
                // the pod's deletion read it as the OOM kill it was.
                if is_oom(t) {
                    let mut cause = oom_cause(pod, t);
                    cause.exit_code = Some(t.exit_code);
                    return Some(cause);
                }
                return Some(Cause {
                    reason: Reason::Error,
                    message: exit_summary(t),
                    exit_code: Some(t.exit_code),
                });
            }
            // So does an init container that failed before it (the main one never started).
            if let Some(init) = &pod.blocking_init
                && let ContainerStateView::Terminated(t) = &init.state
                && t.exit_code != 0
                && ended_before_disruption(pod.disruption.as_ref(), t)
            {
                return Some(Cause {
                    reason: Reason::Error,
                    message: format!("init container {}: {}", init.name, exit_summary(t)),
                    exit_code: Some(t.exit_code),
                });
            }
            return Some(cause);
        }
        if pod.reason.as_deref() == Some("DeadlineExceeded") {
            return Some(Cause {
                reason: Reason::DeadlineExceeded,
                message: pod
                    .message
                    .clone()
                    .unwrap_or_else(|| "the pod ran out of time".to_string()),
                exit_code: None,
            });
        }
        // An OOM kill of the previous run (the Job may count it before the container restarts
        // or while the pod is being torn down).
        if let Some(last) = main
            .and_then(|m| m.last_terminated.as_ref())
            .filter(|t| is_oom(t))
        {
            let mut cause = oom_cause(pod, last);
            cause.exit_code = Some(last.exit_code);
            return Some(cause);
        }
        if let Some(deleted) = pod.deletion_requested_at()
            && as_of.is_none_or(|at| deleted <= at)
            && terminated.is_none_or(|t| t.finished_at.is_none_or(|end| end >= deleted))
        {
            return Some(Cause {
                reason: Reason::DeletedExternally,
                message: format!(
                    "pod {} was deleted at {deleted} by someone other than kubeferry",
                    pod.name
                ),
                exit_code: None,
            });
        }
        if let Some(init) = &pod.blocking_init
            && let ContainerStateView::Terminated(t) = &init.state
            && t.exit_code != 0
        {
            return Some(Cause {
                reason: Reason::Error,
                message: format!("init container {}: {}", init.name, exit_summary(t)),
                exit_code: Some(t.exit_code),
            });
        }
        match terminated {
            Some(t) if t.exit_code != 0 => Some(Cause {
                reason: Reason::Error,
                message: exit_summary(t),
                exit_code: Some(t.exit_code),
            }),
            _ => None,
        }
    }

    /// Failed attempts, by the Job's count or the pods seen, whichever is larger.
    fn failed_attempts(&self) -> i32 {
        let seen = self
            .attempts
            .iter()
            .filter(|pod| {
                pod.phase == Some(PodPhase::Failed)
                    || main_terminated(pod).is_some_and(|t| t.exit_code != 0)
            })
            .count();
        self.job.failed.max(i32::try_from(seen).unwrap_or(i32::MAX))
    }

    /// For a Job that is being deleted or gone: SUCCEEDED if its newest attempt succeeded on its
    /// own, strictly before any deletion (a container that exits 0 on SIGTERM is not a success).
    fn success_before_deletion(&self) -> Option<Mapped> {
        // One index's success is not the job's.
        if self.indexed().is_some() {
            return None;
        }
        let pod = self.attempts.last()?;
        let t = main_terminated(pod).filter(|t| t.exit_code == 0 && !is_oom(t))?;
        let finished = t.finished_at?;
        let deletions = [self.job.deletion_timestamp, pod.deletion_requested_at()];
        if deletions.into_iter().flatten().any(|at| finished >= at) {
            return None;
        }
        let mut info = ExecutionInfo::new(JobState::Succeeded, Reason::Completed);
        info.exit_code = Some(0);
        info.finished_at = Some(finished);
        Some(Mapped::of(info.started(self.first_start())))
    }

    fn cancelled(&self, stop: Stop, requested_at: Option<Timestamp>, requested: &str) -> Mapped {
        let (finished_at, how) = match stop {
            Stop::Deleted(at) => (
                Some(at),
                format!("the {} was deleted at {at}", self.job.noun()),
            ),
            Stop::Vanished => (requested_at, format!("the {} is gone", self.job.noun())),
            Stop::Suspended(since) => (
                since.max(requested_at),
                "the Job is suspended and none of its pods runs".to_string(),
            ),
        };
        let mut info = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
            .with_message(format!("cancel requested{requested}; {how}"));
        info.finished_at = finished_at;
        Mapped::of(info.started(self.first_start()))
    }

    fn deleted_externally(&self, at: Option<Timestamp>, message: String) -> Mapped {
        let terminated = self.attempts.last().and_then(|pod| {
            main_terminated(pod)
                .filter(|t| t.ended_by(at, Resolution::Exact) && !killed_by_deletion(pod, t, at))
        });
        let mut info =
            ExecutionInfo::new(JobState::Failed, Reason::DeletedExternally).with_message(message);
        info.exit_code = terminated.map(|t| t.exit_code);
        info.finished_at = at;
        Mapped::of(info.started(self.first_start()))
    }

    /// Where the newest attempt stands while no outcome is known.
    fn progress(&self) -> Mapped {
        if let Some(indexed) = self.indexed()
            && let Some(info) = self.indexed_progress(indexed)
        {
            return Mapped::of(info);
        }
        let Some(pod) = self.attempts.last().copied() else {
            return self.no_pod();
        };
        match &pod.phase {
            Some(PodPhase::Other(phase)) => {
                return self.keep_previous(format!(
                    "pod {} has phase {phase:?}, which this version does not know; keeping the \
                     last status",
                    pod.name
                ));
            }
            Some(PodPhase::Unknown) => {
                return Mapped::of(self.hold_previous(format!(
                    "the node of pod {} stopped reporting (phase Unknown)",
                    pod.name
                )));
            }
            _ => {}
        }
        if has_ended(pod) {
            return self.attempt_ended(pod);
        }
        if !is_scheduled(pod) {
            return self.unscheduled(pod);
        }
        let main = pod.main.as_ref();
        match main.map(|m| (m, &m.state)) {
            Some((_, ContainerStateView::Running { .. })) => Mapped::of(
                ExecutionInfo::new(JobState::Started, Reason::Running).started(self.first_start()),
            ),
            Some((main, ContainerStateView::Waiting { reason, message })) => {
                if has_run_before(main) {
                    // Between two runs of a restarting container (CrashLoopBackOff, ...).
                    let what = waiting_summary("the main container", reason, message);
                    return Mapped::of(
                        ExecutionInfo::new(JobState::Started, Reason::Running)
                            .with_message(what)
                            .started(self.first_start()),
                    );
                }
                match (&pod.blocking_init, reason.as_deref()) {
                    (Some(init), None | Some("PodInitializing")) => self.initializing(pod, init),
                    _ => self.waiting(pod, "the main container", reason, message),
                }
            }
            // No state reported yet (a terminated main container ended the attempt above).
            _ => match &pod.blocking_init {
                Some(init) => self.initializing(pod, init),
                None if pod.phase == Some(PodPhase::Running) => Mapped::of(
                    ExecutionInfo::new(JobState::Started, Reason::Running)
                        .started(self.first_start()),
                ),
                None => Mapped::of(
                    ExecutionInfo::new(JobState::Queued, Reason::ContainerCreating)
                        .with_message(match &pod.node_name {
                            Some(node) => format!("scheduled to node {node}"),
                            None => "scheduled".to_string(),
                        })
                        .started(self.first_start()),
                ),
            },
        }
    }

    fn no_pod(&self) -> Mapped {
        let retrying = self.job.failed > 0;
        if !retrying
            && let Some(timeout) = self.config.pending_timeout
            && let Some(since) = self.job.start_time.or(self.job.created_at)
            && !self.clock.before_deadline(since, timeout)
        {
            let mut message = format!(
                "no pod was created within the pending timeout of {}s",
                timeout.as_secs()
            );
            if let Some(refusal) = &self.job.creation_refused {
                message = format!("{message}: {refusal}");
            }
            let mut info = ExecutionInfo::new(JobState::Failed, Reason::UnschedulableTimeout)
                .with_message(message);
            info.finished_at = deadline(since, timeout);
            return Mapped::recorded_by_kubeferry(info);
        }
        // Every retry used up: no next attempt comes, the Job controller's verdict does. The
        // job stays as it was reported (started), not queued again.
        if retrying && self.job.retries_used_up() {
            return Mapped::of(self.hold_previous(format!(
                "attempt {} failed and no retry is left; waiting for the Job controller's verdict",
                self.job.failed
            )));
        }
        let waiting = if retrying {
            "waiting for the next attempt's pod"
        } else {
            "waiting for the Job controller to create a pod"
        };
        // Still waiting (a quota may free up, a service account appear), with the reason the
        // Job controller was last refused.
        let message = match &self.job.creation_refused {
            Some(refusal) => format!("{waiting}: {refusal}"),
            None => waiting.to_string(),
        };
        Mapped::of(
            ExecutionInfo::new(JobState::Queued, Reason::Pending)
                .with_message(message)
                .started(self.first_start()),
        )
    }

    /// A pod no node has taken yet.
    fn unscheduled(&self, pod: &PodView) -> Mapped {
        let condition = pod.scheduled.as_ref();
        let scheduler_message = condition.and_then(|c| c.message.clone());
        if let Some(timeout) = self.config.pending_timeout
            && let Some(created) = pod.created_at
            && !self.clock.before_deadline(created, timeout)
        {
            let mut info = ExecutionInfo::new(JobState::Failed, Reason::UnschedulableTimeout)
                .with_message(format!(
                    "pod {} found no node within the pending timeout of {}s{}",
                    pod.name,
                    timeout.as_secs(),
                    scheduler_message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ));
            info.finished_at = deadline(created, timeout);
            return Mapped::recorded_by_kubeferry(info.started(self.first_start()));
        }
        let info = match condition.and_then(|c| c.reason.as_deref()) {
            Some("Unschedulable") => ExecutionInfo::new(JobState::Queued, Reason::Unschedulable)
                .with_message(scheduler_message.unwrap_or_else(|| "no node fits".to_string())),
            Some(reason) => ExecutionInfo::new(JobState::Queued, Reason::Pending).with_message(
                match scheduler_message {
                    Some(message) => format!("{reason}: {message}"),
                    None => reason.to_string(),
                },
            ),
            None => ExecutionInfo::new(JobState::Queued, Reason::Pending)
                .with_message("waiting for the scheduler"),
        };
        Mapped::of(info.started(self.first_start()))
    }

    /// The main container waits for an init container.
    fn initializing(&self, pod: &PodView, init: &ContainerView) -> Mapped {
        let who = if init.sidecar {
            format!("sidecar {}", init.name)
        } else {
            format!("init container {}", init.name)
        };
        match &init.state {
            ContainerStateView::Waiting { reason, message } => {
                self.waiting(pod, &who, reason, message)
            }
            ContainerStateView::Terminated(t) => Mapped::of(
                ExecutionInfo::new(JobState::Queued, Reason::ContainerCreating)
                    .with_message(format!("{who} ended ({})", exit_summary(t)))
                    .started(self.first_start()),
            ),
            ContainerStateView::Running { .. } | ContainerStateView::Unreported => Mapped::of(
                ExecutionInfo::new(JobState::Queued, Reason::ContainerCreating)
                    .with_message(format!("{who} is running"))
                    .started(self.first_start()),
            ),
        }
    }

    /// A container that has not started: fail at once, after a grace period, or keep waiting.
    fn waiting(
        &self,
        pod: &PodView,
        who: &str,
        reason: &Option<String>,
        message: &Option<String>,
    ) -> Mapped {
        // The kubelet's back-off names no error: the registry's words from the pull before
        // it, as the answer before kept them, go on with it (to the final message too).
        let message = &match (reason.as_deref(), message) {
            (Some("ImagePullBackOff"), Some(back_off))
                if !back_off.contains(LAST_PULL_ERROR)
                    && let Some(error) = self.previous.and_then(last_pull_error) =>
            {
                Some(format!("{back_off}{LAST_PULL_ERROR}{error}"))
            }
            _ => message.clone(),
        };
        let what = waiting_summary(who, reason, message);
        let cause = match (reason, message) {
            (Some(reason), Some(message)) => format!("{reason}: {message}"),
            (Some(reason), None) => reason.clone(),
            (None, Some(message)) => message.clone(),
            (None, None) => "unknown error".to_string(),
        };
        // The kubelet shows no time for when a waiting reason began: the grace counts from
        // when it took the pod (else from the pod's creation), which is when pulling began.
        let since = pod.start_time.or(pod.created_at);
        let (queued, failed, grace) = match reason.as_deref() {
            Some("InvalidImageName") => {
                let message = format!("{who} cannot start: {cause}");
                return self.failed_now(pod, Reason::InvalidImageName, message);
            }
            Some("CreateContainerConfigError") => {
                let message = format!("{who} cannot start: {cause}");
                return self.failed_now(pod, Reason::CreateContainerConfigError, message);
            }
            Some(reason) if IMAGE_PULL_REASONS.contains(&reason) => (
                Reason::ImagePullBackOff,
                Reason::ImagePullFailed,
                self.config.image_pull_grace,
            ),
            Some("CreateContainerError" | "RunContainerError") => (
                Reason::ContainerCreating,
                Reason::CreateContainerError,
                self.config.create_container_error_grace,
            ),
            _ => {
                return Mapped::of(
                    ExecutionInfo::new(JobState::Queued, Reason::ContainerCreating)
                        .with_message(what)
                        .started(self.first_start()),
                );
            }
        };
        match since {
            Some(since) if !self.clock.before_deadline(since, grace) => {
                let mut info = ExecutionInfo::new(JobState::Failed, failed).with_message(format!(
                    "{who} did not start within {}s: {cause}",
                    grace.as_secs()
                ));
                info.finished_at = deadline(since, grace);
                Mapped::recorded_by_kubeferry(info.started(self.first_start()))
            }
            _ => Mapped::of(
                ExecutionInfo::new(JobState::Queued, queued)
                    .with_message(what)
                    .started(self.first_start()),
            ),
        }
    }

    /// A container error no retry by the kubelet will fix.
    fn failed_now(&self, pod: &PodView, reason: Reason, message: String) -> Mapped {
        let mut info = ExecutionInfo::new(JobState::Failed, reason).with_message(message);
        // The error shows as soon as the kubelet works on the pod.
        info.finished_at = pod.start_time.or(pod.created_at);
        Mapped::recorded_by_kubeferry(info.started(self.first_start()))
    }

    /// The newest attempt ended and the Job controller has not judged it yet: a retry may
    /// follow, so this is not an outcome.
    fn attempt_ended(&self, pod: &PodView) -> Mapped {
        let how = match main_terminated(pod) {
            Some(t) => exit_summary(t),
            None => pod
                .reason
                .clone()
                .or_else(|| pod.phase.as_ref().map(|p| format!("{p:?}")))
                .unwrap_or_else(|| "ended".to_string()),
        };
        let waiting = if self.job.bare_pod {
            "waiting for its phase"
        } else {
            "waiting for the Job controller"
        };
        let message = format!("pod {} ended ({how}); {waiting}", pod.name);
        let info = match self.first_start() {
            Some(start) => {
                ExecutionInfo::new(JobState::Started, Reason::Running).started(Some(start))
            }
            None => ExecutionInfo::new(JobState::Queued, Reason::Pending),
        };
        Mapped::of(info.with_message(message))
    }

    /// The previous non-terminal state and reason with a new message (nothing new is known).
    fn hold_previous(&self, message: String) -> ExecutionInfo {
        observation::hold_previous(self.previous, self.first_start(), message)
    }

    /// A shape this version cannot read: the last non-terminal state, and a warning.
    fn keep_previous(&self, warning: String) -> Mapped {
        observation::keep_previous(self.previous, self.first_start(), warning)
    }

    /// When the job first started: the earliest start of the main container over all attempts.
    fn first_start(&self) -> Option<Timestamp> {
        self.attempts
            .iter()
            .filter_map(|pod| pod.main.as_ref())
            .flat_map(ContainerView::run_starts)
            .min()
    }

    /// When a job that ended first started: [`Self::first_start`], or with no attempt left to
    /// show it (its pods deleted by a deadline, a drain or a TTL) the start answered before,
    /// else the Job's own `status.startTime` once the Job counts an attempt that ended; so a
    /// job that started keeps a start time in every answer, also from a process that never
    /// saw its pods.
    fn ended_start(&self) -> Option<Timestamp> {
        let counted = self.job.succeeded > 0 || self.job.failed > 0;
        self.first_start()
            .or_else(|| self.previous.and_then(|previous| previous.started_at))
            .or_else(|| {
                self.attempts
                    .is_empty()
                    .then_some(self.job.start_time)
                    .flatten()
                    .filter(|_| counted)
            })
    }
}

/// Whether a verdict was recorded only after the work was stopped (then the stop, not the
/// job, decided it). Timestamps have one-second resolution: a tie goes to the verdict, which is
/// the common order (a job finishes, then its TTL or a cancel deletes it).
fn decided_after(verdict: &Verdict<'_>, stop: Option<Stop>) -> bool {
    let stopped_at = match stop {
        Some(Stop::Deleted(at)) | Some(Stop::Suspended(Some(at))) => at,
        _ => return false,
    };
    verdict.at.is_some_and(|at| at > stopped_at)
}

/// The reason a pod's disruption gives (evicted, preempted, node lost, disrupted), if it shows
/// one that was noted by `as_of`: an infrastructure failure, not the job's. A Spark driver's
/// pod is read as a container job's is.
pub(crate) fn disruption_reason(pod: &PodSummary, as_of: Option<Timestamp>) -> Option<Reason> {
    disruption(pod, as_of).map(|cause| cause.reason)
}

/// A pod's disruption, if it shows one: an infrastructure failure, not the job's.
fn disruption(pod: &PodSummary, as_of: Option<Timestamp>) -> Option<Cause> {
    // A disruption noted after the outcome was decided did not cause it.
    let condition = pod.disruption.as_ref().filter(|c| {
        c.status.is_true()
            && match (c.last_transition_time, as_of) {
                (Some(noted), Some(decided)) => noted <= decided,
                _ => true,
            }
    });
    let condition_reason = condition.and_then(|c| c.reason.as_deref());
    let pod_reason = pod.reason.as_deref();
    let reason = match (pod_reason, condition_reason) {
        // The kubelet evicted it under node pressure (its condition says TerminationByKubelet).
        (Some("Evicted"), _) | (_, Some("EvictionByEvictionAPI")) => Reason::Evicted,
        (Some("Preempting"), _) | (_, Some("PreemptionByScheduler")) => Reason::Preempted,
        // Node lost: the pod GC removed it from a node that is gone; the kubelet terminated it
        // for a node shutdown (pod reason `Terminated`, formerly `Shutdown`).
        (Some("NodeLost" | "Terminated" | "Shutdown" | "NodeShutdown"), _)
        | (_, Some("DeletionByPodGC" | "TerminationByKubelet")) => Reason::NodeLost,
        (_, Some(_)) => Reason::Disrupted,
        // The kubelet rejected the pod at admission (resources, node affinity changes).
        (Some(reason), None)
            if reason.starts_with("OutOf")
                || matches!(reason, "UnexpectedAdmissionError" | "NodeAffinity") =>
        {
            Reason::Disrupted
        }
        _ if condition.is_some() => Reason::Disrupted,
        _ => return None,
    };
    let message = pod
        .message
        .as_deref()
        .or_else(|| condition.and_then(|c| c.message.as_deref()))
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .or_else(|| condition_reason.or(pod_reason).map(str::to_string))
        .unwrap_or_else(|| "the pod was disrupted".to_string());
    Some(Cause {
        reason,
        message,
        exit_code: None,
    })
}

/// When a disruption of the pod began, if a time shows it: the control plane's DisruptionTarget
/// condition (the Eviction API, the scheduler's preemption, the taint manager and the pod GC
/// write it before they delete the pod, so before anything is stopped). The kubelet's own
/// condition (`TerminationByKubelet`: node pressure, node shutdown) tells nothing of the start:
/// the kubelet sends it only once the containers are stopped, with that time (kubelet status
/// manager, `mergePodStatus`); and a deletion of a pod the kubelet disrupted came after it.
fn disruption_began(disruption: Option<&PodConditionView>) -> Option<Timestamp> {
    disruption
        .filter(|c| c.status.is_true() && c.reason.as_deref() != Some("TerminationByKubelet"))
        .and_then(|c| c.last_transition_time)
}

/// Whether a container's exit looks like the stop of a disruption: the kubelet stops a
/// container with SIGTERM, then SIGKILL after the grace period (exit code 128 + signal, 143 or
/// 137), and reports one it could not find any more as `ContainerStatusUnknown` (137).
fn looks_stopped(t: &TerminatedView) -> bool {
    t.signal.is_some() || stopped_exit(t.exit_code, t.reason.as_deref())
}

/// Whether an exit code and termination reason (without the signal, as an operator's message
/// gives them) are those of a container the kubelet stopped: 143, 137, `ContainerStatusUnknown`.
pub(crate) fn stopped_exit(exit_code: i32, reason: Option<&str>) -> bool {
    matches!(exit_code, 137 | 143) || reason == Some("ContainerStatusUnknown")
}

/// Whether a container ended on its own before its pod's disruption (the pod's
/// DisruptionTarget condition, if it has one), rather than being stopped by it.
///
/// Timestamps have whole seconds (the kubelet's `finishedAt` and the control plane's condition
/// alike), and a drain that follows a container's own exit by half a second shows both in the
/// same second half of the time. So a container that ended in the disruption's own second
/// counts as ended on its own unless its exit looks like the stop (143, 137): reading the tie
/// the other way would turn the issue's own failure into an infrastructure one every other time,
/// while a container that catches SIGTERM and exits with another code within the same second
/// is rare. An OOM kill is never the stop (the runtime reports the kernel's OOM killer as
/// `OOMKilled`; the kubelet's stop is a SIGTERM, then a SIGKILL reported as `Error`), unless its
/// main process died of a SIGTERM (143): the OOM killer sends SIGKILL, so that kill took a child
/// (kubernetes#131530) and the main process went on until the disruption's stop. With no time
/// for the start of the disruption (the kubelet's own), the disruption decides. A container with
/// no end time cannot be placed and is left to the disruption.
pub(crate) fn ended_before_disruption(
    disruption: Option<&PodConditionView>,
    t: &TerminatedView,
) -> bool {
    let Some(finished) = t.finished_at else {
        return false;
    };
    match disruption_began(disruption) {
        Some(began) if finished < began => true,
        Some(began) if finished > began => false,
        Some(_) => !looks_stopped(t) || (is_oom(t) && !died_of_sigterm(t)),
        // No time for the start of the disruption: the kubelet notes its own (node pressure, a
        // node shutdown) only once it has stopped the containers, after a grace period in which
        // a container that catches SIGTERM may exit with any code. Its exit cannot tell, so the
        // disruption decides, as it always did.
        None => false,
    }
}

/// Whether a container ended after its pod's disruption, known to have begun first, and so
/// was stopped by it ([`ended_before_disruption`] for the second they share).
pub(crate) fn stopped_by_disruption(
    disruption: Option<&PodConditionView>,
    t: &TerminatedView,
) -> bool {
    disruption_began(disruption).is_some() && !ended_before_disruption(disruption, t)
}

/// Whether an OOM kill in the second its pod's disruption began came while the pod was being
/// stopped: the pod was deleted with a grace period, at or before the kill's second. The API
/// server deletes a pod that already ended at once, with none (its `CheckGracefulDelete`), so a
/// grace period says the pod still ran when it was asked to stop: the kill came during the stop.
/// Timestamps of whole seconds cannot order the two; this can. The kubelet's own disruption
/// (node pressure, a node shutdown, shown by `as_of`) tells no start at all: a main process
/// that died of its SIGTERM was stopped by it, whatever the OOM killer took (a child).
fn killed_while_stopping(pod: &PodView, t: &TerminatedView, as_of: Option<Timestamp>) -> bool {
    if !is_oom(t) {
        return false;
    }
    let Some(began) = disruption_began(pod.disruption.as_ref()) else {
        return died_of_sigterm(t) && disruption(pod, as_of).is_some();
    };
    let Some(finished) = t.finished_at else {
        return false;
    };
    began.as_second() == finished.as_second()
        && pod
            .deletion_grace_period_seconds
            .is_some_and(|grace| grace > 0)
        && pod
            .deletion_requested_at()
            .is_some_and(|asked| asked.as_second() <= finished.as_second())
}

/// Whether the main process died of a SIGTERM, the kubelet's stop signal (exit 128 + 15).
fn died_of_sigterm(t: &TerminatedView) -> bool {
    t.exit_code == 143 || t.signal == Some(15)
}

fn oom_cause(pod: &PodView, t: &TerminatedView) -> Cause {
    Cause {
        reason: Reason::OomKilled,
        message: format!(
            "the main container was OOMKilled ({}), exit code {}",
            oom_words(pod.memory_limit.as_deref()),
            t.exit_code
        ),
        exit_code: None,
    }
}

/// What an OOM kill means for a container with this memory limit: it used more than its limit,
/// or with none the node (or the pod's other containers) left it too little.
fn oom_words(memory_limit: Option<&str>) -> String {
    match memory_limit {
        Some(limit) => format!("exceeded its memory limit of {limit}"),
        None => "it has no memory limit: the node ran short of memory".to_string(),
    }
}

pub(crate) fn main_terminated(pod: &PodView) -> Option<&TerminatedView> {
    match &pod.main.as_ref()?.state {
        ContainerStateView::Terminated(t) => Some(t),
        _ => None,
    }
}

fn is_oom(t: &TerminatedView) -> bool {
    t.reason.as_deref() == Some("OOMKilled")
}

/// Whether the attempt is over: a terminal phase or a terminated main container.
fn has_ended(pod: &PodView) -> bool {
    pod.phase_ended() || main_terminated(pod).is_some()
}

fn has_succeeded(pod: &PodView) -> bool {
    match main_terminated(pod) {
        Some(t) => t.exit_code == 0,
        None => pod.phase == Some(PodPhase::Succeeded),
    }
}

fn has_run_before(main: &ContainerView) -> bool {
    main.restart_count > 0 || main.last_terminated.is_some()
}

fn is_scheduled(pod: &PodView) -> bool {
    pod.node_name.is_some() || pod.scheduled.as_ref().is_some_and(|c| c.status.is_true())
}

/// Whether the container was killed by a deletion of its pod requested with or after `at`
/// (the verdict, or the Job's deletion): the Job controller deleting the pods of a Job past
/// its deadline, the garbage collector those of a deleted Job. Its exit code (143) is then the
/// outcome's consequence, not its cause. Timestamps have whole seconds, so a container killed
/// in the verdict's own second would otherwise count as ended by it, and a replica that looked
/// before the kill and one that looked after would report different exit codes.
fn killed_by_deletion(pod: &PodView, t: &TerminatedView, at: Option<Timestamp>) -> bool {
    let Some(deleted) = pod.deletion_requested_at() else {
        return false;
    };
    at.is_some_and(|at| deleted >= at) && t.finished_at.is_none_or(|end| end >= deleted)
}

/// A container's last words: its termination message as the kubelet kept it, if it said
/// anything ([`ExecutionInfo::last_words`]). A container the kubelet lost
/// (`ContainerStatusUnknown`) said nothing: the message is the kubelet's own.
pub(crate) fn last_words(t: &TerminatedView) -> Option<String> {
    if t.reason.as_deref() == Some("ContainerStatusUnknown") {
        return None;
    }
    t.message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .map(str::to_string)
}

/// How a container ended, in a few words: its reason when it says more than Error or
/// Completed, its exit code, and its termination message.
pub(crate) fn exit_summary(t: &TerminatedView) -> String {
    let mut summary = match t.reason.as_deref() {
        Some(reason) if reason != "Error" && reason != "Completed" => {
            format!("{reason}, exit code {}", t.exit_code)
        }
        _ => format!("exit code {}", t.exit_code),
    };
    if let Some(message) = t
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        summary.push_str(": ");
        summary.push_str(message);
    }
    summary
}

/// What joins an image pull's back-off message and the registry's error before it.
const LAST_PULL_ERROR: &str = "; the last pull failed: ";

/// The registry's error an answer waiting on an image pull names (as `ErrImagePull` said it,
/// or as a back-off carried it on).
fn last_pull_error(previous: &ExecutionInfo) -> Option<&str> {
    if previous.reason != Reason::ImagePullBackOff {
        return None;
    }
    let message = previous.message.as_str();
    let (_, error) = message
        .split_once(LAST_PULL_ERROR)
        .or_else(|| message.split_once("ErrImagePull: "))?;
    Some(error).filter(|error| !error.is_empty())
}

fn waiting_summary(who: &str, reason: &Option<String>, message: &Option<String>) -> String {
    match (reason, message) {
        (Some(reason), Some(message)) => format!("{who} is waiting: {reason}: {message}"),
        (Some(reason), None) => format!("{who} is waiting: {reason}"),
        (None, Some(message)) => format!("{who} is waiting: {message}"),
        (None, None) => format!("{who} is waiting"),
    }
}

/// A deadline's message: the job's own timeout first (`timeout 5s reached`), then what the
/// Job controller said.
fn deadline_message(seconds: Option<i64>, job_message: &str) -> String {
    let Some(seconds) = seconds.and_then(|s| u64::try_from(s).ok()) else {
        return or_default(job_message, "the job ran out of time");
    };
    let timeout = crate::duration::Duration::from(Duration::from_secs(seconds));
    match job_message {
        "" => format!("timeout {timeout} reached"),
        said => format!("timeout {timeout} reached: {said}"),
    }
}

fn or_default(message: &str, default: &str) -> String {
    if message.is_empty() {
        default.to_string()
    } else {
        message.to_string()
    }
}
