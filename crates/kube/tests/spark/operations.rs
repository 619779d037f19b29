//! Status, wait and cancel of Spark jobs behave as for container jobs: a cancel returns at once
//! and the job ends CANCELLED, a finished job keeps its outcome, a wait gives up at its timeout.

use std::time::Duration;

use kubeferry_core::record::record_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::{JobState, Reason};
use kubeferry_kube::{CancelOutcome, Error};
use kubeferry_sim::{FaultAction, FaultRule};

use crate::reads::answers_reading_only;
use crate::support::*;
use kubeferry_core::marks::RECORD_FINALIZER;

#[tokio::test]
async fn a_cancelled_job_ends_cancelled_and_its_pods_go() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let id = env
            .executor
            .submit(
                &spark_pi(operator, "args: ['sleep=30']"),
                &job_id("cancel"),
                NS,
            )
            .await
            .expect("submitted");
        until_state(&env.executor, &id, JobState::Started).await;
        let outcome = env.executor.cancel(&id).await.expect("cancelled");
        let CancelOutcome::Requested(info) = &outcome else {
            panic!("{operator}: {outcome:?}");
        };
        assert!(
            matches!(info.state, JobState::Cancelling | JobState::Cancelled),
            "{info:?}"
        );
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.reason),
            (JobState::Cancelled, Reason::Cancelled),
            "{operator}"
        );
        assert!(end.started_at.is_some(), "it had started: {end:?}");
        eventually("the application and its pods to go", || async {
            let pods = env.sim.count("", "pods");
            (env.app(operator, &id.name).is_none() && pods == 0).then_some(())
        })
        .await;
        // A second cancel, and a status, keep the outcome.
        let again = env.executor.cancel(&id).await.expect("a no-op");
        assert_eq!(
            again,
            CancelOutcome::AlreadyEnded(end.clone()),
            "{operator}"
        );
        assert_eq!(env.executor.status(&id).await.expect("known"), end);
    }
}

/// I2, I3: a cancel whose outcome record cannot be written deletes nothing: the
/// SparkApplication runs on, marked (CANCELLING, never CANCELLED while it runs), a process
/// that never saw it still finds the job, a resubmission answers its run and creates nothing;
/// once the record can be written, a settler keeps it and deletes the application.
#[tokio::test]
async fn a_cancel_whose_record_fails_leaves_the_application_marked_until_a_settler_records_it() {
    // A refused record is not retried for long, and a busy settler is not waited for long.
    let mut settings = Settings::fast().retry_deadline(Duration::from_millis(300));
    settings.executor.spark.watching.sync_timeout = Duration::from_millis(500);
    let env = Env::start_with(spark_config(), settings.clone()).await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['sleep=30']");
        let job = job_id("held");
        let id = env
            .executor
            .submit(&spec, &job, NS)
            .await
            .expect("submitted");
        until_state(&env.executor, &id, JobState::Started).await;
        let recorded = || {
            env.sim
                .object("", "configmaps", NS, &record_name(id.kind, &id.name))
                .is_some()
        };
        let refused = env.sim.add_fault(
            FaultRule::new(FaultAction::error(500))
                .verbs(&["create"])
                .resources(&["configmaps"]),
        );
        let deletes = env
            .sim
            .request_count("delete", &format!("sparkapplications.{}", operator.group()));
        let outcome = env.executor.cancel(&id).await.expect("accepted");
        assert!(
            matches!(&outcome, CancelOutcome::Requested(info) if info.state == JobState::Cancelling),
            "{operator}: {outcome:?}"
        );
        let app = env
            .app(operator, &id.name)
            .expect("the application, running on");
        assert!(
            app.pointer("/metadata/deletionTimestamp").is_none(),
            "{app}"
        );
        assert_eq!(
            env.sim
                .request_count("delete", &format!("sparkapplications.{}", operator.group())),
            deletes,
            "{operator}: nothing deleted"
        );
        assert!(!recorded());
        let fresh = env.fresh_executor(&settings).await;
        let answer = fresh.status(&id).await.expect("found");
        assert_eq!(answer.state, JobState::Cancelling, "{operator}: {answer:?}");
        let creates = env
            .sim
            .request_count("create", &format!("sparkapplications.{}", operator.group()));
        assert_eq!(fresh.submit(&spec, &job, NS).await.expect("its run"), id);
        assert_eq!(
            env.sim
                .request_count("create", &format!("sparkapplications.{}", operator.group())),
            creates + 1,
            "{operator}: the create met the marked application"
        );
        assert_eq!(
            env.app(operator, &id.name).expect("still there")["metadata"]["uid"],
            app["metadata"]["uid"]
        );
        env.sim.remove_fault(refused);
        eventually(
            "the record to be kept and the application deleted",
            || async { (recorded() && env.app(operator, &id.name).is_none()).then_some(()) },
        )
        .await;
        // Once its watch shows the application gone.
        until_state(&fresh, &id, JobState::Cancelled).await;
        assert!(
            env.app(operator, &id.name).is_none(),
            "{operator}: nothing ran again"
        );
    }
}

#[tokio::test]
async fn a_finished_job_keeps_its_outcome_when_cancelled() {
    let env = Env::start().await;
    let id = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Kubeflow, "args: ['exit=2']"),
            &job_id("done"),
            NS,
        )
        .await
        .expect("submitted");
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(end.state, JobState::Failed);
    let outcome = env.executor.cancel(&id).await.expect("a no-op");
    assert_eq!(outcome, CancelOutcome::AlreadyEnded(end));
}

#[tokio::test]
async fn a_wait_gives_up_at_its_timeout_and_the_job_goes_on() {
    let env = Env::start().await;
    let id = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Apache, "args: ['sleep=30']"),
            &job_id("slow"),
            NS,
        )
        .await
        .expect("submitted");
    until_state(&env.executor, &id, JobState::Started).await;
    let error = env
        .executor
        .wait(&id, Some(Duration::from_millis(100)), |_| {})
        .await
        .expect_err("gives up");
    assert!(
        matches!(
            error,
            Error::WaitTimeout {
                state: JobState::Started,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        env.executor.status(&id).await.expect("running").state,
        JobState::Started
    );
    env.executor.cancel(&id).await.expect("cancelled");
}

#[tokio::test]
async fn every_spark_watch_is_current_again_once_an_outage_ends_though_nothing_changes() {
    // No application, no driver and no outcome record: the watches of both operators'
    // SparkApplications, of the driver pods and of the records have nothing to deliver after
    // the outage. Each is current again from its first list.
    let mut settings = Settings::fast();
    settings.executor.spark.watching.reflector.restart = kubeferry_kube::RetryPolicy {
        base: Duration::from_millis(10),
        cap: Duration::from_millis(100),
        deadline: Duration::MAX,
    };
    let env = Env::start_with(spark_config(), settings).await;
    env.executor.watch_spark(NS).await.expect("watched");
    let healths = || {
        let all = env.executor.health();
        assert!(all.iter().all(|(namespace, ..)| namespace == NS), "{all:?}");
        all.into_iter()
            .map(|(_, resource, health)| (resource, health))
            .collect::<Vec<_>>()
    };
    eventually("every Spark watch to list", || async {
        let healths = healths();
        (healths.len() == 4 && healths.iter().all(|(_, h)| h.synced && h.failing.is_none()))
            .then_some(())
    })
    .await;
    env.sim.unreachable_for(Duration::from_secs(600));
    eventually("every Spark watch to notice the outage", || async {
        healths()
            .iter()
            .all(|(_, h)| h.failing.is_some())
            .then_some(())
    })
    .await;
    env.sim.reachable_again();
    let back = eventually("every Spark watch to be current again", || async {
        let healths = healths();
        healths
            .iter()
            .all(|(_, h)| h.synced && h.failing.is_none())
            .then_some(healths)
    })
    .await;
    let resources: Vec<&str> = back.iter().map(|(resource, _)| resource.as_str()).collect();
    assert_eq!(resources.len(), 4, "{resources:?}");
}

#[tokio::test]
async fn status_queries_only_read() {
    let env = Env::start_with(
        spark_config(),
        Settings::fast().no_status_timeout(Duration::from_millis(300)),
    )
    .await;
    let silent = job_id("silent");
    env.faults.set_for(
        &kubeferry_core::marks::object_name("", &silent),
        Some(kubeferry_sim::controllers::spark::SparkFault::NoStatus),
    );
    let submit = |operator, extra: &'static str, job: String| {
        let executor = &env.executor;
        async move {
            executor
                .submit(&spark_pi(operator, extra), &job, NS)
                .await
                .expect("submitted")
        }
    };
    let running = submit(
        SparkOperator::Kubeflow,
        "args: ['sleep=30']",
        job_id("running"),
    )
    .await;
    let done = submit(SparkOperator::Apache, "", job_id("done")).await;
    let silent = submit(SparkOperator::Apache, "", silent).await;
    until_state(&env.executor, &running, JobState::Started).await;
    for id in [&done, &silent] {
        run_to_end(&env.executor, id).await;
    }
    eventually(
        "the settler to delete the application without status",
        || async {
            env.app(SparkOperator::Apache, &silent.name)
                .is_none()
                .then_some(())
        },
    )
    .await;
    // The settler's own write for the ended one (letting it go once its record is kept) is
    // done before the questions.
    eventually("the settler to let go of the ended application", || async {
        let app = env.app(SparkOperator::Apache, &done.name);
        app.is_none_or(|app| {
            app["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| !f.iter().any(|f| f == RECORD_FINALIZER))
        })
        .then_some(())
    })
    .await;

    let ids = [&running, &done, &silent];
    let answers = answers_reading_only(&env.executor, &env.sim, &ids, 334).await;
    assert_eq!(
        answers,
        [
            (JobState::Started, Reason::Running),
            (JobState::Succeeded, Reason::Completed),
            (JobState::Failed, Reason::NoStatusTimeout),
        ]
    );
}

/// A caller polling an id this cluster never ran costs one lookup (a GET of each operator's
/// application) per period, not one per question.
#[tokio::test]
async fn polling_an_unknown_application_costs_one_lookup_per_period() {
    let env = Env::start_with(spark_config(), Settings::fast()).await;
    let id = kubeferry_core::ExecutionId::new(
        crate::cluster::CLUSTER,
        kubeferry_core::JobKind::SparkApp,
        NS,
        "never-ran",
    );
    env.executor.watch_spark(NS).await.unwrap();
    eventually(
        "every operator's applications watched and current",
        || async {
            let watches = env.executor.spark_jobs().watched();
            let [(namespace, watch)] = watches.as_slice() else {
                return None;
            };
            let watched = watch.watched();
            (namespace == NS
                && watched.len() == 2
                && watched.iter().all(|(_, apps)| apps.is_current()))
            .then_some(())
        },
    )
    .await;
    let counters = crate::reads::poll_unknown(&env.executor, &env.sim, &id, 100).await;
    assert_eq!(env.sim.request_count("get", ""), 2, "{counters:#?}");
}
