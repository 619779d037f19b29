//! [`SimCluster`]: starting, addressing, configuring clients for, breaking and stopping a
//! simulated cluster from Rust.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::Authenticator;
use crate::config::SimConfig;
use crate::error::ApiError;
use crate::error::SimError;
use crate::faults::{CounterKey, FaultId, FaultRule, WatchControl};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::ObjectKey;
use crate::{controllers, crds, disruption, nodes, ops, quantity, server};

/// A running simulated cluster. Dropping it stops the server and kills every container
/// process it started.
pub struct SimCluster {
    state: Arc<State>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

fn validate(config: &SimConfig) -> Result<(), SimError> {
    if config.nodes.is_empty() {
        return Err(SimError::Config("at least one node is needed".into()));
    }
    for n in &config.nodes {
        if !crate::kinds::is_dns_subdomain(&n.name) {
            return Err(SimError::Config(format!(
                "node name {:?} is not a DNS subdomain",
                n.name
            )));
        }
        for (field, q) in [("cpu", &n.cpu), ("memory", &n.memory)] {
            if quantity::parse(q).is_none() {
                return Err(SimError::Config(format!(
                    "node {}: {field}: {q:?} is not a Kubernetes quantity",
                    n.name
                )));
            }
        }
    }
    Ok(())
}

fn bootstrap(state: &State) -> Result<(), SimError> {
    let types = |group: &str, resource: &str| {
        state
            .registry
            .get(&GroupResource::new(group, resource))
            .ok_or_else(|| SimError::Config(format!("{resource} are not served")))
    };
    let namespaces = types("", "namespaces")?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        ops::create(state, &namespaces, "v1", "", object, false)?;
    }
    let nodes = types("", "nodes")?;
    for n in &state.config.nodes {
        let object = nodes::node_object(state, &n.name, &Value::Null);
        ops::create(state, &nodes, "v1", "", object, false)?;
    }
    let cluster_roles = types("rbac.authorization.k8s.io", "clusterroles")?;
    for role in crate::auth::rbac::bootstrap_cluster_roles() {
        ops::create(state, &cluster_roles, "v1", "", role, false)?;
    }
    let crd_type = types("apiextensions.k8s.io", "customresourcedefinitions")?;
    let mut definitions: Vec<Value> = state
        .config
        .crd_bundles
        .iter()
        .flat_map(|b| crds::bundle(*b))
        .collect();
    definitions.extend(state.config.extra_crds.iter().cloned());
    for crd in definitions {
        match ops::create(state, &crd_type, "v1", "", crd, false) {
            Ok(_) => {}
            Err(e) if e.reason == "AlreadyExists" => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

impl SimCluster {
    /// Starts a cluster: binds 127.0.0.1, creates the namespaces `default`, `kube-system`,
    /// `kube-public`, `kube-node-lease`, the nodes and the configured CRDs, and starts the
    /// controllers. Needs a Tokio runtime.
    pub async fn start(config: SimConfig) -> Result<SimCluster, SimError> {
        validate(&config)?;
        let listener = TcpListener::bind(("127.0.0.1", config.port))
            .await
            .map_err(|source| SimError::Bind {
                port: config.port,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            port: config.port,
            source,
        })?;
        let token = config
            .admin_token
            .clone()
            .unwrap_or_else(Authenticator::generate_token);
        let tls = if config.tls {
            Some(crate::tls::generate()?)
        } else {
            None
        };
        let state = Arc::new(State::new(config, token, tls));
        let _ = state.port.set(addr.port());
        bootstrap(&state)?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut tasks = controllers::start(&state, &shutdown_rx);
        tasks.push(tokio::spawn(server::serve(
            state.clone(),
            listener,
            shutdown_rx,
        )));
        Ok(SimCluster {
            state,
            addr,
            shutdown,
            tasks,
        })
    }

    /// `https://127.0.0.1:PORT` (or `http://` when TLS is off); the kubeconfigs use it.
    pub fn url(&self) -> String {
        if self.state.tls.is_some() {
            format!("https://{}", self.addr)
        } else {
            self.http_url()
        }
    }

    /// `http://127.0.0.1:PORT`: plain HTTP is served on the same port as HTTPS.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The CA certificate (PEM) of the HTTPS endpoint, when TLS is on.
    pub fn ca_pem(&self) -> Option<&str> {
        self.state.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin bearer token.
    pub fn admin_token(&self) -> &str {
        self.state.auth.admin_token()
    }

    /// A bearer token that authenticates as a service account (the same one on every call).
    /// RBAC decides what it may do when `SimConfig::rbac` is on.
    pub fn token_for(&self, namespace: &str, service_account: &str) -> String {
        self.state.auth.token_for(namespace, service_account)
    }

    /// A kubeconfig (YAML) with one cluster, user and context named `context`, the admin
    /// token, and namespace `default`. The server is `https://127.0.0.1:PORT` with the
    /// generated CA (`http://` when TLS is off).
    pub fn kubeconfig_yaml(&self, context: &str) -> String {
        self.kubeconfig_yaml_with_token(context, self.admin_token())
    }

    /// A kubeconfig like [`SimCluster::kubeconfig_yaml`] with another token (e.g. from
    /// [`SimCluster::token_for`]).
    pub fn kubeconfig_yaml_with_token(&self, context: &str, token: &str) -> String {
        let mut cluster = json!({"server": self.url()});
        if let Some(ca) = self.ca_pem() {
            use base64::Engine;
            cluster["certificate-authority-data"] =
                json!(base64::engine::general_purpose::STANDARD.encode(ca));
        }
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
            "current-context": context,
            "preferences": {},
        });
        serde_saphyr::to_string(&config).unwrap_or_else(|_| config.to_string())
    }

    /// Writes [`SimCluster::kubeconfig_yaml`] to a file (mode 0600), context `kubeferry-sim`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), SimError> {
        self.write_kubeconfig_as(path, "kubeferry-sim", self.admin_token())
    }

    /// Writes a kubeconfig with a given context name and token.
    pub fn write_kubeconfig_as(
        &self,
        path: &Path,
        context: &str,
        token: &str,
    ) -> Result<(), SimError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let text = self.kubeconfig_yaml_with_token(context, token);
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)?;
            file.write_all(text.as_bytes())
        };
        write().map_err(|source| SimError::WriteKubeconfig {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Stops serving, stops the controllers, kills every container process and waits until none
    /// runs (at most 2 s, for a process stuck in the kernel).
    pub async fn shutdown(mut self) {
        self.stop();
        for task in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
    }

    fn stop(&self) {
        self.shutdown.send_replace(true);
        self.state.processes.kill_all();
        if let Err(error) = std::fs::remove_dir_all(&self.state.pods_dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(message = "cannot remove the pods' working directories", path = %self.state.pods_dir.display(), %error);
        }
    }

    // --- fault injection -------------------------------------------------------------------

    /// Installs a fault rule.
    pub fn add_fault(&self, rule: FaultRule) -> FaultId {
        self.state.faults.add(rule)
    }

    /// Removes a fault rule.
    pub fn remove_fault(&self, id: FaultId) -> bool {
        self.state.faults.remove(id)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.state.faults.clear();
    }

    /// Open watches send nothing for `d` (events queue up and arrive afterwards); a cut, an
    /// abort or an expiry still ends them at once, and a new stall replaces the old one.
    pub fn stall_watches(&self, d: Duration) -> usize {
        self.state
            .watch_control
            .send(WatchControl::Stall(d))
            .unwrap_or(0)
    }

    /// How many watches are open now.
    pub fn open_watches(&self) -> usize {
        self.state.watch_control.receiver_count()
    }

    /// Open watches end cleanly (the server closes the stream), as at their timeout.
    pub fn cut_watches(&self) -> usize {
        self.state
            .watch_control
            .send(WatchControl::Cut)
            .unwrap_or(0)
    }

    /// Open watches end abruptly (connection reset mid-stream).
    pub fn abort_watches(&self) -> usize {
        self.state
            .watch_control
            .send(WatchControl::Abort)
            .unwrap_or(0)
    }

    /// The watch history is forgotten and open watches get an ERROR 410 event and end.
    pub fn expire_watches(&self) -> usize {
        self.state.store.compact();
        self.state
            .watch_control
            .send(WatchControl::Expire)
            .unwrap_or(0)
    }

    /// Refuses connections (and drops open ones) for `d`, then serves again on the same port.
    pub fn unreachable_for(&self, d: Duration) {
        self.state.control.go_down(d, false);
    }

    /// Ends a period of unreachability now: the port listens again (nothing happens while
    /// the server is reachable).
    pub fn reachable_again(&self) {
        self.state.control.come_back();
    }

    /// Restarts the API server: every connection drops, the watch history is forgotten (watches
    /// resuming from earlier resourceVersions get 410), objects and running containers stay.
    pub fn restart(&self) {
        self.state.control.go_down(Duration::ZERO, true);
    }

    // --- counters --------------------------------------------------------------------------

    /// Requests by verb and resource (`pods`, `jobs.batch`, `pods/log`); empty strings match
    /// anything.
    pub fn request_count(&self, verb: &str, resource: &str) -> u64 {
        self.state.counters.count(verb, resource)
    }

    /// Requests made by one identity (e.g. `system:serviceaccount:ns:sa`).
    pub fn request_count_by_user(&self, user: &str) -> u64 {
        self.state.counters.count_by_user(user)
    }

    /// Every counter.
    pub fn counters(&self) -> std::collections::BTreeMap<CounterKey, u64> {
        self.state.counters.snapshot()
    }

    /// Sets every counter to zero.
    pub fn reset_counters(&self) {
        self.state.counters.reset();
    }

    // --- disruptions -----------------------------------------------------------------------

    /// Evicts a pod as the kubelet does under node pressure (reason `Evicted`, DisruptionTarget).
    pub fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), SimError> {
        Ok(disruption::evict_pod(&self.state, namespace, name)?)
    }

    /// Preempts a pod as kube-scheduler does for a higher-priority one (DisruptionTarget
    /// `PreemptionByScheduler`, then a graceful delete).
    pub fn preempt_pod(&self, namespace: &str, name: &str) -> Result<(), SimError> {
        Ok(disruption::preempt_pod(&self.state, namespace, name)?)
    }

    /// Loses a node: its pods fail with reason `NodeLost` and are deleted.
    pub fn lose_node(&self, name: &str) -> Result<(), SimError> {
        Ok(disruption::lose_node(&self.state, name)?)
    }

    /// Drains a node: cordon and evict every pod through the Eviction API.
    pub fn drain_node(&self, name: &str) -> Result<(), SimError> {
        Ok(disruption::drain_node(&self.state, name)?)
    }

    /// Brings a lost or drained node back.
    pub fn restore_node(&self, name: &str) -> Result<(), SimError> {
        Ok(disruption::restore_node(&self.state, name)?)
    }

    // --- inspection ------------------------------------------------------------------------

    /// Every change of the stored objects from now on, in order, none ever missed: what the
    /// cluster really did (the kubelet's container states, the controllers' conditions), for an
    /// observer that must not depend on the API server answering.
    pub fn follow(&self) -> crate::store::Follower {
        self.state.store.follow()
    }

    /// An object as stored (`group` `""` for core, `resource` plural, `namespace` `""` for
    /// cluster-scoped objects).
    pub fn object(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        self.state
            .store
            .get(&ObjectKey::new(
                GroupResource::new(group, resource),
                namespace,
                name,
            ))
            .map(|o| (*o).clone())
    }

    /// Number of stored objects of a type.
    pub fn count(&self, group: &str, resource: &str) -> usize {
        self.state.store.count(&GroupResource::new(group, resource))
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Creates an object as the admin would (defaults, validation, admission).
    pub fn create(&self, namespace: &str, object: Value) -> Result<Value, SimError> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (group, version) = api_version
            .rsplit_once('/')
            .unwrap_or(("", api_version.as_str()));
        let (group, version) = (group.to_string(), version.to_string());
        let rt = self.state.registry.by_kind(&group, &kind).ok_or_else(|| {
            ApiError::bad_request(format!("no kind {kind:?} is served in {api_version:?}"))
        })?;
        Ok((*ops::create(&self.state, &rt, &version, namespace, object, false)?).clone())
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.stop();
    }
}
