//! Container jobs: lean views of a `batch/v1` Job and its pods, and the pure mapping from them
//! to kubeferry's status model.
//!
//! [`container_status`] applies the precedence rules documented in `crates/core/STATUS.md`:
//! an outcome Kubernetes recorded wins over everything that happens after it; a cancel request
//! wins over what is still in progress; nothing is terminal unless Kubernetes showed it or one
//! of [`MappingConfig`]'s timeouts expired; a shape this version cannot read keeps the last
//! non-terminal status and warns.

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
