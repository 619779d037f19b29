//! Reading the apache operator's status (`spark.apache.org`): its state table, the walk back
//! through the state transition history once resources are released, and unknown states.

use jiff::Timestamp;

use super::reading::{Progress, Reading, ReadingKind, Verdict};
use super::view::{ApacheState, ApacheStatus, ApacheSummary, RestartPolicyView, SparkAppView};
use crate::container::view::ContainerStateView;
use crate::status::Reason;

/// What a state says about the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Not started: the driver is requested or starting.
    Queued,
    /// The driver runs.
    Started,
    /// The attempt ended with an outcome.
    Outcome,
    /// The application ended: the outcome is the last one before this state.
    Terminated,
    /// A state this version does not know.
    Unknown,
}

fn class(summary: &ApacheSummary) -> Class {
    use ApacheSummary::*;
    match summary {
        Submitted | ScheduledToRestart | DriverRequested | DriverStarted => Class::Queued,
        DriverReady
        | InitializedBelowThresholdExecutors
        | RunningHealthy
        | RunningWithPartialCapacity
        | RunningWithBelowThresholdExecutors => Class::Started,
        Succeeded
        | Failed
        | SchedulingFailure
        | DriverEvicted
        | DriverStartTimedOut
        | ExecutorsStartTimedOut
        | DriverReadyTimedOut => Class::Outcome,
        ResourceReleased | TerminatedWithoutReleaseResources => Class::Terminated,
        Other(_) => Class::Unknown,
    }
}

/// The failure reason of an outcome state (`Completed` for `Succeeded`).
fn reason(summary: &ApacheSummary) -> Reason {
    use ApacheSummary::*;
    match summary {
        Succeeded => Reason::Completed,
        DriverEvicted => Reason::Evicted,
        DriverStartTimedOut | DriverReadyTimedOut => Reason::DriverStartTimedOut,
        ExecutorsStartTimedOut => Reason::ExecutorsStartTimedOut,
        SchedulingFailure => Reason::SchedulingFailure,
        _ => Reason::SparkFailed,
    }
}

/// Whether the operator may restart the application after it entered `summary`, by the spec's
/// restart policy (the apache operator's rule). A policy this version does not know may
/// restart: the outcome then waits for the operator to release the application.
fn may_restart(policy: &RestartPolicyView, summary: &ApacheSummary) -> bool {
    use ApacheSummary::*;
    match policy {
        RestartPolicyView::Never => false,
        RestartPolicyView::Always | RestartPolicyView::Other(_) => true,
        RestartPolicyView::OnFailure => *summary != Succeeded,
        RestartPolicyView::OnInfrastructureFailure => matches!(
            summary,
            DriverStartTimedOut | ExecutorsStartTimedOut | SchedulingFailure
        ),
    }
}

/// Reads the apache operator's status. `stopped`: the application is being deleted or gone.
pub(super) fn read<'a>(app: &SparkAppView, status: &'a ApacheStatus, stopped: bool) -> Reading<'a> {
    let current = &status.current;
    let attempt = current_attempt(&status.history);
    let mut warnings = Vec::new();
    if status.unreadable_history > 0 {
        warnings.push(format!(
            "{} entries of the stateTransitionHistory of SparkApplication {} cannot be read; ignored",
            status.unreadable_history, app.name
        ));
    }
    let kind = match class(&current.summary) {
        Class::Queued => ReadingKind::Progress {
            state: Progress::Queued,
            reason: None,
            message: describe(current),
        },
        Class::Started => ReadingKind::Progress {
            state: Progress::Started,
            reason: None,
            message: describe(current),
        },
        Class::Outcome if may_restart(&app.restart.policy, &current.summary) => {
            ReadingKind::Progress {
                state: Progress::StartedIfKnown,
                reason: None,
                message: format!(
                    "the attempt ended ({}); the operator may restart the application",
                    describe(current)
                ),
            }
        }
        Class::Outcome => ReadingKind::Outcome(verdict(current, attempt)),
        Class::Terminated => {
            // The last outcome of the last attempt, before the state(s) that released it.
            match attempt
                .iter()
                .rev()
                .find(|state| class(&state.summary) == Class::Outcome)
            {
                Some(outcome) => ReadingKind::Outcome(verdict(outcome, attempt)),
                // Ended with no outcome, because it is being deleted: the stop decides.
                None if stopped => ReadingKind::Progress {
                    state: Progress::StartedIfKnown,
                    reason: None,
                    message: describe(current),
                },
                None => {
                    warnings.push(format!(
                        "SparkApplication {} ended ({}) with no outcome in its state history",
                        app.name,
                        current.summary.as_str()
                    ));
                    ReadingKind::Outcome(Verdict {
                        succeeded: false,
                        reason: Reason::SparkFailed,
                        message: format!(
                            "the operator ended the application with no outcome in its history ({})",
                            describe(current)
                        ),
                        at: current.last_transition_time,
                        recorded_driver: recorded_driver(attempt),
                        exit_hint: None,
                        driver_pod_gone: false,
                    })
                }
            }
        }
        Class::Unknown => {
            let started = all_states(status).any(|s| class(&s.summary) == Class::Started);
            let (state, shown) = if started {
                (Progress::Started, "STARTED")
            } else {
                (Progress::Queued, "QUEUED")
            };
            ReadingKind::Progress {
                state,
                reason: Some(Reason::UnrecognizedStatus),
                message: format!(
                    "the apache operator reports state {}, which this version does not know; reporting {shown}, as its history shows",
                    current.summary.as_str()
                ),
            }
        }
    };
    Reading {
        kind,
        started_hint: started_hint(status),
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
    }
}

/// The states of the last attempt: those after the last `ScheduledToRestart`.
fn current_attempt(history: &[ApacheState]) -> &[ApacheState] {
    let start = history
        .iter()
        .rposition(|s| s.summary == ApacheSummary::ScheduledToRestart)
        .map_or(0, |i| i + 1);
    &history[start..]
}

fn all_states(status: &ApacheStatus) -> impl Iterator<Item = &ApacheState> {
    status
        .history
        .iter()
        .chain(std::iter::once(&status.current))
}

fn verdict<'a>(state: &'a ApacheState, attempt: &'a [ApacheState]) -> Verdict<'a> {
    Verdict {
        succeeded: state.summary == ApacheSummary::Succeeded,
        reason: reason(&state.summary),
        message: describe(state),
        at: state.last_transition_time,
        recorded_driver: state.driver.as_deref().or_else(|| recorded_driver(attempt)),
        exit_hint: None,
        driver_pod_gone: false,
    }
}

/// The newest driver status the operator recorded in the attempt.
fn recorded_driver(attempt: &[ApacheState]) -> Option<&super::view::DriverView> {
    attempt.iter().rev().find_map(|s| s.driver.as_deref())
}

/// When the job first started, as the status shows it: the first state in which the driver
/// ran, or an earlier start of the driver container the operator recorded.
fn started_hint(status: &ApacheStatus) -> Option<Timestamp> {
    let transitions = all_states(status)
        .filter(|s| class(&s.summary) == Class::Started)
        .filter_map(|s| s.last_transition_time);
    let recorded = all_states(status)
        .filter_map(|s| s.driver.as_deref())
        .filter_map(|d| d.container.as_ref())
        .filter_map(|c| match &c.state {
            ContainerStateView::Running { started_at } => *started_at,
            ContainerStateView::Terminated(t) => t.started_at,
            _ => None,
        });
    transitions
        .chain(recorded)
        .filter(|at| *at > Timestamp::UNIX_EPOCH)
        .min()
}

/// `Summary: message`, as the operator put it.
fn describe(state: &ApacheState) -> String {
    match &state.message {
        Some(message) => format!("{}: {}", state.summary.as_str(), message.trim()),
        None => state.summary.as_str().to_string(),
    }
}
