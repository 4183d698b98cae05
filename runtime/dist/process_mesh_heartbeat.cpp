// ProcessMesh: noticing peers that died, hung or became unreachable, through
// heartbeats in the rendezvous store, and a store that stopped answering.
#include <utility>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/dist/store_connection.h"
#include "exogym/runtime/dist/store_keys.h"
#include "exogym/runtime/util/duration_text.h"

namespace exogym::runtime::dist {

namespace {

using Clock = std::chrono::steady_clock;
using util::seconds_text;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

void ProcessMesh::start_heartbeat() {
  last_store_answer_ms_ = now_ms();
  monitor_ = std::thread([this] { monitor_loop(); });
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

void ProcessMesh::monitor_loop() {
  std::vector<int64_t> seen(size(), -1);
  std::vector<Clock::time_point> since(size(), Clock::now());
  while (true) {
    {
      std::unique_lock<std::mutex> lock(stop_mutex_);
      if (stop_cv_.wait_for(lock, period_, [&] { return stop_; })) return;
    }
    if (failed_) return;
    try {
      store_->add(heartbeat_key(rank()), 1);
      if (const auto aborted = published_abort()) {
        fail(describe(aborted->first) + " failed: " + aborted->second);
        return;
      }
      if (const std::string deadlock = look_at_waits(); !deadlock.empty()) {
        fail(deadlock);
        return;
      }
      const auto now = Clock::now();
      for (int q = 0; q < size(); ++q) {
        if (q == rank()) continue;
        const int64_t beat = store_->add(heartbeat_key(q), 0);
        if (beat != seen[q]) {
          seen[q] = beat;
          since[q] = now;
        } else if (now - since[q] > world_.timeout) {
          {
            std::lock_guard<std::mutex> lock(mutex_);
            lost_[q] = 1;  // no goodbye will come from it
          }
          fail(describe(q) + " has shown no sign of life for " + seconds_text(world_.timeout) +
               " (its heartbeat stopped): it is hung or unreachable");
          return;
        }
      }
      last_store_answer_ms_ = now_ms();
    } catch (const std::exception& e) {
      if (!failed_) {
        fail("lost the rendezvous store at " + store_->address() + ", hosted by " + describe(0) + ": " + e.what() +
             "; process 0 died or became unreachable");
      }
      return;
    }
  }
}

void ProcessMesh::watch_waits(WaitReport report, WaitCheck check) {
  std::lock_guard<std::mutex> lock(watch_mutex_);
  wait_report_ = std::move(report);
  wait_check_ = std::move(check);
}

std::string ProcessMesh::look_at_waits() {
  std::lock_guard<std::mutex> lock(watch_mutex_);
  if (!wait_report_ || !wait_check_) return "";
  std::vector<std::string> reports(static_cast<size_t>(size()));
  reports[rank()] = std::to_string(++wait_posts_) + wait_report_();
  store_->set(waits_key(rank()), reports[rank()]);
  for (int q = 0; q < size(); ++q) {
    if (q != rank() && store_->check({waits_key(q)})) reports[q] = store_->get(waits_key(q));
  }
  return wait_check_(reports);
}

void ProcessMesh::watchdog_loop() {
  // The heartbeat's store requests may block on a host that vanished; this
  // notices when they stop coming back.
  int64_t woke = now_ms();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(stop_mutex_);
      if (stop_cv_.wait_for(lock, period_, [&] { return stop_; })) return;
    }
    if (failed_) return;
    // A wait of one period that took longer than the timeout: this process
    // did not run (SIGSTOP, a suspended host), so the store's silence is its
    // own, not process 0's; the others have given up on it meanwhile.
    const int64_t slept = now_ms() - std::exchange(woke, now_ms());
    if (slept > world_.timeout.count()) {
      fail("this process did not run for " + seconds_text(std::chrono::milliseconds(slept)) +
           " (stopped, by SIGSTOP or a suspended host): the other processes have gone on without it");
      return;
    }
    const int64_t silent = now_ms() - last_store_answer_ms_.load();
    if (silent > world_.timeout.count() + 2 * period_.count()) {
      fail("the rendezvous store at " + store_->address() + ", hosted by " + describe(0) + ", has not answered for " +
           seconds_text(std::chrono::milliseconds(silent)) + ": process 0's host is unreachable");
      return;
    }
  }
}

void ProcessMesh::stop_threads() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace exogym::runtime::dist
