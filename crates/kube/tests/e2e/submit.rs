//! Submission never duplicates a job: deterministic names, adoption of a create whose response
//! was lost, refusal of a name that belongs to something else, and the orphan sweep.

use std::collections::HashSet;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kubeferry_core::marks::JOB_ID_ANNOTATION;
use kubeferry_core::{ExecutionId, JobKind, JobState};
use kubeferry_kube::Error;
use kubeferry_sim::{FaultAction, FaultRule, SimConfig};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_job_id_twice_runs_once() {
    let env = Env::start().await;
    // Still running at the third submission: each one after the first meets the Job itself.
    let spec = spec_of(&shell("once", "sleep 30", ""));
    let first = env
        .executor
        .submit(&spec, "run-42/step-1", NS)
        .await
        .unwrap();
    let again = env
        .executor
        .submit(&spec, "run-42/step-1", NS)
        .await
        .unwrap();
    // Another replica, or the caller's retry after a restart.
    let replica = env.fresh_executor().await;
    let third = replica.submit(&spec, "run-42/step-1", NS).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(first, third);
    assert_eq!(env.sim.count("batch", "jobs"), 1);
    assert_eq!(env.sim.request_count("create", "jobs.batch"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_response_was_lost_is_adopted() {
    let env = Env::start().await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    // Still running when the create is repeated: a job that ended by then is answered from
    // its record instead (a_create_repeated_after_its_job_ran_and_went_answers_that_run).
    let gate = Gate::new();
    let id = env
        .submit(&shell(
            "lost",
            &format!("{}; echo once", gate.wait("end")),
            "",
        ))
        .await;
    assert_eq!(env.sim.count("batch", "jobs"), 1);
    // The create landed, its answer was lost; the repeat met the Job (409) and adopted it.
    assert_eq!(env.sim.request_count("create", "jobs.batch"), 2);
    assert_eq!(env.sim.request_count("get", "jobs.batch"), 1);
    gate.open("end");
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, kubeferry_core::JobState::Succeeded);
    assert_eq!(env.sim.count("", "pods"), 1, "the job ran once");
}

fn name_taken(error: Error) -> String {
    match error {
        Error::NameTaken { .. } => error.to_string(),
        other => panic!("expected NameTaken, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_held_by_another_job_id_is_not_adopted() {
    let env = Env::start().await;
    let yaml = shell("clash", "echo mine", "");
    // A Job of the deterministic name of "job-a", carrying another job id.
    env.create_job_directly(&yaml, "job-a", |job| {
        job["metadata"]["annotations"][JOB_ID_ANNOTATION] = "someone-else".into();
    });
    let error = env
        .executor
        .submit(&spec_of(&yaml), "job-a", NS)
        .await
        .unwrap_err();
    let message = name_taken(error);
    assert!(message.contains("\"someone-else\""), "{message}");
    assert_eq!(env.sim.count("batch", "jobs"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_job_id_with_another_spec_is_not_adopted() {
    let env = Env::start().await;
    let first = spec_of(&shell("spec", "echo one", ""));
    let second = spec_of(&shell("spec", "echo two", ""));
    env.executor.submit(&first, "job-b", NS).await.unwrap();
    let error = env.executor.submit(&second, "job-b", NS).await.unwrap_err();
    let message = name_taken(error);
    assert!(message.contains("different spec"), "{message}");
    assert_eq!(env.sim.count("batch", "jobs"), 1);
}

/// I2: a Job of the same job id and spec that someone else is deleting is that job's run, on
/// its way out: submitted again, the job id answers it and creates nothing, whether or not a
/// settler has recorded its outcome yet (which one does as soon as it sees the deletion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_being_deleted_is_its_run_on_its_way_out() {
    let env = Env::start().await;
    let yaml = shell("leaving", "echo bye", "");
    // A finalizer holds the Job while it is being deleted.
    let id = env.create_job_directly(&yaml, "job-c", |job| {
        job["metadata"]["finalizers"] = serde_json::json!(["example.com/hold"]);
    });
    let jobs: Api<Job> = Api::namespaced(env.admin_client().await, NS);
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    jobs.delete(&id.name, &background).await.unwrap();
    let creates = env.sim.request_count("create", "jobs.batch");
    let again = env
        .executor
        .submit(&spec_of(&yaml), "job-c", NS)
        .await
        .unwrap();
    assert_eq!(again, id);
    assert!(env.sim.request_count("create", "jobs.batch") <= creates + 1);
    assert_eq!(env.sim.count("batch", "jobs"), 1, "nothing created");
    // Its outcome, the same through a replica that never saw it.
    let (outcome, _) = env.wait(&id).await;
    assert!(outcome.is_terminal(), "{outcome:?}");
    let fresh = env.fresh_executor().await;
    assert_eq!(fresh.status(&id).await.unwrap(), outcome);
}

/// A cancelled orphan held for its outcome record (its cancel's process gone before the record
/// was kept, no replica watching its namespace) goes when swept: sweep releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_orphan_goes_when_swept() {
    let env = Env::start().await;
    let yaml = shell("held-orphan", "echo bye", "");
    let id = env.create_job_directly(&yaml, "held-orphan", |job| {
        job["metadata"]["finalizers"] =
            serde_json::json!([kubeferry_core::marks::RECORD_FINALIZER]);
        job["metadata"]["annotations"][kubeferry_core::marks::CANCEL_ANNOTATION] =
            serde_json::json!("2026-12-01T00:00:00Z");
    });
    let jobs: Api<Job> = Api::namespaced(env.admin_client().await, NS);
    jobs.delete(&id.name, &DeleteParams::default())
        .await
        .unwrap();
    assert!(env.job_object(&id).is_some(), "held");
    let swept = env.executor.sweep(NS, &HashSet::new(), true).await.unwrap();
    assert_eq!(swept.len(), 1, "{swept:?}");
    assert!(env.job_object(&id).is_none(), "released and gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_listed_and_deleted_only_when_asked() {
    let env = Env::start().await;
    let gate = Gate::new();
    let yaml = shell("sweep", &gate.wait("never"), "");
    let spec = spec_of(&yaml);
    let known = env.executor.submit(&spec, "known", NS).await.unwrap();
    let orphan_a = env.executor.submit(&spec, "orphan-a", NS).await.unwrap();
    let orphan_b = env.executor.submit(&spec, "orphan-b", NS).await.unwrap();
    // A Job kubeferry does not manage is never an orphan of kubeferry's.
    let mut foreign = serde_json::to_value(kubeferry_kube::job_manifest(
        match &spec {
            kubeferry_core::JobSpec::Container(spec) => spec,
            other => panic!("a container job: {other:?}"),
        },
        "foreign",
        "foreign",
        NS,
    ))
    .unwrap();
    foreign["metadata"]["labels"] = serde_json::json!({});
    foreign["spec"]["template"]["metadata"]["labels"] = serde_json::json!({});
    env.sim.create(NS, foreign).unwrap();

    let known_ids: HashSet<String> = ["known".to_string()].into();
    let listed = env.executor.sweep(NS, &known_ids, false).await.unwrap();
    let mut names: Vec<(&str, Option<&str>, bool)> = listed
        .iter()
        .map(|o| (o.id.name.as_str(), o.job_id.as_deref(), o.deleted))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            (orphan_a.name.as_str(), Some("orphan-a"), false),
            (orphan_b.name.as_str(), Some("orphan-b"), false),
        ]
    );
    assert_eq!(env.sim.count("batch", "jobs"), 4, "listing deletes nothing");
    assert_eq!(env.sim.request_count("delete", ""), 0);

    let deleted = env.executor.sweep(NS, &known_ids, true).await.unwrap();
    assert!(deleted.iter().all(|o| o.deleted) && deleted.len() == 2);
    assert!(env.job_object(&orphan_a).is_none() && env.job_object(&orphan_b).is_none());
    assert!(env.job_object(&known).is_some());
    assert!(env.sim.object("batch", "jobs", NS, "foreign").is_some());
    eventually("the orphans' pods to go", || async {
        (env.sim.count("", "pods") == 2).then_some(())
    })
    .await;
    assert!(
        env.executor
            .sweep(NS, &known_ids, true)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_each_managed_job_with_its_status() {
    let env = Env::start().await;
    let ok = env
        .submit(&shell("listed", "echo ok", "labels: {team: data}"))
        .await;
    let failed = env.submit(&shell("listed", "exit 1", "")).await;
    env.wait(&ok).await;
    env.wait(&failed).await;
    let all = env.executor.list(NS, None).await.unwrap();
    let states: Vec<_> = all.iter().map(|j| (&j.id, j.status.state)).collect();
    assert_eq!(states.len(), 2, "{all:#?}");
    assert!(states.contains(&(&ok, kubeferry_core::JobState::Succeeded)));
    assert!(states.contains(&(&failed, kubeferry_core::JobState::Failed)));
    let team = env.executor.list(NS, Some("team=data")).await.unwrap();
    assert_eq!(team.len(), 1);
    assert_eq!(team[0].id, ok);
}

/// I2: a create repeated after a lost response asks the record first. Here the first create
/// lands but its answer is lost, and every repeat fails while the Job it made runs, is
/// recorded and is deleted, which frees its name: the repeats must stop at the record and
/// answer that run, never create it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_repeated_after_its_job_ran_and_went_answers_that_run() {
    let settings = Settings::fast().with_retry(|retry| retry.deadline = DEADLINE);
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    env.sim.add_fault(
        FaultRule::new(FaultAction::LoseResponse)
            .verbs(&["create"])
            .resources(&["jobs.batch"])
            .times(1),
    );
    let failing = env.sim.add_fault(
        FaultRule::new(FaultAction::error(500))
            .verbs(&["create"])
            .resources(&["jobs.batch"]),
    );
    let spec = spec_of(&shell("went", "exit 3", ""));
    let submitting = {
        let (executor, spec) = (env.executor.clone(), spec.clone());
        tokio::spawn(async move { executor.submit(&spec, "went-1", NS).await })
    };
    let id = ExecutionId::new(
        CLUSTER,
        JobKind::Job,
        NS,
        kubeferry_core::marks::object_name("", "went-1"),
    );
    eventually("the first create to land", || async {
        env.job_object(&id).map(|_| ())
    })
    .await;
    // Another replica watches the namespace: it sees the Job end, records it and, once the
    // Job is deleted, lets it go.
    let replica = env.fresh_executor().await;
    let (outcome, _) = wait_on(&replica, &id).await;
    assert_eq!(
        (outcome.state, outcome.exit_code),
        (JobState::Failed, Some(3))
    );
    env.delete_job_as_admin(&id).await;
    eventually("the Job to be recorded and gone", || async {
        env.job_object(&id).is_none().then_some(())
    })
    .await;
    // The creates still fail: the submission's repeats stop at the record and answer it.
    let answered = submitting.await.unwrap().unwrap();
    env.sim.remove_fault(failing);
    assert_eq!(answered, id);
    assert!(env.job_object(&id).is_none(), "the job ran again");
    assert_eq!(env.executor.status(&id).await.unwrap(), outcome);
}
