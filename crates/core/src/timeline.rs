//! A job's story for a person: what happened to it in time order, where its time went, and what
//! to do about how it ended. Pure: built from what Kubernetes and kubeferry kept of the job.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::status::{ExecutionInfo, JobState, Reason};

/// What the story is told from: the job's status, its object's metadata, its pods' ends and the
/// events of the object and its pods. Once they are gone, the status alone (its outcome record)
/// still tells the start and the end.
#[derive(Clone, Debug)]
pub struct Sources {
    /// The status the job answers now.
    pub status: ExecutionInfo,
    /// The name of the job's object: its own events name no object.
    pub object: String,
    /// The caller's job id.
    pub job_id: Option<String>,
    /// When the job's object was created (the submission).
    pub created_at: Option<Timestamp>,
    /// When a cancel was requested, and by whom (the cancel mark).
    pub cancel: Option<(Option<Timestamp>, Option<String>)>,
    /// How each attempt's main container ended, oldest first.
    pub ends: Vec<AttemptEnd>,
    /// The events of the job's object and of its pods.
    pub events: Vec<EventView>,
}

/// How one attempt's main container ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptEnd {
    /// The pod.
    pub pod: String,
    /// When the container ended.
    pub at: Option<Timestamp>,
    /// Its exit code.
    pub exit_code: i32,
    /// The runtime's reason (`Completed`, `Error`, `OOMKilled`, ...).
    pub reason: Option<String>,
}

/// What the story reads from an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventView {
    /// When it last happened (`lastTimestamp`, `eventTime`, else its creation).
    pub at: Option<Timestamp>,
    /// The object it is about.
    pub object: String,
    /// Its reason (`Scheduled`, `FailedScheduling`, `Pulling`, `Failed`, ...).
    pub reason: String,
    /// Its message.
    pub message: String,
    /// Whether it is a warning.
    pub warning: bool,
    /// How often it happened.
    pub count: u32,
    /// Its place among events of the same second (its resourceVersion, where the server's are
    /// integers).
    pub sequence: Option<u64>,
}

/// A job's story.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Story {
    /// What happened, oldest first (steps with no known time last).
    pub steps: Vec<Step>,
    /// Where the time went.
    pub spent: Spent,
    /// What to do about how the job ended, where kubeferry knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_to_do: Option<String>,
}

/// One thing that happened to the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// What, in a word or two: `Submitted`, an event's reason, `Ended`, `CancelRequested`, the
    /// final state.
    pub what: String,
    /// The object it happened to, when not the job's own: a pod, a JobSet's Job, a driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The details: an event's message, an attempt's exit code, who cancelled.
    pub detail: String,
    /// Whether it went wrong (a warning event, a failed attempt, a failure).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
}

/// Where the job's time went, in whole seconds: waiting for a node, starting (image pulls,
/// container creation), running. A part not reached is absent; one under way counts until now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spent {
    /// From the submission until a node was found for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<i64>,
    /// From then until the main container started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starting: Option<i64>,
    /// From then until the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<i64>,
}

/// The story the sources tell, as of `now`.
pub fn story(sources: &Sources, now: Timestamp) -> Story {
    let status = &sources.status;
    let mut steps = Vec::new();
    steps.push(Step {
        at: sources.created_at,
        what: "Submitted".into(),
        object: None,
        detail: match &sources.job_id {
            Some(job_id) => format!("job id {job_id}"),
            None => String::new(),
        },
        warning: false,
    });
    let mut events: Vec<&EventView> = sources.events.iter().collect();
    events.sort_by_key(|event| (event.at, event.sequence));
    for event in events {
        let times = match event.count {
            0 | 1 => String::new(),
            n => format!(" (x{n})"),
        };
        steps.push(Step {
            at: event.at,
            what: event.reason.clone(),
            object: (event.object != sources.object).then(|| event.object.clone()),
            detail: format!("{}{times}", event.message),
            warning: event.warning,
        });
    }
    let started_seen = sources.events.iter().any(|event| event.reason == "Started");
    if !started_seen && let Some(started) = status.started_at {
        steps.push(Step {
            at: Some(started),
            what: "Started".into(),
            object: None,
            detail: "the main container started".into(),
            warning: false,
        });
    }
    for end in &sources.ends {
        let how = match end.reason.as_deref() {
            Some(reason) if !reason.is_empty() => format!("exit code {} ({reason})", end.exit_code),
            _ => format!("exit code {}", end.exit_code),
        };
        steps.push(Step {
            at: end.at,
            what: "Ended".into(),
            object: Some(end.pod.clone()),
            detail: how,
            warning: end.exit_code != 0 || end.reason.as_deref() == Some("OOMKilled"),
        });
    }
    if let Some((at, by)) = &sources.cancel {
        steps.push(Step {
            at: *at,
            what: "CancelRequested".into(),
            object: None,
            detail: match by {
                Some(by) => format!("by {by}"),
                None => String::new(),
            },
            warning: false,
        });
    }
    if status.is_terminal() {
        let mut detail = status.reason.to_string();
        if let Some(code) = status.exit_code
            && !status.message.contains("exit code")
        {
            detail.push_str(&format!(", exit code {code}"));
        }
        if !status.message.is_empty() {
            detail.push_str(&format!(": {}", status.message));
        }
        steps.push(Step {
            at: status.finished_at,
            what: status.state.to_string(),
            object: None,
            detail,
            warning: status.state == JobState::Failed,
        });
    }
    // Oldest first (a stable sort: at the same second, in the order added); a step with no
    // known time goes last.
    let (mut timed, untimed): (Vec<Step>, Vec<Step>) =
        steps.into_iter().partition(|step| step.at.is_some());
    timed.sort_by_key(|step| step.at);
    timed.extend(untimed);
    Story {
        steps: timed,
        spent: spent(sources, now),
        what_to_do: what_to_do(status).map(str::to_string),
    }
}

/// Where the time went: until the first `Scheduled` event (else the start), until the start,
/// until the end (or now).
fn spent(sources: &Sources, now: Timestamp) -> Spent {
    let status = &sources.status;
    let end = if status.is_terminal() {
        status.finished_at
    } else {
        Some(now)
    };
    let scheduled = sources
        .events
        .iter()
        .filter(|event| event.reason == "Scheduled")
        .filter_map(|event| event.at)
        .min();
    let started = status.started_at;
    let seconds = |from: Option<Timestamp>, to: Option<Timestamp>| -> Option<i64> {
        let span: SignedDuration = to?.duration_since(from?);
        Some(span.as_secs().max(0))
    };
    let node_found = scheduled.or(started);
    Spent {
        waiting: seconds(sources.created_at, node_found.or(end)),
        starting: node_found.and_then(|found| seconds(Some(found), started.or(end))),
        running: started.and_then(|started| seconds(Some(started), end)),
    }
}

/// What a person can do about a job that ended so, where kubeferry knows.
pub fn what_to_do(status: &ExecutionInfo) -> Option<&'static str> {
    use Reason::*;
    Some(match status.reason {
        OomKilled => "raise resources.memory (and its limit) in the job file, or use less memory",
        DeadlineExceeded => "raise timeout in the job file, or make the job faster",
        Error | BackoffLimitExceeded | PodFailurePolicy | SparkFailed => {
            "read its log: kubeferry logs ID (--previous for the attempt before)"
        }
        ImagePullFailed | ImagePullBackOff | InvalidImageName => {
            "check the image name and tag, that its registry is reachable, and the pull secret"
        }
        CreateContainerConfigError | CreateContainerError => {
            "create the secret or config map the job mounts, or fix the key it names"
        }
        Unschedulable | UnschedulableTimeout | SchedulingFailure => {
            "ask for fewer resources, or relax nodeSelector and tolerations: the scheduler's \
             words say which"
        }
        NoStatusTimeout | DriverStartTimedOut | ExecutorsStartTimedOut => {
            "check that the Spark operator runs and watches this namespace"
        }
        Evicted | Preempted | NodeLost | Disrupted => {
            "not the job's fault: submit it again under a new job id, or give it retries"
        }
        DeletedExternally => "someone deleted its objects: submit it again under a new job id",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
