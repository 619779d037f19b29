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
