#include "exogym/runtime/cluster.h"

#include <sched.h>

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::runtime {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

Cluster::Cluster(int nodes, int parallelism)
    : nodes_(nodes), slots_(std::max(1, parallelism), abort_), group_(nodes, abort_) {}

void Cluster::run(const std::function<void(int, NodeSlot&)>& body) {
  std::mutex error_mutex;
  std::exception_ptr first_error;

  auto node_main = [&](int rank) {
    try {
      NodeSlot slot(&slots_);
      body(rank, slot);
    } catch (const sdk::AbortedError&) {
      // A consequence of another node's failure, not a cause.
    } catch (...) {
      std::string reason = "node " + std::to_string(rank) + " failed";
      try {
        throw;
      } catch (const std::exception& e) {
        reason = e.what();
      } catch (...) {
      }
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      abort_.trigger(reason);
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(nodes_);
  try {
    for (int rank = 0; rank < nodes_; ++rank) threads.emplace_back(node_main, rank);
  } catch (const std::system_error& e) {
    abort_.trigger(std::string("could not start node threads: ") + e.what());
    for (auto& t : threads) t.join();
    throw sdk::Error("could not start " + std::to_string(nodes_) + " node threads: " + e.what());
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  if (abort_.aborted()) throw sdk::Error("run aborted: " + abort_.reason());
}

}  // namespace exogym::runtime
