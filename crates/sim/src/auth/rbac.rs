//! RBAC authorization from the Roles, ClusterRoles and their bindings in the store, with the
//! real server's 403 message shape.

use serde_json::{Value, json};

use super::Identity;
use crate::resources::GroupResource;
use crate::store::Store;
use crate::store::meta;

/// What a request wants to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource (plural); empty for a non-resource request.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Path of a non-resource request.
    pub path: String,
}

impl Attributes {
    /// Whether this is a resource request.
    pub fn is_resource(&self) -> bool {
        !self.resource.is_empty()
    }

    fn resource_with_sub(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// An authorization decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Allowed or not.
    pub allowed: bool,
    /// Which binding allowed it (empty when denied).
    pub reason: String,
}

const PUBLIC_PATHS: &[&str] = &["/version", "/healthz", "/livez", "/readyz"];
const DISCOVERY_PREFIXES: &[&str] = &[
    "/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz",
];
const SELF_REVIEWS: &[&str] = &[
    "selfsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "selfsubjectreviews",
];

fn subject_matches(subject: &Value, id: &Identity, binding_ns: &str) -> bool {
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(binding_ns);
            id.service_account_parts() == Some((ns, name))
        }
        "User" => id.user == name,
        "Group" => id.groups.iter().any(|g| g == name),
        _ => false,
    }
}

fn list_has(list: Option<&Value>, wanted: &str) -> bool {
    list.and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .any(|v| v.as_str() == Some("*") || v.as_str() == Some(wanted))
    })
}

fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    if !attrs.is_resource() {
        let urls = rule.get("nonResourceURLs").and_then(Value::as_array);
        let url_ok = urls.is_some_and(|a| {
            a.iter().filter_map(Value::as_str).any(|u| {
                u == "*"
                    || u == attrs.path
                    || u.strip_suffix('*')
                        .is_some_and(|p| attrs.path.starts_with(p))
            })
        });
        return url_ok && list_has(rule.get("verbs"), &attrs.verb);
    }
    if !list_has(rule.get("verbs"), &attrs.verb) || !list_has(rule.get("apiGroups"), &attrs.group) {
        return false;
    }
    let combined = attrs.resource_with_sub();
    let resource_ok = rule
        .get("resources")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter().filter_map(Value::as_str).any(|r| {
                r == "*"
                    || r == combined
                    || (attrs.subresource.is_empty() && r == attrs.resource)
                    || (!attrs.subresource.is_empty() && r == format!("*/{}", attrs.subresource))
            })
        });
    if !resource_ok {
        return false;
    }
    match rule.get("resourceNames").and_then(Value::as_array) {
        Some(names) if !names.is_empty() => {
            !attrs.name.is_empty()
                && names
                    .iter()
                    .any(|n| n.as_str() == Some(attrs.name.as_str()))
        }
        _ => true,
    }
}

fn role_rules(store: &Store, role_ref: &Value, binding_ns: &str) -> Vec<Value> {
    let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    let key = match kind {
        "Role" => crate::store::ObjectKey::new(
            GroupResource::new("rbac.authorization.k8s.io", "roles"),
            binding_ns,
            name,
        ),
        "ClusterRole" => crate::store::ObjectKey::new(
            GroupResource::new("rbac.authorization.k8s.io", "clusterroles"),
            "",
            name,
        ),
        _ => return Vec::new(),
    };
    store
        .get(&key)
        .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Every rule that applies to an identity in a namespace (cluster-wide rules included), each
/// with a description of where it comes from.
pub fn rules_for(store: &Store, id: &Identity, namespace: &str) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    let crbs = store
        .list(
            &GroupResource::new("rbac.authorization.k8s.io", "clusterrolebindings"),
            None,
        )
        .0;
    for b in crbs {
        let subjects = b
            .get("subjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if subjects.iter().any(|s| subject_matches(s, id, "")) {
            let role_ref = b.get("roleRef").cloned().unwrap_or(Value::Null);
            let why = format!(
                "RBAC: allowed by ClusterRoleBinding {:?} of ClusterRole {:?}",
                meta::name(&b),
                role_ref.get("name").and_then(Value::as_str).unwrap_or("")
            );
            for r in role_rules(store, &role_ref, "") {
                out.push((r, why.clone()));
            }
        }
    }
    if !namespace.is_empty() {
        let rbs = store
            .list(
                &GroupResource::new("rbac.authorization.k8s.io", "rolebindings"),
                Some(namespace),
            )
            .0;
        for b in rbs {
            let subjects = b
                .get("subjects")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if subjects.iter().any(|s| subject_matches(s, id, namespace)) {
                let role_ref = b.get("roleRef").cloned().unwrap_or(Value::Null);
                let why = format!(
                    "RBAC: allowed by RoleBinding \"{}/{}\" of {} {:?}",
                    meta::name(&b),
                    namespace,
                    role_ref.get("kind").and_then(Value::as_str).unwrap_or(""),
                    role_ref.get("name").and_then(Value::as_str).unwrap_or("")
                );
                for r in role_rules(store, &role_ref, namespace) {
                    out.push((r, why.clone()));
                }
            }
        }
    }
    out
}

/// Decides a request; with `enforced` false (RBAC off), every identity may do anything.
pub fn authorize(store: &Store, enforced: bool, id: &Identity, attrs: &Attributes) -> Decision {
    let allow = |reason: &str| Decision {
        allowed: true,
        reason: reason.to_string(),
    };
    if id.is_admin() || !enforced {
        return allow("");
    }
    let authenticated = id.groups.iter().any(|g| g == "system:authenticated");
    if !attrs.is_resource() {
        if PUBLIC_PATHS.contains(&attrs.path.as_str()) {
            return allow("RBAC: allowed by ClusterRoleBinding \"system:public-info-viewer\"");
        }
        if authenticated
            && DISCOVERY_PREFIXES
                .iter()
                .any(|p| attrs.path == *p || attrs.path.starts_with(&format!("{p}/")))
        {
            return allow("RBAC: allowed by ClusterRoleBinding \"system:discovery\"");
        }
    }
    if authenticated
        && attrs.verb == "create"
        && (attrs.group == "authorization.k8s.io" || attrs.group == "authentication.k8s.io")
        && SELF_REVIEWS.contains(&attrs.resource.as_str())
    {
        return allow("RBAC: allowed by ClusterRoleBinding \"system:basic-user\"");
    }
    for (rule, why) in rules_for(store, id, &attrs.namespace) {
        if rule_allows(&rule, attrs) {
            return allow(&why);
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

/// The message of a 403, exactly as the real server words it.
pub fn forbidden_message(id: &Identity, attrs: &Attributes) -> String {
    if !attrs.is_resource() {
        return format!(
            "forbidden: User {:?} cannot {} path {:?}",
            id.user, attrs.verb, attrs.path
        );
    }
    let gr = GroupResource::new(&attrs.group, &attrs.resource);
    let what = format!(
        "User {:?} cannot {} resource {:?} in API group {:?}",
        id.user,
        attrs.verb,
        attrs.resource_with_sub(),
        attrs.group
    );
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", attrs.namespace)
    };
    if attrs.name.is_empty() {
        format!("{} is forbidden: {what} {scope}", gr.qualified())
    } else {
        format!(
            "{} {:?} is forbidden: {what} {scope}",
            gr.qualified(),
            attrs.name
        )
    }
}

/// The ClusterRoles present in every cluster.
pub fn bootstrap_cluster_roles() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}
            ]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/log", "pods/status", "configmaps", "events", "persistentvolumeclaims", "serviceaccounts", "namespaces"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": ["get", "list", "watch"]}
            ]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "edit", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/log", "pods/status", "pods/eviction", "configmaps", "secrets", "events", "persistentvolumeclaims", "serviceaccounts"], "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
                {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}
            ]
        }),
    ]
}
