//! `kubeferry describe`: a job's story, as a table that fits 80 columns, or as JSON or YAML.

use std::process::ExitCode;

use jiff::Timestamp;
use kubeferry::kube::Description;

use crate::args::{Cli, OneJobArgs};
use crate::commands::{named_job, parse_ids};
use crate::connect::{Fallback, connect};
use crate::output::{Table, one_line, print_structured, print_text, short_duration};

/// The width the table keeps to.
const WIDTH: usize = 80;

/// Runs `kubeferry describe`.
pub async fn describe(cli: &Cli, args: &OneJobArgs) -> anyhow::Result<ExitCode> {
    let ids = parse_ids(cli, args.id.as_slice())?;
    let connection = connect(&cli.cluster, Fallback::None).await?;
    let id = named_job(cli, ids, &args.by_job_id, &connection).await?;
    let description = connection.executor.describe(&id).await?;
    match cli.output.format.structured() {
        Some(format) => print_structured(format, &description)?,
        None => print_text(&told(
            &description,
            cli.output.format == crate::args::Format::Wide,
            Timestamp::now(),
        )?)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The story as text: the job, its steps (the time, how long after the submission, what, the
/// details cut to the width unless `wide`), where the time went and what to do. Times of the
/// day of `now` show without their date.
fn told(description: &Description, wide: bool, now: Timestamp) -> anyhow::Result<String> {
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
            step.at.map(|at| clock(at, now)).unwrap_or_default(),
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

/// A time of day, to the second, with its date when it is not that of `now`.
fn clock(at: Timestamp, now: Timestamp) -> String {
    let today = now.strftime("%Y-%m-%d").to_string();
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

#[cfg(test)]
mod tests {
    use kubeferry::core::timeline::{Attempt, EventView, Sources, story};
    use kubeferry::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_764_806_400 + second).expect("in range")
    }

    /// An OOM-killed job's story, as the executor would tell it.
    fn oom_killed() -> Description {
        let id = ExecutionId::new("prod", JobKind::Job, "etl", "nightly-7-1a2b3c4d");
        let mut status = ExecutionInfo::new(JobState::Failed, Reason::OomKilled).with_message(
            "the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137",
        );
        status.exit_code = Some(137);
        status.started_at = Some(at(9));
        status.finished_at = Some(at(70));
        let pod = "nightly-7-1a2b3c4d-x7k2q";
        let event = |second, object: &str, reason: &str, message: &str, warning| EventView {
            at: Some(at(second)),
            object: object.into(),
            reason: reason.into(),
            message: message.into(),
            warning,
            count: 1,
            sequence: None,
        };
        let sources = Sources {
            object: id.name.clone(),
            status: status.clone(),
            job_id: Some("nightly-7".into()),
            created_at: Some(at(0)),
            cancel: None,
            attempts: vec![Attempt {
                pod: pod.into(),
                node: Some("node-2".into()),
                scheduled_at: Some(at(4)),
                ended_at: Some(at(70)),
                exit_code: Some(137),
                reason: Some("OOMKilled".into()),
                message: None,
            }],
            events: vec![
                event(
                    0,
                    &id.name,
                    "SuccessfulCreate",
                    &format!("Created pod: {pod}"),
                    false,
                ),
                event(
                    1,
                    pod,
                    "FailedScheduling",
                    "0/3 nodes are available: 3 Insufficient memory.",
                    true,
                ),
                event(
                    4,
                    pod,
                    "Scheduled",
                    &format!("Successfully assigned etl/{pod} to node-2"),
                    false,
                ),
                event(5, pod, "Pulling", "Pulling image \"python:3.12\"", false),
                event(9, pod, "Started", "Started container main", false),
            ],
        };
        Description {
            id,
            job_id: Some("nightly-7".into()),
            status,
            story: story(&sources, at(100)),
        }
    }

    #[test]
    fn the_table_tells_the_story_in_80_columns() {
        let text = told(&oom_killed(), false, at(100)).unwrap();
        assert_eq!(
            text,
            "\
ID:      prod/job/etl/nightly-7-1a2b3c4d
Job id:  nightly-7
State:   FAILED (OomKilled, exit code 137, user failure)
Message: the main container was OOMKilled (exceeded its memory limit of 64Mi),
         exit code 137

TIME        AFTER    STEP               DETAILS
00:00:00Z   +0s      Submitted          job id nightly-7
00:00:00Z   +0s      SuccessfulCreate   Created pod: nightly-7-1a2b3c4d-x7k2q
00:00:01Z   +1s      FailedScheduling   …-x7k2q: 0/3 nodes are available: 3 Ins…
00:00:04Z   +4s      Scheduled          …-x7k2q: Successfully assigned etl/nigh…
00:00:05Z   +5s      Pulling            …-x7k2q: Pulling image \"python:3.12\"
00:00:09Z   +9s      Started            …-x7k2q: Started container main
00:01:10Z   +1m10s   Ended              …-x7k2q: exit code 137 (OOMKilled)
00:01:10Z   +1m10s   FAILED             OomKilled: the main container was OOMKi…

Where the time went: waiting 4s, starting 5s, running 1m1s
What to do: raise resources.memory (and its limit) in the job file, or use less
            memory
"
        );
        // Another day's times carry their date; -o wide keeps every line whole.
        let wide = told(&oom_killed(), true, at(86_400)).unwrap();
        assert!(wide.contains("2025-12-04T00:01:10Z   +1m10s   FAILED             OomKilled: the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137\n"), "{wide}");
    }

    #[test]
    fn the_json_has_every_part_of_the_story() {
        let json = serde_json::to_value(oom_killed()).unwrap();
        assert_eq!(json["id"], "prod/job/etl/nightly-7-1a2b3c4d");
        assert_eq!(json["jobId"], "nightly-7");
        assert_eq!(json["status"]["exitCode"], 137);
        assert_eq!(json["steps"].as_array().unwrap().len(), 8);
        assert_eq!(
            json["steps"][2],
            serde_json::json!({
                "at": "2025-12-04T00:00:01Z",
                "what": "FailedScheduling",
                "object": "nightly-7-1a2b3c4d-x7k2q",
                "detail": "0/3 nodes are available: 3 Insufficient memory.",
                "warning": true,
            })
        );
        assert_eq!(
            json["spent"],
            serde_json::json!({"waiting": 4, "starting": 5, "running": 61})
        );
        assert_eq!(
            json["whatToDo"],
            "raise resources.memory (and its limit) in the job file, or use less memory"
        );
    }
}
