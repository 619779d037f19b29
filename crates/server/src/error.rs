//! The one error shape of the API: an HTTP status, a stable machine-readable code, a message
//! that names the field, and for job specs every problem with its line and column.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kubeferry_core::SpecError;
use kubeferry_kube::Error as KubeError;
use serde::Serialize;
use utoipa::ToSchema;

use crate::request_id;

/// An error answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// A stable code to branch on: `bad_json`, `bad_request`, `bad_parameter`,
    /// `bad_execution_id`, `unauthorized`, `forbidden`, `no_such_job`, `no_such_template`,
    /// `not_found`, `method_not_allowed`, `name_taken`, `body_too_large`,
    /// `unsupported_media_type`, `wrong_cluster`, `invalid_spec`, `spark_unavailable`,
    /// `jobset_unavailable`, `kubernetes_rejected`, `kubernetes_forbidden`, `kubernetes_error`,
    /// `kubernetes_unreachable`, `timeout`, `shutting_down`, `internal`.
    #[schema(example = "invalid_spec")]
    pub code: String,
    /// What is wrong, for humans; names the field. For `invalid_spec`, one
    /// `file:line:col: field: message` line per problem.
    pub message: String,
    /// The request field, parameter or header at fault, when there is one (`spec`, `jobId`,
    /// `selector`, `Authorization`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Where a JSON body stopped parsing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Where a JSON body stopped parsing (in characters, from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// Every problem of a job spec (`invalid_spec`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<SpecProblem>,
    /// The request's id (also in the `x-request-id` header), for finding it in the logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// One problem of a job spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecProblem {
    /// The file the problem is in: `spec` (a spec given as text), `body` (a spec given as a
    /// JSON object: positions are in the request body) or the template's file name.
    pub file: String,
    /// The line, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The column in characters, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The field, e.g. `resources.memory`; empty for problems of the whole text.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// An error of the API, turned into an [`ErrorBody`] response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: Box<ErrorBody>,
    retry_after: Option<u64>,
    www_authenticate: bool,
}

impl ApiError {
    /// An error with a status, code and message.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: Box::new(ErrorBody {
                code: code.to_string(),
                message: message.into(),
                field: None,
                line: None,
                column: None,
                problems: Vec::new(),
                request_id: None,
            }),
            retry_after: None,
            www_authenticate: false,
        }
    }

    /// Names the field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.body.field = Some(field.into());
        self
    }

    /// Where a body stopped parsing.
    pub fn at(mut self, line: usize, column: usize) -> Self {
        self.body.line = Some(line);
        self.body.column = Some(column);
        self
    }

    /// 400 for a request field or parameter that is wrong.
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field}: {}", message.into());
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message).field(field)
    }

    /// 400 for a query or path parameter that is wrong.
    pub fn bad_parameter(parameter: impl Into<String>, message: impl Into<String>) -> Self {
        let parameter = parameter.into();
        let message = format!("{parameter}: {}", message.into());
        Self::new(StatusCode::BAD_REQUEST, "bad_parameter", message).field(parameter)
    }

    /// 401, with `WWW-Authenticate: Bearer`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        let mut error =
            Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message).field("Authorization");
        error.www_authenticate = true;
        error
    }

    /// 403 for a namespace the caller may not use.
    pub fn forbidden(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message).field(field)
    }

    /// 422 with every problem of a job spec.
    pub fn invalid_spec(error: &SpecError) -> Self {
        let problems = error
            .problems()
            .iter()
            .map(|p| SpecProblem {
                file: error.source_name().to_string(),
                line: p.position.map(|p| p.line),
                column: p.position.map(|p| p.column),
                field: p.path.clone(),
                message: p.message.clone(),
            })
            .collect();
        let mut api = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_spec",
            error.to_string(),
        );
        api.body.problems = problems;
        api
    }

    /// 503 asking the caller to come back later.
    pub fn unavailable(code: &str, message: impl Into<String>, retry_after: u64) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
        error.retry_after = Some(retry_after);
        error
    }

    /// 500 for what should not happen.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        &self.body.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.body.message
    }
}

impl From<KubeError> for ApiError {
    fn from(error: KubeError) -> Self {
        let message = error.to_string();
        match error {
            KubeError::NoSuchJob { .. } => Self::new(StatusCode::NOT_FOUND, "no_such_job", message),
            // An index or replicated job the job does not have: the caller's parameter.
            KubeError::NoSuchPart { ref part, .. } => {
                let field = if part.starts_with("index") {
                    "index"
                } else {
                    "replica"
                };
                Self::new(StatusCode::BAD_REQUEST, "bad_parameter", message).field(field)
            }
            // Never "no such job": callers would settle a running job as failed or cancelled.
            // 421 Misdirected Request: this service is not the one for that cluster.
            KubeError::WrongCluster { .. } => {
                Self::new(StatusCode::MISDIRECTED_REQUEST, "wrong_cluster", message)
            }
            // A spec the chosen Spark operator cannot honour: every problem, as for a bad spec.
            KubeError::Spec(error) => Self::invalid_spec(&error),
            // No Spark operator (or its CRD) that could run the job: nothing was created.
            KubeError::SparkUnavailable { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "spark_unavailable",
                message,
            )
            .field("spec"),
            // A cluster that does not serve JobSets: nothing was created.
            KubeError::JobSetUnavailable { .. } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "jobset_unavailable",
                message,
            )
            .field("spec"),
            KubeError::Id(_) => Self::new(StatusCode::BAD_REQUEST, "bad_execution_id", message),
            KubeError::Forbidden { .. } => {
                Self::new(StatusCode::BAD_GATEWAY, "kubernetes_forbidden", message)
            }
            KubeError::Unreachable { .. } => {
                Self::unavailable("kubernetes_unreachable", message, 5)
            }
            KubeError::NameTaken { .. } => Self::new(StatusCode::CONFLICT, "name_taken", message),
            // The stable code callers branch on: nothing was decided, ask again.
            KubeError::Api { code: 409, .. } | KubeError::Contended { .. } => {
                Self::new(StatusCode::CONFLICT, "kubernetes_rejected", message)
            }
            KubeError::Api { code, .. } if (400..500).contains(&code) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "kubernetes_rejected",
                message,
            ),
            KubeError::RetriesExhausted { .. } => Self::unavailable("kubernetes_error", message, 5),
            KubeError::Api { .. } | KubeError::Client { .. } => {
                Self::new(StatusCode::BAD_GATEWAY, "kubernetes_error", message)
            }
            KubeError::Config { .. } | KubeError::Manifest { .. } => Self::internal(message),
            KubeError::WaitTimeout { .. } => {
                Self::new(StatusCode::GATEWAY_TIMEOUT, "timeout", message)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(mut self) -> Response {
        self.body.request_id = request_id::current();
        let mut response = (self.status, Json(self.body)).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.www_authenticate {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"kubeferry\""),
            );
        }
        response
    }
}

/// A result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;
