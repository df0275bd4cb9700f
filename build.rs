//! Compiles `csrc/c10d.cpp`, the bridge to LibTorch's distributed engine, with the `tch`
//! feature: against the LibTorch that torch-sys links (`LIBTORCH`, or the `torch` of
//! `python3` with `LIBTORCH_USE_PYTORCH`), and gloo's headers (Debian's `libgloo-dev`).

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

fn main() {
    println!("cargo:rerun-if-changed=csrc/c10d.cpp");
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
}
