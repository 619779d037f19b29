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
    let ids = parse_ids(cli, args.id.as_slice())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let id = named_job(cli, ids, &args.by_job_id, &connection).await?;
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
    if args.follow {
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
            bytes: args.tail_bytes,
            previous: args.previous,
            index: args.index,
            replica: args.replica.clone(),
        };
        let mut text = executor.tail(&id, &options).await?;
        if let Some(limit) = args.limit_bytes {
            text = first_bytes(text, limit);
        }
        std::io::stdout().lock().write_all(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
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
