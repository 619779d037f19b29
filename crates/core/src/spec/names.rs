//! Checks of the names and strings Kubernetes constrains: DNS labels and subdomains, label
//! keys and values, environment variable names, image references and mount paths. Each
//! returns what is wrong, in words a user can act on.

use crate::id::is_dns_label;
use crate::marks::is_label_value;

/// A DNS-1123 label (namespaces, job names, volume names).
pub(crate) fn dns_label(s: &str) -> Result<(), String> {
    if is_dns_label(s) {
        return Ok(());
    }
    Err(format!(
        "{s:?} is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"
    ))
}

/// A DNS-1123 subdomain (Secret, ServiceAccount, PVC and PriorityClass names).
pub(crate) fn dns_subdomain(s: &str) -> Result<(), String> {
    let valid = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        });
    if valid {
        return Ok(());
    }
    Err(format!(
        "{s:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
    ))
}

/// A label or annotation key: an optional DNS subdomain prefix and `/`, then a name of at most
/// 63 letters, digits, `-`, `_` and `.` that starts and ends with a letter or digit.
pub(crate) fn qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && dns_subdomain(prefix).is_err()
    {
        return Err(format!(
            "{key:?} is not a valid key: the prefix {prefix:?} must be a DNS subdomain (e.g. example.com)"
        ));
    }
    let b = name.as_bytes();
    let valid = !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    if valid {
        return Ok(());
    }
    Err(format!(
        "{key:?} is not a valid key (an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
    ))
}

/// A label value.
pub(crate) fn label_value(value: &str) -> Result<(), String> {
    if is_label_value(value) {
        return Ok(());
    }
    Err(format!(
        "{value:?} is not a valid label value (at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
    ))
}

/// An environment variable name: a C identifier, which every shell and runtime accepts.
pub(crate) fn env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        return Ok(());
    }
    Err(format!(
        "{name:?} is not a valid environment variable name (letters, digits and '_', not starting with a digit)"
    ))
}

/// An absolute, normalised mount or working directory path.
pub(crate) fn absolute_path(path: &str) -> Result<(), String> {
    let problem = if !path.starts_with('/') {
        "must be an absolute path (starting with /)"
    } else if path == "/" {
        "must not be the root directory"
    } else if path.ends_with('/') {
        "must not end with /"
    } else if path[1..]
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        "must be normalised (no empty, '.' or '..' parts)"
    } else if path.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(format!("{path:?} {problem}"))
}

/// A container image reference: `[registry[:port]/]path[:tag][@algorithm:digest]`, with the
/// grammar of the distribution reference library that container runtimes use.
pub(crate) fn image_reference(image: &str) -> Result<(), String> {
    let invalid = |why: &str| Err(format!("{image:?} is not a valid image reference: {why}"));
    if image.is_empty() {
        return invalid("it is empty");
    }
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("it contains whitespace");
    }
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        let Some((algorithm, hex)) = digest.split_once(':') else {
            return invalid("the digest must look like sha256:<hex>");
        };
        let algorithm_ok = !algorithm.is_empty()
            && algorithm.split(['+', '.', '_', '-']).all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
        if !algorithm_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return invalid("the digest must look like sha256:<hex>");
        }
    }
    // A tag follows the last ':' after the last '/' (a ':' before that is a registry port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        let b = tag.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= 128
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        if !ok {
            return invalid(
                "the tag must be 1 to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
            );
        }
    }
    if name.is_empty() {
        return invalid("the repository name is empty");
    }
    if name.len() > 255 {
        return invalid("the repository name is longer than 255 characters");
    }
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    let has_domain = components.len() > 1
        && (first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase()));
    if has_domain {
        let (host, port) = match first.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (first, None),
        };
        let host_ok = !host.is_empty()
            && host.split('.').all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !host_ok || !port_ok {
            return invalid(&format!("{first:?} is not a valid registry host[:port]"));
        }
        components.remove(0);
    }
    for component in components {
        if !path_component(component) {
            return invalid(&format!(
                "the path component {component:?} must be lowercase letters and digits, separated by '.', '_', '__' or '-'"
            ));
        }
    }
    Ok(())
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn path_component(component: &str) -> bool {
    let b = component.as_bytes();
    if b.is_empty() || !is_alnum_lower(b[0]) || !is_alnum_lower(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum_lower(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_alnum_lower(b[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        for good in [
            "busybox",
            "busybox:1.36",
            "library/busybox:latest",
            "docker.io/library/busybox:1.36.1",
            "ghcr.io/org/team/app_v2:2024-01-01",
            "localhost:5000/app",
            "localhost/app:dev",
            "registry.example.com:443/a/b__c/d-e--f:v1",
            "REGISTRY.example.com/app",
            "app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "app:1@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert!(
                image_reference(good).is_ok(),
                "{good}: {:?}",
                image_reference(good)
            );
        }
        for bad in [
            "",
            "Busybox",
            "busybox:",
            "busybox:.x",
            "bu sybox",
            "busybox::1",
            "/busybox",
            "busybox/",
            "a//b",
            "-app",
            "app-",
            "app@sha256:xyz",
            "app@sha256",
            "registry.example.com:port/app",
            "app:tag with space",
            "a...b",
        ] {
            assert!(image_reference(bad).is_err(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn names_and_keys() {
        assert!(dns_label("hello-1").is_ok());
        assert!(dns_label("Hello").is_err());
        assert!(dns_subdomain("my.secret-1").is_ok());
        for bad in ["", "a..b", ".a", "a.", "A", "a_b", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        for good in [
            "team",
            "app.kubernetes.io/name",
            "example.com/Some_Key.v1",
            "a",
        ] {
            assert!(qualified_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "Ex.com/a",
            "a b",
            "-a",
            "a/b/c",
            &"k".repeat(64),
        ] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
        assert!(label_value("").is_ok() && label_value("v1.2_x").is_ok());
        assert!(label_value("a b").is_err());
        assert!(env_name("_A1").is_ok() && env_name("A").is_ok());
        for bad in ["", "1A", "A-B", "A=B", "Ä"] {
            assert!(env_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths() {
        for good in ["/tmp", "/data/in", "/a.b/c_d"] {
            assert!(absolute_path(good).is_ok(), "{good}");
        }
        for bad in [
            "", "tmp", "/", "/tmp/", "/a//b", "/a/./b", "/a/../b", "/a\nb",
        ] {
            assert!(absolute_path(bad).is_err(), "{bad:?}");
        }
    }
}
