#pragma once
// Sampling when every node owns a fixed set of examples of its own size: the
// label partitions (label_partition.h) and per-node datasets. Each node reads
// its examples as an endless stream of epochs, independently of the others:
// node r's epoch e is a permutation of its n_r examples, and its batch at
// step t is positions [t·B, (t+1)·B) of the stream epoch 0, epoch 1, ...
// So no example is ever skipped, nodes with more data simply take more steps
// per epoch, a node with fewer than B examples repeats some within a batch,
// and a batch is a function of (node, step) alone.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "exogym/runtime/data/sampler.h"

namespace exogym::runtime::data {

class NodeSetSampler : public Sampler {
 public:
  // `examples[r]`: node r's examples (indices into the dataset it reads),
  // none of them empty. Epoch e of node r is shuffled with the generator
  // seeded with derive_seed(seed, stream, r) + e.
  NodeSetSampler(std::vector<std::vector<int64_t>> examples, int64_t batch_size, uint64_t seed);

  std::vector<int64_t> batch_indices(int rank, int64_t step) const override;
  // Steps until the node with the most examples has seen each of them once.
  int64_t steps_per_epoch() const override;
  std::vector<int64_t> node_examples(int rank) const override;

 private:
  std::shared_ptr<const std::vector<int64_t>> epoch_permutation(int rank, int64_t epoch, int64_t oldest) const;

  std::vector<std::vector<int64_t>> examples_;
  int64_t batch_size_;
  uint64_t seed_;

  // Only node r asks for rank r, with steps in order: epochs older than the
  // first one of its current batch are dropped.
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, int64_t>, std::shared_ptr<const std::vector<int64_t>>> cache_;
};

}  // namespace exogym::runtime::data
