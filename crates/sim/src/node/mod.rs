//! What a simulated node holds for the kubelet: its containers' processes, their logs, memory and termination messages, and the pod workers; no controller logic, so that the cluster's state can keep them.

pub mod logs;
pub mod memory;
pub mod process;
pub mod termination;
pub mod workers;
