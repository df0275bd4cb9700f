// trueneg's bridge to LibTorch's distributed engine (c10d): a TCPStore rendezvous and a
// ProcessGroupGloo (host buffers) or ProcessGroupNCCL (CUDA tensors, when LibTorch has it),
// exposed as a few C functions. CUDA tensors are summed by a second backend made at their
// first all-reduce: ProcessGroupNCCL (csrc/cuda.cpp, when LibTorch has CUDA) or Gloo. Every
// function catches C++ exceptions and returns their text through `err` (a buffer of `err_len`
// bytes); 0 means success (csrc/guarded.h).

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "guarded.h"

#include <c10/util/Logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  // For CUDA tensors (NCCL or a second Gloo group), made when first needed.
  c10::intrusive_ptr<c10d::Backend> cuda;
  int rank;
  int world;
  int timeout_ms;
};

using trueneg_bridge::guarded;

// While a bridge call talks to the store, LibTorch's own warnings are off: when another rank
// stopped (a refused configuration, a crash), the store logs a warning line of its own about
// the closed connection before failing, and the error this call returns already says it, in
// the one line a failed run prints. Errors are still logged.
class QuietStore {
 public:
  QuietStore() : was_(FLAGS_caffe2_log_level) {
    FLAGS_caffe2_log_level = std::max(was_, 2);  // 2: errors only
  }
  ~QuietStore() { FLAGS_caffe2_log_level = was_; }
  QuietStore(const QuietStore&) = delete;
  QuietStore& operator=(const QuietStore&) = delete;

 private:
  int was_;
};

// A Gloo backend of `world` ranks on `store`.
c10::intrusive_ptr<c10d::Backend> gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int world, int timeout_ms) {
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(timeout_ms));
  options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
}

// Every rank states its world size; rank 0 checks everyone's, the others rank 0's, so that a
// process launched for another job size is refused before the ranks connect pairwise. Rank 0
// hosts the store, so before it stops over a mismatch it waits until the ranks it heard from
// have read its size (each says so): each refused rank then gives the reason, not a closed
// connection.
void agree_on_world(c10d::Store& store, int rank, int world) {
  auto key = [](int r) { return "world/" + std::to_string(r); };
  auto read = [](int r) { return "world-read/" + std::to_string(r); };
  auto text = std::to_string(world);
  store.set(key(rank), std::vector<uint8_t>(text.begin(), text.end()));
  std::string refused;
  for (int r = rank == 0 ? 1 : 0; r < (rank == 0 ? world : 1); ++r) {
    auto theirs = store.get(key(r));
    auto said = std::string(theirs.begin(), theirs.end());
    if (said != text && refused.empty()) {
      refused = "rank " + std::to_string(r) + " was launched for a world of " + said +
                " processes, rank " + std::to_string(rank) + " for " + text;
    }
  }
  if (rank != 0) {
    store.set(read(rank), std::vector<uint8_t>{1});
  } else if (!refused.empty()) {
    std::vector<std::string> others;
    for (int r = 1; r < world; ++r) {
      others.push_back(read(r));
    }
    try {
      store.wait(others, std::chrono::seconds(5));
    } catch (const std::exception&) {
      // A rank that never reads: the refusal below is still the reason to give.
    }
  }
  if (!refused.empty()) {
    throw std::runtime_error(refused);
  }
}

at::Tensor host_view(void* data, int64_t n, bool dbl) {
  return at::from_blob(data, {n}, at::TensorOptions().dtype(dbl ? at::kDouble : at::kFloat));
}

}  // namespace

// Defined in csrc/cuda.cpp, which only a LibTorch with CUDA compiles: null otherwise.
c10::intrusive_ptr<c10d::Backend> trueneg_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, int timeout_ms)
    __attribute__((weak));

namespace {

// The backend that sums `t`: the group's Gloo for host tensors; for CUDA tensors NCCL, or a
// Gloo group of their own with `gloo`, made on the group's store at their first all-reduce.
c10::intrusive_ptr<c10d::Backend> backend_for(Group& g, const at::Tensor& t, bool gloo) {
  if (!t.is_cuda()) {
    return g.backend;
  }
  if (!g.cuda) {
    if (gloo) {
      auto store = c10::make_intrusive<c10d::PrefixStore>("cuda-gloo/", g.store);
      g.cuda = gloo_backend(store, g.rank, g.world, g.timeout_ms);
    } else if (&trueneg_nccl_backend != nullptr) {
      auto store = c10::make_intrusive<c10d::PrefixStore>("nccl/", g.store);
      g.cuda = trueneg_nccl_backend(store, g.rank, g.world, g.timeout_ms);
    } else {
      throw std::runtime_error(
          "CUDA tensors need NCCL, and this trueneg was built against a LibTorch without CUDA");
    }
  }
  return g.cuda;
}

}  // namespace

extern "C" {

// Joins the group: rank 0 hosts the TCPStore at host:port unless `agent_store` (torchrun's
// agent already hosts it); every rank connects, then Gloo connects the ranks pairwise. The
// host serves on `listen_fd`, a socket already bound to host:port (its address only, not all
// interfaces), which the store takes over; -1 for none.
int trueneg_c10d_new(const char* host, int port, int rank, int world, int agent_store,
                     int listen_fd, int timeout_ms, void** out, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    QuietStore quiet;
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(port);
    o.isServer = rank == 0 && agent_store == 0;
    if (o.isServer && listen_fd >= 0) {
      o.masterListenFd = listen_fd;
    }
    o.numWorkers = agent_store == 0 ? std::optional<std::size_t>(world) : std::nullopt;
    o.waitWorkers = agent_store == 0;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    auto tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
    // torchrun's agent keeps its store across restarts of the workers: one prefix per attempt,
    // so that no key of a failed attempt (world sizes, configurations, roll calls) is read.
    const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
    auto prefix = std::string("trueneg/") + (attempt != nullptr ? attempt : "0") + "/";
    auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
    agree_on_world(*store, rank, world);
    auto backend = gloo_backend(store, rank, world, timeout_ms);
    *out = new Group{store, backend, {}, rank, world, timeout_ms};
  });
}

void trueneg_c10d_free(void* group) { delete static_cast<Group*>(group); }

// Sums `n` values at `data` (f32, or f64 with `dbl`) over the ranks, in place, in buckets of
// at most `bucket` values: every bucket's all-reduce is started before the first is waited on.
int trueneg_c10d_allreduce_sum(void* group, void* data, int64_t n, int dbl, int64_t bucket,
                               char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto* g = static_cast<Group*>(group);
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    const int64_t size = dbl ? 8 : 4;
    for (int64_t at = 0; at < n; at += bucket) {
      void* start = static_cast<char*>(data) + at * size;
      std::vector<at::Tensor> t{host_view(start, std::min(bucket, n - at), dbl != 0)};
      works.push_back(g->backend->allreduce(t));
    }
    for (auto& w : works) {
      w->wait();
    }
  });
}

// Starts summing the tensor `tensor` (tch's handle: `at::Tensor*`, contiguous) over the ranks,
// in place, and returns its pending work in `work` (free it with trueneg_c10d_work_free after
// trueneg_c10d_work_wait). Host tensors go through Gloo; CUDA tensors through NCCL, or through
// a Gloo group of their own with `gloo` (several processes sharing one GPU, which NCCL refuses).
// With NCCL the wait only orders the current CUDA stream after the all-reduce.
int trueneg_c10d_allreduce_start(void* group, void* tensor, int gloo, void** work, char* err,
                                 size_t err_len) {
  return guarded(err, err_len, [&] {
    auto* g = static_cast<Group*>(group);
    auto& t = *static_cast<at::Tensor*>(tensor);
    std::vector<at::Tensor> ts{t};
    auto w = backend_for(*g, t, gloo != 0)->allreduce(ts);
    *work = new c10::intrusive_ptr<c10d::Work>(std::move(w));
  });
}

// Waits for a started all-reduce (with NCCL: orders the current CUDA stream after it).
int trueneg_c10d_work_wait(void* work, char* err, size_t err_len) {
  return guarded(err, err_len,
                 [&] { (*static_cast<c10::intrusive_ptr<c10d::Work>*>(work))->wait(); });
}

void trueneg_c10d_work_free(void* work) {
  delete static_cast<c10::intrusive_ptr<c10d::Work>*>(work);
}

// Copies rank `root`'s `n` floats at `data` to every rank.
int trueneg_c10d_broadcast(void* group, float* data, int64_t n, int root, char* err,
                           size_t err_len) {
  return guarded(err, err_len, [&] {
    auto* g = static_cast<Group*>(group);
    std::vector<at::Tensor> t{host_view(data, n, false)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    g->backend->broadcast(t, o)->wait();
  });
}

// After a failed collective: marks this rank alive in the store, then waits up to `wait_ms`
// for the others' marks. Writes the ranks that never marked themselves into `absent` (at most
// `world` of them) and their number into `n_absent`. Fails when the store is gone (its host,
// rank 0 or torchrun's agent, stopped).
int trueneg_c10d_absent(void* group, int rank, int world, int wait_ms, int* absent,
                        int* n_absent, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    QuietStore quiet;
    auto* g = static_cast<Group*>(group);
    g->store->set("alive/" + std::to_string(rank), std::vector<uint8_t>{1});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (true) {
      *n_absent = 0;
      for (int r = 0; r < world; ++r) {
        if (!g->store->check({"alive/" + std::to_string(r)})) {
          absent[(*n_absent)++] = r;
        }
      }
      if (*n_absent == 0 || std::chrono::steady_clock::now() >= deadline) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

// Sets `key` to the `len` bytes at `data` in the store.
int trueneg_c10d_store_set(void* group, const char* key, const uint8_t* data, size_t len,
                           char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    QuietStore quiet;
    static_cast<Group*>(group)->store->set(key, std::vector<uint8_t>(data, data + len));
  });
}

// Waits (up to the group's timeout) for `key` and copies at most `cap` bytes of its value to
// `data`; its whole length goes to `len` (call again with a larger buffer when it is over `cap`).
int trueneg_c10d_store_get(void* group, const char* key, uint8_t* data, size_t cap, size_t* len,
                           char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    QuietStore quiet;
    auto value = static_cast<Group*>(group)->store->get(key);
    *len = value.size();
    std::memcpy(data, value.data(), std::min(cap, value.size()));
  });
}

int trueneg_c10d_barrier(void* group, char* err, size_t err_len) {
  return guarded(err, err_len, [&] { static_cast<Group*>(group)->backend->barrier()->wait(); });
}

}  // extern "C"
