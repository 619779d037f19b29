//! `kubeferry submit`: create the job and print its execution id.

use std::process::ExitCode;

use serde::Serialize;

use crate::args::{Cli, SubmitArgs};
use crate::commands::already_there;
use crate::connect::{Fallback, connect};
use crate::output::{print_structured, print_text};
use crate::spec_input;

/// What `submit -o json` prints: the fields of the service's answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Submitted<'a> {
    id: &'a kubeferry::ExecutionId,
    job_id: &'a str,
    namespace: &'a str,
    /// The job id already named a job: nothing was created.
    existing: bool,
}

/// Runs `kubeferry submit`.
pub async fn submit(cli: &Cli, args: &SubmitArgs) -> anyhow::Result<ExitCode> {
    let spec = spec_input::load(&args.spec)?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let (submission, job_id) = connection
        .submit(&cli.cluster, &spec, args.job_id.as_deref())
        .await?;
    let id = &submission.id;
    if submission.existing {
        let info = connection.executor.status(id).await?;
        eprintln!("kubeferry: {}", already_there(&job_id, id, &info));
    }
    match cli.output.format.structured() {
        Some(format) => print_structured(
            format,
            &Submitted {
                id,
                job_id: &job_id,
                namespace: &id.namespace,
                existing: submission.existing,
            },
        )?,
        None => print_text(&format!("{id}\n"))?,
    }
    Ok(ExitCode::SUCCESS)
}
