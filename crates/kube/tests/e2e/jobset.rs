//! JobSets end to end on the simulated cluster (its JobSet webhook and controller): submitted,
//! waited on, cancelled, listed and read through the executor like every kind. All succeed; an
//! OOM-killed worker fails the set with `OomKilled` and the worker named; a set restarts once
//! then succeeds; past `maxRestarts` it fails saying so; `successPolicy: Any` ends it early;
//! a cancel; the replicas' logs; a cluster that does not serve JobSets.

use futures::StreamExt;
use kubeferry_core::spec::{JobSpec, Params, load};
use kubeferry_core::{ExecutionId, JobKind, JobState, Reason};
use kubeferry_kube::logs::TailOptions;
use kubeferry_kube::{Error, SelectorEvent};
use kubeferry_sim::{CrdBundle, SimConfig};

use crate::reads::answers_reading_only;
use crate::support::{
    Env, Gate, NS, Settings, eventually, is, status_until, until_a_round_reads_only,
};

/// As a container job's pod is OOM-killed in the other tests: 256 MiB against a 64 MiB limit.
const OOM: &str = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";

/// A cluster serving JobSets, and an executor with fast settings.
async fn jobset_env() -> Env {
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    Env::start_with(config, Settings::fast()).await
}

/// A replicated job running `script` with `sh -c`, with more YAML fields (indented).
fn rjob(name: &str, replicas: u32, script: &str, extra: &str) -> String {
    let script = serde_json::to_string(script).expect("a string");
    format!(
        "  - name: {name}\n    replicas: {replicas}\n    image: busybox:1.36\n    command: [sh, -c, {script}]\n{extra}"
    )
}

/// A JobSet file named `name` with more top-level YAML, and its replicated jobs.
fn jobset(name: &str, top: &str, rjobs: &[String]) -> String {
    format!(
        "kind: JobSet\nname: {name}\n{top}replicatedJobs:\n{}",
        rjobs.concat()
    )
}

async fn submit(env: &Env, yaml: &str, job_id: &str) -> ExecutionId {
    let spec = match load("test.yaml", yaml, &Params::default()) {
        Ok(spec @ JobSpec::JobSet(_)) => spec,
        other => panic!("the test's JobSet is invalid: {other:?}"),
    };
    let id = env
        .executor
        .submit(&spec, job_id, NS)
        .await
        .expect("the JobSet is submitted");
    assert_eq!(id.kind, JobKind::JobSet);
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replicated_job_succeeds_and_the_set_is_one_job() {
    let env = jobset_env().await;
    let yaml = jobset(
        "train",
        "startupPolicy: InOrder\n",
        &[
            rjob("leader", 1, "echo leading", ""),
            rjob(
                "workers",
                2,
                "echo working on $POD",
                "    env: {POD: {field: podName}}\n",
            ),
        ],
    );
    let id = submit(&env, &yaml, "train-all").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    assert!(outcome.started_at.is_some() && outcome.finished_at.is_some());
    let replicas = outcome.replicas.clone().expect("a replica summary");
    assert_eq!(replicas.restarts, 0);
    assert_eq!(replicas.terminal_state.as_deref(), Some("Completed"));
    let counts: Vec<(&str, u32, u32)> = replicas
        .replicated_jobs
        .iter()
        .map(|r| (r.name.as_str(), r.succeeded, r.replicas))
        .collect();
    assert_eq!(counts, [("leader", 1, 1), ("workers", 2, 2)]);
    // One job, not one per child Job: the children are not container jobs.
    let listed = env
        .executor
        .list(NS, None)
        .await
        .expect("the jobs are listed");
    let ids: Vec<&ExecutionId> = listed.iter().map(|j| &j.id).collect();
    assert_eq!(ids, [&id], "{listed:?}");
    // The outcome is recorded: another executor answers the same.
    let other = env.fresh_executor().await;
    let again = other.status(&id).await.expect("a status");
    assert_eq!(again, outcome);
    // Logs: the first pod of the first replicated job by default; a replica and index named.
    let leader = env
        .executor
        .tail(&id, &TailOptions::default())
        .await
        .expect("the leader's log");
    assert_eq!(leader.log, "leading\n");
    // With a word on which pod it is, and how to read another.
    assert_eq!(
        leader.warning.as_deref(),
        Some(
            "the log of replicated job \"leader\", index 0, one of 3 pods; --replica NAME \
             --index N reads another"
        )
    );
    let worker = env
        .executor
        .tail(
            &id,
            &TailOptions {
                replica: Some("workers".into()),
                index: Some(1),
                ..TailOptions::default()
            },
        )
        .await
        .expect("the second worker's log")
        .log;
    assert!(
        worker.starts_with(&format!("working on {}-workers-1-", id.name)),
        "{worker}"
    );
    // A replicated job or an index the JobSet does not have is the caller's mistake.
    let part = |replica: &str, index: Option<u32>| TailOptions {
        replica: Some(replica.into()),
        index,
        ..TailOptions::default()
    };
    let error = env
        .executor
        .tail(&id, &part("nope", None))
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "{id} has no replicated job \"nope\": its replicated jobs are "
        )),
        "{error}"
    );
    let error = env
        .executor
        .tail(&id, &part("workers", Some(9)))
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with(&format!(
            "{id} has no index 9 of replicated job \"workers\": its indexes are 0 to "
        )),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_killed_worker_fails_the_set_with_oom_killed_and_the_worker_named() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let worker = format!(
        "case \"$POD\" in *-workers-1-*) exec {OOM};; esac; {}",
        gate.wait("never")
    );
    let yaml = jobset(
        "train",
        "",
        &[
            rjob("leader", 1, &gate.wait("never"), ""),
            rjob(
                "workers",
                2,
                &worker,
                "    env: {POD: {field: podName}}\n    resources: {memory: 64Mi, limits: {memory: 64Mi}}\n",
            ),
        ],
    );
    let id = submit(&env, &yaml, "train-oom").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(137)),
        "{seen:#?}"
    );
    assert!(
        outcome.message.starts_with(&format!(
            "workers index 1 (Job {}-workers-1) failed: the main container was OOMKilled",
            id.name
        )),
        "{}",
        outcome.message
    );
    assert_eq!(
        outcome
            .replicas
            .as_ref()
            .and_then(|r| r.terminal_state.as_deref()),
        Some("Failed")
    );
    // Its story names the worker's pod and its OOM kill, and what to do.
    let story = env.executor.describe(&id).await.expect("a story");
    let steps = &story.story.steps;
    assert!(
        steps.iter().any(|s| s.what == "Ended"
            && s.object
                .as_deref()
                .is_some_and(|pod| pod.starts_with(&format!("{}-workers-1-", id.name)))
            && s.detail == "exit code 137 (OOMKilled)"),
        "{steps:#?}"
    );
    assert!(
        steps.iter().any(|s| s.what == "SuccessfulCreate"
            && s.object.as_deref() == Some(&format!("{}-workers-1", id.name))),
        "the Job controller's events of the set's Jobs: {steps:#?}"
    );
    assert_eq!(steps.last().map(|s| s.what.as_str()), Some("FAILED"));
    assert_eq!(
        story.story.what_to_do.as_deref(),
        Some("raise resources.memory (and its limit) in the job file, or use less memory")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_restarts_once_then_succeeds() {
    let env = jobset_env().await;
    let gate = Gate::new();
    // The first run fails and leaves a mark; the run after the restart sees it and succeeds.
    let mark = gate.path("failed-once");
    let flaky =
        format!("if [ ! -e {mark} ]; then touch {mark}; echo failing >&2; exit 1; fi; echo fine");
    let yaml = jobset(
        "train",
        "failurePolicy: {maxRestarts: 1}\n",
        &[
            rjob("leader", 1, "echo leading", ""),
            rjob("flaky", 1, &flaky, ""),
        ],
    );
    let id = submit(&env, &yaml, "train-restart").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    assert_eq!(
        outcome.replicas.as_ref().map(|r| r.restarts),
        Some(1),
        "{seen:#?}"
    );
    // The restart's run is the one whose log is read.
    let flaky_log = env
        .executor
        .tail(
            &id,
            &TailOptions {
                replica: Some("flaky".into()),
                ..TailOptions::default()
            },
        )
        .await
        .expect("the flaky replica's log")
        .log;
    assert_eq!(flaky_log, "fine\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_past_max_restarts_fails_the_set_saying_so() {
    let env = jobset_env().await;
    let yaml = jobset(
        "train",
        "failurePolicy: {maxRestarts: 1}\n",
        &[rjob("leader", 1, "echo broken >&2; exit 3", "")],
    );
    let id = submit(&env, &yaml, "train-broken").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{seen:#?}"
    );
    assert!(
        outcome.message.starts_with(&format!(
            "leader index 0 (Job {}-leader-0) failed after 1 restart: exit code 3",
            id.name
        )),
        "{}",
        outcome.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_policy_any_ends_the_set_early() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let yaml = jobset(
        "train",
        "successPolicy: {operator: Any, targetReplicatedJobs: [leader]}\n",
        &[
            rjob("leader", 1, "echo done", ""),
            rjob("workers", 2, &gate.wait("never"), ""),
        ],
    );
    let id = submit(&env, &yaml, "train-any").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    let replicas = outcome.replicas.expect("a replica summary");
    assert_eq!(
        (
            replicas.replicated_jobs[1].name.as_str(),
            replicas.replicated_jobs[1].succeeded
        ),
        ("workers", 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_set_is_cancelled() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let yaml = jobset("train", "", &[rjob("workers", 2, &gate.wait("never"), "")]);
    let id = submit(&env, &yaml, "train-cancel").await;
    status_until(&env.executor, &id, "running", is(JobState::Started)).await;
    env.executor
        .cancel(&id)
        .await
        .expect("the cancel is accepted");
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{seen:#?}"
    );
    // The set and its Jobs and pods go.
    eventually("the JobSet's pods to go", || async {
        let pods = env.sim.count("", "pods");
        let jobsets = env.sim.count("jobset.x-k8s.io", "jobsets");
        (pods == 0 && jobsets == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_queries_of_jobsets_only_read() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let set = |name: &str, script: &str| jobset(name, "", &[rjob("workers", 2, script, "")]);
    let running = submit(&env, &set("running", &gate.wait("end")), "reads-running").await;
    let finished = submit(&env, &set("finished", "exit 0"), "reads-finished").await;
    let failing = submit(&env, &set("failing", "exit 3"), "reads-failing").await;
    let cancelled = submit(&env, &set("cancelled", &gate.wait("never")), "reads-cancel").await;
    for id in [&running, &cancelled] {
        status_until(&env.executor, id, "running", is(JobState::Started)).await;
    }
    env.executor.cancel(&cancelled).await.expect("cancelled");
    for id in [&finished, &failing, &cancelled] {
        env.wait(id).await;
    }
    // The settler recorded the ended sets' outcomes and let their objects go (its last
    // writes for them); the cancelled one is gone.
    eventually("the ended sets let go", || async {
        let held = |id: &ExecutionId| {
            env.sim
                .object("jobset.x-k8s.io", "jobsets", &id.namespace, &id.name)
                .is_some_and(|set| {
                    set.pointer("/metadata/finalizers")
                        .and_then(|f| f.as_array())
                        .is_some_and(|f| !f.is_empty())
                })
        };
        let gone = env
            .sim
            .object("jobset.x-k8s.io", "jobsets", NS, &cancelled.name)
            .is_none();
        (gone && !held(&finished) && !held(&failing)).then_some(())
    })
    .await;
    let ids = [&running, &finished, &failing, &cancelled];
    // Once the watches are open, a round of queries asks the cluster nothing ...
    until_a_round_reads_only(&env, &ids).await;
    // ... and neither do a thousand more.
    let answers = answers_reading_only(&env.executor, &env.sim, &ids, 250).await;
    assert_eq!(
        answers,
        [
            (JobState::Started, Reason::Running),
            (JobState::Succeeded, Reason::Completed),
            (JobState::Failed, Reason::Error),
            (JobState::Cancelled, Reason::Cancelled),
        ]
    );
    gate.open("end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_follows_jobsets_with_the_other_kinds() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let yaml = jobset(
        "train",
        "labels: {team: ml}\n",
        &[rjob("leader", 1, &gate.wait("never"), "")],
    );
    let id = submit(&env, &yaml, "train-selected").await;
    let mut events = Box::pin(env.executor.matching(NS, "team=ml"));
    let mut seen = Vec::new();
    while !seen.contains(&SelectorEvent::Listed) {
        let event = tokio::time::timeout(crate::support::DEADLINE, events.next())
            .await
            .expect("the selector lists within the deadline")
            .expect("the stream goes on");
        seen.push(event);
    }
    assert!(
        seen.contains(&SelectorEvent::Matches {
            kind: JobKind::JobSet,
            name: id.name.clone(),
            job_id: Some("train-selected".to_string()),
        }),
        "{seen:?}"
    );
    env.executor.cancel(&id).await.expect("cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_whose_job_id_is_unknown_is_swept() {
    let env = jobset_env().await;
    let gate = Gate::new();
    let yaml = jobset("train", "", &[rjob("leader", 1, &gate.wait("never"), "")]);
    let known = submit(&env, &yaml, "train-known").await;
    let orphan = submit(&env, &yaml, "train-orphan").await;
    let ids = std::collections::HashSet::from(["train-known".to_string()]);
    let found = env.executor.sweep(NS, &ids, false).await.expect("swept");
    let listed: Vec<(&ExecutionId, Option<&str>, bool)> = found
        .iter()
        .map(|o| (&o.id, o.job_id.as_deref(), o.deleted))
        .collect();
    assert_eq!(listed, [(&orphan, Some("train-orphan"), false)]);
    let deleted = env.executor.sweep(NS, &ids, true).await.expect("swept");
    assert_eq!(deleted.len(), 1);
    assert!(deleted[0].deleted);
    eventually("the orphan JobSet to go", || async {
        let gone = env
            .sim
            .object("jobset.x-k8s.io", "jobsets", NS, &orphan.name)
            .is_none();
        gone.then_some(())
    })
    .await;
    assert!(
        env.sim
            .object("jobset.x-k8s.io", "jobsets", NS, &known.name)
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_jobsets_runs_none_and_lists_the_other_kinds() {
    let env = Env::start().await;
    let spec = match load(
        "t.yaml",
        &jobset("train", "", &[rjob("leader", 1, "echo hi", "")]),
        &Params::default(),
    ) {
        Ok(spec) => spec,
        Err(error) => panic!("{error}"),
    };
    let error = env
        .executor
        .submit(&spec, "train-nowhere", NS)
        .await
        .expect_err("no JobSet CRD");
    assert!(matches!(error, Error::JobSetUnavailable { .. }), "{error}");
    assert!(
        error.to_string().contains("install the JobSet controller"),
        "{error}"
    );
    assert_eq!(env.executor.list(NS, None).await.expect("listed"), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_jobset_watch_is_current_again_once_an_outage_ends_though_nothing_changes() {
    // One finished set and nothing else: no watch of the namespace (the JobSets, their Jobs
    // and pods, the outcome records) has an event to deliver after the outage. Each is current
    // again from its first list.
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    let mut settings = Settings::fast();
    let quickly = kubeferry_kube::RetryPolicy {
        base: std::time::Duration::from_millis(10),
        cap: std::time::Duration::from_millis(100),
        deadline: std::time::Duration::MAX,
    };
    settings.executor.container.watching.reflector.restart = quickly.clone();
    settings.executor.jobset.watching.reflector.restart = quickly;
    let env = Env::start_with(config, settings).await;
    let yaml = jobset("quiet", "", &[rjob("only", 1, "exit 0", "")]);
    let id = submit(&env, &yaml, "quiet-set").await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    let healths = || {
        env.executor
            .health()
            .into_iter()
            .filter(|(namespace, _, _)| namespace == NS)
            .map(|(_, resource, health)| (resource, health))
            .collect::<Vec<_>>()
    };
    let current = |healths: &[(String, kubeferry_kube::tracker::WatchHealth)]| {
        healths
            .iter()
            .all(|(_, health)| health.synced && health.failing.is_none())
    };
    let watched = eventually("every watch to be current", || async {
        let healths = healths();
        current(&healths).then_some(healths)
    })
    .await;
    let resources: Vec<&str> = watched.iter().map(|(r, _)| r.as_str()).collect();
    assert!(
        resources.iter().any(|r| r.contains("jobsets")),
        "{resources:?}"
    );
    env.sim.unreachable_for(std::time::Duration::from_secs(600));
    eventually("every watch to notice the outage", || async {
        healths()
            .iter()
            .all(|(_, health)| health.failing.is_some())
            .then_some(())
    })
    .await;
    env.sim.reachable_again();
    let back = eventually("every watch to be current again", || async {
        let healths = healths();
        current(&healths).then_some(healths)
    })
    .await;
    assert_eq!(back.len(), watched.len(), "{back:?}");
}
