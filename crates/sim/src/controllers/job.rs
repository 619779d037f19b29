//! The Job controller (batch/v1, Kubernetes 1.31+ semantics): creates pods from the template
//! with ownerReferences, labels and the job-tracking finalizer; counts finished pods into
//! status; backoffLimit with exponential pod backoff; podFailurePolicy (FailJob, Ignore,
//! Count); activeDeadlineSeconds; suspend; ttlSecondsAfterFinished; conditions
//! SuccessCriteriaMet/FailureTarget first, Complete/Failed only once every pod is terminal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use tokio::sync::watch;

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

/// The first matching podFailurePolicy rule for a failed pod: (action, message).
fn failure_policy_action(job: &Value, pod: &Value) -> Option<(String, String)> {
    let rules = job.pointer("/spec/podFailurePolicy/rules")?.as_array()?;
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, rule) in rules.iter().enumerate() {
        let action = rule
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
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
                else {
                    continue;
                };
                let hit = match operator {
                    "NotIn" => code != 0 && !values.contains(&code),
                    _ => values.contains(&code),
                };
                if hit {
                    let message = format!(
                        "Container {name} for pod {}/{} failed with exit code {code} matching {action} rule at index {index}",
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
            let hit = patterns.iter().any(|p| {
                let kind = p.get("type").and_then(Value::as_str);
                let status = p.get("status").and_then(Value::as_str).unwrap_or("True");
                conditions.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == kind
                        && c.get("status").and_then(Value::as_str) == Some(status)
                })
            });
            if hit {
                let kind = patterns
                    .first()
                    .and_then(|p| p.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let message = format!(
                    "Pod {}/{} has condition {kind} matching {action} rule at index {index}",
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

    fn create_pod(&mut self, job: &Value) -> bool {
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
        if let Some(m) = metadata.as_object_mut() {
            m.remove("name");
            m.remove("creationTimestamp");
            m.insert("generateName".into(), json!(format!("{name}-")));
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
            "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
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
        let mut succeeded = status.get("succeeded").and_then(Value::as_i64).unwrap_or(0);
        let mut failed = status.get("failed").and_then(Value::as_i64).unwrap_or(0);
        let mut new_events: Vec<(EventKind, &str, String)> = Vec::new();
        let suspended_now = spec.get("suspend").and_then(Value::as_bool) == Some(true);
        let mut fail_target: Option<(String, String)> = None;
        // Count finished pods still carrying the tracking finalizer (not yet counted).
        let mut active = Vec::new();
        let mut terminating = 0;
        let mut ready = 0;
        for pod in &owned {
            let tracked = meta::finalizers(pod)
                .iter()
                .any(|f| f == TRACKING_FINALIZER);
            let p = phase(pod);
            let unbound_deleted = meta::is_deleting(pod)
                && pod
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty();
            if p == "Succeeded" {
                if tracked {
                    succeeded += 1;
                    self.remove_tracking(pod);
                }
            } else if p == "Failed" || unbound_deleted {
                if tracked && suspended_now && meta::is_deleting(pod) {
                    // Pods the suspension terminated are not failures.
                    self.remove_tracking(pod);
                } else if tracked {
                    match failure_policy_action(&job, pod) {
                        Some((action, message)) if action == "FailJob" => {
                            failed += 1;
                            if fail_target.is_none() {
                                fail_target = Some(("PodFailurePolicy".into(), message));
                            }
                        }
                        Some((action, _)) if action == "Ignore" => {}
                        _ => failed += 1,
                    }
                    self.remove_tracking(pod);
                    let backoff = self.state.config.timings.job_backoff;
                    let max = self.state.config.timings.job_backoff_max;
                    let exp = failed.clamp(1, 16) as u32 - 1;
                    let delay = backoff.saturating_mul(1 << exp).min(max);
                    self.not_before
                        .insert(uid.clone(), tokio::time::Instant::now() + delay);
                }
            } else if meta::is_deleting(pod) {
                terminating += 1;
            } else {
                let is_ready = pod
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.get("type").and_then(Value::as_str) == Some("Ready")
                                && c.get("status").and_then(Value::as_str) == Some("True")
                        })
                    });
                if is_ready {
                    ready += 1;
                }
                active.push(pod.clone());
            }
        }
        let suspended = spec.get("suspend").and_then(Value::as_bool) == Some(true);
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
        let completions = spec.get("completions").and_then(Value::as_i64);
        let parallelism = spec.get("parallelism").and_then(Value::as_i64).unwrap_or(1);
        let backoff_limit = spec
            .get("backoffLimit")
            .and_then(Value::as_i64)
            .unwrap_or(6);
        let already_target = condition_of(&job, "FailureTarget")
            .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
            .cloned();
        let already_success = has_condition(&job, "SuccessCriteriaMet");
        if fail_target.is_none() && already_target.is_none() && !already_success && !suspended {
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
        let success = !suspended
            && fail_target.is_none()
            && already_target.is_none()
            && match completions {
                Some(c) => succeeded >= c,
                None => succeeded > 0 && active.is_empty(),
            };
        if let Some((reason, message)) = &fail_target {
            put_condition(
                &mut status,
                new_condition("FailureTarget", true, reason, message),
            );
            let event_reason = if reason == "PodFailurePolicy" {
                "PodFailurePolicy"
            } else {
                reason.as_str()
            };
            new_events.push((
                EventKind::Warning,
                if event_reason == "BackoffLimitExceeded" {
                    "BackoffLimitExceeded"
                } else {
                    event_reason
                },
                message.clone(),
            ));
        }
        if success && !already_success {
            put_condition(
                &mut status,
                new_condition(
                    "SuccessCriteriaMet",
                    true,
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
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
                    put_condition(
                        &mut status,
                        new_condition(
                            "Complete",
                            true,
                            "CompletionsReached",
                            "Reached expected number of succeeded pods",
                        ),
                    );
                    status["completionTime"] = json!(now);
                    new_events.push((EventKind::Normal, "Completed", "Job completed".into()));
                }
            }
            status["active"] = json!(0);
            terminating += active.len() as i64;
            active.clear();
        } else if !suspended {
            let remaining = completions.map_or(parallelism, |c| (c - succeeded).min(parallelism));
            let wanted = remaining.max(0) as usize;
            // With `podReplacementPolicy: Failed` (the default under a pod failure policy) a
            // terminating pod is replaced only once it is terminal.
            let replace_when_failed = match spec.get("podReplacementPolicy").and_then(Value::as_str)
            {
                Some(policy) => policy == "Failed",
                None => spec.get("podFailurePolicy").is_some_and(|p| !p.is_null()),
            };
            let occupied = if replace_when_failed {
                active.len() + terminating as usize
            } else {
                active.len()
            };
            if occupied < wanted {
                let not_before = self.not_before.get(&uid).copied();
                let current = tokio::time::Instant::now();
                match not_before {
                    Some(t) if t > current => self.queue.add_after(key.clone(), t - current),
                    _ => {
                        for _ in occupied..wanted {
                            if !self.create_pod(&job) {
                                self.queue.add_after(
                                    key.clone(),
                                    self.state
                                        .config
                                        .timings
                                        .job_backoff
                                        .max(Duration::from_millis(100)),
                                );
                                break;
                            }
                        }
                    }
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
                self.not_before.remove(&uid);
                self.ttl(key, &written);
            }
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
                            controller.not_before.remove(uid);
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
