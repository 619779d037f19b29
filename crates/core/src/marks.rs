//! The labels and annotations kubeferry puts on every object it creates, and how it names them.
//!
//! All job state lives in Kubernetes: these marks are how any replica finds a job again, adopts
//! a create whose response was lost, and recognises a cancel requested elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::id::is_dns_label;

/// Label on every object kubeferry creates (Jobs, their pod templates, SparkApplications).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "kubeferry";
/// The label selector for everything kubeferry manages.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=kubeferry";
/// Label holding the caller's job id (or `h-<hash>` when the id is not a valid label value).
pub const JOB_ID_LABEL: &str = "kubeferry.dev/job-id";
/// Annotation holding the caller's full job id.
pub const JOB_ID_ANNOTATION: &str = "kubeferry.dev/job-id";
/// Annotation holding a hash of the spec the object was created from.
pub const SPEC_HASH_ANNOTATION: &str = "kubeferry.dev/spec-hash";
/// Annotation asking the settler to keep a longer tail of the main container's log with the
/// job's outcome ([`KeepLog`], as `lines=N,bytes=B`).
pub const KEEP_LOG_ANNOTATION: &str = "kubeferry.dev/keep-log";
/// Annotation set when a cancel is requested; its value is the RFC 3339 time of the request.
pub const CANCEL_ANNOTATION: &str = "kubeferry.dev/cancel-requested";
/// Annotation set with [`CANCEL_ANNOTATION`], in the same write: who asked (the process that
/// marked the job), for the outcome record of a cancel that a settler finishes.
pub const CANCELLED_BY_ANNOTATION: &str = "kubeferry.dev/cancel-requested-by";
/// Finalizer kubeferry puts on every object it creates, in the create request itself: the
/// object cannot disappear before some kubeferry process has kept its outcome record, even
/// when none was running while it ended or was deleted (I1, I2, I3 with nobody watching;
/// docs/INVARIANTS.md). The first settler that keeps the record takes it off; `sweep`
/// releases what it finds.
pub const RECORD_FINALIZER: &str = "kubeferry.dev/outcome-record";

/// Whether an object's finalizers (`metadata.finalizers`) hold it for its outcome record
/// ([`RECORD_FINALIZER`]).
pub fn held_for_record(finalizers: Option<&[String]>) -> bool {
    finalizers.is_some_and(|f| f.iter().any(|f| f == RECORD_FINALIZER))
}

/// Annotation holding an outcome kubeferry decided itself (a grace period or timeout that ran out,
/// an error the kubelet would retry forever), as the JSON of an `ExecutionInfo`. kubeferry
/// writes it before it stops the work, so that every replica reports the same outcome.
pub const OUTCOME_ANNOTATION: &str = "kubeferry.dev/outcome";

/// Annotation holding a copy of a job's outcome record (the JSON of an `ExecutionInfo`),
/// written on its object in the patch that lets the object go once the record is kept
/// ([`RECORD_FINALIZER`]), unless the object carries an [`OUTCOME_ANNOTATION`]. Every mapping
/// answers it as it was kept: the object alone then tells the answer its job had, should its
/// pods and its record both be lost (docs/INVARIANTS.md).
pub const KEPT_OUTCOME_ANNOTATION: &str = "kubeferry.dev/kept-outcome";

/// The bytes of a job's annotations kept for kubeferry's own marks (job id, spec hash, cancel
/// mark, recorded outcome): a spec's annotations may take Kubernetes' 256 KiB less these, so
/// that no mark kubeferry must write later is refused for want of room.
pub const RESERVED_ANNOTATION_BYTES: usize = 32 * 1024;

/// The most an outcome record's message may take in its JSON, in bytes (a longer one is cut
/// on a character boundary, with an ellipsis): the record must fit in
/// [`RESERVED_ANNOTATION_BYTES`].
pub const MAX_RECORDED_MESSAGE_BYTES: usize = 16 * 1024;

/// The value of [`OUTCOME_ANNOTATION`] for an outcome: its JSON, the message cut so that it
/// takes at most [`MAX_RECORDED_MESSAGE_BYTES`] there, escapes included.
pub fn outcome_record(outcome: &crate::ExecutionInfo) -> String {
    let mut outcome = outcome.clone();
    let message = &outcome.message;
    if message.chars().map(escaped_len).sum::<usize>() > MAX_RECORDED_MESSAGE_BYTES {
        // Keep what fits with the ellipsis: the first character that would not fit is cut.
        let room = MAX_RECORDED_MESSAGE_BYTES - '…'.len_utf8();
        let mut used = 0;
        let cut = message
            .char_indices()
            .find(|(_, c)| {
                used += escaped_len(*c);
                used > room
            })
            .map_or(message.len(), |(at, _)| at);
        outcome.message.truncate(cut);
        outcome.message.push('…');
    }
    serde_json::to_string(&outcome).unwrap_or_default()
}

/// The bytes a character takes in a JSON string (serde_json's escapes).
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The hash of the spec an object was created from ([`SPEC_HASH_ANNOTATION`]).
pub fn spec_hash_of(metadata: &ObjectMeta) -> Option<String> {
    metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(SPEC_HASH_ANNOTATION))
        .cloned()
}

/// How much of its main container's log a job's outcome record keeps beyond the kubelet's own
/// last words (at most 80 lines or 2,048 bytes): the settler reads this tail once the job ended,
/// one request, and keeps its last `bytes`, cut at a line (else character) boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepLog {
    /// The last lines asked for.
    pub lines: u32,
    /// The most bytes kept of them (the last ones).
    pub bytes: u32,
}

impl KeepLog {
    /// The most lines a job may ask to keep.
    pub const MAX_LINES: u32 = 5_000;
    /// The most bytes a job may ask to keep: 64 KiB, so that a record stays small in etcd.
    pub const MAX_BYTES: u32 = 64 * 1024;

    /// As the annotation holds it: `lines=N,bytes=B`.
    pub fn annotation(&self) -> String {
        format!("lines={},bytes={}", self.lines, self.bytes)
    }

    /// Read from the annotation's value, capped at the limits; `None` when it cannot be read.
    pub fn parse(value: &str) -> Option<Self> {
        let mut lines = None;
        let mut bytes = None;
        for part in value.split(',') {
            match part.trim().split_once('=')? {
                ("lines", n) => lines = n.trim().parse::<u32>().ok(),
                ("bytes", n) => bytes = n.trim().parse::<u32>().ok(),
                _ => return None,
            }
        }
        Some(KeepLog {
            lines: lines?.clamp(1, Self::MAX_LINES),
            bytes: bytes?.clamp(1, Self::MAX_BYTES),
        })
    }

    /// The end of `log` this keeps: its last [`KeepLog::bytes`], starting at a line when one
    /// starts within them, else at a character.
    pub fn kept<'a>(&self, log: &'a str) -> &'a str {
        let tail = last_bytes(log, self.bytes as usize);
        if tail.len() == log.len() {
            return tail;
        }
        match tail.find('\n') {
            Some(newline) if newline + 1 < tail.len() => &tail[newline + 1..],
            _ => tail,
        }
    }
}

/// The last `max` bytes of `text`, moved forward to the next character boundary so that no
/// character is split.
pub fn last_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// What the object's [`KEEP_LOG_ANNOTATION`] asks.
pub fn keep_log_of(metadata: &ObjectMeta) -> Option<KeepLog> {
    metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(KEEP_LOG_ANNOTATION))
        .and_then(|value| KeepLog::parse(value))
}

/// The label that puts a Job in a Kueue LocalQueue; such Jobs are created suspended and Kueue
/// starts them on admission.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// The longest object name kubeferry generates: a DNS-1123 label.
pub const MAX_NAME_LEN: usize = 63;

/// The caller's job id an object carries: its [`JOB_ID_ANNOTATION`] (the id as given), else
/// its [`JOB_ID_LABEL`] (the id when it is a valid label value); empty values count as none.
pub fn job_id_of(metadata: &ObjectMeta) -> Option<String> {
    entry(metadata.annotations.as_ref(), JOB_ID_ANNOTATION)
        .or_else(|| entry(metadata.labels.as_ref(), JOB_ID_LABEL))
}

/// A text that is not empty.
pub(crate) fn non_empty(text: Option<&str>) -> Option<String> {
    text.filter(|t| !t.is_empty()).map(str::to_string)
}

/// A label's or an annotation's value, when it is not empty.
pub(crate) fn entry(map: Option<&BTreeMap<String, String>>, key: &str) -> Option<String> {
    non_empty(map.and_then(|m| m.get(key)).map(String::as_str))
}

/// The value of [`JOB_ID_LABEL`] for a job id: the id itself when it is a valid label value,
/// otherwise `h-` and a hash of it (label values are at most 63 characters of a narrow alphabet).
pub fn job_id_label_value(job_id: &str) -> String {
    if is_label_value(job_id) {
        job_id.to_string()
    } else {
        format!("h-{}", short_hash(job_id, 40))
    }
}

/// The deterministic object name for a job id: the id sanitised to a DNS-1123 label, truncated,
/// plus a short hash of the full id so that truncation or sanitising can never make two ids
/// share a name. `prefix` (itself a DNS label, possibly empty) goes first.
pub fn object_name(prefix: &str, job_id: &str) -> String {
    object_name_within(prefix, job_id, MAX_NAME_LEN)
}

/// The longest name of a JobSet kubeferry creates: the JobSet controller names its Jobs
/// `<jobset>-<replicated job>-<index>` and their pods' hostnames add `-<pod index>`, all within
/// a DNS label's 63 characters; the rest is left to the replicated jobs' names.
pub(crate) const MAX_JOBSET_NAME_LEN: usize = 30;

/// The deterministic name of a JobSet for a job id: [`object_name`] within
/// `MAX_JOBSET_NAME_LEN` characters, made a DNS-1035 label (starting with a letter, `js-`
/// put first when the id does not give one): the JobSet webhook requires its child Jobs' names
/// to be DNS-1035 labels.
pub fn jobset_object_name(job_id: &str) -> String {
    let name = object_name_within("", job_id, MAX_JOBSET_NAME_LEN);
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return name;
    }
    object_name_within("js", job_id, MAX_JOBSET_NAME_LEN)
}

fn object_name_within(prefix: &str, job_id: &str, max_len: usize) -> String {
    let hash = short_hash(job_id, 8);
    let mut base = String::new();
    if !prefix.is_empty() {
        base.push_str(prefix);
        base.push('-');
    }
    let mut last_dash = base.ends_with('-') || base.is_empty();
    for c in job_id.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            base.push(c);
            last_dash = false;
        } else if !last_dash {
            base.push('-');
            last_dash = true;
        }
    }
    let room = max_len.min(MAX_NAME_LEN).saturating_sub(hash.len() + 1);
    base.truncate(room);
    let base = base.trim_matches('-');
    let name = if base.is_empty() {
        format!("kf-{hash}")
    } else {
        format!("{base}-{hash}")
    };
    debug_assert!(is_dns_label(&name), "{name}");
    name
}

/// [`object_name`] made a DNS-1035 label (starting with a letter) when it is not one: the name
/// of a Kubeflow SparkApplication, whose admission webhook denies any other (a job id
/// `42-nightly` gives `s-42-nightly-<hash>`). Names that already start with a letter are
/// [`object_name`]'s, so the name stays a function of the prefix and the job id alone.
pub fn dns1035_object_name(prefix: &str, job_id: &str) -> String {
    let name = object_name(prefix, job_id);
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return name;
    }
    let name = object_name(&format!("s{prefix}"), job_id);
    debug_assert!(name.starts_with('s'), "{name}");
    name
}

/// The first `len` hex digits of the SHA-256 of `text`.
pub fn short_hash(text: &str, len: usize) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.truncate(len);
    hex
}

/// Whether `s` is a valid Kubernetes label value: at most 63 characters, alphanumerics and
/// `-_.`, starting and ending with an alphanumeric (or empty).
pub fn is_label_value(s: &str) -> bool {
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return true;
    }
    bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_kept_log_is_read_back_capped_and_cut_at_a_line() {
        let keep = KeepLog::parse("lines=300,bytes=8192").unwrap();
        assert_eq!(
            keep,
            KeepLog {
                lines: 300,
                bytes: 8192
            }
        );
        assert_eq!(KeepLog::parse(&keep.annotation()), Some(keep));
        let capped = KeepLog::parse("lines=99999,bytes=99999999").unwrap();
        assert_eq!(
            (capped.lines, capped.bytes),
            (KeepLog::MAX_LINES, KeepLog::MAX_BYTES)
        );
        for unreadable in ["", "lines=x,bytes=1", "lines=1", "lines=1,bytes=1,more=2"] {
            assert_eq!(KeepLog::parse(unreadable), None, "{unreadable:?}");
        }
        let small = KeepLog {
            lines: 10,
            bytes: 12,
        };
        assert_eq!(small.kept("short\n"), "short\n");
        assert_eq!(small.kept("first line\nsecond\nthird\n"), "third\n");
        // No line starts within the bytes: cut at a character, never inside one.
        assert_eq!(small.kept("ééééééééééé\n"), "ééééé\n");
    }
    use super::*;

    #[test]
    fn names_are_deterministic_dns_labels() {
        let cases = [
            ("", "hello"),
            ("", "Hello World/step_1"),
            ("gravitino", "job-42"),
            ("", "---"),
            ("", &"x".repeat(200)),
            ("pfx", "ünïcödé"),
        ];
        for (prefix, id) in cases {
            let name = object_name(prefix, id);
            assert!(is_dns_label(&name), "{prefix:?} {id:?} -> {name}");
            assert_eq!(name, object_name(prefix, id));
            if !prefix.is_empty() {
                assert!(name.starts_with(&format!("{prefix}-")), "{name}");
            }
        }
        assert!(object_name("", "hello").starts_with("hello-"));
    }

    #[test]
    fn jobset_names_are_short_dns1035_labels() {
        for id in [
            "train",
            "42-nightly",
            &"x".repeat(200),
            "---",
            "Train Run/7",
        ] {
            let name = jobset_object_name(id);
            assert!(is_dns_label(&name), "{id:?} -> {name}");
            assert!(name.len() <= MAX_JOBSET_NAME_LEN, "{id:?} -> {name}");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase()), "{name}");
            assert_eq!(name, jobset_object_name(id));
        }
        assert!(jobset_object_name("train").starts_with("train-"));
        assert!(jobset_object_name("42-nightly").starts_with("js-42-nightly-"));
        // Long ids keep their hash, so two of them never share a name.
        let a = jobset_object_name(&format!("{}a", "x".repeat(100)));
        let b = jobset_object_name(&format!("{}b", "x".repeat(100)));
        assert_ne!(a, b);
    }

    #[test]
    fn dns1035_names_start_with_a_letter() {
        for (prefix, id) in [
            ("", "42-nightly"),
            ("", "9lives"),
            ("", "---"),
            ("7", "job"),
            ("", &"1".repeat(200)),
        ] {
            let name = dns1035_object_name(prefix, id);
            assert!(is_dns_label(&name), "{prefix:?} {id:?} -> {name}");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase()), "{name}");
            assert_eq!(name, dns1035_object_name(prefix, id));
        }
        assert!(dns1035_object_name("", "42-nightly").starts_with("s-42-nightly-"));
        assert_ne!(
            dns1035_object_name("", "42-nightly"),
            dns1035_object_name("", "s-42-nightly")
        );
        for (prefix, id) in [("", "nightly"), ("gravitino", "42")] {
            assert_eq!(dns1035_object_name(prefix, id), object_name(prefix, id));
        }
    }

    #[test]
    fn truncation_cannot_collide() {
        let a = format!("{}a", "x".repeat(100));
        let b = format!("{}b", "x".repeat(100));
        assert_ne!(object_name("", &a), object_name("", &b));
        assert_ne!(object_name("", "a_b"), object_name("", "a-b"));
    }

    #[test]
    fn label_values() {
        assert_eq!(job_id_label_value("run-1.step_2"), "run-1.step_2");
        let long = "x".repeat(64);
        let hashed = job_id_label_value(&long);
        assert!(hashed.starts_with("h-") && is_label_value(&hashed));
        assert!(job_id_label_value("a/b").starts_with("h-"));
        assert!(!is_label_value("-a"));
        assert!(is_label_value(""));
    }

    #[test]
    fn an_outcome_record_cuts_a_long_message_on_a_character_boundary() {
        let mut outcome = crate::ExecutionInfo::new(crate::JobState::Failed, crate::Reason::Error);
        outcome.message = "é".repeat(MAX_RECORDED_MESSAGE_BYTES);
        let record = outcome_record(&outcome);
        let read: crate::ExecutionInfo = serde_json::from_str(&record).expect("JSON");
        assert!(read.message.len() <= MAX_RECORDED_MESSAGE_BYTES);
        assert!(read.message.ends_with('…'));
        assert!(read.message.trim_end_matches('…').chars().all(|c| c == 'é'));
        assert!(record.len() < RESERVED_ANNOTATION_BYTES - 1024);
        // Escapes count: quotes and control characters take more room in JSON than in text.
        for text in ["\"", "\u{1}", "\\", "a"] {
            outcome.message = text.repeat(MAX_RECORDED_MESSAGE_BYTES + 1);
            let record = outcome_record(&outcome);
            let read: crate::ExecutionInfo = serde_json::from_str(&record).expect("JSON");
            let message_json = serde_json::to_string(&read.message).unwrap();
            assert!(
                message_json.len() <= MAX_RECORDED_MESSAGE_BYTES + 2,
                "{text:?}: {}",
                message_json.len()
            );
            assert!(read.message.ends_with('…'), "{text:?}");
        }
        // A short one is kept whole.
        outcome.message = "exit code 3".to_string();
        assert_eq!(
            outcome_record(&outcome),
            serde_json::to_string(&outcome).unwrap()
        );
    }
}
