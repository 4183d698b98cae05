#include "exogym/runtime/data/node_set_sampler.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::data {

namespace {
constexpr uint64_t kStream = 0x4e4f4445534554;  // "NODESET"
}

NodeSetSampler::NodeSetSampler(std::vector<std::vector<int64_t>> examples, int64_t batch_size, uint64_t seed)
    : examples_(std::move(examples)), batch_size_(batch_size), seed_(seed) {
  check_shape("NodeSetSampler", 0, static_cast<int>(examples_.size()), batch_size);
  for (const auto& node : examples_) EXOGYM_CHECK_INTERNAL(!node.empty(), "NodeSetSampler: a node without examples");
}

int64_t NodeSetSampler::steps_per_epoch() const {
  size_t most = 0;
  for (const auto& node : examples_) most = std::max(most, node.size());
  return (static_cast<int64_t>(most) + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> NodeSetSampler::node_examples(int rank) const { return examples_.at(static_cast<size_t>(rank)); }

std::shared_ptr<const std::vector<int64_t>> NodeSetSampler::epoch_permutation(int rank, int64_t epoch,
                                                                              int64_t oldest) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_pair(rank, epoch);
  if (auto found = cache_.find(key); found != cache_.end()) return found->second;
  const auto n = static_cast<int64_t>(examples_[rank].size());
  const uint64_t seed = sdk::derive_seed(seed_, kStream, static_cast<uint64_t>(rank));
  auto perm = std::make_shared<const std::vector<int64_t>>(IidSampler::permutation(n, seed, epoch));
  cache_.emplace(key, perm);
  for (auto it = cache_.lower_bound({rank, INT64_MIN}); it != cache_.end() && it->first.first == rank;) {
    it = it->first.second < oldest ? cache_.erase(it) : std::next(it);
  }
  return perm;
}

std::vector<int64_t> NodeSetSampler::batch_indices(int rank, int64_t step) const {
  EXOGYM_CHECK_INTERNAL(!(rank < 0 || rank >= static_cast<int>(examples_.size()) || step < 0),
                        "NodeSetSampler::batch_indices: rank " + std::to_string(rank) + " of " +
                            std::to_string(examples_.size()) + ", step " + std::to_string(step));
  const auto& mine = examples_[rank];
  const auto n = static_cast<int64_t>(mine.size());
  const int64_t first = step * batch_size_;
  std::vector<int64_t> indices(static_cast<size_t>(batch_size_));
  std::shared_ptr<const std::vector<int64_t>> perm;
  int64_t perm_epoch = -1;
  for (int64_t k = 0; k < batch_size_; ++k) {
    const int64_t position = first + k, epoch = position / n;
    if (epoch != perm_epoch) {
      perm = epoch_permutation(rank, epoch, first / n);
      perm_epoch = epoch;
    }
    indices[k] = mine[(*perm)[position % n]];
  }
  return indices;
}

}  // namespace exogym::runtime::data
