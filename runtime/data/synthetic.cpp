#include "exogym/runtime/data/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>

#include <stdexcept>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/random.h"

namespace exogym::runtime::data {
namespace {

// derive_seed streams: the centroids, shared by the splits, and one per split.
constexpr uint64_t kCentroidStream = 0;

uint64_t split_stream(const std::string& split) {
  if (split == "train") return 1;
  if (split == "test") return 2;
  if (split == "val") return 3;
  throw sdk::ConfigError("", "synthetic has the splits \"train\", \"test\" and \"val\", got \"" + split + "\"");
}

}  // namespace

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options, const std::string& split) {
  const uint64_t stream = split_stream(split);
  EXOGYM_CHECK_INTERNAL(
      !(options.num_examples < 1 || options.features < 1 || options.classes < 1 || !(options.noise >= 0)),
      "SyntheticDataset: num_examples, features and classes must be >= 1, noise >= 0");
  at::Generator centroid_generator =
      at::make_generator<at::CPUGeneratorImpl>(sdk::derive_seed(options.seed, kCentroidStream));
  centroids_ = at::randn({options.classes, options.features}, centroid_generator, at::kFloat);

  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(sdk::derive_seed(options.seed, stream));
  targets_ = at::randint(options.classes, {options.num_examples}, generator, at::kLong);
  inputs_ = at::randn({options.num_examples, options.features}, generator, at::kFloat)
                .mul_(options.noise)
                .add_(centroids_.index_select(0, targets_));
}

sdk::OptionSpecs SyntheticDataset::option_specs() {
  const SyntheticOptions defaults;
  return {
      {"num_examples", sdk::OptionType::PositiveInteger, defaults.num_examples, "number of examples in each split"},
      {"features", sdk::OptionType::PositiveInteger, defaults.features, "input dimension"},
      {"classes", sdk::OptionType::PositiveInteger, defaults.classes, "number of classes (one Gaussian blob each)"},
      {"noise", sdk::OptionType::NonNegativeNumber, defaults.noise,
       "standard deviation of the Gaussian noise around each class centroid (centroids are N(0, 1))"},
      {"seed", sdk::OptionType::NonNegativeInteger, nullptr,
       "seed of the centroids and examples; null: the run's seed"},
  };
}

SyntheticOptions SyntheticDataset::options_from_json(const nlohmann::json& options, uint64_t default_seed) {
  SyntheticOptions result;
  const auto has = [&](const char* key) {
    return options.is_object() && options.contains(key) && !options[key].is_null();
  };
  if (has("num_examples")) result.num_examples = options["num_examples"].get<int64_t>();
  if (has("features")) result.features = options["features"].get<int64_t>();
  if (has("classes")) result.classes = options["classes"].get<int64_t>();
  if (has("noise")) result.noise = options["noise"].get<double>();
  result.seed = has("seed") ? options["seed"].get<uint64_t>() : default_seed;
  return result;
}

sdk::Batch SyntheticDataset::get(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (const int64_t index : indices) {
    EXOGYM_CHECK_INTERNAL(!(index < 0 || index >= n), "SyntheticDataset::get: index " + std::to_string(index) +
                                                          " is outside [0, " + std::to_string(n) + ")");
  }
  const at::Tensor index =
      at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())}, at::kLong);
  return {{"input", inputs_.index_select(0, index)}, {"target", targets_.index_select(0, index)}};
}

}  // namespace exogym::runtime::data
