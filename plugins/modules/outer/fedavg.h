#pragma once
// FedAvg's communication (McMahan et al. 2017): after every H local steps,
// each node's parameters become the mean of all nodes' parameters, or of
// its island's: a random group of island_size nodes, redrawn every round
// from the run's seed.
//
// Communicates after steps H-1, 2H-1, ... (0-based): one all_reduce (Avg)
// of every trainable parameter, or with islands one group_all_reduce (Avg)
// over the node's island (only its members take part and pay; the
// reference all-gathered everyone's parameters, the same averages at
// K / island_size times the bytes); nothing with one node or an island of
// one.
// "aggregator" replaces the mean with a robust aggregate
// (robust_aggregation.h) of the parameters gathered with one all_gather
// (group_all_gather within an island), computed once per process
// (shared_aggregates.h).
// Options: "H", "island_size", "aggregator", "trim", "byzantine" (specs()).
// State: none (the islands of a round follow from the seed and the step).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "exogym/modules/aggregation/robust_aggregation.h"
#include "exogym/modules/aggregation/shared_aggregates.h"
#include "exogym/sdk/comm.h"
#include "exogym/sdk/compose.h"

namespace exogym::modules {

class FedAvgModule final : public sdk::CommunicationModule {
 public:
  // "FedAvgModule": options "H", "island_size", "aggregator", "trim" and
  // "byzantine". sdk::ConfigError at "trim" outside [0, 0.5), and at "trim"
  // or "byzantine" given with another aggregator than theirs.
  static sdk::ModuleSpecs specs();

  explicit FedAvgModule(const sdk::ModuleOptions& options);
  // island_size: nullopt (or >= K) averages over all nodes. With the mean.
  FedAvgModule(int64_t H, std::optional<int64_t> island_size);

  // sdk::ConfigError at "island_size" above the nodes, and at "byzantine"
  // when krum would average fewer than f + 3 nodes at some step
  // (NodeContext::live_counts), before training.
  void init(sdk::NodeContext& ctx, sdk::Model& model) override;
  void communicate(sdk::NodeContext& ctx, sdk::Model& model, int64_t step) override;

  // The islands of round `round` for K nodes: a seeded random permutation of
  // 0..K-1 (positions in the list of live nodes: the ranks, unless nodes
  // are down) cut into consecutive chunks of island_size (the last may be
  // smaller). The same on every node, so nothing is communicated to agree.
  static std::vector<std::vector<int>> islands(uint64_t run_seed, int64_t round, int num_nodes, int64_t island_size);
  // The sizes of the averages over `live` nodes (islands' included), each
  // once; none below 2 (one node, or an island of one, keeps its parameters).
  static std::vector<int64_t> average_sizes(int64_t live, std::optional<int64_t> island_size);

 private:
  // The parameters become the aggregate over every live node, or over
  // `members` (an island's ranks).
  void combine(sdk::Communicator& comm, const std::vector<int>* members, int64_t step);
  void check_nodes(const sdk::NodeContext& ctx) const;

  int64_t H_;
  std::optional<int64_t> island_size_;
  AggregatorSpec aggregator_;
  sdk::NodeContext* ctx_ = nullptr;
  std::vector<at::Tensor> params_;
  std::shared_ptr<SharedAggregates> aggregates_;  // robust aggregators only
};

}  // namespace exogym::modules
