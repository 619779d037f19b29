//! What the repository's own checks share: its root, and the files under a folder.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The files under `dir` that `keep` accepts, in name order, looking into the folders `enter`
/// accepts.
pub fn files_under(
    dir: &Path,
    enter: &dyn Fn(&Path) -> bool,
    keep: &dyn Fn(&Path) -> bool,
    out: &mut Vec<PathBuf>,
) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if enter(&path) {
                files_under(&path, enter, keep, out);
            }
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// A path's last component, as text.
pub fn name_of(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
