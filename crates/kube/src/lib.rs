//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.

pub mod manifest;

pub use manifest::{MAIN_CONTAINER, job_manifest};
