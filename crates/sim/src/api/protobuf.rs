//! Decoding of Kubernetes protobuf request bodies into their JSON form. kubectl's typed clients
//! (`create secret|configmap|namespace|serviceaccount|role|rolebinding|job`, `auth can-i`,
//! `auth whoami`, `drain`) send protobuf; the field tables in [`super::protobuf_schema`] say how
//! each message maps to JSON. Answers are always JSON, which those clients accept.

use base64::Engine;
use serde_json::{Map, Value, json};

use super::protobuf_schema::{MESSAGES, ROOTS};
use super::protobuf_types::{Field, Kind};
use crate::store::meta;

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn fields(buf: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (field, wire) = (key >> 3, key & 7);
        let value = match wire {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            1 => {
                let bytes: [u8; 8] = buf.get(pos..pos + 8)?.try_into().ok()?;
                pos += 8;
                Wire::Fixed64(u64::from_le_bytes(bytes))
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let bytes = buf.get(pos..pos.checked_add(len)?)?;
                pos += len;
                Wire::Bytes(bytes)
            }
            5 => {
                let bytes: [u8; 4] = buf.get(pos..pos + 4)?.try_into().ok()?;
                pos += 4;
                Wire::Fixed32(u32::from_le_bytes(bytes))
            }
            _ => return None,
        };
        out.push((field, value));
    }
    Some(out)
}

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn time(b: &[u8], micro: bool) -> Option<Value> {
    let mut seconds = 0i64;
    let mut nanos = 0i64;
    for (tag, w) in fields(b)? {
        match (tag, w) {
            (1, Wire::Varint(v)) => seconds = v as i64,
            (2, Wire::Varint(v)) => nanos = v as i64,
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        // Go's zero time, which JSON shows as null.
        return Some(Value::Null);
    }
    let t = jiff::Timestamp::new(seconds, nanos as i32).ok()?;
    Some(json!(if micro {
        meta::format_micro_time(t)
    } else {
        meta::format_time(t)
    }))
}

fn first_string(b: &[u8]) -> Option<Value> {
    fields(b)?.into_iter().find_map(|(tag, w)| match (tag, w) {
        (1, Wire::Bytes(s)) => Some(text(s)),
        _ => None,
    })
}

fn int_or_string(b: &[u8]) -> Option<Value> {
    let mut kind = 0;
    let mut int = 0i64;
    let mut string = Value::String(String::new());
    for (tag, w) in fields(b)? {
        match (tag, w) {
            (1, Wire::Varint(v)) => kind = v,
            (2, Wire::Varint(v)) => int = v as i32 as i64,
            (3, Wire::Bytes(s)) => string = text(s),
            _ => {}
        }
    }
    Some(if kind == 1 { string } else { json!(int) })
}

fn raw(b: &[u8]) -> Option<Value> {
    let inner = fields(b)?.into_iter().find_map(|(tag, w)| match (tag, w) {
        (1, Wire::Bytes(s)) => Some(s),
        _ => None,
    })?;
    serde_json::from_slice(inner).ok()
}

fn duration(b: &[u8]) -> Option<Value> {
    let ns = fields(b)?.into_iter().find_map(|(tag, w)| match (tag, w) {
        (1, Wire::Varint(v)) => Some(v as i64),
        _ => None,
    })?;
    Some(json!(format!("{}s", ns / 1_000_000_000)))
}

fn scalar(kind: Kind, w: &Wire<'_>) -> Option<Value> {
    match (kind, w) {
        (Kind::Str, Wire::Bytes(b)) => Some(text(b)),
        (Kind::Bytes, Wire::Bytes(b)) => {
            Some(json!(base64::engine::general_purpose::STANDARD.encode(b)))
        }
        (Kind::Int, Wire::Varint(v)) => Some(json!(*v as i64)),
        (Kind::Bool, Wire::Varint(v)) => Some(json!(*v != 0)),
        (Kind::Double, Wire::Fixed64(v)) => Some(json!(f64::from_bits(*v))),
        (Kind::Double, Wire::Fixed32(v)) => Some(json!(f32::from_bits(*v))),
        (Kind::Message(i), Wire::Bytes(b)) => message(i, b),
        (Kind::Time, Wire::Bytes(b)) => time(b, false),
        (Kind::MicroTime, Wire::Bytes(b)) => time(b, true),
        (Kind::Quantity, Wire::Bytes(b)) => first_string(b),
        (Kind::IntOrString, Wire::Bytes(b)) => int_or_string(b),
        (Kind::Raw, Wire::Bytes(b)) => raw(b),
        (Kind::Duration, Wire::Bytes(b)) => duration(b),
        _ => None,
    }
}

fn map_value(kind: Kind) -> Option<Kind> {
    match kind {
        Kind::MapStr => Some(Kind::Str),
        Kind::MapBytes => Some(Kind::Bytes),
        Kind::MapMessage(i) => Some(Kind::Message(i)),
        Kind::MapQuantity => Some(Kind::Quantity),
        Kind::MapTime => Some(Kind::Time),
        Kind::MapIntOrString => Some(Kind::IntOrString),
        Kind::MapRaw => Some(Kind::Raw),
        _ => None,
    }
}

/// Boolean fields that are pointers in Go, where an explicit `false` differs from unset.
const MEANINGFUL_FALSE: &[&str] = &[
    "allowPrivilegeEscalation",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "hostUsers",
    "immutable",
    "manualSelector",
    "privileged",
    "readOnlyRootFilesystem",
    "runAsNonRoot",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "suspend",
];

/// String fields that are pointers in Go, where an explicit `""` differs from unset.
const MEANINGFUL_EMPTY: &[&str] = &["storageClassName"];

/// Go marshals non-pointer fields even when empty; JSON leaves them out (`omitempty`), and so
/// must the decoded object, or `""` would stand where a default belongs.
fn omitted(field: &Field, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty() && !MEANINGFUL_EMPTY.contains(&field.json),
        Value::Bool(b) => !b && !MEANINGFUL_FALSE.contains(&field.json),
        // ObjectMeta.generation is a plain int64 with omitempty.
        Value::Number(n) => field.json == "generation" && n.as_i64() == Some(0),
        _ => false,
    }
}

fn message(index: usize, buf: &[u8]) -> Option<Value> {
    let schema = MESSAGES.get(index)?;
    let mut out = Map::new();
    for (tag, w) in fields(buf)? {
        let Some(field) = schema.fields.iter().find(|f| f.tag == tag) else {
            continue;
        };
        if let Some(value_kind) = map_value(field.kind) {
            let Wire::Bytes(entry) = w else { continue };
            let mut key = String::new();
            let mut value = Value::Null;
            for (t, ew) in fields(entry)? {
                match (t, ew) {
                    (1, Wire::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
                    (2, v) => value = scalar(value_kind, &v).unwrap_or(Value::Null),
                    _ => {}
                }
            }
            let map = out.entry(field.json).or_insert_with(|| json!({}));
            if let Some(m) = map.as_object_mut() {
                m.insert(key, value);
            }
            continue;
        }
        if field.repeated {
            let list = out.entry(field.json).or_insert_with(|| json!([]));
            let Some(list) = list.as_array_mut() else {
                continue;
            };
            match (field.kind, &w) {
                // Packed repeated integers.
                (Kind::Int, Wire::Bytes(packed)) => {
                    let mut pos = 0;
                    while pos < packed.len() {
                        list.push(json!(varint(packed, &mut pos)? as i64));
                    }
                }
                _ => list.extend(scalar(field.kind, &w)),
            }
        } else if let Some(v) = scalar(field.kind, &w)
            && !omitted(field, &v)
        {
            out.insert(field.json.to_string(), v);
        }
    }
    Some(Value::Object(out))
}

/// Decodes a protobuf request body (the `k8s\0` envelope around a known kind) into JSON.
pub fn decode(body: &[u8]) -> Option<Value> {
    let envelope = body.strip_prefix(b"k8s\x00")?;
    let unknown = fields(envelope)?;
    let find = |n: u64| {
        unknown.iter().find_map(|(tag, w)| match w {
            Wire::Bytes(b) if *tag == n => Some(*b),
            _ => None,
        })
    };
    let type_meta = fields(find(1)?)?;
    let type_field = |n: u64| {
        type_meta.iter().find_map(|(tag, w)| match w {
            Wire::Bytes(b) if *tag == n => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
    };
    let api_version = type_field(1).unwrap_or_default();
    let kind = type_field(2).unwrap_or_default();
    let (_, _, index) = ROOTS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)?;
    let mut object = message(*index, find(2).unwrap_or(&[]))?;
    if let Some(m) = object.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    fn varint_field(n: u64, v: u8) -> Vec<u8> {
        vec![(n << 3) as u8, v]
    }

    fn envelope(api_version: &[u8], kind: &[u8], raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version), field(2, kind)].concat();
        let unknown = [field(1, &type_meta), field(2, raw)].concat();
        [b"k8s\x00".as_slice(), &unknown].concat()
    }

    #[test]
    fn decodes_a_self_subject_access_review() {
        let attrs = [
            field(1, b"default"),
            field(2, b"create"),
            field(3, b"batch"),
            field(5, b"jobs"),
        ]
        .concat();
        let raw = [field(1, b""), field(2, &field(1, &attrs))].concat();
        let decoded = decode(&envelope(
            b"authorization.k8s.io/v1",
            b"SelfSubjectAccessReview",
            &raw,
        ))
        .expect("decodes");
        assert_eq!(decoded["kind"], json!("SelfSubjectAccessReview"));
        assert_eq!(
            decoded["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "create", "group": "batch", "resource": "jobs"})
        );
        assert!(decode(b"not protobuf").is_none());
    }

    #[test]
    fn decodes_maps_nested_messages_and_scalars() {
        // A Secret: metadata {name, labels {a: b}}, data {k: "v"}, type, immutable.
        let label = [field(1, b"a"), field(2, b"b")].concat();
        let metadata = [field(1, b"creds"), field(11, &label)].concat();
        let data = [field(1, b"k"), field(2, b"v")].concat();
        let raw = [
            field(1, &metadata),
            field(2, &data),
            field(3, b"Opaque"),
            varint_field(5, 1),
        ]
        .concat();
        let decoded = decode(&envelope(b"v1", b"Secret", &raw)).expect("decodes");
        assert_eq!(
            decoded,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "labels": {"a": "b"}},
                   "data": {"k": "dg=="}, "type": "Opaque", "immutable": true})
        );
    }

    #[test]
    fn empty_non_pointer_fields_are_left_out() {
        // metadata {name: "x", generateName: "", creationTimestamp: {}}, type "", immutable false.
        let metadata = [field(1, b"x"), field(2, b""), field(8, b"")].concat();
        let raw = [field(1, &metadata), field(3, b""), varint_field(5, 0)].concat();
        let decoded = decode(&envelope(b"v1", b"Secret", &raw)).expect("decodes");
        assert_eq!(
            decoded,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "immutable": false})
        );
    }
}
