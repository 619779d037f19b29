//! Tracking at scale, as a count of API requests (not a timing): waiting on many jobs costs the
//! namespace's watches, not a poll per job; and each job's end, one outcome record.

use futures::future::join_all;
use kubeferry_core::JobState;
use kubeferry_kube::generate_job_id;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_on_many_jobs_costs_the_watches_not_a_poll_per_job() {
    const JOBS: usize = 50;
    let env = Env::start().await;
    let spec = spec_of(&shell("many", "sleep 1", ""));
    let mut ids = Vec::new();
    for _ in 0..JOBS {
        let job_id = generate_job_id("many");
        ids.push(env.executor.submit(&spec, &job_id, NS).await.unwrap());
    }
    // Submitting costs one create per job, and one read of the job id's outcome record (a job
    // id never runs twice; submissions one after another read one each); tracking costs the
    // namespace's watches: one list and one watch of Jobs, of pods, of the Job controller's
    // refusal events, and of the outcome records.
    assert_eq!(env.sim.request_count("create", "jobs.batch"), JOBS as u64);
    assert_eq!(env.sim.request_count("get", "configmaps"), 0);
    let watch = env.executor.container_jobs().watch(NS);
    eventually("the watch to hold every Job", || async {
        (watch.jobs.len() == JOBS).then_some(())
    })
    .await;
    env.watches_open(NAMESPACE_WATCHES).await;
    assert_eq!(
        env.sim.request_count("list", ""),
        (NAMESPACE_WATCHES + JOBS) as u64
    );
    assert_eq!(env.sim.request_count("list", "configmaps"), 1 + JOBS as u64);
    assert_eq!(env.sim.request_count("watch", ""), NAMESPACE_WATCHES as u64);

    // Jobs that ended already were recorded (and let go) already.
    let recorded_before = env.sim.request_count("create", "configmaps");
    let released_before = env.sim.request_count("patch", "jobs.batch");
    env.sim.reset_counters();
    let outcomes = join_all(ids.iter().map(|id| env.wait(id))).await;
    assert!(
        outcomes
            .iter()
            .all(|(outcome, _)| outcome.state == JobState::Succeeded)
    );
    // Every status came from the watches: not a request per job, not one at all, unless a
    // watch was re-established meanwhile. The two writes per job are its outcome record and
    // the release of the finalizer that held the Job until then.
    let counters = env.sim.counters();
    let writes = [("create", "configmaps"), ("patch", "jobs.batch")];
    let polls: u64 = counters
        .iter()
        .filter(|(key, _)| key.verb != "watch")
        .filter(|(key, _)| !writes.contains(&(key.verb.as_str(), key.resource.as_str())))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(polls, 0, "{counters:#?}");
    eventually("every Job let go", || async {
        (released_before + env.sim.request_count("patch", "jobs.batch") == JOBS as u64)
            .then_some(())
    })
    .await;
    assert_eq!(
        recorded_before + env.sim.request_count("create", "configmaps"),
        JOBS as u64,
        "{counters:#?}"
    );
    assert!(
        env.sim.request_count("watch", "") <= NAMESPACE_WATCHES as u64,
        "{counters:#?}"
    );
}

/// A caller polling an id this cluster never ran (or ran so long ago that its record expired)
/// costs one GET per period, not one per question; submitting under that id is not hindered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_an_unknown_id_costs_one_request_per_period() {
    let mut settings = Settings::fast();
    settings.executor.container.watching.reflector.absent_ttl = std::time::Duration::from_secs(2);
    let env = Env::start_with(kubeferry_sim::SimConfig::for_tests(), settings).await;
    let spec = spec_of(&shell("later", "echo here", ""));
    let job_id = "submitted-later";
    let id = id_of(&kubeferry_core::marks::object_name("", job_id));
    let watch = env.executor.container_jobs().watch(NS);
    eventually("the namespace's watches to be current", || async {
        watch.is_current().then_some(())
    })
    .await;
    let counters = crate::reads::poll_unknown(&env.executor, &env.sim, &id, 100).await;
    assert_eq!(
        env.sim.request_count("get", "jobs.batch"),
        1,
        "{counters:#?}"
    );
    // Past the period, the server is asked again.
    eventually("a second GET once the period ran out", || async {
        assert!(env.executor.status(&id).await.unwrap_err().is_no_such_job());
        (env.sim.request_count("get", "jobs.batch") == 2).then_some(())
    })
    .await;
    // The id submitted now is found at once, whatever was noted of it.
    let submitted = env.executor.submit(&spec, job_id, NS).await.unwrap();
    assert_eq!(submitted, id);
    env.executor.status(&id).await.unwrap();
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded);
}
