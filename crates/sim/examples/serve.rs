//! Runs a simulated cluster until Ctrl-C: `cargo run -p kubeferry-sim --example serve -- --help`.

use clap::Parser;
use kubeferry_sim::{SimArgs, SimCluster};

#[derive(Parser)]
#[command(about = "Serve a simulated Kubernetes cluster on 127.0.0.1")]
struct Cli {
    #[command(flatten)]
    sim: SimArgs,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let config = cli.sim.to_config()?;
    let cluster = SimCluster::start(config).await?;
    if let Some(path) = &cli.sim.kubeconfig {
        cluster.write_kubeconfig_as(path, &cli.sim.kubeconfig_context, cluster.admin_token())?;
        eprintln!("kubeconfig written to {}", path.display());
    }
    eprintln!("simulated cluster serving at {}", cluster.url());
    tokio::signal::ctrl_c().await?;
    cluster.shutdown().await;
    Ok(())
}
