//! JobSets (`jobset.x-k8s.io`) as the JobSet webhook admits them: its defaults and its
//! validation on create, and the replicated jobs of a spec, which the controller reads too.

use serde_json::{Map, Value, json};

use super::dns1035_problem;
use crate::config::{CrdBundle, SimConfig};
use crate::error::{ApiError, FieldError};
use crate::resources::ResourceType;
use crate::store::meta;

/// The API group of JobSets.
pub const GROUP: &str = "jobset.x-k8s.io";

/// The JobSet webhook's defaults (`jobSetWebhook.Default`), applied on create (the mutating
/// webhook is registered for creates only):
/// `successPolicy` `{operator: All}`, `startupPolicy` `{startupPolicyOrder: AnyOrder}`, each
/// replicated job's `completionMode: Indexed` and pod `restartPolicy: OnFailure`,
/// `network.enableDNSHostnames` and `network.publishNotReadyAddresses` true, and the names
/// `failurePolicyRule<i>` of unnamed failure policy rules.
pub(crate) fn mutating_webhook(config: &SimConfig, rt: &ResourceType, object: &mut Value) {
    if rt.group != GROUP
        || rt.resource != "jobsets"
        || !config.crd_bundles.contains(&CrdBundle::JobSet)
    {
        return;
    }
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let absent = |spec: &Map<String, Value>, name: &str| spec.get(name).is_none_or(Value::is_null);
    if absent(spec, "successPolicy") {
        spec.insert("successPolicy".into(), json!({"operator": "All"}));
    }
    if absent(spec, "startupPolicy") {
        spec.insert(
            "startupPolicy".into(),
            json!({"startupPolicyOrder": "AnyOrder"}),
        );
    }
    if let Some(rjobs) = spec.get_mut("replicatedJobs").and_then(Value::as_array_mut) {
        for rjob in rjobs {
            let Some(job_spec) = rjob
                .pointer_mut("/template/spec")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            if absent(job_spec, "completionMode") {
                job_spec.insert("completionMode".into(), json!("Indexed"));
            }
            if let Some(pod_spec) = job_spec
                .get_mut("template")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
                && pod_spec
                    .get("restartPolicy")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                pod_spec.insert("restartPolicy".into(), json!("OnFailure"));
            }
        }
    }
    if absent(spec, "network") {
        spec.insert("network".into(), json!({}));
    }
    if let Some(network) = spec.get_mut("network").and_then(Value::as_object_mut) {
        for field in ["enableDNSHostnames", "publishNotReadyAddresses"] {
            if absent(network, field) {
                network.insert(field.into(), json!(true));
            }
        }
    }
    if let Some(rules) = spec
        .get_mut("failurePolicy")
        .and_then(|p| p.get_mut("rules"))
        .and_then(Value::as_array_mut)
    {
        for (i, rule) in rules.iter_mut().enumerate() {
            if let Some(rule) = rule.as_object_mut()
                && rule
                    .get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                rule.insert("name".into(), json!(format!("failurePolicyRule{i}")));
            }
        }
    }
}

/// The name of the JobSet's validating webhook.
const VALIDATING_WEBHOOK: &str = "vjobset.kb.io";

/// The failure reasons of a Job a failure policy rule may name.
const JOB_FAILURE_REASONS: [&str; 5] = [
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
];

/// The JobSet validating webhook on create (`jobSetWebhook.ValidateCreate`): the Job names the
/// JobSet will generate and its group names must be DNS-1035 labels, `successPolicy` and
/// failure policy rules may only name replicated jobs of the spec, rules need unique valid
/// names and known Job failure reasons, and the feature-gated `RestartJob` actions and
/// `InPlaceRestart` strategy are refused (their gates are off by default). The denial is the
/// webhook's 422 `Invalid`, in its words.
pub(crate) fn validating_webhook(
    config: &SimConfig,
    rt: &ResourceType,
    object: &Value,
) -> Result<(), ApiError> {
    if rt.group != GROUP
        || rt.resource != "jobsets"
        || !config.crd_bundles.contains(&CrdBundle::JobSet)
    {
        return Ok(());
    }
    let name = meta::name(object);
    // Plain errors become field.InternalError with no path, as the webhook's
    // `toFieldErrorList` makes them.
    let internal = |message: String| FieldError {
        field: "<nil>".to_string(),
        reason: "InternalError",
        message: format!("Internal error: {message}"),
    };
    let invalid =
        |path: &str, value: &str, message: &str| FieldError::invalid(path, &json!(value), message);
    let mut errors = Vec::new();
    let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str);
    if text("/failurePolicy/restartStrategy") == Some("InPlaceRestart") {
        errors.push(internal(
            "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled".into(),
        ));
    }
    let rjobs = replicated_jobs(object);
    let names: Vec<&str> = rjobs.iter().map(|r| r.name).collect();
    for (i, rjob) in rjobs.iter().enumerate() {
        let path = format!("spec.replicatedJobs[{i}]");
        if let Some(problem) = dns1035_problem(rjob.group) {
            let message = if rjob.group.len() > 63 {
                ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
                    .to_string()
            } else {
                problem
            };
            errors.push(invalid(&format!("{path}.groupName"), rjob.group, &message));
        }
        let longest = format!("{name}-{}-{}", rjob.name, rjob.replicas - 1);
        if let Some(problem) = dns1035_problem(&longest) {
            let message = if longest.len() > 63 {
                "JobSet name is too long, job names generated for this JobSet will exceed 63 characters".to_string()
            } else {
                problem
            };
            errors.push(invalid(&format!("{path}.name"), &longest, &message));
        }
    }
    let strings = |value: Option<&Value>| -> Vec<String> {
        value
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    for target in strings(spec.pointer("/successPolicy/targetReplicatedJobs")) {
        if !names.contains(&target.as_str()) {
            errors.push(internal(format!(
                "invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs"
            )));
        }
    }
    let rules = spec
        .pointer("/failurePolicy/rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if rules.iter().any(|r| {
        matches!(
            r.get("action").and_then(Value::as_str),
            Some("RestartJob" | "RestartJobAndIgnoreMaxRestarts")
        )
    }) {
        errors.push(internal("RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob feature gate is disabled".into()));
    } else {
        let rule_name =
            regex::Regex::new("^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$").expect("a valid pattern");
        let mut seen: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let rule_name_text = rule.get("name").and_then(Value::as_str).unwrap_or("");
            if rule_name_text.is_empty() || rule_name_text.len() > 128 {
                errors.push(internal(format!("invalid failure policy rule name of length {}, the rule name must be at least 1 characters long and at most 128 characters long", rule_name_text.len())));
            }
            match seen.iter_mut().find(|(n, _)| n == rule_name_text) {
                Some((_, at)) => at.push(i),
                None => seen.push((rule_name_text.to_string(), vec![i])),
            }
            if !rule_name.is_match(rule_name_text) {
                errors.push(internal(format!("invalid failure policy rule name '{rule_name_text}', a failure policy rule name must start with an alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'")));
            }
            for target in strings(rule.get("targetReplicatedJobs")) {
                if !names.contains(&target.as_str()) {
                    errors.push(internal(format!("invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs")));
                }
            }
            for reason in strings(rule.get("onJobFailureReasons")) {
                if !JOB_FAILURE_REASONS.contains(&reason.as_str()) {
                    errors.push(internal(format!("invalid job failure reason '{reason}' in failure policy is not a recognized job failure reason")));
                }
            }
        }
        for (rule_name_text, at) in seen.iter().filter(|(_, at)| at.len() > 1) {
            let at: Vec<String> = at.iter().map(usize::to_string).collect();
            errors.push(internal(format!(
                "rule names are not unique, rules with indices [{}] all have the same name '{rule_name_text}'",
                at.join(" ")
            )));
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    // The API server passes the webhook's Status on, its message prefixed.
    let mut denied = ApiError::invalid("JobSet", GROUP, name, &errors);
    denied.message = format!(
        "admission webhook {VALIDATING_WEBHOOK:?} denied the request: {}",
        denied.message
    );
    Err(denied)
}

/// A replicated job of the spec.
pub(crate) struct ReplicatedJob<'a> {
    pub(crate) name: &'a str,
    pub(crate) group: &'a str,
    pub(crate) replicas: i64,
    pub(crate) template: &'a Value,
}

pub(crate) fn replicated_jobs(js: &Value) -> Vec<ReplicatedJob<'_>> {
    js.pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(ReplicatedJob {
                name: r.get("name")?.as_str()?,
                group: r
                    .get("groupName")
                    .and_then(Value::as_str)
                    .unwrap_or("default"),
                replicas: r.get("replicas").and_then(Value::as_i64).unwrap_or(1),
                template: r.get("template")?,
            })
        })
        .collect()
}
