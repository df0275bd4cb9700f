#!/usr/bin/env bash
# The LibTorch path's tests (feature `tch`): tests/libtorch.rs (attention, LayerNorm, GELU and
# the cross-entropy as LibTorch calls, against burn's composed operations), tests/suite/golden.rs
# (the whole model against transformers, on burn's flex backend and on LibTorch) and
# tests/suite/distributed.rs (processes joined by LibTorch's c10d and Gloo; needs gloo's headers,
# Debian's libgloo-dev), tests/host_reads.rs (the training step reads nothing back from
# LibTorch's device) and tests/suite/fixed_step.rs (the fixed-shape step rewritten in place; on
# libtorch-cuda also recorded as a CUDA graph).
#
# Which LibTorch:
#   - with PYTHON set, the one scripts/build-gpu.sh chooses for that Python's torch (its own
#     where it is 2.9 to 2.12; CI passes its venv's, so the wheel is not fetched twice), with
#     the CUDA libraries of its environment on the library path (no GPU needed to load them);
#   - otherwise PyTorch's wheel from PyPI (no dependencies installed), its CPU library only, so
#     that no GPU and no CUDA libraries beyond the two that library loads (`libcudart`,
#     `libcupti`, from their PyPI wheels) are needed. The wheel's files are kept in the cache
#     folder.
# On a GPU machine, build against the whole wheel instead (README) and set
# TRUENEG_LIBTORCH_DEVICE=libtorch-cuda to run the same tests on the GPU.
#
# The tests: the suite's subjects that have LibTorch cases (golden, optimizer, distributed,
# fixed_step), tests/libtorch.rs and tests/host_reads.rs.
#
# Usage: scripts/libtorch-tests.sh [cargo test arguments...]
#   PYTHON          the Python whose torch to build against (see above)
#   TORCH_VERSION   without PYTHON: PyTorch version (default 2.12.1, the newest tch 0.22 builds
#                   against: see scripts/build-gpu.sh)
#   TRUENEG_CACHE   cache folder (default $HOME/.cache/trueneg)
#   TARGET_DIR      cargo's target folder (default target/tch; CI: target, where the crates
#                   the `tch` feature does not change are shared with the default build)
#   CLIPPY          set: also `cargo clippy --features tch` (warnings are errors), as CI does
#   GPU_STANDIN     set (with PYTHON): also the GPU scripts with their CPU stand-in
#                   (scripts/gpu/standin.sh), as CI does
set -euo pipefail
cd "$(dirname "$0")/.."

# The libraries of LibTorch's CPU build: without libtorch_cuda.so, torch-sys links none of CUDA.
libs=(libtorch_cpu.so libtorch.so libc10.so libgomp.so.1 libshm.so)
target=${TARGET_DIR:-target/tch}

if [ -n "${PYTHON:-}" ]; then
  facts=$(scripts/build-gpu.sh --check)
  echo "$facts" | grep -v '^LIBTORCH' >&2 || true
  torch=$(sed -n 's/^LIBTORCH=//p' <<<"$facts")
  export LIBTORCH_CXX11_ABI
  LIBTORCH_CXX11_ABI=$(sed -n 's/^LIBTORCH_CXX11_ABI=//p' <<<"$facts")
  # That PyTorch's CUDA libraries (the run path after LibTorch's own folder).
  cuda_libs=$(sed -n 's/^LIBTORCH_RUN_PATH=[^:]*:\{0,1\}//p' <<<"$facts")
  if [ ! -f "$torch/lib/libtorch_cpu.so" ]; then
    echo "libtorch-tests: $torch/lib/libtorch_cpu.so missing: build once with scripts/build-gpu.sh, or leave PYTHON unset" >&2
    exit 1
  fi
  # A view of it with the CPU libraries only (links, nothing copied), as the wheel's extraction
  # below: linked against libtorch_cuda.so, burn-tch's CUDA stub needs a symbol that
  # PyTorch 2.12 changed.
  view=$target/libtorch-cpu/torch
  [[ $view = /* ]] || view=$PWD/$view
  rm -rf "$view" && mkdir -p "$view/lib"
  ln -s "$torch/include" "$view/include"
  for l in "${libs[@]}"; do
    ln -s "$torch/lib/$l" "$view/lib/$l"
  done
  export LIBTORCH=$view
  run_path=$LIBTORCH/lib${cuda_libs:+:$cuda_libs}
else
  version=${TORCH_VERSION:-2.12.1}
  cache=${TRUENEG_CACHE:-$HOME/.cache/trueneg}/libtorch-$version-cpu

  if [ ! -f "$cache/.complete" ]; then
    echo "libtorch-tests: fetching torch $version's wheel into $cache" >&2
    rm -rf "$cache" && mkdir -p "$cache/wheels"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$cache/wheels" \
      "torch==$version" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cupti==13.0.*"
    # Headers and the CPU libraries only.
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
  run_path=$cache/torch/lib:$(find "$cache/nvidia" -name lib -type d | paste -sd:)
fi

# tch 0.22 was generated for PyTorch 2.9; 2.9 to 2.12 build and run.
export LIBTORCH_BYPASS_VERSION_CHECK=1
# The libraries LibTorch's need, for the linker (libraries of libraries) and at run time.
export LD_LIBRARY_PATH=$run_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -n "${CLIPPY:-}" ]; then
  cargo clippy --release --features tch --all-targets --target-dir "$target" -- -D warnings
fi
cargo test --release --features tch --target-dir "$target" --test libtorch --test host_reads "$@"
cargo test --release --features tch --target-dir "$target" --test suite "$@" -- \
  golden:: optimizer:: distributed:: fixed_step:: --skip finetune_golden::
# The GPU scripts a lent GPU runs first (scripts/gpu.sh quick and finetune), run as written with
# their CPU stand-in (scripts/gpu/standin.sh): a lent GPU's minutes then go to measuring, not to
# mending a script. They need PYTHON's torch and transformers.
if [ -n "${GPU_STANDIN:-}" ] && [ -n "${PYTHON:-}" ]; then
  PYTHON=$PYTHON scripts/gpu/standin.sh "$target/release/trueneg"
fi
