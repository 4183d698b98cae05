#pragma once
// The data of a population of clients larger than the nodes
// (docs/simulation.md#populations-of-clients): too many clients to give
// each a set of examples of its own (a million clients over MNIST's 60,000
// examples), so each client is a distribution over the training set that
// its batches are drawn from, with replacement, computed when needed from
// the seed and the client's number alone; nothing is stored per client.
//  - iid: every client draws uniformly from the whole training set.
//  - dirichlet: client c's label shares are a draw from Dir(alpha, ...,
//    alpha) over the labels (the per-client view of Hsu, Qi and Brown,
//    2019), seeded by c; a batch draws each example's label from these
//    shares, then an example of that label uniformly.
// Node r trains the client ClientSlots says it holds at the step, so a
// batch is a function of (client, step): the same whatever node trains it,
// whatever the parallelism, the processes or a resume.
#include <cstdint>
#include <memory>
#include <vector>

#include "exogym/runtime/data/client_slots.h"
#include "exogym/runtime/data/partition.h"
#include "exogym/runtime/data/sampler.h"

namespace exogym::runtime::data {

class PopulationSampler : public Sampler {
 public:
  // `partition`: iid or dirichlet; dirichlet reads `labels` (one per
  // example). `slots`: which client each node holds.
  PopulationSampler(const PartitionSpec& partition, int64_t dataset_size, const std::vector<int64_t>* labels,
                    int clients, int64_t batch_size, uint64_t seed, std::shared_ptr<const ClientSlots> slots);

  std::vector<int64_t> batch_indices(int rank, int64_t step) const override;
  // Steps in which the nodes together would draw about the training set once.
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  // For data.csv: the examples of client `rank`'s first kDescribedBatches
  // batches (node r holds client r before the first draw).
  std::vector<int64_t> node_examples(int rank) const override;

  // Client `client`'s batch at step `step`.
  std::vector<int64_t> client_batch(int client, int64_t step) const;
  // Client `client`'s share of each label (dirichlet; empty for iid), over
  // the labels that have examples, in label order.
  std::vector<double> label_shares(int client) const;

  static constexpr int64_t kDescribedBatches = 16;

 private:
  bool dirichlet_;
  double alpha_;
  int64_t dataset_size_;
  int clients_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t steps_per_epoch_;
  std::shared_ptr<const ClientSlots> slots_;
  // dirichlet: the examples of each label that has any, in label order.
  std::vector<std::vector<int64_t>> pools_;
};

}  // namespace exogym::runtime::data
