//! `kubeferry submit`: create the job and print its execution id.

use std::process::ExitCode;

use kubeferry::kube::{generate_job_id, resolve_namespace};
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
    let executor = &connection.executor;
    let namespace = resolve_namespace(
        cli.cluster.namespace.as_deref(),
        spec.namespace(),
        executor.cluster().default_namespace(),
    )?;
    let job_id = args
        .job_id
        .clone()
        .unwrap_or_else(|| generate_job_id(spec.name()));
    let id = executor.submit(&spec, &job_id, &namespace).await?;
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
