//! The durable outcome record: a job's outcome outlives its pods and its Job, on every replica
//! and in every later process, and a job id submitted again answers its first run and never
//! runs twice (within the record's retention).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kubeferry_core::marks::{CANCEL_ANNOTATION, CANCELLED_BY_ANNOTATION};
use kubeferry_core::record::{OutcomeRecord, record_name};
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use kubeferry_kube::CancelOutcome;
use kubeferry_kube::rbac;
use kubeferry_sim::{FaultAction, FaultId, FaultRule, SimConfig};

use crate::support::*;

/// The parts of an answer every replica must agree on.
fn outcome_of(info: &ExecutionInfo) -> (JobState, Reason, Option<i32>) {
    (info.state, info.reason, info.exit_code)
}

/// Whether the job's outcome record exists at the cluster.
fn recorded(env: &Env, name: &str) -> bool {
    env.sim
        .object("", "configmaps", NS, &record_name(JobKind::Job, name))
        .is_some()
}

/// Makes the simulated cluster answer 500 to every `verb` of `resource`, until the rule is
/// removed.
fn server_error(env: &Env, verb: &str, resource: &str) -> FaultId {
    env.sim.add_fault(
        FaultRule::new(FaultAction::error(500))
            .verbs(&[verb])
            .resources(&[resource]),
    )
}

/// The message of the Job's `Failed` condition, once the Job controller has judged it.
async fn failed_verdict(env: &Env, id: &ExecutionId) -> String {
    eventually("the Job controller's verdict", || async {
        let job = env.job_object(id)?;
        let conditions = job.pointer("/status/conditions")?.as_array()?.clone();
        conditions
            .iter()
            .find(|c| c["type"] == "Failed" && c["status"] == "True")
            .and_then(|c| c["message"].as_str().map(str::to_string))
    })
    .await
}

/// Deletes the namespace's pods as an admin (no kubeferry process sees them go) and answers
/// the job's outcome as read once they are gone.
async fn outcome_once_pods_are_gone(env: &Env, id: &ExecutionId) -> ExecutionInfo {
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    for pod in pods.list(&Default::default()).await.unwrap() {
        let name = pod.metadata.name.unwrap();
        pods.delete(&name, &Default::default()).await.unwrap();
    }
    eventually("the pods to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    env.status_until(id, "the outcome", ExecutionInfo::is_terminal)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_jobs_outcome_outlives_its_pods_on_a_replica_that_never_saw_them() {
    let env = Env::start().await;
    let id = env
        .submit(&shell("exits-3", "echo bad input; exit 3", ""))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        outcome_of(&outcome),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:?}"
    );
    eventually("the outcome record", || async {
        recorded(&env, &id.name).then_some(())
    })
    .await;
    // Someone deletes the finished pod (a drain, the pod GC, kubectl).
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    for pod in env.pods_of(&id) {
        pods.delete(&pod.name, &Default::default()).await.unwrap();
    }
    eventually("the pods to go", || async {
        (env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    // A process that never saw the pods answers what the first one did, exit code and times
    // included (without the record: FAILED BackoffLimitExceeded, no exit code).
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), outcome);
    assert_eq!(env.executor.status(&id).await.unwrap(), outcome);
    // One record, written once.
    assert_eq!(env.sim.request_count("create", "configmaps"), 1);
}

/// I1: a job without retries whose container failed on its own, its pod gone before any
/// kubeferry process saw it (drained, its node lost, every replica down meanwhile), so that
/// nothing recorded it: the Job's own verdict names the exit code (the pod failure policy rule
/// the manifest adds last), and a replica reads the container's failure from it, not a bare
/// BackoffLimitExceeded without an exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_no_replica_saw_still_names_its_exit_code() {
    let env = Env::start().await;
    let id = env.create_job_directly(
        &shell("unseen-exit-3", "echo bad input; exit 3", ""),
        "unseen-exit-3",
        |_| {},
    );
    failed_verdict(&env, &id).await;
    let outcome = outcome_once_pods_are_gone(&env, &id).await;
    assert_eq!(
        outcome_of(&outcome),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:?}"
    );
    assert_eq!(outcome.message, "exit code 3");
}

/// I1: a container that failed on its own a moment before a drain reached its pod. The API
/// server adds `DisruptionTarget` to a pod it evicts even when the pod had already failed, so
/// the Job controller may see both at once; the Job's verdict must still name the container's
/// own exit code (the rule the manifest puts first), so that a replica that never saw the pod
/// answers the container's failure, not an infrastructure one the caller would retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_failed_just_before_a_drain_is_its_own_failure_once_its_pod_is_gone() {
    let env = Env::start().await;
    // On no node: the kubelet never runs the pod; its status is written below, failed and
    // disrupted in one write, as the Job controller may first read it.
    let id = env.create_job_directly(
        &shell(
            "failed-then-drained",
            "exit 4",
            "nodeSelector: {pool: nowhere}",
        ),
        "failed-then-drained",
        |_| {},
    );
    let pods: Api<Pod> = Api::namespaced(env.admin_client().await, NS);
    // Read as an admin: no kubeferry process sees the pod before it is gone.
    let pod = eventually("the Job's pod", || async {
        pods.list(&Default::default())
            .await
            .ok()?
            .items
            .pop()?
            .metadata
            .name
    })
    .await;
    let status = serde_json::json!({"status": {
        "phase": "Failed",
        "conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting", "lastTransitionTime": "2026-12-01T10:00:05Z",
        }],
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {
                "exitCode": 4, "reason": "Error",
                "startedAt": "2026-12-01T10:00:01Z", "finishedAt": "2026-12-01T10:00:04Z",
            }},
        }],
    }});
    pods.patch_status(
        &pod,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await
    .expect("the pod's status is written");
    let verdict = failed_verdict(&env, &id).await;
    assert!(
        verdict.ends_with("failed with exit code 4 matching FailJob rule at index 0"),
        "{verdict}"
    );
    let outcome = outcome_once_pods_are_gone(&env, &id).await;
    assert_eq!(
        outcome_of(&outcome),
        (JobState::Failed, Reason::Error, Some(4)),
        "{outcome:?}"
    );
    assert!(!outcome.reason.is_retryable());
}

/// I7: a replica whose watch of records lags meets a Job that vanished, its outcome recorded
/// by another process first (a cancel through another replica records CANCELLED before its
/// Job goes; here the record is written as that process would). This replica's own mapping of
/// the vanished Job says otherwise (deleted by someone else); the record stands. A question
/// meanwhile waits for the settler, which finds the record when it tries to write its own, and
/// never answers the mapping's outcome first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_job_answers_the_record_another_process_wrote_first() {
    let mut settings = Settings::fast();
    // How long a question waits for a busy settler before it answers what stood before.
    settings.executor.container.watching.sync_timeout = Duration::from_millis(500);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    // This replica's watch of records delivers nothing from its first list on.
    env.sim.add_fault(
        FaultRule::new(FaultAction::StallWatch)
            .verbs(&["watch"])
            .resources(&["configmaps"]),
    );
    let gate = Gate::new();
    let id = env
        .submit(&shell("recorded-elsewhere", &gate.wait("end"), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let record = OutcomeRecord {
        kind: JobKind::Job,
        object: id.name.clone(),
        job_id: None,
        spec_hash: None,
        outcome: ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
            .with_message("cancelled by kubeferry on another replica"),
        recorded_at: Some(jiff::Timestamp::now()),
        created_at: None,
        cancelled_by: Some("kubeferry on another replica".into()),
        attempts: Vec::new(),
    };
    env.sim
        .create(NS, record.config_map(NS))
        .expect("the other process's record");
    // The settler's own record of the vanished Job waits at the server.
    let held = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["create"])
            .resources(&["configmaps"]),
    );
    let creates = env.sim.request_count("create", "configmaps");
    env.delete_job_as_admin(&id).await;
    eventually("the settler to record the vanished Job", || async {
        (env.sim.request_count("create", "configmaps") > creates).then_some(())
    })
    .await;
    let meanwhile = env.executor.status(&id).await.expect("an answer");
    assert!(!meanwhile.is_terminal(), "{meanwhile:?}");
    env.sim.remove_fault(held);
    let outcome = env
        .status_until(&id, "the recorded outcome", ExecutionInfo::is_terminal)
        .await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{outcome:?}"
    );
    gate.open("end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_id_submitted_again_after_its_job_is_gone_answers_its_first_run() {
    let env = Env::start().await;
    let spec = spec_of(&shell("nightly", "echo done", "ttlAfterFinished: 1s"));
    let id = env
        .executor
        .submit(&spec, "nightly-2026-12-01", NS)
        .await
        .unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    eventually("the TTL to remove the Job", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    eventually("the outcome record", || async {
        recorded(&env, &id.name).then_some(())
    })
    .await;
    let creates = env.sim.request_count("create", "jobs.batch");
    // The caller's retry, here and through a replica that never saw the job.
    for executor in [&env.executor, &env.fresh_executor().await] {
        let again = executor
            .submit(&spec, "nightly-2026-12-01", NS)
            .await
            .unwrap();
        assert_eq!(again, id);
        assert_eq!(executor.status(&again).await.unwrap(), outcome);
    }
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates);
    assert_eq!(env.sim.count("batch", "jobs"), 0, "nothing ran again");
    // The same job id with another spec is another job: refused, nothing created.
    let other = spec_of(&shell("nightly", "echo changed", ""));
    let error = env
        .executor
        .submit(&other, "nightly-2026-12-01", NS)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("a job id names one run"),
        "{error}"
    );
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_id_submitted_again_answers_its_run_while_its_job_is_kept() {
    let env = Env::start().await;
    let spec = spec_of(&shell("kept", "exit 3", ""));
    let id = env.executor.submit(&spec, "kept-1", NS).await.unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(
        outcome_of(&outcome),
        (JobState::Failed, Reason::Error, Some(3))
    );
    eventually("the outcome record", || async {
        recorded(&env, &id.name).then_some(())
    })
    .await;
    let (creates, pods) = (
        env.sim.request_count("create", "jobs.batch"),
        env.sim.count("", "pods"),
    );
    // The caller's retry, here and through a replica that never saw the job.
    for executor in [&env.executor, &env.fresh_executor().await] {
        let again = executor.submit(&spec, "kept-1", NS).await.unwrap();
        assert_eq!(again, id);
        assert_eq!(executor.status(&again).await.unwrap(), outcome);
    }
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates);
    assert!(env.job_object(&id).is_some(), "the Job is kept");
    assert_eq!(env.sim.count("", "pods"), pods, "nothing ran again");
}

/// Submissions asked together read their job ids' records together: one LIST for the burst,
/// as fresh as a GET of each (it starts after each was asked), and a job id among them whose
/// run is recorded answers that run and creates nothing.
#[tokio::test]
async fn a_burst_of_submissions_reads_their_records_in_one_request() {
    const BURST: usize = 40;
    let env = Env::start().await;
    let spec = spec_of(&shell("burst", "echo done", "ttlAfterFinished: 1s"));
    let first = env.executor.submit(&spec, "burst-first", NS).await.unwrap();
    let (outcome, _) = env.wait(&first).await;
    eventually(
        "the TTL to remove the Job and its record to be kept",
        || async {
            (env.job_object(&first).is_none() && recorded(&env, &first.name)).then_some(())
        },
    )
    .await;
    env.sim.reset_counters();
    let job_ids: Vec<String> = (0..BURST)
        .map(|n| format!("burst-{n}"))
        .chain(["burst-first".to_string()])
        .collect();
    let submitted = futures::future::join_all(
        job_ids
            .iter()
            .map(|job_id| env.executor.submit(&spec, job_id, NS)),
    )
    .await;
    let ids: Vec<ExecutionId> = submitted.into_iter().map(Result::unwrap).collect();
    assert_eq!(ids[BURST], first, "the recorded job id answers its run");
    assert_eq!(env.executor.status(&first).await.unwrap(), outcome);
    let counters = env.sim.counters();
    assert_eq!(
        env.sim.request_count("list", "configmaps"),
        1,
        "{counters:#?}"
    );
    assert_eq!(
        env.sim.request_count("get", "configmaps"),
        0,
        "{counters:#?}"
    );
    assert_eq!(
        env.sim.request_count("create", "jobs.batch"),
        BURST as u64,
        "{counters:#?}"
    );
    // One after another, each asks on its own.
    env.sim.reset_counters();
    for job_id in ["burst-next-1", "burst-next-2"] {
        env.executor.submit(&spec, job_id, NS).await.unwrap();
    }
    assert_eq!(env.sim.request_count("list", "configmaps"), 2);
}

/// A job that runs until `gate` opens, submitted as job id `<name>-1`, once it is STARTED,
/// with its spec.
async fn running(env: &Env, gate: &Gate, name: &str) -> (JobSpec, ExecutionId) {
    let spec = spec_of(&shell(name, &gate.wait("never"), ""));
    let id = env
        .executor
        .submit(&spec, &format!("{name}-1"), NS)
        .await
        .unwrap();
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    (spec, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_id_submitted_again_stays_cancelled_and_runs_nothing() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (spec, id) = running(&env, &gate, "long").await;
    env.executor.cancel(&id).await.unwrap();
    let (cancelled, _) = env.wait(&id).await;
    assert_eq!(cancelled.state, JobState::Cancelled);
    eventually("the Job to go and its outcome to be recorded", || async {
        (env.job_object(&id).is_none() && recorded(&env, &id.name)).then_some(())
    })
    .await;
    let creates = env.sim.request_count("create", "jobs.batch");
    let fresh = env.fresh_executor().await;
    let again = fresh.submit(&spec, "long-1", NS).await.unwrap();
    assert_eq!(again, id);
    let answer = fresh.status(&id).await.unwrap();
    assert_eq!(
        (answer.state, answer.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{answer:?}"
    );
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates);
    assert_eq!(env.sim.count("batch", "jobs"), 0, "nothing ran again");
}

/// I2, I3: a cancel whose outcome record cannot be written (the API server refuses every
/// create of it) deletes nothing: the job runs on, marked, and is never neither running nor
/// recorded. The cancel is accepted (CANCELLING, saying why it is not done), a replica started
/// afterwards finds the job CANCELLING (never CANCELLED while it runs), and the job id
/// submitted again answers that run and creates nothing. Once records can be written, a
/// settler finishes the cancel: the record kept, then the Job deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_whose_record_fails_leaves_the_job_marked_until_a_settler_records_it() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (spec, id) = running(&env, &gate, "held").await;
    let refused = server_error(&env, "create", "configmaps");
    let CancelOutcome::Requested(answer) = env.executor.cancel(&id).await.unwrap() else {
        panic!("the cancel is accepted");
    };
    assert_eq!(answer.state, JobState::Cancelling, "{answer:?}");
    assert!(answer.message.contains("not done yet"), "{answer:?}");
    let job = env.job_object(&id).expect("the Job, running on");
    assert!(
        job.pointer("/metadata/deletionTimestamp").is_none(),
        "{job}"
    );
    assert!(
        job.pointer(&format!(
            "/metadata/annotations/{}",
            CANCEL_ANNOTATION.replace('/', "~1")
        ))
        .is_some(),
        "marked: {job}"
    );
    assert_eq!(env.sim.request_count("delete", "jobs.batch"), 0);
    assert!(!recorded(&env, &id.name));
    let creates = env.sim.request_count("create", "jobs.batch");
    let fresh = env.fresh_executor().await;
    let answer = fresh.status(&id).await.unwrap();
    assert_eq!(answer.state, JobState::Cancelling, "{answer:?}");
    // The submission's create meets the marked Job (409) and answers its run.
    assert_eq!(fresh.submit(&spec, "held-1", NS).await.unwrap(), id);
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates + 1);
    let still = env.job_object(&id).expect("still there");
    assert_eq!(still["metadata"]["uid"], job["metadata"]["uid"]);
    assert_eq!(env.sim.count("batch", "jobs"), 1);
    env.sim.remove_fault(refused);
    eventually(
        "a settler to record the cancel and delete the Job",
        || async { (recorded(&env, &id.name) && env.job_object(&id).is_none()).then_some(()) },
    )
    .await;
    // Once its watch shows the Job gone.
    eventually("CANCELLED", || async {
        (fresh.status(&id).await.unwrap().state == JobState::Cancelled).then_some(())
    })
    .await;
    assert_eq!(env.sim.count("batch", "jobs"), 0, "nothing ran again");
}

/// A cancel whose process went between its mark and its record (nothing recorded, nothing
/// deleted) is finished by a settler: CANCELLED recorded, naming who asked as the mark does,
/// then the Job deleted. Never CANCELLING forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_abandoned_after_its_mark_is_finished_by_a_settler() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "abandoned").await;
    // The mark, as a cancel that went at once after it left it.
    let jobs: Api<Job> = Api::namespaced(env.admin_client().await, NS);
    let mark = serde_json::json!({"metadata": {"annotations": {
        CANCEL_ANNOTATION: jiff::Timestamp::now().to_string(),
        CANCELLED_BY_ANNOTATION: "a replica that went",
    }}});
    jobs.patch(&id.name, &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    eventually("a settler to finish the cancel", || async {
        (recorded(&env, &id.name) && env.job_object(&id).is_none()).then_some(())
    })
    .await;
    let record = env
        .sim
        .object("", "configmaps", NS, &record_name(id.kind, &id.name))
        .expect("the record");
    assert!(
        record.to_string().contains("a replica that went"),
        "who asked: {record}"
    );
    let answer = env.fresh_executor().await.status(&id).await.unwrap();
    assert_eq!(
        (answer.state, answer.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{answer:?}"
    );
}

/// A cancel recorded whose delete fails (the API server refuses it) answers the error, and
/// the job, still running, is CANCELLING to every process, never CANCELLED, until a settler
/// deletes it once the server takes deletes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_recorded_but_not_deleted_is_cancelling_until_a_settler_deletes_the_job() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "undeleted").await;
    let refused = server_error(&env, "delete", "jobs.batch");
    env.executor
        .cancel(&id)
        .await
        .expect_err("the delete fails");
    assert!(recorded(&env, &id.name), "recorded before the delete");
    let job = env.job_object(&id).expect("the Job, running on");
    assert!(
        job.pointer("/metadata/deletionTimestamp").is_none(),
        "{job}"
    );
    for answer in [
        env.executor.status(&id).await.unwrap(),
        env.fresh_executor().await.status(&id).await.unwrap(),
    ] {
        assert_eq!(answer.state, JobState::Cancelling, "{answer:?}");
    }
    // Nor does a process whose watch of Jobs cannot list yet take the Job for gone.
    let unlisted = server_error(&env, "list", "jobs.batch");
    let answer = env.fresh_executor().await.status(&id).await.unwrap();
    assert_eq!(answer.state, JobState::Cancelling, "{answer:?}");
    env.sim.remove_fault(unlisted);
    env.sim.remove_fault(refused);
    eventually("a settler to delete the Job", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Cancelled, "{outcome:?}");
    // Gone, it is CANCELLED, never "no such job", to a process whose watch of Jobs cannot list
    // yet: the API server's word that the Job is gone lets the record answer.
    let unlisted = server_error(&env, "list", "jobs.batch");
    let answer = env.fresh_executor().await.status(&id).await.unwrap();
    assert_eq!(answer.state, JobState::Cancelled, "{answer:?}");
    env.sim.remove_fault(unlisted);
}

/// A replica whose watch has not delivered a Job created through another replica (its stream
/// stalled) does not take the Job for gone: the cancel's record, kept while the Job's delete
/// is refused, does not make it answer CANCELLED for a job that still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_has_not_seen_the_job_answers_cancelling_not_its_record() {
    let env = Env::start().await;
    // This replica watches the namespace; the other lists it before the job, and its watch
    // then hears nothing.
    let never = ExecutionId::new(CLUSTER, JobKind::Job, NS, "never-created");
    env.executor.status(&never).await.expect_err("no such job");
    env.sim.add_fault(
        FaultRule::new(FaultAction::StallWatch)
            .verbs(&["watch"])
            .resources(&["jobs.batch"]),
    );
    let other = env.fresh_executor().await;
    other.status(&never).await.expect_err("no such job");
    let gate = Gate::new();
    let spec = spec_of(&shell("unseen", &gate.wait("never"), ""));
    let id = env.executor.submit(&spec, "unseen-1", NS).await.unwrap();
    server_error(&env, "delete", "jobs.batch");
    env.executor
        .cancel(&id)
        .await
        .expect_err("the delete fails");
    assert!(recorded(&env, &id.name), "recorded before the delete");
    let answer = other.status(&id).await.unwrap();
    assert_eq!(answer.state, JobState::Cancelling, "{answer:?}");
}

/// A cancel costs two writes beyond its mark and its delete: its outcome record, written
/// before the delete, and the release of the kubeferry finalizer the Job carries from its
/// create (so that it cannot go unrecorded while nobody watches), once the record is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_costs_its_mark_its_record_and_its_delete() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "counted").await;
    env.sim.reset_counters();
    env.executor.cancel(&id).await.unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Cancelled);
    eventually("the Job to go", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    let writes =
        ["create", "update", "patch", "delete"].map(|verb| (verb, env.sim.request_count(verb, "")));
    assert_eq!(
        writes,
        [("create", 1), ("update", 0), ("patch", 2), ("delete", 1)],
        "the record's create, the mark's patch, the Job's delete, the finalizer's release"
    );
    assert_eq!(env.sim.request_count("create", "configmaps"), 1);
    assert_eq!(env.sim.request_count("patch", "jobs.batch"), 2);
    assert_eq!(env.sim.request_count("delete", "jobs.batch"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_past_its_retention_is_deleted_and_the_job_id_may_run_again() {
    let mut settings = Settings::fast();
    settings.executor.records.retention = Duration::from_millis(300);
    settings.executor.records.janitor_interval = Duration::from_millis(100);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let spec = spec_of(&shell("brief", "echo done", "ttlAfterFinished: 0s"));
    let id = env.executor.submit(&spec, "brief-1", NS).await.unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
    eventually("the record to be written, then expire", || async {
        (env.job_object(&id).is_none()
            && env.sim.request_count("delete", "configmaps") == 1
            && !recorded(&env, &id.name))
        .then_some(())
    })
    .await;
    // Past the retention, the job id is free: a submission runs it again.
    let creates = env.sim.request_count("create", "jobs.batch");
    let fresh = env.fresh_executor().await;
    let again = fresh.submit(&spec, "brief-1", NS).await.unwrap();
    assert_eq!(again, id);
    assert_eq!(env.sim.request_count("create", "jobs.batch"), creates + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_configmaps_jobs_still_run_and_only_the_record_is_missing() {
    let warnings = captured_warnings();
    let config = SimConfig {
        rbac: true,
        ..SimConfig::for_tests()
    };
    let env = Env::start_with(config, Settings::fast()).await;
    let permissions: Vec<rbac::Permission> = rbac::permissions(&[JobKind::Job])
        .into_iter()
        .filter(|p| p.resource != "configmaps")
        .collect();
    let role = rbac::role("no-records", Some(NS), &permissions);
    let (account, binding) = rbac::binding("no-records", "no-records", Some(NS));
    for object in [
        serde_json::to_value(&role).unwrap(),
        serde_json::to_value(&account).unwrap(),
        serde_json::to_value(&binding).unwrap(),
    ] {
        env.sim.create(NS, object).unwrap();
    }
    let kubeferry = executor_as(
        &env.sim,
        &env.sim.token_for(NS, "no-records"),
        &env.settings,
    )
    .await;
    let spec = spec_of(&shell("plain", "echo fine; exit 2", ""));
    let id = kubeferry.submit(&spec, "plain-1", NS).await.unwrap();
    let (outcome, _) = wait_on(&kubeferry, &id).await;
    assert_eq!(
        outcome_of(&outcome),
        (JobState::Failed, Reason::Error, Some(2))
    );
    assert!(!recorded(&env, &id.name));
    assert_eq!(kubeferry.status(&id).await.unwrap(), outcome);
    // What cannot be kept is said once for the namespace, not once per job.
    let other = kubeferry
        .submit(&spec_of(&shell("other", "exit 0", "")), "plain-2", NS)
        .await
        .unwrap();
    let (other_outcome, _) = wait_on(&kubeferry, &other).await;
    assert_eq!(other_outcome.state, JobState::Succeeded);
    assert!(!recorded(&env, &other.name));
    let said = warnings
        .text()
        .matches("outcome records cannot be kept here")
        .count();
    assert_eq!(said, 1, "{}", warnings.text());
}

/// Two replicas record the same end on the Job a moment apart, from different views: the
/// second write carries the resourceVersion it read, so it cannot replace the first (it is
/// refused, and the settler judges the Job again: a recorded Job is not written again).
/// Without the precondition, the second write stood, whatever it knew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replicas_record_never_replaces_the_first() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "raced").await;
    let pod = env.pod_of(&id).await;
    // This replica's settler will record the eviction on the Job: its write is held.
    let patches = env.sim.request_count("patch", "jobs.batch");
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["patch"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    env.sim.evict_pod(NS, &pod).expect("the pod is evicted");
    eventually("this replica's record to be on its way", || async {
        (env.sim.request_count("patch", "jobs.batch") > patches).then_some(())
    })
    .await;
    // Meanwhile another replica records the same end with details this one cannot match.
    let mut first = ExecutionInfo::new(JobState::Failed, Reason::Evicted)
        .with_message("recorded first by another replica");
    first.exit_code = Some(137);
    first.started_at = Some(jiff::Timestamp::from_second(1).unwrap());
    first.finished_at = Some(jiff::Timestamp::from_second(2).unwrap());
    let jobs: Api<Job> = Api::namespaced(env.admin_client().await, NS);
    let record = serde_json::json!({ "metadata": { "annotations": {
        kubeferry_core::marks::OUTCOME_ANNOTATION: kubeferry_core::marks::outcome_record(&first),
    } } });
    jobs.patch(&id.name, &PatchParams::default(), &Patch::Merge(&record))
        .await
        .expect("the first record");
    env.sim.remove_fault(hold);
    // The held write reaches the server after the first record, and is refused.
    let answer = env
        .status_until(&id, "the outcome", ExecutionInfo::is_terminal)
        .await;
    assert_eq!(answer, first, "{answer:?}");
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), first);
    let job = env.job_object(&id).expect("the Job");
    let on_job: ExecutionInfo = serde_json::from_str(
        job["metadata"]["annotations"][kubeferry_core::marks::OUTCOME_ANNOTATION]
            .as_str()
            .expect("a record on the Job"),
    )
    .unwrap();
    assert_eq!(on_job, first, "the first record stands");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_whose_job_is_gone_is_listed_from_its_record() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "listed").await;
    let created = env
        .job_object(&id)
        .and_then(|job| {
            job["metadata"]["creationTimestamp"]
                .as_str()
                .map(str::to_string)
        })
        .expect("the Job's creation time");
    env.executor.cancel(&id).await.unwrap();
    eventually("the Job to go and its outcome to be recorded", || async {
        (env.job_object(&id).is_none() && recorded(&env, &id.name)).then_some(())
    })
    .await;
    // A later process lists it, as its status answers it: from the record alone.
    let fresh = env.fresh_executor().await;
    for listed in [
        fresh.list(NS, None).await.unwrap(),
        fresh.list_all_namespaces(None).await.unwrap(),
        fresh
            .list(NS, Some("kubeferry.dev/job-id=listed-1"))
            .await
            .unwrap(),
    ] {
        let [job] = listed.as_slice() else {
            panic!("one job, got {listed:#?}");
        };
        assert_eq!(job.id, id);
        assert_eq!(job.job_id.as_deref(), Some("listed-1"));
        assert_eq!(job.status, fresh.status(&id).await.unwrap());
        assert_eq!(
            (job.status.state, job.status.reason),
            (JobState::Cancelled, Reason::Cancelled)
        );
        assert_eq!(
            job.created_at.map(|at| at.to_string()),
            Some(created.clone())
        );
        assert_eq!((job.pod.as_deref(), job.attempts), (None, 0));
    }
    // A record keeps no label but the job id's: another selector does not find it.
    assert!(fresh.list(NS, Some("team=data")).await.unwrap().is_empty());
    assert!(
        fresh
            .list(NS, Some("kubeferry.dev/job-id=other"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Another replica records a job's end with less than this one read (no exit code: its pods'
/// watch lagged), lets the Job go with a copy of that record, and the record is deleted by
/// hand, all before this replica's watches show any of it. This replica's own record, written
/// then, gives way to the Job's copy, which every replica answered: it answers that copy, and
/// never its own reading. Without it, this replica answered the exit code and its record
/// stood, while the other replica had answered none (the chaos command's `c34-224`, I7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_again_from_a_lagging_view_gives_way_to_the_objects_copy() {
    let env = Env::start().await;
    let gate = Gate::new();
    let (_, id) = running(&env, &gate, "relayed").await;
    // This replica's record of the end is held on its way.
    let creates = env.sim.request_count("create", "configmaps");
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["create"])
            .resources(&["configmaps"])
            .times(1),
    );
    gate.open("never");
    eventually("this replica's record to be on its way", || async {
        (env.sim.request_count("create", "configmaps") > creates).then_some(())
    })
    .await;
    // From here its watches deliver nothing.
    env.watches_open(NAMESPACE_WATCHES).await;
    env.sim.stall_watches(Duration::from_secs(600));
    // Another replica records the end without the exit code, lets the Job go with a copy of
    // its record, and the record is deleted by hand.
    let job = env.job_object(&id).expect("the Job");
    let mut first = ExecutionInfo::new(JobState::Succeeded, Reason::Completed)
        .with_message("recorded first by another replica");
    first.started_at = Some(jiff::Timestamp::from_second(1).unwrap());
    first.finished_at = Some(jiff::Timestamp::from_second(2).unwrap());
    let record = OutcomeRecord {
        kind: JobKind::Job,
        object: id.name.clone(),
        job_id: Some("relayed-1".to_string()),
        spec_hash: job["metadata"]["annotations"][kubeferry_core::marks::SPEC_HASH_ANNOTATION]
            .as_str()
            .map(str::to_string),
        outcome: first.clone(),
        recorded_at: Some(jiff::Timestamp::now()),
        created_at: None,
        cancelled_by: None,
        attempts: Vec::new(),
    };
    let client = env.admin_client().await;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), NS);
    let config_map = serde_json::from_value(record.config_map(NS)).unwrap();
    config_maps
        .create(&Default::default(), &config_map)
        .await
        .expect("the other replica's record");
    let jobs: Api<Job> = Api::namespaced(client, NS);
    let release = serde_json::json!({ "metadata": {
        "finalizers": [],
        "annotations": {
            kubeferry_core::marks::KEPT_OUTCOME_ANNOTATION:
                kubeferry_core::marks::outcome_record(&first),
        },
    } });
    jobs.patch(&id.name, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("let go of with a copy");
    let name = record_name(JobKind::Job, &id.name);
    config_maps
        .delete(&name, &Default::default())
        .await
        .expect("deleted by hand");
    // This replica's record lands now, with the exit code it read; its watches still lag.
    env.sim.remove_fault(hold);
    eventually("this replica's record to be written", || async {
        recorded(&env, &id.name).then_some(())
    })
    .await;
    let meanwhile = env.executor.status(&id).await.expect("a status");
    assert!(!meanwhile.is_terminal(), "{meanwhile:?}");
    // Its watches catch up: the Job's copy is the answer, and the record says the same.
    env.sim.cut_watches();
    let answer = env
        .status_until(&id, "the outcome", ExecutionInfo::is_terminal)
        .await;
    assert_eq!(answer, first, "{answer:?}");
    eventually("the record to give way to the Job's copy", || async {
        let kept = config_maps.get(&name).await.ok()?;
        let record = OutcomeRecord::read(&kept.metadata, kept.data.as_ref())?;
        (record.outcome == first).then_some(())
    })
    .await;
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), first);
}

/// A replica whose watches lag cancels a job another replica stopped a moment ago (its image
/// never pulled): its read of the Job carries the outcome recorded on it, so the cancel answers
/// that end, and so does every status after it, though its watch still shows the Job held
/// with no outcome (the chaos command's `c9-207`: a cancel answered FAILED, then a status
/// QUEUED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_finds_the_job_recorded_elsewhere_answers_that_end_from_then_on() {
    // This replica would wait a minute for the image; the other one gives up at once.
    let patient = Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_secs(60));
    let env = Env::start_with(SimConfig::for_tests(), patient).await;
    let yaml =
        "name: elsewhere\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";
    let id = env.submit(yaml).await;
    env.status_until(&id, "pulling", |info| {
        info.reason == Reason::ImagePullBackOff
    })
    .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    env.sim.stall_watches(Duration::from_secs(600));
    // The other replica, its watches opened after the stall, stops the job, records its end
    // and lets go of the Job.
    let other = executor_as(&env.sim, env.sim.admin_token(), &Settings::fast()).await;
    let (recorded, _) = wait_on(&other, &id).await;
    assert_eq!(recorded.reason, Reason::ImagePullFailed, "{recorded:?}");
    eventually("the Job to be let go with the outcome on it", || async {
        let job = env.job_object(&id)?;
        let let_go = job["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
        (let_go && outcome_annotation(&job).as_ref() == Some(&recorded)).then_some(())
    })
    .await;
    let cancel = env.executor.cancel(&id).await.expect("cancelled");
    assert_eq!(cancel, CancelOutcome::AlreadyEnded(recorded.clone()));
    for _ in 0..3 {
        assert_eq!(env.executor.status(&id).await.unwrap(), recorded);
    }
}

/// A Job the server will not let go of (every patch refused: a validation, an admission
/// policy, a Role without `patch`) still answers its recorded end: the record waits for the
/// release only while a release can go through. The Job stays held, as `sweep --release`
/// lets go of it once the refusal is mended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_release_is_refused_answers_its_record_all_the_same() {
    for code in [422, 403] {
        let env = Env::start().await;
        let refused = env.sim.add_fault(
            FaultRule::new(FaultAction::error(code))
                .verbs(&["patch"])
                .resources(&["jobs.batch"]),
        );
        let id = env
            .submit(&shell(&format!("kept{code}"), "echo done", ""))
            .await;
        let (outcome, _) = env.wait(&id).await;
        assert_eq!(outcome.state, JobState::Succeeded, "{code}: {outcome:?}");
        assert_eq!(outcome.exit_code, Some(0), "{code}: {outcome:?}");
        let job = env.job_object(&id).expect("the Job");
        assert_eq!(
            job["metadata"]["finalizers"][0],
            kubeferry_core::marks::RECORD_FINALIZER,
            "{code}: still held"
        );
        let fresh = env.fresh_executor().await;
        assert_eq!(fresh.status(&id).await.unwrap(), outcome, "{code}");
        env.sim.remove_fault(refused);
    }
}
