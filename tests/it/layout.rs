//! Rules about the code base itself, so CI keeps them: no import cycle between the files of
//! any crate (read from `use` trees, grouped and nested, and from every `crate::`, `super::`,
//! `self::` and crate-name path in the code), each folder of the core uses only those above it in
//! `docs/ARCHITECTURE.md`'s folder map, every invariant the map numbers is cited by a test, the
//! module graph that `docs/module-graph.md` shows is the one the code has, every `module::item`
//! the docs name exists, a `//!` line opens every module, every `docs/REFERENCE.md#…` citation
//! points at an anchor that exists, and nothing names a path outside the repository. (Which crate
//! may use which is the compiler's to check: the crates are the layers.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (the Workers crate's manifest directory).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

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
    walk(&root().join(dir), exts, &mut out);
    out.sort();
    out
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// The crates: their name in module paths, the name other crates use them by, and their source
/// folder.
const CRATES: [(&str, &str, &str); 3] = [
    ("core", "session_agent_core", "crates/core/src"),
    ("api", "session_agent_api", "crates/api/src"),
    ("workers", "", "src"),
];

/// Every Rust source file of the crates, with its module path (`core::store::tree`, `api`,
/// `workers::agent`).
fn modules() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for (name, _, dir) in CRATES {
        for p in files(dir, &[".rs"]) {
            let r = p.strip_prefix(root().join(dir)).unwrap().with_extension("");
            let mut segs: Vec<String> = vec![name.to_owned()];
            segs.extend(r.iter().map(|s| s.to_string_lossy().into_owned()));
            if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
                segs.pop();
            }
            out.push((segs.join("::"), p));
        }
    }
    out
}

/// `text` with comments, string and character literals blanked out (so neither a path in a
/// comment nor one in a string counts), and without its `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r' && (next == Some('#') || next == Some('"')) && !ident_char(c.get(i.wrapping_sub(1))) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (c.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime ('a) has no closing quote.
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn ident_char(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The paths a `use` item names, its groups expanded: `use a::{b, c::{d, e as f}, self};` is
/// `a::b`, `a::c::d`, `a::c::e`, `a`.
fn use_paths(tree: &str) -> Vec<String> {
    fn expand(prefix: &str, s: &str, out: &mut Vec<String>) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        match s.find('{') {
            None => {
                let path = s.split(" as ").next().unwrap_or("").trim();
                let full = match (prefix.is_empty(), path) {
                    (_, "self") => prefix.to_owned(),
                    (true, p) => p.to_owned(),
                    (false, p) => format!("{prefix}::{p}"),
                };
                out.push(full.trim_end_matches("::*").to_owned());
            }
            Some(open) => {
                let head = s[..open].trim().trim_end_matches("::");
                let inner = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
                let prefix = match (prefix.is_empty(), head.is_empty()) {
                    (_, true) => prefix.to_owned(),
                    (true, false) => head.to_owned(),
                    (false, false) => format!("{prefix}::{head}"),
                };
                // Split on the commas at depth 0.
                let (mut depth, mut start) = (0, 0);
                for (i, ch) in inner.char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&prefix, &inner[start..i], out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                expand(&prefix, &inner[start..], out);
            }
        }
    }
    let mut out = Vec::new();
    expand("", &tree.split_whitespace().collect::<Vec<_>>().join(" "), &mut out);
    out
}

/// Every path a file names: those of its `use` items (expanded) and the `crate::`, `super::`,
/// `self::` and crate-name paths in its code, with what its `use … as` aliases stand for.
fn named_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    // `use` items: from a `use` keyword (at the start of a statement) to its `;`, then blanked
    // out of what the path scan below reads.
    let mut rest = code;
    let mut scan = String::with_capacity(code.len());
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        let after = &rest[i + 4..];
        scan.push_str(&rest[..i]);
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            if let Some(end) = after.find(';') {
                let tree = &after[..end];
                for p in use_paths(tree) {
                    let first = p.split("::").next().unwrap_or("");
                    let known = ["crate", "super", "self", "session_agent_core", "session_agent_api"];
                    // `use child::x` in a `mod.rs`: a path relative to this module.
                    out.push(if known.contains(&first) { p } else { format!("self::{p}") });
                }
                // `use x::y as z;` makes `z::…` a path to `x::y::…`.
                if let Some((path, alias)) = tree.rsplit_once(" as ") {
                    if !path.contains('{') {
                        aliases.push((alias.trim().to_owned(), path.trim().to_owned()));
                    }
                }
                rest = &after[end..];
                continue;
            }
        }
        scan.push_str("use ");
        rest = after;
    }
    scan.push_str(rest);
    // Paths in the code: a known first segment, then `::` and identifiers.
    let starts = ["crate", "super", "self", "session_agent_core", "session_agent_api"];
    let chars: Vec<char> = scan.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_alphabetic() || chars[i] == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            let prev = start.checked_sub(1).map(|j| chars[j]);
            let word: String = chars[start..i].iter().collect();
            let word = word.trim_end_matches(':');
            let first = word.split("::").next().unwrap_or("");
            if prev != Some(':') && word.contains("::") {
                if starts.contains(&first) {
                    out.push(word.to_owned());
                } else if let Some((_, path)) = aliases.iter().find(|(a, _)| a == first) {
                    out.push(format!("{path}{}", &word[first.len()..]));
                } else {
                    // A path relative to this module (a child module of a `mod.rs`).
                    out.push(format!("self::{word}"));
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The file graph: module → the modules (files) it names, in any crate. A path resolves to the
/// longest known module it starts with; `mod x;` declarations are not uses.
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let sources = modules();
    let known: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (m, p) in &sources {
        let segs: Vec<&str> = m.split("::").collect();
        let is_dir = matches!(p.file_name().and_then(|n| n.to_str()), Some("mod.rs" | "lib.rs"));
        let krate = segs[0];
        let mut targets = BTreeSet::new();
        for path in named_paths(&code_of(&read(p))) {
            let mut parts: Vec<&str> = path.split("::").collect();
            let mut base: Vec<&str> = match parts[0] {
                "crate" => vec![krate],
                "session_agent_core" => vec!["core"],
                "session_agent_api" => vec!["api"],
                "self" => segs.clone(),
                "super" => {
                    let mut b = segs.clone();
                    while parts.first() == Some(&"super") {
                        b.pop();
                        parts.remove(0);
                    }
                    parts.insert(0, "super");
                    b
                }
                _ => continue,
            };
            if parts[0] == "self" && !is_dir {
                // In a file module `a/b.rs`, `self::x` is a child of `a::b`, and a bare `x::y` is
                // an outside crate's path (`std::…`, `serde_json::…`): neither a file here.
                if !known.iter().any(|k| k.starts_with(&format!("{m}::"))) {
                    continue;
                }
            }
            base.extend(parts[1..].iter().copied());
            let resolved = (1..=base.len()).rev().map(|n| base[..n].join("::")).find(|c| known.contains(c));
            if let Some(t) = resolved.filter(|t| t != m) {
                targets.insert(t);
            }
        }
        graph.insert(m.clone(), targets);
    }
    graph
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(t: &mut T<'g>, v: &'g str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn use_trees_are_read_whole() {
    assert_eq!(
        use_paths("super::{anthropic, openai::{self, Chunk as C}, *}"),
        ["super::anthropic", "super::openai", "super::openai::Chunk", "super"]
    );
    let code = code_of("use a::b;\n// use c::d;\nlet s = \"crate::x::y\"; let c = '\"'; crate::z::w(1);");
    assert_eq!(named_paths(&code), ["self::a::b", "crate::z::w"]);
}

#[test]
fn no_import_cycle_between_files() {
    let graph = file_graph();
    assert!(graph.len() > 90, "found only {} modules", graph.len());
    assert!(graph["core::store::history"].contains("core::store::tree"), "the reader misses `use` lines");
    assert!(graph["api::chat"].contains("core::turn::run"), "the reader misses paths into another crate");
    let found = cycles(&graph);
    assert!(found.is_empty(), "import cycles between files: {found:#?}");
}

/// The graph as `docs/module-graph.md` shows it: one line per module, leaves first (each module
/// after everything it uses), with the modules it uses.
fn graph_text(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut lines = Vec::new();
    while done.len() < graph.len() {
        let ready: Vec<&str> = graph
            .iter()
            .filter(|(m, deps)| !done.contains(m.as_str()) && deps.iter().all(|d| done.contains(d.as_str())))
            .map(|(m, _)| m.as_str())
            .collect();
        assert!(!ready.is_empty(), "a cycle: no_import_cycle_between_files says where");
        for m in ready {
            let deps = &graph[m];
            lines.push(match deps.is_empty() {
                true => m.to_string(),
                false => format!("{m} → {}", deps.iter().cloned().collect::<Vec<_>>().join(", ")),
            });
            done.insert(m);
        }
    }
    lines.join("\n")
}

#[test]
fn the_module_graph_shown_is_the_one_the_code_has() {
    let (open, close) =
        ("<!-- module graph: generated by tests/it/layout.rs -->\n```text\n", "\n```\n<!-- end of module graph -->");
    let path = root().join("docs/module-graph.md");
    let doc = read(&path);
    let want = graph_text(&file_graph());
    let (Some(a), Some(b)) = (doc.find(open), doc.find(close)) else {
        panic!("docs/module-graph.md has no generated module graph (markers {open:?} … {close:?})")
    };
    let shown = &doc[a + open.len()..b];
    if shown != want {
        if std::env::var_os("SA_WRITE_DOCS").is_some() {
            fs::write(&path, format!("{}{want}{}", &doc[..a + open.len()], &doc[b..])).unwrap();
            return;
        }
        panic!("docs/module-graph.md shows another module graph than the code has; run `SA_WRITE_DOCS=1 cargo test layout` to write it:\n{want}");
    }
}

/// The names a source file declares: its items (functions, types, traits, constants, modules,
/// macros), enum variants and struct fields.
fn declared(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let words: Vec<&str> =
        code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!')).filter(|w| !w.is_empty()).collect();
    for w in words.windows(2) {
        if matches!(
            w[0],
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "mod" | "union" | "macro_rules!"
        ) {
            out.insert(w[1].to_owned());
        }
    }
    // Variants and fields: an identifier at the start of a line, followed by `,` `(` `{` `:` or
    // ` =` (`Raw,`, `Text(String)`, `pub now: String`).
    for line in code.lines() {
        let l = line.trim_start().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
        let name: String = l.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let tail = l[name.len()..].trim_start();
        if !name.is_empty() && [",", "(", "{", ":", "="].iter().any(|t| tail.starts_with(t)) && !tail.starts_with("::")
        {
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_module_item_the_docs_name_exists() {
    let sources = modules();
    let decls: Vec<(String, String, BTreeSet<String>)> =
        sources.iter().map(|(m, p)| (m.clone(), code_of(&read(p)), declared(&code_of(&read(p))))).collect();
    // The modules whose path ends with `segs` (`tree`, `store::tree`, `core::store::tree`).
    let modules_ending = |segs: &[&str]| -> Vec<usize> {
        let suffix = segs.join("::");
        decls
            .iter()
            .enumerate()
            .filter(|(_, (m, _, _))| *m == suffix || m.ends_with(&format!("::{suffix}")))
            .map(|(i, _)| i)
            .collect()
    };
    // The files that declare type `ty` or implement something for it.
    let files_of_type = |ty: &str| -> Vec<usize> {
        decls
            .iter()
            .enumerate()
            .filter(|(_, (_, code, d))| {
                d.contains(ty)
                    && (code.contains(&format!("struct {ty}"))
                        || code.contains(&format!("enum {ty}"))
                        || code.contains(&format!("trait {ty}")))
                    || code.contains(&format!("for {ty} "))
                    || code.contains(&format!("impl {ty} "))
                    || code.contains(&format!("impl<'a> {ty}<"))
                    || code.contains(&format!("impl {ty}<"))
                    || code.contains(&format!("impl<'_> {ty}"))
            })
            .map(|(i, _)| i)
            .collect()
    };
    let exists = |name: &str| -> bool {
        let segs: Vec<&str> = name.split("::").collect();
        let segs: Vec<&str> = match segs[0] {
            "session_agent_core" => std::iter::once("core").chain(segs[1..].iter().copied()).collect(),
            "session_agent_api" => std::iter::once("api").chain(segs[1..].iter().copied()).collect(),
            _ => segs,
        };
        // A module path, or a module path then an item, or then a type and its item.
        for split in (1..=segs.len()).rev() {
            let (module, rest) = segs.split_at(split);
            for i in modules_ending(module) {
                match rest {
                    [] => return true,
                    [item] if decls[i].2.contains(*item) => return true,
                    // A type of the module (or one it re-exports) and its item.
                    [ty, item] if files_of_type(ty).iter().any(|&j| decls[j].2.contains(*item)) => return true,
                    _ => {}
                }
            }
        }
        // A type and its item (`Session::write`, `Overlays::Raw`, `Env::now`).
        matches!(segs.as_slice(), [ty, item] if files_of_type(ty).iter().any(|&j| decls[j].2.contains(*item)))
    };
    let outside = [
        "std",
        "core",
        "alloc",
        "serde",
        "serde_json",
        "worker",
        "wasm_bindgen",
        "js_sys",
        "futures",
        "rusqlite",
        "matchit",
    ];
    let mut docs = files("docs", &[".md"]);
    docs.push(root().join("README.md"));
    let (mut named, mut missing) = (0, Vec::new());
    for p in docs {
        let text = read(&p);
        // Fenced code blocks show code to copy, not names of ours.
        let prose: String = text.split("```").step_by(2).collect::<Vec<_>>().join(" ");
        for piece in prose.split('`').skip(1).step_by(2) {
            let name = piece.trim_end_matches("()");
            let is_path = name.contains("::")
                && name.split("::").all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
            if !is_path || outside.contains(&name.split("::").next().unwrap_or("")) && !exists(name) {
                continue;
            }
            named += 1;
            if !exists(name) {
                missing.push(format!("{}: {name}", rel(&p)));
            }
        }
    }
    assert!(named > 100, "found only {named} names");
    assert!(missing.is_empty(), "the docs name items the code does not have: {missing:#?}");
}

#[test]
fn every_module_opens_with_what_it_is_for() {
    let missing: Vec<String> =
        modules().into_iter().filter(|(_, p)| !read(p).starts_with("//!")).map(|(_, p)| rel(&p)).collect();
    assert!(missing.is_empty(), "modules without a leading //! line: {missing:?}");
}

#[test]
fn reference_citations_point_at_anchors_that_exist() {
    let reference = read(&root().join("docs/REFERENCE.md"));
    let anchors: BTreeSet<&str> =
        reference.split("<a id=\"").skip(1).map(|s| s.split('"').next().unwrap_or("")).collect();
    let mut cited = 0;
    let mut broken = Vec::new();
    let mut scanned = files("src", &[".rs", ".js", ".html"]);
    scanned.extend(files("crates", &[".rs"]));
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
    scanned.extend(files("crates", &[".rs", ".toml"]));
    scanned.extend(files("console", &[".js", ".html", ".css"]));
    scanned.extend(files("tests", &[".rs", ".mjs", ".py", ".toml"]));
    scanned.extend(files("bench", &[".mjs"]));
    scanned.extend(files("docs", &[".md", ".yaml"]));
    scanned.extend(files("scripts", &[".sh"]));
    scanned.push(root().join("README.md"));
    for p in scanned {
        assert!(!read(&p).contains(&outside), "{} names {outside}, which is not in this repository", rel(&p));
    }
}

#[test]
fn paths_named_in_the_docs_exist() {
    let mut docs = files("docs", &[".md"]);
    docs.push(root().join("README.md"));
    let mut named = 0;
    let mut missing = Vec::new();
    for p in docs {
        for piece in read(&p).split('`').skip(1).step_by(2) {
            let path = piece.split([':', ' ']).next().unwrap_or("");
            let ours = ["src/", "crates/", "tests/", "migrations/", "scripts/", "bench/", "docs/", "console/"]
                .iter()
                .any(|d| path.starts_with(d));
            if !ours || path.contains(['*', '<', '{', '…']) {
                continue;
            }
            named += 1;
            if !root().join(path).exists() {
                missing.push(format!("{}: {path}", rel(&p)));
            }
        }
    }
    assert!(named > 50, "found only {named} paths");
    assert!(missing.is_empty(), "the docs name paths that do not exist: {missing:?}");
}

/// The folder order of `crates/core/src/` as `docs/ARCHITECTURE.md`'s folder map gives it (the one
/// place it is written): each `### ` heading of the map is one level (`### \`store/\``, `###
/// \`env.rs\``), and under `### Leaf modules` each row of the table is one (`\`ids.rs\`,
/// \`time.rs\`` two modules at the same level). Module name → level, leaves first.
fn folder_order() -> BTreeMap<String, usize> {
    let doc = read(&root().join("docs/ARCHITECTURE.md"));
    let start = doc.find("\n## Folder map\n").expect("docs/ARCHITECTURE.md has no `## Folder map`");
    let map = &doc[start..];
    let end = map.find("\n### `crates/api/src/`").expect("the folder map ends with `### `crates/api/src/``");
    let module = |name: &str| name.split(['/', '.']).next().unwrap_or("").to_owned();
    let (mut order, mut level, mut in_leaves) = (BTreeMap::new(), 0, false);
    for line in map[..end].lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            in_leaves = heading == "Leaf modules";
            if !in_leaves {
                let name = heading.split('`').nth(1).unwrap_or_else(|| panic!("a heading without a module: {line}"));
                level += 1;
                order.insert(module(name), level);
            }
        } else if in_leaves && line.starts_with("| `") {
            let first_cell = line.split('|').nth(1).unwrap_or("");
            let names: Vec<String> = first_cell.split('`').skip(1).step_by(2).map(module).collect();
            // `sql/mod.rs` then `sql/packed.rs`: one module, one level.
            if names.iter().all(|n| order.contains_key(n)) {
                continue;
            }
            level += 1;
            for n in names {
                order.entry(n).or_insert(level);
            }
        }
    }
    order
}

/// The top module of a `core::…` module path (`core::store::tree` → `store`), `None` for the crate
/// root and the other crates.
fn core_top(module: &str) -> Option<&str> {
    let mut segs = module.split("::");
    (segs.next() == Some("core")).then(|| segs.next()).flatten()
}

/// The imports of `crates/core` that climb the folder order: a file of one top module naming a
/// module at the same level or after it in the map (a module uses itself freely).
fn climbing_imports() -> Vec<String> {
    let order = folder_order();
    let graph = file_graph();
    let unmapped: BTreeSet<&str> =
        graph.keys().filter_map(|m| core_top(m)).filter(|t| !order.contains_key(*t)).collect();
    assert!(
        unmapped.is_empty(),
        "modules of crates/core the folder map of docs/ARCHITECTURE.md does not place: {unmapped:?}"
    );
    let mut out = Vec::new();
    for (m, targets) in &graph {
        let Some(top) = core_top(m) else { continue };
        for t in targets {
            match core_top(t) {
                Some(other) if other != top && order[other] >= order[top] => out.push(format!("{m} → {t}")),
                _ => {}
            }
        }
    }
    out
}

#[test]
fn each_folder_of_the_core_uses_only_those_above_it_in_the_map() {
    let order = folder_order();
    assert!(order.len() > 30, "read only {} modules from the folder map", order.len());
    assert!(order["error"] < order["store"] && order["turn"] < order["schedule"], "the map reads in another order");
    // `lib.rs` lists the folders in short, in the map's order.
    let lib = read(&root().join("crates/core/src/lib.rs"));
    let listed: Vec<&str> = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .flat_map(|l| l.split('`').skip(1).step_by(2))
        .filter(|n| order.contains_key(*n))
        .collect();
    assert!(listed.len() > 30, "crates/core/src/lib.rs lists only {} modules", listed.len());
    let out_of_order: Vec<_> = listed.windows(2).filter(|w| order[w[0]] > order[w[1]]).collect();
    assert!(
        out_of_order.is_empty(),
        "crates/core/src/lib.rs lists modules in another order than the map: {out_of_order:?}"
    );
    let climbing = climbing_imports();
    assert!(
        climbing.is_empty(),
        "imports that name a module at the same level or below in docs/ARCHITECTURE.md's folder map (move the code \
         where the order allows): {climbing:#?}"
    );
}

/// The numbered invariants of `docs/ARCHITECTURE.md`: `N. **…**` list items and `**N. …**`.
fn invariants() -> BTreeSet<u32> {
    let doc = read(&root().join("docs/ARCHITECTURE.md"));
    let mut out = BTreeSet::new();
    for line in doc.lines() {
        let l = line.trim_start().trim_start_matches("Kept here: ");
        let l = l.strip_prefix("**").unwrap_or(l);
        let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
        let rest = &l[digits.len()..];
        if !digits.is_empty()
            && (rest.starts_with(". **") || line.trim_start().len() > l.len() && rest.starts_with(". "))
        {
            out.insert(digits.parse().unwrap());
        }
    }
    out
}

/// The invariant numbers a text cites: `invariant N` (the number whole: `invariant 2` is not 20).
fn cited(text: &str) -> BTreeSet<u32> {
    text.split("invariant ")
        .skip(1)
        .filter_map(|s| s.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok())
        .collect()
}

#[test]
fn every_numbered_invariant_is_cited_by_a_test() {
    let all = invariants();
    assert!(all.len() > 40 && all.contains(&1) && all.contains(&47), "read only {all:?} from docs/ARCHITECTURE.md");
    // The tests: the native suite, the end-to-end tests, and the unit tests of the crates.
    let mut texts: Vec<String> = files("tests", &[".rs", ".mjs"])
        .iter()
        .filter(|p| !p.ends_with("tests/it/layout.rs"))
        .map(|p| read(p))
        .collect();
    texts.extend(
        files("crates", &[".rs"]).iter().filter_map(|p| read(p).split_once("#[cfg(test)]").map(|(_, t)| t.to_owned())),
    );
    let mut seen = BTreeSet::new();
    for t in &texts {
        seen.extend(cited(t));
    }
    let unknown: Vec<_> = seen.difference(&all).collect();
    assert!(unknown.is_empty(), "tests cite invariants docs/ARCHITECTURE.md does not number: {unknown:?}");
    let uncited: Vec<_> = all.difference(&seen).collect();
    assert!(
        uncited.is_empty(),
        "invariants of docs/ARCHITECTURE.md no test cites (a comment `// invariant N` by the test that checks it): \
         {uncited:?}"
    );
}
