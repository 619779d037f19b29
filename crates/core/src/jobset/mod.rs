//! JobSets (`jobset.x-k8s.io/v1alpha2`): lean views of a JobSet and its child Jobs, and the
//! pure mapping from them (and the Jobs' pods) to kubeferry's status model.
//!
//! [`jobset_status`] applies the precedence rules documented in `docs/statuses.md`: an
//! outcome the JobSet controller recorded wins over everything that happens after it, and a
//! failure is told by the child Job and pod that caused it; a cancel request wins over what is
//! still in progress; nothing is terminal unless the JobSet showed it or a pod of it can never
//! start; a status this version cannot read keeps the last non-terminal status and warns.

mod mapping;
mod view;

pub use mapping::{JobSetAction, JobSetMapped, JobSetObservation, jobset_status};
pub use view::{
    ChildJobView, JOB_INDEX_LABEL, JOBSET_NAME_LABEL, JobSetConditionView, JobSetStatus,
    JobSetStatusView, JobSetView, REPLICATED_JOB_NAME_LABEL, RESTART_ATTEMPT_LABEL,
    ReplicatedJobStatusView,
};

/// The API group of JobSets.
pub const JOBSET_GROUP: &str = "jobset.x-k8s.io";
/// The version of JobSets kubeferry creates and reads.
pub const JOBSET_VERSION: &str = "v1alpha2";
/// The kind.
pub const JOBSET_KIND: &str = crate::JobKind::JobSet.object_kind();
/// The resource (plural).
pub const JOBSETS: &str = "jobsets";
