//! Cancel: returns at once, stops the work, never turns an outcome into CANCELLED, and holds
//! under lost responses.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};
use kubeferry_core::marks::CANCEL_ANNOTATION;
use kubeferry_core::{JobState, Reason};
use kubeferry_kube::CancelOutcome;
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_job_stops_it() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("cancelme", &gate.wait("never"), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let outcome = env.executor.cancel(&id).await.unwrap();
    let CancelOutcome::Requested(info) = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        matches!(info.state, JobState::Cancelling | JobState::Cancelled),
        "{info:?}"
    );
    let (done, _) = env.wait(&id).await;
    assert_eq!(done.state, JobState::Cancelled);
    assert_eq!(done.reason, Reason::Cancelled);
    assert!(done.started_at.is_some(), "{done:?}");
    eventually("the Job and its pods to go", || async {
        (env.job_object(&id).is_none() && env.sim.count("", "pods") == 0).then_some(())
    })
    .await;
    // Another replica, which never saw the job, answers the same from its outcome record
    // (never "no such job", FAILED or DeletedExternally).
    let fresh = env.fresh_executor().await;
    let recorded = fresh.status(&id).await.expect("the recorded outcome");
    assert_eq!(
        (recorded.state, recorded.reason, recorded.started_at),
        (done.state, done.reason, done.started_at),
        "{recorded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_finished_job_keeps_its_outcome() {
    let env = Env::start().await;
    let id = env.submit(&shell("done", "exit 4", "")).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Failed);
    // The settler's own writes for the ended job (its record, the finalizer's release) are
    // done once the Job is released.
    eventually("the ended Job released", || async {
        let job = env.job_object(&id)?;
        job.pointer("/metadata/finalizers")
            .and_then(|f| f.as_array())
            .is_none_or(|f| f.is_empty())
            .then_some(())
    })
    .await;
    let writes = || env.sim.request_count("patch", "") + env.sim.request_count("delete", "");
    let before = writes();
    let cancel = env.executor.cancel(&id).await.unwrap();
    assert_eq!(cancel, CancelOutcome::AlreadyEnded(outcome.clone()));
    assert_eq!(writes(), before, "nothing was marked or deleted");
    let job = env.job_object(&id).expect("the Job stays");
    assert!(
        job["metadata"]["annotations"]
            .get(CANCEL_ANNOTATION)
            .is_none()
    );
    // Any replica still reports the real outcome.
    let fresh = env.fresh_executor().await;
    let cancel = fresh.cancel(&id).await.unwrap();
    assert_eq!(outcome_of(cancel.info()), outcome_of(&outcome));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_unknown_job_is_no_such_job() {
    let env = Env::start().await;
    let error = env
        .executor
        .cancel(&id_of("never-created-1a2b3c4d"))
        .await
        .unwrap_err();
    assert!(error.is_no_such_job(), "{error}");
    assert_eq!(env.sim.request_count("patch", ""), 0);
    assert_eq!(env.sim.request_count("delete", ""), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_twice_is_a_no_op() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("twice", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.executor.cancel(&id).await.unwrap();
    let (cancelled, _) = env.wait(&id).await;
    assert_eq!(cancelled.state, JobState::Cancelled);
    // The first cancel's writes are done once its Job, held until the record was kept, is
    // released and gone (a settler may take the finalizer off too).
    eventually("the released Job to go", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    let writes = || env.sim.request_count("patch", "") + env.sim.request_count("delete", "");
    let before = writes();
    let again = env.executor.cancel(&id).await.unwrap();
    assert_eq!(again, CancelOutcome::AlreadyEnded(cancelled));
    assert_eq!(writes(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_delete_response_still_cancels() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("lostdel", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["delete"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let outcome = env.executor.cancel(&id).await.unwrap();
    assert!(
        matches!(outcome, CancelOutcome::Requested(_)),
        "{outcome:?}"
    );
    let (done, _) = env.wait(&id).await;
    assert_eq!(done.state, JobState::Cancelled);
    // Deleted, and let go by the settler once its record is kept.
    eventually("the cancelled Job to go", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_that_took_effect_unheard_keeps_the_mark() {
    // Every answer to the delete is lost, so kubeferry never hears it worked; a re-read shows
    // the Job being deleted, which counts as done, and the cancel mark stays.
    let settings = Settings::fast().with_retry(|retry| retry.deadline = Duration::from_millis(300));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let gate = Gate::new();
    let id = env.submit(&shell("unheard", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // A finalizer keeps the deleted Job visible.
    let jobs: Api<Job> = Api::namespaced(env.admin_client().await, NS);
    let hold = serde_json::json!({"metadata": {"finalizers": ["example.com/hold"]}});
    jobs.patch(&id.name, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["delete"])
            .resources(&["jobs.batch"]),
    );
    let outcome = env.executor.cancel(&id).await.unwrap();
    assert!(
        matches!(outcome, CancelOutcome::Requested(_)),
        "{outcome:?}"
    );
    let info = env
        .status_until(&id, "cancelled", is(JobState::Cancelled))
        .await;
    assert_eq!(info.reason, Reason::Cancelled);
    let job = env.job_object(&id).expect("held by its finalizer");
    assert!(job["metadata"]["deletionTimestamp"].is_string());
    assert!(
        job["metadata"]["annotations"][CANCEL_ANNOTATION].is_string(),
        "the mark stays: {job:#}"
    );
    // Any replica reads the Job being deleted with the mark as cancelled.
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap().state, JobState::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_job_whose_pod_was_lost_keeps_the_outcome() {
    // The node goes, its pod fails and is removed, the Job fails; only then does a cancel
    // arrive, before anyone asked for the status.
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell("lostcancel", &gate.wait("never"), ""))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let pod = env.pod_of(&id).await;
    env.sim.lose_node("sim-node-1").unwrap();
    let watch = env.executor.container_jobs().watch(NS);
    eventually("the Job's verdict and the pod's removal", || async {
        let failed = env.job_object(&id).is_some_and(|job| {
            job["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "FailureTarget"))
        });
        (failed && watch.pods.tombstone(&pod).is_some()).then_some(())
    })
    .await;
    let cancel = env.executor.cancel(&id).await.unwrap();
    let CancelOutcome::AlreadyEnded(info) = &cancel else {
        panic!("the outcome came first: {cancel:?}");
    };
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.reason, Reason::NodeLost, "{info:?}");
    assert!(env.job_object(&id).is_some(), "nothing was deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_failed_job_whose_pod_was_removed_keeps_the_outcome() {
    // A pod that had ended is removed at once when deleted: its final state shows no
    // deletion. The job failed first; the cancel comes after the pod is gone, before anyone
    // asked for the status, and well within the time a verdict waits for its pod.
    let settings = Settings::fast().with_mapping(|m| m.pod_status_wait = Duration::from_secs(30));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = env.submit(&shell("removed", "echo bad; exit 3", "")).await;
    let pod = env.pod_of(&id).await;
    eventually("the Job's verdict", || async {
        env.job_object(&id).filter(|job| {
            job["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "FailureTarget"))
        })
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.admin_client().await, NS);
    pods.delete(&pod, &Default::default()).await.unwrap();
    let watch = env.executor.container_jobs().watch(NS);
    eventually("the pod's removal to be seen", || async {
        watch.pods.tombstone(&pod).map(|_| ())
    })
    .await;
    let cancel = env.executor.cancel(&id).await.unwrap();
    let CancelOutcome::AlreadyEnded(info) = &cancel else {
        panic!("the outcome came first: {cancel:?}");
    };
    assert_eq!(info.state, JobState::Failed);
    assert_eq!(info.reason, Reason::Error);
    assert_eq!(info.exit_code, Some(3));
    // A replica that never saw the pod reads the outcome recorded from its final state.
    let fresh = env.fresh_executor().await;
    assert_eq!(&fresh.status(&id).await.unwrap(), info);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cancels_at_once_through_two_replicas_both_succeed() {
    // Replica A reads the Job and is about to mark it when replica B's cancel marks and
    // deletes it: A's mark meets a Job that is gone (404). The cancel is done either way.
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("twice", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    let other = env.fresh_executor().await;
    let arrived = env.sim.request_count("patch", "jobs.batch");
    let hold = env.sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["patch"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let first = tokio::spawn({
        let executor = env.executor.clone();
        let id = id.clone();
        async move { executor.cancel(&id).await }
    });
    eventually("the first cancel's mark to be held", || async {
        (env.sim.request_count("patch", "jobs.batch") > arrived).then_some(())
    })
    .await;
    let second = other.cancel(&id).await.expect("the second cancel");
    assert!(matches!(second, CancelOutcome::Requested(_)), "{second:?}");
    eventually("the Job to go", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    assert!(env.sim.remove_fault(hold));
    let first = within("the first cancel", first)
        .await
        .expect("joined")
        .expect("the first cancel is done too, not refused");
    assert!(
        matches!(
            first.info().state,
            JobState::Cancelling | JobState::Cancelled
        ),
        "{first:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_cancel_answers_cancelling_whatever_a_lagging_cache_says() {
    // The replica's watches deliver nothing from the moment the job runs: its cache sees
    // neither the mark nor the deletion its own cancel makes.
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env.submit(&shell("lagging", &gate.wait("never"), "")).await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    env.sim.stall_watches(Duration::from_secs(600));
    let cancel = env.executor.cancel(&id).await.expect("cancelled");
    let CancelOutcome::Requested(info) = &cancel else {
        panic!("{cancel:?}");
    };
    assert_eq!(info.state, JobState::Cancelling, "{info:?}");
    assert_eq!(info.reason, Reason::CancelRequested);
    assert!(info.started_at.is_some(), "the start is kept: {info:?}");
    // Its status, asked of the same lagging cache, does not go back to STARTED either.
    let status = env.executor.status(&id).await.expect("a status");
    assert_eq!(status.state, JobState::Cancelling, "{status:?}");
    // Asked again, with the Job gone and the cache still behind: the cancel stands.
    let again = env.executor.cancel(&id).await.expect("cancelled again");
    assert!(
        matches!(
            again.info().state,
            JobState::Cancelling | JobState::Cancelled
        ),
        "{again:?}"
    );
}
