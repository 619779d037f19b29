//! An operator's status read into operator-neutral terms: what [`super::apache`] and
//! [`super::kubeflow`] produce and [`super::mapping`] applies its precedence rules to.

use jiff::Timestamp;

use super::view::DriverView;
use crate::status::Reason;

/// An operator's status in operator-neutral terms.
pub(super) struct Reading<'a> {
    pub(super) kind: ReadingKind<'a>,
    /// When the job started as far as the status shows it (the first running state, a start
    /// the operator recorded); the live driver pod's start, when known, comes first.
    pub(super) started_hint: Option<Timestamp>,
    /// Part of the status could not be read.
    pub(super) warning: Option<String>,
}

impl Reading<'_> {
    pub(super) fn of(kind: ReadingKind<'_>) -> Reading<'_> {
        Reading {
            kind,
            started_hint: None,
            warning: None,
        }
    }
}

pub(super) enum ReadingKind<'a> {
    /// No status at all.
    Absent,
    /// A status that cannot be read as a whole.
    Unreadable(String),
    /// Not finished.
    Progress {
        state: Progress,
        /// The reason; the state's usual one (`Pending`, `Running`) when `None`.
        reason: Option<Reason>,
        message: String,
    },
    /// The operator cannot tell for now: keep the last status.
    Hold(String),
    /// The operator's verdict.
    Outcome(Verdict<'a>),
}

/// Where a job in progress stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    Queued,
    Started,
    /// Started if a start is known (an attempt ended and another may follow), else queued.
    StartedIfKnown,
}

/// The operator's verdict.
pub(super) struct Verdict<'a> {
    pub(super) succeeded: bool,
    /// The failure reason (ignored for a success).
    pub(super) reason: Reason,
    pub(super) message: String,
    /// When the operator recorded it.
    pub(super) at: Option<Timestamp>,
    /// A driver status the operator recorded with the verdict (apache), used when the live
    /// driver pod is not known.
    pub(super) recorded_driver: Option<&'a DriverView>,
    /// The driver's exit code and termination reason as the operator's message gives them
    /// (Kubeflow), used when no driver status is known.
    pub(super) exit_hint: Option<ExitHint>,
    /// Whether the operator says the driver's pod went away before it saw the driver end
    /// (Kubeflow's `driver pod not found`): deleted from outside (a drain, a lost node, someone).
    pub(super) driver_pod_gone: bool,
}

/// A driver's end as an operator's message tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ExitHint {
    pub(super) exit_code: i32,
    /// The container's termination reason (`Error`, `OOMKilled`, ...).
    pub(super) reason: Option<String>,
}
