# Sourced by the one-call GPU scripts (scripts/gpu.sh's parts): makes the output folder $1, puts
# the LibTorch libraries of $PYTHON's (default python3's) PyTorch, which the `tch` build was
# built against, on the library path, and records which GPU the figures come from in
# $1/gpu.txt. It sets, for the scripts and the parts they call:
#   GPU_DEVICE    trueneg's device: libtorch-cuda
#   TORCH_DEVICE  PyTorch's: cuda
#   GRAPH_FLAG    bench's flag of the recorded step: --cuda-graph
#   GRAPH_ON      the value of pretrain's `train.cuda_graph` in a recorded run: true
# STANDIN=cpu runs the scripts as written on the CPU instead, to check them without a GPU:
# LibTorch's CPU device and PyTorch on the CPU, no GPU memory sampled (0), and in place of a
# recorded run the same run unrecorded (no flag; `train.cuda_graph = false`), so that a
# comparison of the two must find them identical.
gpu_setup() {
  mkdir -p "$1"
  local torch_lib
  torch_lib=$("${PYTHON:-python3}" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH=$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ "${STANDIN:-}" = cpu ]; then
    export GPU_DEVICE=libtorch TORCH_DEVICE=cpu GRAPH_FLAG= GRAPH_ON=false
    echo "CPU stand-in:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" | tee "$1/gpu.txt"
  else
    export GPU_DEVICE=libtorch-cuda TORCH_DEVICE=cuda GRAPH_FLAG=--cuda-graph GRAPH_ON=true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$1/gpu.txt"
  fi
}

# The GPU memory in use, MiB (0 for the CPU stand-in).
gpu_used_mib() {
  if [ "${STANDIN:-}" = cpu ]; then
    echo 0
  else
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1
  fi
}

# Runs "$@" while sampling the GPU memory in use every 50 ms into $1, one MiB figure a line (a
# single 0 for the CPU stand-in); returns the command's status.
with_gpu_memory() {
  local file=$1 sampler rc
  shift
  if [ "${STANDIN:-}" = cpu ]; then
    echo 0 >"$file"
    "$@"
    return
  fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 >"$file" &
  sampler=$!
  "$@"
  rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  return $rc
}
