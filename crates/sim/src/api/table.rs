//! `meta.k8s.io/v1` Tables with the columns the real server prints for each kind (what
//! `kubectl get` shows), and the printer columns of custom resources.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::resources::{Behavior, ResourceType};
use crate::store::meta;

/// Which object in a Table row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

/// An object's PartialObjectMetadata.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

struct Column {
    name: &'static str,
    column_type: &'static str,
    format: &'static str,
    priority: i64,
}

const fn col(name: &'static str, priority: i64) -> Column {
    Column {
        name,
        column_type: "string",
        format: "",
        priority,
    }
}

fn columns(behavior: Behavior) -> Vec<Column> {
    let name = Column {
        name: "Name",
        column_type: "string",
        format: "name",
        priority: 0,
    };
    let mut cols = vec![name];
    cols.extend(match behavior {
        Behavior::Pod => vec![
            col("Ready", 0),
            col("Status", 0),
            Column {
                name: "Restarts",
                column_type: "string",
                format: "",
                priority: 0,
            },
            col("Age", 0),
            col("IP", 1),
            col("Node", 1),
            col("Nominated Node", 1),
            col("Readiness Gates", 1),
        ],
        Behavior::Job => vec![
            col("Status", 0),
            col("Completions", 0),
            col("Duration", 0),
            col("Age", 0),
            col("Containers", 1),
            col("Images", 1),
            col("Selector", 1),
        ],
        Behavior::Namespace => vec![col("Status", 0), col("Age", 0)],
        Behavior::Node => vec![
            col("Status", 0),
            col("Roles", 0),
            col("Age", 0),
            col("Version", 0),
            col("Internal-IP", 1),
            col("External-IP", 1),
            col("OS-Image", 1),
            col("Kernel-Version", 1),
            col("Container-Runtime", 1),
        ],
        Behavior::Secret => vec![
            col("Type", 0),
            Column {
                name: "Data",
                column_type: "integer",
                format: "",
                priority: 0,
            },
            col("Age", 0),
        ],
        Behavior::ConfigMap => vec![
            Column {
                name: "Data",
                column_type: "integer",
                format: "",
                priority: 0,
            },
            col("Age", 0),
        ],
        Behavior::PersistentVolumeClaim => vec![
            col("Status", 0),
            col("Volume", 0),
            col("Capacity", 0),
            col("Access Modes", 0),
            col("StorageClass", 0),
            col("VolumeAttributesClass", 0),
            col("Age", 0),
            col("VolumeMode", 1),
        ],
        Behavior::ServiceAccount => vec![
            Column {
                name: "Secrets",
                column_type: "integer",
                format: "",
                priority: 0,
            },
            col("Age", 0),
        ],
        Behavior::Role | Behavior::ClusterRole | Behavior::CustomResourceDefinition => {
            vec![col("Created At", 0)]
        }
        Behavior::RoleBinding | Behavior::ClusterRoleBinding => vec![
            col("Role", 0),
            col("Age", 0),
            col("Users", 1),
            col("Groups", 1),
            col("ServiceAccounts", 1),
        ],
        _ => vec![col("Age", 0)],
    });
    if behavior == Behavior::Event {
        // Events lead with when they were last seen, as the real printer does.
        return vec![
            col("Last Seen", 0),
            col("Type", 0),
            col("Reason", 0),
            col("Object", 0),
            col("Message", 0),
            col("Subobject", 1),
            col("Source", 1),
            col("First Seen", 1),
            Column {
                name: "Count",
                column_type: "integer",
                format: "",
                priority: 1,
            },
            Column {
                name: "Name",
                column_type: "string",
                format: "name",
                priority: 1,
            },
        ];
    }
    cols
}

fn age(object: &Value, now: Timestamp) -> String {
    since(meta::time_at(object, "/metadata/creationTimestamp"), now)
}

fn since(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => meta::human_duration(now.duration_since(t).as_secs()),
        None => "<unknown>".to_string(),
    }
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn or_none(text: String) -> String {
    if text.is_empty() {
        "<none>".to_string()
    } else {
        text
    }
}

/// The STATUS column of a pod, as `kubectl get pods` shows it.
pub fn pod_status(pod: &Value) -> String {
    let mut reason = s(pod, "/status/phase").to_string();
    if !s(pod, "/status/reason").is_empty() {
        reason = s(pod, "/status/reason").to_string();
    }
    let init_total = arr(pod, "/spec/initContainers").len();
    let mut initializing = false;
    for (idx, c) in arr(pod, "/status/initContainerStatuses").iter().enumerate() {
        let term = c.pointer("/state/terminated");
        let waiting = c.pointer("/state/waiting");
        if let Some(t) = term {
            if i(t, "/exitCode") == 0 {
                continue;
            }
            let r = s(t, "/reason");
            reason = if r.is_empty() {
                format!("Init:ExitCode:{}", i(t, "/exitCode"))
            } else {
                format!("Init:{r}")
            };
        } else if let Some(w) =
            waiting.filter(|w| !s(w, "/reason").is_empty() && s(w, "/reason") != "PodInitializing")
        {
            reason = format!("Init:{}", s(w, "/reason"));
        } else {
            reason = format!("Init:{idx}/{init_total}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        let mut has_running = false;
        for c in arr(pod, "/status/containerStatuses").iter().rev() {
            let waiting_reason = s(c, "/state/waiting/reason");
            let term = c.pointer("/state/terminated");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = term {
                reason = if s(t, "/reason").is_empty() {
                    if i(t, "/signal") != 0 {
                        format!("Signal:{}", i(t, "/signal"))
                    } else {
                        format!("ExitCode:{}", i(t, "/exitCode"))
                    }
                } else {
                    s(t, "/reason").to_string()
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some()
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            let ready = arr(pod, "/status/conditions")
                .iter()
                .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
            reason = if ready {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if meta::is_deleting(pod) {
        reason = if s(pod, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let statuses = arr(pod, "/status/containerStatuses");
    let total = arr(pod, "/spec/containers").len();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses.iter().map(|c| i(c, "/restartCount")).sum();
    let last_restart = statuses
        .iter()
        .filter_map(|c| meta::time_at(c, "/lastState/terminated/finishedAt"))
        .max();
    let restarts_text = match last_restart {
        Some(t) if restarts > 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };
    let gates = arr(pod, "/spec/readinessGates");
    vec![
        json!(meta::name(pod)),
        json!(format!("{ready}/{total}")),
        json!(pod_status(pod)),
        json!(restarts_text),
        json!(age(pod, now)),
        json!(or_none(s(pod, "/status/podIP").to_string())),
        json!(or_none(s(pod, "/spec/nodeName").to_string())),
        json!(or_none(s(pod, "/status/nominatedNodeName").to_string())),
        json!(if gates.is_empty() {
            "<none>".to_string()
        } else {
            format!("0/{}", gates.len())
        }),
    ]
}

fn has_condition(job: &Value, kind: &str) -> bool {
    arr(job, "/status/conditions")
        .iter()
        .any(|c| s(c, "/type") == kind && s(c, "/status") == "True")
}

fn job_cells(job: &Value, now: Timestamp) -> Vec<Value> {
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if meta::is_deleting(job) {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = i(job, "/status/succeeded");
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = job
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if parallelism > 1 {
                format!("{succeeded}/1 of {parallelism}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let duration = match meta::time_at(job, "/status/startTime") {
        Some(start) => {
            let end = meta::time_at(job, "/status/completionTime").unwrap_or(now);
            meta::human_duration(end.duration_since(start).as_secs())
        }
        None => String::new(),
    };
    let containers = arr(job, "/spec/template/spec/containers");
    let names: Vec<&str> = containers.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, "/image")).collect();
    let selector: Vec<String> = job
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(meta::name(job)),
        json!(status),
        json!(completions),
        json!(duration),
        json!(age(job, now)),
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector.join(",")),
    ]
}

fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    let ready = arr(node, "/status/conditions")
        .iter()
        .find(|c| s(c, "/type") == "Ready");
    let mut status = match ready.map(|c| s(c, "/status")) {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<String> = meta::string_map(node, "labels")
        .map(|l| {
            l.keys()
                .filter_map(|k| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let address = |kind: &str| -> String {
        arr(node, "/status/addresses")
            .iter()
            .find(|a| s(a, "/type") == kind)
            .map(|a| s(a, "/address").to_string())
            .unwrap_or_else(|| "<none>".to_string())
    };
    vec![
        json!(meta::name(node)),
        json!(status),
        json!(or_none(roles.join(","))),
        json!(age(node, now)),
        json!(s(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(s(node, "/status/nodeInfo/osImage")),
        json!(s(node, "/status/nodeInfo/kernelVersion")),
        json!(s(node, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn event_cells(ev: &Value, now: Timestamp) -> Vec<Value> {
    let last = meta::time_at(ev, "/lastTimestamp")
        .or_else(|| meta::time_at(ev, "/eventTime"))
        .or_else(|| meta::time_at(ev, "/metadata/creationTimestamp"));
    let first = meta::time_at(ev, "/firstTimestamp").or(last);
    let source = [s(ev, "/source/component"), s(ev, "/source/host")]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        json!(since(last, now)),
        json!(s(ev, "/type")),
        json!(s(ev, "/reason")),
        json!(format!(
            "{}/{}",
            s(ev, "/involvedObject/kind").to_lowercase(),
            s(ev, "/involvedObject/name")
        )),
        json!(s(ev, "/message").trim()),
        json!(s(ev, "/involvedObject/fieldPath")),
        json!(source),
        json!(since(first, now)),
        json!(ev.get("count").and_then(Value::as_i64).unwrap_or(1)),
        json!(meta::name(ev)),
    ]
}

fn binding_cells(b: &Value, now: Timestamp) -> Vec<Value> {
    let subjects = arr(b, "/subjects");
    let of = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|x| s(x, "/kind") == kind)
            .map(|x| {
                if kind == "ServiceAccount" {
                    format!("{}/{}", s(x, "/namespace"), s(x, "/name"))
                } else {
                    s(x, "/name").to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        json!(meta::name(b)),
        json!(format!(
            "{}/{}",
            s(b, "/roleRef/kind"),
            s(b, "/roleRef/name")
        )),
        json!(age(b, now)),
        json!(of("User")),
        json!(of("Group")),
        json!(of("ServiceAccount")),
    ]
}

fn count(v: &Value, pointer: &str) -> usize {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

fn cells(rt: &ResourceType, object: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(meta::name(object));
    match rt.behavior {
        Behavior::Pod => pod_cells(object, now),
        Behavior::Job => job_cells(object, now),
        Behavior::Node => node_cells(object, now),
        Behavior::Event => event_cells(object, now),
        Behavior::Namespace => vec![
            name,
            json!(s(object, "/status/phase")),
            json!(age(object, now)),
        ],
        Behavior::Secret => vec![
            name,
            json!(s(object, "/type")),
            json!(count(object, "/data")),
            json!(age(object, now)),
        ],
        Behavior::ConfigMap => vec![
            name,
            json!(count(object, "/data") + count(object, "/binaryData")),
            json!(age(object, now)),
        ],
        Behavior::PersistentVolumeClaim => {
            let capacity = object
                .pointer("/status/capacity/storage")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let modes: Vec<&str> = arr(object, "/status/accessModes")
                .iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect();
            vec![
                name,
                json!(s(object, "/status/phase")),
                json!(s(object, "/spec/volumeName")),
                json!(capacity),
                json!(modes.join(",")),
                json!(s(object, "/spec/storageClassName")),
                json!("<unset>"),
                json!(age(object, now)),
                json!(s(object, "/spec/volumeMode")),
            ]
        }
        Behavior::ServiceAccount => vec![
            name,
            json!(arr(object, "/secrets").len()),
            json!(age(object, now)),
        ],
        Behavior::Role | Behavior::ClusterRole | Behavior::CustomResourceDefinition => {
            vec![name, json!(s(object, "/metadata/creationTimestamp"))]
        }
        Behavior::RoleBinding | Behavior::ClusterRoleBinding => binding_cells(object, now),
        Behavior::Custom if !rt.printer_columns.is_empty() => {
            let mut out = vec![name];
            for c in &rt.printer_columns {
                let value = json_path(object, &c.json_path);
                out.push(match (c.column_type.as_str(), value) {
                    ("date", Some(Value::String(t))) => json!(since(meta::parse_time(&t), now)),
                    (_, Some(v)) => v,
                    (_, None) => Value::Null,
                });
            }
            out
        }
        _ => vec![name, json!(age(object, now))],
    }
}

/// Evaluates the JSON paths printer columns use: fields (`.status.phase`), list indexes
/// (`.spec.containers[0].image`) and equality filters on list items
/// (`.status.conditions[?(@.type=="Completed")].status`), taking the first match as the API
/// server's table convertor prints the first result.
pub fn json_path(object: &Value, path: &str) -> Option<Value> {
    let mut current = object;
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inner = &after[..end];
            rest = &after[end + 1..];
            current = match inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                Some(filter) => {
                    let (field, want) = filter.split_once("==")?;
                    let pointer =
                        format!("/{}", field.trim().strip_prefix("@.")?.replace('.', "/"));
                    let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                    current.as_array()?.iter().find(|item| {
                        item.pointer(&pointer).is_some_and(|v| match v {
                            Value::String(s) => s == want,
                            other => serde_json::from_str::<Value>(want).is_ok_and(|w| w == *other),
                        })
                    })?
                }
                None => current.get(inner.trim().parse::<usize>().ok()?)?,
            };
        } else {
            let field_start = rest.strip_prefix('.').unwrap_or(rest);
            let end = field_start.find(['.', '[']).unwrap_or(field_start.len());
            let field = &field_start[..end];
            rest = &field_start[end..];
            if !field.is_empty() {
                current = current.get(field)?;
            }
        }
    }
    Some(current.clone())
}

/// A Table of objects.
pub fn table(
    rt: &ResourceType,
    objects: &[&Value],
    include: IncludeObject,
    list_meta: Value,
) -> Value {
    let now = Timestamp::now();
    let definitions: Vec<Value> = if rt.behavior == Behavior::Custom
        && !rt.printer_columns.is_empty()
    {
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
        ];
        for c in &rt.printer_columns {
            defs.push(json!({"name": c.name, "type": c.column_type, "format": "", "description": c.description, "priority": c.priority}));
        }
        defs
    } else {
        columns(rt.behavior)
            .into_iter()
            .map(|c| json!({"name": c.name, "type": c.column_type, "format": c.format, "description": "", "priority": c.priority}))
            .collect()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(rt, o, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(o),
                IncludeObject::Object => row["object"] = (*o).clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_status_column_matches_kubectl() {
        let table = [
            (json!({"status": {"phase": "Pending"}}), "Pending"),
            (
                json!({"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}),
                "ImagePullBackOff",
            ),
            (
                json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"reason": "Error", "exitCode": 3}}}]}}),
                "Error",
            ),
            (
                json!({"status": {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}}),
                "Completed",
            ),
            (
                json!({"status": {"phase": "Failed", "reason": "Evicted"}}),
                "Evicted",
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Running"}}),
                "Terminating",
            ),
        ];
        for (pod, want) in table {
            assert_eq!(pod_status(&pod), want, "{pod}");
        }
    }

    #[test]
    fn json_paths_resolve() {
        let obj = json!({"status": {"currentState": {"currentStateSummary": "RunningHealthy"}}, "spec": {"c": [{"i": "x"}]}});
        assert_eq!(
            json_path(&obj, ".status.currentState.currentStateSummary"),
            Some(json!("RunningHealthy"))
        );
        assert_eq!(json_path(&obj, ".spec.c[0].i"), Some(json!("x")));
        assert_eq!(json_path(&obj, ".spec.missing"), None);
        let js = json!({"status": {"conditions": [
            {"type": "StartupPolicyCompleted", "status": "True"},
            {"type": "Completed", "status": "False"}
        ]}});
        let completed = ".status.conditions[?(@.type==\"Completed\")].status";
        assert_eq!(json_path(&js, completed), Some(json!("False")));
        assert_eq!(
            json_path(&js, ".status.conditions[?(@.type=='Failed')].status"),
            None
        );
    }
}
