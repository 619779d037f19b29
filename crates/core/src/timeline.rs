//! A job's story for a person: what happened to it in time order, where its time went, and what
//! to do about how it ended. Pure: built from what Kubernetes and kubeferry kept of the job.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::container::{
    ConditionStatus, ContainerStateView, ContainerView, PodPhase, PodSummary, PodView,
    oldest_attempt_first,
};
use crate::status::{ExecutionInfo, JobState, Reason};

/// How many attempts an outcome record keeps (the newest): with pod and node names of at most
/// 63 characters and a message cut to [`KEPT_MESSAGE_CHARS`], at most about 8 KiB.
pub const KEPT_ATTEMPTS: usize = 16;
/// How much of a pod's own message (an eviction's, a node loss's) an attempt keeps.
pub const KEPT_MESSAGE_CHARS: usize = 200;

/// What the story is told from: the job's status, its object's metadata, its pods and the events
/// of the object and its pods. Once they are gone, the outcome record still tells the start,
/// each attempt kept and the end; the events' words are not kept.
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
    /// The job's attempts (its pods), oldest first.
    pub attempts: Vec<Attempt>,
    /// The events of the job's object and of its pods.
    pub events: Vec<EventView>,
}

/// One attempt: one of the job's pods, as far as it got. The outcome record keeps the newest
/// [`KEPT_ATTEMPTS`], so the story outlives the pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// The pod.
    pub pod: String,
    /// Its node, once scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// When the scheduler placed it (its `PodScheduled` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<Timestamp>,
    /// When its main container ended, or the pod failed without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// The main container's exit code, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The runtime's reason for the end (`Completed`, `Error`, `OOMKilled`, ...), else the
    /// pod's (`Evicted`, `DeadlineExceeded`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pod's own message when it failed without its container's end (an eviction's), cut
    /// to [`KEPT_MESSAGE_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Attempt {
    /// The attempt a pod shows: its summary, its main container and its node.
    pub fn of(pod: &PodSummary, main: Option<&ContainerView>, node: Option<&str>) -> Self {
        let scheduled_at = pod
            .scheduled
            .as_ref()
            .filter(|condition| condition.status == ConditionStatus::True)
            .and_then(|condition| condition.last_transition_time);
        let mut attempt = Attempt {
            pod: pod.name.clone(),
            node: node.map(str::to_string),
            scheduled_at,
            ..Attempt::default()
        };
        match main.map(|main| &main.state) {
            Some(ContainerStateView::Terminated(ended)) => {
                attempt.ended_at = ended.finished_at;
                attempt.exit_code = Some(ended.exit_code);
                attempt.reason = ended.reason.clone();
            }
            // A pod that failed with its container not ended (evicted, out of time, its node
            // lost) ends with the pod's reason and words.
            _ if pod.phase == Some(PodPhase::Failed) || pod.reason.is_some() => {
                attempt.reason = pod.reason.clone();
                attempt.message = pod
                    .message
                    .as_deref()
                    .map(|message| message.chars().take(KEPT_MESSAGE_CHARS).collect());
                attempt.ended_at = pod
                    .disruption
                    .as_ref()
                    .and_then(|condition| condition.last_transition_time);
            }
            _ => {}
        }
        attempt
    }

    /// Whether it ended.
    fn ended(&self) -> bool {
        self.exit_code.is_some() || self.reason.is_some()
    }
}

/// The attempts a Job's pods show, oldest first (as the mapping orders them).
pub fn attempts_of(pods: &[PodView]) -> Vec<Attempt> {
    let mut pods: Vec<&PodView> = pods.iter().collect();
    pods.sort_by(|a, b| oldest_attempt_first(a, b));
    pods.iter()
        .map(|pod| Attempt::of(&pod.pod, pod.main.as_ref(), pod.node_name.as_deref()))
        .collect()
}

/// The attempt whose log tells how the job ended: the last that failed, else the last that
/// ended.
pub fn telling_attempt(attempts: &[Attempt]) -> Option<&Attempt> {
    let ended = || {
        attempts
            .iter()
            .filter(|attempt| attempt.exit_code.is_some())
    };
    ended()
        .rfind(|attempt| attempt.exit_code != Some(0))
        .or_else(|| ended().next_back())
}

/// The attempts an outcome record keeps of `attempts` (oldest first): the newest
/// [`KEPT_ATTEMPTS`].
pub fn kept_attempts(mut attempts: Vec<Attempt>) -> Vec<Attempt> {
    let extra = attempts.len().saturating_sub(KEPT_ATTEMPTS);
    attempts.drain(..extra);
    attempts
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
    for attempt in &sources.attempts {
        // A pod the events no longer tell of (their retention is an hour by default) still
        // shows where and when it was placed.
        let scheduled_seen = sources
            .events
            .iter()
            .any(|event| event.reason == "Scheduled" && event.object == attempt.pod);
        if !scheduled_seen && let Some(at) = attempt.scheduled_at {
            steps.push(Step {
                at: Some(at),
                what: "Scheduled".into(),
                object: Some(attempt.pod.clone()),
                detail: match &attempt.node {
                    Some(node) => format!("on {node}"),
                    None => String::new(),
                },
                warning: false,
            });
        }
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
    for attempt in sources.attempts.iter().filter(|attempt| attempt.ended()) {
        let reason = attempt
            .reason
            .as_deref()
            .filter(|reason| !reason.is_empty());
        let mut detail = match (attempt.exit_code, reason) {
            (Some(code), Some(reason)) => format!("exit code {code} ({reason})"),
            (Some(code), None) => format!("exit code {code}"),
            (None, reason) => reason.unwrap_or_default().to_string(),
        };
        if let Some(message) = &attempt.message {
            detail.push_str(&format!(": {message}"));
        }
        steps.push(Step {
            at: attempt.ended_at,
            what: "Ended".into(),
            object: Some(attempt.pod.clone()),
            detail,
            warning: attempt.exit_code != Some(0) || reason == Some("OOMKilled"),
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

/// Where the time went: until the first pod was scheduled (else the start), until the start,
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
        .chain(sources.attempts.iter().filter_map(|a| a.scheduled_at))
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

/// What a person can do about a job that ended or waits so, where kubeferry knows.
pub fn what_to_do(status: &ExecutionInfo) -> Option<&'static str> {
    use Reason::*;
    // The API server's refusal of the job's pods, in its words, names the cause better than
    // the reason a wait or its timeout gets.
    let refusals = [
        (
            "exceeded quota: ",
            "the namespace's ResourceQuota is used up: ask for less, wait for other jobs to \
             end, or raise the quota (kubectl describe quota)",
        ),
        (
            "failed quota: ",
            "set resources (cpu, memory and their limits) in the job file: the namespace's \
             ResourceQuota requires them",
        ),
        (
            "error looking up service account",
            "create the service account the job file names, or leave serviceAccount out",
        ),
    ];
    if let Some((_, advice)) = refusals
        .iter()
        .find(|(words, _)| status.message.contains(words))
    {
        return Some(advice);
    }
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
