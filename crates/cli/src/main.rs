//! The `kubeferry` command line: run batch jobs on Kubernetes and know exactly how they ended.

mod args;
mod commands;
mod completion;
mod connect;
mod jsonpath;
mod live;
mod output;
mod spec_input;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{CommandFactory, FromArgMatches};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;

use args::{Cli, Command, SimCommand, TemplateCommand};

/// The executable name kubectl runs `kubectl ferry` as (kubectl's plugin mechanism).
const PLUGIN_EXECUTABLE: &str = "kubectl-ferry";

/// The executable kubectl (1.26 and later) asks to complete `kubectl ferry ...`.
const PLUGIN_COMPLETER: &str = "kubectl_complete-ferry";

/// How the user invoked kubeferry, as its usage and help say it: `kubectl ferry` when run as
/// the kubectl plugin, `kubeferry` otherwise.
fn invoked_as() -> &'static str {
    let program = std::env::args_os().next().unwrap_or_default();
    let stem = std::path::Path::new(&program)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned());
    match stem.as_deref() {
        Some(PLUGIN_EXECUTABLE | PLUGIN_COMPLETER) => "kubectl ferry",
        _ => "kubeferry",
    }
}

/// Answers kubectl's completion request for the plugin when run as `kubectl_complete-ferry
/// WORD... CURRENT`: the candidates, one per line (`value<TAB>help`), then cobra's directive
/// `:4` (no file completion). `None` when not run so.
fn complete_for_kubectl() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let program = args.next()?;
    let stem = std::path::Path::new(&program).file_stem()?.to_owned();
    if stem != PLUGIN_COMPLETER {
        return None;
    }
    let mut words: Vec<std::ffi::OsString> = vec!["kubectl ferry".into()];
    words.extend(args);
    if words.len() == 1 {
        words.push("".into());
    }
    let index = words.len() - 1;
    let current_dir = std::env::current_dir().ok();
    let mut command = command("kubectl ferry");
    let candidates =
        clap_complete::engine::complete(&mut command, words, index, current_dir.as_deref())
            .unwrap_or_default();
    let mut out = String::new();
    for candidate in candidates {
        out.push_str(&candidate.get_value().to_string_lossy());
        if let Some(help) = candidate.get_help() {
            out.push('\t');
            out.push_str(&help.to_string());
        }
        out.push('\n');
    }
    out.push_str(":4\n");
    Some(match output::print_text(&out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    })
}

/// The command line's definition, named as invoked.
fn command(invoked_as: &'static str) -> clap::Command {
    Cli::command().bin_name(invoked_as)
}

fn main() -> ExitCode {
    if let Some(code) = complete_for_kubectl() {
        return code;
    }
    let invoked_as = invoked_as();
    // A shell asking for completions (`COMPLETE=bash kubeferry -- ...`) is answered here.
    clap_complete::CompleteEnv::with_factory(move || command(invoked_as))
        .var(completion::COMPLETE_VAR)
        .complete();
    let cli = match Cli::from_arg_matches(&command(invoked_as).get_matches()) {
        Ok(cli) => cli,
        Err(error) => error.format(&mut command(invoked_as)).exit(),
    };
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
    let answered = runtime.block_on(dispatch(&cli));
    // The answer is given; work still in flight in the background (a settler's write, a watch)
    // is cut short as the runtime stops, and what it would say of that is noise.
    ANSWERED.store(true, Ordering::Relaxed);
    drop(runtime);
    match answered {
        Ok(code) => code,
        // The reader went away (`kubeferry list -o name | head -1`): it has what it wanted,
        // as kubectl ends then.
        Err(error) if closed_pipe(&error) => ExitCode::SUCCESS,
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

/// Whether an error is standard output's reader having gone away.
fn closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
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
        Command::Describe(args) => commands::describe::describe(cli, args).await,
        Command::Wait(args) => commands::wait::wait(cli, args).await,
        Command::Cancel(args) => commands::cancel::cancel(cli, args).await,
        Command::Logs(args) => commands::logs::logs(cli, args).await,
        Command::List(args) => commands::list::list(cli, args).await,
        Command::Sweep(args) => commands::sweep::sweep(cli, args).await,
        Command::Rbac(args) => commands::rbac::rbac(cli, args),
        Command::Completion(args) => {
            output::print_text(&completion::registration(args.shell, "kubeferry")?)?;
            Ok(ExitCode::SUCCESS)
        }
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
/// Set once the command has answered: nothing is logged after that.
static ANSWERED: AtomicBool = AtomicBool::new(false);

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "off,kubeferry=warn,kubeferry_kube=warn,kubeferry_sim=warn",
        1 => "warn,kubeferry=info,kubeferry_kube=info,kubeferry_sim=info",
        _ => "debug,hyper=info,hyper_util=info,tower=info,rustls=info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let output = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(kubeferry_server::colour_wanted())
        .with_target(false)
        .with_filter(filter)
        .with_filter(filter_fn(|_| !ANSWERED.load(Ordering::Relaxed)));
    tracing_subscriber::registry().with(output).init();
}
