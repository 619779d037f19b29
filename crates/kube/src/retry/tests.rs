use std::sync::atomic::{AtomicU32, Ordering};

use kube::core::{Status, response::StatusDetails};

use super::*;

fn api_error(code: u16, retry_after_seconds: u32) -> kube::Error {
    let mut status = Status::failure("boom", "Whatever").with_code(code);
    if retry_after_seconds > 0 {
        status = status.with_details(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds,
        });
    }
    kube::Error::Api(status.boxed())
}

#[test]
fn verdicts() {
    let retry = Verdict::RetryAfter(None);
    let table: &[(u16, Verdict)] = &[
        (429, retry.clone()),
        (500, retry.clone()),
        // Not implemented: no retry makes it implemented.
        (501, Verdict::Final),
        (502, retry.clone()),
        (503, retry.clone()),
        (504, retry.clone()),
        (505, retry.clone()),
        (507, retry.clone()),
        (508, retry.clone()),
        (511, retry.clone()),
        (599, retry.clone()),
        (400, Verdict::Final),
        (401, Verdict::Final),
        (403, Verdict::Final),
        (404, Verdict::Final),
        (405, Verdict::Final),
        (409, Verdict::Final),
        (410, Verdict::Final),
        (413, Verdict::Final),
        (415, Verdict::Final),
        (422, Verdict::Final),
        (428, Verdict::Final),
    ];
    for (code, want) in table {
        assert_eq!(&verdict(&api_error(*code, 0)), want, "{code}");
    }
    // The delay named in the Status body, on any retried answer.
    for code in [429, 500, 503, 507] {
        assert_eq!(
            verdict(&api_error(code, 3)),
            Verdict::RetryAfter(Some(Duration::from_secs(3))),
            "{code}"
        );
    }
    assert_eq!(verdict(&api_error(501, 3)), Verdict::Final);
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    assert_eq!(verdict(&kube::Error::ReadEvents(io)), Verdict::NoResponse);
}

#[test]
fn backoff_is_truncated_exponential_with_full_jitter() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.ceiling(0), Duration::from_millis(200));
    assert_eq!(policy.ceiling(1), Duration::from_millis(400));
    assert_eq!(policy.ceiling(5), Duration::from_millis(6400));
    assert_eq!(policy.ceiling(6), Duration::from_secs(10));
    assert_eq!(policy.ceiling(100), Duration::from_secs(10));
    let mut distinct = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let backoff = policy.backoff(3);
        assert!(backoff <= policy.ceiling(3));
        distinct.insert(backoff);
    }
    assert!(distinct.len() > 1, "jitter must vary the backoff");
}

#[tokio::test]
async fn retries_retryable_answers_until_success() {
    let calls = AtomicU32::new(0);
    let result = RetryPolicy::fast()
        .run("get", false, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(api_error(503, 0)),
                1 => Err(api_error(429, 0)),
                _ => Ok(7),
            }
        })
        .await;
    assert_eq!(result.unwrap(), 7);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn final_answers_are_not_retried() {
    for code in [400, 403, 404, 409, 422] {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = RetryPolicy::fast()
            .run("create", true, || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(api_error(code, 0))
            })
            .await;
        let exhausted = result.unwrap_err();
        assert_eq!(exhausted.attempts, 1, "{code}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{code}");
    }
}

#[tokio::test]
async fn lost_responses_are_retried_only_when_safe() {
    let reset = || {
        kube::Error::ReadEvents(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset",
        ))
    };
    let calls = AtomicU32::new(0);
    let result: Result<(), _> = RetryPolicy::fast()
        .run("patch", false, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(reset())
        })
        .await;
    assert_eq!(result.unwrap_err().attempts, 1);

    let calls = AtomicU32::new(0);
    let result = RetryPolicy::fast()
        .run("get", true, || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(reset())
            } else {
                Ok(())
            }
        })
        .await;
    assert!(result.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn gives_up_when_retry_after_exceeds_the_deadline() {
    let policy = RetryPolicy {
        deadline: Duration::from_secs(2),
        ..RetryPolicy::fast()
    };
    let calls = AtomicU32::new(0);
    let result: Result<(), _> = policy
        .run("get", true, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(api_error(429, 60))
        })
        .await;
    assert_eq!(result.unwrap_err().attempts, 1);
}

#[tokio::test]
async fn gives_up_at_the_deadline() {
    let policy = RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(20),
        deadline: Duration::from_millis(100),
    };
    let calls = AtomicU32::new(0);
    let result: Result<(), _> = policy
        .run("get", true, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(api_error(500, 0))
        })
        .await;
    let attempts = result.unwrap_err().attempts;
    assert!(attempts >= 2, "retried at least once, got {attempts}");
    assert!(attempts < 1000);
}

#[tokio::test(start_paused = true)]
async fn honours_retry_after() {
    let policy = RetryPolicy {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
        deadline: Duration::from_secs(60),
    };
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    let result = policy
        .run("get", false, || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(api_error(429, 7))
            } else {
                Ok(())
            }
        })
        .await;
    assert!(result.is_ok());
    assert!(started.elapsed() >= Duration::from_secs(7));
}

#[tokio::test]
async fn a_check_before_each_repeat_can_end_the_operation() {
    let (calls, checks) = (AtomicU32::new(0), AtomicU32::new(0));
    // Asked before every repeat, never before the first attempt; its value ends it.
    let result = RetryPolicy::fast()
        .run_checked(
            "create",
            true,
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(api_error(500, 0))
            },
            || async { (checks.fetch_add(1, Ordering::SeqCst) == 1).then_some(9) },
        )
        .await;
    assert_eq!(result.unwrap(), 9);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(checks.load(Ordering::SeqCst), 2);
    // A first attempt that succeeds asks nothing.
    let checks = AtomicU32::new(0);
    let result = RetryPolicy::fast()
        .run_checked(
            "create",
            true,
            || async { Ok(1) },
            || async {
                checks.fetch_add(1, Ordering::SeqCst);
                None
            },
        )
        .await;
    assert_eq!(result.unwrap(), 1);
    assert_eq!(checks.load(Ordering::SeqCst), 0);
}
