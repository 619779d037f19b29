//! `kubeferry sweep`: find (and on request delete) managed jobs whose ids the caller does not
//! know: what a lost create response or a crashed caller can leave behind.

use std::collections::HashSet;
use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;

use crate::args::{Cli, SweepArgs};
use crate::connect::{Fallback, connect};
use crate::output::{Table, print_structured};

/// Runs `kubeferry sweep`.
pub async fn sweep(cli: &Cli, args: &SweepArgs) -> anyhow::Result<ExitCode> {
    let Some(known) = &args.known else {
        return release(cli).await;
    };
    let text = if known.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(known)
            .with_context(|| format!("--known: cannot read {}", known.display()))?
    };
    let known: HashSet<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect();
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let executor = &connection.executor;
    let namespace = connection.namespace(&cli.cluster);
    let orphans = executor.sweep(&namespace, &known, args.delete).await?;
    match cli.output.format.structured() {
        Some(format) => print_structured(format, &orphans)?,
        None => {
            if orphans.is_empty() {
                eprintln!("No orphans in namespace {namespace}.");
            } else {
                let mut table = Table::new(vec!["ID", "JOB ID", "CREATED", "DELETED"]);
                for orphan in &orphans {
                    table.row(vec![
                        orphan.id.to_string(),
                        orphan.job_id.clone().unwrap_or_else(|| "<none>".into()),
                        crate::output::time_cell(orphan.created_at),
                        if orphan.deleted { "yes" } else { "no" }.to_string(),
                    ]);
                }
                print!("{}", table.render());
                if !args.delete {
                    eprintln!("Nothing was deleted; pass --delete to delete these.");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `kubeferry sweep --release`: lets go of every object kubeferry's finalizer holds in the
/// namespace, and prints their execution ids.
async fn release(cli: &Cli) -> anyhow::Result<ExitCode> {
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let namespace = connection.namespace(&cli.cluster);
    let released = connection.executor.release_all(&namespace).await?;
    match cli.output.format.structured() {
        Some(format) => print_structured(format, &released)?,
        None => {
            for id in &released {
                println!("{id}");
            }
            eprintln!(
                "Released {} object(s) in namespace {namespace}: kubeferry's finalizer holds none there now.",
                released.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
