//! Resource requests: get, list (selectors, limit/continue, resourceVersion), watch, create,
//! update, patch (JSON, merge, strategic, apply), delete and deletecollection, and the
//! status, log, eviction, binding and finalize subresources.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::context::{Ctx, json_response, parse_body};
use super::decode::{FieldValidation, Write, add_warnings, decode_write, json_body};
use super::output::{Output, render_list, render_one};
use super::patch::{PatchType, apply_json_patch, apply_merge_patch, apply_strategic, unsupported};
use super::request::flag;
use super::selectors::{FieldSelector, LabelSelector};
use super::status::success_status;
use super::watch::{self, Start, WatchParams};
use super::{apply, logs, reviews};
use crate::error::ApiError;
use crate::ops::{self, DeleteOptions, Propagation, Subresource};
use crate::resources::Behavior;
use crate::store::{ObjectKey, StoreError, meta};

fn object_response(code: StatusCode, object: &Value) -> Response {
    json_response(
        code,
        serde_json::to_vec(object).unwrap_or_default(),
        "application/json",
    )
}

/// Handles a resource request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Response {
    match route(ctx, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn route(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let info = &ctx.info;
    let rt = &ctx.rt;
    let named = !info.name.is_empty();
    if rt.namespaced && info.namespace.is_empty() && (named || info.verb == "create") {
        return Err(ApiError::path_not_found());
    }
    if !rt.namespaced && !info.namespace.is_empty() && rt.behavior != Behavior::Namespace {
        return Err(ApiError::path_not_found());
    }
    if rt.create_only {
        return match info.verb.as_str() {
            "create" => reviews::create(&ctx, &body),
            _ => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({})",
                rt.group_resource().qualified()
            ))),
        };
    }
    let sub = info.subresource.as_str();
    if !sub.is_empty() && !rt.subresources.contains(&sub) {
        return Err(ApiError::path_not_found());
    }
    match (sub, info.verb.as_str()) {
        ("log", "get") => logs::handle(&ctx).await,
        ("eviction", "create") => evict(&ctx, &body),
        ("binding", "create") => bind(&ctx, &body),
        ("finalize", "update") => finalize(&ctx, &body),
        ("token", "create") => token(&ctx, &body),
        ("" | "status", "get") => get(&ctx),
        ("", "list") => list(&ctx),
        ("", "watch") => watch(&ctx),
        ("", "create") => create(&ctx, &body),
        ("" | "status", "update") => update(&ctx, &body),
        ("" | "status", "patch") => patch(&ctx, &body).await,
        ("", "delete") => delete(&ctx, &body),
        ("", "deletecollection") => delete_collection(&ctx, &body),
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn get(ctx: &Ctx) -> Result<Response, ApiError> {
    let output = ctx.output()?;
    let key = ctx.key();
    let object = ctx
        .state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key.resource, &key.name))?;
    let rendered = render_one(&ctx.rt, &object, &ctx.info.version, output);
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(&rendered).unwrap_or_default(),
        output.content_type(),
    ))
}

const CONTINUE_TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A continue token as the API server's etcd store encodes it; `rv` -1 means "go on at the
/// current version" (handed out when the token's version has been compacted away).
fn encode_continue(rv: i64, ns: &str, name: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}\u{0}")});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

/// The version (None for "the current one") and the last key of a continue token.
fn decode_continue(token: &str) -> Option<(Option<u64>, String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let rv = match value.get("rv")?.as_i64()? {
        -1 => None,
        rv => Some(u64::try_from(rv).ok()?),
    };
    let start = value.get("start")?.as_str()?.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/')?;
    Some((rv, ns.to_string(), name.to_string()))
}

fn list(ctx: &Ctx) -> Result<Response, ApiError> {
    let output = ctx.output()?;
    let (labels, fields) = ctx.selectors()?;
    let gr = ctx.rt.group_resource();
    let ns = if ctx.rt.namespaced && !ctx.info.namespace.is_empty() {
        Some(ctx.info.namespace.as_str())
    } else {
        None
    };
    let limit: usize = ctx.query("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let (items, rv, after) = if let Some(token) = ctx.query("continue") {
        let (rv, start_ns, start_name) = decode_continue(token).ok_or_else(|| {
            ApiError::bad_request("continue key is not valid: illegal base64 data")
        })?;
        let (items, rv) = match rv {
            Some(rv) => {
                let items = ctx.state.store.list_at(&gr, ns, rv).map_err(|e| match e {
                    StoreError::TooOld { .. } => {
                        // As the API server does: 410, with a token that goes on at the
                        // current version for a caller that accepts an inconsistent list.
                        let mut gone = ApiError::gone(CONTINUE_TOO_OLD);
                        gone.continue_token = Some(encode_continue(-1, &start_ns, &start_name));
                        gone
                    }
                    other => other.into(),
                })?;
                (items, rv)
            }
            None => ctx.state.store.list(&gr, ns),
        };
        (items, rv, Some((start_ns, start_name)))
    } else {
        let requested = ctx
            .query("resourceVersion")
            .and_then(|r| r.parse::<u64>().ok())
            .filter(|r| *r > 0);
        // The store is always fresh, so a version beyond it is answered at once with what the
        // API server answers after waiting for its watch cache to catch up.
        let current = ctx.state.store.current_rv();
        if let Some(rv) = requested.filter(|rv| *rv > current) {
            return Err(ApiError::resource_version_too_large(rv, current));
        }
        match (ctx.query("resourceVersionMatch"), requested) {
            (Some("Exact"), Some(rv)) => {
                let items = ctx.state.store.list_at(&gr, ns, rv).map_err(|e| match e {
                    StoreError::TooOld { .. } => {
                        ApiError::gone("The resourceVersion for the provided list is too old.")
                    }
                    other => other.into(),
                })?;
                (items, rv, None)
            }
            _ => {
                let (items, rv) = ctx.state.store.list(&gr, ns);
                (items, rv, None)
            }
        }
    };
    let mut selected: Vec<&Value> = items
        .iter()
        .map(|o| &**o)
        .filter(|o| match &after {
            Some((a_ns, a_name)) => {
                (meta::namespace(o), meta::name(o)) > (a_ns.as_str(), a_name.as_str())
            }
            None => true,
        })
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect();
    let mut list_meta = json!({"resourceVersion": rv.to_string()});
    if limit > 0 && selected.len() > limit {
        let remaining = selected.len() - limit;
        selected.truncate(limit);
        if let Some(last) = selected.last() {
            list_meta["continue"] = json!(encode_continue(
                i64::try_from(rv).unwrap_or(i64::MAX),
                meta::namespace(last),
                meta::name(last),
            ));
            list_meta["remainingItemCount"] = json!(remaining);
        }
    }
    let body = render_list(&ctx.rt, &selected, &ctx.info.version, list_meta, output);
    Ok(json_response(StatusCode::OK, body, output.content_type()))
}

fn watch(ctx: &Ctx) -> Result<Response, ApiError> {
    let output = ctx.output()?;
    let (labels, fields) = ctx.selectors()?;
    let start = match ctx.query("resourceVersion") {
        None | Some("0") => Start::Now,
        Some(rv) => Start::After(
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let send_initial_events = flag(&ctx.info.query, "sendInitialEvents");
    let start = if send_initial_events {
        Start::Now
    } else {
        start
    };
    let timeout = ctx
        .query("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(std::time::Duration::from_secs);
    let params = WatchParams {
        start,
        namespace: if ctx.rt.namespaced && !ctx.info.namespace.is_empty() {
            Some(ctx.info.namespace.clone())
        } else {
            None
        },
        labels,
        fields,
        bookmarks: flag(&ctx.info.query, "allowWatchBookmarks"),
        timeout,
        send_initial_events,
        version: ctx.info.version.clone(),
        output,
        stall: false,
    };
    Ok(watch::respond(ctx.state.clone(), ctx.rt.clone(), params))
}

/// Starts a watch that never sends anything (fault injection).
pub fn stalled_watch(ctx: &Ctx) -> Response {
    let params = WatchParams {
        start: Start::Now,
        namespace: None,
        labels: LabelSelector::default(),
        fields: FieldSelector::default(),
        bookmarks: false,
        timeout: ctx
            .query("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(std::time::Duration::from_secs),
        send_initial_events: false,
        version: ctx.info.version.clone(),
        output: Output::Plain,
        stall: true,
    };
    watch::respond(ctx.state.clone(), ctx.rt.clone(), params)
}

fn create(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let validation = FieldValidation::parse(ctx.query("fieldValidation"), "CreateOptions")?;
    let object = parse_body(&ctx.headers, body)?;
    let (object, warnings) = decode_write(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        object,
        json_body(&ctx.headers, body),
        validation,
        Write::Create,
    )?;
    let ns = if ctx.rt.namespaced {
        ctx.info.namespace.as_str()
    } else {
        ""
    };
    let created = ops::create(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        ns,
        object,
        ctx.dry_run(),
    )?;
    let mut response = object_response(StatusCode::CREATED, &created);
    add_warnings(&mut response, &warnings);
    Ok(response)
}

fn subresource(ctx: &Ctx) -> Subresource {
    if ctx.info.subresource == "status" {
        Subresource::Status
    } else {
        Subresource::Main
    }
}

fn update(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let validation = FieldValidation::parse(ctx.query("fieldValidation"), "UpdateOptions")?;
    let object = parse_body(&ctx.headers, body)?;
    let (object, warnings) = decode_write(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        object,
        json_body(&ctx.headers, body),
        validation,
        Write::Update,
    )?;
    let key = ctx.key();
    let updated = ops::update(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        &key,
        subresource(ctx),
        ctx.dry_run(),
        |_| Ok(object),
    )?;
    let mut response = object_response(StatusCode::OK, &updated);
    add_warnings(&mut response, &warnings);
    Ok(response)
}

async fn patch(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let content_type = ctx
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let strategic_allowed = ctx.rt.behavior != Behavior::Custom;
    let patch_type =
        PatchType::from_content_type(content_type).ok_or_else(|| unsupported(strategic_allowed))?;
    if patch_type == PatchType::Strategic && !strategic_allowed {
        return Err(unsupported(false));
    }
    let key = ctx.key();
    if patch_type == PatchType::Apply {
        return apply::handle(ctx, &key, body);
    }
    let validation = FieldValidation::parse(ctx.query("fieldValidation"), "PatchOptions")?;
    let mut warnings = Vec::new();
    let found_warnings = &mut warnings;
    let patch_value: Option<Value> = match patch_type {
        PatchType::Json => None,
        _ => Some(parse_body(&HeaderMap::new(), body)?),
    };
    let body = body.clone();
    let updated = ops::update(
        &ctx.state,
        &ctx.rt,
        &ctx.info.version,
        &key,
        subresource(ctx),
        ctx.dry_run(),
        move |current| {
            let mut doc = current.clone();
            match (patch_type, &patch_value) {
                (PatchType::Json, _) => apply_json_patch(&mut doc, &body)?,
                (PatchType::Merge, Some(p)) => apply_merge_patch(&mut doc, p),
                (PatchType::Strategic, Some(p)) => apply_strategic(&mut doc, p)?,
                _ => return Err(unsupported(strategic_allowed)),
            }
            let (doc, found) = decode_write(
                &ctx.state,
                &ctx.rt,
                &ctx.info.version,
                doc,
                None,
                validation,
                Write::Patch,
            )?;
            *found_warnings = found;
            Ok(doc)
        },
    )?;
    let mut response = object_response(StatusCode::OK, &updated);
    add_warnings(&mut response, &warnings);
    Ok(response)
}

fn delete_options(ctx: &Ctx, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::default();
    let parsed: Option<Value> = if body.is_empty() {
        None
    } else {
        Some(parse_body(&ctx.headers, body)?)
    };
    let from_body = |field: &str| parsed.as_ref().and_then(|b| b.get(field)).cloned();
    let policy = ctx
        .query("propagationPolicy")
        .map(str::to_string)
        .or_else(|| from_body("propagationPolicy").and_then(|v| v.as_str().map(str::to_string)));
    if let Some(policy) = policy {
        opts.propagation = Some(Propagation::parse(&policy).ok_or_else(|| {
            ApiError::invalid(
                "DeleteOptions",
                "",
                "",
                &[crate::error::FieldError::not_supported(
                    "propagationPolicy",
                    &policy,
                    &["Foreground", "Background", "Orphan"],
                )],
            )
        })?);
    }
    let orphan = ctx
        .query("orphanDependents")
        .map(|v| v == "true")
        .or_else(|| from_body("orphanDependents").and_then(|v| v.as_bool()));
    if opts.propagation.is_none() {
        opts.propagation = match orphan {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        };
    }
    opts.grace_period = ctx
        .query("gracePeriodSeconds")
        .and_then(|g| g.parse().ok())
        .or_else(|| from_body("gracePeriodSeconds").and_then(|v| v.as_i64()));
    if let Some(pre) = from_body("preconditions") {
        opts.uid = pre.get("uid").and_then(Value::as_str).map(str::to_string);
        opts.resource_version = pre
            .get("resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    let dry = ctx.dry_run()
        || from_body("dryRun")
            .and_then(|v| v.as_array().cloned())
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("All")));
    opts.dry_run = dry;
    Ok(opts)
}

fn delete(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let opts = delete_options(ctx, body)?;
    let key = ctx.key();
    let deleted = ops::delete(&ctx.state, &ctx.rt, &key, &opts)?;
    let object = ops::convert(&ctx.rt, &deleted.object, &ctx.info.version);
    if deleted.removed && !ctx.rt.returns_deleted_object {
        return Ok(object_response(
            StatusCode::OK,
            &success_status(&key.resource, &key.name, meta::uid(&object).unwrap_or("")),
        ));
    }
    Ok(object_response(StatusCode::OK, &object))
}

fn delete_collection(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let opts = delete_options(ctx, body)?;
    let (labels, fields) = ctx.selectors()?;
    let gr = ctx.rt.group_resource();
    let ns = if ctx.rt.namespaced && !ctx.info.namespace.is_empty() {
        Some(ctx.info.namespace.as_str())
    } else {
        None
    };
    let (items, _) = ctx.state.store.list(&gr, ns);
    let mut out = Vec::new();
    for item in items
        .iter()
        .filter(|o| labels.matches(o) && fields.matches(o))
    {
        let key = ObjectKey::new(gr.clone(), meta::namespace(item), meta::name(item));
        match ops::delete(&ctx.state, &ctx.rt, &key, &opts) {
            Ok(d) => out.push(ops::convert(&ctx.rt, &d.object, &ctx.info.version)),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let refs: Vec<&Value> = out.iter().collect();
    let body = render_list(
        &ctx.rt,
        &refs,
        &ctx.info.version,
        json!({"resourceVersion": ctx.state.store.current_rv().to_string()}),
        Output::Plain,
    );
    Ok(json_response(StatusCode::OK, body, "application/json"))
}

fn evict(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let eviction = parse_body(&ctx.headers, body)?;
    let key = ctx.key();
    let pod = ctx
        .state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&key.resource, &key.name))?;
    let grace = eviction
        .pointer("/deleteOptions/gracePeriodSeconds")
        .and_then(Value::as_i64);
    crate::disruption::evict_via_api(&ctx.state, &pod, grace)?;
    Ok(object_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn bind(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let binding = parse_body(&ctx.headers, body)?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("a binding needs target.name"))?
        .to_string();
    let key = ctx.key();
    let mut conflict = false;
    ops::mutate(&ctx.state, &key, |pod| {
        if !pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            conflict = true;
            return false;
        }
        pod["spec"]["nodeName"] = json!(node);
        crate::controllers::scheduler::set_condition(
            pod,
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": meta::now()}),
        );
        true
    })?;
    if conflict {
        return Err(ApiError::conflict(
            &key.resource,
            &key.name,
            "pod is already assigned to a node",
        ));
    }
    Ok(object_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn finalize(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let object = parse_body(&ctx.headers, body)?;
    let finalizers = object
        .pointer("/spec/finalizers")
        .cloned()
        .unwrap_or_else(|| json!([]));
    let key = ctx.key();
    let updated = ops::mutate(&ctx.state, &key, |ns| {
        ns["spec"]["finalizers"] = finalizers;
        true
    })?;
    Ok(object_response(StatusCode::OK, &updated))
}

fn token(ctx: &Ctx, body: &Bytes) -> Result<Response, ApiError> {
    let request = if body.is_empty() {
        json!({})
    } else {
        parse_body(&ctx.headers, body)?
    };
    let key = ctx.key();
    if ctx.state.store.get(&key).is_none() {
        return Err(ApiError::not_found(&key.resource, &key.name));
    }
    let seconds = request
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600)
        .max(600);
    let now = jiff::Timestamp::now();
    let expires = now
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    let audiences = request
        .pointer("/spec/audiences")
        .cloned()
        .unwrap_or_else(|| json!(["https://kubernetes.default.svc"]));
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": key.name, "namespace": key.namespace, "creationTimestamp": meta::format_time(now)},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null},
        "status": {"token": ctx.state.auth.token_for(&key.namespace, &key.name), "expirationTimestamp": meta::format_time(expires)},
    });
    Ok(object_response(StatusCode::CREATED, &answer))
}
