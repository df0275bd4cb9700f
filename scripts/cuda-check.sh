#!/usr/bin/env bash
# The `cuda` feature's type-check (burn's CubeCL CUDA backend; no GPU needed): clippy with
# warnings as errors, in the default target folder so that every crate whose features `cuda`
# does not change is shared with the default build's check.
#
# It runs only when a file that compiles differently with `cuda` changed since the last check
# that passed. Those files are the manifest and lock file, build.rs, the LLVM toolchain
# script, and the sources that name the feature or match on burn's device kinds (which `cuda`
# extends). Their digest at that check is recorded in .ci/cuda-checked; a change in any other
# file compiles the same with and without `cuda`, and the default clippy checks it.
#
# Usage: scripts/cuda-check.sh [--if-changed] [--record]
#   --if-changed  skip the check (and say so) when the digest equals the recorded one
#   --record      after a passing check, write the digest to .ci/cuda-checked
set -euo pipefail
cd "$(dirname "$0")/.."

if_changed=
record=
for arg in "$@"; do
  case $arg in
    --if-changed) if_changed=1 ;;
    --record) record=1 ;;
    *) echo "cuda-check: unknown argument $arg (expected --if-changed or --record)" >&2; exit 2 ;;
  esac
done

# The files whose content the `cuda` build depends on beyond the default build's.
files=$({
  printf '%s\n' Cargo.toml Cargo.lock build.rs scripts/cuda-toolchain.sh scripts/cuda-check.sh
  git grep -l -e 'feature = "cuda"' -e 'DispatchDevice' -- src
} | sort -u)
# shellcheck disable=SC2086
digest=$(sha256sum $files | sha256sum | cut -c1-16)
recorded=$(cat .ci/cuda-checked 2>/dev/null || true)

if [ -n "$if_changed" ] && [ "$digest" = "$recorded" ]; then
  echo "cuda-check: skipped, the files it compiles differently are as at the last check ($digest):" \
    $files
  exit 0
fi
echo "cuda-check: checking (digest $digest, recorded ${recorded:-none})"
scripts/cuda-toolchain.sh
cargo clippy --release --features cuda -- -D warnings
if [ -n "$record" ]; then
  echo "$digest" >.ci/cuda-checked
  echo "cuda-check: recorded $digest in .ci/cuda-checked"
fi
