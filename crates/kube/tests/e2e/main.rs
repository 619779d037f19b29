//! End-to-end tests of the container job backend against the simulated cluster: every outcome
//! a job can have, submission and cancel under lost responses and races, API faults, RBAC, logs,
//! and the cost of tracking many jobs.
//!
//! Each test starts its own simulated cluster; jobs run as local processes of its kubelet.

#[path = "../shared/cluster.rs"]
mod cluster;
#[path = "../shared/reads.rs"]
mod reads;
mod support;

mod cancel;
mod describe;
mod dry_run;
mod faults;
mod fidelity;
mod indexed;
mod jobset;
mod logs;
mod outcomes;
mod pod;
mod rbac;
mod records;
mod scale;
mod settler;
mod sidecars;
mod submit;
mod unwatched;
