// Counts the LibTorch operations a stretch of work dispatches (`bench --count-ops`): on a GPU
// each operation that does arithmetic is a kernel launch, which is what bounds a small model's
// step. A thread-local RecordFunction callback sees every ATen call of the counting thread and
// of the autograd engine's threads working for it (LibTorch hands a thread's callbacks to the
// engine's worker threads with the rest of its thread-local state), and none of other threads
// (tests running beside it). Calls that launch no kernel
// themselves (views, allocations, conversions that turn out to be no-ops, autograd's wrappers)
// are counted apart. Any other call is counted as one kernel unless it makes kernel-launching
// calls inside it, which are counted instead (LibTorch composes many operations from others);
// `aten::_to_copy` (a dtype cast: an allocation and one copy) counts once, whatever is inside.
// Where an operation launches a kernel of its own beside the calls inside it, it is missed:
// the count is a lower bound of the launches.

#include <ATen/record_function.h>

#include "guarded.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct Frame {
  bool kernel_inside;
  bool whole;  // counted as one operation, calls inside it not
};

thread_local std::vector<Frame> frames;
thread_local int inside_whole = 0;

std::mutex counts_mutex;
// By name: (launches a kernel, count).
std::map<std::string, std::pair<bool, uint64_t>> counts;
// Calls made from outside any other counted call: trueneg's (through burn), and the autograd
// engine's evaluation of each backward node in the backward passes handed to LibTorch (about
// 800 per ELECTRA step at 12 layers). Each costs host time, kernel or not.
uint64_t outer_calls = 0;
at::CallbackHandle handle = 0;

bool counted_whole(const char* name) { return std::strcmp(name, "aten::_to_copy") == 0; }

// Calls that launch no kernel themselves.
bool no_kernel(const char* name) {
  static const std::set<std::string> names = {
      "aten::_reshape_alias", "aten::_unsafe_view", "aten::alias", "aten::as_strided",
      "aten::chunk", "aten::contiguous", "aten::detach", "aten::empty", "aten::empty_like",
      "aten::empty_strided", "aten::expand", "aten::expand_as", "aten::flatten",
      "aten::lift_fresh", "aten::narrow", "aten::permute", "aten::reshape", "aten::resize_",
      "aten::resolve_conj", "aten::resolve_neg", "aten::result_type", "aten::select",
      "aten::set_", "aten::slice", "aten::split", "aten::split_with_sizes", "aten::squeeze",
      "aten::t", "aten::to", "aten::transpose", "aten::unbind", "aten::unsqueeze", "aten::view",
      "aten::view_as", "detach"};
  return std::strncmp(name, "autograd::", 10) == 0 || names.count(name) > 0;
}

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
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
  bool kernel = f.whole || (!f.kernel_inside && !no_kernel(fn.name()));
  if (!frames.empty() && (kernel || f.kernel_inside)) {
    frames.back().kernel_inside = true;
  }
  bool outer = frames.empty();
  // Inside a cast (counted with it), or counted as the kernels inside it.
  bool skip = inside_whole > 0 || (f.kernel_inside && !f.whole);
  if (skip && !outer) {
    return;
  }
  std::lock_guard<std::mutex> lock(counts_mutex);
  if (outer) {
    ++outer_calls;
  }
  if (skip) {
    return;
  }
  auto& entry = counts[fn.name()];
  entry.first = kernel;
  ++entry.second;
}

}  // namespace

extern "C" {

// Starts counting (from zero).
int trueneg_ops_count_begin(char* err, size_t err_len) {
  return trueneg_bridge::guarded(err, err_len, [&] {
    {
      std::lock_guard<std::mutex> lock(counts_mutex);
      counts.clear();
      outer_calls = 0;
    }
    if (handle == 0) {
      handle = at::addThreadLocalCallback(at::RecordFunctionCallback(enter, leave)
                                         .scopes({at::RecordScope::FUNCTION})
                                         .needsInputs(false));
    }
  });
}

// Stops counting and writes the counts into `out` (`out_len` bytes, NUL-terminated): a line
// "= calls N" (the calls made from outside LibTorch), then "K name count" lines, K being `k`
// for a kernel and `-` for none. Returns the text's length, which is `out_len` or more when it
// did not fit (call again with a larger buffer: the counts are kept until the next begin).
size_t trueneg_ops_count_end(char* out, size_t out_len) {
  if (handle != 0) {
    at::removeCallback(handle);
    handle = 0;
  }
  std::string text;
  {
    std::lock_guard<std::mutex> lock(counts_mutex);
    text += "= calls " + std::to_string(outer_calls) + "\n";
    for (const auto& [name, entry] : counts) {
      text += std::string(entry.first ? "k " : "- ") + name + " " +
              std::to_string(entry.second) + "\n";
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
