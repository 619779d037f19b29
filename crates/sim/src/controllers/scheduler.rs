//! The scheduler: binds pending pods to nodes by capacity (cpu, memory, pods, GPUs and any
//! extended resource), node selectors, required node affinity, taints and tolerations and
//! unschedulable nodes; a pod that fits nowhere gets PodScheduled=False, reason Unschedulable,
//! with the real scheduler's message, and is retried when nodes, pods or claims change.
//!
//! Like the real scheduler it keeps its own queue of the pods waiting for a node (first come,
//! first served): a pod that fits nowhere waits aside until something frees room, and each
//! burst of changes is followed by one pass over the queue, so no change costs a scan of
//! every pod in the cluster.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::events::{self, EventKind, Source};
use crate::kinds::pod_requests;
use crate::ops;
use crate::quantity;
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, ObjectKey, StoreEvent, meta};

/// Capacity accounting: what the bound, non-terminal pods use on each node.
#[derive(Default)]
struct Cache {
    used: HashMap<String, BTreeMap<String, i128>>,
    bound: HashMap<String, (String, BTreeMap<String, i128>)>,
    /// Last unschedulable message per pod uid (to record one event per change).
    last_message: HashMap<String, String>,
}

impl Cache {
    fn add(&mut self, uid: &str, node: &str, requests: BTreeMap<String, i128>) {
        if self.bound.contains_key(uid) {
            return;
        }
        let used = self.used.entry(node.to_string()).or_default();
        for (k, v) in &requests {
            *used.entry(k.clone()).or_default() += v;
        }
        *used.entry("pods".into()).or_default() += 1000;
        self.bound
            .insert(uid.to_string(), (node.to_string(), requests));
    }

    fn remove(&mut self, uid: &str) -> bool {
        let Some((node, requests)) = self.bound.remove(uid) else {
            return false;
        };
        if let Some(used) = self.used.get_mut(&node) {
            for (k, v) in requests {
                *used.entry(k).or_default() -= v;
            }
            *used.entry("pods".into()).or_default() -= 1000;
        }
        true
    }
}

/// The pods waiting for a node, by arrival: `active` ones are tried on the next pass,
/// `unschedulable` ones wait until something may have made room for them.
#[derive(Default)]
struct Queue {
    next: u64,
    /// The arrival number of each queued pod (by uid).
    order: HashMap<String, u64>,
    active: BTreeMap<u64, (String, ObjectKey)>,
    unschedulable: BTreeMap<u64, (String, ObjectKey)>,
}

impl Queue {
    /// Queues a pod to be tried (a pod already waiting keeps its place; `retry` moves it back
    /// to the active queue if it was set aside).
    fn add(&mut self, uid: &str, key: &ObjectKey, retry: bool) {
        match self.order.get(uid) {
            Some(seq) => {
                if retry && let Some(entry) = self.unschedulable.remove(seq) {
                    self.active.insert(*seq, entry);
                }
            }
            None => {
                let seq = self.next;
                self.next += 1;
                self.order.insert(uid.to_string(), seq);
                self.active.insert(seq, (uid.to_string(), key.clone()));
            }
        }
    }

    fn forget(&mut self, uid: &str) {
        if let Some(seq) = self.order.remove(uid) {
            self.active.remove(&seq);
            self.unschedulable.remove(&seq);
        }
    }

    /// Moves every pod set aside back to the active queue.
    fn retry_all(&mut self) {
        let parked = std::mem::take(&mut self.unschedulable);
        self.active.extend(parked);
    }

    fn set_aside(&mut self, seq: u64, entry: (String, ObjectKey)) {
        self.unschedulable.insert(seq, entry);
    }
}

fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn tolerates(tolerations: &[Value], taint: &Value) -> bool {
    let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
    let value = taint.get("value").and_then(Value::as_str).unwrap_or("");
    let effect = taint.get("effect").and_then(Value::as_str).unwrap_or("");
    tolerations.iter().any(|t| {
        let t_key = t.get("key").and_then(Value::as_str).unwrap_or("");
        let t_effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
        let effect_ok = t_effect.is_empty() || t_effect == effect;
        let key_ok = t_key.is_empty() && op == "Exists" || t_key == key;
        let value_ok =
            op == "Exists" || t.get("value").and_then(Value::as_str).unwrap_or("") == value;
        effect_ok && key_ok && value_ok
    })
}

fn expression_matches(expr: &Value, labels: Option<&serde_json::Map<String, Value>>) -> bool {
    let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
    let have = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let values: Vec<&str> = expr
        .get("values")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match expr.get("operator").and_then(Value::as_str).unwrap_or("") {
        "In" => have.is_some_and(|h| values.contains(&h)),
        "NotIn" => have.is_none_or(|h| !values.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" => have
            .and_then(|h| h.parse::<i64>().ok())
            .zip(values.first().and_then(|v| v.parse::<i64>().ok()))
            .is_some_and(|(h, v)| h > v),
        "Lt" => have
            .and_then(|h| h.parse::<i64>().ok())
            .zip(values.first().and_then(|v| v.parse::<i64>().ok()))
            .is_some_and(|(h, v)| h < v),
        _ => false,
    }
}

fn affinity_matches(pod: &Value, node: &Value) -> bool {
    let labels = meta::string_map(node, "labels");
    if let Some(selector) = pod.pointer("/spec/nodeSelector").and_then(Value::as_object) {
        for (k, v) in selector {
            if labels.and_then(|l| l.get(k)) != Some(v) {
                return false;
            }
        }
    }
    let terms = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array);
    match terms {
        Some(terms) if !terms.is_empty() => terms.iter().any(|term| {
            let exprs = term.get("matchExpressions").and_then(Value::as_array);
            let fields = term.get("matchFields").and_then(Value::as_array);
            let exprs_ok = exprs.is_none_or(|e| e.iter().all(|x| expression_matches(x, labels)));
            let fields_ok = fields.is_none_or(|f| {
                let mut name_map = serde_json::Map::new();
                name_map.insert("metadata.name".into(), json!(meta::name(node)));
                f.iter().all(|x| expression_matches(x, Some(&name_map)))
            });
            (exprs.is_some() || fields.is_some()) && exprs_ok && fields_ok
        }),
        _ => true,
    }
}

fn allocatable(node: &Value) -> BTreeMap<String, i128> {
    node.pointer("/status/allocatable")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().and_then(quantity::parse).map(|q| (k.clone(), q)))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a node cannot take a pod: (reason, resolvable by preemption).
fn node_failures(
    pod: &Value,
    node: &Value,
    capacity: &BTreeMap<String, i128>,
    requests: &BTreeMap<String, i128>,
    used: Option<&BTreeMap<String, i128>>,
) -> Vec<(String, bool)> {
    let mut reasons = Vec::new();
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        reasons.push(("node(s) were unschedulable".to_string(), false));
        return reasons;
    }
    if !affinity_matches(pod, node) {
        reasons.push((
            "node(s) didn't match Pod's node affinity/selector".to_string(),
            false,
        ));
        return reasons;
    }
    let tolerations = pod
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for taint in node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let effect = taint.get("effect").and_then(Value::as_str).unwrap_or("");
        if matches!(effect, "NoSchedule" | "NoExecute") && !tolerates(&tolerations, taint) {
            reasons.push((
                format!(
                    "node(s) had untolerated taint {{{}: {}}}",
                    taint.get("key").and_then(Value::as_str).unwrap_or(""),
                    taint.get("value").and_then(Value::as_str).unwrap_or("")
                ),
                false,
            ));
            return reasons;
        }
    }
    let empty = BTreeMap::new();
    let used = used.unwrap_or(&empty);
    if used.get("pods").copied().unwrap_or(0) + 1000
        > capacity.get("pods").copied().unwrap_or(110_000)
    {
        reasons.push(("Too many pods".to_string(), true));
    }
    for (resource, want) in requests {
        if *want <= 0 {
            continue;
        }
        let have = capacity.get(resource).copied().unwrap_or(0);
        if used.get(resource).copied().unwrap_or(0) + want > have {
            reasons.push((format!("Insufficient {resource}"), true));
        }
    }
    reasons
}

fn histogram(counts: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = counts
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.sort();
    parts.join(", ")
}

/// A node and what it can hold (parsed once per pass).
struct Node {
    object: Arc<Value>,
    allocatable: BTreeMap<String, i128>,
}

struct Scheduler {
    state: Arc<State>,
    cache: Cache,
    queue: Queue,
}

impl Scheduler {
    fn pods(&self) -> GroupResource {
        GroupResource::new("", "pods")
    }

    fn observe(&mut self, pod: &Value, deleted: bool) -> bool {
        let uid = meta::uid(pod).unwrap_or("").to_string();
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if deleted || is_terminal(pod) {
            self.cache.last_message.remove(&uid);
            return self.cache.remove(&uid);
        }
        if !node.is_empty() {
            let requests = pod_requests(pod.get("spec").unwrap_or(&Value::Null)).0;
            self.cache.add(&uid, node, requests);
        }
        false
    }

    fn needs_scheduling(pod: &Value) -> bool {
        pod.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
            && !meta::is_deleting(pod)
            && !is_terminal(pod)
            && pod
                .pointer("/spec/schedulerName")
                .and_then(Value::as_str)
                .unwrap_or("default-scheduler")
                == "default-scheduler"
    }

    /// Whether some node has room for one more pod (a pod fits nowhere while none has).
    fn any_pod_slot(&self, nodes: &[Node]) -> bool {
        nodes.iter().any(|node| {
            let used = self
                .cache
                .used
                .get(meta::name(&node.object))
                .and_then(|u| u.get("pods"))
                .copied()
                .unwrap_or(0);
            node.object
                .pointer("/spec/unschedulable")
                .and_then(Value::as_bool)
                != Some(true)
                && used + 1000 <= node.allocatable.get("pods").copied().unwrap_or(110_000)
        })
    }

    /// Tries the active queue in arrival order; pods that fit nowhere are set aside.
    fn schedule_queued(&mut self) {
        if self.queue.active.is_empty() {
            return;
        }
        let nodes = self.nodes();
        let mut room = self.any_pod_slot(&nodes);
        while let Some((seq, (uid, key))) = self.queue.active.pop_first() {
            let pod = match self.state.store.get(&key) {
                Some(pod)
                    if meta::uid(&pod) == Some(uid.as_str()) && Self::needs_scheduling(&pod) =>
                {
                    pod
                }
                _ => {
                    self.queue.order.remove(&uid);
                    continue;
                }
            };
            // Every node is full: the pod waits with the reason it was last given.
            if !room && self.cache.last_message.contains_key(&uid) {
                self.queue.set_aside(seq, (uid, key));
                continue;
            }
            if self.schedule(&pod, &nodes) {
                self.queue.order.remove(&uid);
                room = self.any_pod_slot(&nodes);
            } else {
                self.queue.set_aside(seq, (uid, key));
            }
        }
    }

    fn nodes(&self) -> Vec<Node> {
        self.state
            .store
            .list(&GroupResource::new("", "nodes"), None)
            .0
            .into_iter()
            .map(|object| Node {
                allocatable: allocatable(&object),
                object,
            })
            .collect()
    }

    /// Follows one change of the store.
    fn on_event(&mut self, event: &StoreEvent) {
        if event.key.resource == self.pods() {
            let deleted = event.event_type == EventType::Deleted;
            if self.observe(&event.object, deleted) {
                // Room was freed: whatever was set aside may fit now.
                self.queue.retry_all();
            }
            let uid = meta::uid(&event.object).unwrap_or("");
            if deleted || !Self::needs_scheduling(&event.object) {
                self.queue.forget(uid);
            } else {
                let spec_changed = event
                    .old
                    .as_ref()
                    .is_some_and(|old| old.get("spec") != event.object.get("spec"));
                self.queue.add(uid, &event.key, spec_changed);
            }
        } else if event.key.resource == GroupResource::new("", "nodes")
            || event.key.resource == GroupResource::new("", "persistentvolumeclaims")
        {
            self.cache.last_message.clear();
            self.queue.retry_all();
        }
    }

    /// Builds the capacity accounting and the queue from the store.
    fn load(&mut self) {
        self.cache = Cache::default();
        let (pods, _) = self.state.store.list(&self.pods(), None);
        for pod in &pods {
            self.observe(pod, false);
            if Self::needs_scheduling(pod) {
                let key = ObjectKey::new(self.pods(), meta::namespace(pod), meta::name(pod));
                self.queue.add(meta::uid(pod).unwrap_or(""), &key, false);
            }
        }
        self.queue.retry_all();
    }

    fn missing_claim(&self, pod: &Value) -> Option<String> {
        let ns = meta::namespace(pod);
        for v in pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(claim) = v
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
            {
                let key =
                    ObjectKey::new(GroupResource::new("", "persistentvolumeclaims"), ns, claim);
                match self.state.store.get(&key) {
                    None => return Some(format!("persistentvolumeclaim {claim:?} not found")),
                    Some(pvc) if meta::is_deleting(&pvc) => {
                        return Some(format!("persistentvolumeclaim {claim:?} is being deleted"));
                    }
                    Some(_) => {}
                }
            }
        }
        None
    }

    /// Binds a pod to the best node; false (with PodScheduled=False) when it fits nowhere.
    fn schedule(&mut self, pod: &Arc<Value>, nodes: &[Node]) -> bool {
        let total = nodes.len();
        let requests = pod_requests(pod.get("spec").unwrap_or(&Value::Null)).0;
        let message = if let Some(problem) = self.missing_claim(pod) {
            Err(format!(
                "0/{total} nodes are available: {problem}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
            ))
        } else {
            let mut best: Option<(String, i128)> = None;
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            let mut preemption: BTreeMap<String, usize> = BTreeMap::new();
            for node in nodes {
                let name = meta::name(&node.object).to_string();
                let used = self.cache.used.get(&name);
                let failures = node_failures(pod, &node.object, &node.allocatable, &requests, used);
                if failures.is_empty() {
                    // Spread: the node with the most free CPU wins.
                    let free = node.allocatable.get("cpu").copied().unwrap_or(0)
                        - used.and_then(|u| u.get("cpu")).copied().unwrap_or(0);
                    if best.as_ref().is_none_or(|(_, f)| free > *f) {
                        best = Some((name, free));
                    }
                    continue;
                }
                let resolvable = failures.iter().all(|(_, r)| *r);
                for (reason, _) in failures {
                    *reasons.entry(reason).or_default() += 1;
                }
                let p = if resolvable {
                    "No preemption victims found for incoming pod"
                } else {
                    "Preemption is not helpful for scheduling"
                };
                *preemption.entry(p.to_string()).or_default() += 1;
            }
            match best {
                Some((node, _)) => Ok(node),
                None => Err(format!(
                    "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {}.",
                    histogram(&reasons),
                    histogram(&preemption)
                )),
            }
        };
        let key = ObjectKey::new(self.pods(), meta::namespace(pod), meta::name(pod));
        let uid = meta::uid(pod).unwrap_or("").to_string();
        let now = meta::now();
        match message {
            Ok(node) => {
                let bound = ops::mutate(&self.state, &key, |p| {
                    if !Self::needs_scheduling(p) || meta::uid(p) != Some(uid.as_str()) {
                        return false;
                    }
                    p["spec"]["nodeName"] = json!(node);
                    set_condition(
                        p,
                        json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
                    );
                    true
                });
                if let Ok(bound) = bound
                    && bound.pointer("/spec/nodeName").and_then(Value::as_str)
                        == Some(node.as_str())
                {
                    self.cache.add(&uid, &node, requests);
                    self.cache.last_message.remove(&uid);
                    events::record(
                        &self.state,
                        &bound,
                        EventKind::Normal,
                        "Scheduled",
                        &format!(
                            "Successfully assigned {}/{} to {node}",
                            meta::namespace(pod),
                            meta::name(pod)
                        ),
                        Source {
                            component: "default-scheduler",
                            host: None,
                        },
                        None,
                    );
                }
                // Bound, or no longer waiting (deleted or bound by someone else meanwhile).
                true
            }
            Err(text) => {
                if self.cache.last_message.get(&uid) == Some(&text) {
                    return false;
                }
                self.cache.last_message.insert(uid.clone(), text.clone());
                let written = ops::mutate(&self.state, &key, |p| {
                    if meta::uid(p) != Some(uid.as_str()) {
                        return false;
                    }
                    set_condition(
                        p,
                        json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": text, "lastProbeTime": null, "lastTransitionTime": now}),
                    );
                    true
                });
                if let Ok(p) = written {
                    events::record(
                        &self.state,
                        &p,
                        EventKind::Warning,
                        "FailedScheduling",
                        &text,
                        Source {
                            component: "default-scheduler",
                            host: None,
                        },
                        None,
                    );
                }
                false
            }
        }
    }
}

/// Sets a pod condition by type, keeping the transition time when the status is unchanged.
pub fn set_condition(pod: &mut Value, condition: Value) {
    if pod.get("status").is_none_or(|s| !s.is_object()) {
        pod["status"] = json!({});
    }
    let conditions = pod["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(list)) = conditions else {
        return;
    };
    let kind = condition.get("type").cloned();
    match list.iter_mut().find(|c| c.get("type") == kind.as_ref()) {
        Some(existing) => {
            let mut next = condition;
            if existing.get("status") == next.get("status")
                && let Some(t) = existing.get("lastTransitionTime")
            {
                next["lastTransitionTime"] = t.clone();
            }
            *existing = next;
        }
        None => list.push(condition),
    }
}

/// The most changes taken in before a pass over the queue.
const BATCH: usize = 1024;

/// Runs the scheduler until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: watch::Receiver<bool>) {
    let mut rx = state.store.follow();
    let mut scheduler = Scheduler {
        state: state.clone(),
        cache: Cache::default(),
        queue: Queue::default(),
    };
    scheduler.load();
    scheduler.schedule_queued();
    loop {
        let received = tokio::select! {
            _ = shutdown.changed() => return,
            received = rx.recv() => received,
        };
        match received {
            Some(event) => scheduler.on_event(&event),
            None => return,
        }
        // The changes already announced first (a bounded number, to yield now and then): a
        // burst of changes costs one pass.
        for _ in 0..BATCH {
            match rx.try_recv() {
                Ok(event) => scheduler.on_event(&event),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        scheduler.schedule_queued();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(cpu: &str, labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"taints": taints}, "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "110"}}})
    }

    fn failures_on(
        pod: &Value,
        node: &Value,
        requests: &BTreeMap<String, i128>,
    ) -> Vec<(String, bool)> {
        node_failures(pod, node, &allocatable(node), requests, None)
    }

    #[test]
    fn failures_name_the_reason() {
        let pod = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "2"}}}], "nodeSelector": {"gpu": "yes"}}});
        let requests = pod_requests(&pod["spec"]).0;
        let reasons = failures_on(&pod, &node("4", json!({}), json!([])), &requests);
        assert_eq!(
            reasons,
            vec![(
                "node(s) didn't match Pod's node affinity/selector".to_string(),
                false
            )]
        );
        let reasons = failures_on(
            &pod,
            &node("1", json!({"gpu": "yes"}), json!([])),
            &requests,
        );
        assert_eq!(reasons, vec![("Insufficient cpu".to_string(), true)]);
        let reasons = failures_on(
            &pod,
            &node(
                "4",
                json!({"gpu": "yes"}),
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            ),
            &requests,
        );
        assert_eq!(
            reasons,
            vec![(
                "node(s) had untolerated taint {dedicated: gpu}".to_string(),
                false
            )]
        );
        let mut tolerant = pod.clone();
        tolerant["spec"]["tolerations"] = json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
        let reasons = failures_on(
            &tolerant,
            &node(
                "4",
                json!({"gpu": "yes"}),
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            ),
            &requests,
        );
        assert!(reasons.is_empty());
    }

    #[test]
    fn the_queue_serves_pods_in_arrival_order() {
        let key = |name: &str| ObjectKey::new(GroupResource::new("", "pods"), "default", name);
        let mut queue = Queue::default();
        queue.add("a", &key("a"), false);
        queue.add("b", &key("b"), false);
        queue.add("c", &key("c"), false);
        queue.add("a", &key("a"), true);
        let first = queue.active.pop_first().expect("a");
        queue.set_aside(first.0, first.1);
        let second = queue.active.pop_first().expect("b");
        queue.set_aside(second.0, second.1);
        // Changes to a pod set aside bring it back; others wait for room.
        queue.add("b", &key("b"), true);
        let names = |q: &BTreeMap<u64, (String, ObjectKey)>| -> Vec<String> {
            q.values().map(|(uid, _)| uid.clone()).collect()
        };
        assert_eq!(names(&queue.active), vec!["b", "c"]);
        assert_eq!(names(&queue.unschedulable), vec!["a"]);
        queue.retry_all();
        assert_eq!(names(&queue.active), vec!["a", "b", "c"]);
        queue.forget("b");
        assert_eq!(names(&queue.active), vec!["a", "c"]);
        assert!(!queue.order.contains_key("b"));
    }

    #[test]
    fn histogram_is_sorted_like_the_scheduler() {
        let mut counts = BTreeMap::new();
        counts.insert(
            "node(s) didn't match Pod's node affinity/selector".to_string(),
            2,
        );
        counts.insert("Insufficient cpu".to_string(), 1);
        assert_eq!(
            histogram(&counts),
            "1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector"
        );
    }
}
