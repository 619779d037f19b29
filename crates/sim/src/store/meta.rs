//! Reading and writing object metadata on JSON objects, and the time and name formats of the
//! Kubernetes API.

use jiff::Timestamp;
use rand::Rng;
use serde_json::{Map, Value, json};

/// `metadata.name`.
pub fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`.
pub fn namespace(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

/// `metadata.resourceVersion` as a number.
pub fn resource_version(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(object: &mut Value, rv: u64) {
    if let Some(meta) = metadata_mut(object) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// `metadata` as a mutable map, created when missing; `None` when the object is not a map.
pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let map = object.as_object_mut()?;
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut()
}

/// A string map of the metadata (`labels`, `annotations`).
pub fn string_map<'a>(object: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    object.get("metadata")?.get(field)?.as_object()
}

/// One label.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    string_map(object, "labels")?.get(key)?.as_str()
}

/// One annotation.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    string_map(object, "annotations")?.get(key)?.as_str()
}

/// `metadata.deletionTimestamp` is set.
pub fn is_deleting(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    strings(object.pointer("/metadata/finalizers"))
}

/// The strings of a JSON list (none when it is missing or not a list; other items skipped).
pub fn strings(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    if let Some(meta) = metadata_mut(object) {
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(finalizers));
        }
    }
}

/// `metadata.ownerReferences`.
pub fn owner_references(object: &Value) -> &[Value] {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The ownerReference with `controller: true`.
pub fn controller_ref(object: &Value) -> Option<&Value> {
    owner_references(object)
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// A `metav1.Time` (RFC 3339, whole seconds, UTC).
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A `metav1.MicroTime` (RFC 3339 with microseconds).
pub fn format_micro_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// RFC 3339 with nanoseconds, trailing zeros trimmed (Go's RFC3339Nano), as log timestamps.
pub fn format_nano_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.fZ").to_string()
}

/// The current time as a `metav1.Time`.
pub fn now() -> String {
    format_time(Timestamp::now())
}

/// Parses an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

/// A time field of an object as a timestamp.
pub fn time_at(object: &Value, pointer: &str) -> Option<Timestamp> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .and_then(parse_time)
}

/// A random UUID (version 4) as the API server makes uids.
pub fn new_uid() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The alphabet of generated name suffixes (no vowels, no confusable digits), as
/// `k8s.io/apimachinery/pkg/util/rand.String` uses.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix of `n` characters for `generateName` and controller-made names.
pub fn random_suffix(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())] as char)
        .collect()
}

/// The name for a `generateName` prefix: the prefix cut to leave room, plus 5 random
/// characters.
pub fn generate_name(prefix: &str) -> String {
    let max_prefix = 63 - 5;
    let mut cut = prefix.len().min(max_prefix);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = &prefix[..cut];
    format!("{prefix}{}", random_suffix(5))
}

/// A duration as `kubectl` prints ages (`5s`, `2m3s`, `3h`, `4d`), from
/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let s = seconds.max(0);
    if s < 60 * 2 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        let rem = s % 60;
        return if rem == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{rem}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let rem = minutes % 60;
        return if rem == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{rem}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let rem = hours % 24;
        return if rem == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{rem}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24;
        let rem = days % 365;
        return if rem == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{rem}d", days / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}
