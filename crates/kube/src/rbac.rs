//! The exact namespaced permissions kubeferry needs, as one table that prints the Role and that
//! the tests run kubeferry under.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::ObjectMeta;
use kubeferry_core::JobKind;
use kubeferry_core::marks::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// One permission: verbs on resources of an API group, and why kubeferry needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource (or `resource/subresource`).
    pub resource: &'static str,
    /// The verbs.
    pub verbs: &'static [&'static str],
    /// What kubeferry uses them for.
    pub why: &'static str,
}

/// What container jobs need.
pub const CONTAINER_JOB_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "batch",
        resource: "jobs",
        verbs: &["create", "get", "list", "watch", "patch", "delete"],
        why: "submit, track (one watch per namespace), mark and cancel Jobs",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["get", "list", "watch"],
        why: "track the Jobs' pods (waiting reasons, exit codes) and find their logs",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "read and follow logs",
    },
];

/// The permissions for the given kinds of jobs, merged per resource.
pub fn permissions(kinds: &[JobKind]) -> Vec<Permission> {
    let mut merged: Vec<Permission> = Vec::new();
    for kind in kinds {
        let table = match kind {
            JobKind::Job => CONTAINER_JOB_PERMISSIONS,
            JobKind::SparkApp => &[],
        };
        for permission in table {
            if !merged.contains(permission) {
                merged.push(*permission);
            }
        }
    }
    merged
}

/// The Role granting `permissions`.
pub fn role(name: &str, namespace: Option<&str>, permissions: &[Permission]) -> Role {
    Role {
        metadata: metadata(name, namespace),
        rules: Some(
            permissions
                .iter()
                .map(|p| PolicyRule {
                    api_groups: Some(vec![p.group.to_string()]),
                    resources: Some(vec![p.resource.to_string()]),
                    verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
                    ..PolicyRule::default()
                })
                .collect(),
        ),
    }
}

/// A ServiceAccount and the RoleBinding that gives it the Role.
pub fn binding(
    role_name: &str,
    service_account: &str,
    namespace: Option<&str>,
) -> (ServiceAccount, RoleBinding) {
    let account = ServiceAccount {
        metadata: metadata(service_account, namespace),
        ..ServiceAccount::default()
    };
    let binding = RoleBinding {
        metadata: metadata(role_name, namespace),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: role_name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: service_account.into(),
            namespace: namespace.map(str::to_string),
            ..Subject::default()
        }]),
    };
    (account, binding)
}

fn metadata(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(str::to_string),
        labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string())].into()),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_jobs_need_exactly_this() {
        let role = role("kubeferry", Some("ns"), &permissions(&[JobKind::Job]));
        let rules = role.rules.unwrap();
        let flat: Vec<String> = rules
            .iter()
            .map(|r| {
                format!(
                    "{}:{}:{}",
                    r.api_groups.as_ref().unwrap().join(","),
                    r.resources.as_ref().unwrap().join(","),
                    r.verbs.join(",")
                )
            })
            .collect();
        assert_eq!(
            flat,
            [
                "batch:jobs:create,get,list,watch,patch,delete",
                ":pods:get,list,watch",
                ":pods/log:get",
            ]
        );
        assert_eq!(role.metadata.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn permissions_merge_without_duplicates() {
        let once = permissions(&[JobKind::Job]);
        let twice = permissions(&[JobKind::Job, JobKind::Job]);
        assert_eq!(once, twice);
    }
}
