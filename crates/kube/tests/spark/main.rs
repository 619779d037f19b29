//! End-to-end tests of Spark jobs: the executor against a simulated cluster running both Spark
//! operators, through each operator's states to every outcome, the review points of the
//! Gravitino executor's review (one named test each), the operator's timeouts and evictions, RBAC,
//! cancel and logs, and what the CRDs' schemas and the Kubeflow webhook let through.

#[path = "../shared/cluster.rs"]
mod cluster;
mod lifecycle;
mod logs;
mod operations;
mod rbac;
#[path = "../shared/reads.rs"]
mod reads;
mod review;
mod schema;
mod support;
mod timeouts;
mod unwatched;
