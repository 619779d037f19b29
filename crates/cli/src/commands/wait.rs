//! `kubeferry wait`: wait for a job to end; exit 0 only if it succeeded.

use std::process::ExitCode;

use crate::args::{Cli, WaitArgs};
use crate::commands::{exit_code_of, parse_id, progress};
use crate::connect::{Fallback, connect};
use crate::output::print_final;

/// Runs `kubeferry wait`.
pub async fn wait(cli: &Cli, args: &WaitArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.id, cli.cluster.namespace.as_deref())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let info = connection
        .executor
        .wait(&id, args.timeout, |info| progress(&id, info))
        .await?;
    print_final(&cli.output.format, &id, &info)?;
    Ok(exit_code_of(&info))
}
