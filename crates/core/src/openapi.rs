//! OpenAPI schemas of the status model's types, for a service that publishes them.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::status::FailureClass;
use crate::{JobState, Reason};

/// A string that is one of `values`.
fn one_of<const N: usize>(description: &str, values: [&str; N]) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

impl PartialSchema for JobState {
    fn schema() -> RefOr<Schema> {
        one_of(
            "QUEUED and STARTED go on; SUCCEEDED, FAILED and CANCELLED are final and never change; CANCELLING is a cancel in progress.",
            JobState::ALL.map(JobState::as_str),
        )
    }
}

impl ToSchema for JobState {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("JobState")
    }
}

impl PartialSchema for Reason {
    fn schema() -> RefOr<Schema> {
        one_of(
            "Why the job is in its state, machine-readable.",
            Reason::ALL.map(Reason::as_str),
        )
    }
}

impl ToSchema for Reason {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Reason")
    }
}

impl PartialSchema for FailureClass {
    fn schema() -> RefOr<Schema> {
        one_of(
            "user: the job's own fault; infrastructure: the cluster's (a retry may succeed); configuration: the spec or cluster setup (no retry helps until it is fixed).",
            ["user", "infrastructure", "configuration"],
        )
    }
}

impl ToSchema for FailureClass {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("FailureClass")
    }
}
