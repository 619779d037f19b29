//! Printing results as a table, JSON or YAML.

use std::io::Write;

use kubeferry::ExecutionInfo;
use kubeferry::core::ExecutionId;
pub use kubeferry_server::api::model::{JobInfo, JobListItem, format_time};
use serde::Serialize;

use crate::args::Format;

/// Several results, as `list -o json` and the service's lists give them: `{"items": [...]}`.
#[derive(Serialize)]
pub struct Items<T> {
    /// The results.
    pub items: Vec<T>,
}

/// A job's status as printed: the service's job JSON (the same fields, the same times).
pub fn job_json(id: &ExecutionId, info: &ExecutionInfo, job_id: Option<&str>) -> JobInfo {
    JobInfo::new(id, info.clone()).with_job_id(job_id.map(str::to_string))
}

/// A time in a table cell: as the JSON gives it.
pub fn time_cell(time: Option<jiff::Timestamp>) -> String {
    time.map(format_time).unwrap_or_default()
}

/// A machine-readable output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structured {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

impl Format {
    /// The machine-readable format, or `None` for the others.
    pub fn structured(&self) -> Option<Structured> {
        match self {
            Format::Json => Some(Structured::Json),
            Format::Yaml => Some(Structured::Yaml),
            Format::Table | Format::Wide | Format::Name | Format::JsonPath(_) => None,
        }
    }
}

/// Prints `value` as JSON or YAML on standard output.
pub fn print_structured<T: Serialize>(format: Structured, value: &T) -> anyhow::Result<()> {
    let text = match format {
        Structured::Json => serde_json::to_string_pretty(value)? + "\n",
        Structured::Yaml => serde_saphyr::to_string(value)?,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    Ok(())
}

/// A kubectl-style table: upper-case headers, columns padded with spaces, no borders.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(headers: Vec<&'static str>) -> Self {
        Self {
            headers,
            rows: Vec::new(),
        }
    }

    /// Adds a column just before the last one (which holds free text).
    pub fn insert_column_before_last(&mut self, header: &'static str) {
        let at = self.headers.len().saturating_sub(1);
        self.headers.insert(at, header);
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The width of each column: its widest cell.
    pub fn widths(&self) -> Vec<usize> {
        self.widths_from(|header| header.chars().count())
    }

    /// The widths for a table whose rows keep coming (`-w`): each column at least as wide as
    /// any value it can take (a state, a reason, a time), so that later rows stay under their
    /// headers.
    pub fn watch_widths(&self) -> Vec<usize> {
        self.widths_from(|header| {
            let most = match header {
                "STATE" => kubeferry::JobState::ALL
                    .iter()
                    .map(|s| s.as_str().len())
                    .max()
                    .unwrap_or(0),
                "REASON" => kubeferry::Reason::ALL
                    .iter()
                    .map(|r| r.as_str().len())
                    .max()
                    .unwrap_or(0),
                "STARTED" | "FINISHED" | "CREATED" => "2006-01-02T15:04:05Z".len(),
                "EXIT" => "-128".len(),
                "DURATION" => "23h59m".len(),
                _ => 0,
            };
            header.chars().count().max(most)
        })
    }

    fn widths_from(&self, header_width: impl Fn(&str) -> usize) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| header_width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(width) = widths.get_mut(i) {
                    *width = (*width).max(cell.chars().count());
                }
            }
        }
        widths
    }

    /// The table as text, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        self.render_with(&self.widths())
    }

    /// The table as text, its columns `widths` wide.
    pub fn render_with(&self, widths: &[usize]) -> String {
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        std::iter::once(&header)
            .chain(&self.rows)
            .map(|row| render_row(widths, row))
            .collect()
    }
}

/// One row padded to `widths` (a cell wider than its column pushes the rest right), ending in
/// a newline: the rows `-w` prints under a table already printed.
pub fn render_row(widths: &[usize], row: &[String]) -> String {
    let mut out = String::new();
    let last = row.len().saturating_sub(1);
    for (i, cell) in row.iter().enumerate() {
        out.push_str(cell);
        if i < last {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count()) + 3;
            out.push_str(&" ".repeat(pad));
        }
    }
    out.push('\n');
    out
}

/// Prints statuses: a table, ids, a JSONPath template's text, or JSON/YAML (a single object
/// when `single`, else `{"items": [...]}`). `job_id`: the job id of the (one) job, when known.
pub fn print_statuses(
    format: &Format,
    statuses: &[(&ExecutionId, ExecutionInfo)],
    single: bool,
    job_id: Option<&str>,
) -> anyhow::Result<()> {
    let rows: Vec<JobInfo> = statuses
        .iter()
        .map(|(id, status)| job_json(id, status, job_id))
        .collect();
    match format {
        Format::Json | Format::Yaml => {
            let structured = format.structured().unwrap_or(Structured::Json);
            match rows.first() {
                Some(row) if single => print_structured(structured, row)?,
                _ => print_structured(structured, &Items { items: rows })?,
            }
        }
        Format::JsonPath(template) => {
            let document = match rows.first() {
                Some(row) if single => serde_json::to_value(row)?,
                _ => serde_json::json!({ "items": rows }),
            };
            print_text(&template.render(&document))?;
        }
        Format::Name => {
            let names: String = rows.iter().map(|row| format!("{}\n", row.id)).collect();
            print_text(&names)?;
        }
        Format::Table | Format::Wide if !statuses.is_empty() => {
            let columns = StatusColumns::for_statuses(statuses, *format == Format::Wide);
            let mut table = columns.table();
            for (id, info) in statuses {
                table.row(columns.cells(id, info));
            }
            print_text(&table.render())?;
        }
        Format::Table | Format::Wide => {}
    }
    Ok(())
}

/// Writes text on standard output as it is.
pub fn print_text(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Prints how a job ended: the one-line summary, its id, a template's text, or the status as
/// JSON/YAML.
pub fn print_final(
    format: &Format,
    id: &ExecutionId,
    info: &ExecutionInfo,
    job_id: Option<&str>,
) -> anyhow::Result<()> {
    let row = job_json(id, info, job_id);
    match format {
        Format::Json | Format::Yaml => {
            print_structured(format.structured().unwrap_or(Structured::Json), &row)
        }
        Format::JsonPath(template) => print_text(&template.render(&serde_json::to_value(&row)?)),
        Format::Name => print_text(&format!("{id}\n")),
        Format::Table | Format::Wide => print_text(&format!("{}\n", final_line(id, info))),
    }
}

/// Which columns a status table has: `wide` adds how long the job ran, indexed jobs get a
/// column with where their indexes stand, JobSets one with where their replicated jobs stand
/// (other tables are as they always were).
#[derive(Clone, Copy, Debug)]
pub struct StatusColumns {
    wide: bool,
    indexed: bool,
    replicated: bool,
}

impl StatusColumns {
    /// The columns for these statuses.
    pub fn for_statuses(statuses: &[(&ExecutionId, ExecutionInfo)], wide: bool) -> Self {
        StatusColumns {
            wide,
            indexed: statuses.iter().any(|(_, info)| info.indexes.is_some()),
            replicated: statuses.iter().any(|(_, info)| info.replicas.is_some()),
        }
    }

    /// An empty table with these columns.
    pub fn table(self) -> Table {
        let mut table = status_table(self.wide);
        if self.indexed {
            table.insert_column_before_last("INDEXES");
        }
        if self.replicated {
            table.insert_column_before_last("REPLICAS");
        }
        table
    }

    /// A status as a row of these columns.
    pub fn cells(self, id: &ExecutionId, info: &ExecutionInfo) -> Vec<String> {
        let mut cells = status_cells(id, info, self.wide);
        if self.indexed {
            cells.insert(cells.len() - 1, index_cell(info));
        }
        if self.replicated {
            cells.insert(cells.len() - 1, replica_cell(info));
        }
        cells
    }
}

/// The columns of a status table; `wide` adds how long the job ran.
pub fn status_table(wide: bool) -> Table {
    let mut headers = vec!["ID", "STATE", "REASON", "EXIT", "STARTED", "FINISHED"];
    if wide {
        headers.push("DURATION");
    }
    headers.push("MESSAGE");
    Table::new(headers)
}

/// A status as a row of [`status_table`].
pub fn status_cells(id: &ExecutionId, info: &ExecutionInfo, wide: bool) -> Vec<String> {
    let mut cells = vec![
        id.to_string(),
        info.state.to_string(),
        info.reason.to_string(),
        info.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        time_cell(info.started_at),
        time_cell(info.finished_at),
    ];
    if wide {
        cells.push(duration(info));
    }
    cells.push(one_line(&info.message));
    cells
}

/// Where an indexed job's indexes stand, in a table cell: `3/5 succeeded, 1 failed, 1 running`
/// (empty for other jobs).
pub fn index_cell(info: &ExecutionInfo) -> String {
    let Some(indexes) = &info.indexes else {
        return String::new();
    };
    let mut cell = format!("{}/{} succeeded", indexes.succeeded, indexes.completions);
    for (n, what) in [
        (indexes.failed, "failed"),
        (indexes.running, "running"),
        (indexes.pending, "pending"),
    ] {
        if n > 0 {
            cell.push_str(&format!(", {n} {what}"));
        }
    }
    cell
}

/// Where a JobSet's replicated jobs stand, in a table cell: `leader 1/1 succeeded; workers 1/2
/// succeeded, 1 failed; restarted 1 time` (empty for other jobs).
pub fn replica_cell(info: &ExecutionInfo) -> String {
    info.replicas
        .as_ref()
        .map(|replicas| replicas.counts())
        .unwrap_or_default()
}

/// How long the job ran (so far), as kubectl prints ages: `45s`, `3m12s`, `2h5m`; empty before
/// it started.
pub fn duration(info: &ExecutionInfo) -> String {
    let Some(start) = info.started_at else {
        return String::new();
    };
    let end = info.finished_at.unwrap_or_else(jiff::Timestamp::now);
    let seconds = end.as_second().saturating_sub(start.as_second()).max(0);
    short_duration(u64::try_from(seconds).unwrap_or(0))
}

/// Seconds as kubectl prints durations.
pub fn short_duration(seconds: u64) -> String {
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) if seconds == 0 => format!("{minutes}m"),
        (0, _) => format!("{minutes}m{seconds}s"),
        (_, 0) => format!("{hours}h"),
        _ => format!("{hours}h{minutes}m"),
    }
}

/// A message on one line (tables have one line per row).
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The one-line summary `run` and `wait` end with, e.g.
/// `<id> FAILED (Error, ran 3s): exit code 3: something went wrong`.
pub fn final_line(id: &ExecutionId, info: &ExecutionInfo) -> String {
    let message = one_line(&info.message);
    let mut details = vec![info.reason.to_string()];
    if let Some(code) = info.exit_code
        && !message.contains("exit code")
    {
        details.push(format!("exit code {code}"));
    }
    if let (Some(start), Some(end)) = (info.started_at, info.finished_at)
        && let Ok(span) = end.since(start)
        && let Ok(seconds) = span.total(jiff::Unit::Second)
    {
        details.push(format!("ran {seconds:.0}s"));
    }
    let mut line = format!("{id} {} ({})", info.state, details.join(", "));
    if !message.is_empty() {
        line.push_str(": ");
        line.push_str(&message);
    }
    line
}

/// A progress line on stderr for a status change.
pub fn progress(id: &ExecutionId, info: &ExecutionInfo) {
    let message = one_line(&info.message);
    if message.is_empty() {
        eprintln!("kubeferry: {id} {} ({})", info.state, info.reason);
    } else {
        eprintln!(
            "kubeferry: {id} {} ({}): {message}",
            info.state, info.reason
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeferry::{JobState, Reason};

    #[test]
    fn tables_align_like_kubectl() {
        let mut table = Table::new(vec!["ID", "STATE"]);
        table.row(vec!["a/job/ns/long-name".into(), "QUEUED".into()]);
        table.row(vec!["b".into(), "SUCCEEDED".into()]);
        assert_eq!(
            table.render(),
            "ID                   STATE\na/job/ns/long-name   QUEUED\nb                    SUCCEEDED\n"
        );
    }

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(short_duration(0), "0s");
        assert_eq!(short_duration(45), "45s");
        assert_eq!(short_duration(120), "2m");
        assert_eq!(short_duration(192), "3m12s");
        assert_eq!(short_duration(7200), "2h");
        assert_eq!(short_duration(7500), "2h5m");
    }

    #[test]
    fn final_lines_say_how_it_ended() {
        let id: ExecutionId = "sim/job/default/fail-1".parse().unwrap();
        let mut info =
            ExecutionInfo::new(JobState::Failed, Reason::Error).with_message("exited with 3");
        info.exit_code = Some(3);
        info.started_at = Some("2026-01-01T00:00:00Z".parse().unwrap());
        info.finished_at = Some("2026-01-01T00:00:02Z".parse().unwrap());
        assert_eq!(
            final_line(&id, &info),
            "sim/job/default/fail-1 FAILED (Error, exit code 3, ran 2s): exited with 3"
        );
        info.message = "exit code 3: boom".into();
        assert_eq!(
            final_line(&id, &info),
            "sim/job/default/fail-1 FAILED (Error, ran 2s): exit code 3: boom"
        );
        let done = ExecutionInfo {
            exit_code: Some(0),
            ..ExecutionInfo::new(JobState::Succeeded, Reason::Completed)
        };
        assert_eq!(
            final_line(&id, &done),
            "sim/job/default/fail-1 SUCCEEDED (Completed, exit code 0)"
        );
    }
}
