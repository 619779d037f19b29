//! Container jobs: lean views of a `batch/v1` Job and its pods, and the pure mapping from them
//! to kubeferry's status model.
//!
//! [`container_status`] applies the precedence rules documented in `docs/statuses.md`:
//! an outcome Kubernetes recorded wins over everything that happens after it; a cancel request
//! wins over what is still in progress; nothing is terminal unless Kubernetes showed it or one
//! of [`MappingConfig`]'s timeouts expired; a shape this version cannot read keeps the last
//! non-terminal status and warns.

use k8s_openapi::api::batch::v1::{PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyRule};

mod mapping;
pub(crate) mod view;

#[cfg(test)]
mod tests;

pub use mapping::{
    ContainerAction, JobObservation, Mapped, MappingConfig, container_status, oldest_attempt_first,
};
pub(crate) use mapping::{
    IMAGE_PULL_REASONS, disruption_reason, ended_before_disruption, exit_summary, last_words,
    main_terminated, stopped_by_disruption, stopped_exit,
};
pub use view::{
    COMPLETION_INDEX_KEY, CancelMark, ConditionStatus, ContainerStateView, ContainerView,
    IndexedView, JobConditionType, JobConditionView, JobView, PodConditionView, PodPhase,
    PodSummary, PodView, RuleIndexes, TerminatedView,
};

/// The name of the container that runs the job's command. The mapping reads this container
/// (or, in a pod without one of this name, the first container of the pod's spec).
pub const MAIN_CONTAINER: &str = "main";

/// The exit codes a signal that stops a container gives it (128 + SIGKILL, 128 + SIGTERM): an
/// evicted, preempted or deleted pod's container, or one the kernel's OOM killer ended.
const SIGNAL_EXIT_CODES: [i32; 2] = [137, 143];

/// The rule kubeferry puts first in the pod failure policy of a Job without retries: fail the
/// Job on an exit code of the main container's own (one no stopping signal gives and the job
/// file does not list). First, so that a container that failed on its own is never read as
/// disrupted: the API server adds `DisruptionTarget` to a pod it evicts even when the pod had
/// already failed (pkg/registry/core/pod/storage/eviction.go, `addConditionAndDeletePod`), and
/// a drain right after the failure would otherwise match the disruption rule before this one.
/// `listed` are the codes the job file's own `FailJob` rule lists: they stay its.
pub fn own_failure_rule(listed: &[i32]) -> PodFailurePolicyRule {
    let mut values: Vec<i32> = [0]
        .into_iter()
        .chain(SIGNAL_EXIT_CODES)
        .chain(listed.iter().copied())
        .collect();
    // Kubernetes requires the values sorted and unique.
    values.sort_unstable();
    values.dedup();
    fail_job_unless_exit(values)
}

/// The rule kubeferry adds last to the pod failure policy of a Job without retries: fail the
/// Job on any non-zero exit code of the main container (after the disruption rule: a signal's
/// code, 137 or 143, of a container no disruption reached). Without retries the Job fails on
/// such an exit either way; through this rule and [`own_failure_rule`] its verdict names the
/// exit code (`Container main for pod <ns>/<pod> failed with exit code 3 matching FailJob rule
/// at index 0`, pkg/controller/job/pod_failure_policy.go), so the code outlives the pod: a
/// replica that never saw the pod (drained, its node lost) still answers the container's own
/// failure. Kubernetes never matches an exit code 0 (`getMatchingContainerFromList`), so
/// `NotIn [0]` reads "any failure".
pub fn exit_code_rule() -> PodFailurePolicyRule {
    fail_job_unless_exit(vec![0])
}

fn fail_job_unless_exit(values: Vec<i32>) -> PodFailurePolicyRule {
    PodFailurePolicyRule {
        action: "FailJob".to_string(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: Some(MAIN_CONTAINER.to_string()),
            operator: "NotIn".to_string(),
            values,
        }),
        on_pod_conditions: None,
    }
}

/// Whether a rule is [`own_failure_rule`] or [`exit_code_rule`]: a `FailJob` rule on the main
/// container's exit codes `NotIn` a list with 0 (a job file cannot write a `NotIn` rule).
fn is_exit_code_rule(rule: &PodFailurePolicyRule) -> bool {
    rule.action == "FailJob"
        && rule.on_pod_conditions.is_none()
        && rule.on_exit_codes.as_ref().is_some_and(|codes| {
            codes.container_name.as_deref() == Some(MAIN_CONTAINER)
                && codes.operator == "NotIn"
                && codes.values.first() == Some(&0)
        })
}
