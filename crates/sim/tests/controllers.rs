//! Controller conformance: the Job controller (backoffLimit, activeDeadlineSeconds, suspend,
//! ttlSecondsAfterFinished, podFailurePolicy, completions), the scheduler (capacity, GPUs,
//! selectors, taints) and disruptions (eviction, node loss, drain).

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kubeferry_sim::{NodeConfig, SimConfig, TaintConfig};
use serde_json::{Value, json};

use common::{Sim, condition, eventually, shell_job, start, start_with};

const WAIT: Duration = Duration::from_secs(10);

async fn create_job(sim: &Sim, job: Value) -> Api<Job> {
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job: Job = serde_json::from_value(job).expect("a job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
    jobs
}

async fn finished(jobs: &Api<Job>, name: &str) -> (Job, String) {
    eventually(&format!("{name} to finish"), WAIT, || {
        let jobs = jobs.clone();
        let name = name.to_string();
        async move {
            let job = jobs.get(&name).await.ok()?;
            if condition(&job, "Complete").is_some() {
                return Some((job, "Complete".to_string()));
            }
            condition(&job, "Failed")
                .is_some()
                .then_some((job, "Failed".to_string()))
        }
    })
    .await
}

async fn job_pods(sim: &Sim, job: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    pods.list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("pods")
        .items
}

#[tokio::test]
async fn backoff_limit_retries_then_fails() {
    let sim = start().await;
    let mut job = shell_job("retries", "echo try; exit 1");
    job["spec"]["backoffLimit"] = json!(2);
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "retries").await;
    assert_eq!(outcome, "Failed");
    assert_eq!(
        condition(&job, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(job.status.as_ref().and_then(|s| s.failed), Some(3));
    assert_eq!(job_pods(&sim, "retries").await.len(), 3);
}

#[tokio::test]
async fn active_deadline_fails_the_job_and_stops_its_pod() {
    let sim = start().await;
    let mut job = shell_job("slow", "sleep 30");
    job["spec"]["activeDeadlineSeconds"] = json!(1);
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "slow").await;
    assert_eq!(outcome, "Failed");
    assert_eq!(
        condition(&job, "Failed"),
        Some((
            "DeadlineExceeded".to_string(),
            "Job was active longer than specified deadline".to_string()
        ))
    );
    assert!(condition(&job, "FailureTarget").is_some());
    let pods = job_pods(&sim, "slow").await;
    assert!(
        pods.iter().all(
            |p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
                || p.metadata.deletion_timestamp.is_some()
        )
    );
}

#[tokio::test]
async fn suspend_deletes_active_pods_and_resume_recreates_them() {
    let sim = start().await;
    let mut job = shell_job("pausable", "sleep 30");
    job["spec"]["suspend"] = json!(true);
    let jobs = create_job(&sim, job).await;
    let suspended = eventually("the Suspended condition", WAIT, || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("pausable").await.ok()?;
            condition(&j, "Suspended").map(|_| j)
        }
    })
    .await;
    assert_eq!(
        condition(&suspended, "Suspended").map(|c| c.0).as_deref(),
        Some("JobSuspended")
    );
    assert!(job_pods(&sim, "pausable").await.is_empty());
    jobs.patch(
        "pausable",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .expect("resumed");
    eventually("a running pod", WAIT, || async {
        job_pods(&sim, "pausable")
            .await
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    jobs.patch(
        "pausable",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .expect("suspended");
    eventually("the pod to go", WAIT, || async {
        job_pods(&sim, "pausable").await.is_empty().then_some(())
    })
    .await;
    let job = eventually("the suspension to settle", WAIT, || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("pausable").await.ok()?;
            (j.status.as_ref()?.terminating == Some(0)).then_some(j)
        }
    })
    .await;
    let status = job.status.expect("status");
    assert_eq!(status.active, None);
    assert_eq!(
        status.failed, None,
        "pods the suspension terminated are not failures"
    );
}

#[tokio::test]
async fn ttl_after_finished_deletes_the_job_in_the_foreground() {
    let sim = start().await;
    let mut job = shell_job("short-lived", "true");
    job["spec"]["ttlSecondsAfterFinished"] = json!(0);
    // A finalizer of the pod template holds the pod, so the Job's foreground deletion waits.
    job["spec"]["template"]["metadata"] = json!({"finalizers": ["example.com/hold"]});
    let jobs = create_job(&sim, job).await;
    let deleting = eventually("the TTL to delete the job", WAIT, || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get("short-lived").await.ok()?;
            job.metadata.deletion_timestamp.is_some().then_some(job)
        }
    })
    .await;
    assert!(condition(&deleting, "Complete").is_some(), "{deleting:?}");
    assert_eq!(
        deleting.metadata.finalizers.as_deref(),
        Some(&["foregroundDeletion".to_string()][..]),
        "the TTL controller deletes in the foreground"
    );
    assert_eq!(
        deleting.metadata.generation,
        Some(2),
        "marking it deleted bumps the generation"
    );
    // The template's finalizer is kept; the Job controller's tracking one is removed.
    let hold = ["example.com/hold".to_string()];
    let pods = eventually(
        "the pod to be deleted, held by its finalizer",
        WAIT,
        || async {
            let pods = job_pods(&sim, "short-lived").await;
            pods.iter()
                .all(|p| {
                    p.metadata.deletion_timestamp.is_some()
                        && p.metadata.finalizers.as_deref() == Some(&hold[..])
                })
                .then_some(pods)
        },
    )
    .await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    // The Job stays while its pod does.
    assert!(jobs.get_opt("short-lived").await.expect("a get").is_some());
    let pod_api: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let release = json!({"metadata": {"finalizers": null}});
    pod_api
        .patch(
            pod.metadata.name.as_deref().unwrap_or(""),
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .expect("the finalizer is removed");
    eventually("the job to be removed once its pod is gone", WAIT, || {
        let jobs = jobs.clone();
        async move {
            jobs.get_opt("short-lived")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
}

/// A scratch directory shared by a test and its pods' scripts (the kubelet runs them on this
/// host).
fn shared_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kubeferry-sim-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A script whose first pod runs `first` and whose others run `others`; the pods that keep
/// running ignore SIGTERM until the file `gate` exists, so they stay terminating.
fn split_script(dir: &std::path::Path, first: &str, others: &str) -> String {
    let d = dir.display();
    format!("if mkdir {d}/first 2>/dev/null; then {first}; else {others}; fi")
}

/// Ignores SIGTERM until `DIR/gate` exists; `DIR/holding` says the trap is set.
const HOLD_ON_TERM: &str = "trap 'while [ ! -f DIR/gate ]; do sleep 0.01; done; exit 143' TERM; touch DIR/holding; while true; do sleep 0.01; done";

fn hold_on_term(dir: &std::path::Path) -> String {
    HOLD_ON_TERM.replace("DIR", &dir.display().to_string())
}

/// A cluster whose kubelet waits 30 s before killing a pod that ignores SIGTERM.
fn patient_cluster() -> SimConfig {
    let mut config = SimConfig::for_tests();
    config.timings.max_grace_period = Duration::from_secs(30);
    config
}

fn job_of(job: &Job) -> (bool, bool, bool, bool) {
    (
        condition(job, "SuccessCriteriaMet").is_some(),
        condition(job, "Complete").is_some(),
        condition(job, "FailureTarget").is_some(),
        condition(job, "Failed").is_some(),
    )
}

async fn terminating_pod(sim: &Sim, job: &str) -> Pod {
    eventually("a pod to be terminating", WAIT, || async {
        job_pods(sim, job).await.into_iter().find(|p| {
            p.metadata.deletion_timestamp.is_some()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
    })
    .await
}

#[tokio::test]
async fn failed_only_after_every_pod_terminated() {
    let sim = start_with(patient_cluster()).await;
    let dir = shared_dir("failed-after-terminated");
    let hold = hold_on_term(&dir);
    // The first pod fails once the second holds on to SIGTERM.
    let first = format!(
        "while [ ! -f {}/holding ]; do sleep 0.01; done; exit 1",
        dir.display()
    );
    let mut job = shell_job("held-failure", &split_script(&dir, &first, &hold));
    job["spec"]["parallelism"] = json!(2);
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(30);
    let jobs = create_job(&sim, job).await;
    eventually("the failure target", WAIT, || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get("held-failure").await.ok()?;
            job_of(&job).2.then_some(())
        }
    })
    .await;
    let held = terminating_pod(&sim, "held-failure").await;
    let job = jobs.get("held-failure").await.expect("the job");
    assert_eq!(
        job_of(&job),
        (false, false, true, false),
        "FailureTarget, not Failed, while {:?} terminates",
        held.metadata.name
    );
    std::fs::write(dir.join("gate"), b"").expect("the gate opens");
    let (job, outcome) = finished(&jobs, "held-failure").await;
    assert_eq!(outcome, "Failed");
    assert_eq!(
        condition(&job, "Failed").map(|c| c.0).as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert!(
        job_pods(&sim, "held-failure")
            .await
            .iter()
            .all(|p| matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )),
        "every pod is terminal once the Job failed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn complete_only_after_every_pod_terminated() {
    let sim = start_with(patient_cluster()).await;
    let dir = shared_dir("complete-after-terminated");
    let hold = hold_on_term(&dir);
    // The first pod runs until it is deleted and holds on after its SIGTERM; its replacement
    // succeeds at once.
    let mut job = shell_job("held-success", &split_script(&dir, &hold, "exit 0"));
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(30);
    let jobs = create_job(&sim, job).await;
    let first = running_pod_of(&sim, "held-success").await;
    eventually("the first pod to hold on to SIGTERM", WAIT, || async {
        dir.join("holding").exists().then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    pods.delete(
        first.metadata.name.as_deref().unwrap_or(""),
        &kube::api::DeleteParams::default(),
    )
    .await
    .expect("the first pod is deleted");
    eventually("the success criteria", WAIT, || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get("held-success").await.ok()?;
            job_of(&job).0.then_some(())
        }
    })
    .await;
    let held = terminating_pod(&sim, "held-success").await;
    assert_eq!(held.metadata.uid, first.metadata.uid);
    let job = jobs.get("held-success").await.expect("the job");
    assert_eq!(
        job_of(&job),
        (true, false, false, false),
        "SuccessCriteriaMet, not Complete, while the deleted pod terminates"
    );
    std::fs::write(dir.join("gate"), b"").expect("the gate opens");
    let (job, outcome) = finished(&jobs, "held-success").await;
    assert_eq!(outcome, "Complete");
    assert!(job.status.and_then(|s| s.completion_time).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn pod_failure_policy_fails_fast_or_ignores() {
    let sim = start().await;
    let mut job = shell_job("fatal", "exit 42");
    job["spec"]["backoffLimit"] = json!(5);
    job["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]});
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "fatal").await;
    assert_eq!(outcome, "Failed");
    let (reason, message) = condition(&job, "Failed").expect("failed");
    assert_eq!(reason, "PodFailurePolicy");
    assert!(
        message.starts_with("Container main for pod default/fatal-")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    assert_eq!(job_pods(&sim, "fatal").await.len(), 1, "no retry");

    let marker = std::env::temp_dir().join(format!("kubeferry-sim-ignore-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let script = format!(
        "if [ -f {m} ]; then exit 0; else touch {m}; exit 42; fi",
        m = marker.display()
    );
    let mut job = shell_job("ignored", &script);
    job["spec"]["podFailurePolicy"] =
        json!({"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}}]});
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "ignored").await;
    let _ = std::fs::remove_file(&marker);
    assert_eq!(
        outcome, "Complete",
        "an ignored failure does not count against backoffLimit 0"
    );
    assert_eq!(job.status.as_ref().and_then(|s| s.failed), None);
    assert_eq!(job_pods(&sim, "ignored").await.len(), 2);
}

/// A verdict once given stays: the pods a deadline stops fail with 143 and match a FailJob
/// rule on any non-zero exit, yet the Job fails DeadlineExceeded (syncJob takes an existing
/// FailureTarget before it evaluates the pod failure policy).
#[tokio::test]
async fn a_deadline_verdict_is_not_replaced_by_the_pod_failure_policy() {
    let sim = start().await;
    let mut job = shell_job("late", "sleep 30");
    job["spec"]["activeDeadlineSeconds"] = json!(1);
    job["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]}}]});
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "late").await;
    assert_eq!(outcome, "Failed");
    let (reason, message) = condition(&job, "Failed").expect("failed");
    assert_eq!(reason, "DeadlineExceeded", "{message}");
}

#[tokio::test]
async fn completions_run_in_parallel() {
    let sim = start().await;
    let mut job = shell_job("many", "echo done");
    job["spec"]["completions"] = json!(3);
    job["spec"]["parallelism"] = json!(2);
    let jobs = create_job(&sim, job).await;
    let (job, outcome) = finished(&jobs, "many").await;
    assert_eq!(outcome, "Complete");
    assert_eq!(job.status.as_ref().and_then(|s| s.succeeded), Some(3));
    assert_eq!(job_pods(&sim, "many").await.len(), 3);
}

fn gpu_cluster() -> SimConfig {
    let mut node = NodeConfig::named("gpu-node");
    node.cpu = "2".into();
    node.nvidia_gpus = 1;
    node.labels.insert("accelerator".into(), "a100".into());
    node.taints.push(TaintConfig {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: "NoSchedule".into(),
    });
    SimConfig {
        nodes: vec![node],
        ..SimConfig::for_tests()
    }
}

async fn scheduled_condition(
    pods: &Api<Pod>,
    name: &str,
) -> (String, Option<String>, Option<String>) {
    eventually(&format!("{name} to have PodScheduled"), WAIT, || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let c = pods
                .get(&name)
                .await
                .ok()?
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled")?;
            Some((c.status, c.reason, c.message))
        }
    })
    .await
}

#[tokio::test]
async fn the_scheduler_respects_capacity_selectors_and_taints() {
    let sim = start_with(gpu_cluster()).await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let make = |name: &str, extra: Value| -> Pod {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "30"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}});
        if let (Some(spec), Some(extra)) = (p["spec"].as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                spec.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(p).expect("pod")
    };
    pods.create(&PostParams::default(), &make("untolerated", json!({})))
        .await
        .expect("created");
    let (status, reason, message) = scheduled_condition(&pods, "untolerated").await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    assert_eq!(
        message.as_deref(),
        Some(
            "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
    );
    let toleration = json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}], "nodeSelector": {"accelerator": "a100"}});
    pods.create(&PostParams::default(), &make("first", toleration.clone()))
        .await
        .expect("created");
    let (status, _, _) = scheduled_condition(&pods, "first").await;
    assert_eq!(status, "True");
    pods.create(&PostParams::default(), &make("second", toleration.clone()))
        .await
        .expect("created");
    let (status, _, message) = scheduled_condition(&pods, "second").await;
    assert_eq!(status, "False");
    assert_eq!(
        message.as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
    let mut wrong = toleration.clone();
    wrong["nodeSelector"] = json!({"accelerator": "h100"});
    pods.create(&PostParams::default(), &make("elsewhere", wrong))
        .await
        .expect("created");
    let (_, _, message) = scheduled_condition(&pods, "elsewhere").await;
    assert_eq!(
        message.as_deref(),
        Some(
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
    );
    pods.delete("first", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    eventually(
        "the second pod to be bound once the GPU is free",
        WAIT,
        || {
            let pods = pods.clone();
            async move {
                pods.get("second")
                    .await
                    .ok()?
                    .spec?
                    .node_name
                    .filter(|n| n == "gpu-node")
            }
        },
    )
    .await;
}

#[tokio::test]
async fn pods_wait_for_a_free_slot_first_come_first_served() {
    let mut node = NodeConfig::named("small");
    node.pods = 1;
    let sim = start_with(SimConfig {
        nodes: vec![node],
        ..SimConfig::for_tests()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let names = ["first", "second", "third", "fourth"];
    for (i, name) in names.iter().enumerate() {
        let command = if i == 0 { "sleep 0.3" } else { "true" };
        let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", command]}]}}))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("created");
    }
    let (status, reason, message) = scheduled_condition(&pods, "fourth").await;
    assert_eq!(
        (status.as_str(), reason.as_deref(), message.as_deref()),
        (
            "False",
            Some("Unschedulable"),
            Some(
                "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
            )
        )
    );
    // One at a time on the one slot, in the order they came: the kubelet hands out pod IPs in
    // the order the pods start.
    let mut ips = Vec::new();
    for name in names {
        let pod = eventually(&format!("{name} to succeed"), WAIT, || {
            let pods = pods.clone();
            async move {
                let p = pods.get(name).await.ok()?;
                (p.status.as_ref()?.phase.as_deref() == Some("Succeeded")).then_some(p)
            }
        })
        .await;
        let ip = pod.status.and_then(|s| s.pod_ip).expect("a pod IP");
        let last: u32 = ip
            .rsplit('.')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("an IPv4 address");
        ips.push(last);
    }
    let mut sorted = ips.clone();
    sorted.sort();
    assert_eq!(ips, sorted);
}

#[tokio::test]
async fn cpu_requests_beyond_the_node_are_unschedulable() {
    let sim = start().await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "huge"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100", "memory": "1Gi"}}}]}}))
    .expect("pod");
    pods.create(&PostParams::default(), &p)
        .await
        .expect("created");
    let (_, reason, message) = scheduled_condition(&pods, "huge").await;
    assert_eq!(reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        message.as_deref(),
        Some(
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )
    );
}

#[tokio::test]
async fn amd_gpus_and_memory_requests_decide_placement() {
    let mut amd = NodeConfig::named("amd-node");
    amd.memory = "4Gi".into();
    amd.amd_gpus = 1;
    let mut plain = NodeConfig::named("plain-node");
    plain.memory = "64Gi".into();
    let sim = start_with(SimConfig {
        nodes: vec![amd, plain],
        ..SimConfig::for_tests()
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let make = |name: &str, resources: Value| -> Pod {
        serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                "command": ["sleep", "30"], "resources": resources}]}}),
        )
        .expect("pod")
    };
    // Too much memory for the GPU node, no GPU on the other: each node says why.
    let big =
        json!({"requests": {"memory": "8Gi"}, "limits": {"amd.com/gpu": "1", "memory": "8Gi"}});
    pods.create(&PostParams::default(), &make("big", big))
        .await
        .expect("created");
    let (status, reason, message) = scheduled_condition(&pods, "big").await;
    assert_eq!(
        (status.as_str(), reason.as_deref(), message.as_deref()),
        (
            "False",
            Some("Unschedulable"),
            Some(
                "0/2 nodes are available: 1 Insufficient amd.com/gpu, 1 Insufficient memory. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
            )
        )
    );
    // Memory alone fits only the large node.
    pods.create(
        &PostParams::default(),
        &make("memory-only", json!({"requests": {"memory": "16Gi"}})),
    )
    .await
    .expect("created");
    // An AMD GPU with little memory goes to the GPU node.
    pods.create(
        &PostParams::default(),
        &make(
            "small-gpu",
            json!({"requests": {"memory": "1Gi"}, "limits": {"amd.com/gpu": "1"}}),
        ),
    )
    .await
    .expect("created");
    for (name, node) in [("memory-only", "plain-node"), ("small-gpu", "amd-node")] {
        let (status, _, _) = scheduled_condition(&pods, name).await;
        assert_eq!(status, "True", "{name}");
        let bound = pods.get(name).await.expect("the pod");
        assert_eq!(
            bound.spec.and_then(|s| s.node_name).as_deref(),
            Some(node),
            "{name}"
        );
    }
    // The one AMD GPU is taken now.
    pods.create(
        &PostParams::default(),
        &make("second-gpu", json!({"limits": {"amd.com/gpu": "1"}})),
    )
    .await
    .expect("created");
    let (_, _, message) = scheduled_condition(&pods, "second-gpu").await;
    assert_eq!(
        message.as_deref(),
        Some(
            "0/2 nodes are available: 2 Insufficient amd.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        )
    );
}

async fn running_pod_of(sim: &Sim, job: &str) -> Pod {
    eventually("a running pod", WAIT, || async {
        job_pods(sim, job)
            .await
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await
}

fn disruption(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        .and_then(|c| c.reason.clone())
}

#[tokio::test]
async fn eviction_fails_the_pod_with_a_disruption_condition() {
    let sim = start_with(patient_cluster()).await;
    let dir = shared_dir("evicted");
    // Told to stop, the container takes its time (until the gate opens).
    let script = format!(
        "trap 'touch {d}/stopping; while [ ! -f {d}/gate ]; do sleep 0.01; done; exit 143' TERM; \
         touch {d}/holding; while true; do sleep 0.01; done",
        d = dir.display()
    );
    let mut job = shell_job("evicted", &script);
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(30);
    let jobs = create_job(&sim, job).await;
    let pod = running_pod_of(&sim, "evicted").await;
    let name = pod.metadata.name.clone().unwrap_or_default();
    eventually("the trap to be set", WAIT, || async {
        dir.join("holding").exists().then_some(())
    })
    .await;
    sim.cluster.evict_pod("default", &name).expect("evicted");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    eventually("the container to be told to stop", WAIT, || async {
        dir.join("stopping").exists().then_some(())
    })
    .await;
    // While a container may still run, the kubelet holds back the terminal phase, the
    // eviction's reason and its DisruptionTarget condition (status manager, mergePodStatus).
    let stopping = pods.get(&name).await.expect("the pod");
    let status = stopping.status.clone().unwrap_or_default();
    assert_eq!(
        (status.phase.as_deref(), status.reason.as_deref()),
        (Some("Running"), None)
    );
    assert_eq!(disruption(&stopping), None);
    std::fs::write(dir.join("gate"), b"").expect("the gate opens");
    let failed = eventually("the pod to fail", WAIT, || {
        let pods = pods.clone();
        let name = name.clone();
        async move {
            let p = pods.get(&name).await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some("Failed")).then_some(p)
        }
    })
    .await;
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.reason.as_deref()),
        Some("Evicted")
    );
    assert_eq!(disruption(&failed).as_deref(), Some("TerminationByKubelet"));
    let exit_code = failed
        .status
        .as_ref()
        .and_then(|s| {
            s.container_statuses
                .as_ref()?
                .first()?
                .state
                .as_ref()?
                .terminated
                .as_ref()
        })
        .map(|t| t.exit_code);
    assert_eq!(
        exit_code,
        Some(143),
        "the container's own end is in the same status"
    );
    let (_, outcome) = finished(&jobs, "evicted").await;
    assert_eq!(outcome, "Failed");
}

#[tokio::test]
async fn preemption_marks_the_pod_and_deletes_it() {
    let sim = start().await;
    create_job(&sim, shell_job("preempted", "sleep 30")).await;
    let pod = running_pod_of(&sim, "preempted").await;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let version = pod.metadata.resource_version.clone().unwrap_or_default();
    let mut seen = Box::pin(
        pods.watch(
            &kube::api::WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .disable_bookmarks(),
            &version,
        )
        .await
        .expect("watch"),
    );
    sim.cluster
        .preempt_pod("default", &name)
        .expect("preempted");
    // The pod is marked first, then deleted gracefully.
    let mut marked_before_deletion = false;
    loop {
        let event = tokio::time::timeout(WAIT, futures::StreamExt::next(&mut seen))
            .await
            .expect("an event")
            .expect("the watch goes on")
            .expect("an event, not an error");
        match event {
            kube::api::WatchEvent::Modified(p)
                if disruption(&p).as_deref() == Some("PreemptionByScheduler") =>
            {
                marked_before_deletion = true;
            }
            kube::api::WatchEvent::Deleted(p) => {
                assert_eq!(disruption(&p).as_deref(), Some("PreemptionByScheduler"));
                break;
            }
            _ => {}
        }
    }
    assert!(marked_before_deletion);
    assert!(
        sim.cluster.preempt_pod("default", "no-such-pod").is_err(),
        "an unknown pod is an error"
    );
}

#[tokio::test]
async fn losing_a_node_fails_its_pods() {
    let sim = start().await;
    let jobs = create_job(&sim, shell_job("lost", "sleep 30")).await;
    let pod = running_pod_of(&sim, "lost").await;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let mut seen = Box::pin(
        pods.watch(
            &kube::api::WatchParams::default()
                .fields(&format!("metadata.name={name}"))
                .disable_bookmarks(),
            "0",
        )
        .await
        .expect("watch"),
    );
    sim.cluster.lose_node("sim-node-1").expect("lost");
    let (job, outcome) = finished(&jobs, "lost").await;
    assert_eq!(outcome, "Failed");
    assert_eq!(job.status.and_then(|s| s.failed), Some(1));
    let mut reasons = Vec::new();
    while let Ok(Some(Ok(event))) = tokio::time::timeout(
        Duration::from_millis(200),
        futures::StreamExt::next(&mut seen),
    )
    .await
    {
        if let kube::api::WatchEvent::Modified(p) | kube::api::WatchEvent::Deleted(p) = event
            && let Some(r) = p.status.as_ref().and_then(|s| s.reason.clone())
        {
            reasons.push((r, disruption(&p)));
        }
    }
    assert!(
        reasons.contains(&(
            "NodeLost".to_string(),
            Some("DeletionByTaintManager".to_string())
        )),
        "{reasons:?}"
    );
    let node = sim
        .cluster
        .object("", "nodes", "", "sim-node-1")
        .expect("node");
    assert_eq!(node["status"]["conditions"][3]["status"], json!("Unknown"));
    sim.cluster.restore_node("sim-node-1").expect("restored");
    let jobs2 = create_job(&sim, shell_job("after", "true")).await;
    assert_eq!(finished(&jobs2, "after").await.1, "Complete");
}

#[tokio::test]
async fn draining_evicts_through_the_eviction_api() {
    let sim = start().await;
    let jobs = create_job(&sim, shell_job("drained", "sleep 30")).await;
    running_pod_of(&sim, "drained").await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let mut seen = Box::pin(
        pods.watch(
            &kube::api::WatchParams::default()
                .labels("job-name=drained")
                .disable_bookmarks(),
            "0",
        )
        .await
        .expect("watch"),
    );
    sim.cluster.drain_node("sim-node-1").expect("drained");
    let (job, outcome) = finished(&jobs, "drained").await;
    assert_eq!(outcome, "Failed");
    // The evicted pod, and the replacement the cordoned node never ran, both count: deleted
    // pods that did not succeed are failures with the default podReplacementPolicy.
    assert!(job.status.and_then(|s| s.failed).unwrap_or(0) >= 1);
    let mut reasons = Vec::new();
    while let Ok(Some(Ok(event))) = tokio::time::timeout(
        Duration::from_millis(200),
        futures::StreamExt::next(&mut seen),
    )
    .await
    {
        if let kube::api::WatchEvent::Modified(p) = event {
            reasons.extend(disruption(&p));
        }
    }
    assert!(
        reasons.contains(&"EvictionByEvictionAPI".to_string()),
        "{reasons:?}"
    );
    let node = sim
        .cluster
        .object("", "nodes", "", "sim-node-1")
        .expect("node");
    assert_eq!(node["spec"]["unschedulable"], json!(true));
}
