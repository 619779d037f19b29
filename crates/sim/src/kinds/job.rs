//! batch/v1 Jobs: defaults (selector and template labels from the uid) and validation.

use serde_json::{Value, json};

use super::pod::{default_pod_spec, validate_pod_spec};
use crate::error::FieldError;
use crate::indexes;
use crate::store::meta;

/// Labels the API server puts on a Job's pod template (and so on its pods).
pub const CONTROLLER_UID_LABELS: [&str; 2] =
    ["batch.kubernetes.io/controller-uid", "controller-uid"];
/// Labels with the Job's name.
pub const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];

pub(crate) fn default_job(job: &mut Value) {
    let uid = meta::uid(job).unwrap_or("").to_string();
    let name = meta::name(job).to_string();
    if job.get("spec").is_none() {
        job["spec"] = json!({});
    }
    let spec = &mut job["spec"];
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    if !map.contains_key("completions") && !map.contains_key("parallelism") {
        map.insert("completions".into(), json!(1));
    }
    map.entry("parallelism").or_insert_with(|| json!(1));
    // With a per-index limit the job-wide one is effectively off (Kubernetes' defaulting).
    let backoff_limit = if map.contains_key("backoffLimitPerIndex") {
        i64::from(i32::MAX)
    } else {
        6
    };
    map.entry("backoffLimit")
        .or_insert_with(|| json!(backoff_limit));
    map.entry("completionMode")
        .or_insert_with(|| json!("NonIndexed"));
    map.entry("suspend").or_insert_with(|| json!(false));
    let replacement = if map.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    map.entry("podReplacementPolicy")
        .or_insert_with(|| json!(replacement));
    // A pod condition pattern without a status means True (Kubernetes' defaulting).
    if let Some(Value::Array(rules)) = map
        .get_mut("podFailurePolicy")
        .and_then(|p| p.get_mut("rules"))
    {
        for pattern in rules
            .iter_mut()
            .filter_map(|r| r.get_mut("onPodConditions"))
            .filter_map(Value::as_array_mut)
            .flatten()
        {
            let empty = pattern
                .get("status")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty && pattern.is_object() {
                pattern["status"] = json!("True");
            }
        }
    }
    let manual = map.get("manualSelector").and_then(Value::as_bool) == Some(true);
    if !manual {
        map.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        let template = map.entry("template").or_insert_with(|| json!({}));
        if template.get("metadata").is_none() {
            template["metadata"] = json!({});
        }
        let labels = template["metadata"]
            .as_object_mut()
            .map(|m| m.entry("labels").or_insert_with(|| json!({})));
        if let Some(Value::Object(labels)) = labels {
            for key in CONTROLLER_UID_LABELS {
                labels.insert(key.into(), json!(uid));
            }
            for key in JOB_NAME_LABELS {
                labels.insert(key.into(), json!(name));
            }
        }
    }
    if let Some(tspec) = map.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(tspec, None);
    }
    // A Job without labels takes its pod template's.
    let template_labels = job.pointer("/spec/template/metadata/labels").cloned();
    if let (Some(labels), Some(m)) = (template_labels, meta::metadata_mut(job)) {
        let empty = m
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(|l| l.is_empty());
        if empty {
            m.insert("labels".into(), labels);
        }
    }
}

fn non_negative(spec: &Value, field: &str, errors: &mut Vec<FieldError>) {
    if let Some(v) = spec.get(field)
        && v.as_i64().is_none_or(|n| n < 0)
    {
        errors.push(FieldError::invalid(
            format!("spec.{field}"),
            v,
            "must be greater than or equal to 0",
        ));
    }
}

pub(crate) fn validate_job(job: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let spec = job.get("spec").cloned().unwrap_or_else(|| json!({}));
    match spec.pointer("/template/spec") {
        Some(tspec) => {
            validate_pod_spec(tspec, "spec.template.spec", &["OnFailure", "Never"], errors)
        }
        None => errors.push(FieldError::required("spec.template.spec.containers", "")),
    }
    validate_indexed(&spec, errors);
    for field in [
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "completions",
        "parallelism",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(&spec, field, errors);
    }
    if spec.get("activeDeadlineSeconds").and_then(Value::as_i64) == Some(0) {
        errors.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            &json!(0),
            "must be greater than 0",
        ));
    }
    if spec.get("podFailurePolicy").is_some()
        && spec
            .pointer("/template/spec/restartPolicy")
            .and_then(Value::as_str)
            != Some("Never")
    {
        errors.push(FieldError::invalid(
            "spec.template.spec.restartPolicy",
            spec.pointer("/template/spec/restartPolicy")
                .unwrap_or(&Value::Null),
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
        for field in [
            "selector",
            "template",
            "completionMode",
            "podFailurePolicy",
            "successPolicy",
        ] {
            if spec.get(field) != old_spec.get(field) {
                errors.push(FieldError::invalid(
                    format!("spec.{field}"),
                    spec.get(field).unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
        if spec.get("completions") != old_spec.get("completions") {
            errors.push(FieldError::invalid(
                "spec.completions",
                spec.get("completions").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

/// Completion mode, per-index backoff, FailIndex and success policy: what needs what.
fn validate_indexed(spec: &Value, errors: &mut Vec<FieldError>) {
    let mode = spec.get("completionMode").and_then(Value::as_str);
    if let Some(mode) = mode
        && !["NonIndexed", "Indexed"].contains(&mode)
    {
        errors.push(FieldError::not_supported(
            "spec.completionMode",
            mode,
            &["NonIndexed", "Indexed"],
        ));
    }
    let indexed = mode == Some("Indexed");
    let completions = spec.get("completions").and_then(Value::as_i64);
    if indexed && completions.is_none() {
        errors.push(FieldError::required(
            "spec.completions",
            "when completion mode is Indexed",
        ));
    }
    let per_index = spec.get("backoffLimitPerIndex");
    if let Some(v) = per_index
        && !indexed
    {
        errors.push(FieldError::invalid(
            "spec.backoffLimitPerIndex",
            v,
            "requires indexed completion mode",
        ));
    }
    if let Some(v) = spec.get("maxFailedIndexes") {
        if per_index.is_none() {
            errors.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                v,
                "requires the backoffLimitPerIndex to be set",
            ));
        } else if let (Some(m), Some(c)) = (v.as_i64(), completions)
            && m > c
        {
            errors.push(FieldError::invalid(
                "spec.maxFailedIndexes",
                v,
                "must be less than or equal to completions",
            ));
        }
    }
    let rules = spec
        .pointer("/podFailurePolicy/rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("spec.podFailurePolicy.rules[{i}].action");
        match rule.get("action").and_then(Value::as_str) {
            Some("FailIndex") if per_index.is_none() => errors.push(FieldError::invalid(
                path,
                &json!("FailIndex"),
                "requires the backoffLimitPerIndex to be set",
            )),
            Some("FailJob" | "FailIndex" | "Ignore" | "Count") => {}
            Some(other) => errors.push(FieldError::not_supported(
                path,
                other,
                &["Count", "FailIndex", "FailJob", "Ignore"],
            )),
            None => errors.push(FieldError::required(path, "")),
        }
    }
    let Some(policy) = spec.get("successPolicy").filter(|p| !p.is_null()) else {
        return;
    };
    if !indexed {
        errors.push(FieldError::invalid(
            "spec.successPolicy",
            policy,
            "requires indexed completion mode",
        ));
        return;
    }
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if rules.is_empty() {
        errors.push(FieldError::required("spec.successPolicy.rules", ""));
    }
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("spec.successPolicy.rules[{i}]");
        let count = rule.get("succeededCount");
        let listed = rule.get("succeededIndexes");
        if count.is_none() && listed.is_none() {
            errors.push(FieldError::required(
                path.clone(),
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        if let Some(v) = listed {
            let problem = match v.as_str() {
                Some(text) => indexes::validate(text, completions).err(),
                None => Some("must be a string".to_string()),
            };
            if let Some(problem) = problem {
                errors.push(FieldError::invalid(
                    format!("{path}.succeededIndexes"),
                    v,
                    &problem,
                ));
            }
        }
        if let Some(v) = count {
            match (v.as_i64(), completions) {
                (Some(n), _) if n < 0 => errors.push(FieldError::invalid(
                    format!("{path}.succeededCount"),
                    v,
                    "must be greater than or equal to 0",
                )),
                (Some(n), Some(c)) if n > c => errors.push(FieldError::invalid(
                    format!("{path}.succeededCount"),
                    v,
                    &format!(
                        "must be less than or equal to {c} (the number of specified completions)"
                    ),
                )),
                (None, _) => errors.push(FieldError::invalid(
                    format!("{path}.succeededCount"),
                    v,
                    "must be an integer",
                )),
                _ => {}
            }
            let checked = listed
                .and_then(Value::as_str)
                .zip(completions)
                .filter(|(text, c)| indexes::validate(text, Some(*c)).is_ok());
            if let (Some(n), Some((text, c))) = (v.as_i64(), checked) {
                let size = indexes::parse(text, c).len() as i64;
                if n > size {
                    errors.push(FieldError::invalid(
                        format!("{path}.succeededCount"),
                        v,
                        &format!(
                            "must be less than or equal to {size} (the number of indexes in the specified succeededIndexes field)"
                        ),
                    ));
                }
            }
        }
    }
}
