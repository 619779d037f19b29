//! Jobs: submit, get, cancel and list; and the templates a submission may name.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use kubeferry_core::spec::{self, Params, Problem, SpecError};
use kubeferry_core::template::{self, Position};
use kubeferry_core::{ExecutionId, JobSpec, JobState};
use kubeferry_kube::Executor;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::answers::{MalformedId, NamespaceRefused, NoSuchJob, OtherCluster, Unreachable};
use super::input::{self, IdPath, QueryParams};
use super::model::{
    CancelResult, JobInfo, JobList, JobListItem, SubmitRequest, Submitted, TemplateList, Timeline,
};
use crate::app::App;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::templates::TemplateError;

/// The longest job id accepted.
pub const MAX_JOB_ID_LEN: usize = 253;

/// Resolves the execution id of a path to its executor, checking the caller may see it.
pub fn resolve<'a>(
    app: &'a App,
    principal: &Principal,
    path: &IdPath,
) -> Result<(ExecutionId, &'a Executor), ApiError> {
    let id = path.id()?;
    let executor = app.executor_for(&id)?;
    app.check_namespace(principal, &id.namespace, "namespace")?;
    Ok((id, executor))
}

/// Submit a job.
///
/// Give a spec (a JSON object, or the text of a YAML or JSON job file) or the name of a
/// template, with parameters and your own job id. Submitting the same job id again returns the
/// same execution id and creates nothing: the answer is then 200 with `existing: true` (201 and
/// `existing: false` when this submission created the job). Nothing is created unless the spec
/// is valid. Without a namespace (in the request or the spec), the job goes to the service's
/// default namespace when the caller's token may use it, else to the first namespace it may use
/// (as a list without a namespace covers the namespaces the token may use).
#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    operation_id = "submitJob",
    request_body = SubmitRequest,
    responses(
        (status = 201, description = "Submitted: the job was created (`existing: false`)", body = Submitted,
            headers(("Location" = String, description = "The job's URL"))),
        (status = 200, description = "The job id already named a job (running, or ended): nothing was created (`existing: true`); or a dry run (`dryRun`): nothing was created, and `objects` are what would have been", body = Submitted,
            headers(("Location" = String, description = "The job's URL"))),
        (status = 400, description = "Malformed JSON (`bad_json`, with line and column) or a wrong field (`bad_request`)", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        NamespaceRefused,
        (status = 404, description = "No such template", body = ErrorBody),
        (status = 409, description = "The job id was used for a different spec", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "An invalid spec (`invalid_spec`, every problem with its line and column), or one Kubernetes refused", body = ErrorBody),
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = input::body(&headers, body)?;
    let text = input::text(&body)?;
    let request: SubmitRequest = input::json(text)?;
    check_job_id(&request.job_id)?;
    let cluster = app.requested_cluster(request.cluster.as_deref(), "cluster")?;
    let params = params(&request.params)?;
    let (spec, source_text) = load_spec(&app, text, &request, &params)?;
    let namespace = spec
        .resolve_namespace(
            request.namespace.as_deref(),
            app.default_namespace_for(&principal),
        )
        .map_err(|clash| ApiError::bad_request("namespace", clash.to_string()))?;
    app.check_namespace(&principal, &namespace, "namespace")?;
    let warnings = unused_parameters(&source_text, &params);
    if let Some(mode) = request.dry_run {
        let objects = cluster
            .executor
            .dry_run(&spec, &request.job_id, &namespace, mode.into())
            .await?;
        let name = objects
            .first()
            .and_then(|object| object["metadata"]["name"].as_str())
            .unwrap_or_default();
        let id = ExecutionId::new(&cluster.name, spec.kind(), &namespace, name);
        let answer = Submitted {
            id: id.to_string(),
            job_id: request.job_id.clone(),
            cluster: cluster.name.clone(),
            namespace,
            existing: false,
            warnings,
            dry_run: Some(mode),
            objects: Some(objects),
        };
        return Ok((StatusCode::OK, Json(answer)).into_response());
    }
    let submission = cluster
        .executor
        .submit_or_find(&spec, &request.job_id, &namespace)
        .await?;
    let id = submission.id;
    let submitted = Submitted {
        id: id.to_string(),
        job_id: request.job_id.clone(),
        cluster: cluster.name.clone(),
        namespace,
        existing: submission.existing,
        warnings,
        dry_run: None,
        objects: None,
    };
    let status = if submission.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut response = (status, Json(submitted)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/jobs/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

fn check_job_id(job_id: &str) -> Result<(), ApiError> {
    match job_id_problem(job_id) {
        Some(problem) => Err(ApiError::bad_request("jobId", problem)),
        None => Ok(()),
    }
}

/// What is wrong with a job id, if anything.
fn job_id_problem(job_id: &str) -> Option<String> {
    if job_id.is_empty() {
        return Some("must not be empty".to_string());
    }
    if job_id.chars().count() > MAX_JOB_ID_LEN {
        return Some(format!("longer than {MAX_JOB_ID_LEN} characters"));
    }
    if job_id.chars().any(char::is_control) {
        return Some("must not contain control characters".to_string());
    }
    None
}

fn params(
    given: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<Params, ApiError> {
    let mut params = Params::new();
    for (name, value) in given {
        let field = format!("params.{name}");
        if !template::is_param_name(name) {
            return Err(ApiError::bad_request(
                field,
                "not a parameter name: a letter or '_', then letters, digits, '_', '.' or '-'",
            ));
        }
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => {
                return Err(ApiError::bad_request(
                    field,
                    "must be a string, a number or a boolean",
                ));
            }
        };
        params.insert(name.clone(), text);
    }
    Ok(params)
}

/// Loads the spec of a submission, and returns the text it was rendered from.
fn load_spec(
    app: &App,
    body: &str,
    request: &SubmitRequest,
    params: &Params,
) -> Result<(JobSpec, String), ApiError> {
    match (&request.spec, &request.template) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "template",
            "give either spec or template, not both",
        )),
        (None, None) => Err(ApiError::bad_request(
            "spec",
            "missing: give a job spec (an object or the text of a job file), or the name of a template",
        )),
        (Some(raw), None) => load_given_spec(body, raw, params),
        (None, Some(name)) => {
            let template = app.templates.load(name).map_err(|error| match error {
                TemplateError::NotFound { .. } => {
                    ApiError::new(StatusCode::NOT_FOUND, "no_such_template", error.to_string())
                        .field("template")
                }
                TemplateError::NoDirectory | TemplateError::BadName(_) => {
                    ApiError::bad_request("template", error.to_string())
                }
                TemplateError::Read { .. } => ApiError::internal(error.to_string()),
            })?;
            let spec = spec::load(&template.file_name, &template.text, params)
                .map_err(|error| ApiError::invalid_spec(&error))?;
            Ok((spec, template.text))
        }
    }
}

fn load_given_spec(
    body: &str,
    raw: &RawValue,
    params: &Params,
) -> Result<(JobSpec, String), ApiError> {
    let raw_text = raw.get();
    if raw_text.starts_with('"') {
        // The text of a job file: positions are in that text, named `spec`.
        let text: String = serde_json::from_str(raw_text)
            .map_err(|e| ApiError::bad_request("spec", e.to_string()))?;
        let spec = spec::load("spec", &text, params).map_err(|e| ApiError::invalid_spec(&e))?;
        return Ok((spec, text));
    }
    if !raw_text.starts_with('{') {
        return Err(ApiError::bad_request(
            "spec",
            "must be a JSON object, or a string holding a job file",
        ));
    }
    // A JSON object: positions are moved into the request body, fields under `spec.`.
    let spec = spec::load("spec.json", raw_text, params)
        .map_err(|error| ApiError::invalid_spec(&in_body(body, raw_text, &error)))?;
    Ok((spec, raw_text.to_string()))
}

/// A spec error of a JSON object inside the body, with positions in the body and fields
/// under `spec`.
fn in_body(body: &str, raw: &str, error: &SpecError) -> SpecError {
    // The raw value borrows from the body, so its offset is where it starts in the body.
    let offset = (raw.as_ptr() as usize)
        .checked_sub(body.as_ptr() as usize)
        .filter(|o| *o <= body.len())
        .unwrap_or(0);
    let start = Position::of_offset(body, offset);
    let problems = error
        .problems()
        .iter()
        .map(|problem| Problem {
            position: problem.position.map(|p| Position {
                line: start.line + p.line - 1,
                column: if p.line == 1 {
                    start.column + p.column - 1
                } else {
                    p.column
                },
            }),
            path: if problem.path.is_empty() {
                "spec".to_string()
            } else if problem.path.starts_with('[') {
                format!("spec{}", problem.path)
            } else {
                format!("spec.{}", problem.path)
            },
            kind: problem.kind,
            message: problem.message.clone(),
        })
        .collect();
    SpecError::new("body", problems)
}

fn unused_parameters(text: &str, params: &Params) -> Vec<String> {
    match template::render(text, params) {
        Ok(rendered) => rendered
            .unused_parameters(params)
            .into_iter()
            .map(|name| format!("params.{name}: not used by the spec"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Get a job's execution info.
///
/// Answered from the watch cache (one request to Kubernetes for a job created a moment ago by
/// another replica). Once started, every answer keeps `startedAt`; a final state never changes.
#[utoipa::path(
    get,
    path = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}",
    tag = "jobs",
    operation_id = "getJob",
    params(IdPath),
    responses(
        (status = 200, description = "The job's status", body = JobInfo),
        MalformedId,
        NamespaceRefused,
        (status = 404, description = "No such job (never created here, or removed)", body = ErrorBody),
        (status = 421, description = "The id names another cluster: a configuration error, not a missing job", body = ErrorBody),
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<JobInfo>> {
    let (id, executor) = resolve(&app, &principal, &path)?;
    let info = executor.status(&id).await?;
    Ok(Json(JobInfo::new(&id, info)))
}

/// Tell a job's story.
///
/// What happened to the job in time order (its submission, the scheduler's, the kubelet's and
/// the Job controller's events, each attempt's end, a cancel, the outcome), where its time went
/// and what to do about how it ended: `kubeferry describe`. Read from the job's object, its
/// pods and the namespace's events while they last, then from its outcome record.
#[utoipa::path(
    get,
    path = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/timeline",
    tag = "jobs",
    operation_id = "getJobTimeline",
    params(IdPath),
    responses(
        (status = 200, description = "The job's story", body = Timeline),
        MalformedId,
        NamespaceRefused,
        (status = 404, description = "No such job (never created here, or removed)", body = ErrorBody),
        OtherCluster,
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn timeline(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<IdPath>,
) -> ApiResult<Json<Timeline>> {
    let (id, executor) = resolve(&app, &principal, &path)?;
    Ok(Json(executor.describe(&id).await?.into()))
}

/// Cancel a job.
///
/// Returns at once; the job goes CANCELLING, then CANCELLED. Cancelling again is harmless; a
/// job that already ended keeps its outcome (`alreadyEnded`).
#[utoipa::path(
    post,
    path = "/v1/jobs/{cluster}/{kind}/{namespace}/{name}/cancel",
    tag = "jobs",
    operation_id = "cancelJob",
    params(IdPath),
    responses(
        (status = 202, description = "Cancel requested, or the job had already ended", body = CancelResult),
        MalformedId,
        NamespaceRefused,
        NoSuchJob,
        OtherCluster,
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<IdPath>,
) -> ApiResult<(StatusCode, Json<CancelResult>)> {
    let (id, executor) = resolve(&app, &principal, &path)?;
    let caller = match principal.authenticated {
        true => format!("token {}", principal.name),
        false => "an unauthenticated caller".to_string(),
    };
    let outcome = executor.cancel_for(&id, &caller).await?;
    let already_ended = matches!(outcome, kubeferry_kube::CancelOutcome::AlreadyEnded(_));
    let job = JobInfo::new(&id, outcome.info().clone());
    Ok((
        StatusCode::ACCEPTED,
        Json(CancelResult { already_ended, job }),
    ))
}

/// Where a list page ends: the last item's creation time and id.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    #[serde(rename = "t")]
    created_at: Option<Timestamp>,
    #[serde(rename = "i")]
    id: String,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str) -> Result<Cursor, ApiError> {
        URL_SAFE_NO_PAD
            .decode(text)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| {
                ApiError::bad_parameter(
                    "continue",
                    "not a token this service gave out; pass the `continue` of the previous page",
                )
            })
    }

    fn key(&self) -> (Option<Timestamp>, &str) {
        (self.created_at, &self.id)
    }
}

/// List jobs.
///
/// Jobs of the caller's namespaces (or one), oldest first, filtered by a Kubernetes label
/// selector and by state, in pages. Costs one list of Jobs and one of pods per namespace.
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    operation_id = "listJobs",
    params(
        ("namespace" = Option<String>, Query, description = "Only this namespace (default: every namespace the caller may use)"),
        ("cluster" = Option<String>, Query, description = "Only this cluster (default: all)"),
        ("selector" = Option<String>, Query, description = "A Kubernetes label selector, e.g. `team=data,tier in (a,b)`"),
        ("jobId" = Option<String>, Query, description = "Only the job(s) submitted under this job id (of any kind; its outcome is found even once its object is gone); not with selector"),
        ("status" = Option<String>, Query, description = "Only these states, comma-separated, e.g. `QUEUED,STARTED`"),
        ("limit" = Option<u64>, Query, description = "Page size (default and maximum: limits.defaultPageSize, limits.maxPageSize)"),
        ("continue" = Option<String>, Query, description = "The `continue` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of jobs", body = JobList),
        (status = 400, description = "A wrong parameter (`bad_parameter`, naming it)", body = ErrorBody),
        NamespaceRefused,
        Unreachable,
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<JobList>> {
    let mut q = QueryParams::parse(query.as_deref());
    let namespace = q.string("namespace")?;
    let cluster = q.string("cluster")?;
    let selector = q.string("selector")?.unwrap_or_default();
    let job_id = q.string("jobId")?;
    if let Some(problem) = job_id.as_deref().and_then(job_id_problem) {
        return Err(ApiError::bad_parameter("jobId", problem));
    }
    if job_id.is_some() && !selector.is_empty() {
        return Err(ApiError::bad_parameter(
            "jobId",
            "give jobId or selector, not both (a job id names its job already)",
        ));
    }
    let states = q
        .list("status")
        .iter()
        .map(|s| {
            s.parse::<JobState>()
                .map_err(|message| ApiError::bad_parameter("status", message))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limit = match q.number("limit")? {
        None => app.limits.default_page_size,
        Some(0) => return Err(ApiError::bad_parameter("limit", "must be at least 1")),
        Some(n) => usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(app.limits.max_page_size),
    };
    let cursor = q
        .string("continue")?
        .map(|t| Cursor::decode(&t))
        .transpose()?;
    q.finish(&[
        "namespace",
        "cluster",
        "selector",
        "jobId",
        "status",
        "limit",
        "continue",
    ])?;

    let namespaces = app.namespaces_for(&principal, namespace.as_deref(), "namespace")?;
    let clusters = app.clusters_for(cluster.as_deref(), "cluster")?;
    let mut items = Vec::new();
    for cluster in &clusters {
        for namespace in &namespaces {
            let listed = match &job_id {
                Some(job_id) => cluster.executor.find_by_job_id(namespace, job_id).await,
                None => cluster.executor.list(namespace, Some(&selector)).await,
            };
            let summaries = listed.map_err(|error| match error {
                kubeferry_kube::Error::Api {
                    code: 400, message, ..
                } => ApiError::bad_parameter("selector", message),
                other => other.into(),
            })?;
            items.extend(
                summaries
                    .into_iter()
                    .filter(|s| states.is_empty() || states.contains(&s.status.state))
                    .map(JobListItem::from),
            );
        }
    }
    items.sort_by(|a, b| (a.created_at, &a.job.id).cmp(&(b.created_at, &b.job.id)));
    if let Some(cursor) = &cursor {
        items.retain(|item| (item.created_at, item.job.id.as_str()) > cursor.key());
    }
    let more = items.len() > limit;
    items.truncate(limit);
    let continue_token = match (more, items.last()) {
        (true, Some(last)) => Some(
            Cursor {
                created_at: last.created_at,
                id: last.job.id.clone(),
            }
            .encode(),
        ),
        _ => None,
    };
    Ok(Json(JobList {
        items,
        continue_token,
    }))
}

/// List the templates a submission may name.
#[utoipa::path(
    get,
    path = "/v1/templates",
    tag = "jobs",
    operation_id = "listTemplates",
    responses(
        (status = 200, description = "Template names", body = TemplateList),
    ),
    security(("bearer" = []))
)]
pub async fn templates(State(app): State<Arc<App>>) -> ApiResult<Json<TemplateList>> {
    let templates = app
        .templates
        .names()
        .map_err(|error| ApiError::internal(error.to_string()))?;
    Ok(Json(TemplateList { templates }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_junk() {
        let cursor = Cursor {
            created_at: Some("2026-01-02T03:04:05Z".parse().unwrap()),
            id: "c/job/ns/a".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        let error = Cursor::decode("not-a-cursor").unwrap_err();
        assert_eq!(error.code(), "bad_parameter");
    }

    #[test]
    fn job_ids_are_checked() {
        assert!(check_job_id("gravitino-42/step 1").is_ok());
        assert!(check_job_id("").is_err());
        assert!(check_job_id("a\nb").is_err());
        assert!(check_job_id(&"x".repeat(MAX_JOB_ID_LEN + 1)).is_err());
    }

    #[test]
    fn parameters_take_scalars_only() {
        let given = serde_json::from_str(r#"{"a": "x", "b": 3, "c": true}"#).unwrap();
        let params = params(&given).unwrap();
        assert_eq!(params["b"], "3");
        assert_eq!(params["c"], "true");
        let bad = serde_json::from_str(r#"{"a": [1]}"#).unwrap();
        assert!(params_error(&bad).starts_with("params.a: must be"));
        let bad_name = serde_json::from_str(r#"{"1a": "x"}"#).unwrap();
        assert!(params_error(&bad_name).starts_with("params.1a: not a parameter name"));
    }

    fn params_error(given: &std::collections::BTreeMap<String, serde_json::Value>) -> String {
        params(given).unwrap_err().message().to_string()
    }

    #[test]
    fn spec_errors_of_an_object_point_into_the_body() {
        let body =
            "{\n  \"jobId\": \"a\",\n  \"spec\": {\"name\": \"x\",\n    \"imge\": \"busybox\"}\n}";
        let request: SubmitRequest = input::json(body).unwrap();
        let raw = request.spec.unwrap();
        let error = load_given_spec(body, raw, &Params::new()).unwrap_err();
        assert_eq!(error.code(), "invalid_spec");
        assert!(
            error
                .message()
                .starts_with("body:4:5: spec: unknown field `imge`"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn spec_errors_of_text_point_into_the_text() {
        let body = r#"{"jobId": "a", "spec": "name: x\nimage: busybox\nbogus: 1\n"}"#;
        let request: SubmitRequest = input::json(body).unwrap();
        let error = load_given_spec(body, request.spec.unwrap(), &Params::new()).unwrap_err();
        assert!(
            error
                .message()
                .starts_with("spec:3:1: unknown field `bogus`"),
            "{}",
            error.message()
        );
    }
}
