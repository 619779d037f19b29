//! `kubeferry logs`: a job's log, tailed or followed.

use std::io::Write;
use std::process::ExitCode;

use futures::StreamExt;
use kubeferry::JobKind;
use kubeferry::kube::logs::{FollowOptions, TailOptions};

use crate::args::{Cli, LogsArgs};
use crate::commands::{named_job, parse_ids};
use crate::connect::{Fallback, connect};

/// Runs `kubeferry logs`.
pub async fn logs(cli: &Cli, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_ids(cli, args.job.id.as_slice())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let id = named_job(cli, ids, &args.job.by_job_id, &connection).await?;
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
    let executor = &connection.executor;
    let options = TailOptions {
        lines: args.tail,
        bytes: args.tail_bytes,
        previous: args.previous,
        index: args.index,
        replica: args.replica.clone(),
    };
    // A job that ended whose log is no longer a container's (its pods gone: its last words;
    // or none at all) is told as a tail, then the follow ends; a live log is followed.
    let ended = args.follow && executor.status(&id).await?.is_terminal();
    if args.follow && !ended {
        return follow_to_the_end(executor, &id, args).await;
    }
    let tail = executor.tail(&id, &options).await.map_err(usage)?;
    if ended && !tail.gone {
        // A container's log to read: followed from its start, every attempt.
        return follow_to_the_end(executor, &id, args).await;
    }
    let text = match args.limit_bytes {
        Some(limit) => first_bytes(tail.log, limit),
        None => tail.log,
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if let Some(warning) = tail.warning {
        eprintln!("warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Follows the job's log, every attempt, until it ends.
async fn follow_to_the_end(
    executor: &kubeferry::kube::Executor,
    id: &kubeferry::ExecutionId,
    args: &LogsArgs,
) -> anyhow::Result<ExitCode> {
    let options = FollowOptions {
        tail_lines: args.tail,
        index: args.index,
        replica: args.replica.clone(),
        ..FollowOptions::default()
    };
    let mut lines = Box::pin(executor.follow(id, options)?);
    while let Some(line) = lines.next().await {
        let line = line.map_err(usage)?;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(line.as_bytes())?;
        stdout.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// An index or replicated job the job does not have is a usage error (exit code 2).
fn usage(error: kubeferry::kube::Error) -> anyhow::Error {
    match error {
        kubeferry::kube::Error::NoSuchPart { .. } => {
            crate::UsageError(format!("{error}; see --index and --replica")).into()
        }
        error => error.into(),
    }
}

/// The first `limit` bytes of `text` (kubectl's `--limit-bytes`), never splitting a character:
/// a character that would not fit whole is left out.
fn first_bytes(mut text: String, limit: u64) -> String {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::first_bytes;

    #[test]
    fn the_first_bytes_never_split_a_character() {
        assert_eq!(first_bytes("hello\nworld\n".into(), 7), "hello\nw");
        assert_eq!(first_bytes("hi".into(), 10), "hi");
        assert_eq!(first_bytes("aé".into(), 2), "a");
        assert_eq!(first_bytes("aé".into(), 3), "aé");
        assert_eq!(first_bytes("abc".into(), 0), "");
    }
}
