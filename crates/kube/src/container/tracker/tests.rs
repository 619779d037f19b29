//! Which Job a pod belongs to, and which of a Job's `FailedCreate` events is still news.

use jiff::{SignedDuration, Timestamp};

const FRESHNESS: Duration = Duration::from_secs(600);

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("a time")
}

fn refusal(name: &str, uid: Option<&str>, second: Option<i64>, message: &str) -> RefusalView {
    RefusalView {
        name: name.to_string(),
        job_uid: uid.map(str::to_string),
        at: second.map(at),
        message: message.to_string(),
    }
}

#[test]
fn the_newest_refusal_of_the_job_is_news() {
    let refusals = [
        refusal("a.1", Some("uid"), Some(10), "exceeded quota: compute"),
        refusal(
            "a.2",
            Some("uid"),
            Some(20),
            "serviceaccount \"robot\" not found",
        ),
        refusal("a.3", Some("uid"), Some(15), "exceeded quota: memory"),
    ];
    assert_eq!(
        current_refusal(&refusals, "uid", None, at(30), FRESHNESS).as_deref(),
        Some("serviceaccount \"robot\" not found")
    );
}

#[test]
fn another_job_of_the_same_name_does_not_count() {
    let refusals = [
        refusal(
            "old.1",
            Some("earlier-uid"),
            Some(20),
            "exceeded quota: compute",
        ),
        refusal(
            "new.1",
            Some("uid"),
            Some(10),
            "serviceaccount \"robot\" not found",
        ),
    ];
    assert_eq!(
        current_refusal(&refusals, "uid", None, at(30), FRESHNESS).as_deref(),
        Some("serviceaccount \"robot\" not found")
    );
    assert_eq!(
        current_refusal(&refusals[..1], "uid", None, at(30), FRESHNESS),
        None
    );
    // An event without the uid (a hand-made one) is taken as the Job's.
    let unnamed = [refusal("x.1", None, Some(10), "forbidden")];
    assert_eq!(
        current_refusal(&unnamed, "uid", None, at(30), FRESHNESS).as_deref(),
        Some("forbidden")
    );
}

#[test]
fn a_refusal_before_the_newest_attempt_or_long_ago_is_over() {
    let refusals = [refusal(
        "a.1",
        Some("uid"),
        Some(10),
        "exceeded quota: compute",
    )];
    // A pod was created after it: the quota let it through.
    assert_eq!(
        current_refusal(&refusals, "uid", Some(at(11)), at(30), FRESHNESS),
        None
    );
    assert!(current_refusal(&refusals, "uid", Some(at(10)), at(30), FRESHNESS).is_some());
    // The Job controller retries within a minute and refreshes the event; one not refreshed
    // for the freshness window is over.
    let window = SignedDuration::try_from(FRESHNESS).expect("a duration");
    let later = at(10).checked_add(window).expect("a time");
    assert!(current_refusal(&refusals, "uid", None, later, FRESHNESS).is_some());
    let too_late = later
        .checked_add(SignedDuration::from_secs(1))
        .expect("a time");
    assert_eq!(
        current_refusal(&refusals, "uid", None, too_late, FRESHNESS),
        None
    );
}

#[test]
fn refusals_without_a_time_or_a_message_say_nothing() {
    let refusals = [
        refusal("a.1", Some("uid"), None, "exceeded quota: compute"),
        refusal("a.2", Some("uid"), Some(20), ""),
    ];
    assert_eq!(
        current_refusal(&refusals, "uid", None, at(30), FRESHNESS),
        None
    );
}

#[test]
fn refusals_of_the_same_second_go_to_the_later_name() {
    let refusals = [
        refusal("a.2", Some("uid"), Some(20), "second"),
        refusal("a.1", Some("uid"), Some(20), "first"),
    ];
    assert_eq!(
        current_refusal(&refusals, "uid", None, at(30), FRESHNESS).as_deref(),
        Some("second")
    );
}

#[test]
fn pods_belong_to_their_job_by_label_or_owner() {
    let labelled: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "labels": {"batch.kubernetes.io/job-name": "j1"}}
    }))
    .unwrap();
    assert_eq!(job_of_pod(&labelled).as_deref(), Some("j1"));
    let owned: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j2", "uid": "u", "controller": true}
        ]}
    }))
    .unwrap();
    assert_eq!(job_of_pod(&owned).as_deref(), Some("j2"));
    let orphan: Pod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
    assert_eq!(job_of_pod(&orphan), None);
}
