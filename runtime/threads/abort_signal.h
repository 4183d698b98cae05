#pragma once
// A run-wide "stop now" flag that every blocking wait in the simulator
// watches, so that one failing node ends the run instead of hanging it.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace exogym::runtime::threads {

class AbortSignal {
 public:
  // Returns true if this call set the flag (the first error wins).
  bool trigger(const std::string& reason) {
    std::vector<std::function<void()>> listeners;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (aborted_) return false;
      aborted_ = true;
      reason_ = reason;
      listeners = listeners_;
    }
    for (auto& wake : listeners) wake();
    return true;
  }
  bool aborted() const { return aborted_.load(); }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reason_;
  }
  // `wake` is called once when the signal triggers, so that waits on other
  // condition variables re-check the flag.
  void on_abort(std::function<void()> wake) {
    std::lock_guard<std::mutex> lock(mutex_);
    listeners_.push_back(std::move(wake));
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::string reason_;
  std::vector<std::function<void()>> listeners_;
};

}  // namespace exogym::runtime::threads
