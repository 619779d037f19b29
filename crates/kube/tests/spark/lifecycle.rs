//! Spark jobs from submission to their end, under each operator: success, each failure, restarts,
//! TTL, adoption, and the operator chosen and checked before anything is created.

use std::collections::HashSet;

use kubeferry_core::marks::object_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::{JobKind, JobState, Reason};
use kubeferry_kube::Error;
use kubeferry_sim::CrdBundle;

use crate::support::*;

#[tokio::test]
async fn apache_job_runs_through_the_operators_states_to_succeeded() {
    let env = Env::start().await;
    let gate = Gate::new();
    let spec = spark_pi(
        SparkOperator::Apache,
        &format!("args: ['10', '{}']", gate.arg()),
    );
    let id = env
        .executor
        .submit(&spec, &job_id("pi"), NS)
        .await
        .expect("submitted");
    assert_eq!(id.kind, JobKind::SparkApp);
    let running = until_state(&env.executor, &id, JobState::Started).await;
    assert!(running.started_at.is_some(), "{running:?}");
    // A driver that ends before its executors start goes from `DriverReady` to its outcome.
    eventually("the executors to start", || async {
        env.app(SparkOperator::Apache, &id.name)
            .filter(|app| apache_history(app).last().map(String::as_str) == Some("RunningHealthy"))
    })
    .await;
    gate.open();
    let (end, seen) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Succeeded, Reason::Completed)
    );
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.started_at, running.started_at, "the start time is kept");
    assert!(end.finished_at >= end.started_at);
    assert!(!states(&seen).contains(&JobState::Failed), "{seen:?}");
    let app = released(&env, &id.name).await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReady",
            "RunningHealthy",
            "Succeeded",
            "ResourceReleased"
        ]
    );
}

#[tokio::test]
async fn kubeflow_job_runs_through_the_operators_states_to_succeeded() {
    let env = Env::start().await;
    let gate = Gate::new();
    let spec = spark_pi(
        SparkOperator::Kubeflow,
        &format!("args: ['10', '{}']", gate.arg()),
    );
    let job = job_id("pi");
    let history = env
        .app_history(SparkOperator::Kubeflow, &object_name("", &job))
        .await;
    let id = env
        .executor
        .submit(&spec, &job, NS)
        .await
        .expect("submitted");
    let running = until_state(&env.executor, &id, JobState::Started).await;
    gate.open();
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Succeeded, Reason::Completed)
    );
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.started_at, running.started_at);
    // Cancelling a finished job changes nothing: its application stays.
    let cancel = env.executor.cancel(&id).await.expect("a no-op");
    assert_eq!(cancel.info(), &end);
    assert!(env.app(SparkOperator::Kubeflow, &id.name).is_some());
    // The operator's states, as a watch saw them until the application was deleted.
    let api = env.apps_api(SparkOperator::Kubeflow).await;
    api.delete(&id.name, &Default::default())
        .await
        .expect("deleted");
    let seen = history.await.expect("the watch ends");
    let mut states: Vec<String> = Vec::new();
    for (_, app) in &seen {
        let state = app
            .pointer("/status/applicationState/state")
            .and_then(|s| s.as_str())
            .unwrap_or("<none>")
            .to_string();
        if states.last() != Some(&state) {
            states.push(state);
        }
    }
    assert_eq!(
        states,
        [
            "<none>",
            "",
            "SUBMITTED",
            "RUNNING",
            "SUCCEEDING",
            "COMPLETED"
        ]
    );
}

#[tokio::test]
async fn a_driver_that_exits_non_zero_fails_the_job_with_its_exit_code() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['exit=3']");
        let id = env
            .executor
            .submit(&spec, &job_id("fails"), NS)
            .await
            .expect("submitted");
        let (end, seen) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.reason, end.exit_code),
            (JobState::Failed, Reason::SparkFailed, Some(3)),
            "{operator}: {end:?}"
        );
        assert!(end.finished_at.is_some(), "{operator}: {end:?}");
        // Nothing terminal was reported before the end.
        assert!(
            seen[..seen.len() - 1].iter().all(|i| !i.is_terminal()),
            "{operator}: {seen:?}"
        );
    }
}

#[tokio::test]
async fn a_driver_that_never_starts_fails_the_job_after_the_start_timeout() {
    let env = Env::start().await;
    let spec = spec(
        "kind: SparkJob\nname: stuck\noperator: apache\nsparkVersion: \"3.5.3\"\nimage: registry.invalid/spark:3.5.3\nmainApplicationFile: local:///opt/app.jar\nmainClass: App\nexecutor: {instances: 1}\ndriverStartTimeout: 1s\n",
    );
    let id = env
        .executor
        .submit(&spec, &job_id("stuck"), NS)
        .await
        .expect("submitted");
    let (end, seen) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Failed, Reason::DriverStartTimedOut),
        "{end:?}"
    );
    assert_eq!(end.started_at, None, "the driver never ran");
    // While it waited, the driver's trouble was shown.
    assert!(
        seen.iter()
            .any(|i| i.state == JobState::Queued && i.reason == Reason::ImagePullBackOff),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_refused_driver_pod_fails_the_job_with_each_operators_reason() {
    let env = Env::start().await;
    for (operator, reason) in [
        (SparkOperator::Apache, Reason::SchedulingFailure),
        (SparkOperator::Kubeflow, Reason::SparkFailed),
    ] {
        let spec = spec(&format!(
            "kind: SparkJob\nname: refused\noperator: {operator}\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/app.jar\nmainClass: App\nserviceAccount: nobody\n"
        ));
        let id = env
            .executor
            .submit(&spec, &job_id("refused"), NS)
            .await
            .expect("submitted");
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.reason),
            (JobState::Failed, reason),
            "{end:?}"
        );
        assert!(end.message.contains("nobody"), "{operator}: {end:?}");
    }
}

#[tokio::test]
async fn a_failed_run_is_restarted_and_the_job_ends_once_the_restarts_run_out() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(
            operator,
            "args: ['exit=4']\nrestartPolicy: OnFailure\nretries: 1\nretryInterval: 1s",
        );
        let id = env
            .executor
            .submit(&spec, &job_id("flaky"), NS)
            .await
            .expect("submitted");
        let (end, seen) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.exit_code),
            (JobState::Failed, Some(4)),
            "{operator}: {end:?}"
        );
        assert!(
            seen[..seen.len() - 1].iter().all(|i| !i.is_terminal()),
            "{operator}: {seen:?}"
        );
        match operator {
            SparkOperator::Apache => {
                let app = env.app(operator, &id.name).expect("kept");
                let history = apache_history(&app);
                assert_eq!(
                    history.iter().filter(|s| *s == "Failed").count(),
                    2,
                    "{history:?}"
                );
                assert!(history.contains(&"ScheduledToRestart".to_string()));
            }
            SparkOperator::Kubeflow => {
                let app = env.app(operator, &id.name).expect("kept");
                assert_eq!(app["status"]["executionAttempts"], 2);
            }
        }
    }
}

#[tokio::test]
async fn an_application_removed_by_its_ttl_keeps_its_outcome_here_and_from_its_record_elsewhere() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['10']\nttlAfterStop: 1s");
        let id = env
            .executor
            .submit(&spec, &job_id("short"), NS)
            .await
            .expect("submitted");
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(end.state, JobState::Succeeded);
        eventually("the TTL to remove the application", || async {
            env.app(operator, &id.name).is_none().then_some(())
        })
        .await;
        let again = env.executor.status(&id).await.expect("still known here");
        assert_eq!(again, end);
        let elsewhere = env.fresh_executor(&env.settings).await;
        let recorded = elsewhere.status(&id).await.expect("the outcome record");
        assert_eq!(recorded, end);
    }
}

#[tokio::test]
async fn submitting_a_job_id_twice_runs_it_once_and_another_spec_is_refused() {
    let env = Env::start().await;
    let spec = spark_pi(SparkOperator::Kubeflow, "args: ['sleep=30']");
    let job = job_id("twice");
    let first = env
        .executor
        .submit(&spec, &job, NS)
        .await
        .expect("submitted");
    let second = env
        .fresh_executor(&env.settings)
        .await
        .submit(&spec, &job, NS)
        .await
        .expect("adopted");
    assert_eq!(first, second);
    assert_eq!(
        env.sim.count("sparkoperator.k8s.io", "sparkapplications"),
        1
    );
    let other = spark_pi(SparkOperator::Kubeflow, "args: ['sleep=31']");
    let error = env
        .executor
        .submit(&other, &job, NS)
        .await
        .expect_err("another spec");
    assert!(matches!(error, Error::NameTaken { .. }), "{error}");
    assert!(error.to_string().contains("different spec"), "{error}");
    env.executor.cancel(&first).await.expect("cancelled");
}

#[tokio::test]
async fn the_operator_is_resolved_and_checked_before_anything_is_created() {
    // Only the Kubeflow operator is installed: a file that names none goes to it.
    let mut config = spark_config();
    config.crd_bundles = vec![CrdBundle::SparkKubeflow];
    let env = Env::start_with(config, Settings::fast()).await;
    let plain = spec(
        "kind: SparkJob\nname: plain\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/app.jar\nmainClass: App\nserviceAccount: spark-operator-spark\n",
    );
    let id = env
        .executor
        .submit(&plain, &job_id("plain"), NS)
        .await
        .expect("submitted");
    assert!(env.app(SparkOperator::Kubeflow, &id.name).is_some());
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(end.state, JobState::Succeeded);

    // A field the Kubeflow operator cannot honour is refused, naming it, before any write.
    let timed = spec(
        "kind: SparkJob\nname: timed\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/app.jar\nmainClass: App\ndriverStartTimeout: 1m\n",
    );
    let before = env.sim.request_count("create", "");
    let error = env
        .executor
        .submit(&timed, &job_id("timed"), NS)
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::Spec(_)), "{error}");
    assert!(error.to_string().contains("driverStartTimeout"), "{error}");
    assert_eq!(
        env.sim.request_count("create", ""),
        before,
        "nothing created"
    );

    // A file naming an operator that is not installed gets a clear error.
    let apache = spark_pi(SparkOperator::Apache, "");
    let error = env
        .executor
        .submit(&apache, &job_id("apache"), NS)
        .await
        .expect_err("not installed");
    assert!(matches!(error, Error::SparkUnavailable { .. }), "{error}");
    assert!(
        error.to_string().contains("spark.apache.org/v1")
            && error.to_string().contains("installed"),
        "{error}"
    );

    // With no Spark operator at all, a file that names none is refused plainly.
    let mut bare = spark_config();
    bare.crd_bundles.clear();
    let bare = Env::start_with(bare, Settings::fast()).await;
    let error = bare
        .executor
        .submit(&plain, &job_id("plain"), NS)
        .await
        .expect_err("no operator");
    assert!(matches!(error, Error::SparkUnavailable { .. }), "{error}");
    assert!(error.to_string().contains("--spark-operator"), "{error}");
    // A configured default needs no discovery.
    let configured = Env::start_with(
        spark_config(),
        Settings::fast().default_operator(Some(SparkOperator::Kubeflow)),
    )
    .await;
    let id = configured
        .executor
        .submit(&plain, &job_id("plain"), NS)
        .await
        .expect("submitted");
    assert!(configured.app(SparkOperator::Kubeflow, &id.name).is_some());
}

#[tokio::test]
async fn list_shows_spark_jobs_with_container_jobs_and_sweep_finds_orphans() {
    let env = Env::start().await;
    let known_job = job_id("known");
    let orphan_job = job_id("orphan");
    let known = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Apache, "args: ['10']"),
            &known_job,
            NS,
        )
        .await
        .expect("submitted");
    let orphan = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Kubeflow, "args: ['sleep=30']"),
            &orphan_job,
            NS,
        )
        .await
        .expect("submitted");
    run_to_end(&env.executor, &known).await;
    let listed = env.executor.list(NS, None).await.expect("listed");
    let ids: Vec<_> = listed.iter().map(|j| j.id.clone()).collect();
    assert!(ids.contains(&known) && ids.contains(&orphan), "{ids:?}");
    let summary = listed.iter().find(|j| j.id == known).expect("listed");
    assert_eq!(summary.status.state, JobState::Succeeded);
    assert_eq!(summary.job_id.as_deref(), Some(known_job.as_str()));

    let known_ids: HashSet<String> = [known_job].into();
    let found = env
        .executor
        .sweep(NS, &known_ids, false)
        .await
        .expect("swept");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].id, orphan);
    assert!(!found[0].deleted);
    let swept = env
        .executor
        .sweep(NS, &known_ids, true)
        .await
        .expect("swept");
    assert!(swept[0].deleted);
    eventually("the orphan to go", || async {
        env.app(SparkOperator::Kubeflow, &orphan.name)
            .is_none()
            .then_some(())
    })
    .await;
}
