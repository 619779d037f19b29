//! kubeferry: run batch jobs on Kubernetes and know exactly how they ended.
//!
//! This facade re-exports the layers: [`core`] (specs, ids, the status model; no I/O) and
//! [`kube`] (the Kubernetes backend).

pub use kubeferry_core as core;
pub use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
pub use kubeferry_kube as kube;
