//! ResourceQuota admission, as the API server's quota plugin judges a create: a pod's requests,
//! limits and count, and any object's `count/<resource>.<group>`, against every quota of its
//! namespace. Its words are Kubernetes' (`exceeded quota: ...`, `failed quota: ...`). A quota's
//! `status` is not kept: usage is counted at each admission from the objects stored.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;
use crate::quantity;
use crate::resources::{Behavior, GroupResource, ResourceType};
use crate::state::State;

/// The quota resources a pod's containers are charged with, and the field of their resources
/// each reads.
const COMPUTE: [(&str, &str, &str); 6] = [
    ("cpu", "requests", "cpu"),
    ("requests.cpu", "requests", "cpu"),
    ("memory", "requests", "memory"),
    ("requests.memory", "requests", "memory"),
    ("limits.cpu", "limits", "cpu"),
    ("limits.memory", "limits", "memory"),
];

/// Refuses the create of `object` (named `name`, or its generateName prefix) in `namespace`
/// when it would take any quota of the namespace past its hard limit, or when a pod leaves
/// unset a resource a quota limits.
pub(crate) fn admit(
    state: &State,
    rt: &ResourceType,
    namespace: &str,
    object: &Value,
    name: &str,
) -> Result<(), ApiError> {
    let (quotas, _) = state
        .store
        .list(&GroupResource::new("", "resourcequotas"), Some(namespace));
    if quotas.is_empty() {
        return Ok(());
    }
    let mut quotas: Vec<_> = quotas.iter().collect();
    quotas.sort_by_key(|quota| {
        quota
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let forbidden = |message: String| {
        ApiError::forbidden(
            &rt.group_resource(),
            name,
            format!(
                "{} {name:?} is forbidden: {message}",
                rt.group_resource().qualified()
            ),
        )
    };
    for quota in quotas {
        let quota_name = quota
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let hard: BTreeMap<&str, i128> = quota
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(resource, value)| {
                Some((resource.as_str(), quantity::parse(value.as_str()?)?))
            })
            .collect();
        if rt.behavior == Behavior::Pod {
            let unset = unset_compute(object, &hard);
            if !unset.is_empty() {
                return Err(forbidden(format!(
                    "failed quota: {quota_name}: must specify {}",
                    unset.join("; ")
                )));
            }
        }
        let requested = charge(rt, object, &hard);
        if requested.is_empty() {
            continue;
        }
        let used = usage(state, namespace, &hard);
        let exceeded: Vec<&str> = requested
            .iter()
            .filter(|(resource, amount)| {
                used.get(*resource).copied().unwrap_or(0) + **amount > hard[*resource]
            })
            .map(|(resource, _)| *resource)
            .collect();
        if exceeded.is_empty() {
            continue;
        }
        let list = |amounts: &dyn Fn(&str) -> i128| {
            exceeded
                .iter()
                .map(|resource| format!("{resource}={}", shown(resource, amounts(resource))))
                .collect::<Vec<_>>()
                .join(",")
        };
        return Err(forbidden(format!(
            "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
            list(&|r| requested[r]),
            list(&|r| used.get(r).copied().unwrap_or(0)),
            list(&|r| hard[r]),
        )));
    }
    Ok(())
}

/// The compute resources `hard` limits that a container of the pod leaves unset, in
/// Kubernetes' words: `limits.cpu for: main`.
fn unset_compute(pod: &Value, hard: &BTreeMap<&str, i128>) -> Vec<String> {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut unset = Vec::new();
    for (resource, field, key) in COMPUTE {
        if !hard.contains_key(resource) {
            continue;
        }
        let missing: Vec<&str> = containers
            .iter()
            .filter(|container| {
                container
                    .pointer(&format!("/resources/{field}/{key}"))
                    .is_none()
            })
            .map(|container| container["name"].as_str().unwrap_or_default())
            .collect();
        if !missing.is_empty() {
            unset.push(format!("{resource} for: {}", missing.join(",")));
        }
    }
    unset
}

/// What creating `object` charges against the resources `hard` limits, in milli-units.
fn charge<'h>(
    rt: &ResourceType,
    object: &Value,
    hard: &BTreeMap<&'h str, i128>,
) -> BTreeMap<&'h str, i128> {
    let mut charged = BTreeMap::new();
    let count = format!("count/{}", rt.group_resource().qualified());
    for resource in hard.keys() {
        let amount = if *resource == count || (rt.behavior == Behavior::Pod && *resource == "pods")
        {
            Some(1000)
        } else if rt.behavior == Behavior::Pod {
            compute(object, resource)
        } else {
            None
        };
        if let Some(amount) = amount {
            charged.insert(*resource, amount);
        }
    }
    charged
}

/// A pod's charge of one compute resource: the sum over its containers (init containers, which
/// run one at a time, as their largest).
fn compute(pod: &Value, resource: &str) -> Option<i128> {
    let (_, field, key) = COMPUTE.iter().find(|(name, _, _)| *name == resource)?;
    let amount = |container: &Value| {
        container
            .pointer(&format!("/resources/{field}/{key}"))
            .and_then(Value::as_str)
            .and_then(quantity::parse)
            .unwrap_or(0)
    };
    let sum: i128 = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(amount)
        .sum();
    let init = pod
        .pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(amount)
        .max()
        .unwrap_or(0);
    Some(sum.max(init))
}

/// What the namespace's objects use now of each resource `hard` limits: pods that have not
/// ended count their compute and themselves; `count/` resources count their objects.
fn usage<'h>(
    state: &State,
    namespace: &str,
    hard: &BTreeMap<&'h str, i128>,
) -> BTreeMap<&'h str, i128> {
    let (pods, _) = state
        .store
        .list(&GroupResource::new("", "pods"), Some(namespace));
    let running: Vec<&Value> = pods
        .iter()
        .map(|pod| pod.as_ref())
        .filter(|pod| {
            !matches!(
                pod.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    let mut used = BTreeMap::new();
    for resource in hard.keys() {
        let amount = if *resource == "pods" || *resource == "count/pods" {
            Some(running.len() as i128 * 1000)
        } else if let Some(counted) = resource.strip_prefix("count/") {
            let (resource, group) = counted.split_once('.').unwrap_or((counted, ""));
            let (objects, _) = state
                .store
                .list(&GroupResource::new(group, resource), Some(namespace));
            Some(objects.len() as i128 * 1000)
        } else {
            running
                .iter()
                .map(|pod| compute(pod, resource))
                .sum::<Option<i128>>()
        };
        if let Some(amount) = amount {
            used.insert(*resource, amount);
        }
    }
    used
}

/// An amount as Kubernetes prints it in a quota's words.
fn shown(resource: &str, milli: i128) -> String {
    if resource.ends_with("memory") {
        quantity::format_bytes(milli)
    } else {
        quantity::format_cpu(milli)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_kubernetes_prints_them() {
        assert_eq!(shown("requests.cpu", 500), "500m");
        assert_eq!(shown("limits.cpu", 2000), "2");
        assert_eq!(shown("requests.memory", 64 * 1024 * 1024 * 1000), "64Mi");
        assert_eq!(shown("pods", 3000), "3");
        assert_eq!(shown("count/jobs.batch", 0), "0");
    }
}
