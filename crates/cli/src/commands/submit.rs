//! `kubeferry submit`: create the job and print its execution id.

use std::process::ExitCode;

use serde::Serialize;

use crate::args::{Cli, SubmitArgs};
use crate::connect::{Fallback, connect};
use crate::output::print_structured;
use crate::spec_input;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Submitted<'a> {
    id: &'a kubeferry::ExecutionId,
    job_id: &'a str,
}

/// Runs `kubeferry submit`.
pub async fn submit(cli: &Cli, args: &SubmitArgs) -> anyhow::Result<ExitCode> {
    let spec = spec_input::load(&args.spec)?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let (id, job_id) = connection
        .submit(&cli.cluster, &spec, args.job_id.as_deref())
        .await?;
    match cli.output.format.structured() {
        Some(format) => print_structured(
            format,
            &Submitted {
                id: &id,
                job_id: &job_id,
            },
        )?,
        None => println!("{id}"),
    }
    Ok(ExitCode::SUCCESS)
}
