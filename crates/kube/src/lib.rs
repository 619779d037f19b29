//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.
//!
//! # The shape of a kind of job
//!
//! A kind of job (a container Job, a SparkApplication, a JobSet, a bare pod) is one module per
//! layer, and implements one trait, `kind::Kind` (in the spirit of Kueue's `GenericJob`):
//!
//! - in `kubeferry-core`, its lean views and its pure mapping (`container`, `spark`, `jobset`,
//!   `pod`), over the kind-neutral observation model (`kubeferry_core::observation`: the
//!   metadata every managed object carries, `Observation`, `Mapped<A>` whose action `A` is
//!   data: record this outcome, stop or delete this object), with `recheck_at`, when time
//!   alone next changes the answer;
//! - here, its manifest builder (`manifest`), what it watches in a namespace (`tracker.rs` in
//!   the kind's module, implementing `kind::Watches`), and its `Kind` implementation: how its
//!   objects are found, read and listed, what its mapping reads besides its object, the
//!   mapping, and how its actions are carried out.
//!
//! Everything else is written once over the trait: the status query, the lookup on a cache
//! miss, the evaluation loop and the settler of each watched namespace, the one writer that
//! carries out the mapping's actions on watch events and at `recheck_at` and keeps each ended
//! job's outcome record (`evaluating.rs`); create-or-adopt, annotate and delete
//! (`objects.rs`); cancel, tail, follow, list and sweep (`protocol.rs`); the wait for the end
//! (`executor.rs`); the table of watched namespaces and last answers (`tracker::Namespaces`); the
//! final answer of a job that ended (`Kind::final_answer`, from the outcome records of
//! `records.rs`); health. The [`Executor`] holds every kind in one table (`kinds.rs`): each
//! operation is a lookup by the execution id's kind, or a loop over the table.
//!
//! ## Adding a kind
//!
//! The bare pod (`pod/`, and `pod` in `kubeferry-core`) is the smallest kind: follow it.
//!
//! 1. `kubeferry-core`: its job file section (`spec`), its views and its mapping, returning
//!    `Mapped<YourAction>`;
//! 2. here: its manifest, its `Watches` (a `Reflector` per resource it watches), and
//!    `impl Kind`: what it keeps (`Common`, built by `Common::build`), how its objects are
//!    found (`watch`, `read`, `attempts`, `listed`, `managed`, `object_names`, `matching`,
//!    `observed`, `fetched`), its views and what its mapping reads besides the object, the
//!    mapping (`map`), and how its actions are carried out when they ask more than the shared
//!    `RecordOutcomeAndDelete` (`act`); where it differs from the defaults, whether the cluster
//!    serves it, its watches' health, the part whose log is the job's log;
//! 3. its entry in the table of kinds (`kinds::Kinds`: a field, an arm of `get`, an arm of
//!    each of the submission's matches on the job file's kind), its permissions in `rbac`,
//!    and its `JobKind`.

pub mod cluster;
mod container;
mod describe;
pub mod error;
mod evaluating;
pub mod executor;
mod jobset;
mod kind;
mod kinds;
mod replies;
/// How much of a job's log to read ([`Executor::tail`], [`Executor::follow`]).
pub mod logs {
    pub use crate::pod_logs::{FollowOptions, Tail, TailOptions};
}
pub mod manifest;
mod objects;
mod pod;
mod pod_logs;
mod protocol;
pub mod rbac;
mod records;
pub mod retry;
pub mod selector;
mod settling;
mod spark;
#[cfg(test)]
mod testing;
pub mod tracker;

pub use cluster::{Cluster, ClusterSettings, KubeconfigLocation};
pub use container::{ContainerSettings, SelectorEvent};
pub use error::{Error, Result};
pub use executor::{Executor, ExecutorSettings, NamespaceHealth, Subscription, generate_job_id};
pub use jobset::JobSetSettings;
pub use manifest::{MAIN_CONTAINER, job_manifest};
pub use records::RecordSettings;
pub use replies::{CancelOutcome, Description, DryRun, JobSummary, Orphan, Placement, Submission};
pub use retry::RetryPolicy;
pub use spark::SparkSettings;

/// The log follower and the container and Spark backends' watch caches, for this crate's own
/// integration tests; not an interface for library users (the [`Executor`] is).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::container::ContainerJobs;
    pub use crate::container::tracker::NamespaceWatch;
    pub use crate::pod_logs::{LogTarget, follow};
    pub use crate::spark::SparkJobs;
    pub use crate::spark::tracker::SparkNamespaceWatch;
}
