//! `kubeferry logs`: a job's log, tailed or followed.

use std::io::Write;
use std::process::ExitCode;

use futures::StreamExt;
use kubeferry::kube::logs::{FollowOptions, TailOptions};

use crate::args::{Cli, LogsArgs};
use crate::commands::parse_id;
use crate::connect::{Fallback, connect};

/// Runs `kubeferry logs`.
pub async fn logs(cli: &Cli, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let id = parse_id(&args.id, cli.cluster.namespace.as_deref())?;
    if args.index.is_some() && id.kind != kubeferry::JobKind::Job {
        return Err(crate::UsageError(format!(
            "--index is only for indexed container jobs; {id} is not a container job"
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
        };
        let text = executor.tail(&id, &options).await?;
        std::io::stdout().lock().write_all(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
