//! Content negotiation of responses: plain objects, `meta.k8s.io/v1` Tables (what `kubectl get`
//! asks for) and PartialObjectMetadata (what metadata-only clients ask for).

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};

use super::table::{self, IncludeObject, partial_metadata};
use crate::error::ApiError;
use crate::ops::convert;
use crate::resources::ResourceType;

/// The representation a client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Objects as stored.
    Plain,
    /// A Table.
    Table(IncludeObject),
    /// PartialObjectMetadata (List).
    Metadata,
}

impl Output {
    /// Negotiates from the `Accept` header and the `includeObject` parameter.
    pub fn negotiate(accept: Option<&str>, include_object: Option<&str>) -> Result<Self, ApiError> {
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(Output::Plain);
        };
        let include = match include_object {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        };
        for media in accept.split(',') {
            let mut parts = media.split(';').map(str::trim);
            let base = parts.next().unwrap_or("");
            let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
            let param = |name: &str| params.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
            if !matches!(base, "application/json" | "*/*" | "application/*") {
                continue;
            }
            match (param("as"), param("g")) {
                (None, _) => return Ok(Output::Plain),
                (Some("Table"), Some("meta.k8s.io")) => return Ok(Output::Table(include)),
                (
                    Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                    Some("meta.k8s.io"),
                ) => {
                    return Ok(Output::Metadata);
                }
                _ => continue,
            }
        }
        Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        ))
    }

    /// The response content type.
    pub fn content_type(self) -> &'static str {
        match self {
            Output::Plain => "application/json",
            Output::Table(_) => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Output::Metadata => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        }
    }
}

/// One object in the asked representation (a get, or a watch event).
pub fn render_one(rt: &ResourceType, object: &Value, version: &str, output: Output) -> Value {
    let object = convert(rt, object, version);
    match output {
        Output::Plain => object,
        Output::Metadata => partial_metadata(&object),
        Output::Table(include) => {
            let rv = object
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(json!(""));
            table::table(rt, &[&object], include, json!({"resourceVersion": rv}))
        }
    }
}

/// Serializes an object without `kind` and `apiVersion`: the real server leaves them out of the
/// items of built-in lists.
struct WithoutTypeMeta<'a>(&'a Value);

impl Serialize for WithoutTypeMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_object() {
            Some(map) => {
                let mut out = serializer.serialize_map(None)?;
                for (k, v) in map {
                    if k != "kind" && k != "apiVersion" {
                        out.serialize_entry(k, v)?;
                    }
                }
                out.end()
            }
            None => self.0.serialize(serializer),
        }
    }
}

#[derive(Serialize)]
struct ListBody<'a, T: Serialize> {
    kind: &'a str,
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    metadata: Value,
    items: Vec<T>,
}

/// A list in the asked representation, serialized.
pub fn render_list(
    rt: &ResourceType,
    items: &[&Value],
    version: &str,
    list_meta: Value,
    output: Output,
) -> Vec<u8> {
    let api_version = rt.api_version(version);
    let converted: Vec<Value>;
    let items: Vec<&Value> = if rt.versions.len() > 1 && version != rt.preferred_version() {
        converted = items.iter().map(|o| convert(rt, o, version)).collect();
        converted.iter().collect()
    } else {
        items.to_vec()
    };
    match output {
        Output::Plain if rt.behavior == crate::resources::Behavior::Custom => {
            serde_json::to_vec(&ListBody {
                kind: &rt.list_kind,
                api_version: &api_version,
                metadata: list_meta,
                items,
            })
        }
        Output::Plain => serde_json::to_vec(&ListBody {
            kind: &rt.list_kind,
            api_version: &api_version,
            metadata: list_meta,
            items: items.into_iter().map(WithoutTypeMeta).collect(),
        }),
        Output::Metadata => serde_json::to_vec(&ListBody {
            kind: "PartialObjectMetadataList",
            api_version: "meta.k8s.io/v1",
            metadata: list_meta,
            items: items.into_iter().map(partial_metadata).collect(),
        }),
        Output::Table(include) => serde_json::to_vec(&table::table(rt, &items, include, list_meta)),
    }
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_kubectl_and_kube_rs_headers() {
        assert_eq!(Output::negotiate(None, None), Ok(Output::Plain));
        assert_eq!(
            Output::negotiate(Some("application/json"), None),
            Ok(Output::Plain)
        );
        assert_eq!(
            Output::negotiate(
                Some(
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                ),
                None
            ),
            Ok(Output::Table(IncludeObject::Metadata))
        );
        assert_eq!(
            Output::negotiate(
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                None
            ),
            Ok(Output::Metadata)
        );
        assert_eq!(
            Output::negotiate(
                Some("application/vnd.kubernetes.protobuf, application/json"),
                None
            ),
            Ok(Output::Plain)
        );
        assert!(Output::negotiate(Some("application/vnd.kubernetes.protobuf"), None).is_err());
    }
}
