//! JobSets (`jobset.x-k8s.io/v1alpha2`) end to end through kube-rs: the child Jobs with the
//! real controller's names, labels, annotations and owners, the headless Service, success,
//! failure and restart, the in-order startup policy, suspend and resume, TTL, and the
//! defaults and pruning of the stored JobSet.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kubeferry_sim::{CrdBundle, SimConfig};
use serde_json::{Value, json};

use common::{Sim, eventually, raw, start_with};

const DEADLINE: Duration = Duration::from_secs(30);

async fn jobset_sim() -> Sim {
    let mut config = SimConfig::for_tests();
    config.crd_bundles.push(CrdBundle::JobSet);
    start_with(config).await
}

fn jobsets(sim: &Sim) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "jobset.x-k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        plural: "jobsets".into(),
    };
    Api::namespaced_with(sim.client.clone(), "default", &resource)
}

/// A replicated job whose pods run `sh -c script` once (no retries), with the job index and
/// the restart attempt in `JOB_INDEX` and `ATTEMPT` through the downward API.
fn rjob(name: &str, replicas: i64, script: &str) -> Value {
    json!({
        "name": name,
        "replicas": replicas,
        "template": {"spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script],
                    "env": [
                        {"name": "JOB_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}},
                        {"name": "ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}}}
                    ]
                }]
            }}
        }}
    })
}

fn jobset(name: &str, rjobs: Vec<Value>, extra: Value) -> DynamicObject {
    let mut manifest = json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": rjobs}
    });
    if let (Some(spec), Some(extra)) = (manifest["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(manifest).expect("a JobSet")
}

async fn create(sim: &Sim, js: DynamicObject) {
    jobsets(sim)
        .create(&PostParams::default(), &js)
        .await
        .expect("the JobSet is created");
}

async fn get(sim: &Sim, name: &str) -> Option<Value> {
    jobsets(sim)
        .get_opt(name)
        .await
        .expect("the JobSet is readable")
        .map(|o| serde_json::to_value(o).expect("json"))
}

/// The condition `kind` of a JobSet when its status is `status`: (reason, message).
fn condition(js: &Value, kind: &str, status: &str) -> Option<(String, String)> {
    js.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == status)
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
}

/// Waits until the JobSet has condition `kind` True.
async fn until_condition(sim: &Sim, name: &str, kind: &str) -> Value {
    eventually(&format!("{name} {kind}"), DEADLINE, || async {
        get(sim, name)
            .await
            .filter(|js| condition(js, kind, "True").is_some())
    })
    .await
}

fn rjob_status(js: &Value, name: &str) -> Value {
    js.pointer("/status/replicatedJobsStatus")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|s| s["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

async fn child_jobs(sim: &Sim, jobset: &str) -> Vec<Job> {
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let mut list = jobs
        .list(&ListParams::default().labels(&format!("jobset.sigs.k8s.io/jobset-name={jobset}")))
        .await
        .expect("jobs list")
        .items;
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    list
}

fn names(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn label<'a>(job: &'a Job, key: &str) -> &'a str {
    job.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .unwrap_or("")
}

#[tokio::test]
async fn a_leader_and_two_workers_all_succeed() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "train",
            vec![
                rjob("leader", 1, "echo leader"),
                rjob("workers", 2, "echo worker $JOB_INDEX"),
            ],
            json!({}),
        ),
    )
    .await;
    let js = until_condition(&sim, "train", "Completed").await;
    assert_eq!(
        condition(&js, "Completed", "True"),
        Some((
            "AllJobsCompleted".to_string(),
            "jobset completed successfully".to_string()
        ))
    );
    assert_eq!(js["status"]["terminalState"], "Completed");
    assert_eq!(js["status"]["restarts"], 0);
    assert_eq!(
        rjob_status(&js, "leader"),
        json!({"name": "leader", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0})
    );
    assert_eq!(
        rjob_status(&js, "workers"),
        json!({"name": "workers", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0})
    );

    // `kubectl get jobsets`: the CRD's printer columns, Completed read through its filter.
    let mut table =
        kube::api::Request::new("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")
            .list(&Default::default())
            .expect("a request");
    table.headers_mut().insert(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io"
            .parse()
            .expect("header"),
    );
    let table: Value = sim.client.request(table).await.expect("a table");
    let cells = &table["rows"][0]["cells"];
    assert_eq!(
        (&cells[0], &cells[1], &cells[2], &cells[3]),
        (
            &json!("train"),
            &json!("Completed"),
            &json!(0),
            &json!("True")
        )
    );

    let jobs = child_jobs(&sim, "train").await;
    assert_eq!(
        names(&jobs),
        ["train-leader-0", "train-workers-0", "train-workers-1"]
    );
    let uid = js["metadata"]["uid"].as_str().expect("a uid");
    let worker = &jobs[2];
    for (key, value) in [
        ("jobset.sigs.k8s.io/jobset-name", "train"),
        ("jobset.sigs.k8s.io/jobset-uid", uid),
        ("jobset.sigs.k8s.io/replicatedjob-name", "workers"),
        ("jobset.sigs.k8s.io/replicatedjob-replicas", "2"),
        ("jobset.sigs.k8s.io/global-replicas", "3"),
        ("jobset.sigs.k8s.io/job-index", "1"),
        ("jobset.sigs.k8s.io/job-global-index", "2"),
        ("jobset.sigs.k8s.io/group-name", "default"),
        ("jobset.sigs.k8s.io/job-group-index", "2"),
        ("jobset.sigs.k8s.io/restart-attempt", "0"),
        // `printf default/train-workers-1 | sha1sum`
        (
            "jobset.sigs.k8s.io/job-key",
            "f7cd59a344a70b9510e91bf1b6f8a70533d949ef",
        ),
    ] {
        assert_eq!(label(worker, key), value, "{key}");
        let annotations = worker.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(
            annotations.get(key).map(String::as_str),
            Some(label(worker, key)),
            "annotation {key}"
        );
        let template_labels = worker
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.as_ref())
            .expect("pod template labels");
        assert_eq!(
            template_labels.get(key).map(String::as_str),
            Some(label(worker, key)),
            "template {key}"
        );
    }
    let owner = &worker.metadata.owner_references.as_ref().expect("owners")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("JobSet", "train", uid, Some(true))
    );
    let spec = worker.spec.as_ref().expect("a spec");
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(
        spec.template
            .spec
            .as_ref()
            .and_then(|s| s.subdomain.as_deref()),
        Some("train")
    );

    // Pods resolve as <jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain>.
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pods = pods
        .list(&ListParams::default().labels("jobset.sigs.k8s.io/jobset-name=train"))
        .await
        .expect("pods")
        .items;
    let mut hosts: Vec<String> = pods
        .iter()
        .filter_map(|p| {
            let spec = p.spec.as_ref()?;
            Some(format!(
                "{}.{}",
                spec.hostname.as_deref()?,
                spec.subdomain.as_deref()?
            ))
        })
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        [
            "train-leader-0-0.train",
            "train-workers-0-0.train",
            "train-workers-1-0.train"
        ]
    );

    let services: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let service = services.get("train").await.expect("the headless service");
    let spec = service.spec.expect("a spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    assert_eq!(
        spec.selector
            .expect("a selector")
            .get("jobset.sigs.k8s.io/jobset-name")
            .map(String::as_str),
        Some("train")
    );
}

/// A replicated job like [`rjob`] whose container may use at most 20Mi of memory.
fn rjob_with_memory_limit(name: &str, replicas: i64, script: &str) -> Value {
    let mut rjob = rjob(name, replicas, script);
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"limits": {"memory": "20Mi"}});
    rjob
}

/// Worker 1's main process allocates far past its limit; everyone else runs on.
const OOM_WORKER_1: &str = "if [ \"$JOB_INDEX\" = 1 ]; then exec tail /dev/zero; fi; sleep 300";

#[tokio::test]
async fn an_oom_killed_worker_fails_the_set_after_max_restarts() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "oom",
            vec![
                rjob("leader", 1, "sleep 300"),
                rjob_with_memory_limit("workers", 2, OOM_WORKER_1),
            ],
            json!({"failurePolicy": {"maxRestarts": 1}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "oom", "Failed").await;
    assert_eq!(
        condition(&js, "Failed", "True"),
        Some((
            "ReachedMaxRestarts".to_string(),
            "jobset failed due to reaching max number of restarts (first failed job: oom-workers-1)"
                .to_string()
        ))
    );
    assert_eq!(js["status"]["terminalState"], "Failed");
    assert_eq!(js["status"]["restarts"], 1);
    assert_eq!(js["status"]["restartsCountTowardsMax"], 1);
    assert_eq!(
        condition(&js, "RestartingJobSet", "False").map(|c| c.0),
        Some("JobSetFailed".to_string())
    );
    // The active Jobs go; the failed one stays, of the last attempt, its pod OOM-killed.
    let jobs = eventually("only the failed job left", DEADLINE, || async {
        let jobs = child_jobs(&sim, "oom").await;
        (names(&jobs) == ["oom-workers-1"]).then_some(jobs)
    })
    .await;
    assert_eq!(label(&jobs[0], "jobset.sigs.k8s.io/restart-attempt"), "1");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pods = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=oom-workers-1"))
        .await
        .expect("pods")
        .items;
    let reason = pods[0]
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c[0].state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.reason.clone());
    assert_eq!(reason.as_deref(), Some("OOMKilled"));
}

#[tokio::test]
async fn without_a_failure_policy_the_first_failed_job_fails_the_set() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "nopolicy",
            vec![
                rjob("leader", 1, "sleep 300"),
                rjob("workers", 2, "[ \"$JOB_INDEX\" = 0 ] && exit 3; sleep 300"),
            ],
            json!({}),
        ),
    )
    .await;
    let js = until_condition(&sim, "nopolicy", "Failed").await;
    assert_eq!(
        condition(&js, "Failed", "True"),
        Some((
            "FailedJobs".to_string(),
            "jobset failed due to one or more job failures (first failed job: nopolicy-workers-0)"
                .to_string()
        ))
    );
    assert_eq!(js["status"]["restarts"], 0);
    assert_eq!(js["status"]["terminalState"], "Failed");
    assert_eq!(rjob_status(&js, "workers")["failed"], 1);
}

#[tokio::test]
async fn a_jobset_restarts_once_then_succeeds() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "retry",
            vec![
                rjob("leader", 1, "echo attempt $ATTEMPT"),
                rjob(
                    "workers",
                    2,
                    "[ \"$ATTEMPT\" = 0 ] && [ \"$JOB_INDEX\" = 1 ] && exit 1; echo ok",
                ),
            ],
            json!({"failurePolicy": {"maxRestarts": 3}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "retry", "Completed").await;
    assert_eq!(js["status"]["restarts"], 1);
    assert_eq!(js["status"]["restartsCountTowardsMax"], 1);
    assert_eq!(js["status"]["terminalState"], "Completed");
    assert_eq!(
        condition(&js, "RestartingJobSet", "False"),
        Some((
            "JobSetCompleted".to_string(),
            "jobset completed successfully".to_string()
        ))
    );
    assert_eq!(rjob_status(&js, "workers")["succeeded"], 2);
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(sim.client.clone(), "default");
    let restart = events
        .list(&ListParams::default().fields("involvedObject.name=retry"))
        .await
        .expect("events")
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("RestartJobSetFailurePolicyAction"))
        .expect("a restart event");
    assert_eq!(
        restart.message.as_deref(),
        Some("applying RestartJobSet failure policy action (first failed job: retry-workers-1)")
    );
    let jobs = child_jobs(&sim, "retry").await;
    assert_eq!(
        names(&jobs),
        ["retry-leader-0", "retry-workers-0", "retry-workers-1"]
    );
    for job in &jobs {
        assert_eq!(label(job, "jobset.sigs.k8s.io/restart-attempt"), "1");
    }
}

#[tokio::test]
async fn a_failure_policy_rule_fails_the_set_at_once() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "rules",
            vec![rjob("workers", 1, "exit 1")],
            json!({"failurePolicy": {"maxRestarts": 5, "rules": [
                {"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"], "targetReplicatedJobs": ["workers"]}
            ]}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "rules", "Failed").await;
    assert_eq!(
        condition(&js, "Failed", "True"),
        Some((
            "FailJobSetFailurePolicyAction".to_string(),
            "applying FailJobSet failure policy action (first failed job: rules-workers-0)"
                .to_string()
        ))
    );
    assert_eq!(js["status"]["restarts"], 0);
}

#[tokio::test]
async fn success_policy_any_on_the_leader_ends_the_set_early() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "early",
            vec![
                rjob("leader", 1, "echo done"),
                rjob("workers", 2, "sleep 300"),
            ],
            json!({"successPolicy": {"operator": "Any", "targetReplicatedJobs": ["leader"]}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "early", "Completed").await;
    assert_eq!(js["status"]["terminalState"], "Completed");
    // The workers still running are deleted.
    eventually("the workers deleted", DEADLINE, || async {
        (names(&child_jobs(&sim, "early").await) == ["early-leader-0"]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn in_order_startup_creates_the_workers_once_the_leader_is_ready() {
    let sim = jobset_sim().await;
    // A leader that never starts (its image cannot be pulled) holds the workers back.
    let mut stuck = rjob("leader", 1, "sleep 300");
    stuck["template"]["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.invalid/leader:1");
    create(
        &sim,
        jobset(
            "held",
            vec![stuck, rjob("workers", 2, "sleep 300")],
            json!({"startupPolicy": {"startupPolicyOrder": "InOrder"}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "held", "StartupPolicyInProgress").await;
    assert_eq!(
        condition(&js, "StartupPolicyInProgress", "True"),
        Some((
            "InOrderStartupPolicyInProgress".to_string(),
            "in order startup policy is in progress".to_string()
        ))
    );
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    eventually("the leader's image pull failing", DEADLINE, || async {
        let list = pods
            .list(&ListParams::default().labels("jobset.sigs.k8s.io/jobset-name=held"))
            .await
            .ok()?;
        list.items.iter().find(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c[0].state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                .is_some_and(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
        })?;
        Some(())
    })
    .await;
    assert_eq!(names(&child_jobs(&sim, "held").await), ["held-leader-0"]);

    // A leader that runs: the workers follow, then the startup completes.
    create(
        &sim,
        jobset(
            "ordered",
            vec![
                rjob("leader", 1, "sleep 300"),
                rjob("workers", 2, "sleep 300"),
            ],
            json!({"startupPolicy": {"startupPolicyOrder": "InOrder"}}),
        ),
    )
    .await;
    let js = until_condition(&sim, "ordered", "StartupPolicyCompleted").await;
    assert_eq!(
        condition(&js, "StartupPolicyCompleted", "True"),
        Some((
            "InOrderStartupPolicyCompleted".to_string(),
            "in order startup policy has completed".to_string()
        ))
    );
    assert!(condition(&js, "StartupPolicyInProgress", "False").is_some());
    assert_eq!(
        names(&child_jobs(&sim, "ordered").await),
        ["ordered-leader-0", "ordered-workers-0", "ordered-workers-1"]
    );
    assert_eq!(rjob_status(&js, "leader")["ready"], 1);
    assert_eq!(rjob_status(&js, "workers")["ready"], 2);
}

#[tokio::test]
async fn a_suspended_jobset_suspends_its_jobs_until_resumed_and_deletion_takes_them() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "paused",
            vec![rjob("workers", 2, "echo ran")],
            json!({"suspend": true}),
        ),
    )
    .await;
    let js = until_condition(&sim, "paused", "Suspended").await;
    assert_eq!(
        condition(&js, "Suspended", "True"),
        Some((
            "SuspendedJobs".to_string(),
            "jobset is suspended".to_string()
        ))
    );
    let js = eventually("both jobs counted suspended", DEADLINE, || async {
        get(&sim, "paused")
            .await
            .filter(|js| rjob_status(js, "workers")["suspended"] == 2)
    })
    .await;
    assert_eq!(rjob_status(&js, "workers")["active"], 0);
    for job in child_jobs(&sim, "paused").await {
        assert_eq!(job.spec.and_then(|s| s.suspend), Some(true));
    }

    jobsets(&sim)
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("resumed");
    let js = until_condition(&sim, "paused", "Completed").await;
    assert_eq!(
        condition(&js, "Suspended", "False"),
        Some(("ResumeJobs".to_string(), "jobset is resumed".to_string()))
    );

    jobsets(&sim)
        .delete("paused", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("the child jobs and service gone", DEADLINE, || async {
        let services: Api<Service> = Api::namespaced(sim.client.clone(), "default");
        let service = services.get_opt("paused").await.ok()?;
        (child_jobs(&sim, "paused").await.is_empty() && service.is_none()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_finished_jobset_is_deleted_after_its_ttl() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "brief",
            vec![rjob("workers", 1, "true")],
            json!({"ttlSecondsAfterFinished": 0}),
        ),
    )
    .await;
    eventually("the jobset and its job gone", DEADLINE, || async {
        (get(&sim, "brief").await.is_none() && child_jobs(&sim, "brief").await.is_empty())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_stored_jobset_is_defaulted_and_pruned_and_bad_fields_are_refused() {
    let sim = jobset_sim().await;
    let mut js = jobset(
        "shaped",
        vec![
            json!({"name": "workers", "unknown": 1, "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]
            }}}}}),
        ],
        json!({"bogus": true, "failurePolicy": {"maxRestarts": 1, "rules": [{"action": "RestartJobSet"}]}}),
    );
    // Never run: the controller leaves JobSets managed elsewhere alone.
    js.data["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let stored = serde_json::to_value(
        jobsets(&sim)
            .create(&PostParams::default(), &js)
            .await
            .expect("created"),
    )
    .expect("json");
    let spec = &stored["spec"];
    assert!(
        spec.get("bogus").is_none(),
        "unknown spec fields are pruned"
    );
    let stored_rjob = &spec["replicatedJobs"][0];
    assert!(stored_rjob.get("unknown").is_none());
    assert_eq!(stored_rjob["replicas"], 1);
    assert_eq!(stored_rjob["groupName"], "default");
    assert_eq!(stored_rjob["template"]["spec"]["completionMode"], "Indexed");
    assert_eq!(
        stored_rjob["template"]["spec"]["template"]["spec"]["restartPolicy"],
        "OnFailure"
    );
    assert_eq!(spec["successPolicy"], json!({"operator": "All"}));
    assert_eq!(
        spec["startupPolicy"],
        json!({"startupPolicyOrder": "AnyOrder"})
    );
    assert_eq!(
        spec["network"],
        json!({"enableDNSHostnames": true, "publishNotReadyAddresses": true})
    );
    assert_eq!(spec["failurePolicy"]["restartStrategy"], "Recreate");
    assert_eq!(
        spec["failurePolicy"]["rules"][0]["name"],
        "failurePolicyRule0"
    );

    let bad = jobset(
        "bad",
        vec![json!({"name": "workers", "template": {}})],
        json!({"successPolicy": {"operator": "Most"}}),
    );
    let refused = common::status_of(jobsets(&sim).create(&PostParams::default(), &bad).await);
    assert_eq!(refused.code, 422);
    assert!(
        refused.message.contains("spec.successPolicy.operator"),
        "{}",
        refused.message
    );

    // The validating webhook, in its words.
    let long_name = "a-jobset-whose-name-is-long-enough-to-overflow-the-job-names";
    let refused = common::status_of(
        jobsets(&sim)
            .create(
                &PostParams::default(),
                &jobset(
                    long_name,
                    vec![rjob("workers", 10, "true")],
                    json!({
                        "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["leader"]},
                        "failurePolicy": {"rules": [{"action": "FailJobSet", "onJobFailureReasons": ["OOMKilled"]}]}
                    }),
                ),
            )
            .await,
    );
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        refused.message,
        format!(
            "admission webhook \"vjobset.kb.io\" denied the request: JobSet.jobset.x-k8s.io \"{long_name}\" is invalid: [spec.replicatedJobs[0].name: Invalid value: \"{long_name}-workers-9\": JobSet name is too long, job names generated for this JobSet will exceed 63 characters, <nil>: Internal error: invalid replicatedJob name 'leader' does not appear in .spec.ReplicatedJobs, <nil>: Internal error: invalid job failure reason 'OOMKilled' in failure policy is not a recognized job failure reason]"
        )
    );
    let refused = common::status_of(
        jobsets(&sim)
            .create(
                &PostParams::default(),
                &jobset(
                    "gated",
                    vec![rjob("workers", 1, "true")],
                    json!({"failurePolicy": {"rules": [{"name": "one", "action": "RestartJob"}]}}),
                ),
            )
            .await,
    );
    assert!(
        refused.message.ends_with("<nil>: Internal error: RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob feature gate is disabled"),
        "{}",
        refused.message
    );

    // Served through discovery, with the real CRD's printer columns.
    let crd = raw(
        &sim.client,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobsets.jobset.x-k8s.io",
        None,
        "",
    )
    .await
    .json();
    let columns: Vec<&str> = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        ["TerminalState", "Restarts", "Completed", "Suspended", "Age"]
    );
    let discovery = raw(
        &sim.client,
        "GET",
        "/apis/jobset.x-k8s.io/v1alpha2",
        None,
        "",
    )
    .await
    .json();
    assert_eq!(discovery["resources"][0]["name"], "jobsets");
}

#[tokio::test]
async fn a_restart_that_ignores_max_restarts_is_not_counted_towards_them() {
    let sim = jobset_sim().await;
    create(
        &sim,
        jobset(
            "blocking",
            vec![rjob("workers", 2, "[ \"$ATTEMPT\" = 0 ] && [ \"$JOB_INDEX\" = 0 ] && exit 1; echo ok")],
            json!({"failurePolicy": {
                "maxRestarts": 0,
                "restartStrategy": "BlockingRecreate",
                "rules": [{"name": "retryable", "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["BackoffLimitExceeded"]}]
            }}),
        ),
    )
    .await;
    let js = until_condition(&sim, "blocking", "Completed").await;
    assert_eq!(js["status"]["restarts"], 1);
    assert!(
        js["status"].get("restartsCountTowardsMax").is_none(),
        "{js:#}"
    );
    let jobs = child_jobs(&sim, "blocking").await;
    assert_eq!(names(&jobs), ["blocking-workers-0", "blocking-workers-1"]);
    for job in &jobs {
        assert_eq!(label(job, "jobset.sigs.k8s.io/restart-attempt"), "1");
    }
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(sim.client.clone(), "default");
    let reasons: Vec<String> = events
        .list(&ListParams::default().fields("involvedObject.name=blocking"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r == "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction")
            && reasons.iter().any(|r| r == "FailurePolicy_retryable"),
        "{reasons:?}"
    );
}
