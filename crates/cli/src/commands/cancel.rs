//! `kubeferry cancel`: cancel jobs; returns at once unless asked to wait.

use std::process::ExitCode;

use kubeferry::kube::CancelOutcome;

use crate::args::{CancelArgs, Cli};
use crate::commands::{named_jobs, parse_ids};
use crate::connect::{Fallback, connect};
use crate::output::print_statuses;
use crate::output::progress;

/// Runs `kubeferry cancel`.
pub async fn cancel(cli: &Cli, args: &CancelArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_ids(cli, &args.ids)?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let ids: Vec<_> = named_jobs(cli, ids, &args.by_job_id, &connection)
        .await?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let executor = &connection.executor;
    let mut results = Vec::new();
    let mut failed = false;
    for id in &ids {
        match executor.cancel(id).await {
            Ok(outcome) => {
                if let CancelOutcome::AlreadyEnded(info) = &outcome {
                    eprintln!(
                        "kubeferry: {id} had already ended ({}); its outcome stands",
                        info.state
                    );
                }
                let mut info = outcome.info().clone();
                if args.wait && !info.is_terminal() {
                    match executor.wait(id, None, |info| progress(id, info)).await {
                        Ok(done) => info = done,
                        // Deleted on cancel and now gone: that is the cancel done.
                        Err(error) if error.is_no_such_job() => {}
                        Err(error) => {
                            eprintln!("error: {error}");
                            failed = true;
                        }
                    }
                }
                results.push((id, info));
            }
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    print_statuses(
        &cli.output.format,
        &results,
        false,
        args.by_job_id.job_id.as_deref(),
    )?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
