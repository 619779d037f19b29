//! Kubeflow SparkApplications (`sparkoperator.k8s.io`) as the operator's validating webhook
//! admits them.

use serde_json::Value;

use super::dns1035_problem;
use crate::config::{CrdBundle, SimConfig};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::meta;

/// The API group of the Kubeflow operator's SparkApplications.
pub const KUBEFLOW_GROUP: &str = "sparkoperator.k8s.io";

/// The name of the operator's validating webhook for SparkApplications, as its Helm chart
/// registers it (`webhook.enable` is on by default).
pub const VALIDATING_WEBHOOK: &str =
    "validate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io";

/// The `sparkConf` keys the operator's webhook denies, with its reason for each
/// (`internal/webhook/sparkconf_validator.go` of kubeflow/spark-operator).
pub const DENIED_SPARK_CONF: [(&str, &str); 13] = [
    (
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "configure the service account via the CRD spec instead",
    ),
    (
        "spark.kubernetes.authenticate.executor.serviceAccountName",
        "configure the service account via the CRD spec instead",
    ),
    (
        "spark.kubernetes.authenticate.oauthTokenFile",
        "authentication credentials are managed by the operator",
    ),
    (
        "spark.kubernetes.authenticate.oauthToken",
        "authentication credentials are managed by the operator",
    ),
    (
        "spark.kubernetes.authenticate.driver.oauthTokenFile",
        "authentication credentials are managed by the operator",
    ),
    (
        "spark.kubernetes.authenticate.driver.oauthToken",
        "authentication credentials are managed by the operator",
    ),
    (
        "spark.kubernetes.authenticate.executor.oauthTokenFile",
        "authentication credentials are managed by the operator",
    ),
    (
        "spark.kubernetes.authenticate.executor.oauthToken",
        "authentication credentials are managed by the operator",
    ),
    ("spark.master", "this value is managed by the operator"),
    (
        "spark.kubernetes.driver.master",
        "this value is managed by the operator",
    ),
    (
        "spark.kubernetes.container.image",
        "use the image field on the CRD instead",
    ),
    (
        "spark.kubernetes.driver.container.image",
        "use the image field on the CRD instead",
    ),
    (
        "spark.kubernetes.executor.container.image",
        "use the image field on the CRD instead",
    ),
];

/// Runs the operator's validating webhook when the write is a Kubeflow SparkApplication's (not
/// its status) and the operator is installed.
pub(crate) fn validating_webhook(
    config: &SimConfig,
    rt: &ResourceType,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if rt.group != KUBEFLOW_GROUP
        || rt.resource != "sparkapplications"
        || !config.crd_bundles.contains(&CrdBundle::SparkKubeflow)
    {
        return Ok(());
    }
    admission(object, old)
}

/// The operator's validating webhook on a SparkApplication create or update (`old`): the name
/// must be a DNS-1035 label, the spec (when it changed) may not set a node selector both on
/// the application and on the driver or executor, nor a denied `sparkConf` key, nor a
/// `spark.kubernetes.namespace` other than the application's. A denial is answered as the API
/// server answers any webhook's: 403 `admission webhook "<name>" denied the request: <why>`.
pub(crate) fn admission(object: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let deny = |why: String| Err(ApiError::webhook_denied(VALIDATING_WEBHOOK, &why));
    let name = meta::name(object);
    if let Some(problem) = dns1035_problem(name) {
        return deny(format!("invalid SparkApplication name {name:?}: {problem}"));
    }
    if old.is_some_and(|old| old.get("spec") == object.get("spec")) {
        return Ok(());
    }
    let spec = object.get("spec");
    let selector = |path: &str| {
        spec.and_then(|s| s.pointer(path))
            .is_some_and(|v| !v.is_null())
    };
    if selector("/nodeSelector")
        && (selector("/driver/nodeSelector") || selector("/executor/nodeSelector"))
    {
        return deny(
            "node selector cannot be defined at both SparkApplication and Driver/Executor".into(),
        );
    }
    let conf = spec
        .and_then(|s| s.get("sparkConf"))
        .and_then(Value::as_object);
    for (key, value) in conf.into_iter().flatten() {
        if let Some((_, why)) = DENIED_SPARK_CONF.iter().find(|(k, _)| k == key) {
            return deny(format!("sparkConf key {key:?} is not allowed: {why}"));
        }
        let namespace = meta::namespace(object);
        if key == "spark.kubernetes.namespace" && value.as_str() != Some(namespace) {
            return deny(format!(
                "sparkConf key {key:?} is not allowed: must equal the application namespace {namespace:?}, got {:?}",
                value.as_str().unwrap_or("")
            ));
        }
    }
    Ok(())
}
