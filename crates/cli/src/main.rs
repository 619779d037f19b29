//! The `kubeferry` command line: run batch jobs on Kubernetes and know exactly how they ended.

mod args;
mod commands;
mod connect;
mod output;
mod spec_input;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use args::{Cli, Command, SimCommand, TemplateCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The service writes structured logs of its own.
    if !matches!(cli.command, Command::Serve(_)) {
        init_tracing(cli.verbose);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(&cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// A mistake in how kubeferry was called that shows only once the job file or the id is read
/// (a namespace given two ways): exit code 2, as for clap's own usage errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

async fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Run(args) => commands::run::run(cli, args).await,
        Command::Submit(args) => commands::submit::submit(cli, args).await,
        Command::Status(args) => commands::status::status(cli, args).await,
        Command::Wait(args) => commands::wait::wait(cli, args).await,
        Command::Cancel(args) => commands::cancel::cancel(cli, args).await,
        Command::Logs(args) => commands::logs::logs(cli, args).await,
        Command::List(args) => commands::list::list(cli, args).await,
        Command::Sweep(args) => commands::sweep::sweep(cli, args).await,
        Command::Rbac(args) => commands::rbac::rbac(cli, args),
        Command::Template(TemplateCommand::Render(args)) => commands::template::render(args),
        Command::Serve(args) => {
            let cluster = &cli.cluster;
            let args = args
                .clone()
                .with_cluster(kubeferry_server::InheritedCluster {
                    kubeconfig: cluster.kubeconfig.clone(),
                    context: cluster.context.clone(),
                    cluster_name: cluster.cluster_name.clone(),
                    namespace: cluster.namespace.clone(),
                });
            kubeferry_server::serve(args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sim(SimCommand::Serve(args)) => commands::sim::serve(args).await,
    }
}

/// Logs of kubeferry itself go to stderr: warnings by default, more with `-v`, or as RUST_LOG
/// says.
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "off,kubeferry=warn,kubeferry_kube=warn,kubeferry_sim=warn",
        1 => "warn,kubeferry=info,kubeferry_kube=info,kubeferry_sim=info",
        _ => "debug,hyper=info,hyper_util=info,tower=info,rustls=info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(kubeferry_server::colour_wanted())
        .with_target(false)
        .init();
}
