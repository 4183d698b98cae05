#pragma once
// Heterogeneous nodes from a distribution: each node's compute speed
// (compute.speed_distribution) or link bandwidth factor
// (network.bandwidth_distribution) drawn from a named distribution, for
// runs with too many nodes to list one by one
// (docs/simulation.md#heterogeneous-nodes).
//
// A node's draw comes from the run's seed, the quantity (speed or
// bandwidth) and its rank alone, so it does not depend on the node count,
// the processes or a resume, and the speeds do not move when the
// bandwidths are drawn too. Nodes listed one by one (compute.speed,
// network.nodes.N.bandwidth) keep their listed values.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace exogym::runtime::sim {

struct FactorDistribution {
  enum class Kind { LogNormal, Uniform, Tiers };
  Kind kind = Kind::LogNormal;
  double sigma = 0;             // LogNormal: exp(sigma * Z), Z standard normal (median 1)
  double low = 1, high = 1;     // Uniform on [low, high]
  std::vector<double> values;   // Tiers: values[i] with probability weights[i] / sum
  std::vector<double> weights;  // (all 1 when the manifest gives none)
  std::string json_path;        // for error messages
};

// Which quantity a draw is for: each has its own stream.
enum class NodeFactor { Speed, Bandwidth };

// The manifest's object, already checked against the schema (name, keys,
// types); throws sdk::ConfigError at `path` for what the schema cannot say:
// a lognormal sigma above 10, high below low, values and weights of
// different lengths.
FactorDistribution read_factor_distribution(const nlohmann::json& value, const std::string& path);

// Node `node`'s factor.
double draw_factor(const FactorDistribution& d, NodeFactor what, uint64_t run_seed, int node);

// The largest factor any of nodes 0 to `nodes` - 1 can have: a uniform's
// high end, the largest tier with a weight, the largest lognormal draw (one
// draw per node: a lognormal has no bound, and this scan is refused beyond
// kMaxLogNormalScan nodes by its callers).
double largest_factor(const FactorDistribution& d, NodeFactor what, uint64_t run_seed, int nodes);
constexpr int kMaxLogNormalScan = 100000;

}  // namespace exogym::runtime::sim
