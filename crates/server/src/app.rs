//! What every handler shares: the clusters' executors, the namespaces served, templates,
//! authentication, metrics, timings and the shutdown signal. Nothing here holds job state: that
//! lives in Kubernetes and the executors' watch caches.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use kubeferry_core::ExecutionId;
use kubeferry_kube::Executor;
use tokio::sync::watch;

use crate::auth::{Authenticator, Principal};
use crate::clusters::ApiStats;
use crate::config::{Limits, Timeouts};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::templates::Templates;

/// One cluster the service runs jobs on.
#[derive(Clone)]
pub struct ClusterHandle {
    /// Its name in execution ids.
    pub name: String,
    /// Its executor.
    pub executor: Executor,
    /// Its API request counts.
    pub stats: Arc<ApiStats>,
}

/// The shared state of the service.
pub struct App {
    /// The clusters, the default first.
    pub clusters: Vec<ClusterHandle>,
    /// The namespaces served, the default first.
    pub namespaces: Vec<String>,
    /// Named templates.
    pub templates: Templates,
    /// Authentication.
    pub auth: Authenticator,
    /// Metrics.
    pub metrics: Metrics,
    /// Timings.
    pub timeouts: Timeouts,
    /// Limits.
    pub limits: Limits,
    /// How many jobs stood in each state over the last hour.
    pub history: crate::history::StateHistory,
    shutdown: watch::Receiver<bool>,
    draining: AtomicBool,
}

impl App {
    /// The state for these parts; `shutdown` turns true when the service stops.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        clusters: Vec<ClusterHandle>,
        namespaces: Vec<String>,
        templates: Templates,
        auth: Authenticator,
        metrics: Metrics,
        timeouts: Timeouts,
        limits: Limits,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            clusters,
            namespaces,
            templates,
            auth,
            metrics,
            timeouts,
            limits,
            history: Default::default(),
            shutdown,
            draining: AtomicBool::new(false),
        }
    }

    /// Samples how many jobs stand in each state now (from the watch caches: no request).
    pub fn sample_states(&self) {
        let counts = self
            .clusters
            .iter()
            .flat_map(|cluster| cluster.executor.jobs_by_state())
            .collect();
        self.history.record(jiff::Timestamp::now(), counts);
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&ClusterHandle> {
        self.clusters.iter().find(|c| c.name == name)
    }

    /// The cluster a request names (`field` says where), or the default one.
    pub fn requested_cluster(
        &self,
        name: Option<&str>,
        field: &str,
    ) -> Result<&ClusterHandle, ApiError> {
        match name {
            None => self
                .clusters
                .first()
                .ok_or_else(|| ApiError::internal("no cluster is configured")),
            Some(name) => self.cluster(name).ok_or_else(|| {
                ApiError::bad_request(
                    field,
                    format!(
                        "no cluster named {name:?} here (clusters: {})",
                        self.cluster_names()
                    ),
                )
            }),
        }
    }

    /// The executor of the cluster an execution id names. An id of another cluster is a
    /// configuration error (421 `wrong_cluster`), never "no such job": a caller would settle a
    /// running job as failed or cancelled.
    pub fn executor_for(&self, id: &ExecutionId) -> Result<&Executor, ApiError> {
        match self.cluster(&id.cluster) {
            Some(cluster) => Ok(&cluster.executor),
            None => Err(ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "wrong_cluster",
                format!(
                    "execution id {id} belongs to cluster {:?}, but this kubeferry serves {}: check the caller's and the service's configuration (clusters[].name)",
                    id.cluster,
                    self.cluster_names()
                ),
            )
            .field("id")),
        }
    }

    fn cluster_names(&self) -> String {
        let names: Vec<String> = self
            .clusters
            .iter()
            .map(|c| format!("{:?}", c.name))
            .collect();
        names.join(", ")
    }

    /// Checks that the service serves `namespace` and the caller may use it.
    pub fn check_namespace(
        &self,
        principal: &Principal,
        namespace: &str,
        field: &str,
    ) -> Result<(), ApiError> {
        if !self.namespaces.iter().any(|n| n == namespace) {
            return Err(ApiError::forbidden(
                field,
                format!(
                    "{field}: namespace {namespace:?} is not served by this kubeferry (namespaces: {})",
                    self.namespaces.join(", ")
                ),
            ));
        }
        if !principal.scope.allows(namespace) {
            return Err(ApiError::forbidden(
                field,
                format!(
                    "{field}: the token {:?} may not use namespace {namespace:?}",
                    principal.name
                ),
            ));
        }
        Ok(())
    }

    /// The namespaces the caller may use, or just `requested` if given (and allowed).
    pub fn namespaces_for(
        &self,
        principal: &Principal,
        requested: Option<&str>,
        field: &str,
    ) -> Result<Vec<String>, ApiError> {
        match requested {
            Some(namespace) => {
                self.check_namespace(principal, namespace, field)?;
                Ok(vec![namespace.to_string()])
            }
            None => Ok(self
                .namespaces
                .iter()
                .filter(|n| principal.scope.allows(n))
                .cloned()
                .collect()),
        }
    }

    /// The namespace of a submission that names none: the service's default namespace when
    /// the caller may use it, else the first served namespace the caller may use (the rule of
    /// [`App::namespaces_for`], which lists the namespaces the caller may use). A caller that
    /// may use none gets the default, and the answer 403 names it.
    pub fn default_namespace_for(&self, principal: &Principal) -> &str {
        self.namespaces
            .iter()
            .find(|n| principal.scope.allows(n))
            .unwrap_or(&self.namespaces[0])
    }

    /// The clusters a request covers: the named one, or all.
    pub fn clusters_for(
        &self,
        requested: Option<&str>,
        field: &str,
    ) -> Result<Vec<ClusterHandle>, ApiError> {
        match requested {
            Some(name) => Ok(vec![self.requested_cluster(Some(name), field)?.clone()]),
            None => Ok(self.clusters.clone()),
        }
    }

    /// A receiver that turns true when the service stops: long-lived streams end then.
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// Marks the service as stopping: `/readyz` fails from now on.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the service is stopping.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// Resolves when `shutdown` turns true (or its sender is gone).
pub async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}
