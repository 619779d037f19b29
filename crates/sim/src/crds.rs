//! CustomResourceDefinitions the cluster can install at start: both Spark operators'
//! SparkApplication and Kueue's workload types. Schemas keep unknown fields (no validation).

use serde_json::{Value, json};

use crate::config::CrdBundle;

struct Def<'a> {
    group: &'a str,
    versions: &'a [&'a str],
    kind: &'a str,
    plural: &'a str,
    singular: &'a str,
    short_names: &'a [&'a str],
    namespaced: bool,
    columns: Value,
}

fn crd(def: Def<'_>) -> Value {
    let versions: Vec<Value> = def
        .versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({
                "name": v,
                "served": true,
                "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": def.columns,
            })
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", def.plural, def.group)},
        "spec": {
            "group": def.group,
            "names": {
                "kind": def.kind,
                "listKind": format!("{}List", def.kind),
                "plural": def.plural,
                "singular": def.singular,
                "shortNames": def.short_names,
            },
            "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
            "versions": versions,
        }
    })
}

fn age() -> Value {
    json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
}

/// The definitions of a bundle.
pub fn bundle(bundle: CrdBundle) -> Vec<Value> {
    match bundle {
        CrdBundle::SparkApache => vec![crd(Def {
            group: "spark.apache.org",
            versions: &["v1", "v1beta1"],
            kind: "SparkApplication",
            plural: "sparkapplications",
            singular: "sparkapplication",
            short_names: &["sparkapp"],
            namespaced: true,
            columns: json!([
                {"name": "Current State", "type": "string", "jsonPath": ".status.currentState.currentStateSummary"},
                age()
            ]),
        })],
        CrdBundle::SparkKubeflow => vec![
            crd(Def {
                group: "sparkoperator.k8s.io",
                versions: &["v1beta2"],
                kind: "SparkApplication",
                plural: "sparkapplications",
                singular: "sparkapplication",
                short_names: &["sparkapp"],
                namespaced: true,
                columns: json!([
                    {"name": "Status", "type": "string", "jsonPath": ".status.applicationState.state"},
                    {"name": "Attempts", "type": "string", "jsonPath": ".status.submissionAttempts"},
                    {"name": "Start", "type": "string", "jsonPath": ".status.lastSubmissionAttemptTime"},
                    {"name": "Finish", "type": "string", "jsonPath": ".status.terminationTime"},
                    age()
                ]),
            }),
            crd(Def {
                group: "sparkoperator.k8s.io",
                versions: &["v1beta2"],
                kind: "ScheduledSparkApplication",
                plural: "scheduledsparkapplications",
                singular: "scheduledsparkapplication",
                short_names: &["scheduledsparkapp"],
                namespaced: true,
                columns: json!([
                    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
                    {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"},
                    age()
                ]),
            }),
        ],
        CrdBundle::Kueue => vec![
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "Workload",
                plural: "workloads",
                singular: "workload",
                short_names: &["wl"],
                namespaced: true,
                columns: json!([
                    {"name": "Queue", "type": "string", "jsonPath": ".spec.queueName"},
                    {"name": "Reserved in", "type": "string", "jsonPath": ".status.admission.clusterQueue"},
                    age()
                ]),
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "LocalQueue",
                plural: "localqueues",
                singular: "localqueue",
                short_names: &["queue", "queues", "lq"],
                namespaced: true,
                columns: json!([
                    {"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue"},
                    {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
                    {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads"}
                ]),
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "ClusterQueue",
                plural: "clusterqueues",
                singular: "clusterqueue",
                short_names: &["cq"],
                namespaced: false,
                columns: json!([
                    {"name": "Cohort", "type": "string", "jsonPath": ".spec.cohort"},
                    {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
                    {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads"}
                ]),
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "ResourceFlavor",
                plural: "resourceflavors",
                singular: "resourceflavor",
                short_names: &["flavor", "flavors", "rf"],
                namespaced: false,
                columns: json!([age()]),
            }),
        ],
    }
}
