//! The container status mapping of Indexed Jobs, on Job and pod YAML as a Kubernetes 1.33 API
//! server returns them (fixtures under `tests/fixtures/container/indexed_*`): the job's state,
//! and where each index stands.

mod common;
mod support;

use kubeferry_core::status::{IndexFailure, IndexSummary};
use kubeferry_core::{JobState, Reason};
use support::{Seen, at, expect, map, views};

fn summary(
    completions: u32,
    [succeeded, failed, running, pending]: [u32; 4],
    completed: &str,
    failed_indexes: &str,
    failures: Vec<IndexFailure>,
) -> IndexSummary {
    IndexSummary {
        completions,
        succeeded,
        failed,
        running,
        pending,
        completed_indexes: completed.to_string(),
        failed_indexes: failed_indexes.to_string(),
        failures,
    }
}

#[test]
fn pods_carry_their_index() {
    let (job, pods) = views("indexed_running");
    let indexed = job.indexed.as_deref().expect("an Indexed Job");
    assert_eq!(indexed.completions, 5);
    assert_eq!(indexed.completed_indexes, "0,1");
    let indexes: Vec<Option<u32>> = pods.iter().map(|p| p.completion_index).collect();
    assert_eq!(indexes, [Some(0), Some(1), Some(2), Some(3)]);
    // A NonIndexed Job has no indexes, and its pods none.
    let (job, pods) = views("oom_killed");
    assert_eq!(job.indexed, None);
    assert!(pods.iter().all(|p| p.completion_index.is_none()));
}

#[test]
fn running_counts_indexes_not_just_the_newest_pod() {
    let mapped = map("indexed_running", Seen::Present, at(30)).expect("mapped");
    let mut expected = expect(JobState::Started, Reason::Running)
        .message("2 of 5 indexes succeeded, 1 running, 2 pending")
        .started(5)
        .info();
    expected.indexes = Some(summary(5, [2, 0, 1, 2], "0,1", "", vec![]));
    assert_eq!(mapped.info, expected);
    assert_eq!(mapped.warning, None);
    assert!(!mapped.must_record());
}

#[test]
fn max_failed_indexes_fails_the_job_naming_the_index_and_why() {
    let mapped = map("indexed_max_failed_indexes", Seen::Present, at(80)).expect("mapped");
    let mut expected = expect(JobState::Failed, Reason::OomKilled)
        .message(
            "index 3 failed: OOMKilled (exit code 137); 1 of 5 indexes failed \
             (MaxFailedIndexesExceeded: Job has exceeded the specified maximal number of failed indexes)",
        )
        .exit_code(137)
        .started(4)
        .finished(70)
        .info();
    expected.indexes = Some(summary(
        5,
        [3, 1, 0, 1],
        "0-2",
        "3",
        vec![IndexFailure {
            index: 3,
            reason: Reason::OomKilled,
            exit_code: Some(137),
            message: "the main container was OOMKilled (it has no memory limit: the node ran short of memory), exit code 137"
                .to_string(),
        }],
    ));
    assert_eq!(mapped.info, expected);
    assert_eq!(mapped.warning, None);
}

#[test]
fn failure_target_alone_is_not_an_outcome_while_pods_terminate() {
    let mapped = map("indexed_failure_target_only", Seen::Present, at(80)).expect("mapped");
    assert_eq!(mapped.info.state, JobState::Started);
    assert_eq!(
        mapped.info.message,
        "the Job controller decided (FailureTarget: MaxFailedIndexesExceeded); waiting for its \
         pods to terminate; 3 of 5 indexes succeeded, 1 failed, 1 pending"
    );
    let indexes = mapped.info.indexes.expect("a summary");
    assert_eq!(indexes.failures[0].reason, Reason::OomKilled);
    // Once the Job is gone it can no longer write its final condition: the decision stands.
    let mapped = map(
        "indexed_failure_target_only",
        Seen::Vanished { final_state: true },
        at(80),
    )
    .expect("mapped");
    assert_eq!(mapped.info.state, JobState::Failed);
    assert_eq!(mapped.info.reason, Reason::OomKilled);
}

#[test]
fn failed_indexes_end_the_job_once_every_index_ran() {
    let mapped = map("indexed_failed_indexes", Seen::Present, at(60)).expect("mapped");
    let mut expected = expect(JobState::Failed, Reason::Error)
        .message(
            "index 1 failed: exit code 3: shard 1: input file is corrupt; 1 of 4 indexes failed \
             (FailedIndexes: Job has failed indexes)",
        )
        .exit_code(3)
        .last_words("shard 1: input file is corrupt")
        .started(4)
        .finished(40)
        .info();
    expected.indexes = Some(summary(
        4,
        [3, 1, 0, 0],
        "0,2-3",
        "1",
        vec![IndexFailure {
            index: 1,
            reason: Reason::Error,
            exit_code: Some(3),
            message: "exit code 3: shard 1: input file is corrupt".to_string(),
        }],
    ));
    assert_eq!(mapped.info, expected);
}

#[test]
fn a_success_policy_says_so() {
    let mapped = map("indexed_success_policy", Seen::Present, at(60)).expect("mapped");
    let mut expected = expect(JobState::Succeeded, Reason::Completed)
        .message(
            "the success policy was met (SuccessCriteriaMet: Matched rules at index 0); \
             1 of 4 indexes succeeded, 3 pending",
        )
        .started(4)
        .finished(32)
        .info();
    expected.indexes = Some(summary(4, [1, 0, 0, 3], "0", "", vec![]));
    assert_eq!(mapped.info, expected);
}

#[test]
fn all_indexes_succeed() {
    let mapped = map("indexed_all_succeeded", Seen::Present, at(60)).expect("mapped");
    let mut expected = expect(JobState::Succeeded, Reason::Completed)
        .message("3 of 3 indexes succeeded")
        .started(4)
        .finished(41)
        .info();
    expected.indexes = Some(summary(3, [3, 0, 0, 0], "0-2", "", vec![]));
    assert_eq!(mapped.info, expected);
    // A terminal answer never changes, whatever is observed later.
    let again = support::map_with(
        "indexed_running",
        Seen::Present,
        at(90),
        &Default::default(),
        Some(&mapped.info),
    )
    .expect("mapped");
    assert_eq!(again.info, mapped.info);
}

#[test]
fn non_indexed_jobs_have_no_index_summary() {
    for case in support::fixture_names() {
        if case.starts_with("indexed_") {
            continue;
        }
        if let Some(mapped) = map(&case, Seen::Present, at(3600)) {
            assert_eq!(mapped.info.indexes, None, "{case}");
            let json = serde_json::to_string(&mapped.info).expect("serializes");
            assert!(!json.contains("indexes"), "{case}: {json}");
        }
    }
}

mod properties {
    use kubeferry_core::container::{JobConditionType, PodView};
    use proptest::prelude::*;

    use super::support::{Seen, at, map_views, views};

    const CASES: [&str; 6] = [
        "indexed_all_succeeded",
        "indexed_failed_indexes",
        "indexed_failure_target_only",
        "indexed_max_failed_indexes",
        "indexed_running",
        "indexed_success_policy",
    ];

    proptest! {
        /// Whatever subset of its pods is seen, and whenever: the counts add up to the
        /// indexes, and a Job that can still judge is terminal only with its final condition.
        #[test]
        fn counts_add_up_and_nothing_ends_before_the_final_condition(
            case in proptest::sample::select(&CASES[..]),
            kept in proptest::collection::vec(any::<bool>(), 6),
            now in 0i64..7200,
        ) {
            let (job, pods) = views(case);
            let pods: Vec<PodView> = pods
                .into_iter()
                .zip(kept.iter().cycle())
                .filter_map(|(pod, keep)| keep.then_some(pod))
                .collect();
            let config = Default::default();
            let mapped = map_views(&job, &pods, Seen::Present, at(now), &config, None)
                .expect("a present Job is mapped");
            let indexes = mapped.info.indexes.as_ref().expect("an index summary");
            prop_assert_eq!(
                indexes.succeeded + indexes.failed + indexes.running + indexes.pending,
                indexes.completions
            );
            let final_condition = job.conditions.iter().any(|c| {
                matches!(c.kind, JobConditionType::Complete | JobConditionType::Failed)
                    && c.status.is_true()
            });
            if mapped.info.is_terminal() {
                prop_assert!(final_condition, "{:?}", mapped.info);
                prop_assert_eq!(indexes.running, 0);
            }
        }
    }
}
