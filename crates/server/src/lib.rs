//! kubeferry's HTTP service: a stateless JSON API over the executor, for callers in any
//! language. All job state lives in Kubernetes, so any number of replicas serve the same jobs and
//! any replica may stop at any moment. `docs/service.md` documents running and calling
//! it; `/openapi.json` describes the API.
//!
//! The command line serves it as `kubeferry serve` by flattening [`ServeArgs`] and calling
//! [`serve`]; its own `--kubeconfig`, `--context`, `--cluster-name` and `-n` are passed in with
//! [`ServeArgs::with_cluster`].

pub mod api;
pub mod app;
pub mod auth;
pub mod clusters;
pub mod config;
pub mod error;
pub mod history;
pub mod metrics;
pub mod middleware;
pub mod request_id;
pub mod server;
pub mod templates;
pub mod tls;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::ValueEnum;
use tracing::info;

pub use config::{Config, ConfigError, FileConfig, Overrides};
pub use server::{Running, StartError, start};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors).
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

/// The cluster choices of a surrounding command line, applied like the flags of their own.
#[derive(Clone, Debug, Default)]
pub struct InheritedCluster {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--cluster-name`.
    pub cluster_name: Option<String>,
    /// `-n`: the one namespace to serve when no namespaces are configured otherwise.
    pub namespace: Option<String>,
}

/// `kubeferry serve`: every setting of the configuration file that is commonly set per
/// deployment, as a flag and an environment variable; a flag or variable given replaces the
/// file's value.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// The configuration file (YAML; see docs/service.md).
    #[arg(long = "config", env = "KUBEFERRY_CONFIG", value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// The address to listen on (default 127.0.0.1:8080).
    #[arg(long, env = "KUBEFERRY_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// The namespaces served, comma-separated; the first is the default.
    #[arg(
        long,
        env = "KUBEFERRY_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS,..."
    )]
    pub namespaces: Vec<String>,
    /// A prefix for object names (a DNS label of at most 24 characters).
    #[arg(long, env = "KUBEFERRY_NAME_PREFIX", value_name = "PREFIX")]
    pub name_prefix: Option<String>,
    /// The directory of named job templates.
    #[arg(long, env = "KUBEFERRY_TEMPLATES_DIR", value_name = "DIR")]
    pub templates_dir: Option<PathBuf>,
    /// The bearer tokens file (re-read when it changes, and on SIGHUP).
    #[arg(long, env = "KUBEFERRY_TOKENS_FILE", value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Serve without authentication: every caller may use every namespace (development only).
    #[arg(long, env = "KUBEFERRY_ANONYMOUS")]
    pub anonymous: bool,
    /// Serve TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "KUBEFERRY_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "KUBEFERRY_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Connect to this API server URL instead of a kubeconfig context (needs a cluster name).
    #[arg(long, env = "KUBEFERRY_API_URL", value_name = "URL")]
    pub api_url: Option<String>,
    /// The API server's CA certificate (PEM), with --api-url.
    #[arg(long, env = "KUBEFERRY_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// A file holding the bearer token for --api-url, re-read when it changes.
    #[arg(long, env = "KUBEFERRY_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Connect with the pod's service account (running inside the cluster; needs a cluster name).
    #[arg(long, env = "KUBEFERRY_IN_CLUSTER")]
    pub in_cluster: bool,
    /// Longest a non-streaming request may take (e.g. 30s).
    #[arg(long, env = "KUBEFERRY_REQUEST_TIMEOUT", value_name = "DURATION")]
    pub request_timeout: Option<String>,
    /// Longest in-flight requests may take to finish at shutdown (e.g. 30s).
    #[arg(long, env = "KUBEFERRY_SHUTDOWN_TIMEOUT", value_name = "DURATION")]
    pub shutdown_timeout: Option<String>,
    /// How log lines are written.
    #[arg(long, env = "KUBEFERRY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Cluster choices of the surrounding command line.
    #[arg(skip)]
    pub cluster: InheritedCluster,
}

impl ServeArgs {
    /// Applies the surrounding command line's cluster flags.
    pub fn with_cluster(mut self, cluster: InheritedCluster) -> Self {
        self.cluster = cluster;
        self
    }

    /// The configuration: the file (if any), then these flags and variables over it.
    pub fn config(&self) -> Result<Config, ConfigError> {
        let file = match &self.config_file {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        let namespaces = if !self.namespaces.is_empty() {
            Some(self.namespaces.clone())
        } else if file.namespaces.is_empty() {
            self.cluster.namespace.clone().map(|n| vec![n])
        } else {
            None
        };
        let overrides = Overrides {
            listen: self.listen.clone(),
            namespaces,
            name_prefix: self.name_prefix.clone(),
            templates_dir: self.templates_dir.clone(),
            tokens_file: self.tokens_file.clone(),
            anonymous: self.anonymous,
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            cluster_name: self.cluster.cluster_name.clone(),
            kubeconfig: self.cluster.kubeconfig.clone(),
            context: self.cluster.context.clone(),
            api_url: self.api_url.clone(),
            ca_file: self.ca_file.clone(),
            token_file: self.token_file.clone(),
            in_cluster: self.in_cluster,
            request_timeout: self.request_timeout.clone(),
            shutdown_timeout: self.shutdown_timeout.clone(),
            environment: config::path_variables(
                std::env::vars_os()
                    .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
            ),
        };
        Config::resolve(file, overrides)
    }
}

/// Sets up structured logs (JSON lines by default; `RUST_LOG` filters, default `info`), unless
/// the process already has a subscriber.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        // Colours only for a person at a terminal: a log file or a collector gets plain text.
        LogFormat::Text => builder.with_ansi(colour_wanted()).try_init(),
    };
}

/// Whether to colour text written to stderr: only on a terminal, and not when `NO_COLOR` is set
/// (<https://no-color.org>).
pub fn colour_wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Runs the service until SIGTERM or Ctrl-C, then shuts down gracefully.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let config = args.config()?;
    let mut running = start(config).await.context("cannot start the service")?;
    tokio::select! {
        result = running.wait() => {
            result.context("the server stopped")?;
            return Ok(());
        }
        signal = stop_signal() => info!(message = "stop signal received", signal),
    }
    running.shutdown().await.context("shutting down")?;
    info!(message = "stopped");
    Ok(())
}

/// Resolves on SIGTERM (what Kubernetes and `kill` send) or SIGINT (Ctrl-C), naming which: the
/// service's and the simulated cluster's servers stop alike on either.
pub async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

#[cfg(test)]
mod tests;
