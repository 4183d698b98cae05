#pragma once
// A robust aggregate computed once per process instead of once per node.
// The members of a group that gathered the same values compute the same
// aggregate, bit for bit (robust_aggregation.h), and sorting R values per
// coordinate on every node was most of a robust FedAvg run's time (7 of 11
// s in examples/robust-compare.json). The first member of a process to get
// there computes it; the others take it. The process keeps the aggregates
// of the newest round it has seen (the members of a group rarely run at
// once: they wait for compute slots), and drops older ones when a newer
// round begins; a member that comes after that computes it again, with the
// same bits: sharing saves time, never changes a result.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exogym/sdk/node.h"

namespace exogym::modules {

class SharedAggregates {
 public:
  using Result = std::shared_ptr<const std::vector<at::Tensor>>;

  // This node's (sdk::shared_in_process): one per process and run.
  static std::shared_ptr<SharedAggregates> in_process(sdk::NodeContext& ctx);

  // The aggregate of the round that ends at `step` over `members` (the
  // group's ranks; empty: every live node): `compute()`'s result, made by
  // this call or by another node of the process for the same round.
  Result get(int64_t step, const std::vector<int>& members, const std::function<std::vector<at::Tensor>()>& compute);

 private:
  struct Entry {
    std::mutex mutex;  // held while the aggregate is computed
    Result result;
  };
  std::mutex mutex_;  // guards entries_ and newest_
  std::map<std::pair<int64_t, std::vector<int>>, std::shared_ptr<Entry>> entries_;
  int64_t newest_ = -1;  // the newest round's step
};

}  // namespace exogym::modules
