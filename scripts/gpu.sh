#!/usr/bin/env bash
# The GPU measurements and checks, one entry point with named parts (each a script in
# scripts/gpu/, which documents its arguments and variables at its top):
#   bench    trueneg against PyTorch's step on one GPU, alternating (BERT or ELECTRA sizes)
#   electra  the ELECTRA step: against torch_electra_bench.py, where its time goes, and the
#            `electra-small` preset end to end, recorded and not
#   graph    the recorded step (CUDA graph) and the collectives: same curves, same resumes
#   quick    the most wanted of `electra` and `graph`, sized for one short device call
#   finetune the fine-tuning step against transformers' model in PyTorch (Small and Base)
# Each needs a `tch` build against a LibTorch with CUDA (scripts/build-gpu.sh) and the python3
# whose PyTorch it was built against.
#
#   scripts/gpu.sh PART ARGS...
set -euo pipefail
here=$(dirname "$0")
part=${1:-}
case "$part" in
  bench | electra | graph | quick | finetune)
    shift
    exec "$here/gpu/$part.sh" "$@"
    ;;
  *)
    echo "usage: scripts/gpu.sh bench|electra|graph|quick|finetune ARGS... (see scripts/gpu/PART.sh)" >&2
    exit 2
    ;;
esac
