//! What the end-to-end tests of both kinds share: where their jobs run, fast connection settings, an executor on the simulated cluster, and polling with a deadline.

use std::future::Future;
use std::time::Duration;

use kubeferry_kube::cluster::Kubeconfig;
use kubeferry_kube::tracker::{ReflectorSettings, Watching};
use kubeferry_kube::{Cluster, ClusterSettings, Executor, ExecutorSettings, RetryPolicy};
use kubeferry_sim::SimCluster;

/// The namespace the tests run their jobs in.
pub const NS: &str = "default";
/// The cluster's name in execution ids.
pub const CLUSTER: &str = "e2e";

/// Settings that make every retry and recheck take milliseconds (each kind's support module
/// builds them with its `Settings::fast`).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The cluster connection's.
    pub cluster: ClusterSettings,
    /// The executor's.
    pub executor: ExecutorSettings,
}

/// A connection with tiny backoffs, that counts the API server unreachable after
/// `unreachable_window`.
pub fn fast_cluster(unreachable_window: Duration) -> ClusterSettings {
    ClusterSettings {
        retry: RetryPolicy {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(50),
            deadline: Duration::from_secs(3),
        },
        unreachable_window,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(10),
    }
}

/// Watches that the tests' runs never see end, and readers that wait briefly and look again often.
pub fn fast_watching() -> Watching {
    Watching {
        reflector: ReflectorSettings {
            watch_timeout: Duration::from_secs(60),
            ..ReflectorSettings::default()
        },
        sync_timeout: Duration::from_secs(5),
        recheck_interval: Duration::from_millis(50),
    }
}

/// An executor connected to `sim` with `token`.
pub async fn executor_as(sim: &SimCluster, token: &str, settings: &Settings) -> Executor {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml_with_token("e2e", token))
        .expect("the kubeconfig parses");
    let cluster =
        Cluster::from_kubeconfig(kubeconfig, None, Some(CLUSTER), settings.cluster.clone())
            .await
            .expect("the cluster is configured");
    Executor::new(cluster, settings.executor.clone())
}

/// Polls `check` every `poll` until it gives a value; fails the test after `deadline`.
pub async fn eventually_within<T, F, Fut>(
    deadline: Duration,
    poll: Duration,
    what: &str,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(poll).await;
    }
}
