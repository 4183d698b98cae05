#pragma once
// The node context handed to a strategy: who this node is, how to reach the
// others, where the run stands, and where to log.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace exogym::sdk {

class Communicator;

// Extra per-node metrics a strategy wants recorded (written to metrics.csv as
// step,node,name,value). Thread-safe.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void record(int node, int64_t step, const std::string& name, double value) = 0;
};

struct NodeContext {
  int rank = 0;
  int num_nodes = 1;
  c10::Device device = c10::Device(c10::kCPU);
  Communicator* comm = nullptr;
  // The 0-based index of the step being taken; the runtime advances it.
  int64_t step = 0;
  int64_t max_steps = 0;
  // The run's seed, the same on every node. Derive any randomness a strategy
  // needs from it (e.g. SPARTA masks) so that runs reproduce.
  uint64_t seed = 0;
  std::shared_ptr<spdlog::logger> log;
  MetricSink* metrics = nullptr;

  Communicator& communicator() const { return *comm; }
  void record(const std::string& name, double value) const {
    if (metrics) metrics->record(rank, step, name, value);
  }
};

}  // namespace exogym::sdk
