//! `kubeferry status`: the status of one or more jobs.

use std::process::ExitCode;

use crate::args::{Cli, StatusArgs};
use crate::commands::parse_id;
use crate::connect::{Fallback, connect};
use crate::output::print_statuses;

/// Runs `kubeferry status`.
pub async fn status(cli: &Cli, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    // Every id is checked before any request is made.
    let ids = args
        .ids
        .iter()
        .map(|text| parse_id(text, cli.cluster.namespace.as_deref()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let mut found = Vec::new();
    let mut failed = false;
    for id in &ids {
        match connection.executor.status(id).await {
            Ok(info) => found.push((id, info)),
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    print_statuses(cli.output.format, &found, args.ids.len() == 1)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
