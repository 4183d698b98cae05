#pragma once
// The node context handed to a strategy: who this node is, how to reach the
// others, where the run stands, and where to log.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace exogym::sdk {

class AsyncLink;
class Communicator;
class SharedObjects;
class StackedSteps;

// Extra per-node metrics (metrics.csv: step,node,name,value). Thread-safe.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void record(int node, int64_t step, const std::string& name, double value) = 0;
};

struct NodeContext {
  int rank = 0, num_nodes = 1;
  // The nodes taking part in the current step, in rank order: all of them, unless the run simulates
  // failures (docs/simulation.md#failures-and-churn). Collectives run over these nodes only; a node keeps
  // its rank among all num_nodes. The membership changes only between steps, the same on every node, and
  // membership_epoch counts its changes. The runtime owns the list.
  const std::vector<int>* live = nullptr;
  int64_t membership_epoch = 0;
  // Every live_count() a step can have, sorted, as nodes, participation and faults in steps fix it before
  // training, for init() to check options against (docs/plugins.md#the-runs-size). Null: num_nodes only.
  const std::vector<int>* live_counts = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  Communicator* comm = nullptr;
  // The 0-based step being taken (of max_steps); the runtime advances it.
  int64_t step = 0, max_steps = 0;
  // The client trained this round, of `clients`; without a population, the node's rank of K
  // (Strategy::has_client_state).
  int client = 0, clients = 1;
  // This step's speed factors (compute.speed, a client's, a trace's; 1 without): the node's, the fastest live one's.
  double speed = 1, fastest_speed = 1;
  // The run's seed, the same on every node: derive any randomness from it.
  uint64_t seed = 0;
  std::shared_ptr<spdlog::logger> log;
  MetricSink* metrics = nullptr;
  // Owned by the runtime, null without one: objects the nodes of this
  // process share (sdk/shared.h), the link of asynchronous strategies (async.h).
  SharedObjects* shared = nullptr;
  AsyncLink* async = nullptr;
  // Where LocalStep::step() takes the node's step with its stack's (sdk/stacked.h); null when it computes alone.
  StackedSteps* stack = nullptr;

  Communicator& communicator() const { return *comm; }
  int live_count() const { return live ? static_cast<int>(live->size()) : num_nodes; }
  // The live nodes' ranks (all ranks when `live` is not set).
  std::vector<int> live_ranks() const {
    if (live) return *live;
    std::vector<int> all(static_cast<size_t>(num_nodes));
    for (int r = 0; r < num_nodes; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  void record(const std::string& name, double value) const {
    if (metrics) metrics->record(rank, step, name, value);
  }
};

}  // namespace exogym::sdk
