//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.
//!
//! # The shape of a kind of job
//!
//! A kind of job (a container Job, a SparkApplication) is one module per layer:
//!
//! - in `kubeferry-core`, its lean views and its pure mapping (`container`, `spark`): from the
//!   views, `now` and the previous answer to a status, the actions the mapping asks for as data
//!   (record this outcome, stop or delete this object), and `recheck_at`, when time alone next
//!   changes the answer;
//! - here, its manifest builder (`manifest`), its watches of a namespace (`tracker.rs` in the
//!   kind's module), its settler (`settler.rs`: the one writer, carrying out the mapping's
//!   actions on watch events and at `recheck_at`), and its implementation of the protocols'
//!   `Jobs` trait (`protocol.rs`: status from the cache, a fresh read, change notifications,
//!   the attempts' pods), over which create-or-adopt, cancel, wait, tail and follow are written
//!   once;
//! - the [`Executor`] dispatches on the execution id's kind.
//!
//! Adding a kind means writing those modules and one arm per operation in the executor. What
//! a kind still writes for itself today, beyond its rules: its list and sweep, and the
//! bookkeeping of its tracker and settler (which share `tracker::reflector`, the timers and the
//! merged notifications of `settling.rs`, and the last-reported table).

mod answers;
pub mod cluster;
mod container;
pub mod error;
pub mod executor;
mod kind;
pub mod logs;
pub mod manifest;
mod objects;
mod protocol;
pub mod rbac;
mod records;
pub mod retry;
pub mod selector;
mod settling;
mod spark;
pub mod tracker;

pub use answers::{CancelOutcome, JobSummary, Orphan};
pub use cluster::{Cluster, ClusterSettings, KubeconfigLocation, Op};
pub use container::{ContainerSettings, SelectorEvent};
pub use error::{Error, Result};
pub use executor::{Executor, ExecutorSettings, Placement, generate_job_id};
pub use manifest::{MAIN_CONTAINER, job_manifest};
pub use records::RecordSettings;
pub use retry::RetryPolicy;
pub use spark::SparkSettings;

/// The backends and their watch caches, for this crate's own integration tests; not an
/// interface for library users (the [`Executor`] is).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::container::ContainerJobs;
    pub use crate::container::tracker::NamespaceWatch;
    pub use crate::spark::SparkJobs;
    pub use crate::spark::tracker::SparkNamespaceWatch;
}
