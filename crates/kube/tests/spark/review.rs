//! One named test per point of the review of Apache Gravitino's executor for SparkApplications
//! (its Kubernetes job executor, apache/gravitino, and the contract its job manager expects:
//! docs/INVARIANTS.md states what each point protects), against the simulated operators:
//!
//! 1. an unreadable status is never "no status"; only an absent status times out, and only
//!    then is the application deleted, after the outcome is recorded (and not while that
//!    delete fails);
//! 2. the cancel mark never turns an outcome reached meanwhile into CANCELLED;
//! 3. a create whose response was lost is adopted, and what leaks is found by the sweep;
//! 4. a stale cache after a cancel through another replica answers "no such job";
//! 5. a delete whose response was lost counts once the application is deleting; the mark stays;
//! 6. an id of another cluster is a configuration error, never "no such job";
//! 7. a forbidden driver pod lookup is a named error that never holds a job STARTED, and a
//!    failed application whose driver still runs gets its driver deleted.

use std::time::Duration;

use kubeferry_core::marks::{CANCEL_ANNOTATION, OUTCOME_ANNOTATION, object_name};
use kubeferry_core::record::record_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobState, Reason};
use kubeferry_kube::logs::TailOptions;
use kubeferry_kube::rbac::SPARK_JOB_PERMISSIONS;
use kubeferry_kube::{CancelOutcome, Error};
use kubeferry_sim::controllers::spark::SparkFault;
use kubeferry_sim::{FaultAction, FaultRule};
use serde_json::Value;

use crate::support::*;

const TIMEOUT: Duration = Duration::from_millis(300);

fn annotation<'a>(app: &'a Value, key: &str) -> Option<&'a str> {
    app.pointer("/metadata/annotations")?.get(key)?.as_str()
}

fn created_at(app: &Value) -> jiff::Timestamp {
    app.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .expect("a creation time")
}

fn driver_name(operator: SparkOperator, app: &str) -> String {
    match operator {
        SparkOperator::Apache => format!("{app}-0-driver"),
        SparkOperator::Kubeflow => format!("{app}-driver"),
    }
}

/// An apache job whose driver runs until `gate` opens, once it is STARTED.
async fn started_behind(env: &Env, gate: &Gate, name: &str) -> ExecutionId {
    let spec = spark_pi(SparkOperator::Apache, &format!("args: ['{}']", gate.arg()));
    let id = env
        .executor
        .submit(&spec, &job_id(name), NS)
        .await
        .expect("submitted");
    until_state(&env.executor, &id, JobState::Started).await;
    id
}

/// A job whose operator writes no status, and the history of its application from before it
/// was created.
async fn silent_job(
    env: &Env,
    operator: SparkOperator,
    job: &str,
) -> (ExecutionId, tokio::task::JoinHandle<Vec<(String, Value)>>) {
    let history = env.app_history(operator, &object_name("", job)).await;
    let id = env
        .executor
        .submit(&spark_pi(operator, ""), job, NS)
        .await
        .expect("submitted");
    (id, history)
}

/// The outcome recorded on an application that was recorded, then deleted (held by
/// kubeferry's finalizer until its record is kept, then let go), and never got a status from
/// its operator.
fn recorded_then_deleted(events: &[(String, Value)], operator: SparkOperator) -> ExecutionInfo {
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["ADDED", "MODIFIED", "MODIFIED", "DELETED"],
        "{operator}"
    );
    assert!(events.iter().all(|(_, app)| app.get("status").is_none()));
    let deleting = |app: &Value| app.pointer("/metadata/deletionTimestamp").is_some();
    assert!(
        !deleting(&events[1].1),
        "{operator}: recorded before the delete"
    );
    assert!(deleting(&events[2].1), "{operator}: then deleted");
    assert_eq!(
        annotation(&events[2].1, OUTCOME_ANNOTATION),
        annotation(&events[1].1, OUTCOME_ANNOTATION)
    );
    serde_json::from_str(
        annotation(&events[1].1, OUTCOME_ANNOTATION).expect("the outcome is recorded first"),
    )
    .expect("the record is a status")
}

#[tokio::test]
async fn review_1_an_unreadable_status_is_never_taken_for_no_status() {
    let env = Env::start_with(spark_config(), Settings::fast().no_status_timeout(TIMEOUT)).await;
    for operator in SparkOperator::ALL {
        let job = job_id("odd");
        env.faults
            .set_for(&object_name("", &job), Some(SparkFault::UnreadableStatus));
        let id = env
            .executor
            .submit(&spark_pi(operator, ""), &job, NS)
            .await
            .expect("submitted");
        let odd = eventually("the unreadable status", || async {
            let info = env.executor.status(&id).await.ok()?;
            (info.reason == Reason::UnrecognizedStatus).then_some(info)
        })
        .await;
        assert_eq!(odd.state, JobState::Queued, "{odd:?}");
        // Long past the no-status timeout, it is still not "no status".
        let app = env.app(operator, &id.name).expect("there");
        pass(created_at(&app) + TIMEOUT * 2).await;
        let later = env.executor.status(&id).await.expect("a status");
        assert!(!later.is_terminal(), "{operator}: {later:?}");
        assert_eq!(later.reason, Reason::UnrecognizedStatus);
        assert!(later.message.contains("cannot be read"), "{later:?}");
        let app = env.app(operator, &id.name).expect("never deleted");
        assert_eq!(annotation(&app, OUTCOME_ANNOTATION), None);
    }
}

#[tokio::test]
async fn review_1_only_an_absent_status_times_out_and_the_application_is_deleted_after_the_outcome_is_recorded()
 {
    let env = Env::start_with(spark_config(), Settings::fast().no_status_timeout(TIMEOUT)).await;
    env.faults.set(Some(SparkFault::NoStatus));
    for operator in SparkOperator::ALL {
        let (id, history) = silent_job(&env, operator, &job_id("silent")).await;
        let (end, seen) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.reason),
            (JobState::Failed, Reason::NoStatusTimeout),
            "{end:?}"
        );
        assert!(end.message.contains("wrote no status"), "{end:?}");
        assert!(
            seen[..seen.len() - 1]
                .iter()
                .all(|i| i.state == JobState::Queued),
            "{seen:?}"
        );
        // The outcome was written on the application before it was deleted, and the operator
        // never wrote a status.
        let events = history.await.expect("the watch ends");
        assert_eq!(recorded_then_deleted(&events, operator), end);
        assert!(env.app(operator, &id.name).is_none());
        // Every replica that saw it go reports the same outcome.
        assert_eq!(env.executor.status(&id).await.expect("known"), end);
    }
}

#[tokio::test]
async fn review_1_an_application_without_status_fails_at_the_timeout_with_nobody_asking() {
    let env = Env::start_with(spark_config(), Settings::fast().no_status_timeout(TIMEOUT)).await;
    env.faults.set(Some(SparkFault::NoStatus));
    for operator in SparkOperator::ALL {
        let (id, history) = silent_job(&env, operator, &job_id("unasked")).await;
        // No status query, no wait: the application's story is read from the cluster.
        let events = history.await.expect("the application's history");
        let record = recorded_then_deleted(&events, operator);
        assert_eq!(
            (record.state, record.reason),
            (JobState::Failed, Reason::NoStatusTimeout),
            "{operator}: {record:?}"
        );
        // It failed at the timeout, counted from the application's creation.
        assert_eq!(
            record.finished_at,
            Some(created_at(&events[0].1) + TIMEOUT),
            "{operator}"
        );
        // Asked at last, the replica that saw it go reports the record.
        assert_eq!(env.executor.status(&id).await.expect("known"), record);
        assert_eq!(
            env.sim
                .request_count("get", "sparkapplications.spark.apache.org")
                + env
                    .sim
                    .request_count("get", "sparkapplications.sparkoperator.k8s.io"),
            0,
            "{operator}: nobody read the application"
        );
    }
}

#[tokio::test]
async fn review_1_while_the_delete_of_an_application_without_status_fails_the_job_is_not_failed_yet()
 {
    let settings = Settings::fast()
        .no_status_timeout(TIMEOUT)
        .retry_deadline(Duration::from_millis(100));
    let env = Env::start_with(spark_config(), settings).await;
    env.faults.set(Some(SparkFault::NoStatus));
    let refuse = env.sim.add_fault(
        FaultRule::new(FaultAction::error(500))
            .verbs(&["delete"])
            .resources(&["sparkapplications.spark.apache.org"]),
    );
    let id = env
        .executor
        .submit(&spark_pi(SparkOperator::Apache, ""), &job_id("stuck"), NS)
        .await
        .expect("submitted");
    let app = env.app(SparkOperator::Apache, &id.name).expect("there");
    pass(created_at(&app) + TIMEOUT).await;
    let held = env.executor.status(&id).await.expect("a status");
    assert_eq!(held.state, JobState::Queued, "{held:?}");
    assert!(held.message.contains("not done yet"), "{held:?}");
    let app = env
        .app(SparkOperator::Apache, &id.name)
        .expect("not deleted");
    assert!(annotation(&app, OUTCOME_ANNOTATION).is_some(), "recorded");

    env.sim.remove_fault(refuse);
    let end = until_state(&env.executor, &id, JobState::Failed).await;
    assert_eq!(end.reason, Reason::NoStatusTimeout);
    // Deleted; let go of once its name hold is over.
    eventually("the application to go", || async {
        env.app(SparkOperator::Apache, &id.name)
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn review_2_a_cancel_mark_racing_an_outcome_keeps_the_outcome() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = started_behind(&env, &gate, "race").await;
    // The cancel reads the running job, and its mark reaches the server only after the job
    // succeeded: the resourceVersion precondition refuses it, and the cancel sees the outcome.
    env.sim.add_fault(
        FaultRule::new(FaultAction::Latency { millis: 2000 })
            .verbs(&["patch"])
            .resources(&["sparkapplications.spark.apache.org"])
            .times(1),
    );
    let canceller = env.executor.clone();
    let cancel_id = id.clone();
    let cancel = tokio::spawn(async move { canceller.cancel(&cancel_id).await });
    eventually("the cancel mark to be on its way", || async {
        (env.sim
            .request_count("patch", "sparkapplications.spark.apache.org")
            > 0)
        .then_some(())
    })
    .await;
    gate.open();
    eventually("the application to succeed", || async {
        let app = env.app(SparkOperator::Apache, &id.name)?;
        apache_history(&app)
            .contains(&"Succeeded".to_string())
            .then_some(())
    })
    .await;
    let outcome = cancel.await.expect("joined").expect("cancel answered");
    assert!(
        matches!(&outcome, CancelOutcome::AlreadyEnded(info) if info.state == JobState::Succeeded),
        "{outcome:?}"
    );
    let app = env.app(SparkOperator::Apache, &id.name).expect("kept");
    assert_eq!(annotation(&app, CANCEL_ANNOTATION), None, "never marked");
    let status = env.executor.status(&id).await.expect("a status");
    assert_eq!(status.state, JobState::Succeeded);
}

/// A cancel that reads a driver that ended on its own (exit 0), the operator's verdict not in
/// yet, has nothing left to stop: it records nothing and deletes nothing, no settler finishes
/// it as a cancel left unfinished, and the verdict, once in, is the outcome everywhere.
#[tokio::test]
async fn review_2_a_driver_that_ended_before_the_cancel_keeps_its_outcome() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = started_behind(&env, &gate, "ended").await;
    // The operator looks away; the driver ends on its own.
    env.faults.set_for(&id.name, Some(SparkFault::NoStatus));
    gate.open();
    let driver = driver_name(SparkOperator::Apache, &id.name);
    eventually("the driver to end", || async {
        let pod = env.pod(&driver)?;
        let code = pod.pointer("/status/containerStatuses/0/state/terminated/exitCode")?;
        (code == 0).then_some(())
    })
    .await;
    let outcome = env.executor.cancel(&id).await.expect("cancel answered");
    assert!(
        matches!(&outcome, CancelOutcome::Requested(info) if !info.is_terminal()),
        "{outcome:?}"
    );
    // Past a settler's time to step in for a cancel left unfinished: nothing happens.
    tokio::time::sleep(env.settings.executor.spark.watching.recheck_interval * 5).await;
    let record = record_name(id.kind, &id.name);
    assert!(env.sim.object("", "configmaps", NS, &record).is_none());
    let app = env.app(SparkOperator::Apache, &id.name).expect("kept");
    assert!(
        app.pointer("/metadata/deletionTimestamp").is_none(),
        "{app}"
    );
    // The operator looks again (a change to the application wakes it).
    env.faults.set_for(&id.name, None);
    let touch = serde_json::json!({"metadata": {"annotations": {"example.com/touched": "yes"}}});
    env.apps_api(SparkOperator::Apache)
        .await
        .patch(
            &id.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&touch),
        )
        .await
        .expect("touched");
    let end = until_state(&env.executor, &id, JobState::Succeeded).await;
    let other = env.fresh_executor(&env.settings).await;
    assert_eq!(other.status(&id).await.expect("recorded"), end);
}

#[tokio::test]
async fn review_2_an_outcome_recorded_before_the_deletion_wins_over_the_cancel() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = started_behind(&env, &gate, "late").await;
    // The mark goes on; the delete reaches the server only after the job succeeded.
    env.sim.add_fault(
        FaultRule::new(FaultAction::Latency { millis: 2000 })
            .verbs(&["delete"])
            .resources(&["sparkapplications.spark.apache.org"])
            .times(1),
    );
    let canceller = env.executor.clone();
    let cancel_id = id.clone();
    let cancel = tokio::spawn(async move { canceller.cancel(&cancel_id).await });
    eventually("the delete to be on its way", || async {
        (env.sim
            .request_count("delete", "sparkapplications.spark.apache.org")
            > 0)
        .then_some(())
    })
    .await;
    gate.open();
    cancel.await.expect("joined").expect("cancel answered");
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(end.state, JobState::Succeeded, "{end:?}");
    // The delete reached the server after the success, with the version the cancel last saw
    // running as its precondition: refused, so the application, which had ended on its own,
    // is not deleted.
    let app = env
        .app(SparkOperator::Apache, &id.name)
        .expect("not deleted");
    assert!(
        annotation(&app, CANCEL_ANNOTATION).is_some(),
        "it was marked"
    );
    assert!(
        app.pointer("/metadata/deletionTimestamp").is_none(),
        "{app}"
    );
    // Another replica, which never saw the job, answers the same from its outcome record.
    let other = env.fresh_executor(&env.settings).await;
    assert_eq!(other.status(&id).await.expect("the outcome record"), end);
}

#[tokio::test]
async fn review_3_a_lost_create_response_is_adopted_and_what_leaks_is_swept() {
    let env = Env::start().await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["create"])
            .resources(&["sparkapplications.sparkoperator.k8s.io"])
            .times(1),
    );
    let job = job_id("lost");
    let id = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Kubeflow, "args: ['sleep=30']"),
            &job,
            NS,
        )
        .await
        .expect("adopted after the lost response");
    assert_eq!(
        env.sim.count("sparkoperator.k8s.io", "sparkapplications"),
        1
    );
    assert_eq!(
        env.sim
            .request_count("create", "sparkapplications.sparkoperator.k8s.io"),
        2,
        "created once, then adopted"
    );
    // A caller that recorded no job for the failed submission finds it with the sweep.
    let orphans = env
        .executor
        .sweep(NS, &Default::default(), true)
        .await
        .expect("swept");
    assert_eq!(orphans.len(), 1);
    assert_eq!(
        (
            &orphans[0].id,
            orphans[0].job_id.as_deref(),
            orphans[0].deleted
        ),
        (&id, Some(job.as_str()), true)
    );
    eventually("the orphan to go", || async {
        env.app(SparkOperator::Kubeflow, &id.name)
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn review_4_a_stale_cache_after_a_cancel_elsewhere_is_no_such_job_not_failed() {
    let env = Env::start().await;
    env.faults.set(Some(SparkFault::NoStatus));
    let id = env
        .executor
        .submit(&spark_pi(SparkOperator::Apache, ""), &job_id("stale"), NS)
        .await
        .expect("submitted");
    // Replica B caches the application while it has no status; its no-status timeout runs
    // out only after its watch has stalled and the application is gone (from its creation,
    // which has whole seconds: a few seconds leave room for the steps below).
    let b = env
        .fresh_executor(&Settings::fast().no_status_timeout(Duration::from_secs(8)))
        .await;
    let other: ExecutionId = format!("{CLUSTER}/sparkapp/{NS}/other")
        .parse()
        .expect("an id");
    assert!(b.status(&other).await.is_err_and(|e| e.is_no_such_job()));
    eventually("B's cache to hold the application", || async {
        b.spark_jobs()
            .watched()
            .iter()
            .flat_map(|(_, watch)| watch.watched())
            .any(|(_, apps)| apps.get(&id.name).is_some())
            .then_some(())
    })
    .await;
    // B's watch stops delivering; replica A cancels the job and its application goes.
    env.sim.stall_watches(Duration::from_secs(30));
    let a = env.fresh_executor(&env.settings).await;
    a.cancel(&id).await.expect("cancelled");
    eventually("the application to go", || async {
        env.app(SparkOperator::Apache, &id.name)
            .is_none()
            .then_some(())
    })
    .await;
    // At the timeout B maps its stale copy (no status): it tries to record a failure, finds
    // the application gone, and from then on says "no such job", which a cancelling caller
    // settles as CANCELLED; never FAILED.
    let patches = env
        .sim
        .request_count("patch", "sparkapplications.spark.apache.org");
    eventually("B to answer no such job", || async {
        match b.status(&id).await {
            Err(error) if error.is_no_such_job() => Some(()),
            Ok(info) if !info.is_terminal() => None,
            other => panic!("B answered {other:?}"),
        }
    })
    .await;
    assert_eq!(
        env.sim
            .request_count("patch", "sparkapplications.spark.apache.org"),
        patches + 1,
        "B acted on its stale copy, and learnt it was gone"
    );
}

#[tokio::test]
async fn review_5_a_lost_delete_response_counts_once_the_application_is_deleting_and_the_mark_stays()
 {
    let settings = Settings::fast().retry_deadline(Duration::from_millis(300));
    let env = Env::start_with(spark_config(), settings).await;
    let job = job_id("lostdelete");
    let history = env
        .app_history(SparkOperator::Apache, &object_name("", &job))
        .await;
    let id = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Apache, "args: ['sleep=30']"),
            &job,
            NS,
        )
        .await
        .expect("submitted");
    until_state(&env.executor, &id, JobState::Started).await;
    let lose = env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["delete"])
            .resources(&["sparkapplications.spark.apache.org"]),
    );
    let outcome = env.executor.cancel(&id).await.expect("the cancel counts");
    assert!(
        matches!(&outcome, CancelOutcome::Requested(info) if matches!(info.state, JobState::Cancelling | JobState::Cancelled)),
        "{outcome:?}"
    );
    env.sim.remove_fault(lose);
    let end = until_state(&env.executor, &id, JobState::Cancelled).await;
    assert_eq!(end.reason, Reason::Cancelled);
    let events = history.await.expect("the watch ends");
    let marked = events
        .iter()
        .position(|(_, app)| annotation(app, CANCEL_ANNOTATION).is_some())
        .expect("marked");
    assert!(
        events[marked..]
            .iter()
            .all(|(_, app)| annotation(app, CANCEL_ANNOTATION).is_some()),
        "the mark was never taken off"
    );
    assert_eq!(events.last().map(|(k, _)| k.as_str()), Some("DELETED"));
}

#[tokio::test]
async fn review_6_an_id_of_another_cluster_is_a_configuration_error() {
    let env = Env::start().await;
    let id: ExecutionId = format!("elsewhere/sparkapp/{NS}/spark-pi-1")
        .parse()
        .expect("an id");
    let wrong = |result: Result<(), Error>| match result {
        Err(Error::WrongCluster { .. }) => {}
        other => panic!("expected a configuration error, got {other:?}"),
    };
    wrong(env.executor.status(&id).await.map(drop));
    wrong(env.executor.cancel(&id).await.map(drop));
    wrong(
        env.executor
            .tail(&id, &TailOptions::default())
            .await
            .map(drop),
    );
    wrong(env.executor.wait(&id, None, |_| {}).await.map(drop));
}

#[tokio::test]
async fn review_7_a_forbidden_driver_lookup_is_named_and_never_holds_the_job_started() {
    let env = rbac_env(Settings::fast()).await;
    let permissions = with_verbs(SPARK_JOB_PERMISSIONS, "pods", &["delete"]);
    let executor = executor_with_permissions(&env, "no-pods", &permissions).await;
    for operator in SparkOperator::ALL {
        let gate = Gate::new();
        let spec = spark_pi(operator, &format!("args: ['exit=3', '{}']", gate.arg()));
        let id = executor
            .submit(&spec, &job_id("blind"), NS)
            .await
            .expect("submitted");
        let running = until_state(&executor, &id, JobState::Started).await;
        assert!(
            running.message.contains("forbidden") && running.message.contains("list pods"),
            "{operator}: the missing permission is named: {running:?}"
        );
        gate.open();
        let (end, _) = run_to_end(&executor, &id).await;
        assert_eq!(
            (end.state, end.reason, end.exit_code),
            (JobState::Failed, Reason::SparkFailed, Some(3)),
            "{operator}: the operator's status decides without the driver: {end:?}"
        );
    }
}

#[tokio::test]
async fn review_7_a_failed_application_whose_driver_still_runs_gets_its_driver_deleted() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let job = job_id("liar");
        let name = object_name("", &job);
        env.faults
            .set_for(&name, Some(SparkFault::FailWithDriverRunning));
        let id = env
            .executor
            .submit(&spark_pi(operator, "args: ['sleep=30']"), &job, NS)
            .await
            .expect("submitted");
        let (end, seen) = run_to_end(&env.executor, &id).await;
        assert_eq!(end.state, JobState::Failed, "{operator}: {end:?}");
        assert!(
            seen[..seen.len() - 1].iter().all(|i| !i.is_terminal()),
            "{seen:?}"
        );
        // By the time the failure is reported, the driver is on its way out.
        let driver = env.pod(&driver_name(operator, &name));
        assert!(
            driver
                .as_ref()
                .is_none_or(|pod| pod.pointer("/metadata/deletionTimestamp").is_some()),
            "{operator}: {driver:?}"
        );
    }
}

#[tokio::test]
async fn review_7_a_forbidden_driver_delete_is_named_and_the_job_is_not_failed_yet() {
    let env = rbac_env(Settings::fast()).await;
    let permissions = with_verbs(SPARK_JOB_PERMISSIONS, "pods", &["list", "watch"]);
    let executor = executor_with_permissions(&env, "no-delete", &permissions).await;
    let job = job_id("kept");
    let name = object_name("", &job);
    env.faults
        .set_for(&name, Some(SparkFault::FailWithDriverRunning));
    let id = executor
        .submit(
            &spark_pi(SparkOperator::Kubeflow, "args: ['sleep=30']"),
            &job,
            NS,
        )
        .await
        .expect("submitted");
    let error = eventually("the named error", || async {
        match executor.status(&id).await {
            Err(error @ Error::Forbidden { .. }) => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(
        matches!(&error, Error::Forbidden { verb: "delete", resource, .. } if resource == "pods"),
        "{error}"
    );
    assert!(error.to_string().contains("kubeferry rbac"), "{error}");
    let driver = env
        .pod(&driver_name(SparkOperator::Kubeflow, &name))
        .expect("kept");
    assert_eq!(
        driver["status"]["phase"], "Running",
        "the driver still runs"
    );
}
