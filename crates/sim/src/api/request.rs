//! What a request is about, parsed from its method and path the way the real server's
//! RequestInfoFactory does: verb, group, version, namespace, resource, name, subresource.

use std::collections::HashMap;

use axum::http::{Method, Uri};

/// The parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names a resource (else discovery, health, admin).
    pub is_resource: bool,
    /// The path.
    pub path: String,
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`); for non-resource requests the lowercased method.
    pub verb: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace.
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Name.
    pub name: String,
    /// Subresource.
    pub subresource: String,
    /// Query parameters (the last value of each).
    pub query: HashMap<String, String>,
}

fn parse_query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a boolean query parameter is set, read as the API server's parameter codec reads it
/// (apimachinery's `Convert_Slice_string_To_bool`): present and not `0`, `f`, `false`, `n` or
/// `no` in any case. The Python client sends `watch=True`, `follow=True`.
pub fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query.get(name).is_some_and(|v| {
        !(v == "0"
            || ["f", "false", "n", "no"]
                .iter()
                .any(|no| v.eq_ignore_ascii_case(no)))
    })
}

impl RequestInfo {
    /// Parses a request line.
    pub fn parse(method: &Method, uri: &Uri) -> Self {
        let path = uri.path().to_string();
        let query = parse_query(uri);
        let mut info = RequestInfo {
            path: path.clone(),
            verb: method.as_str().to_lowercase(),
            query,
            ..RequestInfo::default()
        };
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let rest: &[&str] = match parts.as_slice() {
            ["api", version, rest @ ..] => {
                info.version = version.to_string();
                rest
            }
            ["apis", group, version, rest @ ..] => {
                info.group = group.to_string();
                info.version = version.to_string();
                rest
            }
            _ => return info,
        };
        let mut rest = rest;
        let mut legacy_watch = false;
        if rest.first() == Some(&"watch") {
            legacy_watch = true;
            rest = &rest[1..];
        }
        if rest.is_empty() {
            return info;
        }
        info.is_resource = true;
        if rest[0] == "namespaces" && rest.len() > 1 {
            info.namespace = rest[1].to_string();
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        info.resource = rest[0].to_string();
        if let Some(name) = rest.get(1) {
            info.name = name.to_string();
        }
        if let Some(sub) = rest.get(2) {
            info.subresource = sub.to_string();
        }
        let watching = legacy_watch || flag(&info.query, "watch");
        info.verb = match *method {
            Method::GET | Method::HEAD if !info.name.is_empty() && !watching => "get",
            Method::GET | Method::HEAD if watching => "watch",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if info.name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => "unknown",
        }
        .to_string();
        info
    }

    /// `pods`, `jobs.batch`, `pods/log`: the resource as fault rules and counters name it.
    pub fn resource_label(&self) -> String {
        if !self.is_resource {
            return self.path.clone();
        }
        let base = if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        };
        if self.subresource.is_empty() {
            base
        } else {
            format!("{base}/{}", self.subresource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().expect("uri"))
    }

    #[test]
    fn paths_become_request_infos() {
        let i = parse(
            Method::GET,
            "/api/v1/namespaces/ns/pods?&watch=true&resourceVersion=5",
        );
        assert_eq!(
            (i.verb.as_str(), i.namespace.as_str(), i.resource.as_str()),
            ("watch", "ns", "pods")
        );
        assert_eq!(
            i.query.get("resourceVersion").map(String::as_str),
            Some("5")
        );

        let i = parse(Method::GET, "/apis/batch/v1/namespaces/ns/jobs/j/status");
        assert_eq!(
            (i.group.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("batch", "j", "status")
        );
        assert_eq!(i.resource_label(), "jobs.batch/status");

        let i = parse(Method::GET, "/api/v1/namespaces/ns");
        assert_eq!(
            (i.verb.as_str(), i.resource.as_str(), i.name.as_str()),
            ("get", "namespaces", "ns")
        );

        let i = parse(Method::PUT, "/api/v1/namespaces/ns/finalize");
        assert_eq!(
            (i.resource.as_str(), i.subresource.as_str()),
            ("namespaces", "finalize")
        );

        let i = parse(Method::DELETE, "/api/v1/namespaces/ns/pods");
        assert_eq!(i.verb, "deletecollection");

        let i = parse(Method::GET, "/api/v1/pods");
        assert_eq!((i.verb.as_str(), i.namespace.as_str()), ("list", ""));

        let i = parse(Method::GET, "/apis/batch/v1");
        assert!(!i.is_resource);
    }

    #[test]
    fn boolean_parameters_read_as_the_parameter_codec_reads_them() {
        for (query, watching) in [
            ("watch=true", true),
            ("watch=True", true),
            ("watch=1", true),
            ("watch=", true),
            ("watch=yes", true),
            ("watch=false", false),
            ("watch=False", false),
            ("watch=0", false),
            ("watch=no", false),
            ("watch=F", false),
            ("", false),
        ] {
            let i = parse(Method::GET, &format!("/api/v1/pods?{query}"));
            assert_eq!(i.verb == "watch", watching, "{query}");
        }
    }
}
