//! `kubeferry status`: the status of one or more jobs, and with `-w` their changes as new rows.

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;

use kubeferry::{ExecutionId, ExecutionInfo, JobState};
use tokio::sync::mpsc;

use crate::args::{Cli, Format, StatusArgs};
use crate::commands::list::{News, waiter};
use crate::commands::{named_jobs, parse_ids};
use crate::connect::{Fallback, connect};
use crate::output::{
    StatusColumns, Structured, job_json, print_statuses, print_structured, print_text, render_row,
};

/// Runs `kubeferry status`.
pub async fn status(cli: &Cli, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    // Every id is checked before any request is made.
    let ids = parse_ids(cli, &args.ids)?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let named = named_jobs(cli, ids, &args.by_job_id, &connection).await?;
    let job_id = args.by_job_id.job_id.as_deref();
    let ids: Vec<ExecutionId> = named.into_iter().map(|(id, _)| id).collect();
    let mut found = Vec::new();
    let mut failed = false;
    for id in &ids {
        match connection.executor.status(id).await {
            Ok(info) => found.push((id, info)),
            Err(error) => {
                eprintln!("error: {error}");
                failed = true;
            }
        }
    }
    let format = &cli.output.format;
    let watching = args.watch.watch;
    let columns = StatusColumns::for_statuses(&found, *format == Format::Wide);
    // Under -w, rows keep coming: the columns are as wide as any value they can take.
    let widths = {
        let mut table = columns.table();
        for (id, info) in &found {
            table.row(columns.cells(id, info));
        }
        let widths = table.watch_widths();
        if watching && matches!(format, Format::Table | Format::Wide) && !found.is_empty() {
            print_text(&table.render_with(&widths))?;
        }
        widths
    };
    if watching && !matches!(format, Format::Table | Format::Wide) {
        // Each row on its own, as the changes print.
        for (id, info) in &found {
            print_change(format, None, id, info, job_id)?;
        }
    } else if !watching {
        print_statuses(format, &found, ids.len() == 1, job_id)?;
        return Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    let mut shown: HashMap<ExecutionId, ExecutionInfo> = found
        .iter()
        .map(|(id, info)| ((*id).clone(), info.clone()))
        .collect();
    let (sender, mut news) = mpsc::unbounded_channel();
    let mut open: HashSet<ExecutionId> = HashSet::new();
    let mut tasks = tokio::task::JoinSet::new();
    for id in shown.keys() {
        open.insert(id.clone());
        tasks.spawn(waiter(
            connection.executor.clone(),
            id.clone(),
            sender.clone(),
        ));
    }
    drop(sender);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        if args.watch.until_done && open.is_empty() {
            break;
        }
        tokio::select! {
            Some(news) = news.recv() => match news {
                News::Status(id, info) => {
                    let info = *info;
                    if shown.get(&id) != Some(&info) {
                        print_change(format, Some((&widths, columns)), &id, &info, job_id)?;
                        shown.insert(id, info);
                    }
                }
                News::Done(id) => {
                    open.remove(&id);
                }
            },
            interrupted = &mut interrupted => {
                interrupted?;
                break;
            }
        }
    }
    tasks.abort_all();
    let all_succeeded = shown.values().all(|info| info.state == JobState::Succeeded);
    Ok(if failed || (args.watch.until_done && !all_succeeded) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// One status as a row under the table (or an id, a JSON document, ...).
fn print_change(
    format: &Format,
    table: Option<(&[usize], StatusColumns)>,
    id: &ExecutionId,
    info: &ExecutionInfo,
    job_id: Option<&str>,
) -> anyhow::Result<()> {
    let row = job_json(id, info, job_id);
    match format {
        Format::Table | Format::Wide => {
            let (widths, columns) = table.unwrap_or_else(|| {
                (
                    &[],
                    StatusColumns::for_statuses(&[], *format == Format::Wide),
                )
            });
            print_text(&render_row(widths, &columns.cells(id, info)))
        }
        Format::Name => print_text(&format!("{id}\n")),
        Format::Json => print_structured(Structured::Json, &row),
        Format::Yaml => {
            print_text("---\n")?;
            print_structured(Structured::Yaml, &row)
        }
        Format::JsonPath(template) => print_text(&template.render(&serde_json::to_value(&row)?)),
    }
}
