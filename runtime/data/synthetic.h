#pragma once
// The built-in "synthetic" dataset: a small, deterministic, learnable
// classification problem (Gaussian blobs) for tests and smoke runs.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exogym/sdk/dataset.h"
#include "exogym/sdk/options.h"

namespace exogym::runtime::data {

struct SyntheticOptions {
  int64_t num_examples = 4096;
  int64_t features = 32;
  int64_t classes = 4;
  double noise = 0.5;
  uint64_t seed = 0;
};

// x = centroid[y] + noise * N(0, 1), y uniform over the classes. The
// centroids depend on the seed only, the examples on the seed and the split,
// so "train", "test" and "val" are different samples of the same problem.
class SyntheticDataset : public sdk::Dataset {
 public:
  // Throws sdk::ConfigError (empty JSON path, for the caller to fill in) for
  // a split other than "train", "test" or "val".
  SyntheticDataset(const SyntheticOptions& options, const std::string& split);

  // The option specs of the "synthetic" dataset (its "seed" defaults to the
  // run's seed, written as null).
  static sdk::OptionSpecs option_specs();
  // Options from a JSON object validated against option_specs(); a null or
  // missing "seed" takes `default_seed`.
  static SyntheticOptions options_from_json(const nlohmann::json& options, uint64_t default_seed);

  int64_t size() const override { return targets_.size(0); }
  // {"input": [B, features] float32, "target": [B] int64}. Thread-safe.
  sdk::Batch get(const std::vector<int64_t>& indices) const override;

  const at::Tensor& inputs() const { return inputs_; }
  const at::Tensor& targets() const { return targets_; }
  const at::Tensor& centroids() const { return centroids_; }

 private:
  at::Tensor centroids_;  // [classes, features]
  at::Tensor inputs_;     // [N, features]
  at::Tensor targets_;    // [N]
};

}  // namespace exogym::runtime::data
