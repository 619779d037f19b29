//! Decoding of the few protobuf request bodies kubectl sends through its typed clients
//! (SelfSubjectAccessReview for `auth can-i`, SelfSubjectRulesReview, SelfSubjectReview for
//! `auth whoami`, Eviction for `drain`) into their JSON form. Answers are always JSON, which
//! those clients accept.

use serde_json::{Map, Value, json};

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

enum Wire<'a> {
    Varint(u64),
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
        match wire {
            0 => out.push((field, Wire::Varint(varint(buf, &mut pos)?))),
            1 => pos += 8,
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let bytes = buf.get(pos..pos.checked_add(len)?)?;
                pos += len;
                out.push((field, Wire::Bytes(bytes)));
            }
            5 => pos += 4,
            _ => return None,
        }
    }
    Some(out)
}

fn bytes_field<'a>(fs: &[(u64, Wire<'a>)], n: u64) -> Option<&'a [u8]> {
    fs.iter().find_map(|(f, w)| match (f, w) {
        (f, Wire::Bytes(b)) if *f == n => Some(*b),
        _ => None,
    })
}

fn string_field(fs: &[(u64, Wire<'_>)], n: u64) -> Option<String> {
    bytes_field(fs, n).map(|b| String::from_utf8_lossy(b).into_owned())
}

fn strings(buf: &[u8], names: &[(u64, &str)]) -> Option<Value> {
    let fs = fields(buf)?;
    let mut map = Map::new();
    for (n, name) in names {
        if let Some(s) = string_field(&fs, *n) {
            map.insert((*name).to_string(), json!(s));
        }
    }
    Some(Value::Object(map))
}

/// Decodes a protobuf request body of a known kind into JSON.
pub fn decode(body: &[u8]) -> Option<Value> {
    let envelope = body.strip_prefix(b"k8s\x00")?;
    let unknown = fields(envelope)?;
    let type_meta = fields(bytes_field(&unknown, 1)?)?;
    let api_version = string_field(&type_meta, 1).unwrap_or_default();
    let kind = string_field(&type_meta, 2).unwrap_or_default();
    let raw = fields(bytes_field(&unknown, 2).unwrap_or(&[]))?;
    let spec = bytes_field(&raw, 2).and_then(fields);
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {}});
    match kind.as_str() {
        "SelfSubjectAccessReview" | "SubjectAccessReview" => {
            let spec = spec.unwrap_or_default();
            let mut out = Map::new();
            if let Some(r) = bytes_field(&spec, 1) {
                out.insert(
                    "resourceAttributes".into(),
                    strings(
                        r,
                        &[
                            (1, "namespace"),
                            (2, "verb"),
                            (3, "group"),
                            (4, "version"),
                            (5, "resource"),
                            (6, "subresource"),
                            (7, "name"),
                        ],
                    )?,
                );
            }
            if let Some(r) = bytes_field(&spec, 2) {
                out.insert(
                    "nonResourceAttributes".into(),
                    strings(r, &[(1, "path"), (2, "verb")])?,
                );
            }
            if kind == "SubjectAccessReview" {
                if let Some(user) = string_field(&spec, 3) {
                    out.insert("user".into(), json!(user));
                }
                let groups: Vec<String> = spec
                    .iter()
                    .filter_map(|(f, w)| match (f, w) {
                        (4, Wire::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
                        _ => None,
                    })
                    .collect();
                out.insert("groups".into(), json!(groups));
            }
            object["spec"] = Value::Object(out);
        }
        "SelfSubjectRulesReview" => {
            let namespace = spec.and_then(|s| string_field(&s, 1)).unwrap_or_default();
            object["spec"] = json!({"namespace": namespace});
        }
        "SelfSubjectReview" => {}
        "Eviction" => {
            let options = bytes_field(&raw, 2).and_then(fields);
            let grace = options.and_then(|o| {
                o.iter().find_map(|(f, w)| match (f, w) {
                    (1, Wire::Varint(v)) => Some(*v as i64),
                    _ => None,
                })
            });
            if let Some(g) = grace {
                object["deleteOptions"] = json!({"gracePeriodSeconds": g});
            }
        }
        _ => return None,
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

    #[test]
    fn decodes_a_self_subject_access_review() {
        let attrs = [
            field(1, b"default"),
            field(2, b"create"),
            field(3, b"batch"),
            field(5, b"jobs"),
        ]
        .concat();
        let spec = field(1, &attrs);
        let raw = [field(1, b""), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let unknown = [field(1, &type_meta), field(2, &raw)].concat();
        let body = [b"k8s\x00".as_slice(), &unknown].concat();
        let decoded = decode(&body).expect("decodes");
        assert_eq!(decoded["kind"], json!("SelfSubjectAccessReview"));
        assert_eq!(
            decoded["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "create", "group": "batch", "resource": "jobs"})
        );
        assert!(decode(b"not protobuf").is_none());
    }
}
