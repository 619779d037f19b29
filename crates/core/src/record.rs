//! The durable outcome record: what kubeferry keeps of a job once it ended, in a small
//! ConfigMap of its own that outlives the job's objects and pods (see `docs/cancel-and-records.md`,
//! "The outcome record").
//!
//! One ConfigMap per job rather than one per batch of jobs: its create is the one write, atomic
//! and first-writer-wins (a second replica's create answers 409 and reads the first), it never
//! needs a read-modify-write under contention, its size is bounded by one outcome (the message
//! is cut as on the object's annotation), and it expires on its own.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::id::JobKind;
use crate::marks::{
    JOB_ID_ANNOTATION, JOB_ID_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, SPEC_HASH_ANNOTATION,
    job_id_label_value, job_id_of, outcome_record, spec_hash_of,
};
use crate::status::ExecutionInfo;
use crate::timeline::{Attempt, kept_attempts};

/// The label that marks a ConfigMap as an outcome record (value [`RECORD_LABEL_VALUE`]).
pub const RECORD_LABEL: &str = "kubeferry.dev/record";
/// The value of [`RECORD_LABEL`] on outcome records.
pub const RECORD_LABEL_VALUE: &str = "outcome";
/// The label selector of every outcome record.
pub const RECORDS_SELECTOR: &str =
    "app.kubernetes.io/managed-by=kubeferry,kubeferry.dev/record=outcome";

/// The record's data keys.
const KIND_KEY: &str = "kind";
const OBJECT_KEY: &str = "object";
const OUTCOME_KEY: &str = "outcome";
const RECORDED_AT_KEY: &str = "recordedAt";
const CREATED_AT_KEY: &str = "createdAt";
const CANCELLED_BY_KEY: &str = "cancelledBy";
const ATTEMPTS_KEY: &str = "attempts";

/// The name of the record of the job whose object is `object`, of kind `kind`:
/// `kubeferry-outcome-<kind>-<object>`, cut to a DNS label of at most 63 characters with a
/// hash of the whole (as object names are), so that any API server takes it and two records
/// never share a name.
pub fn record_name(kind: JobKind, object: &str) -> String {
    crate::marks::object_name("kubeferry-outcome", &format!("{}-{object}", kind.as_str()))
}

/// What a job came to, as recorded once it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeRecord {
    /// The job's kind.
    pub kind: JobKind,
    /// The name of the job's object (the execution id's last part).
    pub object: String,
    /// The caller's job id.
    pub job_id: Option<String>,
    /// The hash of the spec the job ran, to tell a resubmission of the same job from a
    /// different job under a reused id.
    pub spec_hash: Option<String>,
    /// The outcome: always terminal.
    pub outcome: ExecutionInfo,
    /// When the record was written.
    pub recorded_at: Option<Timestamp>,
    /// When the job's object was created: a list shows it once the object is gone.
    pub created_at: Option<Timestamp>,
    /// Who cancelled the job, for a cancelled one.
    pub cancelled_by: Option<String>,
    /// The job's attempts (its pods) as they ended, oldest first: the newest
    /// [`crate::timeline::KEPT_ATTEMPTS`], so `describe` tells them once the pods are gone.
    pub attempts: Vec<Attempt>,
}

impl OutcomeRecord {
    /// Reads a record from a ConfigMap's metadata and data; `None` when it is not one or its
    /// outcome cannot be read (such a ConfigMap is left alone and never answers for a job).
    pub fn read(metadata: &ObjectMeta, data: Option<&BTreeMap<String, String>>) -> Option<Self> {
        let data = data?;
        let kind: JobKind = data.get(KIND_KEY)?.parse().ok()?;
        let outcome: ExecutionInfo = serde_json::from_str(data.get(OUTCOME_KEY)?).ok()?;
        if !outcome.is_terminal() {
            return None;
        }
        Some(OutcomeRecord {
            kind,
            object: data.get(OBJECT_KEY)?.clone(),
            job_id: job_id_of(metadata),
            spec_hash: spec_hash_of(metadata),
            outcome,
            recorded_at: data
                .get(RECORDED_AT_KEY)
                .and_then(|at| at.parse().ok())
                .or_else(|| metadata.creation_timestamp.as_ref().map(|t| t.0)),
            created_at: data.get(CREATED_AT_KEY).and_then(|at| at.parse().ok()),
            cancelled_by: data.get(CANCELLED_BY_KEY).cloned(),
            // A record without them (or written by an older release) tells none.
            attempts: data
                .get(ATTEMPTS_KEY)
                .and_then(|attempts| serde_json::from_str(attempts).ok())
                .unwrap_or_default(),
        })
    }

    /// The ConfigMap's name, labels, annotations and data (as JSON, for any client).
    pub fn config_map(&self, namespace: &str) -> serde_json::Value {
        let mut labels = serde_json::json!({
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            RECORD_LABEL: RECORD_LABEL_VALUE,
        });
        let mut annotations = serde_json::Map::new();
        if let Some(job_id) = &self.job_id {
            labels[JOB_ID_LABEL] = job_id_label_value(job_id).into();
            annotations.insert(JOB_ID_ANNOTATION.into(), job_id.clone().into());
        }
        if let Some(hash) = &self.spec_hash {
            annotations.insert(SPEC_HASH_ANNOTATION.into(), hash.clone().into());
        }
        let mut data = serde_json::json!({
            KIND_KEY: self.kind.as_str(),
            OBJECT_KEY: self.object,
            OUTCOME_KEY: outcome_record(&self.outcome),
        });
        if let Some(at) = self.recorded_at {
            data[RECORDED_AT_KEY] = at.to_string().into();
        }
        if let Some(at) = self.created_at {
            data[CREATED_AT_KEY] = at.to_string().into();
        }
        if let Some(by) = &self.cancelled_by {
            data[CANCELLED_BY_KEY] = by.clone().into();
        }
        if !self.attempts.is_empty() {
            let attempts = kept_attempts(self.attempts.clone());
            data[ATTEMPTS_KEY] = serde_json::to_string(&attempts).unwrap_or_default().into();
        }
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": record_name(self.kind, &self.object),
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "data": data,
        })
    }

    /// Whether the record has outlived `retention` at `now`.
    pub fn expired(&self, now: Timestamp, retention: std::time::Duration) -> bool {
        expired(self.recorded_at, now, retention)
    }
}

/// Whether a record written at `recorded_at` has outlived `retention` at `now` (one whose time
/// is unknown never expires by itself).
pub fn expired(
    recorded_at: Option<Timestamp>,
    now: Timestamp,
    retention: std::time::Duration,
) -> bool {
    let Ok(retention) = jiff::SignedDuration::try_from(retention) else {
        return false;
    };
    recorded_at
        .and_then(|at| at.checked_add(retention).ok())
        .is_some_and(|until| until <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{JobState, Reason};

    fn record() -> OutcomeRecord {
        let mut outcome = ExecutionInfo::new(JobState::Failed, Reason::Error).with_message("boom");
        outcome.exit_code = Some(3);
        outcome.started_at = Some("2026-12-01T10:00:00Z".parse().unwrap());
        outcome.finished_at = Some("2026-12-01T10:00:05Z".parse().unwrap());
        OutcomeRecord {
            kind: JobKind::Job,
            object: "nightly-etl-1a2b3c".into(),
            job_id: Some("nightly-etl".into()),
            spec_hash: Some("abc123".into()),
            outcome,
            recorded_at: Some("2026-12-01T10:00:06Z".parse().unwrap()),
            created_at: Some("2026-12-01T09:59:58Z".parse().unwrap()),
            cancelled_by: None,
            attempts: vec![Attempt {
                pod: "nightly-etl-1a2b3c-x7k2q".into(),
                node: Some("node-1".into()),
                scheduled_at: Some("2026-12-01T09:59:59Z".parse().unwrap()),
                ended_at: Some("2026-12-01T10:00:05Z".parse().unwrap()),
                exit_code: Some(3),
                reason: Some("Error".into()),
                message: None,
            }],
        }
    }

    fn read_back(value: &serde_json::Value) -> Option<OutcomeRecord> {
        let metadata: ObjectMeta = serde_json::from_value(value["metadata"].clone()).unwrap();
        let data: BTreeMap<String, String> = serde_json::from_value(value["data"].clone()).unwrap();
        OutcomeRecord::read(&metadata, Some(&data))
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let mut cancelled = record();
        cancelled.kind = JobKind::SparkApp;
        cancelled.outcome = ExecutionInfo::new(JobState::Cancelled, Reason::Cancelled);
        cancelled.cancelled_by = Some("kubeferry@replica-1".into());
        cancelled.attempts.clear();
        for record in [record(), cancelled] {
            let config_map = record.config_map("ns");
            assert_eq!(
                config_map["metadata"]["name"],
                record_name(record.kind, &record.object)
            );
            assert_eq!(
                config_map["metadata"]["labels"][RECORD_LABEL],
                RECORD_LABEL_VALUE
            );
            assert_eq!(read_back(&config_map), Some(record));
        }
    }

    #[test]
    fn what_is_not_a_terminal_record_answers_for_no_job() {
        let mut config_map = record().config_map("ns");
        config_map["data"][OUTCOME_KEY] = r#"{"state":"STARTED","reason":"Running"}"#.into();
        assert_eq!(read_back(&config_map), None);
        let mut config_map = record().config_map("ns");
        config_map["data"][OUTCOME_KEY] = "not json".into();
        assert_eq!(read_back(&config_map), None);
        let mut config_map = record().config_map("ns");
        config_map["data"][KIND_KEY] = "rayjob".into();
        assert_eq!(read_back(&config_map), None);
    }

    #[test]
    fn a_record_expires_after_its_retention() {
        let record = record();
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        let recorded: Timestamp = "2026-12-01T10:00:06Z".parse().unwrap();
        assert!(!record.expired(recorded, week));
        assert!(!record.expired("2026-12-08T10:00:05Z".parse().unwrap(), week));
        assert!(record.expired("2026-12-08T10:00:06Z".parse().unwrap(), week));
        let long = record_name(JobKind::SparkApp, &"a".repeat(63));
        assert!(long.len() <= 63, "{long}");
        assert_ne!(long, record_name(JobKind::Job, &"a".repeat(63)));
        assert!(record_name(JobKind::Job, "hello").starts_with("kubeferry-outcome-job-hello-"));
    }
}
