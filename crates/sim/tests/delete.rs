//! Deletion conformance: propagation (Background, Foreground, Orphan, and the Job's orphaning
//! default), finalizers and deletionTimestamp, garbage collection through ownerReferences,
//! graceful pod deletion, namespace termination, deletecollection.

mod common;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use common::{Sim, eventually, shell_job, start, status_of};

const WAIT: Duration = Duration::from_secs(10);

/// Creates a Job whose pod sleeps, and waits for the pod to run.
async fn running_job(sim: &Sim, name: &str) -> (Api<Job>, Api<Pod>, String) {
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let job: Job = serde_json::from_value(shell_job(name, "sleep 30")).expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
    let selector = format!("job-name={name}");
    let pod = eventually("the pod to run", WAIT, || {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let pod = list.items.into_iter().next()?;
            (pod.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(pod)
        }
    })
    .await;
    (jobs, pods, pod.metadata.name.unwrap_or_default())
}

async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} to be gone"), WAIT, || {
        let api = api.clone();
        let name = name.to_string();
        async move { api.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn deleting_a_job_without_a_policy_orphans_its_pods() {
    let sim = start().await;
    let (jobs, pods, pod) = running_job(&sim, "orphans").await;
    let answer = jobs
        .delete("orphans", &DeleteParams::default())
        .await
        .expect("deleted");
    let job = answer
        .left()
        .expect("the job comes back, still being deleted");
    assert!(job.metadata.deletion_timestamp.is_some());
    assert_eq!(job.metadata.finalizers, Some(vec!["orphan".to_string()]));
    gone(&jobs, "orphans").await;
    let orphan = eventually(
        "the pod to lose its owner and tracking finalizer",
        WAIT,
        || {
            let pods = pods.clone();
            let pod = pod.clone();
            async move {
                let p = pods.get(&pod).await.ok()?;
                (p.metadata.owner_references.is_none() && p.metadata.finalizers.is_none())
                    .then_some(p)
            }
        },
    )
    .await;
    assert_eq!(
        orphan.status.and_then(|s| s.phase).as_deref(),
        Some("Running")
    );
    pods.delete(&pod, &DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    gone(&pods, &pod).await;
}

#[tokio::test]
async fn background_propagation_deletes_the_pods_afterwards() {
    let sim = start().await;
    let (jobs, pods, pod) = running_job(&sim, "bg").await;
    let answer = jobs
        .delete("bg", &DeleteParams::background())
        .await
        .expect("deleted");
    assert!(answer.is_left(), "jobs answer a delete with the object");
    assert!(
        jobs.get_opt("bg").await.expect("get").is_none(),
        "the job goes at once"
    );
    gone(&pods, &pod).await;
}

#[tokio::test]
async fn foreground_propagation_keeps_the_owner_until_dependents_are_gone() {
    let sim = start().await;
    let (jobs, pods, pod) = running_job(&sim, "fg").await;
    let answer = jobs
        .delete("fg", &DeleteParams::foreground())
        .await
        .expect("deleted");
    let job = answer.left().expect("the job, being deleted");
    assert_eq!(
        job.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    gone(&pods, &pod).await;
    gone(&jobs, "fg").await;
}

#[tokio::test]
async fn finalizers_hold_objects_until_removed() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}))
    .expect("cm");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("created");
    let answer = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("deleted");
    let held = answer.left().expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    let s = status_of(
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
        )
        .await,
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        s.message
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("finalizer removed");
    assert!(
        cms.get_opt("held").await.expect("get").is_none(),
        "removing the last finalizer deletes it"
    );
    let answer = cms.delete("nothing-here", &DeleteParams::default()).await;
    assert_eq!(status_of(answer).code, 404);
}

#[tokio::test]
async fn dependents_of_a_missing_owner_are_collected() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let owner: ConfigMap = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}),
    )
    .expect("cm");
    let owner = cms
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let dependent = |name: &str, uid: &str| -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]}}))
        .expect("cm")
    };
    let uid = owner.metadata.uid.clone().expect("uid");
    cms.create(&PostParams::default(), &dependent("child", &uid))
        .await
        .expect("child");
    cms.create(
        &PostParams::default(),
        &dependent("dangling", "no-such-uid"),
    )
    .await
    .expect("dangling");
    gone(&cms, "dangling").await;
    assert!(cms.get_opt("child").await.expect("get").is_some());
    let answer = cms
        .delete("owner", &DeleteParams::default())
        .await
        .expect("deleted");
    assert!(
        answer.is_right(),
        "config maps answer a delete with a Status"
    );
    gone(&cms, "child").await;
}

#[tokio::test]
async fn pods_get_their_grace_period() {
    let sim = start().await;
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stubborn"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
            "command": ["sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"]}]}}))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    // "ready" is printed once the shell ignores SIGTERM.
    eventually("the pod to be ready", WAIT, || {
        let pods = pods.clone();
        async move {
            let log = pods.logs("stubborn", &Default::default()).await.ok()?;
            log.starts_with("ready").then_some(())
        }
    })
    .await;
    let answer = pods
        .delete("stubborn", &DeleteParams::default().grace_period(1))
        .await
        .expect("deleted");
    let terminating = answer.left().expect("the pod, terminating");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(1));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(
        pods.get_opt("stubborn").await.expect("get").is_some(),
        "it stays during its grace period"
    );
    gone(&pods, "stubborn").await;
}

#[tokio::test]
async fn terminating_namespaces_empty_themselves_and_refuse_new_content() {
    let sim = start().await;
    let namespaces: Api<Namespace> = Api::all(sim.client.clone());
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}),
    )
    .expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("created");
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "doomed");
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "slow", "finalizers": ["example.com/hold"]}}))
    .expect("cm");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("created");
    let answer = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("deleted");
    let terminating = answer.left().expect("the namespace");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let more: ConfigMap = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}),
    )
    .expect("cm");
    let s = status_of(cms.create(&PostParams::default(), &more).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        namespaces.get_opt("doomed").await.expect("get").is_some(),
        "held by the config map's finalizer"
    );
    cms.patch(
        "slow",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("released");
    gone(&namespaces, "doomed").await;
}

#[tokio::test]
async fn deletecollection_deletes_the_selected() {
    let sim = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": app}}})).expect("cm");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("created");
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .expect("deleted");
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(
        left.contains(&"c".to_string())
            && !left.contains(&"a".to_string())
            && !left.contains(&"b".to_string()),
        "{left:?}"
    );
}
