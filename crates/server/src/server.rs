//! Starting and stopping the service: connect the clusters, start the namespaces' watches,
//! listen (with TLS when configured), and at shutdown stop being ready, let in-flight requests
//! finish and end the streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kubeferry_core::container::MappingConfig;
use kubeferry_core::spark::SparkMappingConfig;
use kubeferry_kube::tracker::{ReflectorSettings, Watching};
use kubeferry_kube::{
    ClusterSettings, ContainerSettings, Executor, ExecutorSettings, JobSetSettings, RecordSettings,
    RetryPolicy, SparkSettings,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::api;
use crate::app::{App, ClusterHandle};
use crate::auth::Authenticator;
use crate::clusters;
use crate::config::{AuthConfig, ClusterConfig, Config};
use crate::metrics::{ClusterSource, Metrics};
use crate::templates::Templates;
use crate::tls;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A cluster could not be connected.
    #[error(transparent)]
    Connect(#[from] clusters::ConnectError),
    /// The tokens file is unusable.
    #[error(transparent)]
    Tokens(#[from] crate::auth::TokensError),
    /// TLS is misconfigured.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Two clusters ended up with the same name.
    #[error(
        "clusters[{index}]: the name {name:?} is taken by another cluster; set clusters[].name"
    )]
    DuplicateCluster {
        /// The second cluster's index.
        index: usize,
        /// The name.
        name: String,
    },
}

/// The executor settings a configuration asks for, for the cluster `cluster_config` (its Spark
/// operator). Container jobs, bare pods and Spark applications get the same name prefix; every
/// kind the same watch, tombstone, absence, sync and recheck timings.
pub fn executor_settings(
    config: &Config,
    cluster_config: &ClusterConfig,
) -> (ClusterSettings, ExecutorSettings) {
    let t = &config.timeouts;
    let cluster = ClusterSettings {
        retry: RetryPolicy {
            deadline: t.retry_deadline,
            ..RetryPolicy::default()
        },
        unreachable_window: t.unreachable_window,
        connect_timeout: t.connect,
        read_timeout: t.read,
    };
    // Every kind watches, waits and looks again alike.
    let watching = Watching {
        reflector: ReflectorSettings {
            watch_timeout: t.watch,
            tombstone_ttl: t.tombstone,
            absent_ttl: t.absent,
            restart: RetryPolicy {
                cap: t.watch_restart,
                ..ReflectorSettings::default().restart
            },
            ..ReflectorSettings::default()
        },
        sync_timeout: t.sync,
        recheck_interval: t.recheck,
    };
    let mapping = MappingConfig {
        image_pull_grace: t.image_pull_grace,
        create_container_error_grace: t.create_container_error_grace,
        pending_timeout: t.pending,
        pod_status_wait: t.pod_status_wait,
    };
    let executor = ExecutorSettings {
        container: ContainerSettings {
            mapping: mapping.clone(),
            watching: watching.clone(),
            name_prefix: config.name_prefix.clone(),
            ..ContainerSettings::default()
        },
        spark: SparkSettings {
            mapping: SparkMappingConfig {
                no_status_timeout: t.no_status,
                driver_status_wait: t.pod_status_wait,
            },
            watching: watching.clone(),
            name_prefix: config.name_prefix.clone(),
            default_operator: cluster_config.spark_operator,
            ..SparkSettings::default()
        },
        jobset: JobSetSettings {
            mapping,
            watching,
            ..JobSetSettings::default()
        },
        records: RecordSettings {
            retention: t.outcome_retention,
            name_hold: t.name_hold,
            keep_log: config.limits.keep_log,
            ..RecordSettings::default()
        },
    };
    (cluster, executor)
}

/// A running service.
pub struct Running {
    addr: SocketAddr,
    app: Arc<App>,
    stop: watch::Sender<bool>,
    serving: JoinHandle<std::io::Result<()>>,
    reloading: Option<JoinHandle<()>>,
    sampling: JoinHandle<()>,
    spark_watches: Vec<JoinHandle<()>>,
    shutdown_timeout: Duration,
    drain: Duration,
}

impl Running {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared state (for tests and embedding).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Stops: `/readyz` fails at once, the listener closes after the drain delay, streams end,
    /// and in-flight requests get the shutdown timeout to finish.
    pub async fn shutdown(self) -> std::io::Result<()> {
        info!(message = "shutting down", drain = ?self.drain, timeout = ?self.shutdown_timeout);
        self.app.start_draining();
        if !self.drain.is_zero() {
            tokio::time::sleep(self.drain).await;
        }
        let _ = self.stop.send(true);
        self.sampling.abort();
        if let Some(reloading) = &self.reloading {
            reloading.abort();
        }
        for starting in &self.spark_watches {
            starting.abort();
        }
        let mut serving = self.serving;
        match tokio::time::timeout(self.shutdown_timeout, &mut serving).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(std::io::Error::other(join)),
            Err(_) => {
                warn!(message = "in-flight requests did not finish in time; stopping anyway");
                serving.abort();
                Ok(())
            }
        }
    }

    /// Waits until the server stops on its own (it does not, unless it fails).
    pub async fn wait(&mut self) -> std::io::Result<()> {
        match (&mut self.serving).await {
            Ok(result) => result,
            Err(join) => Err(std::io::Error::other(join)),
        }
    }
}

/// Starts the service with `config`: connects the clusters, starts watching every namespace
/// and listens. Returns once it is listening (readiness follows when the watches have listed).
pub async fn start(config: Config) -> Result<Running, StartError> {
    let mut handles: Vec<ClusterHandle> = Vec::new();
    let mut spark_watches = Vec::new();
    for (index, cluster_config) in config.clusters.iter().enumerate() {
        let (cluster_settings, executor_settings) = executor_settings(&config, cluster_config);
        let connected = clusters::connect(index, cluster_config, cluster_settings).await?;
        let name = connected.cluster.name().to_string();
        if handles.iter().any(|h| h.name == name) {
            return Err(StartError::DuplicateCluster { index, name });
        }
        let executor = Executor::new(connected.cluster, executor_settings);
        // Watch every namespace from the start: readiness means the caches are synced, and the
        // first status query should not pay for a list. The Spark watches follow once the
        // installed operators are known.
        for namespace in &config.namespaces {
            executor.watch(namespace);
        }
        spark_watches.push(tokio::spawn(watch_spark(
            executor.clone(),
            config.namespaces.clone(),
            config.timeouts.retry_deadline,
        )));
        info!(message = "cluster connected", cluster = %name, url = %executor.cluster().url(), namespaces = ?config.namespaces);
        handles.push(ClusterHandle {
            name,
            executor,
            stats: connected.stats,
        });
    }
    let auth = match &config.auth {
        AuthConfig::Tokens { file } => Authenticator::from_file(file)?,
        AuthConfig::Anonymous => {
            warn!(
                message =
                    "serving WITHOUT authentication (auth.anonymous): any caller may run jobs"
            );
            Authenticator::anonymous()
        }
    };
    let metrics = Metrics::new(
        handles
            .iter()
            .map(|h| ClusterSource {
                name: h.name.clone(),
                stats: h.stats.clone(),
                executor: h.executor.clone(),
            })
            .collect(),
    );
    let (stop, stopped) = watch::channel(false);
    let app = Arc::new(App::new(
        handles,
        config.namespaces.clone(),
        Templates::new(config.templates_dir.clone()),
        auth.clone(),
        metrics,
        config.timeouts.clone(),
        config.limits.clone(),
        stopped.clone(),
    ));
    let sampling = {
        let app = app.clone();
        let mut stopped = stopped.clone();
        let interval = config.timeouts.state_sample;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    _ = tick.tick() => app.sample_states(),
                    _ = stopped.changed() => return,
                }
            }
        })
    };
    let reloading = (!auth.is_anonymous()).then(|| {
        let interval = config.timeouts.tokens_reload;
        tokio::spawn(reload_tokens(auth, interval))
    });

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let router = api::router(app.clone());
    let shutdown = {
        let stopped = stopped.clone();
        async move { crate::app::stopped(stopped).await }
    };
    let serving = match &config.tls {
        Some(tls_config) => {
            let server_config = tls::server_config(&tls_config.cert_file, &tls_config.key_file)?;
            let listener = tls::TlsListener::new(listener, server_config).map_err(|source| {
                StartError::Listen {
                    addr: config.listen,
                    source,
                }
            })?;
            tokio::spawn(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(shutdown)
                    .await
            })
        }
        None => tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }),
    };
    info!(message = "listening", %addr, tls = config.tls.is_some());
    Ok(Running {
        addr,
        app,
        stop,
        serving,
        reloading,
        sampling,
        spark_watches,
        shutdown_timeout: config.timeouts.shutdown,
        drain: config.timeouts.drain,
    })
}

/// Starts the Spark watches of every namespace: discovers the installed operators (retrying
/// every `pause` until the API server answers), then watches their SparkApplications and the
/// driver pods. Until then `/readyz` says the Spark watches have not started.
async fn watch_spark(executor: Executor, namespaces: Vec<String>, pause: Duration) {
    for namespace in &namespaces {
        loop {
            match executor.watch_spark(namespace).await {
                Ok(_) => break,
                Err(error) => {
                    warn!(message = "cannot start the Spark watches; retrying", namespace = %namespace, %error);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// Re-reads the tokens file every `interval`, and at once on SIGHUP.
async fn reload_tokens(auth: Authenticator, interval: Duration) {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        #[cfg(unix)]
        {
            let hup = async {
                match hangup.as_mut() {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tick.tick() => {}
                _ = hup => info!(message = "SIGHUP: re-reading the tokens file"),
            }
        }
        #[cfg(not(unix))]
        tick.tick().await;
        let auth = auth.clone();
        // Reading a file blocks; keep it off the request workers.
        let _ = tokio::task::spawn_blocking(move || auth.reload()).await;
    }
}
