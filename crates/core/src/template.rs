//! Job file templates: `{{name}}`, `{{name:-default}}` and `\{{`, filled from named parameters.
//!
//! Rendering is textual and happens before the file is parsed, so a placeholder may stand
//! anywhere (inside a string, as a whole value, as part of a key). [`Rendered`] keeps a map from
//! every byte of its output back to the template, so that an error found later in the rendered
//! text is reported at the line and column of the file the user wrote.
//!
//! Syntax:
//! - `{{name}}`: a required parameter; rendering fails, naming it, when it has no value.
//! - `{{name:-default}}`: the parameter's value, or `default` (taken verbatim, may be empty).
//! - `\{{`: a literal `{{`. A backslash anywhere else is an ordinary character.
//!
//! A placeholder closes on the same line. Parameter names start with a letter or `_` and go on
//! with letters, digits, `_`, `.` and `-`; no spaces inside the braces.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Parameter values by name, e.g. from `--set name=value`.
pub type Params = BTreeMap<String, String>;

/// The longest parameter name accepted.
pub const MAX_PARAM_NAME_LEN: usize = 253;

/// A line and column in a text, both counted from 1; columns count characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters, from 1.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (clamped to the text, and to a char boundary).
    pub fn of_offset(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Why a template could not be rendered, or a parameter assignment was not understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template has placeholders that cannot be filled; every problem found, in order.
    #[error("{}", problem_lines(.0))]
    Placeholders(Vec<TemplateProblem>),
    /// A `name=value` assignment is malformed.
    #[error("parameter assignment {text:?} is malformed: {reason}")]
    Assignment {
        /// The assignment as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn problem_lines(problems: &[TemplateProblem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// One placeholder that cannot be filled, at its position in the template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateProblem {
    /// A required parameter has no value.
    #[error("{position}: required parameter `{name}` is not set{}", also_at(.others))]
    Missing {
        /// The parameter.
        name: String,
        /// Where it is first used.
        position: Position,
        /// Where else it is used.
        others: Vec<Position>,
    },
    /// The text between the braces is not a parameter name.
    #[error(
        "{position}: `{{{{{text}}}}}` does not name a parameter: {reason} (write \\{{{{ for a literal {{{{)"
    )]
    InvalidName {
        /// The text between `{{` and `}}` (or `:-`).
        text: String,
        /// What is wrong with it.
        reason: String,
        /// Where the placeholder starts.
        position: Position,
    },
    /// A `{{` with no `}}` after it on the same line.
    #[error(
        "{position}: `{{{{` is not closed by `}}}}` on the same line (write \\{{{{ for a literal {{{{)"
    )]
    Unclosed {
        /// Where the `{{` is.
        position: Position,
    },
}

fn also_at(others: &[Position]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let places: Vec<String> = others.iter().map(ToString::to_string).collect();
    format!(" (also used at {})", places.join(", "))
}

impl TemplateProblem {
    /// Where in the template the problem is.
    pub fn position(&self) -> Position {
        match self {
            TemplateProblem::Missing { position, .. }
            | TemplateProblem::InvalidName { position, .. }
            | TemplateProblem::Unclosed { position } => *position,
        }
    }

    /// The message without the position.
    pub fn message(&self) -> String {
        let text = self.to_string();
        let prefix = format!("{}: ", self.position());
        text.strip_prefix(&prefix).unwrap_or(&text).to_string()
    }
}

/// Where a byte of rendered text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The byte offset in the template: the byte itself, or the `{{` of the placeholder whose
    /// value holds it.
    pub offset: usize,
    /// The parameter whose value (or default) holds the byte, if any.
    pub parameter: Option<&'a str>,
}

/// A run of rendered bytes: copied from the template, or a placeholder's value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    rendered_start: usize,
    template_start: usize,
    len: usize,
    parameter: Option<String>,
}

/// A rendered template: the text, and where each of its bytes came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    template: String,
    text: String,
    segments: Vec<Segment>,
    used: BTreeSet<String>,
}

impl Rendered {
    /// The rendered text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The template it was rendered from.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The parameters the template refers to (whether given a value or defaulted).
    pub fn used_parameters(&self) -> &BTreeSet<String> {
        &self.used
    }

    /// The given parameters that the template never refers to (often a misspelt name).
    pub fn unused_parameters<'p>(&self, params: &'p Params) -> Vec<&'p str> {
        params
            .keys()
            .filter(|name| !self.used.contains(*name))
            .map(String::as_str)
            .collect()
    }

    /// Where byte `offset` of the rendered text came from in the template. Offsets at or past
    /// the end map to the end of the template.
    pub fn origin(&self, offset: usize) -> Origin<'_> {
        let index = self
            .segments
            .partition_point(|s| s.rendered_start <= offset)
            .saturating_sub(1);
        match self.segments.get(index) {
            Some(segment) if offset < segment.rendered_start + segment.len => Origin {
                offset: match segment.parameter {
                    Some(_) => segment.template_start,
                    None => segment.template_start + (offset - segment.rendered_start),
                },
                parameter: segment.parameter.as_deref(),
            },
            // Past the end (segments cover the whole text without gaps).
            _ => Origin {
                offset: self.template.len(),
                parameter: None,
            },
        }
    }

    /// The template position of byte `offset` of the rendered text.
    pub fn position(&self, offset: usize) -> Position {
        Position::of_offset(&self.template, self.origin(offset).offset)
    }
}

/// Whether `name` may name a parameter.
pub fn is_param_name(name: &str) -> bool {
    name_problem(name).is_none()
}

fn name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Some("the name is empty".into());
    };
    if name.len() > MAX_PARAM_NAME_LEN {
        return Some(format!("longer than {MAX_PARAM_NAME_LEN} characters"));
    }
    if name.trim() != name {
        return Some(format!(
            "no spaces inside the braces, write {{{{{}}}}}",
            name.trim()
        ));
    }
    if !(first.is_ascii_alphabetic() || first == '_') {
        return Some("a name starts with a letter or _".into());
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!(
            "{bad:?} is not allowed in a name (letters, digits, _ . -)"
        ));
    }
    None
}

/// Parses a `name=value` assignment (the value may be empty and may contain `=`).
pub fn parse_assignment(text: &str) -> Result<(String, String), TemplateError> {
    let malformed = |reason: String| TemplateError::Assignment {
        text: text.to_string(),
        reason,
    };
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| malformed("expected name=value".into()))?;
    if let Some(reason) = name_problem(name) {
        return Err(malformed(format!(
            "`{name}` is not a parameter name: {reason}"
        )));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Escapes every `{{` in `text` so that rendering gives back `text` unchanged.
pub fn escape(text: &str) -> String {
    text.replace("{{", "\\{{")
}

/// Renders `template` with `params`. Every problem is reported at once, each at its position.
pub fn render(template: &str, params: &Params) -> Result<Rendered, TemplateError> {
    let bytes = template.as_bytes();
    let mut text = String::with_capacity(template.len());
    let mut segments = Vec::new();
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();

    let copy = |text: &mut String, segments: &mut Vec<Segment>, range: std::ops::Range<usize>| {
        if !range.is_empty() {
            segments.push(Segment {
                rendered_start: text.len(),
                template_start: range.start,
                len: range.len(),
                parameter: None,
            });
            text.push_str(&template[range]);
        }
    };

    let mut copied_to = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"\\{{") {
            copy(&mut text, &mut segments, copied_to..i);
            copied_to = i + 1; // Drop the backslash, keep the braces.
            i += 3;
            continue;
        }
        if !bytes[i..].starts_with(b"{{") {
            i += 1;
            continue;
        }
        let line_end = template[i..].find('\n').map_or(template.len(), |n| i + n);
        let Some(close) = template[i + 2..line_end].find("}}").map(|n| i + 2 + n) else {
            problems.push(TemplateProblem::Unclosed {
                position: Position::of_offset(template, i),
            });
            i += 2;
            continue;
        };
        copy(&mut text, &mut segments, copied_to..i);
        let inner = &template[i + 2..close];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if let Some(reason) = name_problem(name) {
            problems.push(TemplateProblem::InvalidName {
                text: inner.to_string(),
                reason,
                position: Position::of_offset(template, i),
            });
        } else {
            used.insert(name.to_string());
            match params.get(name).map(String::as_str).or(default) {
                Some(value) => {
                    segments.push(Segment {
                        rendered_start: text.len(),
                        template_start: i,
                        len: value.len(),
                        parameter: Some(name.to_string()),
                    });
                    text.push_str(value);
                }
                None => {
                    problems.push(TemplateProblem::Missing {
                        name: name.to_string(),
                        position: Position::of_offset(template, i),
                        others: Vec::new(),
                    });
                }
            }
        }
        i = close + 2;
        copied_to = i;
    }
    copy(&mut text, &mut segments, copied_to..template.len());

    if problems.is_empty() {
        return Ok(Rendered {
            template: template.to_string(),
            text,
            segments: segments.into_iter().filter(|s| s.len > 0).collect(),
            used,
        });
    }
    Err(TemplateError::Placeholders(merge_missing(problems)))
}

/// Reports each missing parameter once, at its first use, listing the other uses.
fn merge_missing(problems: Vec<TemplateProblem>) -> Vec<TemplateProblem> {
    let mut merged: Vec<TemplateProblem> = Vec::new();
    for problem in problems {
        if let TemplateProblem::Missing { name, position, .. } = &problem {
            let first = merged.iter_mut().find_map(|p| match p {
                TemplateProblem::Missing {
                    name: first_name,
                    others,
                    ..
                } if first_name == name => Some(others),
                _ => None,
            });
            if let Some(others) = first {
                others.push(*position);
                continue;
            }
        }
        merged.push(problem);
    }
    merged
}

#[cfg(test)]
mod tests;
