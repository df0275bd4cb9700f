//! Kernels by operation: an operation with a module of its own (`src/kernels/<op>.rs` with its
//! LibTorch call in `src/kernels/<op>/`) is named in at most three files under `src/kernels/`
//! — its module, its LibTorch file and the declaration in `kernels/mod.rs` — so that changing
//! it means reading one place.

use std::path::{Path, PathBuf};

const MAX_FILES: usize = 3;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `text` names the operation `op` (`layer_norm`): as `layer_norm`, `LayerNorm` or
/// `layer norm`, in code or prose.
fn names(text: &str, op: &str) -> bool {
    let plain: String = text
        .to_lowercase()
        .chars()
        .filter(|c| !matches!(c, '_' | ' '))
        .collect();
    plain.contains(&op.replace('_', ""))
}

#[test]
fn an_operation_with_its_own_module_is_named_in_at_most_three_kernel_files() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
    let mut files = Vec::new();
    rust_files(&kernels, &mut files);
    files.sort();
    let ops: Vec<String> = std::fs::read_dir(&kernels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.with_extension("rs").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .filter(|name| name != "libtorch")
        .collect();
    assert!(ops.contains(&"layer_norm".to_string()), "{ops:?}");
    let mut bad = Vec::new();
    for op in &ops {
        let naming: Vec<String> = files
            .iter()
            .filter(|f| names(&std::fs::read_to_string(f).unwrap(), op))
            .map(|f| f.strip_prefix(&kernels).unwrap().display().to_string())
            .collect();
        println!("{op}: {naming:?}");
        if naming.len() > MAX_FILES {
            bad.push(format!("{op} is named in {naming:?}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(names("LayerNorm's", "layer_norm") && names("a layer norm", "layer_norm"));
    assert!(!names("the normalisation", "layer_norm"));
}
