use kubeferry_core::JobKind;

use super::together;
use crate::error::{Error, Result};

fn forbidden(resource: &str) -> Result<Vec<&'static str>> {
    Err(Error::Forbidden {
        verb: "list",
        resource: resource.to_string(),
        namespace: "ns".to_string(),
        message: "no".to_string(),
    })
}

fn unreachable() -> Result<Vec<&'static str>> {
    Err(Error::Unreachable {
        url: "https://127.0.0.1:6443".to_string(),
        since: jiff::Timestamp::UNIX_EPOCH,
        message: "down".to_string(),
    })
}

fn refused_resource(result: Result<Vec<&'static str>>) -> Option<String> {
    match result {
        Err(Error::Forbidden { resource, .. }) => Some(resource),
        _ => None,
    }
}

#[test]
fn every_kinds_results_come_together() {
    let results = vec![
        (JobKind::Job, true, Ok(vec!["a"])),
        (JobKind::SparkApp, true, Ok(vec!["b"])),
        (JobKind::JobSet, false, Ok(vec![])),
    ];
    assert_eq!(together(results, "listed").unwrap(), ["a", "b"]);
}

#[test]
fn a_refused_kind_is_left_out_while_a_served_one_answered() {
    let results = vec![
        (JobKind::Job, true, forbidden("jobs.batch")),
        (JobKind::SparkApp, true, Ok(vec!["b"])),
        (JobKind::JobSet, true, forbidden("jobsets.jobset.x-k8s.io")),
    ];
    assert_eq!(together(results, "listed").unwrap(), ["b"]);
}

#[test]
fn a_kind_the_cluster_does_not_serve_never_stands_in_for_a_refused_one() {
    let results = vec![
        (JobKind::Job, true, forbidden("jobs.batch")),
        (JobKind::SparkApp, false, Ok(vec![])),
        (JobKind::JobSet, false, Ok(vec![])),
    ];
    assert_eq!(
        refused_resource(together(results, "listed")).as_deref(),
        Some("jobs.batch")
    );
}

#[test]
fn every_kind_refused_answers_the_first_refusal() {
    let results = vec![
        (JobKind::Job, true, forbidden("jobs.batch")),
        (JobKind::SparkApp, true, forbidden("sparkapplications")),
    ];
    assert_eq!(
        refused_resource(together(results, "listed")).as_deref(),
        Some("jobs.batch")
    );
}

#[test]
fn any_other_error_is_the_answer() {
    let results = vec![
        (JobKind::Job, true, forbidden("jobs.batch")),
        (JobKind::SparkApp, true, Ok(vec!["b"])),
        (JobKind::JobSet, true, unreachable()),
    ];
    let error = together(results, "listed").unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error}");
}
