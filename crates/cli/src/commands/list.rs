//! `kubeferry list`: the jobs kubeferry manages in a namespace.

use std::process::ExitCode;

use crate::args::{Cli, ListArgs};
use crate::connect::{Fallback, connect};
use crate::output::{Table, one_line, print_structured};

/// Runs `kubeferry list`.
pub async fn list(cli: &Cli, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let executor = &connection.executor;
    let namespace = connection.namespace(&cli.cluster);
    let mut jobs = executor.list(&namespace, args.selector.as_deref()).await?;
    if let Some(state) = args.state {
        jobs.retain(|job| job.status.state == state);
    }
    match cli.output.format.structured() {
        Some(format) => print_structured(format, &jobs)?,
        None => {
            let mut table = Table::new(vec![
                "ID", "JOB ID", "STATE", "REASON", "EXIT", "CREATED", "MESSAGE",
            ]);
            for job in &jobs {
                table.row(vec![
                    job.id.to_string(),
                    job.job_id.clone().unwrap_or_default(),
                    job.status.state.to_string(),
                    job.status.reason.to_string(),
                    job.status
                        .exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_default(),
                    job.created_at.map(|t| t.to_string()).unwrap_or_default(),
                    one_line(&job.status.message),
                ]);
            }
            if jobs.is_empty() {
                eprintln!("No kubeferry jobs in namespace {namespace}.");
            } else {
                print!("{}", table.render());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
