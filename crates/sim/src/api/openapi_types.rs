//! The shape of the OpenAPI field tables: generated into [`super::openapi_schema`], read by
//! [`super::builtin_schema`] to check built-in objects.

/// A Go struct of the API: its type as Go prints it (`v1.JobSpec`) and its fields, each a JSON
/// name and a shape: `string`, `bool`, `int32`, `int64`, `float64`, `bytes`, `quantity`,
/// `intorstring`, `time`, `any`, `@N` (struct N), `[]S`, `map[string]S`.
#[derive(Debug)]
pub struct Struct {
    /// The Go type, package-qualified.
    pub go: &'static str,
    /// The fields: (JSON name, shape).
    pub fields: &'static [(&'static str, &'static str)],
}
