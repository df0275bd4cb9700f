#!/usr/bin/env bash
# Builds trueneg with the `tch` feature (LibTorch: the fast GPU path, and c10d for several
# processes) against the PyTorch that `python3 -c 'import torch'` finds, then prints how to run
# it. No flag to set by hand.
#
# Which LibTorch: burn 0.22's LibTorch backend binds tch 0.22.0, whose C++ wrapper was
# generated for PyTorch 2.9 and calls every ATen function 2.9 had. PyTorch 2.9 to 2.12 build
# and run with it. 2.13 removed `Tensor::align_as` and `align_tensors`, 2.14 `cholesky` and `qr`
# (and its headers need C++20), so tch 0.22.0's wrapper no longer compiles against them, and no
# tch release that burn 0.22 can use fixes that. With such a PyTorch the script takes the
# LibTorch of PyTorch 2.12.1 instead: its headers and libraries from its PyPI wheel (about
# 540 MB, fetched once into the cache folder), with the CUDA, cuDNN and NCCL libraries of your
# own environment at run time (CUDA 13 libraries run code built for an older CUDA 13).
#
# Usage: scripts/build-gpu.sh [--check] [cargo build arguments...]
#   --check          say which LibTorch the build would use, and build nothing
#   PYTHON           the Python whose torch to use (default python3)
#   TRUENEG_CACHE    cache folder (default $HOME/.cache/trueneg)
set -euo pipefail
cd "$(dirname "$0")/.."

check=
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
python=${PYTHON:-python3}
fallback=2.12.1
cache=${TRUENEG_CACHE:-$HOME/.cache/trueneg}/libtorch-$fallback

facts=$("$python" - <<'PY' 2>/dev/null
import os, site, torch
print(os.path.dirname(torch.__file__))
print(torch.__version__.split("+")[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
# The CUDA libraries PyTorch's wheel depends on (nvidia-* packages), for the run-time path.
dirs = []
for base in site.getsitepackages() + [site.getusersitepackages()]:
    root = os.path.join(base, "nvidia")
    for path, subdirs, _ in os.walk(root):
        if os.path.basename(path) == "lib":
            dirs.append(path)
print(":".join(sorted(dirs)))
PY
) || {
  echo "build-gpu: \`$python -c 'import torch'\` failed: install PyTorch (pip install torch) or set PYTHON to the Python that has it" >&2
  exit 1
}
{
  read -r torch_dir
  read -r version
  read -r abi
  read -r cuda_libs || true
} <<<"$facts"
IFS=. read -r major minor _ <<<"$version"

if [ "$major" -eq 2 ] && [ "$minor" -ge 9 ] && [ "$minor" -le 12 ]; then
  libtorch=$torch_dir
  echo "build-gpu: PyTorch $version at $torch_dir: building against it"
else
  echo "build-gpu: PyTorch $version at $torch_dir: tch 0.22.0 (burn 0.22's binding) builds against PyTorch 2.9 to 2.12 only; using PyTorch $fallback's LibTorch from $cache, with your environment's CUDA libraries"
  libtorch=$cache/torch
  abi=1
  if [ -z "$check" ] && [ ! -f "$cache/.complete" ]; then
    echo "build-gpu: fetching torch $fallback's wheel into $cache" >&2
    rm -rf "$cache" && mkdir -p "$cache/wheels"
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps -d "$cache/wheels" \
      "torch==$fallback"
    "$python" - "$cache" <<'PY'
import pathlib, sys, zipfile
cache = pathlib.Path(sys.argv[1])
for wheel in (cache / "wheels").glob("*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(("torch/include/", "torch/lib/")):
                z.extract(name, cache)
PY
    chmod +x "$cache"/torch/lib/*.so* 2>/dev/null || true
    rm -rf "$cache/wheels"
    touch "$cache/.complete"
  fi
fi

gloo=${GLOO_INCLUDE:-/usr/include}
if [ ! -f "$gloo/gloo/algorithm.h" ]; then
  echo "build-gpu: the c10d bridge needs gloo's headers in $gloo: apt-get install libgloo-dev (Debian, Ubuntu), or set GLOO_INCLUDE" >&2
  [ -n "$check" ] || exit 1
fi
if [ ! -f "$libtorch/lib/libtorch_cuda.so" ] && [ -z "$check" ]; then
  echo "build-gpu: note: $libtorch has no libtorch_cuda.so: this is a CPU-only PyTorch, so the build runs on \`libtorch\` (CPU) only" >&2
fi
crt_found=
for h in "$libtorch"/../nvidia/*/include/crt/host_config.h /usr/local/cuda/include/crt/host_config.h; do
  [ -f "$h" ] && crt_found=1
done
if [ -f "$libtorch/lib/libtorch_cuda.so" ] && [ -z "${CUDA_INCLUDE:-}" ] && [ -z "$crt_found" ]; then
  echo "build-gpu: note: CUDA's crt/ and nv/ headers were not found, so the build has no CUDA graphs (bench --cuda-graph) and no NCCL: pip install \"nvidia-cuda-crt==<PyTorch's CUDA>.*\" \"nvidia-cuda-cccl==<same>.*\", or set CUDA_INCLUDE to a CUDA toolkit's include folder (docs/gpu.md)" >&2
fi
run_path=$libtorch/lib${cuda_libs:+:$cuda_libs}
if [ -n "$check" ]; then
  echo "LIBTORCH=$libtorch"
  echo "LIBTORCH_CXX11_ABI=$abi"
  echo "LIBTORCH_RUN_PATH=$run_path"
  exit 0
fi

# tch 0.22.0 checks for PyTorch 2.9 exactly; the range above builds and runs. libtorch's CUDA
# libraries are found at run time (the library path below), not at link time (build.rs).
export LIBTORCH=$libtorch LIBTORCH_CXX11_ABI=$abi LIBTORCH_BYPASS_VERSION_CHECK=1
cargo build --release --features tch "$@"
cat <<EOF
build-gpu: built target/release/trueneg against $libtorch. Run it with LibTorch's libraries on
the library path, e.g.:

  export LD_LIBRARY_PATH=$run_path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
  target/release/trueneg pretrain --config electra-small --set train.device=libtorch-cuda
EOF
