#pragma once
// The node context handed to a strategy: who this node is, how to reach the others, where the run stands.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace exogym::sdk {

class AsyncLink;      // async.h
class Communicator;   // comm.h
class MetricSink;     // metric_sink.h
class SharedObjects;  // shared.h
class StackedSteps;   // stacked.h

struct NodeContext {
  int rank = 0, num_nodes = 1;
  // The nodes taking part in this step, in rank order: all of them unless the run simulates failures
  // (docs/simulation.md#failures-and-churn). Collectives run over them; a node keeps its rank among all num_nodes. It
  // changes only between steps, alike on every node, counted by membership_epoch.
  const std::vector<int>* live = nullptr;
  int64_t membership_epoch = 0;
  // Every live_count() a step can have, sorted, for init() to check options against (docs/plugins.md#the-runs-size).
  // Null: num_nodes only.
  const std::vector<int>* live_counts = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  Communicator* comm = nullptr;
  int64_t step = 0, max_steps = 0;  // the 0-based step being taken
  // The client trained this round, of `clients`; without participation, the node's rank of num_nodes.
  int client = 0, clients = 1;
  // This step's speed factors (compute.speed, a client's, a trace's; 1 without): the node's, the fastest's.
  double speed = 1, fastest_speed = 1;
  uint64_t seed = 0;  // the run's, the same on every node: derive any randomness from it
  std::shared_ptr<spdlog::logger> log;
  // The runtime's, null without one: where record() writes, what the nodes of this process share, the asynchronous
  // strategies' link, the stack the node's local steps meet in.
  MetricSink* metrics = nullptr;
  SharedObjects* shared = nullptr;
  AsyncLink* async = nullptr;
  StackedSteps* stack = nullptr;

  Communicator& communicator() const { return *comm; }
  int live_count() const { return live ? static_cast<int>(live->size()) : num_nodes; }
  std::vector<int> live_ranks() const;  // *live, or every rank
  // Appends "step,node,name,value" to metrics.csv (docs/plugins.md#recording-metrics). Thread-safe.
  void record(const std::string& name, double value) const;
};

}  // namespace exogym::sdk
