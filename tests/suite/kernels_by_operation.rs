//! Kernels by operation: an operation (`src/kernels/<op>.rs` with its LibTorch call in
//! `src/kernels/<op>/torch.rs`, either declaring a backend extension of its own) is named
//! outside its module (`<op>.rs` and `<op>/`) only by the declaration in `kernels/mod.rs` and
//! by calls through its path (`<op>::item`), so that changing it means reading one place.
//! LayerNorm, whose module is two files, is named in at most three files under `src/kernels/`.

use std::path::{Path, PathBuf};

/// An operation fused into another's kernel is also named by that operation's module:
/// attention draws and applies the dropout on its probabilities inside its own kernel (and
/// LibTorch's call takes its probability).
const FUSED_INTO: &[(&str, &str)] = &[("dropout", "attention")];

/// Whether `text` names the operation `op` (`layer_norm`): as `layer_norm`, `LayerNorm`,
/// `layer norm` or `layer-norm`, in code or prose.
fn names(text: &str, op: &str) -> bool {
    let plain: String = text
        .to_lowercase()
        .chars()
        .filter(|c| !matches!(c, '_' | ' ' | '-'))
        .collect();
    plain.contains(&op.replace('_', ""))
}

/// Whether `text` names `op` other than through its path (`param_cast::stale()`: a call of
/// the operation's own API, not a piece of it).
fn names_besides_calls(text: &str, op: &str) -> bool {
    names(&text.replace(&format!("{op}::"), ""), op)
}

/// Whether `file` (relative to `src/kernels`) belongs to operation `op`'s module.
fn in_module(file: &Path, op: &str) -> bool {
    file == Path::new(&format!("{op}.rs")) || file.starts_with(op)
}

/// The operations: the files of `src/kernels/` whose module, or whose `<op>/torch.rs`,
/// declares a backend extension.
fn operations(kernels: &Path) -> Vec<String> {
    let declares =
        |p: &Path| std::fs::read_to_string(p).is_ok_and(|t| t.contains("#[backend_extension("));
    let mut ops: Vec<String> = std::fs::read_dir(kernels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| declares(p) || declares(&p.with_extension("").join("torch.rs")))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    ops.sort();
    ops
}

#[test]
fn an_operation_is_named_outside_its_module_only_where_kernels_declares_it() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
    let files: Vec<PathBuf> = crate::common::rust_files(&kernels)
        .into_iter()
        .map(|f| f.strip_prefix(&kernels).unwrap().to_path_buf())
        .collect();
    let ops = operations(&kernels);
    let expected = [
        "adamw",
        "attention",
        "cross_entropy",
        "dropout",
        "gelu",
        "grad_watch",
        "layer_norm",
        "linear",
        "param_cast",
        "sampling",
        "select_rows",
    ];
    assert_eq!(ops, expected, "the operations found");
    // No layer-wide extension is left: every backend extension sits in an operation's module.
    for f in &files {
        let text = std::fs::read_to_string(kernels.join(f)).unwrap();
        let owned = ops.iter().any(|op| in_module(f, op));
        assert!(
            owned || !text.contains("#[backend_extension("),
            "{} declares a backend extension outside an operation's module",
            f.display()
        );
    }
    let mut bad = Vec::new();
    for op in &ops {
        let fused_into: Vec<&str> = FUSED_INTO
            .iter()
            .filter(|(inner, _)| inner == op)
            .map(|(_, outer)| *outer)
            .collect();
        let outside: Vec<String> = files
            .iter()
            .filter(|f| !in_module(f, op) && !fused_into.iter().any(|o| in_module(f, o)))
            .filter(|f| *f != Path::new("mod.rs"))
            .filter(|f| {
                let text = std::fs::read_to_string(kernels.join(f)).unwrap();
                names_besides_calls(&text, op)
            })
            .map(|f| f.display().to_string())
            .collect();
        println!("{op}: named outside its module in {outside:?}");
        if !outside.is_empty() {
            bad.push(format!("{op} is named outside its module in {outside:?}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let layer_norm = files
        .iter()
        .filter(|f| {
            names(
                &std::fs::read_to_string(kernels.join(f)).unwrap(),
                "layer_norm",
            )
        })
        .count();
    assert!(
        layer_norm <= 3,
        "LayerNorm is named in {layer_norm} kernel files"
    );
}

#[test]
fn an_operations_name_is_found_in_any_spelling_and_its_module_is_its_folder() {
    assert!(names("LayerNorm's", "layer_norm") && names("a layer norm", "layer_norm"));
    assert!(names("the MLM cross-entropy", "cross_entropy"));
    assert!(!names("the normalisation", "layer_norm"));
    assert!(!names_besides_calls(
        "super::param_cast::stale();",
        "param_cast"
    ));
    assert!(names_besides_calls("use super::param_cast;", "param_cast"));
    assert!(in_module(Path::new("gelu.rs"), "gelu"));
    assert!(in_module(Path::new("gelu/torch.rs"), "gelu"));
    assert!(!in_module(Path::new("gemm.rs"), "gelu"));
}
