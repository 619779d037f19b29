//! The simulated cluster's options: [`SimConfig`] is the one place for all of them, and
//! [`SimArgs`] is its command-line form (a clap `Args` a binary can flatten).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// The Kubernetes version the simulated cluster reports (discovery, its nodes' kubelets).
pub const KUBERNETES_VERSION: &str = "v1.33.1";

/// Everything the simulated cluster can be told at start.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// TCP port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Require a bearer token on every request except `/version` and the health checks.
    /// Turn off only in tests: the kubelet runs the containers' commands on this machine.
    pub auth: bool,
    /// The admin token; `None` generates a random one.
    pub admin_token: Option<String>,
    /// Serve HTTPS (with a CA generated at start and written into the kubeconfig) as well as
    /// plain HTTP on the same port. kubectl sends bearer tokens only over TLS, so with `auth`
    /// on, kubectl needs this.
    pub tls: bool,
    /// Enforce RBAC (Roles, ClusterRoles and their bindings) for every identity but the admin.
    pub rbac: bool,
    /// The nodes of the cluster (at least one).
    pub nodes: Vec<NodeConfig>,
    /// Registry hosts whose images can never be pulled, as globs (`*` matches any run of
    /// characters), e.g. `*.invalid`.
    pub unpullable_registries: Vec<String>,
    /// What a container without a `command` runs, by image repository (the reference without
    /// tag or digest, e.g. `python` or `ghcr.io/acme/tool`). The container's `args` follow.
    /// A container whose image is not listed runs its `args` as the command, and with no
    /// `args` either it exits 0 at once with no output.
    pub image_entrypoints: BTreeMap<String, Vec<String>>,
    /// Image repositories with neither an entrypoint nor a default command (images built
    /// `FROM scratch` for a binary given as `command`): a container of one with no `command`
    /// and no `args` cannot be created (`CreateContainerError`, "no command specified").
    pub images_without_command: Vec<String>,
    /// An image policy, as a validating admission webhook enforces one (Gatekeeper's
    /// `K8sAllowedRepos`): when not empty, a Pod or Job with a container whose image starts
    /// with none of these prefixes is denied, 403 `admission webhook
    /// "validation.gatekeeper.sh" denied the request: ...`.
    pub allowed_image_repos: Vec<String>,
    /// Bundles of custom resource definitions installed at start.
    pub crd_bundles: Vec<CrdBundle>,
    /// More CustomResourceDefinition objects (JSON) installed at start.
    pub extra_crds: Vec<serde_json::Value>,
    /// Watch events kept per resource type for watches that resume from a resourceVersion.
    pub watch_history: usize,
    /// Directory under which each cluster keeps its pods' scratch working directories, in
    /// `kubeferry-sim/<pid>-<random>/<pod uid>` (default: the system temporary directory). A
    /// cluster removes its own directory when it stops.
    pub work_dir: Option<PathBuf>,
    /// Bytes of log kept per container run; older lines are dropped first, as on log rotation.
    pub log_limit_bytes: usize,
    /// Every interval, backoff and delay of the controllers.
    pub timings: Timings,
    /// The simulated Spark operators (running when their CRD bundles are installed).
    pub spark: SparkSimConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            port: 0,
            auth: true,
            admin_token: None,
            tls: true,
            rbac: false,
            nodes: vec![NodeConfig::named("sim-node-1")],
            unpullable_registries: vec!["*.invalid".to_string()],
            image_entrypoints: BTreeMap::new(),
            images_without_command: Vec::new(),
            allowed_image_repos: Vec::new(),
            crd_bundles: Vec::new(),
            extra_crds: Vec::new(),
            watch_history: 10_000,
            work_dir: None,
            log_limit_bytes: 10 * 1024 * 1024,
            timings: Timings::default(),
            spark: Default::default(),
        }
    }
}

impl SimConfig {
    /// A configuration for tests: authentication on, every timing short.
    pub fn for_tests() -> Self {
        SimConfig {
            timings: Timings::fast(),
            ..SimConfig::default()
        }
    }
}

/// A node of the simulated cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// CPU capacity as a Kubernetes quantity (`4`, `3500m`).
    pub cpu: String,
    /// Memory capacity as a Kubernetes quantity (`16Gi`).
    pub memory: String,
    /// Maximum number of pods.
    pub pods: u32,
    /// `nvidia.com/gpu` capacity.
    pub nvidia_gpus: u32,
    /// `amd.com/gpu` capacity.
    pub amd_gpus: u32,
    /// Extra node labels (the usual `kubernetes.io/hostname`, `kubernetes.io/os` and
    /// `kubernetes.io/arch` are always set).
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    pub taints: Vec<TaintConfig>,
}

impl NodeConfig {
    /// A node with the default capacity: 4 CPUs, 16Gi memory, 110 pods, no GPU.
    pub fn named(name: impl Into<String>) -> Self {
        NodeConfig {
            name: name.into(),
            cpu: "4".to_string(),
            memory: "16Gi".to_string(),
            pods: 110,
            nvidia_gpus: 0,
            amd_gpus: 0,
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintConfig {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// Custom resource definitions the cluster can install at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdBundle {
    /// apache/spark-kubernetes-operator: `spark.apache.org` SparkApplication (v1 and v1beta1).
    SparkApache,
    /// Kubeflow spark-operator: `sparkoperator.k8s.io/v1beta2` SparkApplication and
    /// ScheduledSparkApplication.
    SparkKubeflow,
    /// Kueue: `kueue.x-k8s.io/v1beta1` Workload, LocalQueue, ClusterQueue, ResourceFlavor.
    Kueue,
    /// kubernetes-sigs/jobset: `jobset.x-k8s.io/v1alpha2` JobSet, run by the simulated JobSet
    /// controller.
    #[value(name = "jobset")]
    JobSet,
}

/// Intervals, backoffs and delays. Kubernetes' own values are long; the defaults here are
/// short enough for interactive use and [`Timings::fast`] is for tests.
#[derive(Clone, Debug)]
pub struct Timings {
    /// First delay before an image pull is retried (ErrImagePull -> ImagePullBackOff); doubles
    /// up to `image_pull_backoff_max`.
    pub image_pull_backoff: Duration,
    /// Longest delay between image pull attempts.
    pub image_pull_backoff_max: Duration,
    /// First delay before a container that exited is restarted (CrashLoopBackOff).
    pub crash_loop_backoff: Duration,
    /// Longest CrashLoopBackOff delay.
    pub crash_loop_backoff_max: Duration,
    /// First delay before the Job controller replaces a failed pod; doubles per failure.
    pub job_backoff: Duration,
    /// Longest delay before the Job controller replaces a failed pod.
    pub job_backoff_max: Duration,
    /// How often a container's resident memory is compared with its memory limit.
    pub oom_poll_interval: Duration,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How often the kubelet retries a container whose config (secret, config map) is missing.
    pub config_retry_interval: Duration,
    /// How long a container stays `ContainerCreating` before its process starts.
    pub container_start_delay: Duration,
    /// Upper bound on any pod's termination grace period (the pod's own value is used when
    /// shorter), so tests never wait 30 s for a process that ignores SIGTERM.
    pub max_grace_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            image_pull_backoff: Duration::from_secs(5),
            image_pull_backoff_max: Duration::from_secs(60),
            crash_loop_backoff: Duration::from_secs(5),
            crash_loop_backoff_max: Duration::from_secs(60),
            job_backoff: Duration::from_secs(2),
            job_backoff_max: Duration::from_secs(60),
            oom_poll_interval: Duration::from_millis(100),
            bookmark_interval: Duration::from_secs(60),
            config_retry_interval: Duration::from_secs(2),
            container_start_delay: Duration::ZERO,
            max_grace_period: Duration::from_secs(30),
        }
    }
}

impl Timings {
    /// Millisecond timings for tests.
    pub fn fast() -> Self {
        Timings {
            image_pull_backoff: Duration::from_millis(50),
            image_pull_backoff_max: Duration::from_millis(200),
            crash_loop_backoff: Duration::from_millis(50),
            crash_loop_backoff_max: Duration::from_millis(200),
            job_backoff: Duration::from_millis(10),
            job_backoff_max: Duration::from_millis(100),
            oom_poll_interval: Duration::from_millis(20),
            bookmark_interval: Duration::from_millis(200),
            config_retry_interval: Duration::from_millis(50),
            container_start_delay: Duration::ZERO,
            max_grace_period: Duration::from_secs(2),
        }
    }
}

/// Command-line options of the simulated cluster; flatten into a clap command and turn into
/// a [`SimConfig`] with [`SimArgs::to_config`].
#[derive(Clone, Debug, clap::Args)]
pub struct SimArgs {
    /// Port to listen on at 127.0.0.1 (0 picks a free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Write a kubeconfig for the cluster (admin token) to this file.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Name of the cluster, user and context in the written kubeconfig.
    #[arg(long, default_value = "kubeferry-sim", value_name = "NAME")]
    pub kubeconfig_context: String,
    /// Number of nodes (named sim-node-1, sim-node-2, ...).
    #[arg(long, default_value_t = 1)]
    pub nodes: u32,
    /// CPU capacity of each node (a Kubernetes quantity).
    #[arg(long, default_value = "4", value_name = "QUANTITY")]
    pub node_cpu: String,
    /// Memory capacity of each node (a Kubernetes quantity).
    #[arg(long, default_value = "16Gi", value_name = "QUANTITY")]
    pub node_memory: String,
    /// Maximum pods per node.
    #[arg(long, default_value_t = 110)]
    pub node_pods: u32,
    /// nvidia.com/gpu capacity of each node.
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// amd.com/gpu capacity of each node.
    #[arg(long, default_value_t = 0)]
    pub amd_gpus: u32,
    /// Label every node with KEY=VALUE (repeatable).
    #[arg(long = "node-label", value_name = "KEY=VALUE")]
    pub node_labels: Vec<String>,
    /// Taint every node with KEY[=VALUE]:EFFECT (repeatable).
    #[arg(long = "node-taint", value_name = "KEY[=VALUE]:EFFECT")]
    pub node_taints: Vec<String>,
    /// Enforce RBAC for service-account tokens (the admin token is always allowed).
    #[arg(long)]
    pub rbac: bool,
    /// Accept requests without a bearer token: for tests and local debugging only (the
    /// kubelet runs container commands on this machine).
    #[arg(long)]
    pub no_auth: bool,
    /// Serve plain HTTP only and write an http:// kubeconfig: for tests and local debugging
    /// only (kubectl then sends no token, so use it with --no-auth).
    #[arg(long)]
    pub no_tls: bool,
    /// Use this admin token instead of a random one.
    #[arg(long, env = "KUBEFERRY_SIM_TOKEN", value_name = "TOKEN")]
    pub token: Option<String>,
    /// Registry hosts whose images can never be pulled, as globs (repeatable; default
    /// `*.invalid`).
    #[arg(long = "unpullable-registry", value_name = "GLOB")]
    pub unpullable_registries: Vec<String>,
    /// Run COMMAND for containers of IMAGE that have no command (repeatable), e.g.
    /// `--image-entrypoint 'python=python3'`.
    #[arg(long = "image-entrypoint", value_name = "IMAGE=COMMAND")]
    pub image_entrypoints: Vec<String>,
    /// IMAGE has neither an entrypoint nor a default command (repeatable): its containers
    /// without `command` and `args` fail with CreateContainerError.
    #[arg(long = "image-without-command", value_name = "IMAGE")]
    pub images_without_command: Vec<String>,
    /// Deny Pods and Jobs with an image outside these repositories (repeatable prefix, e.g.
    /// `registry.corp/`), as an image-policy admission webhook does.
    #[arg(long = "allowed-image-repo", value_name = "PREFIX")]
    pub allowed_image_repos: Vec<String>,
    /// Install custom resource definitions at start (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub crds: Vec<CrdBundle>,
    /// Watch events kept per resource type.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Interval between BOOKMARK events on watches that ask for them, in milliseconds.
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub bookmark_interval_ms: u64,
    /// Interval between memory checks of containers with a memory limit, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub oom_poll_ms: u64,
    /// First image pull backoff, in milliseconds (doubles up to 60 s).
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub image_pull_backoff_ms: u64,
}

/// A command-line value that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct ArgsError {
    /// The flag.
    pub flag: &'static str,
    /// What is wrong.
    pub message: String,
}

impl SimArgs {
    /// The configuration these arguments describe.
    pub fn to_config(&self) -> Result<SimConfig, ArgsError> {
        let mut labels = BTreeMap::new();
        for entry in &self.node_labels {
            let (key, value) = entry.split_once('=').ok_or_else(|| ArgsError {
                flag: "--node-label",
                message: format!("{entry:?} is not KEY=VALUE"),
            })?;
            labels.insert(key.to_string(), value.to_string());
        }
        let mut taints = Vec::new();
        for entry in &self.node_taints {
            taints.push(parse_taint(entry).ok_or_else(|| ArgsError {
                flag: "--node-taint",
                message: format!("{entry:?} is not KEY[=VALUE]:EFFECT with EFFECT one of NoSchedule, PreferNoSchedule, NoExecute"),
            })?);
        }
        let mut image_entrypoints = BTreeMap::new();
        for entry in &self.image_entrypoints {
            let (image, command) = entry.split_once('=').ok_or_else(|| ArgsError {
                flag: "--image-entrypoint",
                message: format!("{entry:?} is not IMAGE=COMMAND"),
            })?;
            let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
            if words.is_empty() {
                return Err(ArgsError {
                    flag: "--image-entrypoint",
                    message: format!("{entry:?} has an empty command"),
                });
            }
            image_entrypoints.insert(image.to_string(), words);
        }
        if self.nodes == 0 {
            return Err(ArgsError {
                flag: "--nodes",
                message: "at least one node is needed".to_string(),
            });
        }
        for (flag, value) in [
            ("--node-cpu", &self.node_cpu),
            ("--node-memory", &self.node_memory),
        ] {
            if crate::quantity::parse(value).is_none() {
                return Err(ArgsError {
                    flag,
                    message: format!("{value:?} is not a Kubernetes quantity"),
                });
            }
        }
        let nodes = (1..=self.nodes)
            .map(|i| NodeConfig {
                name: format!("sim-node-{i}"),
                cpu: self.node_cpu.clone(),
                memory: self.node_memory.clone(),
                pods: self.node_pods,
                nvidia_gpus: self.gpus,
                amd_gpus: self.amd_gpus,
                labels: labels.clone(),
                taints: taints.clone(),
            })
            .collect();
        let defaults = SimConfig::default();
        Ok(SimConfig {
            port: self.port,
            auth: !self.no_auth,
            admin_token: self.token.clone(),
            tls: !self.no_tls,
            rbac: self.rbac,
            nodes,
            unpullable_registries: if self.unpullable_registries.is_empty() {
                defaults.unpullable_registries
            } else {
                self.unpullable_registries.clone()
            },
            image_entrypoints,
            images_without_command: self.images_without_command.clone(),
            allowed_image_repos: self.allowed_image_repos.clone(),
            crd_bundles: self.crds.clone(),
            extra_crds: Vec::new(),
            watch_history: self.watch_history.max(1),
            work_dir: None,
            log_limit_bytes: defaults.log_limit_bytes,
            timings: Timings {
                bookmark_interval: Duration::from_millis(self.bookmark_interval_ms.max(1)),
                oom_poll_interval: Duration::from_millis(self.oom_poll_ms.max(1)),
                image_pull_backoff: Duration::from_millis(self.image_pull_backoff_ms.max(1)),
                ..Timings::default()
            },
            spark: Default::default(),
        })
    }
}

fn parse_taint(text: &str) -> Option<TaintConfig> {
    let (key_value, effect) = text.rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    if key.is_empty() {
        return None;
    }
    Some(TaintConfig {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    })
}

/// How the simulated Spark operators behave.
#[derive(Clone, Debug)]
pub struct SparkSimConfig {
    /// Whether the operators create executor pods once the driver runs (as the driver would
    /// request them from Kubernetes). Executors run the image's entrypoint with the argument
    /// `executor`, and are deleted when the driver ends.
    pub executors: bool,
    /// How long the apache operator takes, after an attempt ended, to release its driver and
    /// executors (the real operator does it on a later reconcile, about a second after). Log
    /// followers read the driver's last lines meanwhile.
    pub release_delay: Duration,
    /// Faults the operators suffer; shared by every clone of this configuration, so a test can
    /// change them while the cluster runs.
    pub faults: SparkFaults,
}

impl Default for SparkSimConfig {
    fn default() -> Self {
        SparkSimConfig {
            executors: true,
            release_delay: Duration::from_secs(1),
            faults: SparkFaults::default(),
        }
    }
}

/// A way a simulated operator misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SparkFault {
    /// The operator leaves applications alone: no status, no finalizer, no driver (an operator
    /// that is down, or does not watch the namespace).
    NoStatus,
    /// The operator writes a status that is not its own shape (`{"phase": "Running"}`, as a
    /// newer or different operator might) and does nothing else.
    UnreadableStatus,
    /// Once the driver runs, the operator reports the application failed and keeps the driver
    /// running (the apache operator retaining the resources of a failed application, the
    /// Kubeflow operator giving up on a driver it lost track of).
    FailWithDriverRunning,
}

/// The faults the simulated operators suffer, changeable while the cluster runs: one for every
/// application, or one for the applications of a name.
#[derive(Clone, Debug, Default)]
pub struct SparkFaults {
    faults: Arc<Mutex<Faults>>,
}

#[derive(Debug, Default)]
struct Faults {
    all: Option<SparkFault>,
    by_name: HashMap<String, SparkFault>,
}

impl SparkFaults {
    /// Makes both operators suffer `fault` with every application from now on (`None`: behave).
    pub fn set(&self, fault: Option<SparkFault>) {
        self.faults.lock().all = fault;
    }

    /// Makes both operators suffer `fault` with the applications named `name` (`None`: behave
    /// as for the others).
    pub fn set_for(&self, name: &str, fault: Option<SparkFault>) {
        let mut faults = self.faults.lock();
        match fault {
            Some(fault) => faults.by_name.insert(name.to_string(), fault),
            None => faults.by_name.remove(name),
        };
    }

    /// The fault in force for the application `name`.
    pub fn get(&self, name: &str) -> Option<SparkFault> {
        let faults = self.faults.lock();
        faults.by_name.get(name).copied().or(faults.all)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    #[test]
    fn arguments_become_a_configuration() {
        let cli = Cli::try_parse_from([
            "sim",
            "--nodes",
            "2",
            "--node-cpu",
            "8",
            "--gpus",
            "1",
            "--rbac",
            "--no-auth",
            "--node-label",
            "zone=a",
            "--node-taint",
            "dedicated=gpu:NoSchedule",
            "--unpullable-registry",
            "*.example",
            "--image-entrypoint",
            "python=python3 -u",
            "--image-without-command",
            "ghcr.io/acme/static-tool",
            "--crds",
            "spark-apache,kueue,jobset",
        ])
        .expect("parses");
        let config = cli.sim.to_config().expect("valid");
        assert_eq!(config.nodes.len(), 2);
        assert_eq!(config.nodes[1].name, "sim-node-2");
        assert_eq!(
            (config.nodes[0].cpu.as_str(), config.nodes[0].nvidia_gpus),
            ("8", 1)
        );
        assert_eq!(
            config.nodes[0].labels.get("zone").map(String::as_str),
            Some("a")
        );
        assert_eq!(config.nodes[0].taints[0].effect, "NoSchedule");
        assert!(config.rbac && !config.auth && config.tls);
        assert_eq!(config.unpullable_registries, vec!["*.example".to_string()]);
        assert_eq!(
            config.image_entrypoints.get("python"),
            Some(&vec!["python3".to_string(), "-u".to_string()])
        );
        assert_eq!(
            config.images_without_command,
            vec!["ghcr.io/acme/static-tool".to_string()]
        );
        assert_eq!(
            config.crd_bundles,
            vec![CrdBundle::SparkApache, CrdBundle::Kueue, CrdBundle::JobSet]
        );
    }

    #[test]
    fn bad_arguments_name_the_flag() {
        let cli = Cli::try_parse_from(["sim", "--node-memory", "lots"]).expect("parses");
        let err = cli.sim.to_config().expect_err("not a quantity");
        assert_eq!(
            err.to_string(),
            "--node-memory: \"lots\" is not a Kubernetes quantity"
        );
        let cli = Cli::try_parse_from(["sim", "--node-taint", "x:Sometimes"]).expect("parses");
        assert!(cli.sim.to_config().is_err());
    }
}
