//! Spec errors: every problem found in a job file, each with the file, line, column and field.

use std::fmt;

use crate::template::{Position, TemplateError, TemplateProblem};

/// What kind of problem a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The text is not well-formed YAML or JSON.
    Syntax,
    /// A template placeholder cannot be filled.
    Template,
    /// A value has the wrong type (a string where a list belongs).
    Type,
    /// A field this format does not have.
    UnknownField,
    /// A required field is missing.
    MissingField,
    /// A value is malformed or out of range.
    Value,
    /// Values that are fine alone but contradict each other.
    Combination,
}

/// One problem in a job file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where in the file (as written, before templating); `None` for specs built in code.
    pub position: Option<Position>,
    /// The field, e.g. `resources.memory`, `tolerations[0].key`, `labels."app/x"`; empty for
    /// problems of the whole file.
    pub path: String,
    /// What kind of problem it is.
    pub kind: ProblemKind,
    /// What is wrong.
    pub message: String,
}

/// A job spec that could not be loaded: every problem found, in file order.
///
/// Displays one problem per line as `file:line:col: field.path: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    source_name: String,
    problems: Vec<Problem>,
}

impl SpecError {
    /// An error of `problems` (sorted into file order) in the file `source_name`.
    pub fn new(source_name: impl Into<String>, mut problems: Vec<Problem>) -> Self {
        problems.sort_by(|a, b| {
            let key = |p: &Problem| (p.position.is_none(), p.position);
            key(a).cmp(&key(b))
        });
        Self {
            source_name: source_name.into(),
            problems,
        }
    }

    /// The problems of a template that could not be rendered, in the file `source_name`.
    pub fn from_template(source_name: &str, error: TemplateError) -> Self {
        let problems = match error {
            TemplateError::Placeholders(problems) => problems
                .iter()
                .map(|p: &TemplateProblem| Problem {
                    position: Some(p.position()),
                    path: String::new(),
                    kind: ProblemKind::Template,
                    message: p.message(),
                })
                .collect(),
            other @ TemplateError::Assignment { .. } => vec![Problem {
                position: None,
                path: String::new(),
                kind: ProblemKind::Template,
                message: other.to_string(),
            }],
        };
        Self::new(source_name, problems)
    }

    /// The file the problems are in (empty for specs built in code).
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// Every problem, in file order.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            let mut prefix = self.source_name.clone();
            if let Some(position) = problem.position {
                prefix = format!("{prefix}:{position}");
            }
            if !prefix.is_empty() {
                write!(f, "{prefix}: ")?;
            }
            if !problem.path.is_empty() {
                write!(f, "{}: ", problem.path)?;
            }
            f.write_str(&problem.message)?;
        }
        Ok(())
    }
}

/// A field path: `resources.memory`, `tolerations[0].key`, `labels."app.kubernetes.io/name"`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Path(Vec<Segment>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Segment {
    Field(&'static str),
    Key(String),
    Index(usize),
}

impl Path {
    /// The document itself.
    pub(crate) fn root() -> Self {
        Self::default()
    }

    /// A field of an object.
    pub(crate) fn field(&self, name: &'static str) -> Self {
        self.with(Segment::Field(name))
    }

    /// An entry of a user-keyed map (labels, env).
    pub(crate) fn key(&self, key: &str) -> Self {
        self.with(Segment::Key(key.to_string()))
    }

    /// An item of a list.
    pub(crate) fn index(&self, index: usize) -> Self {
        self.with(Segment::Index(index))
    }

    /// Whether this path is `other` or lies inside it.
    pub(crate) fn is_within(&self, other: &Path) -> bool {
        self.0.starts_with(&other.0)
    }

    /// The path one level up, `None` at the root.
    pub(crate) fn parent(&self) -> Option<Self> {
        let mut parent = self.0.clone();
        parent.pop()?;
        Some(Self(parent))
    }

    /// The path with its list indexes left out: `replicatedJobs[1].resources` becomes
    /// `replicatedJobs.resources`, which names the field in every item of the list.
    pub(crate) fn without_indexes(&self) -> Self {
        Self(
            self.0
                .iter()
                .filter(|segment| !matches!(segment, Segment::Index(_)))
                .cloned()
                .collect(),
        )
    }

    fn with(&self, segment: Segment) -> Self {
        let mut segments = self.0.clone();
        segments.push(segment);
        Self(segments)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Field(name) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
                Segment::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        f.write_str(key)?;
                    } else {
                        write!(f, "{key:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A problem found while decoding or validating, before it is given a line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The byte offset in the rendered text, when the finder knows it.
    pub(crate) offset: Option<usize>,
    /// The field.
    pub(crate) path: Path,
    /// Whether the problem is with the key of a map entry rather than its value.
    pub(crate) at_key: bool,
    pub(crate) kind: ProblemKind,
    pub(crate) message: String,
}

impl Found {
    /// A problem with the value at `path`, located through the path.
    pub(crate) fn at(path: Path, kind: ProblemKind, message: impl Into<String>) -> Self {
        Self {
            offset: None,
            path,
            at_key: false,
            kind,
            message: message.into(),
        }
    }

    /// A problem with the key of the map entry at `path`.
    pub(crate) fn at_key(path: Path, kind: ProblemKind, message: impl Into<String>) -> Self {
        Self {
            at_key: true,
            ..Self::at(path, kind, message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_as_users_write_them() {
        let root = Path::root();
        assert_eq!(
            root.field("resources").field("memory").to_string(),
            "resources.memory"
        );
        assert_eq!(
            root.field("tolerations").index(0).field("key").to_string(),
            "tolerations[0].key"
        );
        assert_eq!(
            root.field("labels")
                .key("app.kubernetes.io/name")
                .to_string(),
            "labels.\"app.kubernetes.io/name\""
        );
        assert_eq!(
            root.field("env").key("GREETING").to_string(),
            "env.GREETING"
        );
        assert_eq!(root.field("args").index(2).to_string(), "args[2]");
        assert_eq!(
            root.field("args").index(2).parent(),
            Some(root.field("args"))
        );
        assert_eq!(root.parent(), None);
    }

    #[test]
    fn errors_print_one_problem_per_line_in_file_order() {
        let problem = |line: Option<usize>, path: &str, message: &str| Problem {
            position: line.map(|line| Position { line, column: 3 }),
            path: path.into(),
            kind: ProblemKind::Value,
            message: message.into(),
        };
        let error = SpecError::new(
            "job.yaml",
            vec![
                problem(Some(7), "resources.memory", "bad"),
                problem(None, "", "whole"),
                problem(Some(2), "", "worse"),
            ],
        );
        assert_eq!(
            error.to_string(),
            "job.yaml:2:3: worse\njob.yaml:7:3: resources.memory: bad\njob.yaml: whole"
        );
        let unnamed = SpecError::new("", vec![problem(None, "image", "is empty")]);
        assert_eq!(unnamed.to_string(), "image: is empty");
    }
}
