//! The one walk of the source tree that the source-rule tests share (`broker_rooms`,
//! `core_purity`, `source_rules`): every `.rs` file below a directory, in sorted order, so a
//! rule's report reads the same on every machine.

use std::path::{Path, PathBuf};

/// Appends `dir`'s `.rs` files, recursively and sorted, to `out`; `dir` may be one file.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}
