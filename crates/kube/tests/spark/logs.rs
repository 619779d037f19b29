//! The driver's log: followed while the job runs, tailed (by lines and bytes) after it ended
//! while the driver pod is kept, and empty once the operator released it.

use futures::StreamExt;
use kubeferry_core::JobState;
use kubeferry_core::spark::SparkOperator;
use kubeferry_kube::logs::{FollowOptions, TailOptions};

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
            .expect("tailed");
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
            .expect("tailed");
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
            .expect("tailed");
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
        .expect("no error: the job exists");
    assert_eq!(text, "");
}
