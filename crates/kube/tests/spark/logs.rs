//! The driver's log: followed while the job runs, tailed (by lines and bytes) after it ended
//! while the driver pod is kept, and empty once the operator released it; read from the driver
//! container when sidecars run beside it; followed driver after driver across restarts.

use futures::StreamExt;
use kubeferry_core::JobState;
use kubeferry_core::marks::object_name;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::spec::JobSpec;
use kubeferry_kube::logs::{FollowOptions, TailOptions};
use kubeferry_kube::manifest::spark::spark_application;

use crate::support::*;

#[tokio::test]
async fn the_drivers_log_is_followed_to_the_end_and_tailed_while_the_driver_is_kept() {
    let env = Env::start().await;
    for (operator, keep) in [
        (SparkOperator::Apache, "retainResources: Always"),
        (SparkOperator::Kubeflow, ""),
    ] {
        let gate = Gate::new();
        let spec = spark_pi(operator, &format!("args: ['10', '{}']\n{keep}", gate.arg()));
        let id = env
            .executor
            .submit(&spec, &job_id("log"), NS)
            .await
            .expect("submitted");
        let stream = env
            .executor
            .follow(&id, FollowOptions::default())
            .expect("followed");
        let follower = tokio::spawn(async move {
            let mut text = String::new();
            let mut lines = Box::pin(stream);
            while let Some(line) = lines.next().await {
                text.push_str(&line.expect("a log line"));
            }
            text
        });
        until_state(&env.executor, &id, JobState::Started).await;
        gate.open();
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(end.state, JobState::Succeeded, "{operator}");
        let followed = tokio::time::timeout(DEADLINE, follower)
            .await
            .expect("the follow ends with the job")
            .expect("joined");
        assert!(
            followed.contains("INFO SparkContext: Submitted application: SparkPi"),
            "{operator}: {followed}"
        );
        assert!(
            followed
                .trim_end()
                .ends_with("INFO SparkContext: Successfully stopped SparkContext"),
            "{operator}: {followed}"
        );
        assert_eq!(
            followed.matches("Pi is roughly").count(),
            1,
            "each line once: {followed}"
        );

        // After the end, the kept driver's log is still there.
        let all = env
            .executor
            .tail(&id, &TailOptions::default())
            .await
            .expect("tailed")
            .log;
        assert_eq!(all, followed, "{operator}");
        let last = env
            .executor
            .tail(
                &id,
                &TailOptions {
                    lines: Some(2),
                    ..TailOptions::default()
                },
            )
            .await
            .expect("tailed")
            .log;
        assert_eq!(last.lines().count(), 2, "{last}");
        assert!(last.starts_with("Pi is roughly"), "{last}");
        let bytes = env
            .executor
            .tail(
                &id,
                &TailOptions {
                    bytes: Some(13),
                    ..TailOptions::default()
                },
            )
            .await
            .expect("tailed")
            .log;
        assert_eq!(bytes, "SparkContext\n");
    }
}

#[tokio::test]
async fn once_the_apache_operator_released_the_driver_its_log_is_empty() {
    let env = Env::start().await;
    let id = env
        .executor
        .submit(
            &spark_pi(SparkOperator::Apache, "args: ['10']"),
            &job_id("released"),
            NS,
        )
        .await
        .expect("submitted");
    let (end, _) = run_to_end(&env.executor, &id).await;
    assert_eq!(end.state, JobState::Succeeded);
    eventually("the driver to be released", || async {
        env.pod(&format!("{}-0-driver", id.name))
            .is_none()
            .then_some(())
    })
    .await;
    let text = env
        .executor
        .tail(&id, &TailOptions::default())
        .await
        .expect("no error: the job exists")
        .log;
    assert_eq!(text, "");
}

/// Follows a job's log from now on, into a string the caller can look at while it grows.
fn follow_into_text(
    env: &Env,
    id: &kubeferry_core::ExecutionId,
) -> (
    std::sync::Arc<std::sync::Mutex<String>>,
    tokio::task::JoinHandle<()>,
) {
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let stream = env
        .executor
        .follow(id, FollowOptions::default())
        .expect("followed");
    let sink = text.clone();
    let follower = tokio::spawn(async move {
        let mut lines = Box::pin(stream);
        while let Some(line) = lines.next().await {
            let line = line.expect("a log line");
            sink.lock().expect("not poisoned").push_str(&line);
        }
    });
    (text, follower)
}

#[tokio::test]
async fn the_drivers_log_is_read_from_the_driver_container_when_a_sidecar_runs_beside_it() {
    let env = Env::start().await;
    let noise = "while true; do echo sidecar noise; sleep 0.05; done";
    for operator in SparkOperator::ALL {
        let keep = match operator {
            SparkOperator::Apache => "retainResources: Always",
            SparkOperator::Kubeflow => "",
        };
        let gate = Gate::new();
        let spec = spark_pi(operator, &format!("args: ['10', '{}']\n{keep}", gate.arg()));
        let job = job_id("sidecar");
        let name = object_name("", &job);
        // A platform added a sidecar to the driver (a log shipper); kubeferry adopts the
        // application it would have created (same job id and spec hash).
        let JobSpec::Spark(spark) = &spec else {
            panic!("a Spark job");
        };
        let mut app = spark_application(spark, operator, &job, &name, NS).expect("a manifest");
        let sidecar = serde_json::json!({"name": "log-shipper", "image": "busybox:1.36", "command": ["sh", "-c", noise]});
        match operator {
            SparkOperator::Apache => {
                app["spec"]["driverSpec"]["podTemplateSpec"]["spec"] = serde_json::json!(
                    {"containers": [{"name": "spark-kubernetes-driver"}, sidecar]}
                );
            }
            SparkOperator::Kubeflow => {
                app["spec"]["driver"]["sidecars"] = serde_json::json!([sidecar])
            }
        }
        env.sim.create(NS, app).expect("created with a sidecar");
        let id = env.executor.submit(&spec, &job, NS).await.expect("adopted");
        let (followed, follower) = follow_into_text(&env, &id);
        until_state(&env.executor, &id, JobState::Started).await;
        gate.open();
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(end.state, JobState::Succeeded, "{operator}: {end:?}");
        tokio::time::timeout(DEADLINE, follower)
            .await
            .expect("the follow ends with the job")
            .expect("joined");
        let followed = followed.lock().expect("not poisoned").clone();
        assert!(followed.contains("Pi is roughly"), "{operator}: {followed}");
        assert!(
            !followed.contains("sidecar noise"),
            "{operator}: {followed}"
        );
        let tail = env
            .executor
            .tail(&id, &TailOptions::default())
            .await
            .expect("tailed")
            .log;
        assert_eq!(tail, followed, "{operator}");
        // The sidecar did write: its log is only not the driver's.
        let pod = match operator {
            SparkOperator::Apache => format!("{name}-0-driver"),
            SparkOperator::Kubeflow => format!("{name}-driver"),
        };
        let params = kube::api::LogParams {
            container: Some("log-shipper".into()),
            ..Default::default()
        };
        let shipped = env
            .pods_api()
            .await
            .logs(&pod, &params)
            .await
            .expect("the sidecar's log");
        assert!(shipped.contains("sidecar noise"), "{operator}");
    }
}

#[tokio::test]
async fn a_follow_goes_on_across_driver_restarts_and_previous_finds_no_deleted_driver() {
    // The apache operator releases an ended attempt's driver after this delay; the follow
    // reads each driver while it is there.
    let mut config = spark_config();
    config.spark.release_delay = std::time::Duration::from_secs(1);
    let env = Env::start_with(config, Settings::fast()).await;
    for operator in SparkOperator::ALL {
        let gate = Gate::new();
        let spec = spark_pi(
            operator,
            &format!(
                "args: ['{}', 'exit=3']\nrestartPolicy: OnFailure\nretries: 1\nretryInterval: 1s",
                gate.arg()
            ),
        );
        let id = env
            .executor
            .submit(&spec, &job_id("restarts"), NS)
            .await
            .expect("submitted");
        let (followed, follower) = follow_into_text(&env, &id);
        // The first driver's log is being followed before it ends.
        eventually("the first driver's log", || async {
            followed
                .lock()
                .expect("not poisoned")
                .contains("Submitted application: SparkPi")
                .then_some(())
        })
        .await;
        gate.open();
        let (end, _) = run_to_end(&env.executor, &id).await;
        assert_eq!(
            (end.state, end.exit_code),
            (JobState::Failed, Some(3)),
            "{operator}: {end:?}"
        );
        tokio::time::timeout(DEADLINE, follower)
            .await
            .expect("the follow ends with the job")
            .expect("joined");
        let followed = followed.lock().expect("not poisoned").clone();
        assert_eq!(
            followed
                .matches("ERROR SparkContext: Error running SparkPi")
                .count(),
            2,
            "{operator}: one failure per driver, each followed: {followed}"
        );
        assert_eq!(
            followed.matches("Submitted application: SparkPi").count(),
            2,
            "{operator}: each line once: {followed}"
        );
        // Both operators delete a driver before they start the next attempt: the attempt
        // before the newest has no log left to read.
        let previous = env
            .executor
            .tail(
                &id,
                &TailOptions {
                    previous: true,
                    ..TailOptions::default()
                },
            )
            .await
            .expect("no error: the job exists")
            .log;
        assert_eq!(previous, "", "{operator}");
    }
}
