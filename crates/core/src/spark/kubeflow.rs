//! Reading the Kubeflow operator's status (`sparkoperator.k8s.io`): only COMPLETED and FAILED
//! are terminal; every other state is on the way to one of them.

use super::reading::{ExitHint, Progress, Reading, ReadingKind, Verdict};
use super::view::{KubeflowState, KubeflowStatus, RestartPolicyView, SparkAppView};
use crate::status::Reason;

/// Reads the Kubeflow operator's status.
pub(super) fn read<'a>(app: &SparkAppView, status: &'a KubeflowStatus) -> Reading<'a> {
    use KubeflowState::*;
    let error = status
        .error_message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let with_error = |text: &str| match error {
        Some(error) => format!("{text}: {error}"),
        None => text.to_string(),
    };
    let progress = |state: Progress, message: String| ReadingKind::Progress {
        state,
        reason: None,
        message,
    };
    let kind = match &status.state {
        New => progress(
            Progress::Queued,
            "waiting for the kubeflow operator to submit the application".to_string(),
        ),
        Submitted => progress(
            Progress::Queued,
            "submitted; waiting for the driver to run".to_string(),
        ),
        Running => progress(Progress::Started, String::new()),
        Succeeding => progress(
            Progress::StartedIfKnown,
            "the driver completed; waiting for the operator to record the outcome".to_string(),
        ),
        Failing => {
            let next = if retries_left(app, status) {
                format!(
                    "the operator will run it again (attempt {} of {})",
                    status.execution_attempts + 1,
                    app.restart
                        .on_failure_retries
                        .map_or("?".to_string(), |r| (r + 1).to_string())
                )
            } else {
                "no retries are left; waiting for the operator to mark it FAILED".to_string()
            };
            progress(
                Progress::StartedIfKnown,
                format!("{}; {next}", with_error("the driver failed")),
            )
        }
        SubmissionFailed => {
            let next = if retries_left(app, status) {
                "the operator will submit it again"
            } else {
                "no retries are left; waiting for the operator to mark it FAILED"
            };
            progress(
                Progress::StartedIfKnown,
                format!(
                    "{} (attempt {}); {next}",
                    with_error("the submission failed"),
                    status.submission_attempts
                ),
            )
        }
        PendingRerun => progress(
            Progress::StartedIfKnown,
            "waiting for the operator to submit the application again".to_string(),
        ),
        Invalidating => progress(
            Progress::StartedIfKnown,
            "the spec changed; the operator is restarting the application".to_string(),
        ),
        Suspending | Suspended => ReadingKind::Progress {
            state: Progress::Queued,
            reason: Some(Reason::Suspended),
            message: format!("the application is {}", status.state.as_str().to_lowercase()),
        },
        Resuming => progress(
            Progress::StartedIfKnown,
            "the operator is resuming the application".to_string(),
        ),
        Unknown => ReadingKind::Hold(
            "the kubeflow operator cannot tell the driver's state (UNKNOWN); keeping the last status"
                .to_string(),
        ),
        Completed => ReadingKind::Outcome(Verdict {
            succeeded: true,
            reason: Reason::Completed,
            message: String::new(),
            at: status.termination_time,
            recorded_driver: None,
            exit_hint: None,
            driver_pod_gone: false,
        }),
        Failed => ReadingKind::Outcome(Verdict {
            succeeded: false,
            reason: Reason::SparkFailed,
            message: with_error("the application failed"),
            at: status.termination_time,
            recorded_driver: None,
            exit_hint: error.and_then(exit_hint),
            driver_pod_gone: error == Some(DRIVER_POD_NOT_FOUND),
        }),
        Other(name) => ReadingKind::Progress {
            state: Progress::StartedIfKnown,
            reason: Some(Reason::UnrecognizedStatus),
            message: format!(
                "the kubeflow operator reports state {name:?}, which this version does not know; keeping the job unfinished"
            ),
        },
    };
    Reading::of(kind)
}

/// The operator's error when the driver's pod went away before it saw the driver end.
const DRIVER_POD_NOT_FOUND: &str = "driver pod not found";

/// The driver's end as the operator words it when the driver container failed:
/// `driver container failed with ExitCode: <code>, Reason: <reason>`.
fn exit_hint(message: &str) -> Option<ExitHint> {
    let rest = message
        .split("driver container failed with ExitCode: ")
        .nth(1)?;
    let (code, rest) = rest.split_once(',').unwrap_or((rest, ""));
    let exit_code = code.trim().parse().ok()?;
    let reason = rest
        .trim()
        .strip_prefix("Reason:")
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty());
    Some(ExitHint { exit_code, reason })
}

/// Whether the operator will run a failing application (FAILING) or submit a failed submission
/// (SUBMISSION_FAILED) again, by the operator's own rule: `Always` does; `OnFailure` does while
/// `status.executionAttempts` (FAILING) or `status.submissionAttempts` (SUBMISSION_FAILED) is at
/// most `spec.restartPolicy.onFailureRetries` or `.onSubmissionFailureRetries`; `Never` (or
/// `OnFailure` without that count) does not. It only shapes the message: the job stays
/// unfinished until the operator writes COMPLETED or FAILED.
pub(super) fn retries_left(app: &SparkAppView, status: &KubeflowStatus) -> bool {
    let (attempts, retries) = match status.state {
        KubeflowState::Failing => (status.execution_attempts, app.restart.on_failure_retries),
        KubeflowState::SubmissionFailed => (
            status.submission_attempts,
            app.restart.on_submission_failure_retries,
        ),
        _ => return false,
    };
    match app.restart.policy {
        RestartPolicyView::Always => true,
        RestartPolicyView::OnFailure => retries.is_some_and(|r| attempts <= r),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_hints_from_the_operators_message() {
        let hint = |m: &str| exit_hint(m).map(|h| (h.exit_code, h.reason));
        assert_eq!(
            hint("driver container failed with ExitCode: 137, Reason: OOMKilled"),
            Some((137, Some("OOMKilled".to_string())))
        );
        assert_eq!(
            hint("driver container failed with ExitCode: 1, Reason: "),
            Some((1, None))
        );
        assert_eq!(hint("driver container status missing"), None);
        assert_eq!(hint("driver container failed with ExitCode: x"), None);
    }
}
