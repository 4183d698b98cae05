#include "exogym/runtime/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

#include "exogym/runtime/data/contiguous_sampler.h"
#include "exogym/runtime/data/label_partition.h"
#include "exogym/runtime/data/node_set_sampler.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {
namespace {

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor perm = at::randperm(n, generator, at::kLong).contiguous();
  const int64_t* data = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

}  // namespace

void Sampler::check_shape(const char* sampler, int64_t dataset_size, int num_nodes, int64_t batch_size) {
  EXOGYM_CHECK_INTERNAL(!(dataset_size < 0 || num_nodes < 1 || batch_size < 1),
                        std::string(sampler) + ": needs dataset_size >= 0, num_nodes >= 1 and batch_size >= 1, got " +
                            std::to_string(dataset_size) + ", " + std::to_string(num_nodes) + ", " +
                            std::to_string(batch_size));
}

IidSampler::IidSampler(int64_t dataset_size, int num_nodes, int64_t batch_size, uint64_t seed)
    : dataset_size_(dataset_size),
      num_nodes_(num_nodes),
      batch_size_(batch_size),
      seed_(seed),
      cached_epochs_(std::max(kMinCachedEpochs, kCacheBytes / (sizeof(int64_t) * static_cast<size_t>(std::max<int64_t>(
                                                                                     1, dataset_size))))) {
  check_shape("IidSampler", dataset_size, num_nodes, batch_size);
  const int64_t per_step = num_nodes * batch_size;
  steps_per_epoch_ = dataset_size / per_step;
  if (steps_per_epoch_ == 0) {
    throw sdk::ConfigError("train.batch_size",
                           "the training set has " + std::to_string(dataset_size) +
                               " examples, fewer than nodes × batch_size = " + std::to_string(num_nodes) + " × " +
                               std::to_string(batch_size) + " = " + std::to_string(per_step));
  }
}

std::vector<int64_t> IidSampler::permutation(int64_t dataset_size, uint64_t seed, int64_t epoch) {
  return random_permutation(dataset_size, seed + static_cast<uint64_t>(epoch));
}

std::shared_ptr<const std::vector<int64_t>> IidSampler::epoch_permutation(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = cache_.find(epoch); found != cache_.end()) return found->second;
  // Computed under the lock: the other threads need the same permutation and
  // would only wait for it anyway, and it takes about a millisecond for MNIST.
  auto perm = std::make_shared<const std::vector<int64_t>>(permutation(dataset_size_, seed_, epoch));
  ++permutations_computed_;
  cache_.emplace(epoch, perm);
  while (cache_.size() > cached_epochs_) {
    // Evict the oldest epoch, unless that is the one just asked for (a node
    // lagging behind), then the newest instead.
    auto victim = cache_.begin();
    if (victim->first == epoch) victim = std::prev(cache_.end());
    cache_.erase(victim);
  }
  return perm;
}

int64_t IidSampler::permutations_computed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return permutations_computed_;
}

std::vector<int64_t> IidSampler::batch_indices(int rank, int64_t step) const {
  EXOGYM_CHECK_INTERNAL(!(rank < 0 || rank >= num_nodes_ || step < 0),
                        "IidSampler::batch_indices: rank " + std::to_string(rank) + " of " +
                            std::to_string(num_nodes_) + ", step " + std::to_string(step));
  const auto perm = epoch_permutation(epoch_of(step));
  const int64_t start = (step % steps_per_epoch_) * num_nodes_ * batch_size_ + rank;
  std::vector<int64_t> indices(static_cast<size_t>(batch_size_));
  for (int64_t k = 0; k < batch_size_; ++k) indices[k] = (*perm)[start + num_nodes_ * k];
  return indices;
}

std::vector<int64_t> IidSampler::node_examples(int rank) const {
  std::vector<int64_t> examples;
  examples.reserve(static_cast<size_t>(steps_per_epoch_ * batch_size_));
  for (int64_t t = 0; t < steps_per_epoch_; ++t) {
    const auto batch = batch_indices(rank, t);
    examples.insert(examples.end(), batch.begin(), batch.end());
  }
  return examples;
}

std::unique_ptr<Sampler> make_sampler(const PartitionSpec& partition, int64_t dataset_size,
                                      const std::vector<int64_t>* labels, int num_nodes, int64_t batch_size,
                                      uint64_t seed) {
  using Kind = PartitionSpec::Kind;
  if (partition.kind == Kind::Iid) return std::make_unique<IidSampler>(dataset_size, num_nodes, batch_size, seed);
  if (partition.kind == Kind::Contiguous)
    return std::make_unique<ContiguousSampler>(dataset_size, num_nodes, batch_size, seed);
  EXOGYM_CHECK_INTERNAL(labels && static_cast<int64_t>(labels->size()) == dataset_size,
                        std::string("make_sampler: \"") + partition.name() + "\" without the examples' labels");
  return std::make_unique<NodeSetSampler>(partition_by_label(partition, *labels, num_nodes, seed), batch_size, seed);
}

std::vector<int64_t> validation_indices(int64_t dataset_size, int64_t size) {
  constexpr uint64_t kSubsetSeed = 0;
  if (size < 0 || size > dataset_size) {
    throw sdk::ConfigError("eval.size", "asks for " + std::to_string(size) + " examples, the validation set has " +
                                            std::to_string(dataset_size));
  }
  std::vector<int64_t> indices = random_permutation(dataset_size, kSubsetSeed);
  indices.resize(static_cast<size_t>(size));
  return indices;
}

}  // namespace exogym::runtime::data
