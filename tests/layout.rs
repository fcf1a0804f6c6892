//! Rules about the code base itself, so CI keeps them: the layers and the core's module graph
//! (no cycles), a `//!` line opening every module, and every `docs/REFERENCE.md#…` citation
//! pointing at an anchor that exists, with no path outside the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every file under `dir` (recursively) whose name ends with one of `exts`, sorted.
fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if p.is_dir() {
                if name != "node_modules" && name != "target" {
                    walk(&p, exts, out);
                }
            } else if exts.iter().any(|x| name.ends_with(x)) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), exts, &mut out);
    out.sort();
    out
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(p).display().to_string()
}

/// The code of a file without its comments and its `#[cfg(test)] mod tests` (which sits last).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The module path (`store::tree`, `config`) of a file under `src/core`.
fn module_of(p: &Path) -> String {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let r = p.strip_prefix(&core).unwrap().with_extension("");
    let mut segs: Vec<String> = r.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if segs.last().map(String::as_str) == Some("mod") {
        segs.pop();
    }
    segs.join("::")
}

/// Identifiers following `prefix` in `code` (`crate::core::` → `store::tree::Tree`, …).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(after.len());
        out.push(after[..end].trim_end_matches(':'));
        rest = &after[end..];
    }
    out
}

/// The core's module graph: module → modules it names (`crate::core::…` and `super::…`).
fn core_graph() -> BTreeMap<String, BTreeSet<String>> {
    let sources: Vec<(String, PathBuf)> = files("src/core", &[".rs"]).into_iter().map(|p| (module_of(&p), p)).collect();
    let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    // The longest known module that `path` starts with.
    let resolve = |path: &str| -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        (1..=segs.len()).rev().map(|n| segs[..n].join("::")).find(|m| modules.contains(m))
    };
    let mut graph = BTreeMap::new();
    for (m, p) in &sources {
        let code = code_of(&read(p));
        // `super` of `a::b` (a/b.rs or a/b/mod.rs) is `a`; of a top-level `a` it is the core itself.
        let parent = m.rsplit_once("::").map(|x| x.0.to_string()).unwrap_or_default();
        let mut targets = BTreeSet::new();
        for path in paths_after(&code, "crate::core::") {
            targets.extend(resolve(path));
        }
        for path in paths_after(&code, "super::") {
            let full = if parent.is_empty() { path.to_string() } else { format!("{parent}::{path}") };
            targets.extend(resolve(&full));
        }
        // A module may name its own children (or itself); that is not an edge.
        targets.retain(|t| t != m && !t.starts_with(&format!("{m}::")) && !m.is_empty());
        graph.insert(m.clone(), targets);
    }
    graph
}

/// A cycle in `graph`, if there is one, as the list of nodes along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for t in graph.get(n).into_iter().flatten() {
            match state.get(t.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == t).unwrap_or(0);
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(t.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(t, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if !state.contains_key(n.as_str()) {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn the_core_module_graph_has_no_cycle() {
    let graph = core_graph();
    assert!(graph.len() > 30, "found only {} core modules", graph.len());
    assert!(graph["store::history"].contains("store::tree"), "the graph reader misses `use` lines");
    if let Some(c) = find_cycle(&graph) {
        panic!("module cycle in src/core: {}", c.join(" → "));
    }
}

#[test]
fn the_core_folder_graph_has_no_cycle() {
    let folder = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut folders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, targets) in core_graph() {
        let entry = folders.entry(folder(&m)).or_default();
        entry.extend(targets.iter().map(|t| folder(t)).filter(|t| *t != folder(&m)));
    }
    if let Some(c) = find_cycle(&folders) {
        panic!("folder cycle in src/core: {}", c.join(" → "));
    }
}

#[test]
fn layers_point_one_way() {
    for (dir, banned) in [("src/core", &["crate::api", "crate::workers"][..]), ("src/api", &["crate::workers"][..])] {
        for p in files(dir, &[".rs"]) {
            let code = code_of(&read(&p));
            for b in banned {
                assert!(!code.contains(b), "{} uses {b}: {dir} may not depend on that layer", rel(&p));
            }
        }
    }
}

#[test]
fn every_module_opens_with_what_it_is_for() {
    let mut missing = Vec::new();
    for p in files("src", &[".rs"]) {
        if !read(&p).starts_with("//!") {
            missing.push(rel(&p));
        }
    }
    assert!(missing.is_empty(), "modules without a leading //! line: {missing:?}");
}

#[test]
fn reference_citations_point_at_anchors_that_exist() {
    let reference = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/REFERENCE.md"));
    let anchors: BTreeSet<&str> =
        reference.split("<a id=\"").skip(1).map(|s| s.split('"').next().unwrap_or("")).collect();
    let mut cited = 0;
    let mut broken = Vec::new();
    let mut scanned = files("src", &[".rs", ".js", ".html"]);
    scanned.extend(files("tests", &[".rs", ".mjs", ".py"]));
    scanned.extend(files("bench", &[".mjs"]));
    scanned.extend(files("docs", &[".md", ".yaml"]));
    for p in scanned {
        let text = read(&p);
        for piece in text.split("REFERENCE.md#").skip(1) {
            let id: String = piece.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if id.is_empty() {
                continue; // `REFERENCE.md#<id>`: how to cite, not a citation
            }
            cited += 1;
            if !anchors.contains(id.as_str()) {
                broken.push(format!("{}: #{id}", rel(&p)));
            }
        }
    }
    assert!(cited > 40, "found only {cited} citations");
    assert!(broken.is_empty(), "citations of anchors docs/REFERENCE.md lacks: {broken:?}");
}

#[test]
fn nothing_names_a_path_outside_the_repository() {
    let outside = ["..", "/shared"].concat();
    let mut scanned = files("src", &[".rs", ".js", ".html", ".css"]);
    scanned.extend(files("tests", &[".rs", ".mjs", ".py", ".toml"]));
    scanned.extend(files("bench", &[".mjs"]));
    scanned.extend(files("docs", &[".md", ".yaml"]));
    scanned.extend(files("scripts", &[".sh"]));
    scanned.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    for p in scanned {
        assert!(!read(&p).contains(&outside), "{} names {outside}, which is not in this repository", rel(&p));
    }
}

#[test]
fn paths_named_in_the_docs_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = files("docs", &[".md"]);
    docs.push(root.join("README.md"));
    let mut named = 0;
    let mut missing = Vec::new();
    for p in docs {
        for piece in read(&p).split('`').skip(1).step_by(2) {
            let path = piece.split([':', ' ']).next().unwrap_or("");
            let ours =
                ["src/", "tests/", "migrations/", "scripts/", "bench/", "docs/"].iter().any(|d| path.starts_with(d));
            if !ours || path.contains(['*', '<', '{', '…']) {
                continue;
            }
            named += 1;
            if !root.join(path).exists() {
                missing.push(format!("{}: {path}", rel(&p)));
            }
        }
    }
    assert!(named > 50, "found only {named} paths");
    assert!(missing.is_empty(), "the docs name paths that do not exist: {missing:?}");
}
