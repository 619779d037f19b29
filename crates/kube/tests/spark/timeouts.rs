//! The apache operator's own verdicts on a running application: the driver that never becomes
//! ready, the executors that never start, the driver evicted from its node; each a FAILED job
//! with the reason the operator's state names.

use kubeferry_core::marks::object_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::spec::JobSpec;
use kubeferry_core::{JobState, Reason};
use kubeferry_kube::manifest::spark::spark_application;

use crate::support::*;

/// The operator's words for both driver timeouts.
const DRIVER_TIMED_OUT: &str = "The driver has not responded to the initial health check request within the allotted start-up time. This can be configured by setting .spec.applicationTolerations.applicationTimeoutConfig.";

#[tokio::test]
async fn a_driver_that_never_becomes_ready_fails_the_job_after_the_ready_timeout() {
    let env = Env::start().await;
    let spec = spark_pi(
        SparkOperator::Apache,
        "args: ['sleep=30']\ndriverReadyTimeout: 1s",
    );
    let job = job_id("unready");
    let name = object_name("", &job);
    // A platform adds a sidecar to the driver's pod template (as a mesh or a log shipper
    // does); its image cannot be pulled, so the driver runs but its pod never becomes Ready.
    // The application is created as kubeferry would create it, sidecar added, and kubeferry
    // adopts it (same job id and spec hash).
    let JobSpec::Spark(spark) = &spec else {
        panic!("a Spark job");
    };
    let mut app =
        spark_application(spark, SparkOperator::Apache, &job, &name, NS).expect("a manifest");
    app["spec"]["driverSpec"]["podTemplateSpec"]["spec"] = serde_json::json!({"containers": [
        {"name": "spark-kubernetes-driver"},
        {"name": "mesh-proxy", "image": "registry.invalid/proxy:1.0", "command": ["sleep", "30"]}
    ]});
    env.sim.create(NS, app).expect("created with a sidecar");
    let id = env.executor.submit(&spec, &job, NS).await.expect("adopted");
    assert_eq!(id.name, name);
    let (end, seen) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Failed, Reason::DriverStartTimedOut),
        "{end:?}"
    );
    assert_eq!(
        end.message,
        format!("DriverReadyTimedOut: {DRIVER_TIMED_OUT}")
    );
    assert!(
        seen.iter().all(|i| i.state != JobState::Started),
        "a driver that was never ready never started the job: {seen:?}"
    );
    let app = released(&env, &id.name).await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReadyTimedOut",
            "ResourceReleased"
        ]
    );
}

#[tokio::test]
async fn executors_that_never_start_fail_the_job_after_the_executor_start_timeout() {
    let env = Env::start().await;
    // No node has room for an executor of 64 GiB: it stays Pending, Unschedulable.
    let spec = spec(
        "kind: SparkJob\nname: starved\noperator: apache\nsparkVersion: \"3.5.3\"\nimage: apache/spark:3.5.3\nmainApplicationFile: local:///opt/spark/examples/jars/spark-examples_2.12-3.5.3.jar\nmainClass: org.apache.spark.examples.SparkPi\nargs: ['sleep=30']\ndriver: {cores: 1, memory: 512m}\nexecutor: {cores: 1, memory: 64g, instances: 1}\nserviceAccount: spark\nexecutorStartTimeout: 1s\n",
    );
    let id = env
        .executor
        .submit(&spec, &job_id("starved"), NS)
        .await
        .expect("submitted");
    let running = until_state(&env.executor, &id, JobState::Started).await;
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Failed, Reason::ExecutorsStartTimedOut),
        "{end:?}"
    );
    assert_eq!(
        end.message,
        "ExecutorsStartTimedOut: The Spark application failed to get enough executors in the given time threshold."
    );
    assert_eq!(end.started_at, running.started_at, "the start is kept");
    assert!(end.finished_at >= end.started_at);
    let app = released(&env, &id.name).await;
    assert_eq!(
        apache_history(&app),
        [
            "Submitted",
            "DriverRequested",
            "DriverStarted",
            "DriverReady",
            "ExecutorsStartTimedOut",
            "ResourceReleased"
        ]
    );
}

#[tokio::test]
async fn an_evicted_driver_fails_the_job_as_evicted() {
    let env = Env::start().await;
    let gate = Gate::new();
    let spec = spark_pi(SparkOperator::Apache, &format!("args: ['{}']", gate.arg()));
    let id = env
        .executor
        .submit(&spec, &job_id("evicted"), NS)
        .await
        .expect("submitted");
    let running = until_state(&env.executor, &id, JobState::Started).await;
    let driver = format!("{}-0-driver", id.name);
    env.sim
        .evict_pod(NS, &driver)
        .expect("the kubelet evicts the driver");
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Failed, Reason::Evicted),
        "{end:?}"
    );
    assert!(
        end.message.starts_with("DriverEvicted: Driver removed."),
        "{}",
        end.message
    );
    assert!(end.reason.is_retryable(), "an infrastructure failure");
    assert_eq!(
        end.exit_code,
        Some(143),
        "the driver ended on the kubelet's SIGTERM"
    );
    assert_eq!(end.started_at, running.started_at);
    let app = released(&env, &id.name).await;
    let history = apache_history(&app);
    assert_eq!(
        history[history.len() - 2..],
        ["DriverEvicted".to_string(), "ResourceReleased".to_string()]
    );
    // Its story: the kubelet stopping the driver (its pod is gone once the operator released
    // the application), the outcome with the driver's exit, and that a retry may succeed.
    let story = env.executor.describe(&id).await.expect("a story");
    assert_eq!(story.status, end);
    let steps = &story.story.steps;
    assert_eq!(steps.first().map(|s| s.what.as_str()), Some("Submitted"));
    let last = steps.last().unwrap();
    assert_eq!(last.what, "FAILED");
    assert!(
        last.detail.starts_with("Evicted: DriverEvicted"),
        "{last:?}"
    );
    assert!(last.detail.ends_with("(driver: exit code 143)"), "{last:?}");
    assert!(
        steps.iter().any(|s| s.what == "Killing"
            && s.object.as_deref() == Some(driver.as_str())
            && s.detail == "Stopping container spark-kubernetes-driver"),
        "{steps:#?}"
    );
    assert_eq!(
        story.story.what_to_do.as_deref(),
        Some("not the job's fault: submit it again under a new job id, or give it retries")
    );
}

#[tokio::test]
async fn a_preempted_kubeflow_driver_fails_the_job_as_preempted_after_its_pod_is_gone() {
    let env = Env::start().await;
    let gate = Gate::new();
    let spec = spark_pi(
        SparkOperator::Kubeflow,
        &format!("args: ['{}']", gate.arg()),
    );
    let id = env
        .executor
        .submit(&spec, &job_id("preempted"), NS)
        .await
        .expect("submitted");
    until_state(&env.executor, &id, JobState::Started).await;
    let driver = format!("{}-driver", id.name);
    // The scheduler preempts the driver (DisruptionTarget, then a graceful delete): the Kubeflow
    // operator only says the driver failed, and the pod that tells why is deleted a moment
    // later.
    env.sim
        .preempt_pod(NS, &driver)
        .expect("the scheduler preempts the driver");
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(
        (end.state, end.reason),
        (JobState::Failed, Reason::Preempted),
        "{end:?}"
    );
    assert!(end.reason.is_retryable(), "an infrastructure failure");
    eventually("the driver pod to be gone", || async {
        env.pod(&driver).is_none().then_some(())
    })
    .await;
    // Another replica, which never saw the driver, answers the same from the outcome record.
    let other = env.fresh_executor(&env.settings).await;
    assert_eq!(other.status(&id).await.expect("the outcome record"), end);
}
