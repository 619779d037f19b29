//! `describe`: a job's story, told from its object, its pods' ends and their events, and from
//! its outcome record once they are all gone.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, ResourceQuota};
use kube::Api;
use kube::api::DeleteParams;
use kubeferry_core::timeline::Step;
use kubeferry_core::{ExecutionId, JobState, Reason};
use kubeferry_kube::Description;
use kubeferry_sim::SimConfig;

use crate::support::*;

const OOM: &str = "python3 -c 'import time; x = b\"x\" * (256 * 1024 * 1024); time.sleep(30)'";

/// The steps' names, in order.
fn whats(description: &Description) -> Vec<&str> {
    description
        .story
        .steps
        .iter()
        .map(|step| step.what.as_str())
        .collect()
}

/// The first step named `what`.
fn step<'d>(description: &'d Description, what: &str) -> &'d Step {
    description
        .story
        .steps
        .iter()
        .find(|step| step.what == what)
        .unwrap_or_else(|| panic!("no {what} step: {description:#?}"))
}

/// Deletes, as an admin, every pod and event of the namespace: what is left is the record.
async fn forget_everything_but_the_record(env: &Env, id: &ExecutionId) {
    env.delete_job_as_admin(id).await;
    let client = env.admin_client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client, NS);
    let params = DeleteParams::default();
    pods.delete_collection(&params, &Default::default())
        .await
        .unwrap();
    events
        .delete_collection(&params, &Default::default())
        .await
        .unwrap();
    eventually("the Job, its pods and events to be gone", || async {
        (env.job_object(id).is_none()
            && env.sim.count("", "pods") == 0
            && env.sim.count("", "events") == 0)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_killed_jobs_story_names_the_kill_and_the_limit_and_outlives_its_objects() {
    let env = Env::start().await;
    let id = env
        .submit(&shell(
            "oom",
            OOM,
            "resources: {memory: 64Mi, limits: {memory: 64Mi}}",
        ))
        .await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.reason, Reason::OomKilled);
    let described = env.executor.describe(&id).await.unwrap();
    assert_eq!(described.status, outcome);
    assert_eq!(
        described.job_id.as_deref(),
        id.name.rsplit_once('-').map(|(job_id, _)| job_id)
    );
    let steps = whats(&described);
    for what in [
        "Submitted",
        "SuccessfulCreate",
        "Scheduled",
        "Started",
        "Ended",
        "FAILED",
    ] {
        assert!(steps.contains(&what), "{what}: {described:#?}");
    }
    assert_eq!(steps.first(), Some(&"Submitted"));
    assert_eq!(steps.last(), Some(&"FAILED"));
    let ended = step(&described, "Ended");
    assert_eq!(ended.detail, "exit code 137 (OOMKilled)", "{ended:?}");
    assert!(ended.warning);
    assert!(
        step(&described, "FAILED")
            .detail
            .contains("exceeded its memory limit of 64Mi"),
        "{described:#?}"
    );
    assert_eq!(
        described.story.what_to_do.as_deref(),
        Some("raise resources.memory (and its limit) in the job file, or use less memory")
    );
    assert!(described.story.spent.running.is_some(), "{described:#?}");

    // A day later, its Job, pods and events gone: the record still tells the start, the
    // attempt's placement and end, and the end.
    forget_everything_but_the_record(&env, &id).await;
    age_the_record(&env, &id, DAY).await;
    let later = env.fresh_executor().await.describe(&id).await.unwrap();
    assert_eq!(
        whats(&later),
        ["Submitted", "Scheduled", "Started", "Ended", "FAILED"],
        "{later:#?}"
    );
    let a_day_earlier = |at: Option<jiff::Timestamp>| at.map(|at| at - DAY);
    assert_eq!(later.status.finished_at, a_day_earlier(outcome.finished_at));
    assert_eq!(later.status.reason, outcome.reason);
    assert_eq!(later.status.message, outcome.message);
    assert_eq!(later.job_id, described.job_id);
    assert_eq!(
        later.story.steps[0].at,
        a_day_earlier(described.story.steps[0].at)
    );
    let scheduled = step(&later, "Scheduled");
    assert_eq!(scheduled.object, step(&described, "Ended").object);
    assert!(scheduled.detail.starts_with("on "), "{scheduled:?}");
    assert_eq!(step(&later, "Ended").detail, "exit code 137 (OOMKilled)");
    assert_eq!(later.story.what_to_do, described.story.what_to_do);
    assert_eq!(later.story.spent.running, described.story.spent.running);
}

const DAY: jiff::SignedDuration = jiff::SignedDuration::from_hours(24);

/// Moves every time the job's outcome record holds back by `by`, as if it had been written that
/// long ago (the record's retention is a week).
async fn age_the_record(env: &Env, id: &ExecutionId, by: jiff::SignedDuration) {
    fn aged(value: &mut serde_json::Value, by: jiff::SignedDuration) {
        match value {
            serde_json::Value::String(text) => {
                if let Ok(at) = text.parse::<jiff::Timestamp>() {
                    *text = (at - by).to_string();
                } else if let Ok(mut inner) = serde_json::from_str::<serde_json::Value>(text)
                    && (inner.is_object() || inner.is_array())
                {
                    aged(&mut inner, by);
                    *text = inner.to_string();
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| aged(v, by)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| aged(v, by)),
            _ => {}
        }
    }
    let records: Api<ConfigMap> = Api::namespaced(env.admin_client().await, NS);
    let name = kubeferry_core::record::record_name(id.kind, &id.name);
    let mut record = records.get(&name).await.unwrap();
    let mut data = serde_json::to_value(record.data.take().unwrap()).unwrap();
    aged(&mut data, by);
    record.data = Some(serde_json::from_value(data).unwrap());
    records
        .replace(&name, &Default::default(), &record)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_jobs_story_gives_the_schedulers_and_the_admissions_words() {
    let env = Env::start().await;
    let huge = env
        .submit(&shell("huge", "echo never", "resources: {cpu: 64}"))
        .await;
    let refused = env
        .submit(&shell("nosa", "echo ran", "serviceAccount: robot"))
        .await;
    let described = eventually("the scheduler's refusal", || async {
        let described = env.executor.describe(&huge).await.ok()?;
        whats(&described)
            .contains(&"FailedScheduling")
            .then_some(described)
    })
    .await;
    let failed = step(&described, "FailedScheduling");
    assert!(failed.detail.contains("Insufficient cpu"), "{failed:?}");
    assert!(failed.warning);
    assert_eq!(described.status.state, JobState::Queued);
    assert!(described.story.spent.waiting.is_some(), "{described:#?}");
    assert_eq!(described.story.spent.running, None);

    let described = eventually("the admission's refusal", || async {
        let described = env.executor.describe(&refused).await.ok()?;
        whats(&described)
            .contains(&"FailedCreate")
            .then_some(described)
    })
    .await;
    assert!(
        step(&described, "FailedCreate")
            .detail
            .contains("serviceaccount \"robot\" not found"),
        "{described:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_pull_failures_story_gives_the_registrys_words_and_what_to_do() {
    let settings =
        Settings::fast().with_mapping(|m| m.image_pull_grace = Duration::from_millis(1500));
    let env = Env::start_with(SimConfig::for_tests(), settings).await;
    let yaml = "name: pull\nimage: registry.invalid/nothing:1.0\ncommand: [sh, -c, 'echo never']\n";
    let id = env.submit(yaml).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.reason, Reason::ImagePullFailed);
    let described = env.executor.describe(&id).await.unwrap();
    assert!(
        described
            .story
            .steps
            .iter()
            .any(|step| step.what == "Failed" && step.detail.contains("no such host")),
        "{described:#?}"
    );
    assert_eq!(
        described.story.what_to_do.as_deref(),
        Some("check the image name and tag, that its registry is reachable, and the pull secret")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_jobs_story_has_each_attempts_end_and_a_cancelled_ones_who_asked() {
    let env = Env::start().await;
    let gate = Gate::new();
    let script = format!(
        "if [ -e {} ]; then echo second; else touch {}; exit 3; fi",
        gate.path("ran"),
        gate.path("ran")
    );
    let id = env.submit(&shell("flaky", &script, "retries: 1")).await;
    let (outcome, _) = env.wait(&id).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{outcome:?}");
    let described = env.executor.describe(&id).await.unwrap();
    let ends: Vec<&str> = described
        .story
        .steps
        .iter()
        .filter(|step| step.what == "Ended")
        .map(|step| step.detail.as_str())
        .collect();
    assert_eq!(
        ends,
        ["exit code 3 (Error)", "exit code 0 (Completed)"],
        "{described:#?}"
    );
    assert_eq!(whats(&described).last(), Some(&"SUCCEEDED"));
    assert_eq!(described.story.what_to_do, None);

    let long = env.submit(&shell("long", &gate.wait("never"), "")).await;
    env.status_until(&long, "running", is(JobState::Started))
        .await;
    env.executor.cancel(&long).await.unwrap();
    env.wait(&long).await;
    let described = env.executor.describe(&long).await.unwrap();
    let cancel = step(&described, "CancelRequested");
    assert!(cancel.detail.starts_with("by "), "{cancel:?}");
    // The pod is stopped once the outcome is recorded. Its stop (the kubelet's `Killing`, the
    // attempt's `Ended`), in whole seconds, may already be read, and falls where its second
    // puts it.
    let told: Vec<&str> = whats(&described)
        .into_iter()
        .filter(|what| !matches!(*what, "Killing" | "Ended"))
        .collect();
    assert!(
        told.ends_with(&["Started", "CancelRequested", "CANCELLED"]),
        "{described:#?}"
    );
}

/// Creates, as an admin, a ResourceQuota named `name` in the test namespace.
pub(crate) async fn quota(env: &Env, name: &str, hard: serde_json::Value) {
    let quotas: Api<ResourceQuota> = Api::namespaced(env.admin_client().await, NS);
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"hard": hard},
    }))
    .unwrap();
    quotas.create(&Default::default(), &quota).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_a_quota_refuses_tells_the_quotas_words_and_what_to_do() {
    let env = Env::start().await;
    quota(&env, "compute", serde_json::json!({"requests.cpu": "1"})).await;
    let id = env
        .submit(&shell("greedy", "echo never", "resources: {cpu: 2}"))
        .await;
    let described = eventually("the quota's refusal", || async {
        let described = env.executor.describe(&id).await.ok()?;
        whats(&described)
            .contains(&"FailedCreate")
            .then_some(described)
    })
    .await;
    let refused = step(&described, "FailedCreate");
    assert!(refused.warning);
    assert!(
        refused.detail.contains(
            "is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: \
             requests.cpu=0, limited: requests.cpu=1"
        ),
        "{refused:?}"
    );
    assert_eq!(described.status.state, JobState::Queued);
    let status = env
        .status_until(&id, "the refusal in the status", |status| {
            status.message.contains("exceeded quota")
        })
        .await;
    assert!(
        status.message.starts_with(
            "waiting for the Job controller to create a pod: Error creating: pods \"greedy-"
        ),
        "{status:?}"
    );
    let described = env.executor.describe(&id).await.unwrap();
    assert_eq!(
        described.story.what_to_do.as_deref(),
        Some(
            "the namespace's ResourceQuota is used up: ask for less, wait for other jobs to \
             end, or raise the quota (kubectl describe quota)"
        )
    );
    // A job that fits runs beside it.
    let small = env
        .submit(&shell("small", "echo fits", "resources: {cpu: 500m}"))
        .await;
    let (outcome, _) = env.wait(&small).await;
    assert_eq!(outcome.state, JobState::Succeeded, "{outcome:?}");
}
