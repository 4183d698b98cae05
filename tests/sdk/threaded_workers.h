#pragma once
// sdk::NodeWorkers for tests: each job's items on fresh threads of their
// own, two items at a time, every thread with one LibTorch intra-op thread
// (a compute slot's, as the runtime's crew has). Counts the jobs and items
// it ran, so that a test sees the work went through it.
#include <ATen/Parallel.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "exogym/sdk/stacked.h"

namespace exogym::test {

class ThreadedWorkers : public sdk::NodeWorkers {
 public:
  void run(int64_t count, const std::function<void(int64_t)>& item) override {
    ++jobs;
    items += count;
    std::exception_ptr error;
    std::mutex error_mutex;
    // Two threads, each taking every other item.
    std::vector<std::thread> threads;
    for (int64_t first = 0; first < 2; ++first) {
      threads.emplace_back([&, first] {
        at::get_num_threads();  // LibTorch's lazy start first, which would reset the count
        at::set_num_threads(1);
        for (int64_t i = first; i < count; i += 2) {
          try {
            item(i);
          } catch (...) {
            const std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
  }

  std::atomic<int64_t> jobs{0}, items{0};
};

}  // namespace exogym::test
