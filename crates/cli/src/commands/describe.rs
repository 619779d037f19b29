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
                ),
                event(
                    1,
                    pod,
                    "FailedScheduling",
                    "0/3 nodes are available: 3 Insufficient memory.",
                ),
                event(
                    4,
                    pod,
                    "Scheduled",
                    &format!("Successfully assigned etl/{pod} to node-2"),
                ),
                event(5, pod, "Pulling", "Pulling image \"python:3.12\""),
                event(9, pod, "Started", "Started container main"),
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

    /// What a fixture's story is told from, as Kubernetes and kubeferry keep it.
    struct Case {
        id: ExecutionId,
        job_id: &'static str,
        status: ExecutionInfo,
        attempts: Vec<Attempt>,
        events: Vec<EventView>,
        cancel: Option<(Option<Timestamp>, Option<String>)>,
    }

    fn event(second: i64, object: &str, reason: &str, message: &str) -> EventView {
        let warning = [
            "FailedScheduling",
            "FailedCreate",
            "Failed",
            "BackOff",
            "Evicted",
        ]
        .contains(&reason);
        EventView {
            at: Some(at(second)),
            object: object.into(),
            reason: reason.into(),
            message: message.into(),
            warning,
            count: 1,
            sequence: None,
        }
    }

    fn attempt(pod: &str, scheduled: i64, end: Option<(i64, i32, &str)>) -> Attempt {
        Attempt {
            pod: pod.into(),
            node: Some("node-1".into()),
            scheduled_at: Some(at(scheduled)),
            ended_at: end.map(|(second, _, _)| at(second)),
            exit_code: end.map(|(_, code, _)| code),
            reason: end.map(|(_, _, reason)| reason.to_string()),
            message: None,
        }
    }

    fn status(state: JobState, reason: Reason, message: &str, times: (i64, i64)) -> ExecutionInfo {
        let mut status = ExecutionInfo::new(state, reason).with_message(message);
        status.started_at = (times.0 >= 0).then(|| at(times.0));
        status.finished_at = (times.1 >= 0 && status.is_terminal()).then(|| at(times.1));
        status
    }

    /// The stories a person asks about most, each from the objects, pods and events a real
    /// cluster keeps of it (the events in Kubernetes' own words).
    fn cases() -> Vec<(&'static str, Case)> {
        let job = |name: &str| ExecutionId::new("prod", JobKind::Job, "etl", name);
        let pod = |job: &str, suffix: &str| format!("{job}-{suffix}");
        let mut cases = Vec::new();

        let name = "big-1-aaaa1111";
        let waiting = pod(name, "q7x2k");
        cases.push(("unschedulable", Case {
            id: job(name),
            job_id: "big-1",
            status: status(JobState::Queued, Reason::Unschedulable,
                "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.", (-1, -1)),
            attempts: vec![attempt(&waiting, -1, None)].into_iter().map(|mut a| { a.scheduled_at = None; a.node = None; a }).collect(),
            events: vec![
                event(0, name, "SuccessfulCreate", &format!("Created pod: {waiting}")),
                EventView { count: 4, ..event(40, &waiting, "FailedScheduling",
                    "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.") },
            ],
            cancel: None,
        }));

        let name = "pull-1-bbbb2222";
        let pulling = pod(name, "m4n5p");
        cases.push(("image pull failure", Case {
            id: job(name),
            job_id: "pull-1",
            status: status(JobState::Failed, Reason::ImagePullFailed,
                "image registry.corp/etl:2.1 could not be pulled within 5m0s: Failed to pull image \"registry.corp/etl:2.1\": dial tcp: lookup registry.corp: no such host", (-1, 301)),
            attempts: vec![attempt(&pulling, 1, None)],
            events: vec![
                event(0, name, "SuccessfulCreate", &format!("Created pod: {pulling}")),
                event(1, &pulling, "Scheduled", &format!("Successfully assigned etl/{pulling} to node-1")),
                EventView { count: 6, ..event(290, &pulling, "Pulling", "Pulling image \"registry.corp/etl:2.1\"") },
                EventView { count: 6, ..event(290, &pulling, "Failed", "Failed to pull image \"registry.corp/etl:2.1\": dial tcp: lookup registry.corp: no such host") },
                EventView { count: 12, ..event(296, &pulling, "BackOff", "Back-off pulling image \"registry.corp/etl:2.1\"") },
            ],
            cancel: None,
        }));

        let name = "greedy-1-cccc3333";
        cases.push(("refused by a ResourceQuota", Case {
            id: job(name),
            job_id: "greedy-1",
            status: status(JobState::Queued, Reason::Pending,
                &format!("waiting for the Job controller to create a pod: Error creating: pods \"{name}-\" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1"), (-1, -1)),
            attempts: Vec::new(),
            events: vec![EventView { count: 5, ..event(80, name, "FailedCreate",
                &format!("Error creating: pods \"{name}-\" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1")) }],
            cancel: None,
        }));

        let name = "flaky-1-dddd4444";
        let (first, second) = (pod(name, "a1b2c"), pod(name, "d3e4f"));
        let mut succeeded = status(JobState::Succeeded, Reason::Completed, "", (13, 24));
        succeeded.exit_code = Some(0);
        cases.push((
            "retried once, then succeeded",
            Case {
                id: job(name),
                job_id: "flaky-1",
                status: succeeded,
                attempts: vec![
                    attempt(&first, 1, Some((3, 3, "Error"))),
                    attempt(&second, 12, Some((24, 0, "Completed"))),
                ],
                events: vec![
                    event(
                        0,
                        name,
                        "SuccessfulCreate",
                        &format!("Created pod: {first}"),
                    ),
                    event(2, &first, "Started", "Started container main"),
                    event(
                        11,
                        name,
                        "SuccessfulCreate",
                        &format!("Created pod: {second}"),
                    ),
                    event(13, &second, "Started", "Started container main"),
                    event(25, name, "Completed", "Job completed"),
                ],
                cancel: None,
            },
        ));

        let name = "long-1-eeee5555";
        let running = pod(name, "g5h6j");
        cases.push((
            "cancelled",
            Case {
                id: job(name),
                job_id: "long-1",
                status: status(
                    JobState::Cancelled,
                    Reason::Cancelled,
                    "cancelled by alice on laptop-3 at 2025-12-04T00:10:00Z",
                    (3, 600),
                ),
                attempts: vec![attempt(&running, 1, Some((601, 143, "Error")))],
                events: vec![
                    event(
                        0,
                        name,
                        "SuccessfulCreate",
                        &format!("Created pod: {running}"),
                    ),
                    event(3, &running, "Started", "Started container main"),
                    event(600, &running, "Killing", "Stopping container main"),
                ],
                cancel: Some((Some(at(600)), Some("alice on laptop-3".into()))),
            },
        ));

        let name = "pi-1-ffff6666";
        let driver = format!("{name}-0-driver");
        let mut evicted = status(
            JobState::Failed,
            Reason::Evicted,
            "DriverEvicted: Driver removed. The node was low on resource: memory.",
            (8, 120),
        );
        evicted.exit_code = Some(143);
        cases.push(("Spark driver evicted", Case {
            id: ExecutionId::new("prod", JobKind::SparkApp, "etl", name),
            job_id: "pi-1",
            status: evicted,
            attempts: vec![Attempt { message: Some("The node was low on resource: memory.".into()), ..attempt(&driver, 2, Some((120, 143, "Error"))) }],
            events: vec![
                event(0, name, "SparkApplicationSubmitted", "SparkApplication pi-1-ffff6666 was submitted successfully"),
                event(8, name, "SparkDriverRunning", &format!("Driver {driver} is running")),
                event(119, &driver, "Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi."),
                event(121, name, "SparkDriverFailed", &format!("Driver {driver} failed")),
            ],
            cancel: None,
        }));

        let name = "train-1-abcd7777";
        let worker = format!("{name}-workers-1-0-x9y8z");
        let mut oom = status(
            JobState::Failed,
            Reason::OomKilled,
            &format!(
                "workers index 1 (Job {name}-workers-1) failed: the main container was OOMKilled (exceeded its memory limit of 1Gi), exit code 137"
            ),
            (4, 30),
        );
        oom.exit_code = Some(137);
        cases.push((
            "JobSet worker failed",
            Case {
                id: ExecutionId::new("prod", JobKind::JobSet, "etl", name),
                job_id: "train-1",
                status: oom,
                attempts: vec![
                    attempt(&format!("{name}-leader-0-0-k1l2m"), 2, None),
                    attempt(&worker, 2, Some((30, 137, "OOMKilled"))),
                ],
                events: vec![
                    event(
                        1,
                        &format!("{name}-workers-1"),
                        "SuccessfulCreate",
                        &format!("Created pod: {worker}"),
                    ),
                    event(4, &worker, "Started", "Started container main"),
                    event(
                        31,
                        name,
                        "FailedJobs",
                        &format!("jobset failed due to job {name}-workers-1 failing"),
                    ),
                ],
                cancel: None,
            },
        ));
        cases
    }

    #[test]
    fn the_stories_a_person_asks_about_read_as_a_table_and_as_json() {
        let mut tables = String::new();
        let mut jsons = Vec::new();
        for (what, case) in cases() {
            let sources = Sources {
                object: case.id.name.clone(),
                status: case.status.clone(),
                job_id: Some(case.job_id.into()),
                created_at: Some(at(0)),
                cancel: case.cancel,
                attempts: case.attempts,
                events: case.events,
            };
            let description = Description {
                id: case.id,
                job_id: Some(case.job_id.into()),
                status: case.status,
                story: story(&sources, at(900)),
            };
            let table = told(&description, false, at(900)).unwrap();
            assert!(
                table.lines().all(|line| line.chars().count() <= WIDTH),
                "{table}"
            );
            tables.push_str(&format!("=== {what}\n{table}\n"));
            jsons.push(serde_json::json!({"case": what, "description": description}));
        }
        insta::assert_snapshot!("tables", tables);
        insta::assert_snapshot!("json", serde_json::to_string_pretty(&jsons).unwrap());
    }
}
