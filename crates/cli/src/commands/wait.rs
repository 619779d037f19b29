//! `kubeferry wait`: wait for a job to end; exit 0 only if it succeeded.

use std::process::ExitCode;

use crate::args::{Cli, WaitArgs};
use crate::commands::{exit_code_of, parse_id};
use crate::connect::{Fallback, connect};
use crate::live::Progress;
use crate::output::print_final;

/// Runs `kubeferry wait`.
pub async fn wait(cli: &Cli, args: &WaitArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.id, cli.cluster.namespace.as_deref())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let live = Progress::new(cli.output.no_progress);
    let executor = &connection.executor;
    let info = executor
        .wait(&id, args.timeout, |info| live.status(executor, &id, info))
        .await;
    live.clear();
    let info = info?;
    print_final(&cli.output.format, &id, &info)?;
    Ok(exit_code_of(&info))
}
