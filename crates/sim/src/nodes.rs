//! The Node objects of the configured nodes, as a healthy kubelet reports them: created at
//! start and written again when a lost node is restored.

use serde_json::{Value, json};

use crate::state::State;
use crate::store::meta;

/// The Node object of a configured node (status as a healthy kubelet reports it).
pub(crate) fn node_object(state: &State, name: &str, existing: &Value) -> Value {
    let index = state
        .config
        .nodes
        .iter()
        .position(|n| n.name == name)
        .unwrap_or(0);
    let Some(cfg) = state.config.nodes.get(index) else {
        return existing.clone();
    };
    let mut labels = json!({
        "kubernetes.io/hostname": cfg.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    });
    for (k, v) in &cfg.labels {
        labels[k] = json!(v);
    }
    let mut capacity = json!({
        "cpu": cfg.cpu,
        "memory": cfg.memory,
        "pods": cfg.pods.to_string(),
        "ephemeral-storage": "100Gi",
        "hugepages-2Mi": "0",
    });
    if cfg.nvidia_gpus > 0 {
        capacity["nvidia.com/gpu"] = json!(cfg.nvidia_gpus.to_string());
    }
    if cfg.amd_gpus > 0 {
        capacity["amd.com/gpu"] = json!(cfg.amd_gpus.to_string());
    }
    let taints: Vec<Value> = cfg
        .taints
        .iter()
        .map(|t| {
            let mut taint = json!({"key": t.key, "effect": t.effect});
            if !t.value.is_empty() {
                taint["value"] = json!(t.value);
            }
            taint
        })
        .collect();
    let now = meta::now();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| json!({"type": kind, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now, "lastTransitionTime": now});
    let mut node = existing.clone();
    if !node.is_object() {
        node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": cfg.name}});
    }
    node["metadata"]["labels"] = labels;
    node["metadata"]["annotations"] = json!({"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"});
    node["spec"] = json!({"podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]});
    if !taints.is_empty() {
        node["spec"]["taints"] = json!(taints);
    }
    node["status"] = json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": format!("10.0.0.{}", index + 2)},
            {"type": "Hostname", "address": cfg.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": format!("{:032x}", index + 1),
            "systemUUID": format!("00000000-0000-0000-0000-{:012x}", index + 1),
            "bootID": format!("00000000-0000-0000-0000-{:012x}", index + 101),
            "kernelVersion": "6.8.0-sim",
            "osImage": "kubeferry simulated node",
            "containerRuntimeVersion": "containerd://1.7.27",
            "kubeletVersion": crate::config::KUBERNETES_VERSION,
            "kubeProxyVersion": crate::config::KUBERNETES_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    });
    node
}
