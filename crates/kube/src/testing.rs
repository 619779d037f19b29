//! What the crate's own tests share: a connection to a simulated cluster, and a wait for a
//! condition.

use std::time::Duration;

use kubeferry_sim::SimCluster;

use crate::cluster::{Cluster, ClusterSettings, Kubeconfig};
use crate::retry::RetryPolicy;

/// A cluster of `sim`, as its administrator, retrying fast.
pub(crate) async fn connect(sim: &SimCluster) -> Cluster {
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml("sim")).expect("parses");
    let settings = ClusterSettings {
        retry: RetryPolicy::fast(),
        ..ClusterSettings::default()
    };
    Cluster::from_kubeconfig(kubeconfig, None, Some("sim"), settings)
        .await
        .expect("connects")
}

/// Waits until `check` gives a value, at most 20 s.
pub(crate) async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
