//! Indexed Jobs (`completionMode: Indexed`): where each index stands, and how the outcome of
//! the whole names the indexes that decided it.
//!
//! The Job reports its succeeded and failed indexes as interval strings
//! (`status.completedIndexes`, `status.failedIndexes`); each pod carries its index in the
//! `batch.kubernetes.io/job-completion-index` label. Since Kubernetes 1.31 the Job controller
//! first notes its decision (`SuccessCriteriaMet`, `FailureTarget`), stops the pods still
//! running, and writes `Complete` or `Failed` only once every pod has terminated: an indexed
//! job is reported terminal only then, so that no index is still running when the outcome is
//! read (Kubernetes documentation, "Jobs: Terminal Job conditions").

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::{Cause, Mapper, Verdict, has_ended, is_oom, main_terminated};
use crate::container::view::{ContainerStateView, IndexedView, PodPhase, PodView};
use crate::indexes::IndexSet;
use crate::status::{ExecutionInfo, IndexFailure, IndexSummary, JobState, Reason};

/// How many failed indexes a FAILED message names before it only counts the rest.
const NAMED_IN_MESSAGE: usize = 3;

impl<'a> Mapper<'a> {
    /// The Job's indexes, when it is an Indexed Job.
    pub(super) fn indexed(&self) -> Option<&'a IndexedView> {
        self.job.indexed.as_deref()
    }

    /// The newest attempt of each index.
    fn newest_by_index(&self) -> BTreeMap<u32, &'a PodView> {
        // Attempts are sorted oldest first: the last one of an index wins.
        self.attempts
            .iter()
            .filter_map(|pod| pod.completion_index.map(|index| (index, *pod)))
            .collect()
    }

    /// Where the indexes stand once the job has ended: nothing runs any more (the Job
    /// controller writes its final condition only once every pod has terminated), whatever a
    /// pod watch that lags behind the Job's still shows.
    pub(super) fn final_index_summary(
        &self,
        indexed: &IndexedView,
        as_of: Option<Timestamp>,
    ) -> IndexSummary {
        let mut summary = self.index_summary(indexed, as_of);
        summary.pending += summary.running;
        summary.running = 0;
        summary
    }

    /// Where the indexes stand; failures as far as the pods show them by `as_of`.
    pub(super) fn index_summary(
        &self,
        indexed: &IndexedView,
        as_of: Option<Timestamp>,
    ) -> IndexSummary {
        // A string this version cannot read counts nothing rather than guessing.
        let completed = IndexSet::parse(&indexed.completed_indexes).unwrap_or_default();
        let failed = IndexSet::parse(&indexed.failed_indexes).unwrap_or_default();
        let newest = self.newest_by_index();
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let succeeded = count(completed.len()).min(indexed.completions);
        let failed_count = count(failed.len()).min(indexed.completions - succeeded);
        let running = count(
            newest
                .iter()
                .filter(|(index, pod)| {
                    !completed.contains(**index) && !failed.contains(**index) && is_running(pod)
                })
                .count() as u64,
        )
        .min(indexed.completions - succeeded - failed_count);
        IndexSummary {
            completions: indexed.completions,
            succeeded,
            failed: failed_count,
            running,
            pending: indexed.completions - succeeded - failed_count - running,
            completed_indexes: indexed.completed_indexes.clone(),
            failed_indexes: indexed.failed_indexes.clone(),
            failures: failed
                .iter()
                .take(IndexSummary::MAX_FAILURES)
                .map(|index| self.index_failure(index, newest.get(&index).copied(), as_of))
                .collect(),
        }
    }

    /// Why one index failed, from its newest attempt.
    fn index_failure(
        &self,
        index: u32,
        pod: Option<&PodView>,
        as_of: Option<Timestamp>,
    ) -> IndexFailure {
        if let Some(pod) = pod.filter(|pod| stopped_by_decision(pod, as_of)) {
            return IndexFailure {
                index,
                reason: Reason::Error,
                exit_code: main_terminated(pod).map(|t| t.exit_code),
                message: "stopped by the Job controller once it had decided the job's outcome"
                    .to_string(),
            };
        }
        match pod.and_then(|pod| self.attempt_cause(pod, as_of).map(|cause| (pod, cause))) {
            Some((pod, cause)) => IndexFailure {
                index,
                reason: cause.reason,
                exit_code: cause
                    .exit_code
                    .or_else(|| main_terminated(pod).map(|t| t.exit_code)),
                message: shortened(cause.message),
            },
            None => IndexFailure {
                index,
                reason: Reason::Error,
                exit_code: None,
                message: "no pod of this index is left to tell why it failed".to_string(),
            },
        }
    }

    /// While no outcome is known: STARTED once any index has started (the newest pod alone
    /// does not tell, as for a single-pod job), with the counts. `None` before that: the
    /// newest attempt tells why nothing runs yet (scheduling, image pulls).
    pub(super) fn indexed_progress(&self, indexed: &IndexedView) -> Option<ExecutionInfo> {
        let start = self.first_start()?;
        let summary = self.index_summary(indexed, None);
        let mut info =
            ExecutionInfo::new(JobState::Started, Reason::Running).with_message(summary.counts());
        info.started_at = Some(start);
        info.indexes = Some(summary);
        Some(info)
    }

    /// The Job noted its decision but its pods are still terminating: not an outcome yet.
    pub(super) fn awaits_final_condition(&self, verdict: &Verdict<'_>) -> Option<ExecutionInfo> {
        let indexed = self.indexed()?;
        if verdict.final_seen || !self.job_can_judge() {
            return None;
        }
        let (condition, reason) = if verdict.succeeded {
            (
                "SuccessCriteriaMet",
                verdict.reason.unwrap_or("CompletionsReached"),
            )
        } else {
            ("FailureTarget", verdict.reason.unwrap_or("unknown"))
        };
        let summary = self.index_summary(indexed, verdict.at);
        let info = match self.first_start() {
            Some(start) => {
                let mut info = ExecutionInfo::new(JobState::Started, Reason::Running);
                info.started_at = Some(start);
                info
            }
            None => ExecutionInfo::new(JobState::Queued, Reason::Pending),
        };
        let mut info = info.with_message(format!(
            "the Job controller decided ({condition}: {reason}); waiting for its pods to terminate; {}",
            summary.counts()
        ));
        info.indexes = Some(summary);
        Some(info)
    }

    /// A successful indexed job: every index succeeded, or its success policy was met.
    pub(super) fn indexed_succeeded(
        &self,
        indexed: &IndexedView,
        verdict: &Verdict<'_>,
    ) -> ExecutionInfo {
        let summary = self.final_index_summary(indexed, verdict.at);
        let message = if verdict.reason == Some("SuccessPolicy") {
            let rule = verdict
                .message
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            format!(
                "the success policy was met (SuccessCriteriaMet{rule}); {}",
                summary.counts()
            )
        } else {
            format!(
                "{} of {} indexes succeeded",
                summary.succeeded, summary.completions
            )
        };
        let mut info =
            ExecutionInfo::new(JobState::Succeeded, Reason::Completed).with_message(message);
        info.finished_at = self.job.completion_time.or(verdict.at);
        info.started_at = self.first_start();
        info.indexes = Some(summary);
        info
    }

    /// A failed indexed job: named by its first failed indexes and why they failed.
    pub(super) fn indexed_failed(&self, indexed: &IndexedView, verdict: &Verdict<'_>) -> Cause {
        let summary = self.final_index_summary(indexed, verdict.at);
        let mut failures = summary.failures.clone();
        // The indexes that failed on their own decided the outcome: they are named, not those
        // the Job controller stopped because of them (which it may count as failed too).
        let newest = self.newest_by_index();
        let stopped = |f: &IndexFailure| {
            newest
                .get(&f.index)
                .is_some_and(|pod| stopped_by_decision(pod, verdict.at))
        };
        let stopped_count = failures.iter().filter(|f| stopped(f)).count();
        if stopped_count < failures.len() {
            failures.retain(|f| !stopped(f));
        }
        if failures.is_empty() {
            // No failed index reported (a backoff limit for all indexes together): the newest
            // failed attempt names its index.
            if let Some(pod) = self.attempts.iter().rev().find(|pod| failed(pod))
                && let Some(index) = pod.completion_index
            {
                failures.push(self.index_failure(index, Some(pod), verdict.at));
            }
        }
        let job_reason = match (verdict.reason, verdict.message) {
            (Some(reason), Some(message)) => format!(" ({reason}: {message})"),
            (Some(reason), None) => format!(" ({reason})"),
            (None, Some(message)) => format!(" ({message})"),
            (None, None) => String::new(),
        };
        let counted = match (summary.failed, stopped_count) {
            (0, _) => summary.counts(),
            (failed, 0) => format!("{failed} of {} indexes failed", summary.completions),
            (failed, stopped) => format!(
                "{failed} of {} indexes failed, {stopped} of them stopped once the outcome was decided",
                summary.completions
            ),
        };
        let Some(first) = failures.first() else {
            return Cause {
                reason: match verdict.reason {
                    Some("BackoffLimitExceeded" | "FailedIndexes" | "MaxFailedIndexesExceeded") => {
                        Reason::BackoffLimitExceeded
                    }
                    _ => Reason::Error,
                },
                message: format!("the indexed job failed{job_reason}; {counted}"),
                exit_code: None,
            };
        };
        let named: Vec<String> = failures
            .iter()
            .take(NAMED_IN_MESSAGE)
            .map(|f| f.index.to_string())
            .collect();
        let which = match named.len() {
            1 => format!("index {} failed", named[0]),
            _ if failures.len() > named.len() => format!(
                "indexes {} and {} more failed",
                named.join(", "),
                failures.len() - named.len()
            ),
            _ => format!("indexes {} failed", named.join(", ")),
        };
        let first_why = if named.len() > 1 {
            format!("index {}: {}", first.index, short(first))
        } else {
            short(first)
        };
        Cause {
            reason: first.reason,
            message: format!("{which}: {first_why}; {counted}{job_reason}"),
            exit_code: first.exit_code,
        }
    }
}

/// The most bytes of one failed index's message: a summary lists up to
/// [`IndexSummary::MAX_FAILURES`] of them, and a recorded outcome must stay well within the
/// room kept for kubeferry's marks (a termination message alone may have 4 KiB).
const MAX_FAILURE_MESSAGE_BYTES: usize = 256;

/// `message` cut to [`MAX_FAILURE_MESSAGE_BYTES`] on a character boundary, with an ellipsis.
fn shortened(mut message: String) -> String {
    if message.len() <= MAX_FAILURE_MESSAGE_BYTES {
        return message;
    }
    let mut cut = MAX_FAILURE_MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push('…');
    message
}

/// Why an index failed, in a few words: `OOMKilled (exit code 137)`, `exit code 3: boom`,
/// `Evicted: The node was low on memory`.
fn short(failure: &IndexFailure) -> String {
    match (failure.reason, failure.exit_code) {
        (Reason::OomKilled, Some(code)) => format!("OOMKilled (exit code {code})"),
        (Reason::OomKilled, None) => "OOMKilled".to_string(),
        (Reason::Error, _) => failure.message.clone(),
        (reason, _) => format!("{reason}: {}", failure.message),
    }
}

/// Whether the pod's work runs: not ended, not being deleted, its main container (or the pod)
/// running.
fn is_running(pod: &PodView) -> bool {
    if has_ended(pod) || pod.deletion_timestamp.is_some() {
        return false;
    }
    match pod.main.as_ref().map(|m| &m.state) {
        Some(ContainerStateView::Running { .. }) => true,
        Some(ContainerStateView::Waiting { .. }) => false,
        _ => pod.phase == Some(PodPhase::Running),
    }
}

/// Whether the pod was deleted once the outcome had been decided (at `as_of`): the Job
/// controller stops the pods still running then, and their end is a consequence, not a cause.
/// A pod whose container had ended before it was deleted (a clean-up long after) was not.
fn stopped_by_decision(pod: &PodView, as_of: Option<Timestamp>) -> bool {
    match (pod.deletion_requested_at(), as_of) {
        (Some(deleted), Some(decided)) => {
            deleted >= decided
                && main_terminated(pod)
                    .is_none_or(|t| t.finished_at.is_none_or(|end| end >= deleted))
        }
        _ => false,
    }
}

/// Whether the attempt failed.
fn failed(pod: &PodView) -> bool {
    pod.phase == Some(PodPhase::Failed)
        || main_terminated(pod).is_some_and(|t| t.exit_code != 0 || is_oom(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_failure_messages_are_cut_on_a_character_boundary() {
        assert_eq!(shortened("exit code 3".to_string()), "exit code 3");
        let long = "é".repeat(300);
        let cut = shortened(long.clone());
        assert!(cut.len() <= MAX_FAILURE_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(long.starts_with(cut.trim_end_matches('…')));
    }
}
