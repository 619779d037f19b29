//! Container jobs: lean views of a `batch/v1` Job and its pods, and the pure mapping from them
//! to kubeferry's status model.
//!
//! [`container_status`] applies the precedence rules documented in `crates/core/STATUS.md`:
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
    IMAGE_PULL_REASONS, disruption_reason, ended_before_disruption, exit_summary, stopped_exit,
};
pub use view::{
    COMPLETION_INDEX_KEY, CancelMark, ConditionStatus, ContainerStateView, ContainerView,
    IndexedView, JobConditionType, JobConditionView, JobView, PodConditionView, PodPhase,
    PodSummary, PodView, TerminatedView,
};

/// The name of the container that runs the job's command. The mapping reads this container
/// (or, in a pod without one of this name, the first container of the pod's spec).
pub const MAIN_CONTAINER: &str = "main";

/// The rule kubeferry adds last to the pod failure policy of a Job without retries: fail the
/// Job on any non-zero exit code of the main container. Without retries the Job fails on such
/// an exit either way; through this rule its verdict names the exit code (`Container main for
/// pod <ns>/<pod> failed with exit code 3 matching FailJob rule at index 1`,
/// pkg/controller/job/pod_failure_policy.go), so the code outlives the pod: a replica that
/// never saw the pod (drained, its node lost) still answers the container's own failure.
/// Kubernetes never matches an exit code 0 (`getMatchingContainerFromList`), so `NotIn [0]`
/// reads "any failure".
pub fn exit_code_rule() -> PodFailurePolicyRule {
    PodFailurePolicyRule {
        action: "FailJob".to_string(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: Some(MAIN_CONTAINER.to_string()),
            operator: "NotIn".to_string(),
            values: vec![0],
        }),
        on_pod_conditions: None,
    }
}
