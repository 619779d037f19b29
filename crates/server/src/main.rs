//! `kubeferry-server`: the HTTP service on its own, with the cluster flags the `kubeferry`
//! command line gives `kubeferry serve`.

use std::path::PathBuf;

use clap::Parser;
use kubeferry_server::{InheritedCluster, ServeArgs, serve};

/// kubeferry's HTTP service.
#[derive(Debug, Parser)]
#[command(name = "kubeferry-server", version)]
struct Cli {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long)]
    context: Option<String>,
    /// The cluster's name in execution ids (default: the context's cluster name).
    #[arg(long, env = "KUBEFERRY_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// The one namespace to serve when none are configured otherwise.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let args = cli.serve.with_cluster(InheritedCluster {
        kubeconfig: cli.kubeconfig,
        context: cli.context,
        cluster_name: cli.cluster_name,
        namespace: cli.namespace,
    });
    serve(args).await
}
