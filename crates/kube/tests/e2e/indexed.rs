//! Indexed jobs: one pod per index, each seeing its index; the outcome of the whole decided by
//! the Job controller's per-index backoff, failed-index limit and success policy, reported with
//! where each index stands; cancel; and the log of one index.

use kubeferry_core::{JobState, Reason};
use kubeferry_kube::logs::TailOptions;

use crate::support::*;

const OOM: &str = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";

fn tail_of(index: u32) -> TailOptions {
    TailOptions {
        index: Some(index),
        ..TailOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_index_succeeds_and_each_log_is_its_own() {
    let env = Env::start().await;
    let id = env
        .submit(&shell(
            "shards",
            "echo \"shard $JOB_COMPLETION_INDEX\"",
            "indexed: true\ncompletions: 4\nparallelism: 2\n",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Succeeded, Reason::Completed, None),
        "{seen:#?}"
    );
    assert_eq!(outcome.message, "4 of 4 indexes succeeded");
    let indexes = outcome.indexes.as_ref().expect("an index summary");
    assert_eq!(
        (
            indexes.completions,
            indexes.succeeded,
            indexes.failed,
            indexes.running,
            indexes.pending
        ),
        (4, 4, 0, 0, 0)
    );
    assert_eq!(indexes.completed_indexes, "0-3");
    // Every answer on the way carried the summary too.
    assert!(seen.iter().all(|info| info.indexes.is_some()), "{seen:#?}");
    for index in 0..4 {
        let tail = env.executor.tail(&id, &tail_of(index)).await.unwrap();
        assert_eq!(tail.log, format!("shard {index}\n"));
        assert_eq!(tail.warning, None, "the caller named the index");
    }
    // Without --index: one index's log, and a word on which one and how to read another.
    let any = env
        .executor
        .tail(&id, &TailOptions::default())
        .await
        .unwrap();
    let shown: u32 = any.log.trim().trim_start_matches("shard ").parse().unwrap();
    assert_eq!(
        any.warning.as_deref(),
        Some(
            format!("the log of index {shown}, one of 4 indexes' pods; --index N reads another")
                .as_str()
        )
    );
    // An index the job does not have is the caller's mistake, said so.
    let error = env.executor.tail(&id, &tail_of(9)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{id} has no index 9: its indexes are 0 to 3")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_out_of_retries_fails_the_job_at_the_end_when_failures_are_allowed() {
    let env = Env::start().await;
    // Index 2 fails both its attempts; one failed index is allowed, so the others run on.
    let id = env
        .submit(&shell(
            "allowed",
            "if [ \"$JOB_COMPLETION_INDEX\" = 2 ]; then echo boom; exit 3; fi; echo fine",
            "indexed: true\ncompletions: 4\nparallelism: 4\nbackoffLimitPerIndex: 1\nmaxFailedIndexes: 1\n",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{seen:#?}"
    );
    assert!(
        outcome.message.starts_with(
            "index 2 failed: exit code 3: boom; 1 of 4 indexes failed (FailedIndexes:"
        ),
        "{outcome:?}"
    );
    let indexes = outcome.indexes.as_ref().expect("an index summary");
    assert_eq!((indexes.succeeded, indexes.failed), (3, 1));
    // As Kubernetes writes it: two neighbours are listed, not made a range.
    assert_eq!(indexes.completed_indexes, "0,1,3");
    assert_eq!(indexes.failed_indexes, "2");
    assert_eq!(indexes.failures.len(), 1);
    assert_eq!(indexes.failures[0].index, 2);
    assert_eq!(indexes.failures[0].exit_code, Some(3));
    // The index was retried once on its own.
    let job = env.job_object(&id).expect("kept");
    assert_eq!(job["status"]["failed"], 2);
    // The previous attempt of index 2 has its own log.
    let previous = TailOptions {
        previous: true,
        ..tail_of(2)
    };
    assert_eq!(
        env.executor.tail(&id, &previous).await.unwrap().log,
        "boom\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_failed_indexes_than_allowed_fail_the_job_at_once_with_the_index_and_why() {
    let env = Env::start().await;
    let gate = Gate::new();
    // Index 1 is OOM-killed; no failed index is allowed: the others are stopped.
    let script = format!(
        "if [ \"$JOB_COMPLETION_INDEX\" = 1 ]; then exec {OOM}; fi; {}",
        gate.wait("never")
    );
    let id = env
        .submit(&shell(
            "strict",
            &script,
            "indexed: true\ncompletions: 3\nparallelism: 3\nbackoffLimitPerIndex: 0\nmaxFailedIndexes: 0\nresources: {memory: 64Mi, limits: {memory: 64Mi}}\n",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(137)),
        "{seen:#?}"
    );
    assert_eq!(
        outcome.message,
        "index 1 failed: OOMKilled (exit code 137); 3 of 3 indexes failed, 2 of them stopped once the outcome was decided \
         (MaxFailedIndexesExceeded: Job has exceeded the specified maximal number of failed indexes)"
    );
    let indexes = outcome.indexes.as_ref().expect("an index summary");
    // The Job controller counts the indexes it stopped as failed too; each says why.
    assert_eq!(
        (indexes.succeeded, indexes.failed, indexes.running),
        (0, 3, 0)
    );
    assert_eq!(indexes.failed_indexes, "0-2");
    let reasons: Vec<(u32, Reason, &str)> = indexes
        .failures
        .iter()
        .map(|f| (f.index, f.reason, f.message.as_str()))
        .collect();
    let stopped = "stopped by the Job controller once it had decided the job's outcome";
    assert_eq!(
        reasons,
        [
            (0, Reason::Error, stopped),
            (
                1,
                Reason::OomKilled,
                "the main container was OOMKilled (exceeded its memory limit of 64Mi), exit code 137"
            ),
            (2, Reason::Error, stopped),
        ]
    );
    // Terminal only once the Job's final condition is there, after every pod terminated.
    let job = env.job_object(&id).expect("kept");
    let failed = job["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .any(|c| c["type"] == "Failed" && c["status"] == "True");
    assert!(failed, "{job:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_policy_ends_the_job_early_and_says_so() {
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!(
        "if [ \"$JOB_COMPLETION_INDEX\" = 0 ]; then echo leader done; exit 0; fi; {}",
        gate.wait("never")
    );
    let id = env
        .submit(&shell(
            "leader",
            &script,
            "indexed: true\ncompletions: 3\nparallelism: 3\nsuccessPolicy: [{succeededIndexes: \"0\"}]\n",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    assert!(
        outcome
            .message
            .starts_with("the success policy was met (SuccessCriteriaMet"),
        "{outcome:?}"
    );
    let indexes = outcome.indexes.as_ref().expect("an index summary");
    assert_eq!((indexes.succeeded, indexes.running), (1, 0));
    assert_eq!(indexes.completed_indexes, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_every_index() {
    let env = Env::start().await;
    let gate = Gate::new();
    let id = env
        .submit(&shell(
            "stopme",
            &gate.wait("never"),
            "indexed: true\ncompletions: 3\nparallelism: 3\n",
        ))
        .await;
    let running = env
        .status_until(&id, "every index running", |info| {
            info.indexes.as_ref().is_some_and(|i| i.running == 3)
        })
        .await;
    assert_eq!(running.state, JobState::Started);
    assert_eq!(running.message, "0 of 3 indexes succeeded, 3 running");
    env.executor.cancel(&id).await.expect("cancelled");
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{seen:#?}"
    );
    eventually("every pod to be gone", || async {
        env.executor
            .container_jobs()
            .watch(NS)
            .live_pods_of(&id.name)
            .is_empty()
            .then_some(())
    })
    .await;
}
