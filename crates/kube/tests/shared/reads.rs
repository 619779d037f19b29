//! What the read-only tests of both kinds share: many status queries, and what they cost.

use kubeferry_core::{ExecutionId, JobState, Reason};
use kubeferry_kube::Executor;
use kubeferry_sim::SimCluster;

/// Asks each job's status `rounds` times over and returns the first round's states and
/// reasons; fails if the queries made any request to the simulated cluster.
pub async fn answers_reading_only(
    executor: &Executor,
    sim: &SimCluster,
    ids: &[&ExecutionId],
    rounds: usize,
) -> Vec<(JobState, Reason)> {
    sim.reset_counters();
    let mut answers = Vec::new();
    for round in 0..rounds {
        for id in ids {
            let info = executor.status(id).await.expect("a status");
            if round == 0 {
                answers.push((info.state, info.reason));
            }
        }
    }
    let counters = sim.counters();
    assert!(
        counters.values().all(|count| *count == 0),
        "{} status queries made requests: {counters:#?}",
        rounds * ids.len()
    );
    answers
}

/// Asks `times` for the status of `id`, which names no job: each answer must be "no such job".
/// Returns the requests counted by the simulated cluster meanwhile.
pub async fn poll_unknown(
    executor: &Executor,
    sim: &SimCluster,
    id: &ExecutionId,
    times: usize,
) -> std::collections::BTreeMap<kubeferry_sim::CounterKey, u64> {
    sim.reset_counters();
    for _ in 0..times {
        let error = executor.status(id).await.unwrap_err();
        assert!(error.is_no_such_job(), "{error}");
    }
    sim.counters()
}
