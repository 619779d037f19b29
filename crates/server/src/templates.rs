//! Named job templates: job files in the templates directory, read at each submission so that
//! an edited template takes effect without a restart.

use std::path::{Path, PathBuf};

/// The file name endings a template may have, tried in this order.
pub const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Why a template cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// No templates directory is configured.
    #[error("this service has no templates directory (templatesDir); send a spec instead")]
    NoDirectory,
    /// The name is not a plain file name.
    #[error(
        "{0:?} is not a template name: use letters, digits, '.', '-' and '_', not starting with '.'"
    )]
    BadName(String),
    /// No such template.
    #[error("no template named {name:?} (templates: {known})")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The templates there are.
        known: String,
    },
    /// The file could not be read.
    #[error("cannot read template {name:?}: {source}")]
    Read {
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A template's text and the file name errors should name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The file name, e.g. `etl.yaml`.
    pub file_name: String,
    /// The text.
    pub text: String,
}

/// The templates directory.
#[derive(Clone, Debug)]
pub struct Templates {
    dir: Option<PathBuf>,
}

impl Templates {
    /// Templates from `dir` (none when `None`).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// Reads the template `name` (`etl` finds `etl.yaml`, `etl.yml` or `etl.json`; a name with
    /// its ending finds that file).
    pub fn load(&self, name: &str) -> Result<Template, TemplateError> {
        let dir = self.dir.as_deref().ok_or(TemplateError::NoDirectory)?;
        if !is_template_name(name) {
            return Err(TemplateError::BadName(name.to_string()));
        }
        let candidates = std::iter::once(name.to_string())
            .filter(|n| has_extension(n))
            .chain(EXTENSIONS.iter().map(|ext| format!("{name}.{ext}")));
        for file_name in candidates {
            let path = dir.join(&file_name);
            match std::fs::read_to_string(&path) {
                Ok(text) => return Ok(Template { file_name, text }),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(TemplateError::Read {
                        name: name.to_string(),
                        source,
                    });
                }
            }
        }
        let known = self.names().unwrap_or_default();
        Err(TemplateError::NotFound {
            name: name.to_string(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        })
    }

    /// The names of the templates there are, sorted.
    pub fn names(&self) -> Result<Vec<String>, TemplateError> {
        let Some(dir) = self.dir.as_deref() else {
            return Ok(Vec::new());
        };
        list(dir).map_err(|source| TemplateError::Read {
            name: dir.display().to_string(),
            source,
        })
    }
}

fn list(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() && !entry.path().is_file() {
            continue;
        }
        let file_name = entry.file_name().to_string_lossy().to_string();
        if let Some((stem, ext)) = file_name.rsplit_once('.')
            && EXTENSIONS.contains(&ext)
            && is_template_name(stem)
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

fn has_extension(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext))
}

/// Whether `name` can name a file in the templates directory and nothing outside it.
pub fn is_template_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_leave_the_directory() {
        for bad in ["", "../etc/passwd", "a/b", ".hidden", "a b", "x\0"] {
            assert!(!is_template_name(bad), "{bad:?}");
        }
        for good in ["etl", "etl.yaml", "daily_report-2"] {
            assert!(is_template_name(good), "{good:?}");
        }
    }

    #[test]
    fn templates_are_found_by_name_with_or_without_ending() {
        let dir = std::env::temp_dir().join(format!("kf-templates-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("hello.yaml"), "name: hello\n").unwrap();
        std::fs::write(dir.join("other.json"), "{}").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a template").unwrap();
        let templates = Templates::new(Some(dir.clone()));

        let by_stem = templates.load("hello").unwrap();
        assert_eq!(by_stem.file_name, "hello.yaml");
        assert_eq!(by_stem.text, "name: hello\n");
        assert_eq!(
            templates.load("other.json").unwrap().file_name,
            "other.json"
        );
        assert_eq!(templates.names().unwrap(), ["hello", "other"]);

        let missing = templates.load("nope").unwrap_err().to_string();
        assert!(missing.contains("hello, other"), "{missing}");
        assert!(matches!(
            templates.load("../x"),
            Err(TemplateError::BadName(_))
        ));
        assert!(matches!(
            Templates::new(None).load("hello"),
            Err(TemplateError::NoDirectory)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
