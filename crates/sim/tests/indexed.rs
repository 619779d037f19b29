//! Indexed and multi-completion Jobs end to end through kube-rs: completion indexes on the
//! pods, per-index backoff with `maxFailedIndexes`, `FailIndex` and `FailJob`, success
//! policies, and the interval strings and conditions of the Job's status (Kubernetes 1.33).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use common::{condition, start};

const INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// A Job running `sh -c script` in each pod; `extra` is merged into its spec.
fn job(name: &str, script: &str, extra: Value) -> Job {
    let mut manifest = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", script]}]
            }}
        }
    });
    if let (Some(spec), Some(extra)) = (manifest["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(manifest).expect("a job")
}

/// What watching a Job to its end saw.
struct Outcome {
    job: Job,
    /// The most pods the status ever reported active.
    max_active: i32,
    /// Whether the terminal condition was ever seen while pods were still active or
    /// terminating.
    terminal_while_running: bool,
    /// Whether a terminal condition was ever seen without its interim condition.
    terminal_without_interim: bool,
    /// The status when FailureTarget or SuccessCriteriaMet was first seen.
    interim: Option<k8s_openapi::api::batch::v1::JobStatus>,
}

async fn run_to_end(jobs: &Api<Job>, job: &Job) -> Outcome {
    let name = job.metadata.name.clone().expect("a name");
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(jobs.clone(), config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    // The watch is established before the Job exists, so that every version is seen.
    loop {
        let next = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .expect("the watch starts in time")
            .expect("the watch works")
            .expect("the watch goes on");
        if matches!(next, watcher::Event::InitDone) {
            break;
        }
    }
    jobs.create(&PostParams::default(), job)
        .await
        .expect("created");
    let mut max_active = 0;
    let mut terminal_while_running = false;
    let mut terminal_without_interim = false;
    let mut interim = None;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .expect("the job finishes in time")
            .expect("the watch works")
            .expect("the watch goes on");
        let job = match next {
            watcher::Event::Apply(j) | watcher::Event::InitApply(j) => j,
            _ => continue,
        };
        let status = job.status.clone().unwrap_or_default();
        max_active = max_active.max(status.active.unwrap_or(0));
        if interim.is_none()
            && (condition(&job, "FailureTarget").is_some()
                || condition(&job, "SuccessCriteriaMet").is_some())
        {
            interim = Some(status.clone());
        }
        let complete = condition(&job, "Complete").is_some();
        let failed = condition(&job, "Failed").is_some();
        if complete || failed {
            if status.active.unwrap_or(0) > 0 || status.terminating.unwrap_or(0) > 0 {
                terminal_while_running = true;
            }
            if (complete && condition(&job, "SuccessCriteriaMet").is_none())
                || (failed && condition(&job, "FailureTarget").is_none())
            {
                terminal_without_interim = true;
            }
            return Outcome {
                job,
                max_active,
                terminal_while_running,
                terminal_without_interim,
                interim,
            };
        }
    }
}

async fn pods_of(pods: &Api<Pod>, job: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .expect("pods")
        .items
}

fn index_of(pod: &Pod) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(INDEX).cloned()
}

fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// The indexes of an interval string (`1,3-5`).
fn expand(text: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let first: i64 = first.parse().expect("a number");
        let last: i64 = last.parse().expect("a number");
        out.extend(first..=last);
    }
    out
}

/// Pods by completion index.
fn by_index(pods: &[Pod]) -> BTreeMap<String, Vec<Pod>> {
    let mut out: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in pods {
        out.entry(index_of(pod).unwrap_or_default())
            .or_default()
            .push(pod.clone());
    }
    out
}

#[tokio::test]
async fn every_index_succeeds_with_its_index_hostname_and_name() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "idx",
        "echo $JOB_COMPLETION_INDEX $HOSTNAME",
        json!({"completionMode": "Indexed", "completions": 4, "parallelism": 2}),
    );
    let outcome = run_to_end(&jobs, &job).await;
    assert_eq!(
        condition(&outcome.job, "Complete"),
        Some((
            "CompletionsReached".into(),
            "Reached expected number of succeeded pods".into()
        ))
    );
    assert!(!outcome.terminal_without_interim);
    assert!(!outcome.terminal_while_running);
    assert!(
        outcome.max_active <= 2,
        "parallelism 2, saw {}",
        outcome.max_active
    );
    let status = outcome.job.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0-3"));
    assert_eq!(status.succeeded, Some(4));
    assert_eq!(status.failed, None);
    assert_eq!(status.failed_indexes, None, "no per-index limit");

    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let list = pods_of(&pods, "idx").await;
    assert_eq!(list.len(), 4, "one pod per index");
    for pod in &list {
        let index = index_of(pod).expect("the index annotation");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(INDEX), Some(&index), "the index label");
        let name = pod.metadata.name.clone().unwrap_or_default();
        let prefix = format!("idx-{index}-");
        assert!(
            name.starts_with(&prefix) && name.len() == prefix.len() + 5,
            "{name}"
        );
        let spec = pod.spec.clone().expect("spec");
        assert_eq!(spec.hostname, Some(format!("idx-{index}")));
        let env = spec.containers[0].env.clone().unwrap_or_default();
        let var = env
            .iter()
            .find(|v| v.name == "JOB_COMPLETION_INDEX")
            .expect("JOB_COMPLETION_INDEX");
        let field = var
            .value_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
            .expect("a field reference");
        assert_eq!(
            field.field_path,
            "metadata.labels['batch.kubernetes.io/job-completion-index']"
        );
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .expect("the log");
        assert_eq!(log, format!("{index} idx-{index}\n"));
    }
}

#[tokio::test]
async fn an_index_out_of_retries_fails_the_job_at_the_end_when_max_failed_indexes_allows_it() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "perindex",
        "if [ \"$JOB_COMPLETION_INDEX\" = 2 ]; then echo boom; exit 3; fi",
        json!({
            "completionMode": "Indexed", "completions": 4, "parallelism": 4,
            "backoffLimitPerIndex": 1, "maxFailedIndexes": 1,
        }),
    );
    let outcome = run_to_end(&jobs, &job).await;
    assert_eq!(
        condition(&outcome.job, "Failed"),
        Some(("FailedIndexes".into(), "Job has failed indexes".into()))
    );
    assert!(!outcome.terminal_without_interim);
    assert!(!outcome.terminal_while_running);
    let status = outcome.job.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0,1,3"));
    assert_eq!(status.failed_indexes.as_deref(), Some("2"));
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.failed, Some(2), "index 2 ran twice");
    let spec = outcome.job.spec.clone().expect("spec");
    assert_eq!(
        spec.backoff_limit,
        Some(i32::MAX),
        "defaulted with a per-index limit"
    );

    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let by_index = by_index(&pods_of(&pods, "perindex").await);
    let mut counts: Vec<String> = by_index["2"]
        .iter()
        .map(|p| annotation(p, "batch.kubernetes.io/job-index-failure-count").unwrap_or_default())
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        vec!["0", "1"],
        "a replacement counts the failures before it"
    );
    for ix in ["0", "1", "3"] {
        assert_eq!(by_index[ix].len(), 1, "index {ix} ran once");
    }
}

#[tokio::test]
async fn more_failed_indexes_than_allowed_fail_the_job_early() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "maxfailed",
        "case $JOB_COMPLETION_INDEX in 1|2) exit 1;; *) exec sleep 30;; esac",
        json!({
            "completionMode": "Indexed", "completions": 4, "parallelism": 4,
            "backoffLimitPerIndex": 0, "maxFailedIndexes": 1,
        }),
    );
    let outcome = run_to_end(&jobs, &job).await;
    assert_eq!(
        condition(&outcome.job, "Failed"),
        Some((
            "MaxFailedIndexesExceeded".into(),
            "Job has exceeded the specified maximal number of failed indexes".into()
        ))
    );
    assert!(!outcome.terminal_without_interim);
    assert!(
        !outcome.terminal_while_running,
        "Failed waits for the sleeping pods to end"
    );
    let interim = outcome.interim.clone().expect("FailureTarget seen");
    assert_eq!(interim.failed_indexes.as_deref(), Some("1,2"));
    assert_eq!(interim.active, None, "FailureTarget ends the running pods");
    // The pods ended by the failure fail too, and count as their indexes' failures.
    let status = outcome.job.status.clone().expect("status");
    let failed = status.failed_indexes.clone().unwrap_or_default();
    let listed = expand(&failed);
    assert!(listed.contains(&1) && listed.contains(&2), "{failed}");
    assert_eq!(status.completed_indexes, None);
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    for pod in pods_of(&pods, "maxfailed").await {
        assert_eq!(phase(&pod), "Failed", "every pod ended");
    }
}

#[tokio::test]
async fn a_success_policy_completes_the_job_early_and_ends_the_other_pods() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "leader",
        "if [ \"$JOB_COMPLETION_INDEX\" = 0 ]; then exit 0; fi; exec sleep 30",
        json!({
            "completionMode": "Indexed", "completions": 3, "parallelism": 3,
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
        }),
    );
    let outcome = run_to_end(&jobs, &job).await;
    let expected = Some(("SuccessPolicy".into(), "Matched rules at index 0".into()));
    assert_eq!(condition(&outcome.job, "SuccessCriteriaMet"), expected);
    assert_eq!(condition(&outcome.job, "Complete"), expected);
    assert!(!outcome.terminal_while_running);
    let status = outcome.job.status.clone().expect("status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    assert_eq!(status.succeeded, Some(1));
    assert!(status.completion_time.is_some());
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    // The lingering pods were deleted (and are gone once terminated): only index 0's stays.
    let list = pods_of(&pods, "leader").await;
    let left: Vec<(Option<String>, String)> =
        list.iter().map(|p| (index_of(p), phase(p))).collect();
    assert_eq!(left, vec![(Some("0".into()), "Succeeded".into())]);
}

#[tokio::test]
async fn fail_index_stops_retrying_one_index_only() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "failindex",
        "if [ \"$JOB_COMPLETION_INDEX\" = 1 ]; then exit 42; fi",
        json!({
            "completionMode": "Indexed", "completions": 3, "parallelism": 3,
            "backoffLimitPerIndex": 5,
            "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}
            ]},
        }),
    );
    let outcome = run_to_end(&jobs, &job).await;
    assert_eq!(
        condition(&outcome.job, "Failed"),
        Some(("FailedIndexes".into(), "Job has failed indexes".into()))
    );
    let status = outcome.job.status.clone().expect("status");
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!(status.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(status.failed, Some(1));
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let by_index = by_index(&pods_of(&pods, "failindex").await);
    assert_eq!(by_index["1"].len(), 1, "FailIndex is not retried");
}

#[tokio::test]
async fn fail_job_ends_an_indexed_job_with_the_rule_that_matched() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "failjob",
        "if [ \"$JOB_COMPLETION_INDEX\" = 0 ]; then exit 7; fi; exec sleep 30",
        json!({
            "completionMode": "Indexed", "completions": 3, "parallelism": 3,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [7]}}
            ]},
        }),
    );
    let outcome = run_to_end(&jobs, &job).await;
    let (reason, message) = condition(&outcome.job, "Failed").expect("Failed");
    assert_eq!(reason, "PodFailurePolicy");
    assert!(
        message.starts_with("Container main for pod default/failjob-0-")
            && message.ends_with(" failed with exit code 7 matching FailJob rule at index 1"),
        "{message}"
    );
    assert!(!outcome.terminal_without_interim);
    assert!(!outcome.terminal_while_running);
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    for pod in pods_of(&pods, "failjob").await {
        assert_eq!(phase(&pod), "Failed");
    }
}

#[tokio::test]
async fn parallelism_above_completions_still_completes() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    for (name, mode) in [("wide-indexed", "Indexed"), ("wide-plain", "NonIndexed")] {
        let job = job(
            name,
            "exit 0",
            json!({"completionMode": mode, "completions": 2, "parallelism": 5}),
        );
        let outcome = run_to_end(&jobs, &job).await;
        assert!(condition(&outcome.job, "Complete").is_some(), "{name}");
        assert!(outcome.max_active <= 2, "{name}: {}", outcome.max_active);
        let status = outcome.job.status.clone().expect("status");
        assert_eq!(status.succeeded, Some(2), "{name}");
        assert_eq!(
            pods_of(&pods, name).await.len(),
            2,
            "{name}: never a third pod"
        );
    }
}

#[tokio::test]
async fn non_indexed_completions_are_counted_with_parallelism() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let job = job(
        "three",
        "echo done",
        json!({"completions": 3, "parallelism": 2}),
    );
    let outcome = run_to_end(&jobs, &job).await;
    assert_eq!(
        condition(&outcome.job, "Complete").map(|c| c.0),
        Some("CompletionsReached".into())
    );
    assert!(!outcome.terminal_without_interim);
    assert!(outcome.max_active <= 2, "{}", outcome.max_active);
    let status = outcome.job.status.clone().expect("status");
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.completed_indexes, None);
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    let list = pods_of(&pods, "three").await;
    assert_eq!(list.len(), 3);
    for pod in &list {
        assert_eq!(phase(pod), "Succeeded");
        assert_eq!(index_of(pod), None);
        assert_eq!(pod.spec.as_ref().and_then(|s| s.hostname.clone()), None);
    }
}

#[tokio::test]
async fn inconsistent_indexed_fields_are_refused_by_field() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let cases = [
        (
            json!({"completionMode": "Indexed", "completions": null, "parallelism": 2}),
            "spec.completions: Required value: when completion mode is Indexed",
        ),
        (
            json!({"backoffLimitPerIndex": 1}),
            "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
        ),
        (
            json!({"completionMode": "Indexed", "completions": 2, "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]}}),
            "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
        ),
        (
            json!({"completionMode": "Indexed", "completions": 3,
                "successPolicy": {"rules": [{"succeededIndexes": "0-3"}]}}),
            "spec.successPolicy.rules[0].succeededIndexes",
        ),
        (
            json!({"completions": 3, "successPolicy": {"rules": [{"succeededCount": 1}]}}),
            "spec.successPolicy: Invalid value",
        ),
    ];
    for (i, (extra, expected)) in cases.into_iter().enumerate() {
        let job = job(&format!("bad-{i}"), "true", extra);
        let error = jobs
            .create(&PostParams::default(), &job)
            .await
            .expect_err("refused");
        let text = error.to_string();
        assert!(text.contains(expected), "case {i}: {text}");
    }
    assert!(
        jobs.list(&ListParams::default())
            .await
            .expect("jobs")
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn an_evicted_pod_ignored_by_the_policy_is_replaced_without_counting_against_its_index() {
    let sim = start().await;
    let jobs: Api<Job> = Api::namespaced(sim.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(sim.client.clone(), "default");
    // The first pod leaves a mark and waits to be evicted; its replacement finds the mark.
    let mark = std::env::temp_dir().join(format!("kubeferry-evicted-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let script = format!(
        "if [ -f {m} ]; then exit 0; fi; touch {m}; exec sleep 30",
        m = mark.display()
    );
    let job = job(
        "evicted",
        &script,
        json!({
            "completionMode": "Indexed", "completions": 1, "parallelism": 1,
            "backoffLimitPerIndex": 0,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
            ]},
        }),
    );
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("created");
    let first = common::eventually("the first pod running", Duration::from_secs(10), || {
        let pods = pods.clone();
        let mark = mark.clone();
        async move {
            let list = pods_of(&pods, "evicted").await;
            let pod = list.into_iter().find(|p| phase(p) == "Running")?;
            mark.exists().then_some(pod)
        }
    })
    .await;
    let name = first.metadata.name.clone().expect("a name");
    sim.cluster
        .evict_pod("default", &name)
        .expect("the pod is evicted");
    let finished = common::eventually("the job to finish", Duration::from_secs(10), || {
        let jobs = jobs.clone();
        async move {
            let job = jobs.get("evicted").await.ok()?;
            (condition(&job, "Complete").is_some() || condition(&job, "Failed").is_some())
                .then_some(job)
        }
    })
    .await;
    let _ = std::fs::remove_file(&mark);
    assert!(
        condition(&finished, "Complete").is_some(),
        "the ignored failure did not use up the index's retries: {:?}",
        finished.status
    );
    let spec = finished.spec.clone().expect("spec");
    let rules = spec.pod_failure_policy.expect("a policy").rules;
    let patterns = rules[0].on_pod_conditions.clone().expect("patterns");
    assert_eq!(
        patterns[0].status, "True",
        "the pattern's status defaults to True"
    );
    let status = finished.status.clone().expect("status");
    assert_eq!(status.failed, None, "an ignored failure is not counted");
    assert_eq!(status.failed_indexes.as_deref(), Some(""));
    assert_eq!(status.completed_indexes.as_deref(), Some("0"));
    let replacement = pods_of(&pods, "evicted")
        .await
        .into_iter()
        .find(|p| phase(p) == "Succeeded")
        .expect("the replacement");
    assert_eq!(
        annotation(&replacement, "batch.kubernetes.io/job-index-failure-count").as_deref(),
        Some("0")
    );
    assert_eq!(
        annotation(
            &replacement,
            "batch.kubernetes.io/job-index-ignored-failure-count"
        )
        .as_deref(),
        Some("1")
    );
}
