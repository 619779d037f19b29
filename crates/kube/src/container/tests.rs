//! Races of cancel, played deterministically against the simulated cluster by handing cancel a
//! copy of the Job read before the race.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kubeferry_core::marks::{CANCEL_ANNOTATION, RECORD_FINALIZER};
use kubeferry_core::spec::{self, JobSpec, Params};
use kubeferry_core::{JobState, Reason};
use kubeferry_sim::{FaultAction, FaultRule, SimCluster, SimConfig};

use super::*;
use crate::CancelOutcome;
use crate::kind::Answers;
use crate::testing::{connect, eventually};

async fn backend(sim: &SimCluster) -> Arc<ContainerJobs> {
    backend_rechecking(sim, Duration::from_millis(20)).await
}

/// [`backend`], its settlers looking again (and stepping in for a cancel left unfinished)
/// after `recheck_interval`.
async fn backend_rechecking(sim: &SimCluster, recheck_interval: Duration) -> Arc<ContainerJobs> {
    backend_with(
        sim,
        ContainerSettings {
            watching: Watching {
                recheck_interval,
                ..Watching::default()
            },
            ..ContainerSettings::default()
        },
    )
    .await
}

/// A backend with `settings`.
async fn backend_with(sim: &SimCluster, settings: ContainerSettings) -> Arc<ContainerJobs> {
    let cluster = connect(sim).await;
    let records = crate::records::Records::new(
        cluster.clone(),
        settings.watching.reflector.clone(),
        crate::records::RecordSettings {
            name_hold: Duration::from_millis(300),
            ..crate::records::RecordSettings::default()
        },
        Duration::from_secs(10),
    );
    ContainerJobs::new(&crate::kind::Shared { cluster, records }, settings)
}

/// A running job named `name` whose container waits for its gate (a file) to open, then exits
/// with `exit_code`; the gate's path comes with it.
async fn gated_job(
    jobs: &ContainerJobs,
    name: &str,
    exit_code: u8,
) -> (ExecutionId, std::path::PathBuf) {
    let gate = std::env::temp_dir().join(format!("kubeferry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let yaml = format!(
        "name: {name}\nimage: busybox:1.36\ncommand: [sh, -c, 'while [ ! -e {} ]; do sleep 0.02; done; exit {exit_code}']\n",
        gate.display()
    );
    let JobSpec::Container(spec) =
        spec::load("gated.yaml", &yaml, &Params::default()).expect("valid")
    else {
        panic!("a container job");
    };
    let id = jobs
        .submit_or_find(&spec, &format!("{name}-1"), "default")
        .await
        .expect("submitted")
        .id;
    let mut running = jobs.status(&id).await.expect("a status");
    while running.state != JobState::Started {
        tokio::time::sleep(Duration::from_millis(10)).await;
        running = jobs.status(&id).await.expect("a status");
    }
    (id, gate)
}

/// Opens the job's gate while this process's watches are stalled: the container fails on its
/// own, and nothing of it reaches them (its settler records nothing yet) until the Job failed.
async fn fail_unseen(sim: &SimCluster, id: &ExecutionId, gate: &std::path::Path) {
    sim.stall_watches(Duration::from_secs(3));
    std::fs::write(gate, b"").expect("the gate opens");
    eventually("the Job to fail", || {
        sim.object("batch", "jobs", "default", &id.name)
            .filter(|job| {
                job["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Failed"))
            })
    })
    .await;
    let _ = std::fs::remove_file(gate);
}

/// The Job as the server has it now, read as a cancel's read before its mark would have
/// read it: with `status` mapped, its pods `fresh` from the server or not, its work `ended`.
async fn read_as(
    jobs: &ContainerJobs,
    id: &ExecutionId,
    status: kubeferry_core::ExecutionInfo,
    fresh: bool,
    ended: bool,
) -> Current<Job> {
    let api: Api<Job> = Api::namespaced(jobs.common.base.cluster.client().clone(), "default");
    let now = api.get(&id.name).await.expect("the Job");
    Current {
        objects: jobs.objects("default"),
        meta: now.metadata,
        status,
        fresh,
        ended,
    }
}

/// Records `outcome` for the job as another replica would have, straight at the cluster.
async fn recorded_elsewhere(
    sim: &SimCluster,
    jobs: &ContainerJobs,
    id: &ExecutionId,
    outcome: &kubeferry_core::ExecutionInfo,
) {
    let api: Api<Job> = Api::namespaced(jobs.common.base.cluster.client().clone(), "default");
    let job = api.get(&id.name).await.expect("the Job");
    let record = kubeferry_core::record::OutcomeRecord {
        kind: kubeferry_core::JobKind::Job,
        object: id.name.clone(),
        job_id: kubeferry_core::marks::job_id_of(&job.metadata),
        spec_hash: kubeferry_core::marks::spec_hash_of(&job.metadata),
        outcome: outcome.clone(),
        recorded_at: Some(jiff::Timestamp::now()),
        created_at: None,
        cancelled_by: None,
        attempts: Vec::new(),
    };
    sim.create("default", record.config_map("default"))
        .expect("the record is created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ends_between_the_read_and_the_mark_keeps_its_outcome() {
    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    let jobs = backend(&sim).await;
    let (id, gate) = gated_job(&jobs, "race", 0).await;

    // kubeferry reads the Job while it runs...
    let api: Api<Job> = Api::namespaced(jobs.common.base.cluster.client().clone(), "default");
    let stale = api.get(&id.name).await.expect("the Job");
    // ...and the job ends before the mark goes on.
    std::fs::write(&gate, b"").expect("the gate opens");
    // Complete, recorded, and let go by the settler: its own writes are done.
    eventually("the Job to complete", || {
        sim.object("batch", "jobs", "default", &id.name)
            .filter(|job| {
                job["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Complete"))
                    && job["metadata"]["finalizers"]
                        .as_array()
                        .is_none_or(|f| f.is_empty())
            })
    })
    .await;
    let patches = sim.request_count("patch", "jobs.batch");

    // The cancel comes through a replica that has not seen the end: its watch of Jobs has not
    // listed yet (this one's settler answered the end from a newer copy, and would know).
    let unlisted = sim.add_fault(
        FaultRule::new(FaultAction::Hold)
            .verbs(&["list"])
            .resources(&["jobs.batch"]),
    );
    let other = backend(&sim).await;
    let outcome = other
        .cancel_from(&id, Some(stale))
        .await
        .expect("cancel answers");
    sim.remove_fault(unlisted);
    let _ = std::fs::remove_file(&gate);
    // The mark was tried on the copy it read, refused (409), and the re-read found the outcome.
    assert_eq!(sim.request_count("patch", "jobs.batch"), patches + 1);
    assert_eq!(sim.request_count("delete", "jobs.batch"), 0);
    let CancelOutcome::AlreadyEnded(info) = outcome else {
        panic!("expected the outcome to stand, got {outcome:?}");
    };
    assert_eq!(info.state, JobState::Succeeded);
    assert_eq!(info.reason, Reason::Completed);
    let job = sim
        .object("batch", "jobs", "default", &id.name)
        .expect("the Job stays");
    assert!(
        job["metadata"]["annotations"]
            .get(CANCEL_ANNOTATION)
            .is_none()
    );
    assert_eq!(jobs.status(&id).await.expect("a status"), info);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_container_ended_before_the_mark_is_not_recorded_cancelled() {
    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    let jobs = backend(&sim).await;
    let (id, gate) = gated_job(&jobs, "ends", 42).await;
    let running = jobs.status(&id).await.expect("a status");

    // The container ends on its own, and nothing of it reaches this process's watches (its
    // settler records nothing yet)...
    fail_unseen(&sim, &id, &gate).await;
    // ...and the cancel's read before its mark did not see that end either (its pods came from
    // a cache that had not seen it): the mark goes on the Job as it is now.
    let seen = read_as(&jobs, &id, running, false, false).await;
    crate::protocol::cancel_from(&*jobs, &id, Some(seen), "a test")
        .await
        .expect("cancel answers");

    // The end the container reached before the mark decides the job, everywhere.
    let mut ended = jobs.status(&id).await.expect("a status");
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    while !ended.is_terminal() && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
        ended = jobs.status(&id).await.expect("a status");
    }
    assert_eq!(ended.state, JobState::Failed, "{ended:?}");
    assert_eq!(ended.reason, Reason::Error, "{ended:?}");
    assert_eq!(ended.exit_code, Some(42), "{ended:?}");
    let recorded = eventually_async(|| jobs.common.base.records.recorded(&id)).await;
    assert_eq!(recorded.state, JobState::Failed, "{recorded:?}");
    assert_eq!(recorded.exit_code, Some(42), "{recorded:?}");
}

/// A cancel that finds the Job's own counts saying its work ended (its attempt counted
/// succeeded or out of retries, the pod perhaps drained away with its exit code, the verdict
/// not in yet) has nothing left to stop: it marks the Job, deletes nothing and records nothing,
/// and the job's own verdict becomes its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_finds_the_work_ended_by_the_jobs_counts_deletes_nothing() {
    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    // The counts the cancel reads are made up: the job really ends only when its gate opens,
    // well before a settler would step in for a cancel it takes as left unfinished.
    let jobs = backend_rechecking(&sim, Duration::from_secs(5)).await;
    let (id, gate) = gated_job(&jobs, "counted", 0).await;
    let running = jobs.status(&id).await.expect("a status");
    // The Job as read before the mark counted its attempt succeeded; the read after the mark
    // is refused, so that one decides.
    let seen = read_as(&jobs, &id, running, true, true).await;
    sim.add_fault(
        kubeferry_sim::FaultRule::new(kubeferry_sim::FaultAction::error(403))
            .verbs(&["get"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    sim.reset_counters();
    let answer = crate::protocol::cancel_from(&*jobs, &id, Some(seen), "a test")
        .await
        .expect("cancel answers");
    let CancelOutcome::Requested(info) = answer else {
        panic!("accepted: {answer:?}");
    };
    assert_eq!(info.state, JobState::Cancelling, "{info:?}");
    assert_eq!(sim.request_count("delete", "jobs.batch"), 0);
    assert_eq!(sim.request_count("create", "configmaps"), 0);
    // The job's own end is its outcome.
    std::fs::write(&gate, b"").expect("the gate opens");
    let ended = eventually_async(|| async {
        Some(jobs.status(&id).await.expect("a status")).filter(|info| info.is_terminal())
    })
    .await;
    let _ = std::fs::remove_file(&gate);
    assert_eq!(ended.state, JobState::Succeeded, "{ended:?}");
    assert_eq!(ended.exit_code, Some(0), "{ended:?}");
}

/// The value `check` answers, once it answers one.
async fn eventually_async<T, F>(mut check: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < end, "timed out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancels_record_gives_way_to_the_jobs_own_end_reached_before_its_delete() {
    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    let jobs = backend(&sim).await;
    let (id, gate) = gated_job(&jobs, "recorded", 2).await;
    // Another replica's cancel recorded the job cancelled (its delete still on its way, as a
    // cancel records before it deletes)...
    let cancelled = kubeferry_core::ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled)
        .with_message("cancelled through another replica");
    recorded_elsewhere(&sim, &jobs, &id, &cancelled).await;
    // (which this replica's watch of records has delivered)...
    eventually_async(|| jobs.common.base.records.recorded(&id)).await;
    // ...and the container ends while this replica's watches see nothing of it.
    fail_unseen(&sim, &id, &gate).await;

    // This replica's cancel reads the Job, whose own verdict is in, reached before any
    // delete: it stands (docs/statuses.md, rule 1), and the cancel's record gives way to it.
    let outcome = crate::protocol::cancel(&*jobs, &id, "a test")
        .await
        .expect("cancel answers");
    let CancelOutcome::AlreadyEnded(info) = outcome else {
        panic!("expected the job's own outcome, got {outcome:?}");
    };
    assert_eq!(
        (info.state, info.exit_code),
        (JobState::Failed, Some(2)),
        "{info:?}"
    );
    let status = jobs.status(&id).await.expect("a status");
    assert_eq!(
        (status.state, status.exit_code),
        (JobState::Failed, Some(2)),
        "{status:?}"
    );
    let record: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
        sim.object(
            "",
            "configmaps",
            "default",
            &kubeferry_core::record::record_name(id.kind, &id.name),
        )
        .expect("the record"),
    )
    .expect("a ConfigMap");
    let kept = kubeferry_core::record::OutcomeRecord::read(&record.metadata, record.data.as_ref())
        .expect("readable");
    assert_eq!(kept.outcome, status, "the record holds the job's own end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_another_replica_wrote_first_stands_though_this_replica_read_more() {
    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    let jobs = backend(&sim).await;
    let (id, gate) = gated_job(&jobs, "lost", 1).await;
    // Another replica, which never saw the pod's final state, recorded the node's loss first:
    // no exit code.
    let first = kubeferry_core::ExecutionInfo::new(JobState::Failed, Reason::NodeLost)
        .with_message("recorded by another replica");
    recorded_elsewhere(&sim, &jobs, &id, &first).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(jobs.common.base.cluster.client().clone(), "default");
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&format!("job-name={}", id.name)))
        .await
        .expect("the pods");
    let node = listed.items[0]
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.clone())
        .expect("scheduled");
    sim.lose_node(&node).expect("the node is lost");
    // This replica saw the pod to its end, and records on the Job the outcome that stands.
    let job = eventually(
        "this replica's settler to record the outcome on the Job",
        || {
            sim.object("batch", "jobs", "default", &id.name)
                .filter(|job| {
                    job["metadata"]["annotations"]
                        .get(kubeferry_core::marks::OUTCOME_ANNOTATION)
                        .is_some()
                })
        },
    )
    .await;
    let _ = std::fs::remove_file(&gate);
    let on_job: kubeferry_core::ExecutionInfo = serde_json::from_str(
        job["metadata"]["annotations"][kubeferry_core::marks::OUTCOME_ANNOTATION]
            .as_str()
            .expect("a string"),
    )
    .expect("an outcome");
    assert_eq!(
        (on_job.state, on_job.reason, on_job.exit_code),
        (JobState::Failed, Reason::NodeLost, None),
        "{on_job:?}"
    );
    // The record written first stands, here as everywhere, though this replica saw more: a
    // replica may have answered it already, and a terminal answer never changes. The Job
    // carries the same.
    assert_eq!(on_job, first, "{on_job:?}");
    let record = sim
        .object(
            "",
            "configmaps",
            "default",
            &kubeferry_core::record::record_name(id.kind, &id.name),
        )
        .expect("the outcome record");
    let record: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(record).expect("a ConfigMap");
    let kept = kubeferry_core::record::OutcomeRecord::read(&record.metadata, record.data.as_ref())
        .expect("readable");
    assert_eq!(kept.outcome, first);
    // Every later process answers it.
    let later = backend(&sim).await;
    let answered = later.status(&id).await.expect("a status");
    assert_eq!(answered, first, "{answered:?}");
}

/// A job another process created, asked for before this process's watch delivered it: one GET
/// says it exists and the answer waits for the watch, so that the watch's older copies of its
/// pods, arriving next, never take a started job back to queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_watch_has_not_delivered_yet_is_answered_from_the_watch() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ListParams;

    let sim = SimCluster::start(SimConfig::for_tests())
        .await
        .expect("starts");
    let submitter = backend(&sim).await;
    // Its watches outlast the test however slow the machine (a watch the server ends at its
    // timeout is opened again, unstalled, and would deliver the Job before the reader asks).
    let reader = backend_with(
        &sim,
        ContainerSettings {
            watching: Watching {
                recheck_interval: Duration::from_millis(20),
                reflector: crate::tracker::ReflectorSettings {
                    watch_timeout: Duration::from_secs(3600),
                    ..Default::default()
                },
                ..Watching::default()
            },
            ..ContainerSettings::default()
        },
    )
    .await;
    assert!(
        reader
            .watch("default")
            .wait_synced(Duration::from_secs(10))
            .await
    );
    // Nothing reaches the reader's watches (of Jobs, pods, events and outcome records, open
    // once their first lists are done) while the job is created and starts. All four: a watch
    // of Jobs that opened after the stall would deliver the Job, and no read would be needed.
    eventually("the reader's watches to open", || {
        let watching = |resource| sim.request_count("watch", resource) >= 1;
        (watching("jobs.batch")
            && watching("pods")
            && watching("events")
            && watching("configmaps")
            && sim.open_watches() >= 4)
            .then_some(())
    })
    .await;
    // Until the reader has asked (however long the job takes to start on a busy machine).
    assert_eq!(sim.stall_watches(Duration::from_secs(600)), 4);
    let (id, gate) = {
        let gate = std::env::temp_dir().join(format!("kubeferry-unseen-{}", std::process::id()));
        let _ = std::fs::remove_file(&gate);
        let yaml = format!(
            "name: unseen\nimage: busybox:1.36\ncommand: [sh, -c, 'while [ ! -e {} ]; do sleep 0.02; done']\n",
            gate.display()
        );
        let JobSpec::Container(spec) =
            spec::load("unseen.yaml", &yaml, &Params::default()).expect("valid")
        else {
            panic!("a container job");
        };
        let id = submitter
            .submit_or_find(&spec, "unseen-1", "default")
            .await
            .expect("submitted")
            .id;
        (id, gate)
    };
    let pods: Api<Pod> = Api::namespaced(submitter.common.base.cluster.client().clone(), "default");
    let selector = ListParams::default().labels(&format!("job-name={}", id.name));
    eventually_async(|| {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            let listed = pods.list(&selector).await.ok()?;
            listed
                .items
                .iter()
                .any(|pod| pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .then_some(())
        }
    })
    .await;
    sim.reset_counters();

    // The reader asks; once it has read the Job, its watches deliver again.
    let (first, ()) = tokio::join!(reader.status(&id), async {
        eventually("the reader's read of the Job", || {
            (sim.request_count("get", "jobs.batch") >= 1).then_some(())
        })
        .await;
        sim.stall_watches(Duration::ZERO);
    });
    let mut answers = vec![first.expect("a status")];
    // One GET, no LIST of pods: the pods are the watch's.
    assert_eq!(sim.request_count("get", "jobs.batch"), 1);
    assert_eq!(sim.request_count("list", "pods"), 0);
    while answers.last().unwrap().state != JobState::Started {
        tokio::time::sleep(Duration::from_millis(10)).await;
        answers.push(reader.status(&id).await.expect("a status"));
    }
    for _ in 0..20 {
        answers.push(reader.status(&id).await.expect("a status"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = answers
        .iter()
        .position(|a| a.state == JobState::Started)
        .expect("started");
    assert!(
        answers[started..]
            .iter()
            .all(|a| a.state == JobState::Started),
        "{answers:#?}"
    );
    std::fs::write(&gate, b"").expect("the gate opens");
    let _ = std::fs::remove_file(&gate);
}

#[test]
fn an_outcome_being_decided_is_answered_as_where_the_job_stood() {
    let job = |annotations: serde_json::Value| {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "default", "annotations": annotations},
            "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}},
        }))
        .expect("a Job");
        JobView::from(&job)
    };
    let started = "2026-01-02T03:04:05Z".parse().expect("a time");
    let mut failed = ExecutionInfo::new(JobState::Failed, Reason::OomKilled)
        .with_message("the main container was OOMKilled");
    failed.started_at = Some(started);
    let answer = |job: &JobView, mapped: &ExecutionInfo| {
        let info = crate::settling::while_deciding(job, mapped);
        (info.state, info.reason, info.started_at, info.message)
    };
    let marked = job(serde_json::json!({CANCEL_ANNOTATION: "2026-01-02T03:05:00Z"}));
    let message = "deciding the outcome: the main container was OOMKilled".to_string();
    assert_eq!(
        answer(&marked, &failed),
        (
            JobState::Cancelling,
            Reason::CancelRequested,
            Some(started),
            message.clone()
        )
    );
    let plain = job(serde_json::json!({}));
    assert_eq!(
        answer(&plain, &failed),
        (JobState::Started, Reason::Running, Some(started), message)
    );
    failed.started_at = None;
    assert_eq!(answer(&plain, &failed).0, JobState::Queued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_listed_before_its_settler_subscribed_is_still_let_go() {
    let sim = SimCluster::start(SimConfig::for_tests()).await.unwrap();
    // A process cancels a running job and exits before its settler saw the Job's deletion:
    // the cancel is recorded, the Job deleted and held by kubeferry's finalizer.
    let (id, gate) = {
        let first = backend(&sim).await;
        let (id, gate) = gated_job(&first, "listed", 0).await;
        sim.stall_watches(Duration::from_millis(500));
        let answer = crate::protocol::cancel_from(&*first, &id, None, "a test")
            .await
            .expect("cancel answers");
        assert!(matches!(answer, CancelOutcome::Requested(_)), "{answer:?}");
        (id, gate)
    };
    let held = || {
        sim.object("batch", "jobs", &id.namespace, &id.name)
            .and_then(|job| job["metadata"]["finalizers"].as_array().cloned())
    };
    // Its pods gone and the garbage collector done with it, the Job changes no more.
    eventually(
        "the Job deleted, its pods gone, held by kubeferry alone",
        || {
            (sim.count("", "pods") == 0
                && held().is_some_and(|f| f == [serde_json::json!(RECORD_FINALIZER)]))
            .then_some(())
        },
    )
    .await;
    // The next process's settler subscribes after the watches listed the Job: it still
    // settles it once, and lets it go.
    let next = backend(&sim).await;
    let watch = next
        .common
        .base
        .watches(&id.namespace, || next.started_watches(&id.namespace));
    assert!(watch.wait_synced(Duration::from_secs(10)).await);
    next.common.start(&id.namespace, &watch);
    eventually("the Job let go", || held().is_none().then_some(())).await;
    let _ = std::fs::remove_file(gate);
}
