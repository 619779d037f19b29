//! The errors of the Kubernetes backend: each names what kubeferry tried and what to do about it.

use jiff::Timestamp;
use kubeferry_core::{ExecutionId, IdError};

/// How operations on every namespace name their scope in errors.
pub(crate) const ALL_NAMESPACES: &str = "(all namespaces)";

/// Everything that can go wrong between kubeferry and a Kubernetes API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The job does not exist (never created here, or already removed).
    #[error("no such job: {id}{hint}")]
    NoSuchJob {
        /// The id asked about.
        id: ExecutionId,
        /// Why it may be gone, when kubeferry can tell.
        hint: String,
    },
    /// The id names a cluster other than the one configured. Never "no such job": callers would
    /// settle a running job as failed or cancelled.
    #[error(
        "execution id {id} belongs to cluster {:?}, but this kubeferry is connected to cluster {configured:?}: check the configuration (--cluster-name, or the context)",
        id.cluster
    )]
    WrongCluster {
        /// The id asked about.
        id: ExecutionId,
        /// The configured cluster name.
        configured: String,
    },
    /// The server refused for lack of permission: names the verb and resource to grant.
    #[error(
        "forbidden: kubeferry needs permission to {verb} {resource} {} (see `kubeferry rbac`); the server said: {message}",
        scope(namespace)
    )]
    Forbidden {
        /// The verb that was refused (get, list, watch, create, patch, delete).
        verb: &'static str,
        /// The resource, with its API group when it has one (e.g. `jobs.batch`).
        resource: String,
        /// The namespace.
        namespace: String,
        /// The server's own message.
        message: String,
    },
    /// A part of the job that it does not have was asked for (an index, a replicated job).
    #[error("{id} has no {part}")]
    NoSuchPart {
        /// The job.
        id: ExecutionId,
        /// The part asked for, then what the job has (`index 9: its indexes are 0 to 4`).
        part: String,
    },
    /// The API server could not be reached; status queries fail fast for a while after this.
    #[error(
        "the Kubernetes API server at {url} is unreachable (last failure at {since}): {message}"
    )]
    Unreachable {
        /// The server's URL.
        url: String,
        /// When the server was last found unreachable.
        since: Timestamp,
        /// What the connection attempt said.
        message: String,
    },
    /// An object with the job's deterministic name exists but belongs to something else.
    #[error("cannot create {kind} {namespace}/{name}: {why}")]
    NameTaken {
        /// The object kind.
        kind: &'static str,
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// Why it cannot be adopted, and the one thing to do about it.
        why: String,
    },
    /// The server answered with an error that retrying cannot fix (400, 404, 409, 422, ...).
    /// Only an answer of the server's is reported as this: see [`Error::is_not_found`] and
    /// [`Error::is_conflict`].
    #[error("{operation}: the server answered {code} {reason}: {message}")]
    Api {
        /// What kubeferry tried.
        operation: String,
        /// The HTTP status code.
        code: u16,
        /// The Kubernetes reason (NotFound, Invalid, ...).
        reason: String,
        /// The server's message.
        message: String,
    },
    /// The object kept changing while kubeferry acted on it (every attempt met a newer
    /// version): nothing was decided, and asking again is safe. kubeferry's own conclusion, not
    /// an answer of the server's.
    #[error("{operation}: {message}")]
    Contended {
        /// What kubeferry tried.
        operation: String,
        /// What kept changing.
        message: String,
    },
    /// kubeferry built an object that does not read back as one: a fault of kubeferry's, not
    /// of the job or the server. Nothing was created.
    #[error("{operation}: kubeferry built an object it cannot send ({source}); please report this")]
    Manifest {
        /// What kubeferry tried.
        operation: String,
        /// Why the object does not read back.
        #[source]
        source: serde_json::Error,
    },
    /// Retryable failures went on until the operation's deadline.
    #[error("{operation}: gave up after {attempts} attempts: {source}")]
    RetriesExhausted {
        /// What kubeferry tried.
        operation: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: Box<kube::Error>,
    },
    /// A failure talking to the server that is neither an answer nor a lost connection.
    #[error("{operation}: {source}")]
    Client {
        /// What kubeferry tried.
        operation: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Kubernetes client could not be configured (kubeconfig, context, credentials).
    #[error("cannot configure the Kubernetes client: {message}")]
    Config {
        /// What is wrong.
        message: String,
        /// The cause, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An execution id that does not parse.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The cluster cannot run a Spark job: no operator is named, configured or installed, or
    /// the chosen operator's SparkApplication CRD is not served (or the namespace is missing).
    /// Nothing was created.
    #[error("cannot run the Spark job: {detail}")]
    SparkUnavailable {
        /// What is missing, and what to do about it.
        detail: String,
    },
    /// The cluster does not serve the JobSet CRD (`jobset.x-k8s.io/v1alpha2`). Nothing was
    /// created.
    #[error("cannot run the JobSet: {detail}")]
    JobSetUnavailable {
        /// What is missing, and what to do about it.
        detail: String,
    },
    /// A job spec the target cannot run as it is (a field the chosen Spark operator cannot
    /// honour); nothing was created.
    #[error(transparent)]
    Spec(#[from] kubeferry_core::SpecError),
    /// Waiting for a job took longer than the caller allowed.
    #[error("timed out after {after:?} waiting for {id}; it is still {state}")]
    WaitTimeout {
        /// The job.
        id: ExecutionId,
        /// How long kubeferry waited.
        after: std::time::Duration,
        /// The job's state when the wait ended.
        state: kubeferry_core::JobState,
    },
}

impl Error {
    /// Whether this error means the job does not exist.
    pub fn is_no_such_job(&self) -> bool {
        matches!(self, Error::NoSuchJob { .. })
    }

    /// Whether the server answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { code: 404, .. })
    }

    /// Whether the server answered 409 Conflict (a stale resourceVersion, a uid precondition
    /// that failed, or an object that already exists).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { code: 409, .. })
    }
}

/// A result of the Kubernetes backend.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a refused operation was meant to act, as the Forbidden error says it.
fn scope(namespace: &str) -> String {
    if namespace == ALL_NAMESPACES {
        "in all namespaces (a ClusterRole bound with a ClusterRoleBinding)".to_string()
    } else {
        format!("in namespace {namespace:?}")
    }
}
