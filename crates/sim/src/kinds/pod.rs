//! Pods: spec defaults (shared with pod templates), validation, resource requests and QoS.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::is_dns_label;
use crate::error::FieldError;
use crate::quantity;

fn image_pull_policy(image: &str) -> &'static str {
    // The tag is after the last ':' that follows the last '/'.
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    match last.rsplit_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(c: &mut Value) {
    let Some(map) = c.as_object_mut() else {
        return;
    };
    let image = map
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    map.entry("imagePullPolicy")
        .or_insert_with(|| json!(image_pull_policy(&image)));
    map.entry("terminationMessagePath")
        .or_insert_with(|| json!("/dev/termination-log"));
    map.entry("terminationMessagePolicy")
        .or_insert_with(|| json!("File"));
    let resources = map.entry("resources").or_insert_with(|| json!({}));
    // Requests default to limits, as the real defaulting does.
    if let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() {
        let requests = resources
            .as_object_mut()
            .map(|r| r.entry("requests").or_insert_with(|| json!({})));
        if let Some(Value::Object(req)) = requests {
            for (k, v) in limits {
                req.entry(k).or_insert(v);
            }
        }
    }
}

/// Defaults of a pod spec (pods and pod templates).
pub(crate) fn default_pod_spec(spec: &mut Value, restart_default: Option<&str>) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    if let Some(policy) = restart_default {
        map.entry("restartPolicy").or_insert_with(|| json!(policy));
    }
    map.entry("dnsPolicy")
        .or_insert_with(|| json!("ClusterFirst"));
    map.entry("schedulerName")
        .or_insert_with(|| json!("default-scheduler"));
    map.entry("securityContext").or_insert_with(|| json!({}));
    map.entry("terminationGracePeriodSeconds")
        .or_insert_with(|| json!(30));
    let sa = map
        .get("serviceAccountName")
        .or_else(|| map.get("serviceAccount"))
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    map.insert("serviceAccountName".into(), json!(sa));
    map.insert("serviceAccount".into(), json!(sa));
    for field in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = map.get_mut(field) {
            cs.iter_mut().for_each(default_container);
        }
    }
}

/// Defaults of a pod on create, including those admission plugins add.
pub(crate) fn default_pod(pod: &mut Value) {
    if pod.get("spec").is_none() {
        pod["spec"] = json!({});
    }
    default_pod_spec(&mut pod["spec"], Some("Always"));
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.entry("enableServiceLinks")
            .or_insert_with(|| json!(true));
        spec.entry("preemptionPolicy")
            .or_insert_with(|| json!("PreemptLowerPriority"));
        spec.entry("priority").or_insert_with(|| json!(0));
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if let Some(list) = tolerations.as_array_mut() {
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            ] {
                let present = list
                    .iter()
                    .any(|t| t.get("key").and_then(Value::as_str) == Some(key));
                if !present {
                    list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
                }
            }
        }
    }
    let qos = qos_class(&pod["spec"]);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
}

pub(crate) fn validate_pod_spec(
    spec: &Value,
    path: &str,
    allowed_restart: &[&str],
    errors: &mut Vec<FieldError>,
) {
    let containers = spec.get("containers").and_then(Value::as_array);
    match containers {
        None => errors.push(FieldError::required(format!("{path}.containers"), "")),
        Some(cs) if cs.is_empty() => {
            errors.push(FieldError::required(format!("{path}.containers"), ""))
        }
        Some(_) => {}
    }
    let mut seen = Vec::new();
    for field in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let cpath = format!("{path}.{field}[{i}]");
            match c.get("name").and_then(Value::as_str) {
                None | Some("") => errors.push(FieldError::required(format!("{cpath}.name"), "")),
                Some(name) if !is_dns_label(name) => errors.push(FieldError::invalid(
                    format!("{cpath}.name"),
                    &json!(name),
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )),
                Some(name) if seen.contains(&name) => errors.push(FieldError {
                    field: format!("{cpath}.name"),
                    reason: "FieldValueDuplicate",
                    message: format!("Duplicate value: {name:?}"),
                }),
                Some(name) => seen.push(name),
            }
            // A container's own restartPolicy makes an init container a native sidecar.
            match (field, c.get("restartPolicy").and_then(Value::as_str)) {
                (_, None) | ("initContainers", Some("Always")) => {}
                ("initContainers", Some(other)) => errors.push(FieldError::not_supported(
                    format!("{cpath}.restartPolicy"),
                    other,
                    &["Always"],
                )),
                (_, Some(_)) => errors.push(FieldError::forbidden(
                    format!("{cpath}.restartPolicy"),
                    "may not be set for non-init containers",
                )),
            }
            if c.get("image")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .is_empty()
            {
                errors.push(FieldError::required(format!("{cpath}.image"), ""));
            }
            for (j, env) in c
                .get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if env
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    errors.push(FieldError::required(format!("{cpath}.env[{j}].name"), ""));
                }
            }
            for (kind, q) in c
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                if q.as_str().and_then(quantity::parse).is_none() && !q.is_number() {
                    errors.push(FieldError::invalid(
                        format!("{cpath}.resources.limits[{kind}]"),
                        q,
                        "must be a valid quantity",
                    ));
                }
            }
        }
    }
    match spec.get("restartPolicy").and_then(Value::as_str) {
        Some(p) if allowed_restart.contains(&p) => {}
        Some(p) => errors.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            p,
            allowed_restart,
        )),
        None => errors.push(FieldError::required(
            format!("{path}.restartPolicy"),
            &format!(
                "valid values: {}",
                allowed_restart
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The spec with the fields an update may change blanked out.
fn immutable_part(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(m) = s.as_object_mut() {
        m.remove("activeDeadlineSeconds");
        m.remove("tolerations");
        m.remove("terminationGracePeriodSeconds");
        // The scheduler binds pods; nodeName set by a binding is not a user change.
        m.remove("nodeName");
        for field in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = m.get_mut(field) {
                for c in cs {
                    if let Some(cm) = c.as_object_mut() {
                        cm.remove("image");
                    }
                }
            }
        }
    }
    s
}

pub(crate) fn validate_pod(pod: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let spec = pod.get("spec").cloned().unwrap_or_else(|| json!({}));
    validate_pod_spec(&spec, "spec", &["Always", "OnFailure", "Never"], errors);
    if let Some(old) = old {
        let old_spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
        if immutable_part(&spec) != immutable_part(&old_spec) {
            errors.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }
}

/// What a pod asks of a node, in milli-units per resource name (`cpu`, `memory`,
/// `nvidia.com/gpu`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResources(pub BTreeMap<String, i128>);

fn container_requests(c: &Value) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    let requests = c.pointer("/resources/requests").and_then(Value::as_object);
    let limits = c.pointer("/resources/limits").and_then(Value::as_object);
    for map in [limits, requests].into_iter().flatten() {
        for (k, v) in map {
            let parsed = match v {
                Value::String(s) => quantity::parse(s),
                Value::Number(n) => n.as_f64().map(|f| (f * 1000.0).ceil() as i128),
                _ => None,
            };
            if let Some(q) = parsed {
                // Requests win over limits (inserted second).
                out.insert(k.clone(), q);
            }
        }
    }
    out
}

/// The requests of a pod spec: the sum over containers, or the largest init container when
/// larger, as the scheduler computes them.
pub fn pod_requests(spec: &Value) -> PodResources {
    let mut total: BTreeMap<String, i128> = BTreeMap::new();
    for c in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, v) in container_requests(c) {
            *total.entry(k).or_default() += v;
        }
    }
    for c in spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, v) in container_requests(c) {
            let entry = total.entry(k).or_default();
            *entry = (*entry).max(v);
        }
    }
    PodResources(total)
}

/// The pod's QoS class: `Guaranteed`, `Burstable` or `BestEffort`.
pub fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for field in ["initContainers", "containers"] {
        for c in spec
            .get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let requests = c.pointer("/resources/requests").and_then(Value::as_object);
            let limits = c.pointer("/resources/limits").and_then(Value::as_object);
            for res in ["cpu", "memory"] {
                let r = requests.and_then(|m| m.get(res));
                let l = limits.and_then(|m| m.get(res));
                if r.is_some() || l.is_some() {
                    any = true;
                }
                match (r, l) {
                    (Some(r), Some(l))
                        if r.as_str().and_then(quantity::parse)
                            == l.as_str().and_then(quantity::parse) => {}
                    (None, Some(_)) => {}
                    _ => guaranteed = false,
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}
