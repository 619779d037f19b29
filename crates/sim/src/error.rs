//! Errors of the simulated cluster's Rust API.

use std::path::PathBuf;

use crate::api::status::ApiError;

/// An error starting, configuring or driving the simulated cluster.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig {}", path.display())]
    WriteKubeconfig {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is not usable.
    #[error("invalid simulated cluster configuration: {0}")]
    Config(String),
    /// An API operation failed (e.g. the pod to evict does not exist).
    #[error("{}", .0.message)]
    Api(#[from] ApiError),
}
