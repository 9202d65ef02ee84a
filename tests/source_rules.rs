//! Rules on the source the simulator runs that the compiler cannot check.
//!
//! Every `tokio::select!` must be `biased;`. An unbiased select picks its first branch from
//! tokio's thread-local RNG, whose seed comes from a process-wide counter: the same seed then
//! took other branches when it was not the first run in its process (a sweep, a shrink), and
//! its trace hash changed. `biased;` polls the branches in the order written.
//!
//! No `tokio::sync::watch` either: it parks each waiting receiver on one of eight shards picked
//! by that same RNG and wakes the shards in order, so the order tasks woke after a change
//! depended on how many runs the process had made before (seed 111 of `reassign-under-faults`
//! failed as the 32nd run of a sweep and passed alone). `weir::sync::watch` wakes in FIFO order.

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

/// What `find` reports in each file the simulator runs (`src/` and `sim/src/`, but `main.rs`,
/// whose signals and process exit never run there), as `file:line`.
fn in_simulated_code(find: fn(&str, &str) -> Vec<String>) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("sim/src"), &mut files);
    files.retain(|f| f != &root.join("src/main.rs"));
    assert!(files.len() > 50, "the source tree was not found");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        found.extend(find(&name, &text));
    }
    found
}

#[test]
fn every_select_in_simulated_code_is_biased() {
    let unbiased = in_simulated_code(unbiased_selects);
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

/// `file:line` of each use of tokio's `watch` in `text`.
fn tokio_watches(name: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| {
            l.contains("tokio::sync::watch")
                || (l.contains("use tokio::sync::{")
                    && l.split(['{', ',', '}']).any(|i| i.trim() == "watch"))
        })
        .map(|(i, _)| format!("{name}:{}", i + 1))
        .collect()
}

#[test]
fn simulated_code_uses_the_fifo_watch() {
    let found = in_simulated_code(tokio_watches);
    assert!(
        found.is_empty(),
        "tokio's watch wakes in an order drawn from a per-process RNG; use crate::sync::watch: {found:?}"
    );
}

#[test]
fn the_rule_sees_a_tokio_watch() {
    assert_eq!(
        tokio_watches(
            "x.rs",
            "use tokio::sync::{mpsc, watch};
"
        ),
        vec!["x.rs:1".to_string()]
    );
    assert_eq!(
        tokio_watches(
            "x.rs",
            "let (a, b) = tokio::sync::watch::channel(0);
"
        ),
        vec!["x.rs:1".to_string()]
    );
    assert!(tokio_watches(
        "x.rs",
        "use crate::sync::watch;
use tokio::sync::{mpsc, watcher};
"
    )
    .is_empty());
}

/// `file:line` of each place in `text` (the file `name`) that keeps a planted bug in global or
/// per-thread state, or reads one from there: a `static` or `thread_local!` that mentions a
/// planted bug, a call of a free function of `config::planted` (a switch: `planted::active(`),
/// and, in `src/config/planted.rs` itself, any `static`, `thread_local!`, cell or free function.
/// A planted bug must reach the code that acts on it through that code's configuration
/// (`config.planted.is(..)`), so a core's unit tests can plant it by building the config.
fn global_plant_switches(name: &str, text: &str) -> Vec<String> {
    let catalogue = name.ends_with("config/planted.rs");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim_start();
        let global = trimmed.starts_with("static ")
            || trimmed.starts_with("pub static ")
            || trimmed.starts_with("pub(crate) static ")
            || trimmed.contains("thread_local!");
        // The declaration and the few lines after it (a `thread_local!` block's body).
        let near: String = lines[i..lines.len().min(i + 4)]
            .iter()
            .map(|l| l.split("//").next().unwrap_or("").to_lowercase())
            .collect();
        let switch_call = code.split("planted::").skip(1).any(|rest| {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            ident.starts_with(|c: char| c.is_lowercase()) && rest[ident.len()..].starts_with('(')
        });
        let in_catalogue = catalogue
            && (global
                || ["Cell<", "Atomic", "OnceLock", "Mutex<"]
                    .iter()
                    .any(|w| code.contains(w))
                || (trimmed.starts_with("pub fn ") || trimmed.starts_with("fn "))
                    && !line.starts_with(' '));
        if (global && near.contains("planted")) || switch_call || in_catalogue {
            found.push(format!("{name}:{}", i + 1));
        }
    }
    found
}

#[test]
fn planted_bugs_come_only_through_a_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("sim/src"), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("src/config/planted.rs")),
        "the planted-bug catalogue was not found"
    );
    let mut switches = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        switches.extend(global_plant_switches(&name, &text));
    }
    assert!(
        switches.is_empty(),
        "a planted bug kept in or read from global state (give the core a `planted` field in \
         its config instead): {switches:?}"
    );
}

#[test]
fn the_rule_sees_a_global_plant_switch() {
    // What `config::planted` held before every plant came through a config.
    let old = "thread_local! {\n    static ACTIVE: Cell<Option<PlantedBug>> = const { Cell::new(None) };\n}\n\npub fn active(bug: PlantedBug) -> bool {\n    ACTIVE.with(|a| a.get()) == Some(bug)\n}\n";
    assert_eq!(
        global_plant_switches("src/config/planted.rs", old),
        vec![
            "src/config/planted.rs:1",
            "src/config/planted.rs:2",
            "src/config/planted.rs:5"
        ]
    );
    let site = "    if crate::config::planted::active(crate::config::PlantedBug::SkipDirFsync) {\n";
    assert_eq!(
        global_plant_switches("src/log/mod.rs", site),
        vec!["src/log/mod.rs:1"]
    );
    let set = "    weir::config::planted::set(planted);\n";
    assert_eq!(
        global_plant_switches("sim/src/world.rs", set),
        vec!["sim/src/world.rs:1"]
    );
    let static_bug = "static BUG: AtomicU8 = AtomicU8::new(0); // the planted bug\n";
    assert!(global_plant_switches("src/log/mod.rs", static_bug).is_empty());
    let static_planted = "static PLANTED: AtomicU8 = AtomicU8::new(0);\n";
    assert_eq!(
        global_plant_switches("src/x.rs", static_planted),
        vec!["src/x.rs:1"]
    );
    // Reading the bug from a config is the way.
    let ok =
        "        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumGrantShorterLog) {\n";
    assert!(global_plant_switches("src/raft/election.rs", ok).is_empty());
    let ok = "            planted: crate::config::planted::Planted::new(config.planted_bug),\n";
    assert!(global_plant_switches("src/broker/drivers/group_coordinator.rs", ok).is_empty());
}
