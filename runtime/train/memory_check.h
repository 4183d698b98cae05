#pragma once
// The size check before a run builds its replicas: a run of 5,000 nodes, or
// a model too wide, would otherwise grow until the kernel kills the process.
// The estimate is a floor, not a forecast: every node holds its model, a
// gradient and two optimizer moments (Adam's) per trainable parameter.
// Strategies that keep more (DiLoCo's outer copy and momentum) and the
// activations of a step need more; data is already loaded when it runs, so
// what it took is no longer available.
#include <cstdint>
#include <optional>

#include "exogym/runtime/manifest/manifest.h"

namespace exogym::sdk {
class Model;
}

namespace exogym::runtime::train {

// One replica's bytes in host memory (tensors on a GPU are not counted).
struct ReplicaBytes {
  uint64_t tensors = 0;    // parameters and buffers
  uint64_t trainable = 0;  // parameters that take gradients
};
ReplicaBytes replica_bytes(sdk::Model& model);

// Bytes `nodes` replicas need at least (see above).
uint64_t nodes_memory_floor(const ReplicaBytes& one, int nodes);

struct MemoryBudget {
  // This process's share of its host's available memory before any replica
  // is built; unknown: no check.
  std::optional<uint64_t> available;
  bool force = false;  // --force: warn instead of refusing
};

// Refuses, with an sdk::ConfigError (exit 2), `nodes` replicas that need
// more than `budget.available`: naming `nodes` when one node would fit, else
// the model's options. With budget.force it only warns.
void check_memory(const manifest::Manifest& m, const ReplicaBytes& one, int nodes, const MemoryBudget& budget);

}  // namespace exogym::runtime::train
