//! The architecture of `src/`, checked from the source text: the `crate::…` (and, in the
//! binary, `trueneg::…`) paths each file names.
//!
//! - Every top-level module (a folder or a file of `src/`) sits in one layer of [`LAYERS`]; a
//!   module imports only from layers below its own. That also rules out circles among them.
//! - Within one folder the files and sub-folders import each other without a circle, in the
//!   top-level folders and in their sub-folders (a sub-folder is one part of its parent, its
//!   `mod.rs` included; a folder's own `mod.rs`, its table of contents, is left out at its own
//!   level: it declares and re-exports its files).
//!
//! A failure names the files and the paths that break the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers of `src/`, bottom first. A module may import from the layers below its own only.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["io"],
    &["device", "dist", "memory", "plot", "stop", "tensorboard"],
    &["frame"],
    &["kernels"],
    &["model", "lexicon", "tasks"],
    &["interop", "text"],
    &["objective"],
    &["train"],
    &["bench", "finetune"],
    &["attack"],
    &["eval"],
    &["experiments"],
    &["cli", "main", "lib"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The text of a Rust file without comments (doc comments' links are not imports) and without
/// the contents of string literals.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            out.push('"');
            i += 1;
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A character literal such as '"' or '{'.
            out.push_str("' '");
            i += 3;
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            out.push_str("' '");
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow each `prefix` (`crate::`, `super::`, `trueneg::`) in `code`, as
/// segment lists, with `use` groups expanded: `crate::{a::b, c}` gives `[a, b]` and `[c]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(prefix) {
        let at = from + k;
        from = at + prefix.len();
        // `super::super::x` is read from its first `super`.
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == ':')
        {
            continue;
        }
        parse_tree(&code[from..], &mut Vec::new(), &mut out);
    }
    out
}

/// Parses one use tree at the start of `s` (after a `::`), pushing each leaf path.
fn parse_tree(s: &str, stem: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let s_trim = s.trim_start();
    let mut i = s.len() - s_trim.len();
    if s_trim.starts_with('{') {
        i += 1;
        loop {
            let rest = &s[i..];
            let t = rest.trim_start();
            i += rest.len() - t.len();
            if t.starts_with('}') {
                return i + 1;
            }
            if t.is_empty() {
                return i;
            }
            let depth = stem.len();
            i += parse_tree(&s[i..], stem, out);
            stem.truncate(depth);
            let rest = &s[i..];
            let t = rest.trim_start();
            i += rest.len() - t.len();
            if t.starts_with(',') {
                i += 1;
            }
        }
    }
    let name: String = s[i..].chars().take_while(|&c| is_ident(c)).collect();
    if name.is_empty() {
        out.push(stem.clone());
        return i;
    }
    i += name.len();
    stem.push(name);
    if s[i..].starts_with("::") {
        i += 2;
        if s[i..].starts_with('*') {
            out.push(stem.clone());
            return i + 1;
        }
        return i + parse_tree(&s[i..], stem, out);
    }
    out.push(stem.clone());
    i
}

/// One file of `src/`: its module path (`["train", "step"]`; `mod.rs` is its folder's).
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    is_mod_rs: bool,
    code: String,
}

fn source_files(src: &Path) -> Vec<SourceFile> {
    crate::common::rust_files(src)
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(src).expect("under src");
            let mut module: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            let is_mod_rs = module.last().is_some_and(|m| m == "mod");
            if is_mod_rs {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            SourceFile {
                path,
                module,
                is_mod_rs,
                code: code_only(&text),
            }
        })
        .collect()
}

/// The crate-absolute paths a file names: `crate::` (in the binary's `cli/` and `main.rs`,
/// `trueneg::` names the library and `crate::` the binary), and `super::` resolved against the
/// file's own module.
fn absolute_paths(f: &SourceFile) -> Vec<Vec<String>> {
    let binary = f.module.first().is_some_and(|m| m == "cli" || m == "main");
    let mut out = Vec::new();
    for p in paths_after(&f.code, "crate::") {
        if binary && p.first().is_some_and(|m| m != "cli") {
            // `crate::` of the binary names its own modules (`cli`), main's items otherwise.
            continue;
        }
        out.push(p);
    }
    if binary {
        out.extend(paths_after(&f.code, "trueneg::"));
    }
    // `super::` from a file names its folder's module (`mod.rs`: the folder's parent).
    for p in paths_after(&f.code, "super::") {
        let mut base = f.module[..f.module.len().saturating_sub(1)].to_vec();
        let mut rest = p.as_slice();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        out.push(base);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// `lib.rs`'s re-exports at the crate root (`pub use error::{Error, Result}`): name → module.
fn root_reexports(files: &[SourceFile]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    if let Some(lib) = files.iter().find(|f| f.module == ["lib"]) {
        let mut from = 0;
        while let Some(k) = lib.code[from..].find("pub use ") {
            let at = from + k + "pub use ".len();
            from = at;
            let mut paths = Vec::new();
            parse_tree(&lib.code[at..], &mut Vec::new(), &mut paths);
            for p in paths {
                if p.len() >= 2 {
                    map.insert(p[p.len() - 1].clone(), p[0].clone());
                }
            }
        }
    }
    map
}

/// The circles of a directed graph (its strongly connected components of more than one node).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm.
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a str) {
        let i = st.index.len();
        st.index.insert(v, i);
        st.low.insert(v, i);
        st.stack.push(v);
        st.on_stack.insert(v);
        if let Some(next) = st.graph.get(v) {
            for w in next {
                let w = w.as_str();
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let lw = st.low[w];
                    let lv = st.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if st.on_stack.contains(w) {
                    let iw = st.index[w];
                    let lv = st.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().expect("on the stack");
                st.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !st.index.contains_key(v.as_str()) {
            visit(&mut st, v);
        }
    }
    st.out
}

/// Each import edge with the files that make it: (from, to) → ["src/a.rs names crate::b::c"].
type Edges = BTreeMap<(String, String), Vec<String>>;

struct Imports {
    /// Between top-level modules.
    modules: Edges,
    /// Between the files and sub-folders of one folder, in the top-level folders and one
    /// level down (the folder's own `mod.rs` left out), keyed by path.
    files: Edges,
}

/// The part of its folder that file `f` is at depth `level` (1: a top-level folder's file or
/// sub-folder; 2: one level down), as a path: `src/train/model.rs`, or `src/train/steps` for
/// every file of that sub-folder, its `mod.rs` included. `None` for a file above that depth, or
/// the folder's own `mod.rs` (its table of contents: it declares and re-exports its parts).
fn part_at(src: &Path, module: &[String], is_mod_rs: bool, level: usize) -> Option<PathBuf> {
    if module.len() <= level {
        return None;
    }
    let folder: PathBuf = module[..level].iter().collect();
    let dir = src.join(folder).join(&module[level]);
    let whole_folder = module.len() > level + 1 || is_mod_rs;
    Some(if whole_folder {
        dir
    } else {
        dir.with_extension("rs")
    })
}

/// The edge (from part, to part) that path `p`, named by file `f`, makes between two parts of
/// one folder at depth `level` ([`part_at`]), if it names another part of that folder.
fn sibling_edge(
    src: &Path,
    f: &SourceFile,
    p: &[String],
    level: usize,
) -> Option<(String, String)> {
    let from = part_at(src, &f.module, f.is_mod_rs, level)?;
    if p.len() <= level || p[..level] != f.module[..level] || p[level] == f.module[level] {
        return None;
    }
    let folder: PathBuf = p[..level].iter().collect();
    let file = src.join(&folder).join(format!("{}.rs", p[level]));
    let dir = src.join(&folder).join(&p[level]);
    let to = if file.exists() {
        file
    } else if dir.is_dir() {
        dir
    } else {
        return None;
    };
    Some((from.display().to_string(), to.display().to_string()))
}

fn imports(src: &Path) -> Imports {
    let files = source_files(src);
    let roots = root_reexports(&files);
    let tops: BTreeSet<String> = files.iter().map(|f| f.module[0].clone()).collect();
    let mut modules = Edges::new();
    let mut siblings = Edges::new();
    for f in &files {
        let from = &f.module[0];
        for p in absolute_paths(f) {
            let first = &p[0];
            let to = if tops.contains(first) {
                first.clone()
            } else if let Some(m) = roots.get(first) {
                m.clone()
            } else {
                continue;
            };
            let what = format!("{} names {}", f.path.display(), p.join("::"));
            if &to != from {
                modules
                    .entry((from.clone(), to.clone()))
                    .or_default()
                    .push(what.clone());
            }
            // A file or sub-folder of a folder naming another of the same folder, in the
            // top-level folders and one level down.
            for level in 1..=2 {
                if let Some(edge) = sibling_edge(src, f, &p, level) {
                    siblings.entry(edge).or_default().push(what.clone());
                }
            }
        }
    }
    Imports {
        modules,
        files: siblings,
    }
}

fn graph(edges: &Edges) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        g.entry(a.clone()).or_default().insert(b.clone());
        g.entry(b.clone()).or_default();
    }
    g
}

/// What breaks the rules in `src`: one line per upward import or circle.
fn violations(src: &Path) -> Vec<String> {
    let im = imports(src);
    let mut out = Vec::new();
    let tops: BTreeSet<&String> = im.modules.keys().flat_map(|(a, b)| [a, b]).collect();
    for m in tops {
        if layer_of(m).is_none() {
            out.push(format!(
                "module `{m}` is in no layer: add it to LAYERS in tests/suite/architecture.rs"
            ));
        }
    }
    for ((a, b), why) in &im.modules {
        if let (Some(la), Some(lb)) = (layer_of(a), layer_of(b))
            && lb >= la
        {
            let kind = if lb == la { "beside" } else { "above" };
            out.push(format!(
                "`{a}` imports from `{b}`, a layer {kind} it: {}",
                why.join("; ")
            ));
        }
    }
    for c in circles(&graph(&im.files)) {
        let why: Vec<String> = im
            .files
            .iter()
            .filter(|((a, b), _)| c.contains(a) && c.contains(b))
            .flat_map(|(_, w)| w.clone())
            .collect();
        out.push(format!("circle among {}: {}", c.join(", "), why.join("; ")));
    }
    out
}

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 105;

/// Files and functions over their limit, to be split: `(file, "")` for a file, `(file, name)`
/// for a function.
const DEBTS: &[(&str, &str)] = &[];

/// Each function of `code` (comments and strings already blanked) with its length in lines:
/// from its `fn` line to its closing brace.
fn functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        let after_fn = l
            .split_whitespace()
            .skip_while(|w| *w != "fn")
            .nth(1)
            .filter(|_| !l.starts_with("//") && l.split_whitespace().any(|w| w == "fn"));
        let Some(name) = after_fn.map(|n| n.split(['(', '<']).next().unwrap_or(n).to_string())
        else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        while j < lines.len() {
            for c in lines[j].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && lines[j].trim_end().ends_with(';')) {
                break;
            }
            j += 1;
        }
        if opened {
            out.push((name, j - i + 1));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// What is over its size limit in `src` and not in [`DEBTS`], and the debts that are paid.
fn oversized(src: &Path) -> Vec<String> {
    let files = source_files(src);
    let mut out = Vec::new();
    let mut per_module: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    let mut debts_seen = BTreeSet::new();
    for f in &files {
        let rel = f
            .path
            .strip_prefix(src)
            .expect("under src")
            .display()
            .to_string();
        let text = std::fs::read_to_string(&f.path).expect("a source file");
        let n = text.lines().count();
        total += n;
        *per_module.entry(f.module[0].clone()).or_default() += n;
        if n > MAX_FILE_LINES {
            if DEBTS.contains(&(rel.as_str(), "")) {
                debts_seen.insert((rel.clone(), String::new()));
            } else {
                out.push(format!("{rel}: {n} lines (at most {MAX_FILE_LINES})"));
            }
        }
        for (name, len) in functions(&f.code) {
            if len > MAX_FN_LINES {
                if DEBTS.contains(&(rel.as_str(), name.as_str())) {
                    debts_seen.insert((rel.clone(), name));
                } else {
                    out.push(format!(
                        "{rel}: fn {name} has {len} lines (at most {MAX_FN_LINES})"
                    ));
                }
            }
        }
    }
    for (m, n) in per_module {
        if n * 5 > total {
            out.push(format!(
                "module `{m}`: {n} of {total} lines (at most a fifth)"
            ));
        }
    }
    for (file, name) in DEBTS {
        if !debts_seen.contains(&(file.to_string(), name.to_string())) {
            out.push(format!(
                "{file} {name}: within its limit now; remove it from DEBTS"
            ));
        }
    }
    out
}

#[test]
fn files_functions_and_modules_stay_small() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = oversized(&src);
    assert!(v.is_empty(), "sizes in src/:\n{}", v.join("\n"));
}

#[test]
fn the_size_check_measures_functions() {
    let code = code_only(
        "/// doc with fn inside\npub fn a(x: u32) -> u32 {\n    let s = \"}\";\n    x\n}\nfn b() {}\nfn c<T>(t: T)\nwhere\n    T: Copy,\n{\n}\n",
    );
    assert_eq!(
        functions(&code),
        [
            ("a".to_string(), 4),
            ("b".to_string(), 1),
            ("c".to_string(), 5)
        ]
    );
}

#[test]
fn modules_import_only_from_layers_below_and_files_form_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = violations(&src);
    assert!(v.is_empty(), "architecture of src/:\n{}", v.join("\n"));
}

/// Writes `text` to `src/path`, making its folders.
fn write_file(src: &Path, path: &str, text: &str) {
    let p = src.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The checker itself finds an upward import and a circle in a small tree.
#[test]
fn the_checker_finds_an_upward_import_and_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |p: &str, t: &str| write_file(src, p, t);
    write(
        "lib.rs",
        "pub mod kernels;\npub mod model;\npub use error::{Error, Result};\n",
    );
    write("error.rs", "pub struct Error;\n");
    write("kernels/mod.rs", "pub mod a;\npub mod b;\n");
    // a → b and b → a: a circle; a → model: upward. A doc link and a string are no imports.
    write(
        "kernels/a.rs",
        "//! [`crate::train`]\nuse super::b::X;\nuse crate::{Result, model::{M, N}};\nconst S: &str = \"crate::train\";\n",
    );
    write("kernels/b.rs", "use crate::kernels::a::Y;\n");
    write(
        "model/mod.rs",
        "use crate::kernels::a::Y;\nuse crate::Error;\n",
    );
    // A sub-folder is one part of its folder, its mod.rs included: model/net.rs → heads/ and
    // heads/mod.rs → net.rs is a circle. One level down, heads/a.rs ↔ heads/b.rs is another;
    // heads/mod.rs naming its files is not.
    write("model/net.rs", "use super::heads::H;\n");
    write(
        "model/heads/mod.rs",
        "pub mod a;\npub mod b;\nuse super::net::N;\npub use a::A;\n",
    );
    write("model/heads/a.rs", "use super::b::B;\n");
    write("model/heads/b.rs", "use crate::model::heads::a::A;\n");
    let v = violations(src);
    assert_eq!(v.len(), 4, "{v:#?}");
    assert!(
        v[0].starts_with("`kernels` imports from `model`, a layer above it")
            && v[0].contains("kernels/a.rs names model::M"),
        "{}",
        v[0]
    );
    let circle = |parts: &[&str]| {
        v.iter().any(|l| {
            let among = l.split(": ").next().unwrap_or("");
            l.starts_with("circle among")
                && among.matches(", ").count() + 1 == parts.len()
                && parts.iter().all(|p| among.contains(p))
        })
    };
    assert!(circle(&["kernels/a.rs", "kernels/b.rs"]), "{v:#?}");
    assert!(circle(&["model/net.rs", "model/heads"]), "{v:#?}");
    assert!(circle(&["model/heads/a.rs", "model/heads/b.rs"]), "{v:#?}");
}

/// What names the file system directly: only `src/io/` may (every file goes through its doors).
const FILE_SYSTEM: &[&str] = &[
    "std::fs",
    "fs::",
    "File::open",
    "File::create",
    "OpenOptions",
    "Mmap::map",
    "read_dir(",
    // What a path is: asked through `crate::io::PathQuery`.
    ".exists()",
    ".try_exists(",
    ".is_dir()",
    ".is_file()",
    ".is_symlink()",
    "symlink_metadata(",
    ".metadata()",
];

/// The files of `src` outside `io/` that name the file system, with what they name.
fn file_system_outside_io(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in source_files(src) {
        if f.module[0] == "io" {
            continue;
        }
        for (n, line) in f.code.lines().enumerate() {
            if let Some(word) = FILE_SYSTEM.iter().find(|w| line.contains(**w)) {
                let rel = f.path.strip_prefix(src).expect("under src").display();
                out.push(format!("{rel}:{}: names `{word}`", n + 1));
            }
        }
    }
    out
}

#[test]
fn only_the_io_module_touches_the_file_system() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = file_system_outside_io(&src);
    assert!(
        v.is_empty(),
        "open, read and write files through crate::io:\n{}",
        v.join("\n")
    );
}

/// The check finds a direct open, and a question of what a path is, outside `io/` and leaves
/// comments, strings and `io/` alone.
#[test]
fn the_file_system_check_finds_a_direct_open() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |p: &str, t: &str| write_file(src, p, t);
    write("lib.rs", "pub mod io;\npub mod text;\n");
    write(
        "io/mod.rs",
        "pub fn open() { let _ = std::fs::File::open(\"x\"); }\n",
    );
    write(
        "text/mod.rs",
        "// std::fs in a comment\nconst S: &str = \"std::fs\";\nfn f() {\n    let _ = std::fs::read(\"y\");\n    let _ = p.is_dir();\n}\n",
    );
    let v = file_system_outside_io(src);
    assert_eq!(
        v,
        [
            "text/mod.rs:4: names `std::fs`",
            "text/mod.rs:5: names `.is_dir()`"
        ],
        "{v:#?}"
    );
}

/// The top-level modules of `src/` (folders and files, by name).
fn top_level_modules(src: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_string();
            (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(name)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_top_level_module_is_in_the_architecture_picture_and_its_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let picture = doc
        .split("```mermaid")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/architecture.md opens with a Mermaid picture of the layers");
    let missing: Vec<String> = top_level_modules(&root.join("src"))
        .into_iter()
        .filter(|m| {
            let in_picture = picture
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == m);
            let in_table = doc.contains(&format!("| `{m}` |"));
            !(in_picture && in_table)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md lacks these modules of src/ in its layer picture or its table: {missing:?}"
    );
    // The picture's layers are the checked ones.
    for layer in LAYERS {
        let line = layer.join(" · ");
        assert!(
            picture.contains(&format!("\"{line}\"")),
            "the picture has no layer \"{line}\" (LAYERS)"
        );
    }
}

/// What only the command frame (`src/frame/`) may do, besides the modules that define it:
/// lock a folder, make the output writer, set up the stop handler, record a folder's maker.
const FRAME_ONLY: &[(&str, &[&str])] = &[
    ("FolderLock::acquire", &["io"]),
    ("Outputs::new", &["io"]),
    ("set_owner(", &["io"]),
    ("stop::install", &[]),
    ("stop::configure", &[]),
    ("stop::hold", &[]),
    ("stop::release", &[]),
];

/// Where `src` does what only the frame may, and the subcommands that do not go through it:
/// every file of `cli/` that declares clap arguments implements `Command`, keeps its work in a
/// private function, and `cli/mod.rs` hands every subcommand to `frame::execute` once.
fn outside_the_frame(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in source_files(src) {
        let rel = f
            .path
            .strip_prefix(src)
            .expect("under src")
            .display()
            .to_string();
        for (word, owners) in FRAME_ONLY {
            let allowed = f.module[0] == "frame" || owners.contains(&f.module[0].as_str());
            if !allowed && f.code.contains(word) {
                out.push(format!("{rel}: names `{word}`, which only src/frame/ may"));
            }
        }
        if f.module.first().is_some_and(|m| m == "cli") {
            let declares = f.code.contains("clap::Args") || f.code.contains("clap::Subcommand");
            if f.is_mod_rs {
                let calls = f.code.matches("frame::execute(").count();
                if calls != 1 {
                    out.push(format!(
                        "{rel}: calls frame::execute {calls} times; every subcommand goes through it once"
                    ));
                }
            } else if declares {
                if !f.code.contains("impl super::Command for") {
                    out.push(format!(
                        "{rel}: its subcommand does not implement super::Command"
                    ));
                }
                if f.code.contains("pub fn run(") {
                    out.push(format!(
                        "{rel}: a public `run` could be called without the frame; keep it private"
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_command_runs_inside_the_frame() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let v = outside_the_frame(&src);
    assert!(v.is_empty(), "the command frame:\n{}", v.join("\n"));
}

/// The frame check finds a lock taken by a command, a subcommand without the trait, and a
/// second way to run commands.
#[test]
fn the_frame_check_finds_a_command_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |p: &str, t: &str| write_file(src, p, t);
    write(
        "cli/mod.rs",
        "fn run() { trueneg::frame::execute(&p, |c| x(c)); trueneg::frame::execute(&p, |c| y(c)); }\n",
    );
    write(
        "cli/good.rs",
        "#[derive(clap::Args)]\npub struct Args;\nimpl super::Command for Args {}\nfn run() {}\n",
    );
    write(
        "cli/bad.rs",
        "#[derive(clap::Args)]\npub struct Args;\npub fn run() { trueneg::stop::install(); }\n",
    );
    write(
        "train/run.rs",
        "fn f() { let _l = crate::io::lock::FolderLock::acquire(d, \"x\"); }\n",
    );
    write(
        "frame/claim.rs",
        "fn f() { FolderLock::acquire(d, \"x\"); }\n",
    );
    let v = outside_the_frame(src);
    let expected = [
        "cli/bad.rs: names `stop::install`, which only src/frame/ may",
        "cli/bad.rs: its subcommand does not implement super::Command",
        "cli/bad.rs: a public `run` could be called without the frame; keep it private",
        "cli/mod.rs: calls frame::execute 2 times; every subcommand goes through it once",
        "train/run.rs: names `FolderLock::acquire`, which only src/frame/ may",
    ];
    assert_eq!(v, expected, "{v:#?}");
}
