//! The simulated JobSet controller (kubernetes-sigs/jobset, `jobset.x-k8s.io/v1alpha2`),
//! running when the JobSet CRD bundle is installed (`SimConfig::crd_bundles`).
//!
//! Each reconcile follows the real controller's (`pkg/controllers/jobset_controller.go`):
//! the child Jobs (controlled by the JobSet) are sorted into those of an earlier restart, active,
//! succeeded and failed; `status.replicatedJobsStatus` is counted from them; a finished JobSet
//! deletes its active Jobs and applies `ttlSecondsAfterFinished`; otherwise Jobs of an earlier
//! restart are deleted, a failed Job applies the failure policy (`failure`), succeeded Jobs
//! the success policy (`Completed` once enough target Jobs succeeded), then the headless
//! Service is created, the missing Jobs `<jobset>-<replicatedJob>-<jobIndex>` are created (in
//! order with `startupPolicyOrder: InOrder`) and suspend or resume is applied. Labels,
//! annotations, condition reasons and messages are the real controller's. The JobSet webhook's
//! defaults and validation are in `kinds/jobset.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::WorkQueue;
use super::events::{self, EventKind, Source};
use crate::config::CrdBundle;
use crate::kinds::jobset::{ReplicatedJob, replicated_jobs};
use crate::ops::{self, DeleteOptions, Propagation};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, ObjectKey, meta};

pub use crate::kinds::jobset::GROUP;
/// The version of JobSets the controller writes.
pub const VERSION: &str = "v1alpha2";
/// The label (and annotation) naming a child Job's (and its pods') JobSet.
pub const JOBSET_NAME_KEY: &str = "jobset.sigs.k8s.io/jobset-name";
/// The label with the JobSet's uid.
pub const JOBSET_UID_KEY: &str = "jobset.sigs.k8s.io/jobset-uid";
/// The label naming a child Job's replicated job.
pub const REPLICATED_JOB_NAME_KEY: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// The label with the replicas of a child Job's replicated job.
pub const REPLICATED_JOB_REPLICAS_KEY: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
/// The label with the replicas of every replicated job together.
pub const GLOBAL_REPLICAS_KEY: &str = "jobset.sigs.k8s.io/global-replicas";
/// The label with a child Job's index within its replicated job.
pub const JOB_INDEX_KEY: &str = "jobset.sigs.k8s.io/job-index";
/// The label with a child Job's index across the replicated jobs.
pub const JOB_GLOBAL_INDEX_KEY: &str = "jobset.sigs.k8s.io/job-global-index";
/// The label with the SHA-1 of a child Job's `<namespace>/<name>`.
pub const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
/// The label with a replicated job's group.
pub const GROUP_NAME_KEY: &str = "jobset.sigs.k8s.io/group-name";
/// The label with the replicas of a group.
pub const GROUP_REPLICAS_KEY: &str = "jobset.sigs.k8s.io/group-replicas";
/// The label with a child Job's index within its group.
pub const JOB_GROUP_INDEX_KEY: &str = "jobset.sigs.k8s.io/job-group-index";
/// The label with the JobSet restart a child Job belongs to.
pub const RESTART_ATTEMPT_KEY: &str = "jobset.sigs.k8s.io/restart-attempt";
/// The reserved `spec.managedBy` of the built-in controller.
const CONTROLLER_NAME: &str = "jobset.sigs.k8s.io/jobset-controller";

const SOURCE: Source<'static> = Source {
    component: "jobset-controller",
    host: None,
};

fn jobsets() -> GroupResource {
    GroupResource::new(GROUP, "jobsets")
}

fn jobs() -> GroupResource {
    GroupResource::new("batch", "jobs")
}

/// Runs the controller until shutdown, when the JobSet bundle is installed.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    if !state.config.crd_bundles.contains(&CrdBundle::JobSet) {
        return;
    }
    let queue: Arc<WorkQueue<ObjectKey>> = WorkQueue::new();
    let mut rx = state.store.follow();
    for js in state.store.list(&jobsets(), None).0 {
        queue.add(ObjectKey::new(
            jobsets(),
            meta::namespace(&js),
            meta::name(&js),
        ));
    }
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            key = queue.next() => {
                if let Some(js) = state.store.get(&key)
                    && let Some(after) = reconcile(&state, &key, &js)
                {
                    queue.add_after(key, after.max(Duration::from_millis(1)));
                }
            }
            received = rx.recv() => match received {
                Some(event) if event.key.resource == jobsets() => {
                    if event.event_type != EventType::Deleted {
                        queue.add(event.key.clone());
                    }
                }
                Some(event) if event.key.resource == jobs() => {
                    if let Some(owner) = meta::controller_ref(&event.object)
                        && owner.get("kind").and_then(Value::as_str) == Some("JobSet")
                        && let Some(name) = owner.get("name").and_then(Value::as_str)
                    {
                        queue.add(ObjectKey::new(jobsets(), &event.key.namespace, name));
                    }
                }
                Some(_) => {}
                None => return,
            }
        }
    }
}

/// The child Jobs of a JobSet, sorted as the real controller sorts them.
#[derive(Default)]
struct ChildJobs {
    /// Of an earlier restart (`restart-attempt` below `status.restarts`): to delete.
    previous: Vec<Arc<Value>>,
    active: Vec<Arc<Value>>,
    successful: Vec<Arc<Value>>,
    failed: Vec<Arc<Value>>,
}

impl ChildJobs {
    fn all(&self) -> impl Iterator<Item = &Arc<Value>> {
        self.previous
            .iter()
            .chain(&self.active)
            .chain(&self.successful)
            .chain(&self.failed)
    }
}

fn job_condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

fn int(value: &Value, pointer: &str) -> i64 {
    value.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn child_jobs(state: &State, js: &Value, uid: &str, restarts: i64) -> ChildJobs {
    let mut children = ChildJobs::default();
    let mut owned: Vec<Arc<Value>> = state
        .store
        .dependents_of(uid)
        .into_iter()
        .filter(|key| key.resource == jobs() && key.namespace == meta::namespace(js))
        .filter_map(|key| state.store.get(&key))
        .filter(|job| {
            meta::controller_ref(job)
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                == Some(uid)
        })
        .collect();
    owned.sort_by(|a, b| meta::name(a).cmp(meta::name(b)));
    for job in owned {
        let attempt = meta::label(&job, RESTART_ATTEMPT_KEY).and_then(|a| a.parse::<i64>().ok());
        if attempt.is_none_or(|a| a < restarts) {
            children.previous.push(job);
        } else if job_condition(&job, "Failed").is_some() {
            children.failed.push(job);
        } else if job_condition(&job, "Complete").is_some() {
            children.successful.push(job);
        } else {
            children.active.push(job);
        }
    }
    children
}

/// `status.replicatedJobsStatus`, in the spec's order.
fn replicated_job_statuses(rjobs: &[ReplicatedJob<'_>], children: &ChildJobs) -> Vec<Value> {
    rjobs
        .iter()
        .map(|rjob| {
            let of = |jobs: &[Arc<Value>]| -> Vec<Arc<Value>> {
                jobs.iter()
                    .filter(|j| meta::label(j, REPLICATED_JOB_NAME_KEY) == Some(rjob.name))
                    .cloned()
                    .collect()
            };
            let active = of(&children.active);
            let ready = active
                .iter()
                .filter(|job| {
                    let parallelism = job
                        .pointer("/spec/parallelism")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    let pods = match job.pointer("/spec/completions").and_then(Value::as_i64) {
                        Some(c) if c < parallelism => c,
                        _ => parallelism,
                    };
                    int(job, "/status/succeeded") + int(job, "/status/ready") >= pods
                })
                .count();
            json!({
                "name": rjob.name,
                "ready": ready,
                "succeeded": of(&children.successful).len(),
                "failed": of(&children.failed).len(),
                "active": active.iter().filter(|j| int(j, "/status/active") > 0).count(),
                "suspended": active.iter().filter(|j| job_suspended(j)).count(),
            })
        })
        .collect()
}

fn job_suspended(job: &Value) -> bool {
    job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
}

fn status_count(statuses: &[Value], name: &str, field: &str) -> i64 {
    statuses
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
        .map(|s| int(s, &format!("/{field}")))
        .unwrap_or(0)
}

/// A condition to set, as the real controller's `updateCondition` sets it.
struct Condition<'a> {
    kind: &'a str,
    status: bool,
    reason: &'a str,
    message: &'a str,
    warning: bool,
}

/// One reconcile's working copy of the JobSet's status, and the events it records.
struct Reconcile<'a> {
    state: &'a State,
    js: &'a Value,
    status: Value,
    events: Vec<(EventKind, String, String)>,
}

impl Reconcile<'_> {
    fn name(&self) -> &str {
        meta::name(self.js)
    }

    fn namespace(&self) -> &str {
        meta::namespace(self.js)
    }

    fn spec_str(&self, pointer: &str) -> Option<&str> {
        self.js
            .pointer(&format!("/spec{pointer}"))
            .and_then(Value::as_str)
    }

    fn suspended(&self) -> bool {
        self.js.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
    }

    fn in_order(&self) -> bool {
        self.spec_str("/startupPolicy/startupPolicyOrder") == Some("InOrder")
    }

    fn dns_hostnames(&self) -> bool {
        self.js
            .pointer("/spec/network/enableDNSHostnames")
            .and_then(Value::as_bool)
            == Some(true)
    }

    fn subdomain(&self) -> String {
        self.spec_str("/network/subdomain")
            .filter(|s| !s.is_empty())
            .unwrap_or(self.name())
            .to_string()
    }

    fn restarts(&self) -> i64 {
        int(&self.status, "/restarts")
    }

    fn conditions(&mut self) -> &mut Vec<Value> {
        if !self.status.get("conditions").is_some_and(Value::is_array) {
            self.status["conditions"] = json!([]);
        }
        self.status["conditions"]
            .as_array_mut()
            .expect("conditions were just made a list")
    }

    fn has_condition(&self, kind: &str) -> bool {
        job_condition(&json!({"status": self.status}), kind).is_some()
    }

    fn finished(&self) -> bool {
        self.has_condition("Completed") || self.has_condition("Failed")
    }

    /// Sets a condition: a new status replaces it (new transition time), a new reason or
    /// message updates it; a False condition is never added; the two startup policy
    /// conditions exclude each other. Each change records an event.
    fn set_condition(&mut self, c: Condition<'_>) {
        let status = if c.status { "True" } else { "False" };
        let exclusive = |kind: &str| match c.kind {
            "StartupPolicyInProgress" => kind == "StartupPolicyCompleted",
            "StartupPolicyCompleted" => kind == "StartupPolicyInProgress",
            _ => false,
        };
        let now = meta::now();
        let mut changed = false;
        let mut found = false;
        for cond in self.conditions().iter_mut() {
            let kind = cond.get("type").and_then(Value::as_str).unwrap_or("");
            let current = cond.get("status").and_then(Value::as_str).unwrap_or("");
            if kind == c.kind {
                found = true;
                if current != status {
                    *cond = json!({"type": c.kind, "status": status, "reason": c.reason, "message": c.message, "lastTransitionTime": now});
                    changed = true;
                } else if cond.get("reason").and_then(Value::as_str) != Some(c.reason)
                    || cond.get("message").and_then(Value::as_str) != Some(c.message)
                {
                    cond["reason"] = json!(c.reason);
                    cond["message"] = json!(c.message);
                    changed = true;
                }
            } else if exclusive(kind) && current == "True" && c.status {
                cond["status"] = json!("False");
                changed = true;
            }
        }
        if !found && c.status {
            let cond = json!({"type": c.kind, "status": status, "reason": c.reason, "message": c.message, "lastTransitionTime": now});
            self.conditions().push(cond);
            changed = true;
        }
        if changed {
            let kind = if c.warning {
                EventKind::Warning
            } else {
                EventKind::Normal
            };
            self.events
                .push((kind, c.reason.to_string(), c.message.to_string()));
        }
    }

    fn restarting_false(&mut self, reason: &str, message: &str) {
        self.set_condition(Condition {
            kind: "RestartingJobSet",
            status: false,
            reason,
            message,
            warning: false,
        });
    }

    fn completed(&mut self) {
        self.set_condition(Condition {
            kind: "Completed",
            status: true,
            reason: "AllJobsCompleted",
            message: "jobset completed successfully",
            warning: false,
        });
        self.restarting_false("JobSetCompleted", "jobset completed successfully");
        self.status["terminalState"] = json!("Completed");
    }

    fn failed(&mut self, reason: &str, message: &str) {
        self.set_condition(Condition {
            kind: "Failed",
            status: true,
            reason,
            message,
            warning: true,
        });
        self.restarting_false("JobSetFailed", "jobset failed");
        self.status["terminalState"] = json!("Failed");
    }

    /// Restarts the whole set: the next reconcile deletes the Jobs of the earlier attempt and
    /// creates new ones labelled with the new attempt.
    fn restart(&mut self, count_towards_max: bool, reason: &str, message: &str) {
        let event_reason = if count_towards_max {
            "RestartJobSetFailurePolicyAction"
        } else {
            "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
        };
        self.events.push((
            EventKind::Warning,
            event_reason.to_string(),
            message.to_string(),
        ));
        self.status["restarts"] = json!(self.restarts() + 1);
        if count_towards_max {
            self.status["restartsCountTowardsMax"] =
                json!(int(&self.status, "/restartsCountTowardsMax") + 1);
        }
        self.set_condition(Condition {
            kind: "RestartingJobSet",
            status: true,
            reason,
            message,
            warning: true,
        });
    }

    /// The failure policy (`executeFailurePolicy`), with at least one failed Job.
    fn failure(&mut self, failed: &[Arc<Value>]) {
        let failure_time = |job: &Value| {
            job_condition(job, "Failed")
                .and_then(|c| c.get("lastTransitionTime"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let first_failed = |jobs: &mut dyn Iterator<Item = &Arc<Value>>| {
            jobs.min_by_key(|j| (failure_time(j), meta::name(j).to_string()))
                .cloned()
        };
        let Some(policy) = self.js.pointer("/spec/failurePolicy").cloned() else {
            let first = first_failed(&mut failed.iter()).expect("a failed job");
            let message = format!(
                "jobset failed due to one or more job failures (first failed job: {})",
                meta::name(&first)
            );
            self.failed("FailedJobs", &message);
            return;
        };
        let rules = policy
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let matched = rules.iter().find_map(|rule| {
            let job = first_failed(&mut failed.iter().filter(|job| rule_applies(rule, job)))?;
            Some((rule, job))
        });
        let (rule, job) = match matched {
            Some((rule, job)) => (Some(rule), job),
            None => (
                None,
                first_failed(&mut failed.iter()).expect("a failed job"),
            ),
        };
        let job_name = meta::name(&job).to_string();
        let action = rule
            .and_then(|r| r.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("RestartJobSet");
        let restart_reason = match rule.and_then(|r| r.get("name")).and_then(Value::as_str) {
            Some(name) => format!("FailurePolicy_{name}"),
            None => "DefaultFailurePolicy".to_string(),
        };
        let max_restarts = policy
            .get("maxRestarts")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        match action {
            "FailJobSet" => self.failed(
                "FailJobSetFailurePolicyAction",
                &format!(
                    "applying FailJobSet failure policy action (first failed job: {job_name})"
                ),
            ),
            "RestartJobSetAndIgnoreMaxRestarts" => self
                .restart(
                    false,
                    &restart_reason,
                    &format!(
                        "applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: {job_name})"
                    ),
                ),
            // RestartJobSet (the per-Job RestartJob actions are refused by the webhook).
            _ => {
                if int(&self.status, "/restartsCountTowardsMax") >= max_restarts {
                    self.failed(
                        "ReachedMaxRestarts",
                        &format!(
                            "jobset failed due to reaching max number of restarts (first failed job: {job_name})"
                        ),
                    );
                } else {
                    self.restart(
                        true,
                        &restart_reason,
                        &format!(
                            "applying RestartJobSet failure policy action (first failed job: {job_name})"
                        ),
                    );
                }
            }
        }
    }

    /// Whether the success policy is met (`executeSuccessPolicy`).
    fn success(&self, rjobs: &[ReplicatedJob<'_>], successful: &[Arc<Value>]) -> bool {
        let targets: Vec<&str> = self
            .js
            .pointer("/spec/successPolicy/targetReplicatedJobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let targeted = |name: &str| targets.is_empty() || targets.contains(&name);
        let matching = successful
            .iter()
            .filter(|j| targeted(meta::label(j, REPLICATED_JOB_NAME_KEY).unwrap_or("")))
            .count() as i64;
        let expected = match self.spec_str("/successPolicy/operator") {
            Some("Any") => 1,
            _ => rjobs
                .iter()
                .filter(|r| targeted(r.name))
                .map(|r| r.replicas)
                .sum(),
        };
        matching >= expected
    }

    /// The child Job `index` of `rjob`, as `constructJob` builds it.
    fn job(&self, rjobs: &[ReplicatedJob<'_>], rjob: &ReplicatedJob<'_>, index: i64) -> Value {
        let name = format!("{}-{}-{index}", self.name(), rjob.name);
        let uid = meta::uid(self.js).unwrap_or("");
        let global_replicas: i64 = rjobs.iter().map(|r| r.replicas).sum();
        let before = |filter: &dyn Fn(&ReplicatedJob<'_>) -> bool| -> i64 {
            rjobs
                .iter()
                .take_while(|r| r.name != rjob.name)
                .filter(|r| filter(r))
                .map(|r| r.replicas)
                .sum()
        };
        let group_replicas: i64 = rjobs
            .iter()
            .filter(|r| r.group == rjob.group)
            .map(|r| r.replicas)
            .sum();
        let ours = [
            (JOBSET_NAME_KEY, self.name().to_string()),
            (JOBSET_UID_KEY, uid.to_string()),
            (REPLICATED_JOB_NAME_KEY, rjob.name.to_string()),
            (RESTART_ATTEMPT_KEY, self.restarts().to_string()),
            (REPLICATED_JOB_REPLICAS_KEY, rjob.replicas.to_string()),
            (GLOBAL_REPLICAS_KEY, global_replicas.to_string()),
            (JOB_INDEX_KEY, index.to_string()),
            (JOB_KEY, sha1_hex(&format!("{}/{name}", self.namespace()))),
            (
                JOB_GLOBAL_INDEX_KEY,
                (before(&|_| true) + index).to_string(),
            ),
            (GROUP_NAME_KEY, rjob.group.to_string()),
            (GROUP_REPLICAS_KEY, group_replicas.to_string()),
            (
                JOB_GROUP_INDEX_KEY,
                (before(&|r| r.group == rjob.group) + index).to_string(),
            ),
        ];
        let label = |metadata: &mut Value| {
            if !metadata.is_object() {
                *metadata = json!({});
            }
            for map in ["labels", "annotations"] {
                if !metadata.get(map).is_some_and(Value::is_object) {
                    metadata[map] = json!({});
                }
                for (key, value) in &ours {
                    metadata[map][*key] = json!(value);
                }
            }
        };
        let template_meta = rjob.template.get("metadata");
        let mut metadata = json!({
            "name": name,
            "namespace": self.namespace(),
            "labels": template_meta.and_then(|m| m.get("labels")).cloned().unwrap_or_else(|| json!({})),
            "annotations": template_meta.and_then(|m| m.get("annotations")).cloned().unwrap_or_else(|| json!({})),
            "ownerReferences": [{
                "apiVersion": format!("{GROUP}/{VERSION}"),
                "kind": "JobSet",
                "name": self.name(),
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        });
        label(&mut metadata);
        let mut spec = rjob
            .template
            .get("spec")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !spec.is_object() {
            spec = json!({});
        }
        if !spec.get("template").is_some_and(Value::is_object) {
            spec["template"] = json!({});
        }
        let pod_template = &mut spec["template"];
        let pod_meta = pod_template
            .as_object_mut()
            .expect("made an object")
            .entry("metadata")
            .or_insert_with(|| json!({}));
        label(pod_meta);
        if self.dns_hostnames() {
            if !pod_template.get("spec").is_some_and(Value::is_object) {
                pod_template["spec"] = json!({});
            }
            pod_template["spec"]["subdomain"] = json!(self.subdomain());
        }
        spec["suspend"] = json!(self.suspended());
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec})
    }

    fn create(&mut self, group: &str, resource: &str, object: Value) {
        let Some(rt) = self
            .state
            .registry
            .get(&GroupResource::new(group, resource))
        else {
            return;
        };
        let name = meta::name(&object).to_string();
        match ops::create(self.state, &rt, "v1", self.namespace(), object, false) {
            Ok(_) => {}
            Err(error) if error.code == 409 => {}
            Err(error) => {
                let reason = if resource == "jobs" {
                    "JobCreationFailed"
                } else {
                    "HeadlessServiceCreationFailed"
                };
                let message = if resource == "jobs" {
                    format!("job {name:?} creation failed with error: {}", error.message)
                } else {
                    error.message.clone()
                };
                tracing::debug!(jobset = self.name(), %message, "creation refused");
                self.events
                    .push((EventKind::Warning, reason.to_string(), message));
            }
        }
    }

    fn delete_jobs(&self, jobs: &[Arc<Value>]) {
        let Some(rt) = self.state.registry.get(&self::jobs()) else {
            return;
        };
        for job in jobs.iter().filter(|j| !meta::is_deleting(j)) {
            let key = ObjectKey::new(self::jobs(), meta::namespace(job), meta::name(job));
            let options = DeleteOptions {
                propagation: Some(Propagation::Foreground),
                uid: meta::uid(job).map(str::to_string),
                ..DeleteOptions::default()
            };
            // Gone already is fine.
            let _ = ops::delete(self.state, &rt, &key, &options);
        }
    }

    /// Sets `spec.suspend` of a child Job (a resume also clears `status.startTime`, as the
    /// real controller does so that the Job's active deadline restarts).
    fn suspend_job(&self, job: &Value, suspend: bool) {
        let key = ObjectKey::new(jobs(), meta::namespace(job), meta::name(job));
        let uid = meta::uid(job).map(str::to_string);
        let _ = ops::mutate(self.state, &key, |job| {
            if meta::uid(job).map(str::to_string) != uid {
                return false;
            }
            job["spec"]["suspend"] = json!(suspend);
            if !suspend && let Some(status) = job.get_mut("status").and_then(Value::as_object_mut) {
                status.remove("startTime");
            }
            true
        });
    }

    fn headless_service(&mut self) {
        if !self.dns_hostnames() {
            return;
        }
        let subdomain = self.subdomain();
        let key = ObjectKey::new(
            GroupResource::new("", "services"),
            self.namespace(),
            &subdomain,
        );
        if self.state.store.get(&key).is_some() {
            return;
        }
        let publish = self
            .js
            .pointer("/spec/network/publishNotReadyAddresses")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let service = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": subdomain,
                "namespace": self.namespace(),
                "ownerReferences": [{
                    "apiVersion": format!("{GROUP}/{VERSION}"),
                    "kind": "JobSet",
                    "name": self.name(),
                    "uid": meta::uid(self.js).unwrap_or(""),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {JOBSET_NAME_KEY: self.name()},
                "publishNotReadyAddresses": publish,
            },
        });
        self.create("", "services", service);
    }

    /// Creates the missing Jobs (`reconcileReplicatedJobs`).
    fn create_jobs(
        &mut self,
        rjobs: &[ReplicatedJob<'_>],
        children: &ChildJobs,
        statuses: &[Value],
    ) {
        let blocking = self.spec_str("/failurePolicy/restartStrategy") == Some("BlockingRecreate");
        let in_order = !self.suspended() && self.in_order();
        for rjob in rjobs {
            if in_order && all_started(rjob, statuses) {
                continue;
            }
            // BlockingRecreate waits until every Job of the earlier attempt is gone.
            if !blocking || children.previous.is_empty() {
                for index in 0..rjob.replicas {
                    let name = format!("{}-{}-{index}", self.name(), rjob.name);
                    if children.all().any(|j| meta::name(j) == name) {
                        continue;
                    }
                    let job = self.job(rjobs, rjob, index);
                    self.create("batch", "jobs", job);
                }
            }
            if in_order {
                self.startup_in_progress();
                return;
            }
        }
        if in_order {
            self.set_condition(Condition {
                kind: "StartupPolicyCompleted",
                status: true,
                reason: "InOrderStartupPolicyCompleted",
                message: "in order startup policy has completed",
                warning: false,
            });
        }
    }

    fn startup_in_progress(&mut self) {
        self.set_condition(Condition {
            kind: "StartupPolicyInProgress",
            status: true,
            reason: "InOrderStartupPolicyInProgress",
            message: "in order startup policy is in progress",
            warning: false,
        });
    }

    /// Suspends the active Jobs, or resumes them in startup order (`suspendJobs`,
    /// `resumeJobsIfNecessary`).
    fn suspend_or_resume(
        &mut self,
        rjobs: &[ReplicatedJob<'_>],
        active: &[Arc<Value>],
        statuses: &[Value],
    ) {
        if self.suspended() {
            for job in active.iter().filter(|j| !job_suspended(j)) {
                self.suspend_job(job, true);
            }
            self.set_condition(Condition {
                kind: "Suspended",
                status: true,
                reason: "SuspendedJobs",
                message: "jobset is suspended",
                warning: false,
            });
            self.restarting_false("JobSetSuspended", "jobset is suspended");
            return;
        }
        let in_order = self.in_order();
        for rjob in rjobs {
            if in_order && all_started(rjob, statuses) {
                continue;
            }
            for job in active.iter().filter(|j| {
                meta::label(j, REPLICATED_JOB_NAME_KEY) == Some(rjob.name) && job_suspended(j)
            }) {
                self.suspend_job(job, false);
            }
            if in_order {
                self.startup_in_progress();
                return;
            }
        }
        self.set_condition(Condition {
            kind: "Suspended",
            status: false,
            reason: "ResumeJobs",
            message: "jobset is resumed",
            warning: false,
        });
    }

    /// Deletes the JobSet `ttlSecondsAfterFinished` after its terminal condition.
    fn expire(&self) -> Option<Duration> {
        let ttl = self
            .js
            .pointer("/spec/ttlSecondsAfterFinished")
            .and_then(Value::as_u64)?;
        if meta::is_deleting(self.js) {
            return None;
        }
        let finished = self
            .status
            .get("conditions")
            .and_then(Value::as_array)?
            .iter()
            .filter(|c| {
                matches!(
                    c.get("type").and_then(Value::as_str),
                    Some("Completed" | "Failed")
                ) && c.get("status").and_then(Value::as_str) == Some("True")
            })
            .find_map(|c| c.get("lastTransitionTime").and_then(Value::as_str))
            .and_then(meta::parse_time)?;
        let deadline = finished.checked_add(Duration::from_secs(ttl)).ok()?;
        let now = jiff::Timestamp::now();
        if now < deadline {
            return Some(deadline.duration_since(now).unsigned_abs());
        }
        let key = ObjectKey::new(jobsets(), self.namespace(), self.name());
        if let Some(rt) = self.state.registry.get(&jobsets()) {
            let options = DeleteOptions {
                propagation: Some(Propagation::Foreground),
                uid: meta::uid(self.js).map(str::to_string),
                ..DeleteOptions::default()
            };
            // Deleted by someone else first is fine.
            let _ = ops::delete(self.state, &rt, &key, &options);
        }
        None
    }

    /// Writes the status if it changed (only while the JobSet is still this one) and records
    /// the events.
    fn finish(mut self, key: &ObjectKey) {
        let uid = meta::uid(self.js).map(str::to_string);
        // `conditions` is `omitempty`: a reconcile that set none leaves no empty list.
        if self
            .status
            .get("conditions")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
            && let Some(status) = self.status.as_object_mut()
        {
            status.remove("conditions");
        }
        if self.js.get("status") != Some(&self.status) {
            let status = self.status.clone();
            let _ = ops::mutate(self.state, key, |js| {
                if meta::uid(js).map(str::to_string) != uid {
                    return false;
                }
                js["status"] = status;
                true
            });
        }
        for (kind, reason, message) in &self.events {
            events::record(self.state, self.js, *kind, reason, message, SOURCE, None);
        }
    }
}

/// Whether every Job of a replicated job started (`allReplicasStarted`: ready, succeeded or
/// failed).
fn all_started(rjob: &ReplicatedJob<'_>, statuses: &[Value]) -> bool {
    let count = |field| status_count(statuses, rjob.name, field);
    rjob.replicas == count("failed") + count("ready") + count("succeeded")
}

/// Whether a failure policy rule applies to a failed Job: its Job's failure reason, message
/// (a regular expression) and replicated job.
fn rule_applies(rule: &Value, job: &Value) -> bool {
    let Some(condition) = job_condition(job, "Failed") else {
        return false;
    };
    let list = |name: &str| -> Vec<&str> {
        rule.get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    let reason = condition
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let message = condition
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("");
    let reasons = list("onJobFailureReasons");
    if !reasons.is_empty() && !reasons.contains(&reason) {
        return false;
    }
    let patterns = list("onJobFailureMessagePatterns");
    if !patterns.is_empty()
        && !patterns.iter().any(|p| {
            // An invalid pattern matches nothing, as the real controller logs and skips it.
            regex::Regex::new(p).is_ok_and(|re| re.is_match(message))
        })
    {
        return false;
    }
    let Some(rjob) = meta::label(job, REPLICATED_JOB_NAME_KEY) else {
        return false;
    };
    let targets = list("targetReplicatedJobs");
    targets.is_empty() || targets.contains(&rjob)
}

fn sha1_hex(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// One reconcile of a JobSet; returns when to look at it again if nothing changes before.
fn reconcile(state: &State, key: &ObjectKey, js: &Value) -> Option<Duration> {
    if meta::is_deleting(js) {
        return None;
    }
    if let Some(manager) = js.pointer("/spec/managedBy").and_then(Value::as_str)
        && manager != CONTROLLER_NAME
    {
        return None;
    }
    let uid = meta::uid(js)?.to_string();
    let mut status = js.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let mut r = Reconcile {
        state,
        js,
        status,
        events: Vec::new(),
    };
    let rjobs = replicated_jobs(js);
    let children = child_jobs(state, js, &uid, r.restarts());
    let statuses = replicated_job_statuses(&rjobs, &children);
    r.status["replicatedJobsStatus"] = json!(statuses);
    if r.status.get("restarts").is_none() {
        r.status["restarts"] = json!(0);
    }

    if r.finished() {
        r.delete_jobs(&children.active);
        let again = r.expire();
        r.finish(key);
        return again;
    }
    r.delete_jobs(&children.previous);
    let total: i64 = rjobs.iter().map(|j| j.replicas).sum();
    let ready: i64 = statuses
        .iter()
        .map(|s| int(s, "/ready") + int(s, "/succeeded"))
        .sum();
    if !r.suspended() && total == ready {
        r.restarting_false("JobsReady", "all jobs are ready");
    }
    if !children.failed.is_empty() {
        r.failure(&children.failed);
        r.finish(key);
        return None;
    }
    if !children.successful.is_empty() && r.success(&rjobs, &children.successful) {
        r.completed();
        r.finish(key);
        return None;
    }
    r.headless_service();
    r.create_jobs(&rjobs, &children, &statuses);
    r.suspend_or_resume(&rjobs, &children.active, &statuses);
    r.finish(key);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_key_is_the_sha1_of_namespace_and_name() {
        // `printf default/js-workers-0 | sha1sum`
        assert_eq!(
            sha1_hex("default/js-workers-0"),
            "3088a61cca4e2b285ba0c7152a3394241edcfbc1"
        );
    }
}
