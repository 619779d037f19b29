//! A connection to one Kubernetes cluster: the client, the cluster's configured name, and what
//! kubeferry has learnt about reaching it.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use kube::config::KubeConfigOptions;
pub use kube::config::Kubeconfig;
use tokio::time::Instant;
use tracing::warn;

use crate::error::{Error, Result};
use crate::retry::{Exhausted, RetryPolicy, Verdict, verdict};

/// Timings and limits for talking to a cluster. Every one is configurable so that tests run fast.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// How API calls are retried.
    pub retry: RetryPolicy,
    /// How long status queries fail at once after the server was found unreachable.
    pub unreachable_window: Duration,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
    /// How long one attempt of a request may take to answer in full. Streams are not bound by
    /// it: a watch's silence is judged by the tracker's stall detection, and a log follow's by
    /// its idle recheck (`FollowOptions::idle_recheck`).
    pub read_timeout: Duration,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            unreachable_window: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(30),
        }
    }
}

/// Where a kubeconfig was found, kubectl's way: `--kubeconfig`, then `KUBECONFIG` (a list of
/// files merged, missing ones skipped), then `~/.kube/config`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeconfigLocation {
    /// The files, in merge order.
    pub paths: Vec<PathBuf>,
}

impl KubeconfigLocation {
    /// Finds the kubeconfig as kubectl does; `None` when no cluster is configured at all.
    pub fn find(explicit: Option<&Path>) -> Option<KubeconfigLocation> {
        Self::find_in(
            explicit,
            std::env::var_os("KUBECONFIG"),
            std::env::home_dir().map(|home| home.join(".kube").join("config")),
        )
    }

    fn find_in(
        explicit: Option<&Path>,
        env: Option<std::ffi::OsString>,
        default: Option<PathBuf>,
    ) -> Option<KubeconfigLocation> {
        if let Some(path) = explicit {
            // An explicit file that does not exist is an error when it is read, not "no cluster".
            return Some(KubeconfigLocation {
                paths: vec![path.to_path_buf()],
            });
        }
        if let Some(env) = env {
            let paths: Vec<PathBuf> = std::env::split_paths(&env)
                .filter(|p| !p.as_os_str().is_empty() && p.exists())
                .collect();
            if !paths.is_empty() {
                return Some(KubeconfigLocation { paths });
            }
        }
        default
            .filter(|p| p.exists())
            .map(|p| KubeconfigLocation { paths: vec![p] })
    }

    /// Reads and merges the files.
    pub fn read(&self) -> Result<Kubeconfig> {
        let mut merged = Kubeconfig::default();
        for path in &self.paths {
            let config = Kubeconfig::read_from(path).map_err(|source| Error::Config {
                message: format!("cannot read kubeconfig {}: {source}", path.display()),
                source: Some(Box::new(source)),
            })?;
            merged = merged.merge(config).map_err(|source| Error::Config {
                message: format!("cannot merge kubeconfig {}: {source}", path.display()),
                source: Some(Box::new(source)),
            })?;
        }
        Ok(merged)
    }
}

/// A client for one cluster, with the name execution ids use for it.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    url: String,
    client: kube::Client,
    default_namespace: String,
    settings: ClusterSettings,
    unreachable: Mutex<Option<Unreachable>>,
}

#[derive(Clone)]
struct Unreachable {
    at: Instant,
    at_wall: Timestamp,
    message: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.inner.name)
            .field("url", &self.inner.url)
            .finish()
    }
}

impl Cluster {
    /// Connects to the cluster of a kubeconfig context (the current one when `context` is
    /// `None`). The cluster is named `name` if given, else after the context's cluster entry.
    pub async fn from_kubeconfig(
        kubeconfig: Kubeconfig,
        context: Option<&str>,
        name: Option<&str>,
        settings: ClusterSettings,
    ) -> Result<Cluster> {
        let context_name = context
            .map(str::to_string)
            .or_else(|| kubeconfig.current_context.clone())
            .ok_or_else(|| Error::Config {
                message: "the kubeconfig has no current-context; pass --context".into(),
                source: None,
            })?;
        let Some(named) = kubeconfig.contexts.iter().find(|c| c.name == context_name) else {
            let known: Vec<&str> = kubeconfig
                .contexts
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            return Err(Error::Config {
                message: format!(
                    "context {context_name:?} is not in the kubeconfig (it has: {})",
                    known.join(", ")
                ),
                source: None,
            });
        };
        let cluster_entry = named
            .context
            .as_ref()
            .map(|c| c.cluster.clone())
            .unwrap_or_default();
        let options = KubeConfigOptions {
            context: Some(context_name.clone()),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|source| Error::Config {
                message: format!("context {context_name:?}: {source}"),
                source: Some(Box::new(source)),
            })?;
        let name = match name {
            Some(name) => name.to_string(),
            None => cluster_name_from(&cluster_entry, &context_name),
        };
        Cluster::from_config(name, config, settings)
    }

    /// Connects with a ready client configuration.
    pub fn from_config(
        name: impl Into<String>,
        mut config: kube::Config,
        settings: ClusterSettings,
    ) -> Result<Cluster> {
        let name = name.into();
        if name.is_empty() || name.contains('/') {
            return Err(Error::Config {
                message: format!(
                    "cluster name {name:?} cannot appear in execution ids: it must be non-empty and contain no '/'"
                ),
                source: None,
            });
        }
        // kubeferry retries per operation, knowing which writes are safe to repeat; the client's
        // own retry layer would retry blindly and for far longer than our deadlines.
        config.default_retry = false;
        config.connect_timeout = Some(settings.connect_timeout);
        // No read timeout on the connection: it would cut quiet watches and log streams (the
        // client applies it to every read). Each attempt has its own deadline instead.
        config.read_timeout = None;
        let url = config.cluster_url.to_string();
        let default_namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).map_err(|source| Error::Config {
            message: format!("cannot build a client for {url}: {source}"),
            source: Some(Box::new(source)),
        })?;
        Ok(Cluster {
            inner: Arc::new(Inner {
                name,
                url,
                client,
                default_namespace,
                settings,
                unreachable: Mutex::new(None),
            }),
        })
    }

    /// The same cluster with its client wrapped in middleware (request metrics, authentication
    /// that re-reads a token file): `wrap` gets the client and returns one that sends through it,
    /// e.g. with [`kube::Client::new`] over a service calling [`kube::Client::send`]. Meant for
    /// a cluster just connected; what was learnt about reaching the server starts afresh.
    pub fn map_client(&self, wrap: impl FnOnce(kube::Client) -> kube::Client) -> Cluster {
        Cluster {
            inner: Arc::new(Inner {
                name: self.inner.name.clone(),
                url: self.inner.url.clone(),
                client: wrap(self.inner.client.clone()),
                default_namespace: self.inner.default_namespace.clone(),
                settings: self.inner.settings.clone(),
                unreachable: Mutex::new(None),
            }),
        }
    }

    /// The cluster's name in execution ids.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The API server's URL.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.inner.client
    }

    /// The namespace of the kubeconfig context (or `default`).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// The timings in force.
    pub fn settings(&self) -> &ClusterSettings {
        &self.inner.settings
    }

    /// Fails at once while the server was found unreachable less than the unreachable window
    /// ago, so that a caller asking about many jobs does not wait for a connection timeout per job.
    pub fn check_reachable(&self) -> Result<()> {
        let guard = self.lock_unreachable();
        match &*guard {
            Some(u) if u.at.elapsed() < self.inner.settings.unreachable_window => {
                Err(Error::Unreachable {
                    url: self.inner.url.clone(),
                    since: u.at_wall,
                    message: u.message.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Records the outcome of a request: a lost connection opens the unreachable window, any
    /// answer from the server (even an error) closes it.
    pub(crate) fn observe(&self, outcome: Result<(), &kube::Error>) {
        let mut guard = self.lock_unreachable();
        match outcome {
            Err(error) if verdict(error) == Verdict::NoResponse => {
                if guard.is_none() {
                    warn!(message = "Kubernetes API server unreachable", url = %self.inner.url, %error);
                }
                *guard = Some(Unreachable {
                    at: Instant::now(),
                    at_wall: Timestamp::now(),
                    message: error.to_string(),
                });
            }
            _ => *guard = None,
        }
    }

    fn lock_unreachable(&self) -> std::sync::MutexGuard<'_, Option<Unreachable>> {
        // The guarded value is plain data; a panic elsewhere cannot leave it inconsistent.
        self.inner
            .unreachable
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The objects of `api` (of `namespace`, or of every namespace when `None`, as `api` is
    /// scoped) that match the label `selector`, as the API server lists them now; errors name
    /// `resource`.
    pub(crate) async fn list<K>(
        &self,
        api: &kube::Api<K>,
        resource: &'static str,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<K>>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let params = kube::api::ListParams::default().labels(selector);
        let op = Op::collection(
            "list",
            resource,
            namespace.unwrap_or(crate::error::ALL_NAMESPACES),
        );
        Ok(self.call(&op, true, || api.list(&params)).await?.items)
    }

    /// Runs one API operation with the cluster's retry policy, recording reachability, and
    /// turns its failure into an [`Error`] that names what was attempted.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        op: &Op,
        retry_no_response: bool,
        attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
    {
        self.call_checked(op, retry_no_response, attempt, || std::future::ready(None))
            .await
    }

    /// [`Cluster::call`], asking `before_repeat` before each repeated attempt
    /// ([`RetryPolicy::run_checked`]).
    pub(crate) async fn call_checked<T, F, Fut, C, Checked>(
        &self,
        op: &Op,
        retry_no_response: bool,
        attempt: F,
        before_repeat: C,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
        C: FnMut() -> Checked,
        Checked: Future<Output = Option<T>>,
    {
        match self
            .run_bounded(op, retry_no_response, attempt, before_repeat)
            .await
        {
            Ok(value) => {
                self.observe(Ok(()));
                Ok(value)
            }
            Err(exhausted) => {
                self.observe(Err(&exhausted.error));
                Err(self.error(op, exhausted))
            }
        }
    }

    /// Runs an operation the API server proxies to a node's kubelet (container logs) with the
    /// cluster's retry policy. Its failures say nothing about the API server itself (a
    /// kubelet that is slow or gone, a long read timing out), so unlike [`Cluster::call`] it
    /// never opens the unreachable window that makes status queries fail fast. A read, it is
    /// retried also when no response came.
    pub(crate) async fn call_proxied<T, F, Fut>(&self, op: &Op, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
    {
        self.run_bounded(op, true, attempt, || std::future::ready(None))
            .await
            .map_err(|exhausted| self.error(op, exhausted))
    }

    /// Runs an operation with the cluster's retry policy, each attempt bounded by the read
    /// timeout and `before_repeat` asked before each repeat ([`RetryPolicy::run_checked`]).
    async fn run_bounded<T, F, Fut, C, Checked>(
        &self,
        op: &Op,
        retry_no_response: bool,
        mut attempt: F,
        before_repeat: C,
    ) -> std::result::Result<T, Exhausted>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
        C: FnMut() -> Checked,
        Checked: Future<Output = Option<T>>,
    {
        let limit = self.inner.settings.read_timeout;
        self.inner
            .settings
            .retry
            .run_checked(
                &op.to_string(),
                retry_no_response,
                move || answered_within(limit, attempt()),
                before_repeat,
            )
            .await
    }

    /// Opens a stream the API server proxies to a kubelet (a followed container log) with the
    /// cluster's retry policy, as [`Cluster::call_proxied`] but with no deadline per attempt: a
    /// kubelet may answer a stream only once it has something to send. The caller bounds the
    /// wait.
    pub(crate) async fn open_proxied_stream<T, F, Fut>(&self, op: &Op, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
    {
        self.inner
            .settings
            .retry
            .run(&op.to_string(), true, attempt)
            .await
            .map_err(|exhausted| self.error(op, exhausted))
    }

    /// Turns a failed operation into an error that names what was attempted. A 403 is a missing
    /// permission, except admission's (a quota used up, a webhook's denial, a namespace being
    /// deleted): those are the server's answer as it gave it.
    pub(crate) fn error(&self, op: &Op, exhausted: Exhausted) -> Error {
        let Exhausted { error, attempts } = exhausted;
        match (&error, verdict(&error)) {
            (kube::Error::Api(status), _)
                if status.code == 403 && !refused_by_admission(&status.message) =>
            {
                Error::Forbidden {
                    verb: op.verb,
                    resource: op.resource.to_string(),
                    namespace: op.namespace.clone(),
                    message: status.message.clone(),
                }
            }
            (_, Verdict::NoResponse) => Error::Unreachable {
                url: self.inner.url.clone(),
                since: Timestamp::now(),
                message: format!("{op}: {}", error_chain(&error)),
            },
            (_, Verdict::RetryAfter(_)) => Error::RetriesExhausted {
                operation: op.to_string(),
                attempts,
                source: Box::new(error),
            },
            (kube::Error::Api(status), Verdict::Final) => Error::Api {
                operation: op.to_string(),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            _ => Error::Client {
                operation: op.to_string(),
                source: Box::new(error),
            },
        }
    }
}

/// One API operation, as named in errors and logs: `create jobs.batch default/hello-1a2b`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    /// The Kubernetes verb.
    pub verb: &'static str,
    /// The resource, with its group (`jobs.batch`, `pods`, `pods/log`).
    pub resource: &'static str,
    /// The namespace.
    pub namespace: String,
    /// The object's name, when the operation is about one object.
    pub name: Option<String>,
}

impl Op {
    /// An operation on one named object.
    pub(crate) fn named(
        verb: &'static str,
        resource: &'static str,
        namespace: &str,
        name: &str,
    ) -> Op {
        Op {
            verb,
            resource,
            namespace: namespace.to_string(),
            name: Some(name.to_string()),
        }
    }

    /// An operation on a collection.
    pub(crate) fn collection(verb: &'static str, resource: &'static str, namespace: &str) -> Op {
        Op {
            verb,
            resource,
            namespace: namespace.to_string(),
            name: None,
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(
                f,
                "{} {} {}/{}",
                self.verb, self.resource, self.namespace, name
            ),
            None => write!(
                f,
                "{} {} in namespace {}",
                self.verb, self.resource, self.namespace
            ),
        }
    }
}

/// An error with its causes, `outer: cause: root cause`: a lost connection's own message
/// ("client error (SendRequest)") says little; its causes say what happened.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The name a kubeconfig cluster entry gets in execution ids: the entry's name, with `/`
/// (common in cloud providers' names, e.g. EKS ARNs) replaced by `.`; the context's name when the
/// entry has none.
pub(crate) fn cluster_name_from(cluster_entry: &str, context: &str) -> String {
    let base = if cluster_entry.is_empty() {
        context
    } else {
        cluster_entry
    };
    base.replace('/', ".")
}

/// An attempt's answer, or a failure as unanswered when none came within `limit` (the request
/// may still have taken effect: the retry policy knows when a repeat is safe).
async fn answered_within<T>(
    limit: Duration,
    answer: impl Future<Output = std::result::Result<T, kube::Error>>,
) -> std::result::Result<T, kube::Error> {
    tokio::time::timeout(limit, answer)
        .await
        .unwrap_or_else(|_| {
            Err(kube::Error::Service(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {limit:?}"),
            ))))
        })
}

/// Whether a 403's message is an admission plugin's refusal (a quota used up, a webhook's
/// denial, a namespace being deleted) rather than the authorizer's: the words of the API
/// server's admission plugins. Any other 403 is a missing permission.
fn refused_by_admission(message: &str) -> bool {
    [
        "exceeded quota: ",
        "failed quota: ",
        "admission webhook ",
        "because it is being terminated",
        "error looking up service account",
    ]
    .iter()
    .any(|words| message.contains(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_is_found_the_kubectl_way() {
        let dir = std::env::temp_dir().join(format!("kf-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let missing = dir.join("missing");

        let explicit = KubeconfigLocation::find_in(Some(&missing), None, Some(a.clone()));
        assert_eq!(explicit.unwrap().paths, vec![missing.clone()]);

        let env = std::env::join_paths([&missing, &a, &b]).unwrap();
        let from_env = KubeconfigLocation::find_in(None, Some(env), None);
        assert_eq!(from_env.unwrap().paths, vec![a.clone(), b.clone()]);

        let only_missing = std::env::join_paths([&missing]).unwrap();
        let fallback = KubeconfigLocation::find_in(None, Some(only_missing), Some(b.clone()));
        assert_eq!(fallback.unwrap().paths, vec![b.clone()]);

        assert_eq!(KubeconfigLocation::find_in(None, None, Some(missing)), None);
        assert_eq!(KubeconfigLocation::find_in(None, None, None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn error_chains_name_every_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
        let error = kube::Error::ReadEvents(io);
        assert_eq!(
            error_chain(&error),
            "Error reading events stream: connection reset"
        );
    }

    #[test]
    fn cluster_names() {
        assert_eq!(cluster_name_from("kind-dev", "ctx"), "kind-dev");
        assert_eq!(
            cluster_name_from("arn:aws:eks:eu-west-1:1:cluster/prod", "ctx"),
            "arn:aws:eks:eu-west-1:1:cluster.prod"
        );
        assert_eq!(cluster_name_from("", "ctx"), "ctx");
    }

    #[test]
    fn ops_name_what_was_attempted() {
        assert_eq!(
            Op::named("create", "jobs.batch", "ns", "a").to_string(),
            "create jobs.batch ns/a"
        );
        assert_eq!(
            Op::collection("list", "pods", "ns").to_string(),
            "list pods in namespace ns"
        );
    }

    #[test]
    fn a_403_is_a_missing_permission_unless_in_an_admission_plugins_words() {
        assert!(!refused_by_admission(
            "jobs.batch is forbidden: User \"ci\" cannot create resource \"jobs\" in API \
             group \"batch\" in the namespace \"default\""
        ));
        assert!(!refused_by_admission("forbidden"));
        assert!(!refused_by_admission(
            "forbidden: User \"ci\" cannot get path \"/version\""
        ));
        for admission in [
            "jobs.batch \"x\" is forbidden: exceeded quota: jobs, requested: \
             count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0",
            "admission webhook \"v.jobset\" denied the request: cannot be created",
            "jobs.batch \"x\" is forbidden: unable to create new content in namespace ns \
             because it is being terminated",
        ] {
            assert!(refused_by_admission(admission), "{admission}");
        }
    }
}
