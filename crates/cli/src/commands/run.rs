//! `kubeferry run`: submit a job, stream its log, wait for its end, exit with its outcome.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use kubeferry::kube::Executor;
use kubeferry::kube::logs::FollowOptions;
use kubeferry::{ExecutionId, ExecutionInfo};

use crate::args::{Cli, OnInterrupt, RunArgs};
use crate::commands::{TIMED_OUT, already_there, exit_code_of};
use crate::connect::{Fallback, connect};
use crate::live::Progress;
use crate::output::print_final;
use crate::spec_input;

/// How long the log stream may take to drain after the job ended.
const LOG_DRAIN: Duration = Duration::from_secs(5);

/// Runs `kubeferry run`.
pub async fn run(cli: &Cli, args: &RunArgs) -> anyhow::Result<ExitCode> {
    // Bad input is refused before anything is contacted or created.
    let spec = spec_input::load(&args.spec)?;
    if let Some(mode) = args.dry_run.mode() {
        return crate::commands::submit::dry_run(
            cli,
            &spec,
            args.job_id.as_deref(),
            mode,
            Fallback::Embedded,
        )
        .await;
    }
    let connection = connect(&cli.cluster, Fallback::Embedded).await?;
    let executor = connection.executor.clone();
    let (submission, job_id) = connection
        .submit(&cli.cluster, &spec, args.job_id.as_deref())
        .await?;
    let id = submission.id;
    if submission.existing {
        // Nothing was created: that run's outcome and log are the answer.
        let info = executor.status(&id).await?;
        eprintln!("kubeferry: {}", already_there(&job_id, &id, &info));
    } else {
        eprintln!("kubeferry: submitted {id} (job id {job_id})");
    }
    let live = Progress::new(cli.output.no_progress);
    if !args.no_logs
        && let Some(which) = streamed_part(&spec)
    {
        eprintln!("kubeferry: {which}");
    }

    // Log lines go to stdout, unless stdout carries the JSON/YAML result.
    let structured = cli.output.format.structured();
    let logs = (!args.no_logs).then(|| {
        let stream = executor.follow(&id, FollowOptions::default());
        let live = live.clone();
        tokio::spawn(async move {
            let mut lines = match stream {
                Ok(stream) => Box::pin(stream),
                Err(error) => {
                    eprintln!("kubeferry: cannot follow the log: {error}");
                    return;
                }
            };
            while let Some(line) = lines.next().await {
                match line {
                    Ok(line) => live.log(&line, structured.is_some()),
                    // The log is a convenience: losing it never changes the job's outcome.
                    Err(error) => {
                        eprintln!("kubeferry: log stream ended: {error}");
                        return;
                    }
                }
            }
        })
    });

    let waited = wait_handling_interrupts(&executor, &id, args, &live).await;
    let (info, timed_out) = match waited {
        Ok(info) => (info, None),
        Err(error) => match error.downcast::<kubeferry::kube::Error>() {
            Ok(error @ kubeferry::kube::Error::WaitTimeout { .. }) => (None, Some(error)),
            Ok(error) => return Err(error.into()),
            Err(error) => return Err(error),
        },
    };
    if let Some(logs) = logs {
        let abort = logs.abort_handle();
        // The job ended: give the log a moment to drain so its last lines come before the
        // status line. A job left running writes on: its log would never drain.
        let drained = info.is_some() && tokio::time::timeout(LOG_DRAIN, logs).await.is_ok();
        if !drained {
            abort.abort();
        }
    }
    live.clear();
    drop(executor);
    if let Some(error) = timed_out {
        eprintln!("kubeferry: {error}; it keeps running");
        connection.close().await;
        return Ok(ExitCode::from(TIMED_OUT));
    }
    let Some(info) = info else {
        // Left running on request.
        connection.close().await;
        return Ok(ExitCode::from(130));
    };
    print_final(&cli.output.format, &id, &info, Some(&job_id))?;
    connection.close().await;
    Ok(exit_code_of(&info))
}

/// Waits for the job's end. Ctrl-C cancels the job, leaves it running, or asks which
/// (`--on-interrupt`); a second Ctrl-C stops waiting at once. `None` means left running.
async fn wait_handling_interrupts(
    executor: &Executor,
    id: &ExecutionId,
    args: &RunArgs,
    live: &Progress,
) -> anyhow::Result<Option<ExecutionInfo>> {
    let wait = executor.wait(id, args.timeout, |info| live.status(executor, id, info));
    tokio::pin!(wait);
    tokio::select! {
        result = &mut wait => return Ok(Some(result?)),
        interrupted = tokio::signal::ctrl_c() => interrupted?,
    }
    // The question and what follows are plain lines.
    live.clear();
    let cancel = match args.on_interrupt {
        OnInterrupt::Cancel => true,
        OnInterrupt::Leave => false,
        OnInterrupt::Ask => ask_cancel(id).await,
    };
    if !cancel {
        eprintln!("kubeferry: left {id} running; follow it with `kubeferry wait {id}`");
        return Ok(None);
    }
    eprintln!("kubeferry: cancelling {id} (Ctrl-C again to stop waiting)");
    let outcome = executor.cancel(id).await?;
    crate::output::progress(id, outcome.info());
    tokio::select! {
        result = &mut wait => match result {
            Ok(info) => Ok(Some(info)),
            // Cancelled and deleted before the waiter saw its last state.
            Err(error) if error.is_no_such_job() => Ok(Some(outcome.info().clone())),
            Err(error) => Err(error.into()),
        },
        interrupted = tokio::signal::ctrl_c() => {
            interrupted?;
            eprintln!("kubeferry: stopped waiting; {id} is being cancelled");
            Ok(Some(outcome.info().clone()))
        }
    }
}

/// Asks on the terminal (standard input) whether to cancel; an empty answer or the end of input
/// cancels, `n` or `no` leaves the job running. Without a terminal to ask on (standard input a
/// file, a pipe or closed: a script, CI) nobody can answer, so it cancels, as Ctrl-C means stop,
/// and says so; `--on-interrupt leave` keeps jobs running there.
async fn ask_cancel(id: &ExecutionId) -> bool {
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "\nkubeferry: no terminal to ask on (standard input is not one): cancelling {id}; \
             pass --on-interrupt leave to leave jobs running"
        );
        return true;
    }
    eprint!("\nkubeferry: cancel {id}? [Y/n] ");
    let _ = std::io::stderr().flush();
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    match answer {
        Ok(Ok(line)) => !matches!(line.trim().to_ascii_lowercase().as_str(), "n" | "no"),
        _ => true,
    }
}

/// For a job of several pods, which of their logs `run` streams, and how to read the others.
fn streamed_part(spec: &kubeferry::core::spec::JobSpec) -> Option<String> {
    use kubeferry::core::spec::JobSpec;
    match spec {
        JobSpec::Container(job) if job.indexed => Some(
            "the log below shows each pod's log in turn, whole and unprefixed; \
             `kubeferry logs ID --index N` reads one index's"
                .to_string(),
        ),
        JobSpec::JobSet(set) => {
            let first = set.replicated_jobs.first()?;
            Some(format!(
                "the log below is the first pod of replicated job {:?}; \
                 `kubeferry logs ID --replica NAME --index N` reads another",
                first.name
            ))
        }
        _ => None,
    }
}
