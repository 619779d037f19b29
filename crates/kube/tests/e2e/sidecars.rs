//! Native sidecars: they run beside the job's container for its whole run, and never decide
//! its outcome; one that cannot start holds the job back, and says why.

use std::time::Duration;

use kubeferry_core::{JobState, Reason};
use kubeferry_sim::SimConfig;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_run_beside_the_job_and_never_decide_its_outcome() {
    let env = Env::start().await;
    let gate = Gate::new();
    // One sidecar runs until it is stopped; the other crashes, and the kubelet restarts it.
    let sidecars = format!(
        "sidecars:\n  - name: server\n    image: busybox:1.36\n    command: [sh, -c, 'sleep 3600']\n  - name: crasher\n    image: busybox:1.36\n    command: [sh, -c, {}]\n",
        serde_json::to_string("sleep 0.2; exit 7").unwrap()
    );
    let id = env
        .submit(&shell("beside", &gate.wait("end"), &sidecars))
        .await;
    env.status_until(&id, "running", is(JobState::Started))
        .await;
    // The crashing sidecar has been restarted while the job's container runs.
    eventually("the crashing sidecar to be restarted", || async {
        let pod = env.pod_of(&id).await;
        let pod = env.sim.object("", "pods", NS, &pod)?;
        let restarts = pod["status"]["initContainerStatuses"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "crasher")?["restartCount"]
            .as_i64()?;
        (restarts >= 1).then_some(())
    })
    .await;
    gate.open("end");
    let (outcome, seen) = env.wait(&id).await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Succeeded, Reason::Completed, Some(0)),
        "{seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_that_cannot_be_pulled_holds_the_job_back_then_fails_it() {
    // The grace counts from the pod's start time, which has whole seconds.
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let id = env
        .submit(&shell(
            "unshipped",
            "echo never",
            "sidecars:\n  - name: shipper\n    image: registry.invalid/shipper:1.0\n",
        ))
        .await;
    let (outcome, seen) = env.wait(&id).await;
    let held = seen
        .iter()
        .find(|i| i.reason == Reason::ImagePullBackOff)
        .unwrap_or_else(|| panic!("never held back by the image pull: {seen:#?}"));
    assert_eq!(held.state, JobState::Queued);
    assert!(held.message.contains("sidecar shipper"), "{held:?}");
    assert_eq!(outcome.state, JobState::Failed, "{seen:#?}");
    assert_eq!(outcome.reason, Reason::ImagePullFailed);
    assert!(outcome.message.contains("sidecar shipper"), "{outcome:?}");
    assert!(outcome.message.contains("registry.invalid"), "{outcome:?}");
}
