//! The settler: outcomes kubeferry decides are recorded and their jobs stopped at the deadline
//! with nobody asking, and a status query, from then on, only reads.

use std::time::Duration;

use kubeferry_core::{ExecutionId, JobState, Reason};
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::reads::answers_reading_only;
use crate::support::*;

const UNPULLABLE: &str =
    "name: pull\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";

/// Waits, reading the simulated cluster only, for the outcome recorded on a job's Job.
async fn recorded(env: &Env, id: &ExecutionId) -> serde_json::Value {
    eventually("the recorded outcome", || async {
        env.job_object(id)
            .filter(|job| outcome_annotation(job).is_some())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_cannot_be_pulled_fails_at_its_grace_with_nobody_asking() {
    // Kubernetes timestamps have whole seconds: a grace under 1 s may have run out when the
    // pull first fails.
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = env.submit(UNPULLABLE).await;
    // No status query, no wait: only the cluster is looked at.
    let job = recorded(&env, &id).await;
    assert_eq!(job["spec"]["suspend"], true, "stopped by suspension");
    let outcome = outcome_annotation(&job).expect("an outcome");
    assert_eq!(outcome.state, JobState::Failed, "{outcome:?}");
    assert_eq!(outcome.reason, Reason::ImagePullFailed, "{outcome:?}");
    // It ended at the grace's end, counted from the pod's start, not when someone looked.
    let started = env
        .pods_of(&id)
        .iter()
        .find_map(|pod| pod.start_time)
        .expect("the pod's start time, as the watch saw it");
    assert_eq!(
        outcome.finished_at,
        Some(started + jiff::SignedDuration::from_millis(1500))
    );
    eventually("the job's pod to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    // The answer, when someone finally asks, is the recorded one, here and anywhere.
    assert_eq!(env.executor.status(&id).await.unwrap(), outcome);
    assert_eq!(
        env.fresh_executor().await.status(&id).await.unwrap(),
        outcome
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_queries_only_read() {
    let env = Env::start().await;
    let gate = Gate::new();
    let running = env.submit(&shell("running", &gate.wait("end"), "")).await;
    let finished = env.submit(&shell("finished", "exit 0", "")).await;
    let failing = env.submit(&shell("failing", "exit 3", "")).await;
    let unpullable = env.submit(&UNPULLABLE.replace("pull", "unpullable")).await;
    env.status_until(&running, "running", is(JobState::Started))
        .await;
    for id in [&finished, &failing] {
        env.wait(id).await;
    }
    // The settler records the pull failure and stops the job on its own.
    recorded(&env, &unpullable).await;
    eventually("the stopped job's pod to go", || async {
        let watch = env.executor.container_jobs().watch(NS);
        watch
            .live_pods_of(&unpullable.name)
            .is_empty()
            .then_some(())
    })
    .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    // The three ended jobs' outcome records are written (by the settler, not by a question).
    eventually("the ended jobs' outcome records", || async {
        (env.sim.count("", "configmaps") == 3).then_some(())
    })
    .await;
    // And the settler let their objects go (its last write for them).
    eventually("the ended jobs' objects let go", || async {
        [&finished, &failing, &unpullable]
            .iter()
            .all(|id| {
                env.job_object(id).is_none_or(|job| {
                    job.pointer("/metadata/finalizers")
                        .and_then(|f| f.as_array())
                        .is_none_or(|f| f.is_empty())
                })
            })
            .then_some(())
    })
    .await;

    let ids = [&running, &finished, &failing, &unpullable];
    let answers = answers_reading_only(&env.executor, &env.sim, &ids, 250).await;
    assert_eq!(
        answers,
        [
            (JobState::Started, Reason::Running),
            (JobState::Succeeded, Reason::Completed),
            (JobState::Failed, Reason::Error),
            (JobState::Failed, Reason::ImagePullFailed),
        ]
    );
    gate.open("end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settler_decides_nothing_while_its_watches_are_still_listing() {
    // A running job past the pending timeout: seen from its Job alone, before the pods are
    // listed, it would look like a job that never got a pod.
    let settings =
        Settings::fast().with_mapping(|m| m.pending_timeout = Some(Duration::from_millis(1500)));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let id = env.submit(&shell("long", &gate.wait("end"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let started: jiff::Timestamp = env.job_object(&id).expect("the Job")["status"]["startTime"]
        .as_str()
        .expect("a start time")
        .parse()
        .unwrap();
    eventually("the pending timeout to pass", || async {
        (jiff::Timestamp::now() > started + jiff::SignedDuration::from_millis(1500)).then_some(())
    })
    .await;
    let patches = env.sim.request_count("patch", "jobs.batch");
    // Another replica starts watching; its list of pods is held.
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["list"])
            .resources(&["pods"])
            .times(1),
    );
    let fresh = env.fresh_executor().await;
    fresh.watch(NS);
    eventually("the Jobs listed and the pods not", || async {
        let watches = fresh.namespace_health(NS).watches;
        let synced = |resource: &str| {
            watches
                .iter()
                .any(|(name, health)| name == resource && health.synced)
        };
        (synced("jobs.batch") && !synced("pods")).then_some(())
    })
    .await;
    // Its settler holds the Job and no pods: it decides nothing (an absence, so looked at for
    // a while; a slow machine can only make this pass, never fail, wrongly).
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            env.sim.request_count("patch", "jobs.batch"),
            patches,
            "a settler wrote from a half-listed cache"
        );
    }
    env.sim.remove_fault(hold);
    let seen = status_until(&fresh, &id, "the other replica's answer", |_| true).await;
    assert_eq!(seen.state, JobState::Started, "{seen:?}");
    assert_eq!(env.sim.request_count("patch", "jobs.batch"), patches);
    gate.open("end");
    let (end, _) = env.wait(&id).await;
    assert_eq!(end.state, JobState::Succeeded, "{end:?}");
}
