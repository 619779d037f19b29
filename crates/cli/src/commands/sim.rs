//! `kubeferry sim serve`: the simulated cluster as a server for kubectl and kubeferry.

use std::process::ExitCode;

use anyhow::Context;
use kubeferry_sim::controllers::spark::with_demo_entrypoint;
use kubeferry_sim::{SimArgs, SimCluster};

/// Runs `kubeferry sim serve` until Ctrl-C or SIGTERM, then stops the cluster: its containers'
/// processes are stopped and its files removed.
pub async fn serve(args: &SimArgs) -> anyhow::Result<ExitCode> {
    // With a Spark operator's CRDs, the `apache/spark` image runs a Spark-like demo driver.
    let config = with_demo_entrypoint(args.to_config()?);
    let sim = SimCluster::start(config)
        .await
        .context("cannot start the simulated cluster")?;
    eprintln!("kubeferry: simulated cluster listening on {}", sim.url());
    if let Some(path) = &args.kubeconfig {
        sim.write_kubeconfig_as(path, &args.kubeconfig_context, sim.admin_token())
            .with_context(|| format!("--kubeconfig: cannot write {}", path.display()))?;
        eprintln!(
            "kubeferry: kubeconfig written to {0} (try: kubectl --kubeconfig {0} get nodes)",
            path.display()
        );
    } else {
        eprintln!("kubeferry: no --kubeconfig given; the admin token is not shown");
    }
    let signal = kubeferry_server::stop_signal().await;
    eprintln!("kubeferry: {signal}: stopping the simulated cluster");
    sim.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
