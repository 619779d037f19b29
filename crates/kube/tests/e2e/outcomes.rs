//! The true outcome: one test per case of the container status mapping, produced for real on
//! the simulated cluster (its Job controller, scheduler and kubelet), read through the executor.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn succeeded() {
    let env = Env::start().await;
    let id = env.submit(&shell("ok", "echo hello", "")).await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::Completed);
    assert_eq!(outcome.exit_code, Some(0));
    let (started, finished) = (outcome.started_at.unwrap(), outcome.finished_at.unwrap());
    assert!(started <= finished, "{outcome:?}");
    // Every replica reports the same outcome.
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_with_exit_code() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("fail", "echo about to fail; exit 3", ""))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::Error);
    assert_eq!(outcome.exit_code, Some(3));
    assert!(!outcome.reason.is_retryable());
    assert!(outcome.finished_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_stays_queued_with_the_schedulers_message() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("huge", "echo never", "resources: {cpu: 64}"))
        .await;
    let info = env
        .status_until(&id, "unschedulable", |i| i.reason == Reason::Unschedulable)
        .await;
    assert_eq!(info.state, JobState::Queued);
    assert!(info.message.contains("Insufficient cpu"), "{info:?}");
    // Without a pending timeout it stays so (the Job is not stopped).
    assert!(env.job_object(&id).is_some());
}

/// The Job controller's `FailedCreate` events of a Job: how many refusals, and the last message.
async fn failed_creates(env: &Env, id: &ExecutionId) -> (i32, String) {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(env.admin_client().await, &id.namespace);
    let list = events.list(&Default::default()).await.expect("events");
    let mut refused = (0, String::new());
    for event in list.items {
        if event.involved_object.name.as_deref() == Some(id.name.as_str())
            && event.reason.as_deref() == Some("FailedCreate")
        {
            refused.0 += event.count.unwrap_or(1);
            refused.1 = event.message.unwrap_or_default();
        }
    }
    refused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_job_controller_cannot_create_stays_queued() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("nosa", "echo ran", "serviceAccount: robot"))
        .await;
    // Admission refuses the pod (no such service account): the Job controller records the
    // refusal as an event, not on the Job, and tries again.
    let message = eventually("the Job controller to be refused twice", || async {
        let (count, message) = failed_creates(&env, &id).await;
        (count >= 2).then_some(message)
    })
    .await;
    assert_eq!(
        message,
        format!(
            "Error creating: pods \"{}-\" is forbidden: error looking up service account \
             default/robot: serviceaccount \"robot\" not found",
            id.name
        )
    );
    // The status says why, from the events (the Job itself does not show it).
    let info = env
        .status_until(&id, "the refusal in the message", |info| {
            info.message.contains("serviceaccount")
        })
        .await;
    assert_eq!(info.state, JobState::Queued, "{info:?}");
    assert_eq!(info.reason, Reason::Pending, "{info:?}");
    assert_eq!(
        info.message,
        format!("waiting for the Job controller to create a pod: {message}"),
        "{info:?}"
    );
    assert!(env.pods_of(&id).is_empty());
    // It was waiting, not lost: once the service account exists, the job runs.
    env.sim
        .create(
            NS,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "robot", "namespace": NS},
            }),
        )
        .expect("the service account is created");
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{seen:#?}");
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::Pending),
        "{seen:#?}"
    );
    // Once a pod exists the refusal is over, and no status repeats it.
    assert!(
        seen.iter()
            .filter(|i| i.reason != Reason::Pending)
            .all(|i| !i.message.contains("serviceaccount")),
        "{seen:#?}"
    );
    // A one-off list (a fresh process) reads the server and starts no watches.
    let fresh = env.fresh_executor().await;
    let listed = fresh.list(NS, None).await.expect("listed");
    assert!(listed.iter().any(|summary| summary.id == id));
    assert!(fresh.container_jobs().existing(NS).is_none());
}

/// An outcome kubeferry decided itself is recorded on the Job, the work is stopped, and any
/// replica reports it.
async fn assert_recorded_and_stopped(env: &Env, id: &ExecutionId, outcome: &ExecutionInfo) {
    let job = eventually("the recorded outcome", || async {
        env.job_object(id)
            .filter(|job| outcome_annotation(job).is_some())
    })
    .await;
    assert_eq!(outcome_annotation(&job).as_ref(), Some(outcome));
    assert_eq!(
        job["spec"]["suspend"], true,
        "stopped by suspension, kept as the record"
    );
    eventually("the job's pods to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    assert_eq!(&fresh.status(id).await.unwrap(), outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_fails_after_the_pending_timeout() {
    // Kubernetes timestamps have whole seconds: a timeout under 1 s may already have run out
    // when the pod is first seen.
    let settings =
        Settings::fast().with_mapping(|m| m.pending_timeout = Some(Duration::from_millis(1500)));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = env
        .submit(&shell("huge", "echo never", "resources: {cpu: 64}"))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::Unschedulable),
        "{seen:#?}"
    );
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::UnschedulableTimeout);
    assert!(outcome.message.contains("Insufficient cpu"), "{outcome:?}");
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_never_created_fails_after_the_pending_timeout() {
    // With a pending timeout, a job whose pod admission keeps refusing is not stuck forever.
    let settings =
        Settings::fast().with_mapping(|m| m.pending_timeout = Some(Duration::from_millis(1500)));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = env
        .submit(&shell("nosa", "echo never", "serviceAccount: robot"))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::Pending),
        "{seen:#?}"
    );
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::UnschedulableTimeout);
    assert!(
        outcome
            .message
            .contains("no pod was created within the pending timeout"),
        "{outcome:?}"
    );
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_pull_failure_is_queued_then_failed_after_the_grace() {
    // The grace counts from the pod's start time, which has whole seconds: with less than 1 s
    // it may have run out when the pull first fails.
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "name: pull\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";
    let id = env.submit(yaml).await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::ImagePullBackOff),
        "{seen:#?}"
    );
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::ImagePullFailed);
    assert!(outcome.message.contains("registry.invalid"), "{outcome:?}");
    // The registry's error, seen while it waited, also when the grace ran out in a back-off.
    assert!(outcome.message.contains("no such host"), "{outcome:?}");
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_job_is_removed_when_its_ttl_runs_out() {
    // Kubernetes' TTL controller never removes a suspended Job: kubeferry's janitor does, as
    // the TTL would have removed the Job had it failed by itself.
    let env = Env::start().await;
    let id = env
        .submit(&shell(
            "nosecret",
            "echo never",
            "secrets: [does-not-exist]\nttlAfterFinished: 1s",
        ))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.reason, Reason::CreateContainerConfigError);
    assert_recorded_and_stopped(&env, &id, &outcome).await;
    eventually("the stopped Job to be removed after its TTL", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_image_name_fails_at_once() {
    let env = Env::start().await;
    // The spec validator refuses a malformed reference, so the Job is created directly.
    let id = env.create_job_directly(&shell("badimage", "echo never", ""), "badimage-1", |job| {
        job["spec"]["template"]["spec"]["containers"][0]["image"] = "Not A/Valid:Image!".into();
    });
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::InvalidImageName);
    assert!(
        seen.iter().all(|i| i.reason != Reason::ImagePullBackOff),
        "no grace for a malformed name: {seen:#?}"
    );
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_secret_is_a_create_container_config_error() {
    let env = Env::start().await;
    let id = env
        .submit(&shell(
            "nosecret",
            "echo never",
            "secrets: [does-not-exist]",
        ))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::CreateContainerConfigError);
    assert!(outcome.message.contains("does-not-exist"), "{outcome:?}");
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_the_runtime_cannot_create_fails_after_the_grace() {
    // An image built for a binary given as its command, run without one.
    let mut config = SimConfig::for_tests();
    config.images_without_command = vec!["ghcr.io/acme/static-tool".to_string()];
    let settings = Settings::fast()
        .with_mapping(|m| m.create_container_error_grace = Duration::from_millis(1500));
    let env = Env::start_with(config, settings).await;
    let id = env
        .submit("name: nocommand\nimage: ghcr.io/acme/static-tool:1.0\n")
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::ContainerCreating),
        "waits out the grace first: {seen:#?}"
    );
    assert_eq!(outcome.state, JobState::Failed, "{outcome:?}");
    assert_eq!(outcome.reason, Reason::CreateContainerError);
    assert!(
        outcome.message.contains("no command specified"),
        "{outcome:?}"
    );
    assert_recorded_and_stopped(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_is_started_with_its_start_time() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("run", &gate.wait("end"), "")).await;
    let info = env
        .status_until(&id, "running", is(JobState::Started))
        .await;
    assert_eq!(info.reason, Reason::Running);
    let started = info.started_at.expect("a start time");
    gate.open("end");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    assert_eq!(outcome.started_at, Some(started), "the start time is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_killed() {
    let env = Env::start().await;
    let script = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";
    let id = env
        .submit(&shell(
            "oom",
            script,
            "resources: {memory: 64Mi, limits: {memory: 64Mi}}",
        ))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::OomKilled, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(137));
    // The limit it exceeded, as the job file wrote it.
    assert_eq!(
        outcome.message,
        "the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137"
    );
    assert!(!outcome.reason.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_killed_also_when_the_main_process_exits_zero() {
    // The OOM killer takes the biggest process of the container, here a child; the main
    // process goes on and exits 0. The runtime still says OOMKilled; Kubernetes, judging by the
    // exit code, completes the Job (kubernetes#131530). The work did not succeed.
    let env = Env::start().await;
    let script = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'; \
                  echo the main process goes on";
    let id = env
        .submit(&shell(
            "oomchild",
            script,
            "resources: {memory: 64Mi, limits: {memory: 64Mi}}",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::OomKilled, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(
        outcome.message,
        "the main container was OOMKilled (exceeded its memory limit of 64Mi) although it \
         exited with code 0"
    );
    assert!(!outcome.reason.is_retryable());
    let job = env.job_object(&id).expect("kept");
    let complete = job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Complete" && c["status"] == "True");
    assert!(complete, "Kubernetes calls it a success: {job:#}");
    assert_eq!(
        env.executor
            .tail(&id, &Default::default())
            .await
            .unwrap()
            .log,
        "Killed\nthe main process goes on\n",
        "the shell saw its child killed and went on"
    );
    // Once the pod is gone (someone cleans up, the pod GC), a replica that never saw it
    // reports the same: the Job's completion alone would say success.
    let pod = env.pod_of(&id).await;
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    assert_every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_exceeded() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("slow", &gate.wait("never"), "timeout: 1s"))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::DeadlineExceeded, "{outcome:?}");
    // The job's own timeout, then what the Job controller said.
    assert_eq!(
        outcome.message,
        "timeout 1s reached: Job was active longer than specified deadline"
    );
    // The container killed because of the deadline does not lend its exit code, neither to
    // the executor that saw the verdict first nor to one that looks once the kill is over.
    assert_eq!(outcome.exit_code, None, "{outcome:?}");
    eventually("the killed pod to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    assert_eq!(
        outcome_of(&fresh.status(&id).await.unwrap()),
        outcome_of(&outcome)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_limit_exceeded() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("flaky", "echo attempt; exit 2", "retries: 1"))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::BackoffLimitExceeded, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(2));
    assert!(outcome.message.contains("2 attempts"), "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicted_is_a_retryable_infrastructure_failure() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("evicted", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let pod = env.pod_of(&id).await;
    env.sim.evict_pod(NS, &pod).unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::Evicted, "{outcome:?}");
    assert!(outcome.reason.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drained_node_is_an_eviction() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("drained", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // Cordons the node and evicts its pods through the Eviction API (a graceful deletion).
    env.sim.drain_node("sim-node-1").unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::Evicted, "{outcome:?}");
    assert!(outcome.reason.is_retryable());
    assert_every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_is_a_retryable_infrastructure_failure() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("preempted", &gate.wait("never"), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // kube-scheduler marks the pod (DisruptionTarget PreemptionByScheduler) and deletes it.
    let pod = env.pod_of(&id).await;
    env.sim.preempt_pod(NS, &pod).unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::Preempted, "{outcome:?}");
    assert!(outcome.reason.is_retryable());
    assert_every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lost_is_a_retryable_infrastructure_failure() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("lost", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.sim.lose_node("sim-node-1").unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::NodeLost, "{outcome:?}");
    assert!(outcome.reason.is_retryable());
    assert_every_replica_reports(&env, &id, &outcome).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_deleted_by_someone_else() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("victim", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.delete_job_as_admin(&id).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::DeletedExternally, "{outcome:?}");
    assert!(outcome.started_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_by_someone_else() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("podvictim", &gate.wait("never"), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let pod = env.pod_of(&id).await;
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    pods.delete(&pod, &DeleteParams::default()).await.unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    assert_eq!(outcome.reason, Reason::DeletedExternally, "{outcome:?}");
    assert!(outcome.reason.is_retryable());
    assert_every_replica_reports(&env, &id, &outcome).await;
}

/// Once a job's pods are gone, a replica that never saw them reports the same outcome: the
/// executor that read it from the pods' final states recorded it on the Job.
async fn assert_every_replica_reports(env: &Env, id: &ExecutionId, outcome: &ExecutionInfo) {
    eventually("the job's pods to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    let seen = status_until(&fresh, id, "an outcome", ExecutionInfo::is_terminal).await;
    assert_eq!(&seen, outcome);
}

/// The executor's status of a job once it has seen the Job's removal (its tombstone is kept).
async fn status_once_removal_seen(env: &Env, id: &ExecutionId) -> ExecutionInfo {
    env.status_until(id, "the Job's removal to be seen", |_| {
        env.executor
            .container_jobs()
            .watch(NS)
            .jobs
            .tombstone(&id.name)
            .is_some()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_removed_by_its_ttl_after_success() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("short", "echo done", "ttlAfterFinished: 1s"))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    eventually("the TTL to remove the Job", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    // The executor that watched it keeps the outcome.
    let tracked = status_once_removal_seen(&env, &id).await;
    assert_eq!(tracked, outcome);
    // One that never saw it answers the same from the outcome record.
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), outcome);
}

/// Writes Job conditions through the status subresource, as another controller would.
async fn write_conditions(env: &Env, id: &ExecutionId, conditions: &serde_json::Value) {
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(env.admin_client().await, NS);
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    jobs.patch_status(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_shape_it_cannot_read_stays_non_terminal_and_warns() {
    let warnings = captured_warnings();
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("odd", &gate.wait("end"), "")).await;
    let running = env
        .status_until(&id, "running", is(JobState::Started))
        .await;
    // A newer Kubernetes (or another controller) writes a condition this version does not know.
    let conditions = serde_json::json!([{
        "type": "Exploded", "status": "True", "reason": "Boom", "message": "a new kind of verdict",
        "lastTransitionTime": jiff::Timestamp::now().to_string(),
    }]);
    write_conditions(&env, &id, &conditions).await;
    eventually("the warning", || async {
        let info = env.executor.status(&id).await.unwrap();
        assert!(!info.is_terminal(), "{info:?}");
        assert_eq!(info.state, running.state);
        let logged = warnings.text();
        let warned = logged
            .lines()
            .any(|line| line.contains(&id.to_string()) && line.contains("Exploded"));
        warned.then_some(())
    })
    .await;
    // The job still ends as it really does.
    gate.open("end");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contradicting_verdicts_keep_the_last_status() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("both", &gate.wait("end"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let now = jiff::Timestamp::now().to_string();
    let conditions = serde_json::json!([
        {"type": "Complete", "status": "True", "lastTransitionTime": now},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": now},
    ]);
    write_conditions(&env, &id, &conditions).await;
    let info = eventually("an unreadable status", || async {
        let info = env.executor.status(&id).await.unwrap();
        (info.reason == Reason::UnrecognizedStatus).then_some(info)
    })
    .await;
    assert_eq!(info.state, JobState::Started, "{info:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_job_is_submitted_suspended() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("queued", "echo never", "queue: team-a"))
        .await;
    let info = env
        .status_until(&id, "suspended", |i| i.reason == Reason::Suspended)
        .await;
    assert_eq!(info.state, JobState::Queued);
    assert!(info.message.contains("team-a"), "{info:?}");
    let job = env.job_object(&id).unwrap();
    assert_eq!(job["spec"]["suspend"], true);
    assert!(env.pods_of(&id).is_empty());
}

/// Admits a suspended Job as Kueue does: it clears `suspend` (and may add node affinity).
async fn admit_as_kueue(env: &Env, id: &ExecutionId) {
    let api: Api<k8s_openapi::api::batch::v1::Job> =
        Api::namespaced(env.admin_client().await, &id.namespace);
    let patch = serde_json::json!({"spec": {"suspend": false}});
    api.patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("Kueue admits the Job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_job_runs_once_admitted() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("admitted", "echo ran", "queue: team-a"))
        .await;
    env.status_until(&id, "suspended", |i| i.reason == Reason::Suspended)
        .await;
    admit_as_kueue(&env, &id).await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::Completed);
    assert_eq!(
        env.executor
            .tail(&id, &Default::default())
            .await
            .unwrap()
            .log,
        "ran\n"
    );
    // Kubernetes saw it end: kubeferry wrote nothing on it, the Job's conditions are the record.
    let job = env.job_object(&id).expect("kept");
    assert!(outcome_annotation(&job).is_none(), "{job:#}");
    // Once its outcome record is kept, the Job is let go with a copy of it, and nothing more.
    let job = eventually("the Job let go", || async {
        env.job_object(&id).filter(|job| {
            job["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
    })
    .await;
    assert_eq!(kept_annotation(&job).as_ref(), Some(&outcome), "{job:#}");
    assert!(outcome_annotation(&job).is_none(), "{job:#}");
    assert_eq!(job["spec"]["suspend"], false, "{job:#}");
    assert_eq!(
        &env.fresh_executor().await.status(&id).await.unwrap(),
        &outcome
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_job_kubeferry_fails_is_deleted_not_suspended() {
    // Kueue owns `suspend` of the Jobs in its queues and would start a suspended admitted Job
    // again: kubeferry records the outcome, then deletes the Job.
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "name: pullq\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\nqueue: team-a\n";
    let id = env.submit(yaml).await;
    env.status_until(&id, "suspended", |i| i.reason == Reason::Suspended)
        .await;
    admit_as_kueue(&env, &id).await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::ImagePullFailed);
    eventually("the Job and its pods to be deleted", || async {
        (env.job_object(&id).is_none() && env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    // The replica that watched it keeps the outcome; the deletion never turns it into a cancel
    // or an external deletion.
    let tracked = status_once_removal_seen(&env, &id).await;
    assert_eq!(tracked, outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_start_fails_with_the_runtimes_message() {
    let env = Env::start().await;
    let yaml = "name: nocommand\nimage: busybox:1.36\ncommand: [kubeferry-no-such-command]\n";
    let id = env.submit(yaml).await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::Error, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(128));
    assert!(outcome.message.contains("StartError"), "{outcome:?}");
    assert!(
        outcome.message.contains("kubeferry-no-such-command"),
        "{outcome:?}"
    );
}

/// How a test disrupts a pod whose container already ended.
#[derive(Clone, Copy, Debug)]
enum Disruption {
    /// `kubectl drain`: cordon, then the Eviction API (DisruptionTarget, graceful delete).
    Drain,
    /// kube-scheduler's preemption (DisruptionTarget, graceful delete).
    Preemption,
}

/// I1, I7: a container that exits 4 on its own and whose pod is disrupted right after (in the
/// same second, mostly) failed on its own. A replica asked before the disruption, one that
/// watched the pods and is asked only after, and one started once the pods are gone all report
/// the same FAILED Error with exit code 4, kept on the Job with its record.
async fn an_own_failure_disrupted_right_after(disruption: Disruption) {
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!("{}; echo failing on its own; exit 4", gate.wait("fail"));
    let id = env
        .submit(&shell("fails-then-disrupted", &script, ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // Another replica, which watches the job's pods from now on and is asked only afterwards.
    let watching = env.fresh_executor().await;
    status_until(&watching, &id, "running", is(JobState::Started)).await;
    gate.open("fail");
    let before = env
        .status_until(&id, "the failure", ExecutionInfo::is_terminal)
        .await;
    assert_eq!(
        outcome_of(&before),
        (JobState::Failed, Reason::Error, Some(4)),
        "{before:?}"
    );
    assert!(!before.reason.is_retryable());
    let pod = env.pod_of(&id).await;
    match disruption {
        Disruption::Drain => env.sim.drain_node("sim-node-1").unwrap(),
        Disruption::Preemption => env.sim.preempt_pod(NS, &pod).unwrap(),
    }
    eventually("the disrupted pod's removal to be seen", || async {
        let departed = watching
            .container_jobs()
            .watch(NS)
            .departed_pods_of(&id.name);
        (env.sim.count("", "pods") == 0 && departed.iter().any(|p| p.disruption.is_some()))
            .then_some(())
    })
    .await;
    let after = status_until(&watching, &id, "the outcome", ExecutionInfo::is_terminal).await;
    assert_eq!(after, before, "{disruption:?}: asked after the disruption");
    assert_eq!(
        env.executor.status(&id).await.unwrap(),
        before,
        "{disruption:?}: the replica asked before, again"
    );
    // The outcome read from the pod before it went is on the Job: the copy of its record the
    // Job was let go with (nothing more is written once the pod is gone).
    eventually("the outcome read from the pod to be on the Job", || async {
        let job = env.job_object(&id).expect("the Job");
        (kept_annotation(&job).as_ref() == Some(&before)).then_some(())
    })
    .await;
    let job = env.job_object(&id).expect("the Job");
    assert!(outcome_annotation(&job).is_none(), "{job:#}");
    let fresh = env.fresh_executor().await;
    let later = status_until(&fresh, &id, "the outcome", ExecutionInfo::is_terminal).await;
    assert_eq!(
        later, before,
        "{disruption:?}: a replica started afterwards"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_failure_drained_right_after_stays_the_containers_failure() {
    an_own_failure_disrupted_right_after(Disruption::Drain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_failure_preempted_right_after_stays_the_containers_failure() {
    an_own_failure_disrupted_right_after(Disruption::Preemption).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_job_whose_delete_failed_after_its_record_is_deleted_on_the_next_try() {
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "name: pullr\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\nqueue: team-a\n";
    let id = env.submit(yaml).await;
    env.status_until(&id, "suspended", |i| i.reason == Reason::Suspended)
        .await;
    // The delete of the Job that follows the record of its outcome is refused for a while.
    let refused = env.sim.add_fault(
        FaultRule::new(FaultAction::error(403))
            .verbs(&["delete"])
            .resources(&["jobs.batch"]),
    );
    admit_as_kueue(&env, &id).await;
    let recorded = eventually("the recorded outcome", || async {
        env.job_object(&id).as_ref().and_then(outcome_annotation)
    })
    .await;
    assert_eq!(recorded.reason, Reason::ImagePullFailed, "{recorded:?}");
    eventually("the refused delete", || async {
        (env.sim.request_count("delete", "jobs.batch") >= 1).then_some(())
    })
    .await;
    env.sim.remove_fault(refused);
    // Left as it is, Kueue could start it again: the settler deletes it on its next try.
    eventually("the Job and its pods to be deleted", || async {
        (env.job_object(&id).is_none() && env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    assert_eq!(env.executor.status(&id).await.unwrap(), recorded);
}
