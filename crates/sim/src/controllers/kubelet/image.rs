//! Image references: parsing with the grammar of the container runtimes (so malformed ones give
//! InvalidImageName), and the registry test for images that can never be pulled.

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry host (`docker.io` when none is named).
    pub registry: String,
    /// The reference as written, without tag or digest (`busybox`, `ghcr.io/acme/tool`).
    pub repository: String,
    /// Tag (`latest` when neither tag nor digest is given).
    pub tag: Option<String>,
    /// Digest.
    pub digest: Option<String>,
}

fn is_path_component(c: &str) -> bool {
    // alpha-numeric (separator alpha-numeric)*, separator = [_.] | __ | -+
    if c.is_empty() {
        return false;
    }
    let bytes = c.as_bytes();
    if !bytes[0].is_ascii_lowercase() && !bytes[0].is_ascii_digit() {
        return false;
    }
    if !bytes[bytes.len() - 1].is_ascii_lowercase() && !bytes[bytes.len() - 1].is_ascii_digit() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_lowercase() || b.is_ascii_digit() {
            i += 1;
            continue;
        }
        // A separator run.
        let start = i;
        while i < bytes.len() && !(bytes[i].is_ascii_lowercase() || bytes[i].is_ascii_digit()) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_domain(d: &str) -> bool {
    let host = match d.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        Some(_) => return false,
        None => d,
    };
    !host.is_empty()
        && host.split('.').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Parses an image reference; `Err` carries the runtime's complaint.
pub fn parse(image: &str) -> Result<ImageRef, String> {
    let bad = || "invalid reference format".to_string();
    if image.is_empty() || image.trim() != image {
        return Err(bad());
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => {
            let (alg, hex) = d.split_once(':').ok_or_else(bad)?;
            let ok = alg == "sha256"
                && hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
            if !ok {
                return Err(bad());
            }
            (r, Some(d.to_string()))
        }
        None => (image, None),
    };
    // A tag is after the last ':' that comes after the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => {
            let tag = &rest[last_slash + i + 1..];
            let ok = !tag.is_empty()
                && tag.len() <= 128
                && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.as_bytes()[0] == b'_')
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
            if !ok {
                return Err(bad());
            }
            (&rest[..last_slash + i], Some(tag.to_string()))
        }
        None => (rest, None),
    };
    let parts: Vec<&str> = name.split('/').collect();
    let (registry, path_parts) = if parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
    {
        if !is_domain(parts[0]) {
            return Err(bad());
        }
        (parts[0].to_string(), &parts[1..])
    } else {
        ("docker.io".to_string(), &parts[..])
    };
    if path_parts.is_empty() {
        return Err(bad());
    }
    for p in path_parts {
        if !is_path_component(p) {
            if p.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(format!(
                    "invalid reference format: repository name ({name}) must be lowercase"
                ));
            }
            return Err(bad());
        }
    }
    let tag = match (&tag, &digest) {
        (None, None) => Some("latest".to_string()),
        _ => tag,
    };
    Ok(ImageRef {
        registry,
        repository: name.to_string(),
        tag,
        digest,
    })
}

/// Whether `text` matches a glob where `*` matches any run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(idx) => rest = &rest[idx + part.len()..],
                None => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_like_the_runtime() {
        let r = parse("busybox").expect("valid");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("docker.io", "busybox", Some("latest"))
        );
        let r = parse("ghcr.io/acme/tool:1.2").expect("valid");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("ghcr.io", "ghcr.io/acme/tool", Some("1.2"))
        );
        let r = parse("localhost:5000/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").expect("valid");
        assert_eq!(r.registry, "localhost:5000");
        assert!(r.tag.is_none());
        for bad in [
            "",
            "Busybox",
            "busybox:",
            "a//b",
            "busybox:-x",
            " busybox",
            "registry.invalid/UPPER:1",
            "x@sha256:zz",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("Busybox").err().as_deref(),
            Some("invalid reference format: repository name (Busybox) must be lowercase")
        );
    }

    #[test]
    fn globs_match_hosts() {
        assert!(glob_match("*.invalid", "registry.invalid"));
        assert!(!glob_match("*.invalid", "docker.io"));
        assert!(glob_match("docker.io", "docker.io"));
        assert!(glob_match("a*c*e", "abcde"));
    }
}
