// What the bridges (csrc/*.cpp) share: a C++ exception becomes a return
// value of 1 and its text in `err` (a buffer of `err_len` bytes); 0 means success.
#pragma once

#include <cstring>
#include <exception>

namespace trueneg_bridge {

inline int fail(char* err, size_t err_len, const char* what) {
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

}  // namespace trueneg_bridge
