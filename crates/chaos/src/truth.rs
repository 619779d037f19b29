//! What the simulated cluster really did for each job id, read from its store's change stream
//! (never through the API server, so no fault hides it): Jobs and pods created, the main
//! container's termination, disruptions, the Job's deadline and the cancel mark, each with the
//! resourceVersion it happened at.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kubeferry_core::marks::{CANCEL_ANNOTATION, JOB_ID_ANNOTATION, RECORD_FINALIZER};
use kubeferry_core::pod::{BARE_POD_VALUE, KIND_LABEL};
use kubeferry_core::record::{RECORD_LABEL, RECORD_LABEL_VALUE};
use kubeferry_sim::store::{EventType, Follower, StoreEvent};
use parking_lot::Mutex;
use serde_json::Value;

use crate::check::{Allowed, Truth};

/// The first termination of a job's main container.
#[derive(Clone, Debug)]
struct Termination {
    rv: u64,
    exit_code: i64,
    reason: String,
    /// The pod was being deleted or disrupted when its container ended.
    stopping: bool,
    /// Something had begun to stop the container when it ended: its pod's deletion was asked
    /// (or its Job's, whose pods the garbage collector deletes), or the kubelet's own
    /// disruption. A DisruptionTarget condition alone stops nothing: the Eviction API and the
    /// scheduler write it and then delete the pod, and a container can end on its own between.
    asked_to_stop: bool,
}

/// What is known of one job id.
#[derive(Clone, Debug, Default)]
struct JobFacts {
    /// The uid of the first Job (or SparkApplication) of the job id: the facts below are of
    /// its run alone; a later object's (a second run) are only counted.
    first_uid: Option<String>,
    job_uids: HashSet<String>,
    pod_uids: HashSet<String>,
    cancel_rv: Option<u64>,
    /// When the Job was first seen without its cancel mark after it had one (kubeferry never
    /// takes a mark off).
    cancel_mark_lost_rv: Option<u64>,
    /// When the Job was first seen suspended (kubeferry's stop of an outcome it decided).
    suspended_rv: Option<u64>,
    gone_after_cancel: bool,
    /// When a pod of the job was first deleted (before its Job was).
    pod_deleted_rv: Option<u64>,
    /// When the job's outcome record was created.
    recorded_rv: Option<u64>,
    job_deleted: bool,
    /// When the harness's own delete of the Job (someone else's, to kubeferry) took effect:
    /// the Job deleted, or marked for deletion.
    external_delete_rv: Option<u64>,
    /// The Job (namespace, name) while it exists and is not being deleted.
    job_object: Option<(String, String)>,
    /// The Job's own verdict (a Complete or Failed condition) was seen.
    job_finished: bool,
    /// The job's object was let go by kubeferry (its finalizer taken off) once its outcome
    /// record was kept.
    released: bool,
    /// The job's outcome records that exist, by (namespace, name).
    records: HashSet<(String, String)>,
    /// Outcome records the harness deleted.
    records_deleted: u32,
    deadline_rv: Option<u64>,
    disrupted_rv: Option<u64>,
    /// When a pod of the job was first seen being deleted (its deletionTimestamp): the
    /// kubelet stops containers then, not at a disruption's condition.
    pod_deleting_rv: Option<u64>,
    image_failure_rv: Option<u64>,
    /// When a pod of the job first showed an OOM kill whose order against its disruption and
    /// its deletion whole seconds cannot tell ([`stop_order_hidden`]).
    stop_order_hidden_rv: Option<u64>,
    termination: Option<Termination>,
    /// Pods not ended yet, by (namespace, name).
    running: HashSet<(String, String)>,
    /// Pods that exist, by (namespace, name).
    pods: HashSet<(String, String)>,
}

#[derive(Default)]
struct Facts {
    /// Job name (namespace, name) -> job id.
    job_ids: HashMap<(String, String), String>,
    /// SparkApplication name (namespace, name) -> job id.
    app_ids: HashMap<(String, String), String>,
    jobs: BTreeMap<String, JobFacts>,
    /// Pods the harness itself disrupted, with the resourceVersion before it did.
    disrupted_by_us: HashMap<(String, String), u64>,
    /// Job ids whose Job the harness deletes.
    deleting_by_us: HashSet<String>,
}

/// One change of the store, as the observer reads it.
struct Change<'a> {
    rv: u64,
    event_type: EventType,
    group: &'a str,
    resource: &'a str,
    namespace: &'a str,
    name: &'a str,
}

/// The observer: a task folds the store's changes into facts; the run asks it questions.
#[derive(Clone, Default)]
pub struct Observer {
    facts: Arc<Mutex<Facts>>,
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether any of the object's status conditions passes `test`.
fn any_condition(object: &Value, test: impl Fn(&Value) -> bool) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(test))
}

fn is_disrupted(pod: &Value) -> bool {
    let reason = str_at(pod, "/status/reason");
    matches!(reason, "Evicted" | "Preempted" | "NodeLost")
        || any_condition(pod, |c| {
            str_at(c, "/type") == "DisruptionTarget" && str_at(c, "/status") == "True"
        })
}

/// Whether the kubelet itself is stopping the pod's containers: its node-pressure eviction,
/// written with the pod's failure (`TerminationByKubelet`, reason `Evicted`), or a lost node.
fn stopped_by_kubelet(pod: &Value) -> bool {
    matches!(str_at(pod, "/status/reason"), "Evicted" | "NodeLost")
        || any_condition(pod, |c| {
            str_at(c, "/type") == "DisruptionTarget"
                && matches!(
                    str_at(c, "/reason"),
                    "TerminationByKubelet" | "DeletionByTaintManager"
                )
        })
}

/// The container whose end is the job's: `main` of a container job, the Spark driver's.
fn main_container(pod: &Value) -> Option<&Value> {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| {
            matches!(
                c.get("name").and_then(Value::as_str),
                Some("main" | "spark-kubernetes-driver")
            )
        })
}

/// Whether a pod shows an OOM kill in the second its disruption began and its deletion was
/// asked, the deletion's grace period 0: the picture of a pod OOM-killed first and then
/// evicted at once (an ended pod is deleted with no grace), and also of one killed while it
/// was being stopped once the kubelet's final delete cut the grace to 0 (the API server's
/// `BeforeDelete` moves deletionTimestamp back to the request and sets the grace it was
/// given). Whole seconds cannot order the kill and the disruption in it.
fn stop_order_hidden(pod: &Value) -> bool {
    let second = |at: &str| at.get(..19).map(str::to_string);
    let Some(finished) = main_container(pod)
        .and_then(|c| c.pointer("/state/terminated"))
        .filter(|t| str_at(t, "/reason") == "OOMKilled")
        .and_then(|t| second(str_at(t, "/finishedAt")))
    else {
        return false;
    };
    let disrupted_then = any_condition(pod, |c| {
        str_at(c, "/type") == "DisruptionTarget"
            && str_at(c, "/status") == "True"
            && second(str_at(c, "/lastTransitionTime")).as_ref() == Some(&finished)
    });
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    disrupted_then
        && grace == 0
        && second(str_at(pod, "/metadata/deletionTimestamp")).as_ref() == Some(&finished)
}

/// The uid of a pod's controller (its Job, or a driver's SparkApplication).
fn controller_uid(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| {
            o.get("controller").and_then(Value::as_bool) == Some(true)
                || matches!(
                    o.get("kind").and_then(Value::as_str),
                    Some("Job" | "SparkApplication")
                )
        })?
        .get("uid")
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
}

/// The SparkApplication owning a pod, when it is a Spark driver.
fn spark_owner(pod: &Value) -> Option<&str> {
    if str_at(pod, "/metadata/labels/spark-role") != "driver" {
        return None;
    }
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("kind").and_then(Value::as_str) == Some("SparkApplication"))?
        .get("name")
        .and_then(Value::as_str)
}

/// Folds in a change of a job's object: a Job, a SparkApplication, or a bare pod (`bare`, whose
/// own phase is its verdict). `None` when it is not the first object of a job id (a second
/// run's, only counted) or carries none; else the job id.
fn object_change(
    facts: &mut Facts,
    event: &Change<'_>,
    object: &Value,
    name: &(String, String),
    (spark, bare): (bool, bool),
) -> Option<String> {
    let job_id = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(JOB_ID_ANNOTATION))
        .and_then(Value::as_str)?
        .to_string();
    if spark {
        facts.app_ids.insert(name.clone(), job_id.clone());
    } else if !bare {
        facts.job_ids.insert(name.clone(), job_id.clone());
    }
    let ours = facts.deleting_by_us.contains(&job_id);
    let job = facts.jobs.entry(job_id.clone()).or_default();
    let uid = str_at(object, "/metadata/uid");
    job.job_uids.insert(uid.to_string());
    if *job.first_uid.get_or_insert_with(|| uid.to_string()) != uid {
        return None;
    }
    let deleting = event.event_type == EventType::Deleted
        || object.pointer("/metadata/deletionTimestamp").is_some();
    if ours && deleting && job.external_delete_rv.is_none() {
        job.external_delete_rv = Some(event.rv);
    }
    job.job_object = (!deleting).then(|| name.clone());
    job.released |= !object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|f| f == RECORD_FINALIZER));
    let phase = str_at(object, "/status/phase");
    job.job_finished |= (bare && matches!(phase, "Succeeded" | "Failed"))
        || any_condition(object, |c| {
            matches!(str_at(c, "/type"), "Complete" | "Failed") && str_at(c, "/status") == "True"
        });
    let cancelled = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CANCEL_ANNOTATION))
        .is_some();
    if cancelled && job.cancel_rv.is_none() {
        job.cancel_rv = Some(event.rv);
    }
    if !cancelled && job.cancel_rv.is_some() && job.cancel_mark_lost_rv.is_none() {
        job.cancel_mark_lost_rv = Some(event.rv);
    }
    let suspended = object.pointer("/spec/suspend") == Some(&Value::Bool(true));
    if suspended && job.suspended_rv.is_none() {
        job.suspended_rv = Some(event.rv);
    }
    if event.event_type == EventType::Deleted {
        job.job_deleted = true;
        job.gone_after_cancel |= cancelled;
    }
    // A bare pod's deadline is the kubelet's: the pod fails with reason DeadlineExceeded.
    // The Job controller's verdict is its FailureTarget condition; the Failed one follows once
    // the pods stopped (a Job deleted meanwhile, by a cancel, never gets it).
    let deadline = (bare && str_at(object, "/status/reason") == "DeadlineExceeded")
        || any_condition(object, |c| {
            matches!(str_at(c, "/type"), "Failed" | "FailureTarget")
                && str_at(c, "/status") != "False"
                && str_at(c, "/reason") == "DeadlineExceeded"
        });
    if deadline && job.deadline_rv.is_none() {
        job.deadline_rv = Some(event.rv);
    }
    Some(job_id)
}

impl Observer {
    /// Folds the store's changes in until the stream ends (the cluster stopped).
    pub async fn follow(self, mut changes: Follower) {
        while let Some(event) = changes.recv().await {
            self.apply(&event);
        }
    }

    fn apply(&self, event: &StoreEvent) {
        let key = &event.key;
        self.apply_change(
            Change {
                rv: event.rv,
                event_type: event.event_type,
                group: &key.resource.group,
                resource: &key.resource.resource,
                namespace: &key.namespace,
                name: &key.name,
            },
            &event.object,
        );
    }

    fn apply_change(&self, change: Change<'_>, object: &Value) {
        let event = &change;
        let mut facts = self.facts.lock();
        let name = (change.namespace.to_string(), change.name.to_string());
        let spark = change.resource == "sparkapplications";
        match (change.group, change.resource) {
            ("batch", "jobs") | (_, "sparkapplications") => {
                object_change(&mut facts, event, object, &name, (spark, false));
            }
            ("", "configmaps") => {
                let record = object
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(RECORD_LABEL))
                    .and_then(Value::as_str)
                    == Some(RECORD_LABEL_VALUE);
                let job_id = object
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(JOB_ID_ANNOTATION))
                    .and_then(Value::as_str);
                if let (true, Some(job_id)) = (record, job_id)
                    && let Some(job) = facts.jobs.get_mut(job_id)
                {
                    if event.event_type == EventType::Deleted {
                        job.records.remove(&name);
                    } else {
                        job.recorded_rv.get_or_insert(event.rv);
                        job.records.insert(name);
                    }
                }
            }
            ("", "pods") => {
                let job_name = object
                    .pointer("/metadata/labels/batch.kubernetes.io~1job-name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let owner = |ids: &HashMap<(String, String), String>, name: &str| {
                    ids.get(&(change.namespace.to_string(), name.to_string()))
                        .cloned()
                };
                // A bare pod is its job's object and its one attempt at once.
                let bare = object
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(KIND_LABEL))
                    .and_then(Value::as_str)
                    == Some(BARE_POD_VALUE);
                let job_id = match spark_owner(object) {
                    _ if bare => object_change(&mut facts, event, object, &name, (false, true)),
                    Some(app) => owner(&facts.app_ids, app),
                    None => owner(&facts.job_ids, job_name),
                };
                let Some(job_id) = job_id else {
                    return;
                };
                let ours = facts.disrupted_by_us.get(&name).copied();
                let job = facts.jobs.entry(job_id).or_default();
                job.pod_uids
                    .insert(str_at(object, "/metadata/uid").to_string());
                if let (Some(first), Some(owner)) = (&job.first_uid, controller_uid(object))
                    && first != owner
                {
                    // A pod of a second run: counted, never its first run's truth.
                    return;
                }
                let disrupted = is_disrupted(object) || ours.is_some();
                if disrupted && job.disrupted_rv.is_none() {
                    job.disrupted_rv = Some(ours.unwrap_or(event.rv));
                }
                let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
                if deleting && job.pod_deleting_rv.is_none() {
                    job.pod_deleting_rv = Some(event.rv);
                }
                let main = main_container(object);
                let waiting = main
                    .map(|c| str_at(c, "/state/waiting/reason"))
                    .unwrap_or("");
                if matches!(
                    waiting,
                    "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"
                ) && job.image_failure_rv.is_none()
                {
                    job.image_failure_rv = Some(event.rv);
                }
                if let Some(terminated) = main.and_then(|c| c.pointer("/state/terminated"))
                    && job.termination.is_none()
                {
                    job.termination = Some(Termination {
                        rv: event.rv,
                        exit_code: terminated
                            .get("exitCode")
                            .and_then(Value::as_i64)
                            .unwrap_or(-1),
                        reason: str_at(terminated, "/reason").to_string(),
                        // Its Job deleted by someone else: the garbage collector stops it.
                        stopping: deleting || disrupted || job.external_delete_rv.is_some(),
                        asked_to_stop: deleting
                            || job.external_delete_rv.is_some()
                            || stopped_by_kubelet(object),
                    });
                }
                if job.stop_order_hidden_rv.is_none()
                    && event.event_type != EventType::Deleted
                    && stop_order_hidden(object)
                {
                    job.stop_order_hidden_rv = Some(event.rv);
                }
                let phase = str_at(object, "/status/phase");
                let ended = matches!(phase, "Succeeded" | "Failed") || deleting;
                if event.event_type == EventType::Deleted {
                    if !job.job_deleted
                        && job.external_delete_rv.is_none()
                        && job.pod_deleted_rv.is_none()
                    {
                        job.pod_deleted_rv = Some(event.rv);
                    }
                    job.pods.remove(&name);
                    job.running.remove(&name);
                } else {
                    job.pods.insert(name.clone());
                    if ended || str_at(object, "/spec/nodeName").is_empty() {
                        job.running.remove(&name);
                    } else {
                        job.running.insert(name);
                    }
                }
            }
            _ => {}
        }
    }

    /// Notes that the harness is about to disrupt a pod (eviction, preemption, node loss) at
    /// resourceVersion `rv`: whatever its container does from then on is not its own outcome.
    pub fn disrupting(&self, namespace: &str, name: &str, rv: u64) {
        self.facts
            .lock()
            .disrupted_by_us
            .entry((namespace.to_string(), name.to_string()))
            .or_insert(rv);
    }

    /// Notes that the harness is about to delete a job's Job (as someone else would): its
    /// deletion, once seen, is an external one.
    pub fn deleting_job(&self, job_id: &str) {
        self.facts.lock().deleting_by_us.insert(job_id.to_string());
    }

    /// Notes that the harness deleted one of a job's outcome records.
    pub fn record_deleted(&self, job_id: &str) {
        if let Some(job) = self.facts.lock().jobs.get_mut(job_id) {
            job.records_deleted += 1;
        }
    }

    /// A job's object (namespace, name), its Job or SparkApplication, while it exists and is
    /// not being deleted.
    pub fn job_object(&self, job_id: &str) -> Option<(String, String)> {
        self.facts.lock().jobs.get(job_id)?.job_object.clone()
    }

    /// Whether a job's Job has its own verdict (Complete or Failed).
    pub fn job_finished(&self, job_id: &str) -> bool {
        self.facts
            .lock()
            .jobs
            .get(job_id)
            .is_some_and(|j| j.job_finished)
    }

    /// Whether kubeferry let the job's object go (its outcome record kept).
    pub fn released(&self, job_id: &str) -> bool {
        self.facts
            .lock()
            .jobs
            .get(job_id)
            .is_some_and(|j| j.released)
    }

    /// A job's outcome records that exist now (namespace, name).
    pub fn records_of(&self, job_id: &str) -> Vec<(String, String)> {
        let facts = self.facts.lock();
        let mut records: Vec<_> = facts
            .jobs
            .get(job_id)
            .map(|j| j.records.iter().cloned().collect())
            .unwrap_or_default();
        records.sort();
        records
    }

    /// Pods of kubeferry's jobs that run on a node now.
    pub fn running_pods(&self) -> Vec<(String, String)> {
        let facts = self.facts.lock();
        let mut pods: Vec<_> = facts
            .jobs
            .values()
            .flat_map(|j| j.running.iter().cloned())
            .collect();
        pods.sort();
        pods
    }

    /// The pods of one job id that exist now.
    pub fn pods_of(&self, job_id: &str) -> Vec<(String, String)> {
        let facts = self.facts.lock();
        let mut pods: Vec<_> = facts
            .jobs
            .get(job_id)
            .map(|j| j.pods.iter().cloned().collect())
            .unwrap_or_default();
        pods.sort();
        pods
    }

    /// What the cluster did for a job id.
    pub fn truth(&self, job_id: &str) -> Truth {
        let facts = self.facts.lock();
        let Some(job) = facts.jobs.get(job_id) else {
            return Truth {
                story: "no Job was ever created".into(),
                ..Truth::default()
            };
        };
        let mut allowed = Vec::new();
        let mut story = Vec::new();
        // The container ended on its own: before any disruption, deletion or deadline, or
        // during one with an exit code no signal gave (it finished its work within the grace
        // period: both that outcome and the disruption's are what Kubernetes showed).
        let natural = job.termination.as_ref().filter(|t| {
            let unsignalled = (0..128).contains(&t.exit_code) && t.reason != "OOMKilled";
            let first = !t.stopping
                && job.disrupted_rv.is_none_or(|d| t.rv < d)
                && job.deadline_rv.is_none_or(|d| t.rv < d);
            // An OOM kill before anything began to stop the container is its own, also after
            // a disruption's condition (the disruption is then allowed too, below).
            first || unsignalled || (t.reason == "OOMKilled" && !t.asked_to_stop)
        });
        if let Some(t) = &job.termination {
            story.push(format!(
                "main terminated at rv {} with exit {} ({}){}",
                t.rv,
                t.exit_code,
                t.reason,
                if natural.is_some() {
                    " on its own"
                } else {
                    " while stopping"
                }
            ));
        }
        if let Some(t) = natural {
            if t.exit_code == 0 && t.reason != "OOMKilled" {
                allowed.push(Allowed::Succeeded);
            } else {
                allowed.push(Allowed::Failed {
                    exit_code: t.exit_code,
                    oom: t.reason == "OOMKilled",
                });
            }
        }
        let before_natural =
            |rv: Option<u64>| rv.is_some_and(|rv| natural.is_none_or(|t| rv < t.rv));
        if let Some(rv) = job.deadline_rv {
            story.push(format!("deadline exceeded at rv {rv}"));
        }
        if before_natural(job.deadline_rv) {
            allowed.push(Allowed::DeadlineExceeded);
        }
        if let Some(rv) = job.disrupted_rv {
            story.push(format!("pod disrupted at rv {rv}"));
        }
        if let Some(rv) = job.pod_deleting_rv {
            story.push(format!("pod's deletion asked at rv {rv}"));
        }
        if let Some(rv) = job.stop_order_hidden_rv {
            story.push(format!(
                "from rv {rv} the pod showed its OOM kill, disruption and deletion in one \
                 second, with no grace"
            ));
        }
        if before_natural(job.disrupted_rv) {
            allowed.push(Allowed::Infrastructure);
        }
        if let Some(rv) = job.image_failure_rv {
            story.push(format!("image pull failed at rv {rv}"));
            // A container whose image never came never ran: an end written for it later (its
            // node lost, its pod deleted) is a stop, not an outcome of its own.
            if job
                .termination
                .as_ref()
                .is_none_or(|t| rv < t.rv && natural.is_none())
            {
                allowed.push(Allowed::Configuration);
            }
        }
        if let Some(rv) = job.cancel_rv {
            story.push(format!("cancel marked at rv {rv}"));
        }
        if let Some(rv) = job.cancel_mark_lost_rv {
            story.push(format!("the Job seen without its cancel mark at rv {rv}"));
        }
        if let Some(rv) = job.suspended_rv {
            story.push(format!("Job suspended at rv {rv}"));
        }
        if job.job_uids.len() > 1 {
            story.push(format!("{} Jobs created", job.job_uids.len()));
        }
        if let Some(rv) = job.pod_deleted_rv {
            story.push(format!("pod deleted at rv {rv}"));
        }
        if let Some(rv) = job.external_delete_rv {
            story.push(format!("Job deleted by someone else at rv {rv}"));
        } else if job.job_deleted {
            story.push("Job deleted".into());
        }
        if job.records_deleted > 0 {
            story.push(format!(
                "{} outcome record(s) deleted by hand",
                job.records_deleted
            ));
        }
        if before_natural(job.external_delete_rv) {
            allowed.push(Allowed::DeletedExternally);
        }
        if before_natural(job.cancel_rv) {
            allowed.push(Allowed::Cancelled);
        }
        if story.is_empty() {
            story.push("created, never ended".into());
        }
        Truth {
            jobs_created: job.job_uids.len() as u32,
            pods_created: job.pod_uids.len() as u32,
            gone_after_cancel: job.gone_after_cancel,
            pod_gone_unrecorded: job
                .pod_deleted_rv
                .is_some_and(|deleted| job.recorded_rv.is_none_or(|recorded| deleted < recorded)),
            stop_order_hidden: job.termination.as_ref().is_some_and(|t| {
                t.reason == "OOMKilled"
                    && natural.is_none()
                    && job
                        .stop_order_hidden_rv
                        .is_some_and(|rv| job.recorded_rv.is_none_or(|recorded| rv < recorded))
            }),
            allowed,
            story: story.join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(observer: &Observer, rv: u64, event_type: EventType, object: Value) {
        observer.apply_change(
            Change {
                rv,
                event_type,
                group: "batch",
                resource: "jobs",
                namespace: "chaos",
                name: "j",
            },
            &object,
        );
    }

    /// A change of a core (`""` group) object of the `chaos` namespace.
    fn core_change(
        observer: &Observer,
        rv: u64,
        event_type: EventType,
        (resource, name): (&str, &str),
        object: &Value,
    ) {
        let change = Change {
            rv,
            event_type,
            group: "",
            resource,
            namespace: "chaos",
            name,
        };
        observer.apply_change(change, object);
    }

    fn pod_event(observer: &Observer, rv: u64, event_type: EventType, status: Value) {
        let object = json!({
            "metadata": {"name": "j-1", "uid": "p1", "labels": {"batch.kubernetes.io/job-name": "j"}},
            "spec": {"nodeName": "sim-node-1"},
            "status": status,
        });
        core_change(observer, rv, event_type, ("pods", "j-1"), &object);
    }

    fn pod(observer: &Observer, rv: u64, status: Value) {
        pod_event(observer, rv, EventType::Modified, status);
    }

    fn exited(code: i64, reason: &str) -> Value {
        json!({"phase": "Failed", "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": code, "reason": reason}}}
        ]})
    }

    fn observer_with_job() -> Observer {
        let observer = Observer::default();
        let annotations = json!({JOB_ID_ANNOTATION: "a"});
        job(
            &observer,
            1,
            EventType::Added,
            json!({"metadata": {"uid": "u1", "annotations": annotations}}),
        );
        observer
    }

    /// The outcome record of the job id `a`, created at `rv`.
    fn recorded(observer: &Observer, rv: u64) {
        let object = json!({"metadata": {
            "labels": {RECORD_LABEL: RECORD_LABEL_VALUE},
            "annotations": {JOB_ID_ANNOTATION: "a"},
        }});
        core_change(
            observer,
            rv,
            EventType::Added,
            ("configmaps", "rec"),
            &object,
        );
    }

    #[test]
    fn a_pod_is_gone_unrecorded_only_when_it_went_before_the_outcome_record() {
        let pod_deleted = |observer: &Observer, rv| {
            pod_event(observer, rv, EventType::Deleted, exited(137, "OOMKilled"));
        };
        // Deleted before anything was recorded: what only the pod showed is gone.
        let observer = observer_with_job();
        pod(&observer, 2, exited(137, "OOMKilled"));
        pod_deleted(&observer, 3);
        recorded(&observer, 4);
        assert!(observer.truth("a").pod_gone_unrecorded);
        // Recorded while the pod was there to read: whoever recorded could see it.
        let observer = observer_with_job();
        pod(&observer, 2, exited(137, "OOMKilled"));
        recorded(&observer, 3);
        pod_deleted(&observer, 4);
        assert!(!observer.truth("a").pod_gone_unrecorded);
    }

    #[test]
    fn an_oom_kill_during_a_stop_is_hidden_once_the_grace_is_cut_before_the_record() {
        const S: &str = "2026-01-01T00:00:07Z";
        // The pod `j-1` of the Job `u1`, evicted in second S and being deleted with `grace`
        // (deletionTimestamp S once it is 0, as the kubelet's final delete leaves it).
        let evicted = |observer: &Observer, rv: u64, grace: i64, main: Value| {
            let mut object = json!({
                "metadata": {
                    "name": "j-1", "uid": "pod-j-1",
                    "labels": {"batch.kubernetes.io/job-name": "j"},
                    "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u1", "controller": true}],
                    "deletionTimestamp": if grace == 0 { S } else { "2026-01-01T00:00:37Z" },
                    "deletionGracePeriodSeconds": grace,
                },
                "spec": {"nodeName": "sim-node-1"},
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "DisruptionTarget", "status": "True",
                        "reason": "EvictionByEvictionAPI", "lastTransitionTime": S}],
                    "containerStatuses": [{"name": "main", "state": main}],
                },
            });
            if main.get("terminated").is_some() {
                object["status"]["phase"] = json!("Failed");
            }
            core_change(observer, rv, EventType::Modified, ("pods", "j-1"), &object);
        };
        let oom = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": S}});
        let story = |record_at: u64| {
            let observer = observer_with_job();
            evicted(&observer, 2, 30, json!({"running": {}}));
            evicted(&observer, 3, 30, oom.clone());
            // The kubelet's final delete: the grace cut to 0.
            evicted(&observer, 5, 0, oom.clone());
            recorded(&observer, record_at);
            observer.truth("a")
        };
        // Recorded after the grace was cut: the order was hidden from the recorder.
        let hidden = story(6);
        assert_eq!(
            hidden.allowed,
            vec![Allowed::Infrastructure],
            "{}",
            hidden.story
        );
        assert!(hidden.stop_order_hidden);
        // Recorded while the pod still showed its deletion's grace: the order was readable.
        let readable = story(4);
        assert_eq!(readable.allowed, vec![Allowed::Infrastructure]);
        assert!(!readable.stop_order_hidden);
        // A kill in a later second than the disruption: no tie to hide anything.
        let observer = observer_with_job();
        evicted(&observer, 2, 30, json!({"running": {}}));
        let later = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled",
            "finishedAt": "2026-01-01T00:00:08Z"}});
        evicted(&observer, 3, 30, later.clone());
        evicted(&observer, 5, 0, later);
        recorded(&observer, 6);
        assert!(!observer.truth("a").stop_order_hidden);
    }

    /// A pod of the Job `uid`.
    fn pod_of(observer: &Observer, rv: u64, (name, uid): (&str, &str), status: Value) {
        let object = json!({
            "metadata": {
                "name": name, "uid": format!("pod-{name}"),
                "labels": {"batch.kubernetes.io/job-name": "j"},
                "ownerReferences": [{"kind": "Job", "name": "j", "uid": uid, "controller": true}],
            },
            "spec": {"nodeName": "sim-node-1"},
            "status": status,
        });
        core_change(observer, rv, EventType::Modified, ("pods", name), &object);
    }

    /// The pod `j-1` of the Job `u1` with a DisruptionTarget condition of `reason`, being
    /// deleted or not.
    fn disrupted_pod(observer: &Observer, rv: u64, reason: &str, deleting: bool, main: Value) {
        let mut object = json!({
            "metadata": {
                "name": "j-1", "uid": "pod-j-1",
                "labels": {"batch.kubernetes.io/job-name": "j"},
                "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u1", "controller": true}],
            },
            "spec": {"nodeName": "sim-node-1"},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason}],
                "containerStatuses": [{"name": "main", "state": main}],
            },
        });
        if deleting {
            object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            object["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        }
        core_change(observer, rv, EventType::Modified, ("pods", "j-1"), &object);
    }

    #[test]
    fn an_oom_kill_is_the_containers_own_until_something_began_to_stop_it() {
        let running = json!({"running": {}});
        let oom = json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}});
        let own = Allowed::Failed {
            exit_code: 137,
            oom: true,
        };
        // The Eviction API's condition, then the OOM kill before the pod's deletion: both the
        // kill and the disruption are what the cluster showed.
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), json!({"phase": "Running"}));
        disrupted_pod(
            &observer,
            3,
            "EvictionByEvictionAPI",
            false,
            running.clone(),
        );
        disrupted_pod(&observer, 4, "EvictionByEvictionAPI", false, oom.clone());
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [own.clone(), Allowed::Infrastructure],
            "{}",
            truth.story
        );
        // The harness's own eviction noted before its condition was written: the same.
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), json!({"phase": "Running"}));
        observer.disrupting("chaos", "j-1", 2);
        pod_of(
            &observer,
            3,
            ("j-1", "u1"),
            json!({"phase": "Running", "containerStatuses": [
                {"name": "main", "state": oom.clone()}
            ]}),
        );
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [own, Allowed::Infrastructure],
            "{}",
            truth.story
        );
        // Killed once the pod's deletion was asked: the stop's, whatever the runtime said.
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), json!({"phase": "Running"}));
        disrupted_pod(
            &observer,
            3,
            "EvictionByEvictionAPI",
            false,
            running.clone(),
        );
        disrupted_pod(&observer, 4, "EvictionByEvictionAPI", true, running);
        disrupted_pod(&observer, 5, "EvictionByEvictionAPI", true, oom.clone());
        let truth = observer.truth("a");
        assert_eq!(truth.allowed, [Allowed::Infrastructure], "{}", truth.story);
        // The kubelet's own eviction stops the containers itself.
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), json!({"phase": "Running"}));
        disrupted_pod(&observer, 3, "TerminationByKubelet", false, oom);
        let truth = observer.truth("a");
        assert_eq!(truth.allowed, [Allowed::Infrastructure], "{}", truth.story);
    }

    #[test]
    fn a_job_deleted_by_someone_else_before_its_end_allows_deleted_externally_alone() {
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), json!({"phase": "Running"}));
        observer.deleting_job("a");
        let annotations = json!({JOB_ID_ANNOTATION: "a"});
        let object = json!({"metadata": {"uid": "u1", "annotations": annotations}});
        job(&observer, 3, EventType::Deleted, object.clone());
        pod_of(&observer, 4, ("j-1", "u1"), exited(143, "Error"));
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::DeletedExternally],
            "{}",
            truth.story
        );
        // A second run of the job id is counted, and what it does is not the first run's.
        let second = json!({"metadata": {"uid": "u2", "annotations": annotations}});
        job(&observer, 5, EventType::Added, second);
        pod_of(&observer, 6, ("j-2", "u2"), exited(0, "Completed"));
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::DeletedExternally],
            "{}",
            truth.story
        );
        assert_eq!((truth.jobs_created, truth.pods_created), (2, 2));
        assert_eq!(observer.job_object("a"), None);
    }

    #[test]
    fn a_job_deleted_by_someone_else_after_its_end_keeps_its_outcome() {
        let observer = observer_with_job();
        pod_of(&observer, 2, ("j-1", "u1"), exited(3, "Error"));
        assert_eq!(observer.job_object("a"), Some(("chaos".into(), "j".into())));
        observer.deleting_job("a");
        let annotations = json!({JOB_ID_ANNOTATION: "a"});
        // Marked for deletion (a finalizer holds it): the deletion took effect.
        let deleting = json!({"metadata": {
            "uid": "u1", "annotations": annotations, "deletionTimestamp": "2026-01-01T00:00:00Z",
        }});
        job(&observer, 3, EventType::Modified, deleting);
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::Failed {
                exit_code: 3,
                oom: false
            }],
            "{}",
            truth.story
        );
        assert!(
            truth.story.contains("deleted by someone else at rv 3"),
            "{}",
            truth.story
        );
        assert_eq!(observer.job_object("a"), None);
    }

    #[test]
    fn a_container_that_exits_before_its_eviction_decides_the_outcome() {
        let observer = observer_with_job();
        pod(&observer, 2, json!({"phase": "Running"}));
        pod(&observer, 3, exited(4, "Error"));
        observer.disrupting("chaos", "j-1", 4);
        pod(&observer, 5, exited(4, "Error"));
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::Failed {
                exit_code: 4,
                oom: false
            }],
            "{}",
            truth.story
        );
        assert_eq!((truth.jobs_created, truth.pods_created), (1, 1));
    }

    #[test]
    fn a_container_killed_by_an_eviction_is_an_infrastructure_failure() {
        let observer = observer_with_job();
        pod(&observer, 2, json!({"phase": "Running"}));
        observer.disrupting("chaos", "j-1", 2);
        pod(&observer, 3, exited(143, "Error"));
        assert_eq!(observer.truth("a").allowed, [Allowed::Infrastructure]);
    }

    #[test]
    fn an_image_that_never_came_is_a_configuration_failure_even_once_its_node_is_lost() {
        let observer = observer_with_job();
        let waiting = |reason: &str| {
            json!({"phase": "Pending", "containerStatuses": [
                {"name": "main", "state": {"waiting": {"reason": reason}}}
            ]})
        };
        pod(&observer, 2, waiting("ErrImagePull"));
        pod(&observer, 3, waiting("ImagePullBackOff"));
        observer.disrupting("chaos", "j-1", 4);
        pod(&observer, 5, exited(137, "ContainerStatusUnknown"));
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::Infrastructure, Allowed::Configuration],
            "{}",
            truth.story
        );
        // A container that ran (its image came) and was then stopped is no image failure.
        let observer = observer_with_job();
        pod(&observer, 2, json!({"phase": "Running"}));
        observer.disrupting("chaos", "j-1", 3);
        pod(&observer, 4, exited(137, "ContainerStatusUnknown"));
        pod(&observer, 5, waiting("ErrImagePull"));
        assert_eq!(observer.truth("a").allowed, [Allowed::Infrastructure]);
    }

    #[test]
    fn a_deadline_judged_after_a_cancel_mark_and_before_the_deletion_is_allowed() {
        let observer = observer_with_job();
        let marked = json!({JOB_ID_ANNOTATION: "a", CANCEL_ANNOTATION: "2026-01-01T00:00:00Z"});
        job(
            &observer,
            2,
            EventType::Modified,
            json!({"metadata": {"uid": "u1", "annotations": marked}}),
        );
        let judged = json!({
            "metadata": {"uid": "u1", "annotations": marked},
            "status": {"conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"},
            ]},
        });
        job(&observer, 3, EventType::Modified, judged.clone());
        job(&observer, 4, EventType::Deleted, judged);
        let truth = observer.truth("a");
        assert_eq!(
            truth.allowed,
            [Allowed::DeadlineExceeded, Allowed::Cancelled],
            "{}",
            truth.story
        );
    }

    #[test]
    fn a_cancel_marked_before_the_end_allows_cancelled_and_a_second_job_is_counted() {
        let observer = observer_with_job();
        let marked = json!({JOB_ID_ANNOTATION: "a", CANCEL_ANNOTATION: "2026-01-01T00:00:00Z"});
        job(
            &observer,
            2,
            EventType::Modified,
            json!({"metadata": {"uid": "u1", "annotations": marked}}),
        );
        job(
            &observer,
            3,
            EventType::Deleted,
            json!({"metadata": {"uid": "u1", "annotations": marked}}),
        );
        let truth = observer.truth("a");
        assert_eq!(truth.allowed, [Allowed::Cancelled]);
        assert!(truth.gone_after_cancel);
        job(
            &observer,
            4,
            EventType::Added,
            json!({"metadata": {"uid": "u2", "annotations": {JOB_ID_ANNOTATION: "a"}}}),
        );
        assert_eq!(observer.truth("a").jobs_created, 2);
    }

    /// A bare pod of job id `id`, with more metadata and its status.
    fn bare_pod(observer: &Observer, rv: u64, event_type: EventType, id: &str, extra: Value) {
        let mut object = json!({
            "metadata": {
                "name": id, "uid": format!("{id}-uid"),
                "labels": {KIND_LABEL: BARE_POD_VALUE},
                "annotations": {JOB_ID_ANNOTATION: id},
                "finalizers": [RECORD_FINALIZER],
            },
            "spec": {"nodeName": "sim-node-1"},
            "status": {"phase": "Running"},
        });
        if let (Some(into), Value::Object(from)) = (object.as_object_mut(), extra) {
            for (key, value) in from {
                match (into.get_mut(&key), value) {
                    (Some(Value::Object(into)), Value::Object(value)) => into.extend(value),
                    (_, value) => {
                        into.insert(key, value);
                    }
                }
            }
        }
        core_change(observer, rv, event_type, ("pods", id), &object);
    }

    #[test]
    fn a_bare_pod_is_its_jobs_object_and_its_one_attempt() {
        let observer = Observer::default();
        // Cancelled: marked, deleted, then its container killed.
        let marked = json!({"metadata": {"annotations":
            {JOB_ID_ANNOTATION: "a", CANCEL_ANNOTATION: "2026-01-01T00:00:00Z"}}});
        bare_pod(&observer, 1, EventType::Added, "a", json!({}));
        bare_pod(&observer, 2, EventType::Modified, "a", marked.clone());
        let mut deleting = marked.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:30Z");
        bare_pod(&observer, 3, EventType::Modified, "a", deleting.clone());
        deleting["status"] = exited(137, "Error");
        bare_pod(&observer, 4, EventType::Deleted, "a", deleting);
        let truth = observer.truth("a");
        assert_eq!(truth.allowed, [Allowed::Cancelled], "{}", truth.story);
        assert_eq!((truth.jobs_created, truth.pods_created), (1, 1));
        assert!(truth.gone_after_cancel);
        assert!(!truth.pod_gone_unrecorded, "the pod is the object");

        // Its own OOM kill, and its deadline (the kubelet's).
        bare_pod(&observer, 5, EventType::Added, "b", json!({}));
        let oom = json!({"status": exited(137, "OOMKilled")});
        bare_pod(&observer, 6, EventType::Modified, "b", oom);
        assert_eq!(
            observer.truth("b").allowed,
            [Allowed::Failed {
                exit_code: 137,
                oom: true
            }]
        );
        bare_pod(&observer, 7, EventType::Added, "c", json!({}));
        let mut deadline = exited(137, "Error");
        deadline["reason"] = json!("DeadlineExceeded");
        bare_pod(
            &observer,
            8,
            EventType::Modified,
            "c",
            json!({"status": deadline}),
        );
        assert_eq!(observer.truth("c").allowed, [Allowed::DeadlineExceeded]);
        assert!(observer.job_finished("c"));
    }
}
