//! `kubeferry submit`: create the job and print its execution id.

use std::process::ExitCode;

use serde::Serialize;

use kubeferry::core::spec::JobSpec;
use kubeferry::kube::DryRun;

use crate::args::{Cli, Format, SubmitArgs};
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
    if let Some(mode) = args.dry_run.mode() {
        return dry_run(cli, &spec, args.job_id.as_deref(), mode, Fallback::None).await;
    }
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

/// `submit` and `run` with `--dry-run`: the objects the submission would create, created
/// nothing. `-o yaml` prints them as YAML documents and `-o json` as one object (a `List` of
/// several); other formats print a line per object, as kubectl does.
pub async fn dry_run(
    cli: &Cli,
    spec: &JobSpec,
    job_id: Option<&str>,
    mode: DryRun,
    fallback: Fallback,
) -> anyhow::Result<ExitCode> {
    let connection = connect(&cli.cluster, fallback).await?;
    let objects = connection.dry_run(&cli.cluster, spec, job_id, mode).await;
    connection.close().await;
    let objects = objects?;
    match &cli.output.format {
        Format::Yaml => {
            let mut text = String::new();
            for object in &objects {
                text.push_str("---\n");
                text.push_str(&serde_saphyr::to_string(object)?);
            }
            print_text(&text)?;
        }
        Format::Json => match objects.as_slice() {
            [one] => print_text(&(serde_json::to_string_pretty(one)? + "\n"))?,
            many => {
                let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many});
                print_text(&(serde_json::to_string_pretty(&list)? + "\n"))?;
            }
        },
        _ => {
            let how = match mode {
                DryRun::Client => "dry run",
                DryRun::Server => "server dry run",
            };
            let mut text = String::new();
            for object in &objects {
                text.push_str(&format!("{} created ({how})\n", kubectl_name(object)));
            }
            print_text(&text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An object's name as kubectl prints it: `job.batch/hello-1a2b3c4d`.
fn kubectl_name(object: &serde_json::Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object").to_lowercase();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|version| version.split_once('/'))
        .map(|(group, _)| group);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match group {
        Some(group) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}
