//! CustomResourceDefinitions the cluster can install at start: both Spark operators'
//! SparkApplication, Kueue's workload types and JobSet, with structural schemas written from the
//! operators' and Kueue's published APIs (the files under `crds/`), so custom resources are
//! defaulted, pruned and validated as a real cluster does.

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::config::CrdBundle;

/// The schemas of the bundled definitions, in the compact notation [`crate::crd_schema`]
/// expands: a string names a type (`string`, `boolean`, `number`, `integer`, `int32`, `int64`,
/// `date-time`, `int-or-string`, `object`, `any` for an object that keeps unknown fields, or
/// `ref:name` for a definition under `defs`) followed by options (`=value` default, `min=`,
/// `max=`, `enum=a|b|c`); a one-element list is an array of its item; a mapping is an object
/// whose keys are its properties (`name!` is required), with `$map` for the values of a map,
/// `$preserve` to keep unknown fields and `$default` for its own default. Each file holds the
/// `defs` and, per kind, the root properties of each version.
const SPARK_APACHE: &str = include_str!("crds/spark-apache.yaml");
const SPARK_KUBEFLOW: &str = include_str!("crds/spark-kubeflow.yaml");
const KUEUE: &str = include_str!("crds/kueue.yaml");
const JOBSET: &str = include_str!("crds/jobset.yaml");

struct Def<'a> {
    group: &'a str,
    versions: &'a [&'a str],
    kind: &'a str,
    plural: &'a str,
    singular: &'a str,
    short_names: &'a [&'a str],
    namespaced: bool,
    /// The printer columns of each version, in `versions` order.
    columns: &'a [Value],
    schemas: &'a str,
}

/// The `openAPIV3Schema` of `kind` at `version` in a schema file.
fn schema(file: &str, kind: &str, version: &str) -> Value {
    let doc: Value = serde_saphyr::from_str(file).expect("a bundled CRD schema file is YAML");
    let defs = doc
        .get("defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let compact = doc
        .get(kind)
        .and_then(|k| k.get(version))
        .unwrap_or_else(|| panic!("the bundled schemas have no {kind} {version}"));
    let mut root = crate::crd_schema::expand(compact, &defs)
        .unwrap_or_else(|e| panic!("bundled schema of {kind} {version}: {e}"));
    let props = root
        .as_object_mut()
        .and_then(|r| r.get_mut("properties"))
        .and_then(Value::as_object_mut)
        .expect("a root schema has properties");
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props
        .entry("metadata")
        .or_insert_with(|| json!({"type": "object"}));
    root
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
                "schema": {"openAPIV3Schema": schema(def.schemas, def.kind, v)},
                "subresources": {"status": {}},
                "additionalPrinterColumns": def.columns.get(i).cloned().unwrap_or_else(|| json!([])),
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

/// The definitions of a bundle (built once: expanding the schemas is not free and every
/// cluster start asks for them).
pub fn bundle(bundle: CrdBundle) -> Vec<Value> {
    static APACHE: OnceLock<Vec<Value>> = OnceLock::new();
    static KUBEFLOW: OnceLock<Vec<Value>> = OnceLock::new();
    static KUEUE_CRDS: OnceLock<Vec<Value>> = OnceLock::new();
    static JOBSET_CRDS: OnceLock<Vec<Value>> = OnceLock::new();
    let cell = match bundle {
        CrdBundle::SparkApache => &APACHE,
        CrdBundle::SparkKubeflow => &KUBEFLOW,
        CrdBundle::Kueue => &KUEUE_CRDS,
        CrdBundle::JobSet => &JOBSET_CRDS,
    };
    cell.get_or_init(|| build(bundle)).clone()
}

fn build(bundle: CrdBundle) -> Vec<Value> {
    match bundle {
        CrdBundle::SparkApache => vec![crd(Def {
            group: "spark.apache.org",
            versions: &["v1", "v1beta1"],
            kind: "SparkApplication",
            plural: "sparkapplications",
            singular: "sparkapplication",
            short_names: &["sparkapp"],
            namespaced: true,
            columns: &[
                json!([
                    age(),
                    {"name": "Current State", "type": "string", "jsonPath": ".status.currentState.currentStateSummary"}
                ]),
                json!([
                    {"name": "Current State", "type": "string", "jsonPath": ".status.currentState.currentStateSummary"},
                    age()
                ]),
            ],
            schemas: SPARK_APACHE,
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
                columns: &[json!([
                    {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
                    {"name": "Status", "type": "string", "jsonPath": ".status.applicationState.state"},
                    {"name": "Attempts", "type": "string", "jsonPath": ".status.executionAttempts"},
                    {"name": "Start", "type": "string", "jsonPath": ".status.lastSubmissionAttemptTime"},
                    {"name": "Finish", "type": "string", "jsonPath": ".status.terminationTime"},
                    age()
                ])],
                schemas: SPARK_KUBEFLOW,
            }),
            crd(Def {
                group: "sparkoperator.k8s.io",
                versions: &["v1beta2"],
                kind: "ScheduledSparkApplication",
                plural: "scheduledsparkapplications",
                singular: "scheduledsparkapplication",
                short_names: &["scheduledsparkapp"],
                namespaced: true,
                columns: &[json!([
                    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
                    {"name": "TimeZone", "type": "string", "jsonPath": ".spec.timeZone"},
                    {"name": "Suspend", "type": "string", "jsonPath": ".spec.suspend"},
                    {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"},
                    {"name": "Last Run Name", "type": "string", "jsonPath": ".status.lastRunName"},
                    age()
                ])],
                schemas: SPARK_KUBEFLOW,
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
                columns: &[json!([
                    {"name": "Queue", "type": "string", "jsonPath": ".spec.queueName"},
                    {"name": "Reserved in", "type": "string", "jsonPath": ".status.admission.clusterQueue"},
                    age()
                ])],
                schemas: KUEUE,
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "LocalQueue",
                plural: "localqueues",
                singular: "localqueue",
                short_names: &["queue", "queues", "lq"],
                namespaced: true,
                columns: &[json!([
                    {"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue"},
                    {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
                    {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads"}
                ])],
                schemas: KUEUE,
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "ClusterQueue",
                plural: "clusterqueues",
                singular: "clusterqueue",
                short_names: &["cq"],
                namespaced: false,
                columns: &[json!([
                    {"name": "Cohort", "type": "string", "jsonPath": ".spec.cohort"},
                    {"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads"},
                    {"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads"}
                ])],
                schemas: KUEUE,
            }),
            crd(Def {
                group: "kueue.x-k8s.io",
                versions: &["v1beta1"],
                kind: "ResourceFlavor",
                plural: "resourceflavors",
                singular: "resourceflavor",
                short_names: &["flavor", "flavors", "rf"],
                namespaced: false,
                columns: &[json!([age()])],
                schemas: KUEUE,
            }),
        ],
        // The printer columns of the real CRD (controller-gen markers on the JobSet type).
        CrdBundle::JobSet => vec![crd(Def {
            group: "jobset.x-k8s.io",
            versions: &["v1alpha2"],
            kind: "JobSet",
            plural: "jobsets",
            singular: "jobset",
            short_names: &[],
            namespaced: true,
            columns: &[json!([
                {"name": "TerminalState", "type": "string", "description": "Final state of JobSet", "jsonPath": ".status.terminalState"},
                {"name": "Restarts", "type": "string", "description": "Number of restarts", "jsonPath": ".status.restarts"},
                {"name": "Completed", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Completed\")].status"},
                {"name": "Suspended", "type": "string", "description": "JobSet suspended", "jsonPath": ".spec.suspend"},
                {"name": "Age", "type": "date", "description": "Time this JobSet was created", "jsonPath": ".metadata.creationTimestamp"}
            ])],
            schemas: JOBSET,
        })],
    }
}
