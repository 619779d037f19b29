//! The service's configuration: one YAML file (documented in `docs/service.md`), with
//! flags and environment variables (see [`crate::ServeArgs`]) overriding it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubeferry_core::id::is_dns_label;
use kubeferry_core::marks::{KeepLog, MAX_NAME_LEN};
use kubeferry_core::spark::SparkOperator;
use serde::Deserialize;

/// The longest name prefix accepted: object names are at most 63 characters and the rest is
/// the sanitised job id and its hash.
pub const MAX_NAME_PREFIX_LEN: usize = 24;

/// Why a configuration cannot be used; the message names the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML of the documented shape.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is wrong.
    #[error("configuration: {field}: {message}")]
    Invalid {
        /// The field, e.g. `clusters[0].apiUrl` or `namePrefix`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The configuration file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileConfig {
    /// `host:port` to listen on.
    pub listen: Option<String>,
    /// TLS; plain HTTP when absent.
    pub tls: Option<TlsFile>,
    /// Authentication.
    #[serde(default)]
    pub auth: AuthFile,
    /// The clusters jobs run on; execution ids name them.
    #[serde(default)]
    pub clusters: Vec<ClusterFile>,
    /// The namespaces jobs may run in (the first is the default).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// A prefix for the names of the objects created (a DNS label of at most 24 characters).
    pub name_prefix: Option<String>,
    /// The directory of named job templates.
    pub templates_dir: Option<PathBuf>,
    /// Timeouts and intervals.
    #[serde(default)]
    pub timeouts: TimeoutsFile,
    /// Limits.
    #[serde(default)]
    pub limits: LimitsFile,
}

/// `tls:` in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsFile {
    /// PEM certificate chain.
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
}

/// `auth:` in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthFile {
    /// The bearer tokens file.
    pub tokens_file: Option<PathBuf>,
    /// Serve without authentication (development only).
    #[serde(default)]
    pub anonymous: bool,
}

/// One entry of `clusters:` in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFile {
    /// The cluster's name in execution ids.
    pub name: Option<String>,
    /// A kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig context (default: the current one).
    pub context: Option<String>,
    /// The API server's URL (instead of a kubeconfig).
    pub api_url: Option<String>,
    /// The API server's CA certificate (PEM), with `apiUrl`.
    pub ca_file: Option<PathBuf>,
    /// A file holding the bearer token, re-read when it changes, with `apiUrl`.
    pub token_file: Option<PathBuf>,
    /// Use the pod's service account (running inside the cluster).
    #[serde(default)]
    pub in_cluster: bool,
    /// The Spark operator of Spark jobs whose file names none (`apache` or `kubeflow`);
    /// default: the one whose CRD the cluster has (apache when it has both).
    pub spark_operator: Option<SparkOperator>,
}

/// `timeouts:` in the file; every value is a duration such as `500ms`, `10s`, `5m`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeoutsFile {
    /// Longest a non-streaming request may take.
    pub request: Option<String>,
    /// Longest in-flight requests may take to finish at shutdown.
    pub shutdown: Option<String>,
    /// How long `/readyz` reports "not ready" before the listener closes at shutdown.
    pub drain: Option<String>,
    /// How long a query waits for a namespace's first list before asking the API server, and
    /// an event stream follows a job that left its selector for its end.
    pub sync: Option<String>,
    /// The server-side timeout of watches (a watch silent for longer is restarted).
    pub watch: Option<String>,
    /// Longest a connection to the API server may take to open.
    pub connect: Option<String>,
    /// Longest a single non-streaming Kubernetes request may take.
    pub read: Option<String>,
    /// How long a failing Kubernetes operation is retried.
    pub retry_deadline: Option<String>,
    /// How long queries fail fast after the API server was found unreachable.
    pub unreachable_window: Option<String>,
    /// How often waiters re-check time-based rules (grace periods).
    pub recheck: Option<String>,
    /// How long an image may fail to pull before the job fails.
    pub image_pull_grace: Option<String>,
    /// How long container creation may fail before the job fails.
    pub create_container_error_grace: Option<String>,
    /// How long a job may wait for a node before it fails (default: forever).
    pub pending: Option<String>,
    /// How long a Job's verdict waits for its pod's final status.
    pub pod_status_wait: Option<String>,
    /// The longest backoff before a failed watch is started again (it grows to this).
    pub watch_restart: Option<String>,
    /// How long deleted jobs are remembered by the watch cache.
    pub tombstone: Option<String>,
    /// How long a job the API server said it does not have is answered "no such job" without
    /// asking again (while the watches are current).
    pub absent: Option<String>,
    /// How long a job's outcome record is kept after it ended (a job id submitted again within
    /// it answers the first run and never runs twice).
    pub outcome_retention: Option<String>,
    /// How long a job's object kubeferry deleted (a cancel, a job it stopped) keeps its name
    /// after its record (a submission of its job id still on its way then runs nothing); at
    /// least `read`.
    pub name_hold: Option<String>,
    /// How long a SparkApplication may go without any status from its operator before the
    /// job fails (and the application is deleted).
    pub no_status: Option<String>,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Option<String>,
    /// How long a log follow waits before re-opening a stream that ended early.
    pub follow_reopen: Option<String>,
    /// How long a followed log may stay silent before the container is looked at again.
    pub follow_idle: Option<String>,
    /// How often the tokens file is checked for changes.
    pub tokens_reload: Option<String>,
    /// How often the count of jobs in each state is sampled for the dashboard's last hour.
    pub state_sample: Option<String>,
}

/// `limits:` in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsFile {
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: Option<usize>,
    /// The most log bytes one tail returns.
    pub max_log_bytes: Option<u64>,
    /// The page size of lists when the caller gives none.
    pub default_page_size: Option<usize>,
    /// The largest page size a caller may ask for.
    pub max_page_size: Option<usize>,
    /// Keep this many last lines of a job's log with its outcome, for jobs whose file does not
    /// say (`keepLog`); off when absent.
    pub keep_log_lines: Option<u64>,
    /// The most bytes of them kept (default 16384, at most 65536).
    pub keep_log_bytes: Option<u64>,
}

/// Where a cluster's connection comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterSource {
    /// A kubeconfig context.
    Kubeconfig {
        /// The file (default: `$KUBECONFIG`, then `~/.kube/config`).
        path: Option<PathBuf>,
        /// The context (default: the current one).
        context: Option<String>,
    },
    /// An API server URL with an optional CA and bearer token file.
    ApiUrl {
        /// The URL.
        url: String,
        /// The CA certificate (PEM).
        ca_file: Option<PathBuf>,
        /// The bearer token file, re-read when it changes.
        token_file: Option<PathBuf>,
    },
    /// The pod's own service account.
    InCluster,
}

/// One cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The name in execution ids; for a kubeconfig, the context's cluster name when `None`.
    pub name: Option<String>,
    /// How to connect.
    pub source: ClusterSource,
    /// The Spark operator of Spark jobs whose file names none; `None`: the one installed.
    pub spark_operator: Option<SparkOperator>,
}

/// TLS files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
}

/// Authentication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthConfig {
    /// Bearer tokens from a file.
    Tokens {
        /// The file.
        file: PathBuf,
    },
    /// No authentication: every caller may use every namespace.
    Anonymous,
}

/// Every timeout and interval; all configurable so that tests run in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest a non-streaming request may take.
    pub request: Duration,
    /// Longest in-flight requests may take to finish at shutdown.
    pub shutdown: Duration,
    /// How long `/readyz` reports "not ready" before the listener closes at shutdown.
    pub drain: Duration,
    /// How long a query waits for a namespace's first list, and an event stream follows a job
    /// that left its selector for its end.
    pub sync: Duration,
    /// The server-side timeout of watches.
    pub watch: Duration,
    /// Longest a connection to the API server may take to open.
    pub connect: Duration,
    /// Longest a single non-streaming Kubernetes request may take.
    pub read: Duration,
    /// How long a failing Kubernetes operation is retried.
    pub retry_deadline: Duration,
    /// How long queries fail fast after the API server was found unreachable.
    pub unreachable_window: Duration,
    /// How often waiters re-check time-based rules.
    pub recheck: Duration,
    /// How long an image may fail to pull before the job fails.
    pub image_pull_grace: Duration,
    /// How long container creation may fail before the job fails.
    pub create_container_error_grace: Duration,
    /// How long a job may wait for a node before it fails; `None` waits forever.
    pub pending: Option<Duration>,
    /// How long a Job's verdict waits for its pod's final status.
    pub pod_status_wait: Duration,
    /// The longest backoff before a failed watch is started again (it grows to this from
    /// 800 ms, with full jitter, as client-go's reflector does).
    pub watch_restart: Duration,
    /// How long deleted jobs are remembered by the watch cache.
    pub tombstone: Duration,
    /// How long a job the API server said it does not have is answered "no such job" without
    /// asking again (while the watches are current).
    pub absent: Duration,
    /// How long a job's outcome record is kept after it ended.
    pub outcome_retention: Duration,
    /// How long a job's object kubeferry deleted keeps its name after its record.
    pub name_hold: Duration,
    /// How long a SparkApplication may go without any status before the job fails.
    pub no_status: Duration,
    /// How often an idle event stream sends a keep-alive comment.
    pub keep_alive: Duration,
    /// How long a log follow waits before re-opening a stream that ended early.
    pub follow_reopen: Duration,
    /// How long a followed log may stay silent before the container is looked at again (and
    /// the stream re-opened if it still runs).
    pub follow_idle: Duration,
    /// How often the tokens file is checked for changes.
    pub tokens_reload: Duration,
    /// How often the count of jobs in each state is sampled for the dashboard's last hour.
    pub state_sample: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(30),
            shutdown: Duration::from_secs(30),
            drain: Duration::ZERO,
            // A first query on a namespace whose watch cannot list waits `sync`, then retries
            // a GET until `retry_deadline`: both well inside `request`, so that the caller
            // gets a 503 naming the cause rather than a 504.
            sync: Duration::from_secs(5),
            watch: Duration::from_secs(60),
            connect: Duration::from_secs(5),
            read: Duration::from_secs(30),
            retry_deadline: Duration::from_secs(10),
            unreachable_window: Duration::from_secs(10),
            recheck: Duration::from_secs(1),
            image_pull_grace: Duration::from_secs(180),
            create_container_error_grace: Duration::from_secs(180),
            pending: None,
            pod_status_wait: Duration::from_secs(10),
            watch_restart: Duration::from_secs(30),
            tombstone: Duration::from_secs(15 * 60),
            absent: Duration::from_secs(10),
            outcome_retention: Duration::from_secs(7 * 24 * 3600),
            name_hold: Duration::from_secs(30),
            no_status: Duration::from_secs(10 * 60),
            keep_alive: Duration::from_secs(15),
            follow_reopen: Duration::from_millis(500),
            follow_idle: Duration::from_secs(60),
            tokens_reload: Duration::from_secs(10),
            state_sample: Duration::from_secs(60),
        }
    }
}

/// Limits on what callers may ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The most log bytes one tail returns.
    pub max_log_bytes: u64,
    /// The page size of lists when the caller gives none.
    pub default_page_size: usize,
    /// The largest page size a caller may ask for.
    pub max_page_size: usize,
    /// How much of its log a job's outcome record keeps when its file does not say.
    pub keep_log: Option<KeepLog>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_log_bytes: 1024 * 1024,
            default_page_size: 100,
            max_page_size: 1000,
            keep_log: None,
        }
    }
}

/// The configuration in force: the file, overridden by flags and the environment, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// TLS; plain HTTP when `None`.
    pub tls: Option<TlsConfig>,
    /// Authentication.
    pub auth: AuthConfig,
    /// The clusters; the first is where jobs go when a submission names none.
    pub clusters: Vec<ClusterConfig>,
    /// The namespaces served; the first is where jobs go when neither the caller nor the job
    /// file names one.
    pub namespaces: Vec<String>,
    /// A prefix for object names (a DNS label of at most 24 characters, or empty).
    pub name_prefix: String,
    /// The directory of named job templates.
    pub templates_dir: Option<PathBuf>,
    /// Timeouts and intervals.
    pub timeouts: Timeouts,
    /// Limits.
    pub limits: Limits,
}

/// Values given as flags or environment variables; each one given replaces the file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `listen`.
    pub listen: Option<String>,
    /// `namespaces`.
    pub namespaces: Option<Vec<String>>,
    /// `namePrefix`.
    pub name_prefix: Option<String>,
    /// `templatesDir`.
    pub templates_dir: Option<PathBuf>,
    /// `auth.tokensFile`.
    pub tokens_file: Option<PathBuf>,
    /// `auth.anonymous`.
    pub anonymous: bool,
    /// `tls.certFile`.
    pub tls_cert: Option<PathBuf>,
    /// `tls.keyFile`.
    pub tls_key: Option<PathBuf>,
    /// The first cluster's `name`.
    pub cluster_name: Option<String>,
    /// The first cluster's `kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// The first cluster's `context`.
    pub context: Option<String>,
    /// The first cluster's `apiUrl`.
    pub api_url: Option<String>,
    /// The first cluster's `caFile`.
    pub ca_file: Option<PathBuf>,
    /// The first cluster's `tokenFile`.
    pub token_file: Option<PathBuf>,
    /// The first cluster's `inCluster`.
    pub in_cluster: bool,
    /// `timeouts.request`.
    pub request_timeout: Option<String>,
    /// `timeouts.shutdown`.
    pub shutdown_timeout: Option<String>,
    /// Variables that set any timeout or limit by its path: `KUBEFERRY_TIMEOUTS_<NAME>` and
    /// `KUBEFERRY_LIMITS_<NAME>`, the key in upper snake case (`KUBEFERRY_TIMEOUTS_RETRY_DEADLINE`
    /// sets `timeouts.retryDeadline`). The flags above win over them.
    pub environment: Vec<(String, String)>,
}

/// The prefix of the variables that set a timeout by its path.
pub const TIMEOUTS_VARIABLE_PREFIX: &str = "KUBEFERRY_TIMEOUTS_";
/// The prefix of the variables that set a limit by its path.
pub const LIMITS_VARIABLE_PREFIX: &str = "KUBEFERRY_LIMITS_";

/// The variables of `vars` that [`Overrides::environment`] takes (by their prefixes).
pub fn path_variables(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| {
            name.starts_with(TIMEOUTS_VARIABLE_PREFIX) || name.starts_with(LIMITS_VARIABLE_PREFIX)
        })
        .collect();
    found.sort();
    found
}

/// `retryDeadline` → `RETRY_DEADLINE`.
fn upper_snake(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

impl TimeoutsFile {
    /// Every key with its slot.
    fn slots(&mut self) -> [(&'static str, &mut Option<String>); 25] {
        [
            ("request", &mut self.request),
            ("shutdown", &mut self.shutdown),
            ("drain", &mut self.drain),
            ("sync", &mut self.sync),
            ("watch", &mut self.watch),
            ("connect", &mut self.connect),
            ("read", &mut self.read),
            ("retryDeadline", &mut self.retry_deadline),
            ("unreachableWindow", &mut self.unreachable_window),
            ("recheck", &mut self.recheck),
            ("imagePullGrace", &mut self.image_pull_grace),
            (
                "createContainerErrorGrace",
                &mut self.create_container_error_grace,
            ),
            ("pending", &mut self.pending),
            ("podStatusWait", &mut self.pod_status_wait),
            ("watchRestart", &mut self.watch_restart),
            ("tombstone", &mut self.tombstone),
            ("absent", &mut self.absent),
            ("outcomeRetention", &mut self.outcome_retention),
            ("nameHold", &mut self.name_hold),
            ("noStatus", &mut self.no_status),
            ("keepAlive", &mut self.keep_alive),
            ("followReopen", &mut self.follow_reopen),
            ("followIdle", &mut self.follow_idle),
            ("tokensReload", &mut self.tokens_reload),
            ("stateSample", &mut self.state_sample),
        ]
    }
}

impl FileConfig {
    /// Reads and parses a configuration file.
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        FileConfig::parse(path, &text)
    }

    /// Parses the text of a configuration file; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_saphyr::from_str(text).map_err(|error| ConfigError::Parse {
            path: path.to_path_buf(),
            message: error.to_string(),
        })
    }
}

impl Config {
    /// The configuration of `file` with `overrides` applied, checked.
    pub fn resolve(mut file: FileConfig, overrides: Overrides) -> Result<Config, ConfigError> {
        apply_environment(&mut file, &overrides.environment)?;
        apply(&mut file, overrides);
        let listen_text = file.listen.as_deref().unwrap_or("127.0.0.1:8080");
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            invalid(
                "listen",
                format!("{listen_text:?} is not an address such as 0.0.0.0:8080"),
            )
        })?;
        let tls = match file.tls {
            None => None,
            Some(TlsFile {
                cert_file: Some(cert_file),
                key_file: Some(key_file),
            }) => Some(TlsConfig {
                cert_file,
                key_file,
            }),
            Some(TlsFile {
                cert_file: None, ..
            }) => return Err(invalid("tls.certFile", "missing: TLS needs a certificate")),
            Some(TlsFile { key_file: None, .. }) => {
                return Err(invalid("tls.keyFile", "missing: TLS needs a private key"));
            }
        };
        let auth = match (file.auth.tokens_file, file.auth.anonymous) {
            (Some(_), true) => {
                return Err(invalid(
                    "auth",
                    "tokensFile and anonymous exclude each other: choose one",
                ));
            }
            (Some(file), false) => AuthConfig::Tokens { file },
            (None, true) => AuthConfig::Anonymous,
            (None, false) => {
                return Err(invalid(
                    "auth.tokensFile",
                    "missing: give a tokens file, or set auth.anonymous: true to serve without authentication (development only)",
                ));
            }
        };
        let clusters = if file.clusters.is_empty() {
            vec![ClusterConfig {
                name: None,
                source: ClusterSource::Kubeconfig {
                    path: None,
                    context: None,
                },
                spark_operator: None,
            }]
        } else {
            file.clusters
                .iter()
                .enumerate()
                .map(|(i, c)| cluster(i, c))
                .collect::<Result<Vec<_>, _>>()?
        };
        let mut names = std::collections::BTreeSet::new();
        for (i, cluster) in clusters.iter().enumerate() {
            if let Some(name) = &cluster.name
                && !names.insert(name.clone())
            {
                return Err(invalid(
                    format!("clusters[{i}].name"),
                    format!("{name:?} is used twice: every cluster needs its own name"),
                ));
            }
        }
        let namespaces = if file.namespaces.is_empty() {
            vec!["default".to_string()]
        } else {
            file.namespaces
        };
        for (i, namespace) in namespaces.iter().enumerate() {
            if !is_dns_label(namespace) {
                return Err(invalid(
                    format!("namespaces[{i}]"),
                    format!("{namespace:?} is not a namespace name (a DNS-1123 label)"),
                ));
            }
            if namespaces[..i].contains(namespace) {
                return Err(invalid(
                    format!("namespaces[{i}]"),
                    format!("{namespace:?} is listed twice"),
                ));
            }
        }
        let name_prefix = file.name_prefix.unwrap_or_default();
        check_name_prefix(&name_prefix)?;
        let timeouts = timeouts(&file.timeouts)?;
        let limits = limits(&file.limits)?;
        Ok(Config {
            listen,
            tls,
            auth,
            clusters,
            namespaces,
            name_prefix,
            templates_dir: file.templates_dir,
            timeouts,
            limits,
        })
    }
}

/// Sets the timeouts and limits the path variables give; a variable that names no key is an
/// error (a misspelt one would otherwise be ignored).
fn apply_environment(file: &mut FileConfig, vars: &[(String, String)]) -> Result<(), ConfigError> {
    for (name, value) in vars {
        if let Some(key) = name.strip_prefix(TIMEOUTS_VARIABLE_PREFIX) {
            let slot = file
                .timeouts
                .slots()
                .into_iter()
                .find(|(k, _)| upper_snake(k) == key)
                .map(|(_, slot)| slot);
            match slot {
                Some(slot) => *slot = Some(value.clone()),
                None => {
                    let mut keys = TimeoutsFile::default();
                    let keys: Vec<&str> = keys.slots().iter().map(|(k, _)| *k).collect();
                    return Err(unknown_variable(name, &keys));
                }
            }
        } else if let Some(key) = name.strip_prefix(LIMITS_VARIABLE_PREFIX) {
            let number = |value: &str| {
                value.trim().parse::<u64>().map_err(|_| {
                    invalid(
                        name.clone(),
                        format!("{value:?} is not a whole number of at least 0"),
                    )
                })
            };
            let l = &mut file.limits;
            match key {
                "MAX_BODY_BYTES" => l.max_body_bytes = Some(to_usize(name, number(value)?)?),
                "MAX_LOG_BYTES" => l.max_log_bytes = Some(number(value)?),
                "DEFAULT_PAGE_SIZE" => {
                    l.default_page_size = Some(to_usize(name, number(value)?)?);
                }
                "MAX_PAGE_SIZE" => l.max_page_size = Some(to_usize(name, number(value)?)?),
                "KEEP_LOG_LINES" => l.keep_log_lines = Some(number(value)?),
                "KEEP_LOG_BYTES" => l.keep_log_bytes = Some(number(value)?),
                _ => return Err(unknown_variable(name, &LIMIT_KEYS)),
            }
        }
    }
    Ok(())
}

/// The keys of `limits:`.
const LIMIT_KEYS: [&str; 6] = [
    "maxBodyBytes",
    "maxLogBytes",
    "defaultPageSize",
    "maxPageSize",
    "keepLogLines",
    "keepLogBytes",
];

fn to_usize(name: &str, n: u64) -> Result<usize, ConfigError> {
    usize::try_from(n).map_err(|_| invalid(name, format!("{n} is too large")))
}

fn unknown_variable(name: &str, keys: &[&str]) -> ConfigError {
    let prefix = if name.starts_with(TIMEOUTS_VARIABLE_PREFIX) {
        TIMEOUTS_VARIABLE_PREFIX
    } else {
        LIMITS_VARIABLE_PREFIX
    };
    let known: Vec<String> = keys
        .iter()
        .map(|k| format!("{prefix}{}", upper_snake(k)))
        .collect();
    invalid(
        name,
        format!(
            "names no setting; the variables of this kind are {}",
            known.join(", ")
        ),
    )
}

fn apply(file: &mut FileConfig, o: Overrides) {
    let set = |slot: &mut Option<String>, value: Option<String>| {
        if value.is_some() {
            *slot = value;
        }
    };
    set(&mut file.listen, o.listen);
    set(&mut file.name_prefix, o.name_prefix);
    set(&mut file.timeouts.request, o.request_timeout);
    set(&mut file.timeouts.shutdown, o.shutdown_timeout);
    if let Some(namespaces) = o.namespaces {
        file.namespaces = namespaces;
    }
    if o.templates_dir.is_some() {
        file.templates_dir = o.templates_dir;
    }
    if o.tokens_file.is_some() {
        file.auth.tokens_file = o.tokens_file;
        file.auth.anonymous = false;
    }
    if o.anonymous {
        file.auth.anonymous = true;
        file.auth.tokens_file = None;
    }
    if o.tls_cert.is_some() || o.tls_key.is_some() {
        let tls = file.tls.get_or_insert_with(TlsFile::default);
        if o.tls_cert.is_some() {
            tls.cert_file = o.tls_cert;
        }
        if o.tls_key.is_some() {
            tls.key_file = o.tls_key;
        }
    }
    let cluster_given = o.cluster_name.is_some()
        || o.kubeconfig.is_some()
        || o.context.is_some()
        || o.api_url.is_some()
        || o.ca_file.is_some()
        || o.token_file.is_some()
        || o.in_cluster;
    if !cluster_given {
        return;
    }
    if file.clusters.is_empty() {
        file.clusters.push(ClusterFile::default());
    }
    let first = &mut file.clusters[0];
    if o.cluster_name.is_some() {
        first.name = o.cluster_name;
    }
    // A connection given here replaces the file's way of connecting, not only one of its fields.
    if o.api_url.is_some() || o.in_cluster || o.kubeconfig.is_some() || o.context.is_some() {
        *first = ClusterFile {
            name: first.name.take(),
            spark_operator: first.spark_operator,
            ..ClusterFile::default()
        };
    }
    if o.kubeconfig.is_some() {
        first.kubeconfig = o.kubeconfig;
    }
    if o.context.is_some() {
        first.context = o.context;
    }
    if o.api_url.is_some() {
        first.api_url = o.api_url;
    }
    if o.ca_file.is_some() {
        first.ca_file = o.ca_file;
    }
    if o.token_file.is_some() {
        first.token_file = o.token_file;
    }
    if o.in_cluster {
        first.in_cluster = true;
    }
}

fn cluster(i: usize, c: &ClusterFile) -> Result<ClusterConfig, ConfigError> {
    let field = |name: &str| format!("clusters[{i}].{name}");
    if let Some(name) = &c.name
        && (name.is_empty() || name.contains('/'))
    {
        return Err(invalid(
            field("name"),
            format!(
                "{name:?} cannot appear in execution ids: it must be non-empty and contain no '/'"
            ),
        ));
    }
    let kubeconfig_given = c.kubeconfig.is_some() || c.context.is_some();
    let ways = [kubeconfig_given, c.api_url.is_some(), c.in_cluster];
    if ways.iter().filter(|w| **w).count() > 1 {
        return Err(invalid(
            format!("clusters[{i}]"),
            "give one way to connect: kubeconfig/context, apiUrl (with caFile and tokenFile), or inCluster",
        ));
    }
    if c.api_url.is_none() {
        for (set, name) in [
            (c.ca_file.is_some(), "caFile"),
            (c.token_file.is_some(), "tokenFile"),
        ] {
            if set {
                return Err(invalid(field(name), "only goes with apiUrl"));
            }
        }
    }
    let source = if let Some(url) = &c.api_url {
        let parsed = url.parse::<axum::http::Uri>();
        if parsed.is_err() || !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(invalid(
                field("apiUrl"),
                format!("{url:?} is not a URL such as https://10.0.0.1:6443"),
            ));
        }
        ClusterSource::ApiUrl {
            url: url.clone(),
            ca_file: c.ca_file.clone(),
            token_file: c.token_file.clone(),
        }
    } else if c.in_cluster {
        ClusterSource::InCluster
    } else {
        ClusterSource::Kubeconfig {
            path: c.kubeconfig.clone(),
            context: c.context.clone(),
        }
    };
    if c.name.is_none() && !matches!(source, ClusterSource::Kubeconfig { .. }) {
        return Err(invalid(
            field("name"),
            "missing: a cluster reached by apiUrl or inCluster needs a name for execution ids",
        ));
    }
    Ok(ClusterConfig {
        name: c.name.clone(),
        source,
        spark_operator: c.spark_operator,
    })
}

/// Checks a name prefix: empty, or a DNS label of at most [`MAX_NAME_PREFIX_LEN`] characters.
pub fn check_name_prefix(prefix: &str) -> Result<(), ConfigError> {
    if prefix.is_empty() {
        return Ok(());
    }
    if !is_dns_label(prefix) {
        return Err(invalid(
            "namePrefix",
            format!(
                "{prefix:?} is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)"
            ),
        ));
    }
    if prefix.len() > MAX_NAME_PREFIX_LEN {
        return Err(invalid(
            "namePrefix",
            format!(
                "{prefix:?} is {} characters; at most {MAX_NAME_PREFIX_LEN} leave room in the {MAX_NAME_LEN}-character object name for the job id",
                prefix.len()
            ),
        ));
    }
    Ok(())
}

/// Parses a duration in kubeferry's one grammar (see [`kubeferry_core::duration`]).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    kubeferry_core::duration::parse(text).map_err(|error| error.to_string())
}

fn timeouts(file: &TimeoutsFile) -> Result<Timeouts, ConfigError> {
    let mut t = Timeouts::default();
    let fields: [(&str, &Option<String>, &mut Duration); 24] = [
        ("request", &file.request, &mut t.request),
        ("shutdown", &file.shutdown, &mut t.shutdown),
        ("drain", &file.drain, &mut t.drain),
        ("sync", &file.sync, &mut t.sync),
        ("watch", &file.watch, &mut t.watch),
        ("connect", &file.connect, &mut t.connect),
        ("read", &file.read, &mut t.read),
        ("retryDeadline", &file.retry_deadline, &mut t.retry_deadline),
        (
            "unreachableWindow",
            &file.unreachable_window,
            &mut t.unreachable_window,
        ),
        ("recheck", &file.recheck, &mut t.recheck),
        (
            "imagePullGrace",
            &file.image_pull_grace,
            &mut t.image_pull_grace,
        ),
        (
            "createContainerErrorGrace",
            &file.create_container_error_grace,
            &mut t.create_container_error_grace,
        ),
        (
            "podStatusWait",
            &file.pod_status_wait,
            &mut t.pod_status_wait,
        ),
        ("watchRestart", &file.watch_restart, &mut t.watch_restart),
        ("tombstone", &file.tombstone, &mut t.tombstone),
        ("absent", &file.absent, &mut t.absent),
        (
            "outcomeRetention",
            &file.outcome_retention,
            &mut t.outcome_retention,
        ),
        ("nameHold", &file.name_hold, &mut t.name_hold),
        ("noStatus", &file.no_status, &mut t.no_status),
        ("keepAlive", &file.keep_alive, &mut t.keep_alive),
        ("followReopen", &file.follow_reopen, &mut t.follow_reopen),
        ("followIdle", &file.follow_idle, &mut t.follow_idle),
        ("tokensReload", &file.tokens_reload, &mut t.tokens_reload),
        ("stateSample", &file.state_sample, &mut t.state_sample),
    ];
    for (name, text, slot) in fields {
        if let Some(text) = text {
            *slot = parse_duration(text).map_err(|m| invalid(format!("timeouts.{name}"), m))?;
        }
    }
    if let Some(text) = &file.pending {
        t.pending = Some(parse_duration(text).map_err(|m| invalid("timeouts.pending", m))?);
    }
    for (name, value) in [
        ("request", t.request),
        ("sync", t.sync),
        ("watch", t.watch),
        ("connect", t.connect),
        ("read", t.read),
        ("noStatus", t.no_status),
        ("recheck", t.recheck),
        ("keepAlive", t.keep_alive),
        ("tokensReload", t.tokens_reload),
        ("stateSample", t.state_sample),
    ] {
        if value.is_zero() {
            return Err(invalid(format!("timeouts.{name}"), "must be more than 0"));
        }
    }
    if t.watch < Duration::from_secs(1) {
        return Err(invalid(
            "timeouts.watch",
            "must be at least 1s (Kubernetes counts watch timeouts in seconds)",
        ));
    }
    // The hold outlasts any create still on its way: no shorter than one request may take.
    if file.name_hold.is_none() {
        t.name_hold = t.read;
    } else if t.name_hold < t.read {
        return Err(invalid(
            "timeouts.nameHold",
            format!(
                "must be at least timeouts.read ({:?}): a submission's create may be on its way that long, and would run the job again once the name is free",
                t.read
            ),
        ));
    }
    Ok(t)
}

fn limits(file: &LimitsFile) -> Result<Limits, ConfigError> {
    let mut l = Limits::default();
    if let Some(n) = file.max_body_bytes {
        l.max_body_bytes = n;
    }
    if let Some(n) = file.max_log_bytes {
        l.max_log_bytes = n;
    }
    if let Some(n) = file.default_page_size {
        l.default_page_size = n;
    }
    if let Some(n) = file.max_page_size {
        l.max_page_size = n;
    }
    for (name, zero) in [
        ("maxBodyBytes", l.max_body_bytes == 0),
        ("maxLogBytes", l.max_log_bytes == 0),
        ("defaultPageSize", l.default_page_size == 0),
        ("maxPageSize", l.max_page_size == 0),
    ] {
        if zero {
            return Err(invalid(format!("limits.{name}"), "must be more than 0"));
        }
    }
    let in_range = |name: &str, n: u64, max: u32| {
        u32::try_from(n)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                invalid(
                    format!("limits.{name}"),
                    format!("{n} is out of range (1 to {max})"),
                )
            })
    };
    l.keep_log = match (file.keep_log_lines, file.keep_log_bytes) {
        (Some(lines), bytes) => Some(KeepLog {
            lines: in_range("keepLogLines", lines, KeepLog::MAX_LINES)?,
            bytes: match bytes {
                Some(bytes) => in_range("keepLogBytes", bytes, KeepLog::MAX_BYTES)?,
                None => 16 * 1024,
            },
        }),
        (None, Some(_)) => {
            return Err(invalid(
                "limits.keepLogBytes",
                "needs limits.keepLogLines: how many last lines to keep",
            ));
        }
        (None, None) => None,
    };
    if l.default_page_size > l.max_page_size {
        return Err(invalid(
            "limits.defaultPageSize",
            format!("must not exceed limits.maxPageSize ({})", l.max_page_size),
        ));
    }
    Ok(l)
}

#[cfg(test)]
mod tests;
