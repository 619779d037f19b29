//! Faults of the API server: retried answers, final answers, unreachability, another cluster's
//! ids, and watches that expire, break, stall or lose the server.

use std::time::Duration;

use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use kubeferry_kube::logs::TailOptions;
use kubeferry_kube::{Error, generate_job_id};
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried() {
    let env = Env::start().await;
    for code in [500, 502, 503, 504, 507] {
        env.sim.reset_counters();
        env.sim.add_fault(
            FaultRule::new(FaultAction::error(code))
                .verbs(&["create"])
                .resources(&["jobs.batch"])
                .times(2),
        );
        let spec = spec_of(&shell("retried", "echo ok", ""));
        env.executor
            .submit(&spec, &generate_job_id("retried"), NS)
            .await
            .unwrap_or_else(|e| panic!("{code}: {e}"));
        assert_eq!(env.sim.request_count("create", "jobs.batch"), 3, "{code}");
    }
    // 501 Not Implemented is the one 5xx that no retry changes.
    env.sim.reset_counters();
    env.sim.add_fault(
        FaultRule::new(FaultAction::error(501))
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let spec = spec_of(&shell("unimplemented", "echo ok", ""));
    let refused = env
        .executor
        .submit(&spec, &generate_job_id("unimplemented"), NS)
        .await
        .unwrap_err();
    assert_eq!(
        env.sim.request_count("create", "jobs.batch"),
        1,
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_is_retried_after_the_servers_delay() {
    // The server asks for 1 s. Within a 500 ms deadline that delay cannot be waited out, so
    // the first answer is final: proof that the delay was taken from the answer's
    // `details.retryAfterSeconds` (a backoff of its own would have been a few milliseconds and
    // retried).
    let short = Settings::fast().with_retry(|retry| retry.deadline = Duration::from_millis(500));
    let env = Env::start_with(SimConfig::for_tests(), short).await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::error_retry_after(429, 1))
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let spec = spec_of(&shell("throttled", "echo ok", ""));
    let refused = env
        .executor
        .submit(&spec, "throttled-1", NS)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, Error::RetriesExhausted { attempts: 1, .. }),
        "{refused:?}"
    );
    assert_eq!(env.sim.request_count("create", "jobs.batch"), 1);

    // With the default deadline it waits and succeeds on the second attempt.
    let env = Env::start().await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::error_retry_after(429, 1))
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    env.executor.submit(&spec, "throttled-2", NS).await.unwrap();
    assert_eq!(env.sim.request_count("create", "jobs.batch"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_about_the_request_are_not_retried() {
    let env = Env::start_with(
        SimConfig::for_tests(),
        Settings::fast().asking_for_unknown_jobs_every_time(),
    )
    .await;
    // Synced watches, so that a status of an unknown job is one GET.
    let unknown = id_of("unknown-0a1b2c3d");
    assert!(
        env.executor
            .status(&unknown)
            .await
            .unwrap_err()
            .is_no_such_job()
    );
    for code in [400, 403, 404, 409, 422] {
        env.sim.reset_counters();
        let fault = env.sim.add_fault(
            FaultRule::new(FaultAction::error(code))
                .verbs(&["get"])
                .resources(&["jobs.batch"]),
        );
        let answer = env.executor.status(&unknown).await.unwrap_err();
        env.sim.remove_fault(fault);
        assert_eq!(
            env.sim.request_count("get", "jobs.batch"),
            1,
            "{code} is final: {answer}"
        );
        match (code, &answer) {
            (403, Error::Forbidden { verb, resource, .. }) => {
                assert_eq!((*verb, resource.as_str()), ("get", "jobs.batch"));
                assert!(answer.to_string().contains("kubeferry rbac"), "{answer}");
            }
            // A GET that finds nothing is the answer "no such job".
            (404, Error::NoSuchJob { .. }) => {}
            (400 | 409 | 422, Error::Api { code: got, .. }) => assert_eq!(*got, code),
            _ => panic!("{code}: unexpected {answer:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_status_queries_fast() {
    let settings = Settings {
        cluster: kubeferry_kube::ClusterSettings {
            unreachable_window: Duration::from_secs(60),
            ..Settings::fast().cluster
        },
        ..Settings::fast()
    }
    .with_retry(|retry| retry.deadline = Duration::from_millis(200))
    .asking_for_unknown_jobs_every_time();
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let unknown = id_of("unknown-0a1b2c3d");
    // Synced watches, so that a status of an unknown job is one GET.
    assert!(
        env.executor
            .status(&unknown)
            .await
            .unwrap_err()
            .is_no_such_job()
    );

    // Down until told otherwise: how long the steps below take does not matter.
    env.sim.unreachable_for(Duration::from_secs(600));
    eventually("the server to go down", || async {
        tokio::net::TcpStream::connect(env.sim.addr()).await.err()
    })
    .await;
    let first = env.executor.status(&unknown).await.unwrap_err();
    assert!(matches!(first, Error::Unreachable { .. }), "{first:?}");

    env.sim.reachable_again();
    eventually("the server to be back", || async {
        tokio::net::TcpStream::connect(env.sim.addr()).await.ok()
    })
    .await;
    env.sim.reset_counters();
    let second = env.executor.status(&unknown).await.unwrap_err();
    assert!(matches!(second, Error::Unreachable { .. }), "{second:?}");
    assert!(second.to_string().contains("last failure at"), "{second}");
    // (The watches reconnect on their own meanwhile; they are not status queries.)
    assert_eq!(
        env.sim.request_count("get", ""),
        0,
        "the second query did not try the server"
    );
    // A job the watch knows is answered from memory meanwhile, and an answer from the server
    // (even an error) would close the window; other operations are not held back by it.
    let id = env.submit(&shell("after", "echo ok", "")).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    assert!(
        env.executor
            .status(&unknown)
            .await
            .unwrap_err()
            .is_no_such_job()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_of_another_cluster_is_a_configuration_error() {
    let env = Env::start().await;
    let elsewhere = ExecutionId::new("elsewhere", JobKind::Job, NS, "hello-1a2b3c4d");
    let wrong = |error: Error| {
        assert!(matches!(error, Error::WrongCluster { .. }), "{error:?}");
        assert!(!error.is_no_such_job());
        assert!(error.to_string().contains("\"elsewhere\""), "{error}");
    };
    wrong(env.executor.status(&elsewhere).await.unwrap_err());
    wrong(env.executor.cancel(&elsewhere).await.unwrap_err());
    wrong(
        env.executor
            .wait(&elsewhere, Some(DEADLINE), |_| {})
            .await
            .unwrap_err(),
    );
    wrong(
        env.executor
            .tail(&elsewhere, &TailOptions::default())
            .await
            .unwrap_err(),
    );
    assert!(env.executor.follow(&elsewhere, Default::default()).is_err());
    assert_eq!(env.sim.request_count("", ""), 0, "nothing was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watches_relist_and_statuses_stay_right() {
    let env = Env::start().await;
    let gate = Gate::new();
    let finishing = env.submit(&shell("finishing", &gate.wait("a"), "")).await;
    let deleted = env.submit(&shell("deleted", &gate.wait("never"), "")).await;
    env.status_until(&finishing, "running", is(JobState::Started))
        .await;
    env.status_until(&deleted, "running", is(JobState::Started))
        .await;
    // The history is forgotten and the namespace's watches get 410 Gone; while they back off and relist,
    // one job ends and the other is deleted by someone.
    env.watches_open(NAMESPACE_WATCHES).await;
    assert_eq!(env.sim.expire_watches(), NAMESPACE_WATCHES);
    gate.open("a");
    env.delete_job_as_admin(&deleted).await;

    let (outcome, _) = env.wait(&finishing).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    // The deleted Job is held by kubeferry's finalizer until a settler records it: the relist
    // shows it being deleted, with no cancel mark, so it was deleted externally.
    let gone = eventually("the deleted job to be answered", || async {
        env.executor
            .status(&deleted)
            .await
            .ok()
            .filter(ExecutionInfo::is_terminal)
    })
    .await;
    assert_eq!(
        (gone.state, gone.reason),
        (JobState::Failed, Reason::DeletedExternally),
        "{gone:?}"
    );
    let watch = env.executor.container_jobs().watch(NS);
    let (jobs, pods) = eventually("both watches to be back", || async {
        let (jobs, pods) = (watch.jobs.health(), watch.pods.health());
        (jobs.failing.is_none() && pods.failing.is_none()).then_some((jobs, pods))
    })
    .await;
    assert!(
        jobs.restarts >= 1 && pods.restarts >= 1,
        "{jobs:?} {pods:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ends_while_its_pods_are_unwatched_keeps_its_details() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell(
            "lagging",
            &format!("{}; exit 5", gate.wait("a")),
            "",
        ))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // Both watches must relist; the pods' relist goes unanswered for a few backoffs (longer
    // than a verdict waits for its pod), the Jobs' does not. The job fails meanwhile.
    env.sim.add_fault(
        FaultRule::new(FaultAction::DropConnection)
            .verbs(&["list"])
            .resources(&["pods"])
            .times(4),
    );
    env.watches_open(NAMESPACE_WATCHES).await;
    assert_eq!(env.sim.expire_watches(), NAMESPACE_WATCHES);
    gate.open("a");
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, kubeferry_core::Reason::Error, "{seen:#?}");
    assert_eq!(outcome.exit_code, Some(5), "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_watches_resume_and_statuses_stay_right() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("cut", &gate.wait("a"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    let watches = env.sim.request_count("watch", "");
    assert_eq!(env.sim.cut_watches(), NAMESPACE_WATCHES);
    gate.open("a");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    assert!(
        env.sim.request_count("watch", "") >= watches + 3,
        "re-watched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_api_server_keeps_statuses_right() {
    let env = Env::start().await;
    let gate = Gate::new();
    let before = env.submit(&shell("before", &gate.wait("a"), "")).await;
    env.status_until(&before, "running", is(JobState::Started))
        .await;
    // Every connection drops and the watch history is forgotten; objects and containers stay.
    env.sim.restart();
    gate.open("a");
    let (outcome, _) = env.wait(&before).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    let after = env.submit(&shell("after", "exit 5", "")).await;
    let (outcome, _) = env.wait(&after).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.exit_code, Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_is_detected_and_restarted() {
    // kube-runtime restarts a watch that stays silent for its timeout plus 5 s: with the
    // shortest timeout (1 s) that is 6 s, the one long test of the suite.
    let mut settings = Settings::fast();
    settings.executor.container.watching.reflector.watch_timeout = Duration::from_secs(1);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let id = env.submit(&shell("stalled", &gate.wait("a"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // Watches end every second (their timeout) and are re-opened: stall all three while open.
    // A stalled watch sends nothing, not even bookmarks, for a minute.
    eventually("the watches to stall", || async {
        (env.sim.stall_watches(Duration::from_secs(60)) >= 3).then_some(())
    })
    .await;
    gate.open("a");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_does_not_come_is_retried_after_the_read_timeout() {
    let mut settings = Settings::fast();
    settings.cluster.read_timeout = Duration::from_millis(200);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::Latency { millis: 5_000 })
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let spec = spec_of(&shell("slowanswer", "echo ok", ""));
    let id = within(
        "the submission",
        env.executor
            .submit(&spec, &generate_job_id("slowanswer"), NS),
    )
    .await
    .unwrap();
    assert_eq!(env.sim.request_count("create", "jobs.batch"), 2);
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    assert_eq!(env.sim.count("batch", "jobs"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_cache_lagging_a_fresh_read_never_takes_a_status_back() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("lagging", &gate.wait("end"), "queue: team-a"))
        .await;
    env.status_until(&id, "held by the queue", is(JobState::Queued))
        .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    // From here the watches deliver nothing: the cache keeps the suspended copy.
    env.sim.stall_watches(Duration::from_secs(600));
    // The queue admits the job, and it runs.
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(env.admin_client().await, NS);
    jobs.patch(
        &id.name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
    )
    .await
    .expect("admitted");
    eventually("the pod to run", || async {
        let job = env.job_object(&id)?;
        (job["status"]["ready"] == 1).then_some(())
    })
    .await;
    // A fresh read (the list reads the server) reports the job started ...
    let listed = env.executor.list(NS, None).await.expect("listed");
    let fresh = listed
        .iter()
        .find(|summary| summary.id == id)
        .expect("listed");
    assert_eq!(fresh.status.state, JobState::Started, "{:?}", fresh.status);
    // ... while the cache still holds the copy from before the admission.
    let cached = env
        .executor
        .container_jobs()
        .watch(NS)
        .jobs
        .get(&id.name)
        .expect("cached");
    assert!(cached.view.suspend, "the cache lags: {:?}", cached.view);
    // A status answered from that cache does not go back to QUEUED.
    let gets = env.sim.request_count("get", "jobs.batch");
    let status = env.executor.status(&id).await.expect("a status");
    assert_eq!(
        env.sim.request_count("get", "jobs.batch"),
        gets,
        "answered from the cache"
    );
    assert_eq!(status.state, JobState::Started, "{status:?}");
    // The watches catch up; the job ends as it should.
    env.sim.cut_watches();
    gate.open("end");
    let (end, _) = env.wait(&id).await;
    assert_eq!(end.state, JobState::Succeeded, "{end:?}");
}

/// A namespace's watches, quickly restarted.
fn quickly_restarted() -> Settings {
    let mut settings = Settings::fast();
    settings.executor.container.watching.reflector.restart = kubeferry_kube::RetryPolicy {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(100),
        deadline: Duration::MAX,
    };
    settings
}

/// The health of each of the namespace's watches, as readiness reads it: Jobs, pods, the Job
/// controller's refusals and the outcome records (the last two silent by design).
fn healths(env: &Env) -> Vec<(String, kubeferry_kube::tracker::WatchHealth)> {
    let healths: Vec<_> = env
        .executor
        .health()
        .into_iter()
        .filter(|(namespace, _, _)| namespace == NS)
        .map(|(_, resource, health)| (resource, health))
        .collect();
    assert_eq!(healths.len(), NAMESPACE_WATCHES, "{healths:?}");
    healths
}

/// Whether every watch of the namespace is listed, watching and not failing.
fn all_current(env: &Env) -> bool {
    let watch = env.executor.container_jobs().watch(NS);
    watch.is_current()
        && healths(env)
            .iter()
            .all(|(_, health)| health.synced && health.failing.is_none())
}

/// Whether every watch of the namespace has failed.
fn all_failing(env: &Env) -> bool {
    healths(env)
        .iter()
        .all(|(_, health)| health.failing.is_some())
}

/// A namespace with one finished job, its watches quickly restarted and current.
async fn quiet_namespace() -> Env {
    let env = Env::start_with(SimConfig::for_tests(), quickly_restarted()).await;
    let id = env.submit(&shell("quiet", "exit 0", "")).await;
    env.wait(&id).await;
    eventually("every watch to be current", || async {
        all_current(&env).then_some(())
    })
    .await;
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watch_is_current_again_once_an_outage_ends_though_nothing_changes() {
    // One finished job and nothing else: no watch has an event to deliver after the outage,
    // the events watch never has one. Each is current again from its first list.
    let env = quiet_namespace().await;
    env.sim.unreachable_for(Duration::from_secs(600));
    eventually("every watch to notice the outage", || async {
        all_failing(&env).then_some(())
    })
    .await;
    env.sim.reachable_again();
    eventually("every watch to be current again", || async {
        all_current(&env).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_watch_is_current_again_once_the_server_stops_refusing_to_start_it() {
    // The watches are cut and their restarts answered 429 a few times: each is current again
    // from its first list after the refusals stop.
    let env = quiet_namespace().await;
    // A watcher is current once its list completed, before its watch is open: a cut must find
    // all three watches open, or one that opens after it runs unrefused and never fails.
    env.watches_open(NAMESPACE_WATCHES).await;
    let refusing = env.sim.add_fault(
        FaultRule::new(FaultAction::error_retry_after(429, 1)).verbs(&["list", "watch"]),
    );
    assert_eq!(env.sim.cut_watches(), NAMESPACE_WATCHES);
    eventually("every watch to be refused", || async {
        all_failing(&env).then_some(())
    })
    .await;
    env.sim.remove_fault(refusing);
    eventually("every watch to be current again", || async {
        all_current(&env).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_deleted_while_the_watches_were_down_is_recorded_cancelled() {
    // A replica that marked a job cancelled and deleted it died before recording; the other
    // replica saw the mark, then its watches were down while the Job went. Its relist finds
    // the Job missing: the mark it saw tells what became of it, and that is recorded, so no
    // process ever answers "no such job" for it.
    let env = Env::start_with(SimConfig::for_tests(), quickly_restarted()).await;
    let gate = Gate::new();
    let id = env.submit(&shell("marked", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(env.admin_client().await, NS);
    let mark = serde_json::json!({"metadata": {"annotations": {
        kubeferry_core::marks::CANCEL_ANNOTATION: jiff::Timestamp::now().to_string()
    }}});
    jobs.patch(
        &id.name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&mark),
    )
    .await
    .unwrap();
    let watch = env.executor.container_jobs().watch(NS);
    eventually("the watch to see the mark", || async {
        watch
            .jobs
            .get(&id.name)
            .and_then(|entry| entry.view.meta.cancel_mark)
    })
    .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    let refusing = env.sim.add_fault(
        FaultRule::new(FaultAction::error(503))
            .verbs(&["list", "watch"])
            .resources(&["jobs.batch"]),
    );
    env.sim.cut_watches();
    eventually("the Jobs watch to fail", || async {
        watch.jobs.health().failing.map(|_| ())
    })
    .await;
    env.delete_job_as_admin(&id).await;
    // Held by kubeferry's finalizer until a settler records it: no watch sees it meanwhile.
    eventually("the Job to be deleted", || async {
        env.job_object(&id)?
            .pointer("/metadata/deletionTimestamp")
            .map(|_| ())
    })
    .await;
    env.sim.remove_fault(refusing);
    eventually("the Job to be let go", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    eventually("the outcome record", || async {
        env.sim
            .object(
                "",
                "configmaps",
                NS,
                &kubeferry_core::record::record_name(JobKind::Job, &id.name),
            )
            .map(|_| ())
    })
    .await;
    let fresh = env.fresh_executor().await;
    let answer = fresh.status(&id).await.unwrap();
    assert_eq!(answer.state, JobState::Cancelled, "{answer:?}");
    assert_eq!(
        env.executor.status(&id).await.unwrap().state,
        JobState::Cancelled
    );
}
