//! `kubeferry logs`: a job's log, tailed or followed.

use std::io::Write;
use std::process::ExitCode;

use futures::StreamExt;
use kubeferry::JobKind;
use kubeferry::kube::logs::{FollowOptions, TailOptions};

use crate::args::{Cli, LogsArgs};
use crate::commands::parse_id;
use crate::connect::{Fallback, connect};

/// Runs `kubeferry logs`.
pub async fn logs(cli: &Cli, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.id, cli.cluster.namespace.as_deref())?;
    if args.index.is_some() && !matches!(id.kind, JobKind::Job | JobKind::JobSet) {
        return Err(crate::UsageError(format!(
            "--index is only for indexed container jobs and JobSets; {id} is neither"
        ))
        .into());
    }
    if args.replica.is_some() && id.kind != JobKind::JobSet {
        return Err(crate::UsageError(format!(
            "--replica is only for JobSets; {id} is not a JobSet"
        ))
        .into());
    }
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let executor = &connection.executor;
    if args.follow {
        if args.previous || args.limit_bytes.is_some() {
            anyhow::bail!("--follow cannot be combined with --previous or --limit-bytes");
        }
        let options = FollowOptions {
            tail_lines: args.tail,
            index: args.index,
            replica: args.replica.clone(),
            ..FollowOptions::default()
        };
        let mut lines = Box::pin(executor.follow(&id, options)?);
        while let Some(line) = lines.next().await {
            let line = line?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(line.as_bytes())?;
            stdout.flush()?;
        }
    } else {
        let options = TailOptions {
            lines: args.tail,
            bytes: args.limit_bytes,
            previous: args.previous,
            index: args.index,
            replica: args.replica.clone(),
        };
        let text = executor.tail(&id, &options).await?;
        std::io::stdout().lock().write_all(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
