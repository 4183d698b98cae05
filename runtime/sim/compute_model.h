#pragma once
// How long each node's compute takes on the simulated cluster.
#include <optional>
#include <vector>

namespace exogym::runtime::sim {

struct ComputeModel {
  std::optional<double> step_time;  // seconds per step at speed 1; nullopt: measure each node's compute
  std::vector<double> speed;        // per rank; 2 = twice as fast, 0.5 = half as fast
};

}  // namespace exogym::runtime::sim
