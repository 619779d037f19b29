//! `kubeferry describe`: a job's story, as a table that fits 80 columns, or as JSON or YAML.

use std::process::ExitCode;

use jiff::Timestamp;
use kubeferry::kube::Description;

use crate::args::{Cli, DescribeArgs};
use crate::commands::{named_job, parse_ids};
use crate::connect::{Fallback, connect};
use crate::output::{Table, one_line, print_structured, print_text, short_duration};

/// The width the table keeps to.
const WIDTH: usize = 80;

/// Runs `kubeferry describe`.
pub async fn describe(cli: &Cli, args: &DescribeArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_ids(cli, args.id.as_slice())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let id = named_job(cli, ids, &args.by_job_id, &connection).await?;
    let description = connection.executor.describe(&id).await?;
    match cli.output.format.structured() {
        Some(format) => print_structured(format, &description)?,
        None => print_text(&told(
            &description,
            cli.output.format == crate::args::Format::Wide,
        )?)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The story as text: the job, its steps (the time, how long after the submission, what, the
/// details cut to the width unless `wide`), where the time went and what to do.
fn told(description: &Description, wide: bool) -> anyhow::Result<String> {
    let status = &description.status;
    let mut text = format!("ID:      {}\n", description.id);
    if let Some(job_id) = &description.job_id {
        text.push_str(&format!("Job id:  {job_id}\n"));
    }
    let mut state = format!("{} ({}", status.state, status.reason);
    if let Some(code) = status.exit_code {
        state.push_str(&format!(", exit code {code}"));
    }
    if let Some(class) = status.reason.failure_class() {
        // As the service's JSON names it (`failureClass`).
        let class = serde_json::to_value(class)?;
        state.push_str(&format!(", {} failure", class.as_str().unwrap_or_default()));
    }
    state.push(')');
    text.push_str(&format!("State:   {state}\n"));
    if !status.message.is_empty() {
        text.push_str(&wrapped("Message: ", &one_line(&status.message), wide));
    }
    text.push('\n');
    let first = description.story.steps.iter().find_map(|step| step.at);
    let mut table = Table::new(vec!["TIME", "AFTER", "STEP", "DETAILS"]);
    for step in &description.story.steps {
        let after = match (first, step.at) {
            (Some(first), Some(at)) => {
                let seconds = at.as_second().saturating_sub(first.as_second()).max(0);
                format!("+{}", short_duration(u64::try_from(seconds).unwrap_or(0)))
            }
            _ => String::new(),
        };
        // An object the job made is named by what follows the job's name (a pod's suffix, a
        // JobSet's replicated job); -o json has its whole name.
        let detail = match &step.object {
            Some(object) => {
                let short = object
                    .strip_prefix(&format!("{}-", description.id.name))
                    .map_or_else(|| object.clone(), |rest| format!("…-{rest}"));
                format!("{short}: {}", one_line(&step.detail))
            }
            None => one_line(&step.detail),
        };
        table.row(vec![
            step.at.map(clock).unwrap_or_default(),
            after,
            step.what.clone(),
            detail,
        ]);
    }
    let rendered = table.render();
    for line in rendered.lines() {
        text.push_str(&cut(line, wide));
        text.push('\n');
    }
    let spent = &description.story.spent;
    let parts: Vec<String> = [
        ("waiting", spent.waiting),
        ("starting", spent.starting),
        ("running", spent.running),
    ]
    .iter()
    .filter_map(|(name, seconds)| {
        let seconds = u64::try_from((*seconds)?).ok()?;
        Some(format!("{name} {}", short_duration(seconds)))
    })
    .collect();
    if !parts.is_empty() {
        text.push('\n');
        text.push_str(&wrapped("Where the time went: ", &parts.join(", "), wide));
    }
    if let Some(what) = &description.story.what_to_do {
        let what = what.replace("ID", &description.id.to_string());
        text.push_str(&wrapped("What to do: ", &what, wide));
    }
    Ok(text)
}

/// A time of day, to the second, with its date when it is not today's.
fn clock(at: Timestamp) -> String {
    let today = Timestamp::now().strftime("%Y-%m-%d").to_string();
    let date = at.strftime("%Y-%m-%d").to_string();
    if date == today {
        at.strftime("%H:%M:%SZ").to_string()
    } else {
        at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }
}

/// `text` after `label`, its words wrapped at the width (unless `wide`) under its first word.
fn wrapped(label: &str, text: &str, wide: bool) -> String {
    if wide {
        return format!("{label}{text}\n");
    }
    let indent = " ".repeat(label.chars().count());
    let mut out = String::from(label);
    let mut column = label.chars().count();
    let mut first = true;
    for word in text.split_whitespace() {
        let length = word.chars().count();
        if !first && column + 1 + length > WIDTH {
            out.push('\n');
            out.push_str(&indent);
            column = indent.len();
            first = true;
        }
        if !first {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += length;
        first = false;
    }
    out.push('\n');
    out
}

/// A line cut to the width (with an ellipsis), unless `wide`.
fn cut(line: &str, wide: bool) -> String {
    if wide || line.chars().count() <= WIDTH {
        return line.trim_end().to_string();
    }
    let kept: String = line.chars().take(WIDTH - 1).collect();
    format!("{}…", kept.trim_end())
}
