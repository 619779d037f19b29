//! The Job controller (batch/v1, Kubernetes 1.31+ semantics): creates pods from the template
//! with ownerReferences, labels and the job-tracking finalizer; counts finished pods into
//! status up to `completions` with at most `parallelism` running; backoffLimit with exponential
//! pod backoff; podFailurePolicy (FailJob, FailIndex, Ignore, Count); Indexed completion mode
//! (`crate::indexes`: one pod per index, per-index backoff, maxFailedIndexes, success policies,
//! completedIndexes/failedIndexes); activeDeadlineSeconds; suspend; ttlSecondsAfterFinished;
//! conditions SuccessCriteriaMet/FailureTarget first, Complete/Failed only once every pod is
//! terminal.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::indexes;

use super::WorkQueue;
use super::events::{self, EventKind, Source};
use crate::ops::{self, DeleteOptions, Propagation};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, ObjectKey, meta};

/// The finalizer the controller puts on its pods until it has counted them.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn source() -> Source<'static> {
    Source {
        component: "job-controller",
        host: None,
    }
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn has_condition(job: &Value, kind: &str) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn condition_of<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn new_condition(kind: &str, status: bool, reason: &str, message: &str) -> Value {
    let now = meta::now();
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

fn put_condition(status: &mut Value, condition: Value) {
    let list = status
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(list)) = list else {
        return;
    };
    let kind = condition.get("type").cloned();
    match list.iter_mut().find(|c| c.get("type") == kind.as_ref()) {
        Some(existing) => {
            if existing.get("status") != condition.get("status") {
                *existing = condition;
            }
        }
        None => list.push(condition),
    }
}

/// `<job>-<index>-`, shortened as the API server's generated names must be (58 characters
/// before the random suffix), keeping the index.
fn generate_name_with_index(job: &str, index: i64) -> String {
    const MAX_GENERATED_NAME: usize = 63 - 5;
    let suffix = format!("-{index}-");
    let prefix = format!("{job}{suffix}");
    if prefix.len() <= MAX_GENERATED_NAME {
        return prefix;
    }
    let mut cut = MAX_GENERATED_NAME.saturating_sub(suffix.len());
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &prefix[..cut])
}

/// Sets `metadata.<map>.<key>` to a string, creating the map.
fn set_string(metadata: &mut Value, map: &str, key: &str, value: &str) {
    let Some(m) = metadata.as_object_mut() else {
        return;
    };
    let entry = m.entry(map).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry[key] = json!(value);
}

/// Gives every container (init containers included) `JOB_COMPLETION_INDEX` from the index
/// label, unless it sets the variable itself.
fn add_completion_index_env(spec: &mut Value) {
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            let Some(c) = container.as_object_mut() else {
                continue;
            };
            let env = c.entry("env").or_insert_with(|| json!([]));
            let Some(env) = env.as_array_mut() else {
                continue;
            };
            let present = env.iter().any(|v| {
                v.get("name").and_then(Value::as_str) == Some(indexes::COMPLETION_INDEX_ENV)
            });
            if !present {
                env.push(json!({
                    "name": indexes::COMPLETION_INDEX_ENV,
                    "valueFrom": {"fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": format!("metadata.labels['{}']", indexes::COMPLETION_INDEX),
                    }},
                }));
            }
        }
    }
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The order in which surplus active pods are deleted (first the least advanced), as the
/// controller's `ActivePods` sort: unscheduled, pending, not ready, then the newest.
fn deletion_rank(pod: &Value) -> (bool, bool, bool, std::cmp::Reverse<String>) {
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    (
        scheduled,
        phase(pod) == "Running",
        is_ready(pod),
        std::cmp::Reverse(
            pod.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
    )
}

/// The failure counts (counted, ignored) for a new pod of an index: those of the index's last
/// failed pod, plus its own failure, counted or ignored as the pod failure policy says.
fn replacement_counts(job: &Value, owned: &[Arc<Value>], index: i64) -> (i64, i64) {
    let last = owned
        .iter()
        .filter(|p| phase(p) == "Failed" && indexes::of_pod(p) == Some(index))
        .max_by_key(|p| {
            (
                indexes::count_of(p, indexes::INDEX_FAILURE_COUNT)
                    + indexes::count_of(p, indexes::INDEX_IGNORED_FAILURE_COUNT),
                p.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        });
    let Some(last) = last else {
        return (0, 0);
    };
    let failures = indexes::count_of(last, indexes::INDEX_FAILURE_COUNT);
    let ignored = indexes::count_of(last, indexes::INDEX_IGNORED_FAILURE_COUNT);
    match failure_policy_action(job, last) {
        Some((Action::Ignore, _)) => (failures, ignored + 1),
        _ => (failures + 1, ignored),
    }
}

/// A pod failure policy action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    FailJob,
    FailIndex,
    Ignore,
    Count,
}

impl Action {
    fn parse(text: &str) -> Action {
        match text {
            "FailJob" => Action::FailJob,
            "FailIndex" => Action::FailIndex,
            "Ignore" => Action::Ignore,
            _ => Action::Count,
        }
    }
}

/// The first matching podFailurePolicy rule for a failed pod: (action, message). Exit codes
/// are those of the containers and init containers that terminated with a non-zero code.
fn failure_policy_action(job: &Value, pod: &Value) -> Option<(Action, String)> {
    let rules = job.pointer("/spec/podFailurePolicy/rules")?.as_array()?;
    let statuses: Vec<Value> = ["/status/initContainerStatuses", "/status/containerStatuses"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    for (index, rule) in rules.iter().enumerate() {
        let action_text = rule.get("action").and_then(Value::as_str).unwrap_or("");
        let action = Action::parse(action_text);
        if let Some(on_exit) = rule.get("onExitCodes") {
            let container = on_exit.get("containerName").and_then(Value::as_str);
            let operator = on_exit
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or("In");
            let values: Vec<i64> = on_exit
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            for s in &statuses {
                let name = s.get("name").and_then(Value::as_str).unwrap_or("");
                if container.is_some_and(|c| c != name) {
                    continue;
                }
                let Some(code) = s
                    .pointer("/state/terminated/exitCode")
                    .and_then(Value::as_i64)
                    .filter(|c| *c != 0)
                else {
                    continue;
                };
                let hit = match operator {
                    "NotIn" => !values.contains(&code),
                    _ => values.contains(&code),
                };
                if hit {
                    let message = format!(
                        "Container {name} for pod {}/{} failed with exit code {code} matching {action_text} rule at index {index}",
                        meta::namespace(pod),
                        meta::name(pod)
                    );
                    return Some((action, message));
                }
            }
        }
        if let Some(patterns) = rule.get("onPodConditions").and_then(Value::as_array) {
            let conditions = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let matched = patterns.iter().find_map(|p| {
                let kind = p.get("type").and_then(Value::as_str)?;
                let status = p
                    .get("status")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("True");
                conditions
                    .iter()
                    .any(|c| {
                        c.get("type").and_then(Value::as_str) == Some(kind)
                            && c.get("status").and_then(Value::as_str) == Some(status)
                    })
                    .then_some(kind)
            });
            if let Some(kind) = matched {
                let message = format!(
                    "Pod {}/{} has condition {kind} matching {action_text} rule at index {index}",
                    meta::namespace(pod),
                    meta::name(pod)
                );
                return Some((action, message));
            }
        }
    }
    None
}

struct Controller {
    state: Arc<State>,
    queue: Arc<WorkQueue<ObjectKey>>,
    /// When each job (by uid) may next create a pod after failures.
    not_before: HashMap<String, tokio::time::Instant>,
    /// When each index of a job with a per-index backoff limit may next get a pod.
    index_not_before: HashMap<(String, i64), tokio::time::Instant>,
}

impl Controller {
    fn owned_pods(&self, job: &Value) -> Vec<Arc<Value>> {
        let Some(uid) = meta::uid(job) else {
            return Vec::new();
        };
        self.state
            .store
            .dependents_of(uid)
            .into_iter()
            .filter(|k| k.resource == pods())
            .filter_map(|k| self.state.store.get(&k))
            .filter(|p| {
                meta::controller_ref(p)
                    .and_then(|r| r.get("uid"))
                    .and_then(Value::as_str)
                    == Some(uid)
            })
            .collect()
    }

    fn delete_pod(&self, job: &Value, pod: &Value) {
        let Some(rt) = self.state.registry.get(&pods()) else {
            return;
        };
        let key = ObjectKey::new(pods(), meta::namespace(pod), meta::name(pod));
        let opts = DeleteOptions {
            propagation: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        if ops::delete(&self.state, &rt, &key, &opts).is_ok() {
            events::record(
                &self.state,
                job,
                EventKind::Normal,
                "SuccessfulDelete",
                &format!("Deleted pod: {}", meta::name(pod)),
                source(),
                None,
            );
        }
    }

    fn remove_tracking(&self, pod: &Value) {
        if meta::finalizers(pod)
            .iter()
            .any(|f| f == TRACKING_FINALIZER)
        {
            let key = ObjectKey::new(pods(), meta::namespace(pod), meta::name(pod));
            // Gone already is fine.
            let _ = ops::remove_finalizer(&self.state, &key, TRACKING_FINALIZER);
        }
    }

    /// Creates one pod from the template; `index` for an Indexed Job, with the failure counts
    /// of the index (failures, ignored failures) when it has a per-index backoff limit.
    fn create_pod(&mut self, job: &Value, index: Option<(i64, Option<(i64, i64)>)>) -> bool {
        let Some(rt) = self.state.registry.get(&pods()) else {
            return false;
        };
        let name = meta::name(job);
        let namespace = meta::namespace(job);
        let template = job
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut metadata = template
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
        let generate_name = match index {
            Some((ix, _)) => generate_name_with_index(name, ix),
            None => format!("{name}-"),
        };
        if let Some((ix, counts)) = index {
            let text = ix.to_string();
            set_string(
                &mut metadata,
                "annotations",
                indexes::COMPLETION_INDEX,
                &text,
            );
            set_string(&mut metadata, "labels", indexes::COMPLETION_INDEX, &text);
            if let Some((failures, ignored)) = counts {
                set_string(
                    &mut metadata,
                    "annotations",
                    indexes::INDEX_FAILURE_COUNT,
                    &failures.to_string(),
                );
                if ignored > 0 {
                    set_string(
                        &mut metadata,
                        "annotations",
                        indexes::INDEX_IGNORED_FAILURE_COUNT,
                        &ignored.to_string(),
                    );
                }
            }
            spec["hostname"] = json!(format!("{name}-{ix}"));
            add_completion_index_env(&mut spec);
        }
        if let Some(m) = metadata.as_object_mut() {
            m.remove("name");
            m.remove("creationTimestamp");
            m.insert("generateName".into(), json!(generate_name));
            m.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": meta::uid(job).unwrap_or(""),
                    "controller": true,
                    "blockOwnerDeletion": true
                }]),
            );
            // The template's own finalizers stay, as the real controller copies them.
            let mut finalizers: Vec<Value> = m
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            finalizers.push(json!(TRACKING_FINALIZER));
            m.insert("finalizers".into(), json!(finalizers));
        }
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
        });
        match ops::create(&self.state, &rt, "v1", namespace, pod, false) {
            Ok(created) => {
                events::record(
                    &self.state,
                    job,
                    EventKind::Normal,
                    "SuccessfulCreate",
                    &format!("Created pod: {}", meta::name(&created)),
                    source(),
                    None,
                );
                true
            }
            Err(error) => {
                events::record(
                    &self.state,
                    job,
                    EventKind::Warning,
                    "FailedCreate",
                    &format!("Error creating: {}", error.message),
                    source(),
                    None,
                );
                false
            }
        }
    }

    /// Writes the status computed from `read`, keeping the conditions someone else added to the
    /// Job since (a real controller's write would be refused with 409, and its next pass would
    /// see them).
    fn write_status(&self, key: &ObjectKey, read: &Value, mut status: Value) -> Option<Arc<Value>> {
        let uid = meta::uid(read).unwrap_or("");
        ops::mutate(&self.state, key, |job| {
            if meta::uid(job) != Some(uid) {
                return false;
            }
            status = with_conditions_added_since(status, read, job);
            if job.get("status") == Some(&status) {
                return false;
            }
            job["status"] = status;
            true
        })
        .ok()
    }

    fn ttl(&self, key: &ObjectKey, job: &Value) {
        let Some(ttl) = job
            .pointer("/spec/ttlSecondsAfterFinished")
            .and_then(Value::as_i64)
        else {
            return;
        };
        let finished = meta::time_at(job, "/status/completionTime")
            .or_else(|| {
                condition_of(job, "Failed")
                    .and_then(|c| c.get("lastTransitionTime"))
                    .and_then(Value::as_str)
                    .and_then(meta::parse_time)
            })
            .unwrap_or_else(Timestamp::now);
        let expires = finished
            .checked_add(SignedDuration::from_secs(ttl))
            .unwrap_or(finished);
        let now = Timestamp::now();
        if now >= expires {
            if let Some(rt) = self.state.registry.get(&jobs()) {
                // As the TTL-after-finished controller does: foreground, so the Job stays
                // visible (being deleted) until its pods are gone, and only this very Job.
                let opts = DeleteOptions {
                    propagation: Some(Propagation::Foreground),
                    uid: meta::uid(job).map(str::to_string),
                    ..DeleteOptions::default()
                };
                // Deleted by someone else first is fine.
                let _ = ops::delete(&self.state, &rt, key, &opts);
            }
        } else {
            let wait = expires.duration_since(now).unsigned_abs();
            self.queue
                .add_after(key.clone(), wait.max(Duration::from_millis(1)));
        }
    }

    fn sync(&mut self, key: &ObjectKey) {
        let Some(job) = self.state.store.get(key) else {
            return;
        };
        let uid = meta::uid(&job).unwrap_or("").to_string();
        let owned = self.owned_pods(&job);
        if meta::is_deleting(&job) {
            // A job on its way out counts nothing more: its pods must not stay held.
            for pod in &owned {
                self.remove_tracking(pod);
            }
            return;
        }
        let finished = has_condition(&job, "Complete") || has_condition(&job, "Failed");
        if finished {
            for pod in &owned {
                self.remove_tracking(pod);
            }
            self.ttl(key, &job);
            return;
        }
        let spec = job.get("spec").cloned().unwrap_or_else(|| json!({}));
        let mut status = job.get("status").cloned().unwrap_or_else(|| json!({}));
        if !status.is_object() {
            status = json!({});
        }
        let completions = spec.get("completions").and_then(Value::as_i64);
        let indexed = spec.get("completionMode").and_then(Value::as_str) == Some("Indexed");
        // An Indexed Job always has completions (validation); 0 makes it complete at once.
        let index_count = if indexed { completions.unwrap_or(0) } else { 0 };
        let per_index_limit = if indexed {
            spec.get("backoffLimitPerIndex").and_then(Value::as_i64)
        } else {
            None
        };
        let mut completed = indexes::parse(
            status
                .get("completedIndexes")
                .and_then(Value::as_str)
                .unwrap_or(""),
            index_count,
        );
        let mut failed_indexes = indexes::parse(
            status
                .get("failedIndexes")
                .and_then(Value::as_str)
                .unwrap_or(""),
            index_count,
        );
        let mut succeeded = status.get("succeeded").and_then(Value::as_i64).unwrap_or(0);
        let mut failed = status.get("failed").and_then(Value::as_i64).unwrap_or(0);
        let mut new_events: Vec<(EventKind, &str, String)> = Vec::new();
        let suspended_now = spec.get("suspend").and_then(Value::as_bool) == Some(true);
        let mut fail_target: Option<(String, String)> = None;
        // A Job already judged (a FailureTarget, SuccessCriteriaMet) keeps that verdict: the
        // pod failure policy is evaluated only for a Job without one (syncJob: "the
        // job-controller evaluates the podFailurePolicy only when the Job doesn't have the
        // SuccessCriteriaMet condition", and an existing FailureTarget is taken first), so
        // the pods a deadline stops do not turn DeadlineExceeded into PodFailurePolicy.
        let already_target = condition_of(&job, "FailureTarget")
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .cloned();
        let already_success = has_condition(&job, "SuccessCriteriaMet");
        let judged = already_target.is_some() || already_success;
        // Count finished pods still carrying the tracking finalizer (not yet counted).
        let mut active = Vec::new();
        let mut terminating_pods = Vec::new();
        let mut ready = 0;
        for pod in &owned {
            let tracked = meta::finalizers(pod)
                .iter()
                .any(|f| f == TRACKING_FINALIZER);
            let p = phase(pod);
            let index = indexes::of_pod(pod).filter(|i| *i < index_count);
            let unbound_deleted = meta::is_deleting(pod)
                && pod
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty();
            if p == "Succeeded" {
                if tracked {
                    if !indexed {
                        succeeded += 1;
                    } else if let Some(ix) = index {
                        // The index alone keeps a success from being counted twice.
                        completed.insert(ix);
                    }
                    self.remove_tracking(pod);
                }
            } else if p == "Failed" || unbound_deleted {
                if tracked && suspended_now && meta::is_deleting(pod) {
                    // Pods the suspension terminated are not failures.
                    self.remove_tracking(pod);
                } else if tracked && (!indexed || index.is_some()) {
                    let action = failure_policy_action(&job, pod);
                    match &action {
                        Some((Action::FailJob, message)) => {
                            failed += 1;
                            if fail_target.is_none() && !judged {
                                fail_target = Some(("PodFailurePolicy".into(), message.clone()));
                            }
                        }
                        Some((Action::Ignore, _)) => {}
                        _ => failed += 1,
                    }
                    let counted = !matches!(action, Some((Action::Ignore, _)));
                    match (per_index_limit, index) {
                        (Some(limit), Some(ix)) => {
                            let fail_index = matches!(action, Some((Action::FailIndex, _)))
                                || (counted
                                    && indexes::count_of(pod, indexes::INDEX_FAILURE_COUNT)
                                        >= limit);
                            if fail_index {
                                failed_indexes.insert(ix);
                            } else if counted {
                                let failures =
                                    indexes::count_of(pod, indexes::INDEX_FAILURE_COUNT) + 1;
                                let delay = self.backoff_for(failures);
                                self.index_not_before
                                    .insert((uid.clone(), ix), tokio::time::Instant::now() + delay);
                            }
                        }
                        _ if counted => {
                            let delay = self.backoff_for(failed);
                            self.not_before
                                .insert(uid.clone(), tokio::time::Instant::now() + delay);
                        }
                        _ => {}
                    }
                    self.remove_tracking(pod);
                } else if tracked {
                    // No valid index: nothing to count.
                    self.remove_tracking(pod);
                }
            } else if meta::is_deleting(pod) {
                terminating_pods.push(pod.clone());
            } else {
                if is_ready(pod) {
                    ready += 1;
                }
                active.push(pod.clone());
            }
        }
        let mut terminating = terminating_pods.len() as i64;
        if indexed {
            succeeded = completed.len() as i64;
        }
        let suspended = suspended_now;
        let now = meta::now();
        // Suspension.
        if suspended {
            for pod in &active {
                self.delete_pod(&job, pod);
            }
            if !has_condition(&job, "Suspended") {
                put_condition(
                    &mut status,
                    new_condition("Suspended", true, "JobSuspended", "Job suspended"),
                );
                new_events.push((EventKind::Normal, "Suspended", "Job suspended".into()));
            }
            if let Some(m) = status.as_object_mut() {
                m.remove("startTime");
            }
            status["active"] = json!(0);
            active.clear();
        } else {
            if has_condition(&job, "Suspended") {
                put_condition(
                    &mut status,
                    new_condition("Suspended", false, "JobResumed", "Job resumed"),
                );
                new_events.push((EventKind::Normal, "Resumed", "Job resumed".into()));
            }
            if status.get("startTime").is_none_or(Value::is_null) {
                status["startTime"] = json!(now);
            }
        }
        let parallelism = spec.get("parallelism").and_then(Value::as_i64).unwrap_or(1);
        let backoff_limit = spec
            .get("backoffLimit")
            .and_then(Value::as_i64)
            .unwrap_or(6);
        let undecided = already_target.is_none() && !already_success && !suspended;
        if fail_target.is_none() && undecided {
            if failed > backoff_limit {
                fail_target = Some((
                    "BackoffLimitExceeded".into(),
                    "Job has reached the specified backoff limit".into(),
                ));
            } else if let Some(deadline) = spec.get("activeDeadlineSeconds").and_then(Value::as_i64)
            {
                let start = status
                    .get("startTime")
                    .and_then(Value::as_str)
                    .and_then(meta::parse_time)
                    .unwrap_or_else(Timestamp::now);
                let ends = start
                    .checked_add(SignedDuration::from_secs(deadline))
                    .unwrap_or(start);
                let current = Timestamp::now();
                if current >= ends {
                    fail_target = Some((
                        "DeadlineExceeded".into(),
                        "Job was active longer than specified deadline".into(),
                    ));
                } else {
                    self.queue.add_after(
                        key.clone(),
                        ends.duration_since(current)
                            .unsigned_abs()
                            .max(Duration::from_millis(1)),
                    );
                }
            }
        }
        if fail_target.is_none() && undecided && per_index_limit.is_some() {
            let max_failed = spec.get("maxFailedIndexes").and_then(Value::as_i64);
            let failed_count = failed_indexes.len() as i64;
            if max_failed.is_some_and(|m| failed_count > m) {
                fail_target = Some((
                    "MaxFailedIndexesExceeded".into(),
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ));
            } else if failed_count > 0 && failed_count + succeeded >= index_count {
                fail_target = Some(("FailedIndexes".into(), "Job has failed indexes".into()));
            }
        }
        let success_policy = if fail_target.is_none() && undecided && indexed {
            indexes::match_success_policy(spec.get("successPolicy"), index_count, &completed)
        } else {
            None
        };
        let success = !suspended
            && fail_target.is_none()
            && already_target.is_none()
            && (success_policy.is_some()
                || match completions {
                    Some(c) => succeeded >= c,
                    None => succeeded > 0 && active.is_empty(),
                });
        if let Some((reason, message)) = &fail_target {
            put_condition(
                &mut status,
                new_condition("FailureTarget", true, reason, message),
            );
            new_events.push((EventKind::Warning, reason.as_str(), message.clone()));
        }
        if success && !already_success {
            let (reason, message) = match &success_policy {
                Some(message) => ("SuccessPolicy", message.as_str()),
                None => (
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
            };
            put_condition(
                &mut status,
                new_condition("SuccessCriteriaMet", true, reason, message),
            );
        }
        let target = fail_target.clone().or_else(|| {
            already_target.map(|c| {
                (
                    c.get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    c.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                )
            })
        });
        let succeeding = success || already_success;
        if target.is_some() || succeeding {
            // Terminate what is still running; the final condition waits until nothing runs.
            for pod in &active {
                self.delete_pod(&job, pod);
            }
            let remaining = owned
                .iter()
                .filter(|p| !matches!(phase(p), "Succeeded" | "Failed"))
                .count();
            if remaining == 0 {
                if let Some((reason, message)) = &target {
                    put_condition(&mut status, new_condition("Failed", true, reason, message));
                } else {
                    // Complete repeats the reason and message of SuccessCriteriaMet.
                    let met = status
                        .get("conditions")
                        .and_then(Value::as_array)
                        .and_then(|cs| {
                            cs.iter().find(|c| {
                                c.get("type").and_then(Value::as_str) == Some("SuccessCriteriaMet")
                            })
                        });
                    let text = |field: &str, default: &str| {
                        met.and_then(|c| c.get(field))
                            .and_then(Value::as_str)
                            .unwrap_or(default)
                            .to_string()
                    };
                    let reason = text("reason", "CompletionsReached");
                    let message = text("message", "Reached expected number of succeeded pods");
                    put_condition(
                        &mut status,
                        new_condition("Complete", true, &reason, &message),
                    );
                    status["completionTime"] = json!(now);
                    new_events.push((EventKind::Normal, "Completed", "Job completed".into()));
                }
            }
            status["active"] = json!(0);
            terminating += active.len() as i64;
            active.clear();
        } else if !suspended {
            // With `podReplacementPolicy: Failed` (the default under a pod failure policy) a
            // terminating pod is replaced only once it is terminal.
            let replace_when_failed = match spec.get("podReplacementPolicy").and_then(Value::as_str)
            {
                Some(policy) => policy == "Failed",
                None => spec.get("podFailurePolicy").is_some_and(|p| !p.is_null()),
            };
            let want = completions
                .map_or(parallelism, |c| (c - succeeded).min(parallelism))
                .max(0) as usize;
            if indexed {
                let removed = self.remove_surplus_indexed(
                    &job,
                    &mut active,
                    &completed,
                    &failed_indexes,
                    index_count,
                    want,
                );
                terminating += removed as i64;
                let mut taken: BTreeSet<i64> = completed.union(&failed_indexes).copied().collect();
                taken.extend(active.iter().filter_map(|p| indexes::of_pod(p)));
                if replace_when_failed {
                    taken.extend(terminating_pods.iter().filter_map(|p| indexes::of_pod(p)));
                }
                let occupied = active.len()
                    + if replace_when_failed {
                        terminating_pods.len()
                    } else {
                        0
                    };
                self.create_indexed(key, &job, &owned, &taken, index_count, want, occupied);
            } else {
                let occupied = if replace_when_failed {
                    active.len() + terminating as usize
                } else {
                    active.len()
                };
                if active.len() > want {
                    // Parallelism went down: the least advanced pods go first.
                    active.sort_by_key(|p| deletion_rank(p));
                    let surplus = active.len() - want;
                    for pod in active.drain(..surplus) {
                        self.delete_pod(&job, &pod);
                        terminating += 1;
                    }
                } else if occupied < want {
                    self.create_non_indexed(key, &job, &uid, want - occupied);
                }
            }
        }
        let owned_now = self.owned_pods(&job);
        let active_now = owned_now
            .iter()
            .filter(|p| !meta::is_deleting(p) && !matches!(phase(p), "Succeeded" | "Failed"))
            .count() as i64;
        if succeeded > 0 || status.get("succeeded").is_some() {
            status["succeeded"] = json!(succeeded);
        }
        if failed > 0 || status.get("failed").is_some() {
            status["failed"] = json!(failed);
        }
        if indexed {
            let text = indexes::format(&completed);
            match status.as_object_mut() {
                Some(m) if text.is_empty() => {
                    m.remove("completedIndexes");
                }
                _ => status["completedIndexes"] = json!(text),
            }
            if per_index_limit.is_some() {
                status["failedIndexes"] = json!(indexes::format(&failed_indexes));
            }
        }
        status["active"] = json!(if target.is_some() || succeeding || suspended {
            0
        } else {
            active_now
        });
        if status["active"] == json!(0)
            && let Some(m) = status.as_object_mut()
        {
            m.remove("active");
        }
        status["ready"] = json!(ready.min(active_now));
        status["terminating"] = json!(terminating);
        status["uncountedTerminatedPods"] = json!({});
        if let Some(written) = self.write_status(key, &job, status) {
            for (kind, reason, message) in new_events {
                events::record(
                    &self.state,
                    &written,
                    kind,
                    reason,
                    &message,
                    source(),
                    None,
                );
            }
            if has_condition(&written, "Complete") || has_condition(&written, "Failed") {
                self.forget(&uid);
                self.ttl(key, &written);
            }
        }
    }

    /// The delay before a replacement after `failures` failures: the base doubled per failure
    /// after the first, capped.
    fn backoff_for(&self, failures: i64) -> Duration {
        let timings = &self.state.config.timings;
        let exp = failures.clamp(1, 16) as u32 - 1;
        timings
            .job_backoff
            .saturating_mul(1 << exp)
            .min(timings.job_backoff_max)
    }

    /// Forgets the backoffs of a job.
    fn forget(&mut self, uid: &str) {
        self.not_before.remove(uid);
        self.index_not_before.retain(|(u, _), _| u != uid);
    }

    fn create_non_indexed(&mut self, key: &ObjectKey, job: &Value, uid: &str, count: usize) {
        let current = tokio::time::Instant::now();
        match self.not_before.get(uid).copied() {
            Some(t) if t > current => self.queue.add_after(key.clone(), t - current),
            _ => {
                for _ in 0..count {
                    if !self.create_pod(job, None) {
                        self.retry_creation_later(key);
                        break;
                    }
                }
            }
        }
    }

    fn retry_creation_later(&self, key: &ObjectKey) {
        self.queue.add_after(
            key.clone(),
            self.state
                .config
                .timings
                .job_backoff
                .max(Duration::from_millis(100)),
        );
    }

    /// Deletes the active pods of an Indexed Job that must not run: without a valid index, of
    /// an index already succeeded or failed, a second pod of one index, and beyond `want`.
    /// Returns how many it deleted; `active` keeps the others.
    fn remove_surplus_indexed(
        &mut self,
        job: &Value,
        active: &mut Vec<Arc<Value>>,
        completed: &BTreeSet<i64>,
        failed_indexes: &BTreeSet<i64>,
        index_count: i64,
        want: usize,
    ) -> usize {
        // The most advanced pod of an index stays.
        active.sort_by_key(|p| std::cmp::Reverse(deletion_rank(p)));
        let mut seen = BTreeSet::new();
        let mut keep = Vec::new();
        let mut remove = Vec::new();
        for pod in active.drain(..) {
            let valid = indexes::of_pod(&pod).filter(|ix| {
                *ix < index_count && !completed.contains(ix) && !failed_indexes.contains(ix)
            });
            match valid {
                Some(ix) if seen.insert(ix) => keep.push(pod),
                _ => remove.push(pod),
            }
        }
        if keep.len() > want {
            keep.sort_by_key(|p| std::cmp::Reverse(deletion_rank(p)));
            remove.extend(keep.drain(want..));
        }
        for pod in &remove {
            self.delete_pod(job, pod);
        }
        *active = keep;
        remove.len()
    }

    /// Creates pods for the lowest pending indexes, up to `want` running at once, skipping
    /// indexes still in their per-index backoff.
    #[allow(clippy::too_many_arguments)]
    fn create_indexed(
        &mut self,
        key: &ObjectKey,
        job: &Value,
        owned: &[Arc<Value>],
        taken: &BTreeSet<i64>,
        index_count: i64,
        want: usize,
        occupied: usize,
    ) {
        if occupied >= want {
            return;
        }
        let uid = meta::uid(job).unwrap_or("").to_string();
        let current = tokio::time::Instant::now();
        if let Some(t) = self.not_before.get(&uid).copied()
            && t > current
        {
            self.queue.add_after(key.clone(), t - current);
            return;
        }
        let per_index = job
            .pointer("/spec/backoffLimitPerIndex")
            .and_then(Value::as_i64)
            .is_some();
        let mut budget = want - occupied;
        let mut wake: Option<tokio::time::Instant> = None;
        for ix in 0..index_count {
            if budget == 0 {
                break;
            }
            if taken.contains(&ix) {
                continue;
            }
            if let Some(t) = self.index_not_before.get(&(uid.clone(), ix)).copied()
                && t > current
            {
                wake = Some(wake.map_or(t, |w| w.min(t)));
                continue;
            }
            let counts = per_index.then(|| replacement_counts(job, owned, ix));
            if !self.create_pod(job, Some((ix, counts))) {
                self.retry_creation_later(key);
                return;
            }
            budget -= 1;
        }
        if let Some(t) = wake {
            self.queue.add_after(key.clone(), t - current);
        }
    }

    fn pod_changed(&self, pod: &Value) {
        let owner = meta::controller_ref(pod)
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Job"));
        let Some(owner) = owner else {
            // Orphaned (or never owned by a job): nothing will count this pod.
            self.remove_tracking(pod);
            return;
        };
        let name = owner.get("name").and_then(Value::as_str).unwrap_or("");
        let key = ObjectKey::new(jobs(), meta::namespace(pod), name);
        let owner_uid = owner.get("uid").and_then(Value::as_str);
        match self.state.store.get(&key) {
            Some(job) if meta::uid(&job) == owner_uid => self.queue.add(key),
            // The job is gone (orphaned pods): nothing will count this pod any more.
            _ => self.remove_tracking(pod),
        }
    }
}

/// Runs the Job controller until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let queue: Arc<WorkQueue<ObjectKey>> = WorkQueue::new();
    let mut controller = Controller {
        state: state.clone(),
        queue: queue.clone(),
        not_before: HashMap::new(),
        index_not_before: HashMap::new(),
    };
    let mut rx = state.store.follow();
    for job in state.store.list(&jobs(), None).0 {
        queue.add(ObjectKey::new(
            jobs(),
            meta::namespace(&job),
            meta::name(&job),
        ));
    }
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            key = queue.next() => controller.sync(&key),
            received = rx.recv() => match received {
                Some(event) if event.key.resource == jobs() => {
                    if event.event_type == EventType::Deleted {
                        if let Some(uid) = meta::uid(&event.object) {
                            controller.forget(uid);
                        }
                    } else {
                        queue.add(event.key.clone());
                    }
                }
                Some(event) if event.key.resource == pods() => controller.pod_changed(&event.object),
                Some(_) => {}
                None => return,
            }
        }
    }
}

/// `status` with the conditions `current` has gained since `read` (by type) that it lacks.
fn with_conditions_added_since(mut status: Value, read: &Value, current: &Value) -> Value {
    let conditions = |job: &Value| {
        job.pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let before = conditions(read);
    for added in conditions(current) {
        let same_type = |c: &Value| c.get("type") == added.get("type");
        if before.iter().any(same_type) || conditions_of(&status).iter().any(same_type) {
            continue;
        }
        match status["conditions"].as_array_mut() {
            Some(list) => list.push(added),
            None => status["conditions"] = json!([added]),
        }
    }
    status
}

fn conditions_of(status: &Value) -> Vec<Value> {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_with(conditions: Value) -> Value {
        json!({"metadata": {"uid": "u"}, "status": {"conditions": conditions}})
    }

    #[test]
    fn indexed_pod_names_keep_the_index_within_the_generated_name_limit() {
        assert_eq!(generate_name_with_index("train", 7), "train-7-");
        let long = "a".repeat(63);
        let name = generate_name_with_index(&long, 12345);
        assert_eq!(name.len(), 58);
        assert!(name.ends_with("a-12345-"), "{name}");
    }

    #[test]
    fn every_container_gets_the_completion_index_unless_it_sets_it() {
        let mut spec = json!({
            "initContainers": [{"name": "init"}],
            "containers": [
                {"name": "main", "env": [{"name": "A", "value": "1"}]},
                {"name": "own", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "x"}]},
            ],
        });
        add_completion_index_env(&mut spec);
        let names = |pointer: &str| -> Vec<String> {
            spec.pointer(pointer)
                .and_then(Value::as_array)
                .map(|env| {
                    env.iter()
                        .filter_map(|v| v.get("name").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(names("/initContainers/0/env"), ["JOB_COMPLETION_INDEX"]);
        assert_eq!(names("/containers/0/env"), ["A", "JOB_COMPLETION_INDEX"]);
        assert_eq!(names("/containers/1/env"), ["JOB_COMPLETION_INDEX"]);
        assert_eq!(spec.pointer("/containers/1/env/0/value"), Some(&json!("x")));
    }

    #[test]
    fn a_replacement_counts_the_failures_of_its_index_so_far() {
        let job = json!({"spec": {"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [9]}}
        ]}}});
        let failed = |index: &str, failures: &str, ignored: Option<&str>, exit: i64| {
            let mut annotations = json!({
                indexes::COMPLETION_INDEX: index,
                indexes::INDEX_FAILURE_COUNT: failures,
            });
            if let Some(n) = ignored {
                annotations[indexes::INDEX_IGNORED_FAILURE_COUNT] = json!(n);
            }
            Arc::new(json!({
                "metadata": {"name": "p", "namespace": "d", "annotations": annotations},
                "status": {"phase": "Failed", "containerStatuses": [
                    {"name": "main", "state": {"terminated": {"exitCode": exit}}}
                ]},
            }))
        };
        assert_eq!(replacement_counts(&job, &[], 0), (0, 0));
        let pods = vec![failed("0", "0", None, 1), failed("0", "1", None, 1)];
        assert_eq!(replacement_counts(&job, &pods, 0), (2, 0));
        assert_eq!(replacement_counts(&job, &pods, 1), (0, 0));
        let ignored = vec![failed("3", "1", Some("1"), 9)];
        assert_eq!(replacement_counts(&job, &ignored, 3), (1, 2));
    }

    #[test]
    fn a_status_write_keeps_the_conditions_others_added_meanwhile() {
        let read = job_with(json!([]));
        let current = job_with(json!([{"type": "FailureTarget", "status": "True"}]));
        let ours = json!({"active": 1});
        let written = with_conditions_added_since(ours, &read, &current);
        assert_eq!(
            written,
            json!({"active": 1, "conditions": [{"type": "FailureTarget", "status": "True"}]})
        );
    }

    #[test]
    fn a_status_write_decides_the_conditions_it_read_or_sets() {
        // One the controller read and dropped stays dropped; one it sets wins over another's.
        let read = job_with(json!([{"type": "Suspended", "status": "True"}]));
        let current = job_with(json!([
            {"type": "Suspended", "status": "True"},
            {"type": "Complete", "status": "False"},
        ]));
        let ours = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        let written = with_conditions_added_since(ours.clone(), &read, &current);
        assert_eq!(written, ours);
    }
}
