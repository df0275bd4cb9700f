//! An objective is one file: the identifiers an objective's file declares (its `pub` items and
//! its module path) appear in at most three source files: its own, the registry
//! (`objective/mod.rs`) and one more (its step or its statistics).
//!
//! The masked-LM step's own losses (`mlm.rs`, `rtd.rs`: the baseline, which every step
//! trains with), the terms machinery (`terms.rs`) and what parts do between steps
//! (`between.rs`) are not objectives. The registry's
//! protocol names parts declare (`NAME`, `build`, `LABELS`, `TERM`) are shared, not an objective's own.
//!
//! A training step with data of its own (every step but the masked-LM one) is named, in code or
//! prose, in at most six files: its step, its loss, the two registries, its manifest field and
//! one more; the layers below (text, evaluation, experiments, the command line) speak of the
//! data it trains on, not of the step.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::{code, is_ident, mentions};

const MAX_FILES: usize = 3;
const NOT_OBJECTIVES: [&str; 7] = [
    "mod",
    "terms",
    "between",
    "mlm",
    "rtd",
    "kind",
    "part_registry",
];
const PROTOCOL: [&str; 4] = ["NAME", "build", "LABELS", "TERM"];
const MAX_STEP_FILES: usize = 6;
/// The step of packed examples, the one without data of its own.
const MASKED_LM_STEP: &str = "masked_lm";

/// The `pub` items a file declares at its top level.
fn declared(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in code.lines() {
        let Some(rest) = l.strip_prefix("pub ") else {
            continue;
        };
        let mut words = rest.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty());
        if let (Some(kind), Some(name)) = (words.next(), words.next())
            && ["fn", "struct", "enum", "const", "type", "trait", "static"].contains(&kind)
            && !PROTOCOL.contains(&name)
        {
            out.insert(name.to_string());
        }
    }
    out
}

/// Every source file of `src`: its path relative to `src` and its text, in path order.
fn sources(src: &Path) -> Vec<(String, String)> {
    crate::common::rust_files(src)
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap().display().to_string();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Each objective's file stem and the files (relative to `src/`) that name its identifiers.
fn spread(src: &Path) -> Vec<(String, BTreeSet<String>, Vec<String>)> {
    let sources: Vec<(String, String)> = sources(src)
        .into_iter()
        .map(|(rel, text)| (rel, code(&text)))
        .collect();
    let mut out = Vec::new();
    for (rel, text) in &sources {
        let Some(stem) = rel
            .strip_prefix("objective/")
            .and_then(|r| r.strip_suffix(".rs"))
        else {
            continue;
        };
        if NOT_OBJECTIVES.contains(&stem) {
            continue;
        }
        let mut ids = declared(text);
        ids.insert(format!("{stem}::"));
        let users = sources
            .iter()
            .filter(|(_, t)| ids.iter().any(|id| mentions(t, id)))
            .map(|(r, _)| r.clone())
            .collect();
        out.push((stem.to_string(), ids, users));
    }
    out
}

#[test]
fn every_objective_is_named_in_at_most_three_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let spread = spread(&src);
    let stems: Vec<&str> = spread.iter().map(|(s, _, _)| s.as_str()).collect();
    for expected in [
        "hard_correction",
        "soft_regularization",
        "sentence_regularization",
        "contrastive",
    ] {
        assert!(stems.contains(&expected), "{expected} not found: {stems:?}");
    }
    let mut bad = Vec::new();
    for (stem, ids, users) in &spread {
        println!("{stem}: {} files {users:?}", users.len());
        assert!(
            users.contains(&format!("objective/{stem}.rs")),
            "{stem}: {ids:?}"
        );
        if users.len() > MAX_FILES {
            bad.push(format!(
                "{stem} is named in {users:?} (identifiers {ids:?})"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Whether `text` names `word`, in any case and inside identifiers too (`ClineConfig`,
/// `cline_ori`), as `grep -il` counts.
fn names(text: &str, word: &str) -> bool {
    text.to_lowercase().contains(word)
}

#[test]
fn a_step_with_its_own_data_is_named_in_at_most_six_files() {
    let texts = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let steps: Vec<String> = texts
        .iter()
        .filter_map(|(rel, text)| {
            let stem = rel.strip_prefix("train/steps/")?.strip_suffix(".rs")?;
            let own = stem != MASKED_LM_STEP && text.contains("impl StepKind for");
            own.then(|| stem.to_string())
        })
        .collect();
    assert!(steps.contains(&"cline".to_string()), "{steps:?}");
    let mut bad = Vec::new();
    for step in &steps {
        let users: Vec<&str> = texts
            .iter()
            .filter(|(rel, text)| names(text, step) || rel.contains(step.as_str()))
            .map(|(rel, _)| rel.as_str())
            .collect();
        println!("{step}: {} files {users:?}", users.len());
        if users.len() > MAX_STEP_FILES {
            bad.push(format!(
                "{step} is named in {} files: {users:?}",
                users.len()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(names("A CLINE corpus", "cline") && names("ClineLossConfig", "cline"));
    assert!(!names("the step on triples", "cline"));
}

#[test]
fn the_count_sees_identifiers_not_their_substrings_or_comments() {
    let text = code("use a::HcConfig;\nlet x = MyHcConfig; // HcConfig\nhard_correction::run();\n");
    assert!(mentions(&text, "HcConfig"));
    assert!(mentions(&text, "hard_correction::"));
    assert!(!mentions("let x = MyHcConfig;", "HcConfig"));
    assert!(!mentions("// HcConfig", "x") && !mentions(&code("// HcConfig"), "HcConfig"));
    let d = declared(
        "pub struct A;\npub fn build() {}\npub(crate) fn c() {}\npub const NAME: &str = \"x\";\n",
    );
    assert_eq!(d, BTreeSet::from(["A".to_string()]));
}

/// The registry's lines (`module::ConfigType => field,`) inside `parts! { … }` of
/// `objective/mod.rs`, as (line, module).
fn registry_lines(registry: &str) -> Vec<(String, String)> {
    let block = registry
        .split("parts! {")
        .nth(1)
        .and_then(|b| b.split('}').next())
        .expect("objective/mod.rs holds the registry `parts! { … }`");
    block
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("=>"))
        .map(|l| (l.to_string(), l.split("::").next().unwrap().to_string()))
        .collect()
}

/// A part of the masked-LM step is its own file plus one line of the registry: every file of
/// `objective/` with a part's protocol (`NAME`, `build`) is registered, and the registry file
/// names each part on that one line only (its module, its config type, its identifiers).
#[test]
fn a_part_is_its_file_and_one_registry_line() {
    let texts = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let text_of = |rel: &str| code(&texts.iter().find(|(r, _)| r == rel).unwrap().1);
    let registry = text_of("objective/mod.rs");
    let lines = registry_lines(&registry);
    let registered: Vec<&str> = lines.iter().map(|(_, m)| m.as_str()).collect();
    assert!(registered.contains(&"hard_correction"), "{lines:?}");
    for (rel, text) in &texts {
        let Some(stem) = rel
            .strip_prefix("objective/")
            .and_then(|r| r.strip_suffix(".rs"))
        else {
            continue;
        };
        let text = code(text);
        if text.contains("pub const NAME") && text.contains("pub fn build(") {
            assert!(
                registered.contains(&stem),
                "{rel} is a part but not registered"
            );
        }
    }
    for (line, module) in &lines {
        let mut ids = declared(&text_of(&format!("objective/{module}.rs")));
        ids.insert(format!("{module}::"));
        ids.insert(module.clone());
        let naming: Vec<&str> = registry
            .lines()
            .filter(|l| ids.iter().any(|id| mentions(l, id)))
            .map(str::trim)
            .collect();
        assert_eq!(
            naming,
            [line.as_str()],
            "objective/mod.rs names {module} on more than its line"
        );
    }
}
