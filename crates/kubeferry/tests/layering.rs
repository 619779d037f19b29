//! No import cycles between the top-level modules of any crate: each crate's modules form
//! layers, so a module can be read knowing only those below it.
//!
//! A module's imports are the `crate::<module>` paths in its files (`use crate::{a, b}` names
//! both), outside comments and test code (`tests.rs`, `tests/` folders and a trailing
//! `#[cfg(test)] mod tests`). `lib.rs` and `main.rs` are the crates' roots and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Where each import of one module by another is written: `(from, to)` to `file:line`.
type Imports = BTreeMap<(String, String), String>;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir` that is not test code.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            if name != "tests" {
                source_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// The top-level module a file under `src` belongs to (`None` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(src).ok()?.components().next()?;
    let first = first.as_os_str().to_string_lossy();
    let module = first.strip_suffix(".rs").unwrap_or(&first);
    (!matches!(module, "lib" | "main")).then(|| module.to_string())
}

/// The modules `text` names after `crate::`, with the line of each.
fn imported(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        if line.starts_with("mod tests {") {
            break;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    found.push((ident(item.trim()), number + 1));
                }
            } else {
                found.push((ident(rest), number + 1));
            }
        }
    }
    found.retain(|(module, _)| !module.is_empty() && module.starts_with(char::is_lowercase));
    found
}

/// The identifier `text` starts with.
fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Which top-level module of the crate at `src` imports which, and where.
fn imports(src: &Path) -> Imports {
    let mut files = Vec::new();
    source_files(src, &mut files);
    let mut imports = Imports::new();
    for file in files {
        let Some(from) = module_of(src, &file) else {
            continue;
        };
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (to, line) in imported(&text) {
            if to != from {
                imports
                    .entry((from.clone(), to))
                    .or_insert_with(|| format!("{}:{line}", file.display()));
            }
        }
    }
    imports
}

/// Each cycle among the modules, as the modules in it (the strongly connected components of
/// more than one module, by Tarjan's algorithm).
fn cycles(imports: &Imports) -> Vec<Vec<String>> {
    struct Search<'a> {
        edges: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, module: &'a str) {
            let index = self.index.len();
            self.index.insert(module, index);
            self.low.insert(module, index);
            self.stack.push(module);
            self.on_stack.insert(module);
            for next in self.edges.get(module).cloned().unwrap_or_default() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next]);
                    self.low.insert(module, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[module].min(self.index[next]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_string());
                    if top == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        edges: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for (from, to) in imports.keys() {
        search.edges.entry(from).or_default().push(to);
        search.edges.entry(to).or_default();
    }
    let modules: Vec<&str> = search.edges.keys().copied().collect();
    for module in modules {
        if !search.index.contains_key(module) {
            search.visit(module);
        }
    }
    search.found
}

/// A cycle told with the imports that make it.
fn described(cycle: &[String], imports: &Imports) -> String {
    let within: Vec<String> = imports
        .iter()
        .filter(|((from, to), _)| cycle.contains(from) && cycle.contains(to))
        .map(|((from, to), at)| format!("  {from} -> {to} ({at})"))
        .collect();
    format!("{}:\n{}", cycle.join(", "), within.join("\n"))
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut crates: Vec<PathBuf> = fs::read_dir(crates_dir())
        .expect("the crates directory")
        .map(|e| e.expect("an entry").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() >= 8, "{crates:?}");
    let mut problems = Vec::new();
    for src in &crates {
        let imports = imports(src);
        for cycle in cycles(&imports) {
            problems.push(described(&cycle, &imports));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles between modules:\n{}",
        problems.join("\n")
    );
}

#[test]
fn imports_are_read_from_paths_and_groups_outside_comments_and_tests() {
    let text = "\
use crate::kind::{Kind, Shared};
use crate::{cluster, error::Result};
/// See [`crate::executor`].
fn f() { crate::records::keep(); }
mod tests {
    use crate::executor::Executor;
}
";
    let modules: Vec<String> = imported(text).into_iter().map(|(m, _)| m).collect();
    assert_eq!(modules, ["kind", "cluster", "error", "records"]);
}

#[test]
fn a_cycle_is_found_and_told_with_its_imports() {
    let imports: Imports = [
        (("a", "b"), "a.rs:1"),
        (("b", "c"), "b.rs:2"),
        (("c", "a"), "c.rs:3"),
        (("c", "d"), "c.rs:4"),
    ]
    .into_iter()
    .map(|((from, to), at)| ((from.to_string(), to.to_string()), at.to_string()))
    .collect();
    let found = cycles(&imports);
    assert_eq!(found, [["a", "b", "c"]]);
    let told = described(&found[0], &imports);
    assert!(told.contains("c -> a (c.rs:3)"), "{told}");
    assert!(!told.contains("c -> d"), "{told}");
    let layered: Imports = imports
        .into_iter()
        .filter(|((from, _), _)| from != "c")
        .collect();
    assert!(cycles(&layered).is_empty());
}
