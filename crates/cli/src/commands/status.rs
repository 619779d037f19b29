//! `kubeferry status`: the status of one or more jobs.

use std::process::ExitCode;

use crate::args::{Cli, StatusArgs};
use crate::commands::parse_id;
use crate::connect::{Fallback, connect};
use crate::output::{StatusRow, print_structured, status_cells, status_table};

/// Runs `kubeferry status`.
pub async fn status(cli: &Cli, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    // Every id is checked before any request is made.
    let ids = args
        .ids
        .iter()
        .map(|text| parse_id(text))
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
    match cli.output.format.structured() {
        Some(format) => {
            let rows: Vec<StatusRow> = found
                .iter()
                .map(|(id, status)| StatusRow { id, status })
                .collect();
            if args.ids.len() == 1 {
                if let Some(row) = rows.first() {
                    print_structured(format, row)?;
                }
            } else {
                print_structured(format, &rows)?;
            }
        }
        None if !found.is_empty() => {
            let mut table = status_table();
            for (id, info) in &found {
                table.row(status_cells(id, info));
            }
            print!("{}", table.render());
        }
        None => {}
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
