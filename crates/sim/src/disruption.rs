//! Disruptions: eviction by the kubelet (node pressure) and by the Eviction API, losing a node,
//! draining it, and restoring it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::controllers::kubelet::pod::Disruption;
use crate::controllers::scheduler::set_condition;
use crate::error::ApiError;
use crate::ops::{self, DeleteOptions, Propagation};
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{ObjectKey, meta};

const PRESSURE_MESSAGE: &str =
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. ";

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn disruption_condition(reason: &str, message: &str) -> Value {
    json!({"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message, "lastProbeTime": null, "lastTransitionTime": meta::now()})
}

/// Evicts a pod as the kubelet does under node pressure: its containers are killed, the pod
/// fails with reason `Evicted` and a DisruptionTarget condition (TerminationByKubelet).
pub fn evict_pod(state: &State, namespace: &str, name: &str) -> Result<(), ApiError> {
    let key = ObjectKey::new(pods(), namespace, name);
    let pod = state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key.resource, name))?;
    let uid = meta::uid(&pod).unwrap_or("").to_string();
    let grace = Duration::from_secs(
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
            .max(0) as u64,
    );
    let disruption = Disruption {
        reason: "Evicted".into(),
        message: PRESSURE_MESSAGE.into(),
        condition: Some((
            "TerminationByKubelet".into(),
            PRESSURE_MESSAGE.trim_end().into(),
        )),
        grace,
        silent: false,
    };
    if !state.kubelet.disrupt(&uid, disruption) {
        // No container runs (pending or finished): the kubelet only records the eviction.
        ops::mutate(state, &key, |p| {
            if matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            ) {
                return false;
            }
            p["status"]["phase"] = json!("Failed");
            p["status"]["reason"] = json!("Evicted");
            p["status"]["message"] = json!(PRESSURE_MESSAGE);
            set_condition(
                p,
                disruption_condition("TerminationByKubelet", PRESSURE_MESSAGE.trim_end()),
            );
            true
        })?;
    }
    Ok(())
}

/// The Eviction API (`pods/eviction`): a DisruptionTarget condition (EvictionByEvictionAPI)
/// and a graceful delete.
pub fn evict_via_api(state: &State, pod: &Value, grace: Option<i64>) -> Result<(), ApiError> {
    mark_and_delete(
        state,
        pod,
        disruption_condition("EvictionByEvictionAPI", "Eviction API: evicting"),
        grace,
    )
}

/// The message kube-scheduler puts on a pod it preempts.
const PREEMPTION_MESSAGE: &str =
    "default-scheduler: preempting to accommodate a higher priority pod";

/// Preempts a pod as kube-scheduler does for a higher-priority one: a DisruptionTarget
/// condition (PreemptionByScheduler), then a graceful delete.
pub fn preempt_pod(state: &State, namespace: &str, name: &str) -> Result<(), ApiError> {
    let key = ObjectKey::new(pods(), namespace, name);
    let pod = state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key.resource, name))?;
    mark_and_delete(
        state,
        &pod,
        disruption_condition("PreemptionByScheduler", PREEMPTION_MESSAGE),
        None,
    )
}

/// Puts a DisruptionTarget `condition` on a pod, then deletes it gracefully (the pod's own
/// grace period unless `grace` is given), only if it is still the same pod.
fn mark_and_delete(
    state: &State,
    pod: &Value,
    condition: Value,
    grace: Option<i64>,
) -> Result<(), ApiError> {
    let key = ObjectKey::new(pods(), meta::namespace(pod), meta::name(pod));
    ops::mutate(state, &key, |p| {
        set_condition(p, condition);
        true
    })?;
    let rt = state
        .registry
        .get(&pods())
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    let opts = DeleteOptions {
        grace_period: grace,
        propagation: Some(Propagation::Background),
        uid: meta::uid(pod).map(str::to_string),
        ..DeleteOptions::default()
    };
    ops::delete(state, &rt, &key, &opts)?;
    Ok(())
}

fn node_key(name: &str) -> ObjectKey {
    ObjectKey::new(GroupResource::new("", "nodes"), "", name)
}

fn pods_on(state: &State, node: &str) -> Vec<Arc<Value>> {
    state
        .store
        .list(&pods(), None)
        .0
        .into_iter()
        .filter(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
        .collect()
}

/// Loses a node: it turns NotReady (Unknown) with the unreachable taints, its containers die
/// without reporting, and its pods fail with reason `NodeLost` and a DisruptionTarget
/// condition (DeletionByTaintManager) and are deleted.
pub fn lose_node(state: &State, name: &str) -> Result<(), ApiError> {
    let key = node_key(name);
    let now = meta::now();
    ops::mutate(state, &key, |node| {
        if let Some(list) = node
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            for c in list.iter_mut() {
                c["status"] = json!("Unknown");
                c["reason"] = json!("NodeStatusUnknown");
                c["message"] = json!("Kubelet stopped posting node status.");
                c["lastTransitionTime"] = json!(now);
            }
        }
        let mut taints: Vec<Value> = node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for effect in ["NoSchedule", "NoExecute"] {
            let taint = json!({"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": now});
            if !taints
                .iter()
                .any(|t| t.get("key") == taint.get("key") && t.get("effect") == taint.get("effect"))
            {
                taints.push(taint);
            }
        }
        node["spec"]["taints"] = json!(taints);
        true
    })?;
    state.kubelet.set_down(name, true);
    for uid in state.kubelet.pods_on(name) {
        state.kubelet.disrupt(
            &uid,
            Disruption {
                reason: "NodeLost".into(),
                message: String::new(),
                condition: None,
                grace: Duration::ZERO,
                silent: true,
            },
        );
    }
    let rt = state
        .registry
        .get(&pods())
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    for pod in pods_on(state, name) {
        if matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        ) {
            continue;
        }
        let pkey = ObjectKey::new(pods(), meta::namespace(&pod), meta::name(&pod));
        let message = format!(
            "Node {name} which was running pod {} is unresponsive",
            meta::name(&pod)
        );
        let _ = ops::mutate(state, &pkey, |p| {
            p["status"]["phase"] = json!("Failed");
            p["status"]["reason"] = json!("NodeLost");
            p["status"]["message"] = json!(message);
            set_condition(
                p,
                disruption_condition(
                    "DeletionByTaintManager",
                    "Taint manager: deleting due to NoExecute taint",
                ),
            );
            if let Some(list) = p
                .pointer_mut("/status/containerStatuses")
                .and_then(Value::as_array_mut)
            {
                for c in list.iter_mut() {
                    if c.pointer("/state/terminated").is_none() {
                        c["state"] = json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "The container could not be located when the pod was terminated", "finishedAt": meta::now()}});
                        c["ready"] = json!(false);
                        c["started"] = json!(false);
                    }
                }
            }
            true
        });
        let opts = DeleteOptions {
            grace_period: Some(0),
            propagation: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        let _ = ops::delete(state, &rt, &pkey, &opts);
    }
    Ok(())
}

/// Drains a node: cordons it and evicts every pod through the Eviction API.
pub fn drain_node(state: &State, name: &str) -> Result<(), ApiError> {
    ops::mutate(state, &node_key(name), |node| {
        node["spec"]["unschedulable"] = json!(true);
        true
    })?;
    for pod in pods_on(state, name) {
        if !meta::is_deleting(&pod) {
            evict_via_api(state, &pod, None)?;
        }
    }
    Ok(())
}

/// Brings a node back: Ready, untainted, schedulable, its kubelet running pods again.
pub fn restore_node(state: &State, name: &str) -> Result<(), ApiError> {
    let now = meta::now();
    ops::mutate(state, &node_key(name), |node| {
        *node = crate::nodes::node_object(state, name, node);
        if let Some(list) = node
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            for c in list.iter_mut() {
                c["lastTransitionTime"] = json!(now);
            }
        }
        true
    })?;
    state.kubelet.set_down(name, false);
    Ok(())
}
