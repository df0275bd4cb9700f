#!/usr/bin/env bash
# The LibTorch path's tests (feature `tch`): tests/libtorch.rs (attention, LayerNorm, GELU and
# the cross-entropy as LibTorch calls, against burn's composed operations), tests/suite/golden.rs
# (the whole model against transformers, on burn's flex backend and on LibTorch) and
# tests/suite/distributed.rs (processes joined by LibTorch's c10d and Gloo; needs gloo's headers,
# Debian's libgloo-dev), tests/host_reads.rs (the training step reads nothing back from
# LibTorch's device) and tests/suite/fixed_step.rs (the fixed-shape step rewritten in place; on
# libtorch-cuda also recorded as a CUDA graph).
#
# Builds against PyTorch's wheel from PyPI (no dependencies installed), linked to its CPU
# library only, so that no GPU and no CUDA libraries beyond the two that library loads
# (`libcudart`, `libcupti`, from their PyPI wheels) are needed. The wheel's files are kept in
# the cache folder. On a GPU machine, build against the whole wheel instead (README) and set
# TRUENEG_LIBTORCH_DEVICE=libtorch-cuda to run the same tests on the GPU.
#
# Usage: scripts/libtorch-tests.sh [cargo test arguments...]
#   TORCH_VERSION   PyTorch version (default 2.12.1, the newest tch 0.22 builds against: see
#                   scripts/build-gpu.sh)
#   TRUENEG_CACHE   cache folder (default $HOME/.cache/trueneg)
#   CLIPPY          set: also `cargo clippy --features tch` (warnings are errors), as CI does
set -euo pipefail
cd "$(dirname "$0")/.."

version=${TORCH_VERSION:-2.12.1}
cache=${TRUENEG_CACHE:-$HOME/.cache/trueneg}/libtorch-$version-cpu
libs=(libtorch_cpu.so libtorch.so libc10.so libgomp.so.1 libshm.so)

if [ ! -f "$cache/.complete" ]; then
  echo "libtorch-tests: fetching torch $version's wheel into $cache" >&2
  rm -rf "$cache" && mkdir -p "$cache/wheels"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$cache/wheels" \
    "torch==$version" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cupti==13.0.*"
  # Headers and the CPU libraries only: without libtorch_cuda.so, torch-sys links none of CUDA.
  python3 - "$cache" "${libs[@]}" <<'PY'
import pathlib, sys, zipfile
cache = pathlib.Path(sys.argv[1])
libs = {f"torch/lib/{name}" for name in sys.argv[2:]}
for wheel in sorted((cache / "wheels").glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(("torch/include/", "nvidia/")) or name in libs:
                z.extract(name, cache)
PY
  chmod +x "$cache"/torch/lib/*.so* 2>/dev/null || true
  rm -rf "$cache/wheels"
  touch "$cache/.complete"
fi

export LIBTORCH=$cache/torch
# tch 0.22 was generated for PyTorch 2.9; 2.9 to 2.12 build and run.
export LIBTORCH_BYPASS_VERSION_CHECK=1
# libtorch.so names libtorch_cuda.so, which is left out (and not needed: no symbol of it is used).
export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--allow-shlib-undefined"
cuda_libs=$(find "$cache/nvidia" -name lib -type d | paste -sd:)
export LD_LIBRARY_PATH=$cache/torch/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -n "${CLIPPY:-}" ]; then
  cargo clippy --release --features tch --all-targets --target-dir target/tch -- -D warnings
fi
cargo test --release --features tch --target-dir target/tch --test libtorch --test golden --test optimizer \
  --test distributed --test host_reads --test fixed_step "$@"
