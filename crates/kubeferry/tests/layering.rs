//! No import cycles between the top-level modules of any crate: each crate's modules form
//! layers, so a module can be read knowing only those below it.
//!
//! Each file is read as Rust (`syn`). A module imports another where its code names a path
//! through it: `crate::other::…`, `crate::{other, …}`, `super::…` climbing to the crate root,
//! or `crate::Item` that the crate root re-exports from `other`. Test code is left out: items
//! under `#[cfg(test)]` (and `cfg(any(test, …))`), `tests.rs` files and `tests/` folders. The
//! crate roots (`lib.rs`, `main.rs`) are not modules of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

mod common;

use common::{files_under, name_of, repo_root};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

/// Where each import of one module by another is written: `(from, to)` to a file.
type Imports = BTreeMap<(String, String), String>;

/// Every `.rs` file under `dir` that is not test code.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let keep = |path: &Path| {
        let name = name_of(path);
        name.ends_with(".rs") && name != "tests.rs"
    };
    files_under(dir, &|path| name_of(path) != "tests", &keep, out);
}

/// The module path of a file under `src` (`a.rs` and `a/mod.rs` are `[a]`, `a/b.rs` is
/// `[a, b]`, the crate roots `[]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = path.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if !(path.is_empty() && matches!(stem, "lib" | "main")) && stem != "mod" {
        path.push(stem.to_string());
    }
    path
}

/// Whether attributes keep an item to tests: `#[cfg(test)]` or `#[cfg(all(test, …))]`.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && match attr.parse_args::<syn::Meta>() {
                Ok(syn::Meta::Path(path)) => path.is_ident("test"),
                Ok(syn::Meta::List(list)) => {
                    list.path.is_ident("all")
                        && list.tokens.clone().into_iter().any(
                            |token| matches!(token, TokenTree::Ident(ident) if ident == "test"),
                        )
                }
                _ => false,
            }
    })
}

/// The code of an item that is not test code: test-only items of impls, traits and inline
/// modules are left out as well.
fn production_code(item: &syn::Item, out: &mut Vec<TokenStream>) {
    if test_only(attrs_of(item)) {
        return;
    }
    match item {
        syn::Item::Impl(block) => {
            out.push(block.generics.to_token_stream());
            if let Some((_, path, _)) = &block.trait_ {
                out.push(path.to_token_stream());
            }
            out.push(block.self_ty.to_token_stream());
            for inner in &block.items {
                let attrs = match inner {
                    syn::ImplItem::Const(i) => &i.attrs,
                    syn::ImplItem::Fn(i) => &i.attrs,
                    syn::ImplItem::Type(i) => &i.attrs,
                    syn::ImplItem::Macro(i) => &i.attrs,
                    _ => &Vec::new(),
                };
                if !test_only(attrs) {
                    out.push(inner.to_token_stream());
                }
            }
        }
        syn::Item::Trait(block) => {
            out.push(block.generics.to_token_stream());
            out.push(block.supertraits.to_token_stream());
            for inner in &block.items {
                let attrs = match inner {
                    syn::TraitItem::Const(i) => &i.attrs,
                    syn::TraitItem::Fn(i) => &i.attrs,
                    syn::TraitItem::Type(i) => &i.attrs,
                    syn::TraitItem::Macro(i) => &i.attrs,
                    _ => &Vec::new(),
                };
                if !test_only(attrs) {
                    out.push(inner.to_token_stream());
                }
            }
        }
        syn::Item::Mod(module) => {
            for inner in module.content.iter().flat_map(|(_, items)| items) {
                production_code(inner, out);
            }
        }
        other => out.push(other.to_token_stream()),
    }
}

/// The attributes of an item, where it has any.
fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The first segment after the crate root of every path in `tokens`, for a file whose module
/// path is `within`: `crate::a::…` and `crate::{a, b::…}` give `a` and `b`; `super::` climbs
/// from `within` and gives a segment only once it reaches the root.
fn root_segments(tokens: TokenStream, within: &[String], out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(group) => root_segments(group.stream(), within, out),
            TokenTree::Ident(ident) if ident == "crate" || ident == "super" => {
                let mut depth = within.len();
                let mut at = i;
                let mut rooted = ident == "crate";
                if !rooted {
                    // `super::super::…`: each climbs one module.
                    while matches!(&tokens[at], TokenTree::Ident(s) if s == "super") && depth > 0 {
                        depth -= 1;
                        if depth == 0 {
                            rooted = true;
                            break;
                        }
                        match (tokens.get(at + 3), path_sep(&tokens, at + 1)) {
                            (Some(TokenTree::Ident(next)), true) if next == "super" => at += 3,
                            _ => break,
                        }
                    }
                }
                if rooted && path_sep(&tokens, at + 1) {
                    match tokens.get(at + 3) {
                        Some(TokenTree::Ident(segment)) => out.push(segment.to_string()),
                        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                            group_heads(group.stream(), out)
                        }
                        _ => {}
                    }
                    i = at + 3;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether `tokens[at..]` starts with `::`.
fn path_sep(tokens: &[TokenTree], at: usize) -> bool {
    matches!(
        (tokens.get(at), tokens.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':'
    )
}

/// The first identifier of each comma-separated part of a `use` group.
fn group_heads(tokens: TokenStream, out: &mut Vec<String>) {
    let mut expecting = true;
    for token in tokens {
        match token {
            TokenTree::Punct(p) if p.as_char() == ',' => expecting = true,
            TokenTree::Ident(ident) if expecting => {
                out.push(ident.to_string());
                expecting = false;
            }
            _ => expecting = false,
        }
    }
}

/// The root-level segments a file's code (outside test code) names.
fn segments_of_file(text: &str, within: &[String]) -> Vec<String> {
    let file = syn::parse_file(text).expect("the file parses as Rust");
    let mut code = Vec::new();
    for item in &file.items {
        production_code(item, &mut code);
    }
    let mut out = Vec::new();
    for tokens in code {
        root_segments(tokens, within, &mut out);
    }
    out
}

/// A crate's top-level modules, and the module each item the root re-exports comes from.
fn crate_root(src: &Path, files: &[PathBuf]) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|file| module_path(src, file).into_iter().next())
        .collect();
    let mut reexports = BTreeMap::new();
    for root in ["lib.rs", "main.rs"] {
        let Ok(text) = fs::read_to_string(src.join(root)) else {
            continue;
        };
        let file = syn::parse_file(&text).expect("the crate root parses as Rust");
        for item in file.items {
            if let syn::Item::Use(used) = item
                && !matches!(used.vis, syn::Visibility::Inherited)
            {
                reexported(&used.tree, None, &mut reexports);
            }
        }
    }
    (modules, reexports)
}

/// Notes the names a root `use` tree makes public, with the path's first segment (after
/// `crate::` or `self::`): the module they come from, when it is one.
fn reexported(tree: &syn::UseTree, first: Option<&str>, out: &mut BTreeMap<String, String>) {
    match tree {
        syn::UseTree::Path(path) => {
            let ident = path.ident.to_string();
            let first = match first {
                Some(first) => Some(first),
                None if ident == "crate" || ident == "self" => None,
                None => Some(ident.as_str()),
            };
            reexported(&path.tree, first, out);
        }
        syn::UseTree::Name(name) => {
            if let Some(first) = first {
                out.insert(name.ident.to_string(), first.to_string());
            }
        }
        syn::UseTree::Rename(rename) => {
            if let Some(first) = first {
                out.insert(rename.rename.to_string(), first.to_string());
            }
        }
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                reexported(tree, first, out);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// Which top-level module of the crate at `src` imports which, and where.
fn imports(src: &Path) -> Imports {
    let mut files = Vec::new();
    source_files(src, &mut files);
    let (modules, reexports) = crate_root(src, &files);
    let mut imports = Imports::new();
    for file in &files {
        let within = module_path(src, file);
        let Some(from) = within.first().cloned() else {
            continue;
        };
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for segment in segments_of_file(&text, &within) {
            let to = if modules.contains(&segment) {
                segment
            } else if let Some(module) = reexports.get(&segment).filter(|m| modules.contains(*m)) {
                module.clone()
            } else {
                continue;
            };
            if to != from {
                imports
                    .entry((from.clone(), to))
                    .or_insert_with(|| file.display().to_string());
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
    let mut crates: Vec<PathBuf> = fs::read_dir(repo_root().join("crates"))
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
fn imports_are_read_from_paths_groups_and_supers_outside_comments_and_tests() {
    let text = r#"
use crate::kind::{Kind, Shared};
use crate::{
    cluster::{Cluster, Op},
    error::Result,
};
use super::sibling;
use super::super::settling::after;
/// See [`crate::executor`].
fn f() {
    // crate::comment::x()
    let _ = "crate::text";
    crate::records::keep();
}
#[cfg(test)]
fn only_in_tests() {
    crate::testing::helper();
}
impl crate::jobs::Jobs {
    #[cfg(test)]
    fn cancel_from(&self) {
        crate::protocol::cancel_from();
    }
    fn cancel(&self) {
        crate::pods::list();
    }
}
#[cfg(test)]
mod tests {
    use crate::executor::Executor;
}
"#;
    let within = ["container".to_string(), "acting".to_string()];
    assert_eq!(
        segments_of_file(text, &within),
        [
            "kind", "cluster", "error", "settling", "records", "jobs", "pods"
        ]
    );
    // One level down, a single `super` reaches the root.
    assert_eq!(
        segments_of_file("use super::objects::Object;", &within[..1]),
        ["objects"]
    );
}

#[test]
fn the_roots_reexports_name_their_modules() {
    let dir = std::env::temp_dir().join(format!("kubeferry-layering-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(src.join("deep")).expect("a source folder");
    fs::write(
        src.join("lib.rs"),
        "mod error; mod deep; mod user;\npub use error::{Error, Result as Res};\npub use deep::inner::Thing;\n",
    )
    .expect("written");
    fs::write(
        src.join("error.rs"),
        "pub struct Error; pub type Result = ();",
    )
    .expect("written");
    fs::write(src.join("deep/mod.rs"), "pub mod inner;").expect("written");
    fs::write(src.join("deep/inner.rs"), "pub struct Thing(crate::Error);").expect("written");
    fs::write(
        src.join("user.rs"),
        "fn f(_: crate::Res, _: crate::Thing) {}",
    )
    .expect("written");
    let found = imports(&src);
    fs::remove_dir_all(&dir).expect("removed");
    let edges: Vec<(&str, &str)> = found
        .keys()
        .map(|(from, to)| (from.as_str(), to.as_str()))
        .collect();
    assert_eq!(
        edges,
        [("deep", "error"), ("user", "deep"), ("user", "error")]
    );
}

#[test]
fn a_cycle_is_found_and_told_with_its_imports() {
    let imports: Imports = [
        (("a", "b"), "a.rs"),
        (("b", "c"), "b.rs"),
        (("c", "a"), "c.rs"),
        (("c", "d"), "c.rs"),
    ]
    .into_iter()
    .map(|((from, to), at)| ((from.to_string(), to.to_string()), at.to_string()))
    .collect();
    let found = cycles(&imports);
    assert_eq!(found, [["a", "b", "c"]]);
    let told = described(&found[0], &imports);
    assert!(told.contains("c -> a (c.rs)"), "{told}");
    assert!(!told.contains("c -> d"), "{told}");
    let layered: Imports = imports
        .into_iter()
        .filter(|((from, _), _)| from != "c")
        .collect();
    assert!(cycles(&layered).is_empty());
}
