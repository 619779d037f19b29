//! Discovery: `/version`, legacy `/api` and `/apis` documents, aggregated discovery
//! (`apidiscovery.k8s.io/v2`, what kubectl 1.33 asks for first), and a minimal OpenAPI v3
//! index that tells kubectl every type supports server-side field validation.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use crate::resources::{Behavior, ResourceType};
use crate::state::State;

/// The Kubernetes version the cluster reports.
pub const GIT_VERSION: &str = crate::config::KUBERNETES_VERSION;

/// The `/version` document.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
        "gitTreeState": "clean",
        "buildDate": "2025-05-15T08:19:08Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn api_versions(state: &State) -> Value {
    let port = state.port.get().copied().unwrap_or(0);
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": format!("127.0.0.1:{port}")}]
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = gv.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": gv, "preferredVersion": preferred})
}

/// `/apis`.
pub fn api_groups(state: &State) -> Value {
    let groups: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| group_json(&g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn api_group(state: &State, group: &str) -> Option<Value> {
    let (name, versions) = state
        .registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())?;
    let mut g = group_json(&name, &versions);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

struct Sub {
    name: &'static str,
    group: Option<&'static str>,
    version: Option<&'static str>,
    kind: String,
    verbs: &'static [&'static str],
}

fn subresources(rt: &ResourceType) -> Vec<Sub> {
    rt.subresources
        .iter()
        .map(|s| match *s {
            "status" => Sub {
                name: "status",
                group: None,
                version: None,
                kind: rt.kind.clone(),
                verbs: &["get", "patch", "update"],
            },
            "log" => Sub {
                name: "log",
                group: None,
                version: None,
                kind: "Pod".into(),
                verbs: &["get"],
            },
            "eviction" => Sub {
                name: "eviction",
                group: Some("policy"),
                version: Some("v1"),
                kind: "Eviction".into(),
                verbs: &["create"],
            },
            "binding" => Sub {
                name: "binding",
                group: None,
                version: None,
                kind: "Binding".into(),
                verbs: &["create"],
            },
            "finalize" => Sub {
                name: "finalize",
                group: None,
                version: None,
                kind: "Namespace".into(),
                verbs: &["update"],
            },
            "token" => Sub {
                name: "token",
                group: Some("authentication.k8s.io"),
                version: Some("v1"),
                kind: "TokenRequest".into(),
                verbs: &["create"],
            },
            other => Sub {
                name: "unknown",
                group: None,
                version: None,
                kind: other.to_string(),
                verbs: &[],
            },
        })
        .collect()
}

fn types_in(state: &State, group: &str, version: &str) -> Vec<std::sync::Arc<ResourceType>> {
    state
        .registry
        .all()
        .into_iter()
        .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
        .collect()
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(state: &State, group: &str, version: &str) -> Option<Value> {
    let types = types_in(state, group, version);
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for t in &types {
        let mut r = json!({
            "name": t.resource,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        for sub in subresources(t) {
            let mut s = json!({
                "name": format!("{}/{}", t.resource, sub.name),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": sub.kind,
                "verbs": sub.verbs,
            });
            if let Some(g) = sub.group {
                s["group"] = json!(g);
            }
            if let Some(v) = sub.version {
                s["version"] = json!(v);
            }
            resources.push(s);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    }))
}

/// Whether an `Accept` header asks for aggregated discovery.
pub fn wants_aggregated(accept: Option<&str>) -> Option<&'static str> {
    let accept = accept?;
    for media in accept.split(',') {
        let m = media.replace(' ', "");
        if m.contains("as=APIGroupDiscoveryList") && m.contains("g=apidiscovery.k8s.io") {
            if m.contains("v=v2beta1") {
                return Some("v2beta1");
            }
            if m.contains("v=v2") {
                return Some("v2");
            }
        }
        if m.starts_with("application/json") && !m.contains("as=") {
            return None;
        }
    }
    None
}

fn discovery_resource(t: &ResourceType, version: &str) -> Value {
    let mut r = json!({
        "resource": t.resource,
        "responseKind": {"group": t.group, "version": version, "kind": t.kind},
        "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": t.singular,
        "verbs": t.verbs,
    });
    if !t.short_names.is_empty() {
        r["shortNames"] = json!(t.short_names);
    }
    if !t.categories.is_empty() {
        r["categories"] = json!(t.categories);
    }
    let subs: Vec<Value> = subresources(t)
        .into_iter()
        .map(|s| {
            json!({
                "subresource": s.name,
                "responseKind": {"group": s.group.unwrap_or(&t.group), "version": s.version.unwrap_or(version), "kind": s.kind},
                "verbs": s.verbs,
            })
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// The aggregated discovery document of `/api` (`core` true) or `/apis`.
pub fn aggregated(state: &State, core: bool, api_version: &str) -> Value {
    let items: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types_in(state, &g, v)
                        .iter()
                        .map(|t| discovery_resource(t, v))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let metadata = if g.is_empty() {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": g, "creationTimestamp": null})
            };
            json!({"metadata": metadata, "versions": vs})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{api_version}"),
        "metadata": {},
        "items": items
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn gv_hash(state: &State, group: &str, version: &str) -> String {
    let mut h = DefaultHasher::new();
    for t in types_in(state, group, version) {
        t.resource.hash(&mut h);
        t.kind.hash(&mut h);
        t.subresources.hash(&mut h);
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: the index of group-version documents.
pub fn openapi_index(state: &State) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, versions) in state.registry.groups() {
        for v in versions {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={}", gv_hash(state, &g, &v));
            paths.insert(p, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`: paths with their
/// group-version-kind and the `fieldValidation` parameter (schemas are not served).
pub fn openapi_group_version(state: &State, path: &str) -> Option<Value> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match parts.as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let types = types_in(state, group, version);
    if types.is_empty() {
        return None;
    }
    let prefix = format!("/{}", gv_path(group, version));
    let validation = json!([
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
    ]);
    let mut paths = serde_json::Map::new();
    for t in types
        .iter()
        .filter(|t| !t.create_only || t.behavior == Behavior::SelfSubjectAccessReview)
    {
        let gvk = json!({"group": t.group, "version": version, "kind": t.kind});
        let op = |id: &str| json!({"operationId": id, "parameters": validation, "x-kubernetes-group-version-kind": gvk, "responses": {}});
        let (collection, item) = if t.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", t.resource),
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.resource),
            )
        } else {
            (
                format!("{prefix}/{}", t.resource),
                format!("{prefix}/{}/{{name}}", t.resource),
            )
        };
        paths.insert(
            collection,
            json!({"post": op(&format!("create{}", t.kind))}),
        );
        if !t.create_only {
            paths.insert(
                item,
                json!({"put": op(&format!("replace{}", t.kind)), "patch": op(&format!("patch{}", t.kind))}),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}
