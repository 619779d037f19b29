//! Spark applications with nobody watching: submitted by a process that then exits, ended or
//! deleted while no kubeferry process watches, they still answer their first run to the next
//! process, and their job id never runs twice (the kubeferry finalizer holds each application
//! until some process records it; docs/INVARIANTS.md).

use kube::api::{DeleteParams, PropagationPolicy};
use kubeferry_core::marks::RECORD_FINALIZER;
use kubeferry_core::record::record_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{ExecutionId, ExecutionInfo, JobKind, JobState, Reason};
use kubeferry_kube::Executor;

use crate::support::*;

/// Runs `step` in a process of its own (a fresh executor), then ends that process and waits
/// until the cluster holds none of its watches.
async fn in_a_process_of_its_own<T, F, Fut>(env: &Env, step: F) -> T
where
    F: FnOnce(Executor) -> Fut,
    Fut: std::future::Future<Output = (Executor, T)>,
{
    let executor = env.fresh_executor(&env.settings).await;
    let (executor, answer) = step(executor).await;
    drop(executor);
    eventually("no kubeferry process to watch the namespace", || async {
        (env.sim.open_watches() == 0).then_some(())
    })
    .await;
    answer
}

async fn submitted_and_left(env: &Env, spec: &JobSpec, job_id: &str) -> ExecutionId {
    in_a_process_of_its_own(env, |executor| async move {
        let id = executor.submit(spec, job_id, NS).await.expect("submitted");
        (executor, id)
    })
    .await
}

/// Deletes the application as `kubectl delete` does, then checks that kubeferry's finalizer
/// holds it: nobody recorded it yet.
async fn deleted_while_nobody_watches(env: &Env, operator: SparkOperator, id: &ExecutionId) {
    env.apps_api(operator)
        .await
        .delete(
            &id.name,
            &DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteParams::default()
            },
        )
        .await
        .expect("the admin deletes the application");
    let app = env.app(operator, &id.name).expect("held, not gone");
    assert!(
        app["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == RECORD_FINALIZER)),
        "{operator}: {app:#}"
    );
}

/// A fresh process's terminal answer, once that process has recorded it and let the
/// application go.
async fn answered_by_a_new_process(
    env: &Env,
    operator: SparkOperator,
    id: &ExecutionId,
) -> ExecutionInfo {
    answered_and_let_go(env, operator, id, false).await
}

/// The same; with `kept`, the application let go is still there, without kubeferry's
/// finalizer.
async fn answered_and_let_go(
    env: &Env,
    operator: SparkOperator,
    id: &ExecutionId,
    kept: bool,
) -> ExecutionInfo {
    let id = id.clone();
    in_a_process_of_its_own(env, |executor| async move {
        let answer = eventually("a terminal answer", || async {
            executor
                .status(&id)
                .await
                .ok()
                .filter(ExecutionInfo::is_terminal)
        })
        .await;
        eventually(
            "the outcome recorded and the application let go",
            || async {
                let recorded = env
                    .sim
                    .object(
                        "",
                        "configmaps",
                        NS,
                        &record_name(JobKind::SparkApp, &id.name),
                    )
                    .is_some();
                let let_go = match env.app(operator, &id.name) {
                    None => !kept,
                    Some(app) => {
                        kept && app["metadata"]["finalizers"]
                            .as_array()
                            .is_none_or(|f| f.iter().all(|f| f != RECORD_FINALIZER))
                    }
                };
                (recorded && let_go).then_some(())
            },
        )
        .await;
        (executor, answer)
    })
    .await
}

/// Submits the job id again from a fresh process: it names the first run, answers its
/// outcome and creates nothing.
async fn submitted_again_runs_nothing(
    env: &Env,
    spec: &JobSpec,
    job_id: &str,
    first: &ExecutionId,
    outcome: &ExecutionInfo,
) {
    let creates = env.sim.request_count("create", "");
    let (again, status) = in_a_process_of_its_own(env, |executor| async move {
        let again = executor.submit(spec, job_id, NS).await.expect("answered");
        let status = executor.status(&again).await.expect("its status");
        (executor, (again, status))
    })
    .await;
    assert_eq!(&again, first);
    assert_eq!(
        (status.state, status.reason, status.exit_code),
        (outcome.state, outcome.reason, outcome.exit_code)
    );
    assert_eq!(
        env.sim.request_count("create", ""),
        creates,
        "nothing was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_that_failed_and_was_deleted_while_nobody_watched_answers_its_first_run() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['exit=3']");
        let job_id = job_id("unseen-fails");
        let id = submitted_and_left(&env, &spec, &job_id).await;
        eventually("the operator's verdict", || async {
            let app = env.app(operator, &id.name)?;
            let state = match operator {
                SparkOperator::Apache => app.pointer("/status/currentState/currentStateSummary"),
                SparkOperator::Kubeflow => app.pointer("/status/applicationState/state"),
            }?;
            matches!(state.as_str()?, "Failed" | "ResourceReleased" | "FAILED").then_some(())
        })
        .await;
        deleted_while_nobody_watches(&env, operator, &id).await;
        let outcome = answered_by_a_new_process(&env, operator, &id).await;
        assert_eq!(
            (outcome.state, outcome.reason, outcome.exit_code),
            (JobState::Failed, Reason::SparkFailed, Some(3)),
            "{operator}: {outcome:#?}"
        );
        submitted_again_runs_nothing(&env, &spec, &job_id, &id, &outcome).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_application_deleted_while_nobody_watched_was_deleted_externally() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let gate = Gate::new();
        let spec = spark_pi(operator, &format!("args: ['10', '{}']", gate.arg()));
        let job_id = job_id("unseen-running");
        let id = submitted_and_left(&env, &spec, &job_id).await;
        eventually("the driver running", || async {
            let pods = env.sim.count("", "pods");
            (pods >= 1).then_some(())
        })
        .await;
        deleted_while_nobody_watches(&env, operator, &id).await;
        let outcome = answered_by_a_new_process(&env, operator, &id).await;
        assert_eq!(
            (outcome.state, outcome.reason),
            (JobState::Failed, Reason::DeletedExternally),
            "{operator}: {outcome:#?}"
        );
        submitted_again_runs_nothing(&env, &spec, &job_id, &id, &outcome).await;
        gate.open();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_cancelled_by_a_process_that_exited_stays_cancelled() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let gate = Gate::new();
        let spec = spark_pi(operator, &format!("args: ['10', '{}']", gate.arg()));
        let job_id = job_id("unseen-cancel");
        let id = submitted_and_left(&env, &spec, &job_id).await;
        let cancelled = id.clone();
        in_a_process_of_its_own(&env, |executor| async move {
            until_state(&executor, &cancelled, JobState::Started).await;
            executor.cancel(&cancelled).await.expect("the cancel");
            (executor, ())
        })
        .await;
        let outcome = answered_by_a_new_process(&env, operator, &id).await;
        assert_eq!(
            outcome.state,
            JobState::Cancelled,
            "{operator}: {outcome:#?}"
        );
        submitted_again_runs_nothing(&env, &spec, &job_id, &id, &outcome).await;
        gate.open();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_removed_by_its_ttl_while_nobody_watched_answers_its_first_run() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['exit=3']\nttlAfterStop: 1s");
        let job_id = job_id("unseen-ttl");
        let id = submitted_and_left(&env, &spec, &job_id).await;
        let app = eventually("the TTL to delete the application", || async {
            env.app(operator, &id.name)
                .filter(|app| app.pointer("/metadata/deletionTimestamp").is_some())
        })
        .await;
        assert!(
            app["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == RECORD_FINALIZER)),
            "{operator}: held, not gone: {app:#}"
        );
        let outcome = answered_by_a_new_process(&env, operator, &id).await;
        assert_eq!(
            (outcome.state, outcome.reason, outcome.exit_code),
            (JobState::Failed, Reason::SparkFailed, Some(3)),
            "{operator}: {outcome:#?}"
        );
        submitted_again_runs_nothing(&env, &spec, &job_id, &id, &outcome).await;
    }
}

/// An application that succeeded and was recorded by a process that then exited; then its
/// pods and its outcome record are deleted by hand while nobody watches, the application
/// kept. A new process's first answer is the recorded one, whole (its exit code and times
/// read from the driver that is gone), and its job id never runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_whose_pods_and_record_were_deleted_by_hand_answers_its_first_run() {
    let env = Env::start().await;
    for operator in SparkOperator::ALL {
        let spec = spark_pi(operator, "args: ['1']");
        let job_id = job_id("lost-record");
        let id = submitted_and_left(&env, &spec, &job_id).await;
        let recorded = answered_and_let_go(&env, operator, &id, true).await;
        assert_eq!(
            (recorded.state, recorded.exit_code),
            (JobState::Succeeded, Some(0)),
            "{operator}: {recorded:#?}"
        );
        env.pods_api()
            .await
            .delete_collection(&Default::default(), &Default::default())
            .await
            .expect("the pods deleted");
        let records: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(env.client().await, NS);
        records
            .delete(&record_name(id.kind, &id.name), &Default::default())
            .await
            .expect("the record deleted");
        eventually("the pods gone", || async {
            (env.sim.count("", "pods") == 0).then_some(())
        })
        .await;
        assert!(env.app(operator, &id.name).is_some(), "{operator}: kept");
        let again = {
            let id = id.clone();
            in_a_process_of_its_own(&env, |executor| async move {
                let answer = executor.status(&id).await.expect("its status");
                (executor, answer)
            })
            .await
        };
        assert_eq!(
            again, recorded,
            "{operator}: the first answer of a new process"
        );
        submitted_again_runs_nothing(&env, &spec, &job_id, &id, &recorded).await;
    }
}
