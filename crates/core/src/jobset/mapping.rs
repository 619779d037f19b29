//! The pure mapping from a JobSet, its child Jobs and their pods to kubeferry's status model,
//! and the action the caller must take before it reports some outcomes.
//!
//! The rules and their order are documented in `docs/statuses.md` ("JobSets"). The
//! JobSet's own conditions decide the outcome; the child Job that caused a failure, mapped as a
//! container job with its pods, says why (an OOM-killed worker is `OomKilled`, not "the JobSet
//! failed"), and the child Jobs of the current restart say how far the set has come.

use jiff::Timestamp;

use super::view::{ChildJobView, JobSetConditionView, JobSetStatus, JobSetStatusView, JobSetView};
use crate::container::view::{ConditionStatus, JobView, PodView};
use crate::container::{ContainerAction, MappingConfig, container_status};
use crate::observation::{
    self, Mapped, Observation, RecordOutcomeAndDelete, Stop, cancel_progress,
};
use crate::status::{
    ExecutionInfo, JobState, Reason, ReplicaSummary, ReplicatedJobCounts, Started,
};

/// What is known of the JobSet itself.
pub type JobSetObservation<'a> = Observation<'a, JobSetView>;

/// The result of mapping a JobSet's observation.
pub type JobSetMapped = Mapped<JobSetAction>;

/// What the settler must do before a JobSet's outcome stands, when a pod of the set cannot
/// start for good (its image cannot be pulled, its container cannot be created, past the grace
/// periods of [`MappingConfig`]), which the JobSet controller never judges: it would wait
/// forever. The outcome is recorded on the JobSet, then the JobSet is deleted with its Jobs and
/// pods.
pub type JobSetAction = RecordOutcomeAndDelete;

/// The message the JobSet controller puts in its `Failed` condition names the Job whose failure
/// decided it this way.
const FIRST_FAILED_JOB: &str = "(first failed job: ";

/// Maps a JobSet (the JobSet, its child Jobs and their pods) to its status.
///
/// `jobs` are the child Jobs found for the JobSet and `pods` their pods, in any order (Jobs of
/// another JobSet and pods of other Jobs are ignored); empty slices are fine (they are gone, or
/// could not be read): the JobSet's conditions decide alone then, and only the details of a
/// failure and of the progress are missing. `config` holds the grace periods applied to each
/// child Job's pods; `now` drives them; `previous` is the status reported before, if any: a
/// terminal one is returned unchanged, and a later status keeps its start time.
///
/// Returns `None` when the JobSet is gone and nothing that was seen tells what became of it
/// (no outcome, no cancel mark, no deletion in a view that may be stale): the caller then
/// answers "no such job", which a caller that was cancelling settles as cancelled.
pub fn jobset_status(
    observed: &JobSetObservation<'_>,
    jobs: &[ChildJobView],
    pods: &[PodView],
    now: Timestamp,
    config: &MappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<JobSetMapped> {
    let jobset = observed.view();
    let mut children: Vec<Child<'_>> = jobs
        .iter()
        .filter(|job| jobset.owns(job))
        .map(|job| {
            // The JobSet webhook makes its Jobs Indexed (for the pods' hostnames); a Job of one
            // pod is read as the single-pod Job it is, its pod's end its own.
            let single;
            let view = match job.job.indexed.as_deref() {
                Some(indexed) if indexed.completions <= 1 => {
                    single = JobView {
                        indexed: None,
                        ..job.job.clone()
                    };
                    &single
                }
                _ => &job.job,
            };
            let mapped = container_status(&Observation::Present(view), pods, now, config, None);
            Child { job, mapped }
        })
        .collect();
    // The spec's order, then the index; of two Jobs of the same name (a restart), the newer.
    let order = |name: &str| {
        jobset
            .replicated_jobs
            .iter()
            .position(|(n, _)| n == name)
            .unwrap_or(usize::MAX)
    };
    children.sort_by(|a, b| {
        (
            order(&a.job.replicated_job),
            a.job.index,
            a.job.restart_attempt,
        )
            .cmp(&(
                order(&b.job.replicated_job),
                b.job.index,
                b.job.restart_attempt,
            ))
            .then_with(|| a.job.job.name.cmp(&b.job.job.name))
    });
    // A deadline among the children's (an image pull grace) is one of the set's too.
    let children_recheck = children
        .iter()
        .filter_map(|c| c.mapped.as_ref().and_then(|m| m.recheck_at))
        .min();
    let mut mapped = observation::answer(previous, jobset.kept_outcome.as_ref(), now, |_clock| {
        Mapper {
            jobset,
            vanished: observed.vanished(),
            children: &children,
            previous,
        }
        .map()
    })?;
    if !mapped.info.is_terminal() && mapped.action.is_none() {
        mapped.recheck_at = match (mapped.recheck_at, children_recheck) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Some(mapped)
}

/// A child Job and what its own mapping says of it.
struct Child<'a> {
    job: &'a ChildJobView,
    /// `None` only when the container mapping finds nothing to say (never for a present Job).
    mapped: Option<crate::container::Mapped>,
}

impl Child<'_> {
    fn info(&self) -> Option<&ExecutionInfo> {
        self.mapped.as_ref().map(|m| &m.info)
    }

    fn failed(&self) -> bool {
        self.info().is_some_and(|i| i.state == JobState::Failed)
    }

    fn started_at(&self) -> Option<Timestamp> {
        self.info().and_then(|i| i.started_at)
    }
}

struct Mapper<'a> {
    jobset: &'a JobSetView,
    /// `Some(final_state)` when the JobSet is gone.
    vanished: Option<bool>,
    /// The child Jobs, in the spec's order.
    children: &'a [Child<'a>],
    previous: Option<&'a ExecutionInfo>,
}

impl Mapper<'_> {
    fn map(&self) -> Option<JobSetMapped> {
        let stop = self.stop();
        let mut warnings = Vec::new();
        let status = match &self.jobset.status {
            JobSetStatus::Read(status) => Some(status),
            JobSetStatus::Unreadable(why) => {
                warnings.push(format!(
                    "the status of JobSet {} cannot be read: {why}; keeping the last status",
                    self.jobset.name
                ));
                None
            }
        };
        let mut mapped = self.decide(status, stop, &mut warnings)?;
        // A recorded outcome is reported as it was recorded (with the summary of then).
        let recorded = matches!(self.jobset.recorded_outcome, Some(Ok(_)));
        if !recorded && mapped.info.replicas.is_none() {
            mapped.info.replicas = status.map(|s| Box::new(self.summary(s)));
        }
        if !warnings.is_empty() && mapped.warning.is_none() {
            mapped.warning = Some(warnings.join("; "));
        }
        Some(mapped)
    }

    /// The precedence rules, first match wins.
    fn decide(
        &self,
        status: Option<&JobSetStatusView>,
        stop: Option<Stop>,
        warnings: &mut Vec<String>,
    ) -> Option<JobSetMapped> {
        // 0. An outcome kubeferry recorded (a pod that could never start): it counts once the
        //    JobSet is being deleted or gone; before that the deletion is still to be done.
        match &self.jobset.recorded_outcome {
            Some(Ok(outcome)) => {
                return Some(match stop {
                    Some(_) => JobSetMapped::of(outcome.clone()),
                    None => JobSetMapped::acting(
                        self.in_progress_info(
                            "kubeferry recorded the outcome; deleting the JobSet before reporting it",
                        ),
                        JobSetAction {
                            outcome: outcome.clone(),
                        },
                    ),
                });
            }
            Some(Err(value)) => warnings.push(format!(
                "the JobSet's recorded outcome {value:?} is unreadable; ignoring it"
            )),
            None => {}
        }
        let Some(status) = status else {
            let warning = warnings.join("; ");
            return Some(observation::keep_previous(
                self.previous,
                self.first_start(),
                warning,
            ));
        };
        let completed = self.condition(status, "Completed", warnings);
        let failed = self.condition(status, "Failed", warnings);
        if completed.is_some() && failed.is_some() {
            return Some(observation::keep_previous(
                self.previous,
                self.first_start(),
                format!(
                    "JobSet {} reports both Completed and Failed; keeping the last status",
                    self.jobset.name
                ),
            ));
        }
        // 1. An outcome the JobSet controller recorded before the work was stopped stands,
        //    whoever stopped it and whether or not a cancel was requested.
        if let Some(condition) = completed.filter(|c| !decided_after(c, stop)) {
            return Some(JobSetMapped::of(self.succeeded(condition)));
        }
        if let Some(condition) = failed.filter(|c| !decided_after(c, stop)) {
            return Some(self.failed(condition, status));
        }
        // 2. A cancel request: done once the JobSet is being deleted or gone, in progress
        //    until then.
        if let Some(mark) = &self.jobset.cancel_mark {
            let info = cancel_progress(mark, stop, "the JobSet", "waiting for the JobSet to stop");
            return Some(JobSetMapped::of(info.started(self.first_start())));
        }
        // 3. Stopped without a cancel request: someone else deleted the JobSet.
        match stop {
            Some(Stop::Deleted(at)) => {
                return Some(self.deleted_externally(
                    Some(at),
                    format!("the JobSet was deleted at {at} without a cancel request"),
                ));
            }
            // Only a final state proves there was no cancel mark: a stale view may predate a
            // cancel requested through another replica.
            Some(Stop::Vanished) if self.vanished == Some(true) => {
                return Some(self.deleted_externally(
                    None,
                    "the JobSet was deleted without a cancel request".to_string(),
                ));
            }
            Some(Stop::Vanished) => return None,
            None => {}
        }
        // 4. Suspended.
        if self.condition(status, "Suspended", warnings).is_some() {
            return Some(JobSetMapped::of(
                ExecutionInfo::new(JobState::Queued, Reason::Suspended)
                    .with_message("the JobSet is suspended")
                    .started(self.first_start()),
            ));
        }
        // 5. A pod of the current restart that can never start: kubeferry decides.
        if let Some(child) = self.current().find(|c| {
            c.mapped
                .as_ref()
                .is_some_and(|m| m.action == Some(ContainerAction::RecordOutcomeAndStop))
        }) {
            let mut outcome = self.blame(child, "");
            outcome.replicas = Some(Box::new(self.summary(status)));
            let info = self.in_progress_info(&format!(
                "{}; recording the outcome and deleting the JobSet",
                outcome.message
            ));
            return Some(JobSetMapped::acting(info, JobSetAction { outcome }));
        }
        // 6. The progress of the current restart.
        Some(JobSetMapped::of(self.progress(status)))
    }

    /// The condition of `kind` when it holds.
    fn condition<'s>(
        &self,
        status: &'s JobSetStatusView,
        kind: &str,
        warnings: &mut Vec<String>,
    ) -> Option<&'s JobSetConditionView> {
        let condition = status.conditions.iter().find(|c| c.kind == kind)?;
        match &condition.status {
            ConditionStatus::True => Some(condition),
            ConditionStatus::Other(value) => {
                warnings.push(format!(
                    "JobSet condition {kind} has status {value:?}, which this version does not know"
                ));
                None
            }
            _ => None,
        }
    }

    fn stop(&self) -> Option<Stop> {
        match self.jobset.deletion_timestamp {
            Some(at) => Some(Stop::Deleted(at)),
            None if self.vanished.is_some() => Some(Stop::Vanished),
            None => None,
        }
    }

    /// The child Jobs of the current restart: the newest the children or the JobSet's status
    /// show (once the controller counted a restart, the Jobs of the one before are on their
    /// way out, whatever they still show).
    fn current(&self) -> impl Iterator<Item = &Child<'_>> {
        let counted = match &self.jobset.status {
            JobSetStatus::Read(status) => status.restarts,
            JobSetStatus::Unreadable(_) => 0,
        };
        let newest = self
            .children
            .iter()
            .map(|c| c.job.restart_attempt)
            .max()
            .unwrap_or(0)
            .max(counted);
        self.children
            .iter()
            .filter(move |c| c.job.restart_attempt == newest)
    }

    /// When the first pod of the set started, as far as the pods still show it.
    fn first_start(&self) -> Option<Timestamp> {
        self.children.iter().filter_map(Child::started_at).min()
    }

    fn summary(&self, status: &JobSetStatusView) -> ReplicaSummary {
        let counts = |name: &str| status.replicated_jobs.iter().find(|r| r.name == name);
        ReplicaSummary {
            restarts: status.restarts,
            terminal_state: status.terminal_state.clone(),
            replicated_jobs: self
                .jobset
                .replicated_jobs
                .iter()
                .map(|(name, replicas)| {
                    let c = counts(name).cloned().unwrap_or_default();
                    ReplicatedJobCounts {
                        name: name.clone(),
                        replicas: *replicas,
                        ready: c.ready,
                        succeeded: c.succeeded,
                        failed: c.failed,
                        active: c.active,
                        suspended: c.suspended,
                    }
                })
                .collect(),
        }
    }

    fn succeeded(&self, condition: &JobSetConditionView) -> ExecutionInfo {
        let mut info = ExecutionInfo::new(JobState::Succeeded, Reason::Completed).with_message(
            condition
                .message
                .clone()
                .unwrap_or_else(|| "the JobSet completed".to_string()),
        );
        info.finished_at = condition.last_transition_time;
        info.started(self.first_start())
    }

    /// The JobSet failed: the reason, exit code and message of the child Job that caused it.
    fn failed(&self, condition: &JobSetConditionView, status: &JobSetStatusView) -> JobSetMapped {
        let jobset_says = condition
            .message
            .clone()
            .unwrap_or_else(|| "the JobSet failed".to_string());
        let after = match (condition.reason.as_deref(), status.restarts) {
            (_, 0) => String::new(),
            (Some("ReachedMaxRestarts"), 1) => " after 1 restart".to_string(),
            (Some("ReachedMaxRestarts"), n) => format!(" after {n} restarts"),
            _ => String::new(),
        };
        let culprit = self.culprit(condition);
        let mut info = match culprit {
            Some(child) if child.failed() => self.blame(child, &after),
            // The Job failed, its pods' final status is still on the way: wait for it, as a
            // container job does (its mapping says until when).
            Some(child)
                if child
                    .mapped
                    .as_ref()
                    .is_some_and(|m| m.recheck_at.is_some() && !m.info.is_terminal()) =>
            {
                return JobSetMapped::of(self.in_progress_info(&format!(
                    "the JobSet failed; waiting for the pods of {} to tell why",
                    child.job.describe()
                )));
            }
            _ => {
                let mut info = ExecutionInfo::new(JobState::Failed, Reason::Error);
                info.message = match condition.reason.as_deref() {
                    Some(reason) => format!("{reason}: {jobset_says}{after}"),
                    None => format!("{jobset_says}{after}"),
                };
                info
            }
        };
        info.finished_at = condition.last_transition_time;
        JobSetMapped::of(info.started(self.first_start()))
    }

    /// The child Job whose failure failed the set: the one the `Failed` condition names, else
    /// the first failed Job of the newest restart.
    fn culprit(&self, condition: &JobSetConditionView) -> Option<&Child<'_>> {
        let named = condition.message.as_deref().and_then(|m| {
            let start = m.find(FIRST_FAILED_JOB)? + FIRST_FAILED_JOB.len();
            let rest = &m[start..];
            Some(&rest[..rest.find(')')?])
        });
        if let Some(name) = named
            && let Some(child) = self
                .children
                .iter()
                .filter(|c| c.job.job.name == name)
                .max_by_key(|c| c.job.restart_attempt)
        {
            return Some(child);
        }
        // The first to fail; one whose end is not known yet goes last.
        self.current().filter(|c| c.failed()).min_by_key(|c| {
            let finished_at = c.info().and_then(|i| i.finished_at);
            (finished_at.is_none(), finished_at)
        })
    }

    /// A failure of the set caused by `child`: its reason and exit code, its message with its
    /// place in the set.
    fn blame(&self, child: &Child<'_>, after: &str) -> ExecutionInfo {
        let info = child.info().cloned().unwrap_or_else(|| {
            ExecutionInfo::new(JobState::Failed, Reason::Error).with_message("the Job failed")
        });
        let mut failure = ExecutionInfo::new(JobState::Failed, info.reason);
        failure.exit_code = info.exit_code;
        failure.finished_at = info.finished_at;
        failure.last_words = info.last_words;
        failure.message = format!("{} failed{after}: {}", child.job.describe(), info.message);
        failure.started(self.first_start())
    }

    /// A non-terminal status while something is still to be done: running once a pod started.
    fn in_progress_info(&self, message: &str) -> ExecutionInfo {
        let start = self.first_start();
        let info = match start {
            Some(_) => ExecutionInfo::new(JobState::Started, Reason::Running),
            None => ExecutionInfo::new(JobState::Queued, Reason::Pending),
        };
        info.with_message(message).started(start)
    }

    fn deleted_externally(&self, at: Option<Timestamp>, message: String) -> JobSetMapped {
        let mut info =
            ExecutionInfo::new(JobState::Failed, Reason::DeletedExternally).with_message(message);
        info.finished_at = at;
        JobSetMapped::of(info.started(self.first_start()))
    }

    /// Where the current restart stands while no outcome is known.
    fn progress(&self, status: &JobSetStatusView) -> ExecutionInfo {
        let summary = self.summary(status);
        let mut notes = vec![summary.counts()];
        if let Some(restarting) = status
            .conditions
            .iter()
            .find(|c| c.kind == "RestartingJobSet" && c.status.is_true())
        {
            notes.push(format!(
                "restarting: {}",
                restarting.message.as_deref().unwrap_or("a Job failed")
            ));
        } else if let Some(failed) = self.current().find(|c| c.failed()) {
            let restarts_left = self
                .jobset
                .max_restarts
                .saturating_sub(status.restarts_towards_max);
            notes.push(format!(
                "{} failed ({}); {restarts_left} restart(s) left",
                failed.job.describe(),
                failed.info().map(|i| i.reason.as_str()).unwrap_or("Error")
            ));
        }
        if status
            .conditions
            .iter()
            .any(|c| c.kind == "StartupPolicyInProgress" && c.status.is_true())
        {
            notes.push("starting the replicated jobs in order".to_string());
        }
        let current: Vec<&Child<'_>> = self.current().collect();
        let running = current
            .iter()
            .any(|c| c.info().is_some_and(|i| i.state == JobState::Started));
        let start = self.first_start();
        if running || (start.is_some() && current.is_empty()) {
            return ExecutionInfo::new(JobState::Started, Reason::Running)
                .with_message(notes.join("; "))
                .started(start);
        }
        // Nothing runs: the most telling reason a pod waits for, with the pod's place.
        let waiting = current
            .iter()
            .filter_map(|c| c.info().filter(|i| !i.is_terminal()).map(|i| (*c, i)))
            .max_by_key(|(_, info)| waiting_rank(info.reason));
        match waiting {
            Some((child, info)) if waiting_rank(info.reason) > 0 => {
                notes.insert(0, format!("{}: {}", child.job.describe(), info.message));
                ExecutionInfo::new(JobState::Queued, info.reason)
                    .with_message(notes.join("; "))
                    .started(start)
            }
            _ if start.is_some() => ExecutionInfo::new(JobState::Started, Reason::Running)
                .with_message(notes.join("; "))
                .started(start),
            _ => {
                ExecutionInfo::new(JobState::Queued, Reason::Pending).with_message(notes.join("; "))
            }
        }
    }
}

/// How much a reason a pod waits for tells a caller: what keeps a set from starting first.
fn waiting_rank(reason: Reason) -> u8 {
    match reason {
        Reason::ImagePullBackOff => 4,
        Reason::Unschedulable => 3,
        Reason::ContainerCreating => 2,
        Reason::Suspended => 1,
        _ => 0,
    }
}

/// Whether a condition was written only after the JobSet's deletion was requested (then the
/// deletion, not the set, decided it). Timestamps have whole seconds: a tie goes to the
/// condition.
fn decided_after(condition: &JobSetConditionView, stop: Option<Stop>) -> bool {
    match (stop, condition.last_transition_time) {
        (Some(Stop::Deleted(at)), Some(decided)) => decided > at,
        _ => false,
    }
}
