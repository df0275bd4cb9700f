//! Kernels by operation: an operation with a module of its own (`src/kernels/<op>.rs`, which
//! declares its backend extension, with its LibTorch call in `src/kernels/<op>/torch.rs`) is
//! named in at most three files under `src/kernels/` — its module, its LibTorch file and the
//! declaration in `kernels/mod.rs` — so that changing it means reading one place.

use std::path::Path;

const MAX_FILES: usize = 3;

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

#[test]
fn an_operation_with_its_own_module_is_named_in_at_most_three_kernel_files() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
    let files = crate::common::rust_files(&kernels);
    // An operation with a module of its own declares its backend extension there (the
    // layer-wide `flex.rs` and `libtorch.rs` hold the operations not yet moved).
    let ops: Vec<String> = std::fs::read_dir(&kernels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .contains("#[backend_extension(")
        })
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .filter(|name| name != "flex" && name != "libtorch")
        .collect();
    for op in ["layer_norm", "gelu", "cross_entropy", "adamw"] {
        assert!(
            ops.contains(&op.to_string()),
            "{op} not found among {ops:?}"
        );
    }
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
    assert!(names("the MLM cross-entropy", "cross_entropy"));
    assert!(!names("the normalisation", "layer_norm"));
}
