// Counts the LibTorch operations a stretch of work dispatches (`bench --count-ops`): on a GPU
// each operation that does arithmetic is at least one kernel launch, which is what bounds a
// small model's step. A global RecordFunction callback sees every ATen call; a call that makes
// no further ATen call inside it (a leaf) is counted by name. `aten::_to_copy` (a dtype cast:
// an allocation and one copy kernel) is counted as one operation, its inner calls not.

#include <ATen/record_function.h>

#include "guarded.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Frame {
  bool has_child;
  bool whole;  // counted as one operation, calls inside it not
};

thread_local std::vector<Frame> frames;
thread_local int inside_whole = 0;

std::mutex counts_mutex;
std::map<std::string, uint64_t> counts;
at::CallbackHandle handle = 0;

bool counted_whole(const char* name) { return std::strcmp(name, "aten::_to_copy") == 0; }

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
  if (!frames.empty()) {
    frames.back().has_child = true;
  }
  bool whole = counted_whole(fn.name());
  frames.push_back({false, whole});
  if (whole) {
    ++inside_whole;
  }
  return nullptr;
}

void leave(const at::RecordFunction& fn, at::ObserverContext*) {
  if (frames.empty()) {
    return;
  }
  Frame f = frames.back();
  frames.pop_back();
  if (f.whole) {
    --inside_whole;
  }
  if (inside_whole > 0 || !(f.whole || !f.has_child)) {
    return;
  }
  std::lock_guard<std::mutex> lock(counts_mutex);
  ++counts[fn.name()];
}

}  // namespace

extern "C" {

// Starts counting (from zero).
int trueneg_ops_count_begin(char* err, size_t err_len) {
  return trueneg_bridge::guarded(err, err_len, [&] {
    {
      std::lock_guard<std::mutex> lock(counts_mutex);
      counts.clear();
    }
    if (handle == 0) {
      handle = at::addGlobalCallback(at::RecordFunctionCallback(enter, leave)
                                         .scopes({at::RecordScope::FUNCTION})
                                         .needsInputs(false));
    }
  });
}

// Stops counting and writes the counts as "name count\n" lines into `out` (`out_len` bytes,
// NUL-terminated); returns the text's length, which is `out_len` or more when it did not fit
// (call again with a larger buffer: the counts are kept until the next begin).
size_t trueneg_ops_count_end(char* out, size_t out_len) {
  if (handle != 0) {
    at::removeCallback(handle);
    handle = 0;
  }
  std::string text;
  {
    std::lock_guard<std::mutex> lock(counts_mutex);
    for (const auto& [name, n] : counts) {
      text += name + " " + std::to_string(n) + "\n";
    }
  }
  if (out != nullptr && out_len > 0) {
    size_t n = std::min(text.size(), out_len - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return text.size();
}

}  // extern "C"
