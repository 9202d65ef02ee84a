//! Rules on the source the simulator runs that the compiler cannot check.
//!
//! Every `tokio::select!` must be `biased;`. An unbiased select picks its first branch from
//! tokio's thread-local RNG, whose seed comes from a process-wide counter: the same seed then
//! took other branches when it was not the first run in its process (a sweep, a shrink), and
//! its trace hash changed. `biased;` polls the branches in the order written.

use std::path::Path;

mod source_walk;
use source_walk::rust_files;

/// How many lines after `select! {` the `biased;` may come (a comment may sit between).
const BIASED_WITHIN: usize = 3;

/// `file:line` of each unbiased select in `text`.
fn unbiased_selects(name: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.contains("select! {") || line.trim_start().starts_with("//") {
            continue;
        }
        let biased = lines
            .iter()
            .skip(i + 1)
            .take(BIASED_WITHIN)
            .any(|l| l.trim() == "biased;");
        if !biased {
            found.push(format!("{name}:{}", i + 1));
        }
    }
    found
}

#[test]
fn every_select_in_simulated_code_is_biased() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("sim/src"), &mut files);
    // main.rs (signals, process exit) never runs in the simulator.
    files.retain(|f| f != &root.join("src/main.rs"));
    assert!(files.len() > 50, "the source tree was not found");
    let mut unbiased = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        unbiased.extend(unbiased_selects(&name, &text));
    }
    assert!(
        unbiased.is_empty(),
        "tokio::select! without `biased;` (nondeterministic across runs in one process): {unbiased:?}"
    );
}

#[test]
fn the_rule_sees_an_unbiased_select() {
    let text =
        "fn f() {\n    tokio::select! {\n        _ = a => {}\n        _ = b => {}\n    }\n}\n";
    assert_eq!(unbiased_selects("x.rs", text), vec!["x.rs:2".to_string()]);
    let text =
        "    tokio::select! {\n        // why\n        biased;\n        _ = a => {}\n    }\n";
    assert!(unbiased_selects("x.rs", text).is_empty());
}
