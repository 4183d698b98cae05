#include "exogym/runtime/data/contiguous_sampler.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

ContiguousSampler::ContiguousSampler(int64_t dataset_size, int num_nodes, int64_t batch_size, uint64_t seed)
    : dataset_size_(dataset_size), num_nodes_(num_nodes), batch_size_(batch_size), seed_(seed) {
  check_shape("ContiguousSampler", dataset_size, num_nodes, batch_size);
  int64_t smallest = dataset_size;
  for (int r = 0; r < num_nodes; ++r) {
    const auto [begin, end] = slice(r);
    smallest = std::min(smallest, end - begin);
  }
  steps_per_epoch_ = smallest / batch_size;
  if (steps_per_epoch_ == 0) {
    throw sdk::ConfigError("train.batch_size", "with \"partition\": \"contiguous\" each node owns " +
                                                   std::to_string(smallest) + " or more of the " +
                                                   std::to_string(dataset_size) +
                                                   " training examples, fewer than "
                                                   "batch_size = " +
                                                   std::to_string(batch_size));
  }
}

std::pair<int64_t, int64_t> ContiguousSampler::slice(int rank) const {
  // 128-bit products: r·N overflows int64 only for absurd N, but is cheap to rule out.
  const auto bound = [&](int r) { return static_cast<int64_t>(static_cast<__int128>(r) * dataset_size_ / num_nodes_); };
  return {bound(rank), bound(rank + 1)};
}

std::vector<int64_t> ContiguousSampler::node_examples(int rank) const {
  const auto [begin, end] = slice(rank);
  std::vector<int64_t> examples(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) examples[i - begin] = i;
  return examples;
}

std::shared_ptr<const std::vector<int64_t>> ContiguousSampler::epoch_permutation(int rank, int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_pair(rank, epoch);
  if (auto found = cache_.find(key); found != cache_.end()) return found->second;
  const auto [begin, end] = slice(rank);
  auto perm = std::make_shared<const std::vector<int64_t>>(IidSampler::permutation(end - begin, seed_, epoch));
  cache_.emplace(key, perm);
  // Drop this node's epochs before the previous one.
  for (auto it = cache_.lower_bound({rank, INT64_MIN}); it != cache_.end() && it->first.first == rank;) {
    it = it->first.second < epoch - 1 ? cache_.erase(it) : std::next(it);
  }
  return perm;
}

std::vector<int64_t> ContiguousSampler::batch_indices(int rank, int64_t step) const {
  EXOGYM_CHECK_INTERNAL(!(rank < 0 || rank >= num_nodes_ || step < 0),
                        "ContiguousSampler::batch_indices: rank " + std::to_string(rank) + " of " +
                            std::to_string(num_nodes_) + ", step " + std::to_string(step));
  const auto perm = epoch_permutation(rank, step / steps_per_epoch_);
  const int64_t begin = slice(rank).first;
  const int64_t start = (step % steps_per_epoch_) * batch_size_;
  std::vector<int64_t> indices(static_cast<size_t>(batch_size_));
  for (int64_t k = 0; k < batch_size_; ++k) indices[k] = begin + (*perm)[start + k];
  return indices;
}

}  // namespace exogym::runtime::data
