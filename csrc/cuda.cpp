// trueneg's bridge to the CUDA parts of LibTorch that tch does not bind: CUDA graphs
// (at::cuda::CUDAGraph: a step captured once and replayed) and ProcessGroupNCCL (gradient
// all-reduce between GPUs). Compiled only against a LibTorch that has CUDA (build.rs); the
// functions follow csrc/c10d.cpp's convention: 0 on success, else the C++ exception's text in
// `err`.

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "guarded.h"

#include <chrono>

namespace {

using trueneg_bridge::guarded;

// A graph and the side stream it is captured and replayed on (capture needs a stream other
// than the default one; the steps before it, the warm-up, run there too).
struct Graph {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream stream;
  c10::cuda::CUDAStream previous;
  Graph(c10::cuda::CUDAStream s, c10::cuda::CUDAStream p) : stream(s), previous(p) {}
};

}  // namespace

// Used by csrc/c10d.cpp (a weak reference there: a CPU-only build has no NCCL).
c10::intrusive_ptr<c10d::Backend> trueneg_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, int timeout_ms) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = std::chrono::milliseconds(timeout_ms);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
}

extern "C" {

// A graph for `device`; from now on this thread's work on `device` runs on the graph's side
// stream (after everything queued on the current one).
int trueneg_graph_new(int device, void** out, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto index = static_cast<c10::DeviceIndex>(device);
    auto previous = c10::cuda::getCurrentCUDAStream(index);
    auto stream = c10::cuda::getStreamFromPool(false, index);
    previous.synchronize();
    c10::cuda::setCurrentCUDAStream(stream);
    *out = new Graph(stream, previous);
  });
}

// Starts recording this thread's work on the side stream into the graph (allocations come
// from the graph's private memory pool). The blocks the warm-up steps left cached go back to
// the device first: the graph's pool cannot reuse them, so kept they would only add the
// warm-up's working memory to the recorded step's.
int trueneg_graph_begin(void* graph, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto* g = static_cast<Graph*>(graph);
    g->stream.synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    g->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  });
}

int trueneg_graph_end(void* graph, char* err, size_t err_len) {
  return guarded(err, err_len, [&] { static_cast<Graph*>(graph)->graph.capture_end(); });
}

// Launches the recorded work again, as one graph, on the side stream.
int trueneg_graph_replay(void* graph, char* err, size_t err_len) {
  return guarded(err, err_len, [&] { static_cast<Graph*>(graph)->graph.replay(); });
}

// The caching allocator's peak bytes on `device` since the last reset, allocated to tensors
// and reserved from the device (`torch.cuda.max_memory_allocated` / `max_memory_reserved`);
// then resets both peaks when `reset` is not 0.
int trueneg_cuda_memory_peaks(int device, int reset, int64_t* allocated, int64_t* reserved,
                              char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto index = static_cast<c10::DeviceIndex>(device);
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    *allocated = stats.allocated_bytes[all].peak;
    *reserved = stats.reserved_bytes[all].peak;
    if (reset != 0) {
      c10::cuda::CUDACachingAllocator::resetPeakStats(index);
    }
  });
}

// Waits for the side stream, makes the previous stream current again and frees the graph.
void trueneg_graph_free(void* graph) {
  auto* g = static_cast<Graph*>(graph);
  try {
    g->stream.synchronize();
    c10::cuda::setCurrentCUDAStream(g->previous);
  } catch (...) {
  }
  delete g;
}

}  // extern "C"
