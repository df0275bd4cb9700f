//! Compiles, with the `tch` feature, `csrc/c10d.cpp` (the bridge to LibTorch's distributed
//! engine), `csrc/ops.cpp` (the operation counter of `bench --count-ops`) and `csrc/autograd.cpp`
//! (the backward pass of the LibTorch calls burn hands over): against the
//! LibTorch that torch-sys links (`LIBTORCH`, or the `torch` of `python3` with
//! `LIBTORCH_USE_PYTORCH`), and gloo's headers (Debian's `libgloo-dev`).

#[cfg(feature = "tch")]
use std::path::PathBuf;
#[cfg(feature = "tch")]
use std::process::Command;

#[cfg(feature = "tch")]
fn libtorch() -> PathBuf {
    if let Ok(dir) = std::env::var("LIBTORCH") {
        return PathBuf::from(dir);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-c",
            "import os, torch; print(os.path.dirname(torch.__file__))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("LIBTORCH is not set and {python} did not run: {e}"));
    assert!(
        out.status.success(),
        "LIBTORCH is not set and `{python} -c 'import torch'` failed"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The commit the build is made from (`git describe`-like: short hash, `-dirty` when the work
/// tree differs), "unknown" outside a git checkout.
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            // `status` would otherwise refresh `.git/index`, which this script watches: every
            // build would then find it changed and build the crate again.
            .arg("--no-optional-locks")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{hash}-dirty") } else { hash }
        }
        None => "unknown".into(),
    }
}

/// The version line's facts: the commit and the compiled features (`trueneg --version`).
fn version_facts() {
    // A new commit or a moved branch rebuilds the line. Only files that exist are watched:
    // cargo takes a missing one as changed, and would build the crate again on every command
    // (a checkout without `packed-refs`, or a branch whose ref is packed).
    let mut watched = vec![
        ".git/HEAD".to_string(),
        ".git/index".into(),
        ".git/packed-refs".into(),
    ];
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        watched.push(format!(".git/{r}"));
    }
    for f in watched {
        if std::path::Path::new(&f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    println!("cargo:rustc-env=TRUENEG_COMMIT={}", commit());
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();
    println!("cargo:rustc-env=TRUENEG_FEATURES={}", features.join(","));
}

fn main() {
    version_facts();
    println!("cargo:rerun-if-changed=csrc/c10d.cpp");
    println!("cargo:rerun-if-changed=csrc/cuda.cpp");
    println!("cargo:rerun-if-changed=csrc/ops.cpp");
    println!("cargo:rerun-if-changed=csrc/autograd.cpp");
    println!("cargo:rerun-if-changed=csrc/guarded.h");
    println!("cargo:rerun-if-env-changed=CUDA_INCLUDE");
    println!("cargo::rustc-check-cfg=cfg(trueneg_cuda)");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=GLOO_INCLUDE");
    #[cfg(feature = "tch")]
    bridge();
}

#[cfg(feature = "tch")]
fn bridge() {
    let torch = libtorch();
    let gloo =
        PathBuf::from(std::env::var("GLOO_INCLUDE").unwrap_or_else(|_| "/usr/include".into()));
    assert!(
        gloo.join("gloo/algorithm.h").exists(),
        "the `tch` feature's c10d bridge needs gloo's headers in {} (Debian: apt-get install libgloo-dev; elsewhere set GLOO_INCLUDE)",
        gloo.display()
    );
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
        .cpp(true)
        .file("csrc/c10d.cpp")
        .file("csrc/ops.cpp")
        .file("csrc/autograd.cpp")
        .std("c++17")
        .define("USE_C10D_GLOO", None)
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .include(torch.join("include"))
        .include(torch.join("include/torch/csrc/api/include"))
        .include(&gloo)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("trueneg_c10d");
    println!(
        "cargo:rustc-link-search=native={}",
        torch.join("lib").display()
    );
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    // The libraries LibTorch's own libraries need (CUDA's, or `libtorch_cuda.so` left out of a
    // CPU-only extraction) are found at run time, on the library path, not at link time. As a
    // link argument of this package's binaries only, not RUSTFLAGS: those would build every
    // dependency again instead of sharing the default build's.
    println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
    cuda_bridge(&torch);
}

/// The first folder holding `header` among the CUDA include folders a LibTorch is used with:
/// `CUDA_INCLUDE` (folders separated by ':'), PyTorch's `nvidia-*` wheels beside it,
/// `/usr/local/cuda/include`.
#[cfg(feature = "tch")]
fn include_with(torch: &std::path::Path, header: &str) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var("CUDA_INCLUDE")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    if let Some(site) = torch.parent()
        && let Ok(entries) = std::fs::read_dir(site.join("nvidia"))
    {
        let mut wheels: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("include"))
            .collect();
        wheels.sort();
        candidates.extend(wheels);
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates.into_iter().find(|d| d.join(header).exists())
}

/// Compiles `csrc/cuda.cpp` (CUDA graphs, NCCL) when the LibTorch has CUDA and CUDA's and
/// NCCL's headers are found, and sets `cfg(trueneg_cuda)`; otherwise the build goes on
/// without them (a CPU LibTorch, or headers missing: a warning says which).
#[cfg(feature = "tch")]
fn cuda_bridge(torch: &std::path::Path) {
    if !torch.join("lib/libtorch_cuda.so").exists() {
        return;
    }
    // CUDA's runtime headers and those they include, from a CUDA toolkit or from PyPI's
    // nvidia-cuda-runtime (PyTorch's), nvidia-cuda-crt and nvidia-cuda-cccl; NCCL's.
    let headers = [
        "cuda_runtime_api.h",
        "crt/host_config.h",
        "nv/target",
        "nccl.h",
    ];
    let found: Vec<Option<PathBuf>> = headers.iter().map(|h| include_with(torch, h)).collect();
    if let Some(i) = found.iter().position(Option::is_none) {
        println!(
            "cargo:warning=LibTorch has CUDA, but {} was not found (a CUDA toolkit, or pip install nvidia-cuda-crt nvidia-cuda-cccl of PyTorch's CUDA version; or set CUDA_INCLUDE): building without CUDA graphs and NCCL",
            headers[i]
        );
        return;
    }
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into());
    cc::Build::new()
        .cpp(true)
        .file("csrc/cuda.cpp")
        .std("c++17")
        .define("USE_C10D_NCCL", None)
        .define("USE_CUDA", None)
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .include(torch.join("include"))
        .include(torch.join("include/torch/csrc/api/include"))
        .includes(found.into_iter().flatten())
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("trueneg_cuda");
    println!("cargo:rustc-link-lib=dylib=torch_cuda");
    println!("cargo:rustc-link-lib=dylib=c10_cuda");
    println!("cargo:rustc-cfg=trueneg_cuda");
}
