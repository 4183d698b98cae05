#pragma once
// Catch2's assertions are not thread-safe: Catch2 3.7 (Debian 13's) aborts
// ("redirect is already active") when two node threads assert at once. An
// assertion made on a node thread (inside run_nodes and the like) goes
// through LOCKED, which lets one thread at a time into Catch2.
//   LOCKED(CHECK(module.first_send(0) == 3));
#include <mutex>

namespace exogym::test {

inline std::mutex& assertion_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace exogym::test

#define LOCKED(...)                                                                       \
  do {                                                                                    \
    std::lock_guard<std::mutex> exogym_assertion_lock(::exogym::test::assertion_mutex()); \
    __VA_ARGS__;                                                                          \
  } while (false)
