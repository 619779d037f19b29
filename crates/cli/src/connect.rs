//! Finding the cluster: the kubeconfig as kubectl finds it, or the embedded simulated cluster.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kubeferry::core::spec::JobSpec;
use kubeferry::kube::cluster::Kubeconfig;
use kubeferry::kube::{
    Cluster, ClusterSettings, DryRun, Executor, ExecutorSettings, KubeconfigLocation, Submission,
    generate_job_id,
};
use kubeferry_sim::controllers::spark::with_spark_operators;
use kubeferry_sim::{CrdBundle, SimCluster, SimConfig};

/// The cluster and namespace, chosen as kubectl chooses them.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace (default: the job file's, else the context's). Commands given execution
    /// ids take the namespace from them; `-n` with them must name the same one.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The cluster's name in execution ids (default: the context's cluster name).
    #[arg(long, global = true, env = "KUBEFERRY_CLUSTER_NAME")]
    pub cluster_name: Option<String>,
    /// The Spark operator of job files that name none: apache or kubeflow (default: the one
    /// whose SparkApplication CRD the cluster has; apache when it has both).
    #[arg(
        long,
        global = true,
        env = "KUBEFERRY_SPARK_OPERATOR",
        value_name = "OPERATOR"
    )]
    pub spark_operator: Option<kubeferry::core::spark::SparkOperator>,
}

/// The cluster name of the embedded simulated cluster in execution ids.
pub const EMBEDDED_CLUSTER: &str = "sim";

/// A connected executor, and the embedded cluster it runs on, if any.
pub struct Connection {
    /// The executor.
    pub executor: Executor,
    /// The embedded simulated cluster; dropping it stops the cluster and its containers.
    pub embedded: Option<SimCluster>,
}

impl Connection {
    /// The namespace of `-n`, else the context's.
    pub fn namespace(&self, args: &ClusterArgs) -> String {
        args.namespace
            .clone()
            .unwrap_or_else(|| self.executor.cluster().default_namespace().to_string())
    }

    /// Submits a job as `run` and `submit` do: into the namespace of `-n`, the job file or the
    /// context, under the caller's job id or a fresh one (generated once, reused by every retry
    /// of the submission). Returns the submission (the execution id, and whether the job id
    /// already named a job, so that nothing was created) and the job id.
    pub async fn submit(
        &self,
        args: &ClusterArgs,
        spec: &JobSpec,
        job_id: Option<&str>,
    ) -> anyhow::Result<(Submission, String)> {
        let (namespace, job_id) = self.target(args, spec, job_id)?;
        let submission = self
            .executor
            .submit_or_find(spec, &job_id, &namespace)
            .await?;
        Ok((submission, job_id))
    }

    /// The objects [`Connection::submit`] would create, as kubeferry builds them or as the API
    /// server would store them; nothing is created.
    pub async fn dry_run(
        &self,
        args: &ClusterArgs,
        spec: &JobSpec,
        job_id: Option<&str>,
        mode: DryRun,
    ) -> anyhow::Result<Vec<serde_json::Value>> {
        let (namespace, job_id) = self.target(args, spec, job_id)?;
        Ok(self
            .executor
            .dry_run(spec, &job_id, &namespace, mode)
            .await?)
    }

    /// Where a submission goes: the namespace of `-n`, the job file or the context; and its
    /// job id, the caller's or a fresh one.
    fn target(
        &self,
        args: &ClusterArgs,
        spec: &JobSpec,
        job_id: Option<&str>,
    ) -> anyhow::Result<(String, String)> {
        let namespace = spec
            .resolve_namespace(
                args.namespace.as_deref(),
                self.executor.cluster().default_namespace(),
            )
            .map_err(|clash| crate::UsageError(format!("namespace: {clash}")))?;
        let job_id = job_id.map_or_else(|| generate_job_id(spec.name()), str::to_string);
        Ok((namespace, job_id))
    }

    /// Stops the embedded cluster, if any, and its containers.
    pub async fn close(self) {
        let Connection { executor, embedded } = self;
        // Stop the watches first, so that they do not report the cluster going away.
        drop(executor);
        if let Some(sim) = embedded {
            sim.shutdown().await;
        }
    }
}

/// Whether a command may fall back to the embedded simulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Only `run`: the job lives and dies with this process.
    Embedded,
    /// Every other command: a job on an embedded cluster would be gone before anyone asks.
    None,
}

/// Connects as kubectl would: `--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, with `--context`.
/// With no kubeconfig at all and no `--context`, `run` starts the simulated cluster in this
/// process instead, and says so on stderr.
pub async fn connect(args: &ClusterArgs, fallback: Fallback) -> anyhow::Result<Connection> {
    let settings = ClusterSettings::default();
    match KubeconfigLocation::find(args.kubeconfig.as_deref()) {
        Some(location) => {
            let kubeconfig = location.read()?;
            let cluster = Cluster::from_kubeconfig(
                kubeconfig,
                args.context.as_deref(),
                args.cluster_name.as_deref(),
                settings,
            )
            .await?;
            Ok(Connection {
                executor: Executor::new(cluster, executor_settings(args)),
                embedded: None,
            })
        }
        None if args.context.is_some() => anyhow::bail!(
            "--context {:?}: no kubeconfig found (no --kubeconfig, $KUBECONFIG or ~/.kube/config)",
            args.context.as_deref().unwrap_or_default()
        ),
        None if fallback == Fallback::Embedded => {
            eprintln!(
                "kubeferry: no cluster configured (no --kubeconfig, $KUBECONFIG or ~/.kube/config): running on an embedded simulated cluster"
            );
            // The embedded cluster runs every kind: the Spark operators and the JobSet
            // controller are installed.
            let mut sim_config = with_spark_operators(SimConfig::default());
            sim_config.crd_bundles.push(CrdBundle::JobSet);
            let sim = SimCluster::start(sim_config)
                .await
                .context("cannot start the embedded simulated cluster")?;
            let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig_yaml(EMBEDDED_CLUSTER))
                .context("the embedded cluster's kubeconfig")?;
            let cluster = Cluster::from_kubeconfig(
                kubeconfig,
                None,
                Some(args.cluster_name.as_deref().unwrap_or(EMBEDDED_CLUSTER)),
                settings,
            )
            .await?;
            Ok(Connection {
                executor: Executor::new(cluster, executor_settings(args)),
                embedded: Some(sim),
            })
        }
        None => anyhow::bail!(
            "no cluster configured: pass --kubeconfig or --context, set $KUBECONFIG, or create ~/.kube/config (`kubeferry sim serve --kubeconfig FILE` starts a simulated cluster; only `kubeferry run` starts one by itself)"
        ),
    }
}

/// The executor's settings from the command line.
fn executor_settings(args: &ClusterArgs) -> ExecutorSettings {
    let mut settings = ExecutorSettings::default();
    settings.spark.default_operator = args.spark_operator;
    settings
}
