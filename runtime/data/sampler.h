#pragma once
// Sharding one training set over K nodes: the Sampler interface, IID
// sharding (the default) and the factory for the manifest's "partition".
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exogym/runtime/data/partition.h"

namespace exogym::runtime::data {

// Which dataset indices each node trains on at each step.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The B dataset indices node `rank` trains on at global step `step` (>= 0).
  // Thread-safe; microbatch j of size b is the slice [j·b, (j+1)·b).
  virtual std::vector<int64_t> batch_indices(int rank, int64_t step) const = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // The examples node `rank` trains on, for data.csv: the set it owns, or
  // with IID sharding, where every node draws from the whole dataset, those
  // it draws in the first epoch.
  virtual std::vector<int64_t> node_examples(int rank) const = 0;

 protected:
  // Throws std::invalid_argument, naming the sampler, unless dataset_size >= 0,
  // num_nodes >= 1 and batch_size >= 1.
  static void check_shape(const char* sampler, int64_t dataset_size, int num_nodes, int64_t batch_size);
};

// The sampler of data.train.partition. The label partitions read `labels`
// (example_labels.h), which the caller must have found; the others ignore
// it. Throws like the sampler's constructor or partition_by_label.
std::unique_ptr<Sampler> make_sampler(const PartitionSpec& partition, int64_t dataset_size,
                                      const std::vector<int64_t>* labels, int num_nodes, int64_t batch_size,
                                      uint64_t seed);

// Each epoch e shuffles the whole dataset with one permutation perm_e, drawn
// from a generator seeded with seed + e: it depends on neither the number of
// nodes nor the batch size, so runs with different K see the same data in the
// same order. (seed + e is also what torch's DistributedSampler uses after
// set_epoch(e), and LibTorch's randperm reproduces torch.randperm, so with
// the same seed the order matches a PyTorch run that calls set_epoch.)
//
// Step t of epoch e = t / steps_per_epoch uses the block of K·B positions
// starting at s·K·B (s = t % steps_per_epoch); node r takes every K-th of
// them, starting at r. Hence:
//  - the union of the K node batches at step t is exactly the K = 1 batch of
//    size K·B at step t (the same examples a single big-batch node would see);
//  - microbatch j of size b of a node's batch is its slice [j·b, (j+1)·b);
//  - the N mod (K·B) examples at the end of each permutation are skipped for
//    that epoch (a different tail each epoch), so every node always gets a
//    full batch of B.
class IidSampler : public Sampler {
 public:
  // `batch_size` is the per-node batch B. Throws sdk::ConfigError at
  // "train.batch_size" when one step needs more than `dataset_size` examples.
  IidSampler(int64_t dataset_size, int num_nodes, int64_t batch_size, uint64_t seed);

  // The B dataset indices node `rank` trains on at global step `step` (>= 0).
  // Thread-safe and cheap: the permutations of recent epochs are cached.
  std::vector<int64_t> batch_indices(int rank, int64_t step) const override;

  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::vector<int64_t> node_examples(int rank) const override;
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch_; }

  int64_t dataset_size() const { return dataset_size_; }
  int num_nodes() const { return num_nodes_; }
  int64_t batch_size() const { return batch_size_; }
  uint64_t seed() const { return seed_; }

  // How many epoch permutations this sampler has computed (each is cached
  // and shared by all nodes; recomputed only once evicted).
  int64_t permutations_computed() const;

  // perm_e of a sampler over `dataset_size` examples with `seed`.
  static std::vector<int64_t> permutation(int64_t dataset_size, uint64_t seed, int64_t epoch);

 private:
  std::shared_ptr<const std::vector<int64_t>> epoch_permutation(int64_t epoch) const;

  int64_t dataset_size_;
  int num_nodes_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t steps_per_epoch_;

  // Node threads drift apart between synchronising collectives (DiLoCo:
  // up to H steps), and with many nodes an epoch can be a single step, so
  // the cache keeps as many epochs as fit in kCacheBytes (at least
  // kMinCachedEpochs): MNIST's 60,000 examples, 139 epochs. With 3, 4,096
  // MLP nodes recomputed a permutation at most of their steps and spent 15 %
  // of the run in randperm. The shared_ptr keeps a permutation alive for a
  // reader while it is evicted.
  static constexpr size_t kMinCachedEpochs = 3;
  static constexpr size_t kCacheBytes = size_t{64} << 20;
  size_t cached_epochs_;
  mutable std::mutex mutex_;
  mutable int64_t permutations_computed_ = 0;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> cache_;
};

// The evaluation subset: the first `size` entries of a permutation of
// [0, dataset_size) drawn from a generator with a fixed seed. It depends on
// neither the run's seed nor its strategy, so every evaluation of every run
// on the same validation set uses the same examples: runs that differ only
// in their seed measure training, not which examples were picked (a random
// subset, not the first `size` examples, because data files are often sorted
// by class or source). Throws sdk::ConfigError at "eval.size" when `size` is
// negative or larger than the dataset.
std::vector<int64_t> validation_indices(int64_t dataset_size, int64_t size);

}  // namespace exogym::runtime::data
