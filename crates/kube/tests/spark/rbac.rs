//! Spark jobs under exactly the Role `kubeferry rbac` prints (and under the Spark part of it
//! alone), on a cluster enforcing RBAC with a service account's token; a missing verb is an
//! error naming it.

use std::collections::HashSet;

use futures::StreamExt;
use kubeferry_core::spark::SparkOperator;
use kubeferry_core::{JobKind, JobState};
use kubeferry_kube::Error;
use kubeferry_kube::logs::{FollowOptions, TailOptions};
use kubeferry_kube::rbac::{SPARK_JOB_PERMISSIONS, permissions};

use crate::support::*;

#[tokio::test]
async fn spark_jobs_run_under_exactly_the_role_kubeferry_rbac_prints() {
    let env = rbac_env(Settings::fast()).await;
    let roles = [
        ("kubeferry-spark", permissions(&[JobKind::SparkApp])),
        ("kubeferry-all", permissions(&JobKind::ALL)),
    ];
    let mut known = HashSet::new();
    for (account, granted) in roles {
        let executor = executor_with_permissions(&env, account, &granted).await;
        for operator in SparkOperator::ALL {
            // Runs, is followed, ends, and its log is read.
            let gate = Gate::new();
            let job = job_id("granted");
            known.insert(job.clone());
            let spec = spark_pi(operator, &format!("args: ['{}']", gate.arg()));
            let id = executor.submit(&spec, &job, NS).await.expect("submitted");
            let stream = executor
                .follow(&id, FollowOptions::default())
                .expect("followed");
            let follower = tokio::spawn(async move {
                let mut lines = Box::pin(stream);
                let mut count = 0;
                while let Some(line) = lines.next().await {
                    line.expect("a log line");
                    count += 1;
                }
                count
            });
            until_state(&executor, &id, JobState::Started).await;
            gate.open();
            let (end, _) = run_to_end(&executor, &id).await;
            assert_eq!(
                end.state,
                JobState::Succeeded,
                "{account} {operator}: {end:?}"
            );
            assert!(follower.await.expect("joined") > 0, "{account} {operator}");
            if operator == SparkOperator::Kubeflow {
                let log = executor
                    .tail(&id, &TailOptions::default())
                    .await
                    .expect("tailed")
                    .log;
                assert!(log.contains("Pi is roughly"), "{log}");
            }

            // Another is cancelled.
            let job = job_id("stopped");
            known.insert(job.clone());
            let id = executor
                .submit(&spark_pi(operator, "args: ['sleep=30']"), &job, NS)
                .await
                .expect("submitted");
            until_state(&executor, &id, JobState::Started).await;
            executor.cancel(&id).await.expect("cancelled");
            let (end, _) = run_to_end(&executor, &id).await;
            assert_eq!(end.state, JobState::Cancelled, "{account} {operator}");
        }
        let listed = executor.list(NS, None).await.expect("listed");
        assert!(!listed.is_empty());
        let orphans = executor.sweep(NS, &known, false).await.expect("swept");
        assert!(orphans.is_empty(), "{orphans:?}");
    }
}

#[tokio::test]
async fn a_missing_verb_is_an_error_naming_it() {
    let env = rbac_env(Settings::fast()).await;
    let granted = with_verbs(
        SPARK_JOB_PERMISSIONS,
        "sparkapplications",
        &["get", "list", "watch", "patch", "delete"],
    );
    let executor = executor_with_permissions(&env, "no-create", &granted).await;
    let error = executor
        .submit(&spark_pi(SparkOperator::Apache, ""), &job_id("refused"), NS)
        .await
        .expect_err("refused");
    match &error {
        Error::Forbidden { verb, resource, .. } => assert_eq!(
            (*verb, resource.as_str()),
            ("create", "sparkapplications.spark.apache.org")
        ),
        other => panic!("{other}"),
    }
    let text = error.to_string();
    assert!(
        text.contains("needs permission to create sparkapplications.spark.apache.org")
            && text.contains("kubeferry rbac"),
        "{text}"
    );
}
