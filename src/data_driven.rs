//! Data-driven tests of the cores, in raft-rs's style: a file of commands, each followed by a
//! `----` line and the output it must give, then a blank line; `#` lines are comments. Every
//! `.txt` file of a directory runs against a fresh runner; `REWRITE=1` writes the actual
//! outputs back (review the diff).

use std::collections::BTreeMap;
use std::path::Path;

/// A command's `key=value` words, by key (other words ignored).
pub(crate) fn args(words: &[&str]) -> BTreeMap<String, String> {
    words
        .iter()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The number under `key`; a missing or bad one fails the script with its name.
pub(crate) fn num(a: &BTreeMap<String, String>, key: &str) -> i64 {
    a.get(key)
        .unwrap_or_else(|| panic!("missing {key}="))
        .parse()
        .unwrap_or_else(|_| panic!("bad {key}="))
}

/// Runs every `.txt` script under `dir` (relative to the crate root): `new` makes a runner per
/// file, `run` answers one command with its output (one or more lines, each ending in `\n`).
pub(crate) fn check_dir<R>(
    dir: &str,
    mut new: impl FnMut() -> R,
    run: impl Fn(&mut R, &str) -> String,
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scripts in {}", dir.display());
    let mut failures = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut runner = new();
        let (rewritten, mismatches) = run_script(&text, |command| run(&mut runner, command));
        if std::env::var_os("REWRITE").is_some() {
            std::fs::write(&path, rewritten).unwrap();
        } else {
            for m in mismatches {
                failures.push(format!("{}:\n{m}", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs one script; returns it with the actual outputs in place of the expected ones, and the
/// commands whose output differed.
fn run_script(text: &str, mut run: impl FnMut(&str) -> String) -> (String, Vec<String>) {
    let mut rewritten = String::new();
    let mut mismatches = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            rewritten.push_str(line);
            rewritten.push('\n');
            continue;
        }
        let command = line;
        assert_eq!(lines.next(), Some("----"), "`{command}` has no ---- line");
        let mut expected = String::new();
        while let Some(l) = lines.peek() {
            if l.trim().is_empty() {
                break;
            }
            expected.push_str(l);
            expected.push('\n');
            lines.next();
        }
        let actual = run(command);
        if actual != expected {
            mismatches.push(format!("{command}\nexpected:\n{expected}actual:\n{actual}"));
        }
        rewritten.push_str(command);
        rewritten.push_str("\n----\n");
        rewritten.push_str(&actual);
    }
    (rewritten, mismatches)
}

#[cfg(test)]
mod tests {
    use super::run_script;

    #[test]
    fn a_script_is_checked_and_rewritten() {
        let script = "# comment\nadd 1\n----\n1\n\nadd 2\n----\nwrong\n";
        let mut total = 0;
        let (rewritten, mismatches) = run_script(script, |c| {
            total += c.trim_start_matches("add ").parse::<i32>().unwrap();
            format!("{total}\n")
        });
        assert_eq!(rewritten, "# comment\nadd 1\n----\n1\n\nadd 2\n----\n3\n");
        assert_eq!(mismatches.len(), 1, "{mismatches:?}");
    }
}
