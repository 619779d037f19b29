//! `-o jsonpath=TEMPLATE`: kubectl's JSONPath templates (`{.items[*].status.state}`,
//! `{range .items[*]}{.id}{"\t"}{.status.state}{"\n"}{end}`), evaluated with jsonpath-rust.
//!
//! Supported, as in kubectl's JSONPath support: text outside braces printed as is; `{PATH}`
//! where PATH starts with `.`, `@` or `$` (fields, `[*]`, indexes, slices, `..`, filters
//! `[?(@.status.state=="FAILED")]`); `{"text"}` literals with JSON escapes (`\n`, `\t`);
//! `{range PATH}...{end}`. Several matches of one `{PATH}` are printed separated by spaces;
//! strings print bare, other values as JSON; a path that matches nothing prints nothing.

use jsonpath_rust::JsonPath;
use serde_json::Value;

/// A parsed template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Path(String),
    Range(String, Vec<Node>),
}

impl Template {
    /// Parses a template; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        // Open ranges: the nodes of each, and the path it ranges over.
        let mut stack: Vec<(Option<String>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut rest = text;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                push(&mut stack, Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                push(&mut stack, Node::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 1..];
            let close = closing_brace(after).ok_or_else(|| {
                format!(
                    "jsonpath template {text:?}: unclosed '{{' at offset {}",
                    text.len() - rest.len() + open
                )
            })?;
            let inner = after[..close].trim();
            rest = &after[close + 1..];
            if inner.starts_with('"') {
                let literal: String = serde_json::from_str(inner).map_err(|error| {
                    format!("jsonpath template {text:?}: bad string literal {inner}: {error}")
                })?;
                push(&mut stack, Node::Text(literal));
            } else if let Some(path) = inner.strip_prefix("range ") {
                stack.push((Some(path_of(text, path.trim())?), Vec::new()));
            } else if inner == "end" {
                match stack.pop() {
                    Some((Some(path), nodes)) => push(&mut stack, Node::Range(path, nodes)),
                    _ => {
                        return Err(format!(
                            "jsonpath template {text:?}: {{end}} without {{range}}"
                        ));
                    }
                }
            } else {
                push(&mut stack, Node::Path(path_of(text, inner)?));
            }
        }
        match stack.pop() {
            Some((None, nodes)) if stack.is_empty() => Ok(Template { nodes }),
            _ => Err(format!(
                "jsonpath template {text:?}: {{range}} without {{end}}"
            )),
        }
    }

    /// The template applied to `value`.
    pub fn render(&self, value: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, value, &mut out);
        out
    }
}

fn push(stack: &mut [(Option<String>, Vec<Node>)], node: Node) {
    if let Some((_, nodes)) = stack.last_mut() {
        nodes.push(node);
    }
}

/// The index of the `}` closing an expression, skipping braces inside string literals.
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '}' => return Some(i),
            None => {}
        }
    }
    None
}

/// A kubectl path (`.items[*].id`, `@.id`, `$.id`) as an RFC 9535 query, checked.
fn path_of(template: &str, path: &str) -> Result<String, String> {
    let query = match path.chars().next() {
        Some('$') => path.to_string(),
        Some('@') => format!("${}", &path[1..]),
        Some('.') | Some('[') => format!("${path}"),
        _ => {
            return Err(format!(
                "jsonpath template {template:?}: {{{path}}} is not a path: paths start with '.', e.g. {{.items[*].status.state}}"
            ));
        }
    };
    // A path that does not parse is refused before anything is asked of the cluster.
    let query = if query == "$." {
        "$".to_string()
    } else {
        query
    };
    Value::Null
        .query(&query)
        .map_err(|error| format!("jsonpath template {template:?}: bad path {path:?}: {error}"))?;
    Ok(query)
}

fn render(nodes: &[Node], value: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Path(path) => {
                let found = value.query(path).unwrap_or_default();
                let texts: Vec<String> = found.into_iter().map(bare).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(path, body) => {
                for item in value.query(path).unwrap_or_default() {
                    render(body, item, out);
                }
            }
        }
    }
}

/// A value as kubectl prints it: strings bare, the rest as JSON.
fn bare(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"items": [
            {"id": "sim/job/a/x", "status": {"state": "FAILED", "reason": "Error", "exitCode": 3}},
            {"id": "sim/job/b/y", "status": {"state": "SUCCEEDED", "reason": "Completed", "exitCode": 0}},
        ]})
    }

    #[test]
    fn paths_join_their_matches_with_spaces() {
        let template = Template::parse("{.items[*].status.state}").unwrap();
        assert_eq!(template.render(&list()), "FAILED SUCCEEDED");
        let template = Template::parse("codes: {.items[*].status.exitCode}\n").unwrap();
        assert_eq!(template.render(&list()), "codes: 3 0\n");
        let template = Template::parse("{.nothing}").unwrap();
        assert_eq!(template.render(&list()), "");
    }

    #[test]
    fn ranges_literals_and_filters() {
        let template =
            Template::parse(r#"{range .items[*]}{.id}{"\t"}{.status.reason}{"\n"}{end}"#).unwrap();
        assert_eq!(
            template.render(&list()),
            "sim/job/a/x\tError\nsim/job/b/y\tCompleted\n"
        );
        let template = Template::parse(r#"{.items[?(@.status.state=="FAILED")].id}"#).unwrap();
        assert_eq!(template.render(&list()), "sim/job/a/x");
        let template = Template::parse("{$.items[1].status.state}").unwrap();
        assert_eq!(template.render(&list()), "SUCCEEDED");
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        for (bad, says) in [
            ("{.items[*].state", "unclosed"),
            ("{range .items[*]}{.id}", "without {end}"),
            ("{end}", "without {range}"),
            ("{state}", "is not a path"),
            ("{.items[}", "bad path"),
            (r#"{"\q"}"#, "bad string literal"),
        ] {
            let error = Template::parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
