//! Truth with nobody watching: a job submitted by a process that then exits, which ends or is
//! deleted while no kubeferry process watches its namespace, still answers its first run to
//! the next process, and its job id never runs twice. The kubeferry finalizer every object
//! carries from its create holds the object until some process records its outcome
//! (docs/INVARIANTS.md, "What the cluster holds when no kubeferry runs").
//!
//! Each step runs in a fresh executor that is dropped before the next starts, and the tests
//! check that the cluster holds no watch in between: no kubeferry process is there.

use kubeferry_core::marks::RECORD_FINALIZER;
use kubeferry_core::record::record_name;
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use kubeferry_kube::Executor;
use kubeferry_sim::{CrdBundle, SimConfig};

use crate::support::*;

/// A cluster serving JobSets too; the env's own executor is never used.
async fn env() -> Env {
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    Env::start_with(config, Settings::fast()).await
}

/// Runs `step` in a process of its own (a fresh executor), then ends that process and waits
/// until the cluster holds none of its watches.
async fn in_a_process_of_its_own<T, F, Fut>(env: &Env, step: F) -> T
where
    F: FnOnce(Executor) -> Fut,
    Fut: std::future::Future<Output = (Executor, T)>,
{
    let executor = env.fresh_executor().await;
    let (executor, answer) = step(executor).await;
    drop(executor);
    eventually("no kubeferry process to watch the namespace", || async {
        (env.sim.open_watches() == 0).then_some(())
    })
    .await;
    answer
}

/// Where the object of a job lives at the cluster: (group, resource).
fn resource_of(kind: JobKind) -> (&'static str, &'static str) {
    match kind {
        JobKind::Job => ("batch", "jobs"),
        JobKind::JobSet => ("jobset.x-k8s.io", "jobsets"),
        JobKind::Pod => ("", "pods"),
        other => panic!("not a kind of these tests: {other:?}"),
    }
}

/// The job's object as the cluster stores it (no API request).
fn object(env: &Env, id: &ExecutionId) -> Option<serde_json::Value> {
    let (group, resource) = resource_of(id.kind);
    env.sim.object(group, resource, &id.namespace, &id.name)
}

/// Waits until the object is deleted (it has a deletionTimestamp) and held by kubeferry's
/// finalizer: nobody recorded it yet, so nothing lets it go.
async fn held_while_deleted(env: &Env, id: &ExecutionId) {
    let object = eventually("the object deleted and held", || async {
        object(env, id).filter(|o| o.pointer("/metadata/deletionTimestamp").is_some())
    })
    .await;
    let finalizers = object
        .pointer("/metadata/finalizers")
        .and_then(|f| f.as_array())
        .cloned()
        .unwrap_or_default();
    assert!(
        finalizers.iter().any(|f| f == RECORD_FINALIZER),
        "deleted while nobody watched, the object must wait for its record: {object:#}"
    );
}

/// Submits `yaml` under `job_id` from a process that then exits.
async fn submitted_and_left(env: &Env, yaml: &str, job_id: &str) -> ExecutionId {
    let spec = spec_of(yaml);
    in_a_process_of_its_own(env, |executor| async move {
        let id = executor
            .submit(&spec, job_id, NS)
            .await
            .expect("the job is submitted");
        (executor, id)
    })
    .await
}

/// Asks a fresh process for the job's status until it is terminal; then waits until that
/// process has recorded the outcome and let the object go: gone, or with `kept` still there
/// without kubeferry's finalizer.
async fn answered_by_a_new_process(env: &Env, id: &ExecutionId) -> ExecutionInfo {
    answered_and_let_go(env, id, false).await
}

async fn answered_and_let_go(env: &Env, id: &ExecutionId, kept: bool) -> ExecutionInfo {
    let id = id.clone();
    in_a_process_of_its_own(env, |executor| async move {
        let answer = status_until(
            &executor,
            &id,
            "a terminal answer",
            ExecutionInfo::is_terminal,
        )
        .await;
        // Polled by hand: a timeout shows the record and the object as they stand.
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let recorded = env
                .sim
                .object("", "configmaps", NS, &record_name(id.kind, &id.name))
                .is_some();
            let current = object(env, &id);
            let let_go = match &current {
                None => !kept,
                Some(o) => {
                    kept && o
                        .pointer("/metadata/finalizers")
                        .and_then(|f| f.as_array())
                        .is_none_or(|f| f.iter().all(|f| f != RECORD_FINALIZER))
                }
            };
            if recorded && let_go {
                break;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "timed out waiting for the outcome recorded and the object let go: recorded \
                 {recorded}; the object's metadata: {:#}",
                current.map(|o| o["metadata"].clone()).unwrap_or_default()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        (executor, answer)
    })
    .await
}

/// Submits the job id again from a fresh process and checks that it answers the first run,
/// creates nothing, and answers its outcome.
async fn submitted_again_runs_nothing(
    env: &Env,
    yaml: &str,
    job_id: &str,
    first: &ExecutionId,
    outcome: &ExecutionInfo,
) {
    let (group, resource) = resource_of(first.kind);
    let resource = match group {
        "" => resource.to_string(),
        group => format!("{resource}.{group}"),
    };
    let creates = env.sim.request_count("create", &resource);
    let jobs_created = env.sim.request_count("create", "jobs.batch");
    let spec = spec_of(yaml);
    let first = first.clone();
    let again = in_a_process_of_its_own(env, |executor| async move {
        let again = executor
            .submit(&spec, job_id, NS)
            .await
            .expect("the job id is answered");
        let status = executor.status(&again).await.expect("its status");
        (executor, (again, status))
    })
    .await;
    assert_eq!(again.0, first, "the job id names its first run");
    assert_eq!(
        (again.1.state, again.1.reason, again.1.exit_code),
        (outcome.state, outcome.reason, outcome.exit_code),
        "{:#?}",
        again.1
    );
    assert_eq!(env.sim.request_count("create", &resource), creates);
    assert_eq!(env.sim.request_count("create", "jobs.batch"), jobs_created);
}

/// Waits until the job has a pod (no process watches: read from the cluster's store).
async fn a_pod_runs(env: &Env) {
    eventually("a pod running", || async {
        (env.sim.count("", "pods") >= 1).then_some(())
    })
    .await;
}

/// A job (`yaml`) submitted and left, deleted by someone else while its pod runs and nobody
/// watches: `FAILED DeletedExternally` from a new process, and never run again.
async fn running_then_deleted_while_nobody_watched(yaml: &str, job_id: &str) {
    let env = env().await;
    let id = submitted_and_left(&env, yaml, job_id).await;
    a_pod_runs(&env).await;
    env.delete_job_as_admin(&id).await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Failed, Reason::DeletedExternally),
        "{outcome:#?}"
    );
    submitted_again_runs_nothing(&env, yaml, job_id, &id, &outcome).await;
}

/// A job (`yaml`) submitted and left, then cancelled by a process that exited at once:
/// its pods go though no process is left to let it go, and it is CANCELLED from a new
/// process and never run again.
async fn cancelled_by_a_process_that_exited(yaml: &str, job_id: &str) {
    let env = env().await;
    let id = submitted_and_left(&env, yaml, job_id).await;
    a_pod_runs(&env).await;
    let cancelled = id.clone();
    in_a_process_of_its_own(&env, |executor| async move {
        status_until(&executor, &cancelled, "started", is(JobState::Started)).await;
        executor.cancel(&cancelled).await.expect("the cancel");
        (executor, ())
    })
    .await;
    // The work stops even if no process is left to let the object go: its pods go first. A
    // bare pod is its own object: deleted (its cancel recorded first, nothing holds it).
    eventually("the cancelled job's work to stop", || async {
        let stopped = match id.kind {
            JobKind::Pod => object(&env, &id)
                .is_none_or(|pod| pod.pointer("/metadata/deletionTimestamp").is_some()),
            _ => env.sim.count("", "pods") == 0,
        };
        stopped.then_some(())
    })
    .await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(outcome.state, JobState::Cancelled, "{outcome:#?}");
    submitted_again_runs_nothing(&env, yaml, job_id, &id, &outcome).await;
}

const FAIL: &str =
    "name: fail\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: ['echo about to fail; exit 3']\n";
const SLEEP: &str = "name: sleep\nimage: busybox:1.36\ncommand: [sh, -c, 'sleep 60']\n";

/// The sequence a new user tries: submit and exit, the job fails, `kubectl delete job`, then
/// `status` and a resubmission from new processes answer the first run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_failed_and_was_deleted_while_nobody_watched_answers_its_first_run() {
    let env = env().await;
    let id = submitted_and_left(&env, FAIL, "unseen-fail").await;
    eventually("the Job controller's verdict", || async {
        let job = object(&env, &id)?;
        let conditions = job.pointer("/status/conditions")?.as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Failed" && c["status"] == "True")
            .then_some(())
    })
    .await;
    env.delete_job_as_admin(&id).await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:#?}"
    );
    assert!(outcome.started_at.is_some(), "{outcome:#?}");
    submitted_again_runs_nothing(&env, FAIL, "unseen-fail", &id, &outcome).await;
}

/// A job that was running when someone deleted it, with nobody watching: deleted externally,
/// from a new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_deleted_while_nobody_watched_was_deleted_externally() {
    running_then_deleted_while_nobody_watched(SLEEP, "unseen-running").await;
}

/// A job removed by its TTL while nobody watched (the TTL controller deletes in the
/// foreground: its pods go first): its verdict is kept, and it runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_removed_by_its_ttl_while_nobody_watched_answers_its_first_run() {
    let env = env().await;
    let yaml = format!("{FAIL}ttlAfterFinished: 0s\n");
    let id = submitted_and_left(&env, &yaml, "unseen-ttl").await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:#?}"
    );
    assert!(outcome.started_at.is_some(), "{outcome:#?}");
    submitted_again_runs_nothing(&env, &yaml, "unseen-ttl", &id, &outcome).await;
}

/// A job cancelled by a process that exited at once (before any settler let its object go):
/// CANCELLED from a new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_by_a_process_that_exited_stays_cancelled() {
    cancelled_by_a_process_that_exited(SLEEP, "unseen-cancel").await;
}

/// A JobSet that failed and was deleted while nobody watched: its first run's outcome from a
/// new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_that_failed_and_was_deleted_while_nobody_watched_answers_its_first_run() {
    let env = env().await;
    let yaml = "kind: JobSet\nname: fails\nreplicatedJobs:\n  - name: workers\n    replicas: 1\n    image: busybox:1.36\n    command: [sh, -c, 'exit 3']\n";
    let id = submitted_and_left(&env, yaml, "unseen-jobset").await;
    assert!(matches!(spec_of(yaml), JobSpec::JobSet(_)));
    eventually("the JobSet's verdict", || async {
        let set = object(&env, &id)?;
        set.pointer("/status/terminalState")?.as_str().map(|_| ())
    })
    .await;
    env.delete_job_as_admin(&id).await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(outcome.state, JobState::Failed, "{outcome:#?}");
    submitted_again_runs_nothing(&env, yaml, "unseen-jobset", &id, &outcome).await;
}

/// A JobSet running when someone deleted it, with nobody watching: deleted externally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobset_deleted_while_nobody_watched_was_deleted_externally() {
    running_then_deleted_while_nobody_watched(
        "kind: JobSet\nname: runs\nreplicatedJobs:\n  - name: workers\n    replicas: 1\n    image: busybox:1.36\n    command: [sh, -c, 'sleep 60']\n",
        "unseen-jobset-running",
    )
    .await;
}

/// A JobSet cancelled by a process that exited at once: CANCELLED from a new process, and
/// never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_cancelled_by_a_process_that_exited_stays_cancelled() {
    cancelled_by_a_process_that_exited(
        "kind: JobSet\nname: cancelled\nreplicatedJobs:\n  - name: workers\n    replicas: 1\n    image: busybox:1.36\n    command: [sh, -c, 'sleep 60']\n",
        "unseen-jobset-cancel",
    )
    .await;
}

/// A JobSet removed by its TTL while nobody watched: its first run's outcome, and never run
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_removed_by_its_ttl_while_nobody_watched_answers_its_first_run() {
    let env = env().await;
    let yaml = "kind: JobSet\nname: brief\nttlAfterFinished: 1s\nreplicatedJobs:\n  - name: workers\n    replicas: 1\n    image: busybox:1.36\n    command: [sh, -c, 'exit 3']\n";
    let id = submitted_and_left(&env, yaml, "unseen-jobset-ttl").await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(outcome.state, JobState::Failed, "{outcome:#?}");
    submitted_again_runs_nothing(&env, yaml, "unseen-jobset-ttl", &id, &outcome).await;
}

/// A job (`yaml`) that ended and was recorded by a process that then exited; then its pods
/// and its outcome record are deleted by hand while nobody watches, its object kept. A new
/// process's first answer is the recorded one, whole (state, reason, exit code, times), and
/// its job id never runs again: the object carries the outcome it was let go with.
async fn pods_and_record_deleted_by_hand(yaml: &str, job_id: &str) {
    let env = &env().await;
    let id = submitted_and_left(env, yaml, job_id).await;
    let recorded = answered_and_let_go(env, &id, true).await;
    assert!(recorded.started_at.is_some(), "{recorded:#?}");
    let admin = env.admin_client().await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(admin.clone(), NS);
    // A bare pod is its own object: it is kept, its record alone deleted.
    if id.kind != JobKind::Pod {
        pods.delete_collection(&Default::default(), &Default::default())
            .await
            .expect("the pods deleted");
    }
    let records: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(admin, NS);
    let records = &records;
    records
        .delete(&record_name(id.kind, &id.name), &Default::default())
        .await
        .expect("the record deleted");
    eventually("the pods gone", || async {
        (id.kind == JobKind::Pod || env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    assert!(object(env, &id).is_some(), "the object is kept");
    let again = {
        let id = id.clone();
        in_a_process_of_its_own(env, |executor| async move {
            let answer = executor.status(&id).await.expect("its status");
            (executor, answer)
        })
        .await
    };
    assert_eq!(again, recorded, "the first answer of a new process");
    submitted_again_runs_nothing(env, yaml, job_id, &id, &recorded).await;

    // Its record, written again by that process, deleted once more; and a process that cannot
    // write it meanwhile (its writes wait at the server): the copy on the object is the record,
    // and is the answer.
    records
        .delete(&record_name(id.kind, &id.name), &Default::default())
        .await
        .expect("the record deleted again");
    let held = env.sim.add_fault(
        kubeferry_sim::FaultRule::new(kubeferry_sim::FaultAction::Hold)
            .verbs(&["create"])
            .resources(&["configmaps"]),
    );
    let unwritable = {
        let id = id.clone();
        in_a_process_of_its_own(env, |executor| async move {
            let answer = executor.status(&id).await.expect("its status");
            (executor, answer)
        })
        .await
    };
    env.sim.remove_fault(held);
    assert_eq!(
        unwritable, recorded,
        "the answer of a process that cannot record"
    );
}

/// A container job that succeeded, its pods and record then deleted by hand: still
/// `SUCCEEDED` with exit code 0 and its times, from a new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_pods_and_record_were_deleted_by_hand_answers_its_first_run() {
    pods_and_record_deleted_by_hand(
        "name: done\nimage: busybox:1.36\ncommand: [sh, -c, 'echo done']\n",
        "lost-record",
    )
    .await;
}

/// A JobSet that succeeded, its pods and record then deleted by hand: the same answer from a
/// new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_whose_pods_and_record_were_deleted_by_hand_answers_its_first_run() {
    pods_and_record_deleted_by_hand(
        "kind: JobSet\nname: done\nreplicatedJobs:\n  - name: workers\n    replicas: 1\n    image: busybox:1.36\n    command: [sh, -c, 'echo done']\n",
        "lost-record-jobset",
    )
    .await;
}

const POD_FAIL: &str = "kind: Pod\nname: fail\nimage: busybox:1.36\ncommand: [sh, -c]\nargs: ['echo about to fail; exit 3']\n";
const POD_SLEEP: &str =
    "kind: Pod\nname: sleep\nimage: busybox:1.36\ncommand: [sh, -c, 'sleep 60']\n";

/// A bare pod that failed and was deleted while nobody watched (held by kubeferry's finalizer
/// until a process records it): its first run's outcome from a new process, and never run
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_failed_and_was_deleted_while_nobody_watched_answers_its_first_run() {
    let env = env().await;
    let id = submitted_and_left(&env, POD_FAIL, "unseen-pod-fail").await;
    assert_eq!(id.kind, JobKind::Pod);
    eventually("the pod failed", || async {
        let pod = object(&env, &id)?;
        (pod.pointer("/status/phase")? == "Failed").then_some(())
    })
    .await;
    env.delete_job_as_admin(&id).await;
    held_while_deleted(&env, &id).await;
    let outcome = answered_by_a_new_process(&env, &id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{outcome:#?}"
    );
    assert!(outcome.started_at.is_some(), "{outcome:#?}");
    submitted_again_runs_nothing(&env, POD_FAIL, "unseen-pod-fail", &id, &outcome).await;
}

/// A bare pod running when someone deleted it, with nobody watching: deleted externally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_pod_deleted_while_nobody_watched_was_deleted_externally() {
    running_then_deleted_while_nobody_watched(POD_SLEEP, "unseen-pod-running").await;
}

/// A bare pod cancelled by a process that exited at once: CANCELLED from a new process, and
/// never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cancelled_by_a_process_that_exited_stays_cancelled() {
    cancelled_by_a_process_that_exited(POD_SLEEP, "unseen-pod-cancel").await;
}

/// A bare pod that succeeded, its record then deleted by hand (the pod, its object, kept):
/// the same answer from a new process, and never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_record_was_deleted_by_hand_answers_its_first_run() {
    pods_and_record_deleted_by_hand(
        "kind: Pod\nname: done\nimage: busybox:1.36\ncommand: [sh, -c, 'echo done']\n",
        "lost-record-pod",
    )
    .await;
}
