//! The pure mapping from a SparkApplication (of either operator) and its driver pod to
//! kubeferry's status model, and the actions the caller must take before it reports some
//! outcomes.
//!
//! The rules and their order are documented in `docs/statuses.md` ("Spark applications"); each
//! operator's status is first read into operator-neutral terms ([`Reading`]) by
//! [`super::apache`] and [`super::kubeflow`], and one set of precedence rules applies to both.

use std::time::Duration;

use jiff::Timestamp;

use super::reading::{Progress, Reading, ReadingKind, Verdict};
use super::view::{DriverView, SparkAppView, SparkStatus};
use crate::clock::{Clock, Resolution, deadline};
use crate::container::view::{ContainerStateView, ContainerView, TerminatedView};
use crate::container::{
    IMAGE_PULL_REASONS, disruption_reason, ended_before_disruption, exit_summary, last_words,
    stopped_by_disruption, stopped_exit,
};
use crate::observation::{self, Action, Mapped, Observation, Stop, cancel_progress};
use crate::status::{ExecutionInfo, JobState, Reason, Started};

/// Every timeout the Spark mapping applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparkMappingConfig {
    /// How long a SparkApplication may go without any status from its operator before the job
    /// fails with `NoStatusTimeout` (counted from its creation). Only an absent status counts:
    /// a status this version cannot read never does.
    pub no_status_timeout: Duration,
    /// How long an operator's success waits for its driver pod's final status to be observed,
    /// while the driver is still seen running (the application and its pods arrive on separate
    /// watches: the driver's exit code is the pod's alone). The container mapping's
    /// `pod_status_wait`, for the same lag.
    pub driver_status_wait: Duration,
}

impl Default for SparkMappingConfig {
    fn default() -> Self {
        SparkMappingConfig {
            no_status_timeout: Duration::from_secs(600),
            driver_status_wait: Duration::from_secs(10),
        }
    }
}

/// What is known of the SparkApplication itself.
pub type AppObservation<'a> = Observation<'a, SparkAppView>;

/// The result of mapping a Spark job's observation.
pub type SparkMapped = Mapped<SparkAction>;

/// What the settler must do before a Spark job's outcome stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SparkAction {
    /// The operator wrote no status within the no-status timeout (or another replica already
    /// decided so and recorded it). Otherwise the operator could still start the application
    /// later, with the job already failed and out of kubeferry's reach. `outcome` is recorded
    /// on the SparkApplication, then the application is deleted ([`Mapped`], "Record, then
    /// delete").
    RecordOutcomeAndDeleteApp {
        /// The outcome to record and then report.
        outcome: ExecutionInfo,
    },
    /// The application failed, but its driver pod still runs (the operator keeps the driver
    /// of a stopped application, even one pending or running after a start timeout). Delete
    /// the pod (uid precondition), then report `outcome`; if the delete fails, the job is not
    /// failed yet: report `info` and try again.
    DeleteDriverPod {
        /// The driver pod's name.
        name: String,
        /// The driver pod's uid, for the precondition.
        uid: String,
        /// The outcome to report once the pod is being deleted.
        outcome: ExecutionInfo,
    },
}

impl SparkAction {
    /// The outcome to report once the action succeeded.
    pub fn outcome(&self) -> &ExecutionInfo {
        match self {
            SparkAction::RecordOutcomeAndDeleteApp { outcome }
            | SparkAction::DeleteDriverPod { outcome, .. } => outcome,
        }
    }
}

impl Action for SparkAction {
    fn outcome_mut(&mut self) -> Option<&mut ExecutionInfo> {
        match self {
            SparkAction::RecordOutcomeAndDeleteApp { outcome }
            | SparkAction::DeleteDriverPod { outcome, .. } => Some(outcome),
        }
    }
}

/// Maps a Spark job (a SparkApplication and its driver pods) to its status.
///
/// `drivers` are the driver pods found for the application (by
/// [`super::SparkOperator::driver_selector`], or by name), in any order: the mapping uses the
/// newest one owned by this application. An empty slice is fine (the pods are gone, or could
/// not be read): every rule works without a driver, which only adds the exit code, the
/// termination message, exact start and end times, and the check for a driver that outlived
/// a failure. `now` drives the no-status timeout; `previous` is the status reported before,
/// if any: a terminal one is returned unchanged, and a later status keeps its start time.
///
/// Returns `None` when the application is gone and nothing that was seen tells what became
/// of it (no outcome, no cancel mark, no deletion in a view that may be stale): the caller
/// then answers "no such job", which a caller that was cancelling settles as cancelled.
pub fn spark_status(
    observed: &AppObservation<'_>,
    drivers: &[DriverView],
    now: Timestamp,
    config: &SparkMappingConfig,
    previous: Option<&ExecutionInfo>,
) -> Option<SparkMapped> {
    let app = observed.view();
    observation::answer(previous, app.kept_outcome.as_ref(), now, |clock| {
        let mapper = Mapper {
            app,
            vanished: observed.vanished(),
            driver: pick_driver(app, drivers),
            clock,
            config,
            previous,
        };
        mapper.map()
    })
}

/// The driver pod the mapping reads: the newest one owned by the application (pods of another
/// application of the same name are ignored); for the Kubeflow operator, the one of the
/// application's driver pod name when there is one.
pub fn pick_driver<'a>(app: &SparkAppView, drivers: &'a [DriverView]) -> Option<&'a DriverView> {
    let owned = |d: &&DriverView| match &d.owner_uid {
        Some(owner) if !app.uid.is_empty() => *owner == app.uid,
        _ => true,
    };
    let named = |d: &&DriverView| app.driver_pod_name.as_deref().is_none_or(|n| d.name == n);
    let newest =
        |a: &&DriverView, b: &&DriverView| (a.created_at, &a.name).cmp(&(b.created_at, &b.name));
    drivers
        .iter()
        .filter(owned)
        .filter(named)
        .max_by(newest)
        .or_else(|| drivers.iter().filter(owned).max_by(newest))
}

struct Mapper<'a> {
    app: &'a SparkAppView,
    /// `Some(final_state)` when the application is gone.
    vanished: Option<bool>,
    driver: Option<&'a DriverView>,
    clock: &'a Clock,
    config: &'a SparkMappingConfig,
    previous: Option<&'a ExecutionInfo>,
}

impl<'a> Mapper<'a> {
    fn map(&self) -> Option<SparkMapped> {
        let stop = self.stop();
        let mut warnings = Vec::new();
        let reading = match &self.app.status {
            SparkStatus::Absent => Reading::of(ReadingKind::Absent),
            SparkStatus::Unreadable(why) => Reading::of(ReadingKind::Unreadable(format!(
                "the {} operator's status of SparkApplication {} cannot be read: {why}; keeping the last status",
                self.app.operator, self.app.name
            ))),
            SparkStatus::Apache(status) => super::apache::read(self.app, status, stop.is_some()),
            SparkStatus::Kubeflow(status) => super::kubeflow::read(self.app, status),
        };
        warnings.extend(reading.warning.clone());
        let absent = matches!(reading.kind, ReadingKind::Absent);

        // 0. An outcome kubeferry recorded: it is only ever recorded while the application had
        //    no status, and counts once the application is being deleted or gone. Before that,
        //    the deletion is still to be done (by whichever replica sees this first).
        match &self.app.recorded_outcome {
            Some(Ok(outcome)) if absent => {
                let outcome = outcome.clone();
                return Some(match stop {
                    Some(_) => SparkMapped::of(outcome),
                    None => self.record_and_delete(
                        outcome,
                        "kubeferry recorded the outcome; deleting the SparkApplication before reporting it",
                    ),
                });
            }
            Some(Ok(_)) => warnings.push(format!(
                "SparkApplication {} carries an outcome kubeferry recorded while it had no status, but the operator has written one since; the record is void",
                self.app.name
            )),
            Some(Err(value)) => warnings.push(format!(
                "the recorded outcome {value:?} of SparkApplication {} is unreadable; ignoring it",
                self.app.name
            )),
            None => {}
        }

        let mut mapped = self.decide(&reading, stop)?;
        if !warnings.is_empty() {
            let mut all = warnings;
            all.extend(mapped.warning.take());
            mapped.warning = Some(all.join("; "));
        }
        Some(mapped)
    }

    /// The precedence rules, first match wins.
    fn decide(&self, reading: &Reading<'a>, stop: Option<Stop>) -> Option<SparkMapped> {
        // 1. A verdict the operator recorded before the work was stopped stands, whoever
        //    stopped it and whether or not a cancel was requested.
        if let ReadingKind::Outcome(verdict) = &reading.kind
            && !decided_after(verdict.at, stop)
        {
            return Some(self.outcome(verdict, reading));
        }
        // 2. A cancel request: done once the application is being deleted or gone.
        if let Some(mark) = &self.app.cancel_mark {
            let info = cancel_progress(
                mark,
                stop,
                "the SparkApplication",
                "waiting for the SparkApplication to be deleted",
            );
            return Some(SparkMapped::of(self.started(info, reading)));
        }
        // 3. Stopped without a cancel request: someone else deleted the application.
        match stop {
            Some(Stop::Deleted(at)) => {
                return Some(self.deleted_externally(
                    Some(at),
                    format!("the SparkApplication was deleted at {at} without a cancel request"),
                    reading,
                ));
            }
            Some(Stop::Vanished) => {
                // Only a final state proves there was no cancel mark: a stale view may predate
                // a cancel requested through another replica.
                return (self.vanished == Some(true)).then(|| {
                    self.deleted_externally(
                        None,
                        "the SparkApplication was deleted without a cancel request".to_string(),
                        reading,
                    )
                });
            }
            None => {}
        }
        // 4. Where it stands.
        Some(match &reading.kind {
            ReadingKind::Absent => self.no_status(reading),
            ReadingKind::Unreadable(warning) => self.keep_previous(warning.clone(), reading),
            ReadingKind::Hold(message) => SparkMapped::of(self.hold_previous(message, reading)),
            ReadingKind::Progress {
                state,
                reason,
                message,
            } => self.progress(*state, *reason, message, reading),
            // A verdict recorded after the stop, with no cancel mark and no stop: unreachable,
            // as a verdict can only be "after" a stop; reported as progress for safety.
            ReadingKind::Outcome(verdict) => {
                self.progress(Progress::StartedIfKnown, None, &verdict.message, reading)
            }
        })
    }

    fn stop(&self) -> Option<Stop> {
        match (self.app.deletion_timestamp, self.vanished) {
            (Some(at), _) => Some(Stop::Deleted(at)),
            (None, Some(_)) => Some(Stop::Vanished),
            (None, None) => None,
        }
    }

    /// The reported outcome of a verdict, with the details the driver shows; held back while
    /// the driver of a failed application still runs.
    fn outcome(&self, verdict: &Verdict<'a>, reading: &Reading<'a>) -> SparkMapped {
        let ended = self.driver_ended(verdict);
        // The operator reports success only once the driver's pod succeeded: a driver still
        // seen running is a pod watch that lags the application's. Every replica must report
        // the same details, so the success waits for the driver's end (bounded; condition
        // and state times are whole seconds, so the wait counts from the end of the verdict's).
        if verdict.succeeded
            && ended.is_none()
            && self.vanished.is_none()
            && self.app.deletion_timestamp.is_none()
            && let Some(driver) = self.live_driver().filter(|d| driver_runs(d))
            && verdict
                .at
                .and_then(|at| at.checked_add(jiff::SignedDuration::from_secs(1)).ok())
                .is_some_and(|at| {
                    self.clock
                        .before_deadline(at, self.config.driver_status_wait)
                })
        {
            return SparkMapped::of(self.in_progress(
                Progress::StartedIfKnown,
                None,
                format!(
                    "the {} operator reports success; waiting for driver pod {}'s final status",
                    self.app.operator, driver.name
                ),
                reading,
            ));
        }
        let end = ended.map(|(_, t)| t);
        let hint = verdict.exit_hint.as_ref().filter(|_| end.is_none());
        // An OOM kill is the driver's own end unless the driver ended after its pod's
        // disruption began (then the disruption stopped it), as for a container job's main
        // container.
        let oom = ended
            .map(|(driver, t)| {
                t.reason.as_deref() == Some("OOMKilled")
                    && !stopped_by_disruption(driver.disruption.as_ref(), t)
            })
            .or_else(|| hint.map(|h| h.reason.as_deref() == Some("OOMKilled")))
            .unwrap_or(false);
        let exit_code = end.map(|t| t.exit_code).or(hint.map(|h| h.exit_code));
        let mut info = if verdict.succeeded {
            if oom {
                // The kernel killed a process of the driver for memory even though it exited
                // with 0: the work did not succeed.
                let limit = ended
                    .and_then(|(driver, _)| driver.memory_limit.as_deref())
                    .map(|limit| format!(" of {limit}"))
                    .unwrap_or_default();
                ExecutionInfo::new(JobState::Failed, Reason::OomKilled).with_message(format!(
                    "the driver was OOMKilled (exceeded its memory limit{limit}) although it exited with code {}",
                    exit_code.unwrap_or(0)
                ))
            } else {
                ExecutionInfo::new(JobState::Succeeded, Reason::Completed)
                    .with_message(verdict.message.clone())
            }
        } else {
            // The driver's pod disrupted (evicted by the kubelet or the Eviction API, preempted,
            // lost with its node), as a container job's pod is read: an infrastructure failure.
            // Its pod may be gone by the time the verdict is read (a drain deletes it once it
            // ended): the driver status the operator recorded with its verdict shows it too.
            let disrupted = self
                .live_driver()
                .or(ended.map(|(driver, _)| driver))
                .and_then(|d| disruption_reason(&d.pod, verdict.at));
            // A driver that failed on its own before its pod was disrupted decides the outcome,
            // as a container job's main container does (docs/statuses.md): the eviction only
            // found a driver whose work had already ended.
            let failed_on_its_own = ended.is_some_and(|(driver, t)| {
                t.exit_code != 0 && ended_before_disruption(driver.disruption.as_ref(), t)
            });
            // Without the driver's pod, the operator's words may still say that its pod was
            // stopped from outside (deleted, evicted, its node lost) before the verdict: the
            // kubelet's `ContainerStatusUnknown` (a container it could not find any more), or
            // the exit of a SIGTERM (143) or of the SIGKILL after the grace period (137, not an
            // OOM kill: that one says `OOMKilled`), the same exits that read as a disruption's
            // stop for a container job (a driver ends so only when its pod is stopped); or
            // Kubeflow's `driver pod not found`, the driver's pod gone before the operator saw
            // it end (a pod that ends on its own stays until its application goes).
            let stopped = (verdict.driver_pod_gone && end.is_none())
                || hint.is_some_and(|h| stopped_exit(h.exit_code, h.reason.as_deref()));
            let reason = match (verdict.reason, disrupted) {
                (Reason::SparkFailed | Reason::Evicted, _) if oom => Reason::OomKilled,
                (Reason::Evicted, _) if failed_on_its_own => Reason::SparkFailed,
                (Reason::SparkFailed | Reason::Evicted, Some(disruption)) if !failed_on_its_own => {
                    disruption
                }
                (Reason::SparkFailed, None) if stopped => Reason::Disrupted,
                (reason, _) => reason,
            };
            let mut message = verdict.message.clone();
            if let Some(t) = end.filter(|t| t.exit_code != 0 || t.message.is_some()) {
                let mut driver = exit_summary(t);
                // An OOM kill names the limit the driver went over, when its pod shows it.
                if reason == Reason::OomKilled
                    && let Some(limit) = ended.and_then(|(d, _)| d.memory_limit.as_deref())
                {
                    driver.push_str(&format!(", over its memory limit of {limit}"));
                }
                message = if message.is_empty() {
                    format!("the driver ended with {driver}")
                } else {
                    format!("{message} (driver: {driver})")
                };
            }
            ExecutionInfo::new(JobState::Failed, reason).with_message(message)
        };
        info.exit_code = exit_code;
        info.finished_at = end.and_then(|t| t.finished_at).or(verdict.at);
        if !verdict.succeeded {
            info.last_words = end.and_then(last_words);
        }
        let info = self.started(info, reading);
        if !verdict.succeeded
            && self.vanished.is_none()
            && self.app.deletion_timestamp.is_none()
            && let Some(driver) = self.live_driver().filter(|d| driver_runs(d))
        {
            let holding = self.in_progress(
                Progress::StartedIfKnown,
                None,
                format!(
                    "the {} operator reports a failure ({}), but driver pod {} still runs: stopping it before reporting the failure",
                    self.app.operator, info.message, driver.name
                ),
                reading,
            );
            return SparkMapped::acting(
                holding,
                SparkAction::DeleteDriverPod {
                    name: driver.name.clone(),
                    uid: driver.uid.clone(),
                    outcome: info,
                },
            );
        }
        SparkMapped::of(info)
    }

    /// How the driver ended, as of the verdict: the live pod's driver container if it had
    /// terminated by then (a container killed because of the verdict, or after it, does not
    /// lend its exit code), else the driver status the operator recorded with the verdict; with
    /// the view it was read from (its DisruptionTarget condition tells an eviction's time).
    fn driver_ended(&self, verdict: &Verdict<'a>) -> Option<(&'a DriverView, &'a TerminatedView)> {
        let with_end = |driver: &'a DriverView| terminated(driver).map(|t| (driver, t));
        let live = self
            .live_driver()
            .and_then(with_end)
            .filter(|(_, t)| t.ended_by(verdict.at, Resolution::Seconds));
        live.or_else(|| verdict.recorded_driver.and_then(with_end))
    }

    fn live_driver(&self) -> Option<&'a DriverView> {
        self.driver
    }

    fn deleted_externally(
        &self,
        at: Option<Timestamp>,
        message: String,
        reading: &Reading<'_>,
    ) -> SparkMapped {
        let end = self
            .live_driver()
            .and_then(terminated)
            .filter(|t| t.ended_by(at, Resolution::Seconds));
        let mut info =
            ExecutionInfo::new(JobState::Failed, Reason::DeletedExternally).with_message(message);
        info.exit_code = end.map(|t| t.exit_code);
        info.finished_at = at;
        SparkMapped::of(self.started(info, reading))
    }

    /// No status from the operator: wait for it, up to the no-status timeout.
    fn no_status(&self, reading: &Reading<'_>) -> SparkMapped {
        let operator = self.app.operator;
        let timeout = self.config.no_status_timeout;
        if let Some(created) = self.app.created_at
            && !self.clock.before_deadline(created, timeout)
        {
            let mut outcome = ExecutionInfo::new(JobState::Failed, Reason::NoStatusTimeout)
                .with_message(format!(
                    "the {operator} operator wrote no status for SparkApplication {} within {}s of its creation: is the operator running, and does it watch namespace {}?",
                    self.app.name,
                    timeout.as_secs(),
                    self.app.namespace
                ));
            outcome.finished_at = deadline(created, timeout);
            return self.record_and_delete(
                self.started(outcome, reading),
                "no status from the operator within the no-status timeout; deleting the SparkApplication before reporting the failure",
            );
        }
        SparkMapped::of(self.in_progress(
            Progress::Queued,
            None,
            format!(
                "waiting for the {operator} operator to pick up the application (no status yet)"
            ),
            reading,
        ))
    }

    fn record_and_delete(&self, outcome: ExecutionInfo, message: &str) -> SparkMapped {
        let info = ExecutionInfo::new(JobState::Queued, Reason::Pending)
            .with_message(message)
            .started(outcome.started_at);
        SparkMapped::acting(info, SparkAction::RecordOutcomeAndDeleteApp { outcome })
    }

    fn progress(
        &self,
        state: Progress,
        reason: Option<Reason>,
        message: &str,
        reading: &Reading<'_>,
    ) -> SparkMapped {
        let mut message = message.to_string();
        let mut reason = reason;
        let queued = match state {
            Progress::Queued => true,
            Progress::Started => false,
            Progress::StartedIfKnown => self.first_start(reading).is_none(),
        };
        // While the driver is not running, its pod tells why (informative only: the operator
        // and its timeouts decide the outcome).
        if queued
            && reason.is_none()
            && let Some(driver) = self.live_driver().filter(|d| driver_runs(d))
            && let Some((why, detail)) = driver_waiting(driver)
        {
            reason = Some(why);
            message = if message.is_empty() {
                format!("driver pod {}: {detail}", driver.name)
            } else {
                format!("{message}; driver pod {}: {detail}", driver.name)
            };
        }
        let mut mapped = SparkMapped::of(self.in_progress(state, reason, message, reading));
        if reason == Some(Reason::UnrecognizedStatus) {
            mapped.warning = Some(mapped.info.message.clone());
        }
        mapped
    }

    fn in_progress(
        &self,
        state: Progress,
        reason: Option<Reason>,
        message: String,
        reading: &Reading<'_>,
    ) -> ExecutionInfo {
        let started = match state {
            Progress::Queued => false,
            Progress::Started => true,
            Progress::StartedIfKnown => {
                self.first_start(reading).is_some()
                    || self.previous.is_some_and(|p| p.state == JobState::Started)
            }
        };
        let info = if started {
            ExecutionInfo::new(JobState::Started, reason.unwrap_or(Reason::Running))
        } else {
            ExecutionInfo::new(JobState::Queued, reason.unwrap_or(Reason::Pending))
        };
        self.started(info.with_message(message), reading)
    }

    /// The previous non-terminal state and reason with a new message (nothing new is known).
    fn hold_previous(&self, message: &str, reading: &Reading<'_>) -> ExecutionInfo {
        observation::hold_previous(self.previous, self.first_start(reading), message)
    }

    /// A shape this version cannot read: the last non-terminal state, and a warning.
    fn keep_previous(&self, warning: String, reading: &Reading<'_>) -> SparkMapped {
        observation::keep_previous(self.previous, self.first_start(reading), warning)
    }

    fn started(&self, info: ExecutionInfo, reading: &Reading<'_>) -> ExecutionInfo {
        info.started(self.first_start(reading))
    }

    /// When the job first started: the driver container's start (live pod, any run), else what
    /// the status shows.
    fn first_start(&self, reading: &Reading<'_>) -> Option<Timestamp> {
        let live = self
            .live_driver()
            .and_then(|d| d.container.as_ref())
            .into_iter()
            .flat_map(ContainerView::run_starts);
        live.chain(reading.started_hint)
            // A container that never started reports the Unix epoch.
            .filter(|at| *at > Timestamp::UNIX_EPOCH)
            .min()
    }
}

/// Whether a verdict was recorded only after the work was stopped (then the stop, not the
/// application, decided it). The deletion time has whole seconds, the operators' times may
/// not: both are compared in whole seconds, and a tie goes to the verdict, which is the common
/// order (an application finishes, then its TTL or a cancel deletes it).
fn decided_after(at: Option<Timestamp>, stop: Option<Stop>) -> bool {
    match (at, stop) {
        (Some(at), Some(Stop::Deleted(stopped))) => at.as_second() > stopped.as_second(),
        _ => false,
    }
}

/// Whether a driver pod may still run the application: not ended and not being deleted.
pub(super) fn driver_runs(driver: &DriverView) -> bool {
    driver.deletion_timestamp.is_none() && !driver.phase_ended() && terminated(driver).is_none()
}

fn terminated(driver: &DriverView) -> Option<&TerminatedView> {
    match &driver.container.as_ref()?.state {
        ContainerStateView::Terminated(t) => Some(t),
        _ => None,
    }
}

/// Why a driver that has not started waits, when its pod says so.
fn driver_waiting(driver: &DriverView) -> Option<(Reason, String)> {
    let scheduled = driver.scheduled.as_ref();
    if let Some(condition) = scheduled.filter(|c| !c.status.is_true())
        && condition.reason.as_deref() == Some("Unschedulable")
    {
        let message = condition
            .message
            .clone()
            .unwrap_or_else(|| "no node fits".to_string());
        return Some((Reason::Unschedulable, message));
    }
    let container = driver.container.as_ref()?;
    let ContainerStateView::Waiting { reason, message } = &container.state else {
        return None;
    };
    let detail = match (reason, message) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(reason), None) => reason.clone(),
        (None, Some(message)) => message.clone(),
        (None, None) => return None,
    };
    // Informative only (the operator decides the outcome): an invalid image name is a reason
    // the image is not pulled too.
    let why = match reason.as_deref() {
        Some(reason) if IMAGE_PULL_REASONS.contains(&reason) || reason == "InvalidImageName" => {
            Reason::ImagePullBackOff
        }
        _ => Reason::ContainerCreating,
    };
    Some((why, detail))
}
