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

/// The outcome records every kind keeps (`kubeferry_core::record`). Without them jobs still
/// run; their outcomes are then known only while their objects last.
const OUTCOME_RECORDS: Permission = Permission {
    group: "",
    resource: "configmaps",
    verbs: &["create", "get", "list", "watch", "update", "delete"],
    why: "keep each ended job's outcome record (one ConfigMap per job, one watch per namespace), replace a cancel's record with the job's own end reached before the cancel's delete, delete it after its retention, and sweep it",
};

/// What container jobs need.
pub const CONTAINER_JOB_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "batch",
        resource: "jobs",
        verbs: &["create", "get", "list", "watch", "patch", "delete"],
        why: "submit, track (one watch of Jobs per namespace), mark and cancel Jobs",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["list", "watch"],
        why: "track the Jobs' pods (one watch of pods per namespace: waiting reasons, exit codes) and find their logs",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "read and follow logs",
    },
    Permission {
        group: "",
        resource: "events",
        verbs: &["list", "watch"],
        why: "say why a Job has no pod yet (the Job controller's FailedCreate events: admission, quota; one watch per namespace)",
    },
    OUTCOME_RECORDS,
];

/// The verbs on SparkApplications, of either operator.
const SPARK_APPLICATION_VERBS: &[&str] = &["create", "get", "list", "watch", "patch", "delete"];

/// What Spark jobs need: their SparkApplications under both operators (a job file may name
/// either), and their driver pods.
pub const SPARK_JOB_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "spark.apache.org",
        resource: "sparkapplications",
        verbs: SPARK_APPLICATION_VERBS,
        why: "submit, track (one watch per namespace), mark and cancel SparkApplications of apache/spark-kubernetes-operator",
    },
    Permission {
        group: "sparkoperator.k8s.io",
        resource: "sparkapplications",
        verbs: SPARK_APPLICATION_VERBS,
        why: "submit, track (one watch per namespace), mark and cancel SparkApplications of the Kubeflow spark-operator",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["list", "watch", "delete"],
        why: "track Spark jobs' driver pods (one watch per namespace; exit code, times, log), and delete a driver that outlived its failed application",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "read and follow the driver's log",
    },
    OUTCOME_RECORDS,
];

/// What JobSets need: their JobSets, the JobSets' Jobs and those Jobs' pods (the JobSet
/// controller creates and deletes them; kubeferry only reads them).
pub const JOBSET_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "jobset.x-k8s.io",
        resource: "jobsets",
        verbs: &["create", "get", "list", "watch", "patch", "delete"],
        why: "submit, track (one watch of JobSets per namespace), mark and cancel JobSets",
    },
    Permission {
        group: "batch",
        resource: "jobs",
        verbs: &["list", "watch"],
        why: "track the JobSets' Jobs (one watch per namespace: which Job failed, and why)",
    },
    Permission {
        group: "",
        resource: "pods",
        verbs: &["list", "watch"],
        why: "track the JobSets' pods (one watch per namespace: exit codes, OOM kills, waiting reasons) and find their logs",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "read and follow the replicas' logs",
    },
    OUTCOME_RECORDS,
];

/// What bare pods need: the pods themselves (no controller creates them) and their logs.
pub const POD_PERMISSIONS: &[Permission] = &[
    Permission {
        group: "",
        resource: "pods",
        verbs: &["create", "get", "list", "watch", "patch", "delete"],
        why: "submit, track (one watch of bare pods per namespace), mark and cancel bare pods",
    },
    Permission {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "read and follow logs",
    },
    OUTCOME_RECORDS,
];

/// The permissions for the given kinds of jobs, each (group, resource, verbs) once. [`role`]
/// merges the verbs of each resource into one rule.
pub fn permissions(kinds: &[JobKind]) -> Vec<Permission> {
    let mut merged: Vec<Permission> = Vec::new();
    for kind in kinds {
        let table = match kind {
            JobKind::Job => CONTAINER_JOB_PERMISSIONS,
            JobKind::SparkApp => SPARK_JOB_PERMISSIONS,
            JobKind::JobSet => JOBSET_PERMISSIONS,
            JobKind::Pod => POD_PERMISSIONS,
        };
        for permission in table {
            let known = merged.iter().any(|p| {
                (p.group, p.resource, p.verbs)
                    == (permission.group, permission.resource, permission.verbs)
            });
            if !known {
                merged.push(*permission);
            }
        }
    }
    merged
}

/// The Role granting `permissions`: one rule per API group and resource, with the verbs of
/// every permission on it (in the order they first appear).
pub fn role(name: &str, namespace: Option<&str>, permissions: &[Permission]) -> Role {
    let mut rules: Vec<PolicyRule> = Vec::new();
    for p in permissions {
        let same = |rule: &&mut PolicyRule| {
            rule.api_groups.as_deref() == Some(&[p.group.to_string()][..])
                && rule.resources.as_deref() == Some(&[p.resource.to_string()][..])
        };
        match rules.iter_mut().find(same) {
            Some(rule) => {
                for verb in p.verbs {
                    if !rule.verbs.iter().any(|v| v == verb) {
                        rule.verbs.push(verb.to_string());
                    }
                }
            }
            None => rules.push(PolicyRule {
                api_groups: Some(vec![p.group.to_string()]),
                resources: Some(vec![p.resource.to_string()]),
                verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
                ..PolicyRule::default()
            }),
        }
    }
    Role {
        metadata: metadata(name, namespace),
        rules: Some(rules),
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
                ":pods:list,watch",
                ":pods/log:get",
                ":events:list,watch",
                ":configmaps:create,get,list,watch,update,delete",
            ]
        );
        assert_eq!(role.metadata.namespace.as_deref(), Some("ns"));
    }

    fn rules(kinds: &[JobKind]) -> Vec<String> {
        let role = role("kubeferry", Some("ns"), &permissions(kinds));
        role.rules
            .unwrap_or_default()
            .iter()
            .map(|r| {
                format!(
                    "{}:{}:{}",
                    r.api_groups
                        .as_ref()
                        .map(|g| g.join(","))
                        .unwrap_or_default(),
                    r.resources
                        .as_ref()
                        .map(|g| g.join(","))
                        .unwrap_or_default(),
                    r.verbs.join(",")
                )
            })
            .collect()
    }

    #[test]
    fn spark_jobs_need_exactly_this() {
        assert_eq!(
            rules(&[JobKind::SparkApp]),
            [
                "spark.apache.org:sparkapplications:create,get,list,watch,patch,delete",
                "sparkoperator.k8s.io:sparkapplications:create,get,list,watch,patch,delete",
                ":pods:list,watch,delete",
                ":pods/log:get",
                ":configmaps:create,get,list,watch,update,delete",
            ]
        );
    }

    #[test]
    fn both_kinds_merge_per_resource() {
        assert_eq!(
            rules(&[JobKind::Job, JobKind::SparkApp]),
            [
                "batch:jobs:create,get,list,watch,patch,delete",
                ":pods:list,watch,delete",
                ":pods/log:get",
                ":events:list,watch",
                ":configmaps:create,get,list,watch,update,delete",
                "spark.apache.org:sparkapplications:create,get,list,watch,patch,delete",
                "sparkoperator.k8s.io:sparkapplications:create,get,list,watch,patch,delete",
            ]
        );
    }

    #[test]
    fn jobsets_need_exactly_this() {
        assert_eq!(
            rules(&[JobKind::JobSet]),
            [
                "jobset.x-k8s.io:jobsets:create,get,list,watch,patch,delete",
                "batch:jobs:list,watch",
                ":pods:list,watch",
                ":pods/log:get",
                ":configmaps:create,get,list,watch,update,delete",
            ]
        );
    }

    #[test]
    fn bare_pods_need_exactly_this() {
        assert_eq!(
            rules(&[JobKind::Pod]),
            [
                ":pods:create,get,list,watch,patch,delete",
                ":pods/log:get",
                ":configmaps:create,get,list,watch,update,delete",
            ]
        );
        // Beside container jobs, the pods' rule grows by the verbs a bare pod adds.
        assert_eq!(
            rules(&[JobKind::Job, JobKind::Pod])[1],
            ":pods:list,watch,create,get,patch,delete"
        );
    }

    #[test]
    fn permissions_merge_without_duplicates() {
        for kinds in [
            vec![JobKind::Job],
            vec![JobKind::SparkApp],
            vec![JobKind::JobSet],
            vec![JobKind::Pod],
            JobKind::ALL.to_vec(),
        ] {
            let once = permissions(&kinds);
            let twice = permissions(&[kinds.clone(), kinds.clone()].concat());
            assert_eq!(once, twice);
        }
        // pods/log is granted by both tables: once in the list.
        let all = permissions(&JobKind::ALL);
        assert_eq!(all.iter().filter(|p| p.resource == "pods/log").count(), 1);
    }
}
