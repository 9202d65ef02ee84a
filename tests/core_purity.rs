//! Source rules that keep the protocol cores pure and every effect inside `src/io`.
//!
//! A core (the Raft node, the group coordinator, the ACL authorizer, the controller's state
//! machines, the ISR set...) takes events with `now` and returns actions; a thin driver does the
//! I/O. The simulator can only replay a run from its seed if no core reads a clock, draws a
//! random number, spawns a task or touches a socket or file behind its driver's back, and a core
//! that logs hides a decision from its actions. The compiler cannot see any of that; this test
//! reads the source. Test code (`tests.rs`, `*_tests.rs`, `tests/` folders and `#[cfg(test)]`
//! modules) and comments are not checked.

use std::path::Path;

mod source_walk;
use source_walk::rust_files;

/// The pure cores: whole folders, or single files where a folder mixes a core and its driver.
const CORES: &[&str] = &[
    "src/raft",
    "src/group",
    "src/acl",
    "src/controller",
    // Inside the folder above; named so that it stays a core if the folder is split.
    "src/controller/active.rs",
    "src/replica/isr.rs",
    // The replica state core beside its log driver (`partition.rs`).
    "src/replica/partition/state.rs",
    "src/replica/fetcher.rs",
    "src/replica/producer.rs",
    "src/replica/validation.rs",
    "src/replica/read_replica.rs",
    "src/replica/transactions.rs",
    "src/txn",
    "src/log/cleaner/plan.rs",
    "src/security/sasl",
    "src/security/principal.rs",
    "src/quota",
];

/// Files inside a core folder that are drivers, with the reason (none left: the single-node
/// metadata store went when a single node became a quorum of one).
const DRIVERS_IN_CORES: &[(&str, &str)] = &[];

/// What a core must not name, and why.
const BANNED_IN_CORES: &[(&str, &str)] = &[
    ("crate::io", "the I/O layer belongs to the driver"),
    ("tokio", "no runtime, no waiting inside a core"),
    ("std::fs", "files go through the driver's `io::Disk`"),
    ("std::net", "sockets go through the driver's `io::Network`"),
    ("std::thread", "a core runs where its driver calls it"),
    ("Instant::now", "time comes in as `now`"),
    ("SystemTime", "time comes in as `now`"),
    ("rand::", "randomness comes in as `entropy` from `io.rng`"),
    (
        "getrandom",
        "randomness comes in as `entropy` from `io.rng`",
    ),
    (
        "tracing::",
        "a core reports through its actions; the driver logs",
    ),
    (
        "println!",
        "a core reports through its actions; the driver logs",
    ),
    (
        "eprintln!",
        "a core reports through its actions; the driver logs",
    ),
    ("spawn", "a core runs where its driver calls it"),
];

/// Known uses of a banned name inside a core: (file, name, reason). Each must still occur
/// (a stale entry fails the test), so the list only shrinks.
const ALLOWED_IN_CORES: &[(&str, &str, &str)] = &[
    (
        "src/group/consumer/durable.rs",
        "tracing::",
        "a warning while loading __consumer_offsets (a member beyond the assignment epoch is \
         clamped); the load is not yet a step with actions",
    ),
    (
        "src/controller/quotas.rs",
        "std::net",
        "`IpAddr` only: an ip quota entity's name must parse as an address (no socket)",
    ),
    (
        "src/quota/connections.rs",
        "std::net",
        "`IpAddr` only: connections are counted per address (no socket)",
    ),
];

/// What no file of `src/` may name outside the production implementations of the I/O traits.
const BANNED_OUTSIDE_OS: &[(&str, &str)] = &[
    ("std::thread", "tasks go through `io::Spawn`"),
    ("Instant::now", "time goes through `io::Clock`"),
    ("SystemTime", "time goes through `io::Clock`"),
];

/// The production implementations of the I/O traits: the only code that meets the OS.
const OS_IMPLEMENTATIONS: &[&str] = &["src/io/os.rs", "src/io/osdisk.rs"];

/// What no file of `src/` may name outside the I/O layer: randomness is `io::Rng`, or the io
/// layer's seeded `Generator` (the in-memory disk's fault choices).
const BANNED_OUTSIDE_IO: &[(&str, &str)] = &[
    ("rand::", "randomness goes through `io::Rng`"),
    ("getrandom", "randomness goes through `io::Rng`"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Source path relative to the crate root, with `/` separators.
fn name(file: &Path) -> String {
    let rel = file.strip_prefix(root()).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn is_test_file(name: &str) -> bool {
    name.ends_with("/tests.rs") || name.ends_with("_tests.rs") || name.contains("/tests/")
}

/// The lines of `text` that are code outside test modules: `(line number, code)`, with line
/// comments cut off.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut test_attr = false;
    // Brace depth inside a skipped test module; `None` when not in one.
    let mut skipping: Option<i64> = None;
    for (i, raw) in text.lines().enumerate() {
        let code = match raw.find("//") {
            Some(at) => &raw[..at],
            None => raw,
        };
        let trimmed = code.trim();
        if let Some(depth) = skipping.as_mut() {
            *depth += braces(code);
            if *depth <= 0 && code.contains('}') {
                skipping = None;
            }
            continue;
        }
        if trimmed.starts_with("#[cfg(")
            && trimmed.contains("test")
            && !trimmed.contains("not(test")
        {
            test_attr = true;
            continue;
        }
        if test_attr && trimmed.starts_with("#[") {
            continue;
        }
        if test_attr && (trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ")) {
            test_attr = false;
            if trimmed.ends_with(';') {
                continue;
            }
            let depth = braces(code);
            if depth > 0 {
                skipping = Some(depth);
            }
            continue;
        }
        test_attr = false;
        if !trimmed.is_empty() {
            out.push((i + 1, code.to_string()));
        }
    }
    out
}

fn braces(code: &str) -> i64 {
    code.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// Whether `code` names `banned` (not as the tail of a longer identifier).
fn names(code: &str, banned: &str) -> bool {
    code.match_indices(banned).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// `file:line: name (why)` for every use of a banned name in `files`.
fn violations(files: &[(String, String)], banned: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (name, text) in files {
        for (line, code) in code_lines(text) {
            for (word, why) in banned {
                if names(&code, word) {
                    found.push((name.clone(), format!("{name}:{line}: `{word}` ({why})")));
                }
            }
        }
    }
    found
}

fn read(paths: &[&str], skip: &[&str]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for path in paths {
        let full = root().join(path);
        assert!(
            full.exists(),
            "{path} is gone: update the list in this test"
        );
        rust_files(&full, &mut files);
    }
    // A file inside a listed folder may be listed on its own too: read it once.
    files.sort();
    files.dedup();
    files
        .into_iter()
        .map(|f| (name(&f), f))
        .filter(|(n, _)| !is_test_file(n) && !skip.iter().any(|s| n.starts_with(s)))
        .map(|(n, f)| (n, std::fs::read_to_string(f).unwrap()))
        .collect()
}

#[test]
fn cores_do_no_io_keep_no_clock_and_draw_no_randomness() {
    let drivers: Vec<&str> = DRIVERS_IN_CORES.iter().map(|(f, _)| *f).collect();
    let files = read(CORES, &drivers);
    assert!(files.len() > 40, "the cores were not found");
    let found = violations(&files, BANNED_IN_CORES);
    let mut unexplained = Vec::new();
    for (file, what) in &found {
        let allowed = ALLOWED_IN_CORES
            .iter()
            .any(|(f, word, _)| f == file && what.contains(&format!("`{word}`")));
        if !allowed {
            unexplained.push(what.clone());
        }
    }
    assert!(
        unexplained.is_empty(),
        "a core names what only a driver may (move it to the driver, or pass it in as an \
         event, `now` or `entropy`):\n{}",
        unexplained.join("\n")
    );
    for (file, word, _) in ALLOWED_IN_CORES {
        let used = found
            .iter()
            .any(|(f, what)| f == file && what.contains(&format!("`{word}`")));
        assert!(
            used,
            "{file} no longer uses `{word}`: drop it from ALLOWED_IN_CORES"
        );
    }
}

#[test]
fn clocks_threads_and_randomness_only_in_the_io_layer() {
    for (banned, allowed, rule) in [
        (
            BANNED_OUTSIDE_OS,
            OS_IMPLEMENTATIONS,
            "use the `io` traits (Clock, Spawn)",
        ),
        (BANNED_OUTSIDE_IO, &["src/io/"][..], "use `io::Rng`"),
    ] {
        let files = read(&["src"], allowed);
        assert!(files.len() > 100, "the source tree was not found");
        let found: Vec<String> = violations(&files, banned)
            .into_iter()
            .map(|(_, what)| what)
            .collect();
        assert!(
            found.is_empty(),
            "{rule}, so that the simulator decides:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn the_rules_see_a_violation_and_skip_tests_and_comments() {
    let text = "use std::time::Instant;\n\
                // Instant::now in a comment\n\
                fn f() { let t = Instant::now(); }\n\
                #[cfg(test)]\n\
                mod tests {\n    fn g() {\n        let t = Instant::now();\n    }\n}\n\
                fn h() { tokio::spawn(x); }\n";
    let files = vec![("src/x.rs".to_string(), text.to_string())];
    let found: Vec<String> = violations(&files, BANNED_IN_CORES)
        .into_iter()
        .map(|(_, what)| what)
        .collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].starts_with("src/x.rs:3: `Instant::now`"));
    assert!(found[1].starts_with("src/x.rs:10: `tokio`"));
    assert!(found[2].starts_with("src/x.rs:10: `spawn`"));
    // Part of a longer name is not a use.
    assert!(!names("let getrandom_ok = operand::x;", "rand::"));
    assert!(names("use rand::Rng;", "rand::"));
}
