//! kubeferry: run batch jobs on Kubernetes and know exactly how they ended.
//!
//! An [`Executor`](kube::Executor) submits a job under your own job id, answers its status
//! from watch caches, waits for its end, cancels it and reads its log. This example runs a
//! real job on a simulated cluster (`kubeferry-sim`, started in the process); with a real
//! cluster, read the kubeconfig with [`KubeconfigLocation`](kube::KubeconfigLocation) instead.
//!
//! ```
//! use kubeferry::core::spec;
//! use kubeferry::kube::cluster::Kubeconfig;
//! use kubeferry::kube::logs::TailOptions;
//! use kubeferry::kube::{Cluster, ClusterSettings, Executor, ExecutorSettings};
//! use kubeferry::JobState;
//! use kubeferry_sim::{SimCluster, SimConfig};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A simulated cluster on 127.0.0.1: its kubelet runs each container's command locally.
//! let sim = SimCluster::start(SimConfig::default()).await?;
//! let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml("sim"))?;
//! let cluster =
//!     Cluster::from_kubeconfig(kubeconfig, None, None, ClusterSettings::default()).await?;
//! let executor = Executor::new(cluster, ExecutorSettings::default());
//!
//! // A job file, checked whole before anything is created.
//! let job = spec::load(
//!     "hello.yaml",
//!     "name: hello\nimage: busybox:1.36\ncommand: [sh, -c, 'echo hello from kubeferry']\n",
//!     &Default::default(),
//! )?;
//!
//! // Submitting the same job id again answers the same run and creates nothing.
//! let id = executor.submit(&job, "hello-1", "default").await?;
//! assert_eq!(executor.submit(&job, "hello-1", "default").await?, id);
//!
//! let info = executor.wait(&id, None, |info| println!("{id}: {}", info.state)).await?;
//! assert_eq!(info.state, JobState::Succeeded);
//! assert_eq!(info.exit_code, Some(0));
//!
//! let tail = executor.tail(&id, &TailOptions::default()).await?;
//! assert_eq!(tail.log, "hello from kubeferry\n");
//! assert_eq!(tail.warning, None);
//! # Ok(())
//! # }
//! ```
//!
//! The facade re-exports the layers: [`core`] (job files, execution ids, the status model; no
//! I/O) and [`kube`] (every Kubernetes call: submission, the watch-based tracker, cancel, logs,
//! sweep, RBAC).

pub use kubeferry_core as core;
pub use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
pub use kubeferry_kube as kube;
