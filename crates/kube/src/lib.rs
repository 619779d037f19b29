//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.

pub mod cluster;
pub mod error;
pub mod logs;
pub mod manifest;
pub mod rbac;
pub mod retry;
pub mod tracker;

pub use cluster::{Cluster, ClusterSettings, KubeconfigLocation, Op};
pub use error::{Error, Result};
pub use manifest::{MAIN_CONTAINER, job_manifest};
pub use retry::RetryPolicy;
