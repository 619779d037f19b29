//! `kubeferry wait`: wait for a job to end; exit 0 only if it succeeded, 124 if `--timeout`
//! ran out first.

use std::process::ExitCode;

use crate::args::{Cli, WaitArgs};
use crate::commands::{TIMED_OUT, exit_code_of, named_job, parse_ids};
use crate::connect::{Fallback, connect};
use crate::live::Progress;
use crate::output::print_final;

/// Runs `kubeferry wait`.
pub async fn wait(cli: &Cli, args: &WaitArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_ids(cli, args.job.id.as_slice())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let id = named_job(cli, ids, &args.job.by_job_id, &connection).await?;
    let live = Progress::new(cli.output.no_progress);
    let executor = &connection.executor;
    let info = executor
        .wait(&id, args.timeout, |info| live.status(executor, &id, info))
        .await;
    live.clear();
    let info = match info {
        Ok(info) => info,
        Err(error @ kubeferry::kube::Error::WaitTimeout { .. }) => {
            eprintln!("kubeferry: {error}; it keeps running");
            return Ok(ExitCode::from(TIMED_OUT));
        }
        Err(error) => return Err(error.into()),
    };
    print_final(
        &cli.output.format,
        &id,
        &info,
        args.job.by_job_id.job_id.as_deref(),
    )?;
    Ok(exit_code_of(&info))
}
