//! `kubeferry list`: the jobs kubeferry manages in a namespace (or all of them), and with `-w`
//! their changes as new rows, as `kubectl get -w` prints them.

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;

use futures::StreamExt;
use kubeferry::kube::{Executor, JobSummary, SelectorEvent};
use kubeferry::{ExecutionId, ExecutionInfo, JobState};
use tokio::sync::mpsc;

use crate::args::{Cli, Format, ListArgs, SortKey};
use crate::connect::{Fallback, connect};
use crate::output::{
    Items, JobListItem, Structured, Table, duration, one_line, print_structured, print_text,
    render_row, time_cell,
};

/// A listed job as printed: the service's list item (the same fields, the same times).
fn item(job: &JobSummary) -> JobListItem {
    JobListItem::from(job.clone())
}

/// Runs `kubeferry list`.
pub async fn list(cli: &Cli, args: &ListArgs) -> anyhow::Result<ExitCode> {
    if args.watch.watch && args.all_namespaces {
        return Err(crate::UsageError(
            "list -w follows one namespace's watch: name it with -n instead of -A (watching every namespace is not supported)".into(),
        )
        .into());
    }
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let executor = &connection.executor;
    let namespace = connection.namespace(&cli.cluster);
    let mut jobs = if args.all_namespaces {
        executor
            .list_all_namespaces(args.selector.as_deref())
            .await?
    } else {
        executor.list(&namespace, args.selector.as_deref()).await?
    };
    if let Some(state) = args.state {
        jobs.retain(|job| job.status.state == state);
    }
    sort(&mut jobs, args.sort_by);
    let format = &cli.output.format;
    let mut printer = RowPrinter::new(format, args.watch.watch);
    let items = || Items {
        items: jobs.iter().map(item).collect(),
    };
    match format {
        Format::Json | Format::Yaml if !args.watch.watch => {
            print_structured(format.structured().unwrap_or(Structured::Json), &items())?;
        }
        Format::JsonPath(template) if !args.watch.watch => {
            print_text(&template.render(&serde_json::to_value(items())?))?;
        }
        _ => printer.first(&jobs)?,
    }
    if jobs.is_empty() && matches!(format, Format::Table | Format::Wide) {
        if args.all_namespaces {
            eprintln!("No kubeferry jobs in any namespace.");
        } else {
            eprintln!("No kubeferry jobs in namespace {namespace}.");
        }
    }
    if !args.watch.watch {
        return Ok(ExitCode::SUCCESS);
    }
    let listed: HashMap<ExecutionId, JobSummary> =
        jobs.into_iter().map(|job| (job.id.clone(), job)).collect();
    let watched = Watched {
        executor: executor.clone(),
        namespace,
        selector: args.selector.clone().unwrap_or_default(),
        state: args.state,
        until_done: args.watch.until_done,
    };
    watched.follow(listed, printer).await
}

/// Orders rows as `--sort-by` asks; the library lists oldest first.
fn sort(jobs: &mut [JobSummary], key: Option<SortKey>) {
    let lifecycle = |state: JobState| JobState::ALL.iter().position(|s| *s == state);
    match key {
        None | Some(SortKey::Created) => {
            jobs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        }
        Some(SortKey::State) => jobs.sort_by(|a, b| {
            (lifecycle(a.status.state), a.created_at, &a.id).cmp(&(
                lifecycle(b.status.state),
                b.created_at,
                &b.id,
            ))
        }),
        Some(SortKey::Name) => jobs.sort_by_key(|job| job.id.to_string()),
    }
}

/// Prints rows: the first ones as a table (or ids, JSON, ...), later ones under it.
struct RowPrinter<'a> {
    format: &'a Format,
    /// The table's column widths, once its header is printed.
    widths: Option<Vec<usize>>,
    /// Whether rows keep coming (`-w`): columns as wide as any value they can take.
    watching: bool,
}

impl<'a> RowPrinter<'a> {
    fn new(format: &'a Format, watching: bool) -> Self {
        Self {
            format,
            widths: None,
            watching,
        }
    }

    /// The widths of a table about to be printed.
    fn widths_of(&self, table: &Table) -> Vec<usize> {
        if self.watching {
            table.watch_widths()
        } else {
            table.widths()
        }
    }

    fn wide(&self) -> bool {
        *self.format == Format::Wide
    }

    /// The listed rows.
    fn first(&mut self, jobs: &[JobSummary]) -> anyhow::Result<()> {
        if matches!(self.format, Format::Table | Format::Wide) {
            if jobs.is_empty() {
                return Ok(());
            }
            let mut table = table(self.wide());
            for job in jobs {
                table.row(cells(job, self.wide()));
            }
            let widths = self.widths_of(&table);
            let text = table.render_with(&widths);
            self.widths = Some(widths);
            return print_text(&text);
        }
        for job in jobs {
            self.next(job)?;
        }
        Ok(())
    }

    /// One more row (a change seen by `-w`).
    fn next(&mut self, job: &JobSummary) -> anyhow::Result<()> {
        match self.format {
            Format::Table | Format::Wide => {
                let cells = cells(job, self.wide());
                match &self.widths {
                    Some(widths) => print_text(&render_row(widths, &cells)),
                    None => {
                        let mut table = table(self.wide());
                        table.row(cells);
                        let widths = self.widths_of(&table);
                        let text = table.render_with(&widths);
                        self.widths = Some(widths);
                        print_text(&text)
                    }
                }
            }
            Format::Name => print_text(&format!("{}\n", job.id)),
            Format::Json => print_structured(Structured::Json, &item(job)),
            Format::Yaml => {
                print_text("---\n")?;
                print_structured(Structured::Yaml, &item(job))
            }
            Format::JsonPath(template) => {
                print_text(&template.render(&serde_json::to_value(item(job))?))
            }
        }
    }
}

fn table(wide: bool) -> Table {
    let mut headers = vec!["ID", "JOB ID", "STATE", "REASON", "EXIT", "CREATED"];
    if wide {
        headers.extend(["POD", "NODE", "ATTEMPTS", "DURATION"]);
    }
    headers.push("MESSAGE");
    Table::new(headers)
}

fn cells(job: &JobSummary, wide: bool) -> Vec<String> {
    let status = &job.status;
    let mut cells = vec![
        job.id.to_string(),
        job.job_id.clone().unwrap_or_default(),
        status.state.to_string(),
        status.reason.to_string(),
        status.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        time_cell(job.created_at),
    ];
    if wide {
        cells.extend([
            job.pod.clone().unwrap_or_default(),
            job.node.clone().unwrap_or_default(),
            job.attempts.to_string(),
            duration(status),
        ]);
    }
    cells.push(one_line(&status.message));
    cells
}

/// What `list -w` follows.
struct Watched {
    executor: Executor,
    namespace: String,
    selector: String,
    state: Option<JobState>,
    until_done: bool,
}

/// News from a job's waiter.
pub enum News {
    Status(ExecutionId, Box<ExecutionInfo>),
    /// The waiter ended: the job ended, or is gone.
    Done(ExecutionId),
}

impl Watched {
    /// Follows the namespace's matching jobs from the watch cache: which jobs match comes from
    /// a label watch, each job's changes from a waiter on the namespace's watch.
    async fn follow(
        self,
        mut shown: HashMap<ExecutionId, JobSummary>,
        mut printer: RowPrinter<'_>,
    ) -> anyhow::Result<ExitCode> {
        let (sender, mut news) = mpsc::unbounded_channel();
        let mut matching = Box::pin(self.executor.matching(&self.namespace, &self.selector));
        let mut open: HashSet<ExecutionId> = HashSet::new();
        let mut listed = false;
        let mut tasks = tokio::task::JoinSet::new();
        let interrupted = tokio::signal::ctrl_c();
        tokio::pin!(interrupted);
        loop {
            if self.until_done && listed && open.is_empty() {
                break;
            }
            tokio::select! {
                event = matching.next() => match event {
                    Some(SelectorEvent::Matches { kind, name, .. }) => {
                        let id = ExecutionId::new(
                            self.executor.cluster().name(), kind, &self.namespace, &name,
                        );
                        if open.insert(id.clone()) {
                            tasks.spawn(waiter(self.executor.clone(), id, sender.clone()));
                        }
                    }
                    // The waiter sees the end of a job that left (or learns it is gone).
                    Some(SelectorEvent::Left(..)) => {}
                    Some(SelectorEvent::Listed) => listed = true,
                    None => break,
                },
                Some(news) = news.recv() => match news {
                    News::Status(id, info) => {
                        let info = *info;
                        let changed = shown.get(&id).is_none_or(|job| job.status != info);
                        if !shown.contains_key(&id) {
                            // A job new since the list: its row's other columns (job id,
                            // creation, pod) are read once.
                            let summary = self.summary(&id).await.unwrap_or_else(|| JobSummary {
                                id: id.clone(),
                                job_id: None,
                                created_at: None,
                                status: info.clone(),
                                pod: None,
                                node: None,
                                attempts: 0,
                            });
                            shown.insert(id.clone(), summary);
                        }
                        let Some(entry) = shown.get_mut(&id) else { continue };
                        entry.status = info;
                        if let Some(placement) = self.executor.placement(&id) {
                            entry.pod = Some(placement.pod);
                            entry.node = placement.node;
                            entry.attempts = placement.attempts;
                        }
                        if changed && self.state.is_none_or(|state| state == entry.status.state) {
                            printer.next(entry)?;
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
        let all_succeeded = shown
            .values()
            .all(|job| job.status.state == JobState::Succeeded);
        Ok(if !self.until_done || all_succeeded {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}

impl Watched {
    /// A job's row as listed now, if it is still there.
    async fn summary(&self, id: &ExecutionId) -> Option<JobSummary> {
        let selector = (!self.selector.is_empty()).then_some(self.selector.as_str());
        let jobs = self.executor.list(&self.namespace, selector).await.ok()?;
        jobs.into_iter().find(|job| job.id == *id)
    }
}

/// Reports a job's changes until it ends (or is gone).
pub async fn waiter(executor: Executor, id: ExecutionId, sender: mpsc::UnboundedSender<News>) {
    let report = sender.clone();
    let reported = id.clone();
    let result = executor
        .wait(&id, None, move |info| {
            let _ = report.send(News::Status(reported.clone(), Box::new(info.clone())));
        })
        .await;
    match result {
        Ok(info) => {
            let _ = sender.send(News::Status(id.clone(), Box::new(info)));
        }
        Err(error) if error.is_no_such_job() => {}
        Err(error) => eprintln!("kubeferry: stopped following {id}: {error}"),
    }
    let _ = sender.send(News::Done(id));
}
