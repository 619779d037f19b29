//! Logs: tails by lines and bytes, follows that end with the container and survive a broken
//! stream, earlier attempts, jobs without a log yet, and logs that never fail a status query.

use std::time::Duration;

use futures::StreamExt;
use kubeferry_core::JobState;
use kubeferry_kube::Error;
use kubeferry_kube::logs::{FollowOptions, TailOptions};
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::support::*;

fn tail(lines: Option<u64>, bytes: Option<u64>) -> TailOptions {
    TailOptions {
        lines,
        bytes,
        previous: false,
        index: None,
        replica: None,
    }
}

fn follow_options() -> FollowOptions {
    FollowOptions {
        tail_lines: None,
        reopen_delay: Duration::from_millis(20),
        ..FollowOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tails_by_lines() {
    let env = Env::start().await;
    let id = env
        .submit(&shell(
            "count",
            "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; done",
            "",
        ))
        .await;
    env.wait(&id).await;
    let all = env.executor.tail(&id, &tail(None, None)).await.unwrap().log;
    assert_eq!(all.lines().count(), 10, "{all}");
    let last = env
        .executor
        .tail(&id, &tail(Some(3), None))
        .await
        .unwrap()
        .log;
    assert_eq!(last, "line 8\nline 9\nline 10\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tails_by_bytes_without_splitting_a_character() {
    let env = Env::start().await;
    // "€" is three bytes: a cut at most bytes from the end lands inside one.
    let id = env
        .submit(&shell("euro", "echo first; echo €€€€", ""))
        .await;
    env.wait(&id).await;
    let cases = [
        (13, "€€€€\n"),
        (12, "€€€\n"),
        (5, "€\n"),
        (4, "€\n"),
        (3, "\n"),
        (1, "\n"),
        (0, ""),
    ];
    for (bytes, expected) in cases {
        let text = env
            .executor
            .tail(&id, &tail(None, Some(bytes)))
            .await
            .unwrap()
            .log;
        assert_eq!(text, expected, "{bytes} bytes");
    }
    // Lines first, then bytes.
    let both = env
        .executor
        .tail(&id, &tail(Some(2), Some(100)))
        .await
        .unwrap()
        .log;
    assert_eq!(both, "first\n€€€€\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_until_the_container_ends() {
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!(
        "echo one; {}; echo two; {}; echo three",
        gate.wait("a"),
        gate.wait("b")
    );
    let id = env.submit(&shell("follow", &script, "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let mut lines = Box::pin(env.executor.follow(&id, follow_options()).unwrap());
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "one\n"
    );
    gate.open("a");
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "two\n"
    );
    gate.open("b");
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "three\n"
    );
    // The container ended: so does the follow.
    assert!(within("the end", lines.next()).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_survives_a_dropped_stream_without_losing_or_repeating_lines() {
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!(
        "for i in 1 2 3; do echo before $i; done; {}; for i in 4 5 6; do echo after $i; done",
        gate.wait("a")
    );
    let id = env.submit(&shell("dropped", &script, "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let mut lines = Box::pin(env.executor.follow(&id, follow_options()).unwrap());
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(within("a line", lines.next()).await.unwrap().unwrap());
    }
    // Every connection drops, the open log stream with it; the first re-open is dropped too.
    let reopens = env.sim.request_count("get", "pods/log");
    env.sim.add_fault(
        FaultRule::new(FaultAction::DropConnection)
            .verbs(&["get"])
            .resources(&["pods/log"])
            .times(1),
    );
    env.sim.restart();
    gate.open("a");
    while let Some(line) = within("a line", lines.next()).await {
        seen.push(line.unwrap());
    }
    assert_eq!(
        seen,
        [
            "before 1\n",
            "before 2\n",
            "before 3\n",
            "after 4\n",
            "after 5\n",
            "after 6\n"
        ]
    );
    assert!(
        env.sim.request_count("get", "pods/log") >= reopens + 2,
        "re-opened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_attempt_has_its_own_log() {
    let env = Env::start().await;
    let gate = Gate::new();
    let marker = gate.path("first-attempt");
    let script = format!(
        "if [ -e {marker} ]; then echo second; else touch {marker}; echo first; exit 1; fi"
    );
    let id = env.submit(&shell("attempts", &script, "retries: 1")).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    let newest = env.executor.tail(&id, &tail(None, None)).await.unwrap().log;
    assert_eq!(newest, "second\n");
    let previous = TailOptions {
        previous: true,
        ..TailOptions::default()
    };
    let earlier = env.executor.tail(&id, &previous).await.unwrap().log;
    assert_eq!(earlier, "first\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_without_a_started_container_has_an_empty_log_and_says_why() {
    let env = Env::start().await;
    // No pod at all: held by a queue.
    let queued = env
        .submit(&shell("queued", "echo never", "queue: team-a"))
        .await;
    env.status_until(&queued, "suspended", is(JobState::Queued))
        .await;
    let tail_of_queued = env.executor.tail(&queued, &tail(None, None)).await.unwrap();
    assert_eq!(tail_of_queued.log, "");
    assert_eq!(
        tail_of_queued.warning.as_deref(),
        Some(
            "no container has started yet, so there is no log: QUEUED Suspended: waiting for \
             admission by queue team-a"
        )
    );
    // A pod that never starts: no node fits it.
    let pending = env
        .submit(&shell("pending", "echo never", "resources: {cpu: 64}"))
        .await;
    env.status_until(&pending, "unschedulable", |i| {
        i.reason == kubeferry_core::Reason::Unschedulable
    })
    .await;
    let tail_of_pending = env
        .executor
        .tail(&pending, &tail(None, None))
        .await
        .unwrap();
    assert_eq!(tail_of_pending.log, "");
    let warning = tail_of_pending.warning.expect("a warning");
    assert!(
        warning.starts_with(
            "no container has started yet, so there is no log: QUEUED Unschedulable: "
        ) && warning.contains("Insufficient cpu"),
        "{warning}"
    );
    // And a job that does not exist is no such job, not an empty log.
    let error = env
        .executor
        .tail(&id_of("never-created-1a2b3c4d"), &tail(None, None))
        .await
        .unwrap_err();
    assert!(error.is_no_such_job(), "{error}");
    // A pod that is gone took its log with it.
    let gate = Gate::new();
    let lost = env
        .submit(&shell(
            "lost",
            &format!("echo hi; {}", gate.wait("never")),
            "",
        ))
        .await;
    env.status_until(&lost, "running", is(JobState::Started))
        .await;
    env.sim.lose_node("sim-node-1").unwrap();
    env.status_until(&lost, "failed", is(JobState::Failed))
        .await;
    eventually("the pod to go", || async {
        env.sim.count("", "pods").eq(&1).then_some(())
    })
    .await;
    let tail_of_lost = env.executor.tail(&lost, &tail(None, None)).await.unwrap();
    assert_eq!(tail_of_lost.log, "");
    let warning = tail_of_lost.warning.expect("a warning");
    assert!(
        warning.starts_with("the job's pods are gone (FAILED NodeLost")
            && warning.ends_with(
                "and no last words were kept with its outcome (a container keeps them when it \
                 fails)"
            ),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_logs_never_fails_a_status_query() {
    let settings = Settings::fast().with_retry(|retry| retry.deadline = Duration::from_millis(300));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("quiet", &format!("echo hi; {}", gate.wait("a")), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let unknown = id_of("unknown-0a1b2c3d");
    assert!(
        env.executor
            .status(&unknown)
            .await
            .unwrap_err()
            .is_no_such_job()
    );

    // Every log request goes unanswered.
    env.sim.add_fault(
        FaultRule::new(FaultAction::DropConnection)
            .verbs(&["get"])
            .resources(&["pods/log"]),
    );
    let error = env.executor.tail(&id, &tail(None, None)).await.unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error:?}");

    // The API server itself answers: status queries are unaffected, those that must ask it
    // included.
    assert_eq!(
        env.executor.status(&id).await.unwrap().state,
        JobState::Started
    );
    let answer = env.executor.status(&unknown).await.unwrap_err();
    assert!(answer.is_no_such_job(), "{answer:?}");
    gate.open("a");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_that_cannot_read_the_log_ends_with_the_error() {
    let settings = Settings::fast().with_retry(|retry| retry.deadline = Duration::from_millis(300));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let id = env
        .submit(&shell(
            "unread",
            &format!("echo hi; {}", gate.wait("a")),
            "",
        ))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::DropConnection)
            .verbs(&["get"])
            .resources(&["pods/log"]),
    );
    // The job runs on, but the follow ends: its reader learns why.
    let follow = env.executor.follow(&id, follow_options()).unwrap();
    let followed: Vec<_> = within("the follow to end", follow.collect()).await;
    assert!(
        matches!(followed.last(), Some(Err(Error::Unreachable { .. }))),
        "{followed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_several_containers_is_read_through_its_main_one() {
    // A mutating webhook (a service mesh, a log shipper) may add containers to the pod.
    let env = Env::start().await;
    let gate = Gate::new();
    let main = format!("echo from main; {}", gate.wait("main"));
    let proxy = format!("echo from proxy; {}", gate.wait("proxy"));
    let id = env.create_job_directly(
        &shell("meshed", &main, ""),
        &kubeferry_kube::generate_job_id("meshed"),
        |job| {
            let containers = job["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .expect("containers");
            containers.push(serde_json::json!({"name": "proxy", "image": "busybox:1.36",
                "command": ["sh", "-c", proxy]}));
        },
    );
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let mut lines = Box::pin(env.executor.follow(&id, follow_options()).unwrap());
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "from main\n"
    );
    gate.open("main");
    eventually("the main container to end", || async {
        let pod = env.sim.object("", "pods", NS, &env.pod_of(&id).await)?;
        pod["status"]["containerStatuses"][0]["state"]["terminated"]
            .is_object()
            .then_some(())
    })
    .await;
    assert_eq!(
        env.executor.tail(&id, &tail(None, None)).await.unwrap().log,
        "from main\n"
    );
    // The job runs while any of its containers does, and the follow with it.
    assert_eq!(
        env.executor.status(&id).await.unwrap().state,
        JobState::Started
    );
    gate.open("proxy");
    // Nothing of the proxy's log, and the end with the job's.
    assert!(within("the end", lines.next()).await.is_none());
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{outcome:?}");
    assert_eq!(
        env.executor.tail(&id, &tail(None, None)).await.unwrap().log,
        "from main\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_streams_outlive_the_read_timeout() {
    // The read timeout bounds each request's answer, not the silences of a watch or a log
    // stream: a quiet job costs no re-opened streams.
    let mut settings = Settings::fast();
    settings.cluster.read_timeout = Duration::from_millis(100);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let script = format!("echo start; {}; echo end", gate.wait("end"));
    let id = env.submit(&shell("quiet", &script, "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let mut lines = Box::pin(env.executor.follow(&id, follow_options()).unwrap());
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "start\n"
    );
    // The namespace's three watches are open (Jobs, pods, refusal events) before the
    // counting starts.
    env.watches_open(NAMESPACE_WATCHES).await;
    env.sim.reset_counters();
    // Ten read timeouts of silence: the passing of time is what is tested.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counters = env.sim.counters();
    assert!(counters.is_empty(), "nothing re-opened: {counters:#?}");
    gate.open("end");
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "end\n"
    );
    assert!(within("the end", lines.next()).await.is_none());
    assert_eq!(
        env.executor.status(&id).await.unwrap().state,
        JobState::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_of_a_pod_that_is_not_there_says_so() {
    // A follow that cannot open its first stream for want of the pod says so; the job-level
    // follow takes it as an attempt without a log left (a finished Spark driver released).
    let env = Env::start().await;
    let target = kubeferry_kube::internals::LogTarget {
        namespace: NS.to_string(),
        pod: "not-there".to_string(),
        container: "main".to_string(),
        uid: None,
    };
    let follow =
        kubeferry_kube::internals::follow(env.executor.cluster().clone(), target, follow_options());
    let followed: Vec<_> = within("the follow to end", follow.collect()).await;
    assert!(
        matches!(followed.as_slice(), [Err(Error::Api { code: 404, .. })]),
        "{followed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_is_rechecked_and_reopened_without_repeating_lines() {
    // Silence may also be a connection that died without closing: after `idle_recheck` the
    // container is looked at and, still running, its stream re-opened from the last line.
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!("echo one; echo two; {}; echo three", gate.wait("end"));
    let id = env.submit(&shell("silent", &script, "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let options = FollowOptions {
        idle_recheck: Duration::from_millis(100),
        ..follow_options()
    };
    let mut lines = Box::pin(env.executor.follow(&id, options).unwrap());
    for expected in ["one\n", "two\n"] {
        assert_eq!(
            within("a line", lines.next()).await.unwrap().unwrap(),
            expected
        );
    }
    env.sim.reset_counters();
    eventually("the silent stream to be re-opened", || async {
        (env.sim.request_count("get", "pods/log") >= 2).then_some(())
    })
    .await;
    gate.open("end");
    assert_eq!(
        within("a line", lines.next()).await.unwrap().unwrap(),
        "three\n"
    );
    assert!(within("the end", lines.next()).await.is_none());
}

/// Starts a bare pod named `name` running `script`; returns its uid once it runs.
async fn start_pod(env: &Env, name: &str, script: &str) -> String {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36",
                "command": ["sh", "-c", script]}]},
    });
    env.sim.create(NS, pod).expect("the pod is created");
    eventually("the pod to start", || async {
        env.sim
            .object("", "pods", NS, name)
            .filter(|p| matches!(p["status"]["phase"].as_str(), Some("Running" | "Succeeded")))
            .map(|p| p["metadata"]["uid"].as_str().expect("a uid").to_string())
    })
    .await
}

/// Deletes the pod named `name` at once and starts another of the same name (the next
/// attempt), which prints `second attempt` and ends.
async fn replace_pod(env: &Env, name: &str) {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.admin_client().await, NS);
    pods.delete(name, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    eventually("the pod to go", || async {
        env.sim.object("", "pods", NS, name).is_none().then_some(())
    })
    .await;
    start_pod(env, name, "echo second attempt").await;
    eventually("the next attempt to end", || async {
        env.sim
            .object("", "pods", NS, name)
            .filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await;
}

fn attempt_of(name: &str, uid: String) -> kubeferry_kube::internals::LogTarget {
    kubeferry_kube::internals::LogTarget {
        namespace: NS.to_string(),
        pod: name.to_string(),
        container: "main".to_string(),
        uid: Some(uid),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_of_one_attempt_opened_as_the_next_takes_the_name_reads_none_of_it() {
    // An operator may replace a driver (same name, new uid) between the follow's look at the
    // pod and the opening of its stream: the stream is then the next attempt's.
    let env = Env::start().await;
    let uid = start_pod(&env, "reused", "echo first attempt; sleep 30").await;
    let arrived = env.sim.request_count("get", "pods/log");
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .resources(&["pods/log"])
            .times(1),
    );
    let follow = tokio::spawn(
        kubeferry_kube::internals::follow(
            env.executor.cluster().clone(),
            attempt_of("reused", uid),
            follow_options(),
        )
        .collect::<Vec<_>>(),
    );
    eventually("the stream's request to be held", || async {
        (env.sim.request_count("get", "pods/log") > arrived).then_some(())
    })
    .await;
    replace_pod(&env, "reused").await;
    assert!(env.sim.remove_fault(hold));
    let followed = within("the follow to end", follow).await.expect("joined");
    let lines: Vec<String> = followed.into_iter().map(|l| l.expect("a line")).collect();
    assert!(
        !lines.iter().any(|l| l.contains("second attempt")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_of_one_attempt_draining_as_the_next_takes_the_name_reads_none_of_it() {
    // The attempt ends; before the follow reads what its stream may have missed, the next
    // attempt takes the name. What that read returns may be the next attempt's log.
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!("echo first attempt; {}", gate.wait("end"));
    let uid = start_pod(&env, "drained", &script).await;
    let mut lines = Box::pin(kubeferry_kube::internals::follow(
        env.executor.cluster().clone(),
        attempt_of("drained", uid),
        follow_options(),
    ));
    assert_eq!(
        within("the first line", lines.next())
            .await
            .unwrap()
            .unwrap(),
        "first attempt\n"
    );
    // The follow's next read of the log (the drain, or a re-opened stream) is held.
    let arrived = env.sim.request_count("get", "pods/log");
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .resources(&["pods/log"])
            .times(1),
    );
    gate.open("end");
    let rest = tokio::spawn(lines.collect::<Vec<_>>());
    eventually("the follow's next read to be held", || async {
        (env.sim.request_count("get", "pods/log") > arrived).then_some(())
    })
    .await;
    replace_pod(&env, "drained").await;
    assert!(env.sim.remove_fault(hold));
    let rest = within("the follow to end", rest).await.expect("joined");
    let rest: Vec<String> = rest.into_iter().map(|l| l.expect("a line")).collect();
    assert!(
        rest.is_empty(),
        "nothing after the first attempt's line: {rest:?}"
    );
}

/// A job that prints 200 lines and exits 3, its Job and pods then deleted by someone else:
/// a process started afterwards, and every replica, gives its last lines (the kubelet's
/// `FallbackToLogsOnError` kept them in the pod's status, and the outcome record keeps them),
/// and says where they come from. A follow prints them and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_jobs_last_words_outlive_its_pods() {
    let env = Env::start().await;
    let script = "for i in $(seq 1 200); do echo line $i; done; exit 3";
    let id = env.submit(&shell("last-words", script, "")).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (JobState::Failed, Some(3))
    );
    // The kubelet keeps the last 80 lines, at most 2,048 bytes of them.
    let kept: String = (121..=200).map(|i| format!("line {i}\n")).collect();
    let kept = kept[kept.len() - 2048.min(kept.len())..].to_string();
    assert_eq!(outcome.last_words.as_deref(), Some(kept.as_str()));
    eventually("the outcome recorded and the Job let go", || async {
        env.job_object(&id).filter(|job| {
            job["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
    })
    .await;
    env.delete_job_as_admin(&id).await;
    eventually("the Job and its pods gone", || async {
        (env.job_object(&id).is_none() && env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    for executor in [&env.executor, &env.fresh_executor().await] {
        let tail = executor.tail(&id, &tail(None, None)).await.unwrap();
        assert_eq!(tail.log, kept);
        assert_eq!(
            tail.warning.as_deref(),
            Some(
                "the job's pod is gone (FAILED Error); these are its last words, kept with its outcome"
            )
        );
        let followed: Vec<String> = executor
            .follow(&id, follow_options())
            .unwrap()
            .map(|line| line.unwrap())
            .collect()
            .await;
        assert_eq!(followed.concat(), kept);
        // They are the newest attempt's: never the answer of --previous.
        let previous = TailOptions {
            previous: true,
            ..TailOptions::default()
        };
        let earlier = executor.tail(&id, &previous).await.unwrap();
        assert_eq!(earlier.log, "");
        assert!(
            earlier
                .warning
                .as_deref()
                .is_some_and(|w| w.ends_with("its last words are kept for the log of the whole job (without --previous, --index or --replica)")),
            "{earlier:?}"
        );
    }
}

/// A job that asks to keep more of its log (`keepLog`) has the last lines it asked for kept
/// with its outcome, a succeeded one too, at one request each once it ended: they outlive its
/// pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_keeps_more_of_its_log_has_it_once_its_pods_are_gone() {
    let env = Env::start().await;
    let script = "for i in $(seq 1 200); do echo line $i; done; exit 3";
    env.sim.reset_counters();
    let failed = env
        .submit(&shell("keeps", script, "keepLog: {lines: 150, bytes: 1Ki}"))
        .await;
    let succeeded = env
        .submit(&shell(
            "keeps-ok",
            "for i in $(seq 1 200); do echo ok $i; done",
            "keepLog: {lines: 150}",
        ))
        .await;
    // The last 150 lines, cut to their last KiB at a line.
    let lines: String = (51..=200).map(|i| format!("line {i}\n")).collect();
    let cut = &lines[lines.len() - 1024..];
    let kept = &cut[cut.find('\n').unwrap() + 1..];
    let ok: String = (51..=200).map(|i| format!("ok {i}\n")).collect();
    for (id, words) in [(&failed, kept), (&succeeded, ok.as_str())] {
        env.wait(id).await;
        let outcome = eventually("the outcome recorded and the Job let go", || async {
            let let_go = env.job_object(id).is_some_and(|job| {
                job["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
            });
            let outcome = env.executor.status(id).await.ok()?;
            let_go.then_some(outcome)
        })
        .await;
        assert_eq!(outcome.last_words.as_deref(), Some(words), "{id}");
        env.delete_job_as_admin(id).await;
    }
    // One read of each log, by the settler.
    assert_eq!(env.sim.request_count("get", "pods/log"), 2);
    eventually("the Jobs and their pods gone", || async {
        (env.sim.count("batch", "jobs") == 0 && env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    for (id, words) in [(&failed, kept), (&succeeded, ok.as_str())] {
        let tail = fresh.tail(id, &tail(None, None)).await.unwrap();
        assert_eq!(tail.log, words, "{id}");
    }
}

/// What `logs` says when there is no log to show, in each case a person meets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_log_always_says_why() {
    let settings = Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_secs(60));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let warning_of = |tail: kubeferry_kube::logs::Tail| {
        assert_eq!(tail.log, "", "{tail:?}");
        tail.warning.expect("a warning")
    };

    // A container that printed nothing.
    let silent = env.submit(&shell("silent", "true", "")).await;
    env.wait(&silent).await;
    let tail_of_silent = env.executor.tail(&silent, &tail(None, None)).await.unwrap();
    assert_eq!(warning_of(tail_of_silent), "the container printed nothing");

    // --previous of a job that ran once.
    let previous = TailOptions {
        previous: true,
        ..TailOptions::default()
    };
    let once = env.executor.tail(&silent, &previous).await.unwrap();
    assert_eq!(
        warning_of(once),
        "no earlier attempt to read: --previous shows the attempt before the newest (drop it for \
         the newest's log)"
    );

    // A pod whose image cannot be pulled: the registry's words.
    let unpullable = env
        .submit("name: unpullable\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n")
        .await;
    env.status_until(&unpullable, "pulling", |i| {
        i.reason == kubeferry_core::Reason::ImagePullBackOff
    })
    .await;
    let pulling = warning_of(
        env.executor
            .tail(&unpullable, &tail(None, None))
            .await
            .unwrap(),
    );
    assert!(
        pulling.starts_with("no container has started yet, so there is no log: QUEUED ")
            && pulling.contains("registry.invalid"),
        "{pulling}"
    );

    // A job cancelled while it ran: its pods are gone.
    let gate = Gate::new();
    let cancelled = env
        .submit(&shell("cancelled", &gate.wait("never"), ""))
        .await;
    env.status_until(&cancelled, "running", is(JobState::Started))
        .await;
    let pod = env.pod_of(&cancelled).await;
    env.executor.cancel(&cancelled).await.unwrap();
    env.status_until(&cancelled, "cancelled", is(JobState::Cancelled))
        .await;
    eventually("the cancelled job's pod gone", || async {
        env.sim.object("", "pods", NS, &pod).is_none().then_some(())
    })
    .await;
    let gone = warning_of(
        env.executor
            .tail(&cancelled, &tail(None, None))
            .await
            .unwrap(),
    );
    assert!(
        gone.starts_with("the job's pods are gone (CANCELLED Cancelled: "),
        "{gone}"
    );

    // A job stopped at its deadline once its container started. One whose deadline passes
    // first never had a log ("no container ever started"): it has time to start under load.
    let late = env
        .submit(&shell("late", &gate.wait("never-either"), "timeout: 3s"))
        .await;
    let pod = env.pod_of(&late).await;
    env.status_until(&late, "running", is(JobState::Started))
        .await;
    let (outcome, _) = env.wait(&late).await;
    assert_eq!(outcome.reason, kubeferry_core::Reason::DeadlineExceeded);
    eventually("the late job's pod gone", || async {
        env.sim.object("", "pods", NS, &pod).is_none().then_some(())
    })
    .await;
    let stopped = warning_of(env.executor.tail(&late, &tail(None, None)).await.unwrap());
    assert!(
        stopped.starts_with("the job's pods are gone (FAILED DeadlineExceeded: "),
        "{stopped}"
    );
    // An index of a job that is not indexed.
    let error = env
        .executor
        .tail(
            &silent,
            &TailOptions {
                index: Some(2),
                ..TailOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{silent} has no index 2: it is not an indexed job")
    );
}
