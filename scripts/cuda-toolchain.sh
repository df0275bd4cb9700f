#!/usr/bin/env bash
# Offline LLVM for burn's `cuda` feature.
#
# burn's CUDA backend (CubeCL) depends on `cubecl-llvm`, whose build-dependency
# `tracel-llvm-bundler` downloads a prebuilt LLVM 23.1 from outside the package registries
# unless its install folder already holds the sentinel file `.tracel-llvm-installed`.
# This script puts PyPI's static LLVM 23.1 wheels (`mlc-llvm-static` with the NVPTX target,
# headers and a Python `llvm-config`) in that place instead, so that
#
#     cargo build --release --features cuda
#
# builds with the package registries alone. Idempotent; `python3` must stay on PATH for the
# wheel's `llvm-config`.
#
# Usage: scripts/cuda-toolchain.sh [PREFIX]   (default: $HOME/.cache/trueneg/llvm-23.1)
set -euo pipefail

version=23.1.1.post0
prefix=${1:-${TRUENEG_LLVM_PREFIX:-$HOME/.cache/trueneg/llvm-23.1}}
data_home=${XDG_DATA_HOME:-$HOME/.local/share}
bundle=$data_home/tracel/tracel-llvm-23.1.0-4

if [ ! -x "$prefix/mlc_llvm_static/static/bin/llvm-config" ] &&
  [ ! -e "$prefix/mlc_llvm_static/static/bin/llvm-config" ]; then
  echo "cuda-toolchain: installing mlc-llvm-static $version into $prefix" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$prefix" \
    "mlc-llvm-static==$version" "mlc-llvm-static-extra-targets==$version"
fi
static=$prefix/mlc_llvm_static/static
[ -d "$static/lib" ] || { echo "cuda-toolchain: $static/lib missing after install" >&2; exit 1; }

mkdir -p "$(dirname "$bundle")"
if [ -L "$bundle" ] || [ ! -e "$bundle" ]; then
  ln -sfn "$static" "$bundle"
elif [ ! -e "$bundle/.tracel-llvm-installed" ]; then
  echo "cuda-toolchain: $bundle exists and is not an LLVM install; move it away first" >&2
  exit 1
fi
touch "$bundle/.tracel-llvm-installed"
echo "cuda-toolchain: LLVM $("$static/bin/llvm-config" --version) ready at $bundle" >&2
