//! A container's environment as the kubelet builds it: `envFrom` config maps and secrets,
//! `env` values with `$(VAR)` expansion, and `valueFrom` (downward API, secret and config map
//! keys, resource fields). A missing source is a CreateContainerConfigError message.

use base64::Engine;
use serde_json::Value;

use crate::quantity;
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{ObjectKey, meta};

/// Expands `$(NAME)` references to earlier variables; `$$(` is a literal `$(`; unknown
/// references stay as written (Kubernetes' rules).
pub fn expand(text: &str, vars: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'('
                && let Some(end) = text[i + 2..].find(')')
            {
                let name = &text[i + 2..i + 2 + end];
                match vars.iter().rev().find(|(k, _)| k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&text[i..i + 3 + end]),
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = text[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn lookup(
    state: &State,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Option<std::sync::Arc<Value>> {
    state.store.get(&ObjectKey::new(
        GroupResource::new("", resource),
        namespace,
        name,
    ))
}

fn data_of(object: &Value, secret: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in object
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = v.as_str().unwrap_or("");
        let value = if secret {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        } else {
            text.to_string()
        };
        out.push((k.clone(), value));
    }
    out
}

fn field_ref(pod: &Value, path: &str) -> Option<String> {
    let s = |p: &str| pod.pointer(p).and_then(Value::as_str).map(str::to_string);
    match path {
        "metadata.name" => s("/metadata/name"),
        "metadata.namespace" => s("/metadata/namespace"),
        "metadata.uid" => s("/metadata/uid"),
        "spec.nodeName" => s("/spec/nodeName"),
        "spec.serviceAccountName" => s("/spec/serviceAccountName"),
        "status.podIP" => s("/status/podIP"),
        "status.hostIP" => s("/status/hostIP"),
        "status.podIPs" => s("/status/podIP"),
        "status.hostIPs" => s("/status/hostIP"),
        other => {
            let (map, key) = if let Some(rest) = other.strip_prefix("metadata.labels['") {
                ("labels", rest.strip_suffix("']")?)
            } else if let Some(rest) = other.strip_prefix("metadata.annotations['") {
                ("annotations", rest.strip_suffix("']")?)
            } else {
                return None;
            };
            Some(meta::string_map(pod, map)?.get(key)?.as_str()?.to_string())
        }
    }
}

fn resource_field(
    state: &State,
    pod: &Value,
    container: &Value,
    reference: &Value,
) -> Option<String> {
    let resource = reference.get("resource")?.as_str()?;
    let target = match reference
        .get("containerName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(name) => pod
            .pointer("/spec/containers")?
            .as_array()?
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))?,
        None => container,
    };
    let (section, kind) = resource.split_once('.')?;
    let value = target
        .pointer(&format!("/resources/{section}/{kind}"))
        .and_then(Value::as_str)
        .and_then(quantity::parse)
        .or_else(|| {
            // Without a limit the downward API reports the node's allocatable amount.
            let node = pod.pointer("/spec/nodeName")?.as_str()?;
            let cfg = state.config.nodes.iter().find(|n| n.name == node)?;
            quantity::parse(if kind == "cpu" { &cfg.cpu } else { &cfg.memory })
        })?;
    let divisor = reference
        .get("divisor")
        .and_then(Value::as_str)
        .and_then(quantity::parse)
        .filter(|d| *d > 0)
        .unwrap_or(1000);
    // Round up, as the kubelet does.
    Some(((value + divisor - 1) / divisor).to_string())
}

/// The environment of a container, or the CreateContainerConfigError message.
pub fn resolve(
    state: &State,
    pod: &Value,
    container: &Value,
) -> Result<Vec<(String, String)>, String> {
    let namespace = meta::namespace(pod);
    let mut vars: Vec<(String, String)> = Vec::new();
    for source in container
        .get("envFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let prefix = source.get("prefix").and_then(Value::as_str).unwrap_or("");
        for (field, resource, secret, label) in [
            ("configMapRef", "configmaps", false, "configmap"),
            ("secretRef", "secrets", true, "secret"),
        ] {
            let Some(reference) = source.get(field) else {
                continue;
            };
            let name = reference.get("name").and_then(Value::as_str).unwrap_or("");
            let optional = reference.get("optional").and_then(Value::as_bool) == Some(true);
            match lookup(state, resource, namespace, name) {
                Some(object) => {
                    for (k, v) in data_of(&object, secret) {
                        vars.push((format!("{prefix}{k}"), v));
                    }
                }
                None if optional => {}
                None => return Err(format!("{label} {name:?} not found")),
            }
        }
    }
    for entry in container
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(value) = entry.get("value").and_then(Value::as_str) {
            let expanded = expand(value, &vars);
            vars.push((name, expanded));
            continue;
        }
        let Some(from) = entry.get("valueFrom") else {
            vars.push((name, String::new()));
            continue;
        };
        if let Some(f) = from.get("fieldRef") {
            let path = f.get("fieldPath").and_then(Value::as_str).unwrap_or("");
            vars.push((name, field_ref(pod, path).unwrap_or_default()));
        } else if let Some(r) = from.get("resourceFieldRef") {
            vars.push((
                name,
                resource_field(state, pod, container, r).unwrap_or_default(),
            ));
        } else {
            for (field, resource, secret, kind) in [
                ("secretKeyRef", "secrets", true, "Secret"),
                ("configMapKeyRef", "configmaps", false, "ConfigMap"),
            ] {
                let Some(reference) = from.get(field) else {
                    continue;
                };
                let source = reference.get("name").and_then(Value::as_str).unwrap_or("");
                let key = reference.get("key").and_then(Value::as_str).unwrap_or("");
                let optional = reference.get("optional").and_then(Value::as_bool) == Some(true);
                match lookup(state, resource, namespace, source) {
                    Some(object) => {
                        match data_of(&object, secret).into_iter().find(|(k, _)| k == key) {
                            Some((_, v)) => vars.push((name.clone(), v)),
                            None if optional => {}
                            None => {
                                return Err(format!(
                                    "couldn't find key {key} in {kind} {namespace}/{source}"
                                ));
                            }
                        }
                    }
                    None if optional => {}
                    None => return Err(format!("{} {source:?} not found", kind.to_lowercase())),
                }
            }
        }
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars = vec![
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "x y".to_string()),
        ];
        assert_eq!(expand("$(A)-$(B)", &vars), "1-x y");
        assert_eq!(expand("$$(A)", &vars), "$(A)");
        assert_eq!(expand("$(MISSING)", &vars), "$(MISSING)");
        assert_eq!(expand("cost $5 (ok)", &vars), "cost $5 (ok)");
        assert_eq!(expand("é$(A)", &vars), "é1");
    }
}
