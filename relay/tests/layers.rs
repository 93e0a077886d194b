//! The relay's modules point one way: no top-level module or folder of `relay/src` uses another
//! that uses it back, directly or through others.
//!
//! The graph is read from the source: every `crate::NAME` path (in `use` lines, groups
//! `crate::{a, b::c}` included, and in expressions) is an edge from the file's unit to `NAME`'s.
//! A unit is a top-level module (`x.rs`) or folder (`x/`); the crate root's own items (`lib.rs`:
//! `crate::VERSION`, a `pub use` re-export) are the unit `lib`, which uses every module, so a
//! module that reaches back into it is a circle too. Comments and literals are not code and are
//! skipped. `super::` never leaves a unit here: top-level files use it only in their test
//! modules, and a folder's files reach their own folder with it. `main.rs` is the binary's own
//! crate and uses the library only from outside.
//!
//! The browser client's `web/src` is checked the same way (it compiles only for wasm32).
//!
//! `cargo test -p tern-relay --test layers -- --nocapture` prints the layers, top first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Edges between units, each with the first place (`file:line`) that makes it.
#[derive(Debug, Default)]
struct Graph {
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    /// The graph of `files` (paths relative to `src/`, with their text); `lib.rs` must be one.
    fn of(files: &[(String, String)]) -> Graph {
        let root = files.iter().find(|(p, _)| p == "lib.rs").map_or("", |(_, s)| s.as_str());
        let modules = declared_modules(&strip(root));
        let mut graph = Graph::default();
        let root_uses = graph.edges.entry("lib".to_owned()).or_default();
        for module in &modules {
            root_uses.insert(module.clone(), format!("lib.rs: mod {module}"));
        }
        for (path, text) in files {
            let from = unit_of(path);
            graph.edges.entry(from.clone()).or_default();
            let code = strip(text);
            for (name, at) in crate_paths(&code) {
                let to = if modules.contains(&name) { name } else { "lib".to_owned() };
                if to == from {
                    continue;
                }
                let line = code[..at].matches('\n').count() + 1;
                let place = format!("{path}:{line}");
                graph.edges.entry(from.clone()).or_default().entry(to).or_insert(place);
            }
        }
        graph
    }

    /// Every unit `from` reaches.
    fn reach(&self, from: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(unit) = todo.pop() {
            for next in self.edges.get(&unit).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    }

    /// The circles: sets of two or more units that all reach one another.
    fn circles(&self) -> Vec<BTreeSet<String>> {
        let reach: BTreeMap<&String, BTreeSet<String>> =
            self.edges.keys().map(|u| (u, self.reach(u))).collect();
        let mut circles: Vec<BTreeSet<String>> = Vec::new();
        for (unit, reached) in &reach {
            let circle: BTreeSet<String> = reached
                .iter()
                .filter(|other| reach.get(other).is_some_and(|back| back.contains(*unit)))
                .cloned()
                .collect();
            if circle.len() > 1 && !circles.contains(&circle) {
                circles.push(circle);
            }
        }
        circles
    }

    /// A circle's edges with the places that make them, one a line.
    fn describe(&self, circle: &BTreeSet<String>) -> String {
        let mut out = String::new();
        for from in circle {
            for (to, place) in &self.edges[from] {
                if circle.contains(to) {
                    out.push_str(&format!("  {from} -> {to} ({place})\n"));
                }
            }
        }
        out
    }

    /// Units by layer, top first: a unit's layer is the length of its longest path down (a
    /// leaf's is 0). Only for a graph without circles.
    fn layers(&self) -> String {
        fn depth<'a>(g: &'a Graph, unit: &'a str, memo: &mut BTreeMap<&'a str, usize>) -> usize {
            if let Some(&d) = memo.get(unit) {
                return d;
            }
            let d = g
                .edges
                .get(unit)
                .into_iter()
                .flat_map(BTreeMap::keys)
                .map(|next| depth(g, next, memo) + 1)
                .max()
                .unwrap_or(0);
            memo.insert(unit, d);
            d
        }
        let mut memo = BTreeMap::new();
        let mut by_depth: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for unit in self.edges.keys() {
            by_depth.entry(depth(self, unit, &mut memo)).or_default().push(unit);
        }
        let mut out = String::new();
        for (d, units) in by_depth.iter().rev() {
            out.push_str(&format!("layer {d}:\n"));
            for unit in units {
                let uses: Vec<&str> = self.edges[*unit].keys().map(String::as_str).collect();
                out.push_str(&format!("  {unit} -> {}\n", uses.join(", ")));
            }
        }
        out
    }
}

/// `session/forward.rs` → `session`, `http.rs` → `http`, `lib.rs` → `lib`.
fn unit_of(path: &str) -> String {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
}

/// The modules `lib.rs` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(root: &str) -> BTreeSet<String> {
    root.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub(crate) ").or_else(|| l.strip_prefix("pub ")).unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(|n| n.trim().to_owned())
        })
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments and the insides of string and character literals blanked (newlines
/// kept, so lines keep their numbers).
fn strip(source: &str) -> String {
    let s: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !prev_ident && matches!(next, Some('"') | Some('#')) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push_str("r\"");
            i = j + 1;
            while i < s.len() {
                if s[i] == '"' && (0..hashes).all(|k| s.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(s[i]));
                i += 1;
            }
            out.push('"');
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < s.len() {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            out.push_str("' '");
            i += 2;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Each `crate::NAME` in `code` (every name of a group `crate::{a, b::c}`), with its offset.
fn crate_paths(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
            continue;
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            let mut chars = group.char_indices().peekable();
            while let Some((k, c)) = chars.next() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if depth == 1 && item_start && is_ident(c) => {
                        let name: String =
                            group[k..].chars().take_while(|&c| is_ident(c)).collect();
                        for _ in 1..name.chars().count() {
                            chars.next();
                        }
                        if name != "self" {
                            found.push((name, at));
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((name, at));
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`, as (path relative to `root`, text).
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("the source folder is readable")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&path).expect("a source file is text");
            out.push((rel, text));
        }
    }
}

/// Fails on an import circle among the modules of the crate whose sources are in `src`
/// (`name` for the message), and prints its layers.
fn assert_one_way(name: &str, src: &Path) {
    let mut files = Vec::new();
    sources(src, src, &mut files);
    files.retain(|(path, _)| path != "main.rs");
    let graph = Graph::of(&files);
    let circles = graph.circles();
    let report: String = circles.iter().map(|c| graph.describe(c)).collect::<Vec<_>>().join("\n");
    assert!(circles.is_empty(), "{name} has import circles:\n{report}");
    println!("{name}:\n{}", graph.layers());
}

#[test]
fn relay_modules_point_one_way() {
    assert_one_way("relay/src", &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}

/// The browser client's too (it compiles only for wasm32, so its check lives here, beside the
/// relay's: the same reading of the source).
#[test]
fn web_modules_point_one_way() {
    assert_one_way("web/src", &Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/src"));
}

/// The check itself: it finds a circle, through groups and root items too, and is not fooled
/// by comments or strings.
#[test]
fn a_circle_is_found_and_comments_and_strings_are_not_code() {
    let file = |p: &str, s: &str| (p.to_owned(), s.to_owned());
    let files = vec![
        file("lib.rs", "pub mod a;\nmod b;\npub(crate) mod c;\nmod d;\npub const V: u8 = 1;\n"),
        file("a.rs", "use crate::{c::X, b::{self, Y}};\n"),
        file("b/mod.rs", "mod inner;\n"),
        file("b/inner.rs", "fn f() { let _ = crate::a::go(); }\n"),
        file(
            "c.rs",
            "// crate::a::Nothing\nconst S: &str = \"crate::b\";\nconst R: &str = r#\"crate::a\"#;\n",
        ),
        file("d.rs", "fn v<'a>(_: &'a str) -> char { let _ = crate::V; '\"' }\n"),
    ];
    let graph = Graph::of(&files);
    let circles = graph.circles();
    let want = |units: &[&str]| units.iter().map(|u| u.to_string()).collect::<BTreeSet<_>>();
    assert!(circles.contains(&want(&["a", "b"])), "{circles:?}");
    assert!(circles.contains(&want(&["d", "lib"])), "a root item reached back: {circles:?}");
    assert_eq!(circles.len(), 2, "{circles:?}");
    assert!(graph.edges["c"].is_empty(), "comments and strings are not code: {graph:?}");
    assert_eq!(graph.edges["b"]["a"], "b/inner.rs:1");
    let told = graph.describe(&want(&["a", "b"]));
    assert!(told.contains("a -> b (a.rs:1)") && told.contains("b -> a (b/inner.rs:1)"), "{told}");
}
