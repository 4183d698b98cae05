#include "exogym/runtime/cluster/interrupt.h"

#include <atomic>
#include <csignal>

namespace exogym::runtime::cluster {

namespace {

std::atomic<bool> g_requested{false};

extern "C" void on_signal(int signal) {
  g_requested.store(true);
  // The next signal takes the default action: a user pressing Ctrl-C twice
  // means "now".
  std::signal(signal, SIG_DFL);
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

}  // namespace exogym::runtime::cluster
