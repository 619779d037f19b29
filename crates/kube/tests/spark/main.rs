//! End-to-end tests of Spark jobs: the executor against a simulated cluster running both Spark
//! operators, through each operator's states to every outcome, the review points of the
//! Gravitino executor's review (one named test each), the operator's timeouts and evictions, RBAC,
//! cancel and logs.

mod lifecycle;
mod logs;
mod operations;
mod rbac;
mod review;
mod support;
mod timeouts;
