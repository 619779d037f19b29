//! The story of hand-built sources.

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_749_542_400 + second).expect("in range")
}

fn event(second: i64, object: &str, reason: &str, message: &str, warning: bool) -> EventView {
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

/// Each step as (seconds after the start, what, object, detail, warning).
fn rows(story: &Story) -> Vec<(i64, &str, Option<&str>, &str, bool)> {
    story
        .steps
        .iter()
        .map(|s| {
            (
                s.at.unwrap().as_second() - at(0).as_second(),
                s.what.as_str(),
                s.object.as_deref(),
                s.detail.as_str(),
                s.warning,
            )
        })
        .collect()
}

fn oom_killed() -> Sources {
    let mut status = ExecutionInfo::new(JobState::Failed, Reason::OomKilled).with_message(
        "the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137",
    );
    status.exit_code = Some(137);
    status.started_at = Some(at(6));
    status.finished_at = Some(at(16));
    Sources {
        status,
        object: "etl-x".into(),
        job_id: Some("etl-1".into()),
        created_at: Some(at(0)),
        cancel: None,
        attempts: vec![Attempt {
            pod: "etl-x-abcde".into(),
            node: Some("node-1".into()),
            scheduled_at: Some(at(3)),
            ended_at: Some(at(16)),
            exit_code: Some(137),
            reason: Some("OOMKilled".into()),
            message: None,
        }],
        events: vec![
            event(
                3,
                "etl-x-abcde",
                "Scheduled",
                "Successfully assigned default/etl-x-abcde to node-1",
                false,
            ),
            event(
                1,
                "etl-x",
                "SuccessfulCreate",
                "Created pod: etl-x-abcde",
                false,
            ),
            event(
                4,
                "etl-x-abcde",
                "Pulling",
                "Pulling image \"python:3\"",
                false,
            ),
            EventView {
                count: 3,
                ..event(
                    2,
                    "etl-x-abcde",
                    "FailedScheduling",
                    "0/3 nodes are available: 3 Insufficient memory.",
                    true,
                )
            },
            event(6, "etl-x-abcde", "Started", "Started container main", false),
        ],
    }
}

#[test]
fn an_oom_killed_job_tells_its_steps_in_order_and_what_to_do() {
    let story = story(&oom_killed(), at(100));
    let steps = rows(&story);
    let pod = Some("etl-x-abcde");
    assert_eq!(
        steps,
        [
            (0, "Submitted", None, "job id etl-1", false),
            (
                1,
                "SuccessfulCreate",
                None,
                "Created pod: etl-x-abcde",
                false
            ),
            (
                2,
                "FailedScheduling",
                pod,
                "0/3 nodes are available: 3 Insufficient memory. (x3)",
                true
            ),
            (
                3,
                "Scheduled",
                pod,
                "Successfully assigned default/etl-x-abcde to node-1",
                false
            ),
            (4, "Pulling", pod, "Pulling image \"python:3\"", false),
            (6, "Started", pod, "Started container main", false),
            (16, "Ended", pod, "exit code 137 (OOMKilled)", true),
            (
                16,
                "FAILED",
                None,
                "OomKilled: the main container was OOMKilled (exceeded its memory limit of 64Mi), \
                 exit code 137",
                true
            ),
        ]
    );
    assert_eq!(
        story.spent,
        Spent {
            waiting: Some(3),
            starting: Some(3),
            running: Some(10)
        }
    );
    assert_eq!(
        story.what_to_do.as_deref(),
        Some("raise resources.memory (and its limit) in the job file, or use less memory")
    );
}

#[test]
fn a_job_whose_objects_are_gone_tells_its_start_and_end_from_its_status() {
    let mut sources = oom_killed();
    sources.events.clear();
    sources.attempts.clear();
    let story = story(&sources, at(100_000));
    let whats: Vec<&str> = story.steps.iter().map(|s| s.what.as_str()).collect();
    assert_eq!(whats, ["Submitted", "Started", "FAILED"]);
    // With no Scheduled event, the wait lasts until the start.
    assert_eq!(
        story.spent,
        Spent {
            waiting: Some(6),
            starting: Some(0),
            running: Some(10)
        }
    );
}

#[test]
fn a_running_job_counts_until_now_and_a_cancel_names_who_asked() {
    let mut sources = oom_killed();
    sources.status = ExecutionInfo::new(JobState::Cancelling, Reason::CancelRequested);
    sources.status.started_at = Some(at(6));
    sources.attempts.clear();
    sources.cancel = Some((Some(at(20)), Some("alice on laptop-3".into())));
    let story = story(&sources, at(30));
    let last = story.steps.last().unwrap();
    assert_eq!(
        (last.at, last.what.as_str(), last.detail.as_str()),
        (Some(at(20)), "CancelRequested", "by alice on laptop-3")
    );
    assert_eq!(story.spent.running, Some(24));
    assert_eq!(story.what_to_do, None);
}

#[test]
fn a_step_with_no_known_time_goes_last() {
    let mut sources = oom_killed();
    sources.created_at = None;
    let story = story(&sources, at(100));
    assert_eq!(story.steps.last().unwrap().what, "Submitted");
    assert_eq!(story.spent.waiting, None);
}

#[test]
fn a_job_whose_pods_and_events_are_gone_tells_its_attempts_from_its_record() {
    let mut sources = oom_killed();
    sources.events.clear();
    let evicted = Attempt {
        pod: "etl-x-fghij".into(),
        node: Some("node-2".into()),
        scheduled_at: Some(at(1)),
        ended_at: Some(at(2)),
        exit_code: None,
        reason: Some("Evicted".into()),
        message: Some("The node was low on resource: memory.".into()),
    };
    sources.attempts.insert(0, evicted);
    let story = story(&sources, at(100_000));
    let steps = rows(&story);
    assert_eq!(
        steps,
        [
            (0, "Submitted", None, "job id etl-1", false),
            (1, "Scheduled", Some("etl-x-fghij"), "on node-2", false),
            (
                2,
                "Ended",
                Some("etl-x-fghij"),
                "Evicted: The node was low on resource: memory.",
                true
            ),
            (3, "Scheduled", Some("etl-x-abcde"), "on node-1", false),
            (6, "Started", None, "the main container started", false),
            (
                16,
                "Ended",
                Some("etl-x-abcde"),
                "exit code 137 (OOMKilled)",
                true
            ),
            (
                16,
                "FAILED",
                None,
                "OomKilled: the main container was OOMKilled (exceeded its memory limit of 64Mi), \
                 exit code 137",
                true
            ),
        ]
    );
    // The first placement ends the wait.
    assert_eq!(
        story.spent,
        Spent {
            waiting: Some(1),
            starting: Some(5),
            running: Some(10)
        }
    );
}

#[test]
fn a_record_keeps_the_newest_attempts_and_each_in_few_bytes() {
    let attempts: Vec<Attempt> = (0..40)
        .map(|n| Attempt {
            pod: format!("{}-{n:05}", "p".repeat(57)),
            node: Some("n".repeat(63)),
            scheduled_at: Some(at(n)),
            ended_at: Some(at(n + 1)),
            exit_code: Some(1),
            reason: Some("DeadlineExceeded".into()),
            message: Some("m".repeat(KEPT_MESSAGE_CHARS)),
        })
        .collect();
    let kept = kept_attempts(attempts);
    assert_eq!(kept.len(), KEPT_ATTEMPTS);
    assert!(kept[0].pod.ends_with("-00024"), "{:?}", kept[0].pod);
    assert!(kept.last().unwrap().pod.ends_with("-00039"));
    let bytes = serde_json::to_string(&kept).unwrap().len();
    assert!(bytes <= 8 * 1024, "{bytes} bytes");
}

#[test]
fn a_refusal_of_the_pods_says_what_to_do_while_waiting_and_after() {
    let waiting = ExecutionInfo::new(JobState::Queued, Reason::Pending).with_message(
        "waiting for the Job controller to create a pod: pods \"q-\" is forbidden: exceeded \
         quota: compute, requested: requests.cpu=2, used: requests.cpu=0, limited: \
         requests.cpu=1",
    );
    assert!(
        what_to_do(&waiting)
            .unwrap()
            .contains("ResourceQuota is used up")
    );
    let timed_out = ExecutionInfo::new(JobState::Failed, Reason::UnschedulableTimeout)
        .with_message(format!("no pod was created ...: {}", waiting.message));
    assert_eq!(what_to_do(&timed_out), what_to_do(&waiting));
    let unset = ExecutionInfo::new(JobState::Queued, Reason::Pending).with_message(
        "pods \"q-\" is forbidden: failed quota: compute: must specify limits.cpu for: main",
    );
    assert!(what_to_do(&unset).unwrap().starts_with("set resources"));
    assert_eq!(
        what_to_do(&ExecutionInfo::new(JobState::Queued, Reason::Pending)),
        None
    );
}
