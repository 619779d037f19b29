//! JobSets on the simulated cluster, before a backend runs them: the JobSet that
//! `manifest::jobset::jobset_manifest` builds is accepted by the JobSet webhook and run by the
//! simulated JobSet controller, and the core mapping (`jobset_status`) over the JobSet, its Jobs
//! and their pods as the API serves them reports each outcome truthfully: all succeed; an
//! OOM-killed worker fails the set with `OomKilled` and the worker named; a set restarts once
//! then succeeds; `successPolicy: Any` ends it early; a cancel (the mark, then the deletion).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kubeferry_core::container::{MappingConfig, PodView};
use kubeferry_core::jobset::{
    ChildJobView, JOBSET_NAME_LABEL, JobSetObservation, JobSetView, jobset_status,
};
use kubeferry_core::marks::{CANCEL_ANNOTATION, jobset_object_name};
use kubeferry_core::spec::{JobSetSpec, Params, load_jobset};
use kubeferry_core::{ExecutionInfo, JobState, Reason};
use kubeferry_kube::manifest::jobset::{api_resource, jobset_manifest};
use kubeferry_sim::{CrdBundle, SimCluster, SimConfig};
use serde_json::json;

use crate::support::{DEADLINE, Gate, NS, Settings, client_as, eventually, executor_as};

/// As a container job's pod is OOM-killed in the other tests: 256 MiB against a 64 MiB limit.
const OOM: &str = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";

/// A JobSet run on its own simulated cluster, observed through the API as a backend would.
struct Run {
    sim: SimCluster,
    client: kube::Client,
    name: String,
}

impl Run {
    /// Starts a cluster serving JobSets and creates the JobSet of `yaml` on it.
    async fn start(yaml: &str, job_id: &str) -> Run {
        let mut config = SimConfig::for_tests();
        config.crd_bundles.push(CrdBundle::JobSet);
        let sim = SimCluster::start(config).await.expect("the cluster starts");
        let client = client_as(&sim, sim.admin_token()).await;
        let name = jobset_object_name(job_id);
        let manifest = jobset_manifest(&spec(yaml), job_id, &name, NS);
        sim.create(NS, manifest)
            .unwrap_or_else(|e| panic!("the JobSet is accepted: {e}"));
        Run { sim, client, name }
    }

    fn jobsets(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NS, &api_resource())
    }

    /// The JobSet (`None` once it is gone), its Jobs and their pods, as the API serves them.
    async fn observe(&self) -> (Option<JobSetView>, Vec<ChildJobView>, Vec<PodView>) {
        let by_jobset = ListParams::default().labels(&format!("{JOBSET_NAME_LABEL}={}", self.name));
        let jobset = self
            .jobsets()
            .get_opt(&self.name)
            .await
            .expect("the JobSet is read")
            .map(|object| JobSetView::from_parts(&object.metadata, &object.data));
        let jobs: Api<Job> = Api::namespaced(self.client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let jobs = jobs.list(&by_jobset).await.expect("the Jobs are listed");
        let pods = pods.list(&by_jobset).await.expect("the pods are listed");
        (
            jobset,
            jobs.items.iter().map(ChildJobView::from).collect(),
            pods.items.iter().map(PodView::from).collect(),
        )
    }

    /// Maps the JobSet until its status is terminal, as a waiter would (each answer after the
    /// previous); returns the outcome and every distinct status on the way.
    async fn outcome(&self) -> (ExecutionInfo, Vec<ExecutionInfo>) {
        self.outcome_after(None).await
    }

    /// [`Run::outcome`], the JobSet last seen as `last_view` (it may be gone by now).
    async fn outcome_after(
        &self,
        last_view: Option<JobSetView>,
    ) -> (ExecutionInfo, Vec<ExecutionInfo>) {
        let end = tokio::time::Instant::now() + DEADLINE;
        let config = MappingConfig::default();
        let mut last_view = last_view;
        let mut previous: Option<ExecutionInfo> = None;
        let mut seen: Vec<ExecutionInfo> = Vec::new();
        loop {
            let (view, jobs, pods) = self.observe().await;
            let observed = match (&view, &last_view) {
                (Some(view), _) => Some(JobSetObservation::Present(view)),
                (None, Some(last)) => Some(JobSetObservation::Vanished {
                    last_seen: last,
                    final_state: false,
                }),
                (None, None) => None,
            };
            if let Some(observed) = observed
                && let Some(mapped) = jobset_status(
                    &observed,
                    &jobs,
                    &pods,
                    jiff::Timestamp::now(),
                    &config,
                    previous.as_ref(),
                )
            {
                let info = mapped.info;
                if seen.last() != Some(&info) {
                    seen.push(info.clone());
                }
                if info.is_terminal() {
                    return (info, seen);
                }
                previous = Some(info);
            }
            if view.is_some() {
                last_view = view;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "JobSet {} did not end; seen {seen:#?}",
                self.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

fn spec(yaml: &str) -> JobSetSpec {
    load_jobset("test.yaml", yaml, &Params::default())
        .unwrap_or_else(|e| panic!("the test's JobSet is invalid: {e}"))
}

/// A replicated job running `script` with `sh -c`.
fn rjob(name: &str, replicas: u32, script: &str, extra: &str) -> String {
    let script = serde_json::to_string(script).expect("a string");
    format!(
        "  - name: {name}\n    replicas: {replicas}\n    image: busybox:1.36\n    command: [sh, -c, {script}]\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replicated_job_succeeds() {
    let yaml = format!(
        "kind: JobSet\nname: train\nstartupPolicy: InOrder\nreplicatedJobs:\n{}{}",
        rjob("leader", 1, "echo leading", ""),
        rjob("workers", 2, "echo working", "")
    );
    let run = Run::start(&yaml, "train-all").await;
    // The set's Jobs are not container jobs: the container backend lists none of them.
    let executor = executor_as(&run.sim, run.sim.admin_token(), &Settings::fast()).await;
    eventually("the JobSet's Jobs", || async {
        let (_, jobs, _) = run.observe().await;
        (!jobs.is_empty()).then_some(())
    })
    .await;
    let listed = executor.list(NS, None).await.expect("the jobs are listed");
    assert!(listed.is_empty(), "{listed:?}");
    let (outcome, seen) = run.outcome().await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    assert!(outcome.started_at.is_some(), "{outcome:?}");
    assert!(outcome.finished_at.is_some(), "{outcome:?}");
    let replicas = outcome.replicas.expect("a replica summary");
    assert_eq!(replicas.restarts, 0);
    assert_eq!(replicas.terminal_state.as_deref(), Some("Completed"));
    let succeeded: Vec<(&str, u32, u32)> = replicas
        .replicated_jobs
        .iter()
        .map(|r| (r.name.as_str(), r.succeeded, r.replicas))
        .collect();
    assert_eq!(succeeded, [("leader", 1, 1), ("workers", 2, 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_killed_worker_fails_the_set_with_oom_killed_and_the_worker_named() {
    let gate = Gate::new();
    let worker = format!(
        "case \"$POD\" in *-workers-1-*) exec {OOM};; esac; {}",
        gate.wait("never")
    );
    let yaml = format!(
        "kind: JobSet\nname: train\nreplicatedJobs:\n{}{}",
        rjob("leader", 1, &gate.wait("never"), ""),
        rjob(
            "workers",
            2,
            &worker,
            "    env: {POD: {field: podName}}\n    resources: {memory: 64Mi, limits: {memory: 64Mi}}\n"
        )
    );
    let run = Run::start(&yaml, "train-oom").await;
    let (outcome, seen) = run.outcome().await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::OomKilled, Some(137)),
        "{seen:#?}"
    );
    assert!(
        outcome.message.starts_with(&format!(
            "workers index 1 (Job {}-workers-1) failed: the main container was OOMKilled",
            run.name
        )),
        "{}",
        outcome.message
    );
    assert_eq!(
        outcome.replicas.and_then(|r| r.terminal_state).as_deref(),
        Some("Failed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_restarts_once_then_succeeds() {
    let gate = Gate::new();
    // The first run fails and leaves a mark; the run after the restart sees it and succeeds.
    let mark = gate.path("failed-once");
    let flaky =
        format!("if [ ! -e {mark} ]; then touch {mark}; echo failing >&2; exit 1; fi; echo fine");
    let yaml = format!(
        "kind: JobSet\nname: train\nfailurePolicy: {{maxRestarts: 1}}\nreplicatedJobs:\n{}{}",
        rjob("leader", 1, "echo leading", ""),
        rjob("flaky", 1, &flaky, "")
    );
    let run = Run::start(&yaml, "train-restart").await;
    let (outcome, seen) = run.outcome().await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    assert_eq!(
        outcome.replicas.as_ref().map(|r| r.restarts),
        Some(1),
        "{seen:#?}"
    );
    // Nothing on the way claimed an outcome: the failure before the restart was not one.
    assert!(
        seen.iter().all(|s| !s.is_terminal() || s == &outcome),
        "{seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_past_max_restarts_fails_the_set_saying_so() {
    let yaml = format!(
        "kind: JobSet\nname: train\nfailurePolicy: {{maxRestarts: 1}}\nreplicatedJobs:\n{}",
        rjob("leader", 1, "echo broken >&2; exit 3", "")
    );
    let run = Run::start(&yaml, "train-broken").await;
    let (outcome, seen) = run.outcome().await;
    assert_eq!(
        (outcome.state, outcome.reason, outcome.exit_code),
        (JobState::Failed, Reason::Error, Some(3)),
        "{seen:#?}"
    );
    assert!(
        outcome.message.starts_with(&format!(
            "leader index 0 (Job {}-leader-0) failed after 1 restart: exit code 3",
            run.name
        )),
        "{}",
        outcome.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_policy_any_ends_the_set_early() {
    let gate = Gate::new();
    let yaml = format!(
        "kind: JobSet\nname: train\nsuccessPolicy: {{operator: Any, targetReplicatedJobs: [leader]}}\nreplicatedJobs:\n{}{}",
        rjob("leader", 1, "echo done", ""),
        rjob("workers", 2, &gate.wait("never"), "")
    );
    let run = Run::start(&yaml, "train-any").await;
    let (outcome, seen) = run.outcome().await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Succeeded, Reason::Completed),
        "{seen:#?}"
    );
    let replicas = outcome.replicas.expect("a replica summary");
    let workers = &replicas.replicated_jobs[1];
    assert_eq!((workers.name.as_str(), workers.succeeded), ("workers", 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_is_in_progress_until_the_set_is_deleted() {
    let gate = Gate::new();
    let yaml = format!(
        "kind: JobSet\nname: train\nreplicatedJobs:\n{}",
        rjob("workers", 2, &gate.wait("never"), "")
    );
    let run = Run::start(&yaml, "train-cancel").await;
    // Running first.
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (Some(view), jobs, pods) = run.observe().await else {
            panic!("the JobSet exists");
        };
        let mapped = jobset_status(
            &JobSetObservation::Present(&view),
            &jobs,
            &pods,
            jiff::Timestamp::now(),
            &MappingConfig::default(),
            None,
        )
        .expect("mapped");
        if mapped.info.state == JobState::Started {
            break;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "never started: {mapped:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The cancel mark, as the cancel protocol puts it on.
    let mark = json!({"metadata": {"annotations": {CANCEL_ANNOTATION: jiff::Timestamp::now().to_string()}}});
    run.jobsets()
        .patch(&run.name, &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .expect("the cancel mark goes on");
    let (Some(view), jobs, pods) = run.observe().await else {
        panic!("the JobSet exists");
    };
    let mapped = jobset_status(
        &JobSetObservation::Present(&view),
        &jobs,
        &pods,
        jiff::Timestamp::now(),
        &MappingConfig::default(),
        None,
    )
    .expect("mapped");
    assert_eq!(
        (mapped.info.state, mapped.info.reason),
        (JobState::Cancelling, Reason::CancelRequested)
    );
    run.jobsets()
        .delete(&run.name, &DeleteParams::foreground())
        .await
        .expect("the JobSet is deleted");
    let (outcome, seen) = run.outcome_after(Some(view)).await;
    assert_eq!(
        (outcome.state, outcome.reason),
        (JobState::Cancelled, Reason::Cancelled),
        "{seen:#?}"
    );
    drop(run.sim);
}
