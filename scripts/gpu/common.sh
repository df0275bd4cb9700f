# Sourced by the one-call GPU scripts (scripts/gpu.sh's parts): makes the
# output folder $1, puts the LibTorch libraries of python3's PyTorch (which the `tch` build was
# built against) on the library path, and records which GPU the figures come from in $1/gpu.txt.
gpu_setup() {
  mkdir -p "$1"
  local torch_lib
  torch_lib=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH=$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$1/gpu.txt"
}
