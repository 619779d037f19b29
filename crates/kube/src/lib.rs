//! kubeferry's Kubernetes backend: every Kubernetes API call kubeferry makes lives in this crate.
