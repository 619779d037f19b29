//! A simulated Kubernetes cluster for tests, benchmarks and the embedded default of the CLI.
//!
//! [`SimCluster::start`] binds 127.0.0.1 and serves the Kubernetes API over real HTTP/1.1, so
//! kube-rs, `kubectl` and any other client work against it. Behind the API run a Job
//! controller, a scheduler, a garbage collector and a kubelet that runs each container's
//! command as a local process and keeps its output as the container log. Faults (errors,
//! latency, dropped connections, lost responses, stalled or expired watches, unreachability,
//! restarts) and disruptions (eviction, node loss) can be injected from Rust or through the
//! admin endpoints under `/sim`.
//!
//! Because the kubelet runs commands on this machine, the cluster listens on 127.0.0.1 only and
//! requires the bearer token it writes into its kubeconfig unless `SimConfig::auth` is off.
//!
//! Layout: [`api`] (routing, discovery, Status answers, patches, selectors, watch, logs,
//! tables), [`error`] (the Rust API's errors and the Kubernetes API errors of operations),
//! [`store`] (objects and history), [`ops`] (create/update/delete semantics), [`kinds`]
//! (per-kind defaults and validation, admission webhooks included), [`controllers`] (job,
//! scheduler, kubelet, gc), [`auth`] (tokens, RBAC), [`faults`], [`config`], [`server`],
//! [`cluster`]. Modules import each other as a tree: the domain ([`ops`], [`kinds`],
//! [`controllers`]) never imports [`api`], and [`config`] imports none of what it configures.

pub mod api;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod controllers;
pub mod crd_schema;
pub mod crds;
pub mod disruption;
pub mod error;
pub mod faults;
pub(crate) mod indexes;
pub mod kinds;
pub mod node;
mod nodes;
pub mod ops;
pub mod quantity;
mod quota;
pub mod resources;
pub mod server;
pub mod state;
pub mod store;
pub mod tls;

pub use cluster::SimCluster;
pub use config::{CrdBundle, NodeConfig, SimArgs, SimConfig, TaintConfig, Timings};
pub use error::SimError;
pub use faults::{CounterKey, FaultAction, FaultId, FaultMatch, FaultRule};
