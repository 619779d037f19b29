//! The simulated Spark operators: apache/spark-kubernetes-operator ([`apache`]) and the Kubeflow
//! spark-operator ([`kubeflow`]), each running when its CRD bundle is installed
//! (`SimConfig::crd_bundles`).
//!
//! For every SparkApplication of its group an operator creates the driver pod (with the names,
//! labels, container and owner the real operator gives it, see `docs/spark.md`), the
//! executor pods once the driver runs ([`SparkSimConfig::executors`]), moves the application
//! through the real operator's states as the pods progress, applies its restart policy,
//! timeouts, resource retention and TTL, and writes the status in the real operator's shape.
//! The driver's container runs whatever the kubelet runs for its image (see
//! [`demo::SPARK_DEMO_SCRIPT`] and `SimConfig::image_entrypoints`), so exit codes and logs are
//! real.
//!
//! Like the operators' Helm charts, each operator creates the service account its chart
//! creates for Spark applications in namespace `default` (`spark` for the apache operator,
//! `spark-operator-spark` for the Kubeflow one).
//!
//! [`SparkFaults`] makes an operator misbehave on purpose, for the cases a client of the
//! operators has to survive.

pub mod apache;
pub mod demo;
pub mod kubeflow;
mod pods;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::WorkQueue;
use crate::config::CrdBundle;
use crate::ops;
use crate::resources::GroupResource;
use crate::state::State;
use crate::store::{EventType, ObjectKey, meta};

pub use crate::config::{SparkFault, SparkFaults, SparkSimConfig};
pub use demo::{SPARK_DEMO_SCRIPT, demo_entrypoint, with_demo_entrypoint, with_spark_operators};

/// The plural resource of SparkApplications, under both operators.
const SPARK_APPLICATIONS: &str = "sparkapplications";

/// What an operator's reconcile needs.
pub(crate) struct Ctx {
    pub(crate) state: Arc<State>,
    pub(crate) config: SparkSimConfig,
}

impl Ctx {
    pub(crate) fn fault(&self, app: &Value) -> Option<SparkFault> {
        self.config.faults.get(meta::name(app))
    }
}

/// One simulated operator.
pub(crate) trait Operator: Send + 'static {
    /// The CRD bundle that enables it.
    const BUNDLE: CrdBundle;
    /// The API group of its SparkApplications.
    const GROUP: &'static str;
    /// The label on its pods naming their SparkApplication.
    const APP_NAME_LABEL: &'static str;
    /// The service account its Helm chart creates for Spark applications.
    const SERVICE_ACCOUNT: &'static str;
    /// Moves one application on by (at most) one step; returns when to look at it again
    /// if nothing changes before.
    fn reconcile(&mut self, ctx: &Ctx, key: &ObjectKey, app: &Value) -> Option<Duration>;
}

/// Installs what the operators of the installed CRD bundles bring with them, their
/// ServiceAccounts, before the cluster answers its first request: a chart installs them with
/// the operator, not a moment after it is up.
pub fn install(state: &State) {
    install_for::<apache::Apache>(state);
    install_for::<kubeflow::Kubeflow>(state);
}

fn install_for<O: Operator>(state: &State) {
    if state.config.crd_bundles.contains(&O::BUNDLE) {
        install_service_account(state, "default", O::SERVICE_ACCOUNT);
    }
}

/// Runs the operators of the installed CRD bundles until shutdown.
pub async fn run(state: Arc<State>, shutdown: watch::Receiver<bool>) {
    let apache = run_operator(state.clone(), shutdown.clone(), apache::Apache);
    let kubeflow = run_operator(state, shutdown, kubeflow::Kubeflow);
    tokio::join!(apache, kubeflow);
}

fn applications(group: &str) -> GroupResource {
    GroupResource::new(group, SPARK_APPLICATIONS)
}

async fn run_operator<O: Operator>(
    state: Arc<State>,
    mut shutdown: watch::Receiver<bool>,
    mut operator: O,
) {
    if !state.config.crd_bundles.contains(&O::BUNDLE) {
        return;
    }
    let ctx = Ctx {
        config: state.config.spark.clone(),
        state: state.clone(),
    };
    let apps = applications(O::GROUP);
    let pods = GroupResource::new("", "pods");
    let queue: Arc<WorkQueue<ObjectKey>> = WorkQueue::new();
    let mut rx = state.store.follow();
    for app in state.store.list(&apps, None).0 {
        queue.add(ObjectKey::new(
            apps.clone(),
            meta::namespace(&app),
            meta::name(&app),
        ));
    }
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            key = queue.next() => {
                if let Some(app) = state.store.get(&key)
                    && let Some(after) = operator.reconcile(&ctx, &key, &app)
                {
                    queue.add_after(key, after.max(Duration::from_millis(1)));
                }
            }
            received = rx.recv() => match received {
                Some(event) if event.key.resource == apps => {
                    if event.event_type != EventType::Deleted {
                        queue.add(event.key.clone());
                    }
                }
                Some(event) if event.key.resource == pods => {
                    if let Some(app) = meta::label(&event.object, O::APP_NAME_LABEL) {
                        queue.add(ObjectKey::new(apps.clone(), &event.key.namespace, app));
                    }
                }
                Some(_) => {}
                None => return,
            }
        }
    }
}

/// Creates a service account as an operator's Helm chart does (nothing if it exists).
fn install_service_account(state: &State, namespace: &str, name: &str) {
    let Some(rt) = state
        .registry
        .get(&GroupResource::new("", "serviceaccounts"))
    else {
        return;
    };
    let account = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
    });
    // Already there (a restart, both operators naming the same one) is fine.
    let _ = ops::create(state, &rt, "v1", namespace, account, false);
}

/// Replaces an application's status (a controller's write to the status subresource), only if
/// it is still the application `uid`. `None` when it is gone or replaced.
pub(crate) fn write_status(
    ctx: &Ctx,
    key: &ObjectKey,
    uid: &str,
    change: impl FnOnce(&mut Value),
) -> Option<Arc<Value>> {
    ops::mutate(&ctx.state, key, |app| {
        if meta::uid(app) != Some(uid) {
            return false;
        }
        let mut status = app.get("status").cloned().unwrap_or_else(|| json!({}));
        if !status.is_object() {
            status = json!({});
        }
        change(&mut status);
        app["status"] = status;
        true
    })
    .ok()
}

/// Adds or removes a finalizer on an application (a controller's write).
pub(crate) fn set_finalizer(ctx: &Ctx, key: &ObjectKey, finalizer: &str, present: bool) {
    if present {
        let _ = ops::mutate(&ctx.state, key, |app| {
            let mut finalizers = meta::finalizers(app);
            if meta::is_deleting(app) || finalizers.iter().any(|f| f == finalizer) {
                return false;
            }
            finalizers.push(finalizer.to_string());
            meta::set_finalizers(app, &finalizers);
            true
        });
    } else {
        // Gone already is fine.
        let _ = ops::remove_finalizer(&ctx.state, key, finalizer);
    }
}

/// Deletes an application (its TTL ran out); its pods follow by garbage collection.
pub(crate) fn delete_application(ctx: &Ctx, key: &ObjectKey, uid: &str) {
    let Some(rt) = ctx.state.registry.get(&key.resource) else {
        return;
    };
    let options = ops::DeleteOptions {
        propagation: Some(ops::Propagation::Background),
        uid: Some(uid.to_string()),
        ..ops::DeleteOptions::default()
    };
    // Deleted by someone else first is fine.
    let _ = ops::delete(&ctx.state, &rt, key, &options);
}

/// How long until `since + period`, or `None` when it has passed.
pub(crate) fn remaining(since: jiff::Timestamp, period: Duration) -> Option<Duration> {
    let deadline = since.checked_add(period).ok()?;
    let now = jiff::Timestamp::now();
    (now < deadline).then(|| deadline.duration_since(now).unsigned_abs())
}

/// An RFC 3339 time field as a timestamp.
pub(crate) fn time_of(value: Option<&Value>) -> Option<jiff::Timestamp> {
    value.and_then(Value::as_str).and_then(meta::parse_time)
}
