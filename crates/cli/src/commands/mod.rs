//! One module per subcommand.

pub mod cancel;
pub mod describe;
pub mod list;
pub mod logs;
pub mod rbac;
pub mod run;
pub mod sim;
pub mod status;
pub mod submit;
pub mod sweep;
pub mod template;
pub mod wait;

use std::process::ExitCode;

use kubeferry::{ExecutionInfo, JobState};

/// The exit code of `wait` and `run` when `--timeout` ran out before the job ended: timeout(1)'s.
/// Only a job that failed with its own exit code 124 exits so too.
pub const TIMED_OUT: u8 = 124;

/// The exit code for a job's final status: 0 when it succeeded, its own exit code when it
/// failed with one (1-255), 1 otherwise.
pub fn exit_code_of(info: &ExecutionInfo) -> ExitCode {
    match (info.state, info.exit_code) {
        (JobState::Succeeded, _) => ExitCode::SUCCESS,
        (JobState::Failed, Some(code)) if (1..=255).contains(&code) => {
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        _ => ExitCode::FAILURE,
    }
}

/// What `run` and `submit` say when the job id already named a job and nothing was created:
/// `job id X already ran: SUCCEEDED at <time>; not run again (<id>)`, or that it is still
/// queued, running or being cancelled.
pub fn already_there(job_id: &str, id: &kubeferry::ExecutionId, info: &ExecutionInfo) -> String {
    use crate::output::format_time;
    let state = info.state;
    let since = |time: Option<jiff::Timestamp>| {
        time.map(|t| format!(" since {}", format_time(t)))
            .unwrap_or_default()
    };
    match state {
        _ if info.is_terminal() => {
            let at = info
                .finished_at
                .map(|t| format!(" at {}", format_time(t)))
                .unwrap_or_default();
            format!("job id {job_id} already ran: {state}{at}; not run again ({id})")
        }
        JobState::Queued => {
            format!("job id {job_id} is already submitted ({state}); not run again ({id})")
        }
        JobState::Cancelling => format!(
            "job id {job_id} is already being cancelled ({state}{}); not run again ({id})",
            since(info.started_at)
        ),
        _ => format!(
            "job id {job_id} is already running ({state}{}); not run again ({id})",
            since(info.started_at)
        ),
    }
}

/// Parses an execution id given on the command line. The id names its namespace; `-n`, when
/// given too, must name the same one (a namespace given two ways is refused, as `submit` refuses
/// a job file's namespace that `-n` contradicts).
pub fn parse_id(text: &str, namespace: Option<&str>) -> anyhow::Result<kubeferry::ExecutionId> {
    // A malformed id is a mistake in how kubeferry was called.
    let id: kubeferry::ExecutionId = text
        .parse()
        .map_err(|error| crate::UsageError(format!("{error}")))?;
    if let Some(namespace) = namespace
        && namespace != id.namespace
    {
        return Err(crate::UsageError(format!(
            "execution id {id} is in namespace {:?}, but -n says {namespace:?}; remove one",
            id.namespace
        ))
        .into());
    }
    Ok(id)
}

/// Parses the execution ids given on the command line (checked before anything is asked of
/// the cluster).
pub fn parse_ids(
    cli: &crate::args::Cli,
    ids: &[String],
) -> anyhow::Result<Vec<kubeferry::ExecutionId>> {
    ids.iter()
        .map(|text| parse_id(text, cli.cluster.namespace.as_deref()))
        .collect()
}

/// The one job a single-job command (`wait`, `logs`) names: its execution id (parsed by
/// [`parse_ids`]), or the job submitted under `--job-id` ([`named_jobs`]).
pub async fn named_job(
    cli: &crate::args::Cli,
    ids: Vec<kubeferry::ExecutionId>,
    by_job_id: &crate::args::JobIdArgs,
    connection: &crate::connect::Connection,
) -> anyhow::Result<kubeferry::ExecutionId> {
    match named_jobs(cli, ids, by_job_id, connection)
        .await?
        .into_iter()
        .next()
    {
        Some((id, _)) => Ok(id),
        None => anyhow::bail!("no job named"),
    }
}

/// The jobs named on the command line: the execution ids given (parsed by [`parse_ids`]), or
/// the job submitted under `--job-id` in the namespace of `-n` (else the context's), with its
/// job id.
pub async fn named_jobs(
    cli: &crate::args::Cli,
    ids: Vec<kubeferry::ExecutionId>,
    by_job_id: &crate::args::JobIdArgs,
    connection: &crate::connect::Connection,
) -> anyhow::Result<Vec<(kubeferry::ExecutionId, Option<String>)>> {
    let Some(job_id) = &by_job_id.job_id else {
        return Ok(ids.into_iter().map(|id| (id, None)).collect());
    };
    let namespace = connection.namespace(&cli.cluster);
    let mut found = connection
        .executor
        .find_by_job_id(&namespace, job_id)
        .await?;
    if let Some(kind) = by_job_id.kind {
        found.retain(|job| job.id.kind == kind);
    }
    let kind = by_job_id
        .kind
        .map(|kind| format!(" of kind {kind}"))
        .unwrap_or_default();
    match found.len() {
        0 => Err(NoSuchJobId(format!(
            "no job with job id {job_id:?}{kind} in namespace {namespace:?}"
        ))
        .into()),
        1 => Ok(found
            .into_iter()
            .map(|job| (job.id, Some(job_id.clone())))
            .collect()),
        _ => {
            let ids: Vec<String> = found.iter().map(|job| job.id.to_string()).collect();
            Err(crate::UsageError(format!(
                "--job-id: job id {job_id:?} names {} jobs in namespace {namespace:?} ({}); choose one with --kind",
                found.len(),
                ids.join(", ")
            ))
            .into())
        }
    }
}

/// A job id that names no job: an error as "no such job" is (exit 1).
#[derive(Debug)]
pub struct NoSuchJobId(pub String);

impl std::fmt::Display for NoSuchJobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoSuchJobId {}
