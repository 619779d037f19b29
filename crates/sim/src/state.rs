//! The shared state of a running cluster: configuration, store, served types, identities,
//! fault rules, counters and container logs.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::broadcast;

use crate::auth::Authenticator;
use crate::config::SimConfig;
use crate::faults::{Counters, Faults, SocketControl, WatchControl};
use crate::node::logs::LogStore;
use crate::node::process::ProcessTable;
use crate::node::workers::Kubelet;
use crate::resources::Registry;
use crate::store::Store;

/// Everything the server, the controllers and the Rust API share.
pub struct State {
    /// The configuration the cluster started with.
    pub config: SimConfig,
    /// The objects.
    pub store: Store,
    /// The served types.
    pub registry: Registry,
    /// Tokens and identities.
    pub auth: Authenticator,
    /// Fault rules.
    pub faults: Faults,
    /// Request counters.
    pub counters: Counters,
    /// Container logs.
    pub logs: LogStore,
    /// Running container processes.
    pub processes: ProcessTable,
    /// The kubelet's pod workers and down nodes.
    pub kubelet: Kubelet,
    /// Control of the listening socket.
    pub control: SocketControl,
    /// Commands to open watch streams (stall, cut, expire).
    pub watch_control: broadcast::Sender<WatchControl>,
    /// TLS material when HTTPS is served.
    pub tls: Option<crate::tls::Tls>,
    /// Names of recorded events by what they say (so repeats are counted, not duplicated).
    pub event_names: parking_lot::Mutex<std::collections::HashMap<u64, String>>,
    /// Where pods get their scratch working directories (removed when the cluster stops).
    pub pods_dir: std::path::PathBuf,
    /// The bound port.
    pub port: OnceLock<u16>,
    next_ip: AtomicU32,
}

impl State {
    /// State for a configuration (nothing started yet).
    pub fn new(config: SimConfig, admin_token: String, tls: Option<crate::tls::Tls>) -> Self {
        let (watch_control, _) = broadcast::channel(64);
        State {
            store: Store::new(config.watch_history),
            registry: Registry::new(),
            auth: Authenticator::new(admin_token, config.auth),
            faults: Faults::default(),
            counters: Counters::default(),
            logs: LogStore::new(config.log_limit_bytes),
            processes: ProcessTable::default(),
            kubelet: Kubelet::default(),
            control: SocketControl::default(),
            watch_control,
            tls,
            event_names: parking_lot::Mutex::new(std::collections::HashMap::new()),
            pods_dir: config
                .work_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir)
                .join("kubeferry-sim")
                .join(format!(
                    "{}-{}",
                    std::process::id(),
                    crate::store::meta::random_suffix(8)
                )),
            port: OnceLock::new(),
            next_ip: AtomicU32::new(2),
            config,
        }
    }

    /// A fresh pod IP (10.244.x.y).
    pub fn allocate_pod_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 2)
    }
}
