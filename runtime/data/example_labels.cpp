#include "exogym/runtime/data/example_labels.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace {

// The batch's target as one int64 per example, or an undefined tensor.
at::Tensor per_example_target(const sdk::Batch& batch, size_t examples) {
  const auto found = batch.find("target");
  if (found == batch.end()) return {};
  const at::Tensor& target = found->second;
  if (!target.defined() || target.dim() != 1 || target.size(0) != static_cast<int64_t>(examples)) return {};
  if (!at::isIntegralType(target.scalar_type(), /*includeBool=*/false)) return {};
  return target.to(at::kCPU).to(at::kLong).contiguous();
}

}  // namespace

std::optional<std::vector<int64_t>> example_labels(const sdk::Dataset& dataset) {
  if (const auto* known = dynamic_cast<const KnownLabels*>(&dataset)) return known->all_labels();
  const int64_t n = dataset.size();
  std::vector<int64_t> labels;
  if (n == 0) return labels;
  // One example first: a sequence dataset would otherwise build a whole
  // chunk of long windows only to find that it has no labels.
  if (!per_example_target(dataset.get({0}), 1).defined()) return std::nullopt;
  labels.reserve(static_cast<size_t>(n));
  // Large enough that get()'s own cost is amortised, small enough that a
  // chunk of images stays a few megabytes.
  constexpr int64_t kChunk = 4096;
  std::vector<int64_t> indices;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    indices.resize(static_cast<size_t>(std::min(kChunk, n - begin)));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = begin + static_cast<int64_t>(i);
    const at::Tensor target = per_example_target(dataset.get(indices), indices.size());
    if (!target.defined()) {
      throw sdk::DataError("the \"target\" of examples " + std::to_string(begin) + " to " +
                           std::to_string(begin + static_cast<int64_t>(indices.size()) - 1) +
                           " is not one integer per example, unlike the examples before");
    }
    const int64_t* data = target.data_ptr<int64_t>();
    labels.insert(labels.end(), data, data + target.numel());
  }
  return labels;
}

}  // namespace exogym::runtime::data
