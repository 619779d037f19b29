//! Reading what callers send: JSON bodies with errors at their line and column and named
//! fields, query parameters with their names in errors, and execution ids from paths.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use kubeferry_core::ExecutionId;
use serde::Deserialize;
use serde_json::error::Category;
use utoipa::IntoParams;

use crate::error::ApiError;

/// The body of a request, checked for type and size.
pub fn body(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    if let Some(content_type) = headers.get(header::CONTENT_TYPE) {
        let essence = content_type
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("Content-Type: expected application/json, got {essence:?}"),
            )
            .field("Content-Type"));
        }
    }
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the body is larger than this service accepts (limits.maxBodyBytes)",
            )
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("cannot read the body: {}", rejection.body_text()),
            )
        }
    })
}

/// The body as text: JSON is UTF-8.
pub fn text(body: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|error| {
        let offset = error.valid_up_to();
        let (line, column) = line_column(&body[..offset], offset);
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!("the body is not UTF-8 (byte {offset}, line {line}, column {column})"),
        )
        .at(line, column)
    })
}

/// Parses a JSON body into `T`, naming the field of a wrong value and the line and column of
/// malformed JSON.
pub fn json<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|error| json_error(text, error.path().to_string(), error.into_inner()))?;
    deserializer
        .end()
        .map_err(|error| json_error(text, ".".into(), error))?;
    Ok(value)
}

fn json_error(text: &str, path: String, error: serde_json::Error) -> ApiError {
    let (line, column) = char_position(text, error.line(), error.column());
    let message = strip_position(&error.to_string());
    match error.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!("the body is not valid JSON: {message} at line {line}, column {column}"),
        )
        .at(line, column),
        Category::Data => {
            let mut field = if path == "." { String::new() } else { path };
            // A missing field is reported at the object that lacks it: name the field itself.
            if let Some(missing) = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split('`').next())
            {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(missing);
            }
            if field.is_empty() {
                field = "body".into();
            }
            ApiError::bad_request(field, message).at(line, column)
        }
    }
}

/// serde_json's message without its " at line L column C" (given separately, in characters).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

/// serde_json counts columns in bytes; callers count characters.
fn char_position(text: &str, line: usize, byte_column: usize) -> (usize, usize) {
    let Some(line_text) = text.split('\n').nth(line.saturating_sub(1)) else {
        return (line, byte_column);
    };
    let mut end = byte_column.min(line_text.len());
    while !line_text.is_char_boundary(end) {
        end -= 1;
    }
    (line, line_text[..end].chars().count().max(1))
}

fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}

/// Query parameters, taken one by one by name; any left over is an error (a misspelt
/// parameter should not be silently ignored).
pub struct QueryParams {
    params: BTreeMap<String, Vec<String>>,
}

impl QueryParams {
    /// The parameters of a query string.
    pub fn parse(query: Option<&str>) -> Self {
        let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            params
                .entry(name.into_owned())
                .or_default()
                .push(value.into_owned());
        }
        Self { params }
    }

    /// A parameter given at most once.
    pub fn string(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        match self.params.remove(name) {
            None => Ok(None),
            Some(mut values) if values.len() == 1 => Ok(values.pop()),
            Some(_) => Err(ApiError::bad_parameter(name, "given more than once")),
        }
    }

    /// Every value of a parameter, comma-separated lists split.
    pub fn list(&mut self, name: &str) -> Vec<String> {
        self.params
            .remove(name)
            .unwrap_or_default()
            .iter()
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// A whole number.
    pub fn number(&mut self, name: &str) -> Result<Option<u64>, ApiError> {
        self.string(name)?
            .map(|text| {
                text.parse::<u64>().map_err(|_| {
                    ApiError::bad_parameter(name, format!("{text:?} is not a whole number"))
                })
            })
            .transpose()
    }

    /// A boolean (`true`/`false`/`1`/`0`; a bare name means true).
    pub fn flag(&mut self, name: &str) -> Result<bool, ApiError> {
        match self.string(name)?.as_deref() {
            None => Ok(false),
            Some("" | "true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(other) => Err(ApiError::bad_parameter(
                name,
                format!("{other:?} is not true or false"),
            )),
        }
    }

    /// Fails on parameters nobody took.
    pub fn finish(self, known: &[&str]) -> Result<(), ApiError> {
        match self.params.keys().next() {
            None => Ok(()),
            Some(name) => Err(ApiError::bad_parameter(
                name.as_str(),
                format!(
                    "unknown parameter; this endpoint takes {}",
                    known.join(", ")
                ),
            )),
        }
    }
}

/// An execution id in a path: `/v1/jobs/{cluster}/{kind}/{namespace}/{name}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IdPath {
    /// The cluster's name.
    pub cluster: String,
    /// The kind of object: `job` (a container job), `sparkapp` or `jobset`.
    pub kind: String,
    /// The namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl IdPath {
    /// The execution id.
    pub fn id(&self) -> Result<ExecutionId, ApiError> {
        let text = format!(
            "{}/{}/{}/{}",
            self.cluster, self.kind, self.namespace, self.name
        );
        text.parse().map_err(|error: kubeferry_core::IdError| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_execution_id",
                error.to_string(),
            )
            .field("id")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        job_id: String,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    #[test]
    fn malformed_json_is_located() {
        let error = json::<Sample>("{\n  \"jobId\": \"a\",\n  oops\n}").unwrap_err();
        assert_eq!(error.code(), "bad_json");
        assert!(
            error.message().contains("line 3, column 3"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn wrong_values_name_their_field() {
        let cases = [
            ("{}", "jobId", "missing field `jobId`"),
            ("{\"jobId\": 5}", "jobId", "invalid type"),
            (
                "{\"jobId\": \"a\", \"inner\": {\"count\": \"x\"}}",
                "inner.count",
                "invalid type",
            ),
            (
                "{\"jobId\": \"a\", \"jobid\": 1}",
                "jobid",
                "unknown field `jobid`",
            ),
            ("[]", "body", "invalid length"),
        ];
        for (text, field, message) in cases {
            let error = json::<Sample>(text).unwrap_err();
            assert_eq!(error.code(), "bad_request", "{text}");
            assert!(
                error.message().starts_with(&format!("{field}: "))
                    && error.message().contains(message),
                "{text}: {}",
                error.message()
            );
        }
    }

    #[test]
    fn trailing_text_is_malformed_json() {
        let error = json::<Sample>("{\"jobId\": \"a\"} x").unwrap_err();
        assert_eq!(error.code(), "bad_json");
    }

    #[test]
    fn columns_count_characters() {
        // "é" is two bytes; the error is at the third character of line 1.
        assert_eq!(char_position("éé}", 1, 5), (1, 3));
        assert_eq!(line_column("a\nbé".as_bytes(), 5), (2, 3));
    }

    #[test]
    fn query_parameters_are_checked_by_name() {
        let mut q = QueryParams::parse(Some("lines=5&follow&status=QUEUED,STARTED&status=FAILED"));
        assert_eq!(q.number("lines").unwrap(), Some(5));
        assert!(q.flag("follow").unwrap());
        assert_eq!(q.list("status"), ["QUEUED", "STARTED", "FAILED"]);
        q.finish(&["lines"]).unwrap();

        let mut q = QueryParams::parse(Some("lines=x&lines=2&bogus=1"));
        let error = q.number("lines").unwrap_err();
        assert!(error.message().starts_with("lines: given more than once"));
        let error = q.finish(&["lines"]).unwrap_err();
        assert!(
            error.message().starts_with("bogus: unknown parameter"),
            "{}",
            error.message()
        );

        let mut q = QueryParams::parse(Some("lines=x"));
        assert!(
            q.number("lines")
                .unwrap_err()
                .message()
                .contains("not a whole number")
        );
    }

    #[test]
    fn ids_in_paths_are_checked() {
        let path = IdPath {
            cluster: "c".into(),
            kind: "cronjob".into(),
            namespace: "ns".into(),
            name: "n".into(),
        };
        let error = path.id().unwrap_err();
        assert_eq!(error.code(), "bad_execution_id");
        assert!(error.message().contains("kind \"cronjob\" is unknown"));
    }
}
