#include "exogym/runtime/data/population_sampler.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "exogym/runtime/data/label_partition.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::data {

namespace {

constexpr uint64_t kSharesStream = 0x504F50534841524EULL;  // "POPSHARN": a client's label shares
constexpr uint64_t kBatchStream = 0x504F504241544348ULL;   // "POPBATCH": a client's batch at a step

// Uniform in [0, n), without the bias of a bare `% n` (participation.cpp's).
uint64_t below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  while (true) {
    const uint64_t r = rng();
    if (r >= threshold) return r % n;
  }
}

// Uniform in [0, 1) from 53 bits.
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

PopulationSampler::PopulationSampler(const PartitionSpec& partition, int64_t dataset_size,
                                     const std::vector<int64_t>* labels, int clients, int64_t batch_size, uint64_t seed,
                                     std::shared_ptr<const ClientSlots> slots)
    : dirichlet_(partition.kind == PartitionSpec::Kind::Dirichlet),
      alpha_(partition.alpha),
      dataset_size_(dataset_size),
      clients_(clients),
      batch_size_(batch_size),
      seed_(seed),
      steps_per_epoch_(std::max<int64_t>(1, dataset_size / std::max<int64_t>(1, batch_size))),
      slots_(std::move(slots)) {
  check_shape("PopulationSampler", dataset_size, clients, batch_size);
  EXOGYM_CHECK_INTERNAL(dataset_size > 0, "a population sampler over no examples");
  EXOGYM_CHECK_INTERNAL(partition.kind == PartitionSpec::Kind::Iid || dirichlet_,
                        std::string("PopulationSampler: \"") + partition.name() + "\" is neither iid nor dirichlet");
  if (!dirichlet_) return;
  EXOGYM_CHECK_INTERNAL(labels && static_cast<int64_t>(labels->size()) == dataset_size,
                        "PopulationSampler: dirichlet without the examples' labels");
  std::map<int64_t, std::vector<int64_t>> by_label;
  for (int64_t i = 0; i < dataset_size; ++i) by_label[(*labels)[static_cast<size_t>(i)]].push_back(i);
  for (auto& [label, examples] : by_label) pools_.push_back(std::move(examples));
}

std::vector<double> PopulationSampler::label_shares(int client) const {
  if (!dirichlet_) return {};
  return dirichlet_draw(alpha_, static_cast<int>(pools_.size()),
                        sdk::derive_seed(seed_, kSharesStream, static_cast<uint64_t>(client)));
}

std::vector<int64_t> PopulationSampler::client_batch(int client, int64_t step) const {
  EXOGYM_CHECK_INTERNAL(client >= 0 && client < clients_, "client " + std::to_string(client) + " out of range");
  std::mt19937_64 rng(sdk::derive_seed(sdk::derive_seed(seed_, kBatchStream, static_cast<uint64_t>(client)),
                                       kBatchStream, static_cast<uint64_t>(step)));
  std::vector<int64_t> batch(static_cast<size_t>(batch_size_));
  if (!dirichlet_) {
    for (auto& index : batch) index = static_cast<int64_t>(below(rng, static_cast<uint64_t>(dataset_size_)));
    return batch;
  }
  std::vector<double> cumulative = label_shares(client);
  for (size_t l = 1; l < cumulative.size(); ++l) cumulative[l] += cumulative[l - 1];
  const double total = cumulative.back();
  for (auto& index : batch) {
    const double point = unit(rng) * total;
    const size_t label = std::min<size_t>(
        static_cast<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), point) - cumulative.begin()),
        pools_.size() - 1);
    const std::vector<int64_t>& pool = pools_[label];
    index = pool[static_cast<size_t>(below(rng, pool.size()))];
  }
  return batch;
}

std::vector<int64_t> PopulationSampler::batch_indices(int rank, int64_t step) const {
  return client_batch(slots_->client(rank), step);
}

std::vector<int64_t> PopulationSampler::node_examples(int rank) const {
  std::vector<int64_t> examples;
  for (int64_t step = 0; step < kDescribedBatches; ++step) {
    const std::vector<int64_t> batch = client_batch(rank, step);
    examples.insert(examples.end(), batch.begin(), batch.end());
  }
  return examples;
}

}  // namespace exogym::runtime::data
