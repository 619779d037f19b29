//! Bare pods (`kind: Pod`) end to end on the simulated cluster: one pod that runs once, no Job
//! in between, answered like a container job. Success with its log and record; an exit code
//! with last words; OOM kills; an image that cannot be pulled past its grace; a pod no node
//! takes past the pending timeout; its deadline; eviction, preemption and a lost node; a
//! cancel while it runs, and the job id submitted again after it; a create on its way while
//! the pod is recorded and deleted; status queries that only read.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kubeferry_core::record::record_name;
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use kubeferry_kube::CancelOutcome;
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::reads::answers_reading_only;
use crate::support::{
    Env, Gate, NS, Settings, eventually, is, spec_of, status_until, until_a_round_reads_only,
};

/// A bare pod running `script` with `sh -c`, with more YAML fields appended.
fn pod(name: &str, script: &str, extra: &str) -> String {
    let script = serde_json::to_string(script).expect("a string");
    format!("kind: Pod\nname: {name}\nimage: busybox:1.36\ncommand: [sh, -c, {script}]\n{extra}")
}

async fn submit(env: &Env, yaml: &str, job_id: &str) -> ExecutionId {
    let spec = spec_of(yaml);
    assert!(matches!(spec, JobSpec::Pod(_)), "{spec:?}");
    let id = env
        .executor
        .submit(&spec, job_id, NS)
        .await
        .expect("the pod is submitted");
    assert_eq!(id.kind, JobKind::Pod);
    id
}

/// The pod as the API server holds it.
fn pod_object(env: &Env, id: &ExecutionId) -> Option<serde_json::Value> {
    env.sim.object("", "pods", &id.namespace, &id.name)
}

/// Deletes the pod as someone cleaning up would.
async fn delete_as_admin(env: &Env, id: &ExecutionId) {
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, &id.namespace);
    pods.delete(&id.name, &DeleteParams::default())
        .await
        .expect("deleted");
}

/// Once the pod is gone, a replica that never saw it answers the same outcome.
async fn every_replica_reports(env: &Env, id: &ExecutionId, outcome: &ExecutionInfo) {
    eventually("the pod to go", || async {
        pod_object(env, id).is_none().then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    let seen = status_until(&fresh, id, "an outcome", ExecutionInfo::is_terminal).await;
    assert_eq!(&seen, outcome);
}

async fn running(env: &Env, gate: &Gate, name: &str) -> ExecutionId {
    let id = submit(env, &pod(name, &gate.wait("never"), ""), name).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_succeeds_is_one_job_with_its_log_and_its_record() {
    let env = Env::start().await;
    let id = submit(&env, &pod("hello", "echo hello from a pod", ""), "hello-1").await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Succeeded, Reason::Completed, Some(0)),
        "{seen:#?}"
    );
    assert!(outcome.started_at.is_some() && outcome.finished_at.is_some());
    // One pod, no Job: the pod is the job's object.
    assert_eq!(env.sim.count("batch", "jobs"), 0);
    let object = pod_object(&env, &id).expect("the pod");
    assert_eq!(object["spec"]["restartPolicy"], "Never");
    assert!(object["metadata"]["ownerReferences"].is_null());
    let listed = env.executor.list(NS, None).await.expect("listed");
    let ids: Vec<&ExecutionId> = listed.iter().map(|j| &j.id).collect();
    assert_eq!(ids, [&id], "{listed:?}");
    let log = env
        .executor
        .tail(&id, &Default::default())
        .await
        .expect("the pod's log");
    assert_eq!(log.log, "hello from a pod\n");
    // The settler recorded it and let the pod go (its finalizer removed); a fresh process
    // answers the same, also once the pod is deleted.
    eventually("the pod let go", || async {
        pod_object(&env, &id)
            .is_some_and(|p| {
                p["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
            })
            .then_some(())
    })
    .await;
    delete_as_admin(&env, &id).await;
    every_replica_reports(&env, &id, &outcome).await;
}

/// A pod whose create's answer was lost is adopted by the repeat, and its namespace looked
/// after from then on: its outcome is recorded and the pod let go with nobody asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_create_answer_was_lost_is_adopted_and_settled() {
    let env = Env::start().await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["create"])
            .resources(&["pods"])
            .times(1),
    );
    let id = submit(&env, &pod("lost", "echo once", ""), "lost-1").await;
    assert_eq!(
        env.sim.request_count("create", "pods"),
        2,
        "created, then adopted"
    );
    eventually("the outcome recorded and the pod let go", || async {
        let record = env
            .sim
            .object("", "configmaps", NS, &record_name(JobKind::Pod, &id.name));
        let let_go = pod_object(&env, &id).is_some_and(|p| {
            p["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        });
        (record.is_some() && let_go).then_some(())
    })
    .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (JobState::Succeeded, Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_says_its_exit_code_and_last_words() {
    let env = Env::start().await;
    let id = submit(
        &env,
        &pod("exit3", "echo going down >&2; exit 3", ""),
        "exit3",
    )
    .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:?}"
    );
    assert_eq!(outcome.last_words.as_deref(), Some("going down\n"));
    delete_as_admin(&env, &id).await;
    every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_killed_pod_fails_as_such_also_when_it_exits_zero() {
    let env = Env::start().await;
    let hog = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";
    let limit = "resources: {memory: 64Mi, limits: {memory: 64Mi}}";
    let id = submit(&env, &pod("oom", hog, limit), "oom").await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(137)),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.message,
        "the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137"
    );
    let child = format!("{hog}; echo the main process goes on");
    let id = submit(&env, &pod("oomchild", &child, limit), "oomchild").await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(0)),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_image_fails_past_its_grace_and_the_pod_is_deleted() {
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "kind: Pod\nname: pull\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";
    let id = submit(&env, yaml, "pull").await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::ImagePullBackOff),
        "{seen:#?}"
    );
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::ImagePullFailed)
    );
    assert!(outcome.message.contains("registry.invalid"), "{outcome:?}");
    // Recorded on the pod before it was deleted; every replica answers it once it is gone.
    every_replica_reports(&env, &id, &outcome).await;
}

/// I2 with one create on its way (docs/INVARIANTS.md, "I2 and a slow submission"): a
/// submission's create waits at the server while another submission's pod of the same job id
/// fails to pull, is recorded and deleted by kubeferry. The deleted pod keeps its name for the
/// name hold, so the create that lands meanwhile finds it taken and answers that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_on_its_way_while_the_pod_is_recorded_and_deleted_runs_nothing() {
    let mut settings = Settings::fast();
    settings.executor.records.name_hold = Duration::from_secs(4);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "kind: Pod\nname: slow\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";
    let held = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["create"])
            .resources(&["pods"])
            .times(1),
    );
    let slow = env.fresh_executor().await;
    let on_its_way = {
        let spec = spec_of(yaml);
        tokio::spawn(async move { slow.submit(&spec, "slow", NS).await })
    };
    eventually("the first create to wait at the server", || async {
        (env.sim.request_count("create", "pods") == 1).then_some(())
    })
    .await;
    let id = submit(&env, yaml, "slow").await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::ImagePullFailed)
    );
    let first = pod_object(&env, &id).expect("the pod, held by its name hold");
    assert!(
        first["metadata"]["deletionTimestamp"].is_string(),
        "deleted by kubeferry: {first}"
    );
    env.sim.remove_fault(held);
    let answered = on_its_way.await.unwrap().expect("answered");
    assert_eq!(answered, id);
    if let Some(now) = pod_object(&env, &id) {
        assert_eq!(
            now["metadata"]["uid"], first["metadata"]["uid"],
            "the job ran again"
        );
    }
    // Once the hold is over the pod goes, and nothing took its name.
    every_replica_reports(&env, &id, &outcome).await;
    assert!(pod_object(&env, &id).is_none(), "nothing ran again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_node_takes_fails_at_the_pending_timeout() {
    let settings =
        Settings::fast().with_mapping(|m| m.pending_timeout = Some(Duration::from_millis(1500)));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = submit(
        &env,
        &pod("huge", "echo never", "resources: {cpu: 64}"),
        "huge",
    )
    .await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::Unschedulable),
        "{seen:#?}"
    );
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::UnschedulableTimeout)
    );
    assert!(outcome.message.contains("Insufficient cpu"), "{outcome:?}");
    every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_deadline_fails_it_as_deadline_exceeded() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = submit(
        &env,
        &pod("slow", &gate.wait("never"), "timeout: 1s"),
        "slow",
    )
    .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::DeadlineExceeded),
        "{outcome:?}"
    );
    assert!(
        outcome.message.starts_with("timeout 1s reached"),
        "{outcome:?}"
    );
    let object = pod_object(&env, &id).expect("the pod stays");
    assert_eq!(object["spec"]["activeDeadlineSeconds"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_preemptions_and_lost_nodes_are_infrastructure_failures() {
    let env = Env::start().await;
    let gate = Gate::new();
    let evicted = running(&env, &gate, "evicted").await;
    env.sim.evict_pod(NS, &evicted.name).unwrap();
    let (outcome, _) = env.wait(&evicted).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::Evicted),
        "{outcome:?}"
    );
    assert!(outcome.reason.is_retryable());

    let preempted = running(&env, &gate, "preempted").await;
    env.sim.preempt_pod(NS, &preempted.name).unwrap();
    let (outcome, _) = env.wait(&preempted).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::Preempted),
        "{outcome:?}"
    );
    every_replica_reports(&env, &preempted, &outcome).await;

    let lost = running(&env, &gate, "lost").await;
    env.sim.lose_node("sim-node-1").unwrap();
    let (outcome, _) = env.wait(&lost).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::NodeLost),
        "{outcome:?}"
    );
    every_replica_reports(&env, &lost, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_pod_stays_cancelled_and_its_job_id_runs_nothing_again() {
    let env = Env::start().await;
    let gate = Gate::new();
    let yaml = pod("long", &gate.wait("never"), "");
    let id = running(&env, &gate, "long").await;
    let CancelOutcome::Requested(answer) = env.executor.cancel(&id).await.unwrap() else {
        panic!("the cancel is accepted");
    };
    assert!(
        matches!(answer.state, JobState::Cancelling | JobState::Cancelled),
        "{answer:?}"
    );
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{outcome:?}"
    );
    every_replica_reports(&env, &id, &outcome).await;
    let creates = env.sim.request_count("create", "pods");
    let fresh = env.fresh_executor().await;
    let again = fresh
        .submit(&spec_of(&yaml), "long", NS)
        .await
        .expect("answered");
    assert_eq!(again, id);
    let answer = fresh.status(&id).await.unwrap();
    assert_eq!(
        (answer.state, answer.reason),
        (JobState::Cancelled, Reason::Cancelled)
    );
    assert_eq!(env.sim.request_count("create", "pods"), creates);
    assert!(pod_object(&env, &id).is_none(), "nothing ran again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_queries_of_pods_only_read() {
    let env = Env::start().await;
    let gate = Gate::new();
    let started = running(&env, &gate, "reads-running").await;
    let finished = submit(&env, &pod("finished", "exit 0", ""), "reads-finished").await;
    let failing = submit(&env, &pod("failing", "exit 3", ""), "reads-failing").await;
    let cancelled = running(&env, &gate, "reads-cancel").await;
    env.executor.cancel(&cancelled).await.expect("cancelled");
    for id in [&finished, &failing, &cancelled] {
        env.wait(id).await;
    }
    // The settler recorded the ended pods' outcomes and let them go (its last writes for
    // them); the cancelled one is gone.
    eventually("the ended pods let go", || async {
        let held = |id: &ExecutionId| {
            pod_object(&env, id).is_some_and(|p| {
                p["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty())
            })
        };
        let gone = pod_object(&env, &cancelled).is_none();
        (gone && !held(&finished) && !held(&failing)).then_some(())
    })
    .await;
    let ids = [&started, &finished, &failing, &cancelled];
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
