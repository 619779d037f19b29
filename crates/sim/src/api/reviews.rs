//! Reviews answered on create and never stored: SelfSubjectAccessReview (what
//! `kubectl auth can-i` asks), SubjectAccessReview, SelfSubjectRulesReview (`can-i --list`) and
//! SelfSubjectReview (`kubectl auth whoami`).

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::context::{Ctx, json_response, parse_body};
use crate::auth::Identity;
use crate::auth::rbac::{self, Attributes};
use crate::error::ApiError;
use crate::resources::Behavior;
use crate::store::meta;

fn attributes(spec: &Value) -> Attributes {
    if let Some(r) = spec.get("resourceAttributes") {
        let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        Attributes {
            verb: s("verb"),
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            namespace: s("namespace"),
            name: s("name"),
            path: String::new(),
        }
    } else {
        let n = spec.get("nonResourceAttributes");
        let s = |f: &str| {
            n.and_then(|n| n.get(f))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Attributes {
            verb: s("verb"),
            path: s("path"),
            ..Attributes::default()
        }
    }
}

fn respond(mut review: Value, status: Value) -> Result<Response, ApiError> {
    review["metadata"] = json!({"creationTimestamp": null});
    review["status"] = status;
    Ok(json_response(
        StatusCode::CREATED,
        serde_json::to_vec(&review).unwrap_or_default(),
        "application/json",
    ))
}

fn access(ctx: &Ctx, identity: &Identity, review: Value) -> Result<Response, ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    if spec.get("resourceAttributes").is_none() && spec.get("nonResourceAttributes").is_none() {
        return Err(ApiError::invalid(
            &ctx.rt.kind,
            &ctx.rt.group,
            "",
            &[crate::error::FieldError::required(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        ));
    }
    let decision = rbac::authorize(
        &ctx.state.store,
        ctx.state.config.rbac,
        identity,
        &attributes(&spec),
    );
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    respond(review, status)
}

/// Creates (answers) a review.
pub fn create(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let review = parse_body(&ctx.headers, body)?;
    match ctx.rt.behavior {
        Behavior::SelfSubjectAccessReview => access(ctx, &ctx.identity, review),
        Behavior::SubjectAccessReview => {
            let spec = review.get("spec").cloned().unwrap_or(Value::Null);
            let identity = Identity {
                user: spec
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                groups: meta::strings(spec.get("groups")),
            };
            access(ctx, &identity, review)
        }
        Behavior::SelfSubjectRulesReview => {
            let namespace = review
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let (resource_rules, non_resource_rules) = if ctx.identity.is_admin()
                || !ctx.state.config.rbac
            {
                (
                    vec![json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                    vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
                )
            } else {
                let mut resource_rules = vec![
                    json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
                ];
                let mut non_resource_rules = vec![
                    json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"]}),
                ];
                for (rule, _) in rbac::rules_for(&ctx.state.store, &ctx.identity, &namespace) {
                    if rule.get("nonResourceURLs").is_some() {
                        non_resource_rules.push(rule);
                    } else {
                        resource_rules.push(rule);
                    }
                }
                (resource_rules, non_resource_rules)
            };
            respond(
                review,
                json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false}),
            )
        }
        Behavior::SelfSubjectReview => respond(
            review,
            json!({"userInfo": {"username": ctx.identity.user, "groups": ctx.identity.groups}}),
        ),
        _ => Err(ApiError::method_not_allowed("not a review")),
    }
}
