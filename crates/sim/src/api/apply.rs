//! Server-side apply: upsert with a required `fieldManager`, field ownership recorded in
//! `managedFields` (FieldsV1), removal of fields a manager stopped applying, and conflicts
//! with other appliers' fields unless `force=true`. Ownership is tracked for appliers only
//! (writes by update or patch do not take fields over).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::context::{Ctx, json_response, parse_body};
use super::patch::apply_strategic;
use super::request::flag;
use crate::error::ApiError;
use crate::ops::{self, Subresource};
use crate::store::{ObjectKey, meta};

type FieldSet = BTreeSet<Vec<String>>;

fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "ports" => Some("containerPort"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

fn collect(value: &Value, path: &mut Vec<String>, out: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "status") {
                    continue;
                }
                if path.len() == 1
                    && path[0] == "f:metadata"
                    && !matches!(
                        k.as_str(),
                        "labels" | "annotations" | "finalizers" | "ownerReferences"
                    )
                {
                    continue;
                }
                path.push(format!("f:{k}"));
                collect(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            let field = path.last().and_then(|p| p.strip_prefix("f:")).unwrap_or("");
            match merge_key(field) {
                Some(key) if items.iter().all(|i| i.get(key).is_some()) => {
                    for item in items {
                        let mut k = Map::new();
                        k.insert(
                            key.to_string(),
                            item.get(key).cloned().unwrap_or(Value::Null),
                        );
                        path.push(format!("k:{}", Value::Object(k)));
                        out.insert(path.clone());
                        collect(item, path, out);
                        path.pop();
                    }
                }
                _ => {
                    out.insert(path.clone());
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

fn fields_of(object: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    collect(object, &mut Vec::new(), &mut out);
    out
}

fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for (i, seg) in path.iter().enumerate() {
            let entry = node.entry(seg.clone()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            let Some(next) = entry.as_object_mut() else {
                break;
            };
            node = next;
            if seg.starts_with("k:") && i + 1 == path.len() {
                node.insert(".".into(), json!({}));
            }
        }
    }
    Value::Object(root)
}

fn from_fields_v1(value: &Value, path: &mut Vec<String>, out: &mut FieldSet) {
    let Some(map) = value.as_object() else {
        return;
    };
    if map.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, child) in map {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(k.clone());
        from_fields_v1(child, path, out);
        path.pop();
    }
}

fn navigate<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut current = doc;
    for seg in path {
        current = if let Some(f) = seg.strip_prefix("f:") {
            current.get(f)?
        } else if let Some(k) = seg.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).ok()?;
            current
                .as_array()?
                .iter()
                .find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))?
        } else {
            return None;
        };
    }
    Some(current)
}

fn remove_path(doc: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut current = doc;
    for seg in parent_path {
        let next = if let Some(f) = seg.strip_prefix("f:") {
            current.get_mut(f)
        } else if let Some(k) = seg.strip_prefix("k:") {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else {
                return;
            };
            current.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|item| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
            })
        } else {
            None
        };
        match next {
            Some(n) => current = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = current.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:")
        && let (Ok(key), Some(a)) = (
            serde_json::from_str::<Map<String, Value>>(k),
            current.as_array_mut(),
        )
    {
        a.retain(|item| !key.iter().all(|(kk, kv)| item.get(kk) == Some(kv)));
    }
}

fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if let Some(f) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = seg.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let inner: Vec<String> = key.iter().map(|(kk, kv)| format!("{kk}={kv}")).collect();
            out.push_str(&format!("[{}]", inner.join(",")));
        }
    }
    out
}

fn managed_entry(manager: &str, api_version: &str, fields: &FieldSet) -> Value {
    json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": meta::now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(fields),
    })
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Handles an apply patch.
pub fn handle(ctx: &Ctx, key: &ObjectKey, body: &Bytes) -> Result<Response, ApiError> {
    let manager = ctx
        .info
        .query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .cloned()
        .ok_or_else(|| {
            ApiError::bad_request(
                "PATCH requests with application/apply-patch+yaml must supply a fieldManager",
            )
        })?;
    let force = flag(&ctx.info.query, "force");
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/yaml"),
    );
    let applied = strip_directives(&parse_body(&headers, body)?);
    if !applied.is_object() {
        return Err(ApiError::bad_request("an apply patch must be an object"));
    }
    super::decode::check_apply(&ctx.rt, &ctx.info.version, &applied)?;
    if meta::name(&applied) != key.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            meta::name(&applied),
            key.name
        )));
    }
    let api_version = ctx.rt.api_version(&ctx.info.version);
    let new_fields = fields_of(&applied);
    let dry_run = ctx.info.query.get("dryRun").map(String::as_str) == Some("All");
    if ctx.state.store.get(key).is_none() && ctx.info.subresource.is_empty() {
        let mut object = applied.clone();
        if let Some(m) = meta::metadata_mut(&mut object) {
            m.insert(
                "managedFields".into(),
                json!([managed_entry(&manager, &api_version, &new_fields)]),
            );
        }
        let ns = if ctx.rt.namespaced {
            ctx.info.namespace.as_str()
        } else {
            ""
        };
        match ops::create(&ctx.state, &ctx.rt, &ctx.info.version, ns, object, dry_run) {
            Ok(created) => {
                return Ok(json_response(
                    StatusCode::CREATED,
                    serde_json::to_vec(&*created).unwrap_or_default(),
                    "application/json",
                ));
            }
            Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {}
            Err(e) => return Err(e),
        }
    }
    let subresource = if ctx.info.subresource == "status" {
        Subresource::Status
    } else {
        Subresource::Main
    };
    let updated = ops::update(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        key,
        subresource,
        dry_run,
        |current| {
            let managed: Vec<Value> = current
                .pointer("/metadata/managedFields")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut ours_before = FieldSet::new();
            let mut others: Vec<(Value, FieldSet)> = Vec::new();
            for entry in managed {
                let mut set = FieldSet::new();
                from_fields_v1(
                    entry.get("fieldsV1").unwrap_or(&Value::Null),
                    &mut Vec::new(),
                    &mut set,
                );
                let is_ours = entry.get("manager").and_then(Value::as_str)
                    == Some(manager.as_str())
                    && entry.get("operation").and_then(Value::as_str) == Some("Apply");
                if is_ours {
                    ours_before = set;
                } else {
                    others.push((entry, set));
                }
            }
            let mut conflicts: Vec<(String, String, String)> = Vec::new();
            for (entry, set) in &others {
                if entry.get("operation").and_then(Value::as_str) != Some("Apply") {
                    continue;
                }
                for path in set.intersection(&new_fields) {
                    if navigate(current, path) != navigate(&applied, path) {
                        conflicts.push((
                            entry
                                .get("manager")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            entry
                                .get("apiVersion")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            display_path(path),
                        ));
                    }
                }
            }
            if !conflicts.is_empty() && !force {
                let message = if conflicts.len() == 1 {
                    let (m, v, f) = &conflicts[0];
                    format!("Apply failed with 1 conflict: conflict with {m:?} using {v}: {f}")
                } else {
                    let lines: Vec<String> =
                        conflicts.iter().map(|(_, _, f)| format!("- {f}")).collect();
                    let (m, v, _) = &conflicts[0];
                    format!(
                        "Apply failed with {} conflicts: conflicts with {m:?} using {v}:\n{}",
                        conflicts.len(),
                        lines.join("\n")
                    )
                };
                let mut e = ApiError::conflict(&key.resource, &key.name, "");
                e.message = message;
                e.details = Some(json!({
                    "name": key.name,
                    "group": key.resource.group,
                    "kind": key.resource.resource,
                    "causes": conflicts.iter().map(|(m, v, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m:?} using {v}"), "field": f})).collect::<Vec<_>>()
                }));
                return Err(e);
            }
            let mut merged = current.clone();
            apply_strategic(&mut merged, &applied)?;
            let owned_by_others: FieldSet =
                others.iter().flat_map(|(_, s)| s.iter().cloned()).collect();
            let mut removals: Vec<&Vec<String>> = ours_before
                .iter()
                .filter(|p| !new_fields.contains(*p) && !owned_by_others.contains(*p))
                .collect();
            removals.sort_by_key(|p| p.len());
            for path in removals {
                remove_path(&mut merged, path);
            }
            let mut entries: Vec<Value> = others
                .into_iter()
                .filter_map(|(mut entry, set)| {
                    if !force {
                        return Some(entry);
                    }
                    let kept: FieldSet = set.difference(&new_fields).cloned().collect();
                    if kept.is_empty() {
                        return None;
                    }
                    entry["fieldsV1"] = to_fields_v1(&kept);
                    Some(entry)
                })
                .collect();
            entries.push(managed_entry(&manager, &api_version, &new_fields));
            merged["metadata"]["managedFields"] = json!(entries);
            // An unchanged apply keeps the old timestamp so that it is a no-op.
            if ours_before == new_fields && {
                let mut a = merged.clone();
                let mut b = current.clone();
                a["metadata"]["managedFields"] = Value::Null;
                b["metadata"]["managedFields"] = Value::Null;
                a == b
            } {
                return Ok(current.clone());
            }
            Ok(merged)
        },
    )?;
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(&*updated).unwrap_or_default(),
        "application/json",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_sets_round_trip_through_fields_v1() {
        let obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "1"}},
            "data": {"k": "v"},
            "spec": {"containers": [{"name": "main", "image": "i"}]}
        });
        let set = fields_of(&obj);
        assert!(set.contains(&vec![
            "f:metadata".to_string(),
            "f:labels".to_string(),
            "f:a".to_string()
        ]));
        assert!(set.contains(&vec![
            "f:spec".to_string(),
            "f:containers".to_string(),
            "k:{\"name\":\"main\"}".to_string()
        ]));
        assert!(!set.contains(&vec!["f:metadata".to_string(), "f:name".to_string()]));
        let v1 = to_fields_v1(&set);
        let mut back = FieldSet::new();
        from_fields_v1(&v1, &mut Vec::new(), &mut back);
        assert_eq!(back, set);
        let path = vec![
            "f:spec".to_string(),
            "f:containers".to_string(),
            "k:{\"name\":\"main\"}".to_string(),
            "f:image".to_string(),
        ];
        assert_eq!(display_path(&path), ".spec.containers[name=\"main\"].image");
        assert_eq!(navigate(&obj, &path), Some(&json!("i")));
        let mut doc = obj.clone();
        remove_path(&mut doc, &path);
        assert_eq!(doc["spec"]["containers"][0], json!({"name": "main"}));
    }
}
