//! Label selectors (equality- and set-based) and field selectors, parsed from query strings and
//! from `metav1.LabelSelector` objects, and matched against JSON objects.

use serde_json::Value;

use crate::resources::Behavior;
use crate::store::meta;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=value` or `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key>n`.
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

/// A label selector: all requirements must hold. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements.
    pub requirements: Vec<Requirement>,
}

fn split_top_level(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth -= 1;
                current.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts.into_iter().map(|p| p.trim().to_string()).collect()
}

fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
    });
    name_ok && prefix_ok
}

fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

fn parse_set(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses the query-string form (`app=web,tier in (a,b),!canary`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for (n, part) in split_top_level(text).into_iter().enumerate() {
            // As the API server's parser: an empty term (`a,`, `a,,b`, `,a`) is an error.
            if part.is_empty() {
                return Err(if n == 0 {
                    "found ',', expected: !, identifier, or 'end of string'".to_string()
                } else {
                    "found '', expected: identifier after ','".to_string()
                });
            }
            requirements.push(parse_requirement(&part)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Builds a selector from a `metav1.LabelSelector` object (`matchLabels`,
    /// `matchExpressions`).
    pub fn from_object(selector: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                requirements.push(Requirement::In(
                    k.clone(),
                    vec![v.as_str().unwrap_or("").to_string()],
                ));
            }
        }
        if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let values = meta::strings(e.get("values"));
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                requirements.push(match op {
                    "In" => Requirement::In(key, values),
                    "NotIn" => Requirement::NotIn(key, values),
                    "Exists" => Requirement::Exists(key),
                    "DoesNotExist" => Requirement::DoesNotExist(key),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                });
            }
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a set of labels matches.
    pub fn matches_labels(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    /// Whether an object's labels match.
    pub fn matches(&self, object: &Value) -> bool {
        self.is_empty() || self.matches_labels(meta::string_map(object, "labels"))
    }
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    let bad = |detail: &str| format!("unable to parse requirement: {part:?}: {detail}");
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return if is_label_key(key) {
            Ok(Requirement::DoesNotExist(key.to_string()))
        } else {
            Err(bad("invalid label key"))
        };
    }
    for (word, notin) in [(" notin ", true), (" in ", false)] {
        if let Some(idx) = part.find(word) {
            let key = part[..idx].trim();
            let values = parse_set(&part[idx + word.len()..])
                .ok_or_else(|| bad("expected a set of values in parentheses"))?;
            if !is_label_key(key) {
                return Err(bad("invalid label key"));
            }
            if let Some(v) = values.iter().find(|v| !is_label_value(v)) {
                return Err(bad(&format!("invalid label value {v:?}")));
            }
            return Ok(if notin {
                Requirement::NotIn(key.to_string(), values)
            } else {
                Requirement::In(key.to_string(), values)
            });
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((key, value)) = part.split_once(op) {
            let (key, value) = (key.trim(), value.trim());
            if !is_label_key(key) {
                return Err(bad("invalid label key"));
            }
            return match kind {
                0 | 1 if !is_label_value(value) => {
                    Err(bad(&format!("invalid label value {value:?}")))
                }
                0 => Ok(Requirement::NotIn(key.to_string(), vec![value.to_string()])),
                1 => Ok(Requirement::In(key.to_string(), vec![value.to_string()])),
                _ => {
                    let n: i64 = value.parse().map_err(|_| {
                        bad("for 'Gt', 'Lt' operators, the value must be an integer")
                    })?;
                    Ok(if kind == 2 {
                        Requirement::Gt(key.to_string(), n)
                    } else {
                        Requirement::Lt(key.to_string(), n)
                    })
                }
            };
        }
    }
    if is_label_key(part) {
        Ok(Requirement::Exists(part.to_string()))
    } else {
        Err(bad("invalid label key"))
    }
}

/// A field selector: `field=value` and `field!=value` terms, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (field, wanted value, negated).
    pub terms: Vec<(String, String, bool)>,
}

/// The fields a resource type can be selected by, beyond `metadata.name` and
/// `metadata.namespace`.
fn supported_fields(behavior: Behavior) -> &'static [&'static str] {
    match behavior {
        Behavior::Pod => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Behavior::Event => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        Behavior::Job => &["status.successful"],
        Behavior::Namespace => &["status.phase"],
        Behavior::Node => &["spec.unschedulable"],
        Behavior::Secret => &["type"],
        _ => &[],
    }
}

fn field_value(object: &Value, field: &str) -> String {
    let pointer = match field {
        "source" => "/source/component".to_string(),
        other => format!("/{}", other.replace('.', "/")),
    };
    match object.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        // Absent booleans select as "false" and absent strings as "", as the real server's
        // field sets do.
        _ if matches!(field, "spec.hostNetwork" | "spec.unschedulable") => "false".to_string(),
        _ if field == "status.successful" => "0".to_string(),
        _ => String::new(),
    }
}

impl FieldSelector {
    /// Parses `a=b,c!=d` and checks every field is supported by the resource type.
    pub fn parse(text: &str, behavior: Behavior) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            let supported = matches!(field, "metadata.name" | "metadata.namespace")
                || supported_fields(behavior).contains(&field);
            if !supported {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_string(), value.trim().to_string(), negated));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value a `metadata.name=` term asks for, if any (lets a get-like watch be cheap).
    pub fn exact_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, _, neg)| f == "metadata.name" && !neg)
            .map(|(_, v, _)| v.as_str())
    }

    /// Whether an object matches.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, want, negated)| {
            let have = field_value(object, field);
            (have == *want) != *negated
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selectors_match_as_the_server_does() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front", "n": "5"}}});
        let table = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("app in (db,web)", true),
            ("app notin (db,web)", false),
            ("tier,app=web", true),
            ("!canary", true),
            ("!tier", false),
            ("missing!=x", true),
            ("missing notin (x)", true),
            ("n>4", true),
            ("n<4", false),
            ("app in (web), tier notin (back)", true),
        ];
        for (text, want) in table {
            let selector = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(selector.matches(&obj), want, "{text}");
        }
    }

    #[test]
    fn bad_label_selectors_are_refused() {
        for text in ["app=-web", "app in web", "=x", "n>x"] {
            assert!(LabelSelector::parse(text).is_err(), "{text}");
        }
        // Empty terms, as the API server's parser words them; an empty selector is none.
        for (text, error) in [
            ("app=web,", "found '', expected: identifier after ','"),
            ("app=web,,tier", "found '', expected: identifier after ','"),
            (
                ",app=web",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
        ] {
            assert_eq!(LabelSelector::parse(text), Err(error.to_string()), "{text}");
        }
        assert_eq!(LabelSelector::parse(" "), Ok(LabelSelector::default()));
    }

    #[test]
    fn selector_objects_become_requirements() {
        let sel = LabelSelector::from_object(&json!({
            "matchLabels": {"job-name": "j"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]
        }))
        .expect("valid");
        assert!(sel.matches(&json!({"metadata": {"labels": {"job-name": "j", "tier": "a"}}})));
        assert!(!sel.matches(&json!({"metadata": {"labels": {"job-name": "j"}}})));
    }

    #[test]
    fn field_selectors_know_the_supported_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let sel = FieldSelector::parse("status.phase=Running,spec.nodeName=n1", Behavior::Pod)
            .expect("valid");
        assert!(sel.matches(&pod));
        let sel = FieldSelector::parse("status.phase!=Running", Behavior::Pod).expect("valid");
        assert!(!sel.matches(&pod));
        let sel = FieldSelector::parse("metadata.name=p", Behavior::Job).expect("valid");
        assert_eq!(sel.exact_name(), Some("p"));
        assert_eq!(
            FieldSelector::parse("spec.foo=x", Behavior::Pod),
            Err("field label not supported: spec.foo".to_string())
        );
        assert!(FieldSelector::parse("status.phase=Running", Behavior::Custom).is_err());
    }
}
