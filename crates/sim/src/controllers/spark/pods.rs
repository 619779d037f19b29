//! The driver and executor pods of a SparkApplication, shaped as Spark's own pod builders shape
//! them (names, labels, the `spark-kubernetes-driver` container, owner references), and what
//! the operators read back from them.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::ops::{self, DeleteOptions, Propagation};
use crate::resources::GroupResource;
use crate::store::{ObjectKey, meta};

/// The label with a Spark pod's role.
pub(crate) const SPARK_ROLE: &str = "spark-role";
/// The name of the driver's container.
pub(crate) const DRIVER_CONTAINER: &str = "spark-kubernetes-driver";
/// The name of an executor's container.
pub(crate) const EXECUTOR_CONTAINER: &str = "spark-kubernetes-executor";

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

/// What a Spark pod is built from, the same for both operators.
pub(crate) struct PodPlan {
    /// The pod's name.
    pub(crate) name: String,
    /// Every label (Spark's, the operator's and the application's).
    pub(crate) labels: Map<String, Value>,
    /// The application's pod annotations.
    pub(crate) annotations: Map<String, Value>,
    /// The controller owner reference.
    pub(crate) owner: Value,
    /// The container's name.
    pub(crate) container: String,
    /// The image.
    pub(crate) image: String,
    /// The image pull policy, if the application sets one.
    pub(crate) pull_policy: Option<String>,
    /// Image pull secrets.
    pub(crate) pull_secrets: Vec<String>,
    /// The container's args (no command: the image's entrypoint runs them).
    pub(crate) args: Vec<String>,
    /// Environment variables (EnvVar objects).
    pub(crate) env: Vec<Value>,
    /// The service account, if the application names one.
    pub(crate) service_account: Option<String>,
    /// Whole cores requested.
    pub(crate) cores: u64,
    /// Memory in MiB, the JVM's plus Spark's overhead; both request and limit.
    pub(crate) memory_mib: u64,
    /// Container ports.
    pub(crate) ports: Value,
    /// Containers that run beside the Spark container (sidecars), as the application gives them.
    pub(crate) sidecars: Vec<Value>,
}

impl PodPlan {
    /// The pod object.
    pub(crate) fn to_pod(&self) -> Value {
        let mut container = json!({
            "name": self.container,
            "image": self.image,
            "args": self.args,
            "env": self.env,
            "ports": self.ports,
            "resources": {
                "requests": {"cpu": self.cores.to_string(), "memory": format!("{}Mi", self.memory_mib)},
                "limits": {"memory": format!("{}Mi", self.memory_mib)},
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        });
        if let Some(policy) = &self.pull_policy {
            container["imagePullPolicy"] = json!(policy);
        }
        let mut containers = vec![container];
        containers.extend(self.sidecars.iter().cloned());
        let mut spec = json!({
            "containers": containers,
            "restartPolicy": "Never",
            "hostname": self.name,
        });
        if let Some(account) = &self.service_account {
            spec["serviceAccountName"] = json!(account);
        }
        if !self.pull_secrets.is_empty() {
            spec["imagePullSecrets"] = self
                .pull_secrets
                .iter()
                .map(|name| json!({"name": name}))
                .collect();
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "labels": self.labels,
                "annotations": self.annotations,
                "ownerReferences": [self.owner],
            },
            "spec": spec,
        })
    }
}

/// The driver container's name and the sidecars of a driver pod template's containers, as
/// Spark reads a pod template: the container named by `basis` (Spark's
/// `spark.kubernetes.driver.podTemplateContainerName`), else the first, is the one the driver
/// is built on, and keeps its name; every other container runs beside it.
pub(crate) fn template_containers(
    containers: &[Value],
    basis: Option<&str>,
) -> (String, Vec<Value>) {
    let chosen = basis
        .and_then(|name| {
            containers
                .iter()
                .position(|c| c.get("name").and_then(Value::as_str) == Some(name))
        })
        .or(if containers.is_empty() { None } else { Some(0) });
    let name = chosen
        .and_then(|i| containers[i].get("name").and_then(Value::as_str))
        .filter(|n| !n.is_empty())
        .unwrap_or(DRIVER_CONTAINER)
        .to_string();
    let sidecars = containers
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != chosen)
        .map(|(_, c)| c.clone())
        .collect();
    (name, sidecars)
}

/// A controller owner reference to `object`.
pub(crate) fn owner_reference(object: &Value) -> Value {
    json!({
        "apiVersion": object.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": object.get("kind").cloned().unwrap_or(Value::Null),
        "name": meta::name(object),
        "uid": meta::uid(object).unwrap_or(""),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The application id Spark gives an application (`spark-<32 hex digits>`), here derived from
/// the SparkApplication's uid so that every reconcile agrees on it.
pub(crate) fn app_selector(app: &Value) -> String {
    let hex: String = meta::uid(app)
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    format!("spark-{hex:0<32}")
}

/// The driver's environment as Spark sets it, then the application's.
pub(crate) fn driver_env(app: &Value, user: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut env = vec![
        json!({"name": "SPARK_USER", "value": "spark"}),
        json!({"name": "SPARK_APPLICATION_ID", "value": app_selector(app)}),
        json!({"name": "SPARK_DRIVER_BIND_ADDRESS", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}),
        json!({"name": "SPARK_CONF_DIR", "value": "/opt/spark/conf"}),
    ];
    env.extend(user);
    env
}

/// The start of the application's executor pods' names, as Spark makes it: the application's
/// name and the first 16 hex digits of its selector, or `spark-` and the digits when an
/// executor's name would pass 63 characters.
pub(crate) fn executor_prefix(app_name: &str, selector: &str, instances: u64) -> String {
    let hex = selector.trim_start_matches("spark-");
    let digits = &hex[..16.min(hex.len())];
    let prefix = format!("{app_name}-{digits}");
    if prefix.len() + format!("-exec-{instances}").len() > 63 {
        return format!("spark-{digits}");
    }
    prefix
}

/// Executor `id`'s environment as Spark sets it, then the application's.
pub(crate) fn executor_env(
    id: u64,
    selector: &str,
    user: impl IntoIterator<Item = Value>,
) -> Vec<Value> {
    let mut env = vec![
        json!({"name": "SPARK_EXECUTOR_ID", "value": id.to_string()}),
        json!({"name": "SPARK_APPLICATION_ID", "value": selector}),
    ];
    env.extend(user);
    env
}

/// A list of arguments as given, anything but a string as its JSON text; none when absent.
pub(crate) fn args(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .map(|a| match a {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The labels the application's template gives a pod (`template`, a labels object if any),
/// with `marks` set over them.
pub(crate) fn labels<'a>(
    template: Option<&Value>,
    marks: impl IntoIterator<Item = (&'a str, String)>,
) -> Map<String, Value> {
    let mut labels = template
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (key, value) in marks {
        labels.insert(key.to_string(), json!(value));
    }
    labels
}

/// The driver container's ports.
pub(crate) fn driver_ports() -> Value {
    json!([
        {"containerPort": 7078, "name": "driver-rpc-port", "protocol": "TCP"},
        {"containerPort": 7079, "name": "blockmanager", "protocol": "TCP"},
        {"containerPort": 4040, "name": "spark-ui", "protocol": "TCP"},
    ])
}

/// The args Spark gives the driver: `driver --properties-file … --class <class> <resource>
/// <application args>` (Python applications run through `PythonRunner`).
pub(crate) fn driver_args(
    main_class: Option<&str>,
    resource: &str,
    app_args: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let python = resource.ends_with(".py");
    let class = if python {
        "org.apache.spark.deploy.PythonRunner"
    } else {
        main_class.unwrap_or("")
    };
    let mut args: Vec<String> = [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        class,
        resource,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(app_args);
    args
}

/// Spark's memory notation (`512m`, `2g`, `1024k`, `1gb`; a bare number is MiB) in MiB.
pub(crate) fn memory_mib(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_suffix('b').unwrap_or(&text);
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    match unit {
        "k" => Some(number.div_ceil(1024)),
        "" | "m" => Some(number),
        "g" => number.checked_mul(1024),
        "t" => number.checked_mul(1024 * 1024),
        _ => None,
    }
}

/// A container's memory: the JVM's plus Spark's overhead (10%, at least 384 MiB).
pub(crate) fn with_overhead(mib: u64) -> u64 {
    mib + (mib / 10).max(384)
}

/// Creates a pod as the operator's service account would.
pub(crate) fn create(ctx: &Ctx, namespace: &str, pod: Value) -> Result<Arc<Value>, ApiError> {
    let rt = ctx
        .state
        .registry
        .get(&pods())
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    ops::create(&ctx.state, &rt, "v1", namespace, pod, false)
}

/// Deletes a pod (gone already is fine).
pub(crate) fn delete(ctx: &Ctx, pod: &Value) {
    let Some(rt) = ctx.state.registry.get(&pods()) else {
        return;
    };
    if meta::is_deleting(pod) {
        return;
    }
    let key = ObjectKey::new(pods(), meta::namespace(pod), meta::name(pod));
    let options = DeleteOptions {
        propagation: Some(Propagation::Background),
        uid: meta::uid(pod).map(str::to_string),
        ..DeleteOptions::default()
    };
    let _ = ops::delete(&ctx.state, &rt, &key, &options);
}

/// The pods whose controller is the object `uid`, oldest first.
pub(crate) fn owned_by(ctx: &Ctx, uid: &str) -> Vec<Arc<Value>> {
    let mut owned: Vec<Arc<Value>> = ctx
        .state
        .store
        .dependents_of(uid)
        .into_iter()
        .filter(|key| key.resource == pods())
        .filter_map(|key| ctx.state.store.get(&key))
        .filter(|pod| {
            meta::controller_ref(pod)
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
                == Some(uid)
        })
        .collect();
    owned.sort_by(|a, b| {
        let created = |p: &Value| {
            p.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        (created(a), meta::name(a)).cmp(&(created(b), meta::name(b)))
    });
    owned
}

/// Deletes the executors of a driver and, with `driver`, the driver itself.
pub(crate) fn release(ctx: &Ctx, driver: &Value, with_driver: bool) {
    if let Some(uid) = meta::uid(driver) {
        for executor in owned_by(ctx, uid) {
            delete(ctx, &executor);
        }
    }
    if with_driver {
        delete(ctx, driver);
    }
}

/// Where a driver pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DriverState {
    /// Not running yet.
    Pending,
    /// The driver container runs; `ready` once the pod is Ready.
    Running {
        /// The pod's Ready condition.
        ready: bool,
    },
    /// The driver container ended with exit code 0.
    Succeeded,
    /// The driver container ended otherwise, or the pod failed.
    Failed {
        /// The exit code, when the container ended.
        exit_code: Option<i64>,
        /// The termination reason (`Error`, `OOMKilled`).
        reason: String,
    },
    /// The pod was evicted.
    Evicted {
        /// The kubelet's message.
        message: String,
    },
    /// The pod is being deleted.
    Deleting,
}

/// Reads a driver pod.
pub(crate) fn driver_state(pod: &Value) -> DriverState {
    let status = pod.get("status").cloned().unwrap_or(Value::Null);
    let phase = status.get("phase").and_then(Value::as_str).unwrap_or("");
    if status.get("reason").and_then(Value::as_str) == Some("Evicted") {
        return DriverState::Evicted {
            message: status
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        };
    }
    let container = status
        .get("containerStatuses")
        .and_then(Value::as_array)
        .and_then(|all| {
            all.iter()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(DRIVER_CONTAINER))
                .or_else(|| all.first())
        });
    if let Some(terminated) = container.and_then(|c| c.pointer("/state/terminated")) {
        let exit_code = terminated.get("exitCode").and_then(Value::as_i64);
        if exit_code == Some(0) {
            return DriverState::Succeeded;
        }
        return DriverState::Failed {
            exit_code,
            reason: terminated
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("Error")
                .to_string(),
        };
    }
    match phase {
        "Succeeded" => return DriverState::Succeeded,
        "Failed" => {
            return DriverState::Failed {
                exit_code: None,
                reason: status
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("Error")
                    .to_string(),
            };
        }
        _ => {}
    }
    if meta::is_deleting(pod) {
        return DriverState::Deleting;
    }
    let running = container.is_some_and(|c| c.pointer("/state/running").is_some());
    if running {
        let ready = status
            .get("conditions")
            .and_then(Value::as_array)
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            });
        return DriverState::Running { ready };
    }
    DriverState::Pending
}

/// Whether a pod's main container has started (it runs, or ran).
pub(crate) fn has_started(pod: &Value) -> bool {
    pod.pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .is_some_and(|all| {
            all.iter().any(|c| {
                c.pointer("/state/running").is_some() || c.pointer("/state/terminated").is_some()
            })
        })
        || matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_templates_name_the_driver_container_and_keep_sidecars() {
        let sidecar = json!({"name": "proxy", "image": "envoy"});
        let names = |containers: &[Value], basis: Option<&str>| {
            let (name, sidecars) = template_containers(containers, basis);
            let sidecars: Vec<String> = sidecars
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect();
            (name, sidecars)
        };
        assert_eq!(names(&[], None), (DRIVER_CONTAINER.to_string(), vec![]));
        assert_eq!(
            names(&[json!({"name": DRIVER_CONTAINER}), sidecar.clone()], None),
            (DRIVER_CONTAINER.to_string(), vec!["proxy".to_string()])
        );
        assert_eq!(
            names(&[sidecar.clone(), json!({"name": "spark"})], Some("spark")),
            ("spark".to_string(), vec!["proxy".to_string()])
        );
        assert_eq!(
            names(&[json!({"image": "x"}), sidecar], Some("missing")),
            (DRIVER_CONTAINER.to_string(), vec!["proxy".to_string()]),
            "the first is the basis; without a name it takes Spark's"
        );
    }

    #[test]
    fn spark_memory() {
        assert_eq!(memory_mib("512m"), Some(512));
        assert_eq!(memory_mib("2g"), Some(2048));
        assert_eq!(memory_mib("1gb"), Some(1024));
        assert_eq!(memory_mib("1Gi"), Some(1024));
        assert_eq!(memory_mib("2048k"), Some(2));
        assert_eq!(memory_mib("lots"), None);
        assert_eq!(with_overhead(512), 896);
        assert_eq!(with_overhead(8192), 9011);
    }

    #[test]
    fn driver_args_as_spark_builds_them() {
        assert_eq!(
            driver_args(
                Some("org.apache.spark.examples.SparkPi"),
                "local:///opt/spark/examples/jars/spark-examples.jar",
                ["100".to_string()]
            ),
            [
                "driver",
                "--properties-file",
                "/opt/spark/conf/spark.properties",
                "--class",
                "org.apache.spark.examples.SparkPi",
                "local:///opt/spark/examples/jars/spark-examples.jar",
                "100"
            ]
        );
        let python = driver_args(None, "local:///opt/app/pi.py", []);
        assert_eq!(python[4], "org.apache.spark.deploy.PythonRunner");
    }
}
