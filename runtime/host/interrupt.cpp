#include "exogym/runtime/host/interrupt.h"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <string>

namespace exogym::runtime::host {

namespace {

std::atomic<bool> g_requested{false};
std::atomic<int64_t> g_first_ns{0};
std::atomic<int> g_signal{0};  // the first one

// A signal sent again within this time is the same request: `timeout` and a
// terminal's Ctrl-C may deliver one stop to the process and to its group at
// once, which must not count as the user pressing Ctrl-C twice.
constexpr int64_t kSameRequestNs = 500'000'000;

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

extern "C" void on_signal(int signal) {
  const int64_t now = monotonic_ns();
  if (!g_requested.exchange(true)) {
    g_first_ns.store(now);
    g_signal.store(signal);
    return;
  }
  if (now - g_first_ns.load() < kSameRequestNs) return;
  // A later signal takes the default action: a user pressing Ctrl-C twice
  // means "now".
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupt_requested() { return g_requested.load(std::memory_order_relaxed); }

std::string interrupt_signal_text() {
  switch (g_signal.load()) {
    case SIGINT:
      return "Ctrl-C";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "Ctrl-C";  // none yet: what a user most likely sends
  }
}

}  // namespace exogym::runtime::host
