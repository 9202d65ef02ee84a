//! Rules on the layout of `src/broker/` (docs/ARCHITECTURE.md, "src/broker/"): the broker is
//! split in rooms (`api`, `handlers`, `drivers`, the wiring in `mod.rs`, the connection loop
//! in `server.rs`) and no two of its modules import each other, directly or round a circle.
//!
//! An edge is a module-level `use` (column 0, outside `mod tests`) that names another broker
//! module by `crate::broker::`, `super::`, `self::` or a child's name. A parent's `pub use` of
//! its own child's items is a facade, not a dependency, and is not an edge. Test modules
//! (`tests.rs`, `*/tests.rs`) are left out: a test may import anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod source_walk;
use source_walk::rust_files;

/// `src/broker/a/b.rs` and `src/broker/a/b/mod.rs` → `broker::a::b`.
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    let mut module = vec!["broker".to_string()];
    module.extend(parts);
    module.join("::")
}

/// The module-level `use` declarations of a file: (is a `pub use`, the path text).
fn module_uses(text: &str) -> Vec<(bool, String)> {
    let mut found = Vec::new();
    let mut current: Option<(bool, String)> = None;
    for line in text.lines() {
        if let Some((_, acc)) = current.as_mut() {
            acc.push(' ');
            acc.push_str(line.trim());
        } else {
            let public = line.starts_with("pub ") || line.starts_with("pub(");
            let rest = if public {
                line.split_once(' ').map(|x| x.1).unwrap_or("")
            } else {
                line
            };
            if let Some(path) = rest.strip_prefix("use ") {
                current = Some((public, path.trim().to_string()));
            } else {
                continue;
            }
        }
        if current.as_ref().is_some_and(|(_, acc)| acc.ends_with(';')) {
            let (public, acc) = current.take().unwrap();
            found.push((public, acc.trim_end_matches(';').trim().to_string()));
        }
    }
    found
}

/// The paths written in a file's code outside `use` declarations, test modules and comments
/// (`crate::broker::Broker` in a signature, `drivers::quorum::QuorumHandle` in a field,
/// `super::Broker` in an `impl`): a module depends on what its code names, not only on what it
/// imports at the top.
fn code_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_use = false;
    // Brace depth of a `#[cfg(..test..)] mod x {` block being skipped, if any.
    let mut skipping: Option<i32> = None;
    let mut test_attribute = false;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        if let Some(depth) = skipping.as_mut() {
            *depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            if *depth <= 0 {
                skipping = None;
            }
            continue;
        }
        if test_attribute && trimmed.contains("mod ") && trimmed.ends_with('{') {
            test_attribute = false;
            skipping = Some(1);
            continue;
        }
        test_attribute = trimmed.starts_with("#[cfg(") && trimmed.contains("test");
        let declaration = trimmed
            .strip_prefix("pub ")
            .or_else(|| trimmed.strip_prefix("pub(crate) "))
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .unwrap_or(trimmed);
        if declaration.starts_with("use ") {
            in_use = true;
        }
        if in_use {
            in_use = !trimmed.ends_with(';');
            continue;
        }
        found.extend(paths_in(code));
    }
    found
}

/// Every `a::b::c` in a line of code (identifiers joined by `::`, not preceded by `::`).
fn paths_in(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ident(bytes[i]) && (i == 0 || (!ident(bytes[i - 1]) && bytes[i - 1] != b':'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        let mut segments = 0;
        loop {
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            segments += 1;
            let more = code[i..].starts_with("::") && bytes.get(i + 2).is_some_and(|&b| ident(b));
            if !more {
                break;
            }
            i += 2;
        }
        if segments > 1 {
            found.push(code[start..i].to_string());
        }
    }
    found
}

/// `a::{b, c::{d, self}}` → `a::b`, `a::c::d`, `a::c`.
fn expand(path: &str) -> Vec<String> {
    let path = path.trim();
    let Some(open) = path.find('{') else {
        let path = path.split(" as ").next().unwrap().trim();
        return vec![path.trim_end_matches("::self").to_string()];
    };
    let prefix = path[..open].trim_end_matches("::");
    let inner = &path[open + 1..path.rfind('}').unwrap()];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .flat_map(|item| {
            expand(item).into_iter().map(move |rest| {
                if rest == "self" {
                    prefix.to_string()
                } else {
                    format!("{prefix}::{rest}")
                }
            })
        })
        .collect()
}

/// The broker module a `use` path in `module` names, if it names one.
fn resolve(module: &str, path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = module.split("::").collect();
    match segments[0] {
        "crate" => {
            segments.remove(0);
            base.clear();
        }
        "self" => {
            segments.remove(0);
        }
        "super" => {
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
        }
        child => {
            // A child module by its name (2018 paths); anything else is another crate.
            if !modules.contains(&format!("{module}::{child}")) {
                return None;
            }
        }
    }
    base.extend(segments);
    // The longest prefix that is a module.
    (1..=base.len())
        .rev()
        .map(|n| base[..n].join("::"))
        .find(|m| modules.contains(m))
}

struct Graph {
    files: usize,
    /// module → the broker modules it imports.
    edges: BTreeMap<String, BTreeSet<String>>,
}

/// The graph of `use` declarations; with `in_code`, the paths the code names too.
fn broker_graph(root: &Path) -> Graph {
    graph_of(root, false)
}

fn graph_of(root: &Path, in_code: bool) -> Graph {
    let broker = root.join("src/broker");
    let mut files = Vec::new();
    rust_files(&broker, &mut files);
    let named: Vec<(String, PathBuf)> = files
        .iter()
        .map(|f| (module_of(f.strip_prefix(&broker).unwrap()), f.clone()))
        .collect();
    let modules: BTreeSet<String> = named.iter().map(|(m, _)| m.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &named {
        if module.ends_with("::tests") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let targets = edges.entry(module.clone()).or_default();
        for (public, used) in module_uses(&text) {
            for path in expand(&used) {
                let Some(target) = resolve(module, &path, &modules) else {
                    continue;
                };
                let facade = public && target.starts_with(&format!("{module}::"));
                if target != *module && !facade && !target.ends_with("::tests") {
                    targets.insert(target);
                }
            }
        }
        if in_code {
            for path in code_paths(&text) {
                if let Some(target) = resolve(module, &path, &modules) {
                    if target != *module && !target.ends_with("::tests") {
                        targets.insert(target);
                    }
                }
            }
        }
    }
    Graph {
        files: files.len(),
        edges,
    }
}

/// The modules that sit in an import circle (Tarjan's strongly connected components of more
/// than one module), each circle sorted.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            let edges = self.edges;
            for w in edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
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
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_import_circle_among_broker_modules() {
    let graph = broker_graph(repo());
    assert!(graph.files > 30, "src/broker was not found");
    let circles = circles(&graph.edges);
    let in_circle: usize = circles.iter().map(Vec::len).sum();
    // The figures for the notes (`cargo test --test broker_rooms -- --nocapture`).
    println!(
        "broker: {} files, {} modules, {} in an import circle",
        graph.files,
        graph.edges.len(),
        in_circle
    );
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

/// The same rule counting what the code names as well as what it imports (`Broker` in a
/// handler's signature, a driver's state type in a `Broker` field). It holds because `Broker`
/// is defined in `shared.rs`, which names only the drivers' state types (each in a file that
/// does not name `Broker`: `drivers/*/state.rs`, `drivers/quorum/handle.rs`,
/// `connection_slot/state.rs`, `startup_gate/state.rs`), and nothing names `mod.rs`, the
/// start-up wiring, which may name everything (docs/ARCHITECTURE.md, "src/broker/").
/// `cargo test --test broker_rooms -- --nocapture` prints the figures.
#[test]
fn no_import_circle_among_broker_modules_counting_paths_in_code() {
    let graph = graph_of(repo(), true);
    assert!(graph.files > 30, "src/broker was not found");
    let circles = circles(&graph.edges);
    let in_circle: usize = circles.iter().map(Vec::len).sum();
    println!(
        "broker, paths in code counted: {} modules, {} in an import circle",
        graph.edges.len(),
        in_circle
    );
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}

#[test]
fn only_the_wiring_imports_the_server_loop() {
    let graph = broker_graph(repo());
    let offenders: Vec<&String> = graph
        .edges
        .iter()
        .filter(|(m, to)| *m != "broker" && to.contains("broker::server"))
        .map(|(m, _)| m)
        .collect();
    assert!(
        offenders.is_empty(),
        "import the server loop: {offenders:?}"
    );
}

#[test]
fn the_api_room_imports_no_handler_and_no_broker() {
    let graph = broker_graph(repo());
    assert!(graph.edges.contains_key("broker::api"), "no api room");
    let mut offenders = Vec::new();
    for (module, to) in &graph.edges {
        if module != "broker::api" && !module.starts_with("broker::api::") {
            continue;
        }
        for target in to {
            let inside = target == "broker::api" || target.starts_with("broker::api::");
            // The connection's watch is the one thing a request context carries from outside.
            if !inside && !target.starts_with("broker::delayed") {
                offenders.push(format!("{module} -> {target}"));
            }
        }
    }
    assert!(offenders.is_empty(), "api imports: {offenders:?}");
}

#[test]
fn the_rule_sees_a_circle() {
    let text_a = "use super::b::Thing;\nuse std::sync::Arc;\n";
    let text_b = "use crate::broker::{a::{self, Other}, Broker};\n    use super::c;\n";
    let modules: BTreeSet<String> = ["broker", "broker::a", "broker::b", "broker::c"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in [("broker::a", text_a), ("broker::b", text_b)] {
        for (_, used) in module_uses(text) {
            for path in expand(&used) {
                if let Some(t) = resolve(module, &path, &modules) {
                    edges.entry(module.to_string()).or_default().insert(t);
                }
            }
        }
    }
    assert_eq!(
        edges["broker::b"],
        ["broker", "broker::a"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(
        circles(&edges),
        vec![vec!["broker::a".to_string(), "broker::b".to_string()]]
    );
}

#[test]
fn the_rule_sees_a_circle_through_a_path_in_code() {
    let text_a =
        "use std::sync::Arc;\n\npub struct A {\n    b: super::b::Thing, // crate::broker::c\n}\n";
    let text_b = "pub fn f(a: &crate::broker::a::A) {}\n\n#[cfg(test)]\nmod tests {\n    fn g(_: crate::broker::c::C) {}\n}\n";
    assert_eq!(code_paths(text_a), vec!["super::b::Thing".to_string()]);
    assert_eq!(code_paths(text_b), vec!["crate::broker::a::A".to_string()]);
    let modules: BTreeSet<String> = ["broker", "broker::a", "broker::b", "broker::c"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in [("broker::a", text_a), ("broker::b", text_b)] {
        assert!(module_uses(text).iter().all(|(_, u)| !u.contains("broker")));
        for path in code_paths(text) {
            if let Some(t) = resolve(module, &path, &modules) {
                edges.entry(module.to_string()).or_default().insert(t);
            }
        }
    }
    assert_eq!(
        circles(&edges),
        vec![vec!["broker::a".to_string(), "broker::b".to_string()]]
    );
}
