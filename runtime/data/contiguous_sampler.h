#pragma once
// Non-IID sharding ("partition": "contiguous"): node r of K owns the
// contiguous slice [r·N/K, (r+1)·N/K) of the dataset's indices and trains on
// nothing else. For an ordered dataset (a text read front to back, a file
// sorted by source) each node then sees its own part of the distribution, as
// in federated or cross-datacenter training where data does not move.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exogym/runtime/data/sampler.h"

namespace exogym::runtime::data {

class ContiguousSampler : public Sampler {
 public:
  // `batch_size` is the per-node batch B. Each epoch e shuffles every slice
  // with the permutation of its length seeded with seed + e (the IID
  // sampler's convention). All nodes keep the same epoch length, that of
  // the smallest slice: floor(min slice / B) steps; the rest of a slice is
  // skipped that epoch (a different rest each epoch). Throws sdk::ConfigError
  // at "train.batch_size" when the smallest slice holds fewer than B examples.
  ContiguousSampler(int64_t dataset_size, int num_nodes, int64_t batch_size, uint64_t seed);

  std::vector<int64_t> batch_indices(int rank, int64_t step) const override;
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::vector<int64_t> node_examples(int rank) const override;

  // Node `rank`'s slice [begin, end).
  std::pair<int64_t, int64_t> slice(int rank) const;

 private:
  std::shared_ptr<const std::vector<int64_t>> epoch_permutation(int rank, int64_t epoch) const;

  int64_t dataset_size_;
  int num_nodes_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t steps_per_epoch_;

  // Only node r asks for rank r, with steps in order: two epochs per node
  // (the current one and the one before) are all it can need.
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, int64_t>, std::shared_ptr<const std::vector<int64_t>>> cache_;
};

}  // namespace exogym::runtime::data
