// trueneg's bridge to LibTorch's distributed engine (c10d): a TCPStore rendezvous and a
// ProcessGroupGloo (host buffers) or ProcessGroupNCCL (CUDA tensors, when LibTorch has it),
// exposed as a few C functions. Every function catches C++ exceptions and returns their text
// through `err` (a buffer of `err_len` bytes); 0 means success.

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
};

int fail(char* err, size_t err_len, const char* what) {
  if (err != nullptr && err_len > 0) {
    std::strncpy(err, what, err_len - 1);
    err[err_len - 1] = '\0';
  }
  return 1;
}

template <typename F>
int guarded(char* err, size_t err_len, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(err, err_len, e.what());
  } catch (...) {
    return fail(err, err_len, "unknown C++ exception");
  }
}

at::Tensor host_view(void* data, int64_t n, bool dbl) {
  return at::from_blob(data, {n}, at::TensorOptions().dtype(dbl ? at::kDouble : at::kFloat));
}

}  // namespace

extern "C" {

// Joins the group: rank 0 hosts the TCPStore at host:port unless `agent_store` (torchrun's
// agent already hosts it); every rank connects, then Gloo connects the ranks pairwise.
int trueneg_c10d_new(const char* host, int port, int rank, int world, int agent_store,
                     int timeout_ms, void** out, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(port);
    o.isServer = rank == 0 && agent_store == 0;
    o.numWorkers = agent_store == 0 ? std::optional<std::size_t>(world) : std::nullopt;
    o.waitWorkers = agent_store == 0;
    o.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
    auto store = c10::make_intrusive<c10d::PrefixStore>("trueneg/", tcp);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
    *out = new Group{store, backend};
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

int trueneg_c10d_barrier(void* group, char* err, size_t err_len) {
  return guarded(err, err_len, [&] { static_cast<Group*>(group)->backend->barrier()->wait(); });
}

}  // extern "C"
