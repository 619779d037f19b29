//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.

mod answers;
pub mod cluster;
pub mod container;
pub mod error;
pub mod executor;
pub mod logs;
pub mod manifest;
mod protocol;
pub mod rbac;
pub mod retry;
pub mod selector;
mod settling;
pub mod spark;
pub mod tracker;

pub use answers::{CancelOutcome, JobSummary, Orphan};
pub use cluster::{Cluster, ClusterSettings, KubeconfigLocation, Op};
pub use container::{ContainerSettings, SelectorEvent};
pub use error::{Error, Result};
pub use executor::{Executor, ExecutorSettings, Placement, generate_job_id};
pub use manifest::{MAIN_CONTAINER, job_manifest};
pub use retry::RetryPolicy;
pub use spark::{SparkJobs, SparkSettings};
